"""The kernel side of the book: a page being computed inside its notebook.

A notebook opens its page with :func:`open_page`, which resolves its study from the
notebook's ``parameters`` cell, computes its frames through :mod:`lmcbook.experiments`,
and ends with :meth:`Page.save`.  Saving validates and writes the page's CSV, glues
the verdicts of the claims the page is evidence for, and records what the page read
(every run it looked up in the store, every other page's CSV) for the notebook cache
of :mod:`lmcbook.book`, so no page can forget a dependency.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import yaml
from IPython.display import Markdown
from myst_nb import glue

from . import __version__, reference
from .claims import (
    FAIL,
    HYPOTHESES,
    INCONCLUSIVE,
    NA,
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    PAGE_CLAIMS,
    PASS,
    ClaimResult,
    id_order,
    noise_grid_cells,
    page_claims,
)
from .data import DATASET_LABELS
from .parts import part_of
from .paths import out_dir, stage_dir
from .profiles import Study, what_ran
from .provenance import git_sha
from .schema import (
    KEY_COLUMNS,
    REGIME_KEYS,
    cell_table,
    concat,
    in_cell,
    read_results,
    select,
    to_long,
    to_long_frame,
    validate_results,
)
from .specs import SpecError
from .stats import CONFIDENCE, spearman, trend
from .store import RunStore


def file_sha(path: Path) -> str:
    """Return the SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def reads_path(out: Path, name: str) -> Path:
    """Return where a page's record of what it read lives: OUT/.cache/NAME.reads.json."""
    return Path(out) / ".cache" / f"{name}.reads.json"


def record_path(out: Path, name: str) -> Path:
    """Return where ``lmcbook execute`` records a page's last execution: OUT/.cache/NAME.json."""
    return Path(out) / ".cache" / f"{name}.json"


def study_of(name: str) -> Any:
    """Return the study that the last execution of notebook ``name`` (in $LMCBOOK_OUT) resolved, from its record."""
    record = record_path(out_dir(), name)
    if not record.exists():
        raise FileNotFoundError(f"{record} does not exist: execute notebook {name!r} first")
    key = json.loads(record.read_text())["key"]
    return part_of(name).resolve(key["profile"], key["params"])


def write_reads(name: str, store: RunStore, csv_reads: dict[str, str], out: Path | None = None,
                reference_reads: dict[str, str] | None = None) -> Path:
    """Record what a page read: each run id it looked up (with its manifest's hash, None if it was missing), each
    CSV it read (by page name, with its hash) and each committed reference run's CSV (by name, with its hash), and
    what the page did with each run: found it, loaded it or trained it (``lmcbook execute`` counts from this)."""
    runs = {}
    for rid, status in store.reads.items():
        manifest = store.path(rid) / "manifest.json"
        runs[rid] = file_sha(manifest) if status != "missing" and manifest.exists() else None
    path = reads_path(out if out is not None else stage_dir(), name)
    path.parent.mkdir(parents=True, exist_ok=True)
    status = {rid: s for rid, s in store.reads.items() if s != "missing"}  # found, loaded or trained
    path.write_text(json.dumps({"store": str(store.root.resolve()), "runs": runs, "status": status, "csv": csv_reads,
                                "references": reference_reads or {}}, sort_keys=True))
    return path


