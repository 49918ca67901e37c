"""The noise study's frames (spawn-and-merge): merging gains over a grid of cells, the regime map, the
learning-rate pairs and task arithmetic, each pair measured once and cached in the store; then the words the pages
use for the noise study and its regime map, and the noise_regime page's table, CSV and pick; then what the
noise_scale page reads of its grid and of the regime map (:func:`noise_reference_facts`, :func:`where_facts`) and
the landing page's table of the noise reference runs (:func:`noise_verdict_table`); last, the noise scale
S = η/(B(1−μ)) (:func:`effective_noise_scale`) and the merging gain (:func:`merging_gain`)."""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import f_oneway

from . import reference
from .claims import id_order, thresholds
from .claims.noise import (
    MAP_KEYS,
    PROTOCOL_WORDS,
    describe_setting,
    grid_protocol,
    map_cells,
    map_settings,
    noise_grid_cells,
    noise_pairs,
    pick_setting,
)
from .claims.thresholds import (
    FIRST_PICK,
    MAP_MIN_PAIRS,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
)
from .claims.verdicts import FAIL, PAPER, PASS, ClaimResult
from .data import DATASET_LABELS, DATASET_SHORT, Dataset, load
from .merge import (
    add_vectors,
    disagreement,
    ensemble_gain,
    interpolate,
    relative_distance,
    task_vector,
    ties_vector,
)
from .models import evaluate, logits
from .schema import to_long
from .specs import RunSpec, SpecError
from .stats import CONFIDENCE, spearman
from .store import RunStore, cached_pair_summary, study_data, sweep_first
from .studies import TASKS, Cell, NoiseRegimeStudy, NoiseStudy
from .train import DivergedError, TrainedRun, init_model

log = logging.getLogger("lmcbook.experiments")  # the logger of every experiments module

GAIN_LAMS = (0.0, 0.5, 1.0)


def spawn_point(store: RunStore, spec: RunSpec, data: Dataset) -> torch.nn.Module:
    """Return where a noise pair's model ``spec`` started: its parent at the spawn, or (a shared initialisation, or an
    independent pair) its own initialisation."""
    return store.load(spec.parent).model if spec.parent is not None else init_model(spec, data)


def _pair_measures(store: RunStore, ra: TrainedRun, rb: TrainedRun, data: Dataset) -> dict[str, float]:
    """Return what tells whether a pair can gain from merging (cached): the two models' disagreement and logit-ensemble
    gain on the test split, their distance relative to where model a started, and the merged model's training
    accuracy and loss."""
    def compute() -> dict[str, pd.DataFrame]:
        za, zb = logits(ra.model, data.x_test), logits(rb.model, data.x_test)
        merged = interpolate(ra.model, rb.model, 0.5, data)
        train = evaluate(merged, data.x_train, data.y_train)
        row = {"disagreement": disagreement(za, zb), "ensemble_gain": ensemble_gain(za, zb, data.y_test),
               "pair_distance": relative_distance(ra.model, rb.model, spawn_point(store, ra.spec, data)),
               "train_acc_merged": train.acc, "train_loss_merged": train.loss}
        return {"row": pd.DataFrame([row])}

    ref = ra.spec.parent.id if ra.spec.parent is not None else "init"  # where the distance is measured from
    got = store.cached_frames("noise_pair", {"a": ra.id, "b": rb.id, "dataset": data.name, "ref": ref}, compute)
    return {k: float(v) for k, v in got["row"].iloc[0].items()}


def _gain_row(store: RunStore, ra: TrainedRun, rb: TrainedRun, data: Dataset) -> dict:
    summ = cached_pair_summary(store, ra, rb, data, GAIN_LAMS)["summary"].iloc[0].to_dict()
    keep = ("acc_a", "acc_b", "acc_endpoints", "acc_merged", "acc_ensemble", "loss_endpoints", "loss_merged",
            "loss_barrier_cal_mid")
    own = {f"{what}_{ab}": float(r.metrics[key]) for ab, r in (("a", ra), ("b", rb))
           for what, key in (("loss", "test_loss"), ("train_acc", "train_acc"), ("train_loss", "train_loss"))}
    return {**{k: float(summ[k]) for k in keep}, **merging_gain(summ), **own, **_pair_measures(store, ra, rb, data)}


