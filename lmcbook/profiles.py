"""Named parameter sets (``smoke``, ``quick``, ``paper``) for every study of the book.

A study is a frozen dataclass.  Its fields are the notebook parameters it accepts,
their annotations are their types, their defaults are the quick profile, and a
table in this module holds what the smoke and paper profiles change.  :func:`resolve`
fills every override that is None from the profile; the study checks each value
against its annotation (:func:`check_fields`, with the validators of
:mod:`lmcbook.specs`) and builds its specs before any compute starts.

- ``smoke``: each notebook runs in seconds; the tests use it.
- ``quick`` (the default of ``make book``): CPU only, embedded data sets.
- ``paper``: GPU, torchvision data sets, the papers' settings.

Which notebooks read which study is the book's business: see :mod:`lmcbook.parts`.
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

from .metrics import DEFAULT_LAMS
from .noise import CHILD_SEED_BASE, spawn_pair, spawn_step
from .specs import (
    BASE_WIDTHS,
    DataSpec,
    ModelSpec,
    RunSpec,
    SpecError,
    TrainSpec,
    check_bool,
    check_device,
    check_float,
    check_int,
    check_lams,
)
from .sweep import check_scheduler

PROFILES = ("smoke", "quick", "paper")
#: The tasks of the task-arithmetic study: input transforms (``DataSpec.transform``) of the noise study's data.
TASKS = ("reverse", "negate")
_TRAIN, _MODEL, _DATA = TrainSpec(), ModelSpec(), DataSpec()
#: Caps on every count a user can set, so that a typo (``seeds 100000000``) fails at once instead of hanging:
#: pairs per cell, random permutations per pair, values in a list that multiplies runs (widths, weight decays,
#: learning rates, ...), points of a λ grid, units of a constructed network, weight matching's iterations, and
#: the runs of one study or one ``lmcbook execute`` plan.
MAX_REPLICATES, MAX_DRAWS, MAX_GRID, MAX_LAMS = 100, 1000, 32, 1001
MAX_UNITS, MAX_ITERATIONS, MAX_RUNS = 65536, 10_000, 100_000


def _default(cls: type, name: str) -> Any:
    """Return the default of field ``name`` of dataclass ``cls`` (each default is stated once, there)."""
    f = cls.__dataclass_fields__[name]
    return f.default if f.default is not MISSING else f.default_factory()


def _at_least(lo: float, hi: int | None = None) -> dict:
    return {"lo": lo, "hi": hi}


def _fraction(closed_top: bool = False) -> dict:
    return {"ok": (lambda v: 0 < v <= 1) if closed_top else (lambda v: 0 < v < 1),
            "allowed": f"a fraction in (0, 1{']' if closed_top else ')'}"}


def _spawn_fraction() -> dict:
    return {"ok": lambda v: 0 <= v < 1, "allowed": "a fraction in [0, 1) (0: a shared initialisation, no parent)"}


def _lr_floor() -> dict:
    return {"ok": lambda v: 0 <= v <= 1, "allowed": "a fraction in [0, 1] (0: decay to zero; 1: a constant rate)"}


def check_spawn_fractions(values: tuple[float, ...]) -> None:
    """Raise SpecError unless every spawn point is a fraction in [0, 1)."""
    for f in values:
        if not 0 <= f < 1:
            raise SpecError(f"spawn_fraction={f!r} is not allowed: expected a fraction in [0, 1) (0: a shared "
                            "initialisation, no parent)")


def check_lr_floors(values: tuple[float, ...]) -> None:
    """Raise SpecError unless every floor is a fraction of the peak learning rate in [0, 1]."""
    for f in values:
        if not 0 <= f <= 1:
            raise SpecError(f"lr_floor={f!r} is not allowed: expected a fraction in [0, 1] (0: decay to zero; 1: a "
                            "constant rate)")


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


def _check_profile(name: Any) -> str:
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
    _check_profile(study.profile)


@dataclass(frozen=True)
class Study:
    """What every study has: a profile, its resolved parameters, and the runs it trains (none by default).

    A study class states, beside its fields, what the smoke and paper profiles change (``profile_values``); the
    quick profile is the fields' defaults.
    """

    #: What the smoke and paper profiles change in this study: {profile: {field: value}}.
    profile_values: ClassVar[dict[str, dict[str, Any]]] = {}
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


#: Any study class; :func:`resolve` returns an instance of the class it is given.
StudyT = TypeVar("StudyT", bound=Study)


@dataclass(frozen=True)
class Training(Study):
    """What every trained study shares: data, model size and options, SGD, seeds.  The model family (``arch``,
    ``depth``) and the regularisation (``init_scale``, ``weight_decay``) are added by the studies that hold them
    fixed (:class:`Recipe`); the depth and mechanism studies sweep one of them and add only the other."""

    dataset: str = _DATA.name
    data_root: str | None = None
    download: bool = False
    base_width: int = BASE_WIDTHS[_MODEL.arch]
    norm: str = _MODEL.norm
    bias: bool = _MODEL.bias
    epochs: int = field(default=_TRAIN.epochs, metadata=_at_least(1))
    batch_size: int = field(default=_TRAIN.batch_size, metadata=_at_least(1))
    lr: float = _TRAIN.lr
    momentum: float = _TRAIN.momentum
    warmup: float = _TRAIN.warmup
    #: Number of independent pairs per cell; pair p trains seeds 2p (model a) and 2p+1 (model b).
    seeds: int = field(default=2, metadata=_at_least(1, MAX_REPLICATES))
    device: str = field(default="auto", metadata={"check": check_device})
    lams: tuple[float, ...] = DEFAULT_LAMS
    #: Where missing runs train: None (in the notebook's process), "local:N" or "tcp://HOST:PORT" (Dask).
    scheduler: str | None = None

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


def _init_scale() -> Any:
    """The initial-weight factor's field (a :class:`Recipe`'s and the depth study's)."""
    return field(default=_MODEL.init_scale, metadata={"ok": lambda v: v > 0, "allowed": "a number > 0"})


