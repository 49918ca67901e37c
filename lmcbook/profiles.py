"""Named parameter sets (``smoke``, ``quick``, ``paper``) and the book's parts.

This module is the single source of every part's specs, notebooks and time
budget.  A notebook's ``parameters`` cell holds ``profile`` plus overrides that
default to ``None``; the part's study function (for example :func:`width_study`)
fills every ``None`` from the profile and validates the result before any
compute starts.

- ``smoke``: each notebook runs in seconds; the tests use it.
- ``quick`` (the default of ``make book``): CPU only, embedded data sets.
- ``paper``: GPU, torchvision data sets, the papers' settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .metrics import DEFAULT_LAMS
from .specs import BASE_WIDTHS, DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec, check_lams

PROFILES = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class Pair:
    """Two independently trained runs (a, b) with one model spec; ``seed`` numbers the pair."""

    width: float
    seed: int
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


def _check_profile(name: Any) -> str:
    if name not in PROFILES:
        raise SpecError(f"profile={name!r} is not allowed: expected one of {', '.join(map(repr, PROFILES))}")
    return name


def _check_numbers(name: str, v: Any) -> tuple:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise SpecError(f"{name}={v!r} is not allowed: expected a list of numbers, e.g. [0.5, 2]")
    v = tuple(v)
    if not v or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
        raise SpecError(f"{name}={v!r} is not allowed: expected a non-empty list of numbers, e.g. [0.5, 2]")
    return v


@dataclass(frozen=True)
class Recipe:
    """The training recipe shared by the width and depth studies: data, model family, SGD, seeds."""

    profile: str = "quick"
    dataset: str = "digits"
    data_root: str | None = None
    download: bool = False
    arch: str = "mlp"
    base_width: int = 64
    depth: int | None = 4
    norm: str = "none"
    bias: bool = False
    weight_decay: float = 3e-3
    epochs: int = 60
    batch_size: int = 128
    lr: float = 0.05
    momentum: float = 0.9
    warmup: float = 0.05
    #: Number of independent pairs per cell; pair p trains seeds 2p (model a) and 2p+1 (model b).
    seeds: int = 2
    device: str = "auto"
    lams: tuple[float, ...] = DEFAULT_LAMS
    #: Where missing runs train: None (in the notebook's process), "local:N" or "tcp://HOST:PORT" (Dask).
    scheduler: str | None = None

    def __post_init__(self) -> None:
        from .sweep import check_scheduler

        _check_profile(self.profile)
        check_scheduler(self.scheduler)
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise SpecError(f"seeds={self.seeds!r} is not allowed: expected an integer >= 1 (pairs per cell)")
        object.__setattr__(self, "lams", check_lams(_check_numbers("lams", self.lams)))
        if not isinstance(self.device, str):
            raise SpecError(f"device={self.device!r} is not allowed: expected 'auto', 'cpu' or 'cuda'")
        if not isinstance(self.download, bool):
            raise SpecError(f"download={self.download!r} is not allowed: expected true or false")

    def spec(self, width: float, seed: int, depth: int | None = None) -> RunSpec:
        """Return the RunSpec of one model (init and data seed ``seed``), at ``depth`` if given."""
        depth = depth if depth is not None else self.depth
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root),
            model=ModelSpec(self.arch, width, self.base_width, depth if self.arch == "mlp" else None,
                            self.norm, self.bias),
            train=TrainSpec(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum,
                            weight_decay=self.weight_decay, warmup=self.warmup, seed=seed),
        )

    def pair(self, width: float, p: int, depth: int | None = None) -> Pair:
        """Return pair number ``p`` at ``width`` (and ``depth``)."""
        return Pair(width, p, self.spec(width, 2 * p, depth), self.spec(width, 2 * p + 1, depth))

    def pairs(self) -> list[Pair]:
        """Return every pair of the study."""
        raise NotImplementedError

    def specs(self) -> list[RunSpec]:
        """Return every run of the study."""
        return [s for p in self.pairs() for s in (p.a, p.b)]

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters as plain Python values (for provenance)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @property
    def layers(self) -> int:
        """Return the number L of linear/conv layers on the main path (MLP depth, 9 for VGG11, 20 for ResNet20)."""
        return {"mlp": self.depth, "vgg11": 9, "resnet20": 20}[self.arch]


@dataclass(frozen=True)
class WidthStudy(Recipe):
    """The width sweep: pairs of independently trained models at each width multiplier."""

    widths: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "widths", _check_numbers("widths", self.widths))
        for w in self.widths:  # validates every field of every spec
            self.spec(w, 0)

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, widths outermost."""
        return [self.pair(w, p) for w in self.widths for p in range(self.seeds)]

    def width_sweep(self) -> list[Pair]:
        """Return the sweep's pairs (alias of :meth:`pairs`)."""
        return self.pairs()


