"""Merging and what it measures: interpolation θ(λ) = λ·θa + (1−λ)·θb, BatchNorm reset, permutations, weight
matching, REPAIR, task-vector merges (task arithmetic, TIES); then interpolation curves, barriers and the logit
ensemble (the module's second section), built on a model's score (:func:`lmcbook.models.evaluate`).

The automatic PermutationSpec (the module's last section): trace a network with ``torch.fx`` and find the axes
each permutation acts on.

A permutation of a layer's output units is a symmetry of the network when every
consumer of those units is permuted along with them: the next linear/conv layer's
input axis, the normalisation layers and elementwise activations in between (they act
per channel), pooling, and, across a residual addition, the other summand too.  The
trace follows each tensor's channel axis (axis 1: the features of an (N, F) tensor, the
channels of an (N, C, ...) map) through the graph and joins the groups that must share
one permutation; groups that reach the network's input or output are not permuted.  A
``Flatten`` (or ``flatten``, ``view``, ``reshape`` to (N, C·H·W)) after a convolution or a
pooling layer turns each channel into a block of H·W consecutive features: the next
Linear's input axis is then permuted in blocks, ``(name, H·W)`` in the spec.

:func:`derive_spec` refuses, with :class:`SpecUnavailable` naming the node, anything it
cannot prove channel-equivariant (concatenation, reshapes other than a flatten of the
channels with their positions, grouped convolutions, GroupNorm with several groups, custom modules with
their own parameters).  :func:`check_spec` checks a spec the way it matters: a random
permutation must leave the network's outputs unchanged.
"""

from __future__ import annotations

import copy
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from .data import Dataset
from .models import (
    CONV_EVAL_BATCH,
    MLP,
    VGG11,
    ResNet20,
    as_input,
    evaluate_logits,
    fit_inverse_temperature,
    has_batchnorm,
    logits,
    nll,
    probe_points,
)
from .specs import DEFAULT_LAMS, SpecError, check_lams


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


def training_inputs(data: torch.Tensor | Dataset, name: str = "data") -> torch.Tensor:
    """Return the inputs to compute statistics on: a tensor of inputs as it is, or a Dataset's training split."""
    if isinstance(data, torch.Tensor):
        return data
    if isinstance(data, Dataset):
        return data.x_train
    raise SpecError(f"{name} of type {type(data).__name__} is not allowed: expected a torch.Tensor of training "
                    "inputs or an lmcbook.data.Dataset (whose training split x_train is used)")


def interpolate(a: nn.Module, b: nn.Module, lam: float, data: torch.Tensor | Dataset | None = None) -> nn.Module:
    """Return a new model with weights λ·θa + (1−λ)·θb, in eval mode.

    For models with BatchNorm the running statistics are then recomputed on
    ``data`` with :func:`reset_bn`; ``data`` is required there.  ``data`` is a
    tensor of training inputs or a :class:`~lmcbook.data.Dataset`, whose training
    split is used (statistics never come from the test split).
    """
    x = None if data is None else training_inputs(data)
    if x is None and has_batchnorm(a):
        raise SpecError("data=None is not allowed for a model with BatchNorm: pass training inputs or a Dataset so "
                        "that reset_bn can recompute the running statistics after interpolation")
    model = copy.deepcopy(a)
    interpolate_into(model, a, b, lam)
    if x is not None and has_batchnorm(model):
        reset_bn(model, x)
    return model.eval()


@torch.no_grad()
def reset_bn(model: nn.Module, x: torch.Tensor | Dataset, batch_size: int = 500) -> nn.Module:
    """Return ``model`` with every BatchNorm's running statistics recomputed as exact averages over ``x`` (inputs, or
    a Dataset's training split)."""
    x = training_inputs(x, "x")
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
        model(as_input(x[i:i + batch_size], model))
    for m, mom in zip(bns, saved):
        m.momentum = mom
    model.train(was_training)
    return model


def uniform_soup(models: list[nn.Module], data: torch.Tensor | Dataset | None = None) -> nn.Module:
    """Return a new model with weights (1/K)·Σ_k θ_k of K models (a uniform soup), in eval mode.

    Integer buffers come from the first model; BatchNorm statistics are recomputed on
    ``data`` (training inputs or a Dataset's training split), which a model with BatchNorm requires.
    """
    if len(models) < 2:
        raise SpecError(f"{len(models)} model(s) is not allowed: expected two or more to average")
    states = [m.state_dict() for m in models]
    for s in states[1:]:
        _check_same(states[0], s)
    if data is None and has_batchnorm(models[0]):
        raise SpecError("data=None is not allowed for a model with BatchNorm: pass training inputs or a Dataset so "
                        "that reset_bn can recompute the running statistics of the soup")
    soup = copy.deepcopy(models[0])
    with torch.no_grad():
        for k, v in soup.state_dict().items():
            if v.is_floating_point():
                v.copy_(torch.stack([s[k] for s in states]).mean(0))
    if data is not None and has_batchnorm(soup):
        reset_bn(soup, training_inputs(data))
    return soup.eval()


