"""The mechanism family: which account of merging without permutations the runs support.  The rows M1–M6 read a
mechanism frame (cells of several lengths, weight decays and initial scales, pairs merged plainly and after weight
matching), and the training-regime rows R1–R2 read the same frame's cells across the decay integral D.

Every M row reads a 95% bootstrap interval over pairs (:mod:`lmcbook.stats`), decides only when the interval clears
its threshold (else inconclusive), and needs at least MIN_PAIRS pairs in each cell it reads; it is n/a when its cells
are outside the regime the claim is about, or when an endpoint of a pair it reads did not fit its training data (the
convergence rule, CONVERGED_TRAIN_ACC).  When each test and threshold was fixed: :mod:`lmcbook.claims.thresholds`.
What the rows conclude (the hypotheses, the conclusion table) and the numbers and tables the mechanism and landing
pages quote of them (:func:`mechanism_numbers`, :func:`hypotheses_markdown`, :func:`short_merge_words`): the module's
last section.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..schema import (
    ACC_BARRIER,
    ACC_ENSEMBLE,
    ACC_MERGED,
    DECAY_INTEGRAL,
    DECAY_SHRINKAGE,
    LLFC_REL_ERR,
    ORTH_RATIO,
    REL_EFFECTIVE_RANK,
    cell_table,
    hidden_to_hidden,
    in_cell,
    markdown_table,
    pair_values,
    replicate,
    select,
)
from ..stats import (
    MIN_REPLICATES,
    Interval,
    above,
    at_least,
    at_most,
    both,
    cell_stats,
    interval,
    interval_diff,
    spearman,
    trend_and_ends,
    within,
)
from .thresholds import (
    D_TIE_RTOL,
    DECAY_ACTED_MAX,
    DECAY_IDLE_MIN,
    EQUAL_D_TOL,
    LLFC_MATCHED_MAX,
    MERGED_OVER_ENSEMBLE_MIN,
    MIN_ACC_EFFECT,
    MIN_PAIRS,
    ORTH_FALL_MIN,
    PAPER_MLP_ACC_BARRIER,
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
    _dataset,
    _ends_state,
    _trend_verdict,
    _values,
    claim,
    mechanism_standard,
    ties,
    unfit,
)


class _NotApplicable(Exception):
    """Raised by a mechanism claim's reading when its setting cannot be read: why, and the D of the cell it would
    have read (NaN if none)."""

    def __init__(self, why: str, d_value: float = float("nan")) -> None:
        super().__init__(why)
        self.why, self.d_value = why, d_value


def _check(why: str | None, d_value: float = float("nan")) -> None:
    """Raise :class:`_NotApplicable` when there is a reason (``why``) the setting cannot be read."""
    if why is not None:
        raise _NotApplicable(why, d_value)


class _Reading(NamedTuple):
    """What a mechanism claim measured: the sentence, the state, the D of the cell it read and its values."""

    measured: str
    state: str
    d_value: float
    values: dict[str, float]


def _mechanism_row(cid: str, statement: str, test: str, read: Callable[[pd.DataFrame], _Reading],
                   df: pd.DataFrame) -> ClaimResult:
    """Return the mechanism claim ``cid``'s row from ``read``, its reading of the mechanism frame ``df``: the row holds
    the reading, or n/a and why when the reading raises :class:`_NotApplicable`."""
    try:
        r = read(df)
    except _NotApplicable as na:
        r = _Reading(f"n/a: {na.why}", NA, na.d_value, {})
    return ClaimResult(cid, "width", statement, r.measured, test, r.state, "mechanism", values=dict(r.values),
                       decay_integral=r.d_value, dataset=_dataset(df))


def _too_few(*ivs: Interval) -> bool:
    return any(iv.n < MIN_PAIRS for iv in ivs)


def _exceeds(measured: str, d_value: float, iv: Interval, units: float, margin: float,
             **arms: pd.Series) -> _Reading:
    """Return the reading of a claim that reads a difference of two arms as > ``margin``, its minimum effect (pass
    when its interval lies above it, fail when it lies at or below it), with the interval and each arm's mean as
    values."""
    return _Reading(measured + _below_margin(iv, margin), _decided(iv, above(iv, margin)), d_value,
                    _values(iv, margin, diff=iv.mean, **{k: float(v.mean()) for k, v in arms.items()}, units=units,
                            n=iv.n))


def _below_margin(iv: Interval, margin: float) -> str:
    """Return the note of a difference whose interval lies between 0 and its minimum effect (an effect too small to
    count), or ""."""
    if margin > 0 and iv.decided and iv.n >= MIN_PAIRS and 0 < iv.hi <= margin:
        return f"; smaller than the minimum effect, {margin:g}: refuted by its equivalence margin"
    return ""


def _decided(iv: Interval, state: str) -> str:
    """Return ``state``, or inconclusive when the interval holds fewer than MIN_PAIRS pairs."""
    return INCONCLUSIVE if _too_few(iv) else state


def _extremes(df: pd.DataFrame) -> tuple[float, pd.Series, pd.Series] | None:
    """Return the widest width of the standard-initialisation cells and, among the cells that reach it, the one of
    smallest and of largest D (None if there are none)."""
    cells = cell_table(df)
    cells = cells[cells["init_scale"] == 1.0]
    if cells.empty:
        return None
    widest = cells["widest"].max()
    at = _widest_cells(cells, widest)
    return widest, at.iloc[0], at.iloc[-1]


def _widest_cells(cells: pd.DataFrame, widest: float) -> pd.DataFrame:
    """Return the standard-initialisation cells of a :func:`lmcbook.schema.cell_table` that reach ``widest``, by D;
    of cells whose D tie (:func:`~lmcbook.claims.verdicts.ties`), the longest training last (the paper's route to large
    D)."""
    at = cells[(cells["init_scale"] == 1.0) & (cells["widest"] == widest)]
    return at.assign(tie=ties(at["D"])).sort_values(["tie", "epochs"], ignore_index=True)


def _largest_d_gate(df: pd.DataFrame, need: list[float] | None = None) -> tuple[float, pd.Series, str | None]:
    """Return the widest width, the largest-D cell there, and why that cell cannot be read (None if it can)."""
    ext = _extremes(df)
    if ext is None:
        return float("nan"), pd.Series(dtype=float), "no standard-initialisation cell was run"
    widest, _, big = ext
    if not big["shrinkage"] <= DECAY_ACTED_MAX:
        return widest, big, (f"weight decay has not acted in any cell at {widest:g} units: at the largest D "
                             f"({big['D']:.3g}, {_cell_name(big)}) weight decay alone would leave "
                             f"{big['shrinkage']:.2f} of a weight (> {DECAY_ACTED_MAX:g})")
    for units in need or [widest]:
        why = unfit(df, big, units)
        if why is not None:
            return widest, big, why
    return widest, big, None


def _largest_d(df: pd.DataFrame) -> tuple[float, pd.Series]:
    """Return the widest width and the largest-D cell there (:func:`_largest_d_gate`); raise when it cannot be
    read."""
    widest, big, why = _largest_d_gate(df)
    _check(why, big.get("D", float("nan")))
    return widest, big


_M_TEST_PAIRS = f"at least {MIN_PAIRS} pairs; 95% bootstrap interval over pairs"


@claim("R1", page="mechanism", reads=mechanism_standard)
def claim_r1(tr: pd.DataFrame) -> ClaimResult:
    """R1: at the widest width trained at every length, ρ(D, relative effective rank of the hidden-to-hidden
    matrices) ≤ −0.9 across the (length, weight decay) cells."""
    return _regime_claim("R1", "Weight decay makes the weights low-rank: the longer it acts, the lower the rank (the "
                         "first link of the paper's causal account).", tr, REL_EFFECTIVE_RANK, -1,
                         "relative effective rank", hidden=True, method="trained")


@claim("R2", page="mechanism", reads=mechanism_standard)
def claim_r2(tr: pd.DataFrame) -> ClaimResult:
    """R2: at the widest width trained at every length, ρ(D, merged accuracy at λ=½) ≥ 0.9 across the (length,
    weight decay) cells."""
    return _regime_claim("R2", "As weight decay acts longer (larger D), merging without permutations improves (the "
                         "paper's causal account, end to end).", tr, ACC_MERGED, +1, "merged accuracy")


@claim("M1", page="mechanism")
def claim_m1(df: pd.DataFrame) -> ClaimResult:
    """M1 (the paper's account against H2): at the widest width and the largest D, plain merged accuracy ≥ 0.95 ×
    the logit ensemble's: pass when the interval of the per-pair ratio lies at or above 0.95, fail when it lies
    below, else inconclusive; n/a when weight decay has not acted there or an endpoint did not converge.  Of cells
    whose D tie (:func:`~lmcbook.claims.verdicts.ties`), it reads the longest training: the paper's route to a large
    D."""
    return _mechanism_row("M1", "Once weight decay has acted, wide networks merge without permutations: plain "
                          "merged accuracy reaches the logit ensemble's.",
                          f"merged/ensemble ≥ {MERGED_OVER_ENSEMBLE_MIN:g} at the widest width and largest D "
                          f"({_M_TEST_PAIRS})", _read_m1, df)


def _read_m1(df: pd.DataFrame) -> _Reading:
    """Return M1's reading of a mechanism frame (:func:`claim_m1`); raise :class:`_NotApplicable` where
    its setting cannot be read."""
    widest, big = _largest_d(df)
    iv, merged, ens = _merge_ratio(df, big, widest)
    measured = (f"at {widest:g} units, D = {big['D']:.3g} ({_cell_name(big)}): merged/ensemble = {iv.text()} over "
                f"{iv.n} pairs (merged {merged.mean():.3f}, ensemble {ens.mean():.3f})")
    return _Reading(measured, _decided(iv, at_least(iv, MERGED_OVER_ENSEMBLE_MIN)), big["D"],
                    _values(iv, MERGED_OVER_ENSEMBLE_MIN, ratio=iv.mean, merged=float(merged.mean()),
                            ensemble=float(ens.mean()), units=widest, n=iv.n))


def _along_d(df: pd.DataFrame, widest: float, value: Callable[[pd.Series], pd.Series]) -> tuple[pd.DataFrame, list]:
    """Return the standard-initialisation cells at the widest width, by D (:func:`_widest_cells`; the first and the
    last must converge, else raise), and ``value(cell)`` (a series over pairs) for each."""
    cells = _widest_cells(cell_table(df), widest)
    for end in (cells.iloc[0], cells.iloc[-1]):
        _check(unfit(df, end, widest), cells["D"].iloc[-1])
    return cells, [value(c) for _, c in cells.iterrows()]


@claim("M2", page="mechanism")
def claim_m2(df: pd.DataFrame) -> ClaimResult:
    """M2 (H2, permutation collapse; since issue 36): at the widest width, the gain of weight matching (matched minus
    plain merged accuracy, per pair) grows with D: ρ(D, mean gain) ≥ 0.9 over the standard-initialisation cells
    there and the largest-D cell's gain above the smallest-D cell's beyond their interval
    (lmcbook.stats.trend_and_ends); and LLFC's relative error after matching (λ=½, mean over layers) at the largest
    D is ≤ LLFC_MATCHED_MAX and below the smallest-D cell's, each by its interval.  n/a as M1 (both end cells must
    converge)."""
    return _mechanism_row("M2", "(H2, ours) Weight decay drives the two networks to one solution up to a "
                          "permutation: the gain of weight matching over plain averaging grows with D, and after "
                          "matching they interpolate linearly, layer by layer (LLFC).",
                          f"ρ(D, weight-matched − plain merged accuracy) ≥ {RHO_MIN:g} over the cells at the widest "
                          "width, the largest-D cell's gain above the smallest-D cell's; and LLFC's relative error "
                          f"after weight matching at the largest D ≤ {LLFC_MATCHED_MAX:g} and below the smallest-D "
                          f"cell's ({_M_TEST_PAIRS})", _read_m2, df)


def _read_m2(df: pd.DataFrame) -> _Reading:
    """Return M2's reading of a mechanism frame (:func:`claim_m2`); raise :class:`_NotApplicable` where
    its setting cannot be read."""
    widest, big = _largest_d(df)

    def gain(cell: pd.Series) -> pd.Series:
        plain, matched = (pair_values(df, ACC_MERGED, cell, widest, method=m) for m in (PLAIN, MATCHED))
        return (matched - plain).dropna()

    cells, gains = _along_d(df, widest, gain)
    rho = spearman(cells["tie"], [g.mean() for g in gains])
    iv = interval_diff(gains[-1], gains[0])
    err = [pair_values(df, LLFC_REL_ERR, cells.iloc[i], widest, lam=0.5, method="weight_matched") for i in (0, -1)]
    at_big, fall = interval(err[1]), interval_diff(err[0], err[1])
    state = both(trend_and_ends(rho, +1, above(iv, 0.0), RHO_MIN), at_most(at_big, LLFC_MATCHED_MAX),
                 above(fall, 0.0))
    measured = (f"at {widest:g} units: weight-matched minus plain merged accuracy {gains[0].mean():.3f} at D = "
                f"{cells['D'].iloc[0]:.3g} → {gains[-1].mean():.3f} at D = {cells['D'].iloc[-1]:.3g} (ρ = {rho:.2f} "
                f"over {len(cells)} cells), largest minus smallest D {iv.text()}; LLFC's error after matching "
                f"{err[0].mean():.3f} → {at_big.text()}")
    return _Reading(measured, INCONCLUSIVE if _too_few(iv, at_big, fall) else state, big["D"],
                    _values(iv, 0.0, rho=rho, rho_needed=RHO_MIN, **_also(at_big, LLFC_MATCHED_MAX),
                            llfc_small_d=float(err[0].mean()), llfc_large_d=at_big.mean,
                            units=widest, n=iv.n))


@claim("M3", page="mechanism")
def claim_m3(df: pd.DataFrame) -> ClaimResult:
    """M3 (H3, width truncation): at the largest D, plain merged accuracy rises with width up to the widest:
    ρ(width, mean merged accuracy) ≥ 0.9 over the widths whose endpoints converged, and the widest width above
    the next narrower one by more than MIN_ACC_EFFECT beyond the interval of their difference
    (lmcbook.stats.trend_and_ends: an interval wholly at or below the minimum effect fails); n/a as M1, or when the
    two widest widths did not converge."""
    return _mechanism_row("M3", "(H3, ours) With large D, plain merging recovers as width grows, up to the widest "
                          "width.",
                          f"ρ(width, merged accuracy) ≥ {RHO_MIN:g} at the largest D, and the widest width above the "
                          f"next narrower one by more than the minimum effect, {MIN_ACC_EFFECT:g} ({_M_TEST_PAIRS})",
                          _read_m3, df)


def _read_m3(df: pd.DataFrame) -> _Reading:
    """Return M3's reading of a mechanism frame (:func:`claim_m3`); raise :class:`_NotApplicable` where
    its setting cannot be read."""
    widest, big = _largest_d(df)
    units = sorted(in_cell(df, big)["hidden_units"].dropna().unique())
    _check(f"only one width was trained at the largest D ({_cell_name(big)})" if len(units) < 2 else None, big["D"])
    _check(unfit(df, big, units[-2]), big["D"])
    fit = [u for u in units if unfit(df, big, u) is None]
    means = [pair_values(df, ACC_MERGED, big, u, method=PLAIN).mean() for u in fit]
    rho = spearman(fit, means)
    wide, prev = (pair_values(df, ACC_MERGED, big, u, method=PLAIN) for u in (units[-1], units[-2]))
    iv = interval_diff(wide, prev)
    dropped = f"; {len(units) - len(fit)} narrower width(s) left out by the convergence rule" if len(fit) < len(units) \
        else ""
    measured = (f"at D = {big['D']:.3g}: ρ = {rho:.2f} over {len(fit)} widths, merged accuracy {means[0]:.3f} at "
                f"{fit[0]:g} → {means[-1]:.3f} at {fit[-1]:g} units; {units[-1]:g} minus {units[-2]:g} units: "
                f"{iv.text()}{_below_margin(iv, MIN_ACC_EFFECT)}{dropped}")
    return _Reading(measured, _decided(iv, trend_and_ends(rho, +1, above(iv, MIN_ACC_EFFECT), RHO_MIN)), big["D"],
                    _values(iv, MIN_ACC_EFFECT, rho=rho, rho_needed=RHO_MIN, diff=iv.mean, units=widest, n=iv.n))


@claim("M4", page="mechanism")
def claim_m4(df: pd.DataFrame) -> ClaimResult:
    """M4 (H1, near initialisation): at the smallest D and the widest width, plain merged accuracy with a small
    initialisation (the smallest init_scale) is below the standard initialisation's by more than MIN_ACC_EFFECT:
    pass when the interval of standard minus small lies above it, fail when it lies at or below it (a small
    initialisation that leaves merging intact refutes H1), else inconclusive; n/a without a small-initialisation
    arm, when weight decay has acted in the smallest-D cell, or when an endpoint did not converge."""
    return _mechanism_row("M4", "(H1, ours) In short training the width effect comes from the random "
                          "initialisation: with a small initialisation, wide networks merge worse.",
                          f"standard − small-initialisation merged accuracy > {MIN_ACC_EFFECT:g} (the minimum effect) "
                          f"at the smallest D, widest width ({_M_TEST_PAIRS})", _read_m4, df)


def _read_m4(df: pd.DataFrame) -> _Reading:
    """Return M4's reading of a mechanism frame (:func:`claim_m4`); raise :class:`_NotApplicable` where
    its setting cannot be read."""
    ext = _extremes(df)
    cells = cell_table(df)
    smalls = cells[cells["init_scale"] < 1.0].sort_values("init_scale")
    _check("no small-initialisation arm was run" if ext is None or smalls.empty else None)
    widest, low, _ = ext
    small = smalls.iloc[0]
    if not low["shrinkage"] >= DECAY_IDLE_MIN:
        _check(f"weight decay has acted in the smallest-D cell ({_cell_name(low)}: alone it would leave "
               f"{low['shrinkage']:.2f} of a weight, < {DECAY_IDLE_MIN:g})")
    if not (np.isclose(small["epochs"], low["epochs"]) and np.isclose(small["weight_decay"], low["weight_decay"])):
        _check(f"the small-initialisation arm ({_cell_name(small)}) is not at the smallest D ({_cell_name(low)})")
    _check(unfit(df, low, widest) or unfit(df, small, widest))
    std, sml = (pair_values(df, ACC_MERGED, cell, widest, method=PLAIN) for cell in (low, small))
    iv = interval_diff(std, sml)
    measured = (f"at {widest:g} units, D = {low['D']:.3g}: "
                f"merged accuracy {std.mean():.3f} (standard) vs {sml.mean():.3f} (initial weights "
                f"×{small['init_scale']:g}); difference {iv.text()}")
    return _exceeds(measured, low["D"], iv, widest, MIN_ACC_EFFECT, standard=std, small=sml)


@claim("M5", page="mechanism")
def claim_m5(df: pd.DataFrame) -> ClaimResult:
    """M5 (the paper's chain): at the widest width the orthogonality ratio ‖W_a z_b‖/‖W_a z_a‖ (λ=½, mean over
    layers 2..L) falls as D rises: ρ(D, mean ratio) ≤ −0.9 over the standard-initialisation cells that reach the
    widest width (tied D: one rank), and the smallest-D cell's ratio minus the largest-D cell's above ORTH_FALL_MIN
    beyond the interval of their difference (wholly at or below it: ✗); n/a as M1 (both end cells must converge)."""
    return _mechanism_row("M5", "Weight decay brings reciprocal orthogonality: as D rises, ‖W_a z_b‖/‖W_a z_a‖ "
                          "falls.",
                          f"ρ(D, orthogonality ratio) ≤ −{RHO_MIN:g} at the widest width, and the largest-D cell "
                          f"below the smallest-D cell by more than the minimum effect, {ORTH_FALL_MIN:g} "
                          f"({_M_TEST_PAIRS})", _read_m5, df)


def _read_m5(df: pd.DataFrame) -> _Reading:
    """Return M5's reading of a mechanism frame (:func:`claim_m5`); raise :class:`_NotApplicable` where
    its setting cannot be read."""
    widest, big = _largest_d(df)
    cells, per = _along_d(df, widest, lambda c: pair_values(df, ORTH_RATIO, c, widest, lam=0.5, method="trained"))
    rho = spearman(cells["tie"], [p.mean() for p in per])
    iv = interval_diff(per[0], per[-1])
    measured = (f"at {widest:g} units: ratio {per[0].mean():.3f} at D = {cells['D'].iloc[0]:.3g} → "
                f"{per[-1].mean():.3f} at D = {cells['D'].iloc[-1]:.3g} (ρ = {rho:.2f} over {len(per)} cells); "
                f"smallest minus largest D: {iv.text()}{_below_margin(iv, ORTH_FALL_MIN)}")
    return _Reading(measured, _decided(iv, trend_and_ends(rho, -1, above(iv, ORTH_FALL_MIN), RHO_MIN)),
                    cells["D"].iloc[-1], _values(iv, ORTH_FALL_MIN, rho=rho, rho_needed=-RHO_MIN,
                                                 diff=iv.mean, units=widest, n=iv.n))


def equal_d_couples(df: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """Return the couples (length-arm cell, decay-arm cell) of standard initialisation whose weight decay × length
    agree (equal D, one reached by training longer, one by a stronger weight decay); the decay arm is the length
    of the cells that reach the widest width."""
    cells = cell_table(df)
    cells = cells[cells["init_scale"] == 1.0]
    if cells.empty:
        return []
    base = cells.loc[cells["widest"].idxmax(), "epochs"]
    decay, length = cells[np.isclose(cells["epochs"], base)], cells[~np.isclose(cells["epochs"], base)]
    out = []
    for _, lc in length.iterrows():
        for _, dc in decay.iterrows():
            if np.isclose(lc["weight_decay"] * lc["epochs"], dc["weight_decay"] * dc["epochs"], rtol=1e-6):
                out.append((lc, dc))
    return out


@claim("M6", page="mechanism")
def claim_m6(df: pd.DataFrame) -> ClaimResult:
    """M6 (D is a fair axis): in every couple of equal-D cells, one reached by training longer and one by a stronger
    weight decay, plain merged accuracy at their widest common width agrees within 5 points: an equivalence test
    on the interval of the difference (pass when every couple's interval lies within ±0.05, fail when one lies
    wholly outside, else inconclusive); n/a without such couples or when an endpoint did not converge."""
    return _mechanism_row("M6", "(ours) The decay integral D is a fair axis: equal D reached by length or by "
                          "weight decay merges alike.",
                          f"|merged accuracy difference| ≤ {EQUAL_D_TOL:g} in every equal-D couple, equivalence "
                          f"({_M_TEST_PAIRS})", _read_m6, df)


def _read_m6(df: pd.DataFrame) -> _Reading:
    """Return M6's reading of a mechanism frame (:func:`claim_m6`); raise :class:`_NotApplicable` where
    its setting cannot be read."""
    couples = equal_d_couples(df)
    _check(None if couples else "no two cells of equal D, one by length and one by weight decay, were run")
    parts, states, worst = [], [], Interval(0.0, 0.0, 0.0, 0)
    for lc, dc in couples:
        units = min(lc["widest"], dc["widest"])
        _check(unfit(df, lc, units) or unfit(df, dc, units), lc["D"])
        iv = interval_diff(pair_values(df, ACC_MERGED, lc, units, method=PLAIN),
                           pair_values(df, ACC_MERGED, dc, units, method=PLAIN))
        states.append(_decided(iv, within(iv, EQUAL_D_TOL)))
        worst = max(worst, iv, key=lambda x: abs(x.mean))
        parts.append(f"{_cell_name(lc)} (D = {lc['D']:.3g}) minus {_cell_name(dc)} (D = {dc['D']:.3g}) at "
                     f"{units:g} units: {iv.text()}")
    state = FAIL if FAIL in states else PASS if all(s == PASS for s in states) else INCONCLUSIVE
    return _Reading("; ".join(parts), state, float(couples[-1][0]["D"]),
                    _values(worst, EQUAL_D_TOL, two_sided=1.0, worst=abs(worst.mean), couples=len(couples)))


def _merge_ratio(df: pd.DataFrame, cell: pd.Series, units: float) -> tuple[Interval, pd.Series, pd.Series]:
    """Return the interval over pairs of plain merged accuracy over the logit ensemble's in one cell at one width,
    and the two per-pair series."""
    merged, ens = (pair_values(df, metric, cell, units, method=PLAIN) for metric in (ACC_MERGED, ACC_ENSEMBLE))
    return interval(merged / ens), merged, ens


def largest_d_cell(df: pd.DataFrame) -> str:
    """Return, in words, the cell M1, M2, M3 and M5 read on a mechanism frame: the largest D at the widest width
    (its length, weight decay, width and D), or "none" and why they read none."""
    widest, big, why = _largest_d_gate(df)
    return f"none ({why})" if why else f"{_cell_name(big)} at {widest:g} hidden units (D = {big['D']:.3g})"


def short_merge(df: pd.DataFrame) -> Interval:
    """Return plain merged accuracy over the logit ensemble's at the widest width in the smallest-D cell of
    standard initialisation, where weight decay has barely acted (an empty interval when it has acted there, or an
    endpoint did not converge): how well wide networks merge before the paper's mechanism can act."""
    ext = _extremes(df)
    if ext is None or not ext[1]["shrinkage"] >= DECAY_IDLE_MIN or unfit(df, ext[1], ext[0]) is not None:
        return interval([])
    return _merge_ratio(df, ext[1], ext[0])[0]