@dataclass(frozen=True)
class ControlsStudy(WidthStudy):
    """The width sweep plus its controls: a weak-weight-decay twin, random permutations, weight matching."""

    weak_weight_decay: float = 1e-4
    #: Random permutations drawn per pair.
    draws: int = 5
    #: Iteration cap of weight matching's coordinate descent.
    match_iterations: int = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("draws", "match_iterations"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"{name}={v!r} is not allowed: expected an integer >= 1")
        w = self.weak_weight_decay
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0:
            raise SpecError(f"weak_weight_decay={w!r} is not allowed: expected a number >= 0")

    def weak(self) -> ControlsStudy:
        """Return the same sweep trained with the weak weight decay."""
        return replace(self, weight_decay=self.weak_weight_decay)

    def specs(self) -> list[RunSpec]:
        """Return every run: the sweep at weight_decay and at weak_weight_decay."""
        return WidthStudy.specs(self) + WidthStudy.specs(self.weak())


@dataclass(frozen=True)
class RegimeStudy(WidthStudy):
    """The training-length axis: the width sweep at each length in ``regimes`` (epochs) and each weight decay.

    Widths above ``long_max_width`` train only at the shortest length (the time
    budget's cut, which the page states); the widest multiplier (or ``None`` in a profile's
    table) trains every width at every length.
    The fields ``epochs`` and ``weight_decay`` are unused: ``regimes`` and
    ``weight_decays`` replace them.
    """

    regimes: tuple[int, ...] = (60, 200, 600)
    weight_decays: tuple[float, ...] = (1e-4, 3e-3)
    long_max_width: float | None = 4.0

    def __post_init__(self) -> None:
        regimes = _check_numbers("regimes", self.regimes)
        if any(isinstance(e, float) and not e.is_integer() or e < 1 for e in regimes) or len(set(regimes)) < 2:
            raise SpecError(f"regimes={list(regimes)!r} is not allowed: expected at least two different training "
                            "lengths in epochs (integers >= 1)")
        object.__setattr__(self, "regimes", tuple(sorted(int(e) for e in regimes)))
        decays = _check_numbers("weight_decays", self.weight_decays)
        if any(d < 0 for d in decays):
            raise SpecError(f"weight_decays={list(decays)!r} is not allowed: expected numbers >= 0")
        object.__setattr__(self, "weight_decays", tuple(sorted(float(d) for d in decays)))
        w = self.long_max_width
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0):
            raise SpecError(f"long_max_width={w!r} is not allowed: expected a width multiplier > 0, or None")
        super().__post_init__()
        if not self.widths_at(self.regimes[-1]):
            raise SpecError(f"long_max_width={w!r} is not allowed: it cuts every width of {list(self.widths)} at "
                            f"the longer lengths; expected a multiplier >= {min(self.widths)}")

    def widths_at(self, epochs: int) -> tuple[float, ...]:
        """Return the widths trained at ``epochs``: all at the shortest length, those up to long_max_width above."""
        if epochs == self.regimes[0] or self.long_max_width is None:
            return self.widths
        return tuple(w for w in self.widths if w <= self.long_max_width)

    def cut_widths(self) -> tuple[float, ...]:
        """Return the widths trained only at the shortest length."""
        return tuple(w for w in self.widths if w not in self.widths_at(self.regimes[-1]))

    def cell(self, epochs: int, weight_decay: float) -> WidthStudy:
        """Return the width sweep of one (length, weight decay) cell."""
        keep = {f.name: getattr(self, f.name) for f in fields(WidthStudy)}
        return WidthStudy(**{**keep, "epochs": epochs, "weight_decay": weight_decay,
                             "widths": self.widths_at(epochs)})

    def cells(self) -> list[WidthStudy]:
        """Return every (length, weight decay) cell, shortest length first."""
        return [self.cell(e, wd) for e in self.regimes for wd in self.weight_decays]

    def pairs(self) -> list[Pair]:
        """Return every pair of every cell."""
        return [p for c in self.cells() for p in c.pairs()]