# -- permutations ---------------------------------------------------------------------
@dataclass(frozen=True)
class PermutationSpec:
    """Which permutation acts on which axis of which parameter or buffer (after git-re-basin).

    ``axes_to_perm`` maps every state-dict key to one entry per tensor axis: the
    name of the permutation acting on that axis, None, or ``(name, block)``: an axis of
    ``block`` consecutive features per unit of that permutation, moved as blocks (a Linear
    after a Flatten of C channels of H·W positions: ``("P_conv2", H * W)`` on its input axis,
    whose feature c·H·W + s is position s of channel c).  ``sizes`` gives each
    permutation's length.  Build one with :meth:`from_axes` (which checks it
    against a state dict) or :func:`permutation_spec` for lmcbook's models.
    """

    axes_to_perm: dict[str, tuple[str | None, ...]]
    sizes: dict[str, int]

    @property
    def perm_to_axes(self) -> dict[str, list[tuple[str, int]]]:
        """Return, for each permutation, the (key, axis) pairs it acts on."""
        out: dict[str, list[tuple[str, int]]] = {p: [] for p in self.sizes}
        for key, axes in self.axes_to_perm.items():
            for axis, entry in enumerate(axes):
                p, _ = axis_perm(entry)
                if p is not None:
                    out[p].append((key, axis))
        return out

    @classmethod
    def from_axes(cls, axes_to_perm: dict[str, tuple[str | None, ...]],
                  state: dict[str, torch.Tensor] | nn.Module) -> PermutationSpec:
        """Return a spec for ``state`` (a state dict or model), checked: every key covered, every size consistent.

        Zero-dimensional entries (BatchNorm's ``num_batches_tracked``) may be left out.
        """
        if isinstance(state, nn.Module):
            state = state.state_dict()
        axes_to_perm = {k: tuple(tuple(e) if isinstance(e, list) else e for e in v) for k, v in axes_to_perm.items()}
        missing = [k for k in state if k not in axes_to_perm and state[k].ndim > 0]
        if missing:
            raise ValueError(f"PermutationSpec misses parameter(s) {missing[:5]}: every parameter and buffer with an "
                             "axis needs an entry (a tuple with one permutation name, (name, block) or None per axis)")
        unknown = [k for k in axes_to_perm if k not in state]
        if unknown:
            raise ValueError(f"PermutationSpec names unknown parameter(s) {unknown[:5]}: "
                             "expected keys of the state dict")
        sizes: dict[str, int] = {}
        where: dict[str, str] = {}
        for key, axes in axes_to_perm.items():
            shape = tuple(state[key].shape)
            if len(axes) != len(shape):
                raise ValueError(f"PermutationSpec entry {key!r} has {len(axes)} axes but the tensor has shape {shape}")
            for axis, entry in enumerate(axes):
                p, block = axis_perm(entry)
                if p is None:
                    continue
                if shape[axis] % block:
                    raise ValueError(f"PermutationSpec entry {key!r} axis {axis} moves blocks of {block} features, "
                                     f"but the axis has {shape[axis]}: expected a multiple of {block}")
                if p in sizes and sizes[p] != shape[axis] // block:
                    raise ValueError(f"permutation {p!r} has size {sizes[p]} on {where[p]} but "
                                     f"{shape[axis] // block} on {key!r} axis {axis}"
                                     + (f" ({shape[axis]} features in blocks of {block})" if block > 1 else "")
                                     + ": expected one size per permutation")
                sizes[p], where[p] = shape[axis] // block, f"{key!r} axis {axis}"
        for k in state:
            if k not in axes_to_perm:
                axes_to_perm[k] = ()
        return cls(axes_to_perm, sizes)

    def check_fits(self, state: dict[str, torch.Tensor]) -> None:
        """Raise SpecError, naming the parameter and axis, unless every tensor this spec permutes is in ``state``
        with the axis sizes the spec gives its permutations."""
        for key, axes in self.axes_to_perm.items():
            if not any(axis_perm(e)[0] is not None for e in axes):
                continue
            shape = tuple(state[key].shape) if key in state else None
            if shape is None or len(shape) != len(axes):
                raise SpecError(f"spec does not fit the model: it permutes {key!r} over {len(axes)} axes, but the "
                                f"model's {key!r} {'is missing' if shape is None else f'has shape {shape}'}; expected "
                                "a PermutationSpec built for this model (merge.permutation_spec(model) or "
                                "PermutationSpec.from_axes(axes, model))")
            for axis, entry in enumerate(axes):
                p, block = axis_perm(entry)
                if p is not None and shape[axis] != self.sizes[p] * block:
                    raise SpecError(f"spec does not fit the model: permutation {p!r} has size {self.sizes[p]}"
                                    + (f" (in blocks of {block})" if block > 1 else "") + f", but {key!r} axis "
                                    f"{axis} has size {shape[axis]}; expected a PermutationSpec built for this model "
                                    "(merge.permutation_spec(model) or PermutationSpec.from_axes)")


def axis_perm(entry: str | tuple[str, int] | None) -> tuple[str | None, int]:
    """Return (permutation name or None, block) of one axis entry of a spec: a name moves single features
    (block 1), ``(name, block)`` moves blocks of ``block`` consecutive features."""
    if entry is None or isinstance(entry, str):
        return entry, 1
    if not isinstance(entry, tuple) or len(entry) != 2:
        raise ValueError(f"axis entry {entry!r} is not allowed: expected a permutation name, None, or (name, block)")
    name, block = entry
    if not isinstance(name, str) or int(block) != block or block < 1:
        raise ValueError(f"axis entry {entry!r} is not allowed: expected a permutation name, None, or "
                         "(name, block) with a block of one or more features")
    return name, int(block)


