"""Where lmcbook keeps things: the run store ($LMCBOOK_STORE), its cache of generated data sets, and the book's
executed pages ($LMCBOOK_OUT)."""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "LMCBOOK_STORE"


def store_root() -> Path:
    """Return the run store's root: $LMCBOOK_STORE, else ./runs."""
    return Path(os.environ.get(STORE_ENV, "runs"))


def dataset_cache() -> Path:
    """Return the directory that caches generated data sets (inside the store root)."""
    return store_root() / "datasets"


OUT_ENV = "LMCBOOK_OUT"


def out_dir() -> Path:
    """Return where executed notebooks and their CSVs go: $LMCBOOK_OUT, else book/generated."""
    return Path(os.environ.get(OUT_ENV, "book/generated"))
