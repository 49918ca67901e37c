"""The captions and prose that several pages share, every number computed from a page's study or frames.

A builder that serves one page only lives with that page (:mod:`lmcbook.pages`); the page's
lifecycle (open, read, save, glue) is :mod:`lmcbook.page`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from . import reference
from .claims import (
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    ClaimResult,
    page_claims,
)
from .data import DATASET_LABELS, DATASET_SHORT
from .page import Page


def precision_words(precision: str) -> str:
    """Return a caption's clause on a training precision: "" for fp32, else ", every run in P autocast"."""
    return "" if precision == "fp32" else f", every run in {precision} autocast"


def describe_study(study: Any, regime: pd.DataFrame | None = None) -> str:
    """Return a one-sentence Markdown description of what a study trained (for figure captions), ending with
    its training regime (:func:`describe_regime`) when ``regime`` is given."""
    pairs = study.pairs()
    units = sorted({p.hidden_units for p in pairs})
    depths = sorted({p.depth for p in pairs if p.depth is not None})
    m, t = pairs[0].a.model, pairs[0].a.train
    epochs = " or ".join(f"{e:g}" for e in sorted({p.epochs for p in pairs}))
    decays = " or ".join(f"{d:g}" for d in sorted({p.weight_decay for p in pairs}))
    if m.arch == "mlp":
        ls = f"L = {depths[0]}" if len(depths) == 1 else f"L = {', '.join(map(str, depths))}"
        arch = f"ReLU MLP with {ls} linear layers"
    else:
        arch = {"vgg11": "VGG11", "resnet20": "ResNet20 (activation probes read residual-block outputs)"}[m.arch]
    unit = "hidden units" if m.arch == "mlp" else "base channels"
    return (f"{'bias-free ' if not m.bias else ''}{arch}, norm {m.norm}, on {DATASET_LABELS[study.dataset]}; "
            f"{epochs} epochs of SGD (peak lr {t.lr:g}, momentum {t.momentum:g}, weight decay {decays}, "
            f"batch {t.batch_size}{precision_words(t.precision)}); "
            f"{', '.join(map(str, units))} {unit}; "
            f"{study.seeds} independent pair(s) per {'width' if len(units) > 1 else 'depth'}"
            + _deciding_pairs(study, len(units) > 1)
            + (f"; regime: {describe_regime(regime)}" if regime is not None else ""))


def _deciding_pairs(study: Any, sweep: bool) -> str:
    """Return " (5 at 16, 512 and 1024 hidden units)": the pairs at the widths where a width study's rows decide."""
    if not sweep or not hasattr(study, "deciding_widths"):
        return ""
    ws = [w for w in study.deciding_widths() if study.pairs_at(w) != study.seeds]
    if not ws:
        return ""
    units = [study.spec(w, 0).model.channels for w in ws]
    unit = "hidden units" if study.arch == "mlp" else "base channels"
    return f" ({study.pairs_at(ws[0])} at {join_and(list(map(str, units)))} {unit})"


