"""Metric names, the schema of the book's result files, and the claims scoreboard's tests.

Every notebook saves one long-format CSV, ``book/generated/data/NAME.csv``, with
the required columns ``notebook, metric, value, seed`` and optional key columns.
Metric names are the constants below; :func:`validate_results` checks a frame
against the schema, and a test runs it on every generated CSV.  The claim tests
(:func:`scoreboard`) read only those CSVs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("notebook", "metric", "value", "seed")
KEY_COLUMNS = ("width", "hidden_units", "depth", "layer", "lam", "weight_decay", "epochs", "lr", "batch_size",
               "momentum", "spawn_fraction", "method", "index", "norm", "augment", "lr_b", "alpha", "task", "regime")

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

# -- the training regime (lmcbook.regime), one value per model (seed = the model's own seed) ------
DECAY_INTEGRAL = "decay_integral"  #: D = Σ_t wd·η_t since the initialisation; weight decay alone shrinks by e^(−D)
DECAY_SHRINKAGE = "decay_shrinkage"  #: factor weight decay alone (momentum included) shrinks a weight by, same steps
INIT_DISTANCE = "init_distance"  #: ‖θ_T − θ_0‖ / ‖θ_0‖, over all parameters (layer NaN) and per layer
WEIGHT_NORM = "weight_norm"  #: ‖W_l‖_F per layer, and ‖θ_T‖ over all parameters (layer NaN)

# -- the noise study (spawn-and-merge) -------------------------------------------------
GAIN, GAIN_BEST, LOSS_GAIN = "gain", "gain_best", "loss_gain"  #: merged acc − mean / − best endpoint; loss drop
NOISE_SCALE, NOISE_SCALE_SQ = "noise_scale", "noise_scale_sq"  #: η/(B(1−μ)) and η/(B(1−μ)²)
TASK_LOSS, TASK_ACC = "task_loss", "task_acc"  #: test loss / accuracy on one task (task arithmetic)
CLAIM_PASSED = "claim_passed"  #: 1.0 if a scoreboard test passed (method = the claim's id)
CLAIM_CONTROL = "claim_control"  #: 1.0 if the row tests a control experiment, not a claim of a paper

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
    # rounded so that a ρ that is exactly a threshold in exact arithmetic (0.9 for one swap of 5) stays on it
    return round(float(spearmanr(x, y).statistic), 12)


def trend(rho: float, up: str = "rises", down: str = "falls", flat: str = "shows no consistent trend") -> str:
    """Return the word for a rank correlation: ``up`` for ρ ≥ 0.5, ``down`` for ρ ≤ −0.5, else ``flat``."""
    return up if rho >= 0.5 else down if rho <= -0.5 else flat


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


# -- the claims scoreboard --------------------------------------------------------------
# Each test is fixed here, before any result is looked at, and reads only the long-format
# CSVs that the pages save.  Conventions: figures are seed means; ρ is Spearman's rank
# correlation across widths; "spread" is the mean over cells of (max − min over seeds);
# noise fits are quadratic least squares on seed-level points.


@dataclass
class ClaimResult:
    """One row of the scoreboard: the paper's statement, what was measured, the test, and its verdict."""

    id: str
    paper: str
    statement: str
    measured: str
    test: str
    passed: bool
    page: str
    control: bool = False
    values: dict[str, float] = field(default_factory=dict)
    #: "short" (the profile's own training length) or "long" (the regime page's longest); None where it
    #: does not apply (the noise study, claims across lengths).
    regime: str | None = None
    #: The decay integral D of the runs the row reads (the strongest weight decay's), NaN if not recorded.
    decay_integral: float = float("nan")


REGIMES = ("short", "long")
#: The key columns of a run's training-regime rows in a page's CSV.
REGIME_KEYS = ("width", "hidden_units", "depth", "layer", "weight_decay", "epochs")


def decay_of(df: pd.DataFrame) -> float:
    """Return the mean decay integral D recorded in a page's frame at its strongest weight decay (NaN if absent)."""
    d = select(df, DECAY_INTEGRAL)
    if d.empty:
        return float("nan")
    if "weight_decay" in d.columns and d["weight_decay"].notna().any():
        d = d[np.isclose(d["weight_decay"], d["weight_decay"].max())]
    return float(d["value"].mean())


