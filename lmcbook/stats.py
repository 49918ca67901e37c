"""Statistics over replicates: intervals, rank correlations, fits and spreads, behind every verdict.

A replicate is a pair of independently trained networks (or a model, or a random
draw, where those are the unit).  A verdict reads a 95% bootstrap interval of the
mean over replicates (:func:`interval`), of a difference of two means
(:func:`interval_diff`, independent replicates) or of a mean paired difference
(:func:`interval` of the per-pair differences), and decides only when the interval
clears the claim's threshold; otherwise it is *inconclusive*.  Intervals are
percentile bootstraps (scipy.stats.bootstrap) with a fixed generator, so a verdict is a
pure function of its data.  With fewer than :data:`MIN_REPLICATES` replicates an
interval is not computed (its ends are NaN) and nothing can be decided.

With 5 replicates a percentile bootstrap is narrower than a t interval (it treats
the 5 values as the population), so these intervals are a floor on the
uncertainty, not a ceiling; the book says so where it reads them.

Beside the intervals: Spearman's rank correlation (:func:`spearman`, the ρ of every
trend), per-cell summaries over replicates (:func:`cell_stats`, :func:`spread`) and
the least-squares quadratic the noise rows read (:func:`quadratic_fit`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import bootstrap, spearmanr

from .schema import replicate, select

#: Confidence level of every interval.
CONFIDENCE = 0.95
#: Bootstrap resamples per interval, and the generator's seed.
N_RESAMPLES, SEED = 9999, 0
#: Replicates below which an interval is not computed.
MIN_REPLICATES = 2

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass(frozen=True)
class Interval:
    """A mean (or difference of means) over ``n`` replicates and its 95% bootstrap interval [lo, hi]."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def decided(self) -> bool:
        """Return True when the interval exists (enough replicates)."""
        return bool(np.isfinite(self.lo) and np.isfinite(self.hi))

    def text(self, fmt: str = ".3f", scale: float = 1.0) -> str:
        """Return "mean [lo, hi]" (or "mean, n = 1" without an interval), each value times ``scale``."""
        m = format(scale * self.mean, fmt)
        if not self.decided:
            return f"{m} (n = {self.n}, no interval)"
        return f"{m} [{format(scale * self.lo, fmt)}, {format(scale * self.hi, fmt)}]"


def _values(x: Iterable[float]) -> np.ndarray:
    v = np.asarray(list(x), dtype=float)
    if not np.isfinite(v).all():
        raise ValueError(f"an interval needs finite values; got {v.tolist()}")
    return v


