"""The command side of the book: notebook execution with papermill, the notebook cache, and the build.

Notebook sources are jupytext percent-format files in ``notebooks/``.
:func:`execute` converts each to a notebook and runs it with papermill into
``book/generated/NAME.ipynb`` (or ``--out``); inside, the notebook computes its page
with :mod:`lmcbook.page`.  A notebook is skipped when nothing it depends on has
changed: its source, parameters, profile, the library's source, and everything the
page recorded reading when it saved (store entries and other pages' CSVs).
:func:`build` renders the generated notebooks with Jupyter Book v1, execution off,
warnings as errors.

What an executed notebook shows (its parameters cells removed, only the alternatives
it chose) is the section after the imports; the execution report is the module's last section.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import papermill
import yaml
from tqdm.auto import tqdm
from traitlets.config import Config

from . import __version__, reference
from .data import check_available, resolve_device
from .files import (
    OUT_ENV,
    PROGRESS_ENV,
    STAGE_ENV,
    checked_out_dir,
    fsync_dir,
    git_sha,
    is_stale,
    library_hash,
    temp_dir,
)
from .page import file_sha, reads_path, record_path
from .specs import CODE_VERSION, STORE_ENV, RunSpec, SpecError, checked_path, store_root
from .store import SESSION_ENV, RunStore, StoreError, describe
from .studies import PROFILES, all_notebooks, check_run_count, part_of


# -- what an executed notebook shows: its parameters cells removed, and of its alternative cells (tagged
# ``when:KEY=VALUE``) only those the page chose with :meth:`lmcbook.page.Page.choose` --------------------------
def _finish_notebook(path: Path) -> None:
    """Tag the parameters and injected-parameters cells ``remove-cell`` (the provenance box shows the values) and
    show only the chosen alternatives (:func:`show_chosen`)."""
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "parameters" in tags or "injected-parameters" in tags:
            _remove(cell)
    show_chosen(nb)
    nbformat.write(nb, str(path))


WHEN = "when:"  #: the tag prefix of an alternative cell: ``when:KEY=VALUE``


class ChoiceError(ValueError):
    """A page's alternative cells and its choices (``page.choose``) do not fit together."""


def _remove(cell: Any) -> None:
    tags = cell.metadata.get("tags", [])
    if "remove-cell" not in tags:
        cell.metadata["tags"] = tags + ["remove-cell"]


def glued_words(nb: Any) -> dict[str, str]:
    """Return every value an executed notebook glued as a plain string (:meth:`lmcbook.page.Page.choose`), by key."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook")
            text = o.get("data", {}).get(f"{(meta or {}).get('mime_prefix', '')}text/plain")
            if meta and isinstance(text, str) and text[:1] in "'\"":
                try:
                    out[meta["name"]] = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    pass
    return out


def show_chosen(nb: Any) -> None:
    """Hide every alternative cell the page did not choose.

    A cell tagged ``when:KEY=VALUE`` is shown only if the page called ``page.choose(KEY, VALUE)``.  Raise
    :class:`ChoiceError` (the execution fails) for a malformed tag, for a key the page never chose, and for a
    chosen value that no cell is written for, naming the values that are.
    """
    chosen = glued_words(nb)
    written: dict[str, list[str]] = {}
    for cell in nb.cells:
        for tag in [t for t in cell.metadata.get("tags", []) if t.startswith(WHEN)]:
            key, sep, value = tag[len(WHEN):].partition("=")
            if not (sep and key and value):
                raise ChoiceError(f"cell tag {tag!r} is not of the form when:KEY=VALUE")
            written.setdefault(key, []).append(value)
            if key not in chosen:
                raise ChoiceError(f"a cell is tagged {tag!r}, but the page never chose {key!r}: call "
                                  f"page.choose({key!r}, ...) before the cell")
            if chosen[key] != value:
                _remove(cell)
    for key, values in written.items():
        if chosen[key] not in values:
            raise ChoiceError(f"the page chose {key} = {chosen[key]!r}, but no cell is tagged when:{key}={chosen[key]} "
                              f"(cells are written for {', '.join(map(repr, sorted(set(values))))})")


log = logging.getLogger("lmcbook.book")


# -- the notebook cache (jupyter-cache semantics) ---------------------------------------
def cache_key(name: str, profile: str, params: dict[str, Any], notebooks: str | Path = "notebooks") -> dict[str, Any]:
    """Return what a notebook's output depends on besides what it reads: its source, parameters, the library,
    which reference runs are committed (a page shows those that exist), and the run store it reads
    ($LMCBOOK_STORE, else ./runs, resolved)."""
    src = notebook_source(name, notebooks)
    return {"source": file_sha(src), "profile": profile, "params": json.loads(json.dumps(params, sort_keys=True)),
            "lmcbook": library_hash(), "references": reference.fingerprint(), "store": str(store_root().resolve())}


def is_cached(name: str, key: dict[str, Any], out: Path) -> bool:
    """Return True if ``out`` holds this notebook's output for ``key`` and nothing it read has changed since.

    A run the page looked up and found missing counts as changed: the page re-executes
    until the run exists.
    """
    record = record_path(out, name)
    if not (out / f"{name}.ipynb").exists() or not record.exists():
        return False
    try:
        rec = json.loads(record.read_text())
    except ValueError:
        return False
    if rec.get("key") != key or not _outputs_intact(rec.get("outputs"), out, name):
        return False
    reads = rec.get("reads", {})
    store = RunStore(reads.get("store", "runs"))
    for rid, sha in reads.get("runs", {}).items():
        manifest = store.path(rid) / "manifest.json"
        if sha is None or not manifest.exists() or file_sha(manifest) != sha:
            return False
    for name_read, sha in reads.get("csv", {}).items():
        path = out / "data" / f"{name_read}.csv"
        if (sha is None) != (not path.exists()) or (sha is not None and file_sha(path) != sha):
            return False  # changed, gone, or (read as absent, sha None) there now
    for name_read, sha in reads.get("references", {}).items():
        try:
            path = reference.csv_path(name_read)
        except SpecError:  # a reference that no longer exists
            return False
        if not path.exists() or file_sha(path) != sha:
            return False
    return True


def _outputs(out: Path, name: str) -> dict[str, str]:
    """Return the SHA-256 of a page's notebook and CSV in ``out``."""
    return {"notebook": file_sha(out / f"{name}.ipynb"), "csv": file_sha(out / "data" / f"{name}.csv")}


