"""The width_accuracy page: what the mechanism page's small-initialisation arm says about this page's width effect."""
from __future__ import annotations

from typing import Any

import pandas as pd
from IPython.display import Markdown

from lmcbook import claims, schema
from lmcbook.claims import ClaimResult
from lmcbook.data import DATASET_SHORT
from lmcbook.regime import join_and


def small_init_widths(mech: pd.DataFrame) -> pd.DataFrame:
    """Return, per width of the mechanism frame's small-initialisation arm (its smallest ``init_scale``), the plain
    merged accuracy's seed mean, the endpoints' lowest training accuracy, and ``converged``: whether every endpoint
    there meets the convergence rule (:data:`~lmcbook.claims.thresholds.CONVERGED_TRAIN_ACC`), as M4 requires."""
    scale = float(mech["init_scale"].min())
    arm = mech[mech["init_scale"] == scale]
    merged = schema.select(arm, "acc_merged", method="none").groupby("hidden_units")["value"].mean()
    train = schema.select(arm, "train_acc").groupby("hidden_units")["value"].min()
    out = pd.DataFrame({"merged": merged, "train_min": train.reindex(merged.index)})
    out["converged"] = out["train_min"] >= claims.CONVERGED_TRAIN_ACC
    out.attrs["init_scale"] = scale
    return out


def small_init_facts(mech: pd.DataFrame, m4: ClaimResult) -> tuple[str, dict[str, Any]]:
    """Return which narrow end the page's small-initialisation paragraph has (``all``: every width's endpoints meet
    the convergence rule; ``trained``: some narrower width's do, not every one; ``untrained``: no width below
    the widest's do; ``single``: the arm has one width) and the numbers it quotes: the widest width's merged
    accuracy, small and standard, the narrowest converged width's, the widths whose endpoints did not all converge,
    and of those below it the one that came closest (its weakest endpoint's training accuracy)."""
    widths = small_init_widths(mech)
    fit = widths[widths["converged"]]
    wide = widths.index.max()
    narrow = fit.index.min() if not fit.empty else wide
    below = widths[widths.index < narrow]
    failed = widths.index[~widths["converged"]]  # every width whose endpoints did not all converge
    closest = below["train_min"].idxmax() if len(below) else wide
    facts = {"small_scale": widths.attrs["init_scale"], "small_n_wide": int(wide),
             "small_wide": widths.loc[wide, "merged"], "standard_wide": m4.values["standard"],
             "small_n_narrow": int(narrow), "small_narrow": widths.loc[narrow, "merged"],
             "small_converged_rule": claims.CONVERGED_TRAIN_ACC,
             "small_untrained_widths": Markdown(join_and([str(int(u)) for u in failed]) if len(failed) else "none"),
             "small_n_closest": int(closest), "small_closest_min": float(widths.loc[closest, "train_min"]),
             "small_data": Markdown(DATASET_SHORT.get(str(mech["dataset"].iloc[0]), "this data set"))}
    end = ("single" if len(widths) == 1 else "all" if widths["converged"].all()
           else "trained" if narrow < wide else "untrained")
    return end, facts


def m4_elsewhere(references: dict[str, tuple[pd.DataFrame, dict[str, Any]]], here: str) -> tuple[str, dict[str, Any]]:
    """Return M4 on the first committed mechanism reference run of another data set than ``here`` (the page's) that
    decides it (``refuted``: ✗, a small initialisation leaves wide networks merging; ``agrees``: ✓; ``none``: no
    such run) and the words its sentence quotes: the data set, the reference's name, M4's mark and measured text,
    and (``m4_other_rest``) what every other reference of that data set reads for M4, so that a verdict from one
    width or precision never stands for the data set alone."""
    found = [(name, str(frame["dataset"].iloc[0]), claims.claim_m4(frame)) for name, (frame, _) in references.items()]
    for name, there, m4 in found:
        if there != here and m4.state in (claims.PASS, claims.FAIL):
            rest = [f"`{n}` reads it {r.mark} ({r.measured_shown})" for n, d, r in found if d == there and n != name]
            return ("refuted" if m4.state == claims.FAIL else "agrees",
                    {"m4_other_data": DATASET_SHORT.get(there, there), "m4_other_source": f"`{name}`",
                     "m4_other_mark": m4.mark, "m4_other_measured": m4.measured_shown,
                     "m4_other_rest": ("On the same data set " + "; ".join(rest) + "." if rest else
                                       "No other committed reference of that data set reads M4.")})
    return "none", {}
