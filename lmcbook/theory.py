"""Constructed networks for which the LEWC theorem's conditions hold, or fail, exactly.

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
"""

from __future__ import annotations

import pandas as pd
import torch

from .calibrate import fit_inverse_temperature
from .merge import interpolate
from .models import MLP
from .probes import PairActivations

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