def expand(idx: torch.Tensor, block: int) -> torch.Tensor:
    """Return the permutation of an axis of blocks: unit i's ``block`` features move together, in their order."""
    if block == 1:
        return idx
    return (idx[:, None] * block + torch.arange(block, device=idx.device)).reshape(-1)


def _mlp_axes(model) -> dict[str, tuple]:
    axes: dict[str, tuple] = {}
    n = len(model.layers)
    for i in range(n):
        p_out = f"P{i}" if i < n - 1 else None
        p_in = f"P{i - 1}" if i > 0 else None
        axes[f"layers.{i}.weight"] = (p_out, p_in)
        axes[f"layers.{i}.bias"] = (p_out,)
    for i in range(n - 1):
        for name in ("weight", "bias", "running_mean", "running_var"):
            axes[f"norms.{i}.{name}"] = (f"P{i}",)
    return axes


def _norm_axes(prefix: str, p: str) -> dict[str, tuple]:
    return {f"{prefix}.{name}": (p,) for name in ("weight", "bias", "running_mean", "running_var")}


def _conv_axes(key: str, p_out, p_in) -> dict[str, tuple]:
    return {f"{key}.weight": (p_out, p_in, None, None), f"{key}.bias": (p_out,)}


def _conv_and_norm(conv: str, norm: str, p_out, p_in) -> dict[str, tuple]:
    """Return the axes of a conv layer (out ← p_out, in ← p_in) and of the norm after it (p_out)."""
    return {**_conv_axes(conv, p_out, p_in), **_norm_axes(norm, p_out)}


def _vgg_axes(model) -> dict[str, tuple]:
    axes: dict[str, tuple] = {}
    prev = None
    mods = list(model.features)
    for i, m in enumerate(mods):
        if isinstance(m, nn.Conv2d):
            p = f"P{i}"
            axes.update(_conv_and_norm(f"features.{i}", f"features.{i + 1}", p, prev))
            prev = p
    axes["classifier.weight"] = (None, prev)
    axes["classifier.bias"] = (None,)
    return axes


def _resnet_axes(model) -> dict[str, tuple]:
    axes: dict[str, tuple] = {}
    stream = "S0"  # the residual stream's permutation, shared within a stage
    axes.update(_conv_and_norm("conv1", "norm1", stream, None))
    for i, blk in enumerate(model.blocks):
        inner = f"B{i}"
        out = stream
        if isinstance(blk.shortcut, nn.Sequential):  # 1x1 projection: a new stream permutation for the new stage
            out = f"S{i}"
            axes.update(_conv_and_norm(f"blocks.{i}.shortcut.0", f"blocks.{i}.shortcut.1", out, stream))
        axes.update(_conv_and_norm(f"blocks.{i}.conv1", f"blocks.{i}.norm1", inner, stream))
        axes.update(_conv_and_norm(f"blocks.{i}.conv2", f"blocks.{i}.norm2", out, inner))
        stream = out
    axes["head.weight"] = (None, stream)
    axes["head.bias"] = (None,)
    return axes


def permutation_spec(model: nn.Module) -> PermutationSpec:
    """Return the PermutationSpec of an lmcbook MLP, VGG11 or ResNet20 (any norm, with or without bias)."""

    builders = {MLP: _mlp_axes, VGG11: _vgg_axes, ResNet20: _resnet_axes}
    for cls, build in builders.items():
        if isinstance(model, cls):
            state = model.state_dict()
            axes = {k: v for k, v in build(model).items() if k in state}
            return PermutationSpec.from_axes(axes, state)
    raise ValueError(f"no built-in PermutationSpec for {type(model).__name__}: write one with "
                     "PermutationSpec.from_axes({key: (perm or None per axis)}, model)")


Perms = dict[str, torch.Tensor]


def _check_perms(spec: PermutationSpec, perms: Perms) -> None:
    if set(perms) != set(spec.sizes):
        raise ValueError(f"perms name {sorted(perms)}, the spec {sorted(spec.sizes)}: expected the same names")
    for p, idx in perms.items():
        if len(idx) != spec.sizes[p] or not torch.equal(torch.sort(idx.cpu()).values, torch.arange(spec.sizes[p])):
            raise ValueError(f"perms[{p!r}] is not a permutation of range({spec.sizes[p]})")


def permute_state(state: dict[str, torch.Tensor], spec: PermutationSpec, perms: Perms) -> dict[str, torch.Tensor]:
    """Return the state dict with every axis permuted: new[..., i, ...] = old[..., perm[i], ...]."""
    _check_perms(spec, perms)
    out = {}
    for key, w in state.items():
        for axis, entry in enumerate(spec.axes_to_perm.get(key, ())):
            p, block = axis_perm(entry)
            if p is not None:
                w = torch.index_select(w, axis, expand(perms[p], block).to(w.device))
        out[key] = w
    return out