@dataclass(frozen=True)
class DepthStudy(Recipe):
    """The depth sweep: bias-free MLPs of L = 2..6 linear layers at one width."""

    width: float = 8.0
    depths: tuple[int, ...] = (2, 3, 4, 5, 6)
    seeds: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.arch != "mlp":
            raise SpecError(f"arch={self.arch!r} is not allowed in the depth study: expected 'mlp'")
        depths = _check_numbers("depths", self.depths)
        if any(not float(d).is_integer() or d < 2 for d in depths):
            raise SpecError(f"depths={list(depths)!r} is not allowed: expected integers >= 2")
        object.__setattr__(self, "depths", tuple(int(d) for d in depths))
        for d in self.depths:
            self.spec(self.width, 0, d)

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, depths outermost."""
        return [self.pair(self.width, p, d) for d in self.depths for p in range(self.seeds)]


@dataclass(frozen=True)
class Cell:
    """One optimizer setting of the noise study, and where children are spawned."""

    lr: float
    batch_size: int
    momentum: float
    weight_decay: float
    norm: str = "none"
    augment: bool = False
    spawn_fraction: float = 0.5


@dataclass(frozen=True)
class NoiseStudy:
    """The optimizer-noise study: spawn-and-merge over learning rate, batch size, momentum, weight decay,
    augmentation and spawn point, plus the learning-rate-pair matrix and task arithmetic."""

    profile: str = "quick"
    dataset: str = "mnist1d"
    data_root: str | None = None
    download: bool = False
    base_width: int = 64
    width: float = 2.0
    depth: int = 4
    bias: bool = False
    #: Every run takes this many steps whatever its batch size (the paper's fixed-steps protocol).
    steps: int = 2000
    warmup: float = 0.05
    lrs: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2)
    batch_sizes: tuple[int, ...] = (32, 64, 128, 256)
    momentum: float = 0.9
    weight_decay: float = 5e-4
    #: Where the full η × B grid spawns its children, as a fraction of training.
    spawn_fraction: float = 0.5
    #: Spawn points swept on one row of the grid (batch size ``row_batch_size``).
    spawn_fractions: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75)
    row_batch_size: int = 128
    momenta: tuple[float, ...] = (0.0, 0.5, 0.9)
    component_lrs: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2)
    weight_decays: tuple[float, ...] = (0.0, 5e-4, 5e-3)
    component_lr: float = 0.05
    pair_lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    finetune_steps: int = 500
    finetune_lrs: tuple[float, ...] = (0.01, 0.03, 0.1)
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
    ties_keep: float = 0.2
    seeds: int = 2
    device: str = "auto"
    #: Where missing runs train: None (in the notebook's process), "local:N" or "tcp://HOST:PORT" (Dask).
    scheduler: str | None = None

    def __post_init__(self) -> None:
        from .sweep import check_scheduler

        _check_profile(self.profile)
        check_scheduler(self.scheduler)
        for name in ("lrs", "batch_sizes", "spawn_fractions", "momenta", "component_lrs", "weight_decays",
                     "pair_lrs", "finetune_lrs", "alphas"):
            object.__setattr__(self, name, _check_numbers(name, getattr(self, name)))
        for f in self.spawn_fractions + (self.spawn_fraction,):
            if not 0 < f < 1:
                raise SpecError(f"spawn_fraction={f!r} is not allowed: expected a fraction in (0, 1)")
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise SpecError(f"seeds={self.seeds!r} is not allowed: expected an integer >= 1")
        if not 0 < self.ties_keep <= 1:
            raise SpecError(f"ties_keep={self.ties_keep!r} is not allowed: expected a fraction in (0, 1]")
        for cell in self.grid_cells() + self.component_cells():  # validates every spec
            self.spec(cell, 0)
        self.spec(self.grid_cells()[0], 0).with_train(steps=self.finetune_steps)

    def spec(self, cell: Cell, seed: int, **train) -> RunSpec:
        """Return the full run of one cell (init and data seed ``seed``); spawning cuts it at the cell's fraction."""
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root, augment=cell.augment),
            model=ModelSpec("mlp", self.width, self.base_width, self.depth, cell.norm, self.bias),
            train=TrainSpec(steps=self.steps, batch_size=cell.batch_size, lr=cell.lr, momentum=cell.momentum,
                            weight_decay=cell.weight_decay, warmup=self.warmup, seed=seed, **train),
        )

    def cell(self, lr: float, batch_size: int | None = None, **kw) -> Cell:
        """Return a cell with this study's defaults for everything not given."""
        args = dict(lr=lr, batch_size=batch_size or self.row_batch_size, momentum=self.momentum,
                    weight_decay=self.weight_decay, spawn_fraction=self.spawn_fraction)
        args.update(kw)
        return Cell(**args)

    def grid_cells(self) -> list[Cell]:
        """Return the η × B grid at the grid's spawn point."""
        return [self.cell(lr, b) for b in self.batch_sizes for lr in self.lrs]

    def spawn_cells(self) -> list[Cell]:
        """Return one row of the grid (``row_batch_size``) at every spawn point."""
        return [self.cell(lr, spawn_fraction=f) for f in self.spawn_fractions for lr in self.lrs]

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

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters as plain Python values (for provenance)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def specs(self) -> list[RunSpec]:
        """Return every run the noise notebooks read: the children of every cell and learning-rate pair, and the
        task-arithmetic runs (parents and fine-tuning sources train on the way)."""
        from .experiments import noise_specs

        return noise_specs(self)


