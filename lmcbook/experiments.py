"""From a study to tidy frames: get or train the runs through the store, then measure once and cache.

Notebooks call these functions; they never train or loop over seeds themselves.
Everything measured on a pair (its interpolation curve, its summary, all its
probes) is cached in the store's ``derived/`` area keyed by the runs' ids and
the library's source hash, so the first notebook that needs a measurement
computes it and every later notebook reads it.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import pandas as pd
import torch

from .data import Dataset, load
from .merge import (
    add_vectors,
    interpolate,
    permutation_spec,
    permute,
    random_permutation,
    repair,
    task_vector,
    ties_vector,
    weight_matching,
)
from .metrics import disagreement, ensemble_gain, evaluate, logits, pair_summary, relative_distance
from .noise import effective_noise_scale, merging_gain
from .probes import PairActivations, rank_profile
from .profiles import TASKS, Cell, NoiseRegimeStudy, NoiseStudy, Pair, Recipe
from .regime import regime_measures
from .schema import concat, last_hidden, select, to_long, to_long_frame
from .specs import RunSpec
from .store import RunStore
from .sweep import run_all
from .train import DivergedError, TrainedRun, init_model

log = logging.getLogger("lmcbook.experiments")

#: λ values at which the probes are evaluated (LEWC, additivity, orthogonality).
PROBE_LAMS = (0.25, 0.5)
PROBES = ("lewc", "weak_additivity", "reciprocal_orthogonality", "neuron_moments", "scale_law", "rank")


@dataclass
class PairFrames:
    """Frames measured on every pair of a study, with key columns (width, hidden_units, depth, pair, ...)."""

    curves: pd.DataFrame
    summary: pd.DataFrame


def study_data(study: Recipe | NoiseStudy) -> Dataset:
    """Return the data set of a study (any study with a dataset, data_root, download and device) on its device."""
    return load(study.dataset, study.data_root, study.device, download=study.download)


def trained_pairs(study: Recipe, store: RunStore | None = None,
                  data: Dataset | None = None) -> list[tuple[Pair, TrainedRun, TrainedRun]]:
    """Return (pair, run a, run b) for every pair of the study, trained at most once through the store.

    Missing runs of one shape (the seeds of one width) train together in one stacked step.
    """
    store = store or RunStore()
    data = data or study_data(study)
    pairs = study.pairs()
    specs = [s for p in pairs for s in (p.a, p.b)]
    sweep_first(specs, study, store)
    runs = store.get_or_train_many(specs, data=data)
    return [(p, runs[2 * i], runs[2 * i + 1]) for i, p in enumerate(pairs)]


def sweep_first(specs: list[RunSpec], study, store: RunStore) -> None:
    """Train the missing ``specs`` on the study's Dask scheduler, if it names one; raise if any failed."""
    scheduler = getattr(study, "scheduler", None)
    missing = [s for s in specs if not store.has(s)]
    if scheduler is None or not missing:
        return
    failed = [r for r in run_all(missing, scheduler, store.root, device=study.device) if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed on {scheduler}: " +
                           "; ".join(f"{r.id[:12]}: {r.error}" for r in failed[:3]))


def _keys(pair: Pair) -> dict:
    return {"width": pair.width, "hidden_units": pair.hidden_units, "depth": pair.depth,
            "weight_decay": pair.weight_decay, "epochs": pair.epochs, "init_scale": pair.init_scale,
            "pair": pair.index}


#: What :func:`trained_pairs` returns: (pair, run a, run b) for every pair of a study.
Runs = list[tuple[Pair, TrainedRun, TrainedRun]]


