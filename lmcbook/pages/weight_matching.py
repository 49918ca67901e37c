"""The numbers the weight_matching page quotes, each under its glue key."""

from __future__ import annotations

import pandas as pd


def method_numbers(means: pd.DataFrame) -> dict[str, float]:
    """Return the barriers the page's prose quotes, by glue key ``METHOD_BARRIER_WIDTH``: each method's mean over
    pairs (``means``: indexed by hidden units and method) at the narrowest and the widest width."""
    units = means.index.get_level_values("hidden_units")
    narrow, wide = units.min(), units.max()
    none, wm = means.xs("none", level="method"), means.xs("weight_matching", level="method")
    rnd, repair = means.xs("random_permutation", level="method"), means.xs("repair", level="method")
    return {"none_acc_barrier_narrow": none.loc[narrow, "acc_barrier"],
            "none_acc_barrier_wide": none.loc[wide, "acc_barrier"],
            "none_loss_barrier_wide": none.loc[wide, "loss_barrier"],
            "none_loss_barrier_cal_wide": none.loc[wide, "loss_barrier_cal"],
            "weight_matching_acc_barrier_narrow": wm.loc[narrow, "acc_barrier"],
            "weight_matching_acc_barrier_wide": wm.loc[wide, "acc_barrier"],
            "weight_matching_loss_barrier_wide": wm.loc[wide, "loss_barrier"],
            "weight_matching_loss_barrier_cal_wide": wm.loc[wide, "loss_barrier_cal"],
            "random_permutation_acc_barrier_narrow": rnd.loc[narrow, "acc_barrier"],
            "random_permutation_acc_barrier_wide": rnd.loc[wide, "acc_barrier"],
            "random_permutation_loss_barrier_cal_wide": rnd.loc[wide, "loss_barrier_cal"],
            "repair_acc_barrier_narrow": repair.loc[narrow, "acc_barrier"],
            "repair_acc_barrier_wide": repair.loc[wide, "acc_barrier"],
            "repair_loss_barrier_wide": repair.loc[wide, "loss_barrier"],
            "repair_loss_barrier_cal_wide": repair.loc[wide, "loss_barrier_cal"]}
