import pytest
import torch

from lmcbook.models import MLP, VGG11, ResNet20, build, count_parameters, probe_points
from lmcbook.specs import ModelSpec, SpecError


@pytest.mark.parametrize("norm", ["none", "batch", "layer"])
@pytest.mark.parametrize("arch, shape", [("mlp", (1, 8, 8)), ("vgg11", (3, 32, 32)), ("resnet20", (3, 32, 32)),
                                         ("vgg11", (1, 28, 28)), ("resnet20", (1, 8, 8))])
def test_forward_shapes(arch, shape, norm):
    torch.manual_seed(0)
    spec = ModelSpec(arch, 0.25, depth=4 if arch == "mlp" else None, norm=norm, bias=True)
    model = build(spec, shape, 10).eval()
    assert model(torch.randn(3, *shape)).shape == (3, 10)


def test_probe_points_are_uniform():
    mlp = MLP(64, 10, 32, depth=5)
    pts = probe_points(mlp)
    assert [p.layer for p in pts] == [1, 2, 3, 4, 5]
    assert [p.role for p in pts] == ["hidden"] * 4 + ["output"]
    vgg = VGG11(3, 10, 8)
    assert [p.layer for p in probe_points(vgg)] == list(range(1, 10))
    res = ResNet20(3, 10, 8)
    pts = probe_points(res)
    main = [p for p in pts if p.role != "shortcut"]
    assert [p.layer for p in main] == list(range(1, 21))  # ResNet-20: 19 convs + head
    shortcuts = [p for p in pts if p.role == "shortcut"]
    assert [p.name for p in shortcuts] == ["blocks.3.shortcut.0", "blocks.6.shortcut.0"]
    assert all(p.module.kernel_size == (1, 1) for p in shortcuts)
    assert len(res.block_points()) == 9


def test_hooks_see_input_and_preactivation():
    torch.manual_seed(0)
    mlp = MLP(64, 10, 16, depth=3, bias=False)
    seen = {}
    pts = probe_points(mlp)
    hooks = [p.module.register_forward_hook(lambda m, i, o, p=p: seen.__setitem__(p.layer, (i[0], o))) for p in pts]
    x = torch.randn(5, 1, 8, 8)
    out = mlp(x)
    for h in hooks:
        h.remove()
    z0 = x.flatten(1)
    f1 = z0 @ mlp.layers[0].weight.T
    assert torch.allclose(seen[1][1], f1)
    assert torch.allclose(seen[2][0], torch.relu(f1))
    assert torch.equal(seen[3][1], out)


def test_widths_scale_parameters():
    small = build(ModelSpec(width=1), (1, 8, 8), 10)
    big = build(ModelSpec(width=2), (1, 8, 8), 10)
    assert count_parameters(small) == 64 * 64 + 64 * 64 * 2 + 64 * 10
    assert count_parameters(big) == 64 * 128 + 128 * 128 * 2 + 128 * 10


def test_conv_archs_need_images():
    with pytest.raises(SpecError, match="image"):
        build(ModelSpec("vgg11", depth=None), (64,), 10)