def at_length(df: pd.DataFrame, epochs: float | None = None, strongest: bool = False) -> pd.DataFrame:
    """Return the rows of a training-regime frame at ``epochs`` (default: the longest), and with ``strongest``
    only those at its strongest weight decay."""
    epochs = df["epochs"].max() if epochs is None else epochs
    out = df[np.isclose(df["epochs"], epochs)]
    return out[np.isclose(out["weight_decay"], out["weight_decay"].max())] if strongest else out


def _in_regime(r: ClaimResult, df: pd.DataFrame, regime: str) -> ClaimResult:
    if regime not in REGIMES:
        raise ValueError(f"regime={regime!r} is not allowed: expected one of {REGIMES}")
    r.regime, r.decay_integral = regime, decay_of(df)
    return r


def _by_width(df: pd.DataFrame, metric: str, **filters) -> pd.DataFrame:
    return cell_stats(df, metric, by="hidden_units", **filters)


def _rho_row(df, metric, **filters) -> tuple[float, pd.DataFrame]:
    st = _by_width(df, metric, **filters)
    return spearman(st.index, st["mean"]), st


def claim_w1(width_accuracy: pd.DataFrame, regime: str = "short", page: str = "width_accuracy") -> ClaimResult:
    """W1: merged accuracy rises with width, ρ(width, merged accuracy at λ=½) ≥ 0.9."""
    rho, st = _rho_row(width_accuracy, ACC_MERGED)
    return _in_regime(ClaimResult("W1", "width", "Merged accuracy rises with width.",
                                  f"ρ = {rho:.2f}; merged accuracy {st['mean'].iloc[0]:.3f} at {st.index[0]} → "
                                  f"{st['mean'].iloc[-1]:.3f} at {st.index[-1]} hidden units",
                                  "ρ(width, merged accuracy at λ=½) ≥ 0.9", bool(rho >= 0.9), page,
                                  values={"rho": rho}), width_accuracy, regime)


def claim_w2(barrier: pd.DataFrame) -> ClaimResult:
    """W2: calibration removes the barrier: ρ(width, calibrated midpoint loss barrier) ≤ −0.9 and
    calibrated/raw ≤ 0.25 at the widest width."""
    rho, cal = _rho_row(barrier, LOSS_BARRIER_CAL_MID)
    raw = _by_width(barrier, LOSS_BARRIER_MID)
    ratio = cal["mean"].iloc[-1] / raw["mean"].iloc[-1]
    return ClaimResult("W2", "width", "Temperature calibration removes the loss barrier of wide networks.",
                       f"ρ = {rho:.2f}; at {cal.index[-1]} units calibrated {cal['mean'].iloc[-1]:.3f} nats vs raw "
                       f"{raw['mean'].iloc[-1]:.3f} (ratio {ratio:.2f}; the paper: near zero)",
                       "ρ(width, calibrated midpoint loss barrier) ≤ −0.9 and calibrated/raw ≤ 0.25 at the widest",
                       bool(rho <= -0.9 and ratio <= 0.25), "loss_barrier_calibration",
                       values={"rho": rho, "ratio": ratio, "calibrated": cal["mean"].iloc[-1]})


def _last_hidden(df: pd.DataFrame) -> int:
    return int(df["layer"].max()) - 1


def claim_w3(lewc: pd.DataFrame) -> ClaimResult:
    """W3: ρ(width, LEWC relative error at λ=½, last hidden layer) ≤ −0.9, and at the widest width it is below
    the untrained pair's error by more than the spread."""
    layer = _last_hidden(lewc)
    rho, tr = _rho_row(lewc, LEWC_REL_ERR, lam=0.5, layer=layer, method="trained")
    un = _by_width(lewc, LEWC_REL_ERR, lam=0.5, layer=layer, method="untrained")
    wide = tr.index[-1]
    sp = float(tr["spread"].mean())
    margin = un.loc[wide, "mean"] - tr.loc[wide, "mean"]
    return ClaimResult("W3", "width", "LEWC holds better as width grows.",
                       f"ρ = {rho:.2f}; at {wide} units error {tr.loc[wide, 'mean']:.3f} vs untrained "
                       f"{un.loc[wide, 'mean']:.3f} (spread {sp:.3f})",
                       "ρ(width, LEWC error at λ=½, last hidden layer) ≤ −0.9 and, at the widest, below the "
                       "untrained pair's by more than the spread", bool(rho <= -0.9 and margin > sp), "lewc",
                       values={"rho": rho, "margin": margin, "spread": sp})