def regime_cells(tr: pd.DataFrame, metric: str, hidden: bool = False, **filters) -> tuple[int, pd.DataFrame]:
    """Return the widest width trained in every (length, weight decay) cell of a training-regime frame, and per
    cell there: the mean decay integral D, its tie (:func:`~lmcbook.claims.verdicts.ties`), and the seed mean and spread
    of ``metric`` (over the hidden-to-hidden layers only, with ``hidden``)."""
    cells = tr.groupby(["epochs", "weight_decay"])["hidden_units"].agg(lambda u: set(u.dropna()))
    units = int(max(set.intersection(*cells)))
    rows = []
    for (e, wd), cell in tr[tr["hidden_units"] == units].groupby(["epochs", "weight_decay"]):
        st = cell_stats(hidden_to_hidden(cell) if hidden else cell, metric, **filters)
        d = float(select(cell, DECAY_INTEGRAL)["value"].mean())
        rows.append({"epochs": e, "weight_decay": wd, "D": d, "mean": float(st["mean"].iloc[0]),
                     "spread": float(st["spread"].iloc[0])})
    out = pd.DataFrame(rows)
    return units, out.assign(tie=ties(out["D"])).sort_values("D", ignore_index=True)


def _regime_claim(cid: str, statement: str, tr: pd.DataFrame, metric: str, sign: int, what: str,
                  **kw) -> ClaimResult:
    """A claim that ``metric`` rises (+1) or falls (−1) with D across the cells at the widest common width; cells
    whose D tie (:func:`~lmcbook.claims.verdicts.ties`) are one point of the trend (the mean of their means), and an end
    of the trend pools the replicates of its tied cells."""
    units, st = regime_cells(tr, metric, **kw)
    points = st.groupby("tie").agg(D=("D", "mean"), mean=("mean", "mean"), cells=("D", "size"))
    rho = spearman(points.index, points["mean"])
    lo, hi = points.iloc[0], points.iloc[-1]

    def reps(point: float) -> np.ndarray:
        out = []
        for _, cell in st[st["tie"] == point].iterrows():
            d = tr[(tr["hidden_units"] == units) & (tr["epochs"] == cell["epochs"])
                   & np.isclose(tr["weight_decay"], cell["weight_decay"])]
            d = select(hidden_to_hidden(d) if kw.get("hidden") else d, metric,
                       **{k: v for k, v in kw.items() if k != "hidden"})
            out.append(d.groupby(replicate(d))["value"].mean().to_numpy())
        return np.concatenate(out)

    ends, diff = _ends_state(sign, reps(points.index[-1]), reps(points.index[0]))
    state = _trend_verdict(rho, sign, ends, diff, len(points))
    tied = int((points["cells"] > 1).sum())
    per_model = replicate(tr[tr["metric"] == metric]) == "seed"  # its replicates are models, not pairs
    return ClaimResult(cid, "width", statement,
                       f"at {units} units, ρ(D, {what}) = {rho:.2f} over {len(points)} values of D"
                       + (f" ({tied} shared by cells of equal D)" if tied else "")
                       + f"; {what} {lo['mean']:.3f} at D = {lo['D']:.3g} → {hi['mean']:.3f} at D = {hi['D']:.3g}; "
                       f"largest-D minus smallest-D cell {diff.text()} "
                       f"({diff.n} {'models' if per_model else 'pairs'})",
                       f"ρ(D, {what}) {'≥' if sign > 0 else '≤'} {sign * RHO_MIN:g} over the (length, weight decay) "
                       f"cells at the widest common width (cells whose D differ by less than {D_TIE_RTOL:.1%} are one "
                       f"value of D), and the largest-D cell {'above' if sign > 0 else 'below'} the smallest-D "
                       "cell by its 95% bootstrap interval", state, "mechanism",
                       values=_values(diff, 0.0, rho=rho, rho_needed=sign * RHO_MIN,
                                      units=units, lo_d=lo["mean"], hi_d=hi["mean"],
                                      ends=diff.mean, ends_lo=diff.lo, ends_hi=diff.hi, n_d=len(points),
                                      **{"n_models" if per_model else "n": diff.n}))


