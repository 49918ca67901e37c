"""Every study of the book, as data: its fields, their checks, the profile values beside each field, and the parts
of the book that read it.

The module reads top to bottom: what a study is made of; the width paper's studies; the noise paper's; the small
ones and how a profile resolves them; the book's parts; the words the pages use for a study and its training
regime (the last section).  A study is a frozen dataclass.  Each field is declared
with :func:`param`, on one line: the quick value (the field's default), what the smoke and paper profiles run
instead, and the check its values must pass, with a one-line comment saying what it is::

    epochs: int = param(60, smoke=4, paper=100, lo=1)  # passes over the training split

:func:`check_fields` checks every value against its annotation and those checks (with the validators of
:mod:`lmcbook.specs`) before any compute starts.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import textwrap
import tokenize
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, Generic, TypeVar

import pandas as pd

from .data import DATASET_LABELS
from .schema import join_and
from .specs import (
    BASE_WIDTHS,
    CHILD_SEED_BASE,
    DEFAULT_LAMS,
    PRECISIONS,
    DataSpec,
    ModelSpec,
    RunSpec,
    SpecError,
    TrainSpec,
    check_bool,
    check_choice,
    check_device,
    check_float,
    check_int,
    check_lams,
    check_scheduler,
    spawn_pair,
    spawn_step,
)

PROFILES = ("smoke", "quick", "paper")
#: Caps on every count a user can set, so that a typo (``seeds 100000000``) fails at once instead of hanging:
#: pairs per cell, random permutations per pair, values in a list that multiplies runs (widths, weight decays,
#: learning rates, ...), points of a λ grid, units of a constructed network, weight matching's iterations, and
#: the runs of one study or one ``lmcbook execute`` plan.
MAX_REPLICATES, MAX_DRAWS, MAX_GRID, MAX_LAMS = 100, 1000, 32, 1001
MAX_UNITS, MAX_ITERATIONS, MAX_RUNS = 65536, 10_000, 100_000

#: The checks a field may name in :func:`param`: ``lo`` and ``hi`` (bounds of a number), ``ok`` and ``allowed`` (a
#: test of a float and the words that say what passes it), ``check`` (a function that returns the checked value).
CHECKS = ("lo", "hi", "ok", "allowed", "check")
#: Fractions in (0, 1), (0, 1] and [0, 1): the checks of a probability, a share kept, and a point in training.
FRACTION = {"ok": lambda v: 0 < v < 1, "allowed": "a fraction in (0, 1)"}
FRACTION_CLOSED = {"ok": lambda v: 0 < v <= 1, "allowed": "a fraction in (0, 1]"}
SPAWN_FRACTION = {"ok": lambda v: 0 <= v < 1, "allowed": "a fraction in [0, 1) (0: a shared initialisation, no parent)"}
LR_FLOOR = {"ok": lambda v: 0 <= v <= 1, "allowed": "a fraction in [0, 1] (0: decay to zero; 1: a constant rate)"}
POSITIVE = {"ok": lambda v: v > 0, "allowed": "a number > 0"}
WIDTH_MULTIPLIER = {"ok": lambda v: v > 0, "allowed": "a width multiplier > 0"}


def param(quick: Any, *, smoke: Any = MISSING, paper: Any = MISSING, **check: Any) -> Any:
    """Return a study field: its quick value (the default), the smoke and paper profiles' values where they differ
    (left out: the quick value), and its checks (``CHECKS``)."""
    unknown = set(check) - set(CHECKS)
    if unknown:
        raise TypeError(f"param() got unknown check(s) {sorted(unknown)}: expected some of {CHECKS}")
    values = {p: v for p, v in (("smoke", smoke), ("paper", paper)) if v is not MISSING}
    return field(default=quick, metadata={**check, "profiles": values})


def profile_values(cls: type, profile: str) -> dict[str, Any]:
    """Return what ``profile`` changes in study ``cls``, {field: value}, in field order (quick: nothing)."""
    return {f.name: f.metadata["profiles"][profile] for f in fields(cls)
            if profile in f.metadata.get("profiles", {})}


def default(cls: type, name: str) -> Any:
    """Return the quick value (the default) of field ``name`` of study ``cls``."""
    f = cls.__dataclass_fields__[name]
    return f.default if f.default is not MISSING else f.default_factory()


def check_spawn_fractions(values: tuple[float, ...]) -> None:
    """Raise SpecError unless every spawn point is a fraction in [0, 1)."""
    for f in values:
        if not SPAWN_FRACTION["ok"](f):
            raise SpecError(f"spawn_fraction={f!r} is not allowed: expected {SPAWN_FRACTION['allowed']}")


def check_lr_floors(values: tuple[float, ...]) -> None:
    """Raise SpecError unless every floor is a fraction of the peak learning rate in [0, 1]."""
    for f in values:
        if not LR_FLOOR["ok"](f):
            raise SpecError(f"lr_floor={f!r} is not allowed: expected {LR_FLOOR['allowed']}")


def positive(name: str, values: tuple, what: str = "numbers > 0") -> tuple[float, ...]:
    """Return ``values`` sorted and distinct as floats, or raise SpecError unless every one is > 0."""
    if any(v <= 0 for v in values):
        raise SpecError(f"{name}={list(values)!r} is not allowed: expected {what}")
    return tuple(sorted({float(v) for v in values}))


@dataclass(frozen=True)
class Pair:
    """Two independently trained runs (a, b) with one model spec; ``index`` numbers the pair (p = 0, 1, ...)."""

    width: float
    index: int
    a: RunSpec
    b: RunSpec

    @property
    def hidden_units(self) -> int:
        """Return the pair's channel count, round(base_width * width)."""
        return self.a.model.channels

    @property
    def depth(self) -> int | None:
        """Return the MLP depth L (None for VGG11 and ResNet20)."""
        return self.a.model.depth

    @property
    def epochs(self) -> int:
        """Return the training length in epochs."""
        return self.a.train.epochs

    @property
    def weight_decay(self) -> float:
        """Return the weight decay both runs trained with."""
        return self.a.train.weight_decay

    @property
    def init_scale(self) -> float:
        """Return the factor on both runs' initial weights (1: the default initialisation)."""
        return self.a.model.init_scale


def check_profile(name: Any) -> str:
    """Return ``name`` if it is a profile, else raise SpecError naming the profiles."""
    if name not in PROFILES:
        raise SpecError(f"profile={name!r} is not allowed: expected one of {', '.join(map(repr, PROFILES))}")
    return name