def noise_frame(study: NoiseStudy, cells: list[Cell], store: RunStore | None = None,
                pairs: int | None = None) -> pd.DataFrame:
    """Return one row per (cell, pair) (``pairs`` per cell, default ``study.seeds``): the cell's settings, S in both
    forms, the merging gains of the pair and what tells whether it could gain (``_pair_measures``), the lower of
    its two children's training accuracies (``train_acc_min``), and the steps its runs took (``train_steps``).

    Each cell trains ``study.steps`` long.  Only with ``max_steps`` set (the first protocol, unset in every profile)
    does the old convergence rule (``lmcbook.claims.thresholds.NOISE_CONVERGED_TRAIN_ACC``, on every pair's weaker
    child) train a cell that misses it again at the next of ``study.lengths()`` (doubled steps), all its pairs
    together, until it meets the rule or the lengths run out; a cell's rows are then those of the last length it
    trained."""
    store = store or RunStore()
    data = study_data(study)
    out: dict[Cell, list[dict]] = {}
    todo = list(dict.fromkeys(cells))
    for steps in study.lengths():
        if not todo:
            break
        kids = {(cell, p): study.children(cell, p, steps) for cell in todo for p in range(pairs or study.seeds)}
        runs, diverged = _train_reporting_divergence(kids, study, store, data)
        for cell in todo:
            out[cell] = []
            for p in range(pairs or study.seeds):
                row = {**_cell_columns(cell), "pair": p, "train_steps": kids[cell, p][0].train.steps,
                       "noise_scale": effective_noise_scale(cell.lr, cell.batch_size, cell.momentum, 1),
                       "noise_scale_sq": effective_noise_scale(cell.lr, cell.batch_size, cell.momentum, 2)}
                if cell in diverged:  # reported, counted as missing the rule, never merged
                    out[cell].append({**row, "diverged": 1.0, "train_acc_min": 0.0})
                    continue
                ra, rb = (runs[s.id] for s in kids[cell, p])
                out[cell].append({**row, "diverged": 0.0,
                                  "train_acc_min": min(float(ra.metrics["train_acc"]), float(rb.metrics["train_acc"])),
                                  **_gain_row(store, ra, rb, data)})
        todo = [c for c in todo if c not in diverged
                and min(r["train_acc_min"] for r in out[c]) < thresholds.NOISE_CONVERGED_TRAIN_ACC]
    return pd.DataFrame([r for cell in dict.fromkeys(cells) for r in out[cell]])


def _cell_columns(cell: Cell) -> dict:
    """Return a cell's settings as a frame row's columns; ``anneal`` only where set (the frames made before it
    existed keep their columns)."""
    row = asdict(cell)
    if not row["anneal"]:
        del row["anneal"]
    return row


def regime_map_frame(study: NoiseRegimeStudy, store: RunStore | None = None) -> pd.DataFrame:
    """Return the regime map: one row per (cell, pair) of :meth:`lmcbook.studies.NoiseRegimeStudy.cells`
    (:func:`noise_frame`'s columns), with ``method`` "spawn", "independent" or "anneal" (children annealed to zero
    from the spawn of the "spawn" cell with the same settings)."""
    frame = noise_frame(study.noise_study(), study.cells(), store)
    method = frame["independent"].map({True: "independent", False: "spawn"})
    if "anneal" in frame:
        method = method.where(~frame.pop("anneal").fillna(False).astype(bool), "anneal")
    return frame.assign(method=method)