class Page:
    """One book page being computed: its study, store, CSV output, glued values and provenance."""

    def __init__(self, name: str, profile: str, params: dict[str, Any], study: Any = None,
                 store: RunStore | None = None) -> None:
        self.name, self.profile, self.params, self.study = name, profile, dict(params), study
        self.store = store or RunStore()
        self.csv_reads: dict[str, str] = {}
        self.reference_reads: dict[str, str] = {}
        self._t0 = time.time()
        _log_to_stderr()

    @property
    def csv_path(self) -> Path:
        """Return the path this page writes its result CSV to (published to OUT/data/ once the page is complete)."""
        return stage_dir() / "data" / f"{self.name}.csv"

    @property
    def run_ids(self) -> list[str]:
        """Return the ids of every run this page read from the store (loaded, trained or found), from its read log."""
        return [rid for rid, status in self.store.reads.items() if status != "missing"]

    def read_csv(self, name: str) -> pd.DataFrame:
        """Return another page's result CSV (validated), recording it so that this page re-runs when it changes."""
        path = out_dir() / "data" / f"{name}.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: execute notebook {name!r} first")
        self.csv_reads[name] = file_sha(path)  # by page name: the record stays valid if the output moves
        return read_results(path)

    def read_csv_if(self, name: str) -> pd.DataFrame | None:
        """Return another page's result CSV as :meth:`read_csv` does, or None when that page has not been executed
        into this output folder (a page executed alone, such as a reference run); its absence is recorded too, so
        that this page re-runs once that CSV appears."""
        if (out_dir() / "data" / f"{name}.csv").exists():
            return self.read_csv(name)
        self.csv_reads[name] = None
        return None

    def read_reference(self, name: str) -> tuple[pd.DataFrame, dict[str, Any]]:
        """Return a committed reference run's CSV and provenance (:func:`lmcbook.reference.load`), recording it so
        that this page re-runs when the reference changes."""
        frame, prov = reference.load(name)
        self.reference_reads[name] = file_sha(reference.csv_path(name))
        return frame, prov

    def references(self, notebook: str | None = None,
                   retired: bool = False) -> dict[str, tuple[pd.DataFrame, dict[str, Any]]]:
        """Return every committed reference run of ``notebook`` (default: this page's), read and recorded: the live
        ones, or with ``retired`` the retired ones (:attr:`lmcbook.reference.Reference.retired`)."""
        return {n: self.read_reference(n) for n in reference.available(notebook or self.name, retired=retired)}

    def save(self, long: pd.DataFrame | None = None, regime: pd.DataFrame | None = None,
             keys: list[str] | None = None, **frames: pd.DataFrame | tuple) -> list[ClaimResult]:
        """Validate the long-format frame, write it as this page's CSV, record what the page read, and glue the
        verdicts of the claims whose evidence this page is (:func:`lmcbook.claims.page_claims` on that frame);
        return them.

        Instead of (or after) a long frame, name the frames to melt: ``summary=(frame, metrics)``
        melts those metric columns, keyed by every key column of the schema the frame has
        (``(frame, metrics, keys)`` names the keys); ``lewc=frame`` takes a frame that
        already has ``metric`` and ``value`` columns, with its key columns (``keys``, if
        given: only those; the others are dropped).  They are
        stacked in the order given.  ``regime`` (:func:`lmcbook.experiments.regime_frame`)
        adds the runs' training regime (decay integral, shrinkage, distance from
        initialisation, weight norms) to the CSV.  Each verdict is glued under its key
        (``w1``, ``w1_long``, ``n1_50``, ...) as ``KEY_mark``, ``KEY_verdict``,
        ``KEY_measured``, ``KEY_test`` and ``KEY_state``.
        """
        parts = ([] if long is None else [long]) + [self._melt(item, keys) for item in frames.values()]
        if not parts:
            raise SpecError("page.save() is not allowed without results: pass a long frame or name frames to melt, "
                            "e.g. page.save(summary=(frame, ['acc_merged']))")
        long = parts[0] if len(parts) == 1 else concat(parts)
        if regime is not None:
            long = concat([long, to_long_frame(regime, self.name, REGIME_KEYS)])
        validate_results(long, self.name)
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.csv_path.with_suffix(".csv.tmp")
        long.to_csv(tmp, index=False)
        os.replace(tmp, self.csv_path)
        write_reads(self.name, self.store, self.csv_reads, reference_reads=self.reference_reads)
        verdicts = page_claims(self.name, long) if self.name in PAGE_CLAIMS else []
        for r in verdicts:
            self.glue_claim(r)
        return verdicts

    def _melt(self, item: pd.DataFrame | tuple, keys: list[str] | None = None) -> pd.DataFrame:
        """Return one named frame of :meth:`save` in the long format."""
        if isinstance(item, pd.DataFrame):
            return to_long_frame(item, self.name, KEY_COLUMNS if keys is None else keys)
        frame, metrics, *keys = item
        return to_long(frame, self.name, metrics, keys[0] if keys else [k for k in KEY_COLUMNS if k in frame])

    @classmethod
    def glue_values(cls, **values: Any) -> None:
        """Glue each keyword's value under its name (one call instead of a run of :meth:`glue`)."""
        for key, value in values.items():
            cls.glue(key, value)

    @classmethod
    def glue_rows(cls, frame: pd.DataFrame, rows: dict[str, Any], columns: list[str]) -> None:
        """Glue ``frame.loc[row, column]`` under ``COLUMN_LABEL`` for each label and row of ``rows`` and each of
        ``columns``: ``glue_rows(means, {"wide": 1024}, ["acc_merged"])`` glues ``acc_merged_wide``."""
        for label, row in rows.items():
            for col in columns:
                cls.glue(f"{col}_{label}", frame.loc[row, col])

    @staticmethod
    def glue(key: str, value: Any) -> None:
        """Glue a number (or any object) under ``key`` without displaying it."""
        if isinstance(value, np.generic):  # np.float64 reprs as 'np.float64(...)', which {glue:text} cannot format
            value = value.item()
        glue(key, value, display=False)

    @staticmethod
    def glue_md(key: str, text: str) -> None:
        """Glue a Markdown snippet (use it with the ``{glue:md}`` role)."""
        glue(key, Markdown(text), display=False)

    @staticmethod
    def choose(key: str, value: str | bool) -> None:
        """Say which of the page's alternative Markdown cells the book shows: of the cells tagged
        ``when:KEY=...``, the one tagged ``when:KEY=VALUE`` (a bool is ``true`` or ``false``).

        Prose whose meaning depends on a verdict or a measurement is written in the notebook's Markdown, once per
        outcome, and the computation only names the outcome.  After execution, :func:`lmcbook.book.show_chosen`
        hides the other alternatives, and fails the page if it chose a value that no cell is written for.
        """
        text = ("true" if value else "false") if isinstance(value, bool) else value
        if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", text) \
                or not re.fullmatch(r"[A-Za-z0-9_]+", key):
            raise SpecError(f"page.choose({key!r}, {value!r}): the key must be a name and the value a bool or a word "
                            "of letters, digits, '_' and '-' (it is matched against cell tags when:KEY=VALUE)")
        glue(key, text, display=False)

    @staticmethod
    def glue_figure(key: str, fig) -> None:
        """Glue a matplotlib figure (use it with the ``glue:figure`` directive) and close it.

        The figure must be readable at the book's text width: if any of its texts would render below 9 pt there,
        :func:`lmcbook.plots.check_legible` raises :class:`lmcbook.plots.IllegibleFigure`, naming ``key``, the
        smallest text and its size, and nothing is glued (so the page fails to execute).
        """
        from .plots import check_legible  # only this method of page.py needs plots

        try:
            check_legible(fig, key)
            glue(key, fig, display=False)
        finally:
            plt.close(fig)

    def glue_claim(self, result: ClaimResult, key: str | None = None) -> ClaimResult:
        """Glue one verdict of :mod:`lmcbook.claims` under ``key`` (default ``result.key``; see :meth:`save`) and
        return it."""
        words = {PASS: "passes", FAIL: "**fails**", INCONCLUSIVE: "is **inconclusive**", NA: "does not apply"}
        key = key or result.key
        self.glue_md(f"{key}_mark", result.mark)
        self.glue_md(f"{key}_verdict", words[result.state])
        self.glue_md(f"{key}_measured", result.measured)
        self.glue_md(f"{key}_test", result.test)
        self.glue(f"{key}_state", result.state)
        return result

    def reproduce_command(self) -> str:
        """Return the shell command that re-executes this page with its parameters."""
        parts = [f"lmcbook execute --profile {self.profile} --only {self.name}"]
        for k, v in self.params.items():
            if v is not None:
                parts.append(f"-p {k} {_shell_yaml(v)}")
        return " ".join(parts)

    def provenance(self):
        """Return a Markdown block (IPython display): CSV link, reproduce command, profile, parameters, runs and
        versions."""
        statuses = list(self.store.reads.values())
        resolved = self.study.params() if self.study is not None and hasattr(self.study, "params") else {}
        ids = ", ".join(r[:12] for r in self.run_ids) or "none"
        sha = git_sha()
        values = ", ".join(f"`{k}={v}`" for k, v in resolved.items() if k != "profile") or "none"
        return Markdown(_PROVENANCE.format(
            name=self.name, command=self.reproduce_command(), profile=self.profile, values=values,
            version=__version__ + (f" (git {sha[:10]})" if sha else ""), torch=torch.__version__,
            threads=torch.get_num_threads(), executed=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            seconds=f"{time.time() - self._t0:.0f}", n_runs=len(self.run_ids), loaded=statuses.count("loaded"),
            trained=statuses.count("trained"), ids=ids,
            params=yaml.safe_dump(resolved, sort_keys=True, default_flow_style=None).strip()))


