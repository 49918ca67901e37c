"""Batched training: many MLPs of one shape trained together in one stacked step.

Small MLPs spend most of a training step in per-step overhead (Python, autograd,
kernel launches), not in arithmetic.  Runs that share a shape, a batch size and a
schedule length (the seeds of one width, or the cells of a noise grid with one
batch size) can be trained as one stack: the weights of K models are stacked
along a leading axis, every layer is one ``torch.bmm``, and one SGD update moves
all K models, each with its own learning rate, momentum, weight decay, seeds,
batch order and augmentation draws.

Both run the same step loop, :func:`lmcbook.train.train_loop`: :func:`train_many`
only supplies a :class:`StackStepper` (the stacked forward and SGD update) where
:func:`lmcbook.train.train` supplies a :class:`~lmcbook.train.ModuleStepper`.  So
the semantics match training alone model by model: the same initialisation, batch
order, augmentation draws, schedule, SGD rule (PyTorch's, dampening 0) and NaN
guard.  The results are **not bitwise equal** to training alone: a batched matrix
product sums in a different order.  Whether a run was batched is provenance
(recorded, not hashed), and the bitwise tests use :func:`lmcbook.train.train` only.
A stack is not checkpointed: one killed mid-way trains again from its first step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .data import Dataset
from .models import MLP
from .specs import RunSpec, SpecError
from .train import (
    DivergedError,
    Schedule,
    TrainedRun,
    divergence,
    finish,
    keeps_momentum,
    schedule,
    starting_model,
    train_loop,
)

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