def permute(model: nn.Module, perms: Perms, spec: PermutationSpec | None = None) -> nn.Module:
    """Return a copy of ``model`` with its hidden units permuted by ``perms``: the same function, reordered."""
    spec = spec or permutation_spec(model)
    new = copy.deepcopy(model)
    new.load_state_dict(permute_state(model.state_dict(), spec, perms))
    return new


def random_permutation(spec: PermutationSpec, generator: torch.Generator | None = None) -> Perms:
    """Return one uniformly random permutation per name of ``spec``."""
    return {p: torch.randperm(n, generator=generator) for p, n in spec.sizes.items()}


def identity_permutation(spec: PermutationSpec) -> Perms:
    """Return the identity permutation of every name of ``spec``."""
    return {p: torch.arange(n) for p, n in spec.sizes.items()}


def invert(perms: Perms) -> Perms:
    """Return the inverse permutations (permuting by π, then by invert(π), is the identity)."""
    return {p: torch.argsort(idx) for p, idx in perms.items()}


@dataclass
class MatchResult:
    """Permutations P with permute(b, P) ≈ a, the objective after each sweep, and the sweeps run."""

    perms: Perms
    history: list[float]
    iterations: int


def weight_matching(a: nn.Module | dict, b: nn.Module | dict, spec: PermutationSpec | None = None,
                    max_iter: int = 100, seed: int = 0, dtype: torch.dtype = torch.float32) -> MatchResult:
    """Return permutations of b's units that maximise Σ ⟨W_a, permuted W_b⟩ (Ainsworth et al. 2023).

    Coordinate descent: each sweep visits every permutation in a seeded random order
    and solves its linear assignment problem exactly with
    ``scipy.optimize.linear_sum_assignment``, holding the others fixed; a permutation
    none of whose neighbours (the permutations sharing a parameter with it) changed
    since it was last solved is skipped, since its solution cannot change.  It stops
    when a sweep improves nothing or after ``max_iter`` sweeps.  Only parameters
    (not BatchNorm running statistics) enter the objective.  The assignment costs are
    computed in ``dtype`` (float32 by default, as git-re-basin does: twice as fast as
    float64 on a CPU, and its rounding, about 1e-7 of a cost, decides nothing but exact
    ties); the objective in the history is float64.  A spec that does not fit the models raises SpecError.
    """
    from scipy.optimize import linear_sum_assignment
    if spec is None:
        if not isinstance(a, nn.Module):
            raise ValueError("spec=None needs models, not state dicts, to build the PermutationSpec")
        spec = permutation_spec(a)
    params = set(dict(a.named_parameters())) if isinstance(a, nn.Module) else None
    sa = a.state_dict() if isinstance(a, nn.Module) else a
    sb = b.state_dict() if isinstance(b, nn.Module) else b
    _check_same(sa, sb)
    spec.check_fits(sa)
    keys = [k for k in sa if sa[k].is_floating_point() and (params is None or k in params)]
    sa = {k: sa[k].detach().to("cpu", dtype) for k in keys}
    sb = {k: sb[k].detach().to("cpu", dtype) for k in keys}
    perms = identity_permutation(spec)
    p2a = {p: [(k, ax) for k, ax in lst if k in sa] for p, lst in spec.perm_to_axes.items()}
    # a permutation's assignment costs depend only on the permutations that share a parameter with it
    # (its neighbours): while none of them changed since it was last solved, its solution cannot change
    neighbours = {p: {q for k, _ in p2a[p] for q, _ in map(axis_perm, spec.axes_to_perm[k]) if q not in (None, p)}
                  for p in spec.sizes}
    version = dict.fromkeys(spec.sizes, 0)
    solved_at: dict[str, dict[str, int]] = {}
    rng = torch.Generator().manual_seed(seed)
    history: list[float] = []
    for _ in range(max_iter):
        improved = False
        for i in torch.randperm(len(spec.sizes), generator=rng).tolist():
            p = list(spec.sizes)[i]
            seen = {q: version[q] for q in neighbours[p]}
            if solved_at.get(p) == seen:
                continue
            solved_at[p] = seen
            n = spec.sizes[p]
            cost = _assignment_costs(sa, sb, spec, perms, p2a[p], n, dtype)
            # subtracting each row's maximum changes no assignment's ranking, and speeds up the solver
            _, cols = linear_sum_assignment((cost - cost.max(dim=1, keepdim=True).values).numpy(), maximize=True)
            new = torch.as_tensor(cols, dtype=torch.long)
            old_val = float(cost[torch.arange(n), perms[p]].sum())
            new_val = float(cost[torch.arange(n), new].sum())
            if new_val > old_val + 1e-12 * max(1.0, abs(old_val)):
                perms[p], improved = new, True
                version[p] += 1
        history.append(_matching_objective(sa, sb, spec, perms))
        if not improved:
            break
    return MatchResult(perms, history, len(history))