def regime_frame(study: Recipe, store: RunStore | None = None) -> pd.DataFrame:
    """Return every model's training regime (:func:`lmcbook.regime.regime_measures`) with the pair's keys.

    One row per (model, metric, layer); ``seed`` is the model's own seed (2p for a, 2p+1 for b).
    Cached per run id, so only the first page that asks loads the runs.
    """
    store = store or RunStore()
    pairs = study.pairs()
    if any(not store.has(s) for p in pairs for s in (p.a, p.b)):
        trained_pairs(study, store)
    data = functools.cache(lambda: study_data(study))  # loaded only if some run's regime is not cached
    frames = []
    for pair in pairs:
        for spec in (pair.a, pair.b):
            def compute(spec=spec):
                return {"regime": regime_measures(store.load(spec, data().device), data())}

            got = store.cached_frames("regime", {"run": spec.id, "dataset": study.dataset}, compute)
            frames.append(got["regime"].assign(**_keys(pair), seed=spec.train.seed))
    return pd.concat(frames, ignore_index=True)


def pair_frames(study: Recipe, store: RunStore | None = None, runs: Runs | None = None) -> PairFrames:
    """Return the interpolation curve and summary of every pair of the study (cached per pair); ``runs`` are the
    study's :func:`trained_pairs`, if the caller already has them."""
    store = store or RunStore()
    data = study_data(study)
    curves, rows = [], []
    for pair, ra, rb in runs if runs is not None else trained_pairs(study, store, data):
        got = cached_pair_summary(store, ra, rb, data, study.lams)
        keys = _keys(pair)
        curves.append(got["curve"].assign(**keys))
        rows.append({**keys, **got["summary"].iloc[0].to_dict(), "run_a": ra.spec.short_id,
                     "run_b": rb.spec.short_id})
    return PairFrames(pd.concat(curves, ignore_index=True), pd.DataFrame(rows))


@dataclass
class Sweep:
    """What a page reads of a study's pairs: its frames by name and every model's training regime.

    ``sweep["summary"]`` is a frame; ``sweep.means`` averages the pair summaries per width.
    """

    frames: dict[str, pd.DataFrame]
    regime: pd.DataFrame

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.frames[name]

    @property
    def means(self) -> pd.DataFrame:
        """The pair summaries' means per width (``hidden_units``)."""
        return self.frames["summary"].groupby("hidden_units").mean(numeric_only=True)


def pair_sweep(study: Recipe, store: RunStore | None = None) -> Sweep:
    """Return every pair's interpolation ``curves`` and ``summary`` (:func:`pair_frames`) with every model's regime
    (:func:`regime_frame`): what a width page reads."""
    store = store or RunStore()
    res = pair_frames(study, store)
    return Sweep({"curves": res.curves, "summary": res.summary}, regime_frame(study, store))


def probe_sweep(study: Recipe, store: RunStore | None = None, **options: Any) -> Sweep:
    """Return every probe's frame (:func:`probe_frames`, with its ``options``) and every model's regime: what a probe
    page reads."""
    store = store or RunStore()
    return Sweep(probe_frames(study, store, **options), regime_frame(study, store))


def cached_pair_summary(store: RunStore, ra: TrainedRun, rb: TrainedRun, data: Dataset,
                        lams) -> dict[str, pd.DataFrame]:
    """Return {"curve", "summary"} of :func:`lmcbook.metrics.pair_summary` for two stored runs (cached)."""
    def compute():
        curve, summ = pair_summary(ra.model, rb.model, data, lams)
        return {"curve": curve, "summary": pd.DataFrame([summ])}

    return store.cached_frames("pair_summary", {"a": ra.id, "b": rb.id, "lams": list(lams),
                                                "dataset": data.name}, compute)


def probe_points_of(model) -> str:
    """Return where the activation probes read a model: ``"blocks"`` (residual-block outputs) for ResNet20, whose
    residual stream the layer-wise LEWC theorem does not cover, else ``"layers"``."""
    return "blocks" if hasattr(model, "block_points") else "layers"