def _outputs_intact(recorded: dict[str, str] | None, out: Path, name: str) -> bool:
    """Return True if the page's notebook and CSV in ``out`` are the bytes its execution recorded."""
    try:
        return recorded == _outputs(out, name)
    except OSError:
        return False


def _record(name: str, key: dict[str, Any], out: Path) -> None:
    """Record a finished execution: its cache key, what the page said it read when it saved, the SHA-256 of the
    notebook and CSV it wrote (a changed or damaged output re-executes), and the library's code version (the
    execution report shows it for a page that later comes from the cache)."""
    reads = json.loads(reads_path(out, name).read_text())
    record_path(out, name).write_text(json.dumps({"key": key, "reads": reads, "code_version": CODE_VERSION,
                                                  "outputs": _outputs(out, name)}, sort_keys=True))


def notebook_source(name: str, notebooks: str | Path = "notebooks") -> Path:
    """Return the jupytext source of notebook ``name``, or raise naming the notebooks that exist."""
    part_of(name)
    path = Path(notebooks) / f"{name}.py"
    if not path.exists():
        raise SpecError(f"notebook source {str(path)!r} is missing: run lmcbook from the repository root "
                        "or pass --notebooks DIR")
    return path


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """Return the names and default values of a notebook source's ``parameters`` cell."""
    nb = jupytext.read(str(path))
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            scope: dict[str, Any] = {}
            exec(compile(cell.source, f"{path}:parameters", "exec"), {}, scope)  # noqa: S102 (our own source)
            return scope
    raise SpecError(f"notebook {str(path)!r} has no cell tagged 'parameters'")


def study_fields(name: str) -> list[str]:
    """Return the parameters of notebook ``name``: its study's fields but ``profile`` (its parameters cell lists
    exactly these, and ``profile``; a test checks it)."""
    cls = part_of(name).study_type
    return [f.name for f in fields(cls) if f.name != "profile"]


def check_parameters(name: str, profile: str, params: dict[str, Any], notebooks: str | Path = "notebooks") -> None:
    """Raise SpecError, before any compute, if ``params`` are unknown to the notebook's study or invalid for it."""
    if profile not in PROFILES:
        raise SpecError(f"profile={profile!r} is not allowed: expected one of {', '.join(map(repr, PROFILES))}")
    notebook_source(name, notebooks)
    if "profile" in params:
        raise SpecError("parameter 'profile' is set with --profile, not with -p")
    unknown = sorted(set(params) - set(study_fields(name)))
    if unknown:
        raise SpecError(f"unknown parameter(s) {unknown} for notebook {name!r}: expected some of "
                        f"{sorted(study_fields(name))}")
    part_of(name).resolve(profile, params)


