import copy
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from lmcbook import probes
from lmcbook.models import MLP, VGG11, ProbePoint, ResNet20, probe_points
from lmcbook.probes import constructed_pair
from lmcbook.specs import SpecError

LAMS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def _x(n=64, d=16, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("depth", [2, 4, 5])
def test_block_diagonal_pair_satisfies_lewc_exactly(depth):
    a, b = constructed_pair("block_diagonal", depth=depth, seed=depth)
    _assert_exact_lewc(probes.PairActivations(a, b, _x()), depth)


class HeadFirst(nn.Module):
    """A bias-free ReLU MLP whose __init__ registers the output layer before the hidden ones."""

    def __init__(self, d: int = 16, h: int = 32, c: int = 10) -> None:
        super().__init__()
        self.head = nn.Linear(h, c, bias=False)
        self.body = nn.Sequential(nn.Linear(d, h, bias=False), nn.ReLU(), nn.Linear(h, h, bias=False), nn.ReLU())

    def forward(self, x):
        return self.head(self.body(x))


def _head_first(mlp: MLP) -> HeadFirst:
    m = HeadFirst().double()
    with torch.no_grad():
        for dst, src in zip((m.body[0], m.body[2], m.head), mlp.layers):
            dst.weight.copy_(src.weight)
    return m


def test_layers_of_any_module_are_numbered_in_call_order_not_registration_order():
    a, b = (_head_first(m) for m in constructed_pair("block_diagonal", depth=3, seed=3))
    x = _x()
    rec = probes.record(a, x)
    assert rec.layers == [1, 2, 3] and rec.roles == {1: "hidden", 2: "hidden", 3: "output"}
    assert rec.modules == {1: a.body[0], 2: a.body[2], 3: a.head}
    assert torch.equal(rec.outputs[3], a(x)) and torch.equal(rec.inputs[1], x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # bias-free, norm-free: no warning
        _assert_exact_lewc(probes.PairActivations(a, b, x), depth=3)
    assert [p.name for p in probe_points(a)] == ["head", "body.0", "body.2"]  # registration order, without x
    pts = probe_points(a, x)
    assert [(p.name, p.layer, p.role) for p in pts] == [("body.0", 1, "hidden"), ("body.2", 2, "hidden"),
                                                        ("head", 3, "output")]
    ranks = probes.rank_profile(a, x)
    assert list(ranks[ranks.metric == "effective_rank"].name) == ["body.0", "body.2", "head"]


def test_call_order_numbering_refuses_reused_layers_and_skips_unused_ones():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.unused = nn.Linear(3, 3, bias=False)
            self.shared = nn.Linear(4, 4, bias=False)
            self.out = nn.Linear(4, 2, bias=False)

        def forward(self, x):
            return self.out(torch.relu(self.shared(torch.relu(self.shared(x)))))

    with pytest.raises(SpecError, match="'shared' \\(2 times\\).*called once"):
        probes.record(Twice(), torch.randn(5, 4))
    m = Twice()
    m.forward = lambda x: m.out(torch.relu(m.shared(x)))
    rec = probes.record(m, torch.randn(5, 4))
    assert rec.layers == [1, 2] and rec.modules == {1: m.shared, 2: m.out}  # 'unused' is never called


def test_listed_probe_points_must_follow_the_call_order():
    class Listed(HeadFirst):
        def probe_points(self):
            return [ProbePoint("head", self.head, 1, "hidden"), ProbePoint("body.0", self.body[0], 2, "hidden"),
                    ProbePoint("body.2", self.body[2], 3, "output")]

    with pytest.raises(SpecError, match="layer numbers in call order: \\[2, 3, 1\\]"):
        probes.record(Listed(), torch.randn(4, 16))


def test_a_model_with_biases_or_normalisation_gets_one_warning_naming_those_layers():
    class Normed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(16, 8)  # with a bias
            self.ln = nn.LayerNorm(8)
            self.out = nn.Linear(8, 10, bias=False)

        def forward(self, x):
            return self.out(torch.relu(self.ln(self.proj(x))))

    torch.manual_seed(0)
    a, b = Normed().double(), Normed().double()
    with pytest.warns(probes.ScaleWarning) as caught:
        probes.PairActivations(a, b, _x())
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "'proj'" in msg and "'ln'" in msg and "'out'" not in msg and "bias" in msg and "normalisation" in msg
    assert caught[0].filename == __file__  # points at the caller, not into lmcbook
    assert probes.scale_caveats(a) == {"bias": ["proj"], "norm": ["ln"]}
    with pytest.warns(probes.ScaleWarning, match="'layers.0', 'layers.1', 'layers.2'"):
        probes.lewc_similarity(MLP(16, 10, 8, depth=3, bias=True).double(), MLP(16, 10, 8, depth=3, bias=True).double(),
                               _x())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        probes.PairActivations(a, b, _x(), warn=False)
        probes.PairActivations(MLP(16, 10, 8).double(), MLP(16, 10, 8).double(), _x())  # lmcbook's plain MLP


def _assert_exact_lewc(acts, depth):
    lewc = acts.lewc(LAMS)
    rel = lewc[lewc.metric == "lewc_rel_err"]
    assert len(rel) == depth * len(LAMS)
    assert rel.value.max() < 1e-10
    orth = acts.reciprocal_orthogonality(LAMS)
    assert orth[orth.metric.str.startswith("orth_ratio")].value.max() < 1e-10
    assert orth[orth.metric == "cross_rel_err"].value.max() < 1e-10
    add = acts.weak_additivity(LAMS)
    assert add[add.metric == "additivity_rel_err"].value.max() < 1e-10
    assert add[add.metric == "sign_conflict"].value.max() == 0
    law = acts.scale_law().set_index("metric")
    assert abs(law.loc["scale_beta", "value"] - 1) < 1e-10
    assert abs(law.loc["scale_alpha", "value"]) < 1e-10
    logits = law[law.layer == depth]
    assert abs(float(logits.value.iloc[0]) - 2.0 ** (1 - depth)) < 1e-10


def test_disjoint_rows_keep_additivity_but_break_lewc():
    a, b = constructed_pair("disjoint_rows", depth=4, seed=1)
    acts = probes.PairActivations(a, b, _x())
    add = acts.weak_additivity(LAMS)
    assert add[add.metric == "additivity_rel_err"].value.max() < 1e-10
    lewc = acts.lewc([0.5]).query("metric == 'lewc_rel_err'").set_index("layer")
    assert lewc.loc[1, "value"] < 1e-10  # layer 1 reads the shared input: exact
    assert lewc.loc[2, "value"] > 0.1
    orth = acts.reciprocal_orthogonality([0.5])
    assert orth[orth.metric == "orth_ratio"].value.min() > 0.1


def test_overlapping_supports_break_both_conditions():
    a, b = constructed_pair("overlapping", depth=4, seed=2)
    acts = probes.PairActivations(a, b, _x())
    add = acts.weak_additivity([0.5])
    assert add[add.metric == "sign_conflict"].value.min() > 0.2
    assert add[add.metric == "additivity_rel_err"].value.min() > 0.05


def test_a_network_merged_with_itself():
    torch.manual_seed(0)
    a = MLP(16, 10, 32, depth=3).double()
    lewc = probes.lewc_similarity(a, copy.deepcopy(a), _x(), lams=LAMS)
    assert np.allclose(lewc[lewc.metric == "lewc_cos"].value, 1.0, atol=1e-12)
    half = lewc[(lewc.metric == "lewc_rel_err") & (lewc.lam == 0.5)].set_index("layer").value
    assert np.allclose(half.loc[[1, 2, 3]], [0.0, 0.5, 0.75], atol=1e-12)
    assert lewc[lewc.metric == "llfc_rel_err"].value.max() < 1e-12


def test_rank_known_answers():
    g = torch.Generator().manual_seed(0)
    q1, _ = torch.linalg.qr(torch.randn(40, 40, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=torch.float64))
    for r in (1, 5, 17):
        s = torch.zeros(30, dtype=torch.float64)
        s[:r] = 3.0
        w = q1[:, :30] @ torch.diag(s) @ q2.T
        assert abs(probes.effective_rank(torch.linalg.svdvals(w)) - r) < 1e-9
    assert probes.stable_rank(torch.linalg.svdvals(torch.eye(12, dtype=torch.float64))) == pytest.approx(12, abs=1e-12)
    model = MLP(16, 10, 8, depth=3)
    prof = probes.rank_profile(model)
    er = prof[prof.metric == "rel_effective_rank"]
    assert list(er.role) == ["input", "hidden", "output"]
    assert er.value.between(0, 1).all()
    assert (prof.metric == "singular_value").sum() == 8 + 8 + 8


def test_rank_profile_reshapes_convs():
    prof = probes.rank_profile(ResNet20(3, 10, 4))
    sv = prof[(prof.metric == "singular_value") & (prof.name == "blocks.0.conv1")]
    assert len(sv) == min(4, 4 * 9)
    assert set(prof.role) == {"input", "hidden", "output", "shortcut"}


def test_gaussian_additivity_baseline():
    base = probes.gaussian_additivity_baseline((360, 512), 1.0, 1.0, seed=0)
    assert base["cos"] == pytest.approx(0.930, abs=0.005)
    assert base["sign_conflict"] == pytest.approx(0.5, abs=0.01)
    narrow = probes.gaussian_additivity_baseline((360, 16), 1.0, 1.0, seed=0, samples=1 << 20)
    assert narrow["cos"] == pytest.approx(0.919, abs=0.01)


def test_gaussian_baseline_is_the_same_whether_its_draws_are_kept_or_not(monkeypatch):
    kept = probes.gaussian_additivity_baseline((360, 64), 2.0, 0.5, seed=3)
    assert probes.gaussian_additivity_baseline((360, 64), 2.0, 0.5, seed=3) == kept  # served from the cache
    monkeypatch.setattr(probes, "DRAW_CACHE_NUMBERS", 0)  # too large to keep: drawn afresh
    assert probes.gaussian_additivity_baseline((360, 64), 2.0, 0.5, seed=3) == kept
    assert probes.gaussian_additivity_baseline((360, 64), 2.0, 0.5, seed=4) != kept


def test_jaccard_chance_level():
    g = np.random.default_rng(0)
    n, k = 16, 2
    draws = [len(set(g.choice(n, k, replace=False)) & set(g.choice(n, k, replace=False))) for _ in range(200000)]
    j = np.array(draws) / (2 * k - np.array(draws))
    se = j.std() / np.sqrt(len(j))
    assert abs(probes.jaccard_chance(n, k) - j.mean()) < 4 * se
    assert probes.jaccard_chance(4096, round(0.1 * 4096)) == pytest.approx(0.1 / 1.9, abs=1e-3)


def test_neuron_moments_of_identical_models():
    torch.manual_seed(0)
    a = MLP(16, 10, 40, depth=3).double()
    df = probes.neuron_moments(a, copy.deepcopy(a), _x(), top_fraction=0.1)
    jac = df[df.metric == "jaccard"]
    assert list(jac.layer) == [1, 2] and (jac.value == 1.0).all()
    assert (df[df.metric == "top_k"].value == 4).all()
    rms = df[(df.metric == "rms_a") & (df.layer == 1)].sort_values("index").value.to_numpy()
    z = torch.relu(_x() @ a.layers[0].weight.detach().T)
    assert np.allclose(rms, torch.sqrt((z ** 2).mean(0)).numpy())


@pytest.mark.parametrize("make, norms", [(lambda: VGG11(3, 10, 2), 0), (lambda: VGG11(3, 10, 2, norm="layer"), 8),
                                         (lambda: ResNet20(3, 10, 2), 0)])
def test_probes_run_on_conv_nets(make, norms):
    torch.manual_seed(0)
    a, b = make(), make()
    x = torch.randn(8, 3, 32, 32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        acts = probes.PairActivations(a, b, x)
    assert [str(w.message).count("'features.") for w in caught] == ([norms] if norms else [])  # one, naming each
    assert len(acts.lewc([0.5])) > 0
    assert len(acts.reciprocal_orthogonality([0.5])) > 0
    assert len(acts.neuron_moments()) > 0
    assert np.isfinite(acts.scale_law().value).all()


def test_resnet_blocks_and_batchnorm():
    torch.manual_seed(0)
    a, b = ResNet20(3, 10, 2, norm="batch"), ResNet20(3, 10, 2, norm="batch")
    x = torch.randn(8, 3, 32, 32)
    with pytest.raises(ValueError, match="train_x"):
        probes.PairActivations(a, b, x)
    with pytest.warns(probes.ScaleWarning, match="'blocks.3.shortcut.1'"):
        acts = probes.PairActivations(a, b, x, train_x=torch.randn(16, 3, 32, 32), points="blocks")
    assert sorted(set(acts.lewc([0.5]).layer)) == list(range(1, 10))
    with pytest.raises(ValueError, match="points='layers'"):
        acts.reciprocal_orthogonality()
    with pytest.raises(ValueError, match="blocks"):
        probes.PairActivations(MLP(16, 10, 8), MLP(16, 10, 8), _x().float(), points="blocks")


def test_singular_values_from_the_gram_matrix_match_the_svd():
    g = torch.Generator().manual_seed(0)
    decay = torch.diag(torch.logspace(0, -3, 700, dtype=torch.float64))
    w = torch.randn(600, 700, generator=g, dtype=torch.float64) @ decay
    exact, fast = torch.linalg.svdvals(w), probes.singular_values(w)
    assert fast.shape == exact.shape
    assert float((fast - exact).abs().max() / exact[0]) < 1e-10
    assert abs(probes.effective_rank(fast) - probes.effective_rank(exact)) < 1e-6
    assert abs(probes.stable_rank(fast) - probes.stable_rank(exact)) < 1e-9


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_probes_leave_the_callers_models_untouched(dtype):
    torch.manual_seed(0)
    a, b = MLP(16, 10, 32, norm="batch").to(dtype), MLP(16, 10, 32, norm="batch").to(dtype)
    a.train(), b.eval()
    before = [copy.deepcopy(m.state_dict()) for m in (a, b)]
    x = _x().to(dtype)
    with pytest.warns(probes.ScaleWarning, match="'norms.0', 'norms.1', 'norms.2'"):
        acts = probes.PairActivations(a, b, x, train_x=x, dtype=dtype)
    acts.lewc((0.25, 0.5)), acts.weak_additivity(), acts.reciprocal_orthogonality(), acts.neuron_moments()
    acts.scale_law()
    assert (a.training, b.training) == (True, False)
    for m, saved in zip((a, b), before):
        for k, v in m.state_dict().items():
            assert torch.equal(v, saved[k]), k  # BatchNorm running statistics included


def test_concentration_known_answers():
    even = torch.ones(20)
    assert probes.concentration(even, 2) == pytest.approx((0.1, 1.0))
    one = torch.zeros(20)
    one[7] = 3.0
    assert probes.concentration(one, 2) == pytest.approx((1.0, 1 / 20))
    half = torch.tensor([1.0, 1.0, 0.0, 0.0])  # two of four neurons carry equal activity
    assert probes.concentration(half, 1) == pytest.approx((0.5, 0.5))


def test_a_dead_layer_has_no_concentration_rows_and_one_dead_model_does_not_poison_the_mean():
    torch.manual_seed(0)
    a = MLP(16, 10, 40, depth=3).double()
    b, dead = copy.deepcopy(a), copy.deepcopy(a)
    with torch.no_grad():
        dead.layers[0].weight.fill_(-1.0)  # every layer-1 pre-activation of a positive input is negative
    x = _x().abs()
    alive = probes.neuron_moments(a, b, x)
    one = probes.neuron_moments(a, dead, x)
    both = probes.neuron_moments(dead, copy.deepcopy(dead), x)
    key = (alive.metric == "top_share") & (alive.layer == 1)
    assert float(one[(one.metric == "top_share") & (one.layer == 1)].value.iloc[0]) == float(alive[key].value.iloc[0])
    assert both[(both.layer == 1) & both.metric.isin(["top_share", "participation_ratio"])].empty
    assert np.isfinite(both[both.metric.isin(["top_share", "participation_ratio"])].value).all()


def test_the_books_probes_read_resnet20_at_its_blocks():
    from lmcbook import data, experiments

    torch.manual_seed(0)
    a, b = ResNet20(3, 10, 2, norm="batch"), ResNet20(3, 10, 2, norm="batch")
    assert experiments.probe_points_of(a) == "blocks" and experiments.probe_points_of(MLP(4, 2, 4)) == "layers"
    g = torch.Generator().manual_seed(0)
    imgs = lambda n: torch.rand(n, 3, 8, 8, generator=g).numpy()  # noqa: E731
    labels = lambda n: (torch.arange(n) % 10).numpy()  # noqa: E731
    ds = data.from_arrays("cifar10", imgs(40), labels(40), imgs(10), labels(10), imgs(12), labels(12), 10, "cpu")
    frames = experiments._all_probes(a, b, ds, (0.5,))
    assert sorted(set(frames["lewc"]["layer"])) == list(range(1, 10))  # nine residual blocks
    assert len(frames["reciprocal_orthogonality"]) > 0  # from a second, layer-wise record
