"""Named parameter sets (``smoke``, ``quick``, ``paper``) for every study of the book, and how a page resolves them.

A study is a frozen dataclass whose fields are the notebook parameters it accepts.  Each field states, on its
line, its quick value, what the smoke and paper profiles run instead, and its check (:func:`param`):
the width paper's studies are in ``lmcbook.width_studies``, the noise paper's in ``lmcbook.noise_studies``,
the small ones below.  :func:`resolve` fills every override that is None from the profile; the study checks each
value before any compute starts.  :func:`what_ran` tells a page which value each field took, and from where.

- ``smoke``: each notebook runs in seconds; the tests use it.
- ``quick`` (the default of ``make book``): CPU only, embedded data sets.
- ``paper``: GPU, torchvision data sets, the papers' settings.

Which notebooks read which study is the book's business: see :mod:`lmcbook.parts`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

from .noise_studies import TASKS, Cell, NoiseModel, NoiseRegimeStudy, NoiseStudy
from .specs import BASE_WIDTHS, SpecError, check_lams
from .studies import (
    MAX_DRAWS,
    MAX_GRID,
    MAX_ITERATIONS,
    MAX_LAMS,
    MAX_REPLICATES,
    MAX_RUNS,
    MAX_UNITS,
    PROFILES,
    WIDTH,
    Pair,
    Study,
    check_fields,
    check_lr_floors,
    check_profile,
    check_spawn_fractions,
    default,
    param,
    profile_values,
)
from .width_studies import (
    CellStudy,
    ControlsStudy,
    DepthStudy,
    MechanismStudy,
    Recipe,
    Training,
    WidthStudy,
    deciding_widths,
)

__all__ = [
    "MAX_DRAWS", "MAX_GRID", "MAX_ITERATIONS", "MAX_LAMS", "MAX_REPLICATES", "MAX_RUNS", "MAX_UNITS", "PROFILES",
    "STUDIES", "TASKS", "Cell", "CellStudy", "ControlsStudy", "DepthStudy", "ExplorerStudy", "MechanismStudy",
    "NoiseModel", "NoiseRegimeStudy", "NoiseStudy", "Pair", "Recipe", "Study", "StudyT", "SummaryStudy",
    "TheoryStudy", "Training", "TutorialStudy", "WidthStudy", "check_fields", "check_lr_floors", "check_run_count",
    "check_spawn_fractions", "deciding_widths", "param", "profile_table", "profile_values", "resolve", "sources",
    "what_ran",
]

#: Any study class; :func:`resolve` returns an instance of the class it is given.
StudyT = TypeVar("StudyT", bound=Study)


@dataclass(frozen=True)
class TheoryStudy(Study):
    """The constructed networks of the theory section: the λ grid, then the networks' sizes and seed."""

    lams: tuple[float, ...] = param((0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0))  # the λ grid
    depth: int = param(4, lo=2)  # linear layers L of the constructed networks
    hidden: int = param(32, smoke=16, paper=256, lo=2, hi=MAX_UNITS)  # hidden units (two disjoint halves)
    in_features: int = param(16, lo=1, hi=MAX_UNITS)  # input size
    inputs: int = param(256, smoke=64, paper=1024, lo=1, hi=MAX_UNITS)  # random inputs the identities are checked on
    seed: int = param(0, lo=0)  # seed of the weights and inputs

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden % 2:
            raise SpecError(f"hidden={self.hidden} is not allowed: expected an even number (two disjoint halves)")
        object.__setattr__(self, "lams", check_lams(self.lams))


@dataclass(frozen=True)
class SummaryStudy(Study):
    """The pages that read other pages' CSVs (the landing page, the claims scoreboard): only a profile."""


@dataclass(frozen=True)
class TutorialStudy(Study):
    """The own-models tutorial: a user-defined MLP on digits, trained with a plain loop (nothing in the store)."""

    #: Hidden units of each of the tutorial network's two hidden layers (a count, not a width multiplier).
    hidden_units: int = param(256, smoke=32, paper=1024, lo=2, hi=MAX_UNITS)  # units of each hidden layer
    epochs: int = param(40, smoke=3, paper=60, lo=1)  # passes over the training split
    pair: int = param(0, lo=0, hi=MAX_REPLICATES - 1)  # the pair index p: model a is seed 2p, model b seed 2p+1