def _train_reporting_divergence(kids: dict[tuple[Cell, int], tuple[RunSpec, RunSpec]], study: NoiseStudy,
                                store: RunStore, data: Dataset) -> tuple[dict, dict[Cell, str]]:
    """Train (or load) every child of ``kids``; return the runs by id and, per cell in which a run (a child or its
    parent) diverged, the divergence's message.  The other runs are stored as they train; a diverged cell's runs are
    left out (logged as a warning), so a diverged run is reported and never merged."""
    diverged: dict[Cell, str] = {}
    while True:
        live = {k: v for k, v in kids.items() if k[0] not in diverged}
        flat = [s for pair in live.values() for s in pair]
        if not flat:
            return {}, diverged
        sweep_first(flat, study, store)
        try:
            return {s.id: r for s, r in zip(flat, store.get_or_train_many(flat, data=data))}, diverged
        except DivergedError as first:
            found = 0
            for err in [first, *getattr(first, "others", [])]:  # every divergence of the call, in one retry
                bad = {cell for (cell, _), pair in live.items()
                       if any(err.run_id in (s.id, getattr(s.parent, "id", None)) for s in pair)}
                found += len(bad)
                for cell in bad:
                    diverged.setdefault(cell, str(err))
                    log.warning("noise cell %s diverged and is excluded: %s", cell, err)
            if not found:
                raise


def lr_pair_frame(study: NoiseStudy, store: RunStore | None = None) -> pd.DataFrame:
    """Return the learning-rate-pair matrix: children of one parent, continued at peak learning rates η_i and
    η_j (different batch orders), merged pairwise; one row per (i, j, pair), with the weaker child's training
    accuracy (``train_acc_min``) and the steps the runs took (``train_steps``).

    One parent feeds every cell of its pair's matrix, so the matrix trains at one length: ``study.steps``, then,
    while some cell's children miss the convergence rule, again at the next of ``study.lengths()`` (parents
    included), until every cell meets it or the lengths run out.  Cells that still miss it are excluded by the rule
    (N5); a learning rate whose children diverge is reported and left out of every cell it is in."""
    store = store or RunStore()
    data = study_data(study)
    cell = study.cell(study.component_lr)
    rows: list[dict] = []
    for steps in study.lengths():
        by_lr = {lr: replace(cell, lr=lr) for lr in study.pair_lrs}  # a key per learning rate, for divergence
        kids = {(by_lr[lr], p): study.children(cell, p, steps, lr=lr) for p in range(study.seeds)
                for lr in study.pair_lrs}
        trained, diverged = _train_reporting_divergence(kids, study, store, data)
        rows = []
        for p in range(study.seeds):
            for lr_i in study.pair_lrs:
                for lr_j in study.pair_lrs:
                    row = {"lr": lr_i, "lr_b": lr_j, "pair": p, "train_steps": steps}
                    if by_lr[lr_i] in diverged or by_lr[lr_j] in diverged:
                        rows.append({**row, "diverged": 1.0, "train_acc_min": 0.0})
                        continue
                    ra, rb = trained[kids[by_lr[lr_i], p][0].id], trained[kids[by_lr[lr_j], p][1].id]
                    rows.append({**row, "diverged": 0.0, "train_acc_min": min(float(ra.metrics["train_acc"]),
                                                                              float(rb.metrics["train_acc"])),
                                 **_gain_row(store, ra, rb, data)})
        if all(r["train_acc_min"] >= thresholds.NOISE_CONVERGED_TRAIN_ACC for r in rows if not r["diverged"]):
            break
    return pd.DataFrame(rows)


