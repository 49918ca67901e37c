"""Constructed networks for which the LEWC theorem's conditions hold (or fail) exactly.

The theorem: for a bias-free ReLU MLP, if (A) f_l^a ⊙ f_l^b >= 0 at every hidden
layer and (O) W_l^a z_(l-1)^b = 0 = W_l^b z_(l-1)^a for 2 <= l <= L, then
f_l(θ(λ)) = λ^l f_l^a + (1-λ)^l f_l^b at every layer and every λ.
"""

from __future__ import annotations

import torch

from .models import MLP


def _mlp_from(weights: list[torch.Tensor]) -> MLP:
    depth = len(weights)
    model = MLP(weights[0].shape[1], weights[-1].shape[0], weights[0].shape[0], depth, "none", False)
    model = model.to(weights[0].dtype)
    with torch.no_grad():
        for layer, w in zip(model.layers, weights):
            layer.weight.copy_(w)
    return model.eval()


def block_diagonal_pair(in_features: int = 16, hidden: int = 32, num_classes: int = 10, depth: int = 4,
                        seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[MLP, MLP]:
    """Return two bias-free MLPs whose hidden units are disjoint halves; they share only input and output.

    Model a uses hidden units [0, hidden/2) and model b the rest.  Each reads only
    its own units, so (A) and (O) hold exactly and LEWC is exact.
    """
    if hidden % 2 or depth < 2:
        raise ValueError(f"hidden={hidden}, depth={depth}: expected an even hidden size and depth >= 2")
    g = torch.Generator().manual_seed(seed)
    h = hidden // 2
    dims = [in_features] + [hidden] * (depth - 1) + [num_classes]
    wa, wb = [], []
    for i in range(depth):
        n_out, n_in = dims[i + 1], dims[i]
        ma, mb = torch.zeros(n_out, n_in, dtype=dtype), torch.zeros(n_out, n_in, dtype=dtype)
        rows_a = slice(0, h) if i < depth - 1 else slice(0, n_out)
        rows_b = slice(h, hidden) if i < depth - 1 else slice(0, n_out)
        cols_a = slice(0, n_in) if i == 0 else slice(0, h)
        cols_b = slice(0, n_in) if i == 0 else slice(h, hidden)
        scale = (2.0 / (n_in if i == 0 else h)) ** 0.5
        ma[rows_a, cols_a] = torch.randn(ma[rows_a, cols_a].shape, generator=g, dtype=dtype) * scale
        mb[rows_b, cols_b] = torch.randn(mb[rows_b, cols_b].shape, generator=g, dtype=dtype) * scale
        wa.append(ma)
        wb.append(mb)
    return _mlp_from(wa), _mlp_from(wb)
