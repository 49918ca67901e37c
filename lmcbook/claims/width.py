"""The width family: the width paper's claims W1–W15 (and the book's depth law, W10), each a function of the frame
its page saved.  W1, W6 and W7 also read the mechanism page's longest length, the *long* regime
(:func:`lmcbook.claims.page_claims`); the rows that read D across cells, R1–R2, are :mod:`lmcbook.claims.mechanism`'s.

Each row decides from 95% bootstrap intervals over pairs (:mod:`lmcbook.stats`), mostly at the widest width, where
the paper's claims are about, by the thresholds of :mod:`lmcbook.claims.thresholds`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import (
    ACC_BARRIER,
    ACC_MERGED,
    ADDITIVITY_REL_ERR,
    BASELINE_ADDITIVITY_REL_ERR,
    DELTA_REL_STABLE_RANK,
    LEWC_COS,
    LEWC_REL_ERR,
    LEWC_SETTING,
    LLFC_COS,
    LLFC_REL_ERR,
    LOGIT_NORM_RATIO,
    LOSS_BARRIER_CAL_MID,
    LOSS_BARRIER_MID,
    ORTH_RATIO,
    REL_EFFECTIVE_RANK,
    SCALE_RATIO,
    at_length,
    cell_table,
    hidden_to_hidden,
    last_hidden,
    pair_values,
    replicate,
    select,
)
from ..stats import (
    CONFIDENCE,
    Interval,
    above,
    at_least,
    at_most,
    both,
    cell_stats,
    interval,
    interval_diff,
    spearman,
    within,
)
from .thresholds import (
    ACC_BARRIER_MAX,
    CAL_BARRIER_MAX,
    CAL_OVER_RAW_MAX,
    DECAY_ACTED_MAX,
    LEWC_COS_MIN,
    LEWC_LLFC_LAMS,
    LOGIT_SCALE_TOL,
    MIN_PAIRS,
    ORTH_OVER_UNTRAINED_MAX,
    ORTH_RATIO_MAX,
    PAPER_MLP_ACC_BARRIER,
    PERM_EQUIV_TOL,
    RHO_MIN,
)
from .verdicts import (
    FAIL,
    INCONCLUSIVE,
    MATCHED,
    NA,
    PASS,
    PLAIN,
    ClaimResult,
    _also,
    _cell_name,
    _ends_state,
    _in_regime,
    _trend_verdict,
    _values,
    claim,
    mechanism_standard,
    trend_state,
    unfit,
)


def lewc_setting_missing(df: pd.DataFrame) -> str | None:
    """Return why LEWC's λ^l predictions do not apply to a page's runs (biases, normalisation, not an MLP, or not
    recorded), or None when they do."""
    d = select(df, LEWC_SETTING)
    if d.empty:
        return "the page's CSV does not record whether its networks are bias-free MLPs without normalisation"
    if (d["value"] < 1).any():
        return "the networks have biases or normalisation (or are not MLPs), which break LEWC's λ^l scale"
    return None


def _na_unless_lewc(r: ClaimResult, df: pd.DataFrame) -> ClaimResult:
    why = lewc_setting_missing(df)
    if why is not None:
        r.state, r.measured = NA, f"{r.measured} (n/a: {why})"
    return r


def _by_width(df: pd.DataFrame, metric: str, **filters) -> pd.DataFrame:
    return cell_stats(df, metric, by="hidden_units", **filters)


def _rho_row(df: pd.DataFrame, metric: str, **filters) -> tuple[float, pd.DataFrame]:
    st = _by_width(df, metric, **filters)
    return spearman(st.index, st["mean"]), st


def _trend_claim(cid: str, statement: str, df: pd.DataFrame, metric: str, sign: int, what: str, page: str,
                 **filters) -> ClaimResult:
    """A claim that ``metric`` rises (sign +1) or falls (−1) with width: ρ ≥ 0.9 or ≤ −0.9."""
    rho, st = _rho_row(df, metric, **filters)
    test = f"ρ(width, {what}) {'≥' if sign > 0 else '≤'} {sign * RHO_MIN:g}"
    return ClaimResult(cid, "width", statement, f"ρ = {rho:.2f}; {what} {st['mean'].iloc[0]:.3f} at "
                       f"{st.index[0]} → {st['mean'].iloc[-1]:.3f} at {st.index[-1]} hidden units", test,
                       trend_state(rho, sign, len(st)), page,
                       values={"rho": rho, "rho_needed": sign * RHO_MIN, "n_widths": len(st)})


def _widest_threshold(cid: str, statement: str, df: pd.DataFrame, metric: str, tol: float, what: str, unit: str,
                      page: str, scale: float = 1.0, **filters) -> ClaimResult:
    """A claim that ``metric`` at the widest width is ≤ tol, decided by its 95% bootstrap interval over pairs
    (:func:`lmcbook.stats.at_most`; an interval straddling tol: inconclusive)."""
    per = _per_pair(df, metric, **filters)
    wide = per.index.get_level_values(0).max()
    iv = interval(per.loc[wide])
    unit = f" {unit}" if unit else ""
    return ClaimResult(cid, "width", statement,
                       f"{iv.text('.3g', scale)}{unit} at {wide} hidden units ({iv.n} pairs)",
                       f"{what} at the widest width ≤ {scale * tol:g}{unit} (95% bootstrap interval over pairs)",
                       at_most(iv, tol, MIN_PAIRS), page, values=_values(iv, tol, mean=iv.mean, n=iv.n))


def _widest_two(df: pd.DataFrame, metric: str, **filters) -> tuple[float, float, Interval]:
    """Return the two widest widths with ``metric`` and the interval of (widest − next narrower) over pairs (with one
    width: that width twice and an empty interval)."""
    per = _per_pair(df, metric, **filters)
    units = sorted(per.index.get_level_values(0).unique())
    if len(units) < 2:
        return units[-1], units[-1], interval([])
    return units[-2], units[-1], interval_diff(per.loc[units[-1]], per.loc[units[-2]])


@claim("W1", page="width_accuracy")
def claim_w1(width_accuracy: pd.DataFrame, regime: str = "short", page: str = "width_accuracy") -> ClaimResult:
    """W1: merged accuracy rises with width: ρ(width, merged accuracy at λ=½) ≥ RHO_MIN, and it does not fall over
    the last step of width beyond the 95% interval of that step's change (a fall that clears it: ✗)."""
    rho, st = _rho_row(width_accuracy, ACC_MERGED)
    prev, wide, step = _widest_two(width_accuracy, ACC_MERGED)
    trend = trend_state(rho, +1, len(st))
    if not step.decided or step.n < MIN_PAIRS:
        fall = INCONCLUSIVE
    else:
        fall = FAIL if step.hi < 0 else PASS
    state = FAIL if FAIL in (trend, fall) else both(trend, fall)
    r = ClaimResult("W1", "width", "Merged accuracy rises with width.",
                    f"ρ = {rho:.2f}; merged accuracy at λ=½ {st['mean'].iloc[0]:.3f} at {st.index[0]} → "
                    f"{st['mean'].iloc[-1]:.3f} at {st.index[-1]} hidden units; change from {prev} to {wide} units "
                    f"{step.text()} ({step.n} pairs)",
                    f"ρ(width, merged accuracy at λ=½) ≥ {RHO_MIN:g}, and no fall from the second-widest to the widest "
                    "width beyond its 95% bootstrap interval", state, page,
                    values=_values(step, 0.0, rho=rho, rho_needed=RHO_MIN,
                                   step=step.mean, step_lo=step.lo, step_hi=step.hi,
                                   n_widths=len(st), n=step.n))
    return _in_regime(r, width_accuracy, regime)


