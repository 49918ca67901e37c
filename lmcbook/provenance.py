"""Where and how a result was made: versions, git commit, a hash of the library's source, device and threads."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from . import __version__
from .specs import CODE_VERSION

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
TRAINING_MODULES = ("batched.py", "data.py", "models.py", "specs.py", "train.py")


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
    """Return the SHA-256 of every top-level lmcbook/*.py file's path and contents: the modules that train and
    measure (a run's checkpoints and the store's derived results are keyed by it, so that a change to the claims or
    the pages, :mod:`lmcbook.claims` and :mod:`lmcbook.pages`, never discards a half-trained run)."""
    h = hashlib.sha256()
    for p in sorted(PACKAGE_DIR.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def library_hash() -> str:
    """Return the SHA-256 of every lmcbook .py file's path (relative to the package) and contents, its subpackages
    included: what a notebook's cached output depends on (:func:`lmcbook.book.cache_key`), since a page's verdicts
    and prose come from :mod:`lmcbook.claims` and :mod:`lmcbook.pages`."""
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
