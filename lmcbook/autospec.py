"""The automatic PermutationSpec: trace a network with ``torch.fx`` and find the axes each permutation acts on.

A permutation of a layer's output units is a symmetry of the network when every
consumer of those units is permuted along with them: the next linear/conv layer's
input axis, the normalisation layers and elementwise activations in between (they act
per channel), pooling, and, across a residual addition, the other summand too.  The
trace follows each tensor's channel axis (axis 1: the features of an (N, F) tensor, the
channels of an (N, C, ...) map) through the graph and joins the groups that must share
one permutation; groups that reach the network's input or output are not permuted.

:func:`derive_spec` refuses, with :class:`SpecUnavailable` naming the node, anything it
cannot prove channel-equivariant (concatenation, reshapes that mix channels with
positions, grouped convolutions, GroupNorm with several groups, custom modules with
their own parameters).  :func:`check_spec` checks a spec the way it matters: a random
permutation must leave the network's outputs unchanged.
"""

from __future__ import annotations

import math
import operator

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from .calibrate import logits
from .merge import PermutationSpec, permute, random_permutation
from .specs import SpecError

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
        roots = [FIXED if g is None else groups.find(g) for g in gs]
        named[key] = tuple(None if r == FIXED else names.setdefault(r, "P_" + key.rsplit(".", 1)[0]) for r in roots)
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
        groups.union(of[out], FIXED)
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
            g = groups.union(g, other)
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


def _reshape(g: int | None, node: fx.Node, where: str) -> int | None:
    """Return the group after a flatten/view: channels survive only when no positions are folded into them."""
    if g is None or g == FIXED:  # the input's own axes: never permuted, whatever their shape
        return g
    before, after = _shape(node.args[0]), _shape(node)
    if before and after and len(after) == 2 and after[1] == before[1] and math.prod(before[2:]) == 1:
        return g
    raise SpecUnavailable(f"{where}: a reshape of shape {before} to {after} mixes channels with positions")


def _module(mod: nn.Module, name: str, g_in: int | None, node: fx.Node, groups: _Groups, axes: dict, seen: dict,
            where: str) -> int | None:
    """Return the output group of a call of module ``mod`` on a tensor of group ``g_in``, recording its axes."""
    if isinstance(mod, (nn.Linear, nn.modules.conv._ConvNd)):
        if isinstance(mod, nn.modules.conv._ConvNd) and mod.groups != 1:
            raise SpecUnavailable(f"{where}: a grouped convolution (groups={mod.groups}) is not supported")
        if isinstance(mod, nn.Linear) and len(_shape(node.args[0]) or (0, 0)) != 2:
            raise SpecUnavailable(f"{where}: a Linear layer on a {len(_shape(node.args[0]) or ())}-D input is not "
                                  "supported (expected (N, features))")
        if name in seen:  # a layer called twice: both calls share its permutations
            g_out = seen[name][1]
            groups.union(seen[name][0], g_in)
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
        for p, q in zip(axes, other):
            if (p is None) != (q is None) or (p is not None and rename.setdefault(p, q) != q):
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