def _weight_decay() -> Any:
    """The weight decay's field (a :class:`Recipe`'s and the depth study's)."""
    return field(default=_TRAIN.weight_decay, metadata=_at_least(0))


@dataclass(frozen=True)
class Recipe(Training):
    """One training recipe: the shared fields with a model family and a regularisation."""

    arch: str = _MODEL.arch
    depth: int | None = _MODEL.depth
    #: Factor on the initial weights (``ModelSpec.init_scale``); 1 is PyTorch's default initialisation.
    init_scale: float = _init_scale()
    weight_decay: float = _weight_decay()

    def spec(self, width: float, seed: int) -> RunSpec:
        """Return the RunSpec of one model (init and data seed ``seed``)."""
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root, download=self.download),
            model=ModelSpec(self.arch, width, self.base_width, self.depth if self.arch == "mlp" else None,
                            self.norm, self.bias, self.init_scale),
            train=TrainSpec(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum,
                            weight_decay=self.weight_decay, warmup=self.warmup, seed=seed),
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


_WIDTH_SMOKE = dict(widths=(0.25, 1.0), epochs=4, seeds=1, decisive_seeds=1, lams=(0.0, 0.25, 0.5, 0.75, 1.0))
_WIDTH_PAPER = dict(dataset="cifar10", arch="vgg11", base_width=64, norm="batch", bias=True, epochs=100, seeds=3,
                    widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0))


@dataclass(frozen=True)
class WidthStudy(Recipe):
    """The width sweep: pairs of independently trained models at each width multiplier."""

    profile_values = {"smoke": _WIDTH_SMOKE, "paper": _WIDTH_PAPER}

    widths: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    #: Pairs at the widths where the width rows read intervals over pairs (``deciding_widths()``; ``seeds`` at
    #: the others).
    decisive_seeds: int = field(default=5, metadata=_at_least(1, MAX_REPLICATES))

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

    profile_values = {"smoke": {**_WIDTH_SMOKE, "draws": 2, "match_iterations": 20}, "paper": _WIDTH_PAPER}

    weak_weight_decay: float = field(default=1e-4, metadata=_at_least(0))
    #: Random permutations drawn per pair.
    draws: int = field(default=5, metadata=_at_least(1, MAX_DRAWS))
    #: Iteration cap of weight matching's coordinate descent.
    match_iterations: int = field(default=100, metadata=_at_least(1, MAX_ITERATIONS))

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

    decisive_widths: tuple[float, ...] | None = None
    decisive_seeds: int = field(default=5, metadata=_at_least(1, MAX_REPLICATES))
    #: Iteration cap of weight matching's coordinate descent.
    match_iterations: int = field(default=100, metadata=_at_least(1, MAX_ITERATIONS))

    def pairs_at(self, width: float) -> int:
        """Return the number of pairs trained at ``width``: ``decisive_seeds`` at a decisive width, else ``seeds``."""
        decisive = any(abs(width - w) < 1e-12 for w in self.decisive_widths or ())
        return max(self.seeds, self.decisive_seeds) if decisive else self.seeds

    def pairs(self) -> list[Pair]:
        """Return every pair of the cell, widths outermost."""
        return [self.pair(w, p) for w in self.widths for p in range(self.pairs_at(w))]