def plan(names: list[str] | None, profile: str, params: dict[str, Any],
         notebooks: str | Path = "notebooks") -> dict[str, dict[str, Any]]:
    """Return each notebook's own parameters (by notebook, in execution order), checked before any compute.

    A parameter given to several notebooks (``-p NAME VALUE`` without ``--only``) goes to
    those whose study has that field, and only to them; a name that no selected
    notebook's study has is refused, naming the selected notebooks' parameters.
    """
    names = list(names) if names else all_notebooks()
    for name in names:
        notebook_source(name, notebooks)
    if "profile" in params:
        raise SpecError("parameter 'profile' is set with --profile, not with -p")
    known = {name: set(study_fields(name)) for name in names}
    unknown = sorted(set(params) - set().union(*known.values()))
    if unknown:
        by_part: dict[str, list[str]] = {}
        for name in names:
            by_part.setdefault(part_of(name).name, []).append(name)
        listing = "; ".join(f"{', '.join(nbs)}: {', '.join(study_fields(nbs[0])) or '(none)'}"
                            for nbs in by_part.values())
        raise SpecError(f"unknown parameter(s) {unknown}: no selected notebook has them; the selected notebooks' "
                        f"parameters are {listing}")
    out = {name: {k: v for k, v in params.items() if k in known[name]} for name in names}
    for name, own in out.items():
        check_parameters(name, profile, own, notebooks)
    studies = {(part_of(n).study_type, json.dumps(own, sort_keys=True, default=str)): part_of(n).resolve(profile, own)
               for n, own in out.items()}  # the pages of one part share its runs
    check_run_count(sum(s.run_count() for s in studies.values()), f"the plan ({len(names)} notebook(s))")
    return out


def preflight(own: dict[str, dict[str, Any]], profile: str) -> None:
    """Raise, once and before the first page starts, what would otherwise fail inside every page's kernel: a CUDA
    device on a machine without one (SpecError), a data set whose files are not where ``data_root`` says
    (DataError).  Nothing is loaded or computed."""
    seen = set()
    for name, params in own.items():
        study = part_of(name).resolve(profile, params)
        device = getattr(study, "device", "auto")
        data = (study.dataset, study.data_root, study.download) if hasattr(study, "data_root") else None
        if (device, data) in seen:
            continue
        seen.add((device, data))
        resolve_device(device)
        if data is not None:
            check_available(*data)


def parse_param(value: str, name: str = "VALUE") -> Any:
    """Return a ``-p NAME VALUE`` value parsed as YAML, so that lists and numbers work ("[0.5, 2]"), or raise
    SpecError naming the parameter when it is not YAML.

    YAML 1.1 reads ``3e-3`` (no dot) as a string; such numeric strings become floats.
    """
    try:
        return _numbers(yaml.safe_load(value))
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SpecError(f"-p {name} {value!r} is not allowed: it is not valid YAML ({problem}); expected a number, "
                        f"a word or a list such as -p {name} \"[0.5, 2]\"") from None


def _numbers(v: Any) -> Any:
    if isinstance(v, list):
        return [_numbers(x) for x in v]
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def execute(names: list[str] | None = None, profile: str = "quick", params: dict[str, Any] | None = None,
            out: str | Path | None = None, notebooks: str | Path = "notebooks",
            store: str | Path | None = None, force: bool = False) -> list[Outcome]:
    """Execute notebooks with papermill into ``out``; return one Outcome per notebook.

    Every notebook's parameters are checked before the first one runs (:func:`plan`: each
    notebook gets the parameters its study has).  Notebooks
    run in dependency order (the book's part order).  A notebook is skipped, and
    says so, when its source, parameters, profile and the library's source are
    unchanged since its last output, and so is every store entry and CSV it read
    (``force`` re-executes).  A failing notebook is reported with its failing
    cell, and the rest still run.  A notebook that never saves its page fails.
    """
    own = plan(names, profile, dict(params or {}), notebooks)
    preflight(own, profile)
    # papermill's parameter inference warns about what it cannot read in a parameters cell: keep only errors
    logging.getLogger("papermill.translators").setLevel(logging.ERROR)
    logging.getLogger("papermill").setLevel(logging.WARNING)  # -v shows the runs loaded and trained, not its cells
    names = list(own)
    store_path = checked_path(store, "--store") if store is not None else None
    out = checked_out_dir(out)
    recover(out)
    env_before = {k: os.environ.get(k) for k in (OUT_ENV, STORE_ENV, SESSION_ENV, PROGRESS_ENV, STAGE_ENV)}
    os.environ[OUT_ENV] = str(out.resolve())
    os.environ[PROGRESS_ENV] = "0"  # no progress bars inside the book's executed pages
    if store_path is not None:
        os.environ[STORE_ENV] = str(store_path.resolve())
    outcomes = []
    declared = _DeclaredParameters({k for p in own.values() for k in p})
    logging.getLogger("papermill").addFilter(declared)
    try:
        bar = tqdm(names, desc="notebooks", unit="nb", disable=None)
        for name in bar:
            bar.set_postfix_str(name)
            params = own[name]
            key = cache_key(name, profile, params, notebooks)
            if not force and is_cached(name, key, out):
                outcomes.append(Outcome(name, True, 0.0, cached=True))
                tqdm.write(f"{name}: skipped: cached (its source, parameters, library and inputs are unchanged)",
                           file=sys.stderr)
                continue
            outcomes.append(_execute_logged(name, key, profile, params, out, notebooks))
        for i, o in enumerate(outcomes):  # a page that read a later page's CSV as absent runs again, once
            if o.ok and _waiting_on(out, o.name):
                again = _execute_logged(o.name, cache_key(o.name, profile, own[o.name], notebooks), profile,
                                        own[o.name], out, notebooks)
                outcomes[i] = replace(again, seconds=o.seconds + again.seconds, loaded=o.loaded,
                                      trained=o.trained + again.trained)  # both executions, each run counted once
        write_report(out, outcomes, profile, own)
    finally:
        logging.getLogger("papermill").removeFilter(declared)
        for k, v in env_before.items():  # (SESSION_ENV and STAGE_ENV are set per notebook by _execute_one)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return outcomes