_PROVENANCE = """
**Data:** {{download}}`{name}.csv <data/{name}.csv>` (long format: notebook, metric, value, seed or pair, and keys).

:::{{admonition}} Reproduce this page
:class: tip
```bash
{command}
```
Profile `{profile}`; its values for this page: {values}.
Parameters left at `None` take these values; override any of them with `-p NAME VALUE`.
:::

:::{{admonition}} Provenance
:class: dropdown
| | |
|---|---|
| profile | `{profile}` |
| lmcbook | {version} |
| torch | {torch}, {threads} threads |
| executed | {executed}, {seconds} s |
| runs read | {n_runs}: {loaded} loaded from the store, {trained} trained during this execution |

Resolved parameters:

```yaml
{params}
```

Run ids (first 12 hex digits): {ids}
:::
"""


def open_page(name: str, namespace: dict[str, Any], store: RunStore | None = None) -> tuple[Page, Study]:
    """Return the page of notebook ``name`` and its validated study, from the notebook's namespace.

    Call it right after the ``parameters`` cell with ``globals()``: ``profile`` and every
    parameter the notebook's study accepts are read from there (None keeps the profile's value).
    """
    part = part_of(name)
    keys = [f.name for f in fields(part.study_type) if f.name != "profile"]
    params = {k: namespace[k] for k in keys if k in namespace}
    profile = namespace.get("profile", "quick")
    study = part.resolve(profile, params)
    Page.glue_md("what_ran", what_ran(study, params))  # the table under the page's title
    return Page(name, profile, params, study, store), study


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
    return f" ({study.pairs_at(ws[0])} at {_and(list(map(str, units)))} {unit})"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _frac(x: float) -> str:
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
                    f"| {_frac(mean['decay_shrinkage'].mean())} | {dist[lo]:.2f} ({lo:g}) | {dist[hi]:.2f} ({hi:g}) |")
    return "\n".join(rows)


