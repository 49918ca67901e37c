"""MLP, VGG11 and ResNet20 with a width multiplier, a norm choice and a bias flag; then a model's score and its
calibration (the module's last section).

Every model lists its linear and convolutional layers in forward order through
:func:`probe_points`; any other module's are numbered in the order a forward pass
calls them (:func:`trace`).  A forward hook on a probe point's module sees the
layer's input z_(l-1) and its pre-activation output f_l, which is all the
probes need.  Layer l counts the main path's linear/conv layers from 1; ResNet20's
1x1 projection shortcuts are listed with ``role="shortcut"`` and no layer number.

A model's score and its calibration (the last section): logits, accuracy and cross-entropy; then the inverse
temperature.

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

from .specs import ModelSpec, SpecError


@dataclass(frozen=True)
class ProbePoint:
    """One linear/conv layer: its dotted module name, the module, its layer number and its role."""

    name: str
    module: nn.Module
    layer: int | None
    role: str  # "hidden", "output" or "shortcut"


def _norm(kind: str, channels: int, conv: bool) -> nn.Module:
    if kind == "none":
        return nn.Identity()
    if kind == "batch":
        return nn.BatchNorm2d(channels) if conv else nn.BatchNorm1d(channels)
    # "layer": LayerNorm over features; for convs, GroupNorm(1, C) normalises over (C, H, W)
    # with a per-channel affine map, so it stays equivariant to channel permutations.
    return nn.GroupNorm(1, channels) if conv else nn.LayerNorm(channels)


class MLP(nn.Module):
    """ReLU MLP with ``depth`` linear layers: f_l = W_l z_(l-1), z_l = relu(norm(f_l))."""

    def __init__(self, in_features: int, num_classes: int, hidden: int, depth: int = 4,
                 norm: str = "none", bias: bool = False) -> None:
        super().__init__()
        dims = [in_features] + [hidden] * (depth - 1) + [num_classes]
        self.layers = nn.ModuleList(nn.Linear(dims[i], dims[i + 1], bias=bias) for i in range(depth))
        self.norms = nn.ModuleList(_norm(norm, hidden, conv=False) for _ in range(depth - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer, norm in zip(self.layers[:-1], self.norms):
            x = torch.relu(norm(layer(x)))
        return self.layers[-1](x)

    def probe_points(self) -> list[ProbePoint]:
        """Return the linear layers in order; the last one's output is the logits."""
        n = len(self.layers)
        return [ProbePoint(f"layers.{i}", m, i + 1, "output" if i == n - 1 else "hidden")
                for i, m in enumerate(self.layers)]


