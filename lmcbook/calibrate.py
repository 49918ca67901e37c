"""A model's score and its calibration: logits, accuracy and cross-entropy; then the inverse temperature.

:func:`evaluate` scores a model on a split from its :func:`logits`; training reports it and the merge metrics
(:mod:`lmcbook.merge`) build on it.  Inverse-temperature fitting finds the τ > 0 that minimises the NLL of
softmax(τ·logits).

The NLL is convex in τ, so its derivative dNLL/dτ = mean_i(E_p[z_i] - z_i,y_i)
is increasing.  The fit is the root of that derivative on log τ in
[1e-3, 1e3], found in float64 with Brent's method.  When the derivative has no
root inside the bounds, the fit ends at a bound and is flagged: on perfectly
separated data the optimum is τ → ∞.  A positive τ never changes the argmax,
so calibration leaves accuracy untouched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy.optimize import brentq
from torch import nn

from .specs import SpecError

TAU_BOUNDS = (1e-3, 1e3)


@dataclass(frozen=True)
class TemperatureFit:
    """A fitted inverse temperature, its NLL, and whether the fit ended at a bound."""

    tau: float
    nll: float
    at_bound: bool


def nll(logits: torch.Tensor, labels: torch.Tensor, tau: float = 1.0) -> float:
    """Return the mean cross-entropy (nats) of softmax(tau * logits), computed in float64."""
    z = logits.detach().to(torch.float64)
    return float(torch.nn.functional.cross_entropy(tau * z, labels.to(z.device)))


def as_input(x: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
    """Return x in the dtype of the model's parameters (inputs stored as fp16 on the GPU are cast per batch)."""
    p = next(model.parameters(), None)
    return x if p is None or x.dtype == p.dtype else x.to(p.dtype)


@dataclass(frozen=True)
class Eval:
    """Accuracy and mean cross-entropy (nats) of a model on one split."""

    acc: float
    loss: float


@torch.inference_mode()
def logits(model: nn.Module, x: torch.Tensor, batch_size: int = 8192) -> torch.Tensor:
    """Return the model's logits on ``x`` as float32, in eval mode, in as few forward passes as fit."""
    was = model.training
    model.eval()
    out = torch.cat([model(as_input(x[i:i + batch_size], model)).float() for i in range(0, len(x), batch_size)])
    model.train(was)
    return out


def evaluate_logits(z: torch.Tensor, y: torch.Tensor) -> Eval:
    """Return accuracy and loss of the logits ``z`` against the labels ``y``."""
    return Eval(acc=float((z.argmax(1) == y).float().mean()), loss=nll(z, y))


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Eval:
    """Return the accuracy and loss of ``model`` on (x, y)."""
    return evaluate_logits(logits(model, x), y)


def _grad(z: torch.Tensor, y: torch.Tensor, tau: float) -> float:
    p = torch.softmax(tau * z, dim=1)
    return float(((p * z).sum(1) - z.gather(1, y[:, None])[:, 0]).mean())


def _check_logits_and_labels(logits, labels) -> None:
    for name, value in (("logits", logits), ("labels", labels)):
        if not isinstance(value, torch.Tensor):
            raise SpecError(f"{name} of type {type(value).__name__} is not allowed: expected a torch.Tensor")
    if logits.ndim != 2 or not logits.is_floating_point():
        raise SpecError(f"logits of shape {tuple(logits.shape)} and dtype {logits.dtype} is not allowed: expected a "
                        "2-D float tensor of shape (N, C), one row of class scores per input")
    n, c = logits.shape
    if n == 0 or c == 0:
        raise SpecError(f"logits of shape {(n, c)} is not allowed: expected a non-empty shape (N, C) with N >= 1 "
                        "inputs and C >= 1 classes")
    if labels.shape != (n,):
        raise SpecError(f"labels of shape {tuple(labels.shape)} is not allowed with logits of shape {(n, c)}: "
                        f"expected shape ({n},), one label per row of logits")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise SpecError(f"labels of dtype {labels.dtype} is not allowed: expected integer class indices")
    lo, hi = int(labels.min()), int(labels.max())
    if lo < 0 or hi >= c:
        raise SpecError(f"labels in [{lo}, {hi}] is not allowed with {c} classes: expected class indices in "
                        f"[0, {c - 1}]")


def fit_inverse_temperature(logits: torch.Tensor, labels: torch.Tensor,
                            bounds: tuple[float, float] = TAU_BOUNDS) -> TemperatureFit:
    """Return the NLL-minimising inverse temperature τ of ``logits`` for ``labels``.

    ``logits`` is a float tensor of shape (N, C) with N >= 1 inputs and C >= 1
    classes, ``labels`` an integer tensor of shape (N,) with values in [0, C);
    anything else is refused with a SpecError before any compute.
    """
    lo, hi = bounds
    if not (0 < lo < hi):
        raise SpecError(f"bounds={bounds!r} is not allowed: expected 0 < low < high")
    _check_logits_and_labels(logits, labels)
    z = logits.detach().to("cpu", torch.float64)
    y = labels.detach().to("cpu", torch.int64)
    if not torch.isfinite(z).all():
        raise FloatingPointError("logits contain NaN or inf: the model diverged; refusing to calibrate it")
    g_lo, g_hi = _grad(z, y, lo), _grad(z, y, hi)
    if g_hi <= 0:  # NLL still falling (or flat) at the upper bound: optimum at τ >= hi
        tau, at_bound = hi, True
    elif g_lo >= 0:  # NLL already rising at the lower bound
        tau, at_bound = lo, True
    else:
        s = brentq(lambda s: _grad(z, y, math.exp(s)), math.log(lo), math.log(hi), xtol=1e-12, rtol=1e-12)
        tau, at_bound = math.exp(s), False
    return TemperatureFit(tau=tau, nll=nll(z, y, tau), at_bound=at_bound)
