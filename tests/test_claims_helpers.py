from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmcbook import claims, stats
from lmcbook.claims.thresholds import (
    COLLAPSE_RATIO_MAX,
    CONVERGED_TRAIN_ACC,
    D_TIE_RTOL,
    DECAY_ACTED_MAX,
    DECAY_IDLE_MIN,
    LLFC_MATCHED_MAX,
    MIN_ACC_EFFECT,
    MIN_PAIRS,
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    ORTH_FALL_MIN,
)


def test_quadratic_fit_recovers_a_planted_parabola():
    x = np.linspace(-3, 1, 9)
    fit = stats.quadratic_fit(x, -2 * (x + 1) ** 2 + 0.5)
    assert fit["c2"] == pytest.approx(-2) and fit["vertex"] == pytest.approx(-1)
    assert fit["interior"] == 1.0 and fit["fit_vertex"] == pytest.approx(0.5)
    assert fit["residual_var"] < 1e-20
    up = stats.quadratic_fit(x, (x + 1) ** 2)
    assert up["interior"] == 0.0  # a minimum is not an interior optimum
    edge = stats.quadratic_fit(x, -(x - 5) ** 2)
    assert edge["interior"] == 0.0 and edge["vertex"] == pytest.approx(5)
    with pytest.raises(ValueError, match="3 distinct"):
        stats.quadratic_fit([1, 1, 2], [0, 1, 2])


def test_spread_and_cell_stats():
    df = pd.DataFrame({"hidden_units": [16, 16, 64, 64], "seed": [0, 1, 0, 1], "metric": "m",
                       "value": [0.1, 0.3, 0.5, 0.6]})
    assert stats.spread(df, ["hidden_units"]) == pytest.approx((0.2 + 0.1) / 2)
    st = stats.cell_stats(df, "m")
    assert st.loc[16, "mean"] == pytest.approx(0.2) and st.loc[64, "spread"] == pytest.approx(0.1)


def test_cell_means_puts_trained_and_untrained_means_side_by_side():
    rows = [{"hidden_units": u, "seed": seed, "method": method, "lam": lam, "metric": metric, "value": value}
            for u in (16, 64) for seed in (0, 1) for lam in (0.25, 0.5)
            for method, shift in (("trained", 0.0), ("untrained", 10.0))
            for metric, value in (("a", u / 16 + seed + shift + lam), ("b", -u - seed))]
    df = pd.DataFrame(rows).query("not (metric == 'b' and method == 'untrained')")  # b: measured when trained only
    table = stats.cell_means(df, {"x": "a", "y": "b"}, lam=0.5)
    assert list(table.columns) == ["x", "x_spread", "x_un", "y", "y_spread", "y_un"]
    # a at λ=½: 16 units → 1 + ½ + seed (mean 2), 64 units → 4 + ½ + seed (mean 5); untrained 10 higher
    assert table["x"].tolist() == [2.0, 5.0] and table["x_un"].tolist() == [12.0, 15.0]
    assert table["x_spread"].tolist() == [1.0, 1.0] and table["y"].tolist() == [-16.5, -64.5]
    assert table["y_un"].isna().all()
    pd.testing.assert_series_equal(table["x"], stats.cell_stats(df, "a", lam=0.5, method="trained")["mean"],
                                   check_names=False)


def test_spearman():
    assert stats.spearman([1, 2, 3], [3, 5, 9]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3], [9, 5, 3]) == pytest.approx(-1.0)
    assert np.isnan(stats.spearman([1, 2, 3], [1, 1, 1]))


def test_spearman_is_exact_at_a_threshold():
    # one adjacent swap among 5 points: ρ = 1 − 6·2/(5·24) = 0.9 exactly, so "ρ ≥ 0.9" must hold
    assert stats.spearman([1, 2, 3, 4, 5], [1, 2, 3, 5, 4]) >= 0.9


def test_methods_page_states_the_rules_the_claims_apply():
    """book/methods.md is not executed, so its thresholds are typed: they must be the ones claims.py applies."""
    text = " ".join((Path(__file__).resolve().parents[1] / "book" / "methods.md").read_text().split())
    for phrase in (f"would leave at most {DECAY_ACTED_MAX:.0%} of a weight",
                   f"(`decay_shrinkage` ≤ {DECAY_ACTED_MAX:g})",
                   f"would leave at least {'half' if DECAY_IDLE_MIN == 0.5 else f'{DECAY_IDLE_MIN:.0%}'}",
                   f"reached at least {CONVERGED_TRAIN_ACC:.0%} training accuracy",
                   f"read a {stats.CONFIDENCE:.0%} percentile-bootstrap interval",
                   f"has at least {MIN_PAIRS} pairs",
                   f"ended below {NOISE_FAILED_TRAIN_ACC:g} training accuracy (twice the chance",
                   f"the weaker child at {NOISE_CONVERGED_TRAIN_ACC:g} or more",
                   "verdict at the rule, at {:g}, {:g} and {:g}, and at {:g}".format(*NOISE_RULE_THRESHOLDS[1:]),
                   f"{'half a point' if NOISE_MIN_EFFECT == 0.005 else NOISE_MIN_EFFECT} of test "
                   "accuracy",
                   f"over at least {MIN_PAIRS} pairs in every cell they read",
                   f"at least {NOISE_MIN_CELLS} cells, over at least 3 values of",
                   f"at most {'half' if COLLAPSE_RATIO_MAX == 0.5 else COLLAPSE_RATIO_MAX} that",
                   "decays must lie within ± the minimum effect (half a point)",
                   f"change in plain merged accuracy of more than {100 * MIN_ACC_EFFECT:g} points",
                   f"orthogonality ratio of more than {ORTH_FALL_MIN:g}",
                   f"differ by less than {D_TIE_RTOL:.1%} are one value",
                   f"relative error after matching at the largest $D$ at most {LLFC_MATCHED_MAX:g}"):
        assert phrase in text, f"book/methods.md does not say {phrase!r}"
    from lmcbook.studies import NoiseStudy, resolve

    assert all(resolve(NoiseStudy, p).max_steps is None for p in ("quick", "paper", "smoke"))  # "unset in every
    assert "(unset in every profile)" in text  # profile"


def test_claim_ids_sort_by_kind_then_number():
    ids = ["N1 (50%)", "W11", "M2", "W6 (update)", "R1", "W2", "W4"]
    assert sorted(ids, key=claims.id_order) == ["W2", "W4", "W6 (update)", "W11", "R1", "M2", "N1 (50%)"]


def test_fit_coefficient_recovers_a_planted_slope_with_an_interval_that_covers_it():
    from lmcbook.stats import fit_coefficient

    rng = np.random.default_rng(0)
    z = np.log10([32, 64, 128, 256, 32, 64, 128, 256])
    x = np.array([-3.0, -3.0, -3.0, -3.0, -2.0, -2.0, -2.0, -2.0]) + z / 3
    design = np.column_stack([np.ones_like(x), x, x ** 2, z])
    truth = 0.01 + 0.002 * x - 0.001 * x ** 2 + 0.02 * z  # 2 points per decade of z
    samples = [t + rng.normal(0, 0.002, 10) for t in truth]
    iv = fit_coefficient(samples, design, 3)
    assert iv.lo < 0.02 < iv.hi and iv.mean == pytest.approx(0.02, abs=0.004) and iv.n == 10
    flat = fit_coefficient([np.full(10, t - 0.02 * zz) for t, zz in zip(truth, z)], design, 3)
    assert flat.mean == pytest.approx(0.0, abs=1e-12)