def claim_w4(add: pd.DataFrame) -> ClaimResult:
    """W4: ρ(width, additivity error at λ=½, mean over hidden layers) ≤ −0.9, and below the Gaussian baseline at
    the widest width."""
    rho, tr = _rho_row(add, ADDITIVITY_REL_ERR, lam=0.5, method="trained")
    base = _by_width(add, BASELINE_ADDITIVITY_REL_ERR, lam=0.5, method="trained")
    wide = tr.index[-1]
    below = tr.loc[wide, "mean"] < base.loc[wide, "mean"]
    return ClaimResult("W4", "width", "Weak additivity of the ReLU improves with width.",
                       f"ρ = {rho:.2f}; at {wide} units error {tr.loc[wide, 'mean']:.3f} vs Gaussian baseline "
                       f"{base.loc[wide, 'mean']:.3f}",
                       "ρ(width, additivity error at λ=½, mean over hidden layers) ≤ −0.9 and below the Gaussian "
                       "baseline at the widest", bool(rho <= -0.9 and below), "weak_additivity",
                       values={"rho": rho})


def claim_w5(orth: pd.DataFrame) -> ClaimResult:
    """W5: ρ(width, orthogonality norm ratio, mean over both directions and layers 2..L) ≤ −0.9."""
    rho, st = _rho_row(orth, ORTH_RATIO, lam=0.5, method="trained")
    return ClaimResult("W5", "width", "Reciprocal orthogonality strengthens with width.",
                       f"ρ = {rho:.2f}; norm ratio {st['mean'].iloc[0]:.3f} → {st['mean'].iloc[-1]:.3f}",
                       "ρ(width, ‖W^a z^b‖/‖W^a z^a‖ averaged over both directions and layers 2..L) ≤ −0.9",
                       bool(rho <= -0.9), "reciprocal_orthogonality", values={"rho": rho})


def hidden_to_hidden(rank: pd.DataFrame) -> pd.DataFrame:
    """Return the rows of the hidden-to-hidden layers (neither the first nor the last layer)."""
    return rank[(rank["layer"] > rank["layer"].min()) & (rank["layer"] < rank["layer"].max())]


def claim_w6(rank: pd.DataFrame, regime: str = "short", page: str = "low_rank") -> ClaimResult:
    """W6: ρ(width, relative effective rank of the hidden-to-hidden matrices) ≤ −0.9."""
    rho, st = _rho_row(hidden_to_hidden(rank), REL_EFFECTIVE_RANK, method="trained")
    return _in_regime(ClaimResult("W6", "width", "Weights become low-rank relative to their size as width grows.",
                                  f"ρ = {rho:.2f}; relative effective rank {st['mean'].iloc[0]:.3f} → "
                                  f"{st['mean'].iloc[-1]:.3f}",
                                  "ρ(width, relative effective rank of hidden-to-hidden matrices) ≤ −0.9",
                                  bool(rho <= -0.9), page, values={"rho": rho}), rank, regime)


def claim_w7(wd: pd.DataFrame, regime: str = "short", page: str = "weak_weight_decay") -> ClaimResult:
    """W7: at the widest width, merged accuracy with weak weight decay is lower than with strong weight decay by
    more than the larger of the two conditions' spreads."""
    decays = sorted(wd["weight_decay"].dropna().unique())
    weak, strong = (_by_width(wd, ACC_MERGED, weight_decay=d) for d in (decays[0], decays[-1]))
    wide = strong.index[-1]
    gap = strong.loc[wide, "mean"] - weak.loc[wide, "mean"]
    sp = max(strong["spread"].mean(), weak["spread"].mean())
    return _in_regime(ClaimResult("W7", "width", "Weak weight decay breaks the width effect.",
                                  f"at {wide} units merged accuracy {weak.loc[wide, 'mean']:.3f} (wd {decays[0]:g}) "
                                  f"vs {strong.loc[wide, 'mean']:.3f} (wd {decays[-1]:g}); gap {gap:.3f}, spread "
                                  f"{sp:.3f}",
                                  "at the widest width, weak-decay merged accuracy lower by more than the larger "
                                  "spread", bool(gap > sp), page, values={"gap": gap, "spread": sp}), wd, regime)