def task_arithmetic_frame(study: NoiseStudy, store: RunStore | None = None) -> pd.DataFrame:
    """Return each task's test loss and accuracy (and calibration-split loss, to choose α on) against α for task
    arithmetic and TIES, per fine-tuning lr.

    θ0 is trained on the original task; copies are fine-tuned on the time-reversed and the
    negated inputs (``transform`` in the DataSpec) at each of ``finetune_lrs``, with a fresh
    optimizer for ``finetune_steps`` steps.  The merge is θ0 + α(v1 + v2) (task arithmetic) or
    θ0 + α·TIES(v1, v2).  Tasks evaluated: ``original``, ``reverse``, ``negate``.
    """
    store = store or RunStore()
    rows = []
    tasks = {t: load(study.dataset, study.data_root, study.device, study.download, transform=t)
             for t in ("none",) + TASKS}
    base_specs, tuned_specs = study.task_specs()
    sweep_first(base_specs + list(tuned_specs.values()), study, store)
    bases = store.get_or_train_many(base_specs, data=tasks["none"])
    runs = {}
    for t in TASKS:  # the fine-tuning runs of one task share a shape: they train stacked
        specs = [s for (p, lr, task), s in tuned_specs.items() if task == t]
        runs.update(zip([s.id for s in specs], store.get_or_train_many(specs, data=tasks[t])))
    for p in range(study.seeds):
        base = bases[p]
        for lr in study.finetune_lrs:
            tuned = {t: runs[tuned_specs[p, lr, t].id] for t in TASKS}

            def compute(tuned=tuned, base=base, lr=lr):
                vecs = [task_vector(tuned[t].model, base.model) for t in TASKS]
                merged = {"task_arithmetic": {k: vecs[0][k] + vecs[1][k] for k in vecs[0]},
                          "ties": ties_vector(vecs, study.ties_keep)}
                out = []
                for method, vec in merged.items():
                    for alpha in study.alphas:
                        model = add_vectors(base.model, vec, alpha)
                        for t, ds in tasks.items():
                            ev, cal = evaluate(model, ds.x_test, ds.y_test), evaluate(model, *ds.split("cal"))
                            out.append({"method": method, "alpha": alpha, "task": "original" if t == "none" else t,
                                        "task_loss": ev.loss, "task_acc": ev.acc, "task_cal_loss": cal.loss})
                for t in TASKS:  # the fine-tuned models themselves, on their own task
                    ev = evaluate(tuned[t].model, tasks[t].x_test, tasks[t].y_test)
                    cal = evaluate(tuned[t].model, *tasks[t].split("cal"))
                    out.append({"method": "finetuned", "alpha": 1.0, "task": t, "task_loss": ev.loss,
                                "task_acc": ev.acc, "task_cal_loss": cal.loss})
                return {"rows": pd.DataFrame(out)}

            got = store.cached_frames("task_arithmetic", {"base": base.id, "tuned": [tuned[t].id for t in TASKS],
                                                          "alphas": list(study.alphas), "keep": study.ties_keep},
                                      compute)
            rows.append(got["rows"].assign(lr=lr, pair=p))
    return pd.concat(rows, ignore_index=True)


# ---- The noise study's words, and the regime map's ----


def describe_noise(study: Any, spawned: bool = True, sweeps: bool = True) -> str:
    """Return a one-sentence Markdown description of what the noise study trained (for captions): its
    spawn-and-merge pairs (with ``sweeps=False``, those of its η × B grid alone), or with ``spawned=False`` the models
    it trained from scratch (task arithmetic's pretrained models)."""
    m = study.spec(study.grid_cells()[0], 0).model
    floor = study.lr_floor
    sched = ("decay to zero" if floor == 0 or not spawned else "a constant rate" if floor == 1 else
             f"decay to {floor:g} of the peak")
    start = ("from a shared initialisation, with different batch orders" if study.spawn_fraction == 0 else
             f"spawned at {study.spawn_fraction:.0%} of training from their own parents")
    how = (f"spawn-and-merge pairs {start}; {study.grid_pairs} pair(s) per cell of the η × B grid"
           + (f" and {study.seeds} per cell of the component sweeps" if sweeps else "")
           + ("; with augmentation" if study.augment else "") if spawned else
           f"{study.seeds} such model(s), one per seed")
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers and {m.channels} hidden "
            f"units on {DATASET_LABELS[study.dataset]}; {study.steps} SGD steps per run (linear warm-up then "
            f"{sched}), {how}")



def rule_between_words() -> str:
    """Return the sensitivity table's thresholds between the rule and the old convergence rule, in words."""
    between = [f"{t:g}" for t in NOISE_RULE_THRESHOLDS[1:-1]]
    return ", ".join(between[:-1]) + f" and {between[-1]}" if len(between) > 1 else "".join(between)