def _check_numbers(name: str, v: Any) -> tuple:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise SpecError(f"{name}={v!r} is not allowed: expected a list of numbers, e.g. [0.5, 2]")
    v = tuple(v)
    most = MAX_LAMS if name.endswith("lams") else MAX_GRID
    if len(v) > most:
        raise SpecError(f"{name}=[{v[0]!r}, ..., {v[-1]!r}] ({len(v)} values) is not allowed: expected at most "
                        f"{most} values")
    if not v or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
        raise SpecError(f"{name}={v!r} is not allowed: expected a non-empty list of numbers, e.g. [0.5, 2]")
    twice = sorted({x for x in v if v.count(x) > 1})
    if twice:  # a repeated value would train nothing new and give the page duplicated rows
        raise SpecError(f"{name}={list(v)!r} is not allowed: expected distinct values ({', '.join(map(str, twice))} "
                        "given more than once)")
    return v


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """Return (the type, whether None is allowed) of an annotation such as ``int | None``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        return next(a for a in typing.get_args(hint) if a is not type(None)), True
    return hint, False


def _check_value(f, hint: Any, v: Any) -> Any:
    lo, meta = f.metadata.get("lo"), f.metadata
    if typing.get_origin(hint) is tuple:
        return _check_numbers(f.name, v)
    if hint is bool:
        return check_bool(f.name, v)
    if hint is int:
        return check_int(f.name, v, lo=lo, hi=meta.get("hi"))
    if hint is float:
        ok = meta.get("ok", lambda x: lo is None or x >= lo)
        return check_float(f.name, v, meta.get("allowed", "a number" + (f" >= {lo}" if lo is not None else "")), ok)
    if "check" in meta:
        return meta["check"](v)
    if hint is str and not isinstance(v, str):
        raise SpecError(f"{f.name}={v!r} is not allowed: expected a string")
    return v


def check_fields(study: Any) -> None:
    """Check every field of a study against its annotation (and its ``lo`` / ``ok`` metadata), in place."""
    hints = typing.get_type_hints(type(study))
    for f in fields(study):
        hint, optional = _unwrap(hints[f.name])
        v = getattr(study, f.name)
        if v is None and optional:
            continue
        object.__setattr__(study, f.name, _check_value(f, hint, v))
    check_profile(study.profile)


@dataclass(frozen=True)
class Study:
    """What every study has: a profile, its resolved parameters, and the runs it trains (none by default).

    Each field of a study class states its quick value and what the smoke and paper profiles change
    (:func:`param`)."""

    profile: str = "quick"

    def __post_init__(self) -> None:
        check_fields(self)

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters as plain Python values (for provenance)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def specs(self) -> list[RunSpec]:
        """Return every run the study trains."""
        return []

    def run_count(self) -> int:
        """Return how many runs the study trains (an upper bound where runs coincide), without building them."""
        return len(self.specs())


# ---- The width paper's studies ----
# The width paper's studies: the width sweep and its controls, the mechanism study's cells, the depth sweep.
#
# Every field states, on its line, its quick value, what the smoke and paper profiles run instead, and its check
# (:func:`lmcbook.studies.param`).  :class:`Training` holds the fields every width-paper study shares, with the width
# sweep's values; the depth sweep states the ones it runs differently.

#: The paper profile's width multipliers (of ``base_width``): 0.125× to 16×, as the width paper's MLP and VGG-11.
PAPER_WIDTHS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: The smoke profile's λ grid of a width sweep.
SMOKE_LAMS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Training(Study):
    """What every trained study shares: data, model size and options, SGD, seeds.  The model family (``arch``,
    ``depth``) and the regularisation (``init_scale``, ``weight_decay``) are added by the studies that hold them
    fixed (:class:`Recipe`); the depth and mechanism studies sweep one of them and add only the other."""

    dataset: str = param("digits", paper="cifar10")  # the data set (lmcbook.data): 8x8 digits, embedded
    data_root: str | None = param(None)  # where torchvision data sets live (None: the embedded ones need none)
    download: bool = param(False)  # let torchvision download a missing data set into data_root
    base_width: int = param(64, paper=64)  # hidden units (MLP) or first-layer channels at width multiplier 1
    norm: str = param("none", paper="batch")  # normalisation: none, batch or layer (LEWC's theory needs none)
    bias: bool = param(False, paper=True)  # biases in every layer (LEWC's theory needs none)
    epochs: int = param(60, smoke=4, paper=100, lo=1)  # passes over the training split
    batch_size: int = param(128, lo=1)  # examples per SGD step
    lr: float = param(0.05)  # SGD's peak learning rate (linear warm-up, then linear decay to 0)
    momentum: float = param(0.9)  # SGD momentum (PyTorch's, dampening 0)
    warmup: float = param(0.05)  # share of all steps spent in the linear warm-up
    seeds: int = param(2, smoke=1, paper=3, lo=1, hi=MAX_REPLICATES)  # pairs per cell: pair p is seeds 2p and 2p+1
    device: str = param("auto", check=check_device)  # where runs train: auto, cpu, cuda, cuda:N or mps
    lams: tuple[float, ...] = param(DEFAULT_LAMS, smoke=SMOKE_LAMS)  # the λ grid: 21 points in [0, 1]
    scheduler: str | None = param(None)  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
    precision: str = param("fp32", ok=lambda v: v in PRECISIONS,
                           allowed=f"one of {PRECISIONS}")  # fp32, or bf16 autocast (part of each run's spec)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheduler(self.scheduler)
        object.__setattr__(self, "lams", check_lams(self.lams))

    def pairs(self) -> list[Pair]:
        """Return every pair of the study."""
        raise NotImplementedError

    def specs(self) -> list[RunSpec]:
        """Return every run of the study."""
        return [s for p in self.pairs() for s in (p.a, p.b)]

    def training(self) -> dict[str, Any]:
        """Return this study's :class:`Training` fields by name (to build the :class:`Recipe` of one cell)."""
        return {f.name: getattr(self, f.name) for f in fields(Training)}


@dataclass(frozen=True)
class Recipe(Training):
    """One training recipe: the shared fields with a model family and a regularisation."""

    arch: str = param("mlp", paper="vgg11")  # mlp, vgg11 or resnet20 (in the paper profile it picks its recipe)
    depth: int | None = param(4)  # linear layers L of the MLP (None for VGG11 and ResNet20)
    init_scale: float = param(1.0, **POSITIVE)  # factor on the initial weights (1: PyTorch's initialisation)
    weight_decay: float = param(3e-3, lo=0)  # SGD's weight decay (L2), the width paper's 3e-3

    def spec(self, width: float, seed: int) -> RunSpec:
        """Return the RunSpec of one model (init and data seed ``seed``)."""
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root, download=self.download),
            model=ModelSpec(self.arch, width, self.base_width, self.depth if self.arch == "mlp" else None,
                            self.norm, self.bias, self.init_scale),
            train=TrainSpec(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum,
                            weight_decay=self.weight_decay, warmup=self.warmup, seed=seed,
                            precision=self.precision),
        )

    def pair(self, width: float, p: int) -> Pair:
        """Return pair number ``p`` at ``width``: seeds 2p and 2p+1."""
        return Pair(width, p, self.spec(width, 2 * p), self.spec(width, 2 * p + 1))

    @property
    def layers(self) -> int:
        """Return the number L of linear/conv layers on the main path (MLP depth, 9 for VGG11, 20 for ResNet20)."""
        return {"mlp": self.depth, "vgg11": 9, "resnet20": 20}[self.arch]


def _check_width_depth(study: Any) -> None:
    """Raise SpecError unless a width sweep's MLP has a hidden layer (depth >= 2): one linear layer has no hidden
    units, so every width would be the same model under another label."""
    if study.arch == "mlp" and study.depth is not None and study.depth < 2:
        raise SpecError(f"depth={study.depth!r} is not allowed for {type(study).__name__} (a width sweep): expected "
                        "an integer >= 2, the number of linear layers of an MLP with hidden units to widen")


def deciding_widths(widths: tuple[float, ...]) -> tuple[float, ...]:
    """Return the widths of a width sweep whose cells decide a width row: the widest (most rows), the second widest
    (W1's last step of width) and the narrowest (W9 compares it with the widest)."""
    ws = sorted(widths)
    return tuple(sorted({ws[0], *ws[-2:]}))


