"""Content-addressed run store: train once, load everywhere.

An entry lives at ``ROOT/<run id>/`` (64 hex digits, nothing else) and holds

- ``spec.json``: the RunSpec, its id, the code version, the input shape and class count;
- ``model.safetensors``: the weights and buffers (and ``momentum.safetensors`` for runs that stop early);
- ``history.json``, ``metrics.json``, ``provenance.json``;
- ``manifest.json``: the SHA-256 of every other file, checked on load.

Writes go to ``ROOT/.tmp/<what>__<host>__<pid>__<random>/`` (``lmcbook.files.tmp_prefix``) and
are renamed into place, so a killed process never leaves a half entry: at worst a
stale temporary directory, which ``gc`` removes.  A per-run file lock (fcntl,
released by the kernel when its holder dies) keeps two processes from training the
same run; correctness never depends on it, because the rename is atomic and the
first finished entry wins.  Any number of processes may share a store.

Every load and training is appended to ``ROOT/events.jsonl`` with the process id and
the session ($LMCBOOK_SESSION, set by ``lmcbook execute`` per notebook), so that each
execution counts only its own events.  The log is best effort: a read-only store
skips it (one :class:`StoreWarning`), and readers skip a torn line (one warning);
reading a store never needs write access.  ``lmcbook store verify`` reports torn
lines, entries without a manifest and damaged derived results; ``gc`` repairs or
removes them.  The log's methods are :class:`EventLog`, below.

Derived results (frames measured from stored runs) live in ``ROOT/derived/`` keyed by
their kind, their key, the library's source hash and the SHA-256 of the weights of
every run their key names, so retrained weights are never reported from an old cache
(:class:`DerivedResults`, below).  The store's error, warning and file formats are in ``files.py``.

Run many specs: in-process one after another, or on a Dask cluster; and a study's runs (its data set, its
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

import hashlib
import json
import logging
import os
import platform
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from filelock import FileLock
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .data import DataError, Dataset, load, load_spec, resolve_device
from .files import (
    _HEX,
    StoreError,
    StoreWarning,
    _read_frame,
    _sha256,
    _warn_once,
    _write_frame,
    _write_json,
    is_stale,
    share,
    source_hash,
    temp_dir,
    tmp_prefix,
    write_atomic,
)
from .merge import pair_summary
from .models import build
from .specs import CODE_VERSION, STORE_ENV, RunSpec, SpecError, check_scheduler, checked_path, store_root
from .studies import NoiseStudy, Pair, Recipe
from .train import (
    STACK_MAX_UNITS,
    DivergedError,
    TrainedRun,
    check_trainable,
    group_key,
    remove_checkpoint,
    train,
    train_many,
)

log = logging.getLogger("lmcbook.store")

_READ_ORDER = ("missing", "present", "loaded", "trained")
#: What a store's root holds besides its entries (their folders are named by run id).
_STORE_NAMES = {".tmp", ".locks", ".checkpoints", "derived", "datasets", "events.jsonl"}
_FILES = ("spec.json", "model.safetensors", "history.json", "metrics.json", "provenance.json")


def describe(spec: RunSpec) -> str:
    """Return a short human description of a run, for logs."""
    m, t = spec.model, spec.train
    depth = f" L={m.depth}" if m.arch == "mlp" else ""
    child = f" child@{spec.spawn_step}" if spec.parent is not None else ""
    child += f" fine-tuned from {spec.init.short_id}" if spec.init is not None else ""
    task = f" ({spec.data.transform})" if spec.data.transform != "none" else ""
    depth += f" init×{m.init_scale:g}" if m.init_scale != 1.0 else ""
    return (f"{m.arch}{depth} {m.channels}ch (x{m.width:g}) norm={m.norm} bias={m.bias} on {spec.data.name}{task}, "
            f"seed={t.seed} data_seed={t.data_seed} lr={t.lr:g} B={t.batch_size} wd={t.weight_decay:g}{child}")


def _check_identity(path: Path) -> None:
    """Raise StoreError unless the spec recorded in the entry at ``path`` hashes to the entry's folder name (an
    entry copied or moved into another run's folder would otherwise be loaded as that run)."""
    rid = path.name
    try:
        meta = json.loads((path / "spec.json").read_text())
        cv = meta.get("code_version")
        recorded = RunSpec.from_dict(meta["spec"]).run_id(cv if isinstance(cv, int) else CODE_VERSION)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StoreError(f"run {rid[:12]}: spec.json cannot be read as a run spec ({err}); delete {path} "
                         "(or run `lmcbook store gc`) and it will be retrained") from err
    if recorded != rid or meta.get("id") != rid:
        raise StoreError(f"run {rid[:12]}: the entry holds run {recorded[:12]} (its spec.json hashes to another "
                         f"id: copied or moved into this folder?); delete {path} (or run `lmcbook store gc`) "
                         "and it will be retrained")