def describe_map(study: Any) -> str:
    """Return one sentence on what the regime map trained (for captions)."""
    m = study.noise_study().spec(study.cells()[0], 0).model
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers and {m.channels} hidden "
            f"units on {DATASET_LABELS[study.dataset]}; {study.steps} SGD steps per run at B = {study.batch_size}, "
            f"momentum {study.momentum:g}, weight decay {study.weight_decay:g}; {study.seeds} pair(s) per cell")


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


def map_table(settings: pd.DataFrame, cells: pd.DataFrame) -> str:
    """Return the regime map's table (:func:`lmcbook.claims.map_settings`): one row per setting, with how many of its
    learning rates gain, its best cell's gain and interval, and what its other cells read."""
    from .claims import MAP_KEYS, describe_setting

    rows = ["| setting | cells that gain (of the paper's size) | best η | best gain, points (95% interval) | the "
            "other cells |", "|---|---|---|---|---|"]
    short = {"basins": "different basins", "harvest": "nothing to harvest", "failed": "failed",
             "undecided": "undecided"}
    for _, s in settings.iterrows():
        own = cells[np.logical_and.reduce([cells[k] == s[k] for k in MAP_KEYS[:-1]])]
        rest = own["reading"].value_counts()
        other = ", ".join(f"{int(rest[k])} {v}" for k, v in short.items() if k in rest) or "none"
        rows.append(f"| {describe_setting(s.to_dict())} | {s['n_gain']} of {s['n_cells']} ({s['n_paper']}) | "
                    f"{s['best_lr']:g} | {100 * s['best_gain']:.2f} ({100 * s['best_gain_lo']:.2f} to "
                    f"{100 * s['best_gain_hi']:.2f}) | {other} |")
    return "\n".join(rows)


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
        page.glue_claim(r)
    stale = reference.stale_note(prov)
    scale, components = (frame, None) if page.name == "noise_scale" else (None, frame)
    table = rule_sensitivity(scale, components)
    text = (f"**Reference** {reference.describe(name, prov)}." + (f" **{stale}**" if stale else "")
            + (f" {facts}" if facts else "") + f"\n\n{claims_markdown(rows)}\n\nThe sensitivity of its rows to the "
            f"rule:\n\n{markdown_table(table)}\n\n{sensitivity_words(table)}")
    return text, rows