@dataclass(frozen=True)
class WidthStudy(Recipe):
    """The width sweep: pairs of independently trained models at each width multiplier."""

    widths: tuple[float, ...] = param((0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), smoke=(0.25, 1.0),
                                      paper=PAPER_WIDTHS)  # multipliers of base_width: 16 to 1024 hidden units
    #: Pairs at the widths where the width rows read intervals over pairs (``deciding_widths()``; ``seeds`` at
    #: the others).
    decisive_seeds: int = param(5, smoke=1, lo=1, hi=MAX_REPLICATES)  # pairs where the width rows decide

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_width_depth(self)
        for w in self.widths:  # validates every field of every spec
            self.spec(w, 0)

    def deciding_widths(self) -> tuple[float, ...]:
        """Return the widths whose cells decide a width row (:func:`deciding_widths`)."""
        return deciding_widths(self.widths)

    def pairs_at(self, width: float) -> int:
        """Return the number of pairs trained at ``width``: ``decisive_seeds`` at a decisive width, else ``seeds``."""
        decisive = any(abs(width - w) < 1e-12 for w in self.deciding_widths())
        return max(self.seeds, self.decisive_seeds) if decisive else self.seeds

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, widths outermost."""
        return [self.pair(w, p) for w in self.widths for p in range(self.pairs_at(w))]

    def run_count(self) -> int:
        """Return how many runs the sweep trains."""
        return 2 * sum(self.pairs_at(w) for w in self.widths)


@dataclass(frozen=True)
class ControlsStudy(WidthStudy):
    """The width sweep plus its controls: a weak-weight-decay twin, random permutations, weight matching."""

    weak_weight_decay: float = param(1e-4, lo=0)  # the weak-weight-decay twin's weight decay
    draws: int = param(5, smoke=2, lo=1, hi=MAX_DRAWS)  # random permutations drawn per pair
    match_iterations: int = param(100, smoke=20, lo=1, hi=MAX_ITERATIONS)  # weight matching's iteration cap

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.weak_weight_decay < self.weight_decay:
            raise SpecError(f"weak_weight_decay={self.weak_weight_decay:g} is not allowed with weight_decay="
                            f"{self.weight_decay:g}: expected weak_weight_decay < weight_decay (the control is the "
                            "same sweep at a weaker decay)")

    def weak(self) -> WidthStudy:
        """Return the same sweep (a WidthStudy: the controls' own fields do not apply to it) trained with the weak
        weight decay."""
        same = {f.name: getattr(self, f.name) for f in fields(WidthStudy)}
        return WidthStudy(**{**same, "weight_decay": self.weak_weight_decay})

    def specs(self) -> list[RunSpec]:
        """Return every run: the sweep at weight_decay and at weak_weight_decay."""
        return WidthStudy.specs(self) + WidthStudy.specs(self.weak())

    def run_count(self) -> int:
        """Return how many runs the sweep and its weak twin train."""
        return 2 * WidthStudy.run_count(self)


@dataclass(frozen=True)
class CellStudy(WidthStudy):
    """One cell of the mechanism study: a width sweep at one training length, weight decay and initialisation
    scale, with ``decisive_seeds`` pairs (instead of ``seeds``) at the widths in ``decisive_widths``."""

    decisive_widths: tuple[float, ...] | None = param(None)  # the widths with decisive_seeds pairs
    match_iterations: int = param(100, lo=1, hi=MAX_ITERATIONS)  # weight matching's iteration cap

    def pairs_at(self, width: float) -> int:
        """Return the number of pairs trained at ``width``: ``decisive_seeds`` at a decisive width, else ``seeds``."""
        decisive = any(abs(width - w) < 1e-12 for w in self.decisive_widths or ())
        return max(self.seeds, self.decisive_seeds) if decisive else self.seeds

    def pairs(self) -> list[Pair]:
        """Return every pair of the cell, widths outermost."""
        return [self.pair(w, p) for w in self.widths for p in range(self.pairs_at(w))]


@dataclass(frozen=True)
class MechanismStudy(Training):
    """What makes merging without permutations work: the width sweep in cells of three arms.

    - the *decay arm*: every weight decay of ``weight_decays`` at ``epochs`` (the cheap route to a large
      decay integral D), at every width for ``wide_decays`` and up to ``long_max_width`` for the others;
    - the *length arm*: every length of ``regimes`` at every weight decay of ``regime_weight_decays``, at the widths
      up to ``long_max_width`` (the time budget's cut: the decay arm reaches large D at every width far more
      cheaply);
    - the *small-initialisation arm*: the initial weights multiplied by each factor of ``init_scales``, at the
      weakest weight decay and ``epochs``.

    Cells that coincide (the length arm at ``epochs``, say) are one cell.  Every cell has ``seeds`` pairs per
    width, and ``decisive_seeds`` where a verdict of :mod:`lmcbook.claims` is read: the widest width at the
    weakest and strongest weight decay, at the width pages' own weight decay and their weak twin's (whose runs
    they share: the narrowest and the two widest widths), in the small-initialisation arm, the longest length's
    two widest widths at every weight decay of the length arm (the long W1 and W7), the widest width all lengths
    share in the smallest-D cell (R1 and R2), the two widest at the strongest (M3 compares them), and the length
    arm's widest width in every pair of cells of equal D reached by length and by weight decay (M6).
    It has no ``weight_decay`` or ``init_scale``: ``weight_decays`` and ``init_scales`` sweep them; each cell is a
    :class:`CellStudy` built from this study's fields.
    """

    #: Parameters a width page has and this study does not, with what sweeps them instead.
    not_fields = {"weight_decay": "it sweeps weight_decays", "init_scale": "it sweeps init_scales"}

    arch: str = param("mlp", paper="vgg11")  # mlp, vgg11 or resnet20 (in the paper profile it picks its recipe)
    depth: int | None = param(4)  # linear layers L of the MLP (None for VGG11 and ResNet20)
    widths: tuple[float, ...] = param((0.25, 0.5, 1.0, 4.0, 16.0), smoke=(0.25, 1.0),
                                      paper=PAPER_WIDTHS)  # the width study's (16 to 1024 units): runs reused
    weight_decays: tuple[float, ...] = param((1e-4, 3e-3, 1e-2, 3e-2), smoke=(3e-3, 6e-3),
                                             paper=(1e-4, 3e-3, 9e-3, 3e-2))  # the decay arm
    #: The decay arm's weight decays trained at every width; the others stop at ``long_max_width``, like the length
    #: arm (the time budget's cut).  It must hold the weakest and the strongest, whose cells decide verdicts.
    #: None: those two and the width study's own weight decay, whose runs the width pages train anyway.
    wide_decays: tuple[float, ...] | None = param(None)  # the decay arm's weight decays at every width
    regimes: tuple[int, ...] | None = param((60, 200, 600), smoke=(4, 8),
                                            paper=(100, 300, 1000))  # the length arm's epochs (None: no arm)
    regime_weight_decays: tuple[float, ...] = param((1e-4, 3e-3), smoke=(3e-3, 6e-3))  # the length arm's
    long_max_width: float | None = param(1.0, smoke=None, ok=lambda v: v > 0,
                                         allowed="a width multiplier > 0, or None")  # the length arm's widest
    init_scales: tuple[float, ...] | None = param((0.25,))  # the small-initialisation arm's factors (None: no arm)
    decisive_seeds: int = param(5, smoke=2, lo=1, hi=MAX_REPLICATES)  # pairs where a verdict is read
    match_iterations: int = param(100, lo=1, hi=MAX_ITERATIONS)  # weight matching's iteration cap
    show_references: bool = param(True)  # show the committed reference runs (results/) beside this run's cells

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_width_depth(self)
        if any(d < 0 for d in self.weight_decays + self.regime_weight_decays):
            raise SpecError(f"weight_decays={list(self.weight_decays)!r} and regime_weight_decays="
                            f"{list(self.regime_weight_decays)!r} are not allowed: expected numbers >= 0")
        object.__setattr__(self, "weight_decays", tuple(sorted({float(d) for d in self.weight_decays})))
        if len(self.weight_decays) < 2:
            raise SpecError(f"weight_decays={list(self.weight_decays)!r} is not allowed: expected at least two "
                            "different weight decays (the decay arm)")
        object.__setattr__(self, "regime_weight_decays", tuple(sorted({float(d) for d in self.regime_weight_decays})))
        regimes = self.regimes or ()
        if any(isinstance(e, float) and not e.is_integer() or e < 1 for e in regimes):
            raise SpecError(f"regimes={list(regimes)!r} is not allowed: expected training lengths in epochs "
                            "(integers >= 1), or None for no length arm")
        object.__setattr__(self, "regimes", tuple(sorted({int(e) for e in regimes})) or None)
        object.__setattr__(self, "widths", tuple(sorted({float(w) for w in self.widths})))
        if self.init_scales is not None:
            object.__setattr__(self, "init_scales", positive("init_scales", self.init_scales))
        free = {self.weight_decays[0], self.weight_decays[-1]} | ({WidthStudy.weight_decay} & set(self.weight_decays))
        wide = tuple(sorted(free if self.wide_decays is None else {float(d) for d in self.wide_decays}))
        if not set(wide) <= set(self.weight_decays) or {self.weight_decays[0], self.weight_decays[-1]} - set(wide):
            raise SpecError(f"wide_decays={list(wide)!r} is not allowed: expected weight decays of weight_decays="
                            f"{list(self.weight_decays)!r}, including the weakest and the strongest")
        object.__setattr__(self, "wide_decays", wide)
        if self.regimes and not self.widths_at(self.regimes[-1]):
            raise SpecError(f"long_max_width={self.long_max_width!r} is not allowed: it cuts every width of "
                            f"{list(self.widths)} at the longer lengths; expected a multiplier >= {min(self.widths)}")
        for cell in self.cells():  # validates every spec
            cell.spec(cell.widths[0], 0)

    def narrow_widths(self) -> tuple[float, ...]:
        """Return the widths up to ``long_max_width`` (every width if it is None)."""
        return tuple(w for w in self.widths if self.long_max_width is None or w <= self.long_max_width)

    def widths_at(self, epochs: int) -> tuple[float, ...]:
        """Return the widths the length arm trains at ``epochs``: all at the decay arm's length, those up to
        long_max_width at the other lengths."""
        return self.widths if epochs == self.epochs else self.narrow_widths()

    def cut_widths(self) -> tuple[float, ...]:
        """Return the widths that only the decay arm's ``wide_decays`` and the small-initialisation arm train."""
        return tuple(w for w in self.widths if w not in self.narrow_widths())

    def equal_d_couples(self) -> list[tuple[tuple[int, float], tuple[int, float]]]:
        """Return the pairs of cells, ((length, weight decay) of the length arm, (epochs, weight decay) of the decay
        arm), whose products weight decay × length agree: equal D reached by length and by weight decay."""
        out = []
        for e in self.regimes or ():
            for wd in self.regime_weight_decays:
                if e == self.epochs:
                    continue
                for wd2 in self.weight_decays:
                    if abs(wd2 * self.epochs - wd * e) <= 1e-9 * max(wd * e, 1e-12):
                        out.append(((e, wd), (self.epochs, wd2)))
        return out

    def _decisive(self) -> dict[tuple[int, float, float], set[float]]:
        wide = self.widths[-2:]
        lo, hi = self.weight_decays[0], self.weight_decays[-1]
        out: dict[tuple[int, float, float], set[float]] = {}
        out.setdefault((self.epochs, lo, 1.0), set()).add(wide[-1])
        out.setdefault((self.epochs, hi, 1.0), set()).update(wide)
        # the width pages' own cell and their weak-weight-decay twin's share their runs: the same pairs where the
        # width rows decide (WidthStudy.deciding_widths on these widths)
        shared = deciding_widths(self.widths)
        for wd in {WidthStudy.weight_decay, ControlsStudy.weak_weight_decay} & set(self.wide_decays):
            out.setdefault((self.epochs, wd, 1.0), set()).update(shared)
        for s in self.init_scales or ():
            out.setdefault((self.epochs, lo, s), set()).add(wide[-1])
        if self.regimes:
            longest = max(self.regimes)
            common = max(self.widths_at(longest))
            # the long rows W1 and W7 read the two widest widths of the longest length (W6 (update)'s trend over its
            # 3 widths cannot decide, so its narrowest keeps `seeds` pairs: the time budget's cut)
            for wd in self.regime_weight_decays:
                out.setdefault((longest, wd, 1.0), set()).update(sorted(self.widths_at(longest))[-2:])
            # R1 and R2 compare the smallest-D cell with the largest-D ones (M6's couples) at the common width
            out.setdefault((self.epochs, lo, 1.0), set()).add(common)
            for (e, wd), (e2, wd2) in self.equal_d_couples():
                out.setdefault((e, wd, 1.0), set()).add(common)
                out.setdefault((e2, wd2, 1.0), set()).add(common)
        return out

    def cells(self) -> list[CellStudy]:
        """Return every cell (decay arm, length arm, small-initialisation arm), coinciding cells merged, ordered by
        (init_scale, epochs, weight_decay)."""
        widths: dict[tuple[int, float, float], set[float]] = {}
        for wd in self.weight_decays:
            kept = self.widths if wd in self.wide_decays else self.narrow_widths()
            widths.setdefault((self.epochs, wd, 1.0), set()).update(kept)
        for e in self.regimes or ():
            for wd in self.regime_weight_decays:
                widths.setdefault((e, wd, 1.0), set()).update(self.widths_at(e))
        for s in self.init_scales or ():
            widths.setdefault((self.epochs, self.weight_decays[0], s), set()).update(self.widths)
        decisive = self._decisive()
        keep = {**self.training(), "arch": self.arch, "depth": self.depth}
        return [CellStudy(**{**keep, "epochs": e, "weight_decay": wd, "init_scale": s, "widths": tuple(sorted(ws)),
                             "decisive_widths": tuple(sorted(decisive.get((e, wd, s), ()))) or None,
                             "decisive_seeds": self.decisive_seeds, "match_iterations": self.match_iterations})
                for (e, wd, s), ws in sorted(widths.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1]))]

    def pairs(self) -> list[Pair]:
        """Return every pair of every cell."""
        return [p for c in self.cells() for p in c.pairs()]

    def run_count(self) -> int:
        """Return how many runs the cells train."""
        return sum(c.run_count() for c in self.cells())


