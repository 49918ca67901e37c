"""The files lmcbook writes and where: whole or absent, on any file system, readable by whoever the umask lets
read them; the paths of the run store, the data cache and the executed book; the store's file-level pieces; and
the provenance every result carries.

- A temporary file or folder is always made **beside** its destination (:func:`write_atomic`,
  :func:`temp_dir`), so the final ``os.replace`` or ``os.rename`` never crosses file systems: a local
  ``/tmp`` with a project folder on NFS works.
- Temporary names carry what they hold, the host and the pid (:func:`tmp_prefix`), so a folder left by a
  killed process is recognised as stale (:func:`is_stale`) and removed by whoever finds it.
- Everything the store and ``lmcbook execute`` write gets the modes a plain ``open`` or ``mkdir`` would give
  (:func:`share`): 0666 for files and 0777 for folders, less the umask, as git does.  ``mkstemp`` and
  ``mkdtemp`` alone give 0600 and 0700, which would lock a colleague out of a shared store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from . import __version__
from .specs import CODE_VERSION, SpecError, checked_path

_TMP_NAME = re.compile(r"^(?P<what>.+?)__(?P<host>.+?)__(?P<pid>[0-9]+)__")


def tmp_prefix(what: str) -> str:
    """Return a temporary name's prefix: what it holds, and the host and pid writing it."""
    return f"{what}__{platform.node()}__{os.getpid()}__"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale(path: Path, min_age_s: float = 3600.0) -> bool:
    """Return True if the temporary ``path`` (named by :func:`tmp_prefix`) was left by a process that died (this
    host, pid gone) or is older than ``min_age_s``."""
    m = _TMP_NAME.match(path.name)
    dead = m is not None and m["host"] == platform.node() and not _pid_alive(int(m["pid"]))
    try:
        return dead or time.time() - path.stat().st_mtime > min_age_s
    except FileNotFoundError:  # another process removed it first
        return False


def current_umask() -> int:
    """Return the process's umask (read from /proc where it can be, so no other thread sees it change)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share(path: Path) -> None:
    """Give ``path`` (a file, or a folder and everything in it) the modes ``open``/``mkdir`` would: 0666 for files
    and 0777 for folders, less the umask."""
    mask = current_umask()
    path = Path(path)
    todo = [path, *path.rglob("*")] if path.is_dir() else [path]
    for p in todo:
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def temp_dir(dest: Path, what: str) -> Path:
    """Return a new temporary folder in ``dest`` (created), named by :func:`tmp_prefix`, with shared modes."""
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix(what), dir=dest))
    share(tmp)
    return tmp


def fsync_dir(path: Path) -> None:
    """Make a rename inside the folder ``path`` durable, where the platform lets a folder be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write; once the block ends without error, make its bytes durable,
    give it shared modes and ``os.replace`` it onto ``path`` (whole or not at all; a failed write leaves nothing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        share(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)  # make the rename itself durable


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


__all__ = ["atomic_path", "current_umask", "fsync_dir", "is_stale", "share", "temp_dir", "tmp_prefix", "write_atomic",
           "OUT_ENV", "STAGE_ENV", "PROGRESS_ENV", "out_dir", "stage_dir", "checked_out_dir", "show_progress",
           "StoreError", "StoreWarning", "PACKAGE_DIR",
           "git_sha", "TRAINING_MODULES", "training_source_hash", "source_hash", "library_hash", "provenance"]


# ---- Paths ----
# Where the book's executed pages go ($LMCBOOK_OUT). The run store's root ($LMCBOOK_STORE) and the path check
# every such folder passes (a leading ``~`` expanded, an empty path refused) are in :mod:`lmcbook.specs`, which
# :mod:`lmcbook.data` reads for its cache of generated data sets.

OUT_ENV = "LMCBOOK_OUT"
#: Where a page being executed writes its CSV and record (set by ``lmcbook execute``: a folder beside the output,
#: published whole once the page is complete); unset, the output folder itself.
STAGE_ENV = "LMCBOOK_STAGE"
#: "0" hides progress bars, "1" shows them; unset: shown on a terminal and in a live Jupyter kernel.
PROGRESS_ENV = "LMCBOOK_PROGRESS"


def out_dir() -> Path:
    """Return where executed notebooks and their CSVs go: $LMCBOOK_OUT, else book/generated."""
    return checked_path(os.environ.get(OUT_ENV, "book/generated"), OUT_ENV)


def stage_dir() -> Path:
    """Return where the page being computed writes its CSV and record: $LMCBOOK_STAGE, else :func:`out_dir`."""
    return checked_path(os.environ[STAGE_ENV], STAGE_ENV) if os.environ.get(STAGE_ENV) else out_dir()


def checked_out_dir(out: str | os.PathLike | None) -> Path:
    """Return the executed-notebook folder ``out`` (default :func:`out_dir`), created, or raise SpecError naming
    the parameter when it is empty, a file, or cannot be created."""
    name = "--out" if out is not None else OUT_ENV
    path = checked_path(out, "--out") if out is not None else out_dir()
    if path.exists() and not path.is_dir():
        raise SpecError(f"{name}={str(path)!r} is not allowed: it is a file; expected a directory for the executed "
                        "notebooks and their CSVs")
    try:
        (path / "data").mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryDirectory(dir=path).cleanup()  # pages are written beside their final place
    except OSError as err:
        raise SpecError(f"{name}={str(path)!r} is not allowed: the directory cannot be created or written "
                        f"({err.strerror}); expected a writable directory") from err
    return path


def show_progress(progress: bool | None = None) -> bool:
    """Return whether to draw a progress bar: ``progress`` if given, else $LMCBOOK_PROGRESS ("0" or "1") if set,
    else True on a terminal and in a Jupyter kernel (where ``tqdm.auto`` draws a notebook widget).

    ``lmcbook execute`` sets $LMCBOOK_PROGRESS to "0", so the book's executed pages hold no bars.
    """
    if progress is not None:
        return bool(progress)
    env = os.environ.get(PROGRESS_ENV)
    if env in ("0", "1"):
        return env == "1"
    return sys.stderr.isatty() or "ipykernel" in sys.modules


# ---- The run store's files ----
# The run store's file-level pieces: its error and warning, file hashes, and the exact JSON and frame files its
# entries and derived results are written as (:mod:`lmcbook.store`).

_HEX = re.compile(r"^[0-9a-f]{64}$")


class StoreError(RuntimeError):
    """A store entry is corrupt or the store cannot be written; the message says what to do."""


class StoreWarning(UserWarning):
    """Something in the store was skipped (a torn event line, a read-only log, a damaged cache); reading goes on."""


_WARNED: set[tuple[str, str]] = set()


def _warn_once(kind: str, root: Path, message: str) -> None:
    """Warn once per process about ``kind`` in the store at ``root``."""
    if (kind, str(root)) not in _WARNED:
        _WARNED.add((kind, str(root)))
        warnings.warn(message, StoreWarning, stacklevel=3)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True))


