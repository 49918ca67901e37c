"""The training-regime measures (lmcbook.regime), the training-length axis and the regime frame."""

from __future__ import annotations

import math

import pytest
import torch

from lmcbook import experiments
from lmcbook.models import MLP
from lmcbook.noise import spawn_pair
from lmcbook.parts import study as part_study
from lmcbook.regime import decay_integral, init_distance, regime_measures, weight_decay_shrinkage, weight_norms
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec
from lmcbook.store import RunStore
from lmcbook.train import TrainedRun, init_model, train

from .conftest import tiny_spec


def test_decay_integral_of_warmup_then_linear_decay():
    # η_t = η(t+1)/w for t < w, then η(T−t)/(T−w): Σ_t η_t = η(w+1)/2 + η(T−w+1)/2 = η(T+2)/2
    spec = RunSpec(train=TrainSpec(steps=1000, lr=0.05, weight_decay=3e-3, warmup=0.05))
    assert decay_integral(spec, 1257) == pytest.approx(3e-3 * 0.05 * 1002 / 2, rel=1e-12, abs=0)
    no_warm = spec.with_train(warmup=0.0)  # Σ_t η(T−t)/T = η(T+1)/2
    assert decay_integral(no_warm, 1257) == pytest.approx(3e-3 * 0.05 * 1001 / 2, rel=1e-12, abs=0)
    assert decay_integral(spec.with_train(weight_decay=0.0), 1257) == 0.0
    # epochs: 1257 // 128 = 9 steps per epoch
    by_epochs = RunSpec(train=TrainSpec(epochs=60, batch_size=128, lr=0.05, weight_decay=3e-3, warmup=0.0))
    assert decay_integral(by_epochs, 1257) == pytest.approx(3e-3 * 0.05 * 541 / 2, rel=1e-12, abs=0)


def test_decay_integral_follows_the_weights_through_parents_and_fine_tuning():
    spec = RunSpec(train=TrainSpec(steps=400, lr=0.1, weight_decay=1e-3, warmup=0.1))
    a, b = spawn_pair(spec, 100)
    # a child goes through its parent's 100 steps, then its own 300: the uninterrupted run's D
    assert decay_integral(a, 1257) == pytest.approx(decay_integral(spec, 1257), rel=1e-12)
    assert decay_integral(a.parent, 1257) < decay_integral(a, 1257)
    assert weight_decay_shrinkage(a, 1257) == pytest.approx(weight_decay_shrinkage(spec, 1257), rel=1e-12)
    tuned = RunSpec(spec.data, spec.model, spec.train.__class__(steps=50, lr=0.01, weight_decay=1e-3, warmup=0.0,
                                                                 schedule="constant"), init=spec)
    assert decay_integral(tuned, 1257) == pytest.approx(decay_integral(spec, 1257) + 1e-3 * 0.01 * 50, rel=1e-12)


def test_weight_decay_shrinkage_known_answers():
    # no momentum, constant lr, no warm-up: (1 - lr·wd)^steps exactly
    spec = RunSpec(train=TrainSpec(lr=0.1, momentum=0.0, weight_decay=0.01, warmup=0.0, schedule="constant",
                                   steps=50))
    assert weight_decay_shrinkage(spec, 1000) == pytest.approx((1 - 0.1 * 0.01) ** 50, rel=1e-12)
    assert weight_decay_shrinkage(spec.with_train(weight_decay=0.0), 1000) == 1.0
    # with momentum the decay rate per step is the dominant root z of z² − (1 + μ − η·wd)z + μ = 0
    mu, a = 0.9, 0.1 * 0.01
    z = ((1 + mu - a) + math.sqrt((1 + mu - a) ** 2 - 4 * mu)) / 2
    heavy = spec.with_train(momentum=mu, steps=400)
    got = math.log(weight_decay_shrinkage(heavy, 1000))
    assert got == pytest.approx(400 * math.log(z), rel=0.05)
    assert got < 5 * 400 * math.log(1 - a)  # momentum amplifies the decay
    # "about e^(−D/(1−μ))": the exponent within 10%
    assert decay_integral(heavy, 1000) / (1 - mu) == pytest.approx(-got, rel=0.1)


def test_init_distance_is_zero_for_an_untrained_run(digits):
    spec = tiny_spec()
    run = TrainedRun(spec, init_model(spec, digits), {}, {})
    df = regime_measures(run, digits)
    dist = df[df["metric"] == "init_distance"]
    assert len(dist) == 1 + spec.model.depth and (dist["value"] == 0).all()
    assert set(df["metric"]) == {"decay_integral", "decay_shrinkage", "lewc_setting", "init_distance", "weight_norm"}