def _boot(samples: tuple[np.ndarray, ...], statistic) -> tuple[float, float]:
    res = bootstrap(samples, statistic, method="percentile", confidence_level=CONFIDENCE,
                    n_resamples=N_RESAMPLES, rng=np.random.default_rng(SEED), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def t_interval(x: Iterable[float]) -> Interval:
    """Return the mean of ``x`` and its 95% Student-t interval, mean ± t(0.975, n − 1)·s/√n: for a handful of
    replicates, where a percentile bootstrap would give little more than their range (about 77% coverage at n = 3)."""
    from scipy.stats import t

    v = _values(x)
    if len(v) < MIN_REPLICATES:
        return Interval(float(v.mean()) if len(v) else float("nan"), float("nan"), float("nan"), len(v))
    half = float(t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return Interval(float(v.mean()), float(v.mean()) - half, float(v.mean()) + half, len(v))


def interval(x: Iterable[float]) -> Interval:
    """Return the mean of ``x`` and its 95% percentile-bootstrap interval over the replicates."""
    v = _values(x)
    if len(v) == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    if len(v) < MIN_REPLICATES:
        return Interval(float(v.mean()), float("nan"), float("nan"), len(v))
    if np.all(v == v[0]):
        return Interval(float(v[0]), float(v[0]), float(v[0]), len(v))
    lo, hi = _boot((v,), lambda a, axis: a.mean(axis=axis))
    return Interval(float(v.mean()), lo, hi, len(v))


def interval_diff(a: Iterable[float], b: Iterable[float]) -> Interval:
    """Return mean(a) − mean(b) for independent replicates, with its 95% bootstrap interval (each sample resampled
    on its own); ``n`` is the smaller sample's size."""
    va, vb = _values(a), _values(b)
    n = min(len(va), len(vb))
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    mean = float(va.mean() - vb.mean())
    if n < MIN_REPLICATES:
        return Interval(mean, float("nan"), float("nan"), n)
    if np.all(va == va[0]) and np.all(vb == vb[0]):
        return Interval(mean, mean, mean, n)
    lo, hi = _boot((va, vb), lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis))
    return Interval(mean, lo, hi, n)


def interval_of(samples: Iterable[Iterable[float]], statistic) -> Interval:
    """Return ``statistic`` of several independent samples (one per cell) and its 95% bootstrap interval, each
    sample resampled on its own (scipy.stats.bootstrap, vectorized: ``statistic(*samples, axis=-1)``); ``n`` is the
    smallest sample's size.  The interval is not computed with fewer than :data:`MIN_REPLICATES` in a sample."""
    vs = tuple(_values(x) for x in samples)
    n = min(len(v) for v in vs) if vs else 0
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    point = float(statistic(*vs, axis=-1))
    if n < MIN_REPLICATES:
        return Interval(point, float("nan"), float("nan"), n)
    lo, hi = _boot(vs, statistic)
    return Interval(point, lo, hi, n)


def fit_coefficient(samples: Iterable[Iterable[float]], design: np.ndarray, column: int) -> Interval:
    """Return coefficient ``column`` of the least-squares fit of the samples' means (one sample per row of
    ``design``, the fit's regressors) and its 95% bootstrap interval, each sample resampled on its own
    (:func:`interval_of`)."""
    row = np.linalg.pinv(np.asarray(design, float))[column]  # the fit's linear map from the means to the coefficient

    def coefficient(*xs: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.stack([x.mean(axis=axis) for x in xs], axis=-1) @ row

    return interval_of(samples, coefficient)


def above(iv: Interval, threshold: float, min_n: int = MIN_REPLICATES) -> str:
    """Return the verdict of "the mean exceeds ``threshold``": pass if the whole interval lies above it, fail if the
    whole interval lies at or below it, else (or with fewer than ``min_n`` replicates) inconclusive."""
    if iv.n < min_n or not iv.decided:
        return INCONCLUSIVE
    return PASS if iv.lo > threshold else FAIL if iv.hi <= threshold else INCONCLUSIVE


def at_least(iv: Interval, threshold: float, min_n: int = MIN_REPLICATES) -> str:
    """Return the verdict of "the mean is at least ``threshold``": pass if the whole interval is ≥ it, fail if the
    whole interval lies below it, else inconclusive."""
    if iv.n < min_n or not iv.decided:
        return INCONCLUSIVE
    return PASS if iv.lo >= threshold else FAIL if iv.hi < threshold else INCONCLUSIVE


def at_most(iv: Interval, threshold: float, min_n: int = MIN_REPLICATES) -> str:
    """Return the verdict of "the mean is at most ``threshold``": pass if the whole interval is ≤ it, fail if the
    whole interval lies above it, else inconclusive."""
    if iv.n < min_n or not iv.decided:
        return INCONCLUSIVE
    return PASS if iv.hi <= threshold else FAIL if iv.lo > threshold else INCONCLUSIVE


def both(*states: str) -> str:
    """Return the verdict of a conjunction: fail if any part fails, pass if every part passes, else inconclusive."""
    return FAIL if FAIL in states else PASS if all(s == PASS for s in states) else INCONCLUSIVE


def within(iv: Interval, tol: float, min_n: int = MIN_REPLICATES) -> str:
    """Return the verdict of an equivalence test, "the mean's magnitude is at most tol": pass if the whole interval
    lies in [−tol, tol],
    fail if it lies wholly outside, else inconclusive."""
    if iv.n < min_n or not iv.decided:
        return INCONCLUSIVE
    if -tol <= iv.lo and iv.hi <= tol:
        return PASS
    return FAIL if iv.lo > tol or iv.hi < -tol else INCONCLUSIVE


def trend_and_ends(rho: float, sign: int, ends: str, rho_min: float) -> str:
    """Return the verdict of "rises (sign +1) or falls (−1) along an axis": the rank correlation ρ of the means over
    the axis, and ``ends``, the verdict of the change from the first to the last point in the claimed direction
    (:func:`above` of sign × difference).

    Pass: sign·ρ ≥ rho_min and the ends moved the claimed way beyond their interval.  Fail: the ends moved the
    other way beyond it, or the trend is missing (sign·ρ < rho_min) and the ends did not move the claimed way
    beyond it.  Otherwise inconclusive."""
    trended = bool(np.isfinite(rho) and sign * rho >= rho_min)
    if ends == FAIL:
        return FAIL
    if ends == PASS:
        return PASS if trended else INCONCLUSIVE
    return INCONCLUSIVE if trended else FAIL


# -- rank correlations, per-cell summaries and fits ------------------------------------
def spearman(x: Iterable[float], y: Iterable[float]) -> float:
    """Return Spearman's rank correlation of x and y (NaN when either is constant)."""
    x, y = np.asarray(list(x), float), np.asarray(list(y), float)
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    # rounded so that a ρ that is exactly a threshold in exact arithmetic (0.9 for one swap of 5) stays on it
    return round(float(spearmanr(x, y).statistic), 12)


def trend(rho: float, up: str = "rises", down: str = "falls", flat: str = "shows no consistent trend") -> str:
    """Return the word for a rank correlation: ``up`` for ρ ≥ 0.5, ``down`` for ρ ≤ −0.5, else ``flat``."""
    return up if rho >= 0.5 else down if rho <= -0.5 else flat


def cell_stats(df: pd.DataFrame, metric: str, by: str = "hidden_units", **filters) -> pd.DataFrame:
    """Return, for each value of ``by``, the mean, min, max and spread (max − min) of ``metric`` over replicates.

    A replicate is a model (``seed``) where every selected row names one, else a pair
    (``pair``).  Rows with several values per (cell, replicate), e.g. several layers, are
    averaged within each replicate first.
    """
    d = select(df, metric, **filters)
    per_seed = d.groupby([by, replicate(d)])["value"].mean().reset_index()
    g = per_seed.groupby(by)["value"]
    out = pd.DataFrame({"mean": g.mean(), "lo": g.min(), "hi": g.max()})
    out["spread"] = out["hi"] - out["lo"]
    return out


def cell_means(df: pd.DataFrame, metrics: dict[str, str], by: str = "hidden_units", **filters) -> pd.DataFrame:
    """Return, for each value of ``by``, the :func:`cell_stats` mean of each metric on the trained pairs (column
    ``KEY``) and on the untrained pairs (``KEY_un``), with the trained spread over replicates (``KEY_spread``).

    ``metrics`` maps each key to a metric: ``cell_means(orth, {"ratio": "orth_ratio"}, lam=0.5)`` has columns
    ``ratio``, ``ratio_spread`` and ``ratio_un``.  A metric measured only on trained pairs leaves ``KEY_un`` NaN.
    """
    out = {}
    for key, metric in metrics.items():
        trained = cell_stats(df, metric, by, **filters, method="trained")
        out[key], out[f"{key}_spread"] = trained["mean"], trained["spread"]
        out[f"{key}_un"] = cell_stats(df, metric, by, **filters, method="untrained")["mean"]
    return pd.DataFrame(out)


def quadratic_fit(x: Iterable[float], y: Iterable[float]) -> dict[str, float]:
    """Return the least-squares quadratic y ≈ c2·x² + c1·x + c0 and what the claims read off it.

    Keys: ``c0``, ``c1``, ``c2``, ``residual_var`` (mean squared residual), ``vertex`` (−c1/2c2, NaN if
    c2 = 0), ``interior`` (1.0 if c2 < 0 and the vertex lies strictly inside [min x, max x]),
    ``fit_vertex``, ``fit_lo`` and ``fit_hi`` (the fitted y at the vertex and at both ends of x).
    """
    x, y = np.asarray(list(x), float), np.asarray(list(y), float)
    if len(x) < 3 or len(np.unique(x)) < 3:
        raise ValueError(f"a quadratic fit needs at least 3 distinct x values; got {len(np.unique(x))}")
    c2, c1, c0 = np.polyfit(x, y, 2)
    resid = y - np.polyval([c2, c1, c0], x)
    lo, hi = float(x.min()), float(x.max())
    vertex = -c1 / (2 * c2) if c2 != 0 else float("nan")
    interior = bool(c2 < 0 and lo < vertex < hi)
    return {"c0": float(c0), "c1": float(c1), "c2": float(c2), "residual_var": float(np.mean(resid ** 2)),
            "vertex": float(vertex), "interior": float(interior),
            "fit_vertex": float(np.polyval([c2, c1, c0], vertex)) if np.isfinite(vertex) else float("nan"),
            "fit_lo": float(np.polyval([c2, c1, c0], lo)), "fit_hi": float(np.polyval([c2, c1, c0], hi))}


def spread(df: pd.DataFrame, cell: list[str], col: str = "value") -> float:
    """Return the mean over cells of (max − min over seeds) of ``col``."""
    g = df.groupby(cell)[col]
    return float((g.max() - g.min()).mean())