def _write_frame(directory: Path, name: str, df: pd.DataFrame) -> list[str] | None:
    """Write ``df`` exactly and return its column names (``NAME.npz``), or None when written as ``NAME.csv``.

    Columns go into an ``.npz`` when every one is bool, integer, float or all text
    (no missing values): bitwise exact, and far faster than formatting floats as
    text.  Any other frame is written as an exact CSV.
    """
    names = [str(c) for c in df.columns]
    cols = {}
    if len(set(names)) == len(names):
        for i, (_, col) in enumerate(df.items()):
            if col.dtype.kind in "biuf":
                cols[f"c{i}"] = col.to_numpy()
            elif not col.isna().any() and pd.api.types.infer_dtype(col, skipna=False) in ("string", "empty"):
                cols[f"c{i}"] = col.to_numpy(dtype=str)
            else:
                break
        else:
            with open(directory / f"{name}.npz", "wb") as f:
                np.savez(f, **cols)
            return names
    df.to_csv(directory / f"{name}.csv", index=False, float_format="%.17g")
    return None


def _read_frame(directory: Path, name: str, columns: list[str] | None) -> pd.DataFrame:
    """Read a frame written by :func:`_write_frame` (never unpickling anything)."""
    if columns is None:
        return pd.read_csv(directory / f"{name}.csv")
    with np.load(directory / f"{name}.npz", allow_pickle=False) as z:
        return pd.DataFrame({c: z[f"c{i}"] for i, c in enumerate(columns)}, columns=columns)


# ---- Provenance ----
# Where and how a result was made: versions, git commit, a hash of the library's source, device and threads.

PACKAGE_DIR = Path(__file__).resolve().parent


def git_sha() -> str | None:
    """Return the git commit of the lmcbook source tree, or None outside a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PACKAGE_DIR, capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


#: The modules whose code decides a run's trajectory: its data and batches, initial weights, schedule and updates.
TRAINING_MODULES = ("data.py", "models.py", "specs.py", "train.py")


@functools.lru_cache(maxsize=1)
def training_source_hash() -> str:
    """Return the SHA-256 of the :data:`TRAINING_MODULES`' paths and contents: what a run's checkpoint is keyed by
    (:func:`lmcbook.train.resume`), so that a run cut off resumes after an edit anywhere else in lmcbook (a reference
    run's networks train for hours, across sessions whose code changes) and starts again after one to its training."""
    h = hashlib.sha256()
    for name in TRAINING_MODULES:
        h.update(name.encode() + b"\0" + (PACKAGE_DIR / name).read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """Return the SHA-256 of every top-level ``lmcbook/*.py`` file's path and contents: the modules that train and
    measure (a run's checkpoints and the store's derived results are keyed by it, so that a change to the claims or
    the verdicts, :mod:`lmcbook.claims`, never discards a half-trained run)."""
    h = hashlib.sha256()
    for p in sorted(PACKAGE_DIR.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def library_hash() -> str:
    """Return the SHA-256 of every lmcbook .py file's path (relative to the package) and contents, its subpackages
    included: what a notebook's cached output depends on (:func:`lmcbook.book.cache_key`), since a page's verdicts
    come from :mod:`lmcbook.claims`."""
    h = hashlib.sha256()
    for p in sorted(q for q in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in q.parts):
        h.update(p.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def provenance(device: torch.device) -> dict[str, Any]:
    """Return where and how a run was made: versions, git SHA, device, threads, host, time."""
    return {
        "lmcbook_version": __version__,
        "code_version": CODE_VERSION,
        "git_sha": git_sha(),
        "source_hash": source_hash(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "threads": torch.get_num_threads(),
        "host": platform.node(),
        "pid": os.getpid(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