@dataclass(frozen=True)
class DepthStudy(Training):
    """The depth sweep: bias-free MLPs of L = 2..6 linear layers at one width.  It has no ``arch`` or ``depth``:
    it trains MLPs and sweeps ``depths``, each depth a :class:`Recipe` built from this study's fields.  Its data,
    length, λ grid and pairs differ from the width sweep's; so do its paper values (no normalisation, no biases)."""

    #: Parameters a width page has and this study does not, and why.
    not_fields = {"depth": "it sweeps depths", "arch": "it trains MLPs only"}

    dataset: str = param("digits", paper="mnist")  # the data set (lmcbook.data): 8x8 digits, embedded
    base_width: int = param(64, paper=512)  # hidden units at width multiplier 1
    norm: str = param("none")  # no normalisation: LEWC's λ^l scale holds for bare MLPs
    bias: bool = param(False)  # no biases: LEWC's λ^l scale holds for bare MLPs
    epochs: int = param(60, smoke=4, paper=60, lo=1)  # passes over the training split
    seeds: int = param(1, paper=5, lo=1, hi=MAX_REPLICATES)  # pairs per depth (W10 reads 5 in the paper profile)
    lams: tuple[float, ...] = param(DEFAULT_LAMS, smoke=(0.0, 0.5, 1.0))  # the λ grid: 21 points in [0, 1]
    init_scale: float = param(1.0, **POSITIVE)  # factor on the initial weights (1: PyTorch's initialisation)
    weight_decay: float = param(3e-3, lo=0)  # SGD's weight decay (L2), as the width sweep's
    width: float = param(8.0, smoke=0.25, paper=2.0, **WIDTH_MULTIPLIER)  # multiplier of base_width: 512 hidden units
    depths: tuple[int, ...] = param((2, 3, 4, 5, 6), smoke=(2, 3))  # the linear layers L of each MLP

    def __post_init__(self) -> None:
        super().__post_init__()
        if any(not float(d).is_integer() or d < 2 for d in self.depths):
            raise SpecError(f"depths={list(self.depths)!r} is not allowed: expected integers >= 2")
        object.__setattr__(self, "depths", tuple(int(d) for d in self.depths))
        for d in self.depths:
            self.spec(self.width, 0, d)

    def recipe(self, depth: int) -> Recipe:
        """Return the recipe of one depth: an MLP of ``depth`` linear layers with this study's fields."""
        return Recipe(**self.training(), arch="mlp", depth=depth, init_scale=self.init_scale,
                      weight_decay=self.weight_decay)

    def spec(self, width: float, seed: int, depth: int) -> RunSpec:
        """Return the RunSpec of one model at ``depth``."""
        return self.recipe(depth).spec(width, seed)

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, depths outermost."""
        return [self.recipe(d).pair(self.width, p) for d in self.depths for p in range(self.seeds)]

    def run_count(self) -> int:
        """Return how many runs the sweep trains."""
        return 2 * self.seeds * len(self.depths)


# ---- The noise paper's studies ----
# The noise paper's studies: spawn-and-merge pairs over the optimizer's settings, and the regime map.
#
# Every field states, on its line, its quick value, what the smoke and paper profiles run instead, and its check
# (:func:`lmcbook.studies.param`).

#: How long the grid's runs are: "steps" (fixed steps whatever B) or "epochs" (equal examples seen).
PROTOCOLS = ("steps", "epochs")
#: The tasks of the task-arithmetic study: input transforms (``DataSpec.transform``) of the noise study's data.
TASKS = ("reverse", "negate")


@dataclass(frozen=True)
class Cell:
    """One optimizer setting of the noise study, and how its two models start."""

    lr: float
    batch_size: int
    momentum: float
    weight_decay: float
    norm: str = "none"
    augment: bool = False
    #: Where the children are spawned, as a fraction of training; 0: a shared initialisation (no parent), the two
    #: models differing only in their batch order (and augmentation draws).
    spawn_fraction: float = 0.5
    #: Where the schedule's linear decay ends, as a fraction of the peak: 0 decays to zero (the book's first protocol),
    #: 0.2 keeps a fifth of the peak to the end, 1 is a constant rate (after the warm-up).
    lr_floor: float = 0.0
    #: The control: two independently initialised models (``spawn_fraction`` is then 0 and means nothing).
    independent: bool = False
    #: Annealed children: the same parents as the cell without this flag, whose children's rate decays linearly from
    #: its value at the spawn to zero at the end (``TrainSpec.anneal_from``), instead of following the schedule.
    anneal: bool = False

    def train_fields(self) -> dict[str, Any]:
        """Return the TrainSpec fields of this cell's schedule: a constant rate, or a linear decay to the floor."""
        return {"schedule": "constant"} if self.lr_floor == 1 else {"lr_floor": self.lr_floor}