@claim("W2", page="loss_barrier_calibration")
def claim_w2(barrier: pd.DataFrame) -> ClaimResult:
    """W2, the calibrated barrier's relative fall: ρ(width, calibrated midpoint loss barrier) ≤ −RHO_MIN and, at the
    widest width, each pair's calibrated/raw barrier ≤ CAL_OVER_RAW_MAX by the 95% interval over pairs.

    Restated in issue 36: a ratio of 0.16 beside a calibrated barrier of 0.19 nats is a large relative fall, not a
    barrier removed, so the row now says what it measures, and whether the calibrated barrier is near zero is W12's
    question (kept apart rather than folded into W12, because the relative fall is the paper's contrast of the raw
    and the calibrated barrier, which W12 does not read)."""
    rho, cal = _rho_row(barrier, LOSS_BARRIER_CAL_MID)
    ratio = (_per_pair(barrier, LOSS_BARRIER_CAL_MID) / _per_pair(barrier, LOSS_BARRIER_MID)).dropna()
    wide = ratio.index.get_level_values(0).max()
    iv = interval(ratio.loc[wide])
    return ClaimResult("W2", "width", "Temperature calibration removes most of the loss barrier of wide networks: "
                       "the calibrated barrier falls with width, to a small fraction of the raw one (its relative "
                       "fall; whether it is near zero is W12).",
                       f"ρ = {rho:.2f}; at {wide} units calibrated/raw midpoint barrier {iv.text('.2f')} "
                       f"({iv.n} pairs; calibrated {cal['mean'].iloc[-1]:.3f} nats)",
                       f"ρ(width, calibrated midpoint loss barrier) ≤ {-RHO_MIN:g} and calibrated/raw ≤ "
                       f"{CAL_OVER_RAW_MAX:g} at the widest (95% bootstrap interval over pairs): the relative fall, "
                       "kept apart from W12 because it is the paper's contrast of the raw and calibrated barriers, "
                       "which W12 (near zero) does not read",
                       both(trend_state(rho, -1, len(cal)), at_most(iv, CAL_OVER_RAW_MAX, MIN_PAIRS)),
                       "loss_barrier_calibration",
                       values=_values(iv, CAL_OVER_RAW_MAX, rho=rho, rho_needed=-RHO_MIN, ratio=iv.mean, ratio_hi=iv.hi,
                                      calibrated=cal["mean"].iloc[-1], n_widths=len(cal), n=iv.n))


