"""The noise_regime page's caption, its CSV, its table of the map's settings and what it says of the pick."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..claims import FIRST_PICK, NOISE_MIN_EFFECT, describe_setting, map_settings, pick_setting
from ..data import DATASET_LABELS
from ..schema import to_long


def describe_map(study: Any) -> str:
    """Return one sentence on what the regime map trained (for captions)."""
    m = study.noise_study().spec(study.cells()[0], 0).model
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers and {m.channels} hidden "
            f"units on {DATASET_LABELS[study.dataset]}; {study.steps} SGD steps per run at B = {study.batch_size}, "
            f"momentum {study.momentum:g}, weight decay {study.weight_decay:g}; {study.seeds} pair(s) per cell")


def map_table(settings: pd.DataFrame, cells: pd.DataFrame) -> str:
    """Return the regime map's table (:func:`lmcbook.claims.map_settings`): one row per setting, with how many of its
    learning rates gain, its best cell's gain and interval, and what its other cells read."""
    from ..claims import MAP_KEYS, describe_setting

    rows = ["| setting | cells that gain (of the paper's size) | best η | best gain, points (95% interval) | the "
            "other cells |", "|---|---|---|---|---|"]
    short = {"basins": "different basins", "harvest": "nothing to harvest", "failed": "failed",
             "undecided": "undecided"}
    for _, s in settings.iterrows():
        own = cells[np.logical_and.reduce([cells[k] == s[k] for k in MAP_KEYS[:-1]])]
        rest = own["reading"].value_counts()
        other = ", ".join(f"{int(rest[k])} {v}" for k, v in short.items() if k in rest) or "none"
        best = "— | — (no kept cell with an interval)"
        if np.isfinite(s["best_lr"]):
            best = (f"{s['best_lr']:g} | {100 * s['best_gain']:.2f} ({100 * s['best_gain_lo']:.2f} to "
                    f"{100 * s['best_gain_hi']:.2f})")
        rows.append(f"| {describe_setting(s.to_dict())} | {s['n_gain']} of {s['n_cells']} ({s['n_paper']}) | {best} | "
                    f"{other} |")
    return "\n".join(rows)


#: The regime map's CSV: its key columns and metrics.
MAP_KEYS_CSV = ["lr", "batch_size", "momentum", "spawn_fraction", "lr_floor", "augment", "method", "dataset"]
MAP_METRICS = ["gain", "gain_best", "loss_gain", "ensemble_gain", "disagreement", "pair_distance", "acc_a", "acc_b",
               "acc_endpoints", "acc_merged", "acc_ensemble", "loss_a", "loss_b", "loss_merged", "train_acc_a",
               "train_acc_b", "train_acc_min", "train_acc_merged", "train_loss_a", "train_loss_b",
               "train_loss_merged", "noise_scale", "train_steps", "diverged"]


def map_long(pairs: pd.DataFrame, study: Any) -> pd.DataFrame:
    """Return the regime map's pairs (one row per cell and pair) as the page's long CSV, a diverged run's missing
    metrics left out."""
    return to_long(pairs.assign(dataset=study.dataset), "noise_regime", MAP_METRICS, MAP_KEYS_CSV, drop_missing=True)


def pick_numbers(cells: pd.DataFrame, settings: pd.DataFrame,
                 pick: dict | None) -> tuple[dict[str, Any], dict[str, str], str]:
    """Return what the page says of the setting the map picks (``pick``, :func:`lmcbook.claims.pick_setting`), by
    glue key: its best gain and interval, at which learning rate, over how many of its rates; the setting the ranking
    fixed before the map first ran would pick, where it differs, and how it reads; and, where the pick's schedule
    does not decay to zero and the map has children spawned at the same point that decay to zero, the merged model
    against those children.  Numbers in the first dict, words in the second; last, how the merged model compares with
    those children: above, below or level (within the minimum effect), or none without them."""
    numbers: dict[str, Any] = {}
    words: dict[str, str] = {}
    first = pick_setting(cells, FIRST_PICK)
    if first is not None and first != pick:
        was = map_settings(cells[cells["method"] == "spawn"], FIRST_PICK).iloc[0]
        words["first_pick_text"] = describe_setting(first)
        numbers.update(first_n_gain=int(was["n_gain"]), first_n_paper=int(was["n_paper"]),
                       first_best=100 * was["best_gain"])
    if pick is None:
        return numbers, words, "none"
    best = settings[(settings["method"] == "spawn") & (settings["augment"] == pick["augment"])
                    & (settings["lr_floor"] == pick["lr_floor"])
                    & (settings["spawn_fraction"] == pick["spawn_fraction"])].iloc[0]
    words["pick_text"] = describe_setting(pick)
    numbers.update(pick_gain=100 * best["best_gain"], pick_lo=100 * best["best_gain_lo"],
                   pick_hi=100 * best["best_gain_hi"], pick_lr=best["best_lr"], pick_n=int(best["n_gain"]),
                   pick_of=int(best["n_cells"]))
    # what the gain is made of: the merged model against children whose learning rate decayed to zero instead
    at = cells[(cells["method"] == "spawn") & (cells["augment"] == pick["augment"]) & (cells["lr"] == best["best_lr"])
               & (cells["spawn_fraction"] == pick["spawn_fraction"])].set_index("lr_floor")
    if pick["lr_floor"] > 0 and 0.0 in at.index:
        merged, decayed = at.loc[pick["lr_floor"], "acc_merged"], at.loc[0.0, "acc_endpoints"]
        numbers.update(merged_acc=merged, children_acc=at.loc[pick["lr_floor"], "acc_endpoints"],
                       decayed_acc=decayed, decayed_merged_acc=at.loc[0.0, "acc_merged"])
        return numbers, words, ("above" if merged - decayed > NOISE_MIN_EFFECT else
                                "below" if decayed - merged > NOISE_MIN_EFFECT else "level")
    return numbers, words, "none"