@dataclass(frozen=True)
class NoiseModel(Study):
    """What the two noise studies share: the data set and the MLP every run trains."""

    dataset: str = param("mnist1d", smoke="digits", paper="cifar10")  # MNIST-1D: generated offline, 10 classes
    data_root: str | None = param(None)  # where torchvision data sets live (None: the embedded ones need none)
    download: bool = param(False)  # let torchvision download a missing data set into data_root
    base_width: int = param(64, paper=64)  # hidden units at width multiplier 1
    width: float = param(2.0, smoke=0.5, paper=4.0)  # multiplier of base_width: 128 hidden units
    depth: int = param(4, lo=1)  # linear layers L of the MLP
    bias: bool = param(False)  # biases in every layer


@dataclass(frozen=True)
class NoiseStudy(NoiseModel):
    """The optimizer-noise study: spawn-and-merge over learning rate, batch size, momentum, weight decay,
    augmentation and spawn point, plus the learning-rate-pair matrix and task arithmetic."""

    #: Every run takes this many steps whatever its batch size (the paper's fixed-steps protocol), unless its cell
    #: misses the convergence rule and ``max_steps`` lets it train longer.
    steps: int = param(2000, smoke=60, paper=20000, lo=1)  # SGD steps of every run
    #: The step cap of the convergence rule: a cell whose children miss the rule (lmcbook.claims) at ``steps``
    #: is trained again, with doubled steps, until they meet it or the next length would pass this cap (None:
    #: ``steps``, no second length; the quick profile's budget).
    max_steps: int | None = param(None)  # the convergence rule's step cap (None: no second length)
    warmup: float = param(0.05)  # share of all steps spent in the linear warm-up
    lrs: tuple[float, ...] = param((0.01, 0.02, 0.05, 0.1, 0.2), smoke=(0.02, 0.05, 0.1))  # the grid's peak rates η
    batch_sizes: tuple[int, ...] = param((32, 64, 128, 256), smoke=(32, 128))  # the grid's batch sizes B
    #: The grid's effective noise scales S instead of ``lrs``: at each batch size B, η = S·B·(1−μ), so the grid
    #: samples S × B (the finer grid of issue 49 between the best cell and the first unstable one).
    noise_scales: tuple[float, ...] | None = param(None)  # S values of the grid (None: the lrs × batch_sizes grid)
    #: "steps": every grid run takes ``steps`` steps whatever its batch size (the paper's protocol, and the book's);
    #: "epochs": each takes steps × row_batch_size / B, so every run sees as many examples (the linear scaling
    #: rule's protocol).  The component sweeps run at row_batch_size, the same either way.
    protocol: str = param("steps", check=lambda v: check_choice("protocol", v, PROTOCOLS))  # the grid's length rule
    momentum: float = param(0.9)  # SGD momentum μ (PyTorch's, dampening 0)
    weight_decay: float = param(5e-4)  # SGD's weight decay (L2)
    spawn_fraction: float = param(0.5, **SPAWN_FRACTION)  # where the grid spawns its children (share of training)
    #: Where every run's learning rate ends, as a fraction of its peak (0: decay to zero; 1: constant).  The quick
    #: default, a constant rate with children spawned at 50%, is where the regime map (noise_regime, MNIST-1D) found
    #: the most learning rates whose merging gain lies above zero; the book's first protocol was lr_floor=0.
    lr_floor: float = param(1.0, **LR_FLOOR)  # where the rate ends, as a share of its peak (1: constant)
    #: Train the grid and the component sweeps with augmentation (random shifts); the augmentation sweep compares
    #: both whatever this says.
    augment: bool = param(False)  # random shifts in the grid and the component sweeps
    row_batch_size: int = param(128, lo=1)  # the component sweeps' batch size
    momenta: tuple[float, ...] = param((0.0, 0.5, 0.9), smoke=(0.0, 0.9))  # the momentum sweep
    component_lrs: tuple[float, ...] = param((0.02, 0.05, 0.1, 0.2), smoke=(0.02, 0.05, 0.1))  # its rates
    weight_decays: tuple[float, ...] = param((0.0, 5e-4, 5e-3), smoke=(0.0, 5e-3))  # the weight-decay sweep
    component_lr: float = param(0.05)  # the weight-decay sweep's and task arithmetic's peak rate
    pair_lrs: tuple[float, ...] = param((0.01, 0.03, 0.1, 0.3), smoke=(0.02, 0.1))  # the learning-rate-pair matrix
    finetune_steps: int = param(500, smoke=20, lo=1)  # task arithmetic's fine-tuning steps
    finetune_lrs: tuple[float, ...] = param((0.01, 0.03, 0.1), smoke=(0.05,))  # task arithmetic's fine-tuning rates
    alphas: tuple[float, ...] = param((0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5),
                                      smoke=(0.0, 0.5, 1.0))  # task arithmetic's scales of the task vectors
    ties_keep: float = param(0.2, **FRACTION_CLOSED)  # TIES merging's share of each task vector kept
    #: Spawn-and-merge pairs per cell (each from its own parent) of the component sweeps and task arithmetic.
    seeds: int = param(2, smoke=1, paper=10, lo=1, hi=MAX_REPLICATES)  # pairs per cell of the other sweeps
    #: Pairs per cell of the η × B grid (None: ``seeds``); N2 reads an interval over 5, N1 5 on each half.
    grid_seeds: int | None = param(5, smoke=1, paper=10, lo=1, hi=MAX_REPLICATES)  # pairs per cell of the grid
    device: str = param("auto", check=check_device)  # where runs train: auto, cpu, cuda, cuda:N or mps
    scheduler: str | None = param(None)  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
    show_references: bool = param(True)  # show the committed reference runs (results/) beside this run's cells

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheduler(self.scheduler)
        if self.noise_scales is not None and (not self.noise_scales or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in self.noise_scales)):
            raise SpecError(f"noise_scales={self.noise_scales!r} is not allowed: expected a list of numbers > 0 "
                            "(effective noise scales S), or None")
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int)
                                           or self.max_steps < self.steps):
            raise SpecError(f"max_steps={self.max_steps!r} is not allowed: expected an integer >= steps "
                            f"({self.steps}), or None")
        for cell in self.grid_cells() + self.component_cells():  # validates every spec
            self.spec(cell, 0)
        self.spec(self.grid_cells()[0], 0).with_train(steps=self.finetune_steps)

    @property
    def grid_pairs(self) -> int:
        """Return the pairs per cell of the η × B grid: ``grid_seeds``, or ``seeds`` when it is None."""
        return self.grid_seeds or self.seeds

    def lengths(self) -> tuple[int, ...]:
        """Return the training lengths the convergence rule may try, in order: ``steps``, then doubled while at
        most ``max_steps``."""
        out = [self.steps]
        while self.max_steps is not None and 2 * out[-1] <= self.max_steps:
            out.append(2 * out[-1])
        return tuple(out)

    def spec(self, cell: Cell, seed: int, steps: int | None = None, **train) -> RunSpec:
        """Return the full run of one cell (init and data seed ``seed``), ``steps`` long (default: the study's; under
        the "epochs" protocol scaled by row_batch_size / B); spawning cuts it at the cell's fraction."""
        steps = steps or self.steps
        if self.protocol == "epochs":
            steps = max(1, round(steps * self.row_batch_size / cell.batch_size))
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root, augment=cell.augment, download=self.download),
            model=ModelSpec("mlp", self.width, self.base_width, self.depth, cell.norm, self.bias),
            train=TrainSpec(**{"steps": steps, "batch_size": cell.batch_size, "lr": cell.lr,
                               "momentum": cell.momentum, "weight_decay": cell.weight_decay, "warmup": self.warmup,
                               "seed": seed, **cell.train_fields(), **train}),
        )

    def cell(self, lr: float, batch_size: int | None = None, **kw) -> Cell:
        """Return a cell with this study's defaults for everything not given."""
        args = dict(lr=lr, batch_size=batch_size or self.row_batch_size, momentum=self.momentum,
                    weight_decay=self.weight_decay, spawn_fraction=self.spawn_fraction, lr_floor=self.lr_floor,
                    augment=self.augment)
        args.update(kw)
        return Cell(**args)

    def grid_cells(self) -> list[Cell]:
        """Return the η × B grid at the grid's spawn point, or (``noise_scales``) the S × B grid, each η
        S·B·(1−μ) to 10 significant digits (so that a cell the η × B grid has is the same cell)."""
        if self.noise_scales is not None:
            return [self.cell(float(f"{s * b * (1 - self.momentum):.10g}"), b) for b in self.batch_sizes
                    for s in self.noise_scales]
        return [self.cell(lr, b) for b in self.batch_sizes for lr in self.lrs]

    def momentum_cells(self) -> list[Cell]:
        """Return the momentum sweep at ``row_batch_size``."""
        return [self.cell(lr, momentum=m) for m in self.momenta for lr in self.component_lrs]

    def weight_decay_cells(self) -> list[Cell]:
        """Return the weight-decay sweep, without normalisation and with LayerNorm."""
        return [self.cell(self.component_lr, weight_decay=wd, norm=n) for n in ("none", "layer")
                for wd in self.weight_decays]

    def augment_cells(self) -> list[Cell]:
        """Return the augmentation sweep: off and on, at ``component_lrs``."""
        return [self.cell(lr, augment=a) for a in (False, True) for lr in self.component_lrs]

    def component_cells(self) -> list[Cell]:
        """Return every cell of the components notebook."""
        return self.momentum_cells() + self.weight_decay_cells() + self.augment_cells()

    def children(self, cell: Cell, pair: int, steps: int | None = None,
                 **train_changes: Any) -> tuple[RunSpec, RunSpec]:
        """Return the two models of pair ``pair`` in ``cell``, ``steps`` long (default: the study's): children spawned
        at the cell's fraction of the run; at fraction 0, two runs from one initialisation (seed ``pair``) with data
        seeds 1000 + 2·pair and + 1; for an independent cell, runs from seeds 2·pair and 2·pair + 1."""
        if cell.independent:
            return (self.spec(cell, 2 * pair, steps, **train_changes),
                    self.spec(cell, 2 * pair + 1, steps, **train_changes))
        if cell.spawn_fraction == 0:
            return tuple(self.spec(cell, pair, steps, data_seed=CHILD_SEED_BASE + 2 * pair + i, **train_changes)
                         for i in (0, 1))
        full = self.spec(cell, pair, steps)
        k = spawn_step(full, cell.spawn_fraction)
        return spawn_pair(full, k, pair, **({"anneal_from": k} if cell.anneal else {}), **train_changes)

    def children_that_took(self, cell: Cell, pair: int, train_steps: int) -> tuple[RunSpec, RunSpec]:
        """Return the children of pair ``pair`` in ``cell`` whose runs took ``train_steps`` steps: a frame row's
        ``train_steps``, which under the "epochs" protocol is the length scaled by row_batch_size / B (so it is
        not a length to pass to :meth:`children`)."""
        took = {}
        for n in self.lengths():
            kids = self.children(cell, pair, n)
            took[kids[0].train.steps] = kids
        if train_steps not in took:
            raise SpecError(f"train_steps={train_steps} is not allowed: the runs of cell (η {cell.lr:g}, B "
                            f"{cell.batch_size}) take one of {sorted(took)} steps")
        return took[train_steps]

    def task_specs(self) -> tuple[list[RunSpec], dict[tuple[int, float, str], RunSpec]]:
        """Return the pretraining runs and, per (pair, fine-tuning lr, task), the fine-tuning runs of task
        arithmetic: a fresh optimizer and ``finetune_steps`` steps on the task's inputs (``transform``)."""
        base_cell = self.cell(self.component_lr, lr_floor=0.0, augment=False)  # its own recipe, whatever the grid's
        bases, tuned = [], {}
        for p in range(self.seeds):
            base = self.spec(base_cell, p)
            bases.append(base)
            for lr in self.finetune_lrs:
                for t in TASKS:
                    tuned[p, lr, t] = RunSpec(replace(base.data, transform=t), base.model,
                                              replace(base.train, steps=self.finetune_steps, lr=lr), init=base)
        return bases, tuned

    def specs(self) -> list[RunSpec]:
        """Return every run the noise notebooks read at ``steps``: the children of every cell and learning-rate
        pair, and the task-arithmetic runs (parents and fine-tuning sources train on the way).  Reads no data.
        The longer runs of cells that miss the convergence rule (``max_steps``) depend on results, so are not
        listed."""
        out = [s for c in self.grid_cells() for p in range(self.grid_pairs) for s in self.children(c, p)]
        out += [s for c in self.component_cells() for p in range(self.seeds) for s in self.children(c, p)]
        cell = self.cell(self.component_lr)
        out += [s for p in range(self.seeds) for lr in self.pair_lrs for s in self.children(cell, p, lr=lr)]
        bases, tuned = self.task_specs()
        return list(dict.fromkeys(out + bases + list(tuned.values())))

    def run_count(self) -> int:
        """Return an upper bound on the runs :meth:`specs` lists (its parents and children; cells may coincide)."""
        grid = self.grid_pairs * len(self.grid_cells())
        cells = len(self.component_cells()) + len(self.pair_lrs)
        return 3 * grid + self.seeds * (3 * cells + 1 + len(self.finetune_lrs) * len(TASKS))