def join_and(items: list[str]) -> str:
    """Return ``a, b and c`` from a non-empty list of words."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def short_fraction(x: float) -> str:
    """Return a fraction with three decimals, or in scientific notation below 0.01."""
    return f"{x:.3f}" if x >= 0.01 else f"{x:.1e}"


def _regime_cells(regime: pd.DataFrame):
    """Yield (epochs, weight decay, metric means by hidden units, distance by hidden units) per cell of a regime
    frame (:func:`lmcbook.experiments.regime_frame`'s output, or those rows of a page's CSV)."""
    whole = regime[regime["layer"].isna()]
    for (epochs, wd), cell in whole.groupby(["epochs", "weight_decay"]):
        mean = cell.groupby(["metric", "hidden_units"])["value"].mean()
        yield epochs, wd, mean, mean["init_distance"]


def describe_regime(regime: pd.DataFrame) -> str:
    """Return one Markdown clause, for a figure caption, saying which training regime a page's runs are in: per
    (length, weight decay) the decay integral D and the distance from initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the
    narrowest and the widest width.  :func:`regime_table` gives the same cells in full."""
    parts = []
    for epochs, wd, mean, dist in _regime_cells(regime):
        lo, hi = dist.index.min(), dist.index.max()
        far = f"{dist[lo]:.2f} at {lo:g} hidden units" + (f" and {dist[hi]:.2f} at {hi:g}" if hi != lo else "")
        parts.append(f"{epochs:g} epochs at weight decay {wd:g}: D = {mean['decay_integral'].mean():.3g}, "
                     f"‖θ_T − θ_0‖/‖θ_0‖ = {far}")
    return "; ".join(parts)


def regime_table(regime: pd.DataFrame) -> str:
    """Return a Markdown table of the training regime of a page's runs, one row per (length, weight decay): the
    decay integral D, what weight decay alone would leave of a weight (momentum included), and the distance from
    initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the narrowest and the widest width (hidden units in brackets)."""
    rows = ["| epochs | weight decay | decay integral $D$ | fraction of a weight left by weight decay alone "
            "(momentum included) | distance from initialisation "
            "$\\lVert\\theta_T - \\theta_0\\rVert / \\lVert\\theta_0\\rVert$ at the narrowest width (hidden units) "
            "| distance at the widest width (hidden units) |",
            "|---:|---:|---:|---:|---:|---:|"]
    for epochs, wd, mean, dist in _regime_cells(regime):
        lo, hi = dist.index.min(), dist.index.max()
        rows.append(f"| {epochs:g} | {wd:g} | {mean['decay_integral'].mean():.3g} "
                    f"| {short_fraction(mean['decay_shrinkage'].mean())} "
                    f"| {dist[lo]:.2f} ({lo:g}) | {dist[hi]:.2f} ({hi:g}) |")
    return "\n".join(rows)


def describe_noise(study: Any, spawned: bool = True) -> str:
    """Return a one-sentence Markdown description of what the noise study trained (for captions): its
    spawn-and-merge pairs, or with ``spawned=False`` the models it trained from scratch (task arithmetic's
    pretrained models)."""
    m = study.spec(study.grid_cells()[0], 0).model
    floor = study.lr_floor
    sched = ("decay to zero" if floor == 0 or not spawned else "a constant rate" if floor == 1 else
             f"decay to {floor:g} of the peak")
    start = ("from a shared initialisation, with different batch orders" if study.spawn_fraction == 0 else
             f"spawned at {study.spawn_fraction:.0%} of training from their own parents")
    how = (f"spawn-and-merge pairs {start}; {study.grid_pairs} pair(s) per cell of the η × B grid and "
           f"{study.seeds} per cell of the component sweeps"
           + ("; with augmentation" if study.augment else "") if spawned else
           f"{study.seeds} such model(s), one per seed")
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers and {m.channels} hidden "
            f"units on {DATASET_LABELS[study.dataset]}; {study.steps} SGD steps per run (linear warm-up then "
            f"{sched}), {how}")


def markdown_table(frame: pd.DataFrame) -> str:
    """Return a frame as a MyST (pipe) table, its index as the first column."""
    head = [str(frame.index.name or "")] + [str(c) for c in frame.columns]
    rows = [[str(i)] + [str(v) for v in row] for i, row in zip(frame.index, frame.to_numpy())]
    return "\n".join("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"
                     for r in [head, ["---"] * len(head)] + rows)


def noise_reference_block(page: Page, name: str, frame: pd.DataFrame, prov: dict[str, Any],
                          facts: str = "") -> tuple[str, list[ClaimResult]]:
    """Score a committed noise reference run with its page's claims, glue each verdict (its key names the run), and
    return its Markdown block (what it is, ``facts``, its verdicts and their sensitivity to the rule) and its rows."""
    from .claims import rule_sensitivity

    rows = page_claims(page.name, frame)
    for r in rows:
        r.source = name
        page.glue_state(r)
    stale = reference.stale_note(prov)
    scale, components = (frame, None) if page.name == "noise_scale" else (None, frame)
    table = rule_sensitivity(scale, components)
    text = (f"**Reference** {reference.describe(name, prov)}." + (f" **{stale}**" if stale else "")
            + (f"\n\n{facts}" if facts else "") + f"\n\n{claims_markdown(rows)}\n\nThe sensitivity of its rows to "
            f"the rule (each row's verdict as the threshold rises):\n\n{markdown_table(table)}")
    return text, rows


def rule_between_words() -> str:
    """Return the sensitivity table's thresholds between the rule and the old convergence rule, in words."""
    between = [f"{t:g}" for t in NOISE_RULE_THRESHOLDS[1:-1]]
    return ", ".join(between[:-1]) + f" and {between[-1]}" if len(between) > 1 else "".join(between)


def moving_rows(table: pd.DataFrame) -> str:
    """Return the claims whose verdict changes along :func:`lmcbook.claims.rule_sensitivity`'s table (as the rule's
    threshold rises), comma-separated ("" if none)."""
    return ", ".join(str(cid) for cid, marks in table.iterrows() if marks.nunique() > 1)


