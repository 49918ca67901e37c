"""The noise family: the noise paper's claims N1–N7 (and the book's N8–N9) on the spawn-and-merge studies
(noise_scale's η × B grid, noise_components' weight decay, learning-rate pairs, momentum and augmentation sweeps),
and the regime map.

A noise cell (an optimizer setting) is read unless it *failed*: a run of it diverged (a non-finite loss), or the
weaker child of one of its pairs ended below NOISE_FAILED_TRAIN_ACC training accuracy (near chance).  A cell that
trains less well because its noise is high stays: it is the descending side of the paper's curve.  The old
convergence rule (the weaker child at NOISE_CONVERGED_TRAIN_ACC or more) removed that side; it survives as one
threshold of the sensitivity table (:func:`lmcbook.claims.noise.rule_sensitivity`) and as the legacy protocol's
reason to train a cell longer.  Every row has a minimum effect, NOISE_MIN_EFFECT: an interval wholly below it decides
an absence (✗, "no gain of the paper's size in this setting"), so a flat result is not left *inconclusive*.  N1, N3,
N4, N5 and N7 decide only from intervals over at least MIN_PAIRS pairs in every cell they read; N2 and N6 from a fit
(NOISE_MIN_CELLS cells, 3 values of S and η).  When each was fixed: :mod:`lmcbook.claims.thresholds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import f_oneway

from ..schema import DIVERGED, GAIN, NOISE_SCALE, NOISE_SCALE_SQ, TRAIN_ACC_MIN, TRAIN_STEPS, replicate
from ..stats import (
    CONFIDENCE,
    Interval,
    above,
    at_most,
    both,
    fit_coefficient,
    interval,
    interval_diff,
    interval_of,
    quadratic_fit,
    t_interval,
    within,
)
from .thresholds import (
    COLLAPSE_RATIO_MAX,
    EDGE_RESOLUTION,
    MAP_MIN_PAIRS,
    MATCHED_ACC_TOL,
    MIN_PAIRS,
    NOISE_B_EFFECT,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    PICK_ORDER,
    STABLE_ACC_MARGIN,
)
from .verdicts import FAIL, INCONCLUSIVE, NA, PASS, TABLE_MARKS, ClaimResult, _values, claim

#: The measured text of a row whose gains all lie below NOISE_MIN_EFFECT, and of a row whose difference does.
ABSENT = "no gain of the paper's size in this setting"
ABSENT_EFFECT = "no effect of the paper's size in this setting"
#: The measured text of N4 where its two cells train to different accuracies (issue 49: it no longer counts among the
#: rows fixed before their results).
CANNOT_DECIDE = "this sweep cannot decide it"


def noise_pairs(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Return one row per (cell, pair) of a noise selection: ``keys``, ``pair`` and every metric as a column."""
    rep = replicate(df)
    wide = df.pivot_table(index=keys + [rep], columns="metric", values="value").reset_index()
    return wide.rename(columns={rep: "pair"})