# ---- What the mechanism rows conclude ----
# What the mechanism rows conclude: the hypotheses they decide between (:data:`HYPOTHESES`), each one's state per
# data set, the outcome the pages' sentences choose, the conclusion table (which account explains which observation),
# and the trained cell whose accuracy barrier comes closest to the width paper's.

#: The hypotheses the mechanism study decides between, and the M rows each reads.
HYPOTHESES = {
    "P": "the paper's account: weight decay gives low rank, reciprocal orthogonality and LEWC, and wide networks "
         "then merge without permutations",
    "H1": "near initialisation: in short training the width effect comes from the two random initialisations",
    "H2": "permutation collapse: weight decay drives the two networks to one solution up to a permutation, so plain "
          "averaging fails at large D where weight matching succeeds, and matching gains more as D grows (M2)",
    "H3": "width truncation: with large D, plain merging keeps improving with width beyond the widths where "
          "it first fails (M3, on the decay arm's widths; M1 says whether it has recovered)",
    "H4": "data: digits' 64 input dimensions force shared features, and on 784-dimensional MNIST large D behaves "
          "as the paper says",
}
SUPPORTED, CONTRADICTED, UNDECIDED = "supported", "contradicted", "undecided"
REPEATS = "repeats"  #: a hypothesis whose deciding rows repeat an earlier data set's (:func:`repeated_hypotheses`)
#: The M rows each hypothesis' state can read (:func:`hypothesis_states`); which of them decide it depends on the
#: verdicts (:func:`deciding_rows`).
HYPOTHESIS_ROWS = {"P": ("M1", "M5"), "H1": ("M4",), "H2": ("M1", "M2"), "H3": ("M3",)}


