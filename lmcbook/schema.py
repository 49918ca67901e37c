"""The schema of the book's result files: metric names, key columns, the long format, selecting rows, and a
frame's Markdown table (:func:`markdown_table`).

Every notebook saves one long-format CSV, ``book/generated/data/NAME.csv``, with
the required columns ``notebook, metric, value``, a replicate (``pair`` or ``seed``)
and optional key columns.  Metric names are the constants below; :func:`validate_results`
checks a frame against the schema, and a test runs it on every generated CSV.  The claim
tests (:func:`lmcbook.claims.scoreboard`) read only those CSVs, through the selection
helpers near the end of this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("notebook", "metric", "value")
#: Every row names its replicate: ``pair`` (the pair index p, for a measurement of a pair) or ``seed`` (the
#: run's own seed, for a measurement of one model; pair p trains seeds 2p and 2p+1), or both.
REPLICATES = ("pair", "seed")
KEY_COLUMNS = ("width", "hidden_units", "depth", "layer", "lam", "weight_decay", "epochs", "lr", "batch_size",
               "momentum", "spawn_fraction", "method", "index", "norm", "augment", "lr_b", "alpha", "task", "regime",
               "init_scale", "dataset", "source", "lr_floor")

# -- interpolation curve (one value per λ) -------------------------------------------
#: The key columns of a probe page's rows: weight decay and epochs are on its regime rows instead.
PROBE_KEYS = ["width", "hidden_units", "depth", "layer", "lam", "method"]
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

# -- the training regime (lmcbook.probes), one value per model (seed = the model's own seed) ------
DECAY_INTEGRAL = "decay_integral"  #: D = Σ_t wd·η_t since the initialisation; weight decay alone shrinks by e^(−D)
DECAY_SHRINKAGE = "decay_shrinkage"  #: factor weight decay alone (momentum included) shrinks a weight by, same steps
INIT_DISTANCE = "init_distance"  #: ‖θ_T − θ_0‖ / ‖θ_0‖, over all parameters (layer NaN) and per layer
WEIGHT_NORM = "weight_norm"  #: ‖W_l‖_F per layer, and ‖θ_T‖ over all parameters (layer NaN)
LEWC_SETTING = "lewc_setting"  #: 1 for a bias-free MLP without normalisation (LEWC's λ^l setting), else 0
TRAIN_ACC = "train_acc"  #: a run's accuracy on its own training split (the convergence rules read it)
#: ‖W_l − W_l^0‖_F and the ranks of what training added to layer l (lmcbook.probes.update_ranks), per model
DELTA_NORM, DELTA_EFFECTIVE_RANK, DELTA_STABLE_RANK = "delta_norm", "delta_effective_rank", "delta_stable_rank"
DELTA_REL_EFFECTIVE_RANK, DELTA_REL_STABLE_RANK = "delta_rel_effective_rank", "delta_rel_stable_rank"

# -- the noise study (spawn-and-merge) -------------------------------------------------
GAIN, GAIN_BEST, LOSS_GAIN = "gain", "gain_best", "loss_gain"  #: merged acc − mean / − best endpoint; loss drop
TRAIN_ACC_MIN = "train_acc_min"  #: the weaker child's training accuracy, per pair (the noise convergence rule)
TRAIN_STEPS = "train_steps"  #: the steps a noise cell's runs took (the convergence rule may train a cell longer)
DIVERGED = "diverged"  #: 1 for a noise cell one of whose runs diverged (excluded, never merged: no gain rows)
NOISE_SCALE, NOISE_SCALE_SQ = "noise_scale", "noise_scale_sq"  #: η/(B(1−μ)) and η/(B(1−μ)²)
ENSEMBLE_GAIN = "ensemble_gain"  #: acc of two children's logit ensemble − their mean acc: what a merge could win
DISAGREEMENT = "disagreement"  #: share of test inputs on which the two children's predicted classes differ
PAIR_DISTANCE = "pair_distance"  #: ‖θa − θb‖ / ‖θ_spawn‖ (θ_spawn: the parent at the spawn, or the initialisation)
LOSS_A, LOSS_B = "loss_a", "loss_b"  #: each child's test loss
TRAIN_ACC_A, TRAIN_ACC_B, TRAIN_ACC_MERGED = "train_acc_a", "train_acc_b", "train_acc_merged"  #: training accuracies
TRAIN_LOSS_A, TRAIN_LOSS_B, TRAIN_LOSS_MERGED = "train_loss_a", "train_loss_b", "train_loss_merged"  #: training losses
TASK_LOSS, TASK_ACC = "task_loss", "task_acc"  #: test loss / accuracy on one task (task arithmetic)
TASK_CAL_LOSS = "task_cal_loss"  #: loss on one task's calibration split: α is chosen on it, never on test
CLAIM_PASSED = "claim_passed"  #: 1.0 if a scoreboard test passed (method = the claim's id)
CLAIM_STATE = "claim_state"  #: the verdict: 0 ✗, 1 ✓, 2 inconclusive, 3 n/a (claims.verdicts.STATE_CODES)
RUNS_MISSING = "runs_missing"  #: 1.0 if a page found a run it needs missing from the store (the explorer)
CLAIM_CONTROL = "claim_control"  #: 1.0 if the row tests a control experiment, not a claim of a paper
#: The scoreboard's numbers per row (claims.csv): the estimate its test decides on, that estimate's 95% interval and
#: the threshold it is held to (a row without one of them has no such metric row)
CLAIM_ESTIMATE, CLAIM_LO, CLAIM_HI, CLAIM_THRESHOLD = "claim_estimate", "claim_lo", "claim_hi", "claim_threshold"
CLAIM_BLOCK = "claim_block"  #: the scoreboard block of a row: 0 the papers' claims, 1 the book's own, 2 a diagnostic
#: 1.0 if a reference run's row repeats an earlier row (the same runs read again: claims.mark_repeats), not counted
CLAIM_REPEATS = "claim_repeats"

# -- controls (weight matching, random permutations, REPAIR) ---------------------------
MATCH_SECONDS, MATCH_ITERATIONS, MATCH_OBJECTIVE = "match_seconds", "match_iterations", "match_objective"
JACCARD, JACCARD_CHANCE, TOP_K, N_NEURONS = "jaccard", "jaccard_chance", "top_k", "n_neurons"
TOP_SHARE = "top_share"  #: share of Σ_i E[z_i²] held by a layer's top 10% of neurons (mean of the two models)
PARTICIPATION_RATIO = "participation_ratio"  #: (Σ m_i)² / (n Σ m_i²), m_i = E[z_i²]: 1 uniform, 1/n one neuron
RMS_A, RMS_B = "rms_a", "rms_b"  #: per-neuron root second moments, keyed by index
SCALE_RATIO, SCALE_ALPHA, SCALE_BETA = "scale_ratio", "scale_alpha", "scale_beta"
EFFECTIVE_RANK, STABLE_RANK = "effective_rank", "stable_rank"
REL_EFFECTIVE_RANK, REL_STABLE_RANK = "rel_effective_rank", "rel_stable_rank"
SINGULAR_VALUE = "singular_value"  #: spectrum, keyed by index

#: Metrics of one model (a run), whose replicate is the run's own seed.
PER_MODEL_METRICS = frozenset({"effective_rank", "stable_rank", "rel_effective_rank", "rel_stable_rank",
                               "singular_value", "decay_integral", "decay_shrinkage", "init_distance", "weight_norm",
                               "lewc_setting", "train_acc", "delta_norm", "delta_effective_rank", "delta_stable_rank",
                               "delta_rel_effective_rank", "delta_rel_stable_rank"})
METRICS: frozenset[str] = frozenset(v for k, v in dict(globals()).items()
                                    if k.isupper() and isinstance(v, str))

#: The key columns of a run's training-regime rows in a page's CSV.
REGIME_KEYS = ("width", "hidden_units", "depth", "layer", "weight_decay", "epochs")
CELL_KEYS = ("epochs", "weight_decay", "init_scale")  #: what identifies a cell of the mechanism study


class SchemaError(ValueError):
    """A result frame does not follow the long-format schema."""


def _replicates(frame: pd.DataFrame) -> list[str]:
    cols = [c for c in REPLICATES if c in frame.columns]
    if not cols:
        raise SchemaError(f"the frame has none of the replicate columns {list(REPLICATES)}")
    return cols


def to_long(frame: pd.DataFrame, notebook: str, metrics: Iterable[str], keys: Iterable[str] = (),
            drop_missing: bool = False) -> pd.DataFrame:
    """Return ``frame`` melted to the long format: one row per (keys, pair or seed, metric).  ``drop_missing``
    leaves out the metrics a row does not have (NaN: a diverged noise cell's gains), which are otherwise an error
    of the schema."""
    reps = _replicates(frame)
    metrics, keys = list(metrics), [k for k in keys if k not in REPLICATES]
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise SchemaError(f"unknown metric name(s) {bad}: add them as constants in lmcbook/schema.py")
    long = frame[keys + reps + metrics].melt(id_vars=keys + reps, value_vars=metrics, var_name="metric",
                                             value_name="value")
    long["value"] = long["value"].astype(float)
    if drop_missing:
        long = long[long["value"].notna()]
    long.insert(0, "notebook", notebook)
    return long[["notebook", "metric", "value"] + reps + keys]


def to_long_frame(frame: pd.DataFrame, notebook: str, keys: Iterable[str]) -> pd.DataFrame:
    """Return a frame that already has ``metric`` and ``value`` columns in the long format (keys that exist kept)."""
    cols = [k for k in KEY_COLUMNS if k in set(keys) | {"index"} and k in frame.columns]
    out = frame[["metric", "value"] + _replicates(frame) + cols].copy()
    out["value"] = out["value"].astype(float)
    out.insert(0, "notebook", notebook)
    return out


def concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Return long-format frames stacked, with the required columns first and key columns in schema order."""
    df = pd.concat(list(frames), ignore_index=True)
    return df[list(REQUIRED_COLUMNS) + [c for c in REPLICATES + KEY_COLUMNS if c in df.columns]]


def migrate(df: pd.DataFrame) -> pd.DataFrame:
    """Return a result frame in the current schema.

    Before the ``pair`` column existed, ``seed`` held the pair index on a pair's rows and the
    model's own seed on one model's rows (ranks, regime).  Such a frame gets ``pair`` from it:
    the index itself on pair rows (whose ``seed`` is then cleared), ``seed // 2`` on model rows.
    """
    if "pair" in df.columns or "seed" not in df.columns:
        return df
    df = df.copy()
    model = df["metric"].isin(PER_MODEL_METRICS)
    df.insert(df.columns.get_loc("seed"), "pair", np.where(model, df["seed"] // 2, df["seed"]))
    df["seed"] = df["seed"].where(model)
    return df


def validate_results(df: pd.DataFrame, notebook: str | None = None) -> None:
    """Raise SchemaError unless ``df`` follows the long-format schema."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"missing required column(s) {missing}: expected {list(REQUIRED_COLUMNS)}")
    extra = [c for c in df.columns if c not in REQUIRED_COLUMNS + REPLICATES + KEY_COLUMNS]
    if extra:
        raise SchemaError(f"unknown column(s) {extra}: allowed key columns are {list(KEY_COLUMNS)}")
    if df.empty:
        raise SchemaError("the result frame is empty")
    if notebook is not None and set(df["notebook"]) != {notebook}:
        raise SchemaError(f"column 'notebook' holds {sorted(set(df['notebook']))}: expected only {notebook!r}")
    bad = sorted(set(df["metric"]) - METRICS)
    if bad:
        raise SchemaError(f"unknown metric name(s) {bad}: expected constants of lmcbook/schema.py")
    values = pd.to_numeric(df["value"], errors="coerce")
    if values.isna().any() or not np.isfinite(values.to_numpy()).all():
        rows = df[values.isna() | ~np.isfinite(values.fillna(0).to_numpy())].head(3)
        raise SchemaError(f"column 'value' must be finite numbers; bad rows:\n{rows}")
    reps = _replicates(df)
    ints = [pd.to_numeric(df[c], errors="coerce") for c in reps]
    if any(((v != v.round()) & v.notna()).any() for v in ints):
        raise SchemaError(f"column(s) {reps} must hold integers")
    if pd.concat(ints, axis=1).isna().all(axis=1).any():
        raise SchemaError("every row needs a replicate: an integer 'pair' (a pair's measurement) or 'seed' (one "
                          "model's)")
    dup = df.duplicated(subset=[c for c in df.columns if c != "value"])
    if dup.any():
        raise SchemaError(f"{int(dup.sum())} duplicated (keys, metric, replicate) rows, e.g.\n{df[dup].head(3)}")


def read_results(path: str | Path) -> pd.DataFrame:
    """Return a result CSV (migrated to the current schema) after validating it against the schema."""
    df = migrate(pd.read_csv(path))
    validate_results(df, Path(path).stem)
    return df


# -- selecting rows -------------------------------------------------------------------
def select(df: pd.DataFrame, metric: str | None = None, **filters) -> pd.DataFrame:
    """Return the rows of a long frame with ``metric`` and every ``column=value`` filter (None filters skipped)."""
    mask = pd.Series(True, index=df.index)
    if metric is not None:
        mask &= df["metric"] == metric
    for col, val in filters.items():
        if val is not None:
            mask &= np.isclose(df[col], val) if isinstance(val, float) else df[col] == val
    return df[mask]


def replicate(d: pd.DataFrame) -> str:
    """Return the replicate column of a selection: ``seed`` if every row names a model, else ``pair``."""
    return "seed" if "seed" in d.columns and d["seed"].notna().all() else "pair"


def at_length(df: pd.DataFrame, epochs: float | None = None, strongest: bool = False) -> pd.DataFrame:
    """Return the rows of a training-regime frame at ``epochs`` (default: the longest), and with ``strongest``
    only those at its strongest weight decay."""
    epochs = df["epochs"].max() if epochs is None else epochs
    out = df[np.isclose(df["epochs"], epochs)]
    return out[np.isclose(out["weight_decay"], out["weight_decay"].max())] if strongest else out


def hidden_to_hidden(rank: pd.DataFrame) -> pd.DataFrame:
    """Return the rows of the hidden-to-hidden layers (neither the first nor the last layer)."""
    return rank[(rank["layer"] > rank["layer"].min()) & (rank["layer"] < rank["layer"].max())]


def last_hidden(df: pd.DataFrame) -> int:
    """Return the last hidden layer of a page's frame: the highest layer the LEWC probe recorded whose role is
    hidden (for an MLP, the layer before the logits; ResNet20's probes record residual blocks, all of them hidden).

    A probe frame says each probed layer's role in its ``role`` column ("hidden" or "output", from
    :attr:`lmcbook.probes.Record.roles`).  A page's CSV does not keep that column; there the highest probed layer
    is taken for the output layer when it is the model's head, the highest layer that the frame's per-layer weight
    norms (its training-regime rows) number, or when the frame has no weight norms.  ResNet20's 9 residual blocks
    are numbered below its head (layer 20), so none of them is taken for it.
    """
    d = df[df["metric"].isin([LEWC_REL_ERR, LEWC_COS])]
    d = d if len(d) else df
    if "role" in d.columns:
        return int(d.loc[d["role"] == "hidden", "layer"].max())
    top = int(d["layer"].max())
    weights = df.loc[df["metric"] == WEIGHT_NORM, "layer"].dropna()
    return top - 1 if weights.empty or top == int(weights.max()) else top


def in_cell(df: pd.DataFrame, cell: dict, units: float | None = None) -> pd.DataFrame:
    """Return the rows of one cell of the mechanism study (and, with ``units``, at one width)."""
    d = df if "init_scale" in df.columns else df.assign(init_scale=1.0)
    mask = (np.isclose(d["epochs"], cell["epochs"]) & np.isclose(d["weight_decay"], cell["weight_decay"])
            & np.isclose(d["init_scale"].fillna(1.0), cell["init_scale"]))
    if units is not None:
        mask &= np.isclose(d["hidden_units"], units)
    return d[mask]


def pair_values(df: pd.DataFrame, metric: str, cell: dict, units: float, **filters) -> pd.Series:
    """Return ``metric`` per pair (mean over layers and other keys) in one cell at one width."""
    d = select(in_cell(df, cell, units), metric, **filters)
    return d.groupby("pair")["value"].mean()


def cell_table(df: pd.DataFrame) -> pd.DataFrame:
    """Return one row per cell (epochs, weight_decay, init_scale): its mean D and shrinkage, and its widest width."""
    d = df.assign(init_scale=df["init_scale"].fillna(1.0)) if "init_scale" in df.columns else df.assign(init_scale=1.0)
    rows = []
    for cell, g in d.groupby(list(CELL_KEYS)):
        rows.append({**dict(zip(CELL_KEYS, cell)), "D": float(select(g, DECAY_INTEGRAL)["value"].mean()),
                     "shrinkage": float(select(g, DECAY_SHRINKAGE)["value"].mean()),
                     "widest": float(g["hidden_units"].max())})
    return pd.DataFrame(rows)


def markdown_table(frame: pd.DataFrame) -> str:
    """Return a frame as a MyST (pipe) table, its index as the first column."""
    head = [str(frame.index.name or "")] + [str(c) for c in frame.columns]
    rows = [[str(i)] + [str(v) for v in row] for i, row in zip(frame.index, frame.to_numpy())]
    return "\n".join("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"
                     for r in [head, ["---"] * len(head)] + rows)


def join_and(items: list[str]) -> str:
    """Return ``a, b and c`` from a non-empty list of words."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
