"""Each claim test on synthetic long frames built to pass and built to fail."""

import numpy as np
import pandas as pd
import pytest

from lmcbook import claims, schema, stats
from lmcbook.claims.mechanism import claim_r1, claim_r2, closest_barrier
from lmcbook.claims.thresholds import CHANGED_AFTER_RESULTS, FIXED_BEFORE, LEWC_COS_MIN, PAPER_MLP_ACC_BARRIER, RHO_MIN
from lmcbook.claims.verdicts import (
    BOOK,
    DIAGNOSTIC,
    FAIL,
    INCONCLUSIVE,
    MARKS,
    NA,
    PAPER,
    PASS,
    STATE_CODES,
    ClaimResult,
    chance_passes,
)
from lmcbook.claims.width import (
    claim_w1,
    claim_w2,
    claim_w3,
    claim_w4,
    claim_w5,
    claim_w6,
    claim_w6_update,
    claim_w7,
    claim_w8,
    claim_w9,
    claim_w10,
    claim_w11,
    claim_w12,
    claim_w13,
    claim_w14,
    claim_w15,
)

UNITS = [16, 64, 256, 1024]


def frame(notebook, rows):
    df = pd.DataFrame(rows)
    df.insert(0, "notebook", notebook)
    return df


def by_width(notebook, metric, values, seeds=range(5), jitter=0.001, replicate="pair", **keys):
    """One row per (width, replicate): values[i] at UNITS[i], replicates spread evenly over ±jitter (5 by default,
    claims.thresholds.MIN_PAIRS, as the quick profile trains where the width rows read intervals).  ``replicate`` is
    ``pair`` for a pair's measurement, ``seed`` for one model's (ranks)."""
    seeds = list(seeds)
    half = max((len(seeds) - 1) / 2, 0.5)
    return [{"metric": metric, "value": v + (i - (len(seeds) - 1) / 2) / half * jitter, replicate: s,
             "hidden_units": u, **keys}
            for u, v in zip(UNITS, values) for i, s in enumerate(seeds)]


def verdict(fn, df):
    r = fn(df)
    return r.passed if isinstance(r, ClaimResult) else [x.passed for x in r]


def test_w1():
    assert verdict(claim_w1, frame("w", by_width("w", "acc_merged", [0.3, 0.5, 0.7, 0.9])))
    assert not verdict(claim_w1, frame("w", by_width("w", "acc_merged", [0.3, 0.7, 0.5, 0.9])))


def test_w2():
    raw = by_width("b", "loss_barrier_mid", [2, 1.5, 1.2, 1.2])
    ok = by_width("b", "loss_barrier_cal_mid", [1.8, 0.9, 0.4, 0.1]) + raw
    assert verdict(claim_w2, frame("b", ok))
    not_small = by_width("b", "loss_barrier_cal_mid", [1.8, 0.9, 0.6, 0.5]) + raw
    assert not verdict(claim_w2, frame("b", not_small))  # falls, but stays above ¼ of the raw barrier


def _lewc(trained_wide, untrained_wide):
    rows = []
    for method, vals in (("trained", [0.7, 0.6, 0.55, trained_wide]), ("untrained", [0.8, 0.8, 0.8, untrained_wide])):
        for layer in (1, 2, 3, 4):
            rows += by_width("lewc", "lewc_rel_err", vals, lam=0.5, layer=layer, method=method, jitter=0.01)
    return frame("lewc", rows)


def test_w3():
    assert verdict(claim_w3, _lewc(0.4, 0.8))
    assert not verdict(claim_w3, _lewc(0.79, 0.8))  # trend holds, but not below the baseline by the spread


def _additivity(values, baseline):
    rows = []
    for layer in (1, 2, 3):
        rows += by_width("a", "additivity_rel_err", values, lam=0.5, layer=layer, method="trained")
        rows += by_width("a", "baseline_additivity_rel_err", [baseline] * 4, lam=0.5, layer=layer, method="trained")
    return frame("a", rows)


def test_w4():
    assert verdict(claim_w4, _additivity([0.4, 0.3, 0.2, 0.1], 0.37))
    assert not verdict(claim_w4, _additivity([0.15, 0.16, 0.18, 0.2], 0.37))


def test_w6():
    def rows(hidden_vals, models=10, jitter=0.001):
        out = []
        for layer in (1, 2, 3, 4):
            vals = hidden_vals if layer in (2, 3) else [0.9, 0.1, 0.9, 0.1]  # the input/output layers are ignored
            out += by_width("r", "rel_effective_rank", vals, seeds=range(models), replicate="seed", layer=layer,
                            method="trained", jitter=jitter)
        return frame("r", out)

    assert claim_w6(rows([0.8, 0.6, 0.4, 0.2])).state == PASS
    assert claim_w6(rows([0.6, 0.7, 0.75, 0.8])).state == FAIL
    assert claim_w6(rows([0.8, 0.6, 0.4, 0.2], models=4)).state == INCONCLUSIVE  # 2 pairs' models
    assert claim_w6(rows([0.8, 0.79, 0.78, 0.77], jitter=0.2)).state == INCONCLUSIVE  # ends overlap


def test_w6_update_reads_the_rank_of_what_training_added():
    def rows(hidden_vals, jitter=0.001, w_vals=(0.9, 0.9, 0.9, 0.9)):
        out = []
        for layer in (1, 2, 3, 4):
            vals = hidden_vals if layer in (2, 3) else [0.9, 0.1, 0.9, 0.1]  # the input/output layers are ignored
            out += by_width("r", "delta_rel_stable_rank", vals, seeds=range(10), replicate="seed", layer=layer,
                            jitter=jitter)
            # W's own rank, which the row must not read
            out += by_width("r", "rel_effective_rank", w_vals, seeds=range(10), replicate="seed", layer=layer,
                            method="trained")
        return frame("r", out)

    r = claim_w6_update(rows([0.3, 0.2, 0.1, 0.05]))
    assert r.state == PASS and r.control and r.key == "w6_update"
    assert claim_w6_update(rows([0.05, 0.1, 0.2, 0.3])).state == FAIL
    # falls in rank order, but the ends' difference is inside the models' spread: inconclusive
    assert claim_w6_update(rows([0.30, 0.29, 0.28, 0.27], jitter=0.2)).state == INCONCLUSIVE
    assert [x.id for x in claims.page_claims("low_rank", rows([0.3, 0.2, 0.1, 0.05]))] == ["W6", "W6 (update)"]


def setting(notebook, lewc_ok=True):
    """The regime row that says whether the page's networks are in LEWC's setting (bias-free MLP, no norm)."""
    return [{"metric": "lewc_setting", "value": float(lewc_ok), "pair": 0, "hidden_units": 16}]