def claim_w8(perm: pd.DataFrame) -> ClaimResult:
    """W8 (control): at the widest width the spread of merged accuracy over random-permutation draws is ≤ 1 point,
    and ≤ ¼ of that spread at the narrowest width."""
    d = select(perm, ACC_MERGED, method="random_permutation")
    per_pair = d.groupby(["hidden_units", "seed"])["value"].agg(lambda v: v.max() - v.min()).groupby(level=0).mean()
    narrow, wide = per_pair.iloc[0], per_pair.iloc[-1]
    ok = wide <= 0.01 and wide <= 0.25 * narrow
    return ClaimResult("W8", "width", "(control) Random permutations change little once networks are wide.",
                       f"spread over draws {100 * narrow:.1f} points at {per_pair.index[0]} units, "
                       f"{100 * wide:.1f} at {per_pair.index[-1]}",
                       "spread at the widest ≤ 1 point and ≤ ¼ of the spread at the narrowest", bool(ok),
                       "random_permutation", control=True, values={"narrow": narrow, "wide": wide})


def claim_w9(barrier: pd.DataFrame) -> ClaimResult:
    """W9: at the widest width the logit norm ratio is within 25% of 2^(1−L)."""
    st = _by_width(barrier, LOGIT_NORM_RATIO)
    L = int(select(barrier, LOGIT_NORM_RATIO)["depth"].iloc[0])
    pred = 2.0 ** (1 - L)
    rel = abs(st["mean"].iloc[-1] / pred - 1)
    return ClaimResult("W9", "width", "Merged logits are the ensemble's shrunk by 2^(1−L).",
                       f"norm ratio {st['mean'].iloc[-1]:.3f} at {st.index[-1]} units vs 2^(1−{L}) = {pred:.3f} "
                       f"({100 * rel:.0f}% off)", "within 25% of 2^(1−L) at the widest width", bool(rel <= 0.25),
                       "loss_barrier_calibration", values={"rel": rel})


def claim_w10(depth: pd.DataFrame) -> ClaimResult:
    """W10: the depth law: a least-squares fit of log2(logit norm ratio) on L − 1 over the depth sweep's seed-level
    points has slope −β with β within 0.25 of 1."""
    d = select(depth, LOGIT_NORM_RATIO)
    x, y = d["depth"].to_numpy(float) - 1, np.log2(d["value"].to_numpy(float))
    slope, intercept = np.polyfit(x, y, 1)
    beta = -slope
    units = int(d["hidden_units"].iloc[0])
    return ClaimResult("W10", "width", "Merged logits shrink by a factor 2 per layer (the depth law; ours).",
                       f"β = {beta:.3f}, α = {intercept:.3f} at {units} units, L = {int(d['depth'].min())}.."
                       f"{int(d['depth'].max())}", "|β − 1| ≤ 0.25", bool(abs(beta - 1) <= 0.25), "lewc_depth",
                       values={"beta": beta, "alpha": intercept})


def regime_cells(tr: pd.DataFrame, metric: str, hidden: bool = False, **filters) -> tuple[int, pd.DataFrame]:
    """Return the widest width trained in every (length, weight decay) cell of a training-regime frame, and per
    cell there: the mean decay integral D, and the seed mean and spread of ``metric`` (over the hidden-to-hidden
    layers only, with ``hidden``)."""
    cells = tr.groupby(["epochs", "weight_decay"])["hidden_units"].agg(lambda u: set(u.dropna()))
    units = int(max(set.intersection(*cells)))
    rows = []
    for (e, wd), cell in tr[tr["hidden_units"] == units].groupby(["epochs", "weight_decay"]):
        st = cell_stats(hidden_to_hidden(cell) if hidden else cell, metric, **filters)
        rows.append({"epochs": e, "weight_decay": wd, "D": float(select(cell, DECAY_INTEGRAL)["value"].mean()),
                     "mean": float(st["mean"].iloc[0]), "spread": float(st["spread"].iloc[0])})
    return units, pd.DataFrame(rows).sort_values("D", ignore_index=True)


