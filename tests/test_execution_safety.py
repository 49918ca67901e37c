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


# -- errors before the first page, in one line (issue 39 point 8; issue 38 item 7) -----------------------------------
def _as_reader(cmd: list[str]) -> list[str]:
    """Run ``cmd`` without the power to write what its modes forbid: root keeps its uid but loses dac_override."""
    if os.geteuid() != 0:
        return cmd
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", *cmd]


def _cli(*args: str, reader: bool = False, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "lmcbook.cli", *args]
    return subprocess.run(_as_reader(cmd) if reader else cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}, **kw)


def _one_error_line(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("lmcbook: error: ") and all(w in line for w in words), line


def test_a_missing_data_root_fails_once_before_the_first_page(tmp_path):
    """Every page of the book with a data set: one error, exit 2, and no page, report or .failed notebook."""
    out = tmp_path / "out"
    proc = _cli("execute", "--profile", "smoke", "-p", "dataset", "mnist_standin", "-p", "data_root",
                str(tmp_path / "nowhere"), "--out", str(out), "--store", str(tmp_path / "s"))
    _one_error_line(proc, "mnist_standin", "nowhere", "t10k-images-idx3-ubyte")
    assert proc.stderr.count("lmcbook: error") == 1 and "skipped" not in proc.stderr and "done in" not in proc.stderr
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]


def test_reference_with_a_missing_data_root_names_it_not_a_deleted_folder(tmp_path):
    proc = _cli("reference", "mechanism-mnist-standin", "--data-root", str(tmp_path / "missing"), "--store",
                str(tmp_path / "s"))
    _one_error_line(proc, "data_root", "missing")
    assert ".failed" not in proc.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_fails_before_the_first_page(tmp_path):
    proc = _cli("execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "device", "cuda", "--out",
                str(tmp_path / "out"), "--store", str(tmp_path / "s"))
    _one_error_line(proc, "device='cuda'", "CUDA is not available", "'auto'", "'cpu'")
    assert not (tmp_path / "out" / "execution.json").exists()


def test_malformed_yaml_in_p_names_the_parameter(tmp_path):
    _one_error_line(_cli("execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "widths", "[0.5", "--out",
                         str(tmp_path / "out")), "-p widths '[0.5'", "not valid YAML", "[0.5, 2]")


def test_a_read_only_output_folder_and_a_read_only_store_for_gc(tmp_path):
    ro = tmp_path / "ro"
    (ro / "data").mkdir(parents=True)
    store = tmp_path / "store"
    (store / ".tmp" / "left-behind").mkdir(parents=True)  # something for gc to remove
    os.utime(store / ".tmp" / "left-behind", (0, 0))
    for p in (ro, ro / "data", store, store / ".tmp"):
        p.chmod(0o555)
    try:
        _one_error_line(_cli("execute", "--profile", "smoke", "--only", PAGE, "--out", str(ro), reader=True),
                        "--out", str(ro), "cannot be created or written")
        _one_error_line(_cli("store", "gc", "--yes", "--store", str(store), reader=True),
                        "store gc cannot delete", str(store), "not writable")
        assert (store / ".tmp" / "left-behind").exists()
    finally:
        for p in (ro, ro / "data", store, store / ".tmp"):
            p.chmod(0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tiny tmpfs (needs root)")
def test_a_full_file_system_is_one_line_naming_the_store(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    assert subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)]).returncode == 0
    try:
        proc = _cli("train", "--profile", "smoke", "--part", "width", "-p", "widths", "[1]", "-p", "seeds", "1",
                    "-p", "epochs", "1", "--store", str(full / "s"))
        _one_error_line(proc, str(full / "s"), "No space left", "nothing was stored")
        assert not [p for p in (full / "s").glob("[0-9a-f]*") if len(p.name) == 64]
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)