def test_w9():
    rows = lambda wide, ok=True: frame("b", by_width("b", "logit_norm_ratio", [0.25, 0.2, 0.16, wide], depth=4)  # noqa
                                       + setting("b", ok))
    assert claim_w9(rows(0.14)).state == PASS
    assert claim_w9(rows(0.2)).state == FAIL
    assert claim_w9(rows(0.14, ok=False)).state == NA  # biases or BatchNorm: LEWC's scale is off
    no_record = frame("b", by_width("b", "logit_norm_ratio", [0.25, 0.2, 0.16, 0.14], depth=4))
    assert claim_w9(no_record).state == NA and "does not record" in claim_w9(no_record).measured


def _depth_rows(beta, beta_untrained, ok=True, pairs=range(5), jitter=0.01):
    rows = []
    for p in pairs:
        b, bu = beta + jitter * (p - 2), beta_untrained + jitter * (p - 2)
        rows += [{"metric": "logit_norm_ratio", "value": 2.0 ** (-b * (L - 1)), "pair": p, "depth": L,
                  "hidden_units": 512} for L in range(2, 7)]
        rows += [{"metric": "scale_ratio", "value": 2.0 ** (-bb * (layer - 1)), "pair": p, "depth": L,
                  "layer": layer, "hidden_units": 512, "method": method, "lam": 0.5}
                 for L in range(2, 7) for layer in range(1, L + 1)
                 for method, bb in (("trained", b), ("untrained", bu))]
    return frame("d", rows + setting("d", ok))


def test_w10_against_the_untrained_baseline():
    assert claim_w10(_depth_rows(0.9, 0.5)).state == PASS
    assert claim_w10(_depth_rows(0.9, 0.5)).values["beta"] == pytest.approx(0.9)
    assert claim_w10(_depth_rows(0.9, 0.5)).values["beta_untrained"] == pytest.approx(0.5)
    assert claim_w10(_depth_rows(0.6, 0.5)).state == FAIL
    assert claim_w10(_depth_rows(0.95, 0.9)).state == INCONCLUSIVE  # random networks meet it too
    assert claim_w10(_depth_rows(0.9, 0.5, ok=False)).state == NA
    # one pair (the quick profile's) or pairs spread across the tolerance's edge: no verdict
    assert claim_w10(_depth_rows(0.9, 0.5, pairs=range(1))).state == INCONCLUSIVE
    assert claim_w10(_depth_rows(0.76, 0.3, jitter=0.05)).state == INCONCLUSIVE


def test_every_state_has_a_mark_and_a_code():
    assert set(MARKS) == set(STATE_CODES) == {"pass", "fail", "inconclusive", "n/a"}
    with pytest.raises(ValueError, match="state"):
        ClaimResult("W1", "width", "s", "m", "t", "maybe", "p")


def test_w11_and_w12_thresholds_over_seeds():
    acc = lambda wide, j: frame("w", by_width("w", "acc_barrier", [0.5, 0.2, 0.05, wide], jitter=j))  # noqa: E731
    assert claim_w11(acc(0.01, 0.001)).state == PASS  # 1 point
    assert claim_w11(acc(0.05, 0.001)).state == FAIL
    assert claim_w11(acc(0.02, 0.005)).state == INCONCLUSIVE
    assert "points" in claim_w11(acc(0.01, 0.001)).measured
    cal = lambda wide: frame("b", by_width("b", "loss_barrier_cal_mid", [1.5, 0.8, 0.3, wide]))  # noqa: E731
    assert claim_w12(cal(0.05)).state == PASS
    assert claim_w12(cal(0.3)).state == FAIL


def test_keys_and_order():
    r = ClaimResult("N1 (50%)", "noise", "s", "m", "t", "pass", "noise_scale")
    assert r.key == "n1_50"
    assert ClaimResult("W1", "width", "s", "m", "t", "pass", "p", regime="long").key == "w1_long"


def test_scoreboard_covers_every_page_and_round_trips_through_its_csv():
    assert set(claims.PAGE_CLAIMS) == {"width_accuracy", "loss_barrier_calibration", "lewc", "weak_additivity",
                                       "reciprocal_orthogonality", "low_rank", "random_permutation", "lewc_depth",
                                       "llfc_vs_lewc", "mechanism",
                                       "noise_regime", "noise_scale", "noise_components"}
    rows = [ClaimResult("W2", "width", "s", "m", "t", "inconclusive", "p", regime="short",
                               decay_integral=0.04),
            ClaimResult("W1", "width", "s", "m", "t", "fail", "p", regime="long", decay_integral=0.4),
            ClaimResult("N4", "noise", "s", "m", "t", "n/a", "p")]
    long = claims.scoreboard_long(rows)
    schema.validate_results(long, "claims")
    assert claims.state_of(long, "W2", "short") == "inconclusive"
    assert claims.state_of(long, "W1", "long") == "fail"
    assert claims.state_of(long, "N4") == "n/a"
    md = claims.scoreboard_markdown(rows)
    assert "*inconclusive*" in md and "*n/a*" in md and "long (D = 0.4)" in md
    assert md.count("after a pilot") == 1 and md.count("after results") == 2 and "before results" not in md
    assert "| before results |" in claims.scoreboard_markdown([ClaimResult("M1", "width", "s", "m", "t",
                                                                                   "pass", "mechanism")])
    # the compact table comes first, its verdict in the second column, the full table after it
    wordy = ClaimResult("N2 (50%)", "noise", "At fixed S the batch size has no effect on the merging gain at "
                               "all.", "m", "t", "pass", "noise_scale",
                               values={"estimate": 0.0012, "lo": -0.0005, "hi": 0.0029, "threshold": 0.005})
    md = claims.scoreboard_markdown([wordy])
    compact, full = md.index("| claim | result | statement |"), md.index("| claim | data | regime |")
    assert compact < full and "| {doc}`N2 (50%) <noise_scale>` | ✓ | At fixed S the batch size has no effect …" in md
    assert "| 0.0012 [-0.0005, 0.0029] vs 0.005 |" in md
    assert "| — |" in claims.scoreboard_markdown(rows[:1])  # no interval: no deciding number
    one_pair = ClaimResult("W10", "width", "s", "m", "t", "inconclusive", "lewc_depth",
                           values={"estimate": -0.19, "lo": float("nan"), "hi": float("nan"), "threshold": 0.25})
    assert "| — |" in claims.scoreboard_markdown([one_pair]) and "nan" not in claims.scoreboard_markdown([one_pair])
    # a test of two parts shows both: W4 fails on its trend although its interval clears its threshold
    flat = ClaimResult("W4", "width", "s", "m", "t", "fail", "weak_additivity",
                       values={"rho": 0.96, "rho_needed": -RHO_MIN, "estimate": 0.12, "lo": 0.1, "hi": 0.14,
                               "threshold": 0.0})
    assert claims.deciding_number(flat) == f"ρ +0.96 vs ≤ {-RHO_MIN:+.2g}; 0.12 [0.1, 0.14] vs 0"  # the side it needs
    assert f"| ρ +0.96 vs ≤ {-RHO_MIN:+.2g}; 0.12 [0.1, 0.14] vs 0 |" in claims.scoreboard_markdown([flat])
    rises = ClaimResult("W1", "width", "s", "m", "t", "pass", "width_accuracy",
                        values={"rho": 0.96, "rho_needed": RHO_MIN, "estimate": 0.05, "lo": 0.02, "hi": 0.08,
                                "threshold": 0.0})
    assert claims.deciding_number(rises).startswith(f"ρ +0.96 vs ≥ {RHO_MIN:+.2g}; ")
    # every row that records ρ records the side its test needs (W4's rise read as "vs ±0.9" looked like a pass)
    import inspect

    from lmcbook.claims import mechanism, width
    for module in (width, mechanism):
        source = inspect.getsource(module)
        assert source.count("rho=rho") + source.count('"rho": rho') == source.count("rho_needed"), module
    assert claims.deciding_number(wordy) == "0.0012 [-0.0005, 0.0029] vs 0.005"  # one part: its interval alone
    two_sided = ClaimResult("N2", "noise", "s", "m", "t", "fail", "noise_scale",
                            values={"estimate": -0.04, "lo": -0.06, "hi": -0.02, "threshold": 0.005, "two_sided": 1.0})
    assert claims.deciding_number(two_sided) == "-0.04 [-0.06, -0.02] vs ±0.005"  # not a pass below 0.005
    w14 = ClaimResult("W14", "width", "s", "m", "t", "fail", "reciprocal_orthogonality",
                      values={"estimate": 0.404, "lo": 0.373, "hi": 0.43, "threshold": 0.5, "also_estimate": 0.401,
                              "also_lo": 0.396, "also_hi": 0.406, "also_threshold": 0.2})
    assert claims.deciding_number(w14) == "0.404 [0.373, 0.43] vs 0.5; 0.401 [0.396, 0.406] vs 0.2"  # the failing part
    # a row of this build that records no data set (the width pages') shows this build's, where it is given
    assert "| —, short |" in claims.scoreboard_markdown(rows[:1])
    assert "| digits, short |" in claims.scoreboard_markdown(rows[:1], own="digits")
    ref = ClaimResult("W1", "width", "s", "m", "t", "pass", "mechanism", regime="long", source="mechanism-x")
    assert "| — (`mechanism-x`), long |" in claims.scoreboard_markdown([ref], own="digits")  # not this build's