def _gap_at(df: pd.DataFrame, units: float, higher: tuple[str, dict], lower: tuple[str, dict]) -> Interval:
    """Return the 95% interval over pairs, at ``units`` hidden units, of the per-pair difference higher − lower (each
    a metric and its selection); empty when no pair has both."""
    gap = (_per_pair(df, higher[0], **higher[1]) - _per_pair(df, lower[0], **lower[1])).dropna()
    return _at_width(gap, units)


@claim("W3", page="lewc")
def claim_w3(lewc: pd.DataFrame) -> ClaimResult:
    """W3: ρ(width, LEWC relative error at λ=½, last hidden layer) ≤ −RHO_MIN, and at the widest width below the
    same pair's untrained error (the 95% interval over pairs of untrained − trained above 0; straddling it:
    inconclusive)."""
    at = {"lam": 0.5, "layer": last_hidden(lewc)}
    rho, tr = _rho_row(lewc, LEWC_REL_ERR, **at, method="trained")
    wide = tr.index[-1]
    iv = _gap_at(lewc, wide, (LEWC_REL_ERR, {**at, "method": "untrained"}), (LEWC_REL_ERR, {**at, "method": "trained"}))
    return ClaimResult("W3", "width", "LEWC holds better as width grows.",
                       f"ρ = {rho:.2f}; at {wide} units error {tr.loc[wide, 'mean']:.3f}, below the untrained pair's "
                       f"by {iv.text()} ({iv.n} pairs)",
                       f"ρ(width, LEWC error at λ=½, last hidden layer) ≤ {-RHO_MIN:g} and, at the widest, below the "
                       "untrained pair's (95% bootstrap interval over pairs)",
                       both(trend_state(rho, -1, len(tr)), above(iv, 0.0, MIN_PAIRS)),
                       "lewc", values=_values(iv, 0.0, rho=rho, rho_needed=-RHO_MIN,
                                              margin=iv.mean, margin_lo=iv.lo, n_widths=len(tr),
                                              n=iv.n))


@claim("W4", page="weak_additivity")
def claim_w4(add: pd.DataFrame) -> ClaimResult:
    """W4: ρ(width, additivity error at λ=½, mean over hidden layers) ≤ −RHO_MIN, and at the widest width below the
    Gaussian baseline (the 95% interval over pairs of baseline − error above 0)."""
    at = {"lam": 0.5, "method": "trained"}
    rho, tr = _rho_row(add, ADDITIVITY_REL_ERR, **at)
    wide = tr.index[-1]
    iv = _gap_at(add, wide, (BASELINE_ADDITIVITY_REL_ERR, at), (ADDITIVITY_REL_ERR, at))
    return ClaimResult("W4", "width", "Weak additivity of the ReLU improves with width.",
                       f"ρ = {rho:.2f}; at {wide} units error {tr.loc[wide, 'mean']:.3f}, below the Gaussian baseline "
                       f"by {iv.text()} ({iv.n} pairs)",
                       f"ρ(width, additivity error at λ=½, mean over hidden layers) ≤ {-RHO_MIN:g} and below the "
                       "Gaussian baseline at the widest (95% bootstrap interval over pairs)",
                       both(trend_state(rho, -1, len(tr)), above(iv, 0.0, MIN_PAIRS)), "weak_additivity",
                       values=_values(iv, 0.0, rho=rho, rho_needed=-RHO_MIN, below=iv.mean, n_widths=len(tr), n=iv.n))


@claim("W5", page="reciprocal_orthogonality")
def claim_w5(orth: pd.DataFrame) -> ClaimResult:
    """W5: ρ(width, orthogonality norm ratio, mean over both directions and layers 2..L) ≤ −RHO_MIN, and the ratio
    itself at the widest width ≤ ORTH_RATIO_MAX by its 95% interval over pairs (the paper: it goes to about 0)."""
    r = _trend_claim("W5", "Reciprocal orthogonality strengthens with width, the ratio going to about 0.", orth,
                     ORTH_RATIO, -1, "‖W^a z^b‖/‖W^a z^a‖ (both directions, layers 2..L)", "reciprocal_orthogonality",
                     lam=0.5, method="trained")
    per = _per_pair(orth, ORTH_RATIO, lam=0.5, method="trained")
    wide = per.index.get_level_values(0).max()
    iv = interval(per.loc[wide])
    r.state = both(r.state, at_most(iv, ORTH_RATIO_MAX, MIN_PAIRS))
    r.measured += f"; at {wide} units the ratio is {iv.text()} ({iv.n} pairs)"
    r.test += f", and the ratio at the widest width ≤ {ORTH_RATIO_MAX:g} (95% bootstrap interval over pairs)"
    r.values.update(_values(iv, ORTH_RATIO_MAX, wide=iv.mean, wide_lo=iv.lo, wide_hi=iv.hi, n=iv.n))
    return r


def _width_ends(d: pd.DataFrame, metric: str, sign: int, rho: float, n_points: int) -> tuple[str, Interval]:
    """Return a width trend's verdict (ρ and the widest minus the narrowest width by its interval,
    :func:`lmcbook.stats.trend_and_ends`; inconclusive over fewer than MIN_TREND_POINTS widths) and the interval."""
    per = _per_pair(d, metric)
    units = sorted(per.index.get_level_values(0).unique())
    if len(units) < 2:
        return INCONCLUSIVE, interval([])
    ends, diff = _ends_state(sign, per.loc[units[-1]], per.loc[units[0]])
    return _trend_verdict(rho, sign, ends, diff, n_points), diff


