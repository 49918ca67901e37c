"""One training loop for every model: SGD with momentum, warm-up then linear decay.

The loop reads top to bottom.  Batch t is a pure function of (data_seed, epoch),
augmentation a pure function of (aug_seed, step), and the initial weights a
pure function of ``seed``, so on the CPU two runs at the same thread count give
identical weights, and a run stopped at step k and continued from its saved
weights, momentum buffers and step reproduces the uninterrupted run bitwise.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .data import Dataset, augment_batch, epoch_batches, load_spec, resolve_device
from .metrics import evaluate
from .models import build
from .provenance import provenance
from .specs import RunSpec, SpecError, steps_per_epoch


class DivergedError(FloatingPointError):
    """Training produced a non-finite loss; the message names the run and the step."""

    def __init__(self, run_id: str, step: int, value: float, lr: float) -> None:
        self.run_id, self.step, self.value, self.lr = run_id, step, value, lr
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


def lr_at(step: int, total: int, peak: float, warmup: float, schedule: str) -> float:
    """Return the learning rate at ``step`` (0-based) of a ``total``-step schedule."""
    warm = int(round(warmup * total))
    if step < warm:
        return peak * (step + 1) / warm
    if schedule == "constant":
        return peak
    return peak * (total - step) / max(total - warm, 1)


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
        return lr_at(step, self.total, tr.lr if peak is None else peak, tr.warmup, tr.schedule)

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
    prov.update(steps=sched.stop - sched.first, **provenance_extra)
    return TrainedRun(spec, model, history, metrics, prov, momentum_buffers if keeps_momentum(spec) else None,
                      sched.stop)


def train(spec: RunSpec, data: Dataset | None = None, device: str | torch.device = "auto",
          progress: bool | None = None, start: TrainedRun | None = None, amp: bool | None = None,
          init: TrainedRun | None = None) -> TrainedRun:
    """Return the run trained from ``spec``.

    A child spec (``spec.parent`` set) continues from ``start``, the parent's
    stored run: its weights, momentum buffers and step.  A fine-tuning spec
    (``spec.init`` set) starts from ``init``'s final weights with a fresh optimizer
    and schedule.  ``amp`` (bf16 autocast) defaults to on for CUDA and is never
    used on the CPU.  (:meth:`lmcbook.store.RunStore.get_or_train` passes ``start`` and ``init``.)
    """
    dev = resolve_device(device) if data is None else data.device
    data = load_spec(spec.data, dev) if data is None else data
    sched, tr = schedule(spec, data, start), spec.train
    use_amp = (dev.type == "cuda") if amp is None else (amp and dev.type == "cuda")
    model = starting_model(spec, data, start, init)
    channels_last = dev.type == "cuda" and spec.model.arch in ("vgg11", "resnet20")
    if channels_last:  # the layout tensor cores want for convolutions
        model = model.to(memory_format=torch.channels_last)
    params = dict(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=tr.lr, momentum=tr.momentum, weight_decay=tr.weight_decay,
                          fused=dev.type in ("cpu", "cuda"))  # one pass per tensor: fastest on both
    if spec.parent is not None and tr.momentum > 0 and start.momentum_buffers:
        for name, buf in start.momentum_buffers.items():
            opt.state[params[name]]["momentum_buffer"] = buf.detach().clone().to(dev)
    losses = torch.zeros(sched.stop - sched.first, device=dev)
    show = sys.stderr.isatty() if progress is None else progress
    bar = tqdm(total=sched.stop - sched.first, desc=f"train {spec.short_id}", disable=not show, leave=False)
    t0 = time.perf_counter()
    model.train()
    idx = None
    for t in range(sched.first, sched.stop):
        epoch, i = divmod(t, sched.per_epoch)
        if idx is None or i == 0:
            idx = sched.batches(spec, data, epoch)
        for g in opt.param_groups:
            g["lr"] = sched.lr(t, spec)
        xb, yb = data.x_train[idx[i]], data.y_train[idx[i]]
        if spec.data.augment:
            xb = augment_batch(xb, spec.data.name, tr.aug_seed, t)
        xb = xb.float()
        if channels_last:
            xb = xb.contiguous(memory_format=torch.channels_last)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses[t - sched.first] = loss.detach()
        if sched.end_of_epoch(t):  # one sync per epoch: the NaN guard and the bar
            if (err := divergence(spec, losses[: t - sched.first + 1], sched)) is not None:
                raise err
            bar.update(t + 1 - sched.first - bar.n)
            bar.set_postfix(epoch=epoch, loss=f"{float(losses[t - sched.first]):.3f}")
    bar.close()
    elapsed = time.perf_counter() - t0
    buffers = {name: opt.state[p]["momentum_buffer"].detach().clone() for name, p in params.items()
               if "momentum_buffer" in opt.state[p]} if keeps_momentum(spec) else None
    return finish(spec, model, losses, sched, data, buffers, train_seconds=elapsed)


__all__ = ["DivergedError", "Schedule", "TrainedRun", "check_trainable", "finish", "init_model", "lr_at", "schedule",
           "starting_model", "train"]