#: The widest MLPs trained side by side (lmcbook bench measured 1.49x at 1024 units and 0.97x at 2048).
SIDE_BY_SIDE_MAX_UNITS = 1024
_SIDE: dict[str, Any] = {}  # a side-by-side training worker's store and data (set once per worker process)


def _side_worker_init(root: str, data: Dataset, threads: int) -> None:
    torch.set_num_threads(threads)
    _SIDE.update(store=RunStore(root), data=data)


def _side_worker_train(spec: RunSpec) -> tuple | None:
    """Train and store one run in a worker; return a divergence's (run id, step, loss, lr), else None."""
    try:
        _SIDE["store"].get_or_train(spec, data=_SIDE["data"], progress=False)
    except DivergedError as err:
        return err.run_id, err.step, err.value, err.lr
    return None


# -- the event log -------------------------------------------------------------------------------------------------
# The run store's event log, ``ROOT/events.jsonl``: every load and training, appended with the process id and the
# session ($LMCBOOK_SESSION, set by ``lmcbook execute`` per notebook), so that each execution counts only its own
# events.  The log is best effort: a read-only store skips it (one warning), readers skip a torn line (one warning),
# and ``lmcbook store gc`` repairs it.  :class:`EventLog` is mixed into :class:`lmcbook.store.RunStore`.

#: The environment variable naming the current session (one notebook execution): its events carry it.
SESSION_ENV = "LMCBOOK_SESSION"


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


class EventLog:
    """The event log's methods of :class:`~lmcbook.store.RunStore` (which provides ``root`` and ``_note``)."""

    #: The store's root folder (set by :class:`~lmcbook.store.RunStore`).
    root: Path

    def _event(self, event: str, spec: RunSpec, **extra: Any) -> None:
        """Append an event (best effort: a store that cannot be written skips it, with one warning)."""
        self._note(spec, event)
        line = json.dumps({"time": time.time(), "event": event, "id": spec.id, "pid": os.getpid(),
                           "session": os.environ.get(SESSION_ENV), **extra})
        p = self.root / "events.jsonl"
        try:
            with open(p, "ab") as f:
                torn = f.tell() > 0 and _last_byte(p) != b"\n"  # never append to a torn line
                f.write((b"\n" if torn else b"") + line.encode() + b"\n")
        except OSError as err:
            _warn_once("events", self.root, f"the run store {self.root} cannot be written ({err.strerror}): "
                                            "its event log is not updated; reading goes on")

    def _event_lines(self) -> tuple[list[dict[str, Any]], list[int]]:
        """Return the readable events and the (1-based) numbers of the torn lines."""
        p = self.root / "events.jsonl"
        if not p.exists():
            return [], []
        good, torn = [], []
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
                if not isinstance(ev, dict) or "event" not in ev:
                    raise ValueError(line)
                good.append(ev)
            except ValueError:
                torn.append(i)
        return good, torn

    def events(self, session: str | None = None) -> list[dict[str, Any]]:
        """Return every recorded load and training, oldest first (only ``session``'s, if given).

        A torn line (a write cut short) is skipped with one warning; ``lmcbook store gc`` repairs the log.
        """
        good, torn = self._event_lines()
        if torn:
            _warn_once("torn", self.root, f"skipped {len(torn)} torn line(s) of {self.root / 'events.jsonl'} "
                                          f"(line {torn[0]}{', ...' if len(torn) > 1 else ''}); "
                                          "`lmcbook store gc` repairs it")
        return good if session is None else [e for e in good if e.get("session") == session]

    def torn_event_lines(self) -> list[int]:
        """Return the (1-based) numbers of the event log's torn lines."""
        return self._event_lines()[1]

    def repair_events(self) -> int:
        """Rewrite the event log without its torn lines (atomically); return how many were dropped."""
        good, torn = self._event_lines()
        if torn:
            p = self.root / "events.jsonl"
            write_atomic(p, "".join(json.dumps(e) + "\n" for e in good))
        return len(torn)