def _execute_logged(name: str, key: dict[str, Any], profile: str, params: dict[str, Any], out: Path,
                    notebooks: str | Path) -> Outcome:
    """Execute one page (:func:`_execute_one`) and log its outcome."""
    o = _execute_one(name, key, profile, params, out, notebooks, RunStore())
    msg = (f"{name}: {'done' if o.ok else 'FAILED'} in {o.seconds:.1f} s; "
           f"{o.loaded} run(s) loaded from the store, {o.trained} trained")
    tqdm.write(msg + (f"\n  {o.error}" if o.error else ""), file=sys.stderr)
    return o


def _waiting_on(out: Path, name: str) -> bool:
    """Return True when a page, at its last execution, read another page's CSV as absent
    (:meth:`lmcbook.page.Page.read_csv_if`) and that CSV exists now: a page later in the book wrote it, and the page
    can say what it shows (the width pages read the mechanism page's verdicts)."""
    record = record_path(out, name)
    if not record.exists():
        return False
    reads = json.loads(record.read_text()).get("reads", {}).get("csv", {})
    return any(sha is None and (out / "data" / f"{read}.csv").exists() for read, sha in reads.items())


class _DeclaredParameters(logging.Filter):
    """Drops papermill's "Passed unknown parameter: NAME" for the given names, which :func:`plan` has checked
    against each page's study (every parameters cell assigns each of its study's fields on a line of its own, so
    this is a guard: a ``-p`` that :func:`plan` accepted is never reported as unknown)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.messages = {f"Passed unknown parameter: {n}" for n in names}

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in self.messages


def _kernel_config(folder: Path) -> Config:
    """Return the kernel manager's configuration for one execution: on POSIX the kernel talks over IPC sockets in
    ``folder`` (a private temporary directory), not over TCP, which ipykernel warns is unencrypted (elsewhere, or
    where the sockets' paths would pass the 104 bytes a Unix socket's path may have, TCP as before)."""
    ip = str(folder.resolve() / "kernel")
    if os.name != "posix" or len(os.fsencode(ip)) > 96:
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": ip}})


def page_files(out: Path, name: str) -> list[Path]:
    """Return the files of one executed page in ``out``: its notebook, its CSV, and its two cache records."""
    return [out / f"{name}.ipynb", out / "data" / f"{name}.csv", reads_path(out, name), record_path(out, name)]


def failed_notebook(out: Path, name: str) -> Path:
    """Return where a failed execution's partial notebook is kept: OUT/.failed/NAME.ipynb."""
    return out / ".failed" / f"{name}.ipynb"


