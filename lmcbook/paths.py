"""Where lmcbook keeps things: the run store ($LMCBOOK_STORE), its cache of generated data sets, and the book's
executed pages ($LMCBOOK_OUT).

A leading ``~`` is expanded in every path, and an empty path is refused: ``LMCBOOK_STORE=""`` or ``--store ""``
would otherwise fill the current directory.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .specs import SpecError

STORE_ENV = "LMCBOOK_STORE"
OUT_ENV = "LMCBOOK_OUT"
#: Where a page being executed writes its CSV and record (set by ``lmcbook execute``: a folder beside the output,
#: published whole once the page is complete); unset, the output folder itself.
STAGE_ENV = "LMCBOOK_STAGE"
#: "0" hides progress bars, "1" shows them; unset: shown on a terminal and in a live Jupyter kernel.
PROGRESS_ENV = "LMCBOOK_PROGRESS"


def checked_path(value: str | os.PathLike, name: str) -> Path:
    """Return ``value`` as a Path with ``~`` expanded, or raise SpecError naming ``name`` if it is empty."""
    text = os.fspath(value)
    if not str(text).strip():
        raise SpecError(f"{name}={text!r} is not allowed: expected a directory path (an empty one would write "
                        "into the current directory)")
    return Path(text).expanduser()


def store_root() -> Path:
    """Return the run store's root: $LMCBOOK_STORE, else ./runs."""
    return checked_path(os.environ.get(STORE_ENV, "runs"), STORE_ENV)


def dataset_cache() -> Path:
    """Return the directory that caches generated data sets (inside the store root)."""
    return store_root() / "datasets"


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
