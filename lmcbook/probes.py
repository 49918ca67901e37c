"""Theory probes of the width paper: LEWC, weak additivity, reciprocal orthogonality, rank, neuron overlap, scale law.

Notation: f_l is the output of the l-th linear/conv layer on the main path (its
pre-activation, before any normalisation), z_(l-1) is that layer's input, and
θ(λ) = λ·θa + (1−λ)·θb.  A :class:`PairActivations` records, with forward
hooks on the models' probe points, every layer's input and output for model a,
model b and each merged model θ(λ) in one forward pass each, in float64 by default
(``dtype``; the book's pages use float32, see :func:`lmcbook.experiments.probe_frames`); every
probe reads from those records.  Probes never rewrite a forward pass.

Aggregation (one rule everywhere): a norm ratio is a ratio of Frobenius norms
over all inputs given (the whole test split in the book); a cosine is computed
per input and averaged over inputs whose two vectors are non-zero, and the
number of excluded inputs is reported as ``n_excluded``.

Layer numbers follow the forward pass: lmcbook's models list their layers, and
any other module's nn.Linear/nn.Conv layers are numbered in the order the hooked
forward pass calls them, not the order ``__init__`` registers them in.

What the probes mean beyond bias-free ReLU MLPs:

- With normalisation (BatchNorm after ``reset_bn``, or LayerNorm), f_l is the
  linear/conv output *before* the norm.  A norm rescales its input, so the
  λ^l scale of LEWC is not expected there; LLFC is the relevant comparison.
- With biases, biases merge linearly in λ, so LEWC's λ^l is only approximate.
  :class:`PairActivations` warns (:class:`ScaleWarning`) naming a model's biased
  and normalisation layers.
- Conv layers: a layer's f_l for one input is the whole (C, H, W) map; neurons
  are channels, and a channel's second moment averages over positions too.
- ResNet20: with ``points="blocks"`` each "layer" is one residual block and
  f_l is the block's output (the residual stream after its ReLU).  The LEWC
  theorem does not cover residual streams; the numbers are an empirical check.
  Weight-based probes (reciprocal orthogonality) need ``points="layers"``.

The module's next section: constructed networks for which the LEWC theorem's conditions hold, or fail, exactly.

The theorem: for a bias-free ReLU MLP, if (A) f_l^a ⊙ f_l^b >= 0 at every hidden
layer and (O) W_l^a z_(l-1)^b = 0 = W_l^b z_(l-1)^a for 2 <= l <= L, then
f_l(θ(λ)) = λ^l f_l^a + (1-λ)^l f_l^b at every layer and every λ.

Three constructions of a pair (a, b) of bias-free MLPs, in float64:

- ``block_diagonal``: a owns hidden units [0, h/2) and b the rest; each model's
  layers read only its own units. The models share only the input columns of W_1
  and the output rows of W_L. (A) and (O) hold, so LEWC is exact.
- ``disjoint_rows``: each model writes only its own units, but its layers read
  every unit (shared columns). (A) holds (the supports of f^a and f^b are
  disjoint), while (O) fails: W^a reads b's units. LEWC fails from layer 2 on.
- ``overlapping``: both models use every unit (dense random weights). Neither
  condition holds.

The training regime of a run (the module's last section): how long weight decay acted on it, and how far it
moved from its initialisation.

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

import copy
import functools
import math
import os
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .data import Dataset
from .merge import interpolate
from .models import LAYER_TYPES, MLP, ProbePoint, fit_inverse_temperature, has_batchnorm, numbered, probe_points, trace
from .specs import RunSpec, SpecError, check_lams
from .train import TrainedRun, init_model, lr_at

DTYPE = torch.float64

#: Normalisation layers: each rescales its input, which removes LEWC's λ^l scale after it.
NORM_TYPES = (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm, nn.LayerNorm, nn.GroupNorm,
              nn.LocalResponseNorm) + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ())


class ScaleWarning(UserWarning):
    """The probed model has biases or normalisation layers, where LEWC's λ^l scale does not apply exactly."""


def scale_caveats(model: nn.Module) -> dict[str, list[str]]:
    """Return the module names where LEWC's λ^l scale does not apply: ``"bias"``, the linear/conv layers with a
    bias (biases merge linearly in λ), and ``"norm"``, the normalisation layers (they rescale their input)."""
    mods = list(model.named_modules())
    return {"bias": [n for n, m in mods if isinstance(m, LAYER_TYPES) and getattr(m, "bias", None) is not None],
            "norm": [n for n, m in mods if isinstance(m, NORM_TYPES)]}