def _positive(name: str, values: tuple, what: str = "numbers > 0") -> tuple[float, ...]:
    if any(v <= 0 for v in values):
        raise SpecError(f"{name}={list(values)!r} is not allowed: expected {what}")
    return tuple(sorted({float(v) for v in values}))


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

    #: What the smoke and paper profiles change; see :class:`Study`.
    profile_values = {"smoke": {**_WIDTH_SMOKE, "regimes": (4, 8), "weight_decays": (3e-3, 6e-3),
                                "regime_weight_decays": (3e-3, 6e-3), "long_max_width": None, "decisive_seeds": 2},
                      "paper": {**_WIDTH_PAPER, "regimes": (100, 300, 1000),
                                "weight_decays": (1e-4, 3e-3, 9e-3, 3e-2)}}
    #: Parameters a width page has and this study does not, with what sweeps them instead.
    not_fields = {"weight_decay": "it sweeps weight_decays", "init_scale": "it sweeps init_scales"}

    arch: str = _MODEL.arch
    depth: int | None = _MODEL.depth
    #: Widths of the width study (16 to 1024 units): their runs are reused here.
    widths: tuple[float, ...] = (0.25, 0.5, 1.0, 4.0, 16.0)
    weight_decays: tuple[float, ...] = (1e-4, 3e-3, 1e-2, 3e-2)
    #: The decay arm's weight decays trained at every width; the others stop at ``long_max_width``, like the length
    #: arm (the time budget's cut).  It must hold the weakest and the strongest, whose cells decide verdicts.
    #: None: those two and the width study's own weight decay, whose runs the width pages train anyway.
    wide_decays: tuple[float, ...] | None = None
    regimes: tuple[int, ...] | None = (60, 200, 600)
    regime_weight_decays: tuple[float, ...] = (1e-4, 3e-3)
    long_max_width: float | None = field(default=1.0, metadata={"ok": lambda v: v > 0,
                                                                 "allowed": "a width multiplier > 0, or None"})
    init_scales: tuple[float, ...] | None = (0.25,)
    decisive_seeds: int = field(default=5, metadata=_at_least(1, MAX_REPLICATES))
    match_iterations: int = field(default=100, metadata=_at_least(1, MAX_ITERATIONS))
    #: Show the committed reference runs (results/) beside this run's own cells.
    show_references: bool = True

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
            object.__setattr__(self, "init_scales", _positive("init_scales", self.init_scales))
        free = {self.weight_decays[0], self.weight_decays[-1]} | ({_TRAIN.weight_decay} & set(self.weight_decays))
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
        for wd in {_TRAIN.weight_decay, ControlsStudy.weak_weight_decay} & set(self.wide_decays):
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
    it trains MLPs and sweeps ``depths``, each depth a :class:`Recipe` built from this study's fields."""

    profile_values = {"smoke": dict(width=0.25, depths=(2, 3), epochs=4, lams=(0.0, 0.5, 1.0)),
                      "paper": dict(dataset="mnist", base_width=512, width=2.0, epochs=60, seeds=5)}  # W10: 5 pairs
    #: Parameters a width page has and this study does not, and why.
    not_fields = {"depth": "it sweeps depths", "arch": "it trains MLPs only"}

    #: Factor on the initial weights (``ModelSpec.init_scale``); 1 is PyTorch's default initialisation.
    init_scale: float = _init_scale()
    weight_decay: float = _weight_decay()
    width: float = field(default=8.0, metadata={"ok": lambda v: v > 0, "allowed": "a width multiplier > 0"})
    depths: tuple[int, ...] = (2, 3, 4, 5, 6)
    seeds: int = field(default=1, metadata=_at_least(1, MAX_REPLICATES))

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

    def train_fields(self) -> dict[str, Any]:
        """Return the TrainSpec fields of this cell's schedule: a constant rate, or a linear decay to the floor."""
        return {"schedule": "constant"} if self.lr_floor == 1 else {"lr_floor": self.lr_floor}