def _execute_one(name: str, key: dict[str, Any], profile: str, params: dict[str, Any], out: Path,
                 notebooks: str | Path, store: RunStore) -> Outcome:
    """Run one notebook with papermill and return what it did.

    The page is written into a folder of its own beside the output (:func:`stage`, on the same file system) and
    replaces the page's files (:func:`page_files`) only once complete (:func:`commit`): a failed, interrupted
    or killed execution keeps the last good notebook, CSV and records (or, where there were none, leaves none),
    and a failed one's partial notebook goes to :func:`failed_notebook`.  The notebook's store events carry a
    fresh session id, so the loads and trainings counted are its own even while other processes use the store.
    """
    nb = jupytext.read(str(notebook_source(name, notebooks)))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    session = os.environ[SESSION_ENV] = f"{name}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    t0 = time.perf_counter()
    ok, err = False, ""
    staged = stage(out, name)
    os.environ[STAGE_ENV] = str(staged.resolve())
    sockets = tempfile.TemporaryDirectory()  # the kernel's IPC sockets need a short path; nothing moves from there
    try:
        src_nb = staged / f"{name}.source.ipynb"
        jupytext.write(nb, str(src_nb))
        partial = staged / f"{name}.ipynb"
        try:
            papermill.execute_notebook(str(src_nb), str(partial),
                                       parameters={"profile": profile, **params}, kernel_name="python3",
                                       language="python", progress_bar=False, cwd=os.getcwd(),
                                       config=_kernel_config(Path(sockets.name)))
            src_nb.unlink()
            _finish_notebook(partial)
            if not reads_path(staged, name).exists():
                err = "the notebook never saved its page (page.save): its CSV and dependencies are unrecorded"
            else:
                _record(name, key, staged)
                commit(staged, out)
                ok = True
        except papermill.PapermillExecutionError as e:
            first = next((ln for ln in e.source.splitlines() if ln.strip()), "")
            err = f"cell {e.exec_count} (`{first.strip()[:80]}`): {e.ename}: {e.evalue}"
        except Exception as e:  # a dead kernel or a broken source: report it, run the rest
            err = f"{type(e).__name__}: {e}"
        loaded, trained = _run_counts(store.events(session=session), reads_path(out if ok else staged, name))
        if not ok:
            err += "; " + _keep_partial(out, name, partial)
        else:
            failed_notebook(out, name).unlink(missing_ok=True)
    finally:  # (Ctrl-C included: the last good page was never touched)
        shutil.rmtree(staged, ignore_errors=True)
        sockets.cleanup()
    _log_runs(name, loaded, trained, store)
    return Outcome(name, ok, time.perf_counter() - t0, len(loaded), len(trained), err)


def _run_counts(events: list[dict[str, Any]], reads: Path) -> tuple[set[str], set[str]]:
    """Return the ids of the runs a page loaded from the store and those it trained, each run once (a run trained
    and then loaded again is trained): from its own events, and from what the page recorded reading (which a
    read-only store, whose event log cannot be written, still has)."""
    try:
        status = json.loads(reads.read_text()).get("status", {})
    except (OSError, ValueError):
        status = {}
    trained = {e["id"] for e in events if e["event"] == "trained"} | {r for r, s in status.items() if s == "trained"}
    loaded = {e["id"] for e in events if e["event"] == "loaded"} | {r for r, s in status.items() if s == "loaded"}
    return loaded - trained, trained


def _log_runs(name: str, loaded: set[str], trained: set[str], store: RunStore) -> None:
    """Log (shown with ``lmcbook -v``) each run a page loaded or trained, described from its store entry."""
    if not log.isEnabledFor(logging.INFO):
        return
    for what, ids in (("loaded", loaded), ("trained", trained)):
        for rid in sorted(ids):
            try:
                spec = RunSpec.from_dict(json.loads((store.path(rid) / "spec.json").read_text())["spec"])
                log.info("%s: %s run %s: %s", name, what, rid[:12], describe(spec))
            except (OSError, ValueError, KeyError, StoreError):
                log.info("%s: %s run %s", name, what, rid[:12])


STAGING = ".staging"  #: in the output folder: pages being written, each in a folder of its own
COMMITTED = ".commit"  #: the suffix a staged page's folder is renamed to once complete (the commit point)


def stage(out: Path, name: str) -> Path:
    """Return a new folder in ``OUT/.staging/`` for an execution of page ``name`` (:func:`lmcbook.files.temp_dir`):
    the kernel writes the page's CSV and record there ($LMCBOOK_STAGE), and papermill its notebook."""
    return temp_dir(out / STAGING, name)


def commit(staged: Path, out: Path) -> None:
    """Publish a complete staged page: rename its folder to ``*.commit`` (one atomic rename, the commit point),
    then move each file over the old one.  A kill before the rename leaves the old page; a kill after it, the new
    page once :func:`recover` finishes the moves (every ``execute`` and ``build`` does that first)."""
    done = staged.with_name(staged.name + COMMITTED)
    os.rename(staged, done)
    fsync_dir(done.parent)
    _roll_forward(done, out)


def _roll_forward(done: Path, out: Path) -> None:
    """Move every file of the committed page ``done`` to its place in ``out``, then remove ``done``."""
    for src in sorted(p for p in done.rglob("*") if p.is_file()):
        dest = out / src.relative_to(done)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(src, dest)
        except FileNotFoundError:  # another process finishing the same commit moved it first
            pass
    shutil.rmtree(done, ignore_errors=True)


