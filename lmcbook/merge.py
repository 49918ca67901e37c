"""Weight interpolation θ(λ) = λ·θa + (1−λ)·θb, and BatchNorm statistic reset."""

from __future__ import annotations

import copy

import torch
from torch import nn

from .models import has_batchnorm
from .specs import check_lams


def _check_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    if a.keys() != b.keys():
        diff = sorted(set(a) ^ set(b))
        raise ValueError(f"models differ in parameters {diff[:5]}: expected two models of one architecture")
    for k in a:
        if a[k].shape != b[k].shape:
            raise ValueError(f"parameter {k!r} has shapes {tuple(a[k].shape)} and {tuple(b[k].shape)}: "
                             "expected the same width and architecture")


def interpolate_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], lam: float) -> dict[str, torch.Tensor]:
    """Return the state dict λ·a + (1−λ)·b; exact at λ = 0 and 1. Integer buffers come from a."""
    (lam,) = check_lams([lam])
    _check_same(a, b)
    return {k: torch.lerp(b[k], a[k], lam) if a[k].is_floating_point() else a[k].clone() for k in a}


@torch.no_grad()
def interpolate_into(target: nn.Module, a: nn.Module, b: nn.Module, lam: float) -> nn.Module:
    """Overwrite ``target``'s parameters and buffers with θ(λ) of ``a`` and ``b`` in place; return ``target``."""
    dest = target.state_dict()
    for k, v in interpolate_state(a.state_dict(), b.state_dict(), lam).items():
        dest[k].copy_(v)
    return target


def interpolate(a: nn.Module, b: nn.Module, lam: float, data: torch.Tensor | None = None) -> nn.Module:
    """Return a new model with weights λ·θa + (1−λ)·θb, in eval mode.

    For models with BatchNorm the running statistics are then recomputed on
    ``data`` (training inputs) with :func:`reset_bn`; ``data`` is required there.
    """
    model = copy.deepcopy(a)
    interpolate_into(model, a, b, lam)
    if has_batchnorm(model):
        if data is None:
            raise ValueError("data=None is not allowed for a model with BatchNorm: pass training inputs so that "
                             "reset_bn can recompute the running statistics after interpolation")
        reset_bn(model, data)
    return model.eval()


@torch.no_grad()
def reset_bn(model: nn.Module, x: torch.Tensor, batch_size: int = 500) -> nn.Module:
    """Return ``model`` with every BatchNorm's running statistics recomputed as exact averages over ``x``."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the batches seen
    was_training = model.training
    model.train()
    for i in range(0, len(x), batch_size):
        model(x[i:i + batch_size])
    for m, mom in zip(bns, saved):
        m.momentum = mom
    model.train(was_training)
    return model