@dataclass(frozen=True)
class ExplorerStudy(Study):
    """The explorer's initial state: which pair of the width sweep, which λ and which layer (it trains nothing)."""

    dataset: str = param("digits", paper="cifar10")  # the width sweep's data set
    width: float | None = param(None, **WIDTH)  # the width multiplier shown first (None: the widest)
    pair: int = param(0, lo=0, hi=MAX_REPLICATES - 1)  # the pair index p
    lam: float = param(0.5)  # the λ shown first
    layer: int | None = param(None)  # the layer shown first (None: the last hidden layer)
    interactive: bool = param(False)  # widgets (a live kernel) instead of the static figures

    def __post_init__(self) -> None:
        super().__post_init__()
        check_lams([self.lam])


#: The studies whose profiles differ, in the order of the generated profile table.
STUDIES = (WidthStudy, ControlsStudy, MechanismStudy, DepthStudy, TheoryStudy, ExplorerStudy, TutorialStudy,
           NoiseRegimeStudy, NoiseStudy)
#: The paper profile's MLP recipe, each value with where it comes from.  The width paper (Ito et al., arXiv
#: 2510.08023, ICLR 2026) is cited where its values could be read: Table 1 ("Barrier values with/without permutation
#: (λ=1/2)") reports its MLP on MNIST at width multiplier 16, and its training uses SGD with weight decay 3e-3, "a
#: slightly stronger than normal choice", against 1e-4 in the weak-weight-decay ablation (the ablation's value is the
#: weak twin's, ``ControlsStudy.weak_weight_decay``).  Its appendix of training details (hidden layers, base width,
#: learning rate and schedule, batch size, epochs, preprocessing) could not be read where this book is built (no
#: network), so those fields keep the book's own choices, said as such; the book's pages and README say so too.
PAPER_MLP_RECIPE: dict[str, tuple[Any, str]] = {
    "dataset": ("mnist", "the paper: Table 1's MLP row is MNIST (the full 60k/10k split)"),
    "widths": ((0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), "the paper: Table 1 reports the MLP at 16×; the sweep "
               "from 0.125× is the book's"),
    "weight_decay": (3e-3, "the paper: SGD with weight decay 3e-3 (1e-4 in its weak-weight-decay ablation)"),
    "bias": (False, "the book's: the LEWC theorem (the paper's Theorem 5.3) is for bias-free networks; the "
             "experimental MLP's biases could not be read"),
    "norm": ("none", "the book's: no normalisation, as the theorem assumes"),
    "base_width": (512, "the book's: units per hidden layer at 1× (git-re-basin's MNIST MLP)"),
    "depth": (4, "the book's: 3 hidden layers, L = 4 linear layers (git-re-basin's MNIST MLP)"),
    "epochs": (60, "the book's: the paper's epochs could not be read"),
    "lr": (0.05, "the book's: peak learning rate (the quick book's), the paper's could not be read"),
    "momentum": (0.9, "the book's: SGD momentum 0.9"),
    "batch_size": (128, "the book's: the paper's batch size could not be read"),
    "warmup": (0.05, "the book's: 5% linear warm-up, then linear decay to 0"),
}
#: In the paper profile, choosing an architecture also picks its data set and recipe.
_PAPER_ARCH = {
    "mlp": {name: value for name, (value, _) in PAPER_MLP_RECIPE.items()},
    "vgg11": dict(),
    "resnet20": dict(base_width=16, widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)),
}


def _cell(v: Any) -> str:
    """Return a profile value as a short table cell (a long even grid as "a to b by d")."""
    if isinstance(v, tuple):
        steps = {round(b - a, 12) for a, b in zip(v, v[1:])}
        if len(v) > 6 and len(steps) == 1:
            return f"{v[0]:g} to {v[-1]:g} by {steps.pop():g}"
        return "[" + ", ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v) + "]"
    return "None" if v is None else (f"{v:g}" if isinstance(v, float) else str(v))


def profile_table() -> str:
    """Return a Markdown table of what the smoke and paper profiles change in each study (the quick profile is
    each field's default), generated from the studies themselves; the README and the book's *How this book is
    built* carry it between ``<!-- profile-table -->`` markers, and a test checks that they match."""
    rows = ["| study | parameter | quick | smoke | paper |", "|---|---|---|---|---|"]
    shown: dict[tuple[type, str], list[str]] = {}
    for cls in STUDIES:
        table = {p: profile_values(cls, p) for p in ("smoke", "paper")}
        changed = [f.name for f in fields(cls) if f.name in table["smoke"] or f.name in table["paper"]]
        for name in changed:
            quick = default(cls, name)
            vals = [_cell(v) for v in (quick, *(table[p].get(name, quick) for p in ("smoke", "paper")))]
            if cls is not WidthStudy and "widths" in cls.__dataclass_fields__ and shown.get((WidthStudy, name)) == vals:
                continue  # a width sweep's row as in the width study
            shown[(cls, name)] = vals
            rows.append(f"| {cls.__name__} | `{name}` | " + " | ".join(vals) + " |")
    rows.append("")
    rows.append("In the paper profile, `arch` also picks its recipe: " + "; ".join(
        f"`{arch}`: " + (", ".join(f"{k} {_cell(v)}" for k, v in vals.items()) or "the rows above")
        for arch, vals in _PAPER_ARCH.items()) + ".")
    return "\n".join(rows)


