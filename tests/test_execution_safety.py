"""`lmcbook execute` loses nothing and reports nothing wrong (issue 39): an output folder on another file system,
a re-execution killed at any moment, and a page cache that notices a damaged CSV or another store.

The kill tests check a known answer: after a SIGKILL at each point of a page's publication, and after the
recovery every later ``execute`` (and ``build``) runs first, each of the page's files is either all old or all new.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from lmcbook import book

ROOT = Path(__file__).resolve().parents[1]
PAGE = "theory_lewc"  # the fastest page at the smoke profile


def _write_page(root: Path, text: str) -> dict[Path, bytes]:
    """Write a fake page (its notebook, CSV and two records) under ``root``; return its files' relative bytes."""
    files = {}
    for f in book.page_files(root, PAGE):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"{text} {f.name}")
        files[f.relative_to(root)] = f.read_bytes()
    return files


def _killed_commit(out: Path, after: int) -> None:
    """Stage a new page and commit it into ``out`` in a forked child that SIGKILLs itself at its ``after``-th
    rename (the staging folder is the child's, as an execution's is its own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the child only renames files
        pid = os.fork()
    if pid == 0:  # the child
        staged = book.stage(out, PAGE)
        _write_page(staged, "new")
        calls = [0]
        real_replace, real_rename = os.replace, os.rename

        def dying(real):
            def call(*a, **k):
                if calls[0] == after:
                    os.kill(os.getpid(), signal.SIGKILL)
                calls[0] += 1
                return real(*a, **k)
            return call

        os.replace, os.rename = dying(real_replace), dying(real_rename)
        book.commit(staged, out)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0


@pytest.mark.parametrize("after", range(6))
def test_a_page_killed_while_it_is_published_is_old_or_new_never_mixed(tmp_path, after):
    """The commit is one rename (call 0) then four moves (calls 1-4); a kill at any of them, or none (5)."""
    out = tmp_path / "out"
    old = _write_page(out, "old")
    new = _write_page(tmp_path / "expected", "new")
    _killed_commit(out, after)
    book.recover(out)
    now = {f.relative_to(out): f.read_bytes() for f in book.page_files(out, PAGE)}
    assert now in (old, new), now
    assert now == (old if after == 0 else new)  # committed once the rename is done
    assert list((out / book.STAGING).iterdir()) == []


def test_recover_removes_an_unfinished_page_of_a_dead_process_only(tmp_path):
    out = tmp_path / "out"
    old = _write_page(out, "old")
    mine = book.stage(out, PAGE)  # this process is alive: its staging folder stays
    dead = out / book.STAGING / mine.name.replace(f"__{os.getpid()}__", "__999999999__")
    dead.mkdir()
    _write_page(dead, "half")
    book.recover(out)
    assert mine.exists() and not dead.exists()
    assert {f.relative_to(out): f.read_bytes() for f in book.page_files(out, PAGE)} == old


# -- real executions ---------------------------------------------------------------------------------------------
@pytest.fixture
def other_fs(tmp_path, monkeypatch):
    """Return a folder on another file system than $TMPDIR: a tmpfs where one can be mounted (as root), else a
    folder that os.rename and os.replace treat as another device (EXDEV for any rename across its border)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m", "tmpfs", str(mnt)],
                                                   capture_output=True).returncode == 0
    if not mounted:
        def across(real):
            def call(src, dst, *a, **k):
                if Path(src).resolve().is_relative_to(mnt) != Path(dst).resolve().is_relative_to(mnt):
                    raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src), None, str(dst))
                return real(src, dst, *a, **k)
            return call

        monkeypatch.setattr(os, "replace", across(os.replace))
        monkeypatch.setattr(os, "rename", across(os.rename))
    else:
        assert os.stat(mnt).st_dev != os.stat(tmp_path).st_dev
    yield mnt
    if mounted:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.integration
def test_an_output_folder_on_another_file_system_works(other_fs, tmp_path, monkeypatch):
    """A local $TMPDIR with the output folder on NFS is the usual cluster layout: no rename may cross them."""
    monkeypatch.chdir(ROOT)
    out = other_fs / "out"
    for _ in range(2):  # the first execution writes the page, the second replaces it
        (o,) = book.execute([PAGE], "smoke", {}, out, ROOT / "notebooks", tmp_path / "store", force=True)
        assert o.ok, o.error
        assert all(p.exists() for p in book.page_files(out, PAGE))
    assert list((out / book.STAGING).iterdir()) == []


def _execute_cmd(out: Path, store: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lmcbook.cli", "execute", "--profile", "smoke", "--only", PAGE, "--out", str(out),
            "--store", str(store), *extra]


@pytest.mark.integration
@pytest.mark.parametrize("wait_for", [f"{PAGE}.ipynb", f"data/{PAGE}.csv"], ids=["kernel running", "page saved"])
def test_a_killed_re_execution_keeps_the_last_good_page(tmp_path, wait_for):
    """SIGKILL to `lmcbook execute` and its kernel while the kernel runs, and after the page saved its CSV but
    before the execution published it: the last good page is untouched, and the next execute finds it cached."""
    out, store = tmp_path / "out", tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(_execute_cmd(out, store), cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    good = {p: p.read_bytes() for p in book.page_files(out, PAGE)}
    proc = subprocess.Popen(_execute_cmd(out, store, "--force"), cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any((p / wait_for).exists() for p in (out / book.STAGING).glob(f"{PAGE}__*")):
            assert proc.poll() is None, "the execution ended before it could be killed"
            assert time.monotonic() < deadline, f"no staged {wait_for} within 120 s"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert {p: p.read_bytes() for p in good} == good
    again = subprocess.run(_execute_cmd(out, store), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "skipped: cached" in again.stderr, again.stderr
    assert list((out / book.STAGING).iterdir()) == []  # the dead execution's folder is gone


@pytest.mark.integration
def test_the_page_cache_notices_a_damaged_csv_and_another_store(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    run = lambda store: book.execute([PAGE], "smoke", {}, out, ROOT / "notebooks", store)[0]  # noqa: E731
    assert run(tmp_path / "a").ok and run(tmp_path / "a").cached
    csv = out / "data" / f"{PAGE}.csv"
    good = csv.read_bytes()
    csv.write_text("garbage\n")
    redo = run(tmp_path / "a")
    assert redo.ok and not redo.cached and csv.read_bytes() == good
    other = run(tmp_path / "b")  # another store (here an empty one): its runs are not the ones read
    assert other.ok and not other.cached
