"""One training loop for every model: SGD with momentum, warm-up then linear decay.

:func:`train_loop` is the only step loop in lmcbook, and it reads top to bottom:
batch order, learning rate, batch and augmentation, forward and loss, SGD step,
and once per epoch the NaN guard, the progress bar and a checkpoint.  What it
trains is a :class:`Stepper`: :class:`ModuleStepper` for one model
(:func:`train`, PyTorch's fused SGD) or :class:`lmcbook.train.StackStepper` for
same-shaped MLPs trained as one stack (:func:`lmcbook.train.train_many`).  So a
feature of the loop (schedule, batches, augmentation, NaN guard, bar, checkpoints)
is one edit for both paths; only a change to the update itself touches the two
Steppers.

Batch t is a pure function of (data_seed, epoch), augmentation a pure function of
(aug_seed, step), and the initial weights a pure function of ``seed``, so on the
CPU two runs at the same thread count give identical weights, and a run stopped at
step k and continued from its saved weights, momentum buffers and step reproduces
the uninterrupted run bitwise.  That is what checkpointing uses:
``train(spec, checkpoint=path)`` writes the state every few epochs and, started
again after a kill, resumes from it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn
from tqdm.auto import tqdm

from .data import Dataset, augment_batch, epoch_batches, load_spec, resolve_device
from .files import atomic_path, provenance, show_progress, training_source_hash
from .models import MLP, build, evaluate
from .specs import RunSpec, SpecError, steps_per_epoch

log = logging.getLogger("lmcbook.train")


class CheckpointWarning(UserWarning):
    """A checkpoint was discarded (damaged, or not this run's): the run trains from the start."""


class DivergedError(FloatingPointError):
    """Training produced a non-finite loss; the message names the run and the step."""

    def __init__(self, run_id: str, step: int, value: float, lr: float) -> None:
        self.run_id, self.step, self.value, self.lr = run_id, step, value, lr
        #: The other runs that diverged in the same call of :meth:`lmcbook.store.RunStore.get_or_train_many`.
        self.others: list[DivergedError] = []
        super().__init__(
            f"run {run_id[:12]} diverged: the training loss was {value} at step {step} "
            f"(learning rate {lr:.4g} at that step). Nothing was stored. Lower lr or raise warmup."
        )


@dataclass
class TrainedRun:
    """A trained model in eval mode, with its spec, history, metrics and provenance."""

    spec: RunSpec
    model: nn.Module
    history: dict[str, Any]
    metrics: dict[str, float]
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Momentum buffers by parameter name, kept for runs that stop early (parents).
    momentum_buffers: dict[str, torch.Tensor] | None = None
    #: Number of optimizer steps taken from the start of the schedule.
    step: int = 0

    @property
    def id(self) -> str:
        """Return the spec's run id."""
        return self.spec.id


def lr_at(step: int, total: int, peak: float, warmup: float, schedule: str, floor: float = 0.0,
          anneal_from: int | None = None) -> float:
    """Return the learning rate at ``step`` (0-based) of a ``total``-step schedule: linear warm-up, then constant, or
    a linear decay from ``peak`` towards ``floor`` × ``peak`` (reached one step past the end); from ``anneal_from``
    on, a linear decay from the schedule's rate there to zero (reached one step past the end)."""
    if anneal_from is not None and step > anneal_from:
        at = lr_at(anneal_from, total, peak, warmup, schedule, floor)
        return at * (total - step) / max(total - anneal_from, 1)
    warm = int(round(warmup * total))
    if step < warm:
        return peak * (step + 1) / warm
    if schedule == "constant":
        return peak
    return peak * (floor + (1 - floor) * (total - step) / max(total - warm, 1))


def init_model(spec: RunSpec, data: Dataset) -> nn.Module:
    """Return the model of ``spec`` initialised from ``spec.train.seed`` (independent of device)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.train.seed)
        model = build(spec.model, data.input_shape, data.num_classes)
    return model.to(data.device)


def check_trainable(spec: RunSpec, data: Dataset) -> int:
    """Return the schedule's total steps, or raise SpecError before any compute if the spec cannot run on ``data``."""
    n = len(data.y_train)
    if spec.train.batch_size > n:
        raise SpecError(f"batch_size={spec.train.batch_size} is not allowed: expected an integer in [1, {n}] "
                        f"(the training-set size of {spec.data.name!r})")
    total = spec.total_steps(n)
    stop = spec.train.stop_step
    if stop is not None and stop > total:
        raise SpecError(f"stop_step={stop} is not allowed: expected an integer in [1, {total}] (the schedule's length)")
    if spec.parent is not None:
        check_trainable(spec.parent, data)
    return total


@dataclass(frozen=True)
class Schedule:
    """Where a run's training starts and stops: the full schedule's length, steps per epoch, first and stop step."""

    total: int
    per_epoch: int
    first: int
    stop: int

    def lr(self, step: int, spec: RunSpec, peak: float | None = None) -> float:
        """Return the learning rate of ``spec`` at ``step`` (at ``peak`` instead of the spec's, if given)."""
        tr = spec.train
        return lr_at(step, self.total, tr.lr if peak is None else peak, tr.warmup, tr.schedule, tr.lr_floor,
                     tr.anneal_from)

    def batches(self, spec: RunSpec, data: Dataset, epoch: int) -> torch.Tensor:
        """Return this epoch's batch order of ``spec``: (steps per epoch, batch size) indices."""
        return epoch_batches(len(data.y_train), spec.train.batch_size, spec.train.data_seed, epoch, data.device)

    def end_of_epoch(self, step: int) -> bool:
        """Return True at the last step of an epoch or of the run: where the loss is checked and reported."""
        return step % self.per_epoch == self.per_epoch - 1 or step == self.stop - 1


def schedule(spec: RunSpec, data: Dataset, start: TrainedRun | None = None) -> Schedule:
    """Return the schedule of ``spec`` on ``data`` (checked first); a child starts at its parent's step."""
    total = check_trainable(spec, data)
    first = start.step if spec.parent is not None and start is not None else 0
    return Schedule(total, steps_per_epoch(len(data.y_train), spec.train.batch_size), first,
                    spec.train.stop_step or total)


def starting_model(spec: RunSpec, data: Dataset, start: TrainedRun | None, init: TrainedRun | None) -> nn.Module:
    """Return the model a run starts from: its initialisation, a child's parent weights or a fine-tuning source's."""
    model = init_model(spec, data)
    if spec.parent is not None:
        if start is None or start.spec.id != spec.parent.id:
            raise SpecError("a child run needs start=<the parent's TrainedRun> (RunStore.get_or_train passes it)")
        model.load_state_dict(start.model.state_dict())
    if spec.init is not None:
        if init is None or init.spec.id != spec.init.id:
            raise SpecError("a fine-tuning run needs init=<the TrainedRun it starts from> "
                            "(RunStore.get_or_train passes it)")
        model.load_state_dict(init.model.state_dict())
    return model


def keeps_momentum(spec: RunSpec) -> bool:
    """Return True for a run whose momentum buffers are stored: one that stops early (a parent), with momentum."""
    return spec.train.stop_step is not None and spec.train.momentum > 0


def divergence(spec: RunSpec, losses: torch.Tensor, sched: Schedule) -> DivergedError | None:
    """Return the error naming the first step whose loss (``losses[t - first]``) is not finite, or None."""
    bad = (~torch.isfinite(losses)).nonzero()
    if not len(bad):
        return None
    step = int(bad[0]) + sched.first
    return DivergedError(spec.id, step, float(losses[step - sched.first]), sched.lr(step, spec))


def finish(spec: RunSpec, model: nn.Module, losses: torch.Tensor, sched: Schedule, data: Dataset,
           momentum_buffers: dict[str, torch.Tensor] | None, **provenance_extra: Any) -> TrainedRun:
    """Return the finished run: the model in eval mode, its history, metrics on every split and provenance.

    Momentum buffers are kept only for runs that stop early with momentum (parents).
    """
    model.eval()
    history = {"loss": losses.cpu().tolist(), "first_step": sched.first, "steps_per_epoch": sched.per_epoch,
               "total_steps": sched.total}
    metrics = {}
    for split in ("train", "cal", "test"):
        ev = evaluate(model, *data.split(split))
        metrics[f"{split}_acc"], metrics[f"{split}_loss"] = ev.acc, ev.loss
    prov = provenance(data.device)
    prov.update(steps=sched.stop - sched.first, precision=spec.train.precision, **provenance_extra)
    return TrainedRun(spec, model, history, metrics, prov, momentum_buffers if keeps_momentum(spec) else None,
                      sched.stop)


#: File name of a run's checkpoint when ``checkpoint`` names a directory: ``<run id>`` + this suffix.
CHECKPOINT_SUFFIX = ".ckpt.safetensors"
#: Key of the JSON metadata in the safetensors header, and the format version it holds.
_CKPT_KEY, _CKPT_FORMAT = "lmcbook_checkpoint", 2


def tensors_sha(tensors: dict[str, torch.Tensor]) -> str:
    """Return the SHA-256 of named tensors: every name, dtype, shape and byte, in name order (a checkpoint's own
    checksum, kept in its header)."""
    h = hashlib.sha256()
    for k in sorted(tensors):
        t = tensors[k].detach().cpu().contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def checkpoint_path(checkpoint: str | Path, spec: RunSpec) -> Path:
    """Return the checkpoint file of ``spec`` at ``checkpoint``: ``<dir>/<run id>.ckpt.safetensors`` for an
    existing directory, else ``checkpoint`` itself."""
    path = Path(checkpoint)
    return path / f"{spec.id}{CHECKPOINT_SUFFIX}" if path.is_dir() else path


def remove_checkpoint(checkpoint: str | Path, spec: RunSpec | None = None) -> None:
    """Remove a run's checkpoint file and any temporary file a killed write left next to it; a no-op if none.

    ``checkpoint`` is what was passed to :func:`train`; when it names a directory, ``spec`` says whose
    checkpoint to remove (a directory itself is never removed).  Call it once the run is safely stored.
    """
    path = Path(checkpoint)
    if path.is_dir():
        if spec is None:
            raise ValueError(f"{path} is a directory: pass spec= to name the run whose checkpoint to remove")
        path = checkpoint_path(path, spec)
    path.unlink(missing_ok=True)
    if path.parent.is_dir():
        for p in path.parent.iterdir():
            if p.name.startswith(f".{path.name}.") and p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)