@claim("W6", page="low_rank")
def claim_w6(rank: pd.DataFrame, regime: str = "short", page: str = "low_rank") -> ClaimResult:
    """W6: the relative effective rank of the hidden-to-hidden matrices falls with width: ρ ≤ −RHO_MIN and the widest
    width's value minus the narrowest's < 0 by the 95% interval over models (:func:`lmcbook.stats.trend_and_ends`)."""
    return _in_regime(_rank_falls("W6", "Weights become low-rank relative to their size as width grows.",
                                  hidden_to_hidden(select(rank, REL_EFFECTIVE_RANK, method="trained")),
                                  REL_EFFECTIVE_RANK, "relative effective rank of hidden-to-hidden matrices",
                                  "relative effective rank of hidden-to-hidden matrices", page), rank, regime)


def _rank_falls(cid: str, statement: str, d: pd.DataFrame, metric: str, what: str, what_test: str, page: str,
                control: bool = False) -> ClaimResult:
    """A claim that a rank ``metric`` of the rows ``d`` falls with width: ρ ≤ −RHO_MIN and the widest width's value
    minus the narrowest's < 0 by the 95% interval over models (:func:`_width_ends`)."""
    rho, st = _rho_row(d, metric)
    state, ends = _width_ends(d, metric, -1, rho, len(st))
    return ClaimResult(cid, "width", statement,
                       f"ρ = {rho:.2f}; {what} {st['mean'].iloc[0]:.3f} at {st.index[0]} → {st['mean'].iloc[-1]:.3f} "
                       f"at {st.index[-1]} hidden units; widest minus narrowest {ends.text()} ({ends.n} models)",
                       f"ρ(width, {what_test}) ≤ {-RHO_MIN:g}, and widest minus narrowest < 0 by its 95% bootstrap "
                       "interval over models", state, page, control=control,
                       values=_values(ends, 0.0, rho=rho, rho_needed=-RHO_MIN,
                                      ends=ends.mean, ends_lo=ends.lo, ends_hi=ends.hi,
                                      n_widths=len(st), n_models=ends.n))


@claim("W6 (update)", page="low_rank")
def claim_w6_update(rank: pd.DataFrame, regime: str = "short", page: str = "low_rank") -> ClaimResult:
    """W6 (update), a diagnostic beside W6: what training added, W − W₀, becomes low-rank relative to its size as
    width grows: ρ(width, relative stable rank of W − W₀ over the hidden-to-hidden matrices) ≤ −RHO_MIN, and the
    widest width's value minus the narrowest's < 0 by the 95% interval over models
    (:func:`lmcbook.stats.trend_and_ends`).

    The paper's sentence (W6) is about the weights W themselves; at short training W is mostly its random
    initialisation, whose spectrum the relative effective rank of W counts, so this row says whether the part of W
    that training wrote is low-rank even where W is not.  The paper does not state it, and its fall is what the
    data's own rank alone predicts (a wider layer fitting the same low-dimensional data adds no new directions), so it
    is no signature of weight decay: a labelled diagnostic, shown on the scoreboard and outside every count."""
    r = _rank_falls("W6 (update)", "(diagnostic, not counted) What training added, W − W₀, becomes low-rank relative "
                    "to its size as width grows; the data's own rank predicts this whatever the account, so it is no "
                    "signature of weight decay.", hidden_to_hidden(select(rank, DELTA_REL_STABLE_RANK)),
                    DELTA_REL_STABLE_RANK, "relative stable rank of W − W₀",
                    "relative stable rank of W − W₀, hidden-to-hidden", page, control=True)
    r.diagnostic = True
    return _in_regime(r, rank, regime)


