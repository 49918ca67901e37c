"""Named parameter sets (``smoke``, ``quick``, ``paper``) and the book's parts.

This module is the single source of every part's specs, notebooks and time
budget.  A notebook's ``parameters`` cell holds ``profile`` plus overrides that
default to ``None``; :func:`width_study` fills every ``None`` from the profile
and validates the result before any compute starts.

- ``smoke``: each notebook runs in seconds; the tests use it.
- ``quick`` (the default of ``make book``): CPU only, embedded data sets.
- ``paper``: GPU, torchvision data sets, the papers' settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .metrics import DEFAULT_LAMS
from .specs import DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec, check_lams

PROFILES = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class Pair:
    """Two independently trained runs (a, b) at one width; ``seed`` numbers the pair."""

    width: float
    seed: int
    a: RunSpec
    b: RunSpec

    @property
    def hidden_units(self) -> int:
        """Return the pair's channel count, round(base_width * width)."""
        return self.a.model.channels


@dataclass(frozen=True)
class WidthStudy:
    """The width sweep: pairs of independently trained models at each width multiplier."""

    profile: str = "quick"
    dataset: str = "digits"
    data_root: str | None = None
    download: bool = False
    arch: str = "mlp"
    base_width: int = 64
    widths: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    depth: int | None = 4
    norm: str = "none"
    bias: bool = False
    weight_decay: float = 3e-3
    epochs: int = 60
    batch_size: int = 128
    lr: float = 0.05
    momentum: float = 0.9
    warmup: float = 0.05
    #: Number of independent pairs per width; pair p trains seeds 2p (model a) and 2p+1 (model b).
    seeds: int = 2
    device: str = "auto"
    lams: tuple[float, ...] = DEFAULT_LAMS

    def __post_init__(self) -> None:
        _check_profile(self.profile)
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise SpecError(f"seeds={self.seeds!r} is not allowed: expected an integer >= 1 (pairs per width)")
        if not isinstance(self.widths, (tuple, list)) or not self.widths:
            raise SpecError(f"widths={self.widths!r} is not allowed: expected a non-empty list of multipliers > 0")
        object.__setattr__(self, "widths", tuple(self.widths))
        object.__setattr__(self, "lams", check_lams(self.lams))
        if not isinstance(self.device, str):
            raise SpecError(f"device={self.device!r} is not allowed: expected 'auto', 'cpu' or 'cuda'")
        if not isinstance(self.download, bool):
            raise SpecError(f"download={self.download!r} is not allowed: expected true or false")
        for w in self.widths:  # validates every field of every spec
            self.spec(w, 0)

    def spec(self, width: float, seed: int) -> RunSpec:
        """Return the RunSpec of one model at ``width`` with init and data seed ``seed``."""
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root),
            model=ModelSpec(self.arch, width, self.base_width, self.depth if self.arch == "mlp" else None,
                            self.norm, self.bias),
            train=TrainSpec(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum,
                            weight_decay=self.weight_decay, warmup=self.warmup, seed=seed),
        )

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, widths outermost."""
        return [Pair(w, p, self.spec(w, 2 * p), self.spec(w, 2 * p + 1))
                for w in self.widths for p in range(self.seeds)]

    def specs(self) -> list[RunSpec]:
        """Return every run of the sweep."""
        return [s for p in self.pairs() for s in (p.a, p.b)]

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters as plain Python values (for provenance)."""
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @property
    def layers(self) -> int:
        """Return the number L of linear/conv layers on the main path (MLP depth, 9 for VGG11, 20 for ResNet20)."""
        return {"mlp": self.depth, "vgg11": 9, "resnet20": 20}[self.arch]

    def width_sweep(self) -> list[Pair]:
        """Return the sweep's pairs (alias of :meth:`pairs`)."""
        return self.pairs()


def _check_profile(name: Any) -> str:
    if name not in PROFILES:
        raise SpecError(f"profile={name!r} is not allowed: expected one of {', '.join(map(repr, PROFILES))}")
    return name


#: Width-study settings of each profile; fields not named take WidthStudy's defaults (the quick profile).
_WIDTH = {
    "smoke": dict(widths=(0.25, 1.0), epochs=4, seeds=1, lams=(0.0, 0.25, 0.5, 0.75, 1.0)),
    "quick": dict(),
    "paper": dict(dataset="cifar10", arch="vgg11", base_width=64, norm="batch",
                  widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), epochs=100, seeds=3, lr=0.05, bias=True),
}
#: In the paper profile, choosing an architecture also picks its data set and recipe.
_PAPER_ARCH = {
    "mlp": dict(dataset="mnist", base_width=512, depth=4, norm="none", bias=False, epochs=60,
                widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)),
    "vgg11": dict(),
    "resnet20": dict(base_width=16, widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)),
}


