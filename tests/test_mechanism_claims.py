"""M1–M6 and the hypotheses they decide, on synthetic mechanism frames built to give each of the four verdicts."""

import numpy as np
import pandas as pd
import pytest

from lmcbook import claims, schema, stats
from lmcbook.claims.mechanism import (
    CONCLUSIONS,
    CONTRADICTED,
    NONE_EXPLAINS,
    OBSERVATIONS,
    SUPPORTED,
    UNDECIDED,
    claim_m1,
    claim_m2,
    claim_m3,
    claim_m4,
    claim_m5,
    claim_m6,
    conclusion_table,
    data_hypothesis,
    deciding_rows,
    equal_d_couples,
    hypothesis_states,
    largest_d_cell,
    repeated_hypotheses,
)
from lmcbook.claims.thresholds import LLFC_MATCHED_MAX, MIN_ACC_EFFECT, ORTH_FALL_MIN, RHO_MIN
from lmcbook.claims.verdicts import BOOK, FAIL, INCONCLUSIVE, MARKS, NA, PASS, ClaimResult
from lmcbook.claims.width import claim_w7


def mechanism_claims(df: pd.DataFrame) -> list[ClaimResult]:
    """M1–M6 on a mechanism frame, read through the register as the board reads them."""
    return [e.function(df) for e in claims.PAGE_CLAIMS["mechanism"] if e.name.startswith("M")]


UNITS = (64, 256, 1024)
DECAYS = (1e-4, 3e-3, 1e-2, 3e-2)
EPOCHS = 60


def _d(epochs, wd):
    return wd * epochs * 0.225  # D ∝ wd × length, as on digits


def cells(length_arm=True, small_init=True):
    out = [(EPOCHS, wd, 1.0, UNITS) for wd in DECAYS]
    if length_arm:
        out += [(e, 3e-3, 1.0, UNITS[:2]) for e in (200, 600)]
    if small_init:
        out.append((EPOCHS, DECAYS[0], 0.25, UNITS))
    return out


def base_values(metric, e, wd, s, u, p):
    """A world where the paper's account holds: wide, strongly decayed pairs merge like their ensemble."""
    d = _d(e, wd)
    jitter = 0.002 * (p - 2)
    if metric == "acc_ensemble":
        return 0.98
    if metric == "acc_merged_none":
        return min(0.97, 0.5 + 0.1 * np.log2(u / 64) + 0.8 * d) + jitter - (0.2 if s < 1 else 0)
    if metric == "acc_merged_weight_matching":
        return 0.975 + jitter
    if metric == "orth_ratio":
        return 0.6 - 0.5 * d + jitter
    if metric == "llfc_rel_err":
        return 0.6 * np.exp(-d / 0.05) + abs(jitter)
    if metric == "train_acc":
        return 1.0
    if metric == "decay_integral":
        return d
    if metric == "decay_shrinkage":
        return float(np.exp(-d / 0.1))
    raise KeyError(metric)


def mech_frame(values=base_values, pairs=5, length_arm=True, small_init=True, dataset="digits", extra_cells=()):
    rows = []
    for e, wd, s, units in cells(length_arm, small_init) + list(extra_cells):
        for u in units:
            for p in range(pairs):
                keys = {"epochs": e, "weight_decay": wd, "init_scale": s, "hidden_units": u, "dataset": dataset}
                for method in ("none", "weight_matching"):
                    rows.append({"metric": "acc_merged", "value": values(f"acc_merged_{method}", e, wd, s, u, p),
                                 "pair": p, "method": method, **keys})
                rows.append({"metric": "acc_ensemble", "value": values("acc_ensemble", e, wd, s, u, p), "pair": p,
                             "method": "none", **keys})
                for layer in (2, 3, 4):
                    rows.append({"metric": "orth_ratio", "value": values("orth_ratio", e, wd, s, u, p), "pair": p,
                                 "lam": 0.5, "layer": layer, "method": "trained", **keys})
                    rows.append({"metric": "llfc_rel_err", "value": values("llfc_rel_err", e, wd, s, u, p),
                                 "pair": p, "lam": 0.5, "layer": layer, "method": "weight_matched", **keys})
                for seed in (2 * p, 2 * p + 1):
                    for metric in ("train_acc", "decay_integral", "decay_shrinkage"):
                        rows.append({"metric": metric, "value": values(metric, e, wd, s, u, p), "seed": seed,
                                     "pair": p, **keys})
                    for layer in (1, 2, 3, 4):
                        rows.append({"metric": "rel_effective_rank", "value": 0.8 - _d(e, wd), "seed": seed,
                                     "pair": p, "layer": layer, "method": "trained", **keys})
    df = pd.DataFrame(rows)
    df.insert(0, "notebook", "mechanism")
    return df


def world(**changes):
    """base_values with some metrics replaced by functions of (e, wd, s, u, p)."""
    def values(metric, e, wd, s, u, p):
        if metric in changes:
            return changes[metric](e, wd, s, u, p)
        return base_values(metric, e, wd, s, u, p)
    return values


STRONG = dict(e=EPOCHS, wd=DECAYS[-1])


def at_strong_wide(fn, otherwise):
    """fn at the largest-D cell's widest width, ``otherwise`` elsewhere."""
    return lambda e, wd, s, u, p: fn(p) if (e, wd, s, u) == (EPOCHS, DECAYS[-1], 1.0, UNITS[-1]) else otherwise(
        e, wd, s, u, p)


def test_the_synthetic_frame_follows_the_schema():
    schema.validate_results(mech_frame(), "mechanism")


