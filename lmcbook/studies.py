"""What every study is made of: its fields, their checks, and the profile values beside each field.

A study is a frozen dataclass.  Each field is declared with :func:`param`, on one line: the quick value (the
field's default), what the smoke and paper profiles run instead, and the check its values must pass, with a
one-line comment saying what it is::

    epochs: int = param(60, smoke=4, paper=100, lo=1)  # passes over the training split

:func:`check_fields` checks every value against its annotation and those checks (with the validators of
:mod:`lmcbook.specs`) before any compute starts.  The studies themselves live in ``lmcbook.width_studies`` and
``lmcbook.noise_studies``; :mod:`lmcbook.profiles` resolves them.
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from .specs import RunSpec, SpecError, check_bool, check_float, check_int

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
WIDTH = {"ok": lambda v: v > 0, "allowed": "a width multiplier > 0"}


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

