"""Metric names and the schema of the book's result files.

Every notebook saves one long-format CSV, ``book/generated/data/NAME.csv``, with
the required columns ``notebook, metric, value, seed`` and optional key columns.
Metric names are the constants below; :func:`validate_results` checks a frame
against the schema, and a test runs it on every generated CSV.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("notebook", "metric", "value", "seed")
KEY_COLUMNS = ("width", "hidden_units", "depth", "layer", "lam", "weight_decay", "lr", "batch_size",
               "momentum", "spawn_fraction", "method", "index", "norm", "augment", "lr_b", "alpha", "task")

# -- interpolation curve (one value per λ) -------------------------------------------
ACC = "acc"  #: test accuracy of θ(λ)
LOSS = "loss"  #: test NLL of θ(λ), nats
LOSS_CAL = "loss_cal"  #: test NLL at the model's own τ fitted on the calibration split
TAU = "tau"  #: fitted inverse temperature
TAU_AT_BOUND = "tau_at_bound"  #: 1 if the τ fit ended at a bound of [1e-3, 1e3]
LOGIT_NORM = "logit_norm"  #: Frobenius norm of the test logits

# -- pair summaries ------------------------------------------------------------------
ACC_A, ACC_B, ACC_ENDPOINTS = "acc_a", "acc_b", "acc_endpoints"
LOSS_ENDPOINTS, LOSS_CAL_ENDPOINTS = "loss_endpoints", "loss_cal_endpoints"
ACC_MERGED, LOSS_MERGED, LOSS_CAL_MERGED = "acc_merged", "loss_merged", "loss_cal_merged"
TAU_MERGED, TAU_AT_BOUND_MERGED = "tau_merged", "tau_at_bound_merged"
ACC_ENSEMBLE, LOSS_ENSEMBLE, LOSS_CAL_ENSEMBLE = "acc_ensemble", "loss_ensemble", "loss_cal_ensemble"
TAU_ENSEMBLE, TAU_AT_BOUND_ENSEMBLE = "tau_ensemble", "tau_at_bound_ensemble"
TAU_RATIO = "tau_ratio"  #: τ_merged / τ_ens; LEWC predicts 2^(L-1)
LOGIT_NORM_RATIO = "logit_norm_ratio"  #: ‖f_L(θ(½))‖ / ‖½(f_a + f_b)‖; LEWC predicts 2^(1-L)
ACC_BARRIER, ACC_BARRIER_MID = "acc_barrier", "acc_barrier_mid"
LOSS_BARRIER, LOSS_BARRIER_MID = "loss_barrier", "loss_barrier_mid"
LOSS_BARRIER_CAL, LOSS_BARRIER_CAL_MID = "loss_barrier_cal", "loss_barrier_cal_mid"

# -- theory probes (lmcbook.probes); method = "trained" or "untrained" ----------------
LEWC_COS, LEWC_REL_ERR, LEWC_N_EXCLUDED = "lewc_cos", "lewc_rel_err", "lewc_n_excluded"
LLFC_COS, LLFC_REL_ERR, LLFC_N_EXCLUDED = "llfc_cos", "llfc_rel_err", "llfc_n_excluded"
ADDITIVITY_REL_ERR, ADDITIVITY_COS, ADDITIVITY_N_EXCLUDED = (
    "additivity_rel_err", "additivity_cos", "additivity_n_excluded")
SIGN_CONFLICT = "sign_conflict"
BASELINE_ADDITIVITY_REL_ERR, BASELINE_ADDITIVITY_COS, BASELINE_ADDITIVITY_N_EXCLUDED = (
    "baseline_additivity_rel_err", "baseline_additivity_cos", "baseline_additivity_n_excluded")
BASELINE_SIGN_CONFLICT = "baseline_sign_conflict"
ORTH_RATIO_AB, ORTH_RATIO_BA, ORTH_RATIO = "orth_ratio_ab", "orth_ratio_ba", "orth_ratio"
CROSS_COS, CROSS_REL_ERR, CROSS_N_EXCLUDED = "cross_cos", "cross_rel_err", "cross_n_excluded"
#: Zhou et al. (2023)'s commutativity: ‖(W_a − W_b)(z_a − z_b)‖ / (‖W_a z_a‖ + ‖W_b z_b‖)
COMMUTATIVITY_REL_ERR = "commutativity_rel_err"

# -- the noise study (spawn-and-merge) -------------------------------------------------
GAIN, GAIN_BEST, LOSS_GAIN = "gain", "gain_best", "loss_gain"  #: merged acc − mean / − best endpoint; loss drop
NOISE_SCALE, NOISE_SCALE_SQ = "noise_scale", "noise_scale_sq"  #: η/(B(1−μ)) and η/(B(1−μ)²)
TASK_LOSS, TASK_ACC = "task_loss", "task_acc"  #: test loss / accuracy on one task (task arithmetic)

# -- controls (weight matching, random permutations, REPAIR) ---------------------------
MATCH_SECONDS, MATCH_ITERATIONS, MATCH_OBJECTIVE = "match_seconds", "match_iterations", "match_objective"
JACCARD, JACCARD_CHANCE, TOP_K, N_NEURONS = "jaccard", "jaccard_chance", "top_k", "n_neurons"
RMS_A, RMS_B = "rms_a", "rms_b"  #: per-neuron root second moments, keyed by index
SCALE_RATIO, SCALE_ALPHA, SCALE_BETA = "scale_ratio", "scale_alpha", "scale_beta"
EFFECTIVE_RANK, STABLE_RANK = "effective_rank", "stable_rank"
REL_EFFECTIVE_RANK, REL_STABLE_RANK = "rel_effective_rank", "rel_stable_rank"
SINGULAR_VALUE = "singular_value"  #: spectrum, keyed by index

METRICS: frozenset[str] = frozenset(v for k, v in dict(globals()).items()
                                    if k.isupper() and isinstance(v, str) and k not in ("REQUIRED_COLUMNS",))


class SchemaError(ValueError):
    """A result frame does not follow the long-format schema."""


def to_long(frame: pd.DataFrame, notebook: str, metrics: Iterable[str], keys: Iterable[str] = ()) -> pd.DataFrame:
    """Return ``frame`` melted to the long format: one row per (keys, seed, metric)."""
    metrics, keys = list(metrics), [k for k in keys if k != "seed"]
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise SchemaError(f"unknown metric name(s) {bad}: add them as constants in lmcbook/claims.py")
    long = frame[keys + ["seed"] + metrics].melt(id_vars=keys + ["seed"], value_vars=metrics,
                                                 var_name="metric", value_name="value")
    long["value"] = long["value"].astype(float)
    long.insert(0, "notebook", notebook)
    return long[["notebook", "metric", "value", "seed"] + keys]


def to_long_frame(frame: pd.DataFrame, notebook: str, keys: Iterable[str]) -> pd.DataFrame:
    """Return a frame that already has ``metric`` and ``value`` columns in the long format (keys that exist kept)."""
    cols = [k for k in KEY_COLUMNS if k in set(keys) | {"index"} and k in frame.columns]
    out = frame[["metric", "value", "seed"] + cols].copy()
    out["value"] = out["value"].astype(float)
    out.insert(0, "notebook", notebook)
    return out


def concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Return long-format frames stacked, with the required columns first and key columns in schema order."""
    df = pd.concat(list(frames), ignore_index=True)
    return df[list(REQUIRED_COLUMNS) + [c for c in KEY_COLUMNS if c in df.columns]]