def deciding_rows(h: str, rows: dict[str, ClaimResult]) -> list[ClaimResult]:
    """Return the rows (of ``rows``, by id) that decide hypothesis ``h``'s state as :func:`hypothesis_states` reads
    them: P contradicted rests on M1 alone (a failed M1); H2 contradicted on the rows that contradict it (a passed
    M1, a failed M2: either alone does, so where both do, both are its evidence); otherwise every row of
    :data:`~lmcbook.claims.mechanism.HYPOTHESIS_ROWS` the data set has."""
    state = {k: r.state for k, r in rows.items()}
    ids: tuple[str, ...] = HYPOTHESIS_ROWS[h]
    if h == "P" and state.get("M1") == FAIL:
        ids = ("M1",)
    elif h == "H2":
        ids = tuple(i for i, s in (("M1", PASS), ("M2", FAIL)) if state.get(i) == s) or ids
    return [rows[i] for i in ids if i in rows]


def repeated_hypotheses(rows_by_label: dict[str, list[ClaimResult]]) -> dict[str, dict[str, str]]:
    """Return, per label, the hypotheses whose deciding rows (:func:`deciding_rows`) all repeat an earlier label's
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.repeats`), each with what it repeats in words
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.repeat_phrase`: "the same runs as X", or the same cells and seeds
    trained again): their state there is not a second data set's evidence."""
    out: dict[str, dict[str, str]] = {}
    for label, rows in rows_by_label.items():
        by_id = {r.id: r for r in rows}
        for h in HYPOTHESIS_ROWS:
            read = deciding_rows(h, by_id)
            if read and all(r.repeats for r in read):
                out.setdefault(label, {})[h] = read[0].repeat_phrase
    return out