def claim_w7(wd: pd.DataFrame, regime: str = "short", page: str = "mechanism") -> ClaimResult:
    """W7 (read where weight decay has acted, since issue 36): in a frame of one training length with cells of
    several weight decays (the mechanism page's decay arm, or its length arm's longest length), at the widest width
    where a standard-initialisation cell has acted (weight decay alone would leave at most DECAY_ACTED_MAX of a
    weight), merged accuracy with the strongest such weight decay minus that with the weakest weight decay is > 0,
    decided by the 95% bootstrap interval of the difference over their independent pairs (below 0 beyond it: ✗;
    straddling 0: inconclusive); n/a where weight decay has acted in no cell but the weakest's."""
    cells = cell_table(wd)
    cells = cells[cells["init_scale"] == 1.0]
    weak = cells.loc[cells["weight_decay"].idxmin()]
    acted = cells[(cells["shrinkage"] <= DECAY_ACTED_MAX) & (cells["weight_decay"] > weak["weight_decay"])]
    test = (f"at the widest width where weight decay has acted (alone it would leave ≤ {DECAY_ACTED_MAX:g} of a "
            "weight), merged accuracy with the strongest such weight decay above that with the weakest (95% "
            "bootstrap interval of the difference)")
    statement = "Weak weight decay breaks the width effect."
    if acted.empty:
        top = cells.loc[cells["D"].idxmax()]
        r = ClaimResult("W7", "width", statement, f"n/a: weight decay has not acted in any cell at this length: at the "
                        f"largest D ({top['D']:.3g}, {_cell_name(top)}) it alone would leave {top['shrinkage']:.2f} "
                        f"of a weight (> {DECAY_ACTED_MAX:g})", test, NA, page)
        return _in_regime(r, wd, regime)
    acted = acted.assign(units=np.minimum(acted["widest"], weak["widest"]))
    strong = acted.sort_values(["units", "D"]).iloc[-1]
    units = strong["units"]
    w, s = (pair_values(wd, ACC_MERGED, cell, units) for cell in (weak, strong))
    iv = interval_diff(s, w)
    slopes, slope_text = _w7_slopes(wd, weak, strong, units)
    r = ClaimResult("W7", "width", statement,
                    f"at {units:g} units, merged accuracy {w.mean():.3f} (weight decay {weak['weight_decay']:g}) vs "
                    f"{s.mean():.3f} (weight decay {strong['weight_decay']:g}, D = {strong['D']:.3g}, where it alone "
                    f"would leave {strong['shrinkage']:.2g} of a weight); gap {iv.text()} ({iv.n} pairs){slope_text}",
                    test, above(iv, 0.0, MIN_PAIRS), page,
                    values=_values(iv, 0.0, gap=iv.mean, units=units, n=iv.n, epochs=float(strong["epochs"]),
                                   **slopes))
    r = _in_regime(r, wd, regime)
    r.decay_integral = float(strong["D"])
    return r


def _w7_slopes(wd: pd.DataFrame, weak: pd.Series, strong: pd.Series, units: float) -> tuple[dict[str, float], str]:
    """Return W7's width effects, shown beside its verdict and never tested (the paper's sentence is about the width
    effect, the verdict about the level at the widest width; a referee asked for both): the change in plain merged
    accuracy from the narrowest width where both cells trained pairs and every endpoint met the convergence rule
    (:func:`~lmcbook.claims.verdicts.unfit`) to ``units``, with the weakest and the strongest weight decay, each end's
    pairs, and those words, which name the narrower widths left out and why ("" where the cells share no narrower
    width)."""
    widths = sorted(float(u) for u in wd["hidden_units"].dropna().unique() if u < units)
    common = [u for u in widths if all(len(pair_values(wd, ACC_MERGED, c, u)) for c in (weak, strong))]
    if not common:
        return {}, ""
    cells = [c.to_dict() for c in (weak, strong)]
    why = {u: next((f"weight decay {c['weight_decay']:g}: {w}" for c in cells if (w := unfit(wd, c, u))), None)
           for u in common}
    fit = [u for u in common if why[u] is None]
    skipped = [u for u in common if not fit or u < fit[0]]
    why = "; ".join(why[u] for u in skipped)
    left = f" (left out: {why})" if skipped else ""
    if not fit:
        return {}, ("; no narrower width where both cells' endpoints met the convergence rule, so no width effect is "
                    f"shown{left}")
    narrow = fit[0]
    ends = [(pair_values(wd, ACC_MERGED, c, narrow), pair_values(wd, ACC_MERGED, c, units)) for c in (weak, strong)]
    weak_slope, strong_slope = (wide.mean() - nar.mean() for nar, wide in ends)
    sizes = [(len(nar), len(wide)) for nar, wide in ends]
    counts = (f"{sizes[0][0]} pairs at {narrow:g} units and {sizes[0][1]} at {units:g} in each cell"
              if sizes[0] == sizes[1] else "; ".join(f"{n} pairs at {narrow:g} units and {w} at {units:g} with weight "
                                                     f"decay {c['weight_decay']:g}" for (n, w), c in zip(sizes, cells)))
    return ({"slope_weak": weak_slope, "slope_strong": strong_slope, "slope_from": narrow},
            f"; from {narrow:g} to {units:g} units, plain merged accuracy changes by {weak_slope:+.3f} (weight decay "
            f"{weak['weight_decay']:g}) and {strong_slope:+.3f} (weight decay {strong['weight_decay']:g}; {counts}): "
            f"the width effect as a change between two widths, shown, not tested{left}")


