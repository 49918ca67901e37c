"""The noise_scale page's numbers about its grid, and its account of the committed reference runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import reference
from ..captions import noise_reference_block
from ..claims import (
    MIN_PAIRS,
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    ClaimResult,
    cell_mean_fit,
    mark_kept,
    noise_cells,
    noise_claims,
    noise_grid_cells,
    noise_pairs,
)
from ..page import Page
from ..plots import placeholder, plot_noise_grid
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


def grid_numbers(study: Any, grid: pd.DataFrame, fit: dict[str, float] | None, n_test: int) -> dict[str, float]:
    """Return the numbers the page's prose quotes about its η × B grid, by glue key: the cells the rule kept and
    excluded, the grid's ranges (S, the children's test accuracy, the weaker child's training accuracy), the cell
    means' range and the best cell, the most a cell's ensemble gains, the vertex of the quadratic ``fit``
    (:func:`lmcbook.claims.cell_mean_fit`, NaN without one), the thresholds, and the test split's size ``n_test``."""
    cells = noise_cells(grid, ["lr", "batch_size"])
    per_cell = grid.groupby(["batch_size", "lr"])
    cell_means, n_ok = per_cell["gain"].mean(), int(cells["kept"].sum())
    best = cell_means.idxmax()
    s = grid["noise_scale"]
    return dict(
        failed_acc=NOISE_FAILED_TRAIN_ACC, min_effect=100 * NOISE_MIN_EFFECT, n_excluded=len(cells) - n_ok,
        n_kept=n_ok, n_pairs=study.grid_pairs, n_test=n_test, signal_point=100 / n_test,
        n_cells=len(cells), n_lrs=len(study.lrs), n_bs=len(study.batch_sizes), mu=study.momentum,
        wd=study.weight_decay, s_lo=s.min(), s_hi=s.max(), min_pairs=MIN_PAIRS, decades=np.log10(s.max() / s.min()),
        min_cells=NOISE_MIN_CELLS, gain_min=100 * cell_means.min(), gain_max=100 * cell_means.max(),
        best_cell_s=per_cell["noise_scale"].first()[best], best_lr=best[1], best_b=best[0],
        ens_max=100 * per_cell["ensemble_gain"].mean().max(),
        acc_lo=per_cell["acc_endpoints"].mean().min(), acc_hi=per_cell["acc_endpoints"].mean().max(),
        train_lo=per_cell["train_acc_min"].mean().min(), train_hi=per_cell["train_acc_min"].mean().max(),
        fit_vertex_s=np.nan if fit is None else 10 ** fit["vertex"],
        fit_vertex_gain=np.nan if fit is None else 100 * fit["fit_vertex"],
        n1_pairs=2 * MIN_PAIRS, rule_old=NOISE_RULE_THRESHOLDS[-1])


def reference_texts(page: Page, study: Any) -> tuple[dict[str, str], Figure]:
    """Return, by glue key, the Markdown of the page's committed reference runs (each scored and its verdicts' states
    glued, :func:`lmcbook.captions.noise_reference_block`; the retired ones described under their own rule) and the
    first one's figure (a placeholder if none is committed)."""
    old_rule = NOISE_CONVERGED_TRAIN_ACC
    retired = [f"**Retired:** `{name}`, {reference.get(name).retired} What it showed, under its own rule (the weaker "
               f"child of every pair at {old_rule:g} training accuracy): "
               + noise_reference_facts(frame, noise_claims(frame, None, old_rule), rule=old_rule)
               for name, (frame, _) in (page.references(retired=True) if study.show_references else {}).items()]
    blocks, rows, figure = [], {}, None
    for name, (frame, prov) in (page.references() if study.show_references else {}).items():
        ref = mark_kept(noise_pairs(frame[frame["method"] == "grid"], ["lr", "batch_size"]), ["lr", "batch_size"])
        figure = figure or plot_noise_grid(ref, cell_mean_fit(ref, ["lr", "batch_size"]))
        facts = (f"{int(ref.groupby(['lr', 'batch_size'])['pair'].nunique().min())} pairs per cell. "
                 + noise_reference_facts(frame, noise_claims(frame, None)))
        block, rows[name] = noise_reference_block(page, name, frame, prov, facts)
        blocks.append(block)
    texts = {"ref_figure_name": f"`{next(iter(rows))}`" if rows else "(none)",
             "noise_references": "\n\n".join([reference.listing(page.name), *blocks, *retired]),
             "ref_summary": "; ".join(f"`{n}`: " + ", ".join(f"{r.id} {r.mark}" for r in rs) for n, rs in rows.items())
             or "none is committed"}
    return texts, figure or placeholder("No reference run of this page is committed.")