def _all_probes(a, b, data: Dataset, lams, only: tuple[str, ...] = PROBES) -> dict[str, pd.DataFrame]:
    # activations in float32 (their errors are far below what the probes resolve); spectra in float64.  No
    # ScaleWarning: the book's pages say where LEWC's λ^l scale applies (methods: "Beyond bias-free MLPs").
    points = probe_points_of(a)
    acts = PairActivations(a, b, data.x_test, train_x=data.x_train, dtype=torch.float32, points=points, warn=False)
    layers = acts if points == "layers" else PairActivations(a, b, data.x_test, train_x=data.x_train,
                                                             dtype=torch.float32, warn=False)  # applies weights
    probes = {"lewc": lambda: acts.lewc(lams), "weak_additivity": lambda: acts.weak_additivity(lams),
              "reciprocal_orthogonality": lambda: layers.reciprocal_orthogonality(lams),
              "neuron_moments": acts.neuron_moments, "scale_law": acts.scale_law,
              "rank": lambda: pd.concat([rank_profile(m).assign(model=name) for name, m in (("a", a), ("b", b))],
                                        ignore_index=True)}
    return {name: probes[name]() for name in only}


#: What a weight-matched pair is probed for: the permutation changes neither model's function nor its spectra,
#: so only the probes that compare the two networks are recomputed.
MATCHED_PROBES = ("lewc", "reciprocal_orthogonality")


def probe_frames(study: Recipe, store: RunStore | None = None, lams=PROBE_LAMS, baseline: bool = True,
                 matched: bool = False, runs: Runs | None = None) -> dict[str, pd.DataFrame]:
    """Return every probe's frame over the study's pairs, trained and (if ``baseline``) untrained.

    With ``matched``, the pairs are also probed after weight matching b onto a
    (``method="weight_matched"``; see :func:`matched_permutation`).

    One set of hooked forward passes per pair serves all probes (see
    :class:`lmcbook.probes.PairActivations`).  The untrained baseline of a pair is
    its two initialisations: the same seeds, before training.  It is cached by its
    initialisation alone, so studies that differ only in training (another weight
    decay, say) share it.  Probes read the test split; BatchNorm statistics are
    recomputed on the training split.  ``runs``: the study's :func:`trained_pairs`, if the caller has them.
    """
    store = store or RunStore()
    data = study_data(study)
    out: dict[str, list[pd.DataFrame]] = {name: [] for name in PROBES}
    for pair, ra, rb in runs if runs is not None else trained_pairs(study, store, data):
        kinds = [("trained", {"a": ra.id, "b": rb.id}, lambda ra=ra, rb=rb: (ra.model, rb.model))]
        if matched:
            kinds.append(("weight_matched", {"a": ra.id, "b": rb.id, "iterations": _iterations(study)},
                          lambda ra=ra, rb=rb: (ra.model, matched_model(ra, rb, store, _iterations(study)))))
        if baseline:
            init = {m: {"model": asdict(s.model), "seed": s.train.seed} for m, s in (("a", pair.a), ("b", pair.b))}
            kinds.append(("untrained", init, lambda pair=pair: (init_model(pair.a, data), init_model(pair.b, data))))
        for method, ident, models in kinds:
            only = MATCHED_PROBES if method == "weight_matched" else PROBES

            def compute(models=models, only=only):
                return _all_probes(*models(), data, lams, only)

            got = store.cached_frames("probes", {**ident, "method": method, "lams": list(lams),
                                                 "dataset": study.dataset}, compute)
            keys = _keys(pair)
            for name in only:
                frame = got[name].assign(**keys, method=method)
                if name == "rank":  # a per-model measure: seed is the model's own seed (2p for a, 2p+1 for b)
                    frame["seed"] = 2 * pair.index + (frame["model"] == "b").astype(int)
                out[name].append(frame)
    return {name: pd.concat(frames, ignore_index=True) for name, frames in out.items()}


# -- controls: permutations, weight matching, REPAIR ------------------------------------
def _iterations(study) -> int:
    return getattr(study, "match_iterations", 100)


def _matching_frames(a, b, iterations: int) -> dict[str, pd.DataFrame]:
    """Return weight matching's permutations of b onto a and its cost, as the frames the cache holds."""
    t0 = time.perf_counter()
    res = weight_matching(a, b, max_iter=iterations)
    seconds = time.perf_counter() - t0
    perms = pd.concat([pd.DataFrame({"perm": p, "index": range(len(v)), "value": v.numpy()})
                       for p, v in res.perms.items()], ignore_index=True)
    info = pd.DataFrame([{"match_seconds": seconds, "match_iterations": res.iterations,
                          "match_objective": res.history[-1] if res.history else float("nan")}])
    return {"perms": perms, "info": info}