def hypothesis_states(rows: Iterable[ClaimResult]) -> dict[str, str]:
    """Return, from one data set's M rows, whether each of P, H1, H2 and H3 is supported, contradicted or undecided.

    P: M1 and M5 pass (supported), M1 fails (contradicted).  H1: M4 passes or fails.
    H2: M1 fails and M2 passes (supported); M1 passes or M2 fails (contradicted).  H3: M3 passes or fails.
    Anything else (inconclusive or n/a rows) leaves the hypothesis undecided.
    """
    m = {r.id: r.state for r in rows if r.id.startswith("M")}

    def rule(sup: bool, con: bool) -> str:
        return SUPPORTED if sup else CONTRADICTED if con else UNDECIDED

    return {"P": rule(m.get("M1") == PASS and m.get("M5") == PASS, m.get("M1") == FAIL),
            "H1": rule(m.get("M4") == PASS, m.get("M4") == FAIL),
            "H2": rule(m.get("M1") == FAIL and m.get("M2") == PASS, m.get("M1") == PASS or m.get("M2") == FAIL),
            "H3": rule(m.get("M3") == PASS, m.get("M3") == FAIL)}


def data_hypothesis(digits: dict[str, str], mnist: dict[str, str] | None) -> str:
    """Return H4's state: supported when the paper's account holds on MNIST and is contradicted on digits,
    contradicted when it is contradicted on MNIST too, else undecided (and undecided without an MNIST run)."""
    if mnist is None:
        return UNDECIDED
    if mnist["P"] == SUPPORTED and digits["P"] == CONTRADICTED:
        return SUPPORTED
    return CONTRADICTED if mnist["P"] == CONTRADICTED else UNDECIDED