def test_explore_without_jupyterlab_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    from lmcbook.cli import main
    from lmcbook.tools import explore

    monkeypatch.setitem(sys.modules, "jupyterlab", None)  # import jupyterlab fails
    monkeypatch.setattr(explore, "_has_module", lambda name: False)
    monkeypatch.setattr(explore.shutil, "which", lambda name: None)
    dest = tmp_path / "explore.ipynb"
    assert main(["explore", "--notebooks", str(ROOT / "notebooks"), "--dest", str(dest)]) == 2
    assert "needs JupyterLab" in capsys.readouterr().err and not dest.exists()


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch, capsys):
    from lmcbook import store
    from lmcbook.cli import main

    monkeypatch.setattr(store, "CONNECT_TIMEOUT_S", 1.0)
    assert main(["sweep", "--profile", "smoke", "-p", "widths", "[0.25]", "-p", "seeds", "1", "--scheduler",
                 "tcp://127.0.0.1:9", "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "scheduler='tcp://127.0.0.1:9'" in err and "no Dask scheduler answered" in err


def test_store_ls_into_head_ends_quietly(tmp_path):
    store = tmp_path / "s"
    for i in range(800):  # more than a pipe holds (64 KiB: each line is over 80 bytes)
        entry = store / f"{i:064x}"
        entry.mkdir(parents=True)
        (entry / "spec.json").write_text('{"spec": {}}')
    proc = subprocess.run(f"{sys.executable} -m lmcbook.cli store ls --store {store} | head -1; "
                          "echo \"status ${PIPESTATUS[0]}\"", shell=True, executable="/bin/bash", cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert proc.stdout.splitlines()[-1] == "status 0" and proc.stderr == "", proc.stderr[-2000:]


# -- counts and messages (issue 39 point 7) --------------------------------------------------------------------------
@pytest.mark.integration
def test_the_report_counts_each_run_once_even_on_a_read_only_store(tmp_path):
    """A cold store: 4 runs trained, none counted as loaded too; the same store read-only: 4 loaded (its event log
    cannot be written), its warning once in the page, and -v names each run, not papermill's cells."""
    out, store = tmp_path / "out", tmp_path / "store"
    first = _cli("execute", "--profile", "smoke", "--only", "width_accuracy", "--out", str(out), "--store", str(store))
    assert "0 run(s) loaded from the store, 4 trained" in first.stderr.splitlines()[-1], first.stderr[-2000:]
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        again = _cli("-v", "execute", "--profile", "smoke", "--only", "width_accuracy", "--force", "--out", str(out),
                     "--store", str(store), reader=True)
    finally:
        for p in [store, *store.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "4 run(s) loaded from the store, 0 trained" in again.stderr.splitlines()[-1]
    assert again.stderr.count("width_accuracy: loaded run ") == 4 and "papermill" not in again.stderr
    assert (out / "width_accuracy.ipynb").read_text().count("its event log is not updated") == 1


@pytest.mark.parametrize("verbose", [False, True])
def test_dask_info_lines_show_only_with_v(tmp_path, verbose):
    """Dask sets its loggers to INFO; after `lmcbook` configured logging, such a line reaches the terminal only
    with -v (its errors always)."""
    (tmp_path / "s").mkdir()
    code = ("import logging, sys; from lmcbook.cli import main; "
            f"main({(['-v'] if verbose else []) + ['store', 'ls', '--store', str(tmp_path / 's')]!r}); "
            "lg = logging.getLogger('distributed.scheduler'); lg.setLevel(logging.INFO); "
            "lg.info('State start'); lg.error('a worker died')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ("State start" in proc.stderr) is verbose and "a worker died" in proc.stderr, proc.stderr


def test_a_page_that_read_a_later_pages_csv_as_absent_waits_on_it(tmp_path):
    """A page that read another page's CSV as absent (Page.read_csv_if) is executed again at the end of the pass
    once that CSV exists: the width pages read the mechanism page's verdicts, which the book computes later."""
    import json

    from lmcbook.page import record_path

    record = record_path(tmp_path, "width_accuracy")
    record.parent.mkdir(parents=True)

    def reads(csv):
        record.write_text(json.dumps({"key": {}, "reads": {"csv": csv}}))

    (tmp_path / "data").mkdir()
    reads({"mechanism": None})
    assert not book._waiting_on(tmp_path, "width_accuracy")  # the mechanism page has not written its CSV
    (tmp_path / "data" / "mechanism.csv").write_text("notebook,metric,value,pair\n")
    assert book._waiting_on(tmp_path, "width_accuracy")
    reads({"mechanism": "0" * 64})  # read as present: nothing to wait for
    assert not book._waiting_on(tmp_path, "width_accuracy")
    assert not book._waiting_on(tmp_path, "low_rank")  # never executed


def test_the_page_cache_key_follows_the_whole_library_and_a_run_only_its_training_modules(tmp_path, monkeypatch):
    """A page's verdicts and prose come from lmcbook.claims, so a change there re-executes it (a
    session found a page skipped as cached after its claims module had changed); a half-trained run's checkpoint
    is keyed only by the top-level modules that train and measure, so such a change never discards it."""
    from lmcbook import files as provenance

    pkg = tmp_path / "lmcbook"
    (pkg / "claims" / "__pycache__").mkdir(parents=True)
    (pkg / "train.py").write_text("x = 1\n")
    (pkg / "claims" / "board.py").write_text("y = 1\n")
    (pkg / "claims" / "__pycache__" / "board.cpython.pyc.py").write_text("junk\n")
    monkeypatch.setattr(provenance, "PACKAGE_DIR", pkg)
    lib, src = provenance.library_hash.__wrapped__, provenance.source_hash.__wrapped__
    before = lib(), src()
    (pkg / "claims" / "__pycache__" / "board.cpython.pyc.py").write_text("other junk\n")
    assert (lib(), src()) == before  # caches are not the library
    (pkg / "claims" / "board.py").write_text("y = 2\n")
    assert lib() != before[0] and src() == before[1]
    changed = lib()
    (pkg / "train.py").write_text("x = 2\n")
    assert lib() != changed and src() != before[1]
    moved = lib()
    (pkg / "claims" / "board.py").rename(pkg / "claims" / "other.py")  # the same code under another name
    assert lib() != moved


def test_a_checkpoint_is_keyed_by_the_training_modules_alone(tmp_path, monkeypatch):
    """A reference's networks train for hours across sessions: an edit to a module that does not train (the bench,
    the claims, the pages) keeps a half-trained run's checkpoint; an edit to one that does discards it."""
    from lmcbook import files as provenance

    pkg = tmp_path / "lmcbook"
    (pkg / "claims").mkdir(parents=True)
    (pkg / "tools").mkdir()
    for name in (*provenance.TRAINING_MODULES, "tools/bench.py", "merge.py", "claims/__init__.py"):
        (pkg / name).write_text(f"# {name}\n")
    monkeypatch.setattr(provenance, "PACKAGE_DIR", pkg)
    train_hash = provenance.training_source_hash.__wrapped__
    before = train_hash()
    for name in ("tools/bench.py", "merge.py", "claims/__init__.py"):
        (pkg / name).write_text("changed = True\n")
        assert train_hash() == before, name
    for name in provenance.TRAINING_MODULES:
        (pkg / name).write_text((pkg / name).read_text() + "changed = True\n")
        assert train_hash() != before, name
        before = train_hash()
    assert set(provenance.TRAINING_MODULES) == {"data.py", "models.py", "specs.py", "train.py"}
    monkeypatch.undo()
    assert book.cache_key(PAGE, "smoke", {})["lmcbook"] == provenance.library_hash()