@dataclass(frozen=True)
class TheoryStudy:
    """The constructed networks of the theory section: sizes, seed and λ grid."""

    profile: str = "quick"
    depth: int = 4
    hidden: int = 32
    in_features: int = 16
    inputs: int = 256
    seed: int = 0
    lams: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)

    def __post_init__(self) -> None:
        _check_profile(self.profile)
        for name, lo in (("depth", 2), ("hidden", 2), ("in_features", 1), ("inputs", 1), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise SpecError(f"{name}={v!r} is not allowed: expected an integer >= {lo}")
        if self.hidden % 2:
            raise SpecError(f"hidden={self.hidden} is not allowed: expected an even number (two disjoint halves)")
        object.__setattr__(self, "lams", check_lams(_check_numbers("lams", self.lams)))

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters as plain Python values (for provenance)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def specs(self) -> list[RunSpec]:
        """Return the runs this study trains: none (its networks are constructed)."""
        return []


@dataclass(frozen=True)
class SummaryStudy:
    """The pages that read other pages' CSVs (the landing page, the claims scoreboard): only a profile."""

    profile: str = "quick"

    def __post_init__(self) -> None:
        _check_profile(self.profile)

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters (for provenance)."""
        return {"profile": self.profile}

    def specs(self) -> list[RunSpec]:
        """Return the runs these pages train: none."""
        return []


@dataclass(frozen=True)
class TutorialStudy:
    """The own-models tutorial: a user-defined MLP on digits, trained with a plain loop."""

    profile: str = "quick"
    width: int = 256
    epochs: int = 40
    seed: int = 0

    def __post_init__(self) -> None:
        _check_profile(self.profile)
        for name, lo in (("width", 2), ("epochs", 1), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise SpecError(f"{name}={v!r} is not allowed: expected an integer >= {lo}")

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters (for provenance)."""
        return asdict(self)

    def specs(self) -> list[RunSpec]:
        """Return the runs the store trains: none (the tutorial trains its own network)."""
        return []


@dataclass(frozen=True)
class ExplorerStudy:
    """The explorer's initial state: which pair of the width sweep, which λ and which layer."""

    profile: str = "quick"
    dataset: str = "digits"
    width: float | None = None
    seed: int = 0
    lam: float = 0.5
    layer: int | None = None
    interactive: bool = False

    def __post_init__(self) -> None:
        _check_profile(self.profile)
        check_lams([self.lam])
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SpecError(f"seed={self.seed!r} is not allowed: expected an integer >= 0 (a pair number)")
        if self.width is not None and not (isinstance(self.width, (int, float)) and self.width > 0):
            raise SpecError(f"width={self.width!r} is not allowed: expected a width multiplier > 0")
        if not isinstance(self.interactive, bool):
            raise SpecError(f"interactive={self.interactive!r} is not allowed: expected true or false")

    def params(self) -> dict[str, Any]:
        """Return the resolved parameters (for provenance)."""
        return asdict(self)

    def specs(self) -> list[RunSpec]:
        """Return the runs the explorer trains: none (it reads the width sweep's)."""
        return []


#: Settings of each profile per study; fields not named take the dataclass defaults (the quick profile).
_TABLES: dict[type, dict[str, dict[str, Any]]] = {
    WidthStudy: {
        "smoke": dict(widths=(0.25, 1.0), epochs=4, seeds=1, lams=(0.0, 0.25, 0.5, 0.75, 1.0)),
        "quick": dict(),
        "paper": dict(dataset="cifar10", arch="vgg11", base_width=64, norm="batch", bias=True, epochs=100, seeds=3,
                      widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)),
    },
    ControlsStudy: {
        "smoke": dict(widths=(0.25, 1.0), epochs=4, seeds=1, lams=(0.0, 0.25, 0.5, 0.75, 1.0), draws=2,
                      match_iterations=20),
        "quick": dict(),
        "paper": dict(dataset="cifar10", arch="vgg11", base_width=64, norm="batch", bias=True, epochs=100, seeds=3,
                      widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)),
    },
    RegimeStudy: {
        "smoke": dict(widths=(0.25, 1.0), regimes=(4, 8), seeds=1, lams=(0.0, 0.25, 0.5, 0.75, 1.0),
                      long_max_width=None),
        "quick": dict(),
        "paper": dict(dataset="cifar10", arch="vgg11", base_width=64, norm="batch", bias=True, regimes=(100, 300),
                      seeds=3, widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)),
    },
    DepthStudy: {
        "smoke": dict(width=0.25, depths=(2, 3), epochs=4, lams=(0.0, 0.5, 1.0)),
        "quick": dict(),
        "paper": dict(dataset="mnist", base_width=512, width=2.0, epochs=60, seeds=3),
    },
    TheoryStudy: {"smoke": dict(hidden=16, inputs=64), "quick": dict(), "paper": dict(hidden=256, inputs=1024)},
    SummaryStudy: {"smoke": {}, "quick": {}, "paper": {}},
    ExplorerStudy: {"smoke": {}, "quick": {}, "paper": dict(dataset="cifar10")},
    TutorialStudy: {"smoke": dict(width=32, epochs=3), "quick": {}, "paper": dict(width=1024, epochs=60)},
    NoiseStudy: {
        "smoke": dict(dataset="digits", width=0.5, steps=60, lrs=(0.02, 0.05, 0.1), batch_sizes=(32, 128),
                      spawn_fractions=(0.1, 0.5), momenta=(0.0, 0.9), component_lrs=(0.02, 0.05, 0.1),
                      weight_decays=(0.0, 5e-3), pair_lrs=(0.02, 0.1), finetune_steps=20, finetune_lrs=(0.05,),
                      alphas=(0.0, 0.5, 1.0), seeds=1),
        "quick": dict(),
        "paper": dict(dataset="cifar10", steps=20000, base_width=64, width=4.0, seeds=3),
    },
}
#: In the paper profile, choosing an architecture also picks its data set and recipe.
_PAPER_ARCH = {
    "mlp": dict(dataset="mnist", base_width=512, depth=4, norm="none", bias=False, epochs=60,
                widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)),
    "vgg11": dict(),
    "resnet20": dict(base_width=16, widths=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)),
}
_TYPES = {"dataset": str, "data_root": str, "arch": str, "norm": str, "device": str, "bias": bool,
          "download": bool, "base_width": int, "depth": int, "epochs": int, "batch_size": int, "seeds": int,
          "weight_decay": float, "lr": float, "momentum": float, "warmup": float, "width": float,
          "weak_weight_decay": float, "draws": int, "match_iterations": int, "steps": int,
          "spawn_fraction": float, "row_batch_size": int, "component_lr": float, "finetune_steps": int,
          "ties_keep": float, "hidden": int, "in_features": int, "inputs": int, "seed": int, "scheduler": str,
          "lam": float, "layer": int, "interactive": bool, "long_max_width": float}


