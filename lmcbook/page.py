"""The kernel side of the book: a page being computed inside its notebook (its lifecycle only).

A notebook opens its page with :func:`open_page`, which resolves its study from the
notebook's ``parameters`` cell, computes its frames through :mod:`lmcbook.experiments`,
and ends with :meth:`Page.save`.  Saving validates and writes the page's CSV, glues
the verdicts of the claims the page is evidence for, and records what the page read
(every run it looked up in the store, every other page's CSV) for the notebook cache
of :mod:`lmcbook.book`, so no page can forget a dependency.

A sentence that several pages share sits beside the function whose concept it describes (a study's words in
:mod:`lmcbook.studies`, the noise study's in :mod:`lmcbook.experiments_noise`, a reference run's precision check
in :mod:`lmcbook.reference`); what serves one page only lives in
its notebook.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import time
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
from .claims import PAGE_CLAIMS, claims_markdown, page_claims
from .claims.noise import rule_sensitivity
from .claims.verdicts import FAIL, INCONCLUSIVE, NA, PASS, ClaimResult
from .files import git_sha, out_dir, stage_dir
from .plots_style import check_legible
from .schema import (
    KEY_COLUMNS,
    REGIME_KEYS,
    concat,
    markdown_table,
    read_results,
    to_long,
    to_long_frame,
    validate_results,
)
from .specs import SpecError
from .store import RunStore
from .studies import Study, given_parameters, part_of, what_ran


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
        self.verdicts: dict[str, ClaimResult] = {}  # by key, once saved
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

    def scoreboard_inputs(self) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame], dict[str | None, str]]:
        """Return what :func:`lmcbook.claims.scoreboard` reads: this build's CSV of every page with claims (by name),
        every committed reference run's CSV (by name, each marked by its data set), and each source's training
        precision (None: this build's mechanism page), since a repeat needs the same precision
        (:func:`lmcbook.claims.mark_repeats`)."""
        frames = {name: self.read_csv(name) for name in PAGE_CLAIMS}
        committed = {name: item for nb in sorted({r.notebook for r in reference.REFERENCES.values()})
                     for name, item in self.references(nb).items()}
        references = {name: frame if "dataset" in frame else frame.assign(dataset=reference.dataset(name))
                      for name, (frame, _) in committed.items()}
        precisions = {None: study_of("mechanism").precision,
                      **{name: prov.get("params", {}).get("precision", "fp32")
                         for name, (_, prov) in committed.items()}}
        return frames, references, precisions

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
        initialisation, weight norms) to the CSV.  Each verdict's state is glued under
        ``KEY_state`` (``w1_state``, ``w1_long_state``, ``n1_50_state``, ...), which the book's
        checks read; the prose's words for a verdict are glued by the notebook, each under its
        literal key (:meth:`glue_verdict`).  The verdicts are also kept in ``verdicts``, by key.
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
            self.glue_state(r)
        self.verdicts = {r.key: r for r in verdicts}
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
    def glue_markdown(cls, **texts: str) -> None:
        """Glue each keyword's Markdown text under its name (one call instead of a run of :meth:`glue_md`)."""
        for key, text in texts.items():
            cls.glue_md(key, text)

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
        :func:`lmcbook.plots_style.check_legible` raises :class:`lmcbook.plots_style.IllegibleFigure`, naming
        ``key``, the smallest text and its size, and nothing is glued (so the page fails to execute).
        """

        try:
            check_legible(fig, key)
            glue(key, fig, display=False)
        finally:
            plt.close(fig)

    @staticmethod
    def glue_state(result: ClaimResult) -> ClaimResult:
        """Glue a verdict's state under ``KEY_state`` (its key: ``result.key``), which the book's checks read, and
        return it."""
        Page.glue(f"{result.key}_state", result.state)
        return result

    @classmethod
    def glue_claim(cls, result: ClaimResult, *keys: str) -> ClaimResult:
        """Glue the words of one verdict of :mod:`lmcbook.claims` that the prose quotes, each under its literal key,
        whose last word names the part (``mark``, ``verdict``, ``measured`` or ``test``):
        ``page.glue_claim(m4, "m4_mark", "m4_measured")``; return the verdict."""
        words = {PASS: "passes", FAIL: "**fails**", INCONCLUSIVE: "is **inconclusive**", NA: "does not apply"}
        parts = {"mark": result.mark, "verdict": words[result.state], "measured": result.measured_shown,
                 "test": result.test}
        for key in keys:
            part = key.rsplit("_", 1)[-1]
            if part not in parts:
                raise SpecError(f"page.glue_claim: {key!r} must end in one of _{', _'.join(parts)}")
            cls.glue_md(key, parts[part])
        return result

    def glue_verdict(self, key: str, *keys: str) -> ClaimResult:
        """Glue the words of this page's verdict ``key`` (one of ``verdicts``, after :meth:`save`) under the
        literal ``keys``, as :meth:`glue_claim` does: ``page.glue_verdict("w1", "w1_mark", "w1_test")``."""
        if key not in self.verdicts:
            raise SpecError(f"page.glue_verdict({key!r}): this page's verdicts are {sorted(self.verdicts)} "
                            "(call it after page.save)")
        return self.glue_claim(self.verdicts[key], *keys)

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

    def noise_reference_block(self, name: str, frame: pd.DataFrame, prov: dict[str, Any],
                              facts: str = "") -> tuple[str, list[ClaimResult]]:
        """Score a committed noise reference run with its page's claims, glue each verdict (its key names the run),
        and return its Markdown block (what it is, ``facts``, its verdicts and their sensitivity to the rule) and its
        rows."""
        rows = page_claims(self.name, frame)
        for r in rows:
            r.source = name
            self.glue_state(r)
        stale = reference.stale_note(prov)
        scale, components = (frame, None) if self.name == "noise_scale" else (None, frame)
        table = rule_sensitivity(scale, components)
        text = (f"**Reference** {reference.describe(name, prov)}." + (f" **{stale}**" if stale else "")
                + (f"\n\n{facts}" if facts else "") + f"\n\n{claims_markdown(rows)}\n\nThe sensitivity of its rows to "
                f"the rule (each row's verdict as the threshold rises):\n\n{markdown_table(table)}")
        return text, rows


_PROVENANCE = """
**Data:** {{download}}`{name}.csv <data/{name}.csv>` (long format: notebook, metric, value, seed or pair, and keys).

:::{{admonition}} Reproduce this page
:class: tip
```bash
{command}
```
Profile `{profile}`; its values for this page: {values}.
The notebook's parameters cell writes the quick values; the profile replaces those left as written.
Override any of them with `-p NAME VALUE`.
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
    parameter the notebook's study accepts are read from there.  A value given with ``-p`` (papermill's injected
    cell) or changed from the quick value the cell writes is the reader's; the others take the profile's
    (:func:`lmcbook.studies.given_parameters`).
    """
    part = part_of(name)
    params = given_parameters(part.study_type, namespace)
    profile = namespace.get("profile", "quick")
    study = part.resolve(profile, params)
    Page.glue_md("what_ran", what_ran(study, params))  # the table under the page's title
    return Page(name, profile, params, study, store), study


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