def test_m1_gives_each_verdict():
    assert claim_m1(mech_frame()).state == PASS  # 0.97 / 0.98 > 0.95
    collapse = world(acc_merged_none=at_strong_wide(lambda p: 0.70 + 0.01 * p, base_values_none))
    r = claim_m1(mech_frame(collapse))
    assert r.state == FAIL and r.values["ratio"] == pytest.approx(0.72 / 0.98)
    noisy = world(acc_merged_none=at_strong_wide(lambda p: 0.93 + 0.02 * (p - 2), base_values_none))
    assert claim_m1(mech_frame(noisy)).state == INCONCLUSIVE  # 0.89..0.97 / 0.98 straddles 0.95
    idle = world(decay_shrinkage=lambda e, wd, s, u, p: 0.5)
    r = claim_m1(mech_frame(idle))
    assert r.state == NA and "has not acted" in r.measured
    unfit = world(train_acc=lambda e, wd, s, u, p: 0.9 if wd == DECAYS[-1] else 1.0)
    r = claim_m1(mech_frame(unfit))
    assert r.state == NA and "convergence rule" in r.measured


def base_values_none(e, wd, s, u, p):
    return base_values("acc_merged_none", e, wd, s, u, p)


def test_too_few_pairs_is_inconclusive_whatever_the_values():
    assert claim_m1(mech_frame(pairs=2)).state == INCONCLUSIVE
    assert claim_m2(mech_frame(pairs=4)).state == INCONCLUSIVE


def test_m2_reads_the_weight_matching_gain_growing_with_d_and_llfc_after_matching():
    # the paper's world: plain merging recovers at large D, so weight matching gains least there
    r = claim_m2(mech_frame())
    assert r.state == FAIL and r.values["estimate"] < 0
    def gain(e, wd, s, u, p):
        return base_values_none(e, wd, s, u, p) + 0.02 + 0.5 * _d(e, wd) + 0.002 * p

    grows = world(acc_merged_weight_matching=gain)
    r = claim_m2(mech_frame(grows))
    assert r.state == PASS and r.values["llfc_large_d"] < LLFC_MATCHED_MAX
    assert "LLFC's error after matching" in r.measured and r.numbers["threshold"] == 0.0
    no_llfc = world(acc_merged_weight_matching=gain, llfc_rel_err=lambda e, wd, s, u, p: 0.5 + 0.001 * p)
    assert claim_m2(mech_frame(no_llfc)).state == FAIL  # the gain grows, but LLFC does not hold after matching
    noisy = world(acc_merged_weight_matching=lambda e, wd, s, u, p: base_values_none(e, wd, s, u, p) + 0.02
                  + 0.01 * _d(e, wd) + 0.05 * (p - 2) * (-1) ** (wd > 1e-3))
    assert claim_m2(mech_frame(noisy)).state == INCONCLUSIVE
    assert claim_m2(mech_frame(world(decay_shrinkage=lambda *a: 0.9))).state == NA
    assert claim_m2(mech_frame(grows, pairs=4)).state == INCONCLUSIVE


def test_m3_m4_m5_read_a_flat_result_as_refuted_by_their_minimum_effect():
    flat_m3 = world(acc_merged_none=lambda e, wd, s, u, p: {64: 0.5, 256: 0.795, 1024: 0.8}[u] + 0.001 * (p - 2))
    r = claim_m3(mech_frame(flat_m3))
    assert r.state == FAIL and "refuted by its equivalence margin" in r.measured
    assert r.numbers["threshold"] == MIN_ACC_EFFECT
    flat_m4 = world(acc_merged_none=lambda e, wd, s, u, p: base_values_none(e, wd, 1.0, u, p)
                    - (0.005 if s < 1 else 0))
    r = claim_m4(mech_frame(flat_m4))  # the MNIST case: a small initialisation costs 0.2 points
    assert r.state == FAIL and "refuted" in r.measured and r.values["estimate"] == pytest.approx(0.005)
    small_fall = world(orth_ratio=lambda e, wd, s, u, p: 0.42 - 0.05 * _d(e, wd) + 0.0002 * (p - 2))
    r = claim_m5(mech_frame(small_fall))  # the digits case: falls with D, by 0.02 of 0.42
    assert r.values["rho"] == pytest.approx(-1.0) and r.state == FAIL and "refuted" in r.measured
    assert r.numbers["threshold"] == ORTH_FALL_MIN


def test_m3_gives_each_verdict():
    rising = world(acc_merged_none=lambda e, wd, s, u, p: 0.5 + 0.1 * np.log2(u / 64) + 0.002 * p)
    assert claim_m3(mech_frame(rising)).state == PASS
    falling = world(acc_merged_none=lambda e, wd, s, u, p: 0.9 - 0.1 * np.log2(u / 64) + 0.002 * p)
    assert claim_m3(mech_frame(falling)).state == FAIL
    flat_end = world(acc_merged_none=lambda e, wd, s, u, p: {64: 0.5, 256: 0.79, 1024: 0.8}[u]
                     + 0.01 * (p - 2) * (1 if u == 1024 else -1))
    assert claim_m3(mech_frame(flat_end)).state == INCONCLUSIVE  # the trend holds, the last step straddles 0
    unfit = world(train_acc=lambda e, wd, s, u, p: 0.5 if u == 256 else 1.0)
    assert claim_m3(mech_frame(unfit)).state == NA