@dataclass(frozen=True)
class NoiseRegimeStudy(NoiseModel):
    """The regime map of merging gain: where can two children gain from merging at all?  Spawn-and-merge pairs over
    the schedule's floor, the spawn point (and independently initialised pairs), augmentation and the peak learning
    rate, at one batch size; the noise study then runs where the map finds gains."""

    steps: int = param(2000, smoke=60, paper=20000, lo=1)  # SGD steps of every run
    warmup: float = param(0.05)  # share of all steps spent in the linear warm-up
    batch_size: int = param(128, lo=1)  # examples per SGD step
    #: Peak learning rates, from clearly stable to unstable at this batch size and momentum.
    lrs: tuple[float, ...] = param((0.01, 0.03, 0.1, 0.3, 1.0), smoke=(0.02, 0.1, 0.4))  # peak learning rates η
    momentum: float = param(0.9)  # SGD momentum μ (PyTorch's, dampening 0)
    weight_decay: float = param(5e-4)  # SGD's weight decay (L2)
    #: Where each schedule's learning rate ends, as a fraction of its peak: 0 decays to zero (the book's first noise
    #: protocol), 0.2 keeps some of the optimizer's noise alive to the end, 1 is a constant rate after the warm-up.
    #: The quick book maps the two ends; the reference map ``noise-regime-mnist1d`` has (0, 0.2, 1).
    lr_floors: tuple[float, ...] = param((0.0, 1.0), paper=(0.0, 0.2, 1.0))  # where each schedule's rate ends
    #: Spawn points, as fractions of training; 0 is a shared initialisation (no parent), different batch orders.  The
    #: reference maps have (0, 0.1, 0.25, 0.5).
    spawn_fractions: tuple[float, ...] = param((0.0, 0.5), paper=(0.0, 0.1, 0.25, 0.5))  # spawn points
    #: Add independently initialised pairs as a control (every floor and learning rate; the reference maps do).
    independent: bool = param(False, smoke=True, paper=True)  # add independently initialised pairs
    #: Add every floor, spawn point and learning rate again with augmentation (random shifts): a network that cannot
    #: memorise its training set (the reference maps do).
    augment: bool = param(False, smoke=True, paper=True)  # add every cell again with random shifts
    #: Add, beside every spawned cell whose rate stays above zero (a floor above 0), children of the same parents
    #: whose rate decays to zero from the spawn (method "anneal"): ordinary annealing, which merging must beat (N8).
    anneal: bool = param(False)  # add children annealed to zero from the same spawns
    show_references: bool = param(True)  # show the committed reference maps (results/) beside this run's own
    seeds: int = param(3, smoke=2, paper=10, lo=1, hi=MAX_REPLICATES)  # pairs per cell, each from its own parent
    device: str = param("auto", check=check_device)  # where runs train: auto, cpu, cuda, cuda:N or mps
    scheduler: str | None = param(None)  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheduler(self.scheduler)
        check_spawn_fractions(self.spawn_fractions)
        check_lr_floors(self.lr_floors)
        self.noise_study()

    def noise_study(self) -> NoiseStudy:
        """Return the noise study that trains and merges this map's cells (its shared fields; one batch size)."""
        same = {f.name: getattr(self, f.name) for f in fields(self) if f.name in NoiseStudy.__dataclass_fields__
                and f.name not in ("lrs", "augment", "show_references")}
        return NoiseStudy(**same, lrs=self.lrs, batch_sizes=(self.batch_size,), row_batch_size=self.batch_size,
                          show_references=False)

    def cells(self) -> list[Cell]:
        """Return every cell of the map: floors × starts (spawn points, then independent) × learning rates, without
        augmentation, then (``augment``) all of them again with it."""
        base = dict(batch_size=self.batch_size, momentum=self.momentum, weight_decay=self.weight_decay)
        starts = [dict(spawn_fraction=f) for f in self.spawn_fractions]
        starts += [dict(spawn_fraction=0.0, independent=True)] if self.independent else []
        cells = [Cell(lr=lr, **base, augment=aug, lr_floor=fl, **st) for aug in (False, True)[:1 + self.augment]
                 for fl in self.lr_floors for st in starts for lr in self.lrs]
        return cells + [replace(c, anneal=True) for c in cells
                        if self.anneal and c.lr_floor > 0 and c.spawn_fraction > 0 and not c.independent]

    def specs(self) -> list[RunSpec]:
        """Return every run of the map (parents train on the way)."""
        noise = self.noise_study()
        return list(dict.fromkeys(s for c in self.cells() for p in range(self.seeds) for s in noise.children(c, p)))

    def run_count(self) -> int:
        """Return an upper bound on the runs of the map (each pair's two children and its parent)."""
        return 3 * self.seeds * len(self.cells())


