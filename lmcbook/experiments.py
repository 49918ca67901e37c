"""From a study to tidy frames: get or train the runs through the store, then measure once and cache.

Notebooks call these functions; they never train or loop over seeds themselves.
Everything measured on a pair (its interpolation curve, its summary, all its
probes) is cached in the store's ``derived/`` area keyed by the runs' ids and
the library's source hash, so the first notebook that needs a measurement
computes it and every later notebook reads it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch

from .data import Dataset, load
from .metrics import pair_summary
from .probes import PairActivations, rank_profile
from .profiles import Pair, Recipe
from .store import RunStore
from .train import TrainedRun, init_model

log = logging.getLogger("lmcbook.experiments")

#: λ values at which the probes are evaluated (LEWC, additivity, orthogonality).
PROBE_LAMS = (0.25, 0.5)
PROBES = ("lewc", "weak_additivity", "reciprocal_orthogonality", "neuron_moments", "scale_law", "rank")


@dataclass
class PairFrames:
    """Frames measured on every pair of a study, with key columns (width, hidden_units, depth, seed, ...)."""

    curves: pd.DataFrame
    summary: pd.DataFrame
    run_ids: list[str] = field(default_factory=list)


def study_data(study: Recipe) -> Dataset:
    """Return the data set of a study on its device."""
    return load(study.dataset, study.data_root, study.device, download=study.download)


def trained_pairs(study: Recipe, store: RunStore | None = None,
                  data: Dataset | None = None) -> list[tuple[Pair, TrainedRun, TrainedRun]]:
    """Return (pair, run a, run b) for every pair of the study, trained at most once through the store."""
    store = store or RunStore()
    data = data or study_data(study)
    return [(p, store.get_or_train(p.a, data=data), store.get_or_train(p.b, data=data)) for p in study.pairs()]


def _keys(pair: Pair) -> dict:
    return {"width": pair.width, "hidden_units": pair.hidden_units, "depth": pair.depth, "seed": pair.seed}


def pair_frames(study: Recipe, store: RunStore | None = None) -> PairFrames:
    """Return the interpolation curve and summary of every pair of the study (cached per pair)."""
    store = store or RunStore()
    data = study_data(study)
    curves, rows, ids = [], [], []
    for pair, ra, rb in trained_pairs(study, store, data):
        def compute(ra=ra, rb=rb):
            curve, summ = pair_summary(ra.model, rb.model, data, study.lams)
            return {"curve": curve, "summary": pd.DataFrame([summ])}

        got = store.cached_frames("pair_summary", {"a": ra.id, "b": rb.id, "lams": list(study.lams),
                                                   "dataset": study.dataset}, compute)
        keys = _keys(pair)
        curves.append(got["curve"].assign(**keys))
        rows.append({**keys, **got["summary"].iloc[0].to_dict(), "run_a": ra.spec.short_id,
                     "run_b": rb.spec.short_id})
        ids += [ra.id, rb.id]
    return PairFrames(pd.concat(curves, ignore_index=True), pd.DataFrame(rows), ids)


def width_frames(study: Recipe, store: RunStore | None = None) -> PairFrames:
    """Return the interpolation curves and summaries of the width sweep (see :func:`pair_frames`)."""
    return pair_frames(study, store)


def _all_probes(a, b, data: Dataset, lams) -> dict[str, pd.DataFrame]:
    # activations in float32 (their errors are far below what the probes resolve); spectra in float64
    acts = PairActivations(a, b, data.x_test, train_x=data.x_train, dtype=torch.float32)
    rank = pd.concat([rank_profile(m).assign(model=name) for name, m in (("a", a), ("b", b))], ignore_index=True)
    return {"lewc": acts.lewc(lams), "weak_additivity": acts.weak_additivity(lams),
            "reciprocal_orthogonality": acts.reciprocal_orthogonality(lams),
            "neuron_moments": acts.neuron_moments(), "scale_law": acts.scale_law(), "rank": rank}


def probe_frames(study: Recipe, store: RunStore | None = None, lams=PROBE_LAMS,
                 baseline: bool = True) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Return every probe's frame over the study's pairs, trained and (if ``baseline``) untrained, and the run ids.

    One set of hooked forward passes per pair serves all probes (see
    :class:`lmcbook.probes.PairActivations`).  The untrained baseline of a pair is
    its two initialisations: the same seeds, before training.  It is cached by its
    initialisation alone, so studies that differ only in training (another weight
    decay, say) share it.  Probes read the test split; BatchNorm statistics are
    recomputed on the training split.
    """
    store = store or RunStore()
    data = study_data(study)
    out: dict[str, list[pd.DataFrame]] = {name: [] for name in PROBES}
    ids = []
    for pair, ra, rb in trained_pairs(study, store, data):
        ids += [ra.id, rb.id]
        kinds = [("trained", {"a": ra.id, "b": rb.id}, lambda ra=ra, rb=rb: (ra.model, rb.model))]
        if baseline:
            init = {m: {"model": asdict(s.model), "seed": s.train.seed} for m, s in (("a", pair.a), ("b", pair.b))}
            kinds.append(("untrained", init, lambda pair=pair: (init_model(pair.a, data), init_model(pair.b, data))))
        for method, ident, models in kinds:
            def compute(models=models):
                return _all_probes(*models(), data, lams)

            got = store.cached_frames("probes", {**ident, "method": method, "lams": list(lams),
                                                 "dataset": study.dataset}, compute)
            keys = _keys(pair)
            for name in PROBES:
                frame = got[name].assign(**keys, method=method)
                if name == "rank":  # a per-model measure: seed is the model's own seed (2p for a, 2p+1 for b)
                    frame["seed"] = 2 * pair.seed + (frame["model"] == "b").astype(int)
                out[name].append(frame)
    return {name: pd.concat(frames, ignore_index=True) for name, frames in out.items()}, ids