def against_decay(cells: pd.DataFrame, setting: dict, lr: float) -> dict[str, float] | None:
    """Return a regime map setting's merge at ``lr`` beside children spawned at the same point whose learning rate
    decays to zero (None when the map has no such cell, or the setting itself decays to zero): the merged model's and
    its children's test accuracy, the weaker child's training accuracy, and the decayed children's test accuracy."""
    at = cells[(cells["method"] == "spawn") & (cells["augment"] == setting["augment"]) & (cells["lr"] == lr)
               & np.isclose(cells["spawn_fraction"], setting["spawn_fraction"])].set_index("lr_floor")
    if not (setting["lr_floor"] > 0 and 0.0 in at.index and {"acc_merged", "train_acc_min"} <= set(at)):
        return None
    here = at.loc[setting["lr_floor"]]
    return {"acc_merged": float(here["acc_merged"]), "acc_children": float(here["acc_endpoints"]),
            "weak_train": float(here["train_acc_min"]), "acc_decayed": float(at.loc[0.0, "acc_endpoints"])}


def noise_map_summary(maps: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Return one row per regime map (the noise_regime page's CSV, this build's or a reference's, by label): its data
    set, how its cells read (:data:`~lmcbook.claims.noise_map.MAP_READINGS`), the best gain of the book's first
    protocol (a decay to zero, children spawned at 50%), the setting it picks and that setting's best gain (a
    setting's best cell: the one whose interval has the highest lower end), what the ranking fixed before the map
    first ran picks, and, at the picked setting's best η, its merge minus children whose learning rate decays to zero
    from the same spawn (points; within the noise rows' minimum effect, merging recovers what decaying gives, no
    more) and its weaker child's training accuracy, every number computed; "—" where a map has none."""
    return pd.DataFrame.from_dict({label: _map_row(frame) for label, frame in maps.items()},
                                  orient="index").rename_axis("map")


def _map_row(frame: pd.DataFrame) -> dict[str, Any]:
    """Return one regime map's row of :func:`noise_map_summary`."""
    from .claims import FIRST_PICK, describe_setting, map_cells, pick_setting

    cells = map_cells(frame)
    n = cells["reading"].value_counts()
    readings = {"paper": f"cells gaining ≥ {100 * NOISE_MIN_EFFECT:g} points", "gains": "cells gaining less",
                "basins": "cells in different basins", "harvest": "cells with nothing to harvest",
                "failed": "cells failed", "undecided": "cells undecided"}
    pick, first = pick_setting(cells), pick_setting(cells, FIRST_PICK)
    best = _setting_best(cells, pick)
    vs = against_decay(cells, pick, best["best_lr"]) if pick is not None and best is not None else None
    return {"data": DATASET_SHORT.get(str(frame["dataset"].iloc[0]), "—") if "dataset" in frame else "—",
            "cells": len(cells), **{w: int(n.get(k, 0)) for k, w in readings.items()},
            "first protocol's best gain": _gain_text(_setting_best(cells, {"augment": False, "lr_floor": 0.0,
                                                                           "spawn_fraction": 0.5})),
            "picked setting": describe_setting(pick) if pick is not None else "none (no setting gains)",
            "its best gain": _gain_text(best),
            "the ranking fixed before picks": ("—" if pick is None else "the same" if first == pick else
                                               describe_setting(first) if first is not None else "none"),
            "merge minus decay-to-zero children (points, at that η)": "—" if vs is None else
            f"{100 * (vs['acc_merged'] - vs['acc_decayed']):+.2f}",
            "weaker child's training accuracy there": "—" if vs is None else f"{vs['weak_train']:.3f}"}


def _setting_best(cells: pd.DataFrame, setting: dict | None) -> pd.Series | None:
    """Return a spawned setting's row of :func:`lmcbook.claims.map_settings` on a map's cells (None if the map has
    none of it, or no setting is given)."""
    from .claims import map_settings

    if setting is None:
        return None
    own = cells[(cells["method"] == "spawn") & (cells["augment"] == setting["augment"])
                & np.isclose(cells["lr_floor"], setting["lr_floor"])
                & np.isclose(cells["spawn_fraction"], setting["spawn_fraction"])]
    return map_settings(own).iloc[0] if len(own) else None


def _gain_text(best: pd.Series | None) -> str:
    """Return a setting's best gain as a table cell: points, its 95% interval, its η ("—" without one, or where no
    cell of the setting was kept with an interval)."""
    if best is None or not np.isfinite(best["best_lr"]):
        return "—"
    return (f"{100 * best['best_gain']:.2f} [{100 * best['best_gain_lo']:.2f}, {100 * best['best_gain_hi']:.2f}] "
            f"at η {best['best_lr']:g}")


def claims_markdown(rows: list[ClaimResult]) -> str:
    """Return verdict rows as a Markdown list: the claim, its test, what was measured and the verdict."""
    if not rows:
        return "(no rows)"
    return "\n".join(f"- **{r.id}**{f' ({r.regime})' if r.regime else ''}: {r.statement} *Test:* {r.test}. "
                     f"*Measured:* {r.measured_shown}. **{r.mark}**" for r in rows)