def _check_types(values: dict[str, Any]) -> None:
    for k, v in values.items():
        t = _TYPES.get(k)
        if t is None or v is None:
            continue
        if t is bool:
            ok = isinstance(v, bool)
        elif t is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        else:
            ok = isinstance(v, t) and not isinstance(v, bool)
        if not ok:
            raise SpecError(f"{k}={v!r} is not allowed: expected a value of type {t.__name__}")


def resolve(cls: type, profile: str = "quick", **overrides: Any) -> Any:
    """Return the study ``cls`` at ``profile``; overrides that are None keep the profile's value."""
    _check_profile(profile)
    allowed = {f.name for f in fields(cls)} - {"profile"}
    unknown = set(overrides) - allowed
    if unknown:
        raise SpecError(f"unknown parameter(s) {sorted(unknown)}: expected some of {sorted(allowed)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    values: dict[str, Any] = dict(_TABLES[cls][profile])
    if issubclass(cls, WidthStudy) and profile == "paper":
        values.update(_PAPER_ARCH.get(given.get("arch", values.get("arch")), {}))
    values.update(given)
    if "arch" in allowed:
        if "arch" in given and "base_width" not in given and profile != "paper":
            values["base_width"] = BASE_WIDTHS.get(given["arch"], 64)
        if values.get("arch", "mlp") != "mlp":
            values["depth"] = None
    _check_types(values)
    return cls(profile=profile, **values)


def width_study(profile: str = "quick", **overrides: Any) -> WidthStudy:
    """Return the validated width study of ``profile``."""
    return resolve(WidthStudy, profile, **overrides)


def control_study(profile: str = "quick", **overrides: Any) -> ControlsStudy:
    """Return the validated controls study (width sweep, weak-weight-decay twin, permutations) of ``profile``."""
    return resolve(ControlsStudy, profile, **overrides)


def noise_study(profile: str = "quick", **overrides: Any) -> NoiseStudy:
    """Return the validated optimizer-noise study of ``profile``."""
    return resolve(NoiseStudy, profile, **overrides)


def summary_study(profile: str = "quick", **overrides: Any) -> SummaryStudy:
    """Return the validated settings of the summary pages (landing page, claims scoreboard)."""
    return resolve(SummaryStudy, profile, **overrides)


def explorer_study(profile: str = "quick", **overrides: Any) -> ExplorerStudy:
    """Return the validated initial state of the explorer."""
    return resolve(ExplorerStudy, profile, **overrides)


def tutorial_study(profile: str = "quick", **overrides: Any) -> TutorialStudy:
    """Return the validated settings of the own-models tutorial."""
    return resolve(TutorialStudy, profile, **overrides)


def regime_study(profile: str = "quick", **overrides: Any) -> RegimeStudy:
    """Return the validated training-regime study (the width sweep at several lengths and weight decays)."""
    return resolve(RegimeStudy, profile, **overrides)


def depth_study(profile: str = "quick", **overrides: Any) -> DepthStudy:
    """Return the validated depth study of ``profile``."""
    return resolve(DepthStudy, profile, **overrides)


def theory_study(profile: str = "quick", **overrides: Any) -> TheoryStudy:
    """Return the validated theory-section settings of ``profile``."""
    return resolve(TheoryStudy, profile, **overrides)


@dataclass(frozen=True)
class Part:
    """A group of notebooks sharing one study: notebooks in execution order, and the time budget per profile."""

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


#: The book's notebook groups, in execution order. Budgets are the quick profile's estimates (DESIGN.md §5).
PARTS: dict[str, Part] = {p.name: p for p in (
    Part("width", "Width and linear mode connectivity", ("width_accuracy", "loss_barrier_calibration"),
         width_study, WidthStudy, {"smoke": 30, "quick": 240, "paper": 7 * 24 * 3600}),
    Part("probes", "Why width works: probes of the width sweep",
         ("lewc", "weak_additivity", "reciprocal_orthogonality", "neuron_overlap", "low_rank"),
         width_study, WidthStudy, {"smoke": 60, "quick": 60, "paper": 3600}),
    Part("depth", "Why width works: the depth sweep", ("lewc_depth",), depth_study, DepthStudy,
         {"smoke": 20, "quick": 90, "paper": 24 * 3600}),
    Part("theory", "Why width works: the theorem", ("theory_lewc",), theory_study, TheoryStudy,
         {"smoke": 15, "quick": 20, "paper": 120}),
    Part("noise", "How the optimizer shapes merging", ("noise_scale", "noise_components", "task_arithmetic"),
         noise_study, NoiseStudy, {"smoke": 60, "quick": 480, "paper": 7 * 24 * 3600}),
    Part("controls", "Controls: weight decay, permutations, weight matching, REPAIR",
         ("weak_weight_decay", "random_permutation", "weight_matching", "llfc_vs_lewc"),
         control_study, ControlsStudy, {"smoke": 60, "quick": 240, "paper": 7 * 24 * 3600}),
    Part("regime", "Why width works: the training regime (after the controls, whose runs it reuses)",
         ("training_regime",), regime_study, RegimeStudy, {"smoke": 30, "quick": 240, "paper": 7 * 24 * 3600}),
    Part("tutorial", "Using lmcbook on your own models", ("own_models",), tutorial_study, TutorialStudy,
         {"smoke": 15, "quick": 30, "paper": 600}),
    Part("explore", "The interactive explorer (reads the width sweep)", ("explore",), explorer_study, ExplorerStudy,
         {"smoke": 15, "quick": 20, "paper": 60}),
    Part("summary", "The landing page and the claims scoreboard (they read the other pages' CSVs: last)",
         ("claims", "overview"), summary_study, SummaryStudy, {"smoke": 20, "quick": 20, "paper": 60}),
)}


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
    """Return every run a part trains at ``profile`` (the input of ``lmcbook train`` and ``sweep``)."""
    if part not in PARTS:
        raise SpecError(f"part={part!r} is not allowed: expected one of {', '.join(map(repr, PARTS))}")
    return PARTS[part].resolve(profile, overrides).specs()


def profile(name: str = "quick") -> WidthStudy:
    """Return the width study of profile ``name`` (``profile("quick").width_sweep()`` lists its pairs)."""
    return width_study(name)
