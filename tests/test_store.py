import json
import shutil

import pytest
import torch

from lmcbook.cli import main
from lmcbook.files import _read_frame
from lmcbook.specs import DataSpec, RunSpec
from lmcbook.store import RunStore, StoreError, StoreWarning
from tests.conftest import tiny_spec


def test_get_or_train_trains_once_then_loads(digits, tmp_path):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    first = store.get_or_train(spec, data=digits)
    second = store.get_or_train(spec, data=digits)
    assert [e["event"] for e in store.events()] == ["trained", "loaded"]
    s1, s2 = first.model.state_dict(), second.model.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert second.metrics == first.metrics and second.history["loss"] == first.history["loss"]


def test_entry_layout_and_provenance(digits, tmp_path):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    store.get_or_train(spec, data=digits)
    path = store.path(spec)
    assert path.parent == store.root and path.name == spec.id
    names = {p.name for p in path.iterdir()}
    assert {"spec.json", "model.safetensors", "history.json", "metrics.json", "provenance.json",
            "manifest.json"} <= names
    meta = json.loads((path / "spec.json").read_text())
    assert RunSpec.from_dict(meta["spec"]) == spec and meta["id"] == spec.id
    prov = json.loads((path / "provenance.json").read_text())
    for key in ("lmcbook_version", "git_sha", "torch_version", "device", "threads", "train_seconds"):
        assert key in prov
    assert list((store.root / ".tmp").iterdir()) == []


def test_corrupted_checkpoint_is_detected(digits, tmp_path):
    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    store.get_or_train(spec, data=digits)
    f = store.path(spec) / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(StoreError) as err:
        store.get_or_train(spec, data=digits)
    assert spec.id[:12] in str(err.value) and "model.safetensors" in str(err.value)
    assert "delete" in str(err.value)


def test_unwritable_root_is_reported(digits, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="not writable"):
        RunStore(blocker).get_or_train(tiny_spec(), data=digits)


def test_entry_paths_come_from_the_hash_alone(tmp_path):
    store = RunStore(tmp_path / "s")
    spec = RunSpec(DataSpec("digits", root="../../../../etc"))
    assert store.path(spec).parent == store.root
    with pytest.raises(StoreError, match="hex"):
        store.path("../escape")


def test_default_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LMCBOOK_STORE", str(tmp_path / "elsewhere"))
    assert RunStore().root == tmp_path / "elsewhere"


def test_cached_frames_round_trip_exactly_and_never_unpickle(tmp_path):
    import numpy as np
    import pandas as pd

    store = RunStore(tmp_path / "s")
    rng = np.random.default_rng(0)
    columnar = pd.DataFrame({"value": rng.standard_normal(50) * 10.0 ** rng.integers(-30, 30, 50),
                             "layer": np.arange(50), "ok": np.arange(50) % 2 == 0,
                             "metric": [f"m{i % 3}" for i in range(50)], "lam": [float("nan")] * 50})
    mixed = pd.DataFrame({"value": [1.0, 2.0], "note": ["x", None]})  # text with a missing value: CSV
    calls = []

    def compute():
        calls.append(1)
        return {"columnar": columnar, "mixed": mixed}

    store.cached_frames("test", {"k": 1}, compute)
    (entry,) = (store.root / "derived").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["columnar.npz", "meta.json", "mixed.csv"]
    got = store.cached_frames("test", {"k": 1}, compute)
    assert calls == [1]  # the second call read the cache
    assert np.array_equal(got["columnar"]["value"].to_numpy(), columnar["value"].to_numpy())  # bitwise
    pd.testing.assert_frame_equal(got["columnar"], columnar, check_dtype=False)
    assert got["columnar"]["layer"].dtype.kind == "i" and got["columnar"]["ok"].dtype.kind == "b"
    assert got["mixed"]["note"].isna().tolist() == [False, True]
    # an .npz replaced by one holding a pickled object array fails its hash: reported by name, and recomputed
    np.savez(entry / "columnar.npz", c0=np.array([object()], dtype=object))
    with pytest.warns(StoreWarning, match="columnar.npz"):
        again = store.cached_frames("test", {"k": 1}, compute)
    assert calls == [1, 1] and np.array_equal(again["columnar"]["value"].to_numpy(), columnar["value"].to_numpy())
    assert store.damaged_derived() == []  # the damaged entry was replaced
    # and such a file is refused rather than unpickled, even without its hash
    np.savez(entry / "columnar.npz", c0=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        _read_frame(entry, "columnar", ["value"])


def test_an_entry_copied_into_another_runs_folder_is_refused(digits, tmp_path, capsys):
    """Issue 39: a run's recorded spec must hash to its folder's id, or the entry is another run's weights."""
    store = RunStore(tmp_path / "s")
    a, b = tiny_spec(seed=0), tiny_spec(width=0.5, seed=1)  # b is wider: loading a's weights as b cannot fit
    store.get_or_train(a, data=digits)
    store.get_or_train(b, data=digits)
    store.remove([store.path(b)])
    shutil.copytree(store.path(a), store.path(b))  # every file intact, its manifest matches
    with pytest.raises(StoreError) as err:
        store.load(b)
    assert b.short_id in str(err.value) and a.short_id in str(err.value) and "gc" in str(err.value)
    assert main(["store", "verify", "--store", str(store.root)]) == 1
    said = capsys.readouterr().out
    assert "CORRUPT ENTRY" in said and b.id in said and "1 corrupt" in said


def test_a_cuda_run_without_a_recorded_precision_warns_on_load(digits, tmp_path):
    """Before 42859cd every CUDA run trained under bf16 autocast whatever its spec said; a run records its precision
    since, and a stored CUDA run without one says so when loaded (a CPU run, or one that records it, does not)."""
    import hashlib
    import warnings

    store = RunStore(tmp_path / "s")
    spec = tiny_spec()
    store.get_or_train(spec, data=digits)
    path = store.path(spec)
    prov = json.loads((path / "provenance.json").read_text())
    assert prov["precision"] == "fp32"

    def rewrite(**changes):
        new = {k: v for k, v in {**prov, **changes}.items() if v is not None}
        (path / "provenance.json").write_text(json.dumps(new))
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["provenance.json"] = hashlib.sha256((path / "provenance.json").read_bytes()).hexdigest()
        (path / "manifest.json").write_text(json.dumps(manifest))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.load(spec, device="cpu")
        rewrite(device="cuda:0")
        store.load(spec, device="cpu")  # it records its precision
    rewrite(device="cuda:0", precision=None)
    with pytest.warns(UserWarning, match=r"trained on cuda:0 by code that did not record its precision.*42859cd"):
        store.load(spec, device="cpu")
