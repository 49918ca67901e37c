"""The run store's file-level pieces: its error and warning, file hashes, and the exact JSON and frame files its
entries and derived results are written as (:mod:`lmcbook.store`)."""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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