def claim_r1(tr: pd.DataFrame) -> ClaimResult:
    """R1: at the widest width trained at every length, ρ(D, relative effective rank of the hidden-to-hidden
    matrices) ≤ −0.9 across the (length, weight decay) cells."""
    units, st = regime_cells(tr, REL_EFFECTIVE_RANK, hidden=True, method="trained")
    rho = spearman(st["D"], st["mean"])
    lo, hi = st.iloc[0], st.iloc[-1]
    return ClaimResult("R1", "width", "Weight decay makes the weights low-rank: the longer it acts, the lower the "
                       "rank (the first link of the paper's causal account).",
                       f"at {units} units, ρ(D, rank) = {rho:.2f}; relative effective rank {lo['mean']:.3f} at "
                       f"D = {lo['D']:.3g} → {hi['mean']:.3f} at D = {hi['D']:.3g}",
                       "ρ(D, relative effective rank of hidden-to-hidden matrices) ≤ −0.9 over the (length, weight "
                       "decay) cells at the widest common width", bool(rho <= -0.9), "training_regime",
                       values={"rho": rho, "units": units, "rank_lo_d": lo["mean"], "rank_hi_d": hi["mean"]})


def claim_r2(tr: pd.DataFrame) -> ClaimResult:
    """R2: at the widest width trained at every length, ρ(D, merged accuracy at λ=½) ≥ 0.9 across the (length,
    weight decay) cells."""
    units, st = regime_cells(tr, ACC_MERGED)
    rho = spearman(st["D"], st["mean"])
    lo, hi = st.iloc[0], st.iloc[-1]
    return ClaimResult("R2", "width", "As weight decay acts longer (larger D), merging without permutations improves "
                       "(the paper's causal account, end to end).",
                       f"at {units} units, ρ(D, merged accuracy) = {rho:.2f}; merged accuracy {lo['mean']:.3f} at "
                       f"D = {lo['D']:.3g} → {hi['mean']:.3f} at D = {hi['D']:.3g}",
                       "ρ(D, merged accuracy at λ=½) ≥ 0.9 over the (length, weight decay) cells at the widest "
                       "common width", bool(rho >= 0.9), "training_regime",
                       values={"rho": rho, "units": units, "acc_lo_d": lo["mean"], "acc_hi_d": hi["mean"]})


def _grid(noise: pd.DataFrame) -> pd.DataFrame:
    """Return the grid's seed-level gains as columns (lr, batch_size, seed, gain, noise_scale)."""
    g = noise[noise["method"] == "grid"]
    wide = g.pivot_table(index=["lr", "batch_size", "seed", "spawn_fraction"], columns="metric", values="value")
    return wide.reset_index()


def claim_n1(noise: pd.DataFrame) -> list[ClaimResult]:
    """N1 (one row per spawn point run over the full grid): the vertex of the quadratic fit of gain on log10 S lies
    strictly inside the grid, and the fitted gain there exceeds the fitted gain at both ends by more than the spread."""
    out = []
    for k, g in _grid(noise).groupby("spawn_fraction"):
        fit = quadratic_fit(np.log10(g["noise_scale"]), g["gain"])
        sp = spread(g, ["lr", "batch_size"], "gain")
        margin = fit["fit_vertex"] - max(fit["fit_lo"], fit["fit_hi"])
        ok = bool(fit["interior"]) and margin > sp
        out.append(ClaimResult(f"N1 ({k:.0%})", "noise", "Merging gain has an optimum at intermediate noise S.",
                               f"vertex S* = {10 ** fit['vertex']:.2e}, fitted gain there {100 * fit['fit_vertex']:.2f}"
                               f" points, {100 * margin:.2f} above the higher end (spread {100 * sp:.2f})",
                               "vertex of the quadratic fit on log10 S inside the grid and above both ends by more "
                               "than the spread", ok, "noise_scale", values={"margin": margin, "spread": sp}))
    return out