def noise_verdict_words(label: str, rows: list[ClaimResult], sensitivity: pd.DataFrame | None = None) -> str:
    """Return, for a landing page, what a run's noise rows found in words: each claim of the noise paper, and whether
    it holds, fails, shows no effect of the paper's size, is undecided or does not apply there; then (``sensitivity``:
    :func:`lmcbook.claims.rule_sensitivity`'s table) which verdicts move with the rule's threshold."""
    said = {PASS: "holds", FAIL: "does not hold", INCONCLUSIVE: "is undecided", NA: "does not apply"}
    words = []
    for r in sorted(rows, key=lambda r: id_order(r.id)):
        verb = ABSENT_WORDS if r.state == FAIL and ("of the paper's size" in r.measured) else said[r.state]
        words.append(f"{r.id} ({r.mark}) {verb}: “{r.statement.rstrip('.')}”")
    text = f"On {label}: " + "; ".join(words) + "."
    return text + (f" {sensitivity_words(sensitivity)}" if sensitivity is not None else "")


#: How :func:`noise_verdict_words` says a ✗ that is an absence (an interval below the minimum effect).
ABSENT_WORDS = "shows no effect of the paper's size"


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
    read (:data:`lmcbook.claims.MAP_READINGS`) and the setting it picks, every number computed."""
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
        text += (" In the book's first protocol (a decay to zero, children spawned at 50%) its best gain is "
                 f"{gain(first)}.")
    pick = pick_setting(cells)
    if pick is None:
        return text + " No spawned setting gains measurably."
    b = best(pick)
    first = pick_setting(cells, FIRST_PICK)
    text += (f" It picks {describe_setting(pick)}: its best gain is {gain(b)}."
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


def _shell_yaml(v: Any) -> str:
    s = yaml.safe_dump(v, default_flow_style=True).strip()
    if s.endswith("\n..."):
        s = s[:-4].strip()
    s = s.removesuffix("...").strip()
    return f'"{s}"' if any(c in s for c in " []{},:") else s


_LOGGING_SET = False


def _log_to_stderr() -> None:
    global _LOGGING_SET
    if _LOGGING_SET:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    lg = logging.getLogger("lmcbook")
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    _LOGGING_SET = True


def describe_mechanism(study: Any) -> str:
    """Return a one-sentence Markdown description of what the mechanism study trained (for captions)."""
    cells = study.cells()
    m, t = cells[0].pair(cells[0].widths[0], 0).a.model, cells[0].pair(cells[0].widths[0], 0).a.train
    units = sorted({int(round(study.base_width * w)) for w in study.widths})
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers on "
            f"{DATASET_LABELS[study.dataset]}; SGD (peak lr "
            f"{t.lr:g}, momentum {t.momentum:g}, batch {t.batch_size}); {', '.join(map(str, units))} hidden units; "
            f"{len(cells)} cells of (length, weight decay, initial-weight factor); {study.seeds} pair(s) per cell and "
            f"width, {max(study.seeds, study.decisive_seeds)} in the cells that decide a verdict")


def mechanism_cut(study: Any) -> str:
    """Return one Markdown sentence saying which cells stop short of the widest width, to fit the time budget."""
    cut = study.cut_widths()
    if not cut:
        return "every cell was trained at every width"
    units = lambda ws: ", ".join(str(int(round(study.base_width * w))) for w in ws)  # noqa: E731
    mid = [d for d in study.weight_decays if d not in study.wide_decays]
    return (f"{units(cut)} hidden units were trained only in the decay arm at weight decay "
            f"{', '.join(f'{d:g}' for d in study.wide_decays)} and in the small-initialisation arm; the length arm"
            + (f" and weight decay {', '.join(f'{d:g}' for d in mid)}" if mid else "")
            + f" stop at {units(study.narrow_widths()[-1:])} units, to keep the book within its time budget (large "
            "D is reached far more cheaply by weight decay than by length)")


def mechanism_cells_markdown(long: pd.DataFrame) -> str:
    """Return a Markdown table of the mechanism study's cells, one row each: arm, length, weight decay, initial-weight
    factor, D, what weight decay alone would leave of a weight, the widest width and its pairs, the distance from
    initialisation and the lowest endpoint training accuracy there."""
    cells = cell_table(long).sort_values(["init_scale", "epochs", "weight_decay"])
    base = cells.loc[cells["widest"].idxmax(), "epochs"]
    lines = ["| arm | epochs | weight decay | init × | D | weight decay alone leaves | widest (pairs) | "
             "‖θ_T − θ₀‖/‖θ₀‖ | min. train acc |", "|---|---|---|---|---|---|---|---|---|"]
    for _, c in cells.iterrows():
        arm = "small init" if c["init_scale"] != 1.0 else "decay" if c["epochs"] == base else "length"
        at = in_cell(long, c, c["widest"])
        pairs = select(at, "acc_merged", method="none")["pair"].nunique()
        dist = select(at[at["layer"].isna()], "init_distance")["value"].mean()
        acc = select(at, "train_acc")["value"].min()
        lines.append(f"| {arm} | {c['epochs']:g} | {c['weight_decay']:g} | {c['init_scale']:g} | {c['D']:.3g} | "
                     f"{_frac(c['shrinkage'])} | {c['widest']:g} ({pairs}) | {dist:.2f} | {acc:.3f} |")
    return "\n".join(lines)


def hypotheses_markdown(states: dict[str, dict[str, str]]) -> str:
    """Return a Markdown table of each hypothesis' state (supported, contradicted, undecided) per data set."""
    table = pd.DataFrame({n: {f"**{h}**: {text}": states[n].get(h, "—") for h, text in HYPOTHESES.items()}
                          for n in states})
    return markdown_table(table.rename_axis("hypothesis"))


