"""Evaluation, interpolation curves, barriers and the logit ensemble.

θ(λ) = λ·θa + (1−λ)·θb, so λ = 1 is model a and λ = 0 is model b.  Every model
on a curve (endpoints and the ensemble included) gets its own inverse
temperature τ, fitted on the calibration split; the calibrated losses are the
test NLLs at those τ.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from .calibrate import fit_inverse_temperature, nll
from .data import Dataset, as_input
from .merge import interpolate_into, reset_bn
from .models import has_batchnorm
from .specs import DEFAULT_LAMS, check_lams


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


def disagreement(za: torch.Tensor, zb: torch.Tensor) -> float:
    """Return the share of rows on which two models' logits ``za`` and ``zb`` predict different classes (argmax)."""
    if za.shape != zb.shape:
        raise ValueError(f"logits of shapes {tuple(za.shape)} and {tuple(zb.shape)}: expected equal shapes")
    return float((za.argmax(1) != zb.argmax(1)).float().mean())


def ensemble_gain(za: torch.Tensor, zb: torch.Tensor, y: torch.Tensor) -> float:
    """Return acc(½(za + zb)) − ½(acc(za) + acc(zb)): what the logit ensemble gains over its members' mean, the most a
    merge of two models could hope to harvest from their differences."""
    acc = [evaluate_logits(z, y).acc for z in (0.5 * (za + zb), za, zb)]
    return acc[0] - 0.5 * (acc[1] + acc[2])


def relative_distance(a: nn.Module, b: nn.Module, ref: nn.Module) -> float:
    """Return ‖θa − θb‖ / ‖θ_ref‖ over every parameter (float64): how far apart two models ended, relative to the size
    of a reference point such as their parent at the spawn."""
    va, vb, vr = (nn.utils.parameters_to_vector(m.parameters()).detach().double() for m in (a, b, ref))
    if not va.shape == vb.shape == vr.shape:
        raise ValueError("models with different parameter counts: expected three models of one architecture")
    return float(torch.linalg.vector_norm(va - vb) / torch.linalg.vector_norm(vr))


def _with_anchor_lams(lams) -> tuple[float, ...]:
    return check_lams(list(check_lams(lams)) + [0.0, 0.5, 1.0])


def _logit_row(z_test: torch.Tensor, z_cal: torch.Tensor, data: Dataset) -> dict[str, float]:
    ev = evaluate_logits(z_test, data.y_test)
    fit = fit_inverse_temperature(z_cal, data.y_cal)
    return {"acc": ev.acc, "loss": ev.loss, "tau": fit.tau, "tau_at_bound": fit.at_bound,
            "loss_cal": nll(z_test, data.y_test, fit.tau), "logit_norm": float(torch.linalg.norm(z_test.double()))}


def logit_summary(z_test: torch.Tensor, z_cal: torch.Tensor, data: Dataset) -> dict[str, float]:
    """Return the test accuracy, raw and calibrated loss, τ (fitted on ``z_cal``, and whether at a bound) and logit
    norm of one model's (test, calibration) logits."""
    return _logit_row(z_test, z_cal, data)


def interpolation_curve(a: nn.Module, b: nn.Module, data: Dataset, lams=DEFAULT_LAMS,
                        transform: Callable[[nn.Module, float], nn.Module] | None = None) -> pd.DataFrame:
    """Return one row per λ: test accuracy, raw and calibrated test loss, τ (and whether at a bound), logit norm.

    The grid always includes 0, ½ and 1.  BatchNorm statistics are recomputed on
    the training split at every λ.  ``transform(model, λ)``, if given, is applied to
    each interpolated model before it is evaluated (REPAIR, for example).
    """
    return _curve(a, b, data, lams, transform)[0]


def _curve(a, b, data, lams, transform) -> tuple[pd.DataFrame, dict[float, tuple[torch.Tensor, torch.Tensor]]]:
    """Return the curve and the (test, cal) logits at λ = 0 and 1."""
    buf = copy.deepcopy(a).eval()
    bn = has_batchnorm(buf)
    rows, ends = [], {}
    x_eval, n_test = torch.cat([data.x_test, data.x_cal]), len(data.x_test)  # one forward pass per λ
    for lam in _with_anchor_lams(lams):
        interpolate_into(buf, a, b, lam)
        if bn:
            reset_bn(buf, data.x_train)
        model = transform(buf, lam) if transform is not None else buf
        z = logits(model, x_eval)
        z_test, z_cal = z[:n_test], z[n_test:]
        if lam in (0.0, 1.0):
            ends[lam] = (z_test, z_cal)
        rows.append({"lam": lam, **_logit_row(z_test, z_cal, data)})
    return pd.DataFrame(rows), ends