def warn_scale_caveats(model: nn.Module) -> None:
    """Warn with one :class:`ScaleWarning` naming the layers of ``model`` where LEWC's λ^l scale does not apply."""
    found = scale_caveats(model)
    if not (found["bias"] or found["norm"]):
        return
    parts = [f"{what} {', '.join(map(repr, names))}" for what, names in
             (("biases (merged linearly in λ) in", found["bias"]), ("normalisation (rescales its input) at",
                                                                   found["norm"])) if names]
    warnings.warn(f"LEWC's λ^l scale does not apply exactly in {type(model).__name__}: {'; '.join(parts)}. "
                  "LEWC numbers there are approximate; compare them with LLFC's (see lmcbook.probes).",
                  ScaleWarning, stacklevel=_caller_outside_lmcbook())


def _caller_outside_lmcbook() -> int:
    """Return the warnings stacklevel of the first frame outside lmcbook, seen from the function that warns."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    return level


# -- recording ------------------------------------------------------------------------
@dataclass
class Record:
    """Every probed layer's input z_(l-1) and output f_l for one model on one batch of inputs."""

    layers: list[int]
    roles: dict[int, str]
    modules: dict[int, nn.Module]
    inputs: dict[int, torch.Tensor]
    outputs: dict[int, torch.Tensor]
    #: "layers" (outputs are pre-activations) or "blocks" (outputs are residual-block outputs, after their ReLU)
    points: str = "layers"

    @property
    def hidden(self) -> list[int]:
        """Return the hidden layers (all but the output layer)."""
        return [l for l in self.layers if self.roles[l] == "hidden"]


def _points(model: nn.Module, points: str) -> tuple[list[ProbePoint], bool]:
    """Return the candidate probe points and whether the model numbers them itself (else: number by call order)."""
    if points == "layers":
        if hasattr(model, "probe_points"):
            return [p for p in probe_points(model) if p.layer is not None], True
        return [ProbePoint(n, m, None, "hidden") for n, m in model.named_modules() if isinstance(m, LAYER_TYPES)], False
    if points == "blocks":
        if not hasattr(model, "block_points"):
            raise ValueError(f"points='blocks' is not allowed for {type(model).__name__}: only ResNet20 has blocks")
        return model.block_points(), True
    raise ValueError(f"points={points!r} is not allowed: expected 'layers' or 'blocks'")


def record(model: nn.Module, x: torch.Tensor, points: str = "layers") -> Record:
    """Return every probe point's input and output for ``model`` on ``x`` from one hooked forward pass.

    Layers are numbered in the order that pass calls them, whatever order the
    model's ``__init__`` registers them in; a model that lists its own probe
    points (lmcbook's do) keeps its numbers, which must follow the call order.
    """
    pts, declared = _points(model, points)
    if not pts:
        raise SpecError(f"model={type(model).__name__} is not allowed: expected a model with nn.Linear or nn.Conv "
                        "layers to probe")
    order, ins, outs = trace(model, x, [p.module for p in pts], [p.name for p in pts])
    if declared:
        missing = [p.name for i, p in enumerate(pts) if i not in ins]
        called = [pts[i].layer for i in order]
        if missing or called != sorted(called):
            raise SpecError(f"{type(model).__name__}'s probe points are not allowed: expected every listed layer "
                            f"to be called once, in the order of its layer number; never called: {missing}, "
                            f"layer numbers in call order: {called}")
        layer_of = {i: p.layer for i, p in enumerate(pts)}
    else:
        if not order:
            raise SpecError(f"model={type(model).__name__} is not allowed: its forward pass calls none of its "
                            "nn.Linear or nn.Conv layers")
        pts = numbered([(pts[i].name, pts[i].module) for i in order])
        layer_of = {i: p.layer for i, p in zip(order, pts)}
    ins = {layer_of[i]: t for i, t in ins.items()}
    outs = {layer_of[i]: t for i, t in outs.items()}
    pts = sorted(pts, key=lambda p: p.layer)
    return Record([p.layer for p in pts], {p.layer: p.role for p in pts}, {p.layer: p.module for p in pts}, ins,
                  outs, points)