def recover(out: Path) -> None:
    """Finish the commits a killed execution left in ``OUT/.staging/`` and remove the pages it left unfinished
    (those of processes that died on this host), so ``out`` holds each page old or new, never mixed."""
    staging = Path(out) / STAGING
    if not staging.is_dir():
        return
    for p in sorted(staging.iterdir()):
        if p.name.endswith(COMMITTED):
            _roll_forward(p, Path(out))
        elif is_stale(p, min_age_s=float("inf")):
            shutil.rmtree(p, ignore_errors=True)


def _keep_partial(out: Path, name: str, partial: Path) -> str:
    """Keep a failed execution's partial notebook aside; return a sentence saying what the page now holds."""
    where = ""
    if partial.exists():
        failed_notebook(out, name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, failed_notebook(out, name))
        where = f"; the partial output is {failed_notebook(out, name)}"
    if (out / f"{name}.ipynb").exists():
        return f"kept the last good notebook and CSV of {name}" + where
    return f"no earlier good output: {name} has no notebook or CSV" + where


def regenerate_reference(name: str, data_root: str | None = None, store: str | Path | None = None,
                         root: Path | None = None, notebooks: str | Path = "notebooks") -> Path:
    """Execute reference run ``name`` with ``lmcbook execute --out`` into a temporary folder, then copy the CSV it
    wrote to results/NAME/ with its provenance (:func:`lmcbook.reference.record`); return the CSV's path.
    Nothing in results/ changes unless the execution succeeds."""
    ref = reference.get(name)
    params = reference.params_for(name, data_root)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = execute([ref.notebook], ref.profile, params, out=tmp, notebooks=notebooks, store=store, force=True)
        if not outcomes[0].ok:
            raise RuntimeError(f"reference {name!r}: notebook {ref.notebook} failed: {outcomes[0].error}")
        return reference.record(name, Path(tmp) / "data" / f"{ref.notebook}.csv", params,
                                time.perf_counter() - t0, training_seconds(Path(tmp), ref.notebook, store),
                                data_root, root)


# -- building the book ------------------------------------------------------------------
BOOK_SOURCES = ("_config.yml", "_toc.yml", "book")


def stale_pages(out: Path) -> dict[str, list[str]]:
    """Return, by page, the other pages whose CSV it read and which have been executed again since (``lmcbook execute
    --only NAME`` with new parameters, say): its numbers are no longer theirs."""
    stale = {}
    for name in all_notebooks():
        try:
            reads = json.loads(reads_path(out, name).read_text()).get("csv", {})
        except (OSError, ValueError):
            continue
        changed = [n for n, sha in reads.items() if sha is not None and (out / "data" / f"{n}.csv").exists()
                   and file_sha(out / "data" / f"{n}.csv") != sha]
        if changed:
            stale[name] = sorted(changed)
    return stale


def mark_stale(notebook: Path, changed: list[str]) -> None:
    """Put a warning after the first Markdown cell (its title and opening) of an executed notebook that was built
    from earlier executions of ``changed``."""
    nb = nbformat.read(str(notebook), as_version=4)
    pages = ", ".join(f"`{n}`" for n in changed)
    text = (f":::{{warning}}\nThis page was built from an earlier execution of {pages}, which has been executed again "
            "since (with other parameters, say, through `lmcbook execute --only`): its numbers and verdicts are not "
            "that execution's. Execute the whole book (`lmcbook execute`, or `make book`) to bring it up to date.\n:::")
    nb.cells = [c for c in nb.cells if "stale-warning" not in c.metadata.get("tags", [])]  # one, at each build
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": ["stale-warning"]})
    nb.cells.insert(1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0, cell)
    nbformat.write(nb, str(notebook))


def build(src: str | Path = ".", generated: str | Path | None = None, builddir: str | Path | None = None) -> Path:
    """Build the book with Jupyter Book v1 (-W -n --keep-going) and return the path of index.html.

    With ``generated`` (executed notebooks somewhere other than book/generated),
    the book's sources are staged with them in ``builddir`` first, so that the
    repository's own book/generated is never touched.
    """
    src = Path(src).resolve()
    recover(Path(generated) if generated is not None else src / "book" / "generated")
    root = src
    if generated is not None and Path(generated).resolve() != (src / "book" / "generated").resolve():
        if builddir is None:
            raise SpecError("builddir=None is not allowed with generated=DIR: pass a staging directory")
        root = Path(builddir).resolve() / "src"
        if root.exists():
            shutil.rmtree(root)
        for name in BOOK_SOURCES:
            p = src / name
            if p.is_dir():
                shutil.copytree(p, root / name, ignore=shutil.ignore_patterns("generated"))
            else:
                root.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, root / name)
        shutil.copytree(Path(generated), root / "book" / "generated")
    missing = [nb for nb in all_notebooks() if not (root / "book" / "generated" / f"{nb}.ipynb").exists()]
    missing += [f for f in (REPORT_PAGE, BUILD_LINE) if not (root / "book" / "generated" / f).exists()]
    if missing:
        raise SpecError(f"executed notebooks missing: {missing}. Run `lmcbook execute` first (or `make book`).")
    for name, changed in stale_pages(root / "book" / "generated").items():
        mark_stale(root / "book" / "generated" / f"{name}.ipynb", changed)
    cli = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"
    cmd = [sys.executable, "-c", cli, "build", str(root), "-W", "-n", "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}\n"
                           f"{proc.stderr[-4000:]}")
    return root / "_build" / "html" / "index.html"


