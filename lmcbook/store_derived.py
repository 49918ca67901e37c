"""The run store's derived results: frames measured from stored runs, cached in ``ROOT/derived/`` keyed by their
kind, their key, the library's source hash and the SHA-256 of the weights of every run their key names, so
retrained weights are never reported from an old cache.  :class:`DerivedResults` is mixed into
:class:`lmcbook.store.RunStore`."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from .files import share, temp_dir
from .provenance import source_hash
from .store_files import _HEX, StoreError, StoreWarning, _read_frame, _sha256, _warn_once, _write_frame, _write_json

log = logging.getLogger("lmcbook.store")


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