def test_init_distance_and_weight_norms_match_a_hand_computation():
    torch.manual_seed(0)
    init = MLP(3, 2, hidden=2, depth=2)
    model = MLP(3, 2, hidden=2, depth=2)
    with torch.no_grad():
        init.layers[0].weight.copy_(torch.tensor([[1.0, 0, 0], [0, 2, 0]]))
        init.layers[1].weight.copy_(torch.tensor([[0.0, 2], [0, 0]]))
        model.layers[0].weight.copy_(torch.tensor([[1.0, 0, 0], [0, 2, 3]]))  # moved by 3
        model.layers[1].weight.copy_(torch.tensor([[0.0, 2], [4, 0]]))  # moved by 4
    got = init_distance(model, init)
    assert got[1] == pytest.approx(3 / math.sqrt(5), rel=1e-12)
    assert got[2] == pytest.approx(4 / 2, rel=1e-12)
    assert got[None] == pytest.approx(5 / 3, rel=1e-12)  # ‖(3, 4)‖ / ‖(1, 2, 2)‖
    norms = weight_norms(model)
    assert norms[1] == pytest.approx(math.sqrt(14)) and norms[2] == pytest.approx(math.sqrt(20))
    assert norms[None] == pytest.approx(math.sqrt(34))


def test_weight_norm_falls_with_the_decay_integral_until_it_equilibrates(digits):
    """Behaviour, not timing: with lr·wd large, the norm of a LayerNorm MLP (scale-invariant hidden layers, so
    gradients cannot grow them) falls monotonically as D grows, and levels off far above pure decay's e^(−D)."""
    base = RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.25, 64, 3, "layer"),
                   TrainSpec(steps=400, batch_size=64, lr=0.1, momentum=0.0, weight_decay=0.05, warmup=0.0,
                             schedule="constant"))
    n = len(digits.y_train)
    ds, norms = [], []
    for k in (1, 50, 100, 200, 300, 400):
        run = train(base.with_train(stop_step=k), digits)
        ds.append(decay_integral(run.spec, n))
        norms.append(weight_norms(run.model)[None])
    assert ds == sorted(ds) and ds[-1] == pytest.approx(2.0)
    assert all(b < a for a, b in zip(norms, norms[1:])), norms
    assert norms[-2] - norms[-1] < 0.25 * (norms[0] - norms[1] + norms[1] - norms[2])  # it slows down
    assert norms[-1] > 3 * math.exp(-ds[-1]) * norms[0]  # gradients balance the decay: an equilibrium


def test_regime_study_crosses_lengths_weight_decays_and_cuts_wide_widths_at_the_longer_lengths():
    st = part_study("regime", "quick")
    assert st.regimes == (60, 200, 600) and st.weight_decays == (1e-4, 3e-3)
    cells = {(c.epochs, c.weight_decay): c.widths for c in st.cells()}
    assert len(cells) == 6 and cells[60, 3e-3] == st.widths
    assert max(cells[600, 3e-3]) == 4.0 and st.cut_widths() == (8.0, 16.0)
    pairs = st.pairs()
    assert {(p.epochs, p.weight_decay) for p in pairs} == set(cells)
    # the shortest strong cell is exactly the width study's runs: the store trains them once
    assert {s.id for s in part_study("width", "quick").specs()} <= {s.id for p in pairs for s in (p.a, p.b)}
    with pytest.raises(SpecError, match="regimes"):
        part_study("regime", "quick", regimes=[60])
    with pytest.raises(SpecError, match="long_max_width"):
        part_study("regime", "quick", long_max_width=0.1)
    with pytest.raises(SpecError, match="weight_decays"):
        part_study("regime", "quick", weight_decays=[-1.0, 1e-3])
    assert part_study("regime", "quick", long_max_width=16).cut_widths() == ()


def test_regime_frame_is_cached_per_run(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    study = part_study("regime", "smoke", widths=[0.25], regimes=[1, 2], weight_decays=[0.0, 1e-2])
    first = experiments.regime_frame(study, store)
    assert set(first["epochs"]) == {1, 2} and set(first["weight_decay"]) == {0.0, 1e-2}
    d = first[first["metric"] == "decay_integral"].groupby(["epochs", "weight_decay"])["value"].mean()
    assert d[1, 0.0] == 0.0 and d[2, 1e-2] > d[1, 1e-2] > 0
    assert sorted(first["seed"].unique()) == [0, 1]  # per model: the model's own seed
    loads = lambda: sum(e["event"] == "loaded" for e in store.events())  # noqa: E731
    n = loads()
    monkeypatch.setattr(experiments, "study_data", lambda s: pytest.fail("a cached regime loaded the data"))
    again = experiments.regime_frame(study, store)
    assert loads() == n
    assert again.equals(first)


def test_regime_frame_reads_runs_of_real_data_files(tmp_path, monkeypatch):
    """-p dataset mnist -p data_root DIR: the same study on torchvision's MNIST files (tiny fakes here)."""
    from .test_data import write_idx

    write_idx(tmp_path / "data", "MNIST/raw", n_train=400, n_test=50)
    study = part_study("regime", "smoke", dataset="mnist", data_root=str(tmp_path / "data"), widths=[0.25],
                                  regimes=[1, 2], weight_decays=[1e-3])
    df = experiments.regime_frame(study, RunStore(tmp_path / "runs"))
    assert (df["metric"] == "decay_integral").sum() == 4


def test_lewc_setting_is_a_bias_free_mlp_without_normalisation():
    from lmcbook.regime import lewc_setting

    assert lewc_setting(tiny_spec())
    for model in (ModelSpec("mlp", 0.25, 64, 3, bias=True), ModelSpec("mlp", 0.25, 64, 3, "layer"),
                  ModelSpec("vgg11", 0.25, depth=None)):
        assert not lewc_setting(RunSpec(model=model))
