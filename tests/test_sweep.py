"""Scale-out and a store that loses nothing: Dask sweeps, races, kills, integrity, gc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from lmcbook.cli import main
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, TrainSpec
from lmcbook.store import RunStore, StoreError, run_all

pytestmark = pytest.mark.integration


def _specs(n=6, epochs=2):
    return [RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.25 * (1 + s % 2), 64, 3),
                    TrainSpec(epochs=epochs, batch_size=64, seed=s)) for s in range(n)]


def _same_weights(store_a, store_b, spec):
    a, b = store_a.load(spec, "cpu").model.state_dict(), store_b.load(spec, "cpu").model.state_dict()
    return all(torch.equal(a[k], b[k]) for k in a)


def test_local_dask_cluster_matches_in_process_bitwise_and_reports_failures(tmp_path):
    specs = _specs()
    bad = RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.25, 64, 3),
                  TrainSpec(epochs=2, batch_size=64, lr=1e6, warmup=0.0, momentum=0.0, seed=99))
    dask_store, local_store = RunStore(tmp_path / "dask"), RunStore(tmp_path / "local")
    results = run_all(specs + [bad], "local:2", dask_store.root, threads=1)
    local = run_all(specs, None, local_store.root, threads=1)
    assert [r.id for r in results] == [s.id for s in specs + [bad]]
    assert all(r.ok for r in results[:-1]) and all(r.ok for r in local)
    failed = results[-1]
    assert not failed.ok and failed.id == bad.id and "diverged" in failed.error and "step" in failed.error
    assert not dask_store.has(bad)
    for s in specs:
        assert _same_weights(dask_store, local_store, s), s.short_id
    assert [r.metrics for r in results[:-1]] == [r.metrics for r in local]


def test_two_processes_asking_for_one_run_train_it_once(tmp_path):
    spec = _specs(1, epochs=30)[0]
    code = textwrap.dedent(f"""
        import sys, json
        from lmcbook.specs import RunSpec
        from lmcbook.store import RunStore
        RunStore({str(tmp_path / 's')!r}).get_or_train(RunSpec.from_dict(json.loads(sys.argv[1])), device="cpu")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, json.dumps(spec.to_dict())]) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    events = RunStore(tmp_path / "s").events()
    assert sorted(e["event"] for e in events) == ["loaded", "trained"]


def test_a_sweep_killed_midway_loses_nothing(tmp_path):
    specs = [RunSpec(DataSpec("digits"), ModelSpec("mlp", 8.0, 64, 4), TrainSpec(epochs=12, seed=s))
             for s in range(4)]
    root = tmp_path / "killed"
    code = textwrap.dedent(f"""
        import json, sys
        from lmcbook.specs import RunSpec
        from lmcbook.store import run_all
        specs = [RunSpec.from_dict(d) for d in json.load(open(sys.argv[1]))]
        run_all(specs, None, {str(root)!r}, threads=1)
    """)
    (tmp_path / "specs.json").write_text(json.dumps([s.to_dict() for s in specs]))
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "specs.json")])
    store = RunStore(root)
    deadline = time.time() + 300
    while not any(e["event"] == "trained" for e in store.events()):
        assert proc.poll() is None and time.time() < deadline, "the sweep ended before the first run was stored"
        time.sleep(0.05)
    time.sleep(0.5)  # the next run is now training
    finished = {e["id"] for e in store.events() if e["event"] == "trained"}
    assert len(finished) < len(specs), "the sweep finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # no partial entry is visible: every entry verifies, and the store lists only finished runs
    assert set(store.ids()) == finished
    for rid in store.ids():
        store.verify(rid)
    # whatever the killed writer left in .tmp is recognised as stale (its pid is gone), so gc can remove it
    leftovers = set((root / ".tmp").iterdir()) if (root / ".tmp").exists() else set()
    assert set(store.stale_temporaries(min_age_s=1e9)) == leftovers
    n0 = len(store.events())
    results = run_all(specs, None, root, threads=1)
    again = store.events()[n0:]
    assert {e["id"] for e in again if e["event"] == "loaded"} == finished  # loaded, not retrained
    assert {e["id"] for e in again if e["event"] == "trained"} == {s.id for s in specs} - finished
    # the final results equal those of an uninterrupted sweep
    clean = RunStore(tmp_path / "clean")
    uninterrupted = run_all(specs, None, clean.root, threads=1)
    assert [r.metrics for r in results] == [r.metrics for r in uninterrupted]
    for s in specs:
        assert _same_weights(store, clean, s)


def test_gc_removes_stale_temporaries_and_corrupt_entries_but_keeps_valid_runs(tmp_path, capsys):
    store = RunStore(tmp_path / "s")
    good, broken = _specs(2)
    run_all([good, broken], None, store.root)
    (store.path(broken) / "history.json").write_text("{}")
    stale = store.root / ".tmp" / "0123456789abcdef__somehost__1__x"
    stale.mkdir(parents=True)
    old = time.time() - 2 * 86400
    os.utime(stale, (old, old))
    with pytest.raises(StoreError, match="history.json"):
        store.load(broken)
    assert main(["store", "verify", "--store", str(store.root)]) == 1
    assert main(["store", "gc", "--store", str(store.root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "corrupt entry" in out and "stale temporary directory" in out
    assert store.ids() == [good.id] and not stale.exists()
    assert main(["store", "verify", "--store", str(store.root)]) == 0
    # valid runs go only when selected by age, and only after confirmation
    os.utime(store.path(good) / "manifest.json", (old, old))
    monkey_input = iter(["n"])
    import builtins

    real = builtins.input
    builtins.input = lambda prompt="": next(monkey_input)
    try:
        assert main(["store", "gc", "--store", str(store.root), "--older-than", "1d"]) == 1
    finally:
        builtins.input = real
    assert store.ids() == [good.id]
    assert main(["store", "gc", "--store", str(store.root), "--older-than", "1d", "--yes"]) == 0
    assert store.ids() == []


def test_sweep_cli_in_process(tmp_path, capsys):
    code = main(["sweep", "--profile", "smoke", "--part", "width", "--store", str(tmp_path / "s"), "--threads", "1"])
    assert code == 0
    assert "4 of 4 runs in the store" in capsys.readouterr().err
