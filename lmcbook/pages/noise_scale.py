"""The noise_scale page's account of a noise reference run's grid."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..claims import NOISE_FAILED_TRAIN_ACC, ClaimResult, noise_grid_cells
from ..stats import CONFIDENCE, spearman, trend


def _gain_span(gains: pd.Series) -> str:
    """Return "its mean gain is X points" for one cell, "their mean gains run from X to Y points" for several."""
    if len(gains) == 1:
        return f"its mean gain is {100 * gains.iloc[0]:.2f} points"
    return f"their mean gains run from {100 * gains.min():.2f} to {100 * gains.max():.2f} points"


def noise_reference_facts(frame: pd.DataFrame, rows: list[ClaimResult], signal_point: float | None = None,
                          rule: float = NOISE_FAILED_TRAIN_ACC) -> str:
    """Return what a noise reference run's grid shows, in Markdown, every number computed from its CSV (``frame``)
    and its rows (N1, N2): the cells the rule (its threshold ``rule``) excluded and why, the training lengths (where
    the cells took several), the kept cells' gains against S, and how they compare with the paper's gains of about a
    point (``signal_point``: one test example in points, if known)."""
    cells = noise_grid_cells(frame, rule)
    ok, out = cells[cells["kept"]], cells[~cells["kept"]]
    cap = int(cells["train_steps"].max())
    lengths = cells["train_steps"].nunique() > 1  # the first protocol trained a cell longer until it met its rule
    excluded = "; ".join(
        f"η {lr:g}, B {b:g} (S = {c['noise_scale']:.1e}; weaker child {c['train_acc_mean']:.3f} on average, "
        f"{c['train_acc_min']:.3f} at worst" + (", diverged" if c.get("diverged", False) else "")
        + f"{', at the cap' if lengths and int(c['train_steps']) == cap else ''})" for (lr, b), c in out.iterrows())
    took = (f"; the kept ones took {', '.join(f'{int(v)}' for v in sorted(ok['train_steps'].unique()))} steps, so "
            f"across them S and training length are not independent. {int((cells['train_steps'] == cap).sum())} "
            f"cells reached the {cap}-step cap" if lengths else f", every one after {cap} steps")
    text = [f"{len(ok)} of {len(cells)} cells met the rule{took}. Excluded: {excluded or 'none'}."]
    if len(ok) >= 2:
        rho = spearman(ok["noise_scale"], ok["gain"])
        best = ok["gain"].idxmax()
        at_end = np.isclose(ok.loc[best, "noise_scale"], ok["noise_scale"].max())
        worse_out = out[out["noise_scale"] > ok["noise_scale"].max()]
        beyond = ok[ok["noise_scale"] > ok.loc[best, "noise_scale"] * (1 + 1e-9)]
        n2 = next((r for r in rows if r.id.startswith("N2")), None)
        anova = n2.values.get("anova_p", float("nan")) if n2 is not None else float("nan")
        text.append(
            f"On the kept cells the mean gain runs from {100 * ok['gain'].min():.2f} to "
            f"{100 * ok['gain'].max():.2f} points"
            + (f" (one test example is {signal_point:.3f} points)" if signal_point else "")
            + ", against the paper's gains of about a point; a one-way ANOVA finds "
            + ("a difference between them" if anova < 1 - CONFIDENCE else
               "no difference between them beyond pair noise")
            + f" (p = {anova:.2g}). Their mean gain {trend(rho)} with S (Spearman ρ = {rho:.2f} over "
            f"{len(ok)} cells), and the best of them is η {best[0]:g}, B {best[1]:g}"
            + (", at the largest kept S" if at_end else ", inside the kept range of S") + "."
            + (f" At a larger S than the best, the kept cells gain {100 * beyond['gain'].min():.2f} to "
               f"{100 * beyond['gain'].max():.2f} points." if len(beyond) else "")
            + (f" Every cell at a larger S than the kept ones was excluded; {_gain_span(worse_out['gain'])}."
               if len(worse_out) else ""))
    return " ".join(text)