def width_study(profile: str = "quick", **overrides: Any) -> WidthStudy:
    """Return the validated width study of ``profile``; overrides that are None keep the profile's value."""
    _check_profile(profile)
    allowed = {f.name for f in fields(WidthStudy)} - {"profile"}
    unknown = set(overrides) - allowed
    if unknown:
        raise SpecError(f"unknown parameter(s) {sorted(unknown)}: expected some of {sorted(allowed)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    values: dict[str, Any] = dict(_WIDTH[profile])
    if profile == "paper":
        arch = given.get("arch", values.get("arch"))
        if arch in _PAPER_ARCH:
            values.update(_PAPER_ARCH[arch])
    values.update(given)
    if "arch" in given and "base_width" not in given and profile != "paper":
        from .specs import BASE_WIDTHS

        values["base_width"] = BASE_WIDTHS.get(given["arch"], 64)
    if values.get("arch", "mlp") != "mlp":
        values["depth"] = None
    _check_types(values)
    return WidthStudy(profile=profile, **values)


_TYPES = {"dataset": str, "data_root": str, "arch": str, "norm": str, "device": str, "bias": bool,
          "download": bool, "base_width": int, "depth": int, "epochs": int, "batch_size": int, "seeds": int,
          "weight_decay": float, "lr": float, "momentum": float, "warmup": float}


def _check_types(values: dict[str, Any]) -> None:
    for k, v in values.items():
        t = _TYPES.get(k)
        if t is None or v is None:
            continue
        ok = isinstance(v, bool) if t is bool else (
            isinstance(v, t) and not isinstance(v, bool) if t is not float
            else isinstance(v, (int, float)) and not isinstance(v, bool))
        if not ok:
            raise SpecError(f"{k}={v!r} is not allowed: expected a value of type {t.__name__}")
    for k in ("widths", "lams"):
        v = values.get(k)
        if v is not None and (isinstance(v, (str, bytes)) or not hasattr(v, "__iter__")):
            raise SpecError(f"{k}={v!r} is not allowed: expected a list of numbers, e.g. [0.5, 2]")
        if v is not None and any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
            raise SpecError(f"{k}={v!r} is not allowed: expected a list of numbers, e.g. [0.5, 2]")


@dataclass(frozen=True)
class Part:
    """A part of the book: its notebooks in execution order, its study, and its time budget per profile."""

    name: str
    title: str
    notebooks: tuple[str, ...]
    #: ``study(profile, **overrides)`` returns the validated study config (a dataclass).
    study: Callable[..., Any]
    config: type
    budget_s: dict[str, float] = field(default_factory=dict)

    def resolve(self, profile: str, params: dict[str, Any]) -> Any:
        """Return the study for ``profile``, taking from ``params`` only the study's own fields."""
        keys = {f.name for f in fields(self.config)} - {"profile"}
        return self.study(profile, **{k: v for k, v in params.items() if k in keys})


#: The book's parts, in execution order. Budgets are the quick profile's estimates (DESIGN.md §5).
PARTS: dict[str, Part] = {
    "width": Part("width", "Width and linear mode connectivity",
                  ("width_accuracy", "loss_barrier_calibration"), width_study, WidthStudy,
                  {"smoke": 30, "quick": 480, "paper": 7 * 24 * 3600}),
}


def part_of(notebook: str) -> Part:
    """Return the part a notebook belongs to, or raise SpecError naming the notebooks that exist."""
    for part in PARTS.values():
        if notebook in part.notebooks:
            return part
    raise SpecError(f"notebook {notebook!r} does not exist: expected one of {', '.join(all_notebooks())}")


def all_notebooks() -> list[str]:
    """Return every notebook of the book in execution order."""
    return [nb for part in PARTS.values() for nb in part.notebooks]


def part_specs(profile: str, part: str, **overrides: Any) -> list[RunSpec]:
    """Return every run a part trains at ``profile`` (the input of ``lmcbook sweep``)."""
    if part not in PARTS:
        raise SpecError(f"part={part!r} is not allowed: expected one of {', '.join(map(repr, PARTS))}")
    return PARTS[part].study(profile, **overrides).specs()


def profile(name: str = "quick") -> WidthStudy:
    """Return the width study of profile ``name`` (``profile("quick").width_sweep()`` lists its pairs)."""
    return width_study(name)


__all__ = ["PROFILES", "PARTS", "Pair", "Part", "WidthStudy", "all_notebooks", "part_of", "part_specs",
           "profile", "width_study"]
