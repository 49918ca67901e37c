"""The regime map (the noise_regime page): where can merging gain at all?  Each cell of the map (augmentation,
the schedule's floor, the start, η) gets a reading from its intervals over pairs
(:data:`~lmcbook.claims.noise_map.MAP_READINGS`), each setting a ranking (:func:`map_settings`), and the map picks the
setting the noise pages run (:func:`pick_setting`). The map decides no claim.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..schema import GAIN, NOISE_SCALE
from ..stats import CONFIDENCE, Interval, above, interval_diff, t_interval
from .noise import mark_kept, noise_cells, noise_pairs
from .thresholds import MAP_MIN_PAIRS, MIN_PAIRS, NOISE_FAILED_TRAIN_ACC, NOISE_MIN_EFFECT, PICK_ORDER
from .verdicts import FAIL, NA, ClaimResult, _values

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
    """Return one row per cell of the regime map's long frame: its keys (:data:`~lmcbook.claims.noise_map.MAP_KEYS`),
    pairs ``n``, the merging gain and the ensemble gain with their intervals over pairs, the children's disagreement,
    distance and training and test accuracy (means), ``kept`` by the rule, and its ``reading``
    (:data:`~lmcbook.claims.noise_map.MAP_READINGS`)."""
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


def claim_n8(regime: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N8 (the book's own row; issue 49): merging gains more than annealing.  On the regime map's frame, at the setting
    the map picks (:func:`pick_setting`) and its best learning rate, the merged model's test accuracy minus that of
    children spawned at the same point whose learning rate decays to zero instead (the same augmentation, start and
    η; schedule floor 0), per pair, above NOISE_MIN_EFFECT by its interval over ≥ MIN_PAIRS pairs (✓); ✗ when it lies
    wholly at or below it (merging gives no more than annealing would); n/a when the map picks nothing, its pick
    decays to zero itself, or no such decayed cell stands beside it.  The row also gives the difference at every η
    where both cells exist."""
    statement = ("(ours) Merging gains more than annealing: the merged model beats children whose learning rate "
                 "decays to zero from the same spawn.")
    test = (f"at the picked setting's best η, merged accuracy minus the decayed children's above the minimum effect, "
            f"{100 * NOISE_MIN_EFFECT:g} points, by a {100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ if "
            "it lies at or below it")
    cells = map_cells(regime, rule)
    pick = pick_setting(cells)
    if pick is None or pick["lr_floor"] == 0:
        return ClaimResult("N8", "noise", statement, "the map picks no setting whose learning rate stays above zero",
                           test, NA, "noise_regime")
    pairs = noise_pairs(regime.assign(augment=_as_bool(regime["augment"])), MAP_KEYS)
    here = pairs[(pairs["method"] == "spawn") & (pairs["augment"] == pick["augment"])
                 & np.isclose(pairs["spawn_fraction"], pick["spawn_fraction"])]
    best = map_settings(cells[cells["method"] == "spawn"]).iloc[0]["best_lr"]

    def diff(lr: float) -> Interval:
        at = here[np.isclose(here["lr"], lr)]
        return interval_diff(at.loc[np.isclose(at["lr_floor"], pick["lr_floor"]), "acc_merged"].dropna(),
                             at.loc[np.isclose(at["lr_floor"], 0.0), "acc_endpoints"].dropna())

    lrs = sorted(lr for lr in set(here["lr"]) if diff(lr).n > 0)
    if not any(np.isclose(lr, best) for lr in lrs):
        return ClaimResult("N8", "noise", statement, f"no decay-to-zero cell beside the pick at η {best:g}", test, NA,
                           "noise_regime")
    iv = diff(best)
    state = above(iv, NOISE_MIN_EFFECT, MIN_PAIRS)
    across = "; ".join(f"η {lr:g}: {diff(lr).text('.2f', 100)}" for lr in lrs)
    words = "; merging gives no more than annealing would" if state == FAIL else ""
    return ClaimResult("N8", "noise", statement, f"at η {best:g}, merged minus decayed children: "
                       f"{iv.text('.2f', 100)} points over {iv.n} pairs{words}; across η (points): {across}", test,
                       state, "noise_regime", values=_values(iv, NOISE_MIN_EFFECT))