__all__ = ["cache_key", "BUILD_LINE", "REPORT_JSON", "REPORT_PAGE", "WHEN", "ChoiceError", "Outcome", "build_line",
           "ci_run", "report_markdown", "write_report", "build", "check_parameters", "execute", "failed_notebook",
           "glued_words", "is_cached", "notebook_parameters", "page_files", "parse_param", "plan",
           "regenerate_reference", "show_chosen", "study_fields", "training_seconds", "stale_pages", "mark_stale"]


# ---- The execution report ----
# The execution report of ``lmcbook execute`` (``execution.json``, the report page and the landing page's build
# line): what each notebook's latest execution did, and the build's facts.

@dataclass
class Outcome:
    """What executing one notebook did."""

    name: str
    ok: bool
    seconds: float
    loaded: int = 0
    trained: int = 0
    error: str = ""
    cached: bool = False

REPORT_JSON = "execution.json"  #: in the output folder: every notebook's last execution, and the build's facts
REPORT_PAGE = "report.md"  #: the execution report page (About this book), rendered from REPORT_JSON
BUILD_LINE = "build_info.md"  #: one line for the landing page: commit, profile, date, CI run


def ci_run() -> dict[str, str] | None:
    """Return the CI run that is building the book (GitHub Actions' ``GITHUB_SHA``, ``GITHUB_RUN_ID`` and
    ``GITHUB_SERVER_URL``), with its URL, or None when they are not set."""
    sha, run, server = (os.environ.get(k) for k in ("GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_SERVER_URL"))
    if not (sha and run and server):
        return None
    repo = os.environ.get("GITHUB_REPOSITORY", "")
    url = f"{server}/{repo}/actions/runs/{run}" if repo else f"{server}/actions/runs/{run}"
    return {"sha": sha, "run_id": run, "url": url}


def _uncommitted() -> bool | None:
    """Return whether the checkout the library runs from has uncommitted changes (None outside a checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def _machine() -> str:
    import platform

    import torch

    gpu = f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPU cores{gpu})"


def write_report(out: Path, outcomes: list[Outcome], profile: str, params: dict[str, dict[str, Any]]) -> dict:
    """Write the execution report of ``out`` (``execution.json``, ``report.md`` and ``build_info.md``) and return it.

    Every notebook of the book has a row: what the latest :func:`execute` that included it did (``executed``,
    ``cached`` or ``failed``), its wall time in that execution, the runs it loaded and trained, and the code
    version its output was computed with; a notebook no execution has included yet is ``not executed``.  The
    build's facts: commit, profile, data sets, machine, date, and the CI run when one is building.
    """
    path = out / REPORT_JSON
    try:
        before = json.loads(path.read_text()).get("notebooks", {}) if path.exists() else {}
    except ValueError:
        before = {}
    rows = dict(before)
    for o in outcomes:
        prev = rows.get(o.name, {})
        try:
            rec = json.loads(record_path(out, o.name).read_text())
        except (OSError, ValueError):
            rec = {}
        status = "cached" if o.cached else "executed" if o.ok else "failed"
        study = part_of(o.name).resolve(profile, params.get(o.name, {}))
        # a failed execution keeps the last good output (if any): its record says what computed it
        rows[o.name] = {"status": status, "seconds": round(o.seconds, 1), "loaded": o.loaded, "trained": o.trained,
                        "code_version": rec.get("code_version", prev.get("code_version")), "error": o.error,
                        "profile": profile if o.ok else prev.get("profile"),
                        "dataset": getattr(study, "dataset", None) if o.ok else prev.get("dataset")}
    datasets = {r["dataset"] for r in rows.values() if r.get("dataset")}
    report = {"notebooks": {n: rows[n] for n in all_notebooks() if n in rows},
              "build": {"commit": git_sha(), "uncommitted_changes": _uncommitted(), "profile": profile,
                        "datasets": sorted(datasets), "machine": _machine(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "lmcbook": __version__,
                        "code_version": CODE_VERSION, "ci": ci_run()}}
    _write_atomic(path, json.dumps(report, indent=1))  # notebooks in the book's order
    _write_atomic(out / REPORT_PAGE, report_markdown(report))
    _write_atomic(out / BUILD_LINE, build_line(report))
    return report


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def build_line(report: dict) -> str:
    """Return the landing page's line about this build: commit, profile, date, and the CI run if there is one."""
    b = report["build"]
    commit = f"commit `{(b['commit'] or 'unknown')[:10]}`" + (" with uncommitted changes" if b.get(
        "uncommitted_changes") else "")
    ci = f"; [CI run {b['ci']['run_id']}]({b['ci']['url']})" if b.get("ci") else ""
    profiles = sorted({str(r.get("profile")) for r in report["notebooks"].values() if r.get("profile")})
    profile = f"profile `{b['profile']}`" if profiles in ([], [b["profile"]]) else \
        "profiles " + ", ".join(f"`{p}`" for p in profiles) + " (mixed)"
    return (f"*This build: {commit}, {profile}, {b['date']}{ci}. What each page did is in the "
            "{doc}`execution report <report>`.*\n")