def test_m4_gives_each_verdict():
    def small_worse(gap):
        return world(acc_merged_none=lambda e, wd, s, u, p: base_values_none(e, wd, 1.0, u, p)
                     - (gap(p) if s < 1 else 0))
    assert claim_m4(mech_frame(small_worse(lambda p: 0.2))).state == PASS
    assert claim_m4(mech_frame(small_worse(lambda p: -0.1))).state == FAIL
    assert claim_m4(mech_frame(small_worse(lambda p: 0.02 * (p - 2)))).state == INCONCLUSIVE
    r = claim_m4(mech_frame(small_init=False))
    assert r.state == NA and "small-initialisation" in r.measured
    acted = world(decay_shrinkage=lambda *a: 0.05)
    assert claim_m4(mech_frame(acted)).state == NA


def test_m5_gives_each_verdict():
    assert claim_m5(mech_frame()).state == PASS  # falls with D
    rises = world(orth_ratio=lambda e, wd, s, u, p: 0.3 + 0.5 * _d(e, wd) + 0.002 * p)
    assert claim_m5(mech_frame(rises)).state == FAIL
    noisy = world(orth_ratio=lambda e, wd, s, u, p: 0.5 - 0.01 * _d(e, wd) + 0.05 * (p - 2) * (-1) ** (wd > 1e-3))
    assert claim_m5(mech_frame(noisy)).state == INCONCLUSIVE
    assert claim_m5(mech_frame(world(decay_shrinkage=lambda *a: 0.9))).state == NA


def test_m6_gives_each_verdict():
    # the base world gives equal merged accuracy to equal D (it is a function of D and width)
    assert claim_m6(mech_frame()).state == PASS
    assert len(equal_d_couples(mech_frame())) == 2
    longer_worse = world(acc_merged_none=lambda e, wd, s, u, p: base_values_none(e, wd, s, u, p)
                         - (0.2 if e > EPOCHS else 0))
    assert claim_m6(mech_frame(longer_worse)).state == FAIL
    edge = world(acc_merged_none=lambda e, wd, s, u, p: base_values_none(e, wd, s, u, p)
                 - (0.05 + 0.01 * (p - 2) if e > EPOCHS else 0))
    assert claim_m6(mech_frame(edge)).state == INCONCLUSIVE
    r = claim_m6(mech_frame(length_arm=False))
    assert r.state == NA and "no two cells of equal D" in r.measured


def test_mechanism_page_claims_mark_their_data_set_and_skip_long_rows_without_a_length_arm():
    rows = claims.page_claims("mechanism", mech_frame(length_arm=False, dataset="mnist_standin"))
    assert [r.id for r in rows] == ["W7", "R1", "R2", "M1", "M2", "M3", "M4", "M5", "M6"]  # no long W rows
    assert rows[0].regime == "short" and rows[0].state == PASS  # W7 on the decay arm: weight decay has acted
    assert all(r.dataset == "mnist_standin" for r in rows if r.id.startswith("M"))
    assert all(r.regime is None for r in rows if r.id.startswith("M"))
    board = claims.scoreboard_long([*rows])
    schema.validate_results(board, "claims")


def test_reference_rows_get_their_own_keys_and_scoreboard_lines():
    r = ClaimResult("M1", "width", "s", "m", "t", PASS, "mechanism", source="mechanism-mnist-standin")
    assert r.key == "m1_mechanism_mnist_standin"
    long = claims.scoreboard_long([r, ClaimResult("M1", "width", "s", "m", "t", FAIL, "mechanism")])
    assert claims.state_of(long, "M1") == FAIL
    assert claims.state_of(long, "M1", source="mechanism-mnist-standin") == PASS
    assert "reference `mechanism-mnist-standin`" in claims.scoreboard_markdown([r])


def _rows(**states):
    return [ClaimResult(k.upper(), "width", "s", "m", "t", v, "mechanism") for k, v in states.items()]


def test_hypotheses_follow_the_verdicts():
    h2 = hypothesis_states(_rows(m1=FAIL, m2=PASS, m3=FAIL, m4=PASS, m5=FAIL, m6=PASS))
    assert h2 == {"P": "contradicted", "H1": "supported", "H2": "supported", "H3": "contradicted"}
    p = hypothesis_states(_rows(m1=PASS, m2=FAIL, m3=PASS, m4=FAIL, m5=PASS, m6=PASS))
    assert p == {"P": "supported", "H1": "contradicted", "H2": "contradicted", "H3": "supported"}
    open_ = hypothesis_states(_rows(m1=INCONCLUSIVE, m2=NA, m3=INCONCLUSIVE, m4=NA, m5=PASS, m6=NA))
    assert set(open_.values()) == {"undecided"}
    assert data_hypothesis(h2, p) == "supported"
    assert data_hypothesis(h2, h2) == "contradicted"
    assert data_hypothesis(h2, None) == "undecided"
    # H4 reads every MNIST source, in any order: decided only where they agree on P
    def board(dataset, source, **states):
        rows = _rows(**states)
        for r in rows:
            r.dataset, r.source = dataset, source
        return rows
    digits = board("digits", None, m1=FAIL, m2=PASS, m3=FAIL, m4=PASS, m5=FAIL, m6=PASS)
    holds = board("mnist_standin", "a", m1=PASS, m2=FAIL, m3=PASS, m4=FAIL, m5=PASS, m6=PASS)
    fails = board("mnist_standin", "b", m1=FAIL, m2=PASS, m3=FAIL, m4=PASS, m5=FAIL, m6=PASS)
    for order in (("a", "b"), ("b", "a")):
        rows = {"digits": digits, **{k: {"a": holds, "b": fails}[k] for k in order}}
        assert {s["H4"] for s in claims.mechanism.decide(rows).values()} == {"undecided"}, order
    assert claims.mechanism.decide({"digits": digits, "a": holds})["digits"]["H4"] == "supported"
    assert claims.mechanism.decide({"digits": digits, "b": fails, "c": fails})["digits"]["H4"] == "contradicted"


