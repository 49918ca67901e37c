"""The noise_scale page's numbers about its grid, and its account of the committed reference runs."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
from IPython.display import Markdown
from matplotlib.figure import Figure
from scipy.stats import f_oneway

from .. import reference
from ..claims.noise import (
    PROTOCOL_WORDS,
    cell_mean_fit,
    describe_setting,
    grid_protocol,
    map_cells,
    map_settings,
    mark_kept,
    noise_cells,
    noise_grid_cells,
    noise_pairs,
    pick_setting,
)
from ..claims.thresholds import (
    FIRST_PICK,
    MAP_MIN_PAIRS,
    MIN_PAIRS,
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
)
from ..experiments_noise import against_decay
from ..page import Page
from ..plots_noise import plot_noise_grid
from ..plots_style import placeholder
from ..schema import markdown_table
from ..stats import CONFIDENCE, spearman


def noise_reference_facts(frame: pd.DataFrame, signal_point: float | None = None,
                          rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return what a noise reference run's grid shows, as a table of quantities and values, every number computed
    from its CSV (``frame``): the cells the rule (its threshold ``rule``) kept and excluded
    (each excluded one's η, B, S and weaker child), the training lengths, the kept cells' range of gains beside the
    paper's gains of about a point (``signal_point``: one test example in points, if known), their one-way ANOVA p, the
    rank correlation of gain with S, the best kept cell and whether it sits at the largest kept S, and the gains at
    larger S than the best and in the excluded cells beyond the kept ones."""
    cells = noise_grid_cells(frame, rule)
    ok, out = cells[cells["kept"]], cells[~cells["kept"]]
    cap = int(cells["train_steps"].max())
    pairs = noise_pairs(frame[frame["method"] == "grid"], ["lr", "batch_size"])
    protocol = grid_protocol(pairs)
    lengths = protocol == "mixed"  # cells trained to different lengths by the convergence rule (the first protocol)
    excluded = "; ".join(
        f"η {lr:g}, B {b:g} (S = {c['noise_scale']:.1e}; weaker child {c['train_acc_mean']:.3f} mean, "
        f"{c['train_acc_min']:.3f} worst" + (", diverged" if c.get("diverged", False) else "")
        + (", at the cap" if lengths and int(c["train_steps"]) == cap else "") + ")" for (lr, b), c in out.iterrows())
    facts = {"cells the rule kept": f"{len(ok)} of {len(cells)}", "excluded": excluded or "none",
             "training steps of the kept cells": ", ".join(f"{int(v)}" for v in sorted(ok["train_steps"].unique()))
             or "—"}
    if lengths:  # the first protocol trained a cell longer until it met its rule, up to a cap
        facts.update({f"cells at the {cap}-step cap": f"{int((cells['train_steps'] == cap).sum())}",
                      "S and training length": "not independent across the kept cells"})
    elif protocol == "epochs":  # the length follows B by design: steps × B is the same in every cell
        steps = cells.groupby(level=1)["train_steps"].first()
        facts["training length"] = (f"{PROTOCOL_WORDS['epochs']}: " + ", ".join(
            f"{int(n)} steps at B {b:g}" for b, n in steps.sort_index().items()))
    if len(ok) >= 2:
        rho = spearman(ok["noise_scale"], ok["gain"])
        best = ok["gain"].idxmax()
        worse_out = out[out["noise_scale"] > ok["noise_scale"].max()]
        beyond = ok[ok["noise_scale"] > ok.loc[best, "noise_scale"] * (1 + 1e-9)]
        kept = pairs.set_index(["lr", "batch_size"])
        gains = [g["gain"].to_numpy(float) for _, g in kept.loc[ok.index].groupby(level=[0, 1])]
        anova = f_oneway(*gains).pvalue if len(gains) >= 2 and min(map(len, gains)) >= 2 else float("nan")
        facts.update({
            "mean gain of the kept cells (points; the paper's gains are about a point)": _span(ok["gain"]),
            **({"one test example (points)": f"{signal_point:.3f}"} if signal_point else {}),
            f"one-way ANOVA p over the kept cells (a difference below {1 - CONFIDENCE:.2g})":
                f"{anova:.2g}",
            "Spearman ρ(S, mean gain) over the kept cells": f"{rho:.2f}",
            "best kept cell": f"η {best[0]:g}, B {best[1]:g} (S = {ok.loc[best, 'noise_scale']:.1e})",
            "best kept cell at the largest kept S": "yes" if np.isclose(ok.loc[best, "noise_scale"],
                                                                        ok["noise_scale"].max()) else "no",
            "mean gain of kept cells at a larger S than the best (points)": _span(beyond["gain"]),
            "mean gain of excluded cells at a larger S than every kept one (points)": _span(worse_out["gain"])})
    return pd.DataFrame({"value": facts}).rename_axis("quantity")


def _span(gains: pd.Series) -> str:
    """Return a range of mean gains in points ("—" for none, one value for one)."""
    if gains.empty:
        return "—"
    return f"{100 * gains.iloc[0]:.2f}" if len(gains) == 1 else f"{100 * gains.min():.2f} to {100 * gains.max():.2f}"


