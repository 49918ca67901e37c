"""Run many specs: in-process one after another, or on a Dask cluster; and a study's runs (its data set, its
trained pairs, the cached summary of a pair: the module's last section), which every family of experiments reads.

``run_all(specs, scheduler)`` sends each spec to a task that trains it (or finds it)
in the run store and returns only its id and metrics, never the weights.  The store
root must therefore be a path that every worker can see (a shared filesystem on a
cluster).  Correctness never depends on the store's per-run lock: an entry is
published by an atomic rename, so at worst two workers train the same run and the
first finished entry wins.

Schedulers:

- ``None``: in this process, one spec after another;
- ``"local:N"``: a ``dask.distributed.LocalCluster`` with N worker processes;
- ``"tcp://HOST:PORT"``: an existing Dask scheduler (``dask scheduler`` / ``dask worker``,
  or ``dask_jobqueue.SLURMCluster``; see the README).

Each worker sets torch's intra-op threads to its share of the machine's cores, so N
workers never oversubscribe the CPU.  The thread count is provenance: CPU reductions
can differ bitwise with it, so bitwise comparisons are made at equal thread counts.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .data import DataError, Dataset, load
from .merge import pair_summary
from .specs import RunSpec, SpecError, check_scheduler
from .store import RunStore, StoreError
from .studies import NoiseStudy, Pair, Recipe
from .train import DivergedError, TrainedRun


@dataclass
class SweepResult:
    """The outcome of one spec: its id, and its metrics or the error that stopped it."""

    id: str
    ok: bool
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""
    host: str = ""


def train_one(spec_dict: dict[str, Any], store_root: str, threads: int | None = None,
              device: str = "auto") -> SweepResult:
    """Return the result of getting or training one spec in the store at ``store_root`` (a Dask task).

    The spec travels as its JSON-ready dict and is rebuilt here, so tasks never pickle code.
    """

    if threads is not None:
        torch.set_num_threads(threads)
    spec = RunSpec.from_dict(spec_dict)
    try:
        run = RunStore(store_root).get_or_train(spec, device=device, progress=False)
    except (DivergedError, SpecError, StoreError, DataError) as err:  # reported; the other runs go on
        return SweepResult(spec.id, False, error=f"{type(err).__name__}: {err}", host=platform.node())
    return SweepResult(spec.id, True, dict(run.metrics), host=platform.node())


def _threads_per_worker(n_workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // n_workers)


#: Seconds to wait for a ``tcp://`` scheduler to answer before giving up with an error.
CONNECT_TIMEOUT_S = 10.0


def run_all(specs: list[RunSpec], scheduler: str | None = None, store: str | Path | None = None,
            threads: int | None = None, device: str = "auto",
            on_result: Callable[[SweepResult], None] | None = None) -> list[SweepResult]:
    """Return one result per spec (in order), trained in-process or on a Dask cluster (see the module docstring).

    A spec that fails (a diverged run, a corrupt store entry) is reported in its result
    with its id, and the others still complete.  ``threads`` fixes torch's threads in
    every task; by default each Dask worker gets its share of the cores and in-process
    runs keep this process's setting.  ``on_result`` is called with each result as it
    finishes (the command line's progress).
    """

    check_scheduler(scheduler)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise SpecError(f"threads={threads!r} is not allowed: expected an integer >= 1 (torch threads per task) "
                        "or None (the cores shared among the workers)")
    specs = list(dict.fromkeys(specs))
    for s in specs:
        if not isinstance(s, RunSpec):
            raise SpecError(f"spec={s!r} is not allowed: expected a RunSpec")
    root = str(RunStore(store).root.resolve())
    RunStore(root).check_writable()
    payloads = [s.to_dict() for s in specs]
    report = on_result or (lambda r: None)
    if scheduler is None:
        results = []
        for p in payloads:
            results.append(train_one(p, root, threads, device))
            report(results[-1])
        return results

    from dask.distributed import Client, LocalCluster

    if scheduler.startswith("local:"):
        n = int(scheduler.split(":")[1])
        with LocalCluster(n_workers=n, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            return _submit(client, payloads, root, threads or _threads_per_worker(n), device, report)
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as err:
        raise SpecError(f"scheduler={scheduler!r}: no Dask scheduler answered within {CONNECT_TIMEOUT_S:g} s "
                        f"({type(err).__name__}); expected a running scheduler reachable from here (`dask scheduler`), "
                        "or 'local:N' for workers on this machine") from None
    with client:
        return _submit(client, payloads, root, threads, device, report)


def _submit(client, payloads, root, threads, device, report) -> list[SweepResult]:
    from dask.distributed import as_completed

    futures = [client.submit(train_one, p, root, threads, device, pure=False) for p in payloads]
    for fut in as_completed(futures):
        report(fut.result())
    return client.gather(futures)


# ---- A study's runs ----
# A study's runs, shared by every family of :mod:`lmcbook.experiments`: its data set, its pairs got or trained
# through the store (on a Dask scheduler if it names one), and the cached interpolation summary of a pair.

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
    """Return {"curve", "summary"} of :func:`lmcbook.merge.pair_summary` for two stored runs (cached)."""
    def compute():
        curve, summ = pair_summary(ra.model, rb.model, data, lams)
        return {"curve": curve, "summary": pd.DataFrame([summ])}

    return store.cached_frames("pair_summary", {"a": ra.id, "b": rb.id, "lams": list(lams),
                                                "dataset": data.name}, compute)