# ---- Profiles: resolving a study ----
# Named parameter sets (``smoke``, ``quick``, ``paper``) for every study of the book, and how a page resolves them.
#
# A study is a frozen dataclass whose fields are the notebook parameters it accepts.  Each field states, on its
# line, its quick value, what the smoke and paper profiles run instead, and its check (:func:`param`):
# the width paper's studies and the noise paper's are above, the small ones below.  :func:`resolve` fills every
# override that is None from the profile; the study checks each value before any compute starts.  :func:`what_ran`
# tells a page which value each field took, and from where.
#
# - ``smoke``: each notebook runs in seconds; the tests use it.
# - ``quick`` (the default of ``make book``): CPU only, embedded data sets.
# - ``paper``: GPU, torchvision data sets, the papers' settings.
#
# Which notebooks read which study is the book's business: see the book's parts (Part, PARTS) below
# (:class:`Part`, :func:`study`).

__all__ = ["PROFILES", "STUDIES", "TASKS", "Cell", "CellStudy", "ControlsStudy", "DepthStudy", "ExplorerStudy",
           "MechanismStudy", "NoiseModel", "NoiseRegimeStudy", "NoiseStudy", "Pair", "Recipe", "Study", "StudyT",
           "SummaryStudy", "TheoryStudy", "Training", "TutorialStudy", "WidthStudy", "check_fields", "check_lr_floors",
           "check_run_count", "check_spawn_fractions", "deciding_widths", "param", "profile_table", "profile_values",
           "resolve", "sources", "what_ran", "parameters_cell", "given_parameters", "injected_names",
           "CHECKS", "FRACTION", "FRACTION_CLOSED", "SPAWN_FRACTION", "LR_FLOOR",
           "POSITIVE", "WIDTH_MULTIPLIER", "default", "positive", "check_profile", "PAPER_WIDTHS", "SMOKE_LAMS",
           "PROTOCOLS", "Part", "WIDTH", "PROBES", "DEPTH", "THEORY", "NOISE_REGIME", "NOISE", "CONTROLS", "MECHANISM",
           "TUTORIAL", "EXPLORE", "SUMMARY", "part_of", "all_notebooks", "study", "part_specs", "MAX_REPLICATES",
           "MAX_DRAWS", "MAX_GRID", "MAX_LAMS", "MAX_UNITS", "MAX_ITERATIONS", "MAX_RUNS", "PARTS",
           "precision_words", "describe_study", "short_fraction", "describe_regime", "regime_table",
           "describe_mechanism", "mechanism_cut"]

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
    width: float | None = param(None, **WIDTH_MULTIPLIER)  # the width multiplier shown first (None: the widest)
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
    hints = typing.get_type_hints(cls)
    nullable = {f.name for f in fields(cls) if _unwrap(hints[f.name])[1]}  # fields where None means something
    given = {k: v for k, v in overrides.items() if v is not None or k in nullable}
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
    """Return the study ``cls`` at ``profile`` with ``overrides``, the values its reader gave (a page passes only
    those: :func:`given_parameters`).  None is a value of its own for a field that may be None (``regimes=None``:
    no length arm); for any other field it keeps the profile's value."""
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


#: The head of a notebook's ``parameters`` cell (:func:`parameters_cell`).
PARAMETERS_HEAD = ("# The values below run at the quick profile. Another profile (smoke, paper) replaces each "
                   "value that equals the one\n# written here by its own (the line's comment); a value changed here, "
                   "or any value given with `-p NAME VALUE`, is yours.")


def _literal(v: Any) -> str:
    """Return a study value as the Python literal a parameters cell writes."""
    if isinstance(v, tuple):
        return "(" + ", ".join(map(_literal, v)) + ("," if len(v) == 1 else "") + ")"
    return json.dumps(v) if isinstance(v, str) else repr(v)


def field_comments(cls: type) -> dict[str, str]:
    """Return the one-line comment of each field of study ``cls``, from the source line that declares it."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        lines, _ = inspect.getsourcelines(klass)
        tokens = tokenize.generate_tokens(io.StringIO("".join(lines)).readline)
        comments = {t.start[0]: t.string.lstrip("# ").strip() for t in tokens if t.type == tokenize.COMMENT}
        for node in ast.parse(textwrap.dedent("".join(lines))).body[0].body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                said = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
                if said:
                    out[node.target.id] = said[-1]
    return out


def parameters_cell(cls: type) -> str:
    """Return the source of the ``parameters`` cell of a notebook whose study is ``cls``: ``profile``, then each field
    at its quick value, one to a line, with what it is and what the smoke and paper profiles run instead (a test holds
    every notebook to it)."""
    said = field_comments(cls)
    own = {f.name for f in fields(cls)}
    recipe = {k: v for k, v in _PAPER_ARCH["mlp"].items() if k in own} if issubclass(
        cls, (WidthStudy, MechanismStudy)) else {}  # the paper profile's MLP recipe (:func:`_resolved`)
    lines = [PARAMETERS_HEAD, 'profile = "quick"'] if len(own) > 1 else ['profile = "quick"  # smoke, quick or paper']
    for f in fields(cls):
        if f.name == "profile":
            continue
        quick = default(cls, f.name)
        profiles = f.metadata.get("profiles", {})
        other = [f"{p} {_literal(v)}" for p, v in profiles.items() if v != quick]
        if f.name in recipe and recipe[f.name] != profiles.get("paper", quick):
            other.append(f"paper with arch \"mlp\" {_literal(recipe[f.name])}")
        note = "; ".join([said.get(f.name, "")] + other).strip("; ")
        lines.append(f"{f.name} = {_literal(quick)}" + (f"  # {note}" if note else ""))
    return "\n".join(lines)


def _same(v: Any, quick: Any) -> bool:
    """Return whether a parameter's value is its quick value (a list as the tuple it stands for)."""
    v = tuple(v) if isinstance(v, list) else v
    return type(v) is type(quick) and v == quick


def injected_names(namespace: dict[str, Any]) -> set[str]:
    """Return the names that papermill's injected cell (``# Parameters``, after the ``parameters`` cell) assigned in
    this kernel, read from IPython's input history ``In``; none outside IPython or without papermill."""
    for source in reversed(namespace.get("In", []) or []):
        if source.lstrip().startswith("# Parameters"):
            tree = ast.parse(source)
            return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                    if isinstance(t, ast.Name)}
    return set()


def given_parameters(cls: type, namespace: dict[str, Any]) -> dict[str, Any]:
    """Return the study fields of ``cls`` that a notebook's namespace gives, {name: value}: those papermill injected
    (``-p NAME VALUE``: yours, even at the quick value) and those whose value is no longer the quick value of the
    ``parameters`` cell (an edit in Jupyter).  The others take the profile's value (:func:`resolve`)."""
    injected = injected_names(namespace)
    return {f.name: namespace[f.name] for f in fields(cls)
            if f.name != "profile" and f.name in namespace
            and (f.name in injected or not _same(namespace[f.name], default(cls, f.name)))}


