"""From a study to tidy frames: get or train the runs through the store, then measure.

Notebooks call these functions; they never train or loop over seeds themselves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pandas as pd

from .data import Dataset, load
from .metrics import pair_summary
from .profiles import Pair, WidthStudy
from .store import RunStore
from .train import TrainedRun

log = logging.getLogger("lmcbook.experiments")


@dataclass
class WidthResults:
    """Interpolation curves (one row per pair and λ) and pair summaries (one row per pair)."""

    curves: pd.DataFrame
    summary: pd.DataFrame
    run_ids: list[str] = field(default_factory=list)


def study_data(study: WidthStudy) -> Dataset:
    """Return the data set of a study on its device."""
    return load(study.dataset, study.data_root, study.device, download=study.download)


def trained_pairs(study: WidthStudy, store: RunStore | None = None,
                  data: Dataset | None = None) -> list[tuple[Pair, TrainedRun, TrainedRun]]:
    """Return (pair, run a, run b) for every pair of the study, trained at most once through the store."""
    store = store or RunStore()
    data = data or study_data(study)
    return [(p, store.get_or_train(p.a, data=data), store.get_or_train(p.b, data=data)) for p in study.pairs()]


def width_frames(study: WidthStudy, store: RunStore | None = None) -> WidthResults:
    """Return the interpolation curve and summary of every pair of the width sweep."""
    data = study_data(study)
    curves, rows, ids = [], [], []
    for pair, ra, rb in trained_pairs(study, store, data):
        curve, summ = pair_summary(ra.model, rb.model, data, study.lams)
        keys = {"width": pair.width, "hidden_units": pair.hidden_units, "seed": pair.seed}
        curves.append(curve.assign(**keys))
        rows.append({**keys, **summ, "run_a": ra.spec.short_id, "run_b": rb.spec.short_id})
        ids += [ra.id, rb.id]
    return WidthResults(pd.concat(curves, ignore_index=True), pd.DataFrame(rows), ids)