def test_the_conclusion_names_the_outcome_and_the_data_sets_its_sentence_glues():
    h2 = hypothesis_states(_rows(m1=FAIL, m2=PASS, m3=FAIL, m4=PASS, m5=FAIL, m6=PASS))
    p = hypothesis_states(_rows(m1=PASS, m2=FAIL, m3=PASS, m4=FAIL, m5=PASS, m6=PASS))
    open_ = hypothesis_states(_rows(m1=INCONCLUSIVE, m2=NA, m3=NA, m4=NA, m5=NA, m6=NA))
    outcome, lists = claims.mechanism.conclusion({"digits": h2, "MNIST": h2})
    assert outcome == "contradicted"
    assert lists == {"against_sets": "digits and MNIST", "for_sets": "none", "open_sets": "none",
                     "alternatives": "H1 and H2 on digits and MNIST"}
    assert claims.mechanism.conclusion({"digits": p})[0] == "supported"
    outcome, lists = claims.mechanism.conclusion({"digits": h2, "MNIST": p})
    assert (outcome, lists["for_sets"], lists["against_sets"]) == ("mixed", "MNIST", "digits")
    assert claims.mechanism.conclusion({"digits": open_}) == ("undecided", {"against_sets": "none", "for_sets": "none",
                                                                 "open_sets": "digits", "alternatives": "none"})
    assert claims.mechanism.conclusion({"digits": h2, "MNIST": open_})[1]["open_sets"] == "MNIST"
    # data sets that support different alternatives get their own clauses
    only_h2 = hypothesis_states(_rows(m1=FAIL, m2=PASS, m3=INCONCLUSIVE, m4=INCONCLUSIVE, m5=NA, m6=NA))
    alternatives = claims.mechanism.conclusion({"digits": h2, "MNIST": only_h2})[1]["alternatives"]
    assert alternatives == "H1 and H2 on digits; H2 on MNIST"
    nothing = hypothesis_states(_rows(m1=FAIL, m2=FAIL, m3=FAIL, m4=FAIL, m5=FAIL, m6=PASS))
    assert claims.mechanism.conclusion({"digits": nothing})[1]["alternatives"] == "none of H1-H3 on digits"
    open_h1 = {**nothing, "H1": SUPPORTED, "H2": UNDECIDED, "H3": UNDECIDED}
    repeated = {"ref": {"H1": "the same runs as digits"}}
    assert claims.mechanism.conclusion({"ref": open_h1}, repeated)[1]["alternatives"] == (
        "none of H1-H3 decided by its own runs on ref")  # H1 repeats, H2 and H3 undecided: nothing refuted
    mixed = {**open_h1, "H1": CONTRADICTED}
    assert claims.mechanism.conclusion({"ref": mixed})[1]["alternatives"] == "none of H1-H3 on ref"
    unread = hypothesis_states(_rows(m1=FAIL, m2=INCONCLUSIVE, m3=INCONCLUSIVE, m4=INCONCLUSIVE, m5=PASS,
                                             m6=PASS))  # P contradicted, no alternative decided: not refuted
    assert claims.mechanism.conclusion({"digits": nothing, "MNIST": unread})[1]["alternatives"] == (
        "none of H1-H3 on digits; H1-H3 all undecided on MNIST")
    table = conclusion_table({"MNIST": _rows(m1=FAIL, m2=INCONCLUSIVE, m3=INCONCLUSIVE, m4=INCONCLUSIVE,
                                                    m5=PASS, m6=PASS)}, {"MNIST": mech_frame()})
    assert table.loc[NONE_EXPLAINS, "MNIST"] == (
        "nothing refuted (undecided: the merge at large D and the width trend at large D)")  # short: not near it
    assert set(CONCLUSIONS) == {"contradicted", "supported", "mixed", "undecided"}


# -- the statistics behind them ---------------------------------------------------------
def test_interval_brackets_the_mean_and_narrows_with_more_replicates():
    rng = np.random.default_rng(1)
    small, big = rng.normal(0.5, 0.1, 5), rng.normal(0.5, 0.1, 200)
    a, b = stats.interval(small), stats.interval(big)
    assert a.lo < a.mean < a.hi and b.lo < 0.5 < b.hi
    assert (b.hi - b.lo) < (a.hi - a.lo)
    assert stats.interval(small) == a  # a fixed generator: the same data give the same interval
    one = stats.interval([0.3])
    assert one.mean == 0.3 and not one.decided and stats.above(one, 0.0) == INCONCLUSIVE
    const = stats.interval([0.2] * 5)
    assert (const.lo, const.hi) == (0.2, 0.2)


def test_interval_of_a_difference_and_the_verdict_helpers():
    iv = stats.interval_diff([1.0, 1.1, 0.9, 1.05, 0.95], [0.0, 0.1, -0.1, 0.05, -0.05])
    assert iv.mean == pytest.approx(1.0) and iv.lo > 0.8 and iv.hi < 1.2
    assert stats.above(iv, 0.5) == PASS and stats.above(iv, 1.5) == FAIL and stats.above(iv, 1.0) == INCONCLUSIVE
    assert stats.at_least(stats.Interval(1.0, 0.95, 1.05, 5), 0.95) == PASS
    assert stats.within(stats.Interval(0.0, -0.01, 0.02, 5), 0.05) == PASS
    assert stats.within(stats.Interval(0.2, 0.1, 0.3, 5), 0.05) == FAIL
    assert stats.within(stats.Interval(0.04, 0.0, 0.08, 5), 0.05) == INCONCLUSIVE
    assert stats.trend_and_ends(0.95, +1, PASS, 0.9) == PASS
    assert stats.trend_and_ends(0.95, +1, INCONCLUSIVE, 0.9) == INCONCLUSIVE
    assert stats.trend_and_ends(0.2, +1, PASS, 0.9) == INCONCLUSIVE
    assert stats.trend_and_ends(0.2, +1, INCONCLUSIVE, 0.9) == FAIL
    assert stats.trend_and_ends(-0.95, -1, FAIL, 0.9) == FAIL
    with pytest.raises(ValueError, match="finite"):
        stats.interval([0.1, float("nan")])