def test_threshold_provenance_and_chance_passes():
    row = lambda cid, state="pass": ClaimResult(cid, "noise", "s", "m", "t", state, "p")  # noqa: E731
    assert row("W11").fixed_before and row("M6").fixed_before and not row("N3").fixed_before
    assert not row("W1").fixed_before and not row("N1 (50%)").fixed_before
    # N1's test changed after the noise references were read (issue 49): on them it is no longer fixed before
    n1 = ClaimResult("N1 (50%)", "noise", "s", "m", "t", "pass", "noise_scale", source="noise-scale-mnist1d")
    assert not n1.fixed_before and n1.fixed_when == "after results"
    n3 = ClaimResult("N3", "noise", "s", "m", "t", "pass", "noise_components", source="noise-components-mnist1d")
    assert n3.fixed_before and n3.fixed_when == "before results"
    assert row("W1", "inconclusive").tested and not row("W9", "n/a").tested
    # Binomial(24, 0.05): mean 1.2; P(X <= 2) = 0.884 < 0.95 <= P(X <= 3) = 0.958
    assert chance_passes(24) == (pytest.approx(1.2), 3)
    assert chance_passes(0) == (0.0, 0)
    with pytest.raises(ValueError, match="n_tested=-1"):
        chance_passes(-1)