def _matching_in_worker(a, b, iterations: int) -> dict[str, pd.DataFrame]:
    torch.set_num_threads(1)
    return _matching_frames(a, b, iterations)


def prefetch_matchings(pairs: list[tuple[TrainedRun, TrainedRun]], store: RunStore, iterations: int = 100,
                       workers: int | None = None) -> int:
    """Compute and cache weight matching for every (a, b) not cached yet, ``workers`` processes at a time (default:
    the CPU count, at most 4), and return how many were computed.

    The assignment solver is single-threaded, so matchings run side by side; each result is exactly what
    :func:`matched_permutation` would compute (its ``match_seconds`` are the worker's, on one thread).
    """
    key = lambda ra, rb: {"a": ra.id, "b": rb.id, "iterations": iterations}  # noqa: E731
    todo = list({(ra.id, rb.id): (ra, rb) for ra, rb in pairs if not store.has_derived("weight_matching",
                                                                                        key(ra, rb))}.values())
    workers = min(workers or min(os.cpu_count() or 1, 4), len(todo))
    if workers < 2:
        return 0
    ctx = multiprocessing.get_context("spawn")  # no fork after torch's threads have started
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        futures = [(ra, rb, pool.submit(_matching_in_worker, ra.model.cpu(), rb.model.cpu(), iterations))
                   for ra, rb in todo]
        for ra, rb, fut in futures:
            frames = fut.result()
            store.cached_frames("weight_matching", key(ra, rb), lambda frames=frames: frames)
    return len(todo)


def matched_permutation(ra: TrainedRun, rb: TrainedRun, store: RunStore | None = None,
                        iterations: int = 100) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Return weight matching's permutations of b onto a (cached) and its cost: seconds, sweeps, objective.

    The seconds are those of the run that computed the permutations; a cached
    result reports the time measured when it was computed.
    """
    store = store or RunStore()
    got = store.cached_frames("weight_matching", {"a": ra.id, "b": rb.id, "iterations": iterations},
                              lambda: _matching_frames(ra.model, rb.model, iterations))
    perms = {p: torch.tensor(g.sort_values("index")["value"].to_numpy(), dtype=torch.long)
             for p, g in got["perms"].groupby("perm", sort=False)}
    return perms, {k: float(v) for k, v in got["info"].iloc[0].items()}


def matched_model(ra: TrainedRun, rb: TrainedRun, store: RunStore | None = None, iterations: int = 100):
    """Return model b permuted by weight matching onto model a (the same function as b)."""
    perms, _ = matched_permutation(ra, rb, store, iterations)
    return permute(rb.model, perms)


def _random_b(rb: TrainedRun, pair: Pair, draw: int):
    g = torch.Generator().manual_seed(10_000 * pair.index + 100 * draw + 7)
    return permute(rb.model, random_permutation(permutation_spec(rb.model), g))


def permutation_frames(study, store: RunStore | None = None) -> pd.DataFrame:
    """Return per pair: the merge of a with b, with ``draws`` random function-preserving permutations of b
    (``index`` = draw), and with weight-matched b; each as a pair summary at λ ∈ {0, ½, 1}."""
    store = store or RunStore()
    data = study_data(study)
    rows = []
    for pair, ra, rb in trained_pairs(study, store, data):
        def compute(pair=pair, ra=ra, rb=rb):
            out = []
            variants = [("none", 0, rb.model), ("weight_matching", 0, matched_model(ra, rb, store, _iterations(study)))]
            variants += [("random_permutation", d, _random_b(rb, pair, d)) for d in range(study.draws)]
            for method, draw, b in variants:
                _, summ = pair_summary(ra.model, b, data, (0.0, 0.5, 1.0))
                out.append({"method": method, "index": draw, **summ})
            return {"summary": pd.DataFrame(out)}

        got = store.cached_frames("permutation_draws", {"a": ra.id, "b": rb.id, "draws": study.draws,
                                                        "iterations": _iterations(study)}, compute)
        rows.append(got["summary"].assign(**_keys(pair)))
    return pd.concat(rows, ignore_index=True)


def method_frames(study, store: RunStore | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (curves, summaries) of four ways to merge each pair along the full λ grid:
    ``none`` (plain averaging), ``weight_matching``, ``random_permutation`` (draw 0) and ``repair``
    (plain averaging, then REPAIR on the training inputs at every λ).  Summaries carry the
    weight-matching cost (``match_seconds``, ``match_iterations``)."""
    store = store or RunStore()
    data = study_data(study)
    curves, rows = [], []
    for pair, ra, rb in trained_pairs(study, store, data):
        def compute(pair=pair, ra=ra, rb=rb):
            a, b = ra.model, rb.model
            fix = lambda m, lam: repair(m, a, b, data.x_train, lam)  # noqa: E731
            variants = {"none": (b, None), "weight_matching": (matched_model(ra, rb, store, _iterations(study)), None),
                        "random_permutation": (_random_b(rb, pair, 0), None), "repair": (b, fix)}
            cs, ss = [], []
            for method, (bb, transform) in variants.items():
                curve, summ = pair_summary(a, bb, data, study.lams, transform)
                cs.append(curve.assign(method=method))
                ss.append({"method": method, **summ})
            return {"curves": pd.concat(cs, ignore_index=True), "summary": pd.DataFrame(ss)}

        got = store.cached_frames("merge_methods", {"a": ra.id, "b": rb.id, "lams": list(study.lams),
                                                    "iterations": _iterations(study)}, compute)
        _, info = matched_permutation(ra, rb, store, _iterations(study))
        keys = _keys(pair)
        curves.append(got["curves"].assign(**keys))
        rows.append(got["summary"].assign(**keys, **info))
    return pd.concat(curves, ignore_index=True), pd.concat(rows, ignore_index=True)


