"""The book's parts: which notebooks read which study, in what order, and in what time budget.

A part groups notebooks that share one study (:mod:`lmcbook.profiles`).  The command
side (``lmcbook execute``, ``train``, ``sweep``) and the page side (:func:`lmcbook.page.open_page`)
both find a notebook's study here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, overload

from .profiles import (
    ControlsStudy,
    DepthStudy,
    ExplorerStudy,
    MechanismStudy,
    NoiseStudy,
    Study,
    SummaryStudy,
    TheoryStudy,
    TutorialStudy,
    WidthStudy,
    resolve,
)
from .specs import RunSpec, SpecError


@dataclass(frozen=True)
class Part:
    """A group of notebooks sharing one study: notebooks in execution order, and the time budget per profile."""

    name: str
    title: str
    notebooks: tuple[str, ...]
    #: The study class its notebooks resolve (:func:`lmcbook.profiles.resolve`).
    study_type: type
    budget_s: dict[str, float] = field(default_factory=dict)

    def resolve(self, profile: str, params: dict[str, Any]) -> Study:
        """Return the study for ``profile``, taking from ``params`` only the study's own fields."""
        keys = {f.name for f in fields(self.study_type)} - {"profile"}
        return resolve(self.study_type, profile, **{k: v for k, v in params.items() if k in keys})


#: The book's notebook groups, in execution order. Budgets are each profile's estimated execution time in seconds
#: (the quick book is held to 15 minutes cold on 2 cores).
PARTS: dict[str, Part] = {p.name: p for p in (
    Part("width", "Width and linear mode connectivity", ("width_accuracy", "loss_barrier_calibration"),
         WidthStudy, {"smoke": 30, "quick": 240, "paper": 7 * 24 * 3600}),
    Part("probes", "Why width works: probes of the width sweep",
         ("lewc", "weak_additivity", "reciprocal_orthogonality", "neuron_overlap", "low_rank"),
         WidthStudy, {"smoke": 60, "quick": 60, "paper": 3600}),
    Part("depth", "Why width works: the depth sweep", ("lewc_depth",), DepthStudy,
         {"smoke": 20, "quick": 90, "paper": 24 * 3600}),
    Part("theory", "Why width works: the theorem", ("theory_lewc",), TheoryStudy,
         {"smoke": 15, "quick": 20, "paper": 120}),
    Part("noise", "How the optimizer shapes merging", ("noise_scale", "noise_components", "task_arithmetic"),
         NoiseStudy, {"smoke": 60, "quick": 480, "paper": 7 * 24 * 3600}),
    Part("controls", "Controls: weight decay, permutations, weight matching, REPAIR",
         ("weak_weight_decay", "random_permutation", "weight_matching", "llfc_vs_lewc"),
         ControlsStudy, {"smoke": 60, "quick": 240, "paper": 7 * 24 * 3600}),
    Part("mechanism", "Why width works: what makes merging without permutations work (after the controls, whose "
         "runs it reuses)", ("mechanism",), MechanismStudy, {"smoke": 40, "quick": 360, "paper": 14 * 24 * 3600}),
    Part("tutorial", "Using lmcbook on your own models", ("own_models",), TutorialStudy,
         {"smoke": 15, "quick": 30, "paper": 600}),
    Part("explore", "The interactive explorer (reads the width sweep)", ("explore",), ExplorerStudy,
         {"smoke": 15, "quick": 20, "paper": 60}),
    Part("summary", "The landing page and the claims scoreboard (they read the other pages' CSVs: last)",
         ("claims", "overview"), SummaryStudy, {"smoke": 20, "quick": 20, "paper": 60}),
)}


def _part(name: str) -> Part:
    if name not in PARTS:
        raise SpecError(f"part={name!r} is not allowed: expected one of {', '.join(map(repr, PARTS))}")
    return PARTS[name]


def part_of(notebook: str) -> Part:
    """Return the part a notebook belongs to, or raise SpecError naming the notebooks that exist."""
    for part in PARTS.values():
        if notebook in part.notebooks:
            return part
    raise SpecError(f"notebook {notebook!r} does not exist: expected one of {', '.join(all_notebooks())}")


def all_notebooks() -> list[str]:
    """Return every notebook of the book in execution order."""
    return [nb for part in PARTS.values() for nb in part.notebooks]


@overload
def study(part: Literal["width", "probes"], profile: str = ..., **overrides: Any) -> WidthStudy: ...
@overload
def study(part: Literal["controls"], profile: str = ..., **overrides: Any) -> ControlsStudy: ...
@overload
def study(part: Literal["mechanism"], profile: str = ..., **overrides: Any) -> MechanismStudy: ...
@overload
def study(part: Literal["depth"], profile: str = ..., **overrides: Any) -> DepthStudy: ...
@overload
def study(part: Literal["noise"], profile: str = ..., **overrides: Any) -> NoiseStudy: ...
@overload
def study(part: Literal["theory"], profile: str = ..., **overrides: Any) -> TheoryStudy: ...
@overload
def study(part: Literal["tutorial"], profile: str = ..., **overrides: Any) -> TutorialStudy: ...
@overload
def study(part: Literal["explore"], profile: str = ..., **overrides: Any) -> ExplorerStudy: ...
@overload
def study(part: Literal["summary"], profile: str = ..., **overrides: Any) -> SummaryStudy: ...
@overload
def study(part: str, profile: str = ..., **overrides: Any) -> Study: ...
def study(part: str, profile: str = "quick", **overrides: Any) -> Study:
    """Return the validated study of a part (``"width"``, ``"noise"``, ...) at ``profile``, with overrides
    (unknown names raise SpecError)."""
    return resolve(_part(part).study_type, profile, **overrides)


def part_specs(profile: str, part: str, **overrides: Any) -> list[RunSpec]:
    """Return every run a part trains at ``profile`` (the input of ``lmcbook train`` and ``sweep``)."""
    return study(part, profile, **overrides).specs()