def _assignment_costs(sa, sb, spec, perms, axes, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Return the n×n float64 matrix of ⟨W_a, W_b⟩ over ``axes`` with b's unit j in a's slot i, the other
    permutations held at ``perms``."""
    cost = torch.zeros(n, n, dtype=dtype)
    for key, axis in axes:
        wa = torch.movedim(sa[key], axis, 0).reshape(n, -1)
        wb = sb[key]
        for ax2, entry in enumerate(spec.axes_to_perm[key]):
            q, block = axis_perm(entry)
            if q is not None and ax2 != axis:
                wb = torch.index_select(wb, ax2, expand(perms[q], block))
        # an axis of blocks is channel-major (feature c·block + s), so rows c·block .. c·block + block − 1 are unit c's
        cost += wa @ torch.movedim(wb, axis, 0).reshape(n, -1).T
    return cost.double()


def _matching_objective(sa, sb, spec, perms) -> float:
    pb = permute_state(sb, PermutationSpec({k: spec.axes_to_perm[k] for k in sb}, spec.sizes), perms)
    return float(sum((sa[k].double() * pb[k].double()).sum() for k in sa))


# -- REPAIR ---------------------------------------------------------------------------
class ChannelAffine(nn.Module):
    """y = x·scale + shift per channel (dim 1): REPAIR's explicit correction, which adds a shift to bias-free layers."""

    def __init__(self, scale: torch.Tensor, shift: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("scale", scale.detach().clone())
        self.register_buffer("shift", shift.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return x * self.scale.view(shape) + self.shift.view(shape)


def repair_points(model: nn.Module) -> list[str]:
    """Return the module names whose outputs REPAIR corrects: each hidden layer's output as the ReLU sees it
    (the linear/conv output, or the norm after it)."""

    names = dict(model.named_modules())
    out = []
    for p in probe_points(model):
        if p.role != "hidden":
            continue
        norm = _norm_after(model, p.name, names)
        out.append(norm if norm is not None else p.name)
    return out


def _norm_after(model, name: str, names: dict) -> str | None:
    """Return the name of the norm module applied to ``name``'s output, if it is not an Identity."""

    if isinstance(model, MLP):
        cand = "norms." + name.split(".")[1]
    elif isinstance(model, VGG11):
        cand = f"features.{int(name.split('.')[1]) + 1}"
    else:
        cand = name.replace("conv", "norm")
    mod = names.get(cand)
    return cand if mod is not None and not isinstance(mod, nn.Identity) else None


@torch.no_grad()
def channel_stats(model: nn.Module, x: torch.Tensor, names: list[str]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Return (mean, std) per channel of each named module's output over x (and positions, for convs).

    A convolutional network reads x in batches of :data:`lmcbook.models.CONV_EVAL_BATCH` and accumulates each
    channel's sums in float64 (its feature maps on a whole training split would take gigabytes); any other network
    reads x in one pass."""
    mods = dict(model.named_modules())
    conv = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
    step = CONV_EVAL_BATCH if conv else max(len(x), 1)
    sums: dict[str, list] = {}
    outs: dict[str, torch.Tensor] = {}

    def keep(name: str, o: torch.Tensor) -> None:
        if not conv:
            outs[name] = o
            return
        dims = [0] + list(range(2, o.ndim))
        o64 = o.double()
        n = o.numel() // o.shape[1]
        prev = sums.get(name, [0.0, 0.0, 0, o.dtype])
        sums[name] = [prev[0] + o64.sum(dim=dims), prev[1] + (o64 * o64).sum(dim=dims), prev[2] + n, o.dtype]

    hooks = [mods[n].register_forward_hook(lambda m, i, o, n=n: keep(n, o)) for n in names]
    was = model.training
    model.eval()
    try:
        for i in range(0, len(x), step):
            model(as_input(x[i:i + step], model))
    finally:
        for h in hooks:
            h.remove()
        model.train(was)
    stats = {}
    for n, o in outs.items():
        dims = [0] + list(range(2, o.ndim))
        stats[n] = (o.mean(dim=dims), o.std(dim=dims, unbiased=False))
    for n, (total, squares, count, dtype) in sums.items():
        mean = total / count
        stats[n] = (mean.to(dtype), (squares / count - mean * mean).clamp_min(0).sqrt().to(dtype))
    return stats


@torch.no_grad()
def repair(merged: nn.Module, a: nn.Module, b: nn.Module, data: torch.Tensor | Dataset, lam: float,
           eps: float = 1e-8) -> nn.Module:
    """Return a copy of ``merged`` whose hidden channels have the interpolated endpoint statistics (REPAIR).

    For every hidden layer, in forward order, each channel's mean and std over
    ``data`` (training inputs, or a Dataset's training split) are set to
    λ·(μ_a, σ_a) + (1−λ)·(μ_b, σ_b) by an explicit :class:`ChannelAffine`
    inserted after the layer (after its norm, if it has one).  BatchNorm
    statistics are reset on ``data`` first (Jordan et al. 2022).
    """
    (lam,) = check_lams([lam])
    data = training_inputs(data)
    model = copy.deepcopy(merged).eval()
    if has_batchnorm(model):
        reset_bn(model, data)
    points = repair_points(model)
    sa, sb = channel_stats(a, data, points), channel_stats(b, data, points)
    for name in points:
        mu_m, sd_m = channel_stats(model, data, [name])[name]
        mu_t = lam * sa[name][0] + (1 - lam) * sb[name][0]
        sd_t = lam * sa[name][1] + (1 - lam) * sb[name][1]
        scale = sd_t / sd_m.clamp_min(eps)
        module = model.get_submodule(name)
        model.set_submodule(name, nn.Sequential(module, ChannelAffine(scale, mu_t - mu_m * scale)))
    return model


# -- task arithmetic ------------------------------------------------------------------
def task_vector(finetuned: nn.Module, base: nn.Module) -> dict[str, torch.Tensor]:
    """Return θ_finetuned − θ_base for every floating-point entry of the state dict."""
    fb, bb = finetuned.state_dict(), base.state_dict()
    return {k: (fb[k] - bb[k]) for k in bb if bb[k].is_floating_point()}


def add_vectors(base: nn.Module, vector: dict[str, torch.Tensor], alpha: float) -> nn.Module:
    """Return a copy of ``base`` with θ = θ_base + α·vector."""
    model = copy.deepcopy(base)
    state = model.state_dict()
    with torch.no_grad():
        for k, v in vector.items():
            state[k].add_(alpha * v.to(state[k].dtype))
    return model.eval()


def task_arithmetic(base: nn.Module, vectors: list[dict[str, torch.Tensor]], alpha: float) -> nn.Module:
    """Return θ0 + α·Σ_i v_i (Ilharco et al. 2023)."""
    total = {k: sum(v[k] for v in vectors) for k in vectors[0]}
    return add_vectors(base, total, alpha)


def ties_vector(vectors: list[dict[str, torch.Tensor]], keep: float = 0.2) -> dict[str, torch.Tensor]:
    """Return the TIES-merged task vector (Yadav et al. 2023): trim, elect sign, disjoint mean.

    1. Trim: keep each vector's top ``keep`` fraction of entries by magnitude (over all
       its parameters together), zero the rest.
    2. Elect: each entry's sign is the sign of the sum of the trimmed vectors.
    3. Disjoint mean: average, per entry, the trimmed values that agree with the elected
       sign (entries with sign 0 become 0).
    """
    if not 0 < keep <= 1:
        raise SpecError(f"keep={keep!r} is not allowed: expected a fraction in (0, 1]")
    keys = list(vectors[0])
    flat = torch.stack([torch.cat([v[k].reshape(-1).double() for k in keys]) for v in vectors])
    n = flat.shape[1]
    k_keep = max(1, int(round(keep * n)))
    trimmed = torch.zeros_like(flat)
    for i, row in enumerate(flat):
        idx = torch.topk(row.abs(), k_keep, sorted=False).indices
        trimmed[i, idx] = row[idx]
    sign = torch.sign(trimmed.sum(0))
    agree = (torch.sign(trimmed) == sign) & (trimmed != 0)
    count = agree.sum(0)
    merged = torch.where(count > 0, (trimmed * agree).sum(0) / count.clamp_min(1), torch.zeros_like(sign))
    out, i = {}, 0
    for k in keys:
        m = vectors[0][k].numel()
        out[k] = merged[i:i + m].reshape(vectors[0][k].shape).to(vectors[0][k].dtype)
        i += m
    return out


# ---- What a merge measures ----
# Interpolation curves, barriers and the logit ensemble, from each model's logits (:func:`lmcbook.models.logits`).
#
# θ(λ) = λ·θa + (1−λ)·θb, so λ = 1 is model a and λ = 0 is model b.  Every model
# on a curve (endpoints and the ensemble included) gets its own inverse
# temperature τ, fitted on the calibration split; the calibrated losses are the
# test NLLs at those τ.

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


# ---- The automatic PermutationSpec (torch.fx) ----

FIXED = 0  #: the group of the network's input and output axes: never permuted

#: Modules (without their own per-channel parameters) that act on each channel alike.
CHANNELWISE = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.ELU, nn.Hardswish,
               nn.Hardtanh, nn.Hardsigmoid, nn.Mish, nn.Softplus, nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d,
               nn.modules.pooling._MaxPoolNd, nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
               nn.modules.pooling._AdaptiveMaxPoolNd)
#: Functions and tensor methods that act on each channel alike (their first argument carries the channels).
CHANNELWISE_CALLS = {torch.relu, torch.sigmoid, torch.tanh, nn.functional.relu, nn.functional.gelu,
                     nn.functional.silu, nn.functional.leaky_relu, nn.functional.elu, nn.functional.dropout,
                     nn.functional.max_pool2d, nn.functional.avg_pool2d, nn.functional.adaptive_avg_pool2d,
                     nn.functional.adaptive_max_pool2d, nn.functional.max_pool1d, nn.functional.avg_pool1d,
                     nn.functional.adaptive_avg_pool1d, operator.neg}
CHANNELWISE_METHODS = {"relu", "relu_", "sigmoid", "tanh", "contiguous", "clone", "detach", "float", "to", "neg"}
#: Elementwise binary operations: tensors on both sides must share one permutation.
BINARY = {operator.add, operator.iadd, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul}
BINARY_METHODS = {"add", "add_", "sub", "mul", "mul_", "div"}
RESHAPES = {torch.flatten, "flatten", "view", "reshape"}
NORMS = (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm, nn.LayerNorm, nn.GroupNorm)


class SpecUnavailable(SpecError):
    """No PermutationSpec can be derived for this network: the message names the node that prevents it."""


class _Groups:
    """Union-find over channel groups; group FIXED is the network's input and output."""

    def __init__(self) -> None:
        self.parent = [FIXED]

    def new(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def union(self, a: int, b: int) -> int:
        ra, rb = sorted((self.find(a), self.find(b)))  # FIXED (0) stays the root of whatever joins it
        self.parent[rb] = ra
        return ra

    def join(self, a: Group, b: Group, where: str) -> Group:
        """Return the group of two tensors that must share one permutation: channels with channels, or blocks with
        blocks of the same size (two flattened maps)."""
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple) and a[1] == b[1]):
                raise SpecUnavailable(f"{where}: it joins a flattened map (blocks of positions per channel) with "
                                      "another tensor whose features are not in the same blocks")
            return self.union(a[0], b[0]), a[1]
        return self.union(a, b)


#: The channel group of a tensor: an int, or (group, block) for a map flattened to blocks of ``block`` features
#: per channel (``_reshape``).
Group = int | tuple[int, int]


def derive_spec(model: nn.Module, example: torch.Tensor) -> PermutationSpec:
    """Return the PermutationSpec of ``model`` derived by tracing it with ``torch.fx`` on ``example`` (a batch of
    inputs); raise :class:`SpecUnavailable` naming the node it cannot handle."""
    try:
        gm = fx.symbolic_trace(model)
    except Exception as err:  # fx raises many types on data-dependent control flow
        raise SpecUnavailable(f"torch.fx cannot trace {type(model).__name__} ({type(err).__name__}: {err}); pass "
                              "--spec MODULE:NAME with a hand-written PermutationSpec") from err
    was = gm.training
    ShapeProp(gm.eval()).propagate(example)
    gm.train(was)
    groups, axes, names = _Groups(), {}, {}
    of: dict[fx.Node, int | None] = {}
    seen: dict[str, tuple[int, int]] = {}
    for node in gm.graph.nodes:
        of[node] = _visit(node, gm, of, groups, axes, names, seen)
    state = model.state_dict()
    named = {}
    for key, gs in axes.items():  # a permutation is named after the first module whose output it permutes
        entries = []
        for g in gs:
            root, block = (FIXED, 1) if g is None else (groups.find(g[0]), g[1]) if isinstance(g, tuple) else (
                groups.find(g), 1)
            name = None if root == FIXED else names.setdefault(root, "P_" + key.rsplit(".", 1)[0])
            entries.append((name, block) if name is not None and block > 1 else name)
        named[key] = tuple(entries)
    try:
        return PermutationSpec.from_axes({k: v for k, v in named.items() if k in state}, state)
    except ValueError as err:
        raise SpecUnavailable(f"the traced layers of {type(model).__name__} do not cover its state: {err}") from err


def _shape(node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _visit(node: fx.Node, gm: fx.GraphModule, of: dict, groups: _Groups, axes: dict, names: dict,
           seen: dict) -> int | None:
    """Return the channel group of ``node``'s output (None for a non-tensor), recording parameter axes."""
    def arg(i: int = 0) -> int | None:
        a = node.args[i] if i < len(node.args) else None
        return of.get(a) if isinstance(a, fx.Node) else None

    where = f"node {node.name!r} ({node.op} {node.target})"
    if node.op == "placeholder":
        return FIXED
    if node.op == "output":
        out = node.args[0]
        if not isinstance(out, fx.Node):
            raise SpecUnavailable(f"{where}: the network returns {type(out).__name__}, expected one tensor of logits")
        g = of[out]
        groups.union(g[0] if isinstance(g, tuple) else g, FIXED)
        return None
    if node.op == "get_attr":
        raise SpecUnavailable(f"{where}: a parameter used outside a module is not supported")
    if node.op == "call_module":
        return _module(gm.get_submodule(node.target), str(node.target), arg(), node, groups, axes, seen, where)
    target = node.target
    if node.op == "call_method" and target in ("size", "dim") or target is getattr:
        return None
    if target in CHANNELWISE_CALLS or target in CHANNELWISE_METHODS:
        return arg()
    if target in BINARY or target in BINARY_METHODS:
        tensors = [of[a] for a in node.args if isinstance(a, fx.Node) and of.get(a) is not None]
        g = tensors[0]
        for other in tensors[1:]:
            g = groups.join(g, other, where)
        return g
    if target in RESHAPES:
        return _reshape(arg(), node, where)
    if target in (torch.mean, "mean", torch.sum, "sum", torch.amax, "amax"):
        dims = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        if dims and 1 not in dims and -len(_shape(node.args[0]) or ()) + 1 not in dims:
            return arg()
    raise SpecUnavailable(f"{where}: lmcbook cannot tell whether this operation keeps channels apart; pass "
                          "--spec MODULE:NAME with a hand-written PermutationSpec")


def _reshape(g: Group | None, node: fx.Node, where: str) -> Group | None:
    """Return the group after a flatten/view/reshape: a map of C channels and P positions flattened to (N, C·P)
    is C blocks of P features (channel-major, as ``torch.flatten`` lays them out); any other reshape of permuted
    channels mixes them with positions and is refused."""
    if g is None or g == FIXED:  # the input's own axes: never permuted, whatever their shape
        return g
    before, after = _shape(node.args[0]), _shape(node)
    if before == after:
        return g
    if (not isinstance(g, tuple) and before and after and len(before) >= 2 and len(after) == 2
            and after[0] == before[0] and after[1] == math.prod(before[1:])):
        positions = math.prod(before[2:])
        return g if positions == 1 else (g, positions)
    raise SpecUnavailable(f"{where}: a reshape of shape {before} to {after} mixes channels with positions "
                          "(lmcbook follows a flatten of (N, C, ...) to (N, C·H·W) only)")


def _module(mod: nn.Module, name: str, g_in: Group | None, node: fx.Node, groups: _Groups, axes: dict,
            seen: dict, where: str) -> Group | None:
    """Return the output group of a call of module ``mod`` on a tensor of group ``g_in``, recording its axes."""
    pooling = (nn.modules.pooling._MaxPoolNd, nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
               nn.modules.pooling._AdaptiveMaxPoolNd)
    if isinstance(g_in, tuple) and (isinstance(mod, pooling) or not isinstance(mod, (nn.Linear, nn.Flatten,
                                                                                       CHANNELWISE))):
        raise SpecUnavailable(f"{where}: module {type(mod).__name__} on a flattened map (blocks of positions per "
                              "channel) is not supported: lmcbook follows a Flatten into a Linear layer")
    if isinstance(mod, (nn.Linear, nn.modules.conv._ConvNd)):
        if isinstance(mod, nn.modules.conv._ConvNd) and mod.groups != 1:
            raise SpecUnavailable(f"{where}: a grouped convolution (groups={mod.groups}) is not supported")
        if isinstance(mod, nn.Linear) and len(_shape(node.args[0]) or (0, 0)) != 2:
            raise SpecUnavailable(f"{where}: a Linear layer on a {len(_shape(node.args[0]) or ())}-D input is not "
                                  "supported (expected (N, features))")
        if name in seen:  # a layer called twice: both calls share its permutations
            g_out = seen[name][1]
            groups.join(seen[name][0], g_in, where)
            return g_out
        g_out = groups.new()
        seen[name] = (g_in, g_out)
        w = mod.weight
        axes[f"{name}.weight"] = (g_out, g_in) + (None,) * (w.ndim - 2)
        axes[f"{name}.bias"] = (g_out,)
        return g_out
    if isinstance(mod, NORMS):
        if isinstance(mod, nn.GroupNorm) and mod.num_groups not in (1, mod.num_channels):
            raise SpecUnavailable(f"{where}: GroupNorm with {mod.num_groups} groups of channels is not supported")
        shape = _shape(node.args[0]) or ()
        extra = (None,) * (len(mod.normalized_shape) - 1) if isinstance(mod, nn.LayerNorm) else ()
        if isinstance(mod, nn.LayerNorm) and len(mod.normalized_shape) != len(shape) - 1:
            raise SpecUnavailable(f"{where}: a LayerNorm over {tuple(mod.normalized_shape)} of a {shape} input is "
                                  "not supported (expected it to normalise every axis but the batch)")
        for key in ("weight", "bias", "running_mean", "running_var"):
            axes[f"{name}.{key}"] = (g_in,) + extra
        return g_in
    if isinstance(mod, nn.Flatten):
        return _reshape(g_in, node, where)
    if isinstance(mod, nn.PReLU) and mod.num_parameters == 1:
        axes[f"{name}.weight"] = (None,)
        return g_in
    if isinstance(mod, CHANNELWISE):
        return g_in
    raise SpecUnavailable(f"{where}: module {type(mod).__name__} is not one lmcbook knows to act on each channel "
                          "alike; pass --spec MODULE:NAME with a hand-written PermutationSpec")


def equivalent(a: PermutationSpec, b: PermutationSpec) -> bool:
    """Return True if two specs permute the same axes together, whatever their permutations are called."""
    if a.axes_to_perm.keys() != b.axes_to_perm.keys() or sorted(a.sizes.values()) != sorted(b.sizes.values()):
        return False
    rename: dict[str, str] = {}
    for key, axes in a.axes_to_perm.items():
        other = b.axes_to_perm[key]
        if len(axes) != len(other):
            return False
        for (p, bp), (q, bq) in zip(map(axis_perm, axes), map(axis_perm, other)):
            if (p is None) != (q is None) or bp != bq or (p is not None and rename.setdefault(p, q) != q):
                return False
    return len(set(rename.values())) == len(rename)


@torch.no_grad()
def check_spec(model: nn.Module, spec: PermutationSpec, x: torch.Tensor, seed: int = 0, tol: float = 1e-4) -> float:
    """Return the largest change of ``model``'s outputs on ``x`` under a random permutation of ``spec``, relative to
    the largest output; raise :class:`SpecUnavailable` when it exceeds ``tol`` (the spec is then wrong)."""
    perms = random_permutation(spec, torch.Generator().manual_seed(seed))
    before, after = logits(model, x), logits(permute(model, perms, spec), x)
    err = float((before - after).abs().max() / before.abs().max().clamp_min(1e-12))
    if not err <= tol:
        raise SpecUnavailable(f"a random permutation of the spec changed {type(model).__name__}'s outputs by "
                              f"{err:.2e} (relative), more than {tol:g}: the spec does not describe this network")
    return err
