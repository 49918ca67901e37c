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
    momentum: dict[str, torch.Tensor] | None = None
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
    total = check_trainable(spec, data)
    tr = spec.train
    n = len(data.y_train)
    spe = steps_per_epoch(n, tr.batch_size)
    stop = tr.stop_step or total
    use_amp = (dev.type == "cuda") if amp is None else (amp and dev.type == "cuda")

    model = init_model(spec, data)
    channels_last = dev.type == "cuda" and spec.model.arch in ("vgg11", "resnet20")
    if channels_last:  # the layout tensor cores want for convolutions
        model = model.to(memory_format=torch.channels_last)
    params = dict(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=tr.lr, momentum=tr.momentum, weight_decay=tr.weight_decay,
                          fused=dev.type in ("cpu", "cuda"))  # one pass per tensor: fastest on both
    first = 0
    if spec.parent is not None:
        if start is None or start.spec.id != spec.parent.id:
            raise SpecError("a child run needs start=<the parent's TrainedRun> (RunStore.get_or_train passes it)")
        model.load_state_dict(start.model.state_dict())
        if tr.momentum > 0 and start.momentum:
            for name, buf in start.momentum.items():
                opt.state[params[name]]["momentum_buffer"] = buf.detach().clone().to(dev)
        first = start.step
    if spec.init is not None:
        if init is None or init.spec.id != spec.init.id:
            raise SpecError("a fine-tuning run needs init=<the TrainedRun it starts from> "
                            "(RunStore.get_or_train passes it)")
        model.load_state_dict(init.model.state_dict())

    x, y = data.x_train, data.y_train
    losses = torch.zeros(stop - first, device=dev)
    show = sys.stderr.isatty() if progress is None else progress
    bar = tqdm(total=stop - first, desc=f"train {spec.short_id}", disable=not show, leave=False)
    t0 = time.perf_counter()
    model.train()
    idx = None
    for t in range(first, stop):
        epoch, i = divmod(t, spe)
        if idx is None or i == 0:
            idx = epoch_batches(n, tr.batch_size, tr.data_seed, epoch, dev)
        lr = lr_at(t, total, tr.lr, tr.warmup, tr.schedule)
        for g in opt.param_groups:
            g["lr"] = lr
        xb, yb = x[idx[i]], y[idx[i]]
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
        losses[t - first] = loss.detach()
        if i == spe - 1 or t == stop - 1:  # one sync per epoch: the NaN guard and the bar
            seg = losses[: t - first + 1]
            bad = (~torch.isfinite(seg)).nonzero()
            if len(bad):
                s = int(bad[0]) + first
                raise DivergedError(spec.id, s, float(seg[s - first]),
                                    lr_at(s, total, tr.lr, tr.warmup, tr.schedule))
            bar.update(t + 1 - first - bar.n)
            bar.set_postfix(epoch=epoch, loss=f"{float(losses[t - first]):.3f}")
    bar.close()
    elapsed = time.perf_counter() - t0
    model.eval()

    step_losses = losses.cpu().tolist()
    history = {"loss": step_losses, "first_step": first, "steps_per_epoch": spe, "total_steps": total}
    momentum = None
    if tr.stop_step is not None and tr.momentum > 0:
        momentum = {name: opt.state[p]["momentum_buffer"].detach().clone()
                    for name, p in params.items() if "momentum_buffer" in opt.state[p]}
    from .metrics import evaluate  # local import: metrics imports merge, which imports train's users

    metrics = {}
    for split in ("train", "cal", "test"):
        ev = evaluate(model, *data.split(split))
        metrics[f"{split}_acc"], metrics[f"{split}_loss"] = ev.acc, ev.loss
    prov = provenance(dev)
    prov.update(train_seconds=elapsed, steps=stop - first)
    return TrainedRun(spec, model, history, metrics, prov, momentum, stop)


def is_finite_model(model: nn.Module) -> bool:
    """Return True if every parameter and buffer of ``model`` is finite."""
    return all(bool(torch.isfinite(t).all()) for t in model.state_dict().values() if t.is_floating_point())


__all__ = ["DivergedError", "TrainedRun", "train", "lr_at", "init_model", "check_trainable"]
