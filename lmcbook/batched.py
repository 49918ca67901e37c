"""Batched training: many MLPs of one shape trained together in one stacked step.

Small MLPs spend most of a training step in per-step overhead (Python, autograd,
kernel launches), not in arithmetic.  Runs that share a shape, a batch size and a
schedule length (the seeds of one width, or the cells of a noise grid with one
batch size) can be trained as one stack: the weights of K models are stacked
along a leading axis, every layer is one ``torch.bmm``, and one SGD update moves
all K models, each with its own learning rate, momentum, weight decay, seeds,
batch order and augmentation draws.

Semantics match :func:`lmcbook.train.train` model by model: the same
initialisation, batch order, schedule, SGD update (PyTorch's, dampening 0) and
NaN guard.  The results are **not bitwise equal** to training alone: a batched
matrix product sums in a different order.  Whether a run was batched is
provenance (recorded, not hashed), and the bitwise tests use :func:`lmcbook.train.train` only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .data import Dataset, augment_batch
from .models import MLP
from .specs import RunSpec, SpecError
from .train import DivergedError, TrainedRun, divergence, finish, keeps_momentum, schedule, starting_model

#: Stacked training equals training alone to within this max absolute difference in any weight, on the test
#: suite's 40-step runs of every kind a stack accepts (tests/test_batched.py); the difference is summation order.
STACK_TOLERANCE = 1e-4

#: Wider MLPs are compute-bound: a stacked step gains nothing there and batched matrix products are
#: slower than single ones (measured on 2 cores: 1.8x faster stacked at 256 units, 1.25x at 512, 0.75x at 1024).
STACK_MAX_UNITS = 512


def group_key(spec: RunSpec, n_train: int) -> tuple | None:
    """Return the key under which runs can train in one stack, or None if ``spec`` must train alone.

    Stackable: MLPs without BatchNorm of at most :data:`STACK_MAX_UNITS` hidden units whose
    shape, data set (and augmentation flag), batch size, schedule length, warm-up, schedule
    shape, first step and stop step agree.
    """
    m, t = spec.model, spec.train
    if m.arch != "mlp" or m.norm == "batch" or m.channels > STACK_MAX_UNITS:
        return None
    first = spec.parent.train.stop_step if spec.parent is not None else 0
    return (spec.data.name, spec.data.transform, spec.data.augment, m.width, m.base_width, m.depth, m.norm, m.bias,
            t.batch_size,
            spec.total_steps(n_train), t.stop_step, first, t.warmup, t.schedule)


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


def train_many(specs: list[RunSpec], data: Dataset, starts: list[TrainedRun | None] | None = None,
               inits: list[TrainedRun | None] | None = None,
               progress: bool | None = None) -> list[TrainedRun | DivergedError]:
    """Return the runs of ``specs`` trained together in one stack (see the module docstring).

    ``starts`` and ``inits`` give, per spec, the parent run (children) or the run to
    fine-tune from, as in :func:`lmcbook.train.train`.  A model whose loss becomes
    non-finite is reported as a :class:`~lmcbook.train.DivergedError` in its place; the others finish.
    """
    if not specs:
        return []
    keys = {group_key(s, len(data.y_train)) for s in specs}
    if None in keys or len(keys) != 1:
        raise SpecError("train_many needs specs with one group_key (same MLP shape, batch size and schedule); "
                        "use lmcbook.train.train for the others")
    k, spec0 = len(specs), specs[0]
    starts, inits = starts or [None] * k, inits or [None] * k
    sched = [schedule(s, data, st) for s, st in zip(specs, starts)][0]  # one group_key: one schedule
    models = [starting_model(s, data, st, ini) for s, st, ini in zip(specs, starts, inits)]
    stack = StackedMLP(models).to(data.device)
    params = list(stack.params.items())
    opt = _Opt(*(torch.tensor([getattr(s.train, a) for s in specs], device=data.device, dtype=torch.float32)
                 for a in ("lr", "momentum", "weight_decay")))
    bufs = _inherited_buffers(params, specs, starts)
    losses = torch.zeros(sched.stop - sched.first, k, device=data.device)
    dead = torch.zeros(k, dtype=torch.bool, device=data.device)
    t_start = time.perf_counter()
    idx = None
    for t in range(sched.first, sched.stop):
        epoch, i = divmod(t, sched.per_epoch)
        if idx is None or i == 0:
            idx = torch.stack([sched.batches(s, data, epoch) for s in specs])
        xb, yb = data.x_train[idx[:, i]].float(), data.y_train[idx[:, i]]  # (K, B, ...), (K, B)
        if spec0.data.augment:
            xb = torch.stack([augment_batch(xb[j], s.data.name, s.train.aug_seed, t) for j, s in enumerate(specs)])
        per_model = F.cross_entropy(stack(xb).transpose(1, 2), yb, reduction="none").mean(1)  # (K,)
        for p in stack.params.values():
            p.grad = None
        per_model.sum().backward()
        _sgd_step(params, bufs, opt, opt.lr * sched.lr(t, spec0, peak=1.0))
        losses[t - sched.first] = per_model.detach()
        if sched.end_of_epoch(t):
            dead |= ~torch.isfinite(losses[: t - sched.first + 1]).all(0)
            if bool(dead.all()):
                break
    elapsed = time.perf_counter() - t_start
    out: list[TrainedRun | DivergedError] = []
    loss_cpu = losses.cpu()
    for j, (s, state) in enumerate(zip(specs, stack.state_dicts())):
        if (err := divergence(s, loss_cpu[:, j], sched)) is not None:
            out.append(err)
            continue
        models[j].load_state_dict(state)
        buffers = {name.replace("__", "."): bufs[name][j].clone() for name, _ in params
                   if bufs[name] is not None} if keeps_momentum(s) else None
        out.append(finish(s, models[j], loss_cpu[:, j], sched, data, buffers, train_seconds=elapsed / k,
                          batched_with=k, batched_seconds=elapsed))
    return out