@claim("W8", page="random_permutation")
def claim_w8(perm: pd.DataFrame) -> ClaimResult:
    """W8 (control; pairs as its unit and a null that can fail, since issue 36): for wide networks the permutation
    does not matter: at the widest width, per pair, the weight-matched merge's accuracy minus the mean over that
    pair's random-permutation draws lies within ±PERM_EQUIV_TOL, an equivalence test on its 95% bootstrap interval
    over pairs (wholly outside the tolerance: ✗; straddling it: inconclusive).  Weight matching finds an alignment
    that matters where one exists, so this null can fail.  The draws' change from the unpermuted merge is reported
    beside it and not tested: for independently trained networks the identity is itself just another permutation."""
    d = select(perm, ACC_MERGED, method="random_permutation")
    wide = d["hidden_units"].max()
    draws = d[d["hidden_units"] == wide].groupby("pair")["value"]

    def per_pair(method: str) -> pd.Series:
        return select(perm, ACC_MERGED, method=method, hidden_units=wide).groupby("pair")["value"].mean()

    iv = interval((per_pair(MATCHED) - draws.mean()).dropna())
    ident = interval((per_pair(PLAIN) - draws.mean()).dropna())
    statement = ("(control) For wide networks the permutation does not matter: weight matching merges them no better "
                 "than a random permutation.")
    test = (f"at the widest width, per pair, the weight-matched merge within ±{100 * PERM_EQUIV_TOL:g} point(s) of the "
            "mean random-permutation merge (95% bootstrap interval over pairs)")
    if not iv.n:
        return ClaimResult("W8", "width", statement, f"n/a: no weight-matched merge was recorded at {int(wide)} units",
                           test, NA, "random_permutation", control=True)
    return ClaimResult("W8", "width", statement,
                       f"at {int(wide)} units, weight-matched minus random-permutation merge {iv.text('.1f', 100)} "
                       f"points over {iv.n} pairs ({int(draws.size().min())} draws per pair); unpermuted minus random "
                       f"{ident.text('.1f', 100)} points (not tested: the identity is one more permutation)", test,
                       within(iv, PERM_EQUIV_TOL, MIN_PAIRS), "random_permutation", control=True,
                       values=_values(iv, PERM_EQUIV_TOL, two_sided=1.0, unpermuted=ident.mean, n=iv.n))


@claim("W9", page="loss_barrier_calibration")
def claim_w9(barrier: pd.DataFrame) -> ClaimResult:
    """W9: at the widest width the logit norm ratio is within LOGIT_SCALE_TOL of 2^(1−L) (the 95% interval over pairs
    of its relative distance), *and* farther from it at the narrowest width, where merging fails (the narrowest's
    interval above the widest's), so that nearness to 2^(1−L) belongs to the pairs that merge.  n/a outside LEWC's
    setting."""
    d = select(barrier, LOGIT_NORM_RATIO)
    L = int(d["depth"].iloc[0])
    pred = 2.0 ** (1 - L)
    rel = (_per_pair(barrier, LOGIT_NORM_RATIO) / pred - 1).abs()
    units = sorted(rel.index.get_level_values(0).unique())
    wide, narrow = interval(rel.loc[units[-1]]), interval(rel.loc[units[0]])
    enough = narrow.decided and min(narrow.n, wide.n) >= MIN_PAIRS
    apart = PASS if enough and narrow.lo > wide.hi else FAIL if enough and narrow.hi <= wide.lo else INCONCLUSIVE
    r = ClaimResult("W9", "width", "Merged logits are the ensemble's shrunk by 2^(1−L).",
                    f"relative distance of the norm ratio from 2^(1−{L}) = {pred:.3f}: {wide.text('.2f')} at "
                    f"{units[-1]} units, {narrow.text('.2f')} at {units[0]} ({wide.n} pairs)",
                    f"within {100 * LOGIT_SCALE_TOL:g}% of 2^(1−L) at the widest width, and farther from it at the "
                    "narrowest (95% bootstrap intervals over pairs)",
                    both(at_most(wide, LOGIT_SCALE_TOL, MIN_PAIRS), apart), "loss_barrier_calibration",
                    values=_values(wide, LOGIT_SCALE_TOL, rel=wide.mean, rel_hi=wide.hi, rel_narrow=narrow.mean,
                                   n=min(wide.n, narrow.n)))
    return _na_unless_lewc(r, barrier)


def _depth_fit(d: pd.DataFrame) -> tuple[float, float]:
    slope, intercept = np.polyfit(d["depth"].to_numpy(float) - 1, np.log2(d["value"].to_numpy(float)), 1)
    return float(-slope), float(intercept)


def _depth_betas(d: pd.DataFrame) -> pd.Series:
    """Return β of the depth law fitted per replicate (pair or seed) over its depths (at least 2 depths)."""
    rep = replicate(d)
    return pd.Series({k: _depth_fit(g)[0] for k, g in d.groupby(rep) if g["depth"].nunique() >= 2}, dtype=float)