def source_label(dataset: str | None, source: str | None, short: dict[str, str] | None = None) -> str:
    """Return how the book names the runs of a set of rows: the data set (short name), and "this build" or the
    reference run's name."""
    name = (short or {}).get(dataset or "", dataset or "runs")
    return f"{name} (this build)" if source is None else f"{name} (reference {source})"


def decide(rows_by_label: dict[str, list[ClaimResult]]) -> dict[str, dict[str, str]]:
    """Return each data set's hypothesis states (:func:`hypothesis_states`) with H4 added: this build's digits rows
    against the MNIST rows (:func:`data_hypothesis`), which decide it only where every MNIST source gives P the same
    state (so that the order the sources come in never changes H4)."""
    states = {k: hypothesis_states(v) for k, v in rows_by_label.items()}
    datasets = {k: next((r.dataset for r in v if r.dataset), None) for k, v in rows_by_label.items()}
    sources = {k: next((r.source for r in v), None) for k, v in rows_by_label.items()}
    digits = next((states[k] for k in states if datasets[k] == "digits" and sources[k] is None), None)
    ps = {states[k]["P"] for k in states if (datasets[k] or "").startswith("mnist")}
    mnist = None if not ps else {"P": ps.pop() if len(ps) == 1 else UNDECIDED}
    for s in states.values():
        s["H4"] = data_hypothesis(digits, mnist) if digits is not None else UNDECIDED
    return states


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


CONCLUSIONS = ("contradicted", "supported", "mixed", "undecided")  #: the outcomes :func:`conclusion` chooses among


def conclusion(states: dict[str, dict[str, str]],
               repeated: dict[str, dict[str, str]] | None = None) -> tuple[str, dict[str, str]]:
    """Return which account the data support, from :func:`hypothesis_states` per data set (keyed by the data set's
    name as the book writes it): one of ``CONCLUSIONS``, and the lists the pages' sentences glue.  A hypothesis
    whose state on a data set repeats an earlier one's runs (``repeated``: :func:`repeated_hypotheses`) is left out
    there: the same runs are not a second data set's evidence.

    The outcome is ``contradicted`` when P is contradicted on some data set and supported on none, ``supported``
    in the reverse case, ``mixed`` when both occur, and ``undecided`` when P is decided nowhere.  The lists:
    ``against_sets`` and ``for_sets`` (the data sets that contradict or support P), ``open_sets`` (the others, or
    "none"), and ``alternatives``: which of H1-H3 each data set that contradicts P supports ("none of H1-H3" where
    one is refuted and none supported; "H1-H3 all undecided"; "none of H1-H3 decided by its own runs" where each is
    undecided or repeats an earlier data set's runs).
    The sentences themselves are the pages' Markdown, one per outcome (``page.choose``).
    """
    rep = repeated or {}
    own = {n: s for n, s in states.items() if "P" not in rep.get(n, {})}
    against = [n for n, s in own.items() if s["P"] == CONTRADICTED]
    for_p = [n for n, s in own.items() if s["P"] == SUPPORTED]
    rest = [n for n in own if n not in against and n not in for_p]
    groups: dict[tuple[str, ...], list[str]] = {}
    for n in against:  # data sets that support the same alternatives share a clause
        hs = tuple(h for h in ("H1", "H2", "H3") if states[n][h] == SUPPORTED and h not in rep.get(n, {}))
        own_states = [states[n][h] for h in ("H1", "H2", "H3") if h not in rep.get(n, {})]
        if not hs and CONTRADICTED not in own_states:  # none supported because none is decided: not refuted
            hs = (UNDECIDED,) if len(own_states) == 3 else (REPEATS,)
        groups.setdefault(hs, []).append(n)
    named = {(UNDECIDED,): "H1-H3 all undecided", (REPEATS,): "none of H1-H3 decided by its own runs",
             (): "none of H1-H3"}
    alternatives = "; ".join(f"{named.get(hs) or _join(list(hs))} on {_join(where)}" for hs, where in groups.items())
    outcome = ("mixed" if against and for_p else "contradicted" if against else "supported" if for_p
               else "undecided")
    return outcome, {"against_sets": _join(against) if against else "none", "for_sets": _join(for_p) if for_p
                     else "none", "open_sets": _join(rest) if rest else "none", "alternatives": alternatives or "none"}


#: The mechanism's observations, in the conclusion table's order (:func:`conclusion_table`): each one's row title and
#: its short name in the last row, :data:`~lmcbook.claims.mechanism.NONE_EXPLAINS`.
OBSERVATIONS = {
    "short": ("After short training (smallest D, weight decay idle), wide networks' plain merge over their ensemble",
              "the merge after short training"),
    "large_d": ("Once weight decay has acted (largest D), plain averaging of wide networks", "the merge at large D"),
    "width": ("At the largest D, merging as width grows", "the width trend at large D"),
    "orth": ("Reciprocal orthogonality as D grows", "the orthogonality ratio"),
}
NONE_EXPLAINS = "What no account explains"  #: the conclusion table's last row