def claims_markdown(rows: list[ClaimResult]) -> str:
    """Return verdict rows as a Markdown list: the claim, its test, what was measured and the verdict."""
    if not rows:
        return "(no rows)"
    return "\n".join(f"- **{r.id}**{f' ({r.regime})' if r.regime else ''}: {r.statement} *Test:* {r.test}. "
                     f"*Measured:* {r.measured}. **{r.mark}**" for r in rows)


def direction(before: float, after: float, tol: float = 0.01) -> str:
    """Return "rises", "falls" or "stays about the same" for a change from ``before`` to ``after`` (relative
    tolerance ``tol``)."""
    if abs(after - before) <= tol * max(abs(before), abs(after), 1e-12):
        return "stays about the same"
    return "rises" if after > before else "falls"


#: What :func:`mechanism_numbers` reads at the decay arm's widest width: (glue name, metric, filters, hidden-only).
_MECHANISM_NUMBERS = (
    ("acc_plain", "acc_merged", {"method": "none"}, False),
    ("acc_matched", "acc_merged", {"method": "weight_matching"}, False),
    ("acc_ensemble", "acc_ensemble", {"method": "none"}, False),
    ("orth", "orth_ratio", {"method": "trained", "lam": 0.5}, False),
    ("orth_untrained", "orth_ratio", {"method": "untrained", "lam": 0.5}, False),
    ("lewc", "lewc_rel_err", {"method": "trained", "lam": 0.5}, False),
    ("llfc_matched", "llfc_rel_err", {"method": "weight_matched", "lam": 0.5}, False),
    ("rank", "rel_effective_rank", {"method": "trained"}, True),
    ("rank_untrained", "rel_effective_rank", {"method": "untrained"}, True),
    ("delta_stable_rank", "delta_rel_stable_rank", {}, True),
)


def mechanism_numbers(long: pd.DataFrame) -> dict[str, Any]:
    """Return the numbers the mechanism page quotes: at the decay arm's widest width, in its smallest-D (``_lo``)
    and largest-D (``_hi``) cells, each measure's mean over pairs, the D values, the distance from initialisation,
    and the direction of each change (``_dir``); the largest-D cell's length and weight decay (``epochs_hi``,
    ``wd_hi``), and the widest width of the cells trained longer than it (``length_widest``, 0 if none)."""
    cells = cell_table(long)
    std = cells[cells["init_scale"] == 1.0]
    widest = std["widest"].max()
    at = std[std["widest"] == widest].sort_values("D")
    lo, hi = at.iloc[0], at.iloc[-1]
    hidden = long[(long["layer"] > 1) & (long["layer"] < long["layer"].max())]
    longer = std[std["epochs"] > hi["epochs"]]  # the length arm: the same weight decays, trained longer
    out: dict[str, Any] = {"units": int(widest), "d_lo": float(lo["D"]), "d_hi": float(hi["D"]),
                           "shrink_lo": float(lo["shrinkage"]), "shrink_hi": float(hi["shrinkage"]),
                           "epochs_hi": float(hi["epochs"]), "wd_hi": float(hi["weight_decay"]),
                           "length_widest": int(longer["widest"].max()) if len(longer) else 0}
    whole = long[long["layer"].isna()]
    rows = _MECHANISM_NUMBERS + (("dist", "init_distance", {}, False),)
    for name, metric, filters, only_hidden in rows:
        df = hidden if only_hidden else whole if name == "dist" else long
        for tag, cell in (("lo", lo), ("hi", hi)):
            out[f"{name}_{tag}"] = float(select(in_cell(df, cell, widest), metric, **filters)
                                         .groupby("pair")["value"].mean().mean())
        out[f"{name}_dir"] = direction(out[f"{name}_lo"], out[f"{name}_hi"])
    return out