def test_mechanism_numbers_name_the_cell_m1_reads_and_how_far_the_length_arm_reaches():
    from lmcbook.claims.mechanism import mechanism_numbers

    got = mechanism_numbers(mech_frame())
    assert (got["units"], got["epochs_hi"], got["wd_hi"]) == (UNITS[-1], EPOCHS, DECAYS[-1])
    assert got["length_widest"] == UNITS[1]  # the length arm stops at the second width
    assert mechanism_numbers(mech_frame(length_arm=False))["length_widest"] == 0


def test_m1_reads_the_papers_route_where_two_cells_tie_at_the_largest_d():
    """Equal D reached by training longer and by a stronger weight decay (a tie, D_TIE_RTOL): M1 and M3 read the
    longer training, the paper's route; a clearly larger D by weight decay is still read first."""
    def long_d(d_long):
        def values(metric, e, wd, s, u, p):
            if metric == "decay_integral" and (e, wd) == (600, 3e-3):
                return d_long
            return base_values(metric, e, wd, s, u, p)
        return mech_frame(values, length_arm=False, extra_cells=[(e, 3e-3, 1.0, UNITS) for e in (200, 600)])

    tied = long_d(0.404)  # 0.2% below the decay arm's 0.405: a tie, though the smaller D
    assert "600 epochs at weight decay 0.003" in claim_m1(tied).measured
    assert "D = 0.404" in claim_m3(tied).measured and "D = 0.404" in largest_d_cell(tied)
    apart = long_d(0.35)
    assert "60 epochs at weight decay 0.03" in claim_m1(apart).measured
    idle = largest_d_cell(mech_frame(world(decay_shrinkage=lambda *a: 0.5)))
    assert idle.startswith("none (weight decay has not acted")


def test_the_conclusion_table_says_which_account_explains_what_and_what_none_does():
    def merged(cost):  # wide networks merge near the ensemble; a small initialisation costs ``cost``
        return world(acc_merged_none=lambda e, wd, s, u, p: min(0.97, base_values_none(e, wd, 1.0, u, p)
                                                                + (0.1 if u == 1024 else 0)) - (cost if s < 1 else 0))

    digits = mech_frame(merged(0.5))  # M4 ✓: a small initialisation destroys the merge
    mnist = mech_frame(merged(0.005), dataset="mnist_standin")  # M4 ✗: it leaves the merge intact
    rows = {"digits": mechanism_claims(digits), "MNIST": mechanism_claims(mnist)}
    table = conclusion_table(rows, {"digits": digits, "MNIST": mnist})
    assert list(table.columns) == ["digits", "MNIST"] and table.index[-1] == NONE_EXPLAINS
    short = table.index[0]
    assert "H1, near initialisation" in table.loc[short, "digits"] and "(M4 ✓)" in table.loc[short, "digits"]
    assert table.loc[short, "MNIST"].startswith("0.990 [") and "none: " in table.loc[short, "MNIST"]
    assert "H1 is refuted (M4 ✗)" in table.loc[short, "MNIST"]
    assert table.loc[NONE_EXPLAINS, "MNIST"] == "the merge after short training"
    assert table.loc[NONE_EXPLAINS, "digits"] == "nothing"
    assert "the paper's account (M1 ✓)" in table.loc[table.index[1], "digits"]
    states = {"M1": FAIL, "M2": FAIL, "M3": FAIL, "M4": NA, "M5": INCONCLUSIVE}
    flat = [ClaimResult(k, "width", "s", "m", "t", v, "mechanism") for k, v in states.items()]
    col = conclusion_table({"x": flat}, {"x": digits})["x"]
    assert "none: H2 is refuted (M2 ✗)" in col.iloc[1] and "H3 is refuted (M3 ✗)" in col.iloc[2]
    assert "undecided (M5 *inconclusive*)" in col.iloc[3] and "undecided (M4 *n/a*)" in col.iloc[0]
    assert col.iloc[-1] == "the merge at large D; undecided: the merge after short training and the orthogonality ratio"