#: Where a resolved value came from (:func:`sources`): the field's quick value, the profile's, or a parameter given to
#: this execution (a papermill parameter, ``-p NAME VALUE``, that is not None).
DEFAULT, PROFILE, GIVEN = "default", "profile", "-p"


def _resolved(cls: type, profile: str, overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Return the values :func:`resolve` passes to ``cls`` (those not at their default) and where each came from."""
    check_profile(profile)
    allowed = {f.name for f in fields(cls)} - {"profile"}
    overrides = dict(overrides)
    for name, instead in getattr(cls, "not_fields", {}).items():
        if overrides.get(name) is not None:
            raise SpecError(f"{name}={overrides[name]!r} is not allowed: {cls.__name__} has no {name} ({instead})")
        overrides.pop(name, None)
    unknown = set(overrides) - allowed
    if unknown:
        raise SpecError(f"unknown parameter(s) {sorted(unknown)}: expected some of {sorted(allowed)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    values = profile_values(cls, profile)
    if issubclass(cls, (WidthStudy, MechanismStudy)) and profile == "paper":
        own = {f.name for f in fields(cls)}  # the mechanism study sweeps weight decay: it takes no weight_decay
        values.update({k: v for k, v in _PAPER_ARCH.get(given.get("arch", values.get("arch")), {}).items() if k in own})
    source = {**dict.fromkeys(values, PROFILE), **dict.fromkeys(given, GIVEN)}
    values.update(given)
    if "arch" in allowed:
        if "arch" in given and "base_width" not in given and profile != "paper":
            values["base_width"] = BASE_WIDTHS.get(given["arch"], default(cls, "base_width"))
            source["base_width"] = f"{GIVEN} arch"
        if values.get("arch", "mlp") != "mlp":
            values["depth"] = None
            source["depth"] = f"{GIVEN} arch" if "arch" in given else PROFILE
    return values, source


def resolve(cls: type[StudyT], profile: str = "quick", **overrides: Any) -> StudyT:
    """Return the study ``cls`` at ``profile``; overrides that are None keep the profile's value."""
    values, _ = _resolved(cls, profile, overrides)
    study = cls(profile=profile, **values)
    check_run_count(study.run_count(), f"{cls.__name__} at profile {profile!r}")
    return study


def sources(cls: type, profile: str, overrides: dict[str, Any]) -> dict[str, str]:
    """Return where each field of study ``cls`` takes its value from at ``profile`` with ``overrides`` (as
    :func:`resolve` would): ``"default"`` (the field's quick value), ``"profile"`` or ``"-p"`` (an override that is
    not None; ``"-p arch"``: set by the architecture given)."""
    _, source = _resolved(cls, profile, overrides)
    return {f.name: source.get(f.name, DEFAULT) for f in fields(cls) if f.name != "profile"}


def what_ran(study: Study, overrides: dict[str, Any]) -> str:
    """Return a Markdown table of what a page ran: each field of its study, the value it took and where from
    (:func:`sources`), two fields to a row."""
    src = sources(type(study), study.profile, overrides)
    cells = [(f"`{k}`", _cell(getattr(study, k)), f"**{s}**" if s.startswith(GIVEN) else s) for k, s in src.items()]
    if len(cells) % 2:
        cells.append(("", "", ""))
    half = (len(cells) + 1) // 2
    rows = [" | ".join((*left, *right)) for left, right in zip(cells[:half], cells[half:])]
    cls = type(study)
    head = (f"**What ran** (profile `{study.profile}`): each parameter of this page's study (`{cls.__name__}`, in "
            f"`{cls.__module__}`), the value it took, and where from: *default*, the quick value on the field's line "
            f"there; *profile*, the `{study.profile}` profile's; *-p*, a parameter given to this execution.\n\n")
    if not rows:
        return head + "This page's study has no parameters but its profile."
    return head + "\n".join(["| parameter | value | from | parameter | value | from |", "|---|---|---|---|---|---|",
                             *(f"| {r} |" for r in rows)])


def check_run_count(runs: int, what: str) -> None:
    """Raise SpecError naming ``what`` if it would train more than ``MAX_RUNS`` runs."""
    if runs > MAX_RUNS:
        raise SpecError(f"{what} would train {runs:,} runs: expected at most {MAX_RUNS:,}; lower seeds, "
                        "decisive_seeds or the number of values in its lists")
