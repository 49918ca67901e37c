import copy

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from lmcbook.data import from_arrays
from lmcbook.merge import (
    barrier,
    ensemble_summary,
    interpolate,
    interpolate_state,
    interpolation_curve,
    pair_summary,
    repair,
    reset_bn,
)
from lmcbook.models import MLP
from lmcbook.probes import block_diagonal_pair
from lmcbook.specs import SpecError


def _mlp(seed, norm="none", bias=False):
    torch.manual_seed(seed)
    return MLP(64, 10, 32, depth=3, norm=norm, bias=bias).eval()


def test_interpolation_endpoints_are_exact():
    a, b = _mlp(0, "batch", True), _mlp(1, "batch", True)
    for m in (a, b):
        m.norms[0].running_mean.uniform_(-1, 1)
    s1 = interpolate_state(a.state_dict(), b.state_dict(), 1.0)
    s0 = interpolate_state(a.state_dict(), b.state_dict(), 0.0)
    assert all(torch.equal(s1[k], a.state_dict()[k]) for k in s1)
    assert all(torch.equal(s0[k], b.state_dict()[k]) for k in s0)
    mid = interpolate_state(a.state_dict(), b.state_dict(), 0.5)
    k = "layers.0.weight"
    assert torch.allclose(mid[k], 0.5 * (a.state_dict()[k] + b.state_dict()[k]))


def test_interpolation_rejects_bad_input():
    a = _mlp(0)
    with pytest.raises(SpecError, match="lams"):
        interpolate(a, a, 1.5)
    other = MLP(64, 10, 16, depth=3)
    with pytest.raises(ValueError, match="shapes"):
        interpolate(a, other, 0.5)
    with pytest.raises(ValueError, match="data=None"):
        interpolate(_mlp(0, "batch"), _mlp(1, "batch"), 0.5)


def test_merging_takes_a_dataset_and_uses_its_training_split():
    rng = np.random.default_rng(0)
    split = lambda n: (rng.random((n, 1, 8, 8)), rng.integers(0, 10, n))  # noqa: E731
    ds = from_arrays("digits", *split(200), *split(30), *split(40), 10, "cpu")
    a, b = _mlp(0, "batch"), _mlp(1, "batch")
    from_ds, from_x = interpolate(a, b, 0.5, ds), interpolate(a, b, 0.5, ds.x_train)
    for k, v in from_x.state_dict().items():
        assert torch.equal(from_ds.state_dict()[k], v), k
    assert not torch.equal(interpolate(a, b, 0.5, ds.x_test).norms[0].running_mean, from_ds.norms[0].running_mean)
    fixed, fixed_x = repair(from_ds, a, b, ds, 0.5), repair(from_ds, a, b, ds.x_train, 0.5)
    assert torch.equal(fixed(ds.x_test), fixed_x(ds.x_test))
    assert torch.equal(reset_bn(copy.deepcopy(a), ds).norms[0].running_var,
                       reset_bn(copy.deepcopy(a), ds.x_train).norms[0].running_var)
    plain = interpolate(_mlp(0), _mlp(1), 0.5, ds)  # no BatchNorm: data is checked, not needed
    assert torch.equal(plain.layers[0].weight, 0.5 * (_mlp(0).layers[0].weight + _mlp(1).layers[0].weight))


@pytest.mark.parametrize("call", [lambda a, b: interpolate(a, b, 0.5, [[0.0] * 64]),
                                  lambda a, b: interpolate(a, b, 0.5, np.zeros((4, 64), np.float32)),
                                  lambda a, b: repair(a, a, b, "digits", 0.5),
                                  lambda a, b: reset_bn(a, {"x": torch.zeros(4, 64)})])
def test_merging_refuses_data_that_is_neither_inputs_nor_a_dataset(call):
    with pytest.raises(SpecError, match=r"(data|x) of type \w+ is not allowed: expected a torch.Tensor of training "
                                        r"inputs or an lmcbook.data.Dataset"):
        call(_mlp(0, "batch"), _mlp(1, "batch"))


def test_reset_bn_gives_exact_statistics():
    torch.manual_seed(0)
    model = _mlp(0, "batch")
    x = torch.randn(400, 1, 8, 8)
    reset_bn(model, x, batch_size=100)
    pre = x.flatten(1) @ model.layers[0].weight.T
    assert torch.allclose(model.norms[0].running_mean, pre.mean(0), atol=1e-5)
    assert not model.training


