"""The training regime of a run: how long weight decay acted on it, and how far it moved from its initialisation.

A claim about weight decay or low rank can only be read where weight decay had time
to act.  Three dimensionless measures say where a run stands:

- the *decay integral* D = Σ_t wd_t·η_t over every step the weights went through
  since their random initialisation (a child's parent steps and a fine-tuned
  run's source steps included).  Without momentum, weight decay alone would shrink
  the weights by e^(−D).  PyTorch's heavy-ball momentum μ (dampening 0) feeds the
  decay term through the momentum buffer, which multiplies its effect by about
  1/(1 − μ); :func:`weight_decay_shrinkage` iterates the exact factor (``decay_shrinkage``);
- the *distance from initialisation* ‖θ_T − θ_0‖ / ‖θ_0‖, over all parameters and per
  layer (that layer's weight), with θ_0 the initialisation from the run's seed;
- the *weight norm* ‖W_l‖_F of each layer, and ‖θ_T‖ over all parameters;
- the *rank of what training added*, W_l − W_l^0: its effective and stable rank and their relative forms
  (divided by min(m, n)), in float64.  The rank of W_l itself is dominated by the random
  initialisation while training has moved little; the rank of the update is not;
- the *training accuracy* the run reached (the convergence rules of :mod:`lmcbook.claims` read it).

Everything here is a pure function of a run's spec and weights: the initialisation
is rebuilt from the seed, so nothing needs retraining.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import nn

from .data import Dataset
from .models import probe_points
from .probes import DTYPE, effective_rank, singular_values, stable_rank
from .specs import RunSpec
from .train import TrainedRun, init_model, lr_at


def _segments(spec: RunSpec, n_train: int) -> list[tuple[RunSpec, list[float], bool]]:
    """Return, from the random initialisation on, each stretch of training the weights went through:
    (the spec trained, its learning rates step by step, whether its momentum buffer started empty)."""
    before = _segments(spec.parent, n_train) if spec.parent is not None else []
    before += _segments(spec.init, n_train) if spec.init is not None else []
    tr, total = spec.train, spec.total_steps(n_train)
    first = spec.spawn_step if spec.parent is not None else 0
    lrs = [lr_at(t, total, tr.lr, tr.warmup, tr.schedule, tr.lr_floor, tr.anneal_from)
           for t in range(first, tr.stop_step or total)]
    return before + [(spec, lrs, spec.parent is None)]


def decay_integral(spec: RunSpec, n_train: int) -> float:
    """Return D = Σ_t wd·η_t over every step from the random initialisation to the end of ``spec``.

    A child adds its own steps to its parent's; a fine-tuned run adds its steps to
    those of the run it starts from.  Weight decay alone, without momentum, would
    shrink the weights by e^(−D).
    """
    return math.fsum(s.train.weight_decay * math.fsum(lrs) for s, lrs, _ in _segments(spec, n_train))


def weight_decay_shrinkage(spec: RunSpec, n_train: int) -> float:
    """Return the factor by which weight decay alone (gradients aside) shrinks a weight over the same steps as D.

    It iterates PyTorch's SGD update on a scalar weight with zero gradient,
    buf = μ·buf + wd·w and w = w − η_t·buf, through every stretch of training
    (a child keeps its parent's buffer; a fine-tuned run starts a fresh one).
    """
    w, buf = 1.0, 0.0
    for s, lrs, fresh in _segments(spec, n_train):
        buf = 0.0 if fresh else buf
        for lr in lrs:
            buf = s.train.momentum * buf + s.train.weight_decay * w
            w -= lr * buf
    return w


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().double().reshape(-1).cpu() for p in model.parameters()])


def init_distance(model: nn.Module, init: nn.Module) -> dict[int | None, float]:
    """Return ‖θ − θ_0‖ / ‖θ_0‖ over all parameters (key None) and per layer l (its weight), for two models of one
    shape."""
    out: dict[int | None, float] = {None: _rel(_flat(model), _flat(init))}
    for p, q in zip(probe_points(model), probe_points(init)):
        if p.layer is not None:
            out[p.layer] = _rel(p.module.weight.detach().double().cpu(), q.module.weight.detach().double().cpu())
    return out


def weight_norms(model: nn.Module) -> dict[int | None, float]:
    """Return ‖θ‖ over all parameters (key None) and the Frobenius norm ‖W_l‖_F of each layer l."""
    out: dict[int | None, float] = {None: float(torch.linalg.vector_norm(_flat(model)))}
    for p in probe_points(model):
        if p.layer is not None:
            out[p.layer] = float(torch.linalg.vector_norm(p.module.weight.detach().double()))
    return out


def update_ranks(model: nn.Module, init: nn.Module) -> list[dict]:
    """Return per layer l the effective and stable rank of W_l − W_l^0 (what training added), absolute and divided
    by min(m, n), with ‖W_l − W_l^0‖_F, in float64; the zero matrix (an untrained run) has rank 0."""
    rows = []
    for p, q in zip(probe_points(model), probe_points(init)):
        if p.layer is None:
            continue
        w = p.module.weight.detach().to("cpu", DTYPE)
        delta = (w - q.module.weight.detach().to("cpu", DTYPE)).reshape(w.shape[0], -1)
        s, m = singular_values(delta), min(delta.shape)
        er, sr = effective_rank(s), stable_rank(s)
        rows += [{"layer": float(p.layer), "metric": metric, "value": v}
                 for metric, v in (("delta_norm", float(torch.linalg.matrix_norm(delta))),
                                   ("delta_effective_rank", er), ("delta_stable_rank", sr),
                                   ("delta_rel_effective_rank", er / m), ("delta_rel_stable_rank", sr / m))]
    return rows


def _rel(x: torch.Tensor, x0: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(x - x0) / torch.linalg.vector_norm(x0))


def lewc_setting(spec: RunSpec) -> bool:
    """Return True for a bias-free MLP without normalisation: the setting of the LEWC theorem and its λ^l scale."""
    m = spec.model
    return m.arch == "mlp" and not m.bias and m.norm == "none"


def regime_measures(run: TrainedRun, data: Dataset) -> pd.DataFrame:
    """Return one run's regime in the long format: ``decay_integral``, ``decay_shrinkage``, ``lewc_setting`` (the
    network is a bias-free MLP without normalisation), ``train_acc``, ``init_distance`` and ``weight_norm`` over
    all parameters (``layer`` NaN) and per layer, and per layer the ranks of W − W₀ (:func:`update_ranks`)."""
    init = init_model(run.spec, data)
    n = len(data.y_train)
    rows = [{"layer": float("nan"), "metric": "decay_integral", "value": decay_integral(run.spec, n)},
            {"layer": float("nan"), "metric": "decay_shrinkage", "value": weight_decay_shrinkage(run.spec, n)},
            {"layer": float("nan"), "metric": "lewc_setting", "value": float(lewc_setting(run.spec))},
            {"layer": float("nan"), "metric": "train_acc", "value": float(run.metrics["train_acc"])}]
    for metric, values in (("init_distance", init_distance(run.model, init)), ("weight_norm", weight_norms(run.model))):
        rows += [{"layer": float("nan") if l is None else float(l), "metric": metric, "value": v}
                 for l, v in values.items()]
    return pd.DataFrame(rows + update_ranks(run.model, init))
