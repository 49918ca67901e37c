"""The numbers and words the task_arithmetic page quotes, each under its glue key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: How the page names the merge methods.
METHOD_NAMES = {"task_arithmetic": "task arithmetic", "ties": "TIES"}


def merge_numbers(ta: pd.DataFrame, best: pd.DataFrame, study: Any) -> tuple[dict[str, float], dict[str, str]]:
    """Return what the page's prose quotes, by glue key (``ta``: the page's frame; ``best``: each method's best
    scaling α per fine-tuning learning rate, indexed by method and rate): the fine-tuned models' task loss, the
    pretrained model's, each method's best and worst task loss over the fine-tuning rates and the rate of its best;
    and in words, which methods and rates found their best α at the edge of the α grid."""
    ft = ta[ta["method"] == "finetuned"].groupby("lr")["task_loss"].mean()
    orig0 = ta[(ta["method"] == "task_arithmetic") & (ta["alpha"] == 0.0) & (ta["task"] != "original")]
    alpha_max = max(study.alphas)
    at_edge = best[np.isclose(best["alpha"], alpha_max)].index
    edges = [f"{METHOD_NAMES[m]} with fine-tuning learning rate(s) " + ", ".join(f"{lr:g}" for mm, lr in at_edge
                                                                              if mm == m)
             for m in dict.fromkeys(m for m, _ in at_edge)]
    ta_loss, ties_loss = best.loc["task_arithmetic", "task_loss"], best.loc["ties", "task_loss"]  # by fine-tuning lr
    numbers = {"n_lrs": len(study.finetune_lrs), "ft_steps": study.finetune_steps, "keep": study.ties_keep,
               "ft_loss_lo": float(ft.min()), "ft_loss_hi": float(ft.max()),
               "base_loss": float(orig0["task_loss"].mean()), "alpha_max": float(alpha_max),
               "task_arithmetic_best_lr": float(ta_loss.idxmin()), "task_arithmetic_best_loss": float(ta_loss.min()),
               "task_arithmetic_worst_loss": float(ta_loss.max()), "ties_best_lr": float(ties_loss.idxmin()),
               "ties_best_loss": float(ties_loss.min()), "ties_worst_loss": float(ties_loss.max())}
    return numbers, {"edge_cases": "; ".join(edges) or "none"}