@claim("W10", page="lewc_depth")
def claim_w10(depth: pd.DataFrame) -> ClaimResult:
    """W10: the depth law: per pair, a least-squares fit of log2(logit norm ratio) on L − 1 over the depth sweep has
    slope −β; ✓ when the 95% interval of β over pairs lies within ± LOGIT_SCALE_TOL of 1 and the untrained pairs'
    interval lies wholly outside it (else inconclusive: random networks may meet it too), ✗ when β's interval lies
    wholly outside; fewer than MIN_PAIRS pairs: inconclusive (n/a outside LEWC's setting)."""
    d = select(depth, LOGIT_NORM_RATIO)
    beta, alpha = _depth_fit(d)
    iv = interval(_depth_betas(d))
    un = select(depth, SCALE_RATIO, method="untrained")
    un = un[un["layer"] == un["depth"]]  # the logits' layer of each depth
    iv_un = interval(_depth_betas(un)) if len(un) else interval([])

    def near_one(x: Interval) -> str:
        return within(Interval(x.mean - 1, x.lo - 1, x.hi - 1, x.n), LOGIT_SCALE_TOL, MIN_PAIRS)

    trained, untrained = near_one(iv), near_one(iv_un)
    state = FAIL if trained == FAIL else PASS if trained == PASS and untrained == FAIL else INCONCLUSIVE
    units = int(d["hidden_units"].iloc[0])
    r = ClaimResult("W10", "width", "Merged logits shrink by a factor 2 per layer (the depth law; ours).",
                    f"β = {iv.text()} over {iv.n} pair(s) (pooled fit β = {beta:.3f}, α = {alpha:.3f}) at {units} "
                    f"units, L = {int(d['depth'].min())}..{int(d['depth'].max())}; untrained pairs β = "
                    f"{iv_un.text()}",
                    f"|β − 1| ≤ {LOGIT_SCALE_TOL:g} by a {100 * CONFIDENCE:.0f}% bootstrap interval over ≥ {MIN_PAIRS} "
                    "pairs, and the untrained pairs' interval wholly outside it", state, "lewc_depth",
                    values=_values(Interval(iv.mean - 1, iv.lo - 1, iv.hi - 1, iv.n), LOGIT_SCALE_TOL, two_sided=1.0,
                                   beta=beta, alpha=alpha, beta_mean=iv.mean, beta_lo=iv.lo, beta_hi=iv.hi,
                                   beta_untrained=iv_un.mean, n=iv.n))
    return _na_unless_lewc(r, depth)


@claim("W11", page="width_accuracy")
def claim_w11(width_accuracy: pd.DataFrame) -> ClaimResult:
    """W11: the accuracy barrier (max over λ) at the widest width is ≤ 2 points for every pair."""
    return _widest_threshold("W11", "Wide networks merge with a small accuracy barrier (the paper: about "
                             f"{100 * PAPER_MLP_ACC_BARRIER:g} points "
                             "for its MLP).", width_accuracy, ACC_BARRIER, ACC_BARRIER_MAX, "accuracy barrier",
                             "points", "width_accuracy", scale=100)


@claim("W12", page="loss_barrier_calibration")
def claim_w12(barrier: pd.DataFrame) -> ClaimResult:
    """W12: the calibrated midpoint loss barrier at the widest width is ≤ 0.1 nats for every pair."""
    return _widest_threshold("W12", "After calibration the loss barrier of wide networks is near zero.", barrier,
                             LOSS_BARRIER_CAL_MID, CAL_BARRIER_MAX, "calibrated midpoint loss barrier", "nats",
                             "loss_barrier_calibration")


@claim("W13", page="lewc")
def claim_w13(lewc: pd.DataFrame) -> ClaimResult:
    """W13: wide networks follow LEWC closely, by the paper's own measure, read where LEWC's prediction and LLFC's
    differ (λ in LEWC_LLFC_LAMS, those the probes recorded; at λ=½ the two cosines coincide): at the widest width,
    last hidden layer, the cosine between the merged activations and LEWC's prediction (mean over the λ read) is
    ≥ LEWC_COS_MIN, above the cosine with LLFC's prediction and above the same pair's untrained cosine (95% intervals
    over pairs); n/a outside LEWC's setting, or when no such λ was recorded."""
    test = (f"at λ = {' and '.join(f'{lam:g}' for lam in LEWC_LLFC_LAMS)} (where LEWC's and LLFC's predictions "
            f"differ; those recorded), last hidden layer, widest width: cosine with LEWC's prediction ≥ "
            f"{LEWC_COS_MIN:g}, above the cosine with LLFC's and above the untrained pair's (95% bootstrap intervals "
            "over pairs)")
    lams = [lam for lam in LEWC_LLFC_LAMS if np.isclose(lewc["lam"].dropna(), lam).any()]
    if not lams:
        return _na_unless_lewc(ClaimResult("W13", "width", "Wide networks follow LEWC closely.", "n/a: the probes "
                                           "recorded no λ where LEWC's and LLFC's predictions differ", test, NA,
                                           "lewc"), lewc)
    at = lewc[np.isclose(lewc["lam"].to_numpy(float)[:, None], lams).any(axis=1)]
    layer = last_hidden(lewc)
    tr, llfc, un = (_per_pair(at, metric, layer=layer, method=method) for metric, method in
                    ((LEWC_COS, "trained"), (LLFC_COS, "trained"), (LEWC_COS, "untrained")))
    wide = tr.index.get_level_values(0).max()
    cos = interval(tr.loc[wide])
    vs, gain = (_at_width((tr - other).dropna(), wide) for other in (llfc, un))  # none recorded: undecided
    r = ClaimResult("W13", "width", "Wide networks follow LEWC closely.",
                    f"at {wide} units, λ = {', '.join(f'{lam:g}' for lam in lams)}: cos(merged, LEWC) = {cos.text()} "
                    f"trained, above LLFC's prediction by {vs.text()}, above the untrained pair's by {gain.text()} "
                    f"({cos.n} pairs)", test,
                    both(at_least(cos, LEWC_COS_MIN, MIN_PAIRS), above(vs, 0.0, MIN_PAIRS),
                         above(gain, 0.0, MIN_PAIRS)), "lewc",
                    values=_values(cos, LEWC_COS_MIN, over_llfc=vs.mean, over_untrained=gain.mean, n=cos.n))
    return _na_unless_lewc(r, lewc)