def _gain_span(gains: pd.Series) -> str:
    """Return "its mean gain is X points" for one cell, "their mean gains run from X to Y points" for several."""
    if len(gains) == 1:
        return f"its mean gain is {100 * gains.iloc[0]:.2f} points"
    return f"their mean gains run from {100 * gains.min():.2f} to {100 * gains.max():.2f} points"


def noise_reference_facts(frame: pd.DataFrame, rows: list[ClaimResult], signal_point: float | None = None,
                          rule: float = NOISE_FAILED_TRAIN_ACC) -> str:
    """Return what a noise reference run's grid shows, in Markdown, every number computed from its CSV (``frame``)
    and its rows (N1, N2): the cells the rule (its threshold ``rule``) excluded and why, the training lengths (where
    the cells took several), the kept cells' gains against S, and how they compare with the paper's gains of about a
    point (``signal_point``: one test example in points, if known)."""
    cells = noise_grid_cells(frame, rule)
    ok, out = cells[cells["kept"]], cells[~cells["kept"]]
    cap = int(cells["train_steps"].max())
    lengths = cells["train_steps"].nunique() > 1  # the first protocol trained a cell longer until it met its rule
    excluded = "; ".join(
        f"η {lr:g}, B {b:g} (S = {c['noise_scale']:.1e}; weaker child {c['train_acc_mean']:.3f} on average, "
        f"{c['train_acc_min']:.3f} at worst" + (", diverged" if c.get("diverged", False) else "")
        + f"{', at the cap' if lengths and int(c['train_steps']) == cap else ''})" for (lr, b), c in out.iterrows())
    took = (f"; the kept ones took {', '.join(f'{int(v)}' for v in sorted(ok['train_steps'].unique()))} steps, so "
            f"across them S and training length are not independent. {int((cells['train_steps'] == cap).sum())} "
            f"cells reached the {cap}-step cap" if lengths else f", every one after {cap} steps")
    text = [f"{len(ok)} of {len(cells)} cells met the rule{took}. Excluded: {excluded or 'none'}."]
    if len(ok) >= 2:
        rho = spearman(ok["noise_scale"], ok["gain"])
        best = ok["gain"].idxmax()
        at_end = np.isclose(ok.loc[best, "noise_scale"], ok["noise_scale"].max())
        worse_out = out[out["noise_scale"] > ok["noise_scale"].max()]
        beyond = ok[ok["noise_scale"] > ok.loc[best, "noise_scale"] * (1 + 1e-9)]
        n2 = next((r for r in rows if r.id.startswith("N2")), None)
        anova = n2.values.get("anova_p", float("nan")) if n2 is not None else float("nan")
        text.append(
            f"On the kept cells the mean gain runs from {100 * ok['gain'].min():.2f} to "
            f"{100 * ok['gain'].max():.2f} points"
            + (f" (one test example is {signal_point:.3f} points)" if signal_point else "")
            + ", against the paper's gains of about a point; a one-way ANOVA finds "
            + ("a difference between them" if anova < 1 - CONFIDENCE else
               "no difference between them beyond pair noise")
            + f" (p = {anova:.2g}). Their mean gain {trend(rho)} with S (Spearman ρ = {rho:.2f} over "
            f"{len(ok)} cells), and the best of them is η {best[0]:g}, B {best[1]:g}"
            + (", at the largest kept S" if at_end else ", inside the kept range of S") + "."
            + (f" At a larger S than the best, the kept cells gain {100 * beyond['gain'].min():.2f} to "
               f"{100 * beyond['gain'].max():.2f} points." if len(beyond) else "")
            + (f" Every cell at a larger S than the kept ones was excluded; {_gain_span(worse_out['gain'])}."
               if len(worse_out) else ""))
    return " ".join(text)