def noise_cells(pairs: pd.DataFrame, keys: list[str], rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return one row per cell of :func:`noise_pairs`' frame: pairs ``n``, mean gain, the weaker child's lowest and
    mean training accuracy, ``kept`` (every pair's weaker child reached ``rule``, the rule's threshold, and no run
    diverged; False where the training accuracy is not recorded) and ``diverged`` (a run of the cell diverged)."""
    acc = pairs[TRAIN_ACC_MIN] if TRAIN_ACC_MIN in pairs else pd.Series(np.nan, index=pairs.index)
    g = pairs.assign(_acc=acc).groupby(keys)
    out = pd.DataFrame({"n": g.size(), "gain": g[GAIN].mean(), "train_acc_min": g["_acc"].min(),
                        "train_acc_mean": g["_acc"].mean()})
    out["diverged"] = g[DIVERGED].max().fillna(0).astype(bool) if DIVERGED in pairs else False
    out["kept"] = (out["train_acc_min"] >= rule) & ~out["diverged"]
    return out


def absent(*ivs: Interval, effect: float = NOISE_MIN_EFFECT) -> bool:
    """Return True when one of ``ivs`` decides an absence: it has MIN_PAIRS replicates and lies wholly below
    ``effect`` (a gain, or a difference of gains, smaller than the paper's size)."""
    return any(iv.n >= MIN_PAIRS and iv.decided and iv.hi < effect for iv in ivs)


def _smaller(*ivs: Interval) -> str:
    """Return the note of a difference row whose interval decides an effect smaller than the paper's, or "" (none
    does, or one lies wholly at or below 0: then the ✗ is a plain reversal, and its numbers say so)."""
    reversed_ = any(iv.n >= MIN_PAIRS and iv.decided and iv.hi <= 0 for iv in ivs)
    return f"; {ABSENT_EFFECT}" if absent(*ivs) and not reversed_ else ""


def sized(state: str, *ivs: Interval) -> str:
    """Return ``state``, unless an interval of ``ivs`` decides an absence (:func:`absent`): then ✗."""
    return FAIL if absent(*ivs) else state


def _cell_intervals(pairs: pd.DataFrame, keys: list[str], cells: list) -> list[Interval]:
    return [interval(_gains(pairs, keys, c if isinstance(c, tuple) else (c,))) for c in cells]


def cell_mean_fit(pairs: pd.DataFrame, keys: list[str]) -> dict[str, float] | None:
    """Return the quadratic fit (:func:`lmcbook.stats.quadratic_fit`) of the kept cells' mean gains on log10 S,
    as N2 reads them, or None with fewer than NOISE_MIN_CELLS kept cells or 3 values of S (a frame of
    :func:`noise_pairs` or of the noise study, one row per cell and pair)."""
    cells = noise_cells(pairs, keys)
    means = pairs.groupby(keys)[[NOISE_SCALE, GAIN]].mean()[cells["kept"]]
    if len(means) < NOISE_MIN_CELLS or means[NOISE_SCALE].nunique() < 3:
        return None
    return quadratic_fit(np.log10(means[NOISE_SCALE]), means[GAIN])


def noise_grid_cells(frame: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return the η × B grid cells of a noise_scale CSV (:func:`noise_cells`, at the rule's threshold ``rule``) with
    each cell's S and training steps (NaN where a CSV does not record them)."""
    keys = ["lr", "batch_size"]
    pairs = noise_pairs(frame[frame["method"] == "grid"], keys)
    first = pairs.reindex(columns=keys + [NOISE_SCALE, TRAIN_STEPS]).groupby(keys).first()
    return noise_cells(pairs, keys, rule).join(first)


def mark_kept(pairs: pd.DataFrame, keys: list[str], rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return a noise frame (one row per cell and pair) with a ``kept`` column: its cell passed the rule
    (:func:`noise_cells`).  The figures mark the cells that did not."""
    return pairs.merge(noise_cells(pairs, keys, rule)["kept"].reset_index(), on=keys)


def grid_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a noise page's η × B grid as pairs (:func:`noise_pairs` of its ``grid`` rows), each cell marked kept or
    excluded by the rule (:func:`mark_kept`)."""
    keys = ["lr", "batch_size"]
    return mark_kept(noise_pairs(frame[frame["method"] == "grid"], keys), keys)


def _rule_text(cells: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> str:
    n_out, n_div = int((~cells["kept"]).sum()), int(cells["diverged"].sum()) if "diverged" in cells else 0
    what = ("failed: a non-finite loss, or the weaker child's training accuracy < "
            f"{rule:g}" if rule <= NOISE_FAILED_TRAIN_ACC else f"the weaker child's training accuracy < {rule:g}")
    return (f"{n_out} of {len(cells)} cells excluded by the rule ({what}" + (f"; {n_div} of them diverged" if n_div
                                                                            else "") + ")")


def _noise_row(cid: str, page: str, statement: str, measured: str, test: str, state: str,
               values: dict[str, float] | None = None) -> ClaimResult:
    return ClaimResult(cid, "noise", statement, measured, test, state, page, values=values or {})


def _gains(pairs: pd.DataFrame, keys: list[str], cell: tuple, half: int | None = None) -> pd.Series:
    sel = pairs[np.logical_and.reduce([np.isclose(pairs[k], v) if isinstance(v, float) else pairs[k] == v
                                       for k, v in zip(keys, cell)])]
    if half is not None:
        sel = sel[sel["pair"].astype(int) % 2 == half]
    return sel[GAIN]


def pair_failures(pairs: pd.DataFrame, keys: list[str], rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return one row per cell of a :func:`noise_pairs` frame: its pairs ``n``, how many of them *failed*
    (``failed``: a run diverged, or the weaker child ended below ``rule`` training accuracy; a pair whose training
    accuracy is not recorded counts as failed) and whether the cell is *stable* (fewer than half its pairs failed)."""
    g = pairs.assign(_failed=_failed(pairs, rule)).groupby(keys)
    out = pd.DataFrame({"n": g.size(), "failed": g["_failed"].sum().astype(int)})
    out["stable"] = out["failed"] < out["n"] / 2
    return out


def _ok_gains(pairs: pd.DataFrame, keys: list[str], cell: tuple, rule: float, half: int | None = None) -> pd.Series:
    """Return the gains of a cell's pairs that did not fail, of one half if ``half``."""
    return _gains(pairs[~_failed(pairs, rule)], keys, cell, half)


def _failed(pairs: pd.DataFrame, rule: float) -> pd.Series:
    """Return, per pair, whether it failed: a run diverged, or the weaker child's training accuracy is below ``rule``
    or not recorded."""
    acc = pairs[TRAIN_ACC_MIN] if TRAIN_ACC_MIN in pairs else pd.Series(np.nan, index=pairs.index)
    return ~(acc >= rule) | (pairs[DIVERGED].fillna(0).astype(bool) if DIVERGED in pairs else False)


def _failures_text(fails: pd.DataFrame) -> str:
    """Return how many pairs failed in each cell where any did, in words."""
    hit = fails[fails["failed"] > 0]
    if hit.empty:
        return f"no pair failed in any of the {len(fails)} cells"
    cells = "; ".join(f"η {c[0]:g}, B {c[1]:g}: {int(r.failed)} of {int(r.n)}" for c, r in hit.iterrows())
    what = "pairs failed (a run diverged, or the weaker child below the rule)"
    return f"{what} in {len(hit)} of {len(fails)} cells: {cells}"


@claim("N1", page="noise_scale")
def claim_n1(noise: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> list[ClaimResult]:
    """N1 (one row per spawn point of the full grid), as the noise paper states it: the gain rises with S to an
    optimum, and beyond it falls or training fails.  Read by a split half (against the winner's curse): the optimum
    is chosen on the even pairs, among the *stable* cells (fewer than half their pairs failed:
    :func:`lmcbook.claims.noise.pair_failures`), and read on the odd ones.  Failed pairs are never merged into a
    cell's gain, and a cell is never dropped because some of its pairs failed: its failures count as the collapse the
    paper names on the high-noise side ("training becomes unstable and performance collapses").

    - *Rise*: the optimum's gain minus the lowest-S stable cell's (of several there, the best on the even pairs)
      above NOISE_MIN_EFFECT by its interval (✗ when it lies wholly at or below it; an optimum chosen at the lowest
      S does not rise: ✗ if it is above the best other cell by its interval, else inconclusive).
    - *Beyond*: a cell of larger S that is not stable (half or more of its pairs failed: training fails there; one
      failed pair is not enough), or else the optimum's gain minus the largest-S stable cell's above NOISE_MIN_EFFECT
      by its interval; with no cell of larger S, inconclusive (the grid does not reach past the optimum).  The fall
      to the largest-S stable cell is reported either way.
    - ✓ when both hold; ✗ also when every stable cell's gain lies below NOISE_MIN_EFFECT by its interval (no gain of
      the paper's size); n/a with fewer than NOISE_MIN_CELLS stable cells.  A ✓ needs every interval it reads above
      the minimum effect, so an effect smaller than the paper's never passes.
    """
    out, keys = [], ["lr", "batch_size"]
    statement = "Merging gain has an optimum at intermediate noise S: it rises to it, then falls or training fails."
    test = (f"split half: the optimum chosen on the even pairs among the stable cells (≥ {NOISE_MIN_CELLS}; fewer "
            "than half the pairs failed), read on the odd ones; its gain minus the lowest-S cell's above the minimum "
            "effect, "
            f"{100 * NOISE_MIN_EFFECT:g} points, and beyond it a cell where half or more of the pairs failed (the "
            f"weaker child < {rule:g}, or a diverged run) or a fall of at least the minimum effect to the largest-S "
            f"stable cell, each by a "
            f"{100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ if every stable cell's gain lies below "
            f"the minimum effect, {100 * NOISE_MIN_EFFECT:g} points")
    grid = noise[noise["method"] == "grid"]
    for k, part in grid.groupby("spawn_fraction"):
        cid = f"N1 ({k:.0%})"
        pairs = noise_pairs(part, keys)
        fails = pair_failures(pairs, keys, rule)
        fails["S"] = pairs.groupby(keys)[NOISE_SCALE].first()
        stable = fails[fails["stable"]]
        counts = {"n_stable": len(stable), "n_cells": len(fails), "n_failed_pairs": int(fails["failed"].sum()),
                  "n_kept": int((fails["failed"] == 0).sum())}
        failures = _failures_text(fails)
        if len(stable) < NOISE_MIN_CELLS:
            out.append(_noise_row(cid, "noise_scale", statement, f"{failures}; {len(stable)} stable cells, fewer "
                                  f"than {NOISE_MIN_CELLS}", test, NA, counts))
            continue
        chosen = {c: _ok_gains(pairs, keys, c, rule, half=0).mean() for c in stable.index}
        best = max(chosen, key=lambda c: chosen[c])
        s_best, s_lo = stable.loc[best, "S"], stable["S"].min()
        read = interval(_ok_gains(pairs, keys, best, rule, half=1))
        beyond = fails[fails["S"] > s_best * (1 + 1e-9)]
        (rise, d, rise_text), (fall, fall_text) = _n1_rise_and_fall(pairs, keys, rule, fails, chosen, best)
        none = all(absent(interval(_ok_gains(pairs, keys, c, rule))) for c in stable.index)
        state, tail = ((FAIL, f"; every stable cell's gain lies below {100 * NOISE_MIN_EFFECT:g} points: {ABSENT}")
                       if none else (both(rise, fall), ""))
        out.append(_noise_row(cid, "noise_scale", statement,
                              f"{failures}; optimum on the even pairs: η {best[0]:g}, B {best[1]:g} (S = "
                              f"{s_best:.2e}); on the odd pairs its gain "
                              f"{read.text('.2f', 100)} points, {rise_text}; {fall_text}{tail}", test, state,
                              {**counts, "estimate": d.mean, "lo": d.lo, "hi": d.hi, "optimum_gain": read.mean,
                               "interior": float(not np.isclose(s_best, s_lo) and not beyond.empty),
                               "edge": float((beyond["failed"] > 0).any() and not (beyond["failed"] == 0).any())}))
    return out


def _n1_rise_and_fall(pairs: pd.DataFrame, keys: list[str], rule: float, fails: pd.DataFrame, chosen: dict,
                      best: tuple) -> tuple[tuple[str, Interval, str], tuple[str, str]]:
    """Return N1's readings on the odd pairs of the optimum ``best`` (``chosen``: each stable cell's even-half mean
    gain; ``fails``: the cells' failures, with S): (rise verdict, its interval, words), (high side verdict, words)."""
    stable = fails[fails["stable"]]

    def odd(c: tuple) -> pd.Series:
        return _ok_gains(pairs, keys, c, rule, half=1)

    s_best, s_lo = stable.loc[best, "S"], stable["S"].min()
    if np.isclose(s_best, s_lo):  # chosen at the low-noise end: no rise
        rival = max((c for c in stable.index if not np.isclose(stable.loc[c, "S"], s_best)), key=lambda c: chosen[c])
        d = interval_diff(odd(best), odd(rival))
        rise = (FAIL if above(d, 0.0, MIN_PAIRS) == PASS else INCONCLUSIVE, d,
                f"at the smallest S, above the best other cell (η {rival[0]:g}, B {rival[1]:g}) by "
                f"{d.text('.2f', 100)}")
    else:
        low = max((c for c in stable.index if np.isclose(stable.loc[c, "S"], s_lo)), key=lambda c: chosen[c])
        d = interval_diff(odd(best), odd(low))
        rise = (above(d, NOISE_MIN_EFFECT, MIN_PAIRS), d, f"above the lowest-S cell's by {d.text('.2f', 100)}")
    beyond = fails[fails["S"] > s_best * (1 + 1e-9)]
    if beyond.empty:
        return rise, (INCONCLUSIVE, "no cell of larger S: the grid does not reach past it")
    fall, fall_text = INCONCLUSIVE, ""
    steady = beyond[beyond["stable"]]
    if len(steady):  # the fall to the largest-S stable cell, on its pairs that did not fail
        end = max(steady.index[np.isclose(steady["S"], steady["S"].max())], key=lambda c: chosen.get(c, -np.inf))
        d_hi = interval_diff(odd(best), odd(end))
        fall = above(d_hi, NOISE_MIN_EFFECT, MIN_PAIRS)
        fall_text = f"above the largest-S stable cell's (η {end[0]:g}, B {end[1]:g}) by {d_hi.text('.2f', 100)}"
    unstable = beyond[~beyond["stable"]]
    if len(unstable):  # half or more of a cell's pairs failed: training fails there, whatever one pair did
        return rise, (PASS, f"beyond it training fails: in {len(unstable)} of the {len(beyond)} cells of larger S "
                            f"half or more of the pairs failed ({int(unstable['failed'].sum())} of "
                            f"{int(unstable['n'].sum())})" + (f"; its gain is {fall_text}" if fall_text else ""))
    return rise, (fall, f"no cell of larger S failed as a whole (half or more of its pairs); its gain is "
                        f"{fall_text}")


def b_coefficient(ok: pd.DataFrame, keys: list[str]) -> Interval:
    """Return the log10 B coefficient (gain per decade of B at fixed S) of a fit of the cells' mean gains on a
    quadratic in log10 S plus log10 B, with its interval (:func:`lmcbook.stats.fit_coefficient`)."""
    groups = [g for _, g in ok.groupby(keys, sort=True)]
    x = np.log10([g[NOISE_SCALE].iloc[0] for g in groups])
    design = np.column_stack([np.ones_like(x), x, x ** 2, np.log10([g["batch_size"].iloc[0] for g in groups])])
    return fit_coefficient([g[GAIN].to_numpy(float) for g in groups], design, 3)


#: The grid's length rules (``grid_protocol``), in words.
PROTOCOL_WORDS = {"steps": "fixed steps (a run at a smaller B sees fewer examples)",
                  "epochs": "fixed epochs (every run sees as many examples)",
                  "mixed": "lengths that vary otherwise (the convergence rule)"}


def grid_protocol(pairs: pd.DataFrame) -> str:
    """Return how long a grid's runs were: "steps" (one length whatever B; also when lengths are not recorded),
    "epochs" (steps × B the same in every cell: equal examples seen) or "mixed"."""
    if TRAIN_STEPS not in pairs or pairs[TRAIN_STEPS].nunique() <= 1:
        return "steps"
    seen = pairs[TRAIN_STEPS] * pairs["batch_size"]
    return "epochs" if np.allclose(seen, seen.iloc[0], rtol=0.01) else "mixed"


@claim("N2", page="noise_scale")
def claim_n2(noise: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> list[ClaimResult]:
    """N2, by its own sentence: at fixed S, the batch size has no effect, scored once per grid, whose protocol
    (``grid_protocol``: fixed steps or fixed epochs) the row names.  On the kept cells (no pair failed; at least
    NOISE_MIN_CELLS, over 3 values of S and 2 of B, else n/a), the coefficient of log10 B in a least-squares fit of
    the cells' mean gains on a quadratic in log10 S plus log10 B (:func:`b_coefficient`) lies within
    ± NOISE_B_EFFECT per decade of B by its interval over pairs (✓), or wholly outside it (✗); ✗ too when every kept
    cell's gain lies below NOISE_MIN_EFFECT by its interval (no gain of the paper's size)."""
    out, keys = [], ["lr", "batch_size"]
    statement = "At fixed S the batch size has no effect: gains against S collapse onto one curve."
    test = (f"kept cells only (≥ {NOISE_MIN_CELLS}, 3 values of S, 2 of B); the log10 B coefficient of a fit of the "
            f"cell mean gains on a quadratic in log10 S plus log10 B within ± {100 * NOISE_B_EFFECT:g} points per "
            f"decade of B, by a {100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs per cell; ✗ if it lies "
            f"wholly outside, or if every kept cell's gain lies below the minimum effect, "
            f"{100 * NOISE_MIN_EFFECT:g} points")
    for k, part in noise[noise["method"] == "grid"].groupby("spawn_fraction"):
        cid = f"N2 ({k:.0%})"
        pairs = noise_pairs(part, keys)
        cells = noise_cells(pairs, keys, rule)
        ok = pairs.set_index(keys).loc[cells.index[cells["kept"]]].reset_index()
        rule_text, n_ok = _rule_text(cells, rule), int(cells["kept"].sum())
        if n_ok < NOISE_MIN_CELLS or ok[NOISE_SCALE].nunique() < 3 or ok["batch_size"].nunique() < 2:
            out.append(_noise_row(cid, "noise_scale", statement, f"{rule_text}; the {n_ok} left span too few cells, "
                                  "values of S or batch sizes for the fit", test, NA, {"n_kept": n_ok}))
            continue
        iv = b_coefficient(ok, keys)
        measured = (f"protocol: {PROTOCOL_WORDS[grid_protocol(pairs)]}; {rule_text}; gain per decade of B at fixed "
                    f"S: {iv.text('.2f', 100)} points (tolerance ± {100 * NOISE_B_EFFECT:g})")
        state = within(iv, NOISE_B_EFFECT, MIN_PAIRS)
        if all(absent(c) for c in _cell_intervals(ok, keys, list(ok.groupby(keys).groups))):
            state, measured = FAIL, measured + f"; every kept cell's gain lies below the minimum effect: {ABSENT}"
        out.append(_noise_row(cid, "noise_scale", statement, measured, test, state,
                              {**_values(iv, NOISE_B_EFFECT, two_sided=1.0), "n_kept": n_ok}))
    return out


def _fit_residual(x: np.ndarray) -> np.ndarray:
    """Return the matrix that maps values at ``x`` to their residuals around the least-squares quadratic in x."""
    v = np.vander(np.asarray(x, float), 3)
    return np.eye(len(v)) - v @ np.linalg.pinv(v)


@dataclass(frozen=True)
class Collapse:
    """How well log10 S collapses a noise sweep's cell mean gains, against other axes (:func:`collapse`)."""

    #: Residual variance on S over the smallest on the other axes, each net of pair noise (a point estimate).
    ratio: float
    #: Residual variance on S minus a share (COLLAPSE_RATIO_MAX) of the smallest on the other axes (net; gain², so
    #: points² ×
    #: 1e-4), with its interval over pairs: ≤ 0 means the collapse holds.
    excess: Interval
    #: One-way ANOVA p-value of the cells' gains: do they differ beyond pair noise at all?
    anova_p: float

    @property
    def has_signal(self) -> bool:
        """Return True when the cells' mean gains differ beyond pair noise (ANOVA p < 1 − CONFIDENCE)."""
        return bool(self.anova_p < 1 - CONFIDENCE)


def collapse(ok: pd.DataFrame, keys: list[str], on: str, against: dict[str, str],
             share: float = COLLAPSE_RATIO_MAX) -> Collapse:
    """Return how well log10 ``on`` collapses a noise frame's cells (one row per cell and pair, ``keys`` naming the
    cell) against log10 of each column of ``against``: quadratic least-squares fits of the cell mean gains, and the
    residual variance of each.

    Each residual variance is taken net of pair noise: the noise in a cell's mean (its pairs' variance over n) adds
    Σ_i P_ii s_i²/n_i / N to it (P: the fit's residual projection), which is subtracted, so noise does not pull
    the ratio towards 1.  The verdict reads ``excess`` (on S minus ``share`` × the smallest other; ``share`` 1
    compares two axes as equals),
    whose percentile-bootstrap interval resamples each cell's pairs on its own; ``anova_p`` says whether the cells
    differ beyond noise at all (if not, nothing is there to collapse)."""
    groups = [g for _, g in ok.groupby(keys, sort=True)]
    samples = [g[GAIN].to_numpy(float) for g in groups]
    first = pd.DataFrame([g.iloc[0] for g in groups])
    p_on = _fit_residual(np.log10(first[on].to_numpy(float)))
    p_against = [_fit_residual(np.log10(first[c].to_numpy(float))) for c in against.values()]

    def net(p: np.ndarray, y: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return ((y @ p.T) ** 2).mean(axis=-1) - (noise * np.diag(p)).mean(axis=-1)

    def parts(*gains: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
        y = np.stack([g.mean(axis=axis) for g in gains], axis=-1)
        noise = np.stack([g.var(axis=axis, ddof=1) / g.shape[axis] for g in gains], axis=-1)
        return net(p_on, y, noise), np.min([net(p, y, noise) for p in p_against], axis=0)

    def excess(*gains: np.ndarray, axis: int = -1) -> np.ndarray:
        r_on, r_min = parts(*gains, axis=axis)
        return r_on - share * r_min

    r_on, r_min = (float(v) for v in parts(*samples)) if min(map(len, samples)) >= 2 else (np.nan, np.nan)
    ratio = max(r_on, 0.0) / r_min if r_min > 0 else float("inf") if r_on > 0 else float("nan")
    if min(map(len, samples)) < 2:
        anova = float("nan")
    elif all(np.ptp(x) == 0 for x in samples):  # no pair noise at all: the cells differ or they do not
        anova = 0.0 if np.ptp([x[0] for x in samples]) > 0 else 1.0
    else:
        anova = float(f_oneway(*samples).pvalue)
    return Collapse(ratio, interval_of(samples, excess), anova)


def _collapse_row(cid: str, page: str, statement: str, ok: pd.DataFrame, cells: pd.DataFrame, keys: list[str],
                  on: str, against: dict[str, str], extra: str = "",
                  rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    names = " and on ".join(f"log10 {n}" for n in against)
    test = (f"kept cells only (≥ {NOISE_MIN_CELLS}) whose gains differ beyond pair noise (ANOVA p < "
            f"{1 - CONFIDENCE:.2g}); quadratic fits of the cell mean gains, residual variances net of pair noise: on "
            f"log10 S ≤ {COLLAPSE_RATIO_MAX:g} × the smaller of those on {names}, by a {100 * CONFIDENCE:.0f}% "
            f"interval over ≥ {MIN_PAIRS} pairs per cell; ✗ if every kept cell's gain lies below the minimum effect, "
            f"{100 * NOISE_MIN_EFFECT:g} points")
    rule_text = _rule_text(cells, rule)
    n_ok = int(cells["kept"].sum())
    if n_ok < NOISE_MIN_CELLS:
        return _noise_row(cid, page, statement, f"{rule_text}: {n_ok} left", test, NA, {"n_kept": n_ok})
    if min(ok[c].nunique() for c in [on, *against.values()]) < 3:
        return _noise_row(cid, page, statement, f"{rule_text}; the {n_ok} left span fewer than 3 values of S or of "
                          f"{' or of '.join(against)}, too few for a quadratic fit", test, NA, {"n_kept": n_ok})
    ivs = _cell_intervals(ok, keys, list(ok.groupby(keys).groups))
    best = max(ivs, key=lambda iv: iv.hi)
    c = collapse(ok, keys, on, against)
    if all(absent(iv) for iv in ivs):
        return _noise_row(cid, page, statement, f"{rule_text}; the best kept cell's gain {best.text('.2f', 100)} "
                          f"points: {ABSENT}", test, FAIL,
                          {"n_kept": n_ok, "estimate": best.mean, "lo": best.lo, "hi": best.hi,
                           "anova_p": c.anova_p})
    ratio = f"{c.ratio:.3g}" if np.isfinite(c.ratio) else "undefined (no variance left beyond pair noise)"
    measured = (f"{rule_text}; residual variance on log10 S over the smaller on {names}: {ratio}; on S minus "
                f"{COLLAPSE_RATIO_MAX:g} × the smaller: {c.excess.text('.3g', 1e4)} points²; ANOVA p = "
                f"{c.anova_p:.2g}")
    if not c.has_signal:
        state, measured = INCONCLUSIVE, measured + ": the cells' gains do not differ beyond pair noise"
    else:
        state = at_most(c.excess, 0.0, MIN_PAIRS)
    return _noise_row(cid, page, statement, measured + extra, test, state,
                      {"ratio": c.ratio, "estimate": c.excess.mean, "lo": c.excess.lo,
                       "hi": c.excess.hi, "anova_p": c.anova_p, "n_kept": n_ok})


def _wd_cells(components: pd.DataFrame, norm: str, rule: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    d = components[(components["method"] == "weight_decay") & (components["norm"] == norm)]
    pairs = noise_pairs(d, ["weight_decay"])
    return pairs, noise_cells(pairs, ["weight_decay"], rule)


def _at(pairs: pd.DataFrame, column: str, value: float) -> pd.Series:
    return pairs.loc[np.isclose(pairs[column], value), GAIN]


@claim("N3", page="noise_components")
def claim_n3(components: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N3: without normalisation, weight decay barely changes merging, an equivalence test on the kept cells of the
    weight-decay sweep: the best minus the worst cell's mean gain lies within ± NOISE_MIN_EFFECT (the paper's size)
    by its interval (✓), or wholly outside it (✗).  n/a: fewer than two kept cells."""
    statement = "Without normalisation, weight decay barely changes merging."
    test = (f"kept cells only; best − worst cell mean gain within ± {100 * NOISE_MIN_EFFECT:g} points (the minimum "
            f"effect), by a {100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs")
    pairs, cells = _wd_cells(components, "none", rule)
    ok = cells[cells["kept"]]
    rule_text = _rule_text(cells, rule)
    if len(ok) < 2:
        return _noise_row("N3", "noise_components", statement, f"{rule_text}; fewer than two kept cells", test, NA)
    if all(absent(iv) for iv in _cell_intervals(pairs, ["weight_decay"], list(ok.index))):
        return _noise_row("N3", "noise_components", statement, f"{rule_text}; {ABSENT}: nothing for weight decay "
                          "to change", test, NA)
    hi, lo = ok["gain"].idxmax(), ok["gain"].idxmin()
    iv = interval_diff(_at(pairs, "weight_decay", hi), _at(pairs, "weight_decay", lo))
    return _noise_row("N3", "noise_components", statement,
                      f"{rule_text}; Δ gain {iv.text('.2f', 100)} points between weight decay {hi:g} and {lo:g}, "
                      f"tolerance ± {100 * NOISE_MIN_EFFECT:g}", test, within(iv, NOISE_MIN_EFFECT, MIN_PAIRS),
                      _values(iv, NOISE_MIN_EFFECT, two_sided=1.0))


@claim("N4", page="noise_components")
def claim_n4(components: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N4: with LayerNorm, the strongest weight decay gives a larger merging gain than the weakest, compared only
    at matched training: both cells kept and their mean training accuracies (weaker child) within MATCHED_ACC_TOL,
    else n/a (this sweep cannot decide it).  ✓: the difference's interval lies above NOISE_MIN_EFFECT; ✗: it lies at
    or below it (no effect of the paper's size, or a negative one)."""
    statement = "With normalisation (LayerNorm), stronger weight decay gives a larger merging gain."
    test = (f"both cells kept and matched in training accuracy (within {MATCHED_ACC_TOL:g}), else n/a; gain at the "
            f"strongest minus the weakest weight decay above the minimum effect, {100 * NOISE_MIN_EFFECT:g} points, "
            f"by a {100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ if it lies below it")
    pairs, cells = _wd_cells(components, "layer", rule)
    weak, strong = cells.index.min(), cells.index.max()
    acc = cells.loc[[weak, strong], "train_acc_mean"]
    if not cells.loc[[weak, strong], "kept"].all():
        return _noise_row("N4", "noise_components", statement, f"{_rule_text(cells, rule)}, among them weight decay "
                          f"{weak:g} or {strong:g}", test, NA)
    if abs(acc.iloc[1] - acc.iloc[0]) > MATCHED_ACC_TOL + 1e-12:
        return _noise_row("N4", "noise_components", statement, f"training accuracy {acc.iloc[0]:.3f} at weight decay "
                          f"{weak:g} vs {acc.iloc[1]:.3f} at {strong:g}, {abs(acc.iloc[1] - acc.iloc[0]):.3f} apart "
                          f"against a {MATCHED_ACC_TOL:g} tolerance: {CANNOT_DECIDE}", test, NA)
    iv = interval_diff(_at(pairs, "weight_decay", strong), _at(pairs, "weight_decay", weak))
    return _noise_row("N4", "noise_components", statement, f"gain at weight decay {strong:g} minus at {weak:g}: "
                      f"{iv.text('.2f', 100)} points (training accuracy {acc.iloc[1]:.3f} and {acc.iloc[0]:.3f})"
                      + _smaller(iv), test, sized(above(iv, NOISE_MIN_EFFECT, MIN_PAIRS), iv),
                      _values(iv, NOISE_MIN_EFFECT))


def stable_cells(cells: pd.DataFrame, margin: float = STABLE_ACC_MARGIN) -> pd.Index:
    """Return the cells of a :func:`noise_cells` frame that trained *stably*: kept (no pair failed) and with their
    weaker children's mean training accuracy within ``margin`` of the best kept cell's."""
    ok = cells[cells["kept"]]
    if ok.empty:
        return ok.index
    return ok.index[ok["train_acc_mean"] >= ok["train_acc_mean"].max() - margin - 1e-12]


@claim("N5", page="noise_components")
def claim_n5(components: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N5 (learning-rate pairs): children continued at similar, larger (but stable) learning rates merge best, read on
    the learning rates whose diagonal cell is stable (:func:`lmcbook.claims.noise.stable_cells`) and the
    off-diagonal cells between them.
    Per parent, the diagonal's gain at the largest stable η minus the smallest, and the mean diagonal minus the mean
    off-diagonal gain, both above NOISE_MIN_EFFECT by their intervals (✗ when either lies below it); n/a, said, when
    fewer than two learning rates or no off-diagonal cell remain."""
    statement = "Models trained at similar, larger (but stable) learning rates merge best with each other."
    test = (f"stable cells only (no pair failed, weaker children within {STABLE_ACC_MARGIN:g} training accuracy of "
            "the best cell's); per parent, diagonal gain at the largest stable η minus the smallest, and mean diagonal "
            f"minus mean off-diagonal gain, both above the minimum effect, {100 * NOISE_MIN_EFFECT:g} points, by a "
            f"{100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} parents; ✗ if either lies below it")
    keys = ["lr", "lr_b"]
    pairs = noise_pairs(components[components["method"] == "lr_pairs"], keys)
    cells = noise_cells(pairs, keys, rule)
    ok = set(stable_cells(cells))
    lrs = sorted(x for x in set(pairs["lr"]) if (x, x) in ok)
    unstable = sorted(x for x in set(pairs["lr"]) if (x, x) not in ok)
    diag = [(x, x) for x in lrs]
    off = [c for c in ok if c[0] != c[1] and c[0] in lrs and c[1] in lrs]
    where = (f"{_rule_text(cells, rule)}; stable learning rates {', '.join(f'{x:g}' for x in lrs) or 'none'}"
             + (f" (left out as unstable: {', '.join(f'{x:g}' for x in unstable)})" if unstable else ""))
    if len(diag) < 2 or not off:
        return _noise_row("N5", "noise_components", statement, f"{where}: too few stable cells to read it", test, NA)
    by = pairs.set_index(keys + ["pair"])[GAIN]
    ends = by.xs(diag[-1], level=keys) - by.xs(diag[0], level=keys)
    dmean = pd.concat([by.xs(c, level=keys) for c in diag], axis=1).mean(axis=1)
    omean = pd.concat([by.xs(c, level=keys) for c in off], axis=1).mean(axis=1)
    iv_ends, iv_diag = interval(ends.dropna()), interval((dmean - omean).dropna())
    return _noise_row("N5", "noise_components", statement,
                      f"{where}; diagonal gain at η {lrs[-1]:g} minus at {lrs[0]:g}: {iv_ends.text('.2f', 100)} "
                      f"points; diagonal minus off-diagonal: {iv_diag.text('.2f', 100)} points"
                      + _smaller(iv_ends, iv_diag), test,
                      sized(both(*(above(iv, NOISE_MIN_EFFECT, MIN_PAIRS) for iv in (iv_ends, iv_diag))),
                            iv_ends, iv_diag),
                      _values(iv_diag, NOISE_MIN_EFFECT, ends=iv_ends.mean, ends_lo=iv_ends.lo, ends_hi=iv_ends.hi))


@claim("N6", page="noise_components")
def claim_n6(components: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N6 (momentum): momentum acts through S = η/(B(1−μ)) (the main text's form): on the kept cells of the
    momentum sweep, the cell mean gains collapse on log10 S against log10 η as N2 asks (:func:`collapse`; ✗ too when
    no kept cell gains NOISE_MIN_EFFECT).  The row also reports the appendix's form η/(B(1−μ)²) against the main
    text's (the ratio of their net residual variances), which its verdict does not read."""
    keys = ["lr", "momentum"]
    pairs = noise_pairs(components[components["method"] == "momentum"], keys)
    cells = noise_cells(pairs, keys, rule)
    ok = pairs.set_index(keys).loc[cells.index[cells["kept"]]].reset_index()
    extra = ""
    if (len(ok) and NOISE_SCALE_SQ in ok and int(cells["kept"].sum()) >= NOISE_MIN_CELLS
            and min(ok[NOISE_SCALE].nunique(), ok[NOISE_SCALE_SQ].nunique()) >= 3):
        sq = collapse(ok, keys, NOISE_SCALE_SQ, {"S": NOISE_SCALE}, share=1.0)
        extra = (f"; the (1−μ)² form's residual variance over the main text's: {sq.ratio:.3g} (difference "
                 f"{sq.excess.text('.3g', 1e4)} points²)")
    row = _collapse_row("N6", "noise_components", "Momentum acts through S = η/(B(1−μ)): gains against S collapse "
                        "across momenta.", ok, cells, keys, NOISE_SCALE, {"η": "lr"}, extra, rule=rule)
    if extra:
        row.values.update({"sq_over_main": sq.ratio, "sq_minus_main_lo": sq.excess.lo,
                           "sq_minus_main_hi": sq.excess.hi})
    return row


@claim("N7", page="noise_components")
def claim_n7(components: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N7 (augmentation): augmentation raises the noise, so at the smallest η of the sweep, on the rising side of the
    gain curve, augmentation raises the gain: on minus off above NOISE_MIN_EFFECT by its interval; ✗ when it lies at
    or below it.  n/a when either cell fails the rule, or when the smallest η is not on the rising side (the
    off curve's best η is the smallest)."""
    statement = "Augmentation raises the noise: on the low-noise side it raises the merging gain."
    test = (f"kept cells only; off curve's best η above the smallest; at the smallest η, gain with minus "
            f"without augmentation above the minimum effect, {100 * NOISE_MIN_EFFECT:g} points, by a "
            f"{100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ if it lies below it")
    keys = ["lr", "augment"]
    aug = components[components["method"] == "augmentation"].copy()
    aug["augment"] = aug["augment"].astype(str).str.lower().isin(["true", "1", "1.0"])
    pairs = noise_pairs(aug, keys)
    cells = noise_cells(pairs, keys, rule)
    lr0 = float(pairs["lr"].min())
    rule_text = _rule_text(cells, rule)
    need = [c for c in cells.index if np.isclose(c[0], lr0)]
    if len(need) < 2 or not cells.loc[need, "kept"].all():
        return _noise_row("N7", "noise_components", statement, f"{rule_text}, among them η {lr0:g}", test, NA)
    off = cells.xs(False, level="augment")
    off = off[off["kept"]]
    if np.isclose(off["gain"].idxmax(), lr0):
        return _noise_row("N7", "noise_components", statement, f"{rule_text}; the off curve's best η is the smallest, "
                          f"{lr0:g}: no rising side", test, NA)
    at = pairs[np.isclose(pairs["lr"], lr0)]
    iv = interval_diff(at.loc[at["augment"], GAIN], at.loc[~at["augment"], GAIN])
    return _noise_row("N7", "noise_components", statement, f"{rule_text}; at η {lr0:g}, gain with minus without "
                      f"augmentation {iv.text('.2f', 100)} points" + _smaller(iv), test,
                      sized(above(iv, NOISE_MIN_EFFECT, MIN_PAIRS), iv), _values(iv, NOISE_MIN_EFFECT))


# ---- The regime map, N8 and N9 ----
# The regime map (the noise_regime page): where can merging gain at all?  And the book's own noise rows: N8 (merging
# against annealing, on the map) and N9 (where the grid's optimum lies); and the sensitivity table that reads N1–N7
# again at other thresholds of the rule (:func:`rule_sensitivity`).  Each cell of the map (augmentation,
# the schedule's floor, the start, η) gets a reading from its intervals over pairs
# (:data:`~lmcbook.claims.noise.MAP_READINGS`), each setting a ranking (:func:`map_settings`), and the map picks the
# setting the noise pages run (:func:`pick_setting`). The map itself decides no claim.

#: The key columns of a map cell, as the regime map's CSV holds them.
MAP_KEYS = ["augment", "lr_floor", "method", "spawn_fraction", "lr"]
#: A map cell's reading, from its intervals over pairs (:func:`map_cells`), in the order they are tried.
MAP_READINGS = {
    "failed": "excluded by the rule: a run diverged or ended near chance",
    "paper": "merging gains at least the paper's size (its interval lies above the minimum effect)",
    "gains": "merging gains (its interval lies above 0), less than the paper's size",
    "basins": "the merge loses more than the minimum effect while the ensemble gains: the children sit on either "
              "side of a barrier",
    "harvest": "nothing to harvest: the ensemble of the two children gains less than the minimum effect",
    "undecided": "undecided: the intervals straddle",
}


def _map_reading(gain: Interval, ens: Interval, kept: bool) -> str:
    if not kept:
        return "failed"
    if gain.n < MAP_MIN_PAIRS or not gain.decided:
        return "undecided"
    if gain.lo > NOISE_MIN_EFFECT:
        return "paper"
    if gain.lo > 0:
        return "gains"
    if gain.hi < -NOISE_MIN_EFFECT and ens.decided and ens.lo > 0:
        return "basins"
    if ens.decided and ens.hi < NOISE_MIN_EFFECT:
        return "harvest"
    return "undecided"


def map_cells(frame: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return one row per cell of the regime map's long frame: its keys (:data:`~lmcbook.claims.noise.MAP_KEYS`),
    pairs ``n``, the merging gain and the ensemble gain with their intervals over pairs, the children's disagreement,
    distance and training and test accuracy (means), ``kept`` by the rule, and its ``reading``
    (:data:`~lmcbook.claims.noise.MAP_READINGS`)."""
    frame = frame.assign(augment=_as_bool(frame["augment"]))
    pairs = noise_pairs(frame, MAP_KEYS)
    cells = noise_cells(pairs, MAP_KEYS, rule)
    rows = []
    for key, g in pairs.groupby(MAP_KEYS):  # a few pairs a cell: Student-t intervals, not a bootstrap's range
        gain = t_interval(g[GAIN].dropna())
        ens = t_interval(g["ensemble_gain"].dropna()) if "ensemble_gain" in g else t_interval([])
        kept = bool(cells.loc[key, "kept"])
        rows.append({**dict(zip(MAP_KEYS, key)), "n": len(g), "gain": gain.mean, "gain_lo": gain.lo,
                     "gain_hi": gain.hi, "ensemble_gain": ens.mean, "ensemble_gain_lo": ens.lo,
                     "ensemble_gain_hi": ens.hi, "kept": kept, "reading": _map_reading(gain, ens, kept),
                     **{c: g[c].mean() for c in ("disagreement", "pair_distance", "acc_endpoints", "acc_merged",
                                                 "train_acc_min") if c in g}})
    return pd.DataFrame(rows)


def map_settings(cells: pd.DataFrame, order: tuple[str, ...] = PICK_ORDER) -> pd.DataFrame:
    """Return one row per setting of the map (augmentation, floor, start) over its learning rates: how many cells
    gain (``n_gain``: reading paper or gains), how many of the paper's size (``n_paper``), the best cell's gain and
    its interval, and its learning rate (the best: the kept cell with an interval whose lower end is highest, the
    smaller η of a tie; NaN where the setting has no such cell, since a failed cell is never the best); sorted best
    first by ``order`` (:data:`~lmcbook.claims.thresholds.PICK_ORDER`; a setting without a best cell last)."""
    out = []
    for key, g in cells.groupby(MAP_KEYS[:-1]):
        fit = g[g["kept"].astype(bool) & g["gain_lo"].notna()].sort_values("lr")
        best = fit.loc[fit["gain_lo"].idxmax()] if len(fit) else pd.Series(np.nan, index=g.columns)
        out.append({**dict(zip(MAP_KEYS[:-1], key)), "n_cells": len(g),
                    "n_gain": int(g["reading"].isin(["paper", "gains"]).sum()),
                    "n_paper": int((g["reading"] == "paper").sum()), "best_lr": best["lr"], "best_gain": best["gain"],
                    "best_gain_lo": best["gain_lo"], "best_gain_hi": best["gain_hi"]})
    return pd.DataFrame(out).sort_values(list(order), ascending=False, ignore_index=True)


def describe_setting(setting: dict) -> str:
    """Return a map setting (augmentation, floor, spawn point; :func:`pick_setting`) in words."""
    floor = setting["lr_floor"]
    sched = ("a learning rate that decays to zero" if floor == 0 else "a constant learning rate" if floor == 1 else
             f"a learning rate that decays to {floor:g} of its peak")
    start = ("independently initialised pairs" if setting.get("method") == "independent" else
             "children from a shared initialisation" if setting["spawn_fraction"] == 0 else
             f"children spawned at {setting['spawn_fraction']:.0%} of training")
    if setting.get("method") == "anneal":
        start = f"children spawned at {setting['spawn_fraction']:.0%} and annealed to zero from there"
    return f"{start}, {sched}, {'with' if setting['augment'] else 'without'} augmentation"


def _as_bool(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(["true", "1", "1.0"])


def map_spawn_sweep(frame: pd.DataFrame | None, study: Any) -> pd.DataFrame:
    """Return the regime map's spawned pairs (one row per cell and pair, every metric a column, ``kept`` by the rule)
    at a noise study's data set, schedule floor and augmentation: the spawn sweep, read off the map (empty without a
    map, or when the map has no such cells)."""
    if frame is not None and "dataset" in frame:
        frame = frame[frame["dataset"] == study.dataset]
    if frame is not None:
        frame = frame[(frame["method"] == "spawn") & np.isclose(frame["lr_floor"], study.lr_floor)
                      & (_as_bool(frame["augment"]) == bool(study.augment))]
    if frame is None or frame.empty:
        return pd.DataFrame(columns=["spawn_fraction", "lr", GAIN, "ensemble_gain", "acc_endpoints", NOISE_SCALE])
    return mark_kept(noise_pairs(frame, ["spawn_fraction", "lr"]), ["spawn_fraction", "lr"])


def pick_setting(cells: pd.DataFrame, order: tuple[str, ...] = PICK_ORDER) -> dict[str, object] | None:
    """Return the spawn-and-merge setting (augmentation, floor, spawn point) that ranks first by ``order``
    (:data:`~lmcbook.claims.thresholds.PICK_ORDER`: the most cells gaining the paper's size, then gaining at all, then
    the best interval's lower end), or None when no spawned cell gains: the setting the noise study moves to.
    Independent pairs are the control, never picked."""
    spawned = map_settings(cells[cells["method"] == "spawn"], order)
    if spawned.empty or spawned["n_gain"].iloc[0] == 0:
        return None
    return {k: spawned[k].iloc[0] for k in ("augment", "lr_floor", "spawn_fraction")}


@claim("N8", page="noise_regime")
def claim_n8(regime: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N8 (the book's own row; issue 49): merging gains more than annealing.  On the regime map's frame, at the setting
    the map picks (:func:`pick_setting`), the merged model's test accuracy against the mean of children of the *same
    parents* whose rate decays to zero from the spawn instead (method "anneal": ``NoiseRegimeStudy.anneal``), read
    two ways, each above NOISE_MIN_EFFECT by its interval:

    - *at the pick's best η*: merged minus annealed, paired by parent, over ≥ MIN_PAIRS pairs;
    - *each at its own best η*: the merge's best η and annealing's best η, each chosen on the even pairs among the
      kept cells (no failed pair) and read on the odd ones, so that neither side wins by the choice.

    ✓ when both lie above the minimum effect; ✗ when either lies wholly at or below it (merging gives no more than
    annealing would); n/a when the map picks nothing, its pick decays to zero itself, or the map holds no annealed
    children of the pick (a decay-to-zero cell of the map is no stand-in: its parent's rate had already decayed by the
    spawn).  The row also gives the paired difference at every η where both cells were kept."""
    statement = ("(ours) Merging gains more than annealing: the merged model beats children of the same parents whose "
                 "learning rate decays to zero from the spawn.")
    test = (f"merged accuracy minus the annealed children's, at the picked setting's best η (paired by parent) and "
            f"each at its own best η (chosen on the even pairs, read on the odd), both above the minimum effect, "
            f"{100 * NOISE_MIN_EFFECT:g} points, by a {100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ "
            "if either lies at or below it")
    cells = map_cells(regime, rule)
    pick = pick_setting(cells)
    if pick is None or pick["lr_floor"] == 0:
        return ClaimResult("N8", "noise", statement, "the map picks no setting whose learning rate stays above zero",
                           test, NA, "noise_regime")
    pairs = noise_pairs(regime.assign(augment=_as_bool(regime["augment"])), MAP_KEYS)
    here = pairs[(pairs["augment"] == pick["augment"]) & np.isclose(pairs["spawn_fraction"], pick["spawn_fraction"])
                 & np.isclose(pairs["lr_floor"], pick["lr_floor"])]
    kept = cells[cells["kept"].astype(bool)]
    kept_lrs = {m: {float(lr) for lr in kept.loc[(kept["method"] == m) & (kept["augment"] == pick["augment"])
                                                 & np.isclose(kept["spawn_fraction"], pick["spawn_fraction"])
                                                 & np.isclose(kept["lr_floor"], pick["lr_floor"]), "lr"]}
                for m in ("spawn", "anneal")}
    if not (here["method"] == "anneal").any():
        return ClaimResult("N8", "noise", statement, "this map holds no children annealed from the pick's spawns (its "
                           "decay-to-zero cells are no stand-in: their parents' rate had already decayed by the "
                           "spawn)", test, NA, "noise_regime")
    arms = {m: here[here["method"] == m].set_index(["lr", "pair"])[col]
            for m, col in (("spawn", "acc_merged"), ("anneal", "acc_endpoints"))}
    both_kept = sorted(kept_lrs["spawn"] & kept_lrs["anneal"])
    best = float(map_settings(cells[cells["method"] == "spawn"]).iloc[0]["best_lr"])
    if not any(np.isclose(lr, best) for lr in both_kept):
        return ClaimResult("N8", "noise", statement, f"no kept annealed cell beside the pick at η {best:g}", test, NA,
                           "noise_regime")
    at_pick = _n8_paired(arms, best)
    (m_lr, a_lr), halves = zip(*(_n8_best_odd(arms[m], kept_lrs[m]) for m in ("spawn", "anneal")))
    own = interval_diff(*halves)
    state = both(above(at_pick, NOISE_MIN_EFFECT, MIN_PAIRS), above(own, NOISE_MIN_EFFECT, MIN_PAIRS))
    across = "; ".join(f"η {lr:g}: {_n8_paired(arms, lr).text('.2f', 100)}" for lr in both_kept)
    words = ("" if state != FAIL else "; merging gives less than annealing would" if max(at_pick.hi, own.hi) < 0
             else "; merging gives no more than annealing would")
    words += _n8_shares(here, best)
    return ClaimResult("N8", "noise", statement, f"at the pick's best η {best:g}, merged minus annealed children: "
                       f"{at_pick.text('.2f', 100)} points over {at_pick.n} pairs; each at its own best η (merge "
                       f"{m_lr:g}, annealing {a_lr:g}, chosen on the even pairs): {own.text('.2f', 100)} points on "
                       f"the odd pairs{words}; across the kept η, paired (points): {across}", test, state,
                       "noise_regime", values=_values(at_pick, NOISE_MIN_EFFECT, own=own.mean, own_lo=own.lo,
                                                      own_hi=own.hi))


def _n8_shares(here: pd.DataFrame, lr: float) -> str:
    """Return, in words, what the merge recovers at η ``lr`` of what annealing gains over the constant-rate children
    (means over pairs), and what merging the annealed children adds."""
    at = here[np.isclose(here["lr"], lr)].groupby("method")[["acc_endpoints", "acc_merged"]].mean()
    const, merged = at.loc["spawn", "acc_endpoints"], at.loc["spawn", "acc_merged"]
    annealed, both_merged = at.loc["anneal", "acc_endpoints"], at.loc["anneal", "acc_merged"]
    if not annealed > const:
        return ""
    return (f"; there the constant-rate children reach {const:.3f}, their merge {merged:.3f} and the annealed "
            f"children {annealed:.3f}: the merge recovers {(merged - const) / (annealed - const):.0%} of what "
            f"annealing gains, and merging the annealed children adds {100 * (both_merged - annealed):+.2f} points")


def _n8_paired(arms: dict[str, pd.Series], lr: float) -> Interval:
    """Return merged minus annealed accuracy at η ``lr``, paired by parent, with its interval over pairs."""
    return interval((arms["spawn"].xs(lr, level="lr") - arms["anneal"].xs(lr, level="lr")).dropna())


def _n8_best_odd(arm: pd.Series, lrs: set[float]) -> tuple[float, pd.Series]:
    """Return the η among ``lrs`` where ``arm`` (accuracy by η and pair) is highest on the even pairs, and its odd
    pairs' values there."""
    even = {lr: arm.xs(lr, level="lr")[lambda v: v.index % 2 == 0].mean() for lr in lrs}
    lr = max((x for x in even if np.isfinite(even[x])), key=even.get)
    return lr, arm.xs(lr, level="lr")[lambda v: v.index % 2 == 1].dropna()


@claim("N9", page="noise_scale")
def claim_n9(noise: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> list[ClaimResult]:
    """N9 (the book's own row, one per spawn point of the grid; issue 49): the gain peaks *inside* the range where
    training holds up, against "the gain is highest where training starts to degrade".  The optimum is chosen on the
    even pairs among the kept cells (no pair failed) and read on the odd ones.  Beyond it (larger S), a cell *trains
    as well* when it is kept and its weaker children's mean training accuracy is within STABLE_ACC_MARGIN of the
    optimum's own; the cell compared with the optimum is the one of largest S among those (of several there, the best
    on the even pairs).

    - ✓ (a peak inside): the optimum's gain minus that cell's above NOISE_MIN_EFFECT by its interval;
    - ✗ (highest at the edge): the fall's interval lies wholly at or below the minimum effect (the gain holds while
      training does), or no cell beyond trains as well while one beyond does not, and the grid resolves that edge
      (the first such cell lies within a factor EDGE_RESOLUTION of the optimum in S);
    - inconclusive: the fall's interval straddles the minimum effect, the grid does not resolve the edge, or no cell of
      larger S exists;
    - n/a: fewer than NOISE_MIN_CELLS kept cells."""
    out, keys = [], ["lr", "batch_size"]
    statement = ("(ours) The merging gain peaks inside the range where training holds up: it falls by the paper's "
                 "size before the children train worse, rather than being highest where they start to.")
    test = (f"kept cells (no pair failed; ≥ {NOISE_MIN_CELLS}); the optimum chosen on the even pairs, read on the odd; "
            f"its gain minus that of the largest-S cell beyond it whose weaker children train within "
            f"{STABLE_ACC_MARGIN:g} of the optimum's above the minimum effect, {100 * NOISE_MIN_EFFECT:g} points, by a "
            f"{100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ if it lies at or below it, or if the first "
            f"cell beyond trains worse and lies within a factor {EDGE_RESOLUTION:.3g} in S")
    for k, part in noise[noise["method"] == "grid"].groupby("spawn_fraction"):
        cid = f"N9 ({k:.0%})"
        pairs = noise_pairs(part, keys)
        cells = noise_cells(pairs, keys, rule)
        cells["S"] = pairs.groupby(keys)[NOISE_SCALE].first()
        kept = cells[cells["kept"]]
        if len(kept) < NOISE_MIN_CELLS:
            out.append(_noise_row(cid, "noise_scale", statement, f"{len(kept)} of {len(cells)} cells kept: fewer than "
                                  f"{NOISE_MIN_CELLS}", test, NA, {"n_kept": len(kept)}))
            continue
        even = {c: _gains(pairs, keys, c, half=0).mean() for c in kept.index}
        best = max(even, key=even.get)
        s_best, acc_best = kept.loc[best, "S"], kept.loc[best, "train_acc_mean"]
        beyond = cells[cells["S"] > s_best * (1 + 1e-9)]
        well = beyond["kept"] & (beyond["train_acc_mean"] >= acc_best - STABLE_ACC_MARGIN - 1e-12)
        head = (f"optimum on the even pairs: η {best[0]:g}, B {best[1]:g} (S = {s_best:.3g}; its weaker children "
                f"train to {acc_best:.3f}); beyond it {int(well.sum())} of {len(beyond)} cells train as well (within "
                f"{STABLE_ACC_MARGIN:g})")
        state, tail, values = _n9_past_the_optimum(pairs, keys, even, best, beyond[well], beyond[~well], s_best)
        out.append(_noise_row(cid, "noise_scale", statement, f"{head}; {tail}", test, state,
                              {**values, "n_kept": len(kept), "s_opt": s_best}))
    return out


def _n9_past_the_optimum(pairs: pd.DataFrame, keys: list[str], even: dict, best: tuple, past: pd.DataFrame,
                         worse: pd.DataFrame, s_best: float) -> tuple[str, str, dict]:
    """Return N9's verdict, words and values past the optimum ``best`` (``even``: the kept cells' even-half mean
    gains; ``past``: the cells of larger S that train as well; ``worse``: those that do not)."""
    if past.empty:
        if worse.empty:
            return INCONCLUSIVE, "no cell of larger S: the grid stops short of the edge", {}
        gap = worse["S"].min() / s_best
        if gap > EDGE_RESOLUTION * (1 + 1e-6):
            return INCONCLUSIVE, (f"the next cell beyond trains worse, but lies a factor {gap:.3g} away in S: the grid "
                                  "does not resolve the edge"), {}
        return FAIL, "the next cell beyond trains worse: the gain is highest where training starts to degrade", {}
    end = max(past.index[np.isclose(past["S"], past["S"].max())], key=lambda c: even.get(c, -np.inf))
    d = interval_diff(_gains(pairs, keys, best, half=1), _gains(pairs, keys, end, half=1))
    state = above(d, NOISE_MIN_EFFECT, MIN_PAIRS)
    words = {PASS: "a peak inside the range where training holds up", INCONCLUSIVE: "undecided",
             FAIL: "no fall of the paper's size: the gain holds while training does"}[state]
    return state, (f"on the odd pairs its gain minus the largest-S such cell's (η {end[0]:g}, B {end[1]:g}, "
                   f"S = {past.loc[end, 'S']:.3g}): {d.text('.2f', 100)} points: {words}"), _values(d, NOISE_MIN_EFFECT)


def noise_claims(noise_scale: pd.DataFrame | None, components: pd.DataFrame | None,
                 rule: float = NOISE_FAILED_TRAIN_ACC) -> list[ClaimResult]:
    """Return N1–N7 at the rule's threshold ``rule`` on a noise_scale frame and a noise_components frame (either may
    be None)."""
    rows = [] if noise_scale is None else claim_n1(noise_scale, rule) + claim_n2(noise_scale, rule)
    if components is not None:
        rows += [f(components, rule) for f in (claim_n3, claim_n4, claim_n5, claim_n6, claim_n7)]
    return rows


def rule_sensitivity(noise_scale: pd.DataFrame | None, components: pd.DataFrame | None,
                     thresholds: tuple[float, ...] = NOISE_RULE_THRESHOLDS) -> pd.DataFrame:
    """Return each noise row's verdict (``TABLE_MARKS``: a word, not Markdown) at each of the rule's ``thresholds``
    (one column per threshold, the first being the rule itself): how the verdicts move as the rule excludes more
    cells."""
    out: dict[str, dict[str, str]] = {}
    for t in thresholds:
        name = f"failed only (< {t:g})" if t <= NOISE_FAILED_TRAIN_ACC else f"weaker child ≥ {t:g}"
        for r in noise_claims(noise_scale, components, t):
            out.setdefault(r.id, {})[name] = TABLE_MARKS[r.state]
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("claim")
