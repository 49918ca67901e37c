"""The noise paper's studies: spawn-and-merge pairs over the optimizer's settings, and the regime map.

Every field states, on its line, its quick value, what the smoke and paper profiles run instead, and its check
(:func:`lmcbook.profiles.param`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from .noise import CHILD_SEED_BASE, spawn_pair, spawn_step
from .specs import DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec, check_choice, check_device, check_scheduler
from .studies import (
    FRACTION_CLOSED,
    LR_FLOOR,
    MAX_REPLICATES,
    SPAWN_FRACTION,
    Study,
    check_lr_floors,
    check_spawn_fractions,
    param,
)

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

