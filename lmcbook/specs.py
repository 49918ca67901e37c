"""Frozen run specifications, their validation and their stable hash.

A :class:`RunSpec` says what a trained model is meant to be: the data, the
architecture, the training recipe and the seeds.  Its :attr:`RunSpec.id` is a
SHA-256 over the canonical JSON of those fields plus :data:`CODE_VERSION`.
Where the data lives (``DataSpec.root``), the device and the thread count are
provenance: recorded beside a run, never hashed.

The noise paper's spawn-and-merge (after Frankle et al. 2020) is a derivation of specs (the module's last
section): a *parent* is a full RunSpec stopped at ``stop_step`` = k; it keeps the full-length learning-rate
schedule, and its store entry also holds the momentum buffers and the step.  A *child* is
``RunSpec(parent, spawn_step=k, data_seed=...)``: it inherits the weights, the momentum buffers and the schedule
position, and trains to the end with its own batch order (and augmentation draws).  Two children that differ only
in their data seed are merged at λ = ½.  Batch t is a pure function of (data_seed, epoch), so a child with the
parent's own data seed reproduces the uninterrupted run bitwise.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

#: Bumped whenever training semantics change, so that a fixed bug never
#: serves a stale checkpoint from the store.
#: 2: the fused SGD update (same algorithm, other floating-point rounding).
#: 3: stacked children inherit their own parent's momentum buffer (a stack that mixed μ = 0 and μ > 0
#: parents started every child from a fresh buffer).
CODE_VERSION = 3

DATASETS = ("digits", "mnist1d", "mnist", "mnist_standin", "fashion_mnist", "cifar10", "cifar100")
#: Data sets generated or shipped locally (no download, no data_root).
EMBEDDED = ("digits", "mnist1d")
ARCHS = ("mlp", "vgg11", "resnet20")
NORMS = ("none", "batch", "layer")
SCHEDULES = ("linear", "constant")
#: Arithmetic of a run's forward and backward passes: fp32, or bfloat16 autocast (``torch.autocast``) over fp32
#: weights, optimizer and loss accumulation.  Part of the spec, never a hidden switch: it changes results.
PRECISIONS = ("fp32", "bf16")
#: Input transforms that define tasks for task arithmetic (applied to every split).
TRANSFORMS = ("none", "reverse", "negate")

#: Default base width of each architecture (hidden units, first conv, first stage).
BASE_WIDTHS = {"mlp": 64, "vgg11": 64, "resnet20": 16}


class SpecError(ValueError):
    """A parameter is outside its allowed values; the message names both."""


def _fail(name: str, value: Any, allowed: str) -> SpecError:
    return SpecError(f"{name}={value!r} is not allowed: expected {allowed}")


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """Return ``value`` as an int, or raise SpecError naming ``name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _fail(name, value, f"an integer{_range(lo, hi)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise _fail(name, value, f"an integer{_range(lo, hi)}")
    return value


def _range(lo: Any, hi: Any) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo}, {hi}]"
    if lo is not None:
        return f" >= {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""