def test_width_accuracy_reads_the_small_initialisation_arm_only_where_it_trained():
    """The narrow end of the small-initialisation arm is the narrowest width whose endpoints meet the convergence
    rule (a referee found the page quoting networks at 0.19 training accuracy)."""
    from lmcbook import experiments

    untrained_narrow = world(train_acc=lambda e, wd, s, u, p: 0.3 if s < 1 and u < UNITS[-1] else 1.0)
    mech = mech_frame(untrained_narrow)
    m4 = claim_m4(mech)
    end, facts = experiments.small_init_facts(mech, m4)
    assert end == "untrained" and facts["small_n_narrow"] == facts["small_n_wide"] == UNITS[-1]
    assert str(facts["small_untrained_widths"].data) == "64 and 256"
    assert facts["small_closest_min"] == 0.3 and facts["small_n_closest"] in UNITS[:2]
    middle = world(train_acc=lambda e, wd, s, u, p: (0.3 if u == UNITS[0] else 0.9 + 0.01 * p) if s < 1 else 1.0)
    end, facts = experiments.small_init_facts(mech_frame(middle), m4)
    assert end == "untrained" and facts["small_n_closest"] == UNITS[1] and facts["small_closest_min"] == 0.9
    middle = world(train_acc=lambda e, wd, s, u, p: 0.3 if s < 1 and u == UNITS[0] else 1.0)
    end, facts = experiments.small_init_facts(mech_frame(middle), m4)
    assert end == "trained" and facts["small_n_narrow"] == UNITS[1]
    assert facts["small_narrow"] == pytest.approx(base_values_none(EPOCHS, DECAYS[0], 0.25, UNITS[1], 2))
    assert experiments.small_init_facts(mech_frame(), m4)[0] == "all"
    gap = world(train_acc=lambda e, wd, s, u, p: 0.3 if s < 1 and u == UNITS[1] else 1.0)  # a middle width failed
    end, facts = experiments.small_init_facts(mech_frame(gap), m4)
    assert end == "trained" and facts["small_n_narrow"] == UNITS[0]
    assert str(facts["small_untrained_widths"].data) == str(UNITS[1])
    one = mech_frame()
    one = one[(one["init_scale"] == 1.0) | (one["hidden_units"] == UNITS[-1])]
    assert experiments.small_init_facts(one, m4)[0] == "single"


def test_width_accuracy_names_m4_on_another_data_set():
    from lmcbook import experiments

    here = mech_frame()
    # a small initialisation changes nothing there
    flat = world(acc_merged_none=lambda e, wd, s, u, p: base_values_none(e, wd, 1.0, u, p))
    there = mech_frame(flat, dataset="mnist_standin")
    said, words = experiments.m4_elsewhere({"ref": (there, {})}, "digits")
    assert said == "refuted" and words["m4_other_mark"] == MARKS[FAIL]
    assert "mnist" in words["m4_other_data"].lower()
    assert experiments.m4_elsewhere({"ref": (here, {})}, "digits") == ("none", {})  # the same data set
    said, _ = experiments.m4_elsewhere({"ref": (mech_frame(dataset="mnist_standin"), {})}, "digits")
    assert said == "agrees"
    assert words["m4_other_rest"] == "No other committed reference of that data set reads M4."
    few = mech_frame(flat, pairs=2, dataset="mnist_standin")  # another reference there, too few pairs to decide
    said, words = experiments.m4_elsewhere({"ref": (there, {}), "ref-2": (few, {})}, "digits")
    assert said == "refuted" and words["m4_other_rest"].startswith("On the same data set `ref-2` reads it *")


def test_the_overview_gives_how_well_wide_networks_merge_before_decay_acts():
    from lmcbook.claims.mechanism import short_merge_words

    acted = mech_frame(world(decay_shrinkage=lambda *a: 0.05))  # weight decay has acted even at the smallest D
    words = short_merge_words({"digits (this build)": mech_frame(), "acted": acted})
    ratio = base_values_none(EPOCHS, DECAYS[0], 1.0, UNITS[-1], 2) / 0.98
    assert words.startswith(f"digits (this build), {ratio:.3f} [") and words.endswith("(5 pairs)")
    assert short_merge_words({}) == "none"
    same = short_merge_words({"this build": mech_frame(), "a reference": mech_frame()})  # the same runs: said once
    assert same.startswith("this build = a reference (the same runs), ") and same.count("pairs") == 1
    again = short_merge_words({"this build": mech_frame(), "a reference": mech_frame(pairs=6)}, {"a reference"})
    assert "a reference (a repeat: an earlier one's cells and seeds, trained again), " in again
    assert "this build (a repeat" not in again