def _explained(r: ClaimResult | None, passed: str, failed: str) -> str:
    """Return ``passed`` or ``failed`` by the row's verdict (each naming the row), else "undecided"."""
    if r is None:
        return "undecided (not scored)"
    return {PASS: f"{passed} ({r.id} ✓)", FAIL: f"{failed} ({r.id} ✗)"}.get(r.state, f"undecided ({r.id} {r.mark})")


def _near_init(short: Interval, m4: ClaimResult | None) -> str:
    """Return who explains how wide networks merge after short training: H1 when a small initialisation destroys
    it (M4 ✓); none when the merge is near the ensemble and a small initialisation leaves it intact (M4 ✗)."""
    seen = at_least(short, MERGED_OVER_ENSEMBLE_MIN, MIN_PAIRS)
    text = f"{short.text()}: " if short.n else ""
    if seen == FAIL:
        return text + "not near the ensemble"
    if seen == PASS and m4 is not None and m4.state == FAIL:
        return (text + "none: a small initialisation leaves it intact, so H1 is refuted (M4 ✗), and weight decay has "
                "not acted, so the paper's account does not reach it")
    return text + _explained(m4, "H1, near initialisation: a small initialisation destroys it",
                             "H1 is refuted: a small initialisation leaves it intact")


#: The M rows each observation of :data:`OBSERVATIONS` is read from (the short-training merge is M4's standard cell;
#: the large-D merge reads M2 only where M1 fails).
OBSERVATION_ROWS = {"short": ("M4",), "large_d": ("M1", "M2"), "width": ("M3",), "orth": ("M5",)}


def _observe(rows: dict[str, ClaimResult], short: Interval) -> dict[str, str]:
    """Return, for one data set, which account explains each observation of ``OBSERVATIONS``, from its M rows and
    :func:`short_merge`; an alternative whose row fails is *refuted*; and the observations none explains.  An
    observation whose every row repeats an earlier label's runs says so first."""
    m1 = rows.get("M1")
    large = _explained(m1, "merges near the ensemble: the paper's account", "falls short of the ensemble")
    if m1 is not None and m1.state == FAIL:
        large += "; " + _explained(rows.get("M2"), "H2, permutation collapse: the gain of weight matching grows with D",
                                   "none: H2 is refuted")
    out = {"short": _near_init(short, rows.get("M4")), "large_d": large,
           "width": _explained(rows.get("M3"), "still improves up to the widest width: H3, width truncation",
                               "no longer improves by the minimum effect: H3 is refuted"),
           "orth": _explained(rows.get("M5"), "falls: the paper's chain",
                              "falls less than the minimum effect, or rises: evidence against the paper's chain")}
    none = [OBSERVATIONS[k][1] for k, v in out.items() if "none:" in v]
    for k, ids in OBSERVATION_ROWS.items():
        if k == "large_d" and (m1 is None or m1.state != FAIL):
            ids = ("M1",)  # M2 is read only where M1 fails
        read = [rows[i] for i in ids if i in rows]
        if read and all(r.repeats for r in read):
            out[k] = f"{read[0].repeat_phrase}: {out[k]}"
    open_ = [OBSERVATIONS[k][1] for k, v in out.items() if "undecided" in v]
    if none:  # what no account explains, then, apart, what is still undecided
        said = "; ".join(none) + (f"; undecided: {_join(open_)}" if open_ else "")
    else:
        said = f"nothing refuted (undecided: {_join(open_)})" if open_ else "nothing"
    return {**out, "none": said}


def conclusion_table(rows_by_label: dict[str, list[ClaimResult]],
                     frames_by_label: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Return the mechanism's conclusion as a table: one row per observation (``OBSERVATIONS``, then
    :data:`~lmcbook.claims.mechanism.NONE_EXPLAINS`), one column per data set (the keys of ``rows_by_label``),
    each cell the account that explains it there, chosen from the verdicts of the M rows (an alternative whose test or
    equivalence branch fails is said to be refuted)."""
    cols = {label: _observe({r.id: r for r in rows if r.id.startswith("M")}, short_merge(frames_by_label[label]))
            for label, rows in rows_by_label.items()}
    return pd.DataFrame(cols).rename(index={**{k: v[0] for k, v in OBSERVATIONS.items()}, "none": NONE_EXPLAINS})


def barrier_cells(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Return one row per trained cell of the given frames (by label: the width pages' and the mechanism frames, this
    build's and the references'): its label, length, weight decay, initial-weight factor and width, the plain merge's
    accuracy barrier (max over λ; mean over pairs, its interval and pairs) and its distance from the width paper's
    barrier, PAPER_MLP_ACC_BARRIER, with the cell's decay integral ``D`` and ``weight_left``, the share of a weight
    that weight decay alone (momentum included: the ``decay_shrinkage`` metric) would leave; means over runs, NaN
    where the frame records none."""
    keys = ["epochs", "weight_decay", "init_scale", "hidden_units"]
    out = []
    for label, frame in frames.items():
        d, dec, shr = (frame[frame["metric"] == m] for m in (ACC_BARRIER, DECAY_INTEGRAL, DECAY_SHRINKAGE))
        if "method" in d:
            d = d[d["method"].isna() | (d["method"] == PLAIN)]
        d, dec, shr = (x.assign(init_scale=x["init_scale"].fillna(1.0) if "init_scale" in x else 1.0)
                       for x in (d, dec, shr))
        decay, left = (x.groupby(keys)["value"].mean() if len(x) and set(keys) <= set(x) else pd.Series(dtype=float)
                       for x in (dec, shr))
        for cell, g in d.groupby(keys):
            iv = interval(g.groupby("pair")["value"].mean())
            out.append({"label": label, **dict(zip(keys, cell)), "barrier": iv.mean, "lo": iv.lo, "hi": iv.hi,
                        "pairs": iv.n, "distance": abs(iv.mean - PAPER_MLP_ACC_BARRIER),
                        "D": float(decay.get(cell, np.nan)), "weight_left": float(left.get(cell, np.nan))})
    return pd.DataFrame(out)


def closest_barrier(frames: dict[str, pd.DataFrame]) -> dict[str, object] | None:
    """Return the cell of :func:`barrier_cells` whose accuracy barrier comes closest to the width paper's (about half
    a point), among the cells with an interval (two pairs or more), with ``setting`` (it in words) and ``cells`` (how
    many were searched), or None without any such cell.  Beside it, the smallest barrier among the cells where weight
    decay has acted (``weight_left`` ≤ DECAY_ACTED_MAX): ``acted_barrier`` (with ``acted_lo``, ``acted_hi``,
    ``acted_weight_left`` and ``acted_setting``; absent when no cell records such a D) out of ``acted_cells``."""
    cells = barrier_cells(frames)
    cells = cells[cells["pairs"] >= MIN_REPLICATES] if len(cells) else cells
    if cells.empty:
        return None
    best = cells.loc[cells["distance"].idxmin()]
    acted = cells[cells["weight_left"] <= DECAY_ACTED_MAX]
    low = acted.loc[acted["barrier"].idxmin()] if len(acted) else None
    return {**best.to_dict(), "setting": _barrier_setting(best), "cells": len(cells),
            "acted_cells": len(acted), **({} if low is None else {
                "acted_barrier": low["barrier"], "acted_lo": low["lo"], "acted_hi": low["hi"],
                "acted_weight_left": low["weight_left"], "acted_setting": _barrier_setting(low)})}