def _in_dtype(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Return ``model`` itself when its floating-point tensors are already ``dtype``, else a converted copy.

    The probes never modify a model: :func:`record` restores the training flag and
    runs under inference mode, and merged models are new ones.
    """
    if all(t.dtype == dtype for t in model.state_dict().values() if t.is_floating_point()):
        return model
    return copy.deepcopy(model).to(dtype).eval().requires_grad_(False)


class PairActivations:
    """Records of model a, model b and merged models θ(λ) on inputs x, in ``dtype`` (float64 unless given),
    computed once each.

    ``train_x`` (training inputs) is needed only for models with BatchNorm, whose
    statistics are recomputed after each interpolation.  Layers are numbered in
    call order (see :func:`record`).  A model with biases or normalisation layers
    gets one :class:`ScaleWarning` naming them, unless ``warn=False``.
    """

    def __init__(self, model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, train_x: torch.Tensor | None = None,
                 points: str = "layers", dtype: torch.dtype = DTYPE, warn: bool = True) -> None:
        self.a, self.b = _in_dtype(model_a, dtype), _in_dtype(model_b, dtype)
        self.x = x.to(dtype)
        self.train_x = train_x.to(dtype) if train_x is not None else None
        self.points = points
        if has_batchnorm(self.a) and self.train_x is None:
            raise ValueError("train_x=None is not allowed for models with BatchNorm: pass training inputs")
        if warn:
            warn_scale_caveats(model_a)
        self.rec_a = record(self.a, self.x, points)
        self.rec_b = record(self.b, self.x, points)
        self._merged: dict[float, Record] = {}

    @property
    def layers(self) -> list[int]:
        """Return the probed layer numbers."""
        return self.rec_a.layers

    def merged(self, lam: float) -> Record:
        """Return the record of θ(λ) (computed on first use)."""
        (lam,) = check_lams([lam])
        if lam not in self._merged:
            self._merged[lam] = record(interpolate(self.a, self.b, lam, self.train_x), self.x, self.points)
        return self._merged[lam]

    # the probes, sharing this pair's records ----------------------------------------
    def lewc(self, lams=(0.5,)) -> pd.DataFrame:
        """Return per layer and λ the cosine and relative error of θ(λ)'s f_l against the LEWC and LLFC predictions,
        with each layer's ``role`` ("hidden" or "output", :attr:`Record.roles`)."""
        rows = []
        for lam in check_lams(lams):
            m = self.merged(lam)
            for l in self.layers:
                fa, fb, fm = self.rec_a.outputs[l], self.rec_b.outputs[l], m.outputs[l]
                for name, pred in (("lewc", lam ** l * fa + (1 - lam) ** l * fb),
                                   ("llfc", lam * fa + (1 - lam) * fb)):
                    c, n_ex = cosine(fm, pred)
                    rows += [{**r, "role": self.rec_a.roles[l]} for r in (
                        _row(l, lam, f"{name}_cos", c), _row(l, lam, f"{name}_rel_err", rel_err(fm, pred)),
                        _row(l, lam, f"{name}_n_excluded", n_ex))]
        return pd.DataFrame(rows)

    def weak_additivity(self, lams=(0.5,), baseline_seed: int = 0) -> pd.DataFrame:
        """Return per hidden layer and λ the additivity error, cosine and sign conflicts, with Gaussian baselines."""
        rows = []
        for lam in check_lams(lams):
            for l in self.rec_a.hidden:
                fa, fb = self.rec_a.outputs[l], self.rec_b.outputs[l]
                u, v = lam ** l * fa, (1 - lam) ** l * fb
                base = gaussian_additivity_baseline(tuple(fa.shape), _rms(u), _rms(v), seed=baseline_seed + l)
                for prefix, vals in (("", additivity(u, v)), ("baseline_", base)):
                    rows += [_row(l, lam, f"{prefix}additivity_{k}", vals[k]) for k in ("rel_err", "cos", "n_excluded")]
                    rows.append(_row(l, lam, f"{prefix}sign_conflict", vals["sign_conflict"]))
        return pd.DataFrame(rows)

    def reciprocal_orthogonality(self, lams=(0.5,)) -> pd.DataFrame:
        """Return for layers l >= 2 the norm ratios ‖W_a z_b‖/‖W_a z_a‖, ‖W_b z_a‖/‖W_b z_b‖ and the cross terms."""
        if self.points != "layers":
            raise ValueError("reciprocal_orthogonality needs points='layers' (it applies each layer's weights)")
        rows = []
        for l in self.layers[1:]:
            mod_a, mod_b = self.rec_a.modules[l], self.rec_b.modules[l]
            za, zb = self.rec_a.inputs[l], self.rec_b.inputs[l]
            wa_za, wa_zb = apply_weight(mod_a, za), apply_weight(mod_a, zb)
            wb_zb, wb_za = apply_weight(mod_b, zb), apply_weight(mod_b, za)
            ratio_ab = _norm(wa_zb) / _norm(wa_za)
            ratio_ba = _norm(wb_za) / _norm(wb_zb)
            # Zhou et al. (2023)'s commutativity: W_a z_a + W_b z_b = W_a z_b + W_b z_a, i.e. (W_a − W_b)(z_a − z_b) = 0
            commut = _norm(wa_za + wb_zb - wa_zb - wb_za) / (_norm(wa_za) + _norm(wb_zb))
            for lam in check_lams(lams):
                rows += [_row(l, lam, "orth_ratio_ab", ratio_ab), _row(l, lam, "orth_ratio_ba", ratio_ba),
                         _row(l, lam, "orth_ratio", 0.5 * (ratio_ab + ratio_ba)),
                         _row(l, lam, "commutativity_rel_err", commut)]
                # y = (λW_a + (1-λ)W_b)(λ^(l-1) z_a + (1-λ)^(l-1) z_b), expanded by linearity
                ca, cb = lam ** (l - 1), (1 - lam) ** (l - 1)
                y = lam * (ca * wa_za + cb * wa_zb) + (1 - lam) * (ca * wb_za + cb * wb_zb)
                y0 = lam ** l * wa_za + (1 - lam) ** l * wb_zb
                c, n_ex = cosine(y, y0)
                rows += [_row(l, lam, "cross_cos", c), _row(l, lam, "cross_rel_err", rel_err(y, y0)),
                         _row(l, lam, "cross_n_excluded", n_ex)]
        return pd.DataFrame(rows)

    def neuron_moments(self, top_fraction: float = 0.1) -> pd.DataFrame:
        """Return per hidden layer the Jaccard index of the two models' top-k neurons and its chance level, how
        concentrated each layer's activity is (``top_share``, ``participation_ratio``; mean of the two models, or of
        the one whose layer is not dead, and no row where both are dead; see :func:`concentration`), plus every
        neuron's root second moment (``rms_a``/``rms_b`` rows keyed by ``index``)."""
        if not 0 < top_fraction <= 1:
            raise ValueError(f"top_fraction={top_fraction!r} is not allowed: expected a fraction in (0, 1]")
        rows, per_neuron = [], []
        for l in self.rec_a.hidden:
            ra, rb = neuron_rms(self.rec_a, l), neuron_rms(self.rec_b, l)
            n = len(ra)
            k = max(1, round(top_fraction * n))
            top_a = set(torch.topk(ra, k).indices.tolist())
            top_b = set(torch.topk(rb, k).indices.tolist())
            rows += [_row(l, None, "jaccard", len(top_a & top_b) / len(top_a | top_b)),
                     _row(l, None, "jaccard_chance", jaccard_chance(n, k)), _row(l, None, "top_k", k),
                     _row(l, None, "n_neurons", n)]
            live = [c for c in (concentration(r ** 2, k) for r in (ra, rb)) if not math.isnan(c[0])]
            if live:  # a dead layer (all activity zero) has no concentration: averaged over the live models only
                rows += [_row(l, None, "top_share", sum(c[0] for c in live) / len(live)),
                         _row(l, None, "participation_ratio", sum(c[1] for c in live) / len(live))]
            per_neuron += [pd.DataFrame({"layer": l, "lam": float("nan"), "metric": key, "value": r.cpu().numpy(),
                                         "index": np.arange(n)}) for key, r in (("rms_a", ra), ("rms_b", rb))]
        return pd.concat([pd.DataFrame(rows)] + per_neuron, ignore_index=True)

    def scale_law(self) -> pd.DataFrame:
        """Return r_l = ‖f_l(θ(½))‖ / ‖½(f_l^a + f_l^b)‖ per layer and the fit log2 r_l = α − β(l − 1)."""
        m = self.merged(0.5)
        rows, ls, logs = [], [], []
        for l in self.layers:
            r = _norm(m.outputs[l]) / _norm(0.5 * (self.rec_a.outputs[l] + self.rec_b.outputs[l]))
            rows.append(_row(l, 0.5, "scale_ratio", r))
            ls.append(l)
            logs.append(math.log2(r))
        alpha, beta = fit_scale_law(ls, logs)
        rows += [_row(None, 0.5, "scale_alpha", alpha), _row(None, 0.5, "scale_beta", beta)]
        return pd.DataFrame(rows)


# -- the functional API ---------------------------------------------------------------
def lewc_similarity(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lams=(0.5,), **kw) -> pd.DataFrame:
    """Return per layer and λ the cosine and relative error of f_l(θ(λ)) against the LEWC and LLFC predictions.

    LEWC predicts λ^l f_l^a + (1−λ)^l f_l^b; LLFC predicts λ f_l^a + (1−λ) f_l^b.  At λ = ½
    both are multiples of f_a + f_b, so their cosines coincide; compare relative errors,
    and compare against an untrained pair (``experiments.probe_frames`` reports both).
    """
    return PairActivations(model_a, model_b, x, **kw).lewc(lams)


def weak_additivity(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lams=(0.5,), **kw) -> pd.DataFrame:
    """Return per hidden layer the additivity error ‖σ(u+v)−σ(u)−σ(v)‖/‖σ(u)+σ(v)‖, the cosine
    cos(σ(u+v), σ(u)+σ(v)) and the sign-conflict fraction of f_a ⊙ f_b < 0, with u = λ^l f_a,
    v = (1−λ)^l f_b, beside a Monte Carlo Gaussian baseline at the same width, scales and aggregation."""
    return PairActivations(model_a, model_b, x, **kw).weak_additivity(lams)


def reciprocal_orthogonality(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lams=(0.5,),
                             **kw) -> pd.DataFrame:
    """Return for layers l >= 2 the norm ratios ‖W_l^a z^b‖/‖W_l^a z^a‖ and ‖W_l^b z^a‖/‖W_l^b z^b‖, and the
    cross-term check y = (λW^a+(1−λ)W^b)(λ^(l−1) z^a+(1−λ)^(l−1) z^b) against y₀ = λ^l W^a z^a + (1−λ)^l W^b z^b.

    Also returns Zhou et al. (2023)'s commutativity error
    ‖W^a z^a + W^b z^b − W^a z^b − W^b z^a‖ / (‖W^a z^a‖ + ‖W^b z^b‖), which LLFC needs.
    Only the weights are applied (no bias); z is each layer's actual input, so with
    normalisation or residual connections it is the normalised / residual stream."""
    return PairActivations(model_a, model_b, x, **kw).reciprocal_orthogonality(lams)


def neuron_moments(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, top_fraction: float = 0.1,
                   **kw) -> pd.DataFrame:
    """Return per hidden layer the root second moments sqrt(E[z_i²]) of each model's neurons (channels for
    convs), the Jaccard index of the two top-k sets (k = max(1, round(q·n))) and its exact chance level.

    z is the input of the next layer: the post-activation (after norm and ReLU, and
    after pooling where a pool sits in between)."""
    return PairActivations(model_a, model_b, x, **kw).neuron_moments(top_fraction)


def scale_law(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, **kw) -> pd.DataFrame:
    """Return r_l = ‖f_l(θ(½))‖ / ‖½(f_l^a+f_l^b)‖ per layer and the least-squares fit log2 r_l = α − β(l−1).

    LEWC predicts α = 0 and β = 1 (r_l = 2^(1−l))."""
    return PairActivations(model_a, model_b, x, **kw).scale_law()


def rank_profile(model: nn.Module, x: torch.Tensor | None = None) -> pd.DataFrame:
    """Return per weight matrix (float64) the effective rank, stable rank, their relative forms and the spectrum.

    Layers are numbered as :func:`lmcbook.models.probe_points` numbers them: for a
    module that does not list its own, in the order a forward pass on the example
    input ``x`` calls them, or in registration order without ``x``.

    Conv kernels are reshaped to (out, in·k·k).  Effective rank = exp(entropy of
    p), p_i = σ_i/Σσ; stable rank = ‖W‖_F²/‖W‖_2²; relative = divided by min(m, n).
    Spectrum rows (``singular_value``) are keyed by ``index``.  ``role`` says
    whether a matrix is the input layer (whose min(m, n) is the input size),
    a hidden-to-hidden matrix, the output layer, or a ResNet shortcut.
    """
    rows, spectra, keys = [], [], []
    for p in probe_points(model, x):
        w = p.module.weight.detach().to("cpu", DTYPE).reshape(p.module.weight.shape[0], -1)
        s = singular_values(w)
        m = min(w.shape)
        role = "input" if p.layer == 1 else p.role
        base = {"layer": float("nan") if p.layer is None else p.layer, "name": p.name, "role": role}
        er, sr = effective_rank(s), stable_rank(s)
        rows += [{**base, "metric": "effective_rank", "value": er}, {**base, "metric": "stable_rank", "value": sr},
                 {**base, "metric": "rel_effective_rank", "value": er / m},
                 {**base, "metric": "rel_stable_rank", "value": sr / m}]
        spectra.append(s.numpy())
        keys.append(base)
    n = [len(s) for s in spectra]
    spectrum = pd.DataFrame({col: np.repeat([k[col] for k in keys], n) for col in ("layer", "name", "role")})
    spectrum = spectrum.assign(metric="singular_value", value=np.concatenate(spectra),
                               index=np.concatenate([np.arange(k) for k in n]))
    return pd.concat([pd.DataFrame(rows), spectrum], ignore_index=True)


# -- building blocks ------------------------------------------------------------------
def _row(layer, lam, metric, value) -> dict:
    nan = float("nan")
    return {"layer": nan if layer is None else layer, "lam": nan if lam is None else lam, "metric": metric,
            "value": float(value)}


def _norm(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t))