@dataclass(frozen=True)
class NoiseModel(Study):
    """What the two noise studies share: the data set and the MLP every run trains."""

    dataset: str = "mnist1d"
    data_root: str | None = None
    download: bool = False
    base_width: int = BASE_WIDTHS["mlp"]
    width: float = 2.0
    depth: int = field(default=4, metadata=_at_least(1))
    bias: bool = False


@dataclass(frozen=True)
class NoiseStudy(NoiseModel):
    """The optimizer-noise study: spawn-and-merge over learning rate, batch size, momentum, weight decay,
    augmentation and spawn point, plus the learning-rate-pair matrix and task arithmetic."""

    profile_values = {
        "smoke": dict(dataset="digits", width=0.5, steps=60, lrs=(0.02, 0.05, 0.1), batch_sizes=(32, 128),
                      momenta=(0.0, 0.9), component_lrs=(0.02, 0.05, 0.1),
                      weight_decays=(0.0, 5e-3), pair_lrs=(0.02, 0.1), finetune_steps=20, finetune_lrs=(0.05,),
                      alphas=(0.0, 0.5, 1.0), seeds=1, grid_seeds=1),
        "paper": dict(dataset="cifar10", steps=20000, base_width=64, width=4.0,
                      seeds=10, grid_seeds=10),  # N1 reads 5 pairs on each half; the other noise rows 5 per cell
    }

    #: Every run takes this many steps whatever its batch size (the paper's fixed-steps protocol), unless its cell
    #: misses the convergence rule and ``max_steps`` lets it train longer.
    steps: int = field(default=2000, metadata=_at_least(1))
    #: The step cap of the convergence rule: a cell whose children miss the rule (lmcbook.claims) at ``steps``
    #: is trained again, with doubled steps, until they meet it or the next length would pass this cap (None:
    #: ``steps``, no second length; the quick profile's budget).
    max_steps: int | None = None
    warmup: float = _TRAIN.warmup
    lrs: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2)
    batch_sizes: tuple[int, ...] = (32, 64, 128, 256)
    momentum: float = _TRAIN.momentum
    weight_decay: float = 5e-4
    #: Where the full η × B grid spawns its children, as a fraction of training (0: a shared initialisation).
    spawn_fraction: float = field(default=0.5, metadata=_spawn_fraction())
    #: Where every run's learning rate ends, as a fraction of its peak (0: decay to zero; 1: constant).  The quick
    #: default, a constant rate with children spawned at 50%, is where the regime map (noise_regime, MNIST-1D) found
    #: the most learning rates whose merging gain lies above zero; the book's first protocol was lr_floor=0.
    lr_floor: float = field(default=1.0, metadata=_lr_floor())
    #: Train the grid and the component sweeps with augmentation (random shifts); the augmentation sweep compares
    #: both whatever this says.
    augment: bool = False
    #: The batch size of the component sweeps (momentum, weight decay, augmentation, learning-rate pairs).
    row_batch_size: int = field(default=128, metadata=_at_least(1))
    momenta: tuple[float, ...] = (0.0, 0.5, 0.9)
    component_lrs: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2)
    weight_decays: tuple[float, ...] = (0.0, 5e-4, 5e-3)
    component_lr: float = 0.05
    pair_lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    finetune_steps: int = field(default=500, metadata=_at_least(1))
    finetune_lrs: tuple[float, ...] = (0.01, 0.03, 0.1)
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
    ties_keep: float = field(default=0.2, metadata=_fraction(closed_top=True))
    #: Spawn-and-merge pairs per cell (each from its own parent) of the component sweeps and task arithmetic.
    seeds: int = field(default=2, metadata=_at_least(1, MAX_REPLICATES))
    #: Pairs per cell of the η × B grid (None: ``seeds``); N2 reads an interval over 5, N1 5 on each half.
    grid_seeds: int | None = field(default=5, metadata=_at_least(1, MAX_REPLICATES))
    device: str = field(default="auto", metadata={"check": check_device})
    #: Where missing runs train: None (in the notebook's process), "local:N" or "tcp://HOST:PORT" (Dask).
    scheduler: str | None = None
    #: Show the committed reference runs (results/) beside this run's own cells.
    show_references: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheduler(self.scheduler)
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
        """Return the full run of one cell (init and data seed ``seed``), ``steps`` long (default: the study's);
        spawning cuts it at the cell's fraction."""
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root, augment=cell.augment, download=self.download),
            model=ModelSpec("mlp", self.width, self.base_width, self.depth, cell.norm, self.bias),
            train=TrainSpec(**{"steps": steps or self.steps, "batch_size": cell.batch_size, "lr": cell.lr,
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
        """Return the η × B grid at the grid's spawn point."""
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
        return spawn_pair(full, spawn_step(full, cell.spawn_fraction), pair, **train_changes)

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

    profile_values = {
        "smoke": dict(dataset="digits", width=0.5, steps=60, lrs=(0.02, 0.1, 0.4), independent=True, augment=True,
                      seeds=2),
        "paper": dict(dataset="cifar10", steps=20000, base_width=64, width=4.0, lr_floors=(0.0, 0.2, 1.0),
                      spawn_fractions=(0.0, 0.1, 0.25, 0.5), independent=True, augment=True, seeds=10),
    }

    steps: int = field(default=2000, metadata=_at_least(1))
    warmup: float = _TRAIN.warmup
    batch_size: int = field(default=128, metadata=_at_least(1))
    #: Peak learning rates, from clearly stable to unstable at this batch size and momentum.
    lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0)
    momentum: float = _TRAIN.momentum
    weight_decay: float = 5e-4
    #: Where each schedule's learning rate ends, as a fraction of its peak: 0 decays to zero (the book's first noise
    #: protocol), 0.2 keeps some of the optimizer's noise alive to the end, 1 is a constant rate after the warm-up.
    #: The quick book maps the two ends; the reference map ``noise-regime-mnist1d`` has (0, 0.2, 1).
    lr_floors: tuple[float, ...] = (0.0, 1.0)
    #: Spawn points, as fractions of training; 0 is a shared initialisation (no parent), different batch orders.  The
    #: reference maps have (0, 0.1, 0.25, 0.5).
    spawn_fractions: tuple[float, ...] = (0.0, 0.5)
    #: Add independently initialised pairs as a control (every floor and learning rate; the reference maps do).
    independent: bool = False
    #: Add every floor, spawn point and learning rate again with augmentation (random shifts): a network that cannot
    #: memorise its training set (the reference maps do).
    augment: bool = False
    #: Show the committed reference maps (results/) beside this run's own.
    show_references: bool = True
    #: Spawn-and-merge pairs per cell, each from its own parent (or initialisation).
    seeds: int = field(default=3, metadata=_at_least(1, MAX_REPLICATES))
    device: str = field(default="auto", metadata={"check": check_device})
    #: Where missing runs train: None (in the notebook's process), "local:N" or "tcp://HOST:PORT" (Dask).
    scheduler: str | None = None

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
        return [Cell(lr=lr, **base, augment=aug, lr_floor=fl, **st) for aug in (False, True)[:1 + self.augment]
                for fl in self.lr_floors for st in starts for lr in self.lrs]

    def specs(self) -> list[RunSpec]:
        """Return every run of the map (parents train on the way)."""
        noise = self.noise_study()
        return list(dict.fromkeys(s for c in self.cells() for p in range(self.seeds) for s in noise.children(c, p)))

    def run_count(self) -> int:
        """Return an upper bound on the runs of the map (each pair's two children and its parent)."""
        return 3 * self.seeds * len(self.cells())


@dataclass(frozen=True)
class TheoryStudy(Study):
    """The constructed networks of the theory section: the λ grid, then the networks' sizes and seed."""

    profile_values = {"smoke": dict(hidden=16, inputs=64), "paper": dict(hidden=256, inputs=1024)}

    lams: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
    depth: int = field(default=4, metadata=_at_least(2))
    hidden: int = field(default=32, metadata=_at_least(2, MAX_UNITS))
    in_features: int = field(default=16, metadata=_at_least(1, MAX_UNITS))
    inputs: int = field(default=256, metadata=_at_least(1, MAX_UNITS))
    seed: int = field(default=0, metadata=_at_least(0))

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

    profile_values = {"smoke": dict(hidden_units=32, epochs=3), "paper": dict(hidden_units=1024, epochs=60)}

    #: Hidden units of each of the tutorial network's two hidden layers (a count, not a width multiplier).
    hidden_units: int = field(default=256, metadata=_at_least(2, MAX_UNITS))
    epochs: int = field(default=40, metadata=_at_least(1))
    #: The pair index p: model a trains from seed 2p, model b from seed 2p+1.
    pair: int = field(default=0, metadata=_at_least(0, MAX_REPLICATES - 1))


@dataclass(frozen=True)
class ExplorerStudy(Study):
    """The explorer's initial state: which pair of the width sweep, which λ and which layer (it trains nothing)."""

    profile_values = {"paper": dict(dataset="cifar10")}

    dataset: str = _DATA.name
    width: float | None = field(default=None, metadata={"ok": lambda v: v > 0, "allowed": "a width multiplier > 0"})
    pair: int = field(default=0, metadata=_at_least(0, MAX_REPLICATES - 1))
    lam: float = 0.5
    layer: int | None = None
    interactive: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_lams([self.lam])


#: The studies whose profiles differ, in the order of the generated profile table.
STUDIES = (WidthStudy, ControlsStudy, MechanismStudy, DepthStudy, TheoryStudy, ExplorerStudy, TutorialStudy,
           NoiseRegimeStudy, NoiseStudy)
#: In the paper profile, choosing an architecture also picks its data set and recipe.
_PAPER_ARCH = {
    "mlp": dict(dataset="mnist", base_width=512, depth=4, norm="none", bias=False, epochs=60,
                widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)),
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
        table = cls.profile_values
        changed = list(dict.fromkeys([*table.get("smoke", {}), *table.get("paper", {})]))
        defaults = {f.name: f.default for f in fields(cls)}
        for name in changed:
            vals = [_cell(v) for v in (defaults[name], *(table.get(p, {}).get(name, defaults[name])
                                                          for p in ("smoke", "paper")))]
            if cls is not WidthStudy and "widths" in defaults and shown.get((WidthStudy, name)) == vals:
                continue  # a width sweep's row as in the width study
            shown[(cls, name)] = vals
            rows.append(f"| {cls.__name__} | `{name}` | " + " | ".join(vals) + " |")
    rows.append("")
    rows.append("In the paper profile, `arch` also picks its recipe: " + "; ".join(
        f"`{arch}`: " + (", ".join(f"{k} {_cell(v)}" for k, v in vals.items()) or "the rows above")
        for arch, vals in _PAPER_ARCH.items()) + ".")
    return "\n".join(rows)


def resolve(cls: type[StudyT], profile: str = "quick", **overrides: Any) -> StudyT:
    """Return the study ``cls`` at ``profile``; overrides that are None keep the profile's value."""
    _check_profile(profile)
    allowed = {f.name for f in fields(cls)} - {"profile"}
    for name, instead in getattr(cls, "not_fields", {}).items():
        if overrides.get(name) is not None:
            raise SpecError(f"{name}={overrides[name]!r} is not allowed: {cls.__name__} has no {name} ({instead})")
        overrides.pop(name, None)
    unknown = set(overrides) - allowed
    if unknown:
        raise SpecError(f"unknown parameter(s) {sorted(unknown)}: expected some of {sorted(allowed)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    values: dict[str, Any] = dict(cls.profile_values.get(profile, {}))
    if issubclass(cls, (WidthStudy, MechanismStudy)) and profile == "paper":
        values.update(_PAPER_ARCH.get(given.get("arch", values.get("arch")), {}))
    values.update(given)
    if "arch" in allowed:
        if "arch" in given and "base_width" not in given and profile != "paper":
            values["base_width"] = BASE_WIDTHS.get(given["arch"], _default(cls, "base_width"))
        if values.get("arch", "mlp") != "mlp":
            values["depth"] = None
    study = cls(profile=profile, **values)
    check_run_count(study.run_count(), f"{cls.__name__} at profile {profile!r}")
    return study


def check_run_count(runs: int, what: str) -> None:
    """Raise SpecError naming ``what`` if it would train more than ``MAX_RUNS`` runs."""
    if runs > MAX_RUNS:
        raise SpecError(f"{what} would train {runs:,} runs: expected at most {MAX_RUNS:,}; lower seeds, "
                        "decisive_seeds or the number of values in its lists")
