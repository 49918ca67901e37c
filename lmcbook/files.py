"""Files that are whole or absent, on any file system, and readable by whoever the umask lets read them.

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

import os
import platform
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


__all__ = ["atomic_path", "current_umask", "fsync_dir", "is_stale", "share", "temp_dir", "tmp_prefix", "write_atomic"]