def moving_rows(table: pd.DataFrame) -> str:
    """Return the claims whose verdict changes along :func:`lmcbook.claims.noise.rule_sensitivity`'s table (as the
    rule's threshold rises), comma-separated ("" if none)."""
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
    set, how its cells read (:data:`~lmcbook.claims.noise.MAP_READINGS`), the best gain of the book's first
    protocol (a decay to zero, children spawned at 50%), the setting it picks and that setting's best gain (a
    setting's best cell: the one whose interval has the highest lower end), what the ranking fixed before the map
    first ran picks, and, at the picked setting's best η, its merge minus children whose learning rate decays to zero
    spawned at the same point of their own run (points; no stand-in for annealing the picked setting's children,
    since those children's parents had already decayed their rate, :func:`lmcbook.claims.noise.claim_n8`) and its
    weaker child's training accuracy, every number computed; "—" where a map has none."""
    return pd.DataFrame.from_dict({label: _map_row(frame) for label, frame in maps.items()},
                                  orient="index").rename_axis("map")



def _map_row(frame: pd.DataFrame) -> dict[str, Any]:
    """Return one regime map's row of :func:`noise_map_summary`."""
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
    """Return a spawned setting's row of :func:`lmcbook.claims.noise.map_settings` on a map's cells (None if the map has
    none of it, or no setting is given)."""
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


def describe_map(study: Any) -> str:
    """Return one sentence on what the regime map trained (for captions)."""
    m = study.noise_study().spec(study.cells()[0], 0).model
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers and {m.channels} hidden "
            f"units on {DATASET_LABELS[study.dataset]}; {study.steps} SGD steps per run at B = {study.batch_size}, "
            f"momentum {study.momentum:g}, weight decay {study.weight_decay:g}; {study.seeds} pair(s) per cell")


def map_table(settings: pd.DataFrame, cells: pd.DataFrame) -> str:
    """Return the regime map's table (:func:`lmcbook.claims.noise.map_settings`): one row per setting, with how many
    of its learning rates gain, its best cell's gain and interval, and what its other cells read."""
    rows = ["| setting | cells that gain (of the paper's size) | best η | best gain, points (95% interval) | the "
            "other cells |", "|---|---|---|---|---|"]
    short = {"basins": "different basins", "harvest": "nothing to harvest", "failed": "failed",
             "undecided": "undecided"}
    for _, s in settings.iterrows():
        own = cells[np.logical_and.reduce([cells[k] == s[k] for k in MAP_KEYS[:-1]])]
        rest = own["reading"].value_counts()
        other = ", ".join(f"{int(rest[k])} {v}" for k, v in short.items() if k in rest) or "none"
        best = "— | — (no kept cell with an interval)"
        if np.isfinite(s["best_lr"]):
            best = (f"{s['best_lr']:g} | {100 * s['best_gain']:.2f} ({100 * s['best_gain_lo']:.2f} to "
                    f"{100 * s['best_gain_hi']:.2f})")
        rows.append(f"| {describe_setting(s.to_dict())} | {s['n_gain']} of {s['n_cells']} ({s['n_paper']}) | {best} | "
                    f"{other} |")
    return "\n".join(rows)



def map_long(pairs: pd.DataFrame, study: Any) -> pd.DataFrame:
    """Return the regime map's pairs (one row per cell and pair) as the noise_regime page's long CSV, a diverged
    run's missing metrics left out."""
    return to_long(pairs.assign(dataset=study.dataset), "noise_regime", MAP_METRICS, MAP_KEYS_CSV, drop_missing=True)