def _write_checkpoint(path: Path, spec: RunSpec, model: nn.Module, opt: torch.optim.Optimizer,
                      params: dict[str, nn.Parameter], losses: torch.Tensor, step: int, sched: Schedule) -> None:
    """Write the training state after ``step - 1`` atomically: a temporary file in the same directory, fsync,
    then ``os.replace`` (a kill at any point leaves either the old checkpoint or the new one)."""
    tensors = {f"model/{k}": v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    for name, p in params.items():
        if (buf := opt.state[p].get("momentum_buffer")) is not None:
            tensors[f"momentum/{name}"] = buf.detach().cpu().contiguous().clone()
    tensors["losses"] = losses[: step - sched.first].detach().cpu().clone()
    meta = {"format": _CKPT_FORMAT, "run_id": spec.id, "source_hash": training_source_hash(), "step": step,
            "first": sched.first, "stop": sched.stop, "total": sched.total, "sha256": tensors_sha(tensors)}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={_CKPT_KEY: json.dumps(meta)})


def _read_checkpoint(path: Path, spec: RunSpec, model: nn.Module, params: dict[str, nn.Parameter],
                     sched: Schedule) -> tuple[int, dict[str, torch.Tensor], dict[str, torch.Tensor],
                                               torch.Tensor] | None:
    """Return (step, model state, momentum buffers, losses) of a valid checkpoint of this run at ``path``, else
    None; anything but a missing file is logged as a warning.  Nothing is changed: the caller applies the state."""
    if not path.exists():
        return None
    why = None
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {})[_CKPT_KEY])
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # any unreadable file is ignored, whatever the reason
        why = f"it is unreadable ({type(e).__name__}: {e})"
    if why is None:
        if not isinstance(meta, dict) or meta.get("format") != _CKPT_FORMAT:
            why = "it is not an lmcbook checkpoint of this format"
        elif meta.get("run_id") != spec.id:
            why = f"it belongs to run {str(meta.get('run_id'))[:12]}"
        elif meta.get("source_hash") != training_source_hash():
            why = "it was written by other lmcbook training code (the training modules' source hash differs)"
        elif (meta.get("first"), meta.get("stop"), meta.get("total")) != (sched.first, sched.stop, sched.total):
            why = "its schedule differs from this run's"
        elif not isinstance(meta.get("step"), int) or not sched.first < meta["step"] <= sched.stop:
            why = f"its step {meta.get('step')!r} is outside this run's steps ({sched.first}, {sched.stop}]"
        elif meta.get("sha256") != tensors_sha(tensors):
            why = "it is damaged (its contents do not match the SHA-256 in its header)"
    if why is None:
        step = meta["step"]
        state = {k.removeprefix("model/"): v for k, v in tensors.items() if k.startswith("model/")}
        bufs = {k.removeprefix("momentum/"): v for k, v in tensors.items() if k.startswith("momentum/")}
        losses = tensors.get("losses")
        own = model.state_dict()
        if state.keys() != own.keys() or any(state[k].shape != own[k].shape or state[k].dtype != own[k].dtype
                                               for k in own):
            why = "its model state does not fit this run's model"
        elif not bufs.keys() <= params.keys() or any(bufs[k].shape != params[k].shape or
                                                      bufs[k].dtype != params[k].dtype for k in bufs):
            why = "its momentum buffers do not fit this run's parameters"
        elif losses is None or losses.shape != (step - sched.first,):
            why = "its loss history does not fit its step"
    if why is not None:
        msg = f"discarded checkpoint {path} of run {spec.short_id}: {why}; training from the start"
        warnings.warn(msg, CheckpointWarning, stacklevel=3)
        log.warning(msg)
        path.unlink(missing_ok=True)
        return None
    return step, state, bufs, losses


