"""The training-regime measures (lmcbook.probes), the training-length axis and the regime frame."""

from __future__ import annotations

import math

import pytest
import torch

from lmcbook import experiments
from lmcbook.models import MLP
from lmcbook.probes import decay_integral, init_distance, regime_measures, weight_decay_shrinkage, weight_norms
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, TrainSpec, spawn_pair
from lmcbook.store import RunStore
from lmcbook.studies import study as part_study
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


def test_init_distance_and_the_update_are_zero_for_an_untrained_run(digits):
    spec = tiny_spec()
    run = TrainedRun(spec, init_model(spec, digits), {}, {"train_acc": 0.1})
    df = regime_measures(run, digits)
    dist = df[df["metric"] == "init_distance"]
    assert len(dist) == 1 + spec.model.depth and (dist["value"] == 0).all()
    delta = df[df["metric"].str.startswith("delta_")]
    assert len(delta) == 5 * spec.model.depth and (delta["value"] == 0).all()  # W − W₀ = 0: norm and ranks 0
    assert set(df["metric"]) == {"decay_integral", "decay_shrinkage", "lewc_setting", "init_distance", "weight_norm",
                                 "train_acc", "delta_norm", "delta_effective_rank", "delta_stable_rank",
                                 "delta_rel_effective_rank", "delta_rel_stable_rank"}
    assert float(df.loc[df["metric"] == "train_acc", "value"].iloc[0]) == 0.1


def test_update_ranks_of_a_planted_low_rank_update():
    """W = W₀ + a planted update of rank r with equal singular values: effective and stable rank r exactly, while
    W itself keeps the random initialisation's high rank."""
    from lmcbook.probes import effective_rank, singular_values, stable_rank, update_ranks

    torch.manual_seed(0)
    init = MLP(32, 10, hidden=600, depth=3)  # 600 >= GRAM_MIN_SIZE: the Gram route is exercised too
    model = MLP(32, 10, hidden=600, depth=3)
    model.load_state_dict(init.state_dict())
    r = 3
    q_out = torch.linalg.qr(torch.randn(600, r, dtype=torch.float64))[0]
    q_in = torch.linalg.qr(torch.randn(600, r, dtype=torch.float64))[0]
    with torch.no_grad():
        model.layers[1].weight += (2.0 * q_out @ q_in.T).float()  # singular values 2, 2, 2
    rows = {(row["layer"], row["metric"]): row["value"] for row in update_ranks(model, init)}
    assert rows[2.0, "delta_effective_rank"] == pytest.approx(r, rel=1e-4)
    assert rows[2.0, "delta_stable_rank"] == pytest.approx(r, rel=1e-4)
    assert rows[2.0, "delta_rel_stable_rank"] == pytest.approx(r / 600, rel=1e-4)
    assert rows[2.0, "delta_norm"] == pytest.approx(2.0 * math.sqrt(r), rel=1e-5)
    assert rows[1.0, "delta_norm"] == 0 and rows[1.0, "delta_effective_rank"] == 0  # untouched layers
    whole = singular_values(model.layers[1].weight.detach().double())
    assert effective_rank(whole) > 100 and stable_rank(whole) > 10  # W itself: the initialisation's rank


def test_stable_rank_of_a_constructed_matrix():
    from lmcbook.probes import effective_rank, singular_values, stable_rank

    w = torch.diag(torch.tensor([3.0, 1.0, 1.0, 0.0], dtype=torch.float64))
    s = singular_values(w)
    assert stable_rank(s) == pytest.approx(11 / 9)  # (9 + 1 + 1) / 9
    p = torch.tensor([0.6, 0.2, 0.2], dtype=torch.float64)
    assert effective_rank(s) == pytest.approx(float(torch.exp(-(p * p.log()).sum())))
    assert stable_rank(torch.zeros(3, dtype=torch.float64)) == 0 and effective_rank(torch.zeros(3)) == 0


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


def test_regime_frame_is_cached_per_run(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    study = part_study("mechanism", "smoke", widths=[0.25], epochs=1, regimes=[1, 2], weight_decays=[0.0, 1e-2],
                       regime_weight_decays=[0.0, 1e-2], init_scales=[1], decisive_seeds=1)
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

    write_idx(tmp_path / "data", "MNIST/raw", n_train=400, n_test=50, monkeypatch=monkeypatch)
    study = part_study("mechanism", "smoke", dataset="mnist", data_root=str(tmp_path / "data"), widths=[0.25],
                       epochs=1, regimes=[1, 2], weight_decays=[1e-3, 2e-3], regime_weight_decays=[1e-3],
                       init_scales=[1])
    df = experiments.regime_frame(study, RunStore(tmp_path / "runs"))
    assert (df["metric"] == "decay_integral").sum() == 2 * len(study.pairs())


def test_lewc_setting_is_a_bias_free_mlp_without_normalisation():
    from lmcbook.probes import lewc_setting

    assert lewc_setting(tiny_spec())
    for model in (ModelSpec("mlp", 0.25, 64, 3, bias=True), ModelSpec("mlp", 0.25, 64, 3, "layer"),
                  ModelSpec("vgg11", 0.25, depth=None)):
        assert not lewc_setting(RunSpec(model=model))
