"""The numbers the weak_weight_decay page quotes, each under its glue key."""

from __future__ import annotations

import pandas as pd

from ..schema import select
from ..stats import cell_stats


def decay_numbers(long: pd.DataFrame, regime: pd.DataFrame, strong: float, weak: float) -> dict[str, float]:
    """Return the numbers the page's prose quotes, by glue key: each measure's mean over pairs (``_spread``: its
    spread) under the ``strong`` and the ``weak`` weight decay, at the widest width (``_0``) and the next one
    (``_1``); the fraction of a weight each weight decay alone leaves (``shrink_``), the widths, and the merged
    accuracy's gap between the two weight decays at the widest width."""
    units = sorted(long["hidden_units"].unique())
    wide, wide2, narrow = units[-1], units[-2] if len(units) > 1 else units[-1], units[0]

    def at(metric: str, wd: float, u: float, col: str = "mean") -> float:
        return cell_stats(long, metric, weight_decay=wd).loc[u, col]

    return {"wd_strong": strong, "wd_weak": weak, "n_wide": int(wide), "n_wide2": int(wide2), "n_narrow": int(narrow),
            "shrink_strong": select(regime, "decay_shrinkage", weight_decay=strong)["value"].mean(),
            "shrink_weak": select(regime, "decay_shrinkage", weight_decay=weak)["value"].mean(),
            "acc_merged_strong_0": at("acc_merged", strong, wide),
            "acc_merged_strong_1": at("acc_merged", strong, wide2),
            "acc_merged_strong_0_spread": at("acc_merged", strong, wide, "spread"),
            "acc_merged_weak_0": at("acc_merged", weak, wide), "acc_merged_weak_1": at("acc_merged", weak, wide2),
            "acc_merged_weak_0_spread": at("acc_merged", weak, wide, "spread"),
            "acc_merged_weak_narrow": at("acc_merged", weak, narrow),
            "gap": at("acc_merged", strong, wide) - at("acc_merged", weak, wide),
            "acc_endpoints_strong_0": at("acc_endpoints", strong, wide),
            "acc_endpoints_weak_0": at("acc_endpoints", weak, wide),
            "logit_norm_ratio_strong_0": at("logit_norm_ratio", strong, wide),
            "logit_norm_ratio_strong_1": at("logit_norm_ratio", strong, wide2),
            "logit_norm_ratio_weak_0": at("logit_norm_ratio", weak, wide),
            "logit_norm_ratio_weak_1": at("logit_norm_ratio", weak, wide2),
            "lewc_rel_err_strong_0": at("lewc_rel_err", strong, wide),
            "lewc_rel_err_weak_0": at("lewc_rel_err", weak, wide),
            "rel_effective_rank_strong_0": at("rel_effective_rank", strong, wide),
            "rel_effective_rank_weak_0": at("rel_effective_rank", weak, wide)}