def check_run_count(runs: int, what: str) -> None:
    """Raise SpecError naming ``what`` if it would train more than ``MAX_RUNS`` runs."""
    if runs > MAX_RUNS:
        raise SpecError(f"{what} would train {runs:,} runs: expected at most {MAX_RUNS:,}; lower seeds, "
                        "decisive_seeds or the number of values in its lists")


# ---- The book's parts ----
# The book's parts: which notebooks read which study, in what order, and in what time budget.
#
# A part groups notebooks that share one study (above).  The command
# side (``lmcbook execute``, ``train``, ``sweep``) and the page side (:func:`lmcbook.page.open_page`)
# both find a notebook's study here.

@dataclass(frozen=True)
class Part(Generic[StudyT]):
    """A group of notebooks sharing one study: notebooks in execution order, and the time budget per profile.

    ``Part`` is generic in its study class: ``studies.WIDTH.study("quick")`` is typed as a
    :class:`~lmcbook.studies.WidthStudy`.
    """

    name: str
    title: str
    notebooks: tuple[str, ...]
    #: The study class its notebooks resolve (:func:`lmcbook.studies.resolve`).
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
    ``studies.WIDTH.study(profile)`` is a :class:`~lmcbook.studies.WidthStudy`."""
    return _part(part).study(profile, **overrides)


def part_specs(profile: str, part: str, **overrides: Any) -> list[RunSpec]:
    """Return every run a part trains at ``profile`` (the input of ``lmcbook train`` and ``sweep``)."""
    return study(part, profile, **overrides).specs()


# ---- The words for a study and its training regime ----


def precision_words(precision: str) -> str:
    """Return a caption's clause on a training precision: "" for fp32, else ", every run in P autocast"."""
    return "" if precision == "fp32" else f", every run in {precision} autocast"


def describe_study(study: Any, regime: pd.DataFrame | None = None) -> str:
    """Return a one-sentence Markdown description of what a study trained (for figure captions), ending with
    its training regime (:func:`describe_regime`) when ``regime`` is given."""
    pairs = study.pairs()
    units = sorted({p.hidden_units for p in pairs})
    depths = sorted({p.depth for p in pairs if p.depth is not None})
    m, t = pairs[0].a.model, pairs[0].a.train
    epochs = " or ".join(f"{e:g}" for e in sorted({p.epochs for p in pairs}))
    decays = " or ".join(f"{d:g}" for d in sorted({p.weight_decay for p in pairs}))
    if m.arch == "mlp":
        ls = f"L = {depths[0]}" if len(depths) == 1 else f"L = {', '.join(map(str, depths))}"
        arch = f"ReLU MLP with {ls} linear layers"
    else:
        arch = {"vgg11": "VGG11", "resnet20": "ResNet20 (activation probes read residual-block outputs)"}[m.arch]
    unit = "hidden units" if m.arch == "mlp" else "base channels"
    return (f"{'bias-free ' if not m.bias else ''}{arch}, norm {m.norm}, on {DATASET_LABELS[study.dataset]}; "
            f"{epochs} epochs of SGD (peak lr {t.lr:g}, momentum {t.momentum:g}, weight decay {decays}, "
            f"batch {t.batch_size}{precision_words(t.precision)}); "
            f"{', '.join(map(str, units))} {unit}; "
            f"{study.seeds} independent pair(s) per {'width' if len(units) > 1 else 'depth'}"
            + _deciding_pairs(study, len(units) > 1)
            + (f"; regime: {describe_regime(regime)}" if regime is not None else ""))


def _deciding_pairs(study: Any, sweep: bool) -> str:
    """Return " (5 at 16, 512 and 1024 hidden units)": the pairs at the widths where a width study's rows decide."""
    if not sweep or not hasattr(study, "deciding_widths"):
        return ""
    ws = [w for w in study.deciding_widths() if study.pairs_at(w) != study.seeds]
    if not ws:
        return ""
    units = [study.spec(w, 0).model.channels for w in ws]
    unit = "hidden units" if study.arch == "mlp" else "base channels"
    return f" ({study.pairs_at(ws[0])} at {join_and(list(map(str, units)))} {unit})"


def short_fraction(x: float) -> str:
    """Return a fraction with three decimals, or in scientific notation below 0.01."""
    return f"{x:.3f}" if x >= 0.01 else f"{x:.1e}"


def _regime_cells(regime: pd.DataFrame):
    """Yield (epochs, weight decay, metric means by hidden units, distance by hidden units) per cell of a regime
    frame (:func:`lmcbook.experiments.regime_frame`'s output, or those rows of a page's CSV)."""
    whole = regime[regime["layer"].isna()]
    for (epochs, wd), cell in whole.groupby(["epochs", "weight_decay"]):
        mean = cell.groupby(["metric", "hidden_units"])["value"].mean()
        yield epochs, wd, mean, mean["init_distance"]


def describe_regime(regime: pd.DataFrame) -> str:
    """Return one Markdown clause, for a figure caption, saying which training regime a page's runs are in: per
    (length, weight decay) the decay integral D and the distance from initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the
    narrowest and the widest width.  :func:`regime_table` gives the same cells in full."""
    parts = []
    for epochs, wd, mean, dist in _regime_cells(regime):
        lo, hi = dist.index.min(), dist.index.max()
        far = f"{dist[lo]:.2f} at {lo:g} hidden units" + (f" and {dist[hi]:.2f} at {hi:g}" if hi != lo else "")
        parts.append(f"{epochs:g} epochs at weight decay {wd:g}: D = {mean['decay_integral'].mean():.3g}, "
                     f"‖θ_T − θ_0‖/‖θ_0‖ = {far}")
    return "; ".join(parts)


def regime_table(regime: pd.DataFrame) -> str:
    """Return a Markdown table of the training regime of a page's runs, one row per (length, weight decay): the
    decay integral D, what weight decay alone would leave of a weight (momentum included), and the distance from
    initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the narrowest and the widest width (hidden units in brackets)."""
    rows = ["| epochs | weight decay | decay integral $D$ | fraction of a weight left by weight decay alone "
            "(momentum included) | distance from initialisation "
            "$\\lVert\\theta_T - \\theta_0\\rVert / \\lVert\\theta_0\\rVert$ at the narrowest width (hidden units) "
            "| distance at the widest width (hidden units) |",
            "|---:|---:|---:|---:|---:|---:|"]
    for epochs, wd, mean, dist in _regime_cells(regime):
        lo, hi = dist.index.min(), dist.index.max()
        rows.append(f"| {epochs:g} | {wd:g} | {mean['decay_integral'].mean():.3g} "
                    f"| {short_fraction(mean['decay_shrinkage'].mean())} "
                    f"| {dist[lo]:.2f} ({lo:g}) | {dist[hi]:.2f} ({hi:g}) |")
    return "\n".join(rows)


def describe_mechanism(study: Any) -> str:
    """Return a one-sentence Markdown description of what the mechanism study trained (for captions)."""
    cells = study.cells()
    m, t = cells[0].pair(cells[0].widths[0], 0).a.model, cells[0].pair(cells[0].widths[0], 0).a.train
    units = sorted({int(round(study.base_width * w)) for w in study.widths})
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers on "
            f"{DATASET_LABELS[study.dataset]}; SGD (peak lr "
            f"{t.lr:g}, momentum {t.momentum:g}, batch {t.batch_size}"
            f"{precision_words(t.precision)}); "
            f"{', '.join(map(str, units))} hidden units; "
            f"{len(cells)} cells of (length, weight decay, initial-weight factor); {study.seeds} pair(s) per cell and "
            f"width, {max(study.seeds, study.decisive_seeds)} in the cells that decide a verdict")


def mechanism_cut(study: Any) -> str:
    """Return one Markdown sentence saying which cells stop short of the widest width, to fit the time budget."""
    cut = study.cut_widths()
    if not cut:
        return "every cell was trained at every width"
    units = lambda ws: ", ".join(str(int(round(study.base_width * w))) for w in ws)  # noqa: E731
    mid = [d for d in study.weight_decays if d not in study.wide_decays]
    return (f"{units(cut)} hidden units were trained only in the decay arm at weight decay "
            f"{', '.join(f'{d:g}' for d in study.wide_decays)} and in the small-initialisation arm; the length arm"
            + (f" and weight decay {', '.join(f'{d:g}' for d in mid)}" if mid else "")
            + f" stop at {units(study.narrow_widths()[-1:])} units, to keep the book within its time budget (large "
            "D is reached far more cheaply by weight decay than by length)")