def pick_numbers(cells: pd.DataFrame, settings: pd.DataFrame,
                 pick: dict | None) -> tuple[dict[str, Any], dict[str, str], str]:
    """Return what the noise_regime page says of the setting the map picks (``pick``,
    :func:`lmcbook.claims.noise.pick_setting`), by glue key: its best gain and interval, at which learning rate, over
    how many of its rates; the setting the ranking fixed before the map first ran would pick, where it differs, and
    how it reads; and, where the pick's schedule does not decay to zero and the map has children spawned at the same
    point that decay to zero, the merged model against those children.  Numbers in the first dict, words in the
    second; last, how the merged model compares with those children: above, below or level (within the minimum
    effect), or none without them.
    """
    numbers: dict[str, Any] = {}
    words: dict[str, str] = {}
    first = pick_setting(cells, FIRST_PICK)
    if first is not None and first != pick:
        was = map_settings(cells[cells["method"] == "spawn"], FIRST_PICK).iloc[0]
        words["first_pick_text"] = describe_setting(first)
        numbers.update(first_n_gain=int(was["n_gain"]), first_n_paper=int(was["n_paper"]),
                       first_best=100 * was["best_gain"])
    if pick is None:
        return numbers, words, "none"
    best = settings[(settings["method"] == "spawn") & (settings["augment"] == pick["augment"])
                    & (settings["lr_floor"] == pick["lr_floor"])
                    & (settings["spawn_fraction"] == pick["spawn_fraction"])].iloc[0]
    words["pick_text"] = describe_setting(pick)
    numbers.update(pick_gain=100 * best["best_gain"], pick_lo=100 * best["best_gain_lo"],
                   pick_hi=100 * best["best_gain_hi"], pick_lr=best["best_lr"], pick_n=int(best["n_gain"]),
                   pick_of=int(best["n_cells"]))
    # what the gain is made of: the merged model against children whose learning rate decayed to zero instead
    at = cells[(cells["method"] == "spawn") & (cells["augment"] == pick["augment"]) & (cells["lr"] == best["best_lr"])
               & (cells["spawn_fraction"] == pick["spawn_fraction"])].set_index("lr_floor")
    if pick["lr_floor"] > 0 and 0.0 in at.index:
        merged, decayed = at.loc[pick["lr_floor"], "acc_merged"], at.loc[0.0, "acc_endpoints"]
        numbers.update(merged_acc=merged, children_acc=at.loc[pick["lr_floor"], "acc_endpoints"],
                       decayed_acc=decayed, decayed_merged_acc=at.loc[0.0, "acc_merged"])
        return numbers, words, ("above" if merged - decayed > NOISE_MIN_EFFECT else
                                "below" if decayed - merged > NOISE_MIN_EFFECT else "level")
    return numbers, words, "none"


#: The regime map's CSV: its key columns and metrics.
MAP_KEYS_CSV = ["lr", "batch_size", "momentum", "spawn_fraction", "lr_floor", "augment", "method", "dataset"]



MAP_METRICS = ["gain", "gain_best", "loss_gain", "ensemble_gain", "disagreement", "pair_distance", "acc_a", "acc_b",
               "acc_endpoints", "acc_merged", "acc_ensemble", "loss_a", "loss_b", "loss_merged", "train_acc_a",
               "train_acc_b", "train_acc_min", "train_acc_merged", "train_loss_a", "train_loss_b",
               "train_loss_merged", "noise_scale", "train_steps", "diverged"]


# ---- The noise-scale page's reading of its grid and of the regime map ----


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


def _markdown(text: str) -> Any:
    """Return ``text`` as IPython's Markdown, a glued value that renders as Markdown (imported here: IPython is the
    notebook side's, not a core requirement)."""
    from IPython.display import Markdown

    return Markdown(text)


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
    facts: dict[str, Any] = {"where_setting": _markdown(describe_setting(own))}
    label, map_frame = _map_of(study.dataset, map_frame)
    if map_frame is None or map_frame.empty:
        return choices, facts
    cells = map_cells(map_frame)
    here = cells[(cells["method"] == "spawn") & (cells["augment"] == own["augment"])
                 & np.isclose(cells["lr_floor"], own["lr_floor"]) & np.isclose(cells["spawn_fraction"],
                                                                           own["spawn_fraction"])]
    facts["where_map"] = _markdown(label)
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
                     where_min_effect=100 * NOISE_MIN_EFFECT, where_converged_acc=thresholds.NOISE_CONVERGED_TRAIN_ACC)
    same = (bool(pick["augment"]) == own["augment"] and np.isclose(pick["lr_floor"], own["lr_floor"])
            and np.isclose(pick["spawn_fraction"], own["spawn_fraction"]))
    first = pick_setting(cells, FIRST_PICK)
    facts.update(where_pick=_markdown(describe_setting(pick)),
                 where_first_pick=_markdown(describe_setting(first) if first is not None else "nothing"))
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
            "where_converged": "yes" if vs["weak_train"] >= thresholds.NOISE_CONVERGED_TRAIN_ACC else "no"}