def _rms(t: torch.Tensor) -> float:
    return float(torch.sqrt((t ** 2).mean()))


def cosine(u: torch.Tensor, v: torch.Tensor) -> tuple[float, int]:
    """Return (mean per-input cosine of u and v over inputs where both are non-zero, number excluded)."""
    u, v = u.reshape(len(u), -1), v.reshape(len(v), -1)
    nu, nv = u.norm(dim=1), v.norm(dim=1)
    ok = (nu > 0) & (nv > 0)
    n_ok = int(ok.sum())
    if n_ok == 0:
        return float("nan"), int(len(u))
    if n_ok < len(u):  # select only when needed: the selection copies both inputs
        u, v, nu, nv = u[ok], v[ok], nu[ok], nv[ok]
    c = torch.linalg.vecdot(u, v) / (nu * nv)
    return float(c.mean()), len(ok) - n_ok


def rel_err(actual: torch.Tensor, predicted: torch.Tensor) -> float:
    """Return ‖actual − predicted‖ / ‖actual‖ (Frobenius over all inputs)."""
    return _norm(actual - predicted) / _norm(actual)


def additivity(u: torch.Tensor, v: torch.Tensor) -> dict[str, float]:
    """Return σ(u+v) against σ(u)+σ(v): relative error, cosine, inputs excluded; and the sign-conflict fraction."""
    s_uv, s_sum = torch.relu(u + v), torch.relu(u) + torch.relu(v)
    c, n_ex = cosine(s_uv, s_sum)
    return {"rel_err": _norm(s_uv - s_sum) / _norm(s_sum), "cos": c, "n_excluded": n_ex,
            "sign_conflict": float((u * v < 0).double().mean())}


