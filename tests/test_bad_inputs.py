"""A catalogue of bad inputs: each fails with a clear error that names the parameter and what is allowed,
before any compute, and leaves nothing in the run store.

``CASES`` are library calls, ``CLI_CASES`` command lines.  Bad inputs whose sensible answer is a behaviour rather
than an error have their own tests: ``~`` expanded, a torn event line skipped, a read-only store read, a failed
execution keeping the last good page, a corrupt run failing alone in a sweep (tests/test_sharing.py), and a
diverged noise cell marked and excluded (tests/test_noise.py).
"""

from __future__ import annotations

import io
import os
import struct

import pytest
import torch
from torch import nn

from lmcbook import book, probes
from lmcbook.cli import main
from lmcbook.data import DataError, from_arrays, load
from lmcbook.files import OUT_ENV
from lmcbook.merge import interpolate, permutation_spec, repair, reset_bn, weight_matching
from lmcbook.models import MLP, fit_inverse_temperature
from lmcbook.specs import STORE_ENV, DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec, check_lams, spawn_step
from lmcbook.store import RunStore, StoreError, run_all
from lmcbook.studies import MechanismStudy, WidthStudy, resolve
from lmcbook.studies import study as part_study
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
    ("zero epochs", lambda st, t: _train(st, train={"epochs": 0}), SpecError, ["epochs", "[1, 100000]"]),
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
    # found by trying the command line as a new user would (the store issue)
    ("an output folder that is a file", lambda st, t: _env(OUT_ENV, _file(t), book.execute, ["width_accuracy"],
                                                           "smoke", {}, None, "notebooks", st.root),
     SpecError, ["LMCBOOK_OUT", "is a file", "directory"]),
    ("--out that is a file", lambda st, t: book.execute(["width_accuracy"], "smoke", {}, _file(t), "notebooks",
                                                        st.root), SpecError, ["--out", "is a file"]),
    ("zero threads per task", lambda st, t: run_all([RunSpec()], None, st.root, threads=0), SpecError,
     ["threads=0", ">= 1"]),
    ("negative threads per task", lambda st, t: run_all([RunSpec()], None, st.root, threads=-1), SpecError,
     ["threads=-1", ">= 1"]),
    ("an absurd number of epochs", lambda st, t: book.check_parameters("width_accuracy", "smoke", {"epochs": 1e12}),
     SpecError, ["epochs=1000000000000", "[1, 100000]"]),
    ("a schedule of too many steps", lambda st, t: _train(st, train={"epochs": 99_999, "batch_size": 1}), SpecError,
     ["epochs=99999", "batch_size=1", "at most 10,000,000 steps"]),
    ("a weak weight decay that is not weaker",
     lambda st, t: book.check_parameters("weak_weight_decay", "quick", {"weak_weight_decay": 0.003,
                                                                        "weight_decay": 0.003}),
     SpecError, ["weak_weight_decay=0.003", "weight_decay=0.003", "weak_weight_decay < weight_decay"]),
    ("a width given twice", lambda st, t: book.check_parameters("width_accuracy", "smoke", {"widths": [0.25, 0.25]}),
     SpecError, ["widths=[0.25, 0.25]", "distinct values"]),
    ("an empty store path", lambda st, t: RunStore(""), SpecError, ["store=''", "directory path"]),
    ("an empty LMCBOOK_STORE", lambda st, t: _env(STORE_ENV, "", RunStore), SpecError,
     ["LMCBOOK_STORE=''", "directory path"]),
    ("an empty --store for execute", lambda st, t: book.execute(["width_accuracy"], "smoke", {}, t / "o",
                                                                "notebooks", ""), SpecError, ["--store=''"]),
    ("an empty --out", lambda st, t: book.execute(["width_accuracy"], "smoke", {}, "", "notebooks", st.root),
     SpecError, ["--out=''", "directory path"]),
    ("interpolate data of the wrong type", lambda st, t: interpolate(MLP(4, 2, 3), MLP(4, 2, 3), 0.5, [[0.0] * 4]),
     SpecError, ["data of type list", "torch.Tensor", "lmcbook.data.Dataset"]),
    ("BatchNorm interpolation without data",
     lambda st, t: interpolate(MLP(4, 2, 3, norm="batch"), MLP(4, 2, 3, norm="batch"), 0.5), SpecError,
     ["data=None", "BatchNorm", "Dataset"]),
    ("reset_bn inputs of the wrong type", lambda st, t: reset_bn(MLP(4, 2, 3, norm="batch"), "digits"), SpecError,
     ["x of type str", "torch.Tensor", "lmcbook.data.Dataset"]),
    ("repair data of the wrong type",
     lambda st, t: repair(MLP(4, 2, 3), MLP(4, 2, 3), MLP(4, 2, 3), {"x": 0}, 0.5),
     SpecError, ["data of type dict", "torch.Tensor", "lmcbook.data.Dataset"]),
    ("calibration on empty logits",
     lambda st, t: fit_inverse_temperature(torch.zeros(0, 10), torch.zeros(0, dtype=torch.long)), SpecError,
     ["logits", "(0, 10)", "N >= 1"]),
    ("calibration with one label too few",
     lambda st, t: fit_inverse_temperature(torch.zeros(5, 3), torch.zeros(4, dtype=torch.long)), SpecError,
     ["labels", "(4,)", "expected shape (5,)"]),
    ("calibration on 3-D logits",
     lambda st, t: fit_inverse_temperature(torch.zeros(2, 5, 3), torch.zeros(2, dtype=torch.long)), SpecError,
     ["logits", "(2, 5, 3)", "2-D", "(N, C)"]),
    ("calibration labels outside the classes",
     lambda st, t: fit_inverse_temperature(torch.zeros(3, 2), torch.tensor([0, 1, 2])), SpecError,
     ["labels", "2 classes", "[0, 1]"]),
    ("probing a layer called twice",
     lambda st, t: probes.record(nn.Sequential(*(lambda lin: (lin, nn.ReLU(), lin))(nn.Linear(4, 4))),
                                 torch.zeros(2, 4)), SpecError, ["'0' (2 times)", "called once"]),
    ("a damaged derived result", lambda st, t: st.verify_derived(st.derived_entries()[0]), StoreError,
     ["derived result", "frame.npz", "gc"]),
    # issue 39: a cap on every count a user can set, and impossible input refused
    ("a billion seeds", lambda st, t: part_study("width", "smoke", seeds=10**9), SpecError,
     ["seeds=1000000000", "[1, 100]"]),
    ("a million decisive seeds", lambda st, t: part_study("mechanism", "smoke", decisive_seeds=10**6), SpecError,
     ["decisive_seeds=1000000", "[1, 100]"]),
    ("a billion random permutations", lambda st, t: part_study("controls", "smoke", draws=10**9), SpecError,
     ["draws=1000000000", "[1, 1000]"]),
    ("a width grid of 100 values", lambda st, t: part_study("width", "smoke", widths=[0.25 * i for i in range(1, 101)]),
     SpecError, ["widths=", "100 values", "at most 32 values"]),
    ("a noise grid that would train 300k runs",
     lambda st, t: part_study("noise", "smoke", grid_seeds=100, lrs=[0.001 * i for i in range(1, 33)],
                              batch_sizes=list(range(8, 40))), SpecError,
     ["NoiseStudy", "would train", "at most 100,000", "seeds"]),
    ("a width sweep of one linear layer", lambda st, t: part_study("width", "smoke", depth=1), SpecError,
     ["depth=1", "WidthStudy", ">= 2"]),
    ("a mechanism sweep of one linear layer", lambda st, t: part_study("mechanism", "smoke", depth=1), SpecError,
     ["depth=1", "MechanismStudy", ">= 2"]),
    ("arrays with one label too few", lambda st, t: _arrays(y_train=_labels(9)), SpecError,
     ["y_train", "(9,)", "expected shape (10,)"]),
    ("labels beyond num_classes", lambda st, t: _arrays(y_test=_labels(10) + 3), SpecError,
     ["y_test", "[0, 9]", "num_classes=10"]),
    ("NaN inputs", lambda st, t: _arrays(x_cal=torch.full((10, 4), float("nan")).numpy()), SpecError,
     ["x_cal", "finite", "NaN"]),
    ("an empty x", lambda st, t: _arrays(x_train=torch.zeros(0, 4).numpy(), y_train=_labels(0)), SpecError,
     ["x_train", "(0, 4)", "N >= 1"]),
    ("a permutation spec of another width",
     lambda st, t: weight_matching(MLP(4, 3, 16), MLP(4, 3, 16), permutation_spec(MLP(4, 3, 8))), SpecError,
     ["spec does not fit the model", "size 8", "size 16", "permutation_spec(model)"]),
]


