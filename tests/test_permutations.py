import copy

import pytest
import torch

from lmcbook.merge import (
    PermutationSpec,
    channel_stats,
    interpolate,
    invert,
    permutation_spec,
    permute,
    random_permutation,
    repair,
    repair_points,
    weight_matching,
)
from lmcbook.models import MLP, VGG11, ResNet20


def _models(norm, bias=True):
    return {
        "mlp": (lambda: MLP(16, 10, 24, depth=4, norm=norm, bias=bias), (16,)),
        "vgg11": (lambda: VGG11(3, 10, 2, norm=norm, bias=bias), (3, 16, 16)),
        "resnet20": (lambda: ResNet20(3, 10, 3, norm=norm, bias=bias), (3, 16, 16)),
    }


def _nontrivial(model):
    """Random weights everywhere, and non-trivial BatchNorm statistics and affine parameters."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g, dtype=t.dtype) + 0.5)
            elif t.is_floating_point():
                t.copy_(torch.randn(t.shape, generator=g, dtype=t.dtype) * 0.3)
    return model.double().eval()


@pytest.mark.parametrize("norm", ["none", "batch", "layer"])
@pytest.mark.parametrize("arch", ["mlp", "vgg11", "resnet20"])
def test_random_permutation_preserves_the_function(arch, norm):
    make, shape = _models(norm)[arch]
    torch.manual_seed(0)
    model = _nontrivial(make())
    spec = permutation_spec(model)
    perms = random_permutation(spec, torch.Generator().manual_seed(3))
    assert any(not torch.equal(p, torch.arange(len(p))) for p in perms.values())
    x = torch.randn(5, *shape, dtype=torch.float64)
    y0, y1 = model(x), permute(model, perms, spec)(x)
    assert float((y1 - y0).detach().norm() / y0.detach().norm()) < 1e-5
    # and it really moved weights around
    moved = permute(model, perms, spec).state_dict()
    assert any(not torch.equal(moved[k], v) for k, v in model.state_dict().items() if v.ndim > 0)


@pytest.mark.parametrize("arch", ["mlp", "vgg11", "resnet20"])
def test_permute_then_inverse_is_identity(arch):
    make, _ = _models("batch")[arch]
    model = _nontrivial(make())
    spec = permutation_spec(model)
    perms = random_permutation(spec, torch.Generator().manual_seed(0))
    back = permute(permute(model, perms, spec), invert(perms), spec)
    assert all(torch.equal(back.state_dict()[k], v) for k, v in model.state_dict().items())


def test_weight_matching_recovers_a_planted_permutation_exactly_for_mlp():
    torch.manual_seed(0)
    a = MLP(16, 10, 32, depth=4, bias=True)
    spec = permutation_spec(a)
    pi = random_permutation(spec, torch.Generator().manual_seed(5))
    res = weight_matching(a, permute(a, pi, spec), spec)
    inv = invert(pi)
    assert all(torch.equal(res.perms[p], inv[p]) for p in pi)
    assert res.history == sorted(res.history) and res.iterations <= 100


@pytest.mark.parametrize("arch", ["vgg11", "resnet20"])
@pytest.mark.parametrize("norm", ["none", "batch"])
def test_weight_matching_undoes_planted_permutation_for_convnets(arch, norm):
    make, _ = _models(norm)[arch]
    a = _nontrivial(make())
    spec = permutation_spec(a)
    b = permute(a, random_permutation(spec, torch.Generator().manual_seed(7)), spec)
    res = weight_matching(a, b, spec)
    matched = permute(b, res.perms, spec).state_dict()
    for k, v in a.state_dict().items():
        assert torch.allclose(matched[k], v, atol=1e-6), k


def test_resnet_spec_covers_projection_shortcuts():
    spec = permutation_spec(ResNet20(3, 10, 2, norm="batch"))
    assert spec.axes_to_perm["blocks.3.shortcut.0.weight"] == ("S3", "S0", None, None)
    assert spec.axes_to_perm["blocks.3.shortcut.1.running_mean"] == ("S3",)
    assert spec.axes_to_perm["blocks.4.conv2.weight"] == ("S3", "B4", None, None)
    assert spec.axes_to_perm["head.weight"] == (None, "S6")
    assert spec.sizes["S0"] == 2 and spec.sizes["S3"] == 4 and spec.sizes["S6"] == 8


def test_bad_specs_raise_clear_errors():
    model = MLP(16, 10, 8, depth=3)
    axes = {"layers.0.weight": ("P0", None), "layers.1.weight": ("P1", "P0")}
    with pytest.raises(ValueError, match="misses parameter.*layers.2.weight"):
        PermutationSpec.from_axes(axes, model)
    axes["layers.2.weight"] = (None, "P0")  # wrong: layer 2 reads P1 (size 8 == 8, fine) -> make sizes clash
    bad = dict(axes, **{"layers.0.weight": ("P0", "P0")})  # P0 on an axis of size 16 and of size 8
    with pytest.raises(ValueError, match="permutation 'P0' has size"):
        PermutationSpec.from_axes(bad, model)
    with pytest.raises(ValueError, match="axes but the tensor has shape"):
        PermutationSpec.from_axes(dict(axes, **{"layers.1.weight": ("P1",)}), model)
    with pytest.raises(ValueError, match="unknown parameter"):
        PermutationSpec.from_axes(dict(axes, extra=("P0",)), model)
    spec = permutation_spec(model)
    with pytest.raises(ValueError, match="not a permutation"):
        permute(model, {"P0": torch.zeros(8, dtype=torch.long), "P1": torch.arange(8)}, spec)
    with pytest.raises(ValueError, match="no built-in PermutationSpec"):
        permutation_spec(torch.nn.Linear(3, 3))


def test_repair_of_a_self_merge_changes_nothing():
    torch.manual_seed(0)
    a = MLP(16, 10, 24, depth=4).double().eval()
    x = torch.randn(200, 16, dtype=torch.float64)
    fixed = repair(interpolate(a, a, 0.5), a, copy.deepcopy(a), x, 0.5)
    assert torch.allclose(fixed(x), a(x), atol=1e-6)


@pytest.mark.parametrize("norm", ["none", "batch", "layer"])
def test_repair_sets_interpolated_channel_statistics(norm):
    torch.manual_seed(0)
    a, b = MLP(16, 10, 24, depth=4, norm=norm).double(), MLP(16, 10, 24, depth=4, norm=norm).double()
    x = torch.randn(300, 16, dtype=torch.float64)
    if norm == "batch":
        from lmcbook.merge import reset_bn

        reset_bn(a, x), reset_bn(b, x)
    lam = 0.3
    merged = interpolate(a, b, lam, x)
    fixed = repair(merged, a, b, x, lam)
    points = repair_points(a)
    sa, sb = channel_stats(a, x, points), channel_stats(b, x, points)
    got = channel_stats(fixed, x, [p for p in points])
    for p in points:
        mu_t = lam * sa[p][0] + (1 - lam) * sb[p][0]
        sd_t = lam * sa[p][1] + (1 - lam) * sb[p][1]
        mu, sd = got[p] if p in got else channel_stats(fixed, x, [p + ".1"])[p + ".1"]
        assert torch.allclose(mu, mu_t, atol=1e-4) and torch.allclose(sd, sd_t, atol=1e-4), p