def barrier(curve: pd.DataFrame) -> dict[str, float]:
    """Return the max-form and midpoint accuracy barriers, and the raw and calibrated loss barriers.

    acc barrier = max_λ [λ·acc(1) + (1−λ)·acc(0) − acc(λ)];
    loss barrier = max_λ [L(λ) − λ·L(1) − (1−λ)·L(0)].  The midpoint forms use λ = ½.
    """
    c = curve.set_index("lam").sort_index()
    missing = [v for v in (0.0, 0.5, 1.0) if v not in c.index]
    if missing:
        raise ValueError(f"curve lacks lam={missing}: expected a grid containing 0, 0.5 and 1")
    lam = c.index.to_numpy()
    out = {}
    for name, col, sign in (("acc_barrier", "acc", -1.0), ("loss_barrier", "loss", 1.0),
                            ("loss_barrier_cal", "loss_cal", 1.0)):
        v = c[col].to_numpy()
        gap = sign * (v - (lam * c[col].loc[1.0] + (1 - lam) * c[col].loc[0.0]))
        out[name] = float(gap.max())
        out[name + "_mid"] = float(gap[np.searchsorted(lam, 0.5)])
    return out


def ensemble_summary(a: nn.Module, b: nn.Module, data: Dataset,
                     ends: dict[float, tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict[str, float]:
    """Return the logit ensemble ½(f_a + f_b): accuracy, raw and calibrated loss, its own τ_ens, logit norm.

    ``ends`` may pass the endpoints' (test, cal) logits at λ = 1 (a) and λ = 0 (b), to save their forward passes.
    """
    if ends is None:
        ends = {1.0: (logits(a, data.x_test), logits(a, data.x_cal)),
                0.0: (logits(b, data.x_test), logits(b, data.x_cal))}
    (za_t, za_c), (zb_t, zb_c) = ends[1.0], ends[0.0]
    return _logit_row(0.5 * (za_t + zb_t), 0.5 * (za_c + zb_c), data)


def pair_summary(a: nn.Module, b: nn.Module, data: Dataset, lams=DEFAULT_LAMS,
                 transform: Callable[[nn.Module, float], nn.Module] | None = None) -> tuple[pd.DataFrame, dict]:
    """Return (interpolation curve, one-row summary) for a pair: endpoints, merged model at λ=½, ensemble, barriers.

    The summary's ``logit_norm_ratio`` is ‖f_L(θ(½))‖ / ‖½(f_L^a + f_L^b)‖ over the test split
    (LEWC predicts 2^(1−L)), and ``tau_ratio`` is τ_merged / τ_ens (LEWC predicts 2^(L−1)).
    """
    curve, ends = _curve(a, b, data, lams, transform)
    c = curve.set_index("lam")
    # the curve's endpoints are the models themselves unless BatchNorm was reset or a transform applied
    exact_ends = transform is None and not has_batchnorm(a)
    ens = ensemble_summary(a, b, data, ends if exact_ends else None)
    out = {
        "acc_a": float(c.loc[1.0, "acc"]), "acc_b": float(c.loc[0.0, "acc"]),
        "acc_endpoints": float((c.loc[1.0, "acc"] + c.loc[0.0, "acc"]) / 2),
        "loss_endpoints": float((c.loc[1.0, "loss"] + c.loc[0.0, "loss"]) / 2),
        "loss_cal_endpoints": float((c.loc[1.0, "loss_cal"] + c.loc[0.0, "loss_cal"]) / 2),
    }
    for key in ("acc", "loss", "loss_cal", "tau", "tau_at_bound"):
        out[f"{key}_merged"] = c.loc[0.5, key]
        out[f"{key}_ensemble"] = ens[key]
    out["tau_ratio"] = float(c.loc[0.5, "tau"] / ens["tau"])
    out["logit_norm_ratio"] = float(c.loc[0.5, "logit_norm"] / ens["logit_norm"])
    out.update(barrier(curve))
    out = {k: (bool(v) if isinstance(v, (bool, np.bool_)) else float(v)) for k, v in out.items()}
    return curve, out
