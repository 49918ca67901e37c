"""The training regime of a run: how long weight decay acted on it, and how far it moved from its initialisation;
and the words the pages use for a study and its regime (the module's last section).

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
from typing import Any

import pandas as pd
import torch
from torch import nn

from .data import DATASET_LABELS, Dataset
from .models import probe_points
from .probes import DTYPE, effective_rank, singular_values, stable_rank
from .schema import join_and
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


# ---- The words for a study and its regime ----


def precision_words(precision: str) -> str:
    """Return a caption's clause on a training precision: "" for fp32, else ", every run in P autocast"."""
    return "" if precision == "fp32" else f", every run in {precision} autocast"


def describe_study(study: Any, regime: pd.DataFrame | None = None) -> str:
    """Return a one-sentence Markdown description of what a study trained (for figure captions), ending with
    its training regime (:func:`describe_regime`) when ``regime`` is given."""
    pairs = study.pairs()
    units = sorted({p.hidden_units for p in pairs})
    depths = sorted({p.depth for p in pairs if p.depth is not None})
    m, t = pairs[0].a.model, pairs[0].a.train
    epochs = " or ".join(f"{e:g}" for e in sorted({p.epochs for p in pairs}))
    decays = " or ".join(f"{d:g}" for d in sorted({p.weight_decay for p in pairs}))
    if m.arch == "mlp":
        ls = f"L = {depths[0]}" if len(depths) == 1 else f"L = {', '.join(map(str, depths))}"
        arch = f"ReLU MLP with {ls} linear layers"
    else:
        arch = {"vgg11": "VGG11", "resnet20": "ResNet20 (activation probes read residual-block outputs)"}[m.arch]
    unit = "hidden units" if m.arch == "mlp" else "base channels"
    return (f"{'bias-free ' if not m.bias else ''}{arch}, norm {m.norm}, on {DATASET_LABELS[study.dataset]}; "
            f"{epochs} epochs of SGD (peak lr {t.lr:g}, momentum {t.momentum:g}, weight decay {decays}, "
            f"batch {t.batch_size}{precision_words(t.precision)}); "
            f"{', '.join(map(str, units))} {unit}; "
            f"{study.seeds} independent pair(s) per {'width' if len(units) > 1 else 'depth'}"
            + _deciding_pairs(study, len(units) > 1)
            + (f"; regime: {describe_regime(regime)}" if regime is not None else ""))


def _deciding_pairs(study: Any, sweep: bool) -> str:
    """Return " (5 at 16, 512 and 1024 hidden units)": the pairs at the widths where a width study's rows decide."""
    if not sweep or not hasattr(study, "deciding_widths"):
        return ""
    ws = [w for w in study.deciding_widths() if study.pairs_at(w) != study.seeds]
    if not ws:
        return ""
    units = [study.spec(w, 0).model.channels for w in ws]
    unit = "hidden units" if study.arch == "mlp" else "base channels"
    return f" ({study.pairs_at(ws[0])} at {join_and(list(map(str, units)))} {unit})"


def short_fraction(x: float) -> str:
    """Return a fraction with three decimals, or in scientific notation below 0.01."""
    return f"{x:.3f}" if x >= 0.01 else f"{x:.1e}"


def _regime_cells(regime: pd.DataFrame):
    """Yield (epochs, weight decay, metric means by hidden units, distance by hidden units) per cell of a regime
    frame (:func:`lmcbook.experiments.regime_frame`'s output, or those rows of a page's CSV)."""
    whole = regime[regime["layer"].isna()]
    for (epochs, wd), cell in whole.groupby(["epochs", "weight_decay"]):
        mean = cell.groupby(["metric", "hidden_units"])["value"].mean()
        yield epochs, wd, mean, mean["init_distance"]


def describe_regime(regime: pd.DataFrame) -> str:
    """Return one Markdown clause, for a figure caption, saying which training regime a page's runs are in: per
    (length, weight decay) the decay integral D and the distance from initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the
    narrowest and the widest width.  :func:`regime_table` gives the same cells in full."""
    parts = []
    for epochs, wd, mean, dist in _regime_cells(regime):
        lo, hi = dist.index.min(), dist.index.max()
        far = f"{dist[lo]:.2f} at {lo:g} hidden units" + (f" and {dist[hi]:.2f} at {hi:g}" if hi != lo else "")
        parts.append(f"{epochs:g} epochs at weight decay {wd:g}: D = {mean['decay_integral'].mean():.3g}, "
                     f"‖θ_T − θ_0‖/‖θ_0‖ = {far}")
    return "; ".join(parts)


def regime_table(regime: pd.DataFrame) -> str:
    """Return a Markdown table of the training regime of a page's runs, one row per (length, weight decay): the
    decay integral D, what weight decay alone would leave of a weight (momentum included), and the distance from
    initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the narrowest and the widest width (hidden units in brackets)."""
    rows = ["| epochs | weight decay | decay integral $D$ | fraction of a weight left by weight decay alone "
            "(momentum included) | distance from initialisation "
            "$\\lVert\\theta_T - \\theta_0\\rVert / \\lVert\\theta_0\\rVert$ at the narrowest width (hidden units) "
            "| distance at the widest width (hidden units) |",
            "|---:|---:|---:|---:|---:|---:|"]
    for epochs, wd, mean, dist in _regime_cells(regime):
        lo, hi = dist.index.min(), dist.index.max()
        rows.append(f"| {epochs:g} | {wd:g} | {mean['decay_integral'].mean():.3g} "
                    f"| {short_fraction(mean['decay_shrinkage'].mean())} "
                    f"| {dist[lo]:.2f} ({lo:g}) | {dist[hi]:.2f} ({hi:g}) |")
    return "\n".join(rows)


def describe_mechanism(study: Any) -> str:
    """Return a one-sentence Markdown description of what the mechanism study trained (for captions)."""
    cells = study.cells()
    m, t = cells[0].pair(cells[0].widths[0], 0).a.model, cells[0].pair(cells[0].widths[0], 0).a.train
    units = sorted({int(round(study.base_width * w)) for w in study.widths})
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers on "
            f"{DATASET_LABELS[study.dataset]}; SGD (peak lr "
            f"{t.lr:g}, momentum {t.momentum:g}, batch {t.batch_size}"
            f"{precision_words(t.precision)}); "
            f"{', '.join(map(str, units))} hidden units; "
            f"{len(cells)} cells of (length, weight decay, initial-weight factor); {study.seeds} pair(s) per cell and "
            f"width, {max(study.seeds, study.decisive_seeds)} in the cells that decide a verdict")


def mechanism_cut(study: Any) -> str:
    """Return one Markdown sentence saying which cells stop short of the widest width, to fit the time budget."""
    cut = study.cut_widths()
    if not cut:
        return "every cell was trained at every width"
    units = lambda ws: ", ".join(str(int(round(study.base_width * w))) for w in ws)  # noqa: E731
    mid = [d for d in study.weight_decays if d not in study.wide_decays]
    return (f"{units(cut)} hidden units were trained only in the decay arm at weight decay "
            f"{', '.join(f'{d:g}' for d in study.wide_decays)} and in the small-initialisation arm; the length arm"
            + (f" and weight decay {', '.join(f'{d:g}' for d in mid)}" if mid else "")
            + f" stop at {units(study.narrow_widths()[-1:])} units, to keep the book within its time budget (large "
            "D is reached far more cheaply by weight decay than by length)")