def check_float(name: str, value: Any, allowed: str, ok=lambda v: True) -> float:
    """Return ``value`` as a finite float for which ``ok`` holds, or raise SpecError naming ``name`` and ``allowed``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, value, allowed)
    value = float(value)
    if not math.isfinite(value) or not ok(value):
        raise _fail(name, value, allowed)
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise SpecError naming ``name`` and the choices."""
    if value not in choices:
        raise _fail(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def check_device(device: object) -> str:
    """Return ``device`` if it names a device ("auto", "cpu", "cuda", "cuda:N" or "mps"), else raise SpecError.

    Only the name is checked: whether that device exists here is :func:`lmcbook.data.resolve_device`'s question."""
    kind, colon, index = device.partition(":") if isinstance(device, str) else ("", "", "")
    bad_index = bool(colon) and not (kind == "cuda" and index.isdigit())
    if device != "auto" and (kind not in ("cpu", "cuda", "mps") or bad_index):
        raise SpecError(f"device={device!r} is not allowed: expected 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
    return device  # type: ignore[return-value]


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` if it is a bool, else raise SpecError naming ``name``."""
    if not isinstance(value, bool):
        raise _fail(name, value, "true or false")
    return value


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class DataSpec:
    """Which data set a run trains on, and whether it is augmented."""

    name: str = "digits"
    #: Where torchvision data sets live. Provenance only: not hashed.
    root: str | None = None
    augment: bool = False
    #: An input transform applied to every split: a task for task arithmetic.
    transform: str = "none"
    #: Let torchvision download a missing data set into ``root``. Provenance only: not hashed.
    download: bool = False

    def __post_init__(self) -> None:
        check_choice("dataset", self.name, DATASETS)
        if self.root is not None and not isinstance(self.root, str):
            raise _fail("data_root", self.root, "a directory path (string) or None")
        check_bool("augment", self.augment)
        check_choice("transform", self.transform, TRANSFORMS)
        check_bool("download", self.download)


@dataclass(frozen=True)
class ModelSpec:
    """Architecture, width multiplier, depth, normalisation and bias."""

    arch: str = "mlp"
    width: float = 1.0
    base_width: int | None = None
    #: Number of linear layers L of the MLP. Fixed (None) for VGG11 and ResNet20.
    depth: int | None = 4
    norm: str = "none"
    bias: bool = False
    #: Factor applied to the initial weights (and biases) of every linear and conv layer after PyTorch's default
    #: initialisation; normalisation layers keep theirs.  1.0 is the default initialisation.
    init_scale: float = 1.0

    def __post_init__(self) -> None:
        check_choice("arch", self.arch, ARCHS)
        _set(self, "width", check_float("width", self.width, "a number > 0", lambda v: v > 0))
        base = BASE_WIDTHS[self.arch] if self.base_width is None else self.base_width
        _set(self, "base_width", check_int("base_width", base, lo=1))
        if self.arch == "mlp":
            _set(self, "depth", check_int("depth", 4 if self.depth is None else self.depth, lo=1))
        elif self.depth is not None:
            raise _fail("depth", self.depth, f"None for arch={self.arch!r} (its depth is fixed)")
        check_choice("norm", self.norm, NORMS)
        check_bool("bias", self.bias)
        _set(self, "init_scale", check_float("init_scale", self.init_scale, "a number > 0", lambda v: v > 0))
        if self.channels < 1:
            raise SpecError(
                f"width={self.width!r} gives round({self.base_width} * {self.width}) = 0 "
                f"channels for arch={self.arch!r}: expected a width >= {0.5 / self.base_width:.4g}"
            )

    @property
    def channels(self) -> int:
        """Return the scaled base width: round(base_width * width)."""
        return int(round(self.base_width * self.width))


#: The longest schedule a run may have, in epochs and in steps: 100 times the paper's longest (ResNet-20, 200 epochs
#: of CIFAR-10 at batch 128, 78,000 steps).  A longer one is a typo (``-p epochs 1e12`` would allocate terabytes).
MAX_EPOCHS = 100_000
MAX_STEPS = 10_000_000


@dataclass(frozen=True)
class TrainSpec:
    """SGD recipe and seeds of one run."""

    epochs: int = 60
    batch_size: int = 128
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 3e-3
    #: Fraction of all steps spent in linear warm-up, then (``schedule="linear"``) linear decay to ``lr_floor``.
    warmup: float = 0.05
    schedule: str = "linear"
    #: Fixed number of steps; overrides ``epochs`` (used by batch-size sweeps).
    steps: int | None = None
    #: Initialisation seed.
    seed: int = 0
    #: Seed of the batch order; defaults to ``seed``.
    data_seed: int | None = None
    #: Seed of the augmentation draws; defaults to ``data_seed``.
    aug_seed: int | None = None
    #: Stop after this many steps, keeping the full-length schedule (a parent).
    stop_step: int | None = None
    #: Where the linear decay ends, as a fraction of the peak learning rate: 0 decays to zero (the default; every run
    #: made before this field existed), 0.1 keeps a tenth of the peak, so the optimizer's noise lives to the end.
    lr_floor: float = 0.0
    #: "fp32" (the default; every run made before this field existed), or "bf16": the forward and backward passes
    #: under bfloat16 autocast, weights and SGD in fp32 (about 2.5 times faster for a 1024-unit MLP on a CPU with
    #: AMX, slow on one without; a lever for long reference runs).
    precision: str = "fp32"
    #: From this step on, the rate decays linearly from the schedule's value there to zero one step past the end:
    #: a continuation annealed from its spawn point (issue 49's N8).  None (the default; every run made before this
    #: field existed) follows the schedule to the end.
    anneal_from: int | None = None

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs, lo=1, hi=MAX_EPOCHS)
        check_choice("precision", self.precision, PRECISIONS)
        check_int("batch_size", self.batch_size, lo=1)
        _set(self, "lr", check_float("lr", self.lr, "a number > 0", lambda v: v > 0))
        _set(self, "momentum", check_float("momentum", self.momentum, "a number in [0, 1)", lambda v: 0 <= v < 1))
        _set(
            self,
            "weight_decay",
            check_float("weight_decay", self.weight_decay, "a number >= 0", lambda v: v >= 0),
        )
        _set(self, "warmup", check_float("warmup", self.warmup, "a fraction in [0, 1)", lambda v: 0 <= v < 1))
        check_choice("schedule", self.schedule, SCHEDULES)
        _set(self, "lr_floor", check_float("lr_floor", self.lr_floor, "a fraction in [0, 1)", lambda v: 0 <= v < 1))
        if self.lr_floor and self.schedule != "linear":
            raise _fail("lr_floor", self.lr_floor, f"0 with schedule={self.schedule!r} (a floor ends a linear decay)")
        if self.steps is not None:
            check_int("steps", self.steps, lo=1, hi=MAX_STEPS)
        check_int("seed", self.seed, lo=0)
        data_seed = self.seed if self.data_seed is None else check_int("data_seed", self.data_seed, lo=0)
        _set(self, "data_seed", data_seed)
        aug_seed = data_seed if self.aug_seed is None else check_int("aug_seed", self.aug_seed, lo=0)
        _set(self, "aug_seed", aug_seed)
        if self.anneal_from is not None:
            check_int("anneal_from", self.anneal_from, lo=0)
            if self.steps is not None and self.anneal_from >= self.steps:
                raise _fail("anneal_from", self.anneal_from, f"an integer in [0, steps={self.steps})")
        if self.stop_step is not None:
            check_int("stop_step", self.stop_step, lo=1)
            if self.steps is not None and self.stop_step > self.steps:
                raise _fail("stop_step", self.stop_step, f"an integer in [1, steps={self.steps}]")


#: Fields that are provenance (where, not what): excluded from the hash.
_PROVENANCE = {"DataSpec": ("root", "download")}
#: Fields added after the first CODE_VERSION, left out of the hash while at these defaults, so
#: that runs made before the field existed keep their ids.  A new field whose default
#: reproduces the old behaviour goes here.
_ADDED_LATER = {"data": {"transform": "none"}, "model": {"init_scale": 1.0},
                "train": {"lr_floor": 0.0, "precision": "fp32", "anneal_from": None}}


@dataclass(frozen=True)
class RunSpec:
    """One trained model: data, model, training recipe, and optionally a parent it was spawned from."""

    data: DataSpec = field(default_factory=DataSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    #: The run this one continues from (spawn-and-merge); None for a run from scratch.
    parent: RunSpec | None = None
    spawn_step: int | None = None
    #: Fine-tuning: start from this run's final weights, with a fresh optimizer and schedule.
    init: RunSpec | None = None

    def __post_init__(self) -> None:
        for name, cls in (("data", DataSpec), ("model", ModelSpec), ("train", TrainSpec)):
            if not isinstance(getattr(self, name), cls):
                raise _fail(name, getattr(self, name), f"a {cls.__name__}")
        if (self.parent is None) != (self.spawn_step is None):
            raise SpecError("parent and spawn_step must be given together (a child run) or both be None")
        if self.parent is not None:
            if not isinstance(self.parent, RunSpec):
                raise _fail("parent", self.parent, "a RunSpec")
            check_int("spawn_step", self.spawn_step, lo=1)
            if self.parent.train.stop_step != self.spawn_step:
                raise _fail(
                    "spawn_step", self.spawn_step, f"the parent's stop_step ({self.parent.train.stop_step})"
                )
            if self.parent.model != self.model:
                raise SpecError("a child run must have the same model spec as its parent")
            if self.parent.data.name != self.data.name:
                raise SpecError("a child run must train on its parent's data set")
            for key in ("batch_size", "epochs", "steps", "warmup", "schedule", "lr_floor"):
                if getattr(self.train, key) != getattr(self.parent.train, key):
                    raise _fail(key, getattr(self.train, key), f"the parent's {key} "
                                f"({getattr(self.parent.train, key)!r}): a child continues the parent's schedule")
            if self.train.anneal_from is not None and self.train.anneal_from < self.spawn_step:
                raise _fail("anneal_from", self.train.anneal_from, f"an integer >= spawn_step={self.spawn_step} (a "
                            "child may anneal from its spawn on, not change what its parent ran)")
            if self.parent.train.anneal_from is not None and self.train.anneal_from != self.parent.train.anneal_from:
                raise _fail("anneal_from", self.train.anneal_from, f"the parent's ({self.parent.train.anneal_from})")
            if self.train.stop_step is not None and self.train.stop_step <= self.spawn_step:
                raise _fail("stop_step", self.train.stop_step, f"an integer > spawn_step={self.spawn_step}")
        if self.init is not None:
            if not isinstance(self.init, RunSpec):
                raise _fail("init", self.init, "a RunSpec (the run to fine-tune from)")
            if self.parent is not None:
                raise SpecError("init and parent are exclusive: fine-tune from a run, or continue one, not both")
            if self.init.model != self.model:
                raise SpecError("a fine-tuned run must have the same model spec as the run it starts from")

    # -- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of every field, provenance included."""
        out = {
            "data": asdict(self.data),
            "model": asdict(self.model),
            "train": asdict(self.train),
        }
        if self.parent is not None:
            out["parent"] = self.parent.to_dict()
            out["spawn_step"] = self.spawn_step
        if self.init is not None:
            out["init"] = self.init.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSpec:
        """Return the RunSpec that ``to_dict`` produced; unknown keys raise SpecError."""
        if not isinstance(d, dict):
            raise _fail("spec", d, "a dict")
        allowed = {"data", "model", "train", "parent", "spawn_step", "init"}
        extra = set(d) - allowed
        if extra:
            raise SpecError(f"unknown RunSpec keys {sorted(extra)}: expected a subset of {sorted(allowed)}")
        parts = {}
        for name, sub in (("data", DataSpec), ("model", ModelSpec), ("train", TrainSpec)):
            raw = d.get(name, {})
            names = {f.name for f in fields(sub)}
            bad = set(raw) - names
            if bad:
                raise SpecError(f"unknown {sub.__name__} keys {sorted(bad)}: expected a subset of {sorted(names)}")
            parts[name] = sub(**raw)
        parent = cls.from_dict(d["parent"]) if d.get("parent") is not None else None
        init = cls.from_dict(d["init"]) if d.get("init") is not None else None
        return cls(**parts, parent=parent, spawn_step=d.get("spawn_step"), init=init)

    def hashed_dict(self) -> dict[str, Any]:
        """Return the fields that define the result (provenance removed)."""
        out = self.to_dict()
        for key in _PROVENANCE["DataSpec"]:
            out["data"].pop(key, None)
        for part, defaults in _ADDED_LATER.items():
            for key, default in defaults.items():
                if out[part].get(key) == default:
                    del out[part][key]
        if self.parent is not None:
            out["parent"] = self.parent.hashed_dict()
        if self.init is not None:
            out["init"] = self.init.hashed_dict()
        return out

    def run_id(self, code_version: int = CODE_VERSION) -> str:
        """Return the 64-hex-digit SHA-256 of the hashed fields and ``code_version``."""
        payload = json.dumps(
            {"spec": self.hashed_dict(), "code_version": code_version}, sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def id(self) -> str:
        """Return the run id at the current :data:`CODE_VERSION`."""
        return self.run_id()

    @property
    def short_id(self) -> str:
        """Return the first 12 hex digits of :attr:`id`, for logs and tables."""
        return self.id[:12]

    def with_train(self, **changes: Any) -> RunSpec:
        """Return a copy with some TrainSpec fields changed."""
        return replace(self, train=replace(self.train, **changes))

    def total_steps(self, n_train: int | None = None) -> int:
        """Return the full schedule's length in steps (a schedule in epochs needs the training-set size)."""
        if self.train.steps is not None:
            return self.train.steps
        if n_train is None:
            raise SpecError("n_train=None is not allowed for a schedule in epochs: pass the training-set size")
        per_epoch = steps_per_epoch(n_train, self.train.batch_size)
        total = self.train.epochs * per_epoch
        if total > MAX_STEPS:
            raise SpecError(f"epochs={self.train.epochs} is not allowed with batch_size={self.train.batch_size} on "
                            f"{n_train} training examples: it gives {total:,} steps; expected at most "
                            f"{MAX_STEPS:,} steps (epochs <= {MAX_STEPS // per_epoch:,})")
        return total


#: The run store's root, when set (else ./runs); a leading ``~`` is expanded and an empty path refused, as for
#: every path lmcbook writes to: ``LMCBOOK_STORE=""`` would otherwise fill the current directory.
STORE_ENV = "LMCBOOK_STORE"


def checked_path(value: str | os.PathLike, name: str) -> Path:
    """Return ``value`` as a Path with ``~`` expanded, or raise SpecError naming ``name`` if it is empty."""
    text = os.fspath(value)
    if not str(text).strip():
        raise SpecError(f"{name}={text!r} is not allowed: expected a directory path (an empty one would write "
                        "into the current directory)")
    return Path(text).expanduser()


def store_root() -> Path:
    """Return the run store's root: $LMCBOOK_STORE, else ./runs."""
    return checked_path(os.environ.get(STORE_ENV, "runs"), STORE_ENV)


def steps_per_epoch(n_train: int, batch_size: int) -> int:
    """Return the number of full batches in one epoch (the last partial batch is dropped)."""
    if batch_size > n_train:
        raise _fail("batch_size", batch_size, f"an integer in [1, {n_train}] (the training-set size)")
    return n_train // batch_size


def check_lams(lams: Any) -> tuple[float, ...]:
    """Return the λ grid as a sorted tuple of floats, or raise if a value is outside [0, 1]."""
    if isinstance(lams, (int, float)):
        lams = [lams]
    try:
        values = [float(v) for v in lams]
    except (TypeError, ValueError):
        raise _fail("lams", lams, "a list of numbers in [0, 1]") from None
    if not values:
        raise _fail("lams", lams, "a non-empty list of numbers in [0, 1]")
    for v in values:
        if not (0.0 <= v <= 1.0):
            raise _fail("lams", v, "numbers in [0, 1]")
    return tuple(sorted(set(values)))


#: The default λ grid: 21 points in [0, 1].
DEFAULT_LAMS = tuple(i / 20 for i in range(21))


def check_scheduler(scheduler: str | None) -> str | None:
    """Return ``scheduler`` if it is None, "local:N" or "tcp://HOST:PORT"; else raise SpecError naming the forms."""
    if scheduler is None or re.fullmatch(r"local:[1-9][0-9]*", scheduler) or re.fullmatch(
            r"(tcp|tls)://[^\s:]+:[0-9]+", scheduler):
        return scheduler
    raise SpecError(f"scheduler={scheduler!r} is not allowed: expected None (in-process), 'local:N' "
                    "(N local worker processes) or 'tcp://HOST:PORT' (a running Dask scheduler)")


# ---- Spawn-and-merge: a parent's and its children's specs ----


#: Offsets that keep children's data seeds apart from any parent's.
CHILD_SEED_BASE = 1000


def spawn_step(spec: RunSpec, fraction: float, n_train: int | None = None) -> int:
    """Return the step k at ``fraction`` of the spec's full schedule (at least 1); ``n_train`` is needed only for a
    schedule in epochs."""
    if not 0 < fraction < 1:
        raise SpecError(f"spawn_fraction={fraction!r} is not allowed: expected a fraction in (0, 1)")
    return max(1, int(round(fraction * spec.total_steps(n_train))))


def parent_spec(spec: RunSpec, k: int) -> RunSpec:
    """Return the parent of a spawn: ``spec`` stopped at step k, with its full-length schedule."""
    return spec.with_train(stop_step=k)


def child_spec(parent: RunSpec, data_seed: int, aug_seed: int | None = None, **train_changes) -> RunSpec:
    """Return a child of ``parent`` with its own batch order (and augmentation draws).

    ``train_changes`` may change what a continuation may change, such as ``lr``
    (the learning-rate-pair study); the schedule's length must stay the parent's.
    """
    if parent.train.stop_step is None:
        raise SpecError("parent has stop_step=None: a parent is a run stopped at its spawn step (parent_spec)")
    train = replace(parent.train, stop_step=None, data_seed=data_seed,
                    aug_seed=data_seed if aug_seed is None else aug_seed, **train_changes)
    return RunSpec(parent.data, parent.model, train, parent=parent, spawn_step=parent.train.stop_step)


def spawn_pair(spec: RunSpec, k: int, pair: int = 0, **train_changes) -> tuple[RunSpec, RunSpec]:
    """Return the two children of one spawn-and-merge pair: same parent, data seeds 1000 + 2·pair and + 1."""
    parent = parent_spec(spec, k)
    base = CHILD_SEED_BASE + 2 * pair
    return (child_spec(parent, base, **train_changes), child_spec(parent, base + 1, **train_changes))