def gaussian_additivity_baseline(shape: tuple[int, ...], scale_u: float, scale_v: float, seed: int = 0,
                                 samples: int = 1 << 15) -> dict[str, float]:
    """Return :func:`additivity` of independent Gaussians u ~ N(0, scale_u²), v ~ N(0, scale_v²) of ``shape``.

    Same width, scale ratio, number of inputs and aggregation as the measured layer,
    averaged over enough Monte Carlo draws to reach ``samples`` numbers per variable
    (at least one draw).  Drawn in float32: Monte Carlo noise dwarfs its rounding.
    At equal scales and large width the cosine tends to (¾ + 1/π)/√(1 + 1/π) ≈ 0.930,
    and the sign-conflict fraction is ½.
    """
    draws = _standard_normal_draws(tuple(shape), seed, samples)
    repeats = len(draws)
    acc: dict[str, float] = {}
    for uv in draws:
        for k, val in additivity(uv[0] * scale_u, uv[1] * scale_v).items():
            acc[k] = acc.get(k, 0.0) + val / repeats
    return acc


#: Draws of at most this many numbers (64 MB in float32) are kept between calls.
DRAW_CACHE_NUMBERS = 1 << 24


def _standard_normal_draws(shape: tuple[int, ...], seed: int, samples: int) -> torch.Tensor:
    """Return the baseline's N(0, 1) draws, shape (repeats, 2, *shape), the same for the same arguments.

    Only the scales change from layer to layer and pair to pair, so small draws
    (up to :data:`DRAW_CACHE_NUMBERS`, 16 of them) are kept and rescaled on each
    call; larger ones (conv activations of big inputs) are drawn afresh.
    """
    repeats = max(1, math.ceil(samples / math.prod(shape)))
    if repeats * 2 * math.prod(shape) <= DRAW_CACHE_NUMBERS:
        return _cached_draws(shape, seed, repeats)
    return _draw(shape, seed, repeats)


