"""A catalogue of bad inputs: each fails with a clear error that names the parameter and what is allowed,
before any compute, and leaves nothing in the run store."""

from __future__ import annotations

import struct

import pytest

from lmcbook import book
from lmcbook.cli import main
from lmcbook.data import DataError, load
from lmcbook.merge import interpolate
from lmcbook.models import MLP
from lmcbook.noise import spawn_step
from lmcbook.parts import study as part_study
from lmcbook.profiles import MechanismStudy, WidthStudy, resolve
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec, check_lams
from lmcbook.store import RunStore, StoreError
from lmcbook.sweep import run_all
from lmcbook.train import DivergedError


def _train(store, **kw):
    """Build a spec from keyword groups and ask the store for it."""
    spec = RunSpec(DataSpec(**kw.get("data", {})), ModelSpec(**{"width": 0.25, **kw.get("model", {})}),
                   TrainSpec(**{"epochs": 1, **kw.get("train", {})}))
    return store.get_or_train(spec, device="cpu")


CORRUPT_SPEC = RunSpec(model=ModelSpec(width=0.25), train=TrainSpec(epochs=1))

CASES = [
    # (id, callable(store, tmp_path), exception type, words the message must contain)
    ("unknown dataset", lambda st, t: _train(st, data={"name": "imagenet"}), SpecError,
     ["dataset", "'imagenet'", "'digits'", "'cifar10'"]),
    ("unknown architecture", lambda st, t: _train(st, model={"arch": "vit"}), SpecError,
     ["arch", "'mlp'", "'resnet20'"]),
    ("unknown norm", lambda st, t: _train(st, model={"norm": "group"}), SpecError, ["norm", "'batch'", "'layer'"]),
    ("width <= 0", lambda st, t: _train(st, model={"width": 0.0}), SpecError, ["width", "> 0"]),
    ("width rounds to 0 channels", lambda st, t: _train(st, model={"width": 0.001}), SpecError,
     ["width", "0 channels", ">="]),
    ("depth < 1", lambda st, t: _train(st, model={"depth": 0}), SpecError, ["depth", ">= 1"]),
    ("lam outside [0, 1]", lambda st, t: interpolate(MLP(4, 2, 3), MLP(4, 2, 3), 1.2), SpecError, ["lams", "[0, 1]"]),
    ("empty lam grid", lambda st, t: check_lams([]), SpecError, ["lams", "non-empty"]),
    ("lr <= 0", lambda st, t: _train(st, train={"lr": 0.0}), SpecError, ["lr", "> 0"]),
    ("batch size <= 0", lambda st, t: _train(st, train={"batch_size": 0}), SpecError, ["batch_size", ">= 1"]),
    ("batch size larger than the training set", lambda st, t: _train(st, train={"batch_size": 5000}), SpecError,
     ["batch_size=5000", "[1, 1257]"]),
    ("momentum outside [0, 1)", lambda st, t: _train(st, train={"momentum": 1.0}), SpecError,
     ["momentum", "[0, 1)"]),
    ("negative weight decay", lambda st, t: _train(st, train={"weight_decay": -0.1}), SpecError,
     ["weight_decay", ">= 0"]),
    ("zero epochs", lambda st, t: _train(st, train={"epochs": 0}), SpecError, ["epochs", ">= 1"]),
    ("torchvision root missing", lambda st, t: _train(st, data={"name": "mnist", "root": str(t / "none")}),
     DataError, ["data_root", "download=True", "train-images-idx3-ubyte"]),
    ("torchvision root with the wrong files", lambda st, t: _wrong_files(st, t), DataError,
     ["data_root", "t10k-labels-idx1-ubyte"]),
    ("no torchvision root at all", lambda st, t: load("cifar10", None), DataError, ["data_root", "download=True"]),
    ("corrupted checkpoint", lambda st, t: st.get_or_train(CORRUPT_SPEC, device="cpu"), StoreError,
     ["model.safetensors", "delete", "gc", CORRUPT_SPEC.short_id]),
    ("store root not writable", lambda st, t: _train(RunStore(_file(t)), train={}), StoreError,
     ["not writable", "LMCBOOK_STORE"]),
    ("papermill parameter of the wrong type",
     lambda st, t: book.check_parameters("width_accuracy", "quick", {"epochs": "ten"}), SpecError,
     ["epochs", "int"]),
    ("list parameter given as a string",
     lambda st, t: book.check_parameters("width_accuracy", "quick", {"widths": "0.5, 2"}), SpecError,
     ["widths", "list of numbers"]),
    ("unknown notebook parameter",
     lambda st, t: book.check_parameters("width_accuracy", "quick", {"wdith": [1]}), SpecError,
     ["wdith", "widths"]),
    ("unknown profile", lambda st, t: part_study("width", "fast"), SpecError,
     ["profile", "'smoke'", "'quick'", "'paper'"]),
    ("only names a notebook that does not exist",
     lambda st, t: book.check_parameters("width_acuracy", "quick", {}), SpecError,
     ["width_acuracy", "does not exist", "width_accuracy"]),
    ("spawn fraction outside (0, 1)", lambda st, t: spawn_step(RunSpec(), 1.0, 1257), SpecError,
     ["spawn_fraction", "(0, 1)"]),
    ("malformed scheduler", lambda st, t: run_all([RunSpec()], "dask://x", st.root), SpecError,
     ["scheduler", "local:N", "tcp://HOST:PORT"]),
    ("unknown device", lambda st, t: st.get_or_train(RunSpec(), device="tpu"), SpecError,
     ["device", "'auto'", "'cpu'"]),
    ("a study's unknown device", lambda st, t: resolve(WidthStudy, device="gpu"), SpecError,
     ["device='gpu'", "'auto'", "'cpu'", "'cuda'"]),
    ("a malformed cuda index", lambda st, t: resolve(WidthStudy, device="cuda:first"), SpecError,
     ["device='cuda:first'", "'cuda:N'"]),
    ("an empty cuda index", lambda st, t: resolve(WidthStudy, device="cuda:"), SpecError,
     ["device='cuda:'", "'cuda:N'"]),
    ("the mechanism study's unused initial-weight factor", lambda st, t: resolve(MechanismStudy, init_scale=0.5),
     SpecError, ["init_scale=0.5", "MechanismStudy", "init_scales"]),
    ("the mechanism study's unused weight decay", lambda st, t: resolve(MechanismStudy, weight_decay=0.1),
     SpecError, ["weight_decay=0.1", "weight_decays"]),
    ("a stand-in without its data", lambda st, t: load("mnist_standin", t / "nowhere"), DataError,
     ["mnist_standin", "t10k-images-idx3-ubyte"]),
    ("a diverging learning rate", lambda st, t: _train(st, train={"lr": 1e6, "warmup": 0.0, "momentum": 0.0}),
     DivergedError, ["diverged", "step", "lr"]),
]