def claim_n2(noise: pd.DataFrame) -> list[ClaimResult]:
    """N2: the residual variance of gain around its quadratic fit on log10 S ≤ 0.5 × that around its fit on
    log10 η."""
    out = []
    for k, g in _grid(noise).groupby("spawn_fraction"):
        vs = quadratic_fit(np.log10(g["noise_scale"]), g["gain"])["residual_var"]
        ve = quadratic_fit(np.log10(g["lr"]), g["gain"])["residual_var"]
        out.append(ClaimResult(f"N2 ({k:.0%})", "noise", "Gains against S collapse onto one curve.",
                               f"residual variance {1e4 * vs:.3f} (on S) vs {1e4 * ve:.3f} points² (on η); "
                               f"ratio {vs / ve:.2f}", "ratio ≤ 0.5", bool(vs <= 0.5 * ve), "noise_scale",
                               values={"ratio": vs / ve}))
    return out


def claim_n3(components: pd.DataFrame) -> ClaimResult:
    """N3: without normalisation, the change in gain across the weight-decay values is ≤ max(0.5 points, spread)."""
    d = select(components, GAIN, method="weight_decay", norm="none")
    means = d.groupby("weight_decay")["value"].mean()
    delta = float(means.max() - means.min())
    sp = spread(d, ["weight_decay"])
    tol = max(0.005, sp)
    return ClaimResult("N3", "noise", "Without normalisation, weight decay barely changes merging.",
                       f"|Δ gain| = {100 * delta:.2f} points over weight decay "
                       f"{', '.join(f'{v:g}' for v in means.index)} (spread {100 * sp:.2f})",
                       "|Δ gain| ≤ max(0.5 points, spread)", bool(delta <= tol), "noise_components",
                       values={"delta": delta, "spread": sp})


#: Which page's CSV each claim reads (W1, W6 and W7 in the short regime; their long rows, R1 and R2 read
#: ``training_regime``).
CLAIM_SOURCES = {"W1": "width_accuracy", "W2": "loss_barrier_calibration", "W3": "lewc", "W4": "weak_additivity",
                 "W5": "reciprocal_orthogonality", "W6": "low_rank", "W7": "weak_weight_decay",
                 "W8": "random_permutation", "W9": "loss_barrier_calibration", "W10": "lewc_depth",
                 "R1": "training_regime", "R2": "training_regime",
                 "N1": "noise_scale", "N2": "noise_scale", "N3": "noise_components"}
#: The claims scored in both regimes.
REGIME_CLAIMS = ("W1", "W6", "W7")


def scoreboard(frames: dict[str, pd.DataFrame]) -> list[ClaimResult]:
    """Return every claim's result, reading the pages' long frames by notebook name.

    W1, W6 and W7 appear twice: on the profile's own runs (``regime="short"``) and on the
    training-regime page's longest length (``regime="long"``).  The other width rows are read
    on the short regime's pages and say so.
    """
    f = frames
    tr = f["training_regime"]
    rows = [claim_w1(f["width_accuracy"]), claim_w1(at_length(tr, strongest=True), "long", "training_regime"),
            claim_w2(f["loss_barrier_calibration"]), claim_w3(f["lewc"]), claim_w4(f["weak_additivity"]),
            claim_w5(f["reciprocal_orthogonality"]),
            claim_w6(f["low_rank"]), claim_w6(at_length(tr, strongest=True), "long", "training_regime"),
            claim_w7(f["weak_weight_decay"]), claim_w7(at_length(tr), "long", "training_regime"),
            claim_w8(f["random_permutation"]), claim_w9(f["loss_barrier_calibration"]), claim_w10(f["lewc_depth"])]
    for r in rows:
        if r.regime is None:
            _in_regime(r, f[r.page], "short")
    rows += [claim_r1(tr), claim_r2(tr)]
    rows += claim_n1(f["noise_scale"]) + claim_n2(f["noise_scale"]) + [claim_n3(f["noise_components"])]
    return rows


def scoreboard_markdown(rows: list[ClaimResult]) -> str:
    """Return the scoreboard as a MyST table, each row linking to the page with its evidence."""
    lines = ["| claim | regime | paper's statement | measured here | test | result | evidence |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = "✓" if r.passed else "✗"
        label = f"{r.id} (control)" if r.control else r.id
        regime = "—" if r.regime is None else (f"{r.regime} (D = {r.decay_integral:.3g})"
                                               if np.isfinite(r.decay_integral) else r.regime)
        cells = [label, regime, f"{r.paper} paper: {r.statement}", r.measured, r.test, mark, f"{{doc}}`{r.page}`"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
