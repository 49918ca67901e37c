"""The book's parts: which notebooks read which study, in what order, and in what time budget.

A part groups notebooks that share one study (:mod:`lmcbook.profiles`).  The command
side (``lmcbook execute``, ``train``, ``sweep``) and the page side (:func:`lmcbook.page.open_page`)
both find a notebook's study here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Generic

from .profiles import (
    ControlsStudy,
    DepthStudy,
    ExplorerStudy,
    MechanismStudy,
    NoiseRegimeStudy,
    NoiseStudy,
    Study,
    StudyT,
    SummaryStudy,
    TheoryStudy,
    TutorialStudy,
    WidthStudy,
    resolve,
)
from .specs import RunSpec, SpecError


@dataclass(frozen=True)
class Part(Generic[StudyT]):
    """A group of notebooks sharing one study: notebooks in execution order, and the time budget per profile.

    ``Part`` is generic in its study class: ``parts.WIDTH.study("quick")`` is typed as a
    :class:`~lmcbook.profiles.WidthStudy`.
    """

    name: str
    title: str
    notebooks: tuple[str, ...]
    #: The study class its notebooks resolve (:func:`lmcbook.profiles.resolve`).
    study_type: type[StudyT]
    budget_s: dict[str, float] = field(default_factory=dict)

    def study(self, profile: str = "quick", **overrides: Any) -> StudyT:
        """Return the validated study at ``profile``, with overrides (unknown names raise SpecError)."""
        return resolve(self.study_type, profile, **overrides)

    def resolve(self, profile: str, params: dict[str, Any]) -> StudyT:
        """Return the study for ``profile``, taking from ``params`` only the study's own fields."""
        keys = {f.name for f in fields(self.study_type)} - {"profile"}
        return resolve(self.study_type, profile, **{k: v for k, v in params.items() if k in keys})


#: The book's notebook groups, in execution order. Budgets are each profile's estimated execution time in seconds
#: (the quick book is held to 15 minutes cold on 2 cores).
WIDTH = Part("width", "Width and linear mode connectivity", ("width_accuracy", "loss_barrier_calibration"),
             WidthStudy, {"smoke": 30, "quick": 240, "paper": 7 * 24 * 3600})
PROBES = Part("probes", "Why width works: probes of the width sweep",
              ("lewc", "weak_additivity", "reciprocal_orthogonality", "neuron_overlap", "low_rank"),
              WidthStudy, {"smoke": 60, "quick": 60, "paper": 3600})
DEPTH = Part("depth", "Why width works: the depth sweep", ("lewc_depth",), DepthStudy,
             {"smoke": 20, "quick": 90, "paper": 24 * 3600})
THEORY = Part("theory", "Why width works: the theorem", ("theory_lewc",), TheoryStudy,
              {"smoke": 15, "quick": 20, "paper": 120})
NOISE_REGIME = Part("noise_regime", "How the optimizer shapes merging: where merging gains exist", ("noise_regime",),
                    NoiseRegimeStudy, {"smoke": 30, "quick": 180, "paper": 3 * 24 * 3600})
NOISE = Part("noise", "How the optimizer shapes merging", ("noise_scale", "noise_components", "task_arithmetic"),
             NoiseStudy, {"smoke": 60, "quick": 480, "paper": 7 * 24 * 3600})
CONTROLS = Part("controls", "Controls: weight decay, permutations, weight matching, REPAIR",
                ("weak_weight_decay", "random_permutation", "weight_matching", "llfc_vs_lewc"),
                ControlsStudy, {"smoke": 60, "quick": 240, "paper": 7 * 24 * 3600})
MECHANISM = Part("mechanism", "Why width works: what makes merging without permutations work (after the controls, "
                 "whose runs it reuses)", ("mechanism",), MechanismStudy,
                 {"smoke": 40, "quick": 360, "paper": 14 * 24 * 3600})
TUTORIAL = Part("tutorial", "Using lmcbook on your own models", ("own_models",), TutorialStudy,
                {"smoke": 15, "quick": 30, "paper": 600})
EXPLORE = Part("explore", "The interactive explorer (reads the width sweep)", ("explore",), ExplorerStudy,
               {"smoke": 15, "quick": 20, "paper": 60})
SUMMARY = Part("summary", "The landing page and the claims scoreboard (they read the other pages' CSVs: last)",
               ("claims", "overview"), SummaryStudy, {"smoke": 20, "quick": 20, "paper": 60})

#: Every part by name, in execution order.
PARTS: dict[str, Part[Any]] = {p.name: p for p in (WIDTH, PROBES, DEPTH, THEORY, NOISE_REGIME, NOISE, CONTROLS,
                                                   MECHANISM, TUTORIAL, EXPLORE, SUMMARY)}


def _part(name: str) -> Part[Any]:
    if name not in PARTS:
        raise SpecError(f"part={name!r} is not allowed: expected one of {', '.join(map(repr, PARTS))}")
    return PARTS[name]


def part_of(notebook: str) -> Part[Any]:
    """Return the part a notebook belongs to, or raise SpecError naming the notebooks that exist."""
    for part in PARTS.values():
        if notebook in part.notebooks:
            return part
    raise SpecError(f"notebook {notebook!r} does not exist: expected one of {', '.join(all_notebooks())}")


def all_notebooks() -> list[str]:
    """Return every notebook of the book in execution order."""
    return [nb for part in PARTS.values() for nb in part.notebooks]


def study(part: str, profile: str = "quick", **overrides: Any) -> Study:
    """Return the validated study of a part (``"width"``, ``"noise"``, ...) at ``profile``, with overrides
    (unknown names raise SpecError).  For a precise type, call the part's own :meth:`Part.study`:
    ``parts.WIDTH.study(profile)`` is a :class:`~lmcbook.profiles.WidthStudy`."""
    return _part(part).study(profile, **overrides)


def part_specs(profile: str, part: str, **overrides: Any) -> list[RunSpec]:
    """Return every run a part trains at ``profile`` (the input of ``lmcbook train`` and ``sweep``)."""
    return study(part, profile, **overrides).specs()
