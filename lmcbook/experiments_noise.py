"""The noise study's frames (spawn-and-merge): merging gains over a grid of cells, the regime map, the
learning-rate pairs and task arithmetic, each pair measured once and cached in the store."""

from __future__ import annotations

import logging
from dataclasses import asdict, replace

import pandas as pd
import torch

from .data import Dataset, load
from .experiments_runs import cached_pair_summary, study_data, sweep_first
from .merge import add_vectors, interpolate, task_vector, ties_vector
from .metrics import disagreement, ensemble_gain, evaluate, logits, relative_distance
from .noise import effective_noise_scale, merging_gain
from .profiles import TASKS, Cell, NoiseRegimeStudy, NoiseStudy
from .specs import RunSpec
from .store import RunStore
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
    does the old convergence rule (``lmcbook.claims.NOISE_CONVERGED_TRAIN_ACC``, on every pair's weaker child)
    train a cell that misses it again at the next of ``study.lengths()`` (doubled steps), all its pairs together,
    until it meets the rule or the lengths run out; a cell's rows are then those of the last length it trained."""
    from .claims import NOISE_CONVERGED_TRAIN_ACC

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
                and min(r["train_acc_min"] for r in out[c]) < NOISE_CONVERGED_TRAIN_ACC]
    return pd.DataFrame([r for cell in dict.fromkeys(cells) for r in out[cell]])


def _cell_columns(cell: Cell) -> dict:
    """Return a cell's settings as a frame row's columns; ``anneal`` only where set (the frames made before it
    existed keep their columns)."""
    row = asdict(cell)
    if not row["anneal"]:
        del row["anneal"]
    return row


def regime_map_frame(study: NoiseRegimeStudy, store: RunStore | None = None) -> pd.DataFrame:
    """Return the regime map: one row per (cell, pair) of :meth:`lmcbook.profiles.NoiseRegimeStudy.cells`
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
    from .claims import NOISE_CONVERGED_TRAIN_ACC

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
        if all(r["train_acc_min"] >= NOISE_CONVERGED_TRAIN_ACC for r in rows if not r["diverged"]):
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