def grid_numbers(study: Any, grid: pd.DataFrame, fit: dict[str, float] | None, n_test: int) -> dict[str, float]:
    """Return the numbers the page's prose quotes about its η × B grid, by glue key: the cells the rule kept and
    excluded, the grid's ranges (S, the children's test accuracy, the weaker child's training accuracy), the cell
    means' range and the best cell, the most a cell's ensemble gains, the vertex of the quadratic ``fit``
    (:func:`lmcbook.claims.noise.cell_mean_fit`, NaN without one), the thresholds, and the test split's size
    ``n_test``."""
    cells = noise_cells(grid, ["lr", "batch_size"])
    per_cell = grid.groupby(["batch_size", "lr"])
    cell_means, n_ok = per_cell["gain"].mean(), int(cells["kept"].sum())
    best = cell_means.idxmax()
    s = grid["noise_scale"]
    return dict(
        failed_acc=NOISE_FAILED_TRAIN_ACC, min_effect=100 * NOISE_MIN_EFFECT, n_excluded=len(cells) - n_ok,
        n_kept=n_ok, n_pairs=study.grid_pairs, n_test=n_test, signal_point=100 / n_test,
        n_cells=len(cells), n_lrs=len({c.lr for c in study.grid_cells()}), n_bs=len(study.batch_sizes),
        mu=study.momentum,
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
    glued, :meth:`lmcbook.page.Page.noise_reference_block`; the retired ones described under their own rule) and the
    first one's figure (a placeholder if none is committed)."""
    old_rule = NOISE_CONVERGED_TRAIN_ACC
    retired = [f"**Retired:** `{name}`, {reference.get(name).retired} What it showed, under its own rule (the weaker "
               f"child of every pair at {old_rule:g} training accuracy):\n\n"
               + markdown_table(noise_reference_facts(frame, rule=old_rule))
               for name, (frame, _) in (page.references(retired=True) if study.show_references else {}).items()]
    blocks, rows, figure, by_protocol = [], {}, None, []
    for name, (frame, prov) in (page.references() if study.show_references else {}).items():
        ref = mark_kept(noise_pairs(frame[frame["method"] == "grid"], ["lr", "batch_size"]), ["lr", "batch_size"])
        figure = figure or plot_noise_grid(ref, cell_mean_fit(ref, ["lr", "batch_size"]))
        facts = (f"{int(ref.groupby(['lr', 'batch_size'])['pair'].nunique().min())} pairs per cell.\n\n"
                 + markdown_table(noise_reference_facts(frame)))
        block, rows[name] = page.noise_reference_block(name, frame, prov, facts)
        blocks.append(block)
        n2 = next(r for r in rows[name] if r.id.startswith("N2"))
        by_protocol.append({"reference": f"`{name}`", "data": re.split("[:,]", reference.get(name).data)[0],
                            "protocol": grid_protocol(ref), "B per decade at fixed S (points)":
                            f"{100 * n2.values['estimate']:+.2f} [{100 * n2.values['lo']:+.2f}, "
                            f"{100 * n2.values['hi']:+.2f}]"
                            if "lo" in n2.values else "—", "N2": n2.mark})
    texts = {"ref_figure_name": f"`{next(iter(rows))}`" if rows else "(none)",
             "noise_references": "\n\n".join([reference.listing(page.name), *blocks, *retired]),
             "n2_protocols": markdown_table(pd.DataFrame(by_protocol).set_index("reference")) if by_protocol else
             "*No reference run of this page is committed.*",
             "ref_summary": "; ".join(f"`{n}`: " + ", ".join(f"{r.id} {r.mark}" for r in rs) for n, rs in rows.items())
             or "none is committed"}
    return texts, figure or placeholder("No reference run of this page is committed.")


def _map_of(dataset: str, map_frame: pd.DataFrame | None) -> tuple[str, pd.DataFrame | None]:
    """Return the regime map the page reads for ``dataset`` and its label: this build's (``map_frame``, the
    noise_regime page's CSV) where it has the data set, else a committed reference map of it, if any."""
    label = "the regime map (the previous page, one batch size)"
    if map_frame is not None and "dataset" in map_frame:
        map_frame = map_frame[map_frame["dataset"] == dataset]
    if map_frame is None or map_frame.empty:  # no map of this data set beside it: a committed reference map, if any
        name, map_frame = _reference_map(dataset)
        label = f"the committed reference map `{name}` (one batch size)"
    return label, map_frame


