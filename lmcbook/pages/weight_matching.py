"""The weight_matching page's CSV, its figures' panels and the numbers its prose quotes."""

from __future__ import annotations

import pandas as pd

from ..schema import concat, to_long

#: The figures' panels (:func:`lmcbook.plots.plot_panels`): the barriers per method, and weight matching's cost.
METHOD_PANELS = [dict(metric="acc_barrier", title="accuracy barrier"),
                 dict(metric="loss_barrier", title="raw loss barrier (nats)"),
                 dict(metric="loss_barrier_cal", title="calibrated loss barrier (nats)")]
TIME_PANELS = [dict(metric="match_seconds", title="weight matching time (s)", logy=True),
               dict(metric="match_iterations", title="coordinate-descent sweeps")]


def methods_long(summary: pd.DataFrame) -> pd.DataFrame:
    """Return the page's CSV, which its figures read: each method's barriers and merged accuracy per pair, and weight
    matching's time, sweeps and objective."""
    keys = ["width", "hidden_units", "depth", "method"]
    return concat([to_long(summary, "weight_matching", ["acc_barrier", "loss_barrier", "loss_barrier_cal",
                                                        "acc_barrier_mid", "loss_barrier_mid", "loss_barrier_cal_mid",
                                                        "acc_merged"], keys),
                   to_long(summary[summary["method"] == "weight_matching"], "weight_matching",
                           ["match_seconds", "match_iterations", "match_objective"], keys)])


def method_numbers(means: pd.DataFrame) -> dict[str, float]:
    """Return the numbers the page's prose quotes, by glue key: the barriers, ``METHOD_BARRIER_WIDTH``, each method's
    mean over pairs (``means``: indexed by hidden units and method) at the narrowest and the widest width; the widths,
    and weight matching's time there and its sweeps at the widest."""
    units = means.index.get_level_values("hidden_units")
    narrow, wide = units.min(), units.max()
    none, wm = means.xs("none", level="method"), means.xs("weight_matching", level="method")
    rnd, repair = means.xs("random_permutation", level="method"), means.xs("repair", level="method")
    return {"n_narrow": int(narrow), "n_wide": int(wide), "t_narrow": wm.loc[narrow, "match_seconds"],
            "t_wide": wm.loc[wide, "match_seconds"], "it_wide": wm.loc[wide, "match_iterations"],
            "none_acc_barrier_narrow": none.loc[narrow, "acc_barrier"],
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
