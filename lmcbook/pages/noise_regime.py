"""The noise_regime page's caption and its table of the map's settings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..data import DATASET_LABELS


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
        rows.append(f"| {describe_setting(s.to_dict())} | {s['n_gain']} of {s['n_cells']} ({s['n_paper']}) | "
                    f"{s['best_lr']:g} | {100 * s['best_gain']:.2f} ({100 * s['best_gain_lo']:.2f} to "
                    f"{100 * s['best_gain_hi']:.2f}) | {other} |")
    return "\n".join(rows)
