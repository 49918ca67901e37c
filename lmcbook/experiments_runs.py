"""A study's runs, shared by every family of :mod:`lmcbook.experiments`: its data set, its pairs got or trained
through the store (on a Dask scheduler if it names one), and the cached interpolation summary of a pair."""

from __future__ import annotations

import pandas as pd

from .data import Dataset, load
from .metrics import pair_summary
from .profiles import NoiseStudy, Pair, Recipe
from .specs import RunSpec
from .store import RunStore
from .sweep import run_all
from .train import TrainedRun


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


#: What :func:`trained_pairs` returns: (pair, run a, run b) for every pair of a study.
Runs = list[tuple[Pair, TrainedRun, TrainedRun]]


def cached_pair_summary(store: RunStore, ra: TrainedRun, rb: TrainedRun, data: Dataset,
                        lams) -> dict[str, pd.DataFrame]:
    """Return {"curve", "summary"} of :func:`lmcbook.metrics.pair_summary` for two stored runs (cached)."""
    def compute():
        curve, summ = pair_summary(ra.model, rb.model, data, lams)
        return {"curve": curve, "summary": pd.DataFrame([summ])}

    return store.cached_frames("pair_summary", {"a": ra.id, "b": rb.id, "lams": list(lams),
                                                "dataset": data.name}, compute)