def test_a_reference_row_that_reads_this_builds_runs_again_is_marked_and_never_counted():
    """A long reference reuses the quick book's 60-epoch cells (the same specs): its rows that read only those have
    this build's interval to the last digit.  They are shown as the same runs, and counted once (a referee found the
    long digits reference's M4 and H1 listed as a second data set's evidence)."""
    def longer(metric, e, wd, s, u, p):  # the reference's long cells: the same D as the decay arm's, other runs
        return base_values(metric, e, wd, s, u, p) + (0.01 * u / 1024 if e == 600 and metric.startswith("acc_merged")
                                                       else 0)

    digits = mech_frame()
    ref = mech_frame(longer, length_arm=False, extra_cells=[(e, 3e-3, 1.0, UNITS) for e in (200, 600)])
    own = mechanism_claims(digits)
    again = mechanism_claims(ref)
    for r in again:
        r.source = "mechanism-long-digits"
    other = mechanism_claims(mech_frame(dataset="mnist_standin"))  # equal numbers, another data set
    for r in other:
        r.source = "mechanism-mnist-standin"
    rows = claims.mark_repeats(own + again + other, {"digits": "digits", "mnist_standin": "MNIST"})
    by = {(r.source, r.id): r for r in rows}
    assert by[(None, "M4")].repeats is None and by[("mechanism-mnist-standin", "M4")].repeats is None
    m4 = by[("mechanism-long-digits", "M4")]
    assert m4.repeats == "digits (this build)" and m4.measured_shown.startswith("the same runs as digits (this build)")
    assert by[("mechanism-long-digits", "M1")].repeats is None  # its largest D is the 600-epoch cell: its own runs
    shifted = ClaimResult("M4", "width", "s", "m", "t", PASS, "mechanism", dataset="digits", source="x",
                                 values={**by[(None, "M4")].values, "lo": by[(None, "M4")].values["lo"] + 1e-6})
    assert claims.mark_repeats([by[(None, "M4")], shifted])[1].repeats is None  # another interval: other runs
    # counted once, and the flag survives claims.csv
    counts = claims.block_counts(rows)
    assert counts[BOOK]["repeats"] == sum(bool(r.repeats) for r in rows if r.block == BOOK) >= 1
    assert counts[BOOK]["rows"] == sum(r.block == BOOK and not r.repeats for r in rows)
    back = claims.board_results(claims.scoreboard_long(rows))
    assert claims.block_counts(back) == counts
    assert claims.scoreboard_table(claims.scoreboard_long(rows))["repeats"].sum() == sum(bool(r.repeats) for r in rows)
    # the hypotheses: H1 on the reference is the same runs, so it is not a third data set's support
    labels = {"digits (this build)": own, "digits (reference mechanism-long-digits)": again}
    rep = repeated_hypotheses(labels)
    assert rep == {"digits (reference mechanism-long-digits)": {"H1": "the same runs as digits (this build)"}}
    states = {k: hypothesis_states(v) for k, v in labels.items()}
    flip = {k: {**s, "P": CONTRADICTED, "H1": SUPPORTED} for k, s in states.items()}
    _, lists = claims.mechanism.conclusion(flip, rep)
    assert lists["alternatives"] == ("H1 on digits (this build); none of H1-H3 on digits (reference "
                                     "mechanism-long-digits)")
    assert claims.mechanism.conclusion(flip)[1]["alternatives"] == ("H1 on digits (this build) and digits (reference "
                                                          "mechanism-long-digits)")  # unmarked: H1 counted twice
    from lmcbook.claims.mechanism import hypotheses_markdown
    assert "(the same runs as digits (this build))" in hypotheses_markdown(states, rep)
    table = conclusion_table(labels, {"digits (this build)": digits,
                                             "digits (reference mechanism-long-digits)": ref})
    cell = table.iloc[0]["digits (reference mechanism-long-digits)"]
    assert cell.startswith("the same runs as digits (this build): ")
    assert not table.iloc[1]["digits (reference mechanism-long-digits)"].startswith("the same runs")


def test_a_trend_that_passes_at_its_threshold_says_so():
    def row(rho, n, state=PASS):
        return ClaimResult("W1", "width", "s", "m", "t", state, "p", values={"rho": rho, "n_widths": n})

    edge = row(0.8999999999999999, 5)
    assert "passes at its threshold (ρ = 0.90)" in edge.measured_shown
    assert "one adjacent pair out of order" in edge.measured_shown
    assert "adjacent" not in row(0.9, 7).measured_shown and "threshold" in row(-0.9, 7).measured_shown
    assert row(0.95, 5).at_threshold() == "" and row(0.9, 5, FAIL).at_threshold() == ""
    assert stats.spearman([1, 2, 3, 4, 5], [1, 2, 4, 3, 5]) == pytest.approx(RHO_MIN)


def test_a_hypothesis_repeats_where_the_rows_that_decide_it_repeat():
    """P contradicted rests on M1 alone, so a reference whose M1 repeats an earlier label's has no P of its own,
    whatever its M5; H2 contradicted by a passing M1 likewise (a referee found the first rule asking every row)."""
    def rows(repeat: set, **states):
        return [ClaimResult(k.upper(), "width", "s", "m", "t", v, "mechanism",
                                   repeats="digits (this build)" if k.upper() in repeat else None)
                for k, v in states.items()]

    own = rows(set(), m1=FAIL, m2=PASS, m3=PASS, m4=PASS, m5=FAIL)
    ref = rows({"M1"}, m1=FAIL, m2=PASS, m3=INCONCLUSIVE, m4=PASS, m5=FAIL)
    rep = repeated_hypotheses({"a": own, "b": ref})
    assert rep == {"b": {"P": "the same runs as digits (this build)"}}  # H2 also reads M2, the reference's own
    states = {"a": hypothesis_states(own), "b": hypothesis_states(ref)}
    assert claims.mechanism.conclusion(states, rep)[1]["against_sets"] == "a"
    assert claims.mechanism.conclusion(states)[1]["against_sets"] == "a and b"
    passing = rows({"M1"}, m1=PASS, m2=PASS, m5=FAIL)
    same = "the same runs as digits (this build)"
    assert repeated_hypotheses({"c": passing}) == {"c": {"H2": same}}  # P reads M5 too
    m2_only = rows({"M2"}, m1=INCONCLUSIVE, m2=FAIL)
    assert repeated_hypotheses({"d": m2_only}) == {"d": {"H2": "the same runs as digits (this build)"}}
    both_fail = rows({"M2"}, m1=FAIL, m2=FAIL)  # H2 contradicted by M2 alone: M1's own failure does not
    assert repeated_hypotheses({"e": both_fail})["e"] == {"H2": "the same runs as digits (this build)"}
    either = rows({"M1"}, m1=PASS, m2=FAIL)  # either contradicts H2, and M2 is its own: H2 is its own evidence
    assert "H2" not in repeated_hypotheses({"f": either}).get("f", {})
    assert [r.id for r in deciding_rows("P", {r.id: r for r in passing})] == ["M1", "M5"]
    table = conclusion_table({"b": ref}, {"b": mech_frame()})
    assert table.loc[OBSERVATIONS["large_d"][0], "b"].startswith("falls short")  # M2 is the reference's own
    md = claims.scoreboard_markdown(ref)
    assert md.count("(a repeat, not counted)") == 1 and "the same runs as digits (this build), read again" in md