def optimizer(spec: RunSpec, model: nn.Module, start: TrainedRun | None, dev: torch.device) -> torch.optim.SGD:
    """Return the run's fused SGD; a child with momentum starts from its parent's momentum buffers."""
    tr, params = spec.train, dict(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=tr.lr, momentum=tr.momentum, weight_decay=tr.weight_decay,
                          fused=dev.type in ("cpu", "cuda"))  # one pass per tensor: fastest on both
    if spec.parent is not None and tr.momentum > 0 and start.momentum_buffers:
        for name, buf in start.momentum_buffers.items():
            opt.state[params[name]]["momentum_buffer"] = buf.detach().clone().to(dev)
    return opt


def batch(specs: list[RunSpec], data: Dataset, rows: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return step ``step``'s inputs (augmented, as float32), (K, B, ...), and labels, (K, B), of the K members
    ``specs`` from their training rows ``rows``, (K, B): member j's draws are a pure function of its aug_seed."""
    xb, yb = data.x_train[rows], data.y_train[rows]
    if specs[0].data.augment:  # augment, then cast: a shift is exact in the stored dtype (fp16 on CUDA)
        shifted = [augment_batch(xb[j], s.data.name, s.train.aug_seed, step) for j, s in enumerate(specs)]
        xb = shifted[0][None] if len(shifted) == 1 else torch.stack(shifted)
    return xb.float(), yb


def resume(checkpoint: str | Path | None, every: int, spec: RunSpec, model: nn.Module, opt: torch.optim.Optimizer,
           losses: torch.Tensor, sched: Schedule) -> tuple[Path | None, int, dict[str, Any]]:
    """Restore a valid checkpoint of this run, if there is one; return (its path, the first step to take, the
    provenance to add).

    The checkpoint holds the weights, momentum buffers, losses and next step (one
    safetensors file; run id, the training modules' source hash
    (``lmcbook.files.training_source_hash``) and schedule as JSON in its header, never
    pickle), with the SHA-256 of its tensors in that header.  Only one of this run id
    written by these training modules, whose contents match its SHA-256, is used; any other
    (a damaged one included) is discarded with a ``CheckpointWarning`` and deleted.  On the CPU at the
    same thread count the resumed run equals the uninterrupted run bitwise; its provenance adds
    ``resumed_from_step``.
    """
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"checkpoint_every={every!r} is not allowed: expected an integer >= 1")
    ckpt = None if checkpoint is None else checkpoint_path(checkpoint, spec)
    params = dict(model.named_parameters())
    if ckpt is None or (saved := _read_checkpoint(ckpt, spec, model, params, sched)) is None:
        return ckpt, sched.first, {}
    first, state, bufs, saved_losses = saved
    model.load_state_dict(state)  # copies into the existing tensors: their device and memory format stay
    for name, buf in bufs.items():
        p = params[name]
        opt.state[p]["momentum_buffer"] = torch.empty_like(p, memory_format=torch.preserve_format).copy_(buf)
    losses[: first - sched.first] = saved_losses.to(losses.device)
    log.info("run %s resumed from its checkpoint %s at step %d of %d", spec.short_id, ckpt, first, sched.stop)
    return ckpt, first, {"resumed_from_step": first}