# -- derived results -----------------------------------------------------------------------------------------------
# The run store's derived results: frames measured from stored runs, cached in ``ROOT/derived/`` keyed by their
# kind, their key, the library's source hash and the SHA-256 of the weights of every run their key names, so
# retrained weights are never reported from an old cache.  :class:`DerivedResults` is mixed into
# :class:`lmcbook.store.RunStore`.


def _run_ids_in(obj: Any) -> set[str]:
    """Return every run id (64 lowercase hex digits) among the strings nested in ``obj``."""
    if isinstance(obj, str):
        return {obj} if _HEX.match(obj) else set()
    if isinstance(obj, dict):
        return set().union(*map(_run_ids_in, obj.values())) if obj else set()
    if isinstance(obj, (list, tuple, set)):
        return set().union(*map(_run_ids_in, obj)) if obj else set()
    return set()


class DerivedResults:
    """The derived-result methods of :class:`~lmcbook.store.RunStore` (which provides ``root``, ``check_writable``,
    ``remove`` and ``_publish``)."""

    #: The store's root folder (set by :class:`~lmcbook.store.RunStore`).
    root: Path

    def weights_sha(self, rid: str) -> str | None:
        """Return the SHA-256 of a stored run's weights (from its manifest), or None if it has no readable one."""
        try:
            return json.loads((self.root / rid / "manifest.json").read_text())["model.safetensors"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def derived_path(self, kind: str, key: dict[str, Any]) -> Path:
        """Return the directory of the derived result (``kind``, ``key``) at this library's source hash and the
        current weights of every run ``key`` names (by their 64-hex-digit ids)."""
        weights = {rid: self.weights_sha(rid) for rid in sorted(_run_ids_in(key))}
        payload = json.dumps({"kind": kind, "key": key, "source_hash": source_hash(), "weights": weights},
                             sort_keys=True, default=str)
        return self.root / "derived" / hashlib.sha256(payload.encode()).hexdigest()

    def has_derived(self, kind: str, key: dict[str, Any]) -> bool:
        """Return True if the derived result (``kind``, ``key``) is cached."""
        return (self.derived_path(kind, key) / "meta.json").exists()

    def verify_derived(self, path: Path) -> None:
        """Raise StoreError naming the file if a derived result's meta.json or one of its frames is missing or
        damaged (its SHA-256 does not match, or, for entries written before the hashes were kept, it cannot be
        read)."""
        path = Path(path)
        try:
            meta = json.loads((path / "meta.json").read_text())
            files = meta.get("files")
            if files is not None:
                for name, digest in files.items():
                    if not (path / name).exists() or _sha256(path / name) != digest:
                        raise StoreError(f"derived result {path}: {name} is damaged or missing (sha256 mismatch); "
                                         "`lmcbook store gc` removes it, and it is recomputed when next needed")
            for name in meta["frames"]:
                _read_frame(path, name, meta.get("columns", {}).get(name))
        except StoreError:
            raise
        except Exception as err:  # a torn meta.json, a damaged zip (BadZipFile), a truncated CSV, ...
            raise StoreError(f"derived result {path} cannot be read ({type(err).__name__}: {err}); "
                             "`lmcbook store gc` removes it, and it is recomputed when next needed") from err

    def derived_entries(self) -> list[Path]:
        """Return the directories of every derived result."""
        d = self.root / "derived"
        return sorted(p for p in d.iterdir() if p.is_dir()) if d.exists() else []

    def damaged_derived(self) -> list[tuple[Path, str]]:
        """Return each damaged derived result with what is wrong with it."""
        out = []
        for p in self.derived_entries():
            try:
                self.verify_derived(p)
            except StoreError as err:
                out.append((p, str(err)))
        return out

    def cached_frames(self, kind: str, key: dict[str, Any],
                      compute: Callable[[], dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
        """Return frames computed from stored runs, computing and caching them on first use.

        The cache key is ``kind``, ``key`` (which must name the run ids read), the
        SHA-256 of those runs' weights and the hash of the lmcbook source, so any
        change to the library, or a run retrained with other weights, recomputes.
        Entries live in ``ROOT/derived/<sha256>/``, written atomically, one file per
        frame: exact columns in an ``.npz`` (read back with ``allow_pickle=False``),
        or an exact CSV (%.17g) for a frame with a column that is neither numeric nor
        text; ``meta.json`` keeps every file's SHA-256.  A damaged entry is reported
        (naming its file) and recomputed; a store that cannot be written computes
        without caching (one warning).
        """
        path = self.derived_path(kind, key)
        digest, damaged = path.name, False
        if (path / "meta.json").exists():
            try:
                self.verify_derived(path)
                meta = json.loads((path / "meta.json").read_text())
                return {name: _read_frame(path, name, meta.get("columns", {}).get(name)) for name in meta["frames"]}
            except StoreError as err:
                warnings.warn(f"{err}: recomputing it", StoreWarning, stacklevel=2)
                log.warning("%s: recomputing it", err)
                damaged = True
        frames = compute()
        try:
            self.check_writable()
        except StoreError as err:
            _warn_once("derived", self.root, f"{err}; derived results are computed but not cached")
            return frames
        if damaged:
            self.remove([path])
        tmp = temp_dir(self.root / ".tmp", f"derived-{digest[:12]}")
        try:
            columns = {name: _write_frame(tmp, name, df) for name, df in frames.items()}
            files = {p.name: _sha256(p) for p in sorted(tmp.iterdir())}
            _write_json(tmp / "meta.json", {"kind": kind, "key": key, "frames": sorted(frames),
                                            "columns": {k: v for k, v in columns.items() if v is not None},
                                            "files": files, "source_hash": source_hash(), "created": time.time()})
            share(tmp)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._publish(tmp, path, f"derived result {digest[:12]}", done="meta.json")
        except OSError as err:  # a full file system: the frames are computed all the same
            _warn_once("derived", self.root, f"derived results are computed but not cached in {self.root} ({err})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return frames


class RunStore(EventLog, DerivedResults):
    """A directory of trained runs keyed by spec hash; its event log and its derived results are the methods of
    ``EventLog`` and ``DerivedResults``."""

    def __init__(self, root: str | Path | None = None, checkpoint_seconds: float = 30.0) -> None:
        self.root = checked_path(root, "store") if root is not None else store_root()
        #: A run trained alone writes a checkpoint to ``ROOT/.checkpoints/`` at the end of an epoch once this many
        #: seconds have passed since the last (so short runs write none); killed, it resumes from there bitwise
        #: (:func:`lmcbook.train.train`), and the checkpoint is removed once the run is stored.
        self.checkpoint_seconds = checkpoint_seconds
        #: The read log: every run id this instance looked up, loaded or trained, with the furthest of
        #: "missing" < "present" < "loaded" < "trained".  A book page's dependencies are read from it.
        self.reads: dict[str, str] = {}

    def _note(self, spec: RunSpec, status: str) -> None:
        if _READ_ORDER.index(status) >= _READ_ORDER.index(self.reads.get(spec.id, "missing")):
            self.reads[spec.id] = status

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # -- paths ------------------------------------------------------------------------
    def path(self, spec_or_id: RunSpec | str) -> Path:
        """Return the entry directory of a spec or run id (derived from the hex id alone)."""
        rid = spec_or_id.id if isinstance(spec_or_id, RunSpec) else str(spec_or_id)
        if not _HEX.match(rid):
            raise StoreError(f"run id {rid!r} is not allowed: expected 64 lowercase hex digits")
        return self.root / rid

    def has(self, spec: RunSpec) -> bool:
        """Return True if a finished entry for ``spec`` exists (and note the lookup in :attr:`reads`)."""
        found = (self.path(spec) / "manifest.json").exists()
        self._note(spec, "present" if found else "missing")
        return found

    def foreign_names(self) -> list[str]:
        """Return the names in the store's root that no store makes (none for a run store, or an empty folder)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name not in _STORE_NAMES and not _HEX.match(p.name))

    def ids(self) -> list[str]:
        """Return the ids of all entries in the store."""
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if _HEX.match(p.name))

    # -- writing ----------------------------------------------------------------------
    def check_writable(self) -> None:
        """Raise StoreError unless the store root can be created and written."""
        try:
            (self.root / ".tmp").mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root / ".tmp"):
                pass
        except OSError as err:
            raise StoreError(f"store root {str(self.root)!r} is not writable ({err.strerror}): "
                             f"set {STORE_ENV} or pass RunStore(root) to a writable directory") from err

    def save(self, run: TrainedRun, data: Dataset) -> Path:
        """Write ``run`` atomically into the store and return its entry path (an existing entry wins)."""
        self.check_writable()
        final = self.path(run.spec)
        tmp = temp_dir(self.root / ".tmp", run.spec.id[:16])
        try:
            state = {k: v.detach().to("cpu").contiguous().clone() for k, v in run.model.state_dict().items()}
            save_file(state, str(tmp / "model.safetensors"))
            if run.momentum_buffers:
                save_file({k: v.detach().to("cpu").contiguous() for k, v in run.momentum_buffers.items()},
                          str(tmp / "momentum.safetensors"))
            _write_json(tmp / "spec.json", {"id": run.spec.id, "code_version": run.provenance.get("code_version"),
                                            "spec": run.spec.to_dict(), "input_shape": list(data.input_shape),
                                            "num_classes": data.num_classes, "step": run.step})
            _write_json(tmp / "history.json", run.history)
            _write_json(tmp / "metrics.json", run.metrics)
            _write_json(tmp / "provenance.json", run.provenance)
            files = sorted(p.name for p in tmp.iterdir())
            _write_json(tmp / "manifest.json", {f: _sha256(tmp / f) for f in files})
            share(tmp)  # safetensors writes 0600: a colleague reads what the umask allows
            for p in tmp.iterdir():  # make the bytes durable before the rename publishes them
                with open(p, "rb") as f:
                    os.fsync(f.fileno())
            self._publish(tmp, final, f"run {run.spec.short_id}")
        except (OSError, SafetensorError) as err:  # a full or failing file system: one line that names it
            raise StoreError(f"run {run.spec.short_id} could not be written to the store {self.root} ({err}): free "
                             f"space there, or set {STORE_ENV} to a store with room; nothing was stored") from err
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final

    def _publish(self, tmp: Path, final: Path, what: str, done: str = "manifest.json") -> None:
        """Rename the finished ``tmp`` to ``final``; an existing finished entry wins, and a damaged one (a folder
        without ``done``: entries are only ever published whole) is moved aside first."""
        try:
            os.rename(tmp, final)
            return
        except OSError:
            if (final / done).exists():
                log.info("%s was stored by another process first; keeping that entry", what)
                return
            if not final.exists():
                raise
        log.warning("%s: replacing the damaged entry %s (it had no %s)", what, final, done)
        self.remove([final])
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / done).exists():
                raise

    # -- reading ----------------------------------------------------------------------
    def verify(self, spec_or_id: RunSpec | str) -> None:
        """Raise StoreError if an entry's files are missing or do not match its manifest."""
        path = self.path(spec_or_id)
        rid = path.name
        try:
            manifest = json.loads((path / "manifest.json").read_text())
        except (OSError, ValueError) as err:
            raise StoreError(f"run {rid[:12]} in {self.root} has no readable manifest ({err}); "
                             f"delete {path} (or run `lmcbook store gc`) and it will be retrained") from err
        for name in _FILES:
            if name not in manifest:
                raise StoreError(f"run {rid[:12]}: manifest lacks {name}; delete {path} to retrain it")
        for name, digest in manifest.items():
            f = path / name
            if not f.exists() or _sha256(f) != digest:
                raise StoreError(f"run {rid[:12]}: {name} is corrupted or truncated (sha256 mismatch); "
                                 f"delete {path} (or run `lmcbook store gc`) and it will be retrained")
        _check_identity(path)

    def load(self, spec: RunSpec, device: str | torch.device = "auto", record: bool = True) -> TrainedRun:
        """Return the stored run of ``spec`` on ``device``, after checking its files' hashes.

        ``record`` appends a "loaded" event to ``events.jsonl``, which ``lmcbook execute`` counts in its summary
        line; ``record=False`` is for loads that are part of training (a parent, a run trained side by side).
        Either way the read log (:attr:`reads`) notes the run: that is what a page's provenance and its cache
        record read.
        """
        path = self.path(spec)
        self.verify(spec)
        self._note(spec, "loaded")
        meta = json.loads((path / "spec.json").read_text())
        dev = resolve_device(device)
        with torch.random.fork_rng(devices=[]):
            model = build(spec.model, tuple(meta["input_shape"]), meta["num_classes"])
        model.load_state_dict(load_file(str(path / "model.safetensors")))
        model.to(dev).eval()
        momentum = None
        if (path / "momentum.safetensors").exists():
            momentum = load_file(str(path / "momentum.safetensors"), device=str(dev))
        run = TrainedRun(
            spec=spec, model=model,
            history=json.loads((path / "history.json").read_text()),
            metrics=json.loads((path / "metrics.json").read_text()),
            provenance=json.loads((path / "provenance.json").read_text()),
            momentum_buffers=momentum, step=int(meta["step"]),
        )
        if str(run.provenance.get("device", "")).startswith("cuda") and "precision" not in run.provenance:
            warnings.warn(f"run {spec.short_id} was trained on {run.provenance['device']} by code that did not record "
                          "its precision: before commit 42859cd every CUDA run trained under bf16 autocast whatever "
                          "its spec said, so this run may be bf16 under an fp32 id; to be sure, remove its folder "
                          f"{path} and train it again", stacklevel=2)
        if record:
            self._event("loaded", spec)
            log.info("loaded run %s from the store: %s", spec.short_id, describe(spec))
        return run

    def get_or_train(self, spec: RunSpec, device: str | torch.device = "auto", data: Dataset | None = None,
                     progress: bool | None = None) -> TrainedRun:
        """Return the run of ``spec``: loaded from the store if present, else trained, stored and returned."""
        if not isinstance(spec, RunSpec):
            raise TypeError(f"spec={spec!r} is not allowed: expected a RunSpec")
        if self.has(spec):
            return self.load(spec, device)
        self.check_writable()
        dev = resolve_device(device) if data is None else data.device
        data = load_spec(spec.data, dev) if data is None else data
        check_trainable(spec, data)  # bad input fails here, before any lock, training or write
        (self.root / ".locks").mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / ".locks" / f"{spec.id}.lock")):
            if self.has(spec):  # another process trained it while we waited
                return self.load(spec, dev)
            start = self.get_or_train(spec.parent, dev, data, progress) if spec.parent is not None else None
            init = self.get_or_train(spec.init, dev, None, progress) if spec.init is not None else None
            log.info("training run %s: %s", spec.short_id, describe(spec))
            t0 = time.perf_counter()
            checkpoints = self.root / ".checkpoints"
            checkpoints.mkdir(exist_ok=True)
            run = train(spec, data, progress=progress, start=start, init=init, checkpoint=checkpoints,
                        checkpoint_seconds=self.checkpoint_seconds)
            self.save(run, data)
            remove_checkpoint(checkpoints, spec)
            self._event("trained", spec, seconds=round(time.perf_counter() - t0, 3))
            log.info("stored run %s (%.1f s)", spec.short_id, time.perf_counter() - t0)
            return run

    def get_or_train_many(self, specs: list[RunSpec], device: str | torch.device = "auto",
                          data: Dataset | None = None, progress: bool | None = None,
                          batch: bool = True) -> list[TrainedRun]:
        """Return the runs of ``specs`` (in order), training the missing ones, stacked where they can be.

        Parents and fine-tuning sources are made first.  Missing runs that share a
        :func:`lmcbook.train.group_key` train together in one stacked step
        (``batch=False`` trains each alone); results equal training alone within
        :data:`lmcbook.train.STACK_TOLERANCE`, and each entry records ``batched_with``.
        Every spec is checked before anything trains.  If a run diverges, the others
        are still stored, then its :class:`~lmcbook.train.DivergedError` is raised (the other divergences of the
        call in its ``others``).
        A spec given twice is trained once and returned twice.
        """
        given, specs = list(specs), list(dict.fromkeys(specs))
        if not specs:
            return []
        dev = resolve_device(device) if data is None else data.device
        data = load_spec(specs[0].data, dev) if data is None else data
        self._check_many(specs, data)
        parents = [s.parent for s in specs if s.parent is not None and not self.has(s)]
        if parents:
            self.get_or_train_many(parents, dev, data, progress, batch)
        for s in specs:
            if s.init is not None and not self.has(s):
                self.get_or_train(s.init, dev, None, progress)
        groups: dict = {}
        for s in specs:
            if not self.has(s):
                key = group_key(s, len(data.y_train)) if batch else None
                groups.setdefault(key if key is not None else ("alone", s.id), []).append(s)
        fresh: dict[str, TrainedRun] = {}
        errors: list[Exception] = []
        alone = [s for key, group in groups.items() if key[0] == "alone" for s in group]
        side = set(self._train_side_by_side(alone, data, errors))
        for key, group in groups.items():
            if key[0] != "alone" and len(group) > 1:
                self._train_stack(group, data, progress, fresh, errors)
                continue
            for s in group:
                if self.has(s) or any(getattr(e, "run_id", None) == s.id for e in errors):
                    continue  # trained side by side, or diverged there
                try:
                    fresh[s.id] = self.get_or_train(s, dev, data, progress)
                except DivergedError as err:
                    errors.append(err)
        if errors:  # every divergence of the call at once, so that a caller can exclude them all in one retry
            errors[0].others = errors[1:]
            raise errors[0]
        # a run trained side by side logged its "trained" event in its worker: loading it here is not a load
        got = {s.id: fresh[s.id] if s.id in fresh else self.load(s, dev, record=s.id not in side) for s in specs}
        return [got[s.id] for s in given]

    def _train_side_by_side(self, specs: list[RunSpec], data: Dataset, errors: list[Exception],
                            workers: int | None = None) -> list[str]:
        """Train the MLPs too wide to stack but at most :data:`SIDE_BY_SIDE_MAX_UNITS` units wide on the CPU in
        ``workers`` processes at once (default: the CPU count, at most 2, the arrangement measured), each with an
        equal share of the threads; return the ids of the runs trained.

        A wide run does not use two cores fully (its matmuls have only ``batch_size`` rows), so two one-thread
        runs side by side beat two two-thread runs one after the other (``lmcbook bench`` measures it).  Each
        worker trains and stores its run under the store's per-run lock, exactly as :meth:`get_or_train` would;
        a diverged run is reported in ``errors``, and nothing of it is stored.  Fewer than two such runs, another
        device than the CPU, or a daemonic process train in this process, and so do the runs of a pool that fails
        (a worker killed, or out of shared memory for the data): the caller trains whatever is still missing.
        Workers start with the ``spawn`` method, so a script that trains such runs needs the usual
        ``if __name__ == "__main__":`` guard.
        """
        todo = [s for s in specs if not self.has(s) and s.parent is None and s.init is None
                and s.model.arch == "mlp" and STACK_MAX_UNITS < s.model.channels <= SIDE_BY_SIDE_MAX_UNITS]
        cpus = os.cpu_count() or 1
        workers = min(workers or min(cpus, 2), len(todo))
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        if workers < 2 or data.device.type != "cpu" or multiprocessing.current_process().daemon:
            return []  # (a daemonic process, a Dask worker say, may not start processes)

        threads = max(1, cpus // workers)
        ctx = multiprocessing.get_context("spawn")  # no fork after torch's threads have started
        try:
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_side_worker_init,
                                     initargs=(str(self.root), data, threads)) as pool:
                for err in pool.map(_side_worker_train, todo):
                    if err is not None:
                        errors.append(DivergedError(*err))
        except (BrokenProcessPool, OSError, RuntimeError) as err:
            log.warning("training side by side failed (%s); the runs still missing train in this process", err)
        done = [s for s in todo if self.has(s)]
        for s in done:
            self._note(s, "trained")
        return [s.id for s in done]

    def _check_many(self, specs: list[RunSpec], data: Dataset) -> None:
        """Raise before anything trains unless every spec is a RunSpec on ``data``'s data set that can train there."""
        for s in specs:
            if not isinstance(s, RunSpec):
                raise TypeError(f"spec={s!r} is not allowed: expected a RunSpec")
            if (s.data.name, s.data.transform) != (specs[0].data.name, specs[0].data.transform):
                raise SpecError("get_or_train_many needs specs on one data set (name and transform); got "
                                f"{specs[0].data.name}/{specs[0].data.transform} and {s.data.name}/{s.data.transform}")
            check_trainable(s, data)
        if any(not self.has(s) for s in specs):
            self.check_writable()

    def _train_stack(self, group: list[RunSpec], data: Dataset, progress: bool | None,
                     fresh: dict[str, TrainedRun], errors: list[Exception]) -> None:
        """Train the runs of one group_key that are still missing in one stack, holding all their locks."""
        (self.root / ".locks").mkdir(parents=True, exist_ok=True)
        with ExitStack() as locks:
            for s in sorted(group, key=lambda s: s.id):
                locks.enter_context(FileLock(str(self.root / ".locks" / f"{s.id}.lock")))
            todo = [s for s in group if not self.has(s)]
            if not todo:  # another process trained them all while we waited for the locks
                return
            starts = [self.load(s.parent, data.device, record=False) if s.parent is not None else None for s in todo]
            inits = [self.load(s.init, data.device, record=False) if s.init is not None else None for s in todo]
            log.info("training %d runs in one stack: %s ...", len(todo), describe(todo[0]))
            t0 = time.perf_counter()
            for s, run in zip(todo, train_many(todo, data, starts, inits, progress)):
                if isinstance(run, Exception):
                    errors.append(run)
                    continue
                self.save(run, data)
                self._event("trained", s, seconds=round((time.perf_counter() - t0) / len(todo), 3),
                            batched_with=len(todo))
                fresh[s.id] = run

    # -- maintenance -------------------------------------------------------------------
    def stale_temporaries(self, min_age_s: float = 3600.0) -> list[Path]:
        """Return temporary directories left by processes that died (same host, pid gone) or older than min_age_s."""
        tmp = self.root / ".tmp"
        if not tmp.exists():
            return []
        return [p for p in tmp.iterdir() if is_stale(p, min_age_s)]

    def stale_checkpoints(self, min_age_s: float = 3600.0) -> list[Path]:
        """Return checkpoint files no run will resume from: those of runs already stored, and temporary files of
        checkpoint writes older than ``min_age_s`` (a killed write)."""
        d = self.root / ".checkpoints"
        if not d.exists():
            return []
        now, out = time.time(), []
        for p in d.iterdir():
            stored = (self.root / p.name[:64] / "manifest.json").exists() if _HEX.match(p.name[:64]) else False
            if stored or (p.name.endswith(".tmp") and now - p.stat().st_mtime > min_age_s):
                out.append(p)
        return out

    def problems(self) -> list[tuple[str, Path, str]]:
        """Return every problem ``lmcbook store verify`` reports, as (kind, path, detail): corrupt entries,
        entries without a manifest, damaged derived results and torn event-log lines.  ``gc`` mends each."""
        out = []
        for rid in self.ids():
            path = self.path(rid)
            try:
                self.verify(rid)
            except StoreError as err:
                kind = "corrupt entry" if (path / "manifest.json").exists() else "entry without a manifest"
                out.append((kind, path, str(err)))
        out += [("damaged derived result", p, why) for p, why in self.damaged_derived()]
        torn = self.torn_event_lines()
        if torn:
            out.append(("torn event lines", self.root / "events.jsonl",
                        f"{len(torn)} torn line(s): {', '.join(map(str, torn[:10]))}{' ...' if len(torn) > 10 else ''}"
                        "; gc drops them"))
        return out

    def entries_older_than(self, seconds: float) -> list[str]:
        """Return the ids of valid entries last written more than ``seconds`` ago."""
        now, out = time.time(), []
        for rid in self.ids():
            manifest = self.path(rid) / "manifest.json"
            if manifest.exists() and now - manifest.stat().st_mtime > seconds:
                out.append(rid)
        return out

    def remove(self, paths: list[Path]) -> None:
        """Delete entries or temporary directories (an entry is first renamed out of sight, then deleted)."""
        for p in paths:
            p = Path(p)
            if p.parent == self.root and _HEX.match(p.name):
                trash = self.root / ".tmp" / (tmp_prefix(f"trash-{p.name[:16]}") + str(time.time_ns()))
                (self.root / ".tmp").mkdir(exist_ok=True)
                try:
                    os.rename(p, trash)
                except FileNotFoundError:  # another process removed it first
                    continue
                p = trash
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    def iter_specs(self) -> Iterator[tuple[str, RunSpec]]:
        """Yield (id, spec) of every readable entry."""
        for rid in self.ids():
            try:
                meta = json.loads((self.root / rid / "spec.json").read_text())
                yield rid, RunSpec.from_dict(meta["spec"])
            except (OSError, ValueError, KeyError):
                continue


__all__ = ["SESSION_ENV", "SIDE_BY_SIDE_MAX_UNITS", "DerivedResults", "EventLog", "RunStore", "StoreError",
           "StoreWarning", "describe",
           "SweepResult", "train_one", "CONNECT_TIMEOUT_S", "run_all", "study_data", "trained_pairs", "sweep_first",
           "Runs", "cached_pair_summary"]


# ---- Many runs at once: a study's runs, in-process or on Dask ----

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