def report_markdown(report: dict) -> str:
    """Return the execution report page (MyST Markdown) of :func:`write_report`'s record."""
    b, rows = report["build"], report["notebooks"]
    lines = ["# Execution report", "",
             f"This book was built from commit `{b['commit'] or 'unknown'}`"
             f"{' with uncommitted changes' if b.get('uncommitted_changes') else ''} at the `{b['profile']}` "
             f"profile on {b['date']}, on {b['machine']}, with lmcbook {b['lmcbook']} "
             f"(code version {b['code_version']}). Data sets: {', '.join(b['datasets']) or 'none'}."]
    if b.get("ci"):
        lines += ["", f"Built in CI: [run {b['ci']['run_id']}]({b['ci']['url']}), commit `{b['ci']['sha']}`."]
    lines += ["", "Each notebook as the latest `lmcbook execute` that included it left it: *executed* (run now), "
              "*cached* (its source, parameters, library and inputs were unchanged, so its last output was kept) or "
              "*failed* (the last good output was kept). Wall time, runs loaded and runs trained are that "
              "execution's; the code version is the one its output was computed with.", "",
              "| notebook | status | wall time (s) | runs loaded | runs trained | code version |",
              "|---|---|---:|---:|---:|---:|"]
    for name in all_notebooks():
        r = rows.get(name)
        if r is None:
            lines.append(f"| {name} | not executed | | | | |")
            continue
        lines.append(f"| {{doc}}`{name} <{name}>` | {r['status']} | {r['seconds']:.1f} | {r['loaded']} | "
                     f"{r['trained']} | {'–' if r['code_version'] is None else r['code_version']} |")
    counts = {s: sum(r["status"] == s for r in rows.values()) for s in ("executed", "cached", "failed")}
    lines.append(f"| **total** | {', '.join(f'{n} {s}' for s, n in counts.items())} | "
                 f"{sum(r['seconds'] for r in rows.values()):.1f} | {sum(r['loaded'] for r in rows.values())} | "
                 f"{sum(r['trained'] for r in rows.values())} | |")
    profiles = sorted({str(r.get("profile")) for r in rows.values() if r.get("profile")})
    if len(profiles) > 1:  # an `execute --only` at another profile replaced some pages
        lines += ["", "**Mixed profiles.** These pages come from executions at different profiles: " + "; ".join(
            f"`{p}`: {', '.join(n for n, r in rows.items() if r.get('profile') == p)}" for p in profiles) + "."]
    failed = [(n, r["error"]) for n, r in rows.items() if r["status"] == "failed"]
    if failed:
        lines += ["", "Failures:", ""] + [f"- `{n}`: {e}" for n, e in failed]
    lines += ["", "## Reference runs", "",
              "Results too costly for this build are committed under `results/` with their provenance, and the pages "
              "show them beside this build's runs. `lmcbook reference NAME` regenerates one and rewrites its "
              "provenance.", ""]
    for name in reference.REFERENCES:
        try:
            _, prov = reference.load(name)
            lines.append(f"- {reference.describe(name, prov)}.")
        except (OSError, ValueError) as e:  # not committed, or not the CSV its provenance names
            lines.append(f"- `{name}`: not available ({e}).")
    return "\n".join(lines) + "\n"


def training_seconds(out: Path, notebook: str, store: str | Path | None) -> float:
    """Return the seconds the store recorded training the runs a page read (stacked runs: their share)."""
    runs = set(json.loads((Path(out) / ".cache" / f"{notebook}.reads.json").read_text())["runs"])
    events = RunStore(store).events()
    return round(sum(e.get("seconds", 0.0) for e in events if e["event"] == "trained" and e["id"] in runs), 1)