def _labels(n):
    return (torch.arange(n) % 10).numpy()


def _arrays(**given):
    """Call data.from_arrays with 10 valid examples of 4 features per split, some of them replaced by ``given``."""
    x = torch.rand(10, 4).numpy()
    splits = {"x_train": x, "y_train": _labels(10), "x_cal": x, "y_cal": _labels(10), "x_test": x,
              "y_test": _labels(10), **given}
    return from_arrays("mine", *splits.values(), 10, "cpu")

#: Command lines that fail: (id, argv, environment, standard input, exit code, words on stderr or stdout).
CLI_CASES = [
    ("gc without --yes and without a terminal", ["store", "gc"], {}, "", 1, ["nothing deleted", "--yes"]),
    ("verify of a store that does not exist", ["store", "verify", "--store", "{t}/typo"], {}, None, 2,
     ["typo", "no such directory"]),
    ("an empty --store", ["store", "ls", "--store", ""], {}, None, 2, ["store=''", "directory path"]),
    ("train with a diverging learning rate",
     ["train", "--profile", "smoke", "--part", "width", "-p", "lr", "1000", "-p", "widths", "[0.25]",
      "-p", "seeds", "1"], {}, None, 1, ["diverged", "FAILED", "0 of 2 runs in the store"]),
    ("sweep with zero threads", ["sweep", "--profile", "smoke", "--threads", "0"], {}, None, 2, ["threads=0"]),
    ("execute into a file", ["execute", "--profile", "smoke", "--only", "width_accuracy"],
     {"LMCBOOK_OUT": "{t}/a-file"}, None, 2, ["LMCBOOK_OUT", "is a file"]),
    ("an absurd -p epochs", ["execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "epochs", "1e12"],
     {}, None, 2, ["epochs=1000000000000", "[1, 100000]"]),
    ("an absurd -p seeds", ["execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "seeds", "100000000"],
     {}, None, 2, ["seeds=100000000", "[1, 100]"]),
    ("-p depth 1 for the width pages", ["execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "depth",
                                        "1"], {}, None, 2, ["depth=1", ">= 2"]),
    ("verify of a folder that is not a store", ["store", "verify", "--store", "{t}"], {}, None, 2,
     ["not a run store", "a-file"]),
    ("malformed YAML in -p", ["execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "widths", "[0.5"],
     {}, None, 2, ["-p widths '[0.5'", "not valid YAML"]),
    ("a missing data_root", ["execute", "--profile", "smoke", "--only", "mechanism", "-p", "dataset", "mnist_standin",
                             "-p", "data_root", "{t}/nowhere"], {}, None, 2, ["data_root='{t}/nowhere'", "lacks"]),
    ("reference with a missing --data-root", ["reference", "mechanism-mnist-standin", "--data-root", "{t}/nowhere"],
     {}, None, 2, ["mnist_standin", "nowhere", "t10k-images-idx3-ubyte"]),
]


def _env(name, value, fn, *args):
    """Call ``fn(*args)`` with the environment variable ``name`` set to ``value``."""
    before = os.environ.get(name)
    os.environ[name] = str(value)
    try:
        return fn(*args)
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _damaged_derived(store):
    """Cache a small derived result, damage its frame file, and return its directory."""
    import pandas as pd

    store.cached_frames("t", {"k": 1}, lambda: {"frame": pd.DataFrame({"v": [1.0, 2.0]})})
    (path,) = store.derived_entries()
    f = path / "frame.npz"
    f.write_bytes(f.read_bytes()[:40])
    return path


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
    if name == "a damaged derived result":
        _damaged_derived(store)
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
    assert len(CASES) + len(CLI_CASES) >= 60


@pytest.mark.parametrize("name, argv, env, stdin, code, words", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_bad_command_line(name, argv, env, stdin, code, words, tmp_path, monkeypatch, capsys):
    """Each command line fails with its exit code and a message that names the parameter, and trains nothing."""
    store = tmp_path / "store"
    store.mkdir()
    _file(tmp_path)
    for k, v in env.items():
        monkeypatch.setenv(k, v.format(t=tmp_path))
    monkeypatch.setenv(STORE_ENV, str(store))
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        (store / ".tmp").mkdir()
        (store / ".tmp" / "left-behind").mkdir()  # something for gc to offer to delete
        os.utime(store / ".tmp" / "left-behind", (0, 0))
    assert main([a.format(t=tmp_path) for a in argv]) == code
    said = "".join(capsys.readouterr())
    for w in words:
        w = w.format(t=tmp_path)
        assert w in said, f"{name}: {w!r} not in {said!r}"
    assert not any(e["event"] == "trained" for e in RunStore(store).events())
    if stdin is not None:
        assert (store / ".tmp" / "left-behind").exists()  # nothing deleted


def test_cli_reports_bad_input_with_exit_code_2(tmp_path, capsys):
    assert main(["execute", "--only", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["execute", "--profile", "fast", "--only", "width_accuracy", "--out", str(tmp_path / "o")]) == 2
    assert "'smoke', 'quick', 'paper'" in capsys.readouterr().err
    assert main(["store", "gc", "--older-than", "soon", "--store", str(tmp_path / "s")]) == 2
    assert "--older-than='soon'" in capsys.readouterr().err