def test_the_rows_shortest_only_names_read_only_the_shortest_length():
    """SHORTEST_ONLY is a declaration, checked here: W7 (short) and M4 recomputed on the shortest length alone give
    the same numbers, while a row that reads the longest length (M1) changes when the longer cells go."""
    full = mech_frame(extra_cells=[(600, 1e-2, 1.0, UNITS)])  # a long cell at every width: the largest D
    alone = full[full["epochs"] == full["epochs"].min()]
    rows, short = ({(r.id, r.regime): r for r in _scored(f)} for f in (full, alone))
    assert claims.SHORTEST_ONLY <= set(rows) and claims.SHORTEST_ONLY <= set(short)
    for key in claims.SHORTEST_ONLY:
        assert rows[key].state == short[key].state and rows[key].values == short[key].values, key
    assert rows[("M1", None)].decay_integral > short[("M1", None)].decay_integral  # it reads the long cell


def test_a_shortest_length_row_trained_again_is_a_repeat_in_the_same_cells_seeds_and_precision_only():
    """The same specs trained again in another batched stack or at another thread count give the same cells and
    seeds with slightly other numbers (lmcbook.train): a long reference's W7 (short) and M4 then repeat
    this build's and are not counted.  More seeds at that width, or another precision, are runs of its own."""
    def again(metric, e, wd, s, u, p):  # one test image's worth of float noise on some pairs
        return base_values(metric, e, wd, s, u, p) + (1 / 360 if metric == "acc_merged_none" and p == 1 else 0)

    own_frame = mech_frame()
    long_cells = [(600, 1e-2, 1.0, UNITS)]  # the largest D: M1's cell
    ref_frame = mech_frame(again, extra_cells=long_cells)
    short = {"digits": "digits"}

    def board(ref=ref_frame, **precisions):
        precisions = {None: "fp32", "ref-long": "fp32", **precisions}
        own, ref_rows = _scored(own_frame), _scored(ref)
        for r in ref_rows:
            r.source = "ref-long"
        return {(r.source, r.id): r for r in claims.mark_repeats(
            own + ref_rows, short, frames={None: own_frame, "ref-long": ref}, precisions=precisions)}

    by = board()
    for cid in ("M4", "W7"):
        row = by[("ref-long", cid)]
        assert row.repeats == "digits (this build)" and row.retrained, cid
        assert row.measured_shown.startswith(
            "the same cells and seeds as digits (this build) at 1024 units, trained again: ")
        assert by[(None, cid)].repeats is None
    assert by[("ref-long", "M4")].values != by[(None, "M4")].values  # not the exact rule: the numbers differ
    assert by[("ref-long", "M1")].repeats is None  # M1 reads the 600-epoch cell: the reference's own runs
    assert claims.mark_repeats([by[(None, "M4")], _fresh(by[("ref-long", "M4")])], short)[1].repeats is None
    assert board(**{"ref-long": "bf16"})[("ref-long", "M4")].repeats is None  # another precision: its own runs
    assert board(**{"ref-long": None})[("ref-long", "M4")].repeats is None  # a precision not given: never assumed
    later = ref_frame.assign(epochs=ref_frame["epochs"] + 1)  # another shortest length: other cells
    assert board(later)[("ref-long", "M4")].repeats is None
    moved = _fresh(by[("ref-long", "M4")])
    moved.decay_integral *= 1.5  # another cell's D
    assert claims.mark_repeats([by[(None, "M4")], moved], short,
                               frames={None: own_frame, "ref-long": ref_frame})[1].repeats is None
    more = mech_frame(again, pairs=6, extra_cells=long_cells)  # a sixth seed at every width: its own evidence
    assert board(more)[("ref-long", "M4")].repeats is None and board(more)[("ref-long", "W7")].repeats is None
    # not counted, and the hypotheses and the conclusion table say what they repeat
    rows = list(by.values())
    assert {r.id for r in rows if r.retrained} == {"M4", "W7"}  # (M6 here repeats by the exact rule)
    book = [r for r in rows if r.block == BOOK]
    assert claims.block_counts(rows)[BOOK]["repeats"] == sum(bool(r.repeats) for r in book) >= 1
    labels = {"digits (this build)": [r for r in rows if r.source is None and r.id.startswith("M")],
              "digits (ref-long)": [r for r in rows if r.source == "ref-long" and r.id.startswith("M")]}
    rep = repeated_hypotheses(labels)
    assert rep == {"digits (ref-long)": {"H1": "the same cells and seeds as digits (this build) at 1024 units, trained "
                                                  "again"}}
    from lmcbook.claims.mechanism import hypotheses_markdown
    states = {k: hypothesis_states(v) for k, v in labels.items()}
    assert ("(the same cells and seeds as digits (this build) at 1024 units, trained again)"
            in hypotheses_markdown(states, rep))
    table = conclusion_table(labels, {"digits (this build)": own_frame, "digits (ref-long)": ref_frame})
    assert table.iloc[0]["digits (ref-long)"].startswith("the same cells and seeds as digits (this build) at 1024 "
                                                         "units, trained again: ")


def _fresh(row):
    """``row`` unmarked, as a row from another process would come."""
    from dataclasses import replace
    return replace(row, repeats=None, retrained=False)


def _scored(frame):
    """The mechanism page's M rows and W7 (short) as the scoreboard scores them (:func:`lmcbook.claims.page_claims`,
    less the rank rows this synthetic frame has no metric for), marked by data set."""
    rows = mechanism_claims(frame) + [claim_w7(schema.at_length(frame, frame["epochs"].min()), "short")]
    for r in rows:
        r.dataset = "digits"
    return rows