def concat_frames(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Return frames stacked with a fresh index (any columns)."""
    return pd.concat(list(frames), ignore_index=True)


def validate_results(df: pd.DataFrame, notebook: str | None = None) -> None:
    """Raise SchemaError unless ``df`` follows the long-format schema."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"missing required column(s) {missing}: expected {list(REQUIRED_COLUMNS)}")
    extra = [c for c in df.columns if c not in REQUIRED_COLUMNS + KEY_COLUMNS]
    if extra:
        raise SchemaError(f"unknown column(s) {extra}: allowed key columns are {list(KEY_COLUMNS)}")
    if df.empty:
        raise SchemaError("the result frame is empty")
    if notebook is not None and set(df["notebook"]) != {notebook}:
        raise SchemaError(f"column 'notebook' holds {sorted(set(df['notebook']))}: expected only {notebook!r}")
    bad = sorted(set(df["metric"]) - METRICS)
    if bad:
        raise SchemaError(f"unknown metric name(s) {bad}: expected constants of lmcbook/claims.py")
    values = pd.to_numeric(df["value"], errors="coerce")
    if values.isna().any() or not np.isfinite(values.to_numpy()).all():
        rows = df[values.isna() | ~np.isfinite(values.fillna(0).to_numpy())].head(3)
        raise SchemaError(f"column 'value' must be finite numbers; bad rows:\n{rows}")
    seeds = pd.to_numeric(df["seed"], errors="coerce")
    if seeds.isna().any() or (seeds != seeds.round()).any():
        raise SchemaError("column 'seed' must hold integers")
    dup = df.duplicated(subset=[c for c in df.columns if c != "value"])
    if dup.any():
        raise SchemaError(f"{int(dup.sum())} duplicated (keys, metric, seed) rows, e.g.\n{df[dup].head(3)}")


def read_results(path: str | Path) -> pd.DataFrame:
    """Return a result CSV after validating it against the schema."""
    df = pd.read_csv(path)
    validate_results(df, Path(path).stem)
    return df


def spearman(x: Iterable[float], y: Iterable[float]) -> float:
    """Return Spearman's rank correlation of x and y (NaN when either is constant)."""
    from scipy.stats import spearmanr

    x, y = np.asarray(list(x), float), np.asarray(list(y), float)
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(spearmanr(x, y).statistic)


def select(df: pd.DataFrame, metric: str | None = None, **filters) -> pd.DataFrame:
    """Return the rows of a long frame with ``metric`` and every ``column=value`` filter (None filters skipped)."""
    mask = pd.Series(True, index=df.index)
    if metric is not None:
        mask &= df["metric"] == metric
    for col, val in filters.items():
        if val is not None:
            mask &= np.isclose(df[col], val) if isinstance(val, float) else df[col] == val
    return df[mask]


def cell_stats(df: pd.DataFrame, metric: str, by: str = "hidden_units", **filters) -> pd.DataFrame:
    """Return, for each value of ``by``, the seed mean, min, max and spread (max − min) of ``metric``.

    Rows with several values per (cell, seed), e.g. several layers, are averaged
    within each seed first.
    """
    d = select(df, metric, **filters)
    per_seed = d.groupby([by, "seed"])["value"].mean().reset_index()
    g = per_seed.groupby(by)["value"]
    out = pd.DataFrame({"mean": g.mean(), "lo": g.min(), "hi": g.max()})
    out["spread"] = out["hi"] - out["lo"]
    return out


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