class Stepper(Protocol):
    """What :func:`train_loop` needs of the K models it trains together (its *members*, one spec each).

    Two implementations: :class:`ModuleStepper` (one module, PyTorch's fused SGD) and
    :class:`lmcbook.train.StackStepper` (same-shaped MLPs stacked on a leading axis).
    """

    specs: list[RunSpec]

    def set_lr(self, sched: Schedule, step: int) -> None:
        """Set every member's learning rate to its schedule's at ``step``."""

    def loss(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """Return the members' training losses on a batch from :func:`batch`: shape () for one module, else (K,)."""

    def step(self, loss: torch.Tensor) -> None:
        """Back-propagate ``loss`` (from :meth:`loss`) and take one SGD step for every member."""

    def diverged(self, losses: torch.Tensor, sched: Schedule) -> bool:
        """Check the losses so far, per member; raise DivergedError, or return True once no member can go on."""

    def momentum_buffers(self, member: int) -> dict[str, torch.Tensor]:
        """Return a copy of member ``member``'s momentum buffers by parameter name (none before the first step)."""

    def save(self, path: Path, losses: torch.Tensor, step: int, sched: Schedule) -> None:
        """Write the training state before ``step`` to the checkpoint ``path`` (see :func:`resume`)."""


class ModuleStepper:
    """The :class:`Stepper` of one module: PyTorch's fused SGD; bf16 autocast if ``amp``; channels_last inputs if
    ``channels_last`` (convolutions on CUDA)."""

    def __init__(self, spec: RunSpec, model: nn.Module, opt: torch.optim.Optimizer, amp: bool = False,
                 channels_last: bool = False) -> None:
        self.specs, self.model, self.opt = [spec], model, opt
        self.params = dict(model.named_parameters())
        self.amp, self.channels_last = amp, channels_last
        self.device_type = next(iter(self.params.values())).device.type
        model.train()

    def set_lr(self, sched: Schedule, step: int) -> None:
        """Set the optimizer's learning rate to the schedule's at ``step``."""
        for g in self.opt.param_groups:
            g["lr"] = sched.lr(step, self.specs[0])

    def loss(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """Return the mean cross-entropy of the model on the batch (its one member's slice)."""
        x = xb[0].contiguous(memory_format=torch.channels_last) if self.channels_last else xb[0]
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.amp):
            return F.cross_entropy(self.model(x), yb[0])

    def step(self, loss: torch.Tensor) -> None:
        """Back-propagate ``loss`` and take the optimizer's step."""
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def diverged(self, losses: torch.Tensor, sched: Schedule) -> bool:
        """Raise the DivergedError of the first non-finite loss, if any; else return False."""
        if (err := divergence(self.specs[0], losses, sched)) is not None:
            raise err
        return False

    def momentum_buffers(self, member: int = 0) -> dict[str, torch.Tensor]:
        """Return a copy of the optimizer's momentum buffers by parameter name."""
        return {name: self.opt.state[p]["momentum_buffer"].detach().clone() for name, p in self.params.items()
                if "momentum_buffer" in self.opt.state[p]}

    def save(self, path: Path, losses: torch.Tensor, step: int, sched: Schedule) -> None:
        """Write the weights, momentum buffers and losses before ``step`` to ``path`` atomically."""
        _write_checkpoint(path, self.specs[0], self.model, self.opt, self.params, losses, step, sched)


def _epoch_rows(specs: list[RunSpec], data: Dataset, sched: Schedule, epoch: int) -> torch.Tensor:
    """Return the members' batch orders of ``epoch``: (K, steps per epoch, batch size) indices."""
    orders = [sched.batches(s, data, epoch) for s in specs]
    return orders[0][None] if len(orders) == 1 else torch.stack(orders)


def train_loop(stepper: Stepper, data: Dataset, sched: Schedule, losses: torch.Tensor, first: int | None = None,
               progress: bool | None = None, checkpoint: Path | None = None, checkpoint_every: int = 1,
               checkpoint_seconds: float = 0.0) -> float:
    """Train ``stepper``'s members from step ``first`` (default ``sched.first``) to ``sched.stop``; return the
    seconds it took.  The one training loop of lmcbook: a training feature is one edit here.

    Step t's loss goes to ``losses[t - sched.first]`` ((steps,) for one module, (steps, K)
    for K members).  Per step: batch order, learning rate, batch and augmentation
    (:func:`batch`), forward and loss, SGD step.  At the end of every epoch (one sync):
    the NaN guard (:meth:`Stepper.diverged`; the loop stops once no member can go on),
    the progress bar and, if ``checkpoint`` is given, a checkpoint every
    ``checkpoint_every`` epochs at least ``checkpoint_seconds`` apart (never at the last step).
    """
    first = sched.first if first is None else first
    specs = stepper.specs
    desc = f"train {specs[0].short_id}" if len(specs) == 1 else f"train {len(specs)} stacked"
    bar = tqdm(total=sched.stop - sched.first, initial=first - sched.first, desc=desc,
               disable=not show_progress(progress), leave=False)
    t0 = last_write = time.perf_counter()
    rows = None
    try:
        for t in range(first, sched.stop):
            epoch, i = divmod(t, sched.per_epoch)
            if rows is None or i == 0:
                rows = _epoch_rows(specs, data, sched, epoch)
            stepper.set_lr(sched, t)
            loss = stepper.loss(*batch(specs, data, rows[:, i], t))
            stepper.step(loss)
            losses[t - sched.first] = loss.detach()
            if sched.end_of_epoch(t):  # one sync per epoch: the NaN guard, the bar, the checkpoint
                if stepper.diverged(losses[: t - sched.first + 1], sched):
                    break
                bar.update(t + 1 - sched.first - bar.n)
                if not bar.disable:
                    bar.set_postfix(epoch=epoch, loss=f"{float(losses[t - sched.first].mean()):.3f}")
                if (checkpoint is not None and (epoch + 1) % checkpoint_every == 0 and t + 1 < sched.stop
                        and time.perf_counter() - last_write >= checkpoint_seconds):
                    stepper.save(checkpoint, losses, t + 1, sched)
                    last_write = time.perf_counter()
    finally:
        bar.close()
    return time.perf_counter() - t0


def train(spec: RunSpec, data: Dataset | None = None, device: str | torch.device = "auto",
          progress: bool | None = None, start: TrainedRun | None = None,
          init: TrainedRun | None = None, checkpoint: str | Path | None = None,
          checkpoint_every: int = 1, checkpoint_seconds: float = 0.0) -> TrainedRun:
    """Return the run trained from ``spec``.

    A child spec (``spec.parent`` set) continues from ``start``, the parent's stored run (weights, momentum,
    step); a fine-tuning spec (``spec.init`` set) starts from ``init``'s weights with a fresh optimizer and
    schedule (:meth:`lmcbook.store.RunStore.get_or_train` passes both).  The spec's ``train.precision`` says whether
    the passes run under bfloat16 autocast (on every device; fp32 otherwise, CUDA included).

    ``checkpoint`` (a file, or a directory for ``<run id>.ckpt.safetensors``) makes the
    run survive a kill: every ``checkpoint_every`` epochs, at least ``checkpoint_seconds``
    apart, the state is written there atomically, and a run started again resumes from it
    bitwise (``resume``).  The caller removes it (:func:`remove_checkpoint`) once stored.
    The steps are :func:`train_loop`'s, with a :class:`ModuleStepper`.
    """
    dev = resolve_device(device) if data is None else data.device
    data = load_spec(spec.data, dev) if data is None else data
    sched = schedule(spec, data, start)
    use_amp = spec.train.precision == "bf16"
    model = starting_model(spec, data, start, init)
    channels_last = dev.type == "cuda" and spec.model.arch in ("vgg11", "resnet20")
    if channels_last:  # the layout tensor cores want for convolutions
        model = model.to(memory_format=torch.channels_last)
    stepper = ModuleStepper(spec, model, optimizer(spec, model, start, dev), use_amp, channels_last)
    losses = torch.zeros(sched.stop - sched.first, device=dev)
    ckpt, first, extra = resume(checkpoint, checkpoint_every, spec, model, stepper.opt, losses, sched)
    elapsed = train_loop(stepper, data, sched, losses, first, progress, ckpt, checkpoint_every, checkpoint_seconds)
    buffers = stepper.momentum_buffers() if keeps_momentum(spec) else None
    return finish(spec, model, losses, sched, data, buffers, train_seconds=elapsed, **extra)


__all__ = ["CHECKPOINT_SUFFIX", "DivergedError", "ModuleStepper", "Schedule", "Stepper", "TrainedRun",
           "batch", "check_trainable", "checkpoint_path", "finish", "init_model",
           "lr_at", "optimizer", "remove_checkpoint", "resume", "schedule", "starting_model", "train",
           "train_loop", "STACK_TOLERANCE", "STACK_MAX_UNITS", "group_key", "StackedMLP", "StackStepper",
           "train_many"]


# ---- Batched training ----
# Batched training: many MLPs of one shape trained together in one stacked step.
#
# Small MLPs spend most of a training step in per-step overhead (Python, autograd,
# kernel launches), not in arithmetic.  Runs that share a shape, a batch size and a
# schedule length (the seeds of one width, or the cells of a noise grid with one
# batch size) can be trained as one stack: the weights of K models are stacked
# along a leading axis, every layer is one ``torch.bmm``, and one SGD update moves
# all K models, each with its own learning rate, momentum, weight decay, seeds,
# batch order and augmentation draws.
#
# Both run the same step loop, :func:`lmcbook.train.train_loop`: :func:`train_many`
# only supplies a :class:`StackStepper` (the stacked forward and SGD update) where
# :func:`lmcbook.train.train` supplies a :class:`~lmcbook.train.ModuleStepper`.  So
# the semantics match training alone model by model: the same initialisation, batch
# order, augmentation draws, schedule, SGD rule (PyTorch's, dampening 0) and NaN
# guard.  The results are **not bitwise equal** to training alone: a batched matrix
# product sums in a different order.  Whether a run was batched is provenance
# (recorded, not hashed), and the bitwise tests use :func:`lmcbook.train.train` only.
# A stack is not checkpointed: one killed mid-way trains again from its first step.

#: Stacked training equals training alone to within this max absolute difference in any weight, on the test
#: suite's 40-step runs of every kind a stack accepts (tests/test_batched.py); the difference is summation order.
STACK_TOLERANCE = 1e-4

#: Wider MLPs are compute-bound: a stacked step gains nothing there and batched matrix products are
#: slower than single ones (measured on 2 cores: 1.8x faster stacked at 256 units, 1.25x at 512, 0.75x at 1024).
STACK_MAX_UNITS = 512


def group_key(spec: RunSpec, n_train: int) -> tuple | None:
    """Return the key under which runs can train in one stack, or None if ``spec`` must train alone.

    Stackable: MLPs without BatchNorm of at most :data:`STACK_MAX_UNITS` hidden units whose
    shape, data set (and augmentation flag), batch size, schedule length, warm-up, first step, stop step and precision
    agree.  The schedule's shape (a decay to zero, to a floor, or a constant rate) may differ: each member
    follows its own.
    """
    m, t = spec.model, spec.train
    if m.arch != "mlp" or m.norm == "batch" or m.channels > STACK_MAX_UNITS:
        return None
    first = spec.parent.train.stop_step if spec.parent is not None else 0
    return (spec.data.name, spec.data.transform, spec.data.augment, m.width, m.base_width, m.depth, m.norm, m.bias,
            t.batch_size,
            spec.total_steps(n_train), t.stop_step, first, t.warmup, t.precision)


class StackedMLP(nn.Module):
    """K bias-free or biased MLPs (norm none or layer) of one shape, with parameters stacked on axis 0."""

    def __init__(self, models: list[MLP]) -> None:
        super().__init__()
        ref = models[0]
        self.depth = len(ref.layers)
        self.has_bias = ref.layers[0].bias is not None
        self.layer_norm = isinstance(ref.norms[0], nn.LayerNorm) if len(ref.norms) else False
        states = [m.state_dict() for m in models]
        self.params = nn.ParameterDict({k.replace(".", "__"): nn.Parameter(torch.stack([s[k] for s in states]))
                                        for k in states[0]})

    def p(self, key: str) -> torch.Tensor:
        """Return the stacked parameter of the MLP state-dict key ``key``."""
        return self.params[key.replace(".", "__")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return (K, B, classes) logits for inputs x of shape (K, B, ...)."""
        h = x.flatten(2)
        for i in range(self.depth):
            w = self.p(f"layers.{i}.weight")
            h = torch.bmm(h, w.transpose(1, 2))
            if self.has_bias:
                h = h + self.p(f"layers.{i}.bias")[:, None, :]
            if i < self.depth - 1:
                if self.layer_norm:
                    h = F.layer_norm(h, h.shape[-1:])
                    h = h * self.p(f"norms.{i}.weight")[:, None, :] + self.p(f"norms.{i}.bias")[:, None, :]
                h = torch.relu(h)
        return h

    def state_dicts(self) -> list[dict[str, torch.Tensor]]:
        """Return one MLP state dict per stacked model."""
        k = next(iter(self.params.values())).shape[0]
        return [{name.replace("__", "."): p.detach()[i].clone() for name, p in self.params.items()} for i in range(k)]


@dataclass
class _Opt:
    lr: torch.Tensor  # (K,) peak learning rates
    momentum: torch.Tensor
    weight_decay: torch.Tensor


def _bcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.view((-1,) + (1,) * (like.ndim - 1))


def _inherited_buffers(params: list[tuple[str, nn.Parameter]], specs: list[RunSpec],
                       starts: list[TrainedRun | None]) -> dict[str, torch.Tensor | None]:
    """Return the stack's momentum buffers at its first step: each child's own parent's, zeros for a parent that
    stored none (μ = 0; exact, since buf ← μ·buf + g), and None (PyTorch's fresh start) for runs from scratch."""
    bufs: dict[str, torch.Tensor | None] = {name: None for name, _ in params}
    if specs[0].parent is not None:
        for name, p in params:
            key = name.replace("__", ".")
            bufs[name] = torch.stack([st.momentum_buffers[key].to(p.device, p.dtype)
                                      if st.momentum_buffers and key in st.momentum_buffers
                                      else torch.zeros_like(p[j]) for j, st in enumerate(starts)])
    return bufs


def _sgd_step(params: list[tuple[str, nn.Parameter]], bufs: dict[str, torch.Tensor | None], opt: _Opt,
              lr: torch.Tensor) -> None:
    """PyTorch's SGD (dampening 0), fused per tensor, for every model at once: buf = μ·buf + (g + wd·p);
    p −= lr·buf."""
    with torch.no_grad():
        for name, p in params:
            buf = bufs[name]
            if buf is None:
                buf = bufs[name] = p.grad.clone()
            else:
                buf.mul_(_bcast(opt.momentum, p)).add_(p.grad)
            buf.addcmul_(p, _bcast(opt.weight_decay, p))
            p.addcmul_(buf, _bcast(lr, p), value=-1)


def _shape(spec: RunSpec) -> tuple:
    """Return what fixes a member's schedule shape, its rate over its peak: the schedule, floor and annealing."""
    return spec.train.schedule, spec.train.lr_floor, spec.train.anneal_from


class StackStepper:
    """The :class:`~lmcbook.train.Stepper` of a stack: one batched forward and one SGD update move all K members
    (PyTorch's SGD rule, dampening 0, each member with its own learning rate, momentum and weight decay)."""

    def __init__(self, specs: list[RunSpec], stack: StackedMLP, starts: list[TrainedRun | None]) -> None:
        self.specs, self.stack = specs, stack
        self.params = list(stack.params.items())
        dev = self.params[0][1].device
        self.opt = _Opt(*(torch.tensor([getattr(s.train, a) for s in specs], device=dev, dtype=torch.float32)
                          for a in ("lr", "momentum", "weight_decay")))
        self.bufs = _inherited_buffers(self.params, specs, starts)
        self.lr = self.opt.lr
        self.dead = torch.zeros(len(specs), dtype=torch.bool, device=dev)
        # members that share a schedule shape (schedule, floor, annealing) share one evaluation of it per step
        shapes = {_shape(s): s for s in specs}
        self._shapes = list(shapes.values())
        self._shape_of = torch.tensor([list(shapes).index(_shape(s)) for s in specs], device=dev)

    def set_lr(self, sched: Schedule, step: int) -> None:
        """Set every member's learning rate to its peak times its own schedule's shape at ``step``."""
        if len(self._shapes) == 1:
            self.lr = self.opt.lr * sched.lr(step, self._shapes[0], peak=1.0)
            return
        shape = torch.tensor([sched.lr(step, s, peak=1.0) for s in self._shapes], device=self.opt.lr.device)
        self.lr = self.opt.lr * shape[self._shape_of]

    def loss(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """Return the (K,) mean cross-entropies of the members on their batches (under bfloat16 autocast if their
        precision is bf16: a stack shares one, :func:`group_key`)."""
        with torch.autocast(xb.device.type, dtype=torch.bfloat16, enabled=self.specs[0].train.precision == "bf16"):
            return F.cross_entropy(self.stack(xb).transpose(1, 2), yb, reduction="none").mean(1)

    def step(self, loss: torch.Tensor) -> None:
        """Back-propagate the sum of the members' losses and update them all at once."""
        for p in self.stack.params.values():
            p.grad = None
        loss.sum().backward()
        _sgd_step(self.params, self.bufs, self.opt, self.lr)

    def diverged(self, losses: torch.Tensor, sched: Schedule) -> bool:
        """Mark the members with a non-finite loss so far; return True once every member has diverged."""
        self.dead |= ~torch.isfinite(losses).all(0)
        return bool(self.dead.all())

    def momentum_buffers(self, member: int) -> dict[str, torch.Tensor]:
        """Return a copy of member ``member``'s momentum buffers by MLP parameter name."""
        return {name.replace("__", "."): self.bufs[name][member].clone() for name, _ in self.params
                if self.bufs[name] is not None}

    def save(self, path: Path, losses: torch.Tensor, step: int, sched: Schedule) -> None:
        """Raise: a stack is not checkpointed (train_many passes no checkpoint to the loop)."""
        raise NotImplementedError("a stack of runs is not checkpointed; train its runs alone to checkpoint them")


def train_many(specs: list[RunSpec], data: Dataset, starts: list[TrainedRun | None] | None = None,
               inits: list[TrainedRun | None] | None = None,
               progress: bool | None = None) -> list[TrainedRun | DivergedError]:
    """Return the runs of ``specs`` trained together in one stack (see the module docstring).

    ``starts`` and ``inits`` give, per spec, the parent run (children) or the run to
    fine-tune from, as in :func:`lmcbook.train.train`.  A model whose loss becomes
    non-finite is reported as a :class:`~lmcbook.train.DivergedError` in its place; the others finish.
    The steps are :func:`lmcbook.train.train_loop`'s, with a :class:`StackStepper`.  A stack is not
    checkpointed: a stack killed mid-way trains again from its first step.
    """
    if not specs:
        return []
    keys = {group_key(s, len(data.y_train)) for s in specs}
    if None in keys or len(keys) != 1:
        raise SpecError("train_many needs specs with one group_key (same MLP shape, batch size and schedule); "
                        "use lmcbook.train.train for the others")
    k = len(specs)
    starts, inits = starts or [None] * k, inits or [None] * k
    sched = [schedule(s, data, st) for s, st in zip(specs, starts)][0]  # one group_key: one schedule
    models = [starting_model(s, data, st, ini) for s, st, ini in zip(specs, starts, inits)]
    stepper = StackStepper(specs, StackedMLP(models).to(data.device), starts)
    losses = torch.zeros(sched.stop - sched.first, k, device=data.device)
    elapsed = train_loop(stepper, data, sched, losses, progress=progress)
    out: list[TrainedRun | DivergedError] = []
    loss_cpu = losses.cpu()
    for j, (s, state) in enumerate(zip(specs, stepper.stack.state_dicts())):
        if (err := divergence(s, loss_cpu[:, j], sched)) is not None:
            out.append(err)
            continue
        models[j].load_state_dict(state)
        buffers = stepper.momentum_buffers(j) if keeps_momentum(s) else None
        out.append(finish(s, models[j], loss_cpu[:, j], sched, data, buffers, train_seconds=elapsed / k,
                          batched_with=k, batched_seconds=elapsed))
    return out
