"""The weak_weight_decay page's CSV, its figure's panels and the numbers its prose quotes."""

from __future__ import annotations

import pandas as pd

from ..schema import concat, last_hidden, select, to_long, to_long_frame
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


def decay_long(sweeps: list[tuple]) -> tuple[pd.DataFrame, int]:
    """Return the page's CSV, which its figure and table read, from its two sweeps (``(weight decay, summary, probe
    frames, regime)`` each): per weight decay the pair summaries, the LEWC error at the last hidden layer and λ = ½
    and the relative effective rank of the hidden-to-hidden matrices (trained pairs); and that last hidden layer."""
    frames = []
    for wd, summary, probes, _ in sweeps:
        summ = to_long(summary, "weak_weight_decay", ["acc_merged", "acc_endpoints", "acc_ensemble",
                                                      "loss_barrier_cal_mid", "loss_barrier_mid",
                                                      "logit_norm_ratio", "tau_ratio"],
                       ["width", "hidden_units", "depth"])
        last = last_hidden(probes["lewc"])
        lewc = to_long_frame(select(probes["lewc"], "lewc_rel_err", lam=0.5, layer=last, method="trained"),
                             "weak_weight_decay", ["width", "hidden_units", "depth", "layer", "lam"])
        rank = select(probes["rank"], "rel_effective_rank", method="trained")
        rank = to_long_frame(rank[rank["role"] == "hidden"], "weak_weight_decay",
                             ["width", "hidden_units", "depth", "layer"])
        frames.append(concat([summ, lewc, rank]).assign(weight_decay=wd))
    return concat(frames), last


def figure_panels(last: int, depth: int) -> list[dict]:
    """Return the page's figure panels (:func:`lmcbook.plots.plot_panels`), the LEWC error at layer ``last``."""
    return [dict(metric="acc_merged", title=r"merged accuracy, $\lambda=\frac{1}{2}$"),
            dict(metric="loss_barrier_cal_mid", title="calibrated midpoint loss barrier (nats)"),
            dict(metric="lewc_rel_err", title=rf"LEWC relative error, layer {last}, $\lambda=\frac{{1}}{{2}}$"),
            dict(metric="rel_effective_rank", title="relative effective rank (hidden-to-hidden)"),
            dict(metric="logit_norm_ratio", title="logit norm ratio", hline=(2.0 ** (1 - depth), "LEWC: $2^{1-L}$"),
                 logy=True),
            dict(metric="acc_endpoints", title="endpoint accuracy (mean of a, b)")]
