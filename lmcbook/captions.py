"""The captions and prose that several pages share, every number computed from a page's study or frames.

A builder that serves one page only lives with that page (:mod:`lmcbook.pages`); the page's
lifecycle (open, read, save, glue) is :mod:`lmcbook.page`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from . import reference
from .claims import (
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    ClaimResult,
    page_claims,
)
from .data import DATASET_LABELS
from .page import Page


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
            f"batch {t.batch_size}); {', '.join(map(str, units))} {unit}; "
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
            + (f" {facts}" if facts else "") + f"\n\n{claims_markdown(rows)}\n\nThe sensitivity of its rows to the "
            f"rule:\n\n{markdown_table(table)}\n\n{sensitivity_words(table)}")
    return text, rows


def rule_between_words() -> str:
    """Return the sensitivity table's thresholds between the rule and the old convergence rule, in words."""
    between = [f"{t:g}" for t in NOISE_RULE_THRESHOLDS[1:-1]]
    return ", ".join(between[:-1]) + f" and {between[-1]}" if len(between) > 1 else "".join(between)


def sensitivity_words(table: pd.DataFrame) -> str:
    """Return one Markdown sentence saying which noise rows change verdict as the rule's threshold moves
    (:func:`lmcbook.claims.rule_sensitivity`'s table), and how."""
    first, last = str(table.columns[0]), str(table.columns[-1])

    def name(col: str) -> str:
        at = re.search(r"([0-9.]+)\)?$", col)
        return "the rule" if col == first else f"a weaker child ≥ {at.group(1) if at else col}"

    def where(cols: list[str]) -> str:
        return (f"at {name(cols[0])}" if len(cols) == 1 else f"from {name(cols[0])} on" if cols[-1] == last else
                f"from {name(cols[0])} to {name(cols[-1])}")

    moving = [f"{cid} reads " + ", ".join(f"{m} {where(cols)}" for m, cols in _runs(marks))
              for cid, marks in table.iterrows() if marks.nunique() > 1]
    if not moving:
        return "No row's verdict changes with the threshold."
    return "As the threshold rises, " + "; ".join(moving) + "; the other rows do not change."


def _runs(marks: pd.Series) -> list[tuple[str, list[str]]]:
    """Return the consecutive runs of equal marks along the thresholds: (mark, the columns it holds over)."""
    out: list[tuple[str, list[str]]] = []
    for col, m in marks.items():
        if out and out[-1][0] == m:
            out[-1][1].append(str(col))
        else:
            out.append((m, [str(col)]))
    return out


def noise_map_sentence(label: str, frame: pd.DataFrame) -> str:
    """Return one sentence on a regime map (the noise_regime page's CSV, this build's or a reference's): how its cells
    read (:data:`~lmcbook.claims.noise_map.MAP_READINGS`) and the setting it picks, every number computed."""
    from .claims import FIRST_PICK, describe_setting, map_cells, map_settings, pick_setting

    cells = map_cells(frame)
    n = cells["reading"].value_counts()
    data = DATASET_LABELS.get(str(frame["dataset"].iloc[0]), "its data") if "dataset" in frame else "its data"
    words = {"paper": f"gain at least the paper's size ({100 * NOISE_MIN_EFFECT:g} points)",
             "gains": "gain less than that",
             "basins": "lose because the children sit in different basins", "harvest": "have nothing to harvest",
             "failed": "failed", "undecided": "are undecided"}
    text = (f"On {label}'s regime map ({data}), of {len(cells)} cells " +
            ", ".join(f"{int(n.get(k, 0))} {w}" for k, w in words.items()) + ".")
    def best(setting: dict) -> pd.Series | None:
        own = cells[(cells["method"] == "spawn") & (cells["augment"] == setting["augment"])
                    & np.isclose(cells["lr_floor"], setting["lr_floor"])
                    & np.isclose(cells["spawn_fraction"], setting["spawn_fraction"])]
        return map_settings(own).iloc[0] if len(own) else None

    def gain(b: pd.Series) -> str:
        return (f"{100 * b['best_gain']:.2f} points ({100 * b['best_gain_lo']:.2f} to {100 * b['best_gain_hi']:.2f})"
                f" at η {b['best_lr']:g}")

    first = best({"augment": False, "lr_floor": 0.0, "spawn_fraction": 0.5})
    if first is not None:
        text += (" In the book's first protocol (a decay to zero, children spawned at 50%) its best gain (a setting's "
                 "best cell is the one whose interval has the highest lower end; of a tie, the smaller η) is "
                 f"{gain(first)}.")
    pick = pick_setting(cells)
    if pick is None:
        return text + " No spawned setting gains measurably."
    b = best(pick)
    first = pick_setting(cells, FIRST_PICK)
    text += (f" It picks {describe_setting(pick)}: its best gain (its cell whose interval has the highest lower "
             f"end) is {gain(b)}."
             + ("" if first == pick else f" (The ranking fixed before the map first ran would pick "
                                         f"{describe_setting(first)}.)")
             + _against_decay(cells, pick, b["best_lr"]))
    return text