def matched_summaries(study, store: RunStore | None = None, runs: Runs | None = None,
                      lams=(0.0, 0.5, 1.0)) -> pd.DataFrame:
    """Return per pair the summary (:func:`lmcbook.metrics.pair_summary` at ``lams``) of a merged with b after weight
    matching b onto a, with the pair's keys (cached per pair)."""
    store = store or RunStore()
    data = study_data(study)
    rows = []
    for pair, ra, rb in runs if runs is not None else trained_pairs(study, store, data):
        def compute(ra=ra, rb=rb):
            _, summ = pair_summary(ra.model, matched_model(ra, rb, store, _iterations(study)), data, lams)
            return {"summary": pd.DataFrame([summ])}

        got = store.cached_frames("matched_summary", {"a": ra.id, "b": rb.id, "lams": list(lams),
                                                      "iterations": _iterations(study), "dataset": data.name},
                                  compute)
        rows.append({**_keys(pair), **got["summary"].iloc[0].to_dict()})
    return pd.DataFrame(rows)


#: What the mechanism page keeps of each probe: LEWC and LLFC at the last hidden layer, and the orthogonality ratio.
MECHANISM_SUMMARY = ("acc_a", "acc_b", "acc_endpoints", "acc_merged", "acc_ensemble", "loss_barrier_mid",
                     "loss_barrier_cal_mid", "acc_barrier")