def test_every_test_text_is_formatted_from_its_constants():
    """No threshold is typed into the text of a test or a measurement: every number after ≤, ≥ or "within" in a string
    of the lmcbook.claims package (docstrings and comments aside) comes from a constant through an f-string."""
    import ast
    import re
    from pathlib import Path

    pattern = re.compile(r"(≤|≥|within) ?[−-]?\d")
    typed = []
    for path in sorted(Path(claims.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        typed += [(path.name, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str) and id(n) not in docs and pattern.search(n.value)]
    assert not typed, typed
    assert pattern.search("ratio ≤ 0.5") and pattern.search("ρ ≤ −0.9") and not pattern.search("ratio ≤ ")


def _regime_frame(rank_of, acc_of, units=(16, 64, 256, 1024), lengths=(60, 600), decays=(1e-4, 3e-3), models=5):
    """A mechanism-like frame: per (length, wd, width, seed) merged accuracy, D and hidden-layer ranks."""
    rows = []
    for e in lengths:
        for wd in decays:
            d = wd * e
            for u in units:
                for s in range(models):
                    keys = {"seed": s, "pair": s, "hidden_units": u, "epochs": e, "weight_decay": wd}
                    rows.append({"metric": "acc_merged", "value": acc_of(d, u) + 1e-4 * s, **keys})
                    rows.append({"metric": "decay_integral", "value": d, **keys})
                    rows.append({"metric": "decay_shrinkage", "value": float(np.exp(-10 * d)), **keys})  # μ = 0.9
                    for layer in (1, 2, 3, 4):
                        v = rank_of(d, u) if layer in (2, 3) else 0.5
                        rows.append({"metric": "rel_effective_rank", "value": v, "layer": layer, "method": "trained",
                                     **keys})
    return frame("mechanism", rows)


def test_regime_rows_name_their_regime_and_d():
    tr = _regime_frame(lambda d, u: 0.8 - d / u, lambda d, u: 0.3 + 0.1 * np.log2(u) + d)
    longest = schema.at_length(tr, strongest=True)
    assert set(longest["epochs"]) == {600} and set(longest["weight_decay"]) == {3e-3}
    r = claim_w1(longest, "long", "mechanism")
    assert r.passed and r.regime == "long" and r.decay_integral == pytest.approx(3e-3 * 600)
    assert claim_w1(schema.at_length(tr, 60, strongest=True)).regime == "short"
    w7 = claim_w7(schema.at_length(tr), "long", "mechanism")
    assert w7.passed and w7.decay_integral == pytest.approx(1.8)  # the strong decay's D
    with pytest.raises(ValueError, match="regime"):
        claim_w1(longest, "medium")


def test_w6_and_w7_can_disagree_between_regimes():
    # weight decay acts only where D > 1 (the long, strong cell): only there do rank and merging respond
    acted = lambda d: d > 1  # noqa: E731
    tr = _regime_frame(lambda d, u: 0.8 - 0.01 * np.log2(u) * acted(d), lambda d, u: 0.5 + 0.01 * np.log2(u)
                       + 0.3 * acted(d))
    assert not claim_w6(schema.at_length(tr, 60, strongest=True)).passed
    assert claim_w6(schema.at_length(tr, 600, strongest=True), "long").passed
    assert not claim_w7(schema.at_length(tr, 60)).passed
    assert claim_w7(schema.at_length(tr, 600), "long").passed


def test_r1_and_r2_pass_and_fail():
    rank_falls = lambda d, u: 0.8 * np.exp(-d)  # noqa: E731
    acc_rises = lambda d, u: 0.5 + 0.2 * d  # noqa: E731
    acc_falls = lambda d, u: 0.9 - 0.2 * d  # noqa: E731
    both = _regime_frame(rank_falls, acc_rises)
    assert claim_r1(both).passed and claim_r2(both).passed
    assert claim_r1(both).values["units"] == 1024
    low_rank_but_worse = _regime_frame(rank_falls, acc_falls)
    assert claim_r1(low_rank_but_worse).passed and not claim_r2(low_rank_but_worse).passed
    assert stats.trend(claim_r2(low_rank_but_worse).values["rho"]) == "falls"
    no_low_rank = _regime_frame(lambda d, u: 0.8 + 0.01 * d, acc_rises)
    assert not claim_r1(no_low_rank).passed
    # the trend holds, but with 2 replicates in the end cells their interval cannot decide
    few = _regime_frame(rank_falls, acc_rises, models=2)
    assert claim_r1(few).state == claim_r2(few).state == INCONCLUSIVE


def test_too_few_replicates_cannot_fail_a_trend_either():
    """A missing trend fails a row only where the ends could have decided it: with fewer than MIN_PAIRS models per
    cell the row is inconclusive, as the claims page says ("decide only with at least 5")."""
    zigzag = {0.006: 0.6, 0.06: 0.8, 0.18: 0.4, 1.8: 0.7}  # D → rank: no trend, ends up by 0.1
    rank = lambda d, u: zigzag[round(d, 3)] + (0.0 if u < 1024 else 0.01)  # noqa: E731
    acc = lambda d, u: 0.5  # noqa: E731
    assert claim_r1(_regime_frame(rank, acc, models=4)).state == INCONCLUSIVE
    assert claim_r1(_regime_frame(rank, acc, models=5)).state == FAIL  # enough models: it can fail


def test_an_inconclusive_row_says_what_it_has_too_few_of():
    """The book shows an inconclusive row's shortfall beside its measurement (a referee could not tell why)."""
    rank_falls, acc_rises = (lambda d, u: 0.8 * np.exp(-d)), (lambda d, u: 0.5 + 0.2 * d)  # noqa: E731
    few = claim_r2(_regime_frame(rank_falls, acc_rises, models=2))
    assert few.state == INCONCLUSIVE and "too few" not in few.measured
    assert few.measured_shown == few.measured + "; too few to decide: 2 models (an interval needs 5)"
    models = claim_r1(_regime_frame(rank_falls, acc_rises, models=1))
    assert models.measured_shown.endswith("1 model (an interval needs 5)")
    narrow = claim_w1(frame("w", by_width("w", "acc_merged", [0.3, 0.5, 0.7])), "short")
    assert narrow.state == INCONCLUSIVE and narrow.measured_shown.endswith("3 widths (a trend needs 4)")
    enough = claim_r2(_regime_frame(rank_falls, acc_rises))
    assert enough.passed and enough.measured_shown == enough.measured  # a decided row adds nothing
    straddles = ClaimResult("X", "width", "s", "m", "t", INCONCLUSIVE, "p", values={"n": 5})
    assert straddles.measured_shown == "m"  # enough pairs: the interval itself is why, and the row shows it
    assert "too few to decide: 2 models" in claims.scoreboard_markdown([few])


def test_the_scoreboard_names_the_length_and_width_a_regime_row_reads():
    """W7's short and long cells can share a D: the regime column tells them apart by length and width."""
    tr = _regime_frame(lambda d, u: 0.8, lambda d, u: 0.5, units=(64, 1024), decays=(1e-4, 3e-2))
    short = claim_w7(schema.at_length(tr, 60), "short", "mechanism")
    assert short.values["epochs"] == 60 and short.values["units"] == 1024
    assert "| short (60 epochs, 1024 units, D = 1.8) |" in claims.scoreboard_markdown([short])
    short.dataset, short.source = "mnist_standin", "mechanism-x"  # the data set as the book names it
    assert "| 8k/2k MNIST stand-in (reference `mechanism-x`) |" in claims.scoreboard_markdown(
        [short], {"mnist_standin": "8k/2k MNIST stand-in"})


def test_r_claims_use_the_widest_width_trained_at_every_length():
    tr = _regime_frame(lambda d, u: 0.8 * np.exp(-d), lambda d, u: 0.5 + 0.2 * d)
    extra = _regime_frame(lambda d, u: 0.9, lambda d, u: 0.1, units=(4096,), lengths=(60,))
    both = pd.concat([tr, extra], ignore_index=True)
    assert claim_r1(both).values["units"] == 1024 and claim_r2(both).passed


# -- the stronger W tests (verdicts issue): each gives every verdict on synthetic frames ------------------------
def five(notebook, metric, values, jitter=0.001, **keys):
    """One row per (width, pair) for 5 pairs at UNITS: values[i] with offsets −2, −1, 0, 1, 2 × jitter (mean exact)."""
    return [{"metric": metric, "value": v + (p - 2) * jitter, "pair": p, "hidden_units": u, **keys}
            for u, v in zip(UNITS, values) for p in range(5)]


def test_w1_needs_the_trend_and_no_fall_over_the_last_step_of_width():
    rows = lambda vals, j=0.001: frame("w", five("w", "acc_merged", vals, j))  # noqa: E731
    assert claim_w1(rows([0.3, 0.5, 0.7, 0.9])).state == PASS
    r = claim_w1(rows([0.3, 0.5, 0.9, 0.85]))
    assert r.state == FAIL and r.values["step"] == pytest.approx(-0.05)
    one = frame("w", five("w", "acc_merged", [0.3]))  # one width: no trend, no step
    assert claim_w1(one).state == INCONCLUSIVE and "n = 0" in claim_w1(one).measured
    three = frame("w", five("w", "acc_merged", [0.3, 0.5, 0.7]))  # ρ = 1 over 3 widths happens by chance 1 in 6
    assert claim_w1(three).state == INCONCLUSIVE
    assert claim_w1(frame("w", five("w", "acc_merged", [0.7, 0.5, 0.3]))).state == FAIL  # a fall


def test_w1_fails_on_a_significant_fall_at_the_widest_width_even_with_a_strong_trend():
    units = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    rows = [{"metric": "acc_merged", "value": (0.3 + 0.07 * i if u < 8192 else 0.8) + 0.001 * (p - 2), "pair": p,
             "hidden_units": u} for i, u in enumerate(units) for p in range(5)]  # 0.86 at 4096 units, then 0.8
    r = claim_w1(frame("w", rows))
    assert r.values["rho"] >= RHO_MIN and r.state == FAIL
    wide = [dict(x, value=x["value"] + (0.2 * (x["pair"] - 2) if x["hidden_units"] >= 4096 else 0)) for x in rows]
    assert claim_w1(frame("w", wide)).state == PASS  # the same fall, within a wide interval


def test_w5_needs_the_trend_and_a_small_ratio_at_the_widest_width():
    def rows(vals, j=0.001):
        return frame("o", [r for layer in (2, 3, 4)
                           for r in five("o", "orth_ratio", vals, j, lam=0.5, layer=layer, method="trained")])

    assert claim_w5(rows([0.9, 0.7, 0.5, 0.1])).state == PASS
    assert claim_w5(rows([0.9, 0.7, 0.5, 0.41])).state == FAIL  # falls, but stays far from 0
    assert claim_w5(rows([0.9, 0.9, 0.9, 0.1])).state == FAIL  # no trend (ρ = −0.77)
    assert claim_w5(rows([0.9, 0.7, 0.5, 0.2], j=0.05)).state == INCONCLUSIVE  # straddles 0.2


def test_w9_needs_the_prediction_at_the_widest_width_and_not_at_the_narrowest():
    def rows(narrow, wide, j=0.001, ok=True):
        return frame("b", five("b", "logit_norm_ratio", [narrow, 0.2, 0.16, wide], j, depth=4) + setting("b", ok))

    assert claim_w9(rows(0.25, 0.125)).state == PASS  # exact at the widest, 100% off at the narrowest
    assert claim_w9(rows(0.25, 0.2)).state == FAIL  # 60% off at the widest
    assert claim_w9(rows(0.125, 0.13)).state == FAIL  # closer at the narrowest: not specific
    assert claim_w9(rows(0.25, 0.156, j=0.02)).state == INCONCLUSIVE  # straddles 25%
    assert claim_w9(rows(0.25, 0.125, ok=False)).state == NA


def test_w14_against_the_untrained_pair_and_in_absolute_terms():
    def rows(trained_wide, j=0.001):
        out = []
        for layer in (2, 3, 4):
            out += five("o", "orth_ratio", [0.9, 0.7, 0.5, trained_wide], j, lam=0.5, layer=layer, method="trained")
            out += five("o", "orth_ratio", [0.9] * 4, 0.0, lam=0.5, layer=layer, method="untrained")
        return frame("o", out)

    assert claim_w14(rows(0.1)).state == PASS
    assert claim_w14(rows(0.6)).state == FAIL
    assert claim_w14(rows(0.3)).state == FAIL  # a third of the untrained pair's, but 0.3 > 0.2
    assert claim_w14(rows(0.2, j=0.05)).state == INCONCLUSIVE


def test_w15_is_the_crossover_after_weight_matching():
    def rows(plain_gap, matched_gap, j=0.001):
        """LLFC − LEWC relative error: ``plain_gap`` unpermuted, ``matched_gap`` after weight matching."""
        out = []
        for method, g in (("trained", plain_gap), ("weight_matched", matched_gap)):
            for layer in (1, 2, 3, 4):
                out += five("l", "lewc_rel_err", [0.3] * 4, 0.0, lam=0.25, layer=layer, method=method)
                out += five("l", "llfc_rel_err", [0.3 + g] * 4, j, lam=0.25, layer=layer, method=method)
        return frame("l", out)

    assert claim_w15(rows(0.45, -0.23)).state == PASS  # the book's 0.25 v 0.71, then 0.47 v 0.23
    assert claim_w15(rows(0.45, 0.2)).state == FAIL  # LEWC still better after matching
    assert claim_w15(rows(-0.1, -0.23)).state == FAIL  # LLFC better even unpermuted
    assert claim_w15(rows(0.45, 0.0, j=0.02)).state == INCONCLUSIVE


def test_w2_w3_w4_read_intervals_over_pairs_at_the_widest_width():
    # W2: calibrated/raw at the widest, per pair
    def w2(cal_wide, j=0.001):
        return frame("b", five("b", "loss_barrier_mid", [2, 1.5, 1.2, 1.0], 0.0)
                     + five("b", "loss_barrier_cal_mid", [1.8, 0.9, 0.4, cal_wide], j))
    assert claim_w2(w2(0.1)).state == PASS
    assert claim_w2(w2(0.35)).state == FAIL  # 0.35 of the raw barrier
    assert claim_w2(w2(0.25, j=0.05)).state == INCONCLUSIVE
    # W3: below the same pair's untrained error
    def w3(trained_wide, j=0.001):
        rows = []
        for layer in (1, 2, 3, 4):
            rows += five("lewc", "lewc_rel_err", [0.9, 0.8, 0.7, trained_wide], j, lam=0.5, layer=layer,
                         method="trained")
            rows += five("lewc", "lewc_rel_err", [0.8] * 4, 0.0, lam=0.5, layer=layer, method="untrained")
        return frame("lewc", rows)
    assert claim_w3(w3(0.4)).state == PASS
    assert claim_w3(w3(0.85)).state == FAIL  # no trend, and above the untrained pair's
    assert claim_w3(w3(0.65)).state == PASS
    assert claim_w3(w3(0.6, j=0.2)).state == INCONCLUSIVE  # the interval straddles the baseline
    # W4: below the Gaussian baseline
    def w4(err_wide, j=0.001):
        rows = []
        for layer in (1, 2, 3):
            rows += five("a", "additivity_rel_err", [0.5, 0.45, 0.4, err_wide], j, lam=0.5, layer=layer,
                         method="trained")
            rows += five("a", "baseline_additivity_rel_err", [0.37] * 4, 0.0, lam=0.5, layer=layer, method="trained")
        return frame("a", rows)
    assert claim_w4(w4(0.2)).state == PASS
    assert claim_w4(w4(0.38)).state == FAIL  # falls, but not below the baseline
    assert claim_w4(w4(0.36, j=0.1)).state == INCONCLUSIVE


def test_width_rows_decide_only_with_min_pairs_in_the_cells_they_read():
    """The frames that pass with 5 pairs per width are inconclusive with 2 (the quick profile's count at the widths
    no row reads): a 2-value interval is no more than their range."""
    def build(fn, n):
        seeds = range(n)
        if fn is claim_w1:
            return frame("w", by_width("w", "acc_merged", [0.3, 0.5, 0.7, 0.9], seeds=seeds))
        if fn is claim_w2:
            return frame("b", by_width("b", "loss_barrier_mid", [2, 1.5, 1.2, 1.2], seeds=seeds)
                         + by_width("b", "loss_barrier_cal_mid", [1.8, 0.9, 0.4, 0.1], seeds=seeds))
        if fn is claim_w7:
            return _decay_arm(0.9, 0.7, pairs=n)
        return frame("b", by_width("b", "logit_norm_ratio", [0.25, 0.2, 0.16, 0.125], depth=4, seeds=seeds)
                     + setting("b"))

    for fn in (claim_w1, claim_w2, claim_w7, claim_w9):
        assert fn(build(fn, claims.thresholds.MIN_PAIRS)).state == PASS, fn.__name__
        assert fn(build(fn, 2)).state == INCONCLUSIVE, fn.__name__


def test_the_claims_page_opens_with_its_table():
    """Under its title the scoreboard page has a short paragraph, then the table; the conventions (about 900 words)
    follow the table under their own heading."""
    from pathlib import Path

    import jupytext

    cells = jupytext.read(Path(__file__).resolve().parents[1] / "notebooks" / "claims.py").cells
    table = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "scoreboard_markdown" in c.source)

    def words(some):
        return sum(len(c.source.split()) for c in some if c.cell_type == "markdown")

    assert words(cells[:table]) <= 150, words(cells[:table])
    after = [c.source for c in cells[table:] if c.cell_type == "markdown"]
    assert any(s.startswith("## How the rows are decided") for s in after) and words(cells[table:]) > 700


# -- issue 36: rows that measure what they claim ----------------------------------------------------------------------
def _decay_arm(strong_wide, weak_wide, shrink=0.01, jitter=0.001, pairs=5, strong_units=UNITS, extra=(),
               unfit=()):
    """One training length's decay arm: merged accuracy per pair at weight decay 1e-4 (idle: weight decay alone
    leaves 0.98 of a weight) and 3e-2 (leaving ``shrink``), with each run's D, shrinkage and training accuracy (1.0,
    or 0.9 at the (weight decay, width) cells of ``unfit``); ``extra``: more cells, as (weight decay, shrinkage,
    merged accuracy at every width, widths)."""
    cells = [(1e-4, 0.98, weak_wide, UNITS), (3e-2, shrink, strong_wide, strong_units), *extra]
    rows = []
    for wd, sh, acc, units in cells:
        for u in units:
            for p in range(pairs):
                keys = {"hidden_units": u, "epochs": 60, "weight_decay": wd, "pair": p}
                rows.append({"metric": "acc_merged", "value": acc + jitter * (p - (pairs - 1) / 2), **keys})
                for seed in (2 * p, 2 * p + 1):
                    rows += [{"metric": "decay_integral", "value": -np.log(sh) / 10, "seed": seed, **keys},
                             {"metric": "decay_shrinkage", "value": sh, "seed": seed, **keys},
                             {"metric": "train_acc", "value": 0.9 if (wd, u) in unfit else 1.0, "seed": seed,
                              **keys}]
    return frame("mechanism", rows)


def test_w7_reads_the_widest_width_where_weight_decay_has_acted():
    assert claim_w7(_decay_arm(0.9, 0.7)).state == PASS
    r = claim_w7(_decay_arm(0.7, 0.934))  # the book's decay arm: strong − weak = −23.4 points
    assert r.state == FAIL and r.values["estimate"] == pytest.approx(-0.234)
    assert r.decay_integral == pytest.approx(-np.log(0.01) / 10) and r.page == "mechanism"
    assert claim_w7(_decay_arm(0.9, 0.895, jitter=0.02)).state == INCONCLUSIVE
    idle = claim_w7(_decay_arm(0.9, 0.7, shrink=0.6))  # D = 0.05: weight decay has not acted
    assert idle.state == NA and "has not acted" in idle.measured
    # the strongest decay stops at 256 units; a middle one that has acted reaches 1024: W7 reads 1024 units
    mid = claim_w7(_decay_arm(0.9, 0.7, strong_units=UNITS[:3], extra=[(1e-2, 0.05, 0.6, UNITS)]))
    assert mid.values["units"] == 1024 and mid.state == FAIL and "weight decay 0.01" in mid.measured
    # the width effect's slope is shown beside the level, never tested: here merged accuracy rises with width
    # under the weak weight decay and not under the strong one, a slope the level test alone would not show
    def rising(wd, u):
        return 0.5 + 0.4 * np.log2(u / UNITS[0]) / np.log2(UNITS[-1] / UNITS[0]) if wd < 1e-3 else 0.7
    arm = _decay_arm(0.7, 0.9)
    arm.loc[arm["metric"] == "acc_merged", "value"] = [rising(w, u) for w, u in
                                                      arm.loc[arm["metric"] == "acc_merged",
                                                              ["weight_decay", "hidden_units"]].to_numpy()]
    sloped = claim_w7(arm)
    assert sloped.values["slope_weak"] == pytest.approx(0.4) and sloped.values["slope_strong"] == pytest.approx(0.0)
    assert f"from {UNITS[0]} to {UNITS[-1]} units, plain merged accuracy changes by +0.400" in sloped.measured
    assert "5 pairs at 16 units and 5 at 1024 in each cell" in sloped.measured and "left out" not in sloped.measured
    assert sloped.state == FAIL  # the verdict reads the level at the widest width only
    assert "changes by" not in claim_w7(_decay_arm(0.7, 0.934, strong_units=UNITS[-1:])).measured
    # a narrow end whose endpoints did not train (the convergence rule) is left out, and the text says why
    skip = _decay_arm(0.7, 0.9, unfit={(3e-2, UNITS[0])})
    skip.loc[skip["metric"] == "acc_merged", "value"] = arm.loc[arm["metric"] == "acc_merged", "value"].to_numpy()
    moved = claim_w7(skip)
    assert moved.values["slope_from"] == UNITS[1] and f"from {UNITS[1]} to {UNITS[-1]} units" in moved.measured
    assert (f"left out: weight decay 0.03: an endpoint at {UNITS[0]} units reached training accuracy 0.900"
            in moved.measured)
    dead = claim_w7(_decay_arm(0.7, 0.9, unfit={(3e-2, u) for u in UNITS[:-1]}))
    assert "slope_weak" not in dead.values and "no narrower width where both cells' endpoints met" in dead.measured


def _perm(gain, jitter=0.001, matched=True):
    """Five pairs at 16 and 1024 units: each pair's unpermuted merge 0.9, five random-permutation draws around 0.88,
    and (with ``matched``) the weight-matched merge ``gain`` above the pair's mean draw, spread over ±2 × jitter."""
    rows = []
    for u in (16, 1024):
        for p in range(5):
            rows.append({"metric": "acc_merged", "value": 0.9, "pair": p, "hidden_units": u, "method": "none"})
            rows += [{"metric": "acc_merged", "value": 0.88 + 0.01 * (d - 2), "pair": p, "hidden_units": u,
                      "method": "random_permutation", "index": d} for d in range(5)]
            if matched:
                rows.append({"metric": "acc_merged", "value": 0.88 + gain + jitter * (p - 2), "pair": p,
                             "hidden_units": u, "method": "weight_matching"})
    return frame("p", rows)


def test_w8_reads_pairs_and_a_null_that_can_fail():
    r = claim_w8(_perm(0.0))
    assert r.state == PASS and r.control and r.block == BOOK
    assert r.values["unpermuted"] == pytest.approx(0.02) and "over 5 pairs" in r.measured
    assert claim_w8(_perm(0.057)).state == FAIL  # the book's 5.7 points: the permutation matters
    assert claim_w8(_perm(0.01, jitter=0.005)).state == INCONCLUSIVE  # straddles 1 point
    assert claim_w8(_perm(0.0, matched=False)).state == NA


def _cosines(lewc_cos, llfc_cos, untrained=0.87, lams=(0.25, 0.75), jitter=0.001, ok=True):
    """LEWC and LLFC cosines at the last hidden layer (3 of 4) at ``lams``, and at λ=½ (where both are 0.5: a
    reading there would fail), trained and untrained."""
    rows = []
    for layer in (1, 2, 3, 4):
        for lam in (*lams, 0.5):
            for metric, trained in (("lewc_cos", lewc_cos), ("llfc_cos", llfc_cos)):
                value = 0.5 if lam == 0.5 else trained
                rows += five("lewc", metric, [0.7, 0.8, 0.9, value], jitter, lam=lam, layer=layer, method="trained")
                rows += five("lewc", metric, [untrained] * 4, 0.001, lam=lam, layer=layer, method="untrained")
    return frame("lewc", rows + setting("lewc", ok))


def test_w13_reads_the_lams_where_lewc_and_llfc_differ():
    r = claim_w13(_cosines(0.98, 0.97))
    assert r.state == PASS and "λ = 0.25, 0.75" in r.measured
    assert r.values["over_llfc"] == pytest.approx(0.01)
    assert claim_w13(_cosines(0.94, 0.93)).state == FAIL  # below 0.95
    assert claim_w13(_cosines(0.98, 0.99)).state == FAIL  # LLFC predicts better
    assert claim_w13(_cosines(0.98, 0.97, untrained=0.985)).state == FAIL  # untrained pairs do as well
    assert claim_w13(_cosines(0.95, 0.94, jitter=0.02)).state == INCONCLUSIVE  # straddles 0.95
    assert claim_w13(_cosines(0.98, 0.97, lams=(0.25,))).state == PASS  # ¼ alone: what the book records
    only_half = claim_w13(_cosines(0.98, 0.97, lams=()))
    assert only_half.state == NA and "no λ" in only_half.measured
    assert claim_w13(_cosines(0.98, 0.97, ok=False)).state == NA


def test_w2_says_it_reads_the_relative_fall_and_w6_update_is_a_diagnostic():
    raw = five("b", "loss_barrier_mid", [2, 1.5, 1.2, 1.0], 0.0)
    r = claim_w2(frame("b", raw + five("b", "loss_barrier_cal_mid", [1.8, 0.9, 0.4, 0.19], 0.001)))
    assert r.state == PASS and "relative fall" in r.statement and "W12" in r.statement  # 0.19 of the raw
    assert r.numbers == pytest.approx({"estimate": 0.19, "lo": 0.19, "hi": 0.19, "threshold": 0.25}, abs=2e-3)
    assert r.fixed_when == "after results"
    rank = frame("r", [x for layer in (1, 2, 3, 4)
                       for x in by_width("r", "delta_rel_stable_rank", [0.3, 0.2, 0.1, 0.05], seeds=range(10),
                                         replicate="seed", layer=layer)])
    upd = claim_w6_update(rank)
    assert upd.diagnostic and upd.block == DIAGNOSTIC and not upd.can_fail and upd.tested


def test_ties_in_d_are_one_value_of_d():
    got = claims.verdicts.ties([0.840, 0.841, 2.522, 2.520, 0.0084, 0.85])
    assert got.tolist() == [0.840, 0.840, 2.520, 2.520, 0.0084, 0.85]
    # six cells, two couples of equal D whose ranks are swapped by noise: without ties ρ = −0.886, no trend
    cells = {(60, 1e-4): 0.006, (600, 1e-4): 0.06, (200, 3e-3): 0.6, (60, 1e-2): 0.6006, (600, 3e-3): 1.8,
             (60, 3e-2): 1.8018}
    rank = {0.006: 0.8, 0.06: 0.7, 0.6: 0.5, 0.6006: 0.52, 1.8: 0.2, 1.8018: 0.22}
    rows = []
    for (e, wd), d in cells.items():
        for s in range(5):
            keys = {"seed": s, "hidden_units": 64, "epochs": e, "weight_decay": wd}
            rows.append({"metric": "decay_integral", "value": d, **keys})
            rows += [{"metric": "rel_effective_rank", "value": (rank[d] if layer in (2, 3) else 0.5) + 1e-4 * s,
                      "layer": layer, "method": "trained", **keys} for layer in (1, 2, 3, 4)]
    assert stats.spearman(list(rank), list(rank.values())) == pytest.approx(-0.886, abs=1e-3)
    r = claim_r1(frame("mechanism", rows))
    assert r.state == PASS and r.values["rho"] == pytest.approx(-1.0)
    assert "over 4 values of D (2 shared by cells of equal D)" in r.measured and r.fixed_when == "after results"


def _result(cid, state, **kw):
    return ClaimResult(cid, "noise" if cid.startswith("N") else "width", "s", "m", "t", state, "p", **kw)


def test_scoreboard_counts_the_papers_claims_and_the_books_own_rows_apart():
    rows = [_result("W1", "pass", regime="short"), _result("W11", "fail", regime="short"),
            _result("M1", "pass"), _result("M2", "pass"), _result("M4", "fail"), _result("W10", "inconclusive"),
            _result("W8", "pass", control=True), _result("W9", "n/a"),
            _result("W6 (update)", "pass", control=True, diagnostic=True, regime="short")]
    assert [r.block for r in rows] == [PAPER] * 3 + [BOOK] * 4 + [PAPER, DIAGNOSTIC]
    counts = claims.block_counts(rows)
    assert set(counts) == {PAPER, BOOK}  # the diagnostic is in neither count
    paper, book = counts[PAPER], counts[BOOK]
    assert (paper["rows"], paper["pass"], paper["fail"], paper["na"], paper["can_fail"]) == (4, 2, 1, 1, 3)
    assert (book["rows"], book["pass"], book["fail"], book["inconclusive"], book["can_fail"]) == (4, 2, 1, 1, 4)
    assert (paper["fixed_before"], paper["fixed_before_pass"]) == (2, 1)  # W11 ✗ and M1 ✓
    assert (book["fixed_before"], book["fixed_before_pass"]) == (0, 0)  # M2 and M4 no longer count as fixed before
    assert (paper["chance_expected"], paper["chance_upper"]) == (pytest.approx(0.15), chance_passes(3)[1])
    md = claims.scoreboard_markdown(rows)
    assert md.index("The papers' claims") < md.index("The book's own") < md.index("Diagnostics")
    assert md.count("| claim | data |") == 3 and "W8 (control)" in md
    assert _result("M2", "pass").fixed_when == "after results" and _result("M6", "pass").fixed_when == "before results"
    assert _result("W3", "pass").fixed_when == "after a pilot"
    board = claims.scoreboard_long(rows)
    back = claims.board_results(board)
    assert {(r.id, r.state, r.block) for r in back} == {(r.id, r.state, r.block) for r in rows}
    assert claims.block_counts(back) == counts  # the overview counts from claims.csv as the claims page does


def test_claims_csv_carries_each_rows_numbers():
    rows = [_result("W11", "fail", regime="short", values={"estimate": 0.056, "lo": 0.042, "hi": 0.07,
                                                           "threshold": 0.02}),
            _result("W10", "inconclusive", values={"estimate": -0.19, "threshold": 0.25}),
            _result("N4", "n/a", source="noise-components-mnist1d")]
    long = claims.scoreboard_long(rows)
    schema.validate_results(long, "claims")
    assert {"claim_estimate", "claim_lo", "claim_hi", "claim_threshold", "claim_block"} <= set(long["metric"])
    table = claims.scoreboard_table(long).set_index("claim")
    assert list(table.columns) == ["regime", "dataset", "source", "state", "block", "repeats", "estimate", "lo", "hi",
                                   "threshold"]
    assert table.loc["W11", ["estimate", "lo", "hi", "threshold"]].tolist() == pytest.approx([0.056, 0.042, 0.07, 0.02])
    assert np.isnan(table.loc["W10", "lo"]) and table.loc["W10", "threshold"] == 0.25
    assert table.loc["N4", ["estimate", "lo", "hi", "threshold"]].isna().all()
    assert table.loc["N4", "source"] == "noise-components-mnist1d" and table.loc["W11", "regime"] == "short"
    assert table.loc["W11", "state"] == "fail" and table.loc["W10", "block"] == BOOK


def test_every_changed_row_gives_its_numbers_and_is_marked_after_results():
    assert claim_w7(_decay_arm(0.9, 0.7)).numbers["threshold"] == 0.0
    r = claim_w8(_perm(0.057))
    assert r.numbers == pytest.approx({"estimate": 0.057, "lo": 0.056, "hi": 0.058, "threshold": 0.01}, abs=1e-3)
    assert claim_w13(_cosines(0.98, 0.97)).numbers["threshold"] == LEWC_COS_MIN
    for cid in ("W2", "W6 (update)", "W7", "W8", "W13", "R1", "R2", "M2", "M3", "M4", "M5"):
        assert _result(cid, "pass").fixed_when == "after results", cid
    assert not (CHANGED_AFTER_RESULTS & FIXED_BEFORE)


def test_the_closest_approach_to_the_papers_barrier():
    def cells(label, barriers, method=None, init=None):
        rows = [{"metric": "acc_barrier", "value": b + 0.001 * (p - 2), "pair": p, "hidden_units": u, "epochs": 60,
                 "weight_decay": 1e-4, **({"method": method} if method else {}),
                 **({"init_scale": init} if init else {})} for u, b in barriers.items() for p in range(5)]
        return frame(label, rows)

    width = cells("width_accuracy", {256: 0.05, 1024: 0.03})
    mech = pd.concat([cells("mechanism", {1024: 0.012}, method="none", init=1.0),
                      cells("mechanism", {1024: 0.005}, method="weight_matching", init=1.0),  # not a plain merge
                      cells("mechanism", {1024: 0.009}, method="none", init=0.25)], ignore_index=True)
    best = closest_barrier({"digits (this build)": width, "MNIST (reference)": mech})
    assert best["cells"] == 4 and best["barrier"] == pytest.approx(0.009)
    assert best["distance"] == pytest.approx(0.009 - PAPER_MLP_ACC_BARRIER)
    assert best["setting"] == ("MNIST (reference): 1024 hidden units, 60 epochs at weight decay 0.0001, initial "
                               "weights ×0.25")
    assert best["pairs"] == 5 and (best["lo"], best["hi"]) == pytest.approx((0.008, 0.010), abs=5e-4)
    one_pair = frame("mechanism", [{"metric": "acc_barrier", "value": 0.005, "pair": 0, "hidden_units": 2048,
                                    "epochs": 60, "weight_decay": 1e-4}])  # exact, but no interval: not read
    assert closest_barrier({"a": width, "b": mech, "c": one_pair})["barrier"] == pytest.approx(0.009)
    assert closest_barrier({}) is None and closest_barrier({"c": one_pair}) is None
    assert np.isnan(best["weight_left"]) and best["acted_cells"] == 0 and "acted_barrier" not in best


def test_the_closest_barrier_says_how_far_weight_decay_had_acted_and_the_smallest_barrier_where_it_had():
    """Issue 49: the closest cell to the paper's barrier may be one where weight decay has barely acted; beside it,
    the smallest barrier among the cells where it has (at most DECAY_ACTED_MAX of a weight left)."""
    def cell(wd, barrier, left):
        return [{"metric": m, "value": v, "pair": p, "hidden_units": 1024, "epochs": 60, "weight_decay": wd,
                 "init_scale": 1.0, "method": "none"}
                for p in range(5) for m, v in (("acc_barrier", barrier + 0.001 * (p - 2)), ("decay_shrinkage", left),
                                               ("decay_integral", -np.log(left)))]
    mech = frame("mechanism", cell(1e-4, 0.02, 0.92) + cell(3e-3, 0.069, 0.078) + cell(3e-2, 0.12, 0.001))
    best = closest_barrier({"stand-in": mech})
    assert best["barrier"] == pytest.approx(0.02) and best["weight_left"] == pytest.approx(0.92)
    assert best["D"] == pytest.approx(-np.log(0.92))
    assert best["acted_cells"] == 2 and best["acted_barrier"] == pytest.approx(0.069)
    assert best["acted_weight_left"] == pytest.approx(0.078) and "weight decay 0.003" in best["acted_setting"]


def test_the_landing_page_reads_w8_from_the_scoreboard():
    from lmcbook.claims import w8_numbers

    row = ClaimResult("W8", "width", "s", "m", "t", FAIL, "random_permutation", control=True,
                             values={"estimate": 0.057, "lo": 0.051, "hi": 0.062, "threshold": 0.01}, regime="short")
    state, numbers = w8_numbers(claims.scoreboard_long([row]))
    assert state == FAIL
    assert numbers == pytest.approx({"w8_gap": 5.7, "w8_lo": 5.1, "w8_hi": 6.2, "w8_tol": 1.0,
                                     "w8_drop": -5.7, "w8_drop_lo": -6.2, "w8_drop_hi": -5.1})
