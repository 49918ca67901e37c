"""A run store that many processes share, that a colleague reads without write access, and that survives damage.

Each test checks a behaviour against a known answer: every run trained exactly once however many processes
ask for it; a read-only store read without a single write; a damaged file named, skipped or repaired; a
derived frame recomputed when the weights it was measured on change.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lmcbook import book
from lmcbook.cli import main
from lmcbook.files import out_dir
from lmcbook.specs import STORE_ENV, store_root
from lmcbook.store import RunStore, StoreWarning, run_all
from lmcbook.studies import WIDTH
from tests.conftest import tiny_spec

ROOT = Path(__file__).resolve().parents[1]
LMCBOOK = [sys.executable, "-m", "lmcbook.cli"]


# -- many processes on one store --------------------------------------------------------------------------------
@pytest.mark.integration
def test_any_mix_of_processes_trains_each_run_once_and_each_log_counts_its_own(tmp_path):
    """Two `execute` runs of one notebook, a `sweep` and a `train` whose widths overlap theirs (the same runs asked
    for by four processes at once) on one store: every process finishes, every run is trained exactly once, and
    each execute counts only its own events.  (A width given twice in one list is refused before any compute:
    see the bad-input catalogue.)"""
    store = tmp_path / "store"
    common = ["--profile", "smoke", "-p", "seeds", "2", "-p", "epochs", "6", "--store", str(store)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmds = [
        LMCBOOK + ["execute", "--only", "width_accuracy", "--out", str(tmp_path / "o1")] + common,
        LMCBOOK + ["execute", "--only", "width_accuracy", "--out", str(tmp_path / "o2")] + common,
        LMCBOOK + ["sweep", "--part", "width", "--threads", "1", "-p", "widths", "[0.25, 0.5]"] + common,
        LMCBOOK + ["train", "--part", "width", "-p", "widths", "[0.5, 1.0]"] + common,
    ]
    procs = [subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(cmds), [o[1][-2000:] for o in outs]
    events = RunStore(store).events()
    trained = Counter(e["id"] for e in events if e["event"] == "trained")
    assert trained and set(trained.values()) == {1}, trained  # each run trained once, by one process
    assert set(trained) == set(RunStore(store).ids())
    # the two executions of one notebook: together they trained each of its runs once, and each counted its own
    counts = []
    for _, err in outs[:2]:
        line = next(ln for ln in err.splitlines() if ln.startswith("width_accuracy: done"))
        loaded, rest = line.split("; ")[1].split(" run(s) loaded from the store, ")
        counts.append((int(loaded), int(rest.split(" ")[0])))
    sessions = {e.get("session") for e in events if e.get("session")}
    assert len(sessions) == 2  # one per execution
    per_session = []  # each run counted once: trained, or else loaded (issue 39: a trained run is not also loaded)
    for s in sorted(sessions):
        trained_ids = {e["id"] for e in events if e.get("session") == s and e["event"] == "trained"}
        loaded_ids = {e["id"] for e in events if e.get("session") == s and e["event"] == "loaded"} - trained_ids
        per_session.append((len(loaded_ids), len(trained_ids)))
    assert sorted(counts) == sorted(per_session)
    page_runs = len(WIDTH.study("smoke", seeds=2, epochs=6).specs())
    assert all(loaded + trained == page_runs for loaded, trained in counts)  # every run of the page, once
    assert sum(trained for _, trained in counts) <= page_runs  # never one run trained by both


def test_a_duplicated_spec_is_trained_once_and_returned_twice(digits, tmp_path):
    store = RunStore(tmp_path / "s")
    a, b = tiny_spec(seed=0), tiny_spec(seed=1)
    runs = store.get_or_train_many([a, b, a], data=digits)
    assert [r.spec for r in runs] == [a, b, a]
    assert Counter(e["event"] for e in store.events()) == {"trained": 2}


# -- reading without write access ---------------------------------------------------------------------------------
def _read_only(path: Path) -> list[str]:
    """Return a command prefix that runs a command with ``path`` read-only: a read-only bind mount for root (who
    ignores permission bits), the permission bits for anyone else."""
    if os.geteuid() != 0:
        for p in [path, *path.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        return []
    if shutil.which("unshare") is None:
        pytest.fail("running as root, this test needs util-linux's `unshare` to mount the store read-only")
    return ["unshare", "--mount", "sh", "-c", f'mount --bind -o ro "{path}" "{path}" && exec "$@"', "sh"]


@pytest.mark.integration
def test_a_read_only_copy_of_a_finished_store_executes_a_page(tmp_path):
    store, out = tmp_path / "store", tmp_path / "out"
    args = ["--profile", "smoke", "--only", "width_accuracy", "-p", "seeds", "1", "-p", "epochs", "4"]
    assert main(["execute", *args, "--store", str(store), "--out", str(out)]) == 0
    copy = tmp_path / "archived"
    shutil.copytree(store, copy)
    before = {str(p.relative_to(copy)): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    prefix = _read_only(copy)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(prefix + LMCBOOK + ["execute", *args, "--store", str(copy), "--out", str(tmp_path / "o2"),
                                              "--force"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "width_accuracy: done" in proc.stderr and ", 0 trained" in proc.stderr
    assert "cannot be written" in (tmp_path / "o2" / "width_accuracy.ipynb").read_text()  # said, not a failure
    after = {str(p.relative_to(copy)): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert after == before  # not a byte written
    # the page computed from the read-only store is the page computed from the original
    a = pd.read_csv(out / "data" / "width_accuracy.csv")
    b = pd.read_csv(tmp_path / "o2" / "data" / "width_accuracy.csv")
    pd.testing.assert_frame_equal(a, b)


def test_event_logging_is_best_effort(digits, tmp_path, monkeypatch):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    store.get_or_train(spec, data=digits)
    real_open = open

    def no_write(path, mode="r", *a, **k):
        if str(path).endswith("events.jsonl") and any(c in mode for c in "aw"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, mode, *a, **k)

    fresh = RunStore(tmp_path / "s.copy")
    shutil.copytree(store.root, fresh.root)
    monkeypatch.setattr("builtins.open", no_write)
    with pytest.warns(StoreWarning, match="cannot be written") as caught:
        fresh.load(spec)
        fresh.load(spec)
    assert len([w for w in caught if issubclass(w.category, StoreWarning)]) == 1  # one warning, not one per load


# -- damage ----------------------------------------------------------------------------------------------------------
def test_a_torn_event_line_is_skipped_reported_and_repaired(digits, tmp_path, capsys):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    store.get_or_train(spec, data=digits)
    with open(store.root / "events.jsonl", "a") as f:
        f.write('{"time": 1, "event": "loa')  # a write cut short
    with pytest.warns(StoreWarning, match="torn"):
        assert [e["event"] for e in store.events()] == ["trained"]
    store.get_or_train(spec, data=digits)  # the next event starts on a line of its own
    assert [e["event"] for e in RunStore(store.root).events()] == ["trained", "loaded"]
    assert store.torn_event_lines() == [2]
    assert main(["store", "verify", "--store", str(store.root)]) == 1
    assert "TORN EVENT LINES events.jsonl: 1 torn line(s): 2" in capsys.readouterr().out
    assert main(["store", "gc", "--yes", "--store", str(store.root)]) == 0
    assert "dropped 1 torn event line(s)" in capsys.readouterr().out
    assert store.torn_event_lines() == [] and [e["event"] for e in store.events()] == ["trained", "loaded"]
    assert main(["store", "verify", "--store", str(store.root)]) == 0


def test_an_entry_without_a_manifest_is_reported_retrained_and_replaced(digits, tmp_path, capsys):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    first = store.get_or_train(spec, data=digits)
    (store.path(spec) / "manifest.json").unlink()
    assert main(["store", "verify", "--store", str(store.root)]) == 1
    assert "ENTRY WITHOUT A MANIFEST" in capsys.readouterr().out
    again = store.get_or_train(spec, data=digits)  # used to fail: OSError: Directory not empty
    store.verify(spec)
    assert all(torch.equal(again.model.state_dict()[k], v) for k, v in first.model.state_dict().items())
    # and gc removes such an entry
    (store.path(spec) / "manifest.json").unlink()
    assert main(["store", "gc", "--yes", "--store", str(store.root)]) == 0
    assert store.ids() == []


def test_a_damaged_derived_result_is_reported_removed_and_recomputed(tmp_path, capsys):
    store = RunStore(tmp_path / "s")
    calls = []

    def compute():
        calls.append(1)
        return {"frame": pd.DataFrame({"v": np.arange(5.0)})}

    store.cached_frames("t", {"k": 1}, compute)
    (entry,) = store.derived_entries()
    (entry / "frame.npz").write_bytes(b"PK\x03\x04 not a zip")
    assert main(["store", "verify", "--store", str(store.root)]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED DERIVED RESULT" in out and "frame.npz" in out
    assert main(["store", "gc", "--yes", "--store", str(store.root)]) == 0
    assert store.derived_entries() == []
    store.cached_frames("t", {"k": 1}, compute)
    assert len(calls) == 2 and main(["store", "verify", "--store", str(store.root)]) == 0


def test_a_sweep_reports_a_corrupt_run_and_finishes_the_others(digits, tmp_path):
    store = RunStore(tmp_path / "s")
    specs = [tiny_spec(seed=s) for s in range(3)]
    store.get_or_train(specs[1], data=digits)
    f = store.path(specs[1]) / "model.safetensors"
    f.write_bytes(f.read_bytes()[:100])
    results = run_all(specs, None, store.root, threads=1, device="cpu")
    assert [r.ok for r in results] == [True, False, True]
    assert "StoreError" in results[1].error and "gc" in results[1].error
    assert store.has(specs[0]) and store.has(specs[2])


# -- derived results follow the weights ------------------------------------------------------------------------
def test_derived_frames_are_recomputed_when_a_run_is_retrained_with_other_weights(digits, tmp_path):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    run = store.get_or_train(spec, data=digits)

    calls = []

    def compute():
        calls.append(1)
        w = store.load(spec, record=False).model.state_dict()
        return {"norms": pd.DataFrame({"norm": [float(sum(v.norm() for v in w.values()))]})}

    first = store.cached_frames("norms", {"run": spec.id}, compute)["norms"]
    assert store.cached_frames("norms", {"run": spec.id}, compute)["norms"].equals(first) and len(calls) == 1
    # the run is removed and trained again with other weights (as after `gc` and a batched-vs-alone retrain)
    store.remove([store.path(spec)])
    with torch.no_grad():
        for p in run.model.parameters():
            p.mul_(1.5)
    store.save(run, digits)
    second = store.cached_frames("norms", {"run": spec.id}, compute)["norms"]
    assert len(calls) == 2 and second["norm"].iloc[0] == pytest.approx(1.5 * first["norm"].iloc[0], rel=1e-5)
    assert len(store.derived_entries()) == 2


# -- the sensible behaviour for odd paths ----------------------------------------------------------------------
def test_a_tilde_in_a_path_is_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(STORE_ENV, "~/runs")
    assert store_root() == tmp_path / "runs" and RunStore().root == tmp_path / "runs"
    assert RunStore("~/elsewhere").root == tmp_path / "elsewhere"
    monkeypatch.setenv("LMCBOOK_OUT", "~/pages")
    assert out_dir() == tmp_path / "pages"


@pytest.mark.integration
def test_a_failed_execution_keeps_the_last_good_notebook_and_csv(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out, store, nb_dir = tmp_path / "out", tmp_path / "store", tmp_path / "notebooks"
    assert book.execute(["theory_lewc"], "smoke", {}, out, ROOT / "notebooks", store)[0].ok
    good = {p: p.read_bytes() for p in book.page_files(out, "theory_lewc")}
    shutil.copytree(ROOT / "notebooks", nb_dir)
    src = nb_dir / "theory_lewc.py"
    src.write_text(src.read_text() + '\n# %%\nraise RuntimeError("boom after the page was saved")\n')
    (bad,) = book.execute(["theory_lewc"], "smoke", {}, out, nb_dir, store)
    assert not bad.ok and "boom" in bad.error and "kept the last good notebook and CSV" in bad.error
    assert {p: p.read_bytes() for p in good} == good  # the CSV the failed run wrote was put back
    assert book.failed_notebook(out, "theory_lewc").exists()
    assert book.is_cached("theory_lewc", book.cache_key("theory_lewc", "smoke", {}, ROOT / "notebooks"), out)
    # a first execution that fails leaves neither a notebook nor a CSV
    fresh = tmp_path / "fresh"
    (bad,) = book.execute(["theory_lewc"], "smoke", {}, fresh, nb_dir, store)
    assert "no earlier good output" in bad.error
    assert not any(p.exists() for p in book.page_files(fresh, "theory_lewc"))


def test_the_sweep_command_reports_each_run_as_it_finishes(digits, tmp_path, capsys):
    assert main(["sweep", "--profile", "smoke", "--part", "width", "-p", "widths", "[0.25]", "-p", "seeds", "1",
                 "-p", "epochs", "1", "--store", str(tmp_path / "s")]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")]
    assert [ln.split("]")[0] for ln in lines] == ["[1/2", "[2/2"] and all("test_acc=" in ln for ln in lines)



# -- a killed run resumes ------------------------------------------------------------------------------------------
def test_a_run_killed_mid_training_resumes_from_its_checkpoint_bitwise(tmp_path):
    """A store-trained run killed with SIGKILL mid-training resumes from its last epoch checkpoint when asked for
    again, equals the uninterrupted run bit for bit (same thread count), and its checkpoint is gone once stored."""
    import signal
    import time

    spec = tiny_spec(width=4.0, epochs=60)  # 256 units: trained alone, a few seconds
    root = tmp_path / "s"
    code = (f"import json, sys, torch; torch.set_num_threads(1)\n"
            f"from lmcbook.specs import RunSpec\nfrom lmcbook.store import RunStore\n"
            f"RunStore({str(root)!r}, checkpoint_seconds=0).get_or_train("
            f"RunSpec.from_dict(json.loads(sys.argv[1])), device='cpu')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(spec.to_dict())], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    ckpt = root / ".checkpoints" / f"{spec.id}.ckpt.safetensors"
    deadline = time.time() + 120
    while not ckpt.exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before it wrote a checkpoint"
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    store = RunStore(root)
    assert not store.has(spec) and ckpt.exists()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        resumed = store.get_or_train(spec, device="cpu")
        clean = RunStore(tmp_path / "clean").get_or_train(spec, device="cpu")
    finally:
        torch.set_num_threads(threads)
    assert 0 < resumed.provenance["resumed_from_step"] < resumed.step
    assert "resumed_from_step" not in clean.provenance
    a, b = resumed.model.state_dict(), clean.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in b)
    assert resumed.history["loss"] == clean.history["loss"] and resumed.metrics == clean.metrics
    assert not ckpt.exists() and store.stale_checkpoints() == []


def test_progress_bars_show_on_a_terminal_and_in_jupyter_but_never_in_the_book(monkeypatch):
    from lmcbook.files import PROGRESS_ENV, show_progress

    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert show_progress() is False and show_progress(True) is True
    monkeypatch.setitem(sys.modules, "ipykernel", object())  # a live Jupyter kernel: tqdm.auto draws a widget
    assert show_progress() is True
    monkeypatch.setenv(PROGRESS_ENV, "0")  # what `lmcbook execute` sets for the book's pages
    assert show_progress() is False and show_progress(True) is True


# -- a colleague reads the store: modes follow the umask (issue 39) ----------------------------------------------
def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mode & 0o777 for p in [root, *root.rglob("*")]
            if not p.name.endswith(".lock")}


@pytest.mark.parametrize("umask, dirs, files", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_store_files_get_the_modes_the_umask_gives(digits, tmp_path, umask, dirs, files):
    """Entries, derived results and checkpoints are readable by the group and others under umask 022, as git's
    files are; a stricter umask keeps them private."""
    before = os.umask(umask)
    try:
        store = RunStore(tmp_path / "s")
        spec = tiny_spec()
        store.get_or_train(spec, data=digits)
        store.cached_frames("t", {"run": spec.id}, lambda: {"f": pd.DataFrame({"v": [1.0]})})
        from lmcbook.train import train

        train(tiny_spec(epochs=3), digits, progress=False, checkpoint=tmp_path / "s" / "run.ckpt")
    finally:
        os.umask(before)
    modes = _modes(store.root)
    assert modes[spec.id] == dirs and modes[f"{spec.id}/model.safetensors"] == files
    assert modes["run.ckpt"] == files
    wrong = {p: oct(m) for p, m in modes.items() if m != (dirs if (store.root / p).is_dir() else files)}
    assert not wrong, wrong


def _open_for_others(paths: list[Path], changed: list[tuple[Path, int]]) -> None:
    """Let other users traverse (o+x, not list) every folder above ``paths`` and the interpreter's real file, as a
    checkout in a private folder (``mktemp -d`` makes mode 0700) needs for another user to run it; each folder changed
    and its mode are appended to ``changed`` as it is changed, to restore."""
    for path in {q for p in paths for q in (p, p.resolve())}:
        for folder in [path, *path.parents] if path.is_dir() else path.parents:
            mode = folder.stat().st_mode & 0o7777
            if not mode & 0o001 and folder not in {f for f, _ in changed}:
                folder.chmod(mode | 0o001)
                changed.append((folder, mode))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_another_user_reads_a_shared_store(digits):
    """`nobody` (another user, no groups) lists, verifies and loads a store that root wrote under umask 022."""
    import tempfile

    before = os.umask(0o022)
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="lmcbook-shared-"))  # outside pytest's private 0700 folder
    opened: list[tuple[Path, int]] = []
    try:
        _open_for_others([ROOT, Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix)], opened)
        base.chmod(0o755)
        store = RunStore(base / "s")
        spec = tiny_spec()
        store.get_or_train(spec, data=digits)
        code = (f"from lmcbook.store import RunStore; from lmcbook.specs import RunSpec; import json; "
                f"s = RunStore({str(store.root)!r}); s.verify({spec.id!r}); "
                f"spec = RunSpec.from_dict(json.loads(open(s.path({spec.id!r}) / 'spec.json').read())['spec']); "
                "print(s.load(spec, 'cpu', record=False).metrics['test_acc'])")
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                               code], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(base)}, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert float(proc.stdout.split()[-1]) == pytest.approx(store.load(spec, record=False).metrics["test_acc"])
    finally:
        os.umask(before)
        shutil.rmtree(base, ignore_errors=True)
        for folder, mode in opened:
            folder.chmod(mode)
