import numpy as np
import pandas as pd
import pytest

from lmcbook import experiments, probes
from lmcbook.store import RunStore
from lmcbook.studies import study as part_study


def _study(**kw):
    return part_study("width", "smoke", **{"widths": [0.25], "epochs": 2, **kw})


def test_probe_frames_cover_trained_and_untrained_and_are_cached(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "s")
    study = _study()
    frames = experiments.probe_frames(study, store)
    assert set(frames) == set(experiments.PROBES)
    assert sorted(store.reads.values()) == ["trained", "trained"]  # the store's read log names the runs
    lewc = frames["lewc"]
    assert set(lewc["method"]) == {"trained", "untrained"}
    assert set(lewc["lam"]) == set(experiments.PROBE_LAMS)
    assert set(lewc["layer"]) == {1, 2, 3, 4}
    rank = frames["rank"]
    assert set(rank["seed"]) == {0, 1}  # per-model measure: each model's own seed
    calls = []
    real = experiments._all_probes
    monkeypatch.setattr(experiments, "_all_probes", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = experiments.probe_frames(study, store)
    assert calls == []  # served from the derived cache
    for name in frames:
        pd.testing.assert_frame_equal(frames[name].reset_index(drop=True), again[name].reset_index(drop=True),
                                      check_dtype=False)


def test_untrained_baseline_is_the_pairs_initialisation(tmp_path):
    from lmcbook.data import load
    from lmcbook.probes import rank_profile
    from lmcbook.train import init_model

    store = RunStore(tmp_path / "s")
    study = _study()
    frames = experiments.probe_frames(study, store)
    pair = study.pairs()[0]
    expected = rank_profile(init_model(pair.a, load("digits", device="cpu")))
    got = frames["rank"].query("method == 'untrained' and model == 'a' and metric == 'effective_rank'")
    assert np.allclose(got["value"].to_numpy(), expected.query("metric == 'effective_rank'")["value"].to_numpy())


def test_pair_frames_cache_matches_a_fresh_computation(tmp_path):
    store = RunStore(tmp_path / "s")
    study = _study()
    first = experiments.pair_frames(study, store)
    second = experiments.pair_frames(study, store)
    cols = ["acc_merged", "loss_barrier_cal_mid", "tau_ratio", "logit_norm_ratio"]
    assert first.summary[cols].to_numpy().tolist() == second.summary[cols].to_numpy().tolist()
    assert bool(second.summary["tau_at_bound_merged"].iloc[0]) in (True, False)


def test_sweeps_bundle_a_pages_frames_with_the_regime(tmp_path):
    store = RunStore(tmp_path / "s")
    study = _study()
    pairs = experiments.pair_sweep(study, store)
    pd.testing.assert_frame_equal(pairs["summary"], experiments.pair_frames(study, store).summary)
    pd.testing.assert_frame_equal(pairs.regime, experiments.regime_frame(study, store))
    means = pairs.means
    assert list(means.index) == sorted(pairs["summary"]["hidden_units"].unique())
    assert means["acc_merged"].iloc[0] == pytest.approx(pairs["summary"]["acc_merged"].mean())
    probes = experiments.probe_sweep(study, store, baseline=False)
    assert set(probes.frames) == set(experiments.PROBES) and set(probes["lewc"]["method"]) == {"trained"}
    pd.testing.assert_frame_equal(probes.regime, pairs.regime)
    with pytest.raises(KeyError):
        _ = probes.means  # a probe sweep has no pair summaries


def test_depth_study_pairs_share_the_width_recipe():
    depth = part_study("depth", "quick")
    assert [p.depth for p in depth.pairs()] == [2, 3, 4, 5, 6]
    assert {p.hidden_units for p in depth.pairs()} == {512}
    width = part_study("width", "quick")
    # the depth-4 pair at 512 units is the width sweep's pair 0 at multiplier 8: trained once, shared
    same = [p for p in depth.pairs() if p.depth == 4][0]
    assert same.a.id == width.pair(8.0, 0).a.id
    with pytest.raises(Exception, match="depths"):
        part_study("depth", "quick", depths=[1, 2])


@pytest.mark.parametrize("depth", [2, 3, 5])
def test_theory_logit_scale_consequences(depth):
    a, b = probes.constructed_pair("block_diagonal", depth=depth, hidden=24, seed=depth)
    out = probes.logit_scale(a, b, probes.inputs(2000, 16, depth), seed=depth)
    assert out["logit_norm_ratio"] == pytest.approx(2.0 ** (1 - depth), rel=1e-12)
    assert not out["tau_at_bound_merged"] and not out["tau_at_bound_ensemble"]
    assert out["tau_ratio"] == pytest.approx(2.0 ** (depth - 1), rel=1e-8)


def test_theory_check_pair_frame():
    df = probes.check_pair("disjoint_rows", depth=3, hidden=16, n_inputs=64)
    assert set(df["method"]) == {"disjoint_rows"}
    from lmcbook.schema import METRICS

    assert set(df["metric"]) <= METRICS
    with pytest.raises(ValueError, match="kind"):
        probes.constructed_pair("diagonal")


def _controls(**kw):
    return part_study("controls", "smoke", **{"widths": [0.25], "epochs": 2, "draws": 3, **kw})


def test_permutation_frames_random_draws_and_matching(tmp_path):
    store = RunStore(tmp_path / "s")
    frame = experiments.permutation_frames(_controls(), store)
    assert len([r for r, st in store.reads.items() if st != "missing"]) == 2
    assert sorted(frame["method"].unique()) == ["none", "random_permutation", "weight_matching"]
    rnd = frame[frame["method"] == "random_permutation"]
    assert sorted(rnd["index"]) == [0, 1, 2]
    # permuting b never changes b itself: the endpoint accuracies are identical in every variant
    assert frame["acc_b"].nunique() == 1 and frame["acc_a"].nunique() == 1
    assert frame["acc_ensemble"].nunique() == 1


def test_method_frames_cover_four_methods_and_time_matching(tmp_path):
    store = RunStore(tmp_path / "s")
    study = _controls()
    curves, summary = experiments.method_frames(study, store)
    assert sorted(summary["method"]) == ["none", "random_permutation", "repair", "weight_matching"]
    assert (summary["match_seconds"] > 0).all() and (summary["match_iterations"] >= 1).all()
    # REPAIR changes nothing at the endpoints, where the target statistics are the model's own
    c = curves.set_index(["method", "lam"])
    for lam in (0.0, 1.0):
        assert abs(c.loc[("repair", lam), "acc"] - c.loc[("none", lam), "acc"]) < 1e-9
    assert set(curves["lam"]) == set(study.lams)


def test_matched_probes_are_labelled(tmp_path):
    store = RunStore(tmp_path / "s")
    frames = experiments.probe_frames(_controls(), store, matched=True, baseline=False)
    assert set(frames["lewc"]["method"]) == {"trained", "weight_matched"}
    assert "commutativity_rel_err" in set(frames["reciprocal_orthogonality"]["metric"])


def test_controls_study_weak_twin():
    study = part_study("controls", "quick")
    weak = study.weak()
    assert weak.weight_decay == 1e-4 and study.weight_decay == 3e-3 and study.draws >= 5
    assert [s.model for s in weak.specs()[:2]] == [s.model for s in study.specs()[:2]]
    assert len(study.specs()) == 4 * len(study.pairs())
    with pytest.raises(Exception, match="weak_weight_decay"):
        part_study("controls", "quick", weak_weight_decay=-1.0)
    with pytest.raises(Exception, match="draws"):
        part_study("controls", "quick", draws=0)