def _reference_map(dataset: str) -> tuple[str, pd.DataFrame | None]:
    """Return the first committed reference regime map of ``dataset`` (its name and frame), or ("", None)."""
    for name in reference.available("noise_regime"):
        if reference.dataset(name) == dataset:
            return name, reference.load(name)[0]
    return "", None


def noise_verdict_table(refs: dict[str, tuple[list[ClaimResult], pd.DataFrame | None]]) -> pd.DataFrame:
    """Return, for a landing page, one row per noise run (by label: its rows, and
    :func:`lmcbook.claims.noise.rule_sensitivity`'s table or None): each claim's mark (✗ on an interval below the
    minimum effect reads "✗ (no effect of the paper's size)"), and the claims whose verdict moves as the rule's
    threshold rises ("none" if no row moves)."""
    out = {}
    for label, (rows, sensitivity) in refs.items():
        marks = {r.id: f"{r.mark} ({ABSENT_WORDS})" if r.state == FAIL and "of the paper's size" in r.measured
                 else f"{r.mark} ({CONSTANT_RATE_WORDS})" if r.state == PASS and r.block == PAPER
                 else r.mark for r in sorted(rows, key=lambda r: id_order(r.id))}
        moving = "" if sensitivity is None else moving_rows(sensitivity)
        out[label] = {**marks, "moves with the rule's threshold": moving or "none"}
    table = pd.DataFrame.from_dict(out, orient="index").fillna("—").rename_axis("run")
    ids = sorted((c for c in table.columns if c != "moves with the rule's threshold"), key=id_order)
    return table[[*ids, "moves with the rule's threshold"]]


#: How :func:`noise_verdict_table` says a ✗ that is an absence (an interval below the minimum effect).
ABSENT_WORDS = "no effect of the paper's size"


#: How :func:`noise_verdict_table` qualifies a ✓ of the paper's rows: their gains are over children whose rate stays
#: up, and the book's N8 asks whether annealing such children gives the same (issue 49).
CONSTANT_RATE_WORDS = "against children trained at a constant rate"


# ---- The noise scale S and the merging gain ----


def effective_noise_scale(lr: float, batch_size: int, momentum: float = 0.0, power: int = 1) -> float:
    """Return S = η / (B (1 − μ)^power): η the schedule's peak learning rate, μ PyTorch's SGD momentum (dampening 0).

    ``power=1`` is the form of the noise paper's main text; ``power=2`` is the
    (1 − μ)² variant that appears in another version of the paper.
    """
    if not lr > 0:
        raise SpecError(f"lr={lr!r} is not allowed: expected a number > 0")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise SpecError(f"batch_size={batch_size!r} is not allowed: expected an integer >= 1")
    if not 0 <= momentum < 1:
        raise SpecError(f"momentum={momentum!r} is not allowed: expected a number in [0, 1)")
    if power not in (1, 2):
        raise SpecError(f"power={power!r} is not allowed: expected 1 or 2")
    return lr / (batch_size * (1 - momentum) ** power)


def merging_gain(summary: dict) -> dict[str, float]:
    """Return the merging gains of a pair summary (from :func:`lmcbook.merge.pair_summary`).

    - ``gain``: acc(θ(½)) − mean(acc_a, acc_b);
    - ``gain_best``: acc(θ(½)) − max(acc_a, acc_b);
    - ``loss_gain``: mean(loss_a, loss_b) − loss(θ(½)) (positive when merging lowers the loss).
    """
    return {"gain": summary["acc_merged"] - summary["acc_endpoints"],
            "gain_best": summary["acc_merged"] - max(summary["acc_a"], summary["acc_b"]),
            "loss_gain": summary["loss_endpoints"] - summary["loss_merged"]}