def _against_decay(cells: pd.DataFrame, pick: dict, lr: float) -> str:
    """Return the sentence that compares a map setting's merged model at ``lr`` with children spawned at the same
    point whose learning rate decays to zero instead ("" when the map has no such cell), and gives the weaker child's
    training accuracy there."""
    at = cells[(cells["method"] == "spawn") & (cells["augment"] == pick["augment"]) & (cells["lr"] == lr)
               & np.isclose(cells["spawn_fraction"], pick["spawn_fraction"])].set_index("lr_floor")
    if not (pick["lr_floor"] > 0 and 0.0 in at.index and {"acc_merged", "train_acc_min"} <= set(at)):
        return ""
    here, decayed = at.loc[pick["lr_floor"]], at.loc[0.0, "acc_endpoints"]
    diff = 100 * (here["acc_merged"] - decayed)
    how = ("within the minimum effect of the merge: here merging recovers what decaying the learning rate gives, "
           "no more" if abs(diff) <= 100 * NOISE_MIN_EFFECT else
           f"{diff:.2f} points below the merge" if diff > 0 else f"{-diff:.2f} points above the merge")
    return (f" At η {lr:g} the merged model reaches {here['acc_merged']:.3f} test accuracy and its children "
            f"{here['acc_endpoints']:.3f} (the weaker child {here['train_acc_min']:.3f} on its own training set"
            + (": they are not trained to convergence" if here["train_acc_min"] < NOISE_CONVERGED_TRAIN_ACC else "")
            + f"); children whose learning rate decays to zero from the same spawn "
            f"reach {decayed:.3f}, {how}.")


def where_noise_runs(study: Any, map_frame: pd.DataFrame | None) -> str:
    """Return, for a noise page, the paragraph that says in which setting it runs and what the regime map
    (``map_frame``: the noise_regime page's CSV, None if not executed beside it) measured there and where it would
    pick, every number computed."""
    from .claims import FIRST_PICK, MAP_MIN_PAIRS, describe_setting, map_cells, map_settings, pick_setting

    own = {"augment": bool(study.augment), "lr_floor": float(study.lr_floor), "spawn_fraction": study.spawn_fraction}
    text = f"This page runs {describe_setting(own)}."
    label = "the regime map (the previous page: one batch size, {n} learning rates)"
    if map_frame is not None and "dataset" in map_frame:
        map_frame = map_frame[map_frame["dataset"] == study.dataset]
    if map_frame is None or map_frame.empty:  # no map of this data set beside it: a committed reference map, if any
        name, map_frame = _reference_map(study.dataset)
        label = f"the committed reference map `{name}` (one batch size, {{n}} learning rates)"
    if map_frame is None or map_frame.empty:
        return text + " No regime map of this data set was executed beside this page, so none is read here."
    cells = map_cells(map_frame)
    here = cells[(cells["method"] == "spawn") & (cells["augment"] == own["augment"])
                 & np.isclose(cells["lr_floor"], own["lr_floor"]) & np.isclose(cells["spawn_fraction"],
                                                                           own["spawn_fraction"])]
    if here.empty:
        return text + " The regime map did not train this setting, so it says nothing about it."
    s = map_settings(here).iloc[0]
    text += (f" On {label.format(n=len(here))}, this setting "
             f"reads as gaining (an interval over at least {MAP_MIN_PAIRS} pairs above zero) at {s['n_gain']} of "
             f"them; its best gain is {100 * s['best_gain']:.2f} points (95% interval {100 * s['best_gain_lo']:.2f} "
             f"to {100 * s['best_gain_hi']:.2f}, η {s['best_lr']:g}); "
             f"there the children disagree on {100 * here.set_index('lr').loc[s['best_lr'], 'disagreement']:.1f}% "
             f"of the test inputs and their ensemble gains "
             f"{100 * here.set_index('lr').loc[s['best_lr'], 'ensemble_gain']:.2f} points.")
    pick = pick_setting(cells)
    if pick is None:
        return text + " No spawned setting of the map gains measurably, so none is better placed."
    same = (bool(pick["augment"]) == own["augment"] and np.isclose(pick["lr_floor"], own["lr_floor"])
            and np.isclose(pick["spawn_fraction"], own["spawn_fraction"]))
    most = "the most learning rates that gain the paper's size" if s["n_paper"] else "the most that gain"
    text += (f" It is the setting the map picks: {most}." if same
             else f" The map would pick {describe_setting(pick)} instead; this page keeps its own setting (the one "
                  "the reference runs used), and says so here.")
    first = pick_setting(cells, FIRST_PICK)
    return (text + _against_decay(cells, own, s["best_lr"]) + " The map's ranking (gains of the paper's size first) "
            "was set after the whole MNIST-1D map first ran (the regime page says why); on this map the ranking fixed "
            "before it picks " + ("the same setting" if first == pick else
                                  describe_setting(first) if first is not None else "nothing") + ". And wherever "
            "this page's cells coincide with the map's (the same learning rate, batch size and seed), they are the "
            "same runs, trained once: the setting was chosen partly on runs this page reads.")


def _reference_map(dataset: str) -> tuple[str, pd.DataFrame | None]:
    """Return the first committed reference regime map of ``dataset`` (its name and frame), or ("", None)."""
    for name in reference.available("noise_regime"):
        if reference.dataset(name) == dataset:
            return name, reference.load(name)[0]
    return "", None


def claims_markdown(rows: list[ClaimResult]) -> str:
    """Return verdict rows as a Markdown list: the claim, its test, what was measured and the verdict."""
    if not rows:
        return "(no rows)"
    return "\n".join(f"- **{r.id}**{f' ({r.regime})' if r.regime else ''}: {r.statement} *Test:* {r.test}. "
                     f"*Measured:* {r.measured_shown}. **{r.mark}**" for r in rows)


def direction(before: float, after: float, tol: float = 0.01) -> str:
    """Return "rises", "falls" or "stays about the same" for a change from ``before`` to ``after`` (relative
    tolerance ``tol``)."""
    if abs(after - before) <= tol * max(abs(before), abs(after), 1e-12):
        return "stays about the same"
    return "rises" if after > before else "falls"