def mechanism_frames(study, store: RunStore | None = None) -> dict[str, pd.DataFrame]:
    """Return the mechanism study's frames over every cell, keyed by (epochs, weight_decay, init_scale) and width:
    ``summary`` (plain merges, ``method="none"``, and weight-matched ones, ``"weight_matching"``), the probes
    ``lewc``, ``reciprocal_orthogonality`` and ``rank`` (trained, untrained and, for LEWC, weight-matched pairs) and
    ``regime`` (per model: D, shrinkage, training accuracy, distance from initialisation, ranks of W − W₀).

    Each cell's runs are loaded once; every measurement is cached, and the cells that the width and control pages
    share (the same runs) reuse their caches.
    """
    store = store or RunStore()
    data = study_data(study)
    missing = [s for s in dict.fromkeys(study.specs()) if not store.has(s)]
    sweep_first(missing, study, store)
    if missing:  # one call, so that runs of one shape in different cells train in one stack
        store.get_or_train_many(missing, data=data)
    out: dict[str, list[pd.DataFrame]] = {k: [] for k in ("summary", "lewc", "reciprocal_orthogonality", "rank",
                                                          "regime")}
    cells = [(cell, trained_pairs(cell, store, data)) for cell in study.cells()]
    # weight matching's solver is single-threaded: the widest pairs are matched side by side first
    widest = [(ra, rb) for _, runs in cells for pair, ra, rb in runs if pair.hidden_units > 256]
    prefetch_matchings(widest, store, study.match_iterations)
    for cell, runs in cells:
        plain = pair_frames(cell, store, runs).summary.assign(method="none")
        matched = matched_summaries(cell, store, runs).assign(method="weight_matching")
        out["summary"].append(pd.concat([plain, matched], ignore_index=True))
        # the untrained baseline is read only for the standard initialisation (shared with the width pages)
        probes = probe_frames(cell, store, matched=True, runs=runs, baseline=cell.init_scale == 1.0)
        for name in ("lewc", "reciprocal_orthogonality", "rank"):
            out[name].append(probes[name])
        out["regime"].append(regime_frame(cell, store))
    return {k: pd.concat(v, ignore_index=True).assign(dataset=study.dataset) for k, v in out.items()}


MECHANISM_KEYS = ("width", "hidden_units", "depth", "weight_decay", "epochs", "init_scale", "dataset")


def mechanism_long(frames: dict[str, pd.DataFrame], notebook: str = "mechanism") -> pd.DataFrame:
    """Return :func:`mechanism_frames`' output in the long format of the page's CSV: the merge summaries, LEWC and
    LLFC at λ ∈ {¼, ½} at the last hidden layer, the orthogonality ratio at λ = ½, the rank of every weight
    matrix, and every model's regime (D, shrinkage, training accuracy, distance from initialisation, W − W₀)."""
    keys = list(MECHANISM_KEYS)
    summary = frames["summary"]
    lewc = frames["lewc"]
    lewc = lewc[lewc["metric"].isin(["lewc_rel_err", "llfc_rel_err", "lewc_cos", "llfc_cos"])
                & (lewc["layer"] == last_hidden(lewc))]
    rank = frames["rank"]
    rank = rank[rank["metric"].isin(["rel_effective_rank", "stable_rank", "rel_stable_rank", "effective_rank"])]
    return concat([
        to_long(summary, notebook, [m for m in MECHANISM_SUMMARY if m in summary.columns], keys + ["method"]),
        to_long_frame(lewc, notebook, keys + ["layer", "lam", "method"]),
        to_long_frame(select(frames["reciprocal_orthogonality"], "orth_ratio", lam=0.5), notebook,
                      keys + ["layer", "lam", "method"]),
        to_long_frame(rank, notebook, keys + ["layer", "method"]),
        to_long_frame(frames["regime"], notebook, keys + ["layer"]),
    ])


# -- the noise study: spawn-and-merge ------------------------------------------------
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
    does the old convergence rule (:data:`lmcbook.claims.NOISE_CONVERGED_TRAIN_ACC`, on every pair's weaker child)
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
                row = {**asdict(cell), "pair": p, "train_steps": steps,
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


def regime_map_frame(study: NoiseRegimeStudy, store: RunStore | None = None) -> pd.DataFrame:
    """Return the regime map: one row per (cell, pair) of :meth:`lmcbook.profiles.NoiseRegimeStudy.cells`
    (:func:`noise_frame`'s columns), with ``method`` "spawn" or "independent"."""
    frame = noise_frame(study.noise_study(), study.cells(), store)
    return frame.assign(method=frame["independent"].map({True: "independent", False: "spawn"}))


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
