"""From a study to tidy frames: get or train the runs through the store, then measure once and cache.

Notebooks call these functions; they never train or loop over seeds themselves.
Everything measured on a pair (its interpolation curve, its summary, all its
probes) is cached in the store's ``derived/`` area keyed by the runs' ids and
the library's source hash, so the first notebook that needs a measurement
computes it and every later notebook reads it.

The width study, its controls and the mechanism study are here; the noise study's frames are in
:mod:`lmcbook.experiments_noise`, and what every family shares (a study's data set, its trained pairs, the cached
pair summary) in :mod:`lmcbook.store`.  The last section is what the width page reads of the mechanism study's
small-initialisation arm.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd
import torch

from . import schema
from .claims.mechanism import claim_m4
from .claims.thresholds import CONVERGED_TRAIN_ACC
from .claims.verdicts import FAIL, PASS, ClaimResult
from .data import DATASET_SHORT, Dataset
from .merge import pair_summary, permutation_spec, permute, random_permutation, repair, weight_matching
from .probes import PairActivations, rank_profile, regime_measures
from .schema import concat, join_and, last_hidden, select, to_long, to_long_frame
from .store import Runs, RunStore, cached_pair_summary, study_data, sweep_first, trained_pairs
from .studies import Pair, Recipe
from .train import TrainedRun, init_model

log = logging.getLogger("lmcbook.experiments")

#: λ values at which the probes are evaluated (LEWC, additivity, orthogonality).
PROBE_LAMS = (0.25, 0.5)
PROBES = ("lewc", "weak_additivity", "reciprocal_orthogonality", "neuron_moments", "scale_law", "rank")


@dataclass
class PairFrames:
    """Frames measured on every pair of a study, with key columns (width, hidden_units, depth, pair, ...)."""

    curves: pd.DataFrame
    summary: pd.DataFrame


def _keys(pair: Pair) -> dict:
    return {"width": pair.width, "hidden_units": pair.hidden_units, "depth": pair.depth,
            "weight_decay": pair.weight_decay, "epochs": pair.epochs, "init_scale": pair.init_scale,
            "pair": pair.index}



def regime_frame(study: Recipe, store: RunStore | None = None) -> pd.DataFrame:
    """Return every model's training regime (:func:`lmcbook.probes.regime_measures`) with the pair's keys.

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
    study's :func:`~lmcbook.store.trained_pairs`, if the caller already has them."""
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
    recomputed on the training split.  ``runs``: the study's :func:`~lmcbook.store.trained_pairs`, if the caller
    has them.
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
    """Return per pair the summary (:func:`lmcbook.merge.pair_summary` at ``lams``) of a merged with b after weight
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


__all__ = ["PROBE_LAMS", "PROBES", "PairFrames", "regime_frame", "pair_frames", "Sweep", "pair_sweep", "probe_sweep",
           "probe_points_of", "MATCHED_PROBES", "probe_frames", "prefetch_matchings", "matched_permutation",
           "matched_model", "permutation_frames", "method_frames", "matched_summaries", "MECHANISM_SUMMARY",
           "mechanism_frames", "MECHANISM_KEYS", "mechanism_long", "small_init_widths", "small_init_facts",
           "m4_elsewhere"]


# ---- What the width page reads of the mechanism study's small-initialisation arm ----


def small_init_widths(mech: pd.DataFrame) -> pd.DataFrame:
    """Return, per width of the mechanism frame's small-initialisation arm (its smallest ``init_scale``), the plain
    merged accuracy's seed mean, the endpoints' lowest training accuracy, and ``converged``: whether every endpoint
    there meets the convergence rule (:data:`~lmcbook.claims.thresholds.CONVERGED_TRAIN_ACC`), as M4 requires."""
    scale = float(mech["init_scale"].min())
    arm = mech[mech["init_scale"] == scale]
    merged = schema.select(arm, "acc_merged", method="none").groupby("hidden_units")["value"].mean()
    train = schema.select(arm, "train_acc").groupby("hidden_units")["value"].min()
    out = pd.DataFrame({"merged": merged, "train_min": train.reindex(merged.index)})
    out["converged"] = out["train_min"] >= CONVERGED_TRAIN_ACC
    out.attrs["init_scale"] = scale
    return out



def small_init_facts(mech: pd.DataFrame, m4: ClaimResult) -> tuple[str, dict[str, Any]]:
    """Return which narrow end the width_accuracy page's small-initialisation paragraph has (``all``: every width's
    endpoints meet the convergence rule; ``trained``: some narrower width's do, not every one; ``untrained``: no width
    below the widest's do; ``single``: the arm has one width) and the numbers it quotes: the widest width's merged
    accuracy, small and standard, the narrowest converged width's, the widths whose endpoints did not all converge, and
    of those below it the one that came closest (its weakest endpoint's training accuracy)."""
    from IPython.display import Markdown  # the book extra: only a page calls this

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
             "small_converged_rule": CONVERGED_TRAIN_ACC,
             "small_untrained_widths": Markdown(join_and([str(int(u)) for u in failed]) if len(failed) else "none"),
             "small_n_closest": int(closest), "small_closest_min": float(widths.loc[closest, "train_min"]),
             "small_data": Markdown(DATASET_SHORT.get(str(mech["dataset"].iloc[0]), "this data set"))}
    end = ("single" if len(widths) == 1 else "all" if widths["converged"].all()
           else "trained" if narrow < wide else "untrained")
    return end, facts



def m4_elsewhere(references: dict[str, tuple[pd.DataFrame, dict[str, Any]]], here: str) -> tuple[str, dict[str, Any]]:
    """Return M4 on the first committed mechanism reference run of another data set than ``here`` (the width_accuracy
    page's) that decides it (``refuted``: ✗, a small initialisation leaves wide networks merging; ``agrees``: ✓;
    ``none``: no such run) and the words its sentence quotes: the data set, the reference's name, M4's mark and measured
    text, and (``m4_other_rest``) what every other reference of that data set reads for M4, so that a verdict from one
    width or precision never stands for the data set alone."""
    found = [(name, str(frame["dataset"].iloc[0]), claim_m4(frame)) for name, (frame, _) in references.items()]
    for name, there, m4 in found:
        if there != here and m4.state in (PASS, FAIL):
            rest = [f"`{n}` reads it {r.mark} ({r.measured_shown})" for n, d, r in found if d == there and n != name]
            return ("refuted" if m4.state == FAIL else "agrees",
                    {"m4_other_data": DATASET_SHORT.get(there, there), "m4_other_source": f"`{name}`",
                     "m4_other_mark": m4.mark, "m4_other_measured": m4.measured_shown,
                     "m4_other_rest": ("On the same data set " + "; ".join(rest) + "." if rest else
                                       "No other committed reference of that data set reads M4.")})
    return "none", {}