def _toy_data(seed=0, n=300, teacher=None):
    """Random inputs; labels uniform, or sampled from softmax(teacher logits) so that the best τ is 1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, n)
    if teacher is not None:
        with torch.no_grad():
            z = teacher(torch.from_numpy(x).flatten(1).double()).double()
        g = torch.Generator().manual_seed(seed)
        y = torch.multinomial(torch.softmax(z, 1), 1, generator=g)[:, 0].numpy()
    k = n // 6
    return from_arrays("toy", x[:4 * k], y[:4 * k], x[4 * k:5 * k], y[4 * k:5 * k], x[5 * k:], y[5 * k:], 10, "cpu")


def test_barrier_of_a_model_with_itself_is_zero():
    data = _toy_data()
    a = _mlp(0)
    bars = barrier(interpolation_curve(a, copy.deepcopy(a), data))
    assert set(bars) == {"acc_barrier", "acc_barrier_mid", "loss_barrier", "loss_barrier_mid",
                         "loss_barrier_cal", "loss_barrier_cal_mid"}
    for v in bars.values():
        assert abs(v) <= 1e-6


def test_barrier_known_answer():
    curve = pd.DataFrame({"lam": [0.0, 0.5, 1.0], "acc": [0.9, 0.5, 1.0], "loss": [0.2, 1.7, 0.4],
                          "loss_cal": [0.2, 0.5, 0.4]})
    bars = barrier(curve)
    assert bars["acc_barrier"] == pytest.approx(0.45) and bars["acc_barrier_mid"] == pytest.approx(0.45)
    assert bars["loss_barrier"] == pytest.approx(1.4) and bars["loss_barrier_cal_mid"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="lam"):
        barrier(curve[curve.lam != 0.5])


def test_ensemble_of_a_model_with_itself_is_the_model():
    data = _toy_data()
    a = _mlp(0)
    ens = ensemble_summary(a, a, data)
    curve = interpolation_curve(a, a, data, [0.0, 1.0]).set_index("lam")
    assert ens["acc"] == curve.loc[1.0, "acc"]
    assert ens["tau"] == pytest.approx(curve.loc[1.0, "tau"], rel=1e-9)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_exact_lewc_gives_the_predicted_logit_scale(depth):
    """A block-diagonal pair satisfies LEWC exactly: merged logits = 2^(1-L) x ensemble logits."""
    a, b = block_diagonal_pair(in_features=64, hidden=64, depth=depth, seed=depth)
    data = _toy_data(depth, n=3000, teacher=lambda x: 0.5 * (a(x) + b(x)) * 4)
    a, b = a.float(), b.float()
    _, summ = pair_summary(a, b, data, [0.0, 0.5, 1.0])
    assert summ["logit_norm_ratio"] == pytest.approx(2.0 ** (1 - depth), rel=1e-5)
    assert not summ["tau_at_bound_merged"] and not summ["tau_at_bound_ensemble"]
    assert summ["tau_ratio"] == pytest.approx(2.0 ** (depth - 1), rel=1e-4)
    # calibration undoes the shrinkage exactly: calibrated merged loss = calibrated ensemble loss
    assert summ["loss_cal_merged"] == pytest.approx(summ["loss_cal_ensemble"], rel=1e-5)


def test_a_model_merged_with_itself_has_unit_ratios():
    data = _toy_data()
    a = _mlp(3)
    _, summ = pair_summary(a, copy.deepcopy(a), data, [0.0, 0.5, 1.0])
    assert summ["logit_norm_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert summ["tau_ratio"] == pytest.approx(1.0, abs=1e-6)


def test_bn_models_get_statistics_reset_along_the_path():
    data = _toy_data()
    a, b = _mlp(0, "batch"), _mlp(1, "batch")
    merged = interpolate(a, b, 0.5, data.x_train)
    pre = data.x_train.flatten(1) @ merged.layers[0].weight.T
    assert torch.allclose(merged.norms[0].running_mean, pre.mean(0), atol=1e-5)
    assert isinstance(merged.norms[0], nn.BatchNorm1d)


def test_disagreement_known_answers():
    from lmcbook.merge import disagreement

    z = torch.randn(50, 10)
    assert disagreement(z, z) == 0.0  # a model never disagrees with itself
    flipped = z.clone()
    flipped[:10] = -flipped[:10]  # the argmax of a negated row is another class (no ties in random logits)
    assert disagreement(z, flipped) == pytest.approx(10 / 50)
    with pytest.raises(ValueError, match="equal shapes"):
        disagreement(z, z[:, :5])


def test_ensemble_gain_of_constructed_logits():
    """Each model is confidently right on half the inputs and barely wrong on the other half: each scores 0.5 and
    their logit ensemble is right everywhere, a gain of 0.5; two copies of one model gain nothing."""
    from lmcbook.merge import ensemble_gain

    y = torch.zeros(4, dtype=torch.long)
    sure, unsure = torch.tensor([5.0, 0.0]), torch.tensor([0.0, 0.1])
    za = torch.stack([sure, sure, unsure, unsure])
    zb = torch.stack([unsure, unsure, sure, sure])
    assert ensemble_gain(za, zb, y) == pytest.approx(0.5)
    assert ensemble_gain(za, za, y) == 0.0
    # both barely wrong where the other is barely right: the ensemble is right only where the sure one is
    assert ensemble_gain(za, torch.stack([unsure] * 4), y) == pytest.approx(0.5 - 0.25)


def test_relative_distance_known_answers():
    from lmcbook.merge import relative_distance

    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    b = copy.deepcopy(a)
    assert relative_distance(a, b, a) == 0.0  # two identical models are at distance 0
    with torch.no_grad():
        for p in b.parameters():
            p.add_(1.0)  # every one of the 23 parameters moved by 1: ‖θa − θb‖ = √23
    ref_norm = float(torch.linalg.vector_norm(torch.nn.utils.parameters_to_vector(a.parameters()).double()))
    assert relative_distance(a, b, a) == pytest.approx(23 ** 0.5 / ref_norm)
    with pytest.raises(ValueError, match="parameter counts"):
        relative_distance(a, torch.nn.Linear(4, 3), a)