def _file(tmp):
    f = tmp / "a-file"
    f.write_text("not a directory")
    return f


def _wrong_files(store, tmp):
    raw = tmp / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"):
        (raw / name).write_bytes(struct.pack(">II", 0x801, 0))
    return _train(store, data={"name": "mnist", "root": str(tmp)})


def _setup(name, store):
    """Prepare the store for cases that need an existing entry (the corrupted checkpoint)."""
    if name == "corrupted checkpoint":
        store.get_or_train(CORRUPT_SPEC, device="cpu")
        f = store.path(CORRUPT_SPEC) / "model.safetensors"
        f.write_bytes(f.read_bytes()[:100])


def _store_files(root):
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and not p.name.endswith(".lock") and p.name != "events.jsonl")


@pytest.mark.parametrize("name, call, exc, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, call, exc, words, tmp_path):
    store = RunStore(tmp_path / "store")
    _setup(name, store)
    before = {f: (store.root / f).read_bytes() for f in _store_files(store.root)}
    n_events = len(store.events())
    with pytest.raises(exc) as err:
        call(store, tmp_path)
    msg = str(err.value)
    for w in words:
        assert w in msg, f"{name}: {w!r} not in {msg!r}"
    after = {f: (store.root / f).read_bytes() for f in _store_files(store.root)}
    assert after == before, sorted(set(after) ^ set(before))  # nothing written, nothing half-written
    assert all(e["event"] != "trained" for e in store.events()[n_events:])


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 20


def test_cli_reports_bad_input_with_exit_code_2(tmp_path, capsys):
    assert main(["execute", "--only", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["execute", "--profile", "fast", "--only", "width_accuracy", "--out", str(tmp_path / "o")]) == 2
    assert "'smoke', 'quick', 'paper'" in capsys.readouterr().err
    assert main(["store", "gc", "--older-than", "soon", "--store", str(tmp_path / "s")]) == 2
    assert "--older-than='soon'" in capsys.readouterr().err