def where_facts(study: Any, map_frame: pd.DataFrame | None) -> tuple[dict[str, str], dict[str, Any]]:
    """Return where the page's "where this page runs" paragraphs stand, as the choices the Markdown is chosen by,
    and the numbers and words they quote, by glue key: this page's setting; the regime map read (``map_frame``, the
    noise_regime page's CSV, None if not executed beside it: then a committed reference map of the data set, if
    any); how the setting reads there (its learning rates that gain, its best cell's gain, interval, disagreement and
    ensemble gain); the setting the map picks and the one the ranking fixed before the map first ran picks; and the
    setting's merge against children whose learning rate decays to zero from the same spawn, at the best η.

    ``where``: ``nomap`` (no map of the data set), ``untrained`` (the map did not train this setting), ``failed``
    (it did, but no cell of it was kept with an interval: each failed by the rule or had too few pairs), ``nopick``
    (no spawned setting of the map gains), ``picked`` or ``picked_paper`` (the map picks this setting, by its cells
    that gain at all or that gain the paper's size), ``other`` (it picks another); ``where_read``: ``yes`` where the
    map trained the setting (its numbers are quoted), else ``no``.  ``where_first``: ``same``,
    ``other`` or ``nothing`` (what the ranking fixed before picks, where the map picks this page's setting),
    ``aside_same`` or ``aside_other`` (where it picks another), ``none`` without a pick.  ``where_decay``:
    ``within`` the minimum effect, the decayed children ``below`` or ``above`` the merge, ``none`` without those
    cells; ``where_converged``: whether the weaker child met the old convergence rule there."""
    own = {"augment": bool(study.augment), "lr_floor": float(study.lr_floor), "spawn_fraction": study.spawn_fraction}
    choices = {"where": "nomap", "where_read": "no", "where_first": "none", "where_decay": "none",
               "where_converged": "none"}
    facts: dict[str, Any] = {"where_setting": Markdown(describe_setting(own))}
    label, map_frame = _map_of(study.dataset, map_frame)
    if map_frame is None or map_frame.empty:
        return choices, facts
    cells = map_cells(map_frame)
    here = cells[(cells["method"] == "spawn") & (cells["augment"] == own["augment"])
                 & np.isclose(cells["lr_floor"], own["lr_floor"]) & np.isclose(cells["spawn_fraction"],
                                                                           own["spawn_fraction"])]
    facts["where_map"] = Markdown(label)
    if here.empty:
        return {**choices, "where": "untrained"}, facts
    s = map_settings(here).iloc[0]
    if not np.isfinite(s["best_lr"]):  # every cell failed, or none has an interval: nothing to read
        return {**choices, "where": "failed"}, facts
    best = here.set_index("lr").loc[s["best_lr"]]
    facts.update(where_n_lrs=len(here), where_n_gain=int(s["n_gain"]), where_min_pairs=MAP_MIN_PAIRS,
                 where_best_gain=100 * s["best_gain"], where_best_lo=100 * s["best_gain_lo"],
                 where_best_hi=100 * s["best_gain_hi"], where_best_lr=s["best_lr"],
                 where_disagree=100 * best["disagreement"], where_ens_gain=100 * best["ensemble_gain"])
    choices["where_read"] = "yes"
    pick = pick_setting(cells)
    if pick is None:
        return {**choices, "where": "nopick"}, facts
    vs = against_decay(cells, own, s["best_lr"])  # the merge beside children whose rate decays to zero
    if vs is not None:
        choices.update(decay_choices(vs))
        facts.update(where_acc_merged=vs["acc_merged"], where_acc_children=vs["acc_children"],
                     where_weak_train=vs["weak_train"], where_acc_decayed=vs["acc_decayed"],
                     where_decay_diff=100 * abs(vs["acc_merged"] - vs["acc_decayed"]),
                     where_min_effect=100 * NOISE_MIN_EFFECT, where_converged_acc=NOISE_CONVERGED_TRAIN_ACC)
    same = (bool(pick["augment"]) == own["augment"] and np.isclose(pick["lr_floor"], own["lr_floor"])
            and np.isclose(pick["spawn_fraction"], own["spawn_fraction"]))
    first = pick_setting(cells, FIRST_PICK)
    facts.update(where_pick=Markdown(describe_setting(pick)),
                 where_first_pick=Markdown(describe_setting(first) if first is not None else "nothing"))
    ranking = "same" if first == pick else "nothing" if first is None else "other"
    choices.update(where=("picked_paper" if s["n_paper"] else "picked") if same else "other",
                   where_first=ranking if same else f"aside_{'same' if ranking == 'same' else 'other'}")
    return choices, facts


def decay_choices(vs: dict[str, float]) -> dict[str, str]:
    """Return how a merge compares with children whose learning rate decays to zero (``vs``:
    :func:`lmcbook.experiments_noise.against_decay`), as :func:`where_facts` chooses it: ``where_decay`` ``within`` the
    minimum effect, the decayed children ``below`` or ``above`` the merge; ``where_converged`` ``yes`` or ``no``
    (the weaker child at the old convergence rule)."""
    diff = vs["acc_merged"] - vs["acc_decayed"]
    return {"where_decay": "within" if abs(diff) <= NOISE_MIN_EFFECT else "below" if diff > 0 else "above",
            "where_converged": "yes" if vs["weak_train"] >= NOISE_CONVERGED_TRAIN_ACC else "no"}


def _reference_map(dataset: str) -> tuple[str, pd.DataFrame | None]:
    """Return the first committed reference regime map of ``dataset`` (its name and frame), or ("", None)."""
    for name in reference.available("noise_regime"):
        if reference.dataset(name) == dataset:
            return name, reference.load(name)[0]
    return "", None