def _draw(shape: tuple[int, ...], seed: int, repeats: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randn((2, *shape), generator=g) for _ in range(repeats)])


_cached_draws = functools.lru_cache(maxsize=16)(_draw)


def apply_weight(module: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """Return W z for a linear or conv module: its weights applied to z, without bias."""
    w = module.weight.detach()
    if isinstance(module, nn.Linear):
        return F.linear(z, w)
    if isinstance(module, nn.Conv2d):
        return F.conv2d(z, w, None, module.stride, module.padding, module.dilation, module.groups)
    if isinstance(module, nn.Conv1d):
        return F.conv1d(z, w, None, module.stride, module.padding, module.dilation, module.groups)
    raise ValueError(f"apply_weight needs nn.Linear or nn.Conv; got {type(module).__name__}")


def neuron_rms(rec: Record, layer: int) -> torch.Tensor:
    """Return sqrt(E[z_i²]) of each neuron (channel) of hidden layer ``layer``'s post-activation: the next layer's
    input, or a residual block's own output."""
    if rec.points == "blocks":
        z = rec.outputs[layer].double()
    else:
        z = rec.inputs[rec.layers[rec.layers.index(layer) + 1]].double()
    dims = [0] + list(range(2, z.ndim))
    return torch.sqrt((z ** 2).mean(dim=dims))


def concentration(second_moments: torch.Tensor, k: int) -> tuple[float, float]:
    """Return how concentrated a layer's activity is, from its neurons' second moments m_i = E[z_i²]:
    the share Σ_(top k) m_i / Σ m_i held by the k largest (k/n if all are equal), and the relative participation
    ratio (Σ m_i)² / (n Σ m_i²) (1 if all are equal, 1/n if one neuron carries everything)."""
    m = second_moments.double()
    total = m.sum()
    if total <= 0:
        return float("nan"), float("nan")
    return float(torch.topk(m, k).values.sum() / total), float(total ** 2 / (len(m) * (m ** 2).sum()))


@functools.lru_cache(maxsize=1024)
def jaccard_chance(n: int, k: int) -> float:
    """Return E[J] of two independent uniformly random k-subsets of n items: Σ_i P(i)·i/(2k − i), i hypergeometric."""
    from scipy.stats import hypergeom

    i = np.arange(0, k + 1)
    p = hypergeom(n, k, k).pmf(i)
    return float((p * i / (2 * k - i)).sum())


#: From this size on, singular values come from the Gram matrix's eigenvalues (about twice as fast).
GRAM_MIN_SIZE = 512


def singular_values(w: torch.Tensor) -> torch.Tensor:
    """Return the singular values of a float64 matrix, largest first.

    Below :data:`GRAM_MIN_SIZE` (the smaller dimension) they come from an SVD.  From
    that size on they are the square roots of the eigenvalues of W Wᵀ (or WᵀW, the
    smaller), which is about twice as fast; values below about 1e-7·σ_1 then carry
    rounding error, which moves the effective and stable ranks by less than 1e-6.
    """
    if min(w.shape) < GRAM_MIN_SIZE:
        return torch.linalg.svdvals(w)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    return torch.linalg.eigvalsh(gram).clamp_min(0).sqrt().flip(0)


def effective_rank(s: torch.Tensor) -> float:
    """Return exp(entropy of p), p_i = σ_i / Σσ (exactly r for r equal non-zero singular values; 0 for the zero
    matrix)."""
    s = s.double()
    if not bool((s > 0).any()):
        return 0.0
    p = s[s > 0] / s.sum()
    return float(torch.exp(-(p * torch.log(p)).sum()))


def stable_rank(s: torch.Tensor) -> float:
    """Return ‖W‖_F² / ‖W‖_2² from the singular values (0 for the zero matrix)."""
    s = s.double()
    if not bool((s > 0).any()):
        return 0.0
    return float((s ** 2).sum() / s.max() ** 2)


def fit_scale_law(layers, log2_ratios) -> tuple[float, float]:
    """Return (α, β) of the least-squares fit log2 r_l = α − β·(l − 1)."""
    x = np.asarray(layers, float) - 1
    y = np.asarray(log2_ratios, float)
    if len(x) < 2:
        return float(y[0]) if len(y) else float("nan"), float("nan")
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(-slope)


# ---- The LEWC theorem's constructed pairs ----


KINDS = ("block_diagonal", "disjoint_rows", "overlapping")


def mlp_from_weights(weights: list[torch.Tensor]) -> MLP:
    """Return a bias-free MLP (no norm) whose linear layers hold ``weights`` (out, in), in their dtype."""
    depth = len(weights)
    model = MLP(weights[0].shape[1], weights[-1].shape[0], weights[0].shape[0], depth, "none", False)
    model = model.to(weights[0].dtype)
    with torch.no_grad():
        for layer, w in zip(model.layers, weights):
            layer.weight.copy_(w)
    return model.eval()


def constructed_pair(kind: str = "block_diagonal", in_features: int = 16, hidden: int = 32, num_classes: int = 10,
                     depth: int = 4, seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[MLP, MLP]:
    """Return a pair of bias-free MLPs built as ``kind`` (see the module docstring) with He-scaled Gaussian weights."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not allowed: expected one of {', '.join(map(repr, KINDS))}")
    if hidden % 2 or depth < 2:
        raise ValueError(f"hidden={hidden}, depth={depth} is not allowed: expected an even hidden size, depth >= 2")
    g = torch.Generator().manual_seed(seed)
    h = hidden // 2
    dims = [in_features] + [hidden] * (depth - 1) + [num_classes]
    own = {"a": slice(0, h), "b": slice(h, hidden)}
    weights: dict[str, list[torch.Tensor]] = {"a": [], "b": []}
    for i in range(depth):
        n_out, n_in = dims[i + 1], dims[i]
        for m in ("a", "b"):
            rows = own[m] if (i < depth - 1 and kind != "overlapping") else slice(0, n_out)
            cols = own[m] if (i > 0 and kind == "block_diagonal") else slice(0, n_in)
            w = torch.zeros(n_out, n_in, dtype=dtype)
            block = w[rows, cols]
            block.copy_(torch.randn(block.shape, generator=g, dtype=dtype) * (2.0 / block.shape[1]) ** 0.5)
            weights[m].append(w)
    return mlp_from_weights(weights["a"]), mlp_from_weights(weights["b"])


def block_diagonal_pair(in_features: int = 16, hidden: int = 32, num_classes: int = 10, depth: int = 4,
                        seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[MLP, MLP]:
    """Return the block-diagonal pair, for which LEWC holds exactly."""
    return constructed_pair("block_diagonal", in_features, hidden, num_classes, depth, seed, dtype)


def inputs(n: int, in_features: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Return n standard Gaussian inputs (the theorem holds for any inputs)."""
    return torch.randn(n, in_features, generator=torch.Generator().manual_seed(seed + 10_000), dtype=dtype)


def check_pair(kind: str, depth: int = 4, hidden: int = 32, in_features: int = 16, n_inputs: int = 256,
               seed: int = 0, lams=(0.0, 0.25, 0.5, 0.75, 1.0)):
    """Return the long frame of every probe on the constructed pair ``kind`` (``method`` = kind), in float64.

    Rows: LEWC/LLFC relative errors per layer and λ, additivity errors and sign
    conflicts per hidden layer and λ, orthogonality ratios and cross terms per layer
    l >= 2, the scale law (r_l, α, β), and the logit-scale checks of
    :func:`logit_scale` (``logit_norm_ratio``, ``tau_ratio``).
    """

    a, b = constructed_pair(kind, in_features, hidden, 10, depth, seed)
    x = inputs(n_inputs, in_features, seed)
    acts = PairActivations(a, b, x)
    frames = [acts.lewc(lams), acts.weak_additivity(lams), acts.reciprocal_orthogonality(lams), acts.scale_law()]
    scale = logit_scale(a, b, x, seed)
    frames.append(pd.DataFrame([{"layer": depth, "lam": 0.5, "metric": k, "value": v} for k, v in scale.items()]))
    out = pd.concat(frames, ignore_index=True)
    out["method"], out["depth"], out["hidden_units"], out["seed"] = kind, depth, hidden, seed
    return out


def logit_scale(a: MLP, b: MLP, x: torch.Tensor, seed: int = 0) -> dict[str, float]:
    """Return the logit norm ratio ‖f_L(θ(½))‖/‖½(f_a+f_b)‖ and τ_merged/τ_ens on labels drawn from the ensemble.

    Labels are sampled from softmax of the ensemble's logits, so the ensemble is
    well calibrated (τ_ens ≈ 1) and neither fit ends at a bound.  Under exact LEWC
    the merged logits are 2^(1−L) times the ensemble's, so the ratios are 2^(1−L)
    and 2^(L−1) exactly.
    """

    with torch.no_grad():
        za, zb = a(x), b(x)
        ens = 0.5 * (za + zb)
        merged = interpolate(a, b, 0.5)(x)
        g = torch.Generator().manual_seed(seed + 20_000)
        y = torch.multinomial(torch.softmax(ens, 1), 1, generator=g)[:, 0]
    t_m, t_e = fit_inverse_temperature(merged, y), fit_inverse_temperature(ens, y)
    return {"logit_norm_ratio": float(merged.norm() / ens.norm()), "tau_merged": t_m.tau, "tau_ensemble": t_e.tau,
            "tau_ratio": t_m.tau / t_e.tau, "tau_at_bound_merged": float(t_m.at_bound),
            "tau_at_bound_ensemble": float(t_e.at_bound)}


# ---- A run's training regime ----


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
