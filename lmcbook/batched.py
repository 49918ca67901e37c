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

from .data import Dataset, augment_batch, epoch_batches
from .models import MLP
from .provenance import provenance
from .specs import RunSpec, SpecError, steps_per_epoch
from .train import DivergedError, TrainedRun, check_trainable, init_model, lr_at

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
    n = len(data.y_train)
    keys = {group_key(s, n) for s in specs}
    if None in keys or len(keys) != 1:
        raise SpecError("train_many needs specs with one group_key (same MLP shape, batch size and schedule); "
                        "use lmcbook.train.train for the others")
    k = len(specs)
    starts = starts or [None] * k
    inits = inits or [None] * k
    dev = data.device
    totals = [check_trainable(s, data) for s in specs]
    spec0 = specs[0]
    t0_ = spec0.train
    total, spe = totals[0], steps_per_epoch(n, t0_.batch_size)
    stop = t0_.stop_step or total
    models = []
    for s, st, ini in zip(specs, starts, inits):
        m = init_model(s, data)
        if s.parent is not None:
            if st is None or st.spec.id != s.parent.id:
                raise SpecError("a child run needs its parent's TrainedRun in starts")
            m.load_state_dict(st.model.state_dict())
        if s.init is not None:
            if ini is None or ini.spec.id != s.init.id:
                raise SpecError("a fine-tuning run needs its init TrainedRun in inits")
            m.load_state_dict(ini.model.state_dict())
        models.append(m)
    first = starts[0].step if spec0.parent is not None else 0
    stack = StackedMLP(models).to(dev)
    params = list(stack.params.items())
    opt = _Opt(*(torch.tensor([getattr(s.train, a) for s in specs], device=dev, dtype=torch.float32)
                 for a in ("lr", "momentum", "weight_decay")))
    bufs: dict[str, torch.Tensor | None] = {name: None for name, _ in params}
    if spec0.parent is not None:  # each child inherits its own parent's buffer; a μ = 0 parent stores none,
        for name, p in params:    # and a zero buffer is exact there (buf ← μ·buf + g)
            key = name.replace("__", ".")
            bufs[name] = torch.stack([st.momentum[key].to(dev, p.dtype) if st.momentum and key in st.momentum
                                      else torch.zeros_like(p[j]) for j, st in enumerate(starts)])
    x, y = data.x_train, data.y_train
    losses = torch.zeros(stop - first, k, device=dev)
    dead = torch.zeros(k, dtype=torch.bool, device=dev)
    t_start = time.perf_counter()
    idx = None
    for t in range(first, stop):
        epoch, i = divmod(t, spe)
        if idx is None or i == 0:
            idx = torch.stack([epoch_batches(n, s.train.batch_size, s.train.data_seed, epoch, dev) for s in specs])
        xb, yb = x[idx[:, i]].float(), y[idx[:, i]]  # (K, B, ...), (K, B)
        if spec0.data.augment:
            xb = torch.stack([augment_batch(xb[j], s.data.name, s.train.aug_seed, t) for j, s in enumerate(specs)])
        logits = stack(xb)
        per_model = F.cross_entropy(logits.transpose(1, 2), yb, reduction="none").mean(1)  # (K,)
        for p in stack.params.values():
            p.grad = None
        per_model.sum().backward()
        scale = lr_at(t, total, 1.0, t0_.warmup, t0_.schedule)
        with torch.no_grad():
            lr = opt.lr * scale
            for name, p in params:  # PyTorch's SGD, fused per tensor: buf = μ·buf + (g + wd·p); p -= lr·buf
                buf = bufs[name]
                if buf is None:
                    buf = bufs[name] = p.grad.clone()
                else:
                    buf.mul_(_bcast(opt.momentum, p)).add_(p.grad)
                buf.addcmul_(p, _bcast(opt.weight_decay, p))
                p.addcmul_(buf, _bcast(lr, p), value=-1)
        losses[t - first] = per_model.detach()
        if i == spe - 1 or t == stop - 1:
            dead |= ~torch.isfinite(losses[: t - first + 1]).all(0)
            if bool(dead.all()):
                break
    elapsed = time.perf_counter() - t_start
    stack.eval()

    from .metrics import evaluate

    out: list[TrainedRun | DivergedError] = []
    loss_cpu = losses.cpu()
    for j, (s, state) in enumerate(zip(specs, stack.state_dicts())):
        col = loss_cpu[:, j]
        bad = (~torch.isfinite(col)).nonzero()
        if len(bad):
            step = int(bad[0]) + first
            out.append(DivergedError(s.id, step, float(col[step - first]),
                                     lr_at(step, total, s.train.lr, s.train.warmup, s.train.schedule)))
            continue
        model = models[j]
        model.load_state_dict(state)
        model.eval()
        momentum = None
        if s.train.stop_step is not None and s.train.momentum > 0:
            momentum = {name.replace("__", "."): bufs[name][j].clone() for name, _ in params
                        if bufs[name] is not None}
        metrics = {}
        for split in ("train", "cal", "test"):
            ev = evaluate(model, *data.split(split))
            metrics[f"{split}_acc"], metrics[f"{split}_loss"] = ev.acc, ev.loss
        history = {"loss": col.tolist(), "first_step": first, "steps_per_epoch": spe, "total_steps": total}
        prov = provenance(dev)
        prov.update(train_seconds=elapsed / k, steps=stop - first, batched_with=k, batched_seconds=elapsed)
        out.append(TrainedRun(s, model, history, metrics, prov, momentum, stop))
    return out