#: VGG11 channel plan in units of the base width (64 at 1x); "M" is a 2x2 max-pool.
VGG11_PLAN = (1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M")


class VGG11(nn.Module):
    """CIFAR-style VGG11: eight 3x3 convs with max-pools, then one linear classifier.

    Pools use ``ceil_mode`` so that 28x28 and 8x8 inputs also reach 1x1.
    """

    def __init__(self, in_channels: int, num_classes: int, channels: int = 64, norm: str = "none",
                 bias: bool = False) -> None:
        super().__init__()
        mods: list[nn.Module] = []
        c_in = in_channels
        for item in VGG11_PLAN:
            if item == "M":
                mods.append(nn.MaxPool2d(2, ceil_mode=True))
            else:
                c_out = item * channels
                mods += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=bias), _norm(norm, c_out, conv=True), nn.ReLU()]
                c_in = c_out
        self.features = nn.Sequential(*mods)
        self.classifier = nn.Linear(c_in, num_classes, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    def probe_points(self) -> list[ProbePoint]:
        """Return the eight convs and the classifier in order."""
        convs = [(f"features.{i}", m) for i, m in enumerate(self.features) if isinstance(m, nn.Conv2d)]
        pts = [ProbePoint(n, m, i + 1, "hidden") for i, (n, m) in enumerate(convs)]
        return pts + [ProbePoint("classifier", self.classifier, len(pts) + 1, "output")]


class BasicBlock(nn.Module):
    """Two 3x3 convs with a residual connection; a 1x1 projection when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str, bias: bool) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=bias)
        self.norm1 = _norm(norm, c_out, conv=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=bias)
        self.norm2 = _norm(norm, c_out, conv=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=bias),
                                          _norm(norm, c_out, conv=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    """CIFAR ResNet20: a stem conv, three stages of three basic blocks (1x, 2x, 4x channels), a linear head."""

    def __init__(self, in_channels: int, num_classes: int, channels: int = 16, norm: str = "none",
                 bias: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, padding=1, bias=bias)
        self.norm1 = _norm(norm, channels, conv=True)
        blocks: list[nn.Module] = []
        c_in = channels
        for mult, stride in ((1, 1), (2, 2), (4, 2)):
            for b in range(3):
                blocks.append(BasicBlock(c_in, mult * channels, stride if b == 0 else 1, norm, bias))
                c_in = mult * channels
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c_in, num_classes, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.norm1(self.conv1(x)))
        x = self.blocks(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    def probe_points(self) -> list[ProbePoint]:
        """Return the stem, the blocks' convs (shortcuts with role 'shortcut') and the head, in order."""
        pts = [ProbePoint("conv1", self.conv1, 1, "hidden")]
        layer = 1
        for i, blk in enumerate(self.blocks):
            for name in ("conv1", "conv2"):
                layer += 1
                pts.append(ProbePoint(f"blocks.{i}.{name}", getattr(blk, name), layer, "hidden"))
            if isinstance(blk.shortcut, nn.Sequential):
                pts.append(ProbePoint(f"blocks.{i}.shortcut.0", blk.shortcut[0], None, "shortcut"))
        return pts + [ProbePoint("head", self.head, layer + 1, "output")]

    def block_points(self) -> list[ProbePoint]:
        """Return the residual blocks, whose outputs are the residual stream after each block."""
        return [ProbePoint(f"blocks.{i}", blk, i + 1, "hidden") for i, blk in enumerate(self.blocks)]


def build(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Return a freshly initialised model for ``spec`` (uses the global RNG; seed it first)."""
    if not isinstance(spec, ModelSpec):
        raise SpecError(f"spec={spec!r} is not allowed: expected a ModelSpec")
    c = spec.channels
    if spec.arch == "mlp":
        in_features = 1
        for d in input_shape:
            in_features *= int(d)
        model: nn.Module = MLP(in_features, num_classes, c, spec.depth, spec.norm, spec.bias)
    elif len(input_shape) != 3:
        raise SpecError(f"arch={spec.arch!r} needs image inputs (C, H, W); got input shape {tuple(input_shape)}")
    elif spec.arch == "vgg11":
        model = VGG11(input_shape[0], num_classes, c, spec.norm, spec.bias)
    else:
        model = ResNet20(input_shape[0], num_classes, c, spec.norm, spec.bias)
    return scale_init(model, spec.init_scale)


def scale_init(model: nn.Module, factor: float) -> nn.Module:
    """Return ``model`` with the weights and biases of every linear and conv layer multiplied by ``factor`` (in
    place); normalisation layers are left as they are.  ``factor`` = 1 leaves the model untouched."""
    if factor != 1.0:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                    for p in m.parameters(recurse=False):
                        p.mul_(factor)
    return model


#: The module types that count as layers of a model that does not list its own probe points.
LAYER_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d)


def probe_points(model: nn.Module, x: torch.Tensor | None = None) -> list[ProbePoint]:
    """Return the model's linear/conv layers in forward order.

    lmcbook's models (and any module with a ``probe_points`` method) list their
    own.  For any other module every nn.Linear and nn.Conv1d/2d is a layer, the
    last one the output layer.  Given an example input ``x`` they are numbered in
    the order one forward pass on ``x`` calls them (layers it never calls are left
    out; see :func:`trace`), as the activation probes always number them.  Without
    ``x`` they are numbered in registration order (the order ``__init__`` assigns
    them), which is the call order only if ``__init__`` follows ``forward``.
    """
    if hasattr(model, "probe_points"):
        return model.probe_points()
    mods = [(n, m) for n, m in model.named_modules() if isinstance(m, LAYER_TYPES)]
    if not mods:
        raise SpecError(f"model={type(model).__name__} is not allowed: expected a model with nn.Linear or nn.Conv "
                        "layers to probe")
    if x is not None:
        order, _, _ = trace(model, x, [m for _, m in mods], [n for n, _ in mods])
        mods = [mods[i] for i in order]
    return numbered(mods)


def numbered(mods: list[tuple[str, nn.Module]]) -> list[ProbePoint]:
    """Return (name, module) pairs, given in forward order, as probe points numbered from 1; the last is the output."""
    n = len(mods)
    return [ProbePoint(name, m, i + 1, "output" if i == n - 1 else "hidden") for i, (name, m) in enumerate(mods)]


@torch.inference_mode()
def trace(model: nn.Module, x: torch.Tensor, modules: list[nn.Module], names: list[str]
          ) -> tuple[list[int], dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """Return, from one hooked forward pass of ``model`` on ``x`` in eval mode, the indices of ``modules`` in the
    order they were called, and each called module's input and output, keyed by its index.

    Modules the pass never calls are left out.  A module called more than once
    (a layer applied twice) has no single layer number, so it is refused with a
    SpecError naming it (``names`` name the modules).  The model's training flag is restored.
    """
    order: list[int] = []
    calls = [0] * len(modules)
    ins: dict[int, torch.Tensor] = {}
    outs: dict[int, torch.Tensor] = {}

    def hook(i):
        def fn(module, inputs, output):
            calls[i] += 1
            if calls[i] == 1:
                order.append(i)
                ins[i], outs[i] = inputs[0].detach(), output.detach()
        return fn

    handles = [m.register_forward_hook(hook(i)) for i, m in enumerate(modules)]
    was = model.training
    model.eval()
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    again = [f"{names[i]!r} ({c} times)" for i, c in enumerate(calls) if c > 1]
    if again:
        raise SpecError(f"layer(s) {', '.join(again)} of {type(model).__name__} are called more than once in one "
                        "forward pass, which is not allowed: expected each probed layer to be called once, so that "
                        "it has one layer number")
    return order, ins, outs


def has_batchnorm(model: nn.Module) -> bool:
    """Return True if the model holds any BatchNorm layer."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def count_parameters(model: nn.Module) -> int:
    """Return the number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---- A model's score and its temperature ----

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


#: Inputs per forward pass of :func:`logits` (and of REPAIR's statistics) through a convolutional network, whose
#: feature maps (16 channels of a 28×28 MNIST image: 50 kB an input) would take gigabytes at the default batch.  At
#: 256 inputs a map (13 MB) stays under glibc's mmap threshold; at 1024 each pass maps and unmaps fresh pages, and
#: a small MNIST CNN spent as long in system calls as in its convolutions (measured: 1.8 times the wall time).
CONV_EVAL_BATCH = 256


@torch.inference_mode()
def logits(model: nn.Module, x: torch.Tensor, batch_size: int = 8192) -> torch.Tensor:
    """Return the model's logits on ``x`` as float32, in eval mode, in as few forward passes as fit (at most
    :data:`CONV_EVAL_BATCH` inputs a pass through a convolutional network)."""
    if any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules()):
        batch_size = min(batch_size, CONV_EVAL_BATCH)
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