def _barrier_setting(cell: pd.Series) -> str:
    """Return a cell of :func:`barrier_cells` in words."""
    init = f", initial weights ×{cell['init_scale']:g}" if cell["init_scale"] != 1.0 else ""
    return (f"{cell['label']}: {cell['hidden_units']:g} hidden units, {cell['epochs']:g} epochs at weight decay "
            f"{cell['weight_decay']:g}{init}")


def hypotheses_markdown(states: dict[str, dict[str, str]], repeated: dict[str, dict[str, str]] | None = None) -> str:
    """Return a Markdown table of each hypothesis' state (supported, contradicted, undecided) per data set; a state
    that repeats an earlier data set's runs (``repeated``: :func:`lmcbook.claims.mechanism.repeated_hypotheses`) says
    so."""
    rep = repeated or {}

    def cell(n: str, h: str) -> str:
        state = states[n].get(h, "—")
        return f"{state} ({rep[n][h]})" if h in rep.get(n, {}) else state

    table = pd.DataFrame({n: {f"**{h}**: {text}": cell(n, h) for h, text in HYPOTHESES.items()} for n in states})
    return markdown_table(table.rename_axis("hypothesis"))


def mechanism_numbers(long: pd.DataFrame) -> dict[str, Any]:
    """Return the numbers the mechanism page quotes, by glue key: at the decay arm's widest width (``units``), in its
    smallest-D (``_lo``) and largest-D (``_hi``) cells, each measure's mean over pairs, the D values, the fraction of a
    weight that weight decay alone leaves (``shrink``), and the distance from initialisation (``dist``); the
    largest-D cell's length and weight decay
    (``epochs_hi``, ``wd_hi``), and the widest width of the cells trained longer than it (``length_widest``, 0 if
    none).  The accuracies and the distance read the whole network; LEWC, LLFC and orthogonality read λ = ½; the
    ranks read the hidden-to-hidden matrices."""
    cells = cell_table(long)
    std = cells[cells["init_scale"] == 1.0]
    widest = std["widest"].max()
    at = std[std["widest"] == widest].sort_values("D")
    lo, hi = at.iloc[0], at.iloc[-1]
    longer = std[std["epochs"] > hi["epochs"]]  # the length arm: the same weight decays, trained longer
    hidden = long[(long["layer"] > 1) & (long["layer"] < long["layer"].max())]

    def lo_hi(metric: str, frame: pd.DataFrame = long, **filters: Any) -> tuple[float, float]:
        """The metric's mean over pairs in the smallest-D and in the largest-D cell, at the widest width."""
        return tuple(float(select(in_cell(frame, cell, widest), metric, **filters).groupby("pair")["value"].mean()
                           .mean()) for cell in (lo, hi))

    acc_plain = lo_hi("acc_merged", method="none")
    acc_matched = lo_hi("acc_merged", method="weight_matching")
    acc_ensemble = lo_hi("acc_ensemble", method="none")
    orth = lo_hi("orth_ratio", method="trained", lam=0.5)
    orth_untrained = lo_hi("orth_ratio", method="untrained", lam=0.5)
    lewc = lo_hi("lewc_rel_err", method="trained", lam=0.5)
    llfc_matched = lo_hi("llfc_rel_err", method="weight_matched", lam=0.5)
    rank = lo_hi("rel_effective_rank", hidden, method="trained")
    rank_untrained = lo_hi("rel_effective_rank", hidden, method="untrained")
    delta_stable_rank = lo_hi("delta_rel_stable_rank", hidden)
    dist = lo_hi("init_distance", long[long["layer"].isna()])
    return {"units": int(widest), "d_lo": float(lo["D"]), "d_hi": float(hi["D"]),
            "shrink_lo": float(lo["shrinkage"]), "shrink_hi": float(hi["shrinkage"]),
            "epochs_hi": float(hi["epochs"]), "wd_hi": float(hi["weight_decay"]),
            "length_widest": int(longer["widest"].max()) if len(longer) else 0,
            "acc_plain_lo": acc_plain[0], "acc_plain_hi": acc_plain[1],
            "acc_matched_lo": acc_matched[0], "acc_matched_hi": acc_matched[1],
            "acc_ensemble_lo": acc_ensemble[0], "acc_ensemble_hi": acc_ensemble[1],
            "orth_lo": orth[0], "orth_hi": orth[1],
            "orth_untrained_lo": orth_untrained[0],
            "lewc_lo": lewc[0], "lewc_hi": lewc[1],
            "llfc_matched_lo": llfc_matched[0], "llfc_matched_hi": llfc_matched[1],
            "rank_lo": rank[0], "rank_hi": rank[1],
            "rank_untrained_lo": rank_untrained[0],
            "delta_stable_rank_lo": delta_stable_rank[0], "delta_stable_rank_hi": delta_stable_rank[1],
            "dist_lo": dist[0], "dist_hi": dist[1]}


def short_merge_words(frames: dict[str, pd.DataFrame], repeats: Iterable[str] = ()) -> str:
    """Return, in words, how well wide networks merge before weight decay has acted, per mechanism frame (by its
    label): plain merged accuracy over the logit ensemble's at the widest width in the smallest-D cell
    (:func:`lmcbook.claims.mechanism.short_merge`), its 95% interval and its pairs; "none" where no frame has that cell.
    ``repeats``: the labels whose M4, which reads that cell, repeats an earlier row (the same cells and seeds
    trained again: :func:`lmcbook.claims.mark_repeats`); each says so."""
    said: dict[str, list[str]] = {}  # by the interval's text: runs that share the cell (the same runs) are said once
    again = set(repeats)
    for label, frame in frames.items():
        iv = short_merge(frame)
        if iv.n:
            said.setdefault(f"{iv.text()} ({iv.n} pairs)", []).append(label)
    parts = []
    for text, labels in said.items():
        name = " = ".join(labels) + (" (the same runs)" if len(labels) > 1 else "")
        name += " (a repeat: an earlier one's cells and seeds, trained again)" if again & set(labels) else ""
        parts.append(f"{name}, {text}")
    return "; ".join(parts) or "none"