def _at_width(per: pd.Series, units: float) -> Interval:
    """Return the interval over replicates of a per-(width, replicate) series at one width (empty if it has none)."""
    return interval(per.loc[units] if units in per.index.get_level_values(0) else [])


def _per_pair(df: pd.DataFrame, metric: str, **filters) -> pd.Series:
    """Return the mean of ``metric`` per (hidden_units, replicate: pair or seed), over layers and other keys."""
    d = select(df, metric, **filters)
    return d.groupby(["hidden_units", replicate(d)])["value"].mean()


@claim("W14", page="reciprocal_orthogonality")
def claim_w14(orth: pd.DataFrame) -> ClaimResult:
    """W14: at the widest width the orthogonality ratio is ≤ ORTH_OVER_UNTRAINED_MAX of the same pair's untrained
    ratio, and ≤ ORTH_RATIO_MAX itself (95% intervals over pairs): strong, and not only a property of random
    networks."""
    tr = _per_pair(orth, ORTH_RATIO, lam=0.5, method="trained")
    rel = (tr / _per_pair(orth, ORTH_RATIO, lam=0.5, method="untrained")).dropna()
    wide = rel.index.get_level_values(0).max()
    iv_rel, iv_abs = interval(rel.loc[wide]), interval(tr.loc[wide])
    return ClaimResult("W14", "width", "Reciprocal orthogonality is strong in wide networks (not only a property of "
                       "random ones).",
                       f"at {wide} units, ratio over the untrained pair's {iv_rel.text()}, ratio {iv_abs.text()} "
                       f"({iv_rel.n} pairs)",
                       f"at the widest width, the orthogonality ratio ≤ {ORTH_OVER_UNTRAINED_MAX:g} × the untrained "
                       f"pair's and ≤ {ORTH_RATIO_MAX:g} (95% bootstrap intervals over pairs)",
                       both(at_most(iv_rel, ORTH_OVER_UNTRAINED_MAX, MIN_PAIRS),
                            at_most(iv_abs, ORTH_RATIO_MAX, MIN_PAIRS)),
                       "reciprocal_orthogonality",
                       values=_values(iv_rel, ORTH_OVER_UNTRAINED_MAX, mean=iv_rel.mean, ratio=iv_abs.mean,
                                      **_also(iv_abs, ORTH_RATIO_MAX),
                                      n=iv_rel.n))


@claim("W15", page="llfc_vs_lewc")
def claim_w15(llfc: pd.DataFrame) -> ClaimResult:
    """W15: the crossover the paper contrasts: at the widest width, last hidden layer, λ=¼, unpermuted pairs follow
    LEWC better than LLFC (LLFC's relative error minus LEWC's > 0), and weight-matched pairs follow LLFC better
    than LEWC (LEWC's minus LLFC's > 0), each beyond its 95% interval over pairs."""
    layer = last_hidden(llfc)
    gap = {m: _per_pair(llfc, LLFC_REL_ERR, lam=0.25, layer=layer, method=m)
           - _per_pair(llfc, LEWC_REL_ERR, lam=0.25, layer=layer, method=m) for m in ("trained", "weight_matched")}
    wide = gap["trained"].index.get_level_values(0).max()
    plain, matched = interval(gap["trained"].loc[wide]), interval(-gap["weight_matched"].loc[wide])
    return ClaimResult("W15", "width", "Unpermuted wide pairs follow LEWC rather than LLFC; after weight matching, "
                       "LLFC rather than LEWC.",
                       f"at {wide} units, λ=¼: LLFC − LEWC relative error {plain.text()} unpermuted, LEWC − LLFC "
                       f"{matched.text()} after weight matching ({plain.n} pairs)",
                       "at the widest width, last hidden layer, λ=¼: LEWC's relative error below LLFC's unpermuted, "
                       "and LLFC's below LEWC's after weight matching, each beyond its 95% bootstrap interval over "
                       "pairs", both(above(plain, 0.0, MIN_PAIRS), above(matched, 0.0, MIN_PAIRS)), "llfc_vs_lewc",
                       values=_values(plain, 0.0, plain=plain.mean, plain_lo=plain.lo, matched=matched.mean,
                                      matched_lo=matched.lo, n=plain.n))


@claim("W1 W6 W7 (regimes)", page="mechanism", reads=mechanism_standard)
def width_rows_by_regime(f: pd.DataFrame) -> list[ClaimResult]:
    """Return the width rows the mechanism page scores by training regime: W7 on its decay arm (the *short* regime:
    its shortest length), and W1, W6 and W7 on its longest length (the *long* regime), when it has a length arm."""
    rows = [claim_w7(at_length(f, f["epochs"].min()), "short")]
    if f["epochs"].nunique() < 2:  # no length arm: no long regime to score
        return rows
    longest = at_length(f, strongest=True)
    rows += [claim_w1(longest, "long", "mechanism"), claim_w6(longest, "long", "mechanism"),
             claim_w6_update(longest, "long", "mechanism")]
    if at_length(f)["weight_decay"].nunique() >= 2:  # W7 compares two weight decays at the longest length
        rows.append(claim_w7(at_length(f), "long"))
    return rows
