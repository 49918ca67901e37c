"""MLP, VGG11 and ResNet20 with a width multiplier, a norm choice and a bias flag.

Every model lists its linear and convolutional layers in forward order through
:func:`probe_points`; any other module's are numbered in the order a forward pass
calls them (:func:`trace`).  A forward hook on a probe point's module sees the
layer's input z_(l-1) and its pre-activation output f_l, which is all the
probes need.  Layer l counts the main path's linear/conv layers from 1; ResNet20's
1x1 projection shortcuts are listed with ``role="shortcut"`` and no layer number.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
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
