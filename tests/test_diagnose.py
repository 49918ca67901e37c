"""`lmcbook diagnose`: the automatic permutation spec, checkpoint formats, errors before compute, the K-model soup,
the report's files, and the report in a browser."""

from __future__ import annotations

import inspect
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from lmcbook import cli, merge, models, plots_width
from lmcbook.data import Dataset
from lmcbook.tools import diagnose

D, C = 12, 3  #: input features and classes of the synthetic task


# -- the automatic spec ----------------------------------------------------------------------------
@pytest.mark.parametrize("net, x", [
    (models.MLP(D, C, 16, 4), torch.randn(4, D)),
    (models.MLP(D, C, 16, 3, "batch", True), torch.randn(4, D)),
    (models.MLP(D, C, 16, 3, "layer"), torch.randn(4, D)),
    (models.VGG11(3, C, 4, "batch"), torch.randn(2, 3, 16, 16)),
    (models.VGG11(3, C, 4, "none", True), torch.randn(2, 3, 16, 16)),
    (models.ResNet20(3, C, 4, "batch", True), torch.randn(2, 3, 16, 16)),
    (models.ResNet20(3, C, 4, "layer"), torch.randn(2, 3, 16, 16)),
], ids=["mlp", "mlp-bn-bias", "mlp-ln", "vgg11-bn", "vgg11-bias", "resnet20-bn", "resnet20-gn"])
def test_the_derived_spec_equals_the_hand_written_one(net, x):
    derived = merge.derive_spec(net, x)
    assert merge.equivalent(derived, merge.permutation_spec(net))
    assert merge.check_spec(net.eval(), derived, x) < 1e-5


def test_equivalent_tells_specs_apart():
    net = models.ResNet20(3, C, 4)
    hand = merge.permutation_spec(net)
    # give the first block's conv2 its own permutation: the residual stream is then permuted twice over
    axes = dict(hand.axes_to_perm)
    axes["blocks.0.conv2.weight"] = ("X", axes["blocks.0.conv2.weight"][1], None, None)
    split = merge.PermutationSpec.from_axes(axes, net)
    assert not merge.equivalent(split, hand)
    with pytest.raises(merge.SpecUnavailable, match="changed"):
        merge.check_spec(net.eval(), split, torch.randn(2, 3, 16, 16))


def test_torchvision_resnet18_keeps_its_function_under_a_random_permutation():
    torchvision = pytest.importorskip("torchvision")
    net = torchvision.models.resnet18(num_classes=C).eval()
    x = torch.randn(2, 3, 32, 32)
    spec = merge.derive_spec(net, x)
    assert len(spec.sizes) == 12  # stem + layer1 stream share one; every block's inner conv; 3 later streams
    assert spec.axes_to_perm["fc.weight"][0] is None and spec.axes_to_perm["conv1.weight"][1] is None
    assert merge.check_spec(net, spec, x) < 1e-4


class SmallCNN(nn.Module):
    """conv → ReLU → pool → conv → ReLU → pool → flatten → linear → ReLU → linear, the ordinary MNIST CNN; the
    flatten is ``nn.Flatten``, ``torch.flatten`` or ``view``, the second pool a max-pool or an adaptive average pool."""

    def __init__(self, flatten: str = "module", pool: str = "max") -> None:
        super().__init__()
        self.flatten_by = flatten
        self.conv1, self.conv2 = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 6, 3, padding=1)
        self.pool1 = nn.MaxPool2d(2)
        self.pool2 = nn.MaxPool2d(2) if pool == "max" else nn.AdaptiveAvgPool2d((3, 3))
        self.flat = nn.Flatten()
        self.fc1, self.fc2 = nn.Linear(6 * (4 if pool == "max" else 9), 10), nn.Linear(10, C)

    def forward(self, x):
        h = self.pool2(torch.relu(self.conv2(self.pool1(torch.relu(self.conv1(x))))))
        h = {"module": self.flat, "function": lambda t: torch.flatten(t, 1),
             "view": lambda t: t.view(t.size(0), -1)}[self.flatten_by](h)
        return self.fc2(torch.relu(self.fc1(h)))


@pytest.mark.parametrize("flatten, pool", [("module", "max"), ("function", "max"), ("view", "adaptive")])
def test_a_cnn_with_flatten_gets_a_block_spec_that_keeps_its_function(flatten, pool):
    """Through a Flatten each channel is a block of H·W features of the next Linear's input: a random permutation of
    the derived spec leaves the outputs unchanged, and weight matching recovers a planted permutation."""
    torch.manual_seed(0)
    net, x = SmallCNN(flatten, pool).eval(), torch.randn(5, 1, 8, 8)
    spec = merge.derive_spec(net, x)
    assert spec.axes_to_perm["fc1.weight"] == ("P_fc1", ("P_conv2", 4 if pool == "max" else 9))
    assert spec.sizes == {"P_conv1": 4, "P_conv2": 6, "P_fc1": 10} and spec.axes_to_perm["fc2.weight"][0] is None
    assert merge.check_spec(net, spec, x) < 1e-5
    planted = merge.random_permutation(spec, torch.Generator().manual_seed(3))
    permuted = merge.permute(net, planted, spec)
    found = merge.weight_matching(permuted, net, spec).perms
    assert all(torch.equal(found[p], planted[p]) for p in planted)
    # the same spec without blocks (a channel permutation applied to single features) breaks the function
    single = {k: tuple(e[0] if isinstance(e, tuple) else e for e in v) for k, v in spec.axes_to_perm.items()}
    with pytest.raises(ValueError, match="has size 6 on .* but 24|has size 6 on .* but 54"):
        merge.PermutationSpec.from_axes(single, net)


def test_a_cnns_channel_statistics_over_many_inputs_are_those_of_one_pass():
    """REPAIR's statistics of a convolutional network are accumulated over batches (its feature maps on a whole
    training split would take gigabytes): they equal the one-pass mean and standard deviation."""
    torch.manual_seed(0)
    net, x = SmallCNN().eval(), torch.randn(2 * models.CONV_EVAL_BATCH + 37, 1, 8, 8)
    stats = merge.channel_stats(net, x, ["conv1", "conv2"])
    with torch.no_grad():
        outs = {"conv1": net.conv1(x)}
        outs["conv2"] = net.conv2(net.pool1(torch.relu(outs["conv1"])))
    for name, o in outs.items():
        assert torch.allclose(stats[name][0], o.mean(dim=(0, 2, 3)), atol=1e-5)
        assert torch.allclose(stats[name][1], o.std(dim=(0, 2, 3), unbiased=False), atol=1e-5)


def test_a_hand_written_spec_expresses_blocks_and_a_reshape_that_mixes_is_refused():
    net = SmallCNN().eval()
    axes = {"conv1.weight": ("A", None, None, None), "conv1.bias": ("A",), "conv2.weight": ("B", "A", None, None),
            "conv2.bias": ("B",), "fc1.weight": ("H", ["B", 4]), "fc1.bias": ("H",), "fc2.weight": (None, "H"),
            "fc2.bias": (None,)}
    spec = merge.PermutationSpec.from_axes(axes, net)  # a list [name, block] (from YAML or JSON) reads as a tuple
    assert merge.equivalent(spec, merge.derive_spec(net, torch.randn(2, 1, 8, 8)))
    assert merge.check_spec(net, spec, torch.randn(3, 1, 8, 8)) < 1e-5
    with pytest.raises(ValueError, match="blocks of 5 features, but the axis has 24"):
        merge.PermutationSpec.from_axes({**axes, "fc1.weight": ("H", ("B", 5))}, net)

    class Mixing(SmallCNN):
        def forward(self, x):
            h = self.pool2(torch.relu(self.conv2(self.pool1(torch.relu(self.conv1(x))))))
            return self.fc2(torch.relu(self.fc1(h.transpose(1, 3).reshape(h.size(0), -1))))

    with pytest.raises(merge.SpecUnavailable, match="transpose"):
        merge.derive_spec(Mixing().eval(), torch.randn(2, 1, 8, 8))


class Concat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.out = nn.Linear(D, 4), nn.Linear(D, 4), nn.Linear(8, C)

    def forward(self, x):
        return self.out(torch.cat([self.a(x), self.b(x)], 1))


def test_an_unsupported_operation_is_named():
    with pytest.raises(merge.SpecUnavailable, match="node 'cat'"):
        merge.derive_spec(Concat(), torch.randn(2, D))


# -- checkpoints -----------------------------------------------------------------------------------
def _task(seed: int = 0, n: int = 1000):
    """A learnable 3-class task with label noise (so calibration has something to fit)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D)).astype(np.float32)
    y = (x @ rng.normal(size=(D, C)) + rng.normal(scale=1.5, size=(n, C))).argmax(1)
    return x, y


def _train(seed: int, x, y, hidden: int = 16, depth: int = 3, steps: int = 60) -> nn.Module:
    torch.manual_seed(seed)
    net = models.MLP(D, C, hidden, depth)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(steps):
        loss = F.cross_entropy(net(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three trained MLP checkpoints in three formats, and the task as an .npz."""
    root = tmp_path_factory.mktemp("diagnose")
    x, y = _task()
    np.savez(root / "task.npz", x_train=x[:400], y_train=y[:400], x_test=x[400:], y_test=y[400:])
    nets = [_train(k, x[:400], y[:400]) for k in range(3)]
    save_file(nets[0].state_dict(), str(root / "a.safetensors"))
    torch.save(nets[1].state_dict(), root / "b.pt")
    torch.save({"epoch": 3, "model": {f"module.{k}": v for k, v in nets[2].state_dict().items()}}, root / "c.pth")
    return root, nets


def test_every_checkpoint_format_loads_the_same_tensors(files):
    root, nets = files
    for name, net in (("a.safetensors", nets[0]), ("b.pt", nets[1]), ("c.pth", nets[2])):
        state = diagnose.load_state(root / name)
        assert state.keys() == net.state_dict().keys()
        assert all(torch.equal(state[k], v) for k, v in net.state_dict().items())
    torch.save({"state_dict": nets[0].state_dict(), "optimizer": {}}, root / "nested.pt")
    assert diagnose.load_state(root / "nested.pt").keys() == nets[0].state_dict().keys()


class Payload:
    def __reduce__(self):
        return (print, ("unpickled!",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_checkpoint_holding_objects_is_never_unpickled(tmp_path, capsys):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"w": Payload()}, f)
    with pytest.raises(diagnose.CheckpointError, match="evil.pt"):
        diagnose.load_state(path)
    assert "unpickled!" not in capsys.readouterr().out


# -- errors before compute, nothing written ---------------------------------------------------------
def _bad_inputs(root, nets):
    wide = models.MLP(D, C, 32, 3)
    save_file(wide.state_dict(), str(root / "wide.safetensors"))
    save_file({k: v for k, v in nets[0].state_dict().items() if k != "layers.2.weight"},
              str(root / "short.safetensors"))
    nan = {k: v.clone() for k, v in nets[0].state_dict().items()}
    nan["layers.1.weight"][0, 0] = float("nan")
    save_file(nan, str(root / "nan.safetensors"))
    x, y = _task(n=50)
    np.savez(root / "wrong_shape.npz", x_train=x[:, :5], y_train=y, x_test=x[:, :5], y_test=y)
    (root / "netmod.py").write_text(f"from lmcbook import models\n\n\ndef make():\n"
                                    f"    return models.MLP({D}, {C}, 16, 3)\n")
    ok = ["a.safetensors", "b.pt", "--model", "mlp", "--model-args", "{width: 0.25, depth: 3}", "--data", "task.npz"]
    z = dict(np.load(root / "task.npz"))
    bad_npz = {"xcal": {**z, "x_cal": z["x_train"][:10]}, "lengths": {**z, "y_test": z["y_test"][:-1]},
               "empty": {**z, "x_test": z["x_test"][:0], "y_test": z["y_test"][:0]},
               "onehot": {**z, "y_test": np.eye(C)[z["y_test"]]}, "fractions": {**z, "y_test": z["y_test"] + 0.5},
               "nan_input": {**z, "x_test": np.where(np.arange(D) == 2, np.nan, z["x_test"])}}
    for name, arrays in bad_npz.items():
        np.savez(root / f"{name}.npz", **arrays)
    torch.save(nets[0], root / "whole.pt")  # a pickled nn.Module
    return [
        ([*ok[:5], "{hidden: 64}", *ok[6:]], r"--model-args \['hidden'\] are not allowed.*width, base_width"),
        (["a.safetensors", "./a.safetensors", *ok[2:]], "'./a.safetensors' is given more than once"),
        ([*ok, "--lams", "0"], "--lams 0 is not allowed"),
        ([*ok[:7], "cifar10"], "cifar10: needs --data-root.*diagnose never downloads.*then pass --data-root PATH"),
        ([*ok[:7], "xcal.npz"], "xcal.npz has x_cal but no y_cal"),
        ([*ok[:7], "lengths.npz"], r"lengths.npz: y_test of shape \(599,\).*one label per input"),
        ([*ok[:7], "empty.npz"], r"empty.npz: x_test of shape \(0, 12\)"),
        ([*ok[:7], "onehot.npz"], r"one-hot rows\? pass y_test.argmax\(1\)"),
        ([*ok[:7], "fractions.npz"], "fractions.npz: y_test.*integer class labels"),
        ([*ok[:7], "nan_input.npz"], "nan_input.npz: x_test.*finite"),
        (["whole.pt", *ok[1:]], "whole.pt' holds pickled Python objects.*weights_only=False.*state_dict"),
        (["a.safetensors", "b.pt", "--model", "netmod.py:make", "--data", "wrong_shape.npz"],
         "wrong_shape.npz \\(inputs of shape \\(5,\\)\\) does not fit --model netmod.py:make"),
        (["a.safetensors", "wide.safetensors", *ok[2:]], "wide.safetensors.*shape"),
        (["a.safetensors", "short.safetensors", *ok[2:]], "short.safetensors.*missing keys \\['layers.2.weight'\\]"),
        (["a.safetensors", "nan.safetensors", *ok[2:]], "nan.safetensors.*non-finite.*layers.1.weight"),
        (["a.safetensors", "missing.pt", *ok[2:]], "missing.pt.*missing"),
        (["a.safetensors", "b.pt", "--model", "no_such_module:Net", "--data", "task.npz"],
         "no_such_module:Net.*cannot be imported"),
        ([*ok[:7], "wrong_shape.npz"], "a.safetensors.*shape.*inputs of --data wrong_shape.npz, of shape \\(5,\\)"),
        ([*ok[:7], "absent.npz"], "absent.npz.*missing"),
        ([*ok[:7], "imagenet"], "imagenet.*expected one of"),
        (["a.safetensors", *ok[1:]][:1] + ok[2:], "1 checkpoint"),
        ([*ok, "--lams", "2"], "--lams 2"),
    ]


def test_each_bad_input_is_refused_by_name_before_anything_is_written(files, monkeypatch, capsys):
    root, nets = files
    monkeypatch.chdir(root)
    for argv, message in _bad_inputs(root, nets):
        assert cli.main(["diagnose", *argv, *([] if "--out" in argv else ["--out", "report"])]) == 2, argv
        err = capsys.readouterr().err
        assert "lmcbook: error:" in err and pd.Series([err]).str.contains(message).all(), (argv, err)
        assert len(err.strip().splitlines()) == 1 and "\x1b[" not in err, err  # one line, no terminal escapes
        assert not (root / "report").exists() and not list(root.glob(".report*")), argv


def test_an_output_folder_that_cannot_be_written_is_refused_before_compute(files, monkeypatch, capsys):
    """(As root every folder is writable, so the test stands in for the permission with os.access.)"""
    root, _ = files
    monkeypatch.chdir(root)
    (root / "locked").mkdir(exist_ok=True)
    monkeypatch.setattr(diagnose.os, "access", lambda path, mode: Path(path).name != "locked")
    monkeypatch.setattr(diagnose, "prepare", lambda *a, **k: pytest.fail("computed before checking --out"))
    argv = ["a.safetensors", "b.pt", "--model", "mlp", "--data", "task.npz", "--out", "locked/report"]
    assert cli.main(["diagnose", *argv]) == 2
    assert "its parent folder" in capsys.readouterr().err and not list((root / "locked").iterdir())


def test_a_killed_runs_leftovers_are_removed_and_the_report_follows_the_umask(files, monkeypatch):
    root, _ = files
    monkeypatch.chdir(root)
    dead = root / ".fresh.999999999.abc"  # a pid no process has
    dead.mkdir()
    alive = root / f".fresh.{os.getpid()}.xyz"  # this process's: another write of it may be under way
    alive.mkdir()
    diag = diagnose.diagnose(diagnose.prepare(["a.safetensors", "b.pt"], "mlp", "task.npz",
                                              {"width": 0.25, "depth": 3}, lams=3), progress=False)
    old = os.umask(0o022)
    try:
        diagnose.write(diag, "fresh", "test", 0.0)
    finally:
        os.umask(old)
    assert not dead.exists() and alive.exists()
    assert (root / "fresh").stat().st_mode & 0o777 == 0o755
    alive.rmdir()


def test_ctrl_c_is_one_line_and_exit_code_130(files, monkeypatch, capsys):
    root, _ = files
    monkeypatch.chdir(root)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(diagnose, "diagnose", interrupted)
    argv = ["a.safetensors", "b.pt", "--model", "mlp", "--model-args", "{width: 0.25, depth: 3}", "--data", "task.npz"]
    assert cli.main(["diagnose", *argv, "--out", "stopped"]) == 130
    assert capsys.readouterr().err.strip() == "lmcbook: interrupted (diagnose)" and not (root / "stopped").exists()


def test_a_command_whose_extra_is_missing_says_which_in_one_line(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.delitem(sys.modules, "lmcbook.book", raising=False)
    monkeypatch.setitem(sys.modules, "jupytext", None)  # as in the core wheel, without the [book] extra
    assert cli.main(["execute", "--only", "theory_lewc", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("lmcbook: error: `lmcbook execute` needs jupytext, from the [book] extra: "
                           "pip install 'lmcbook[book]'"), err


def test_preprocessing_is_chosen_and_said():
    """lmcbook's data sets are standardised by default, as its models train; --preprocess none gives the data set's
    own scale (pixels in [0, 1]); arrays are read as given unless told otherwise; the report says which."""
    std, raw = (diagnose.load_data("digits", preprocess=p) for p in ("standardize", "none"))
    assert abs(float(std.x_train.mean())) < 1e-3 and float(raw.x_train.min()) >= 0 and float(raw.x_train.max()) <= 1
    assert torch.equal(diagnose.load_data("digits").x_test, std.x_test)  # the default for a built-in data set
    assert diagnose.preprocess_of("task.npz", None) == "none" and diagnose.preprocess_of("mnist", None) == "standardize"
    assert "standardised" in diagnose.preprocess_words("mnist", "standardize")
    assert "pixels in [0, 1]" in diagnose.preprocess_words("mnist", "none")
    with pytest.raises(diagnose.SpecError, match="--preprocess 'zscore' is not allowed: expected one of standardize"):
        diagnose.preprocess_of("mnist", "zscore")


def test_check_says_what_the_report_would_run_and_refuses_checkpoints_that_do_not_fit(files, monkeypatch, capsys):
    root, nets = files
    monkeypatch.chdir(root)
    save_file(models.MLP(D, C, 32, 3).state_dict(), str(root / "wider.safetensors"))
    monkeypatch.setattr(diagnose, "diagnose", lambda *a, **k: pytest.fail("--check ran the diagnosis"))
    argv = ["diagnose", "--check", "a.safetensors", "b.pt", "c.pth", "--model", "mlp", "--model-args",
            "{width: 0.25, depth: 3}", "--data", "task.npz", "--out", "never"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count(": fits --model mlp") == 3 and "derived by tracing" in out and "No BatchNorm" in out
    assert "weight matching and REPAIR" in out and "the uniform soup of all 3 (plain and after matching)" in out
    assert cli.main([*argv[:3], "wider.safetensors", *argv[5:]]) == 1
    out = capsys.readouterr().out
    assert "'wider.safetensors' does not fit the model" in out and "no merge can run" in out
    assert not (root / "never").exists()


def test_an_output_folder_that_is_not_a_report_is_refused(files, monkeypatch, capsys):
    root, _ = files
    monkeypatch.chdir(root)
    (root / "taken").mkdir(exist_ok=True)
    (root / "taken" / "notes.txt").write_text("mine")
    argv = ["a.safetensors", "b.pt", "--model", "mlp", "--model-args", "{width: 0.25, depth: 3}", "--data", "task.npz"]
    assert cli.main(["diagnose", *argv, "--out", "taken"]) == 2
    assert "taken" in capsys.readouterr().err and (root / "taken" / "notes.txt").read_text() == "mine"


# -- the K-model soup ------------------------------------------------------------------------------
def _block_mlps(K: int, h: int, depth: int) -> list[nn.Module]:
    """K bias-free MLPs of width K·h whose hidden units are disjoint blocks: model k uses only block k, reads all
    inputs and writes all outputs. The K-model LEWC form f_L(soup) = K^(1−L)·mean_k f_L^k then holds exactly."""
    nets = []
    for k in range(K):
        torch.manual_seed(k)
        net = models.MLP(D, C, K * h, depth)
        with torch.no_grad():
            block = slice(k * h, (k + 1) * h)
            for i, layer in enumerate(net.layers):
                mask = torch.zeros_like(layer.weight)
                if i == 0:
                    mask[block] = 1
                elif i == depth - 1:
                    mask[:, block] = 1
                else:
                    mask[block, block] = 1
                layer.weight.mul_(mask)
        nets.append(net.eval())
    return nets


def _dataset(n: int = 64) -> Dataset:
    x, y = _task(n=3 * n)
    t = [torch.from_numpy(a) for a in (x[:n], y[:n], x[n:2 * n], y[n:2 * n], x[2 * n:], y[2 * n:])]
    return Dataset("synthetic", *t, num_classes=C)


@pytest.mark.parametrize("K, depth", [(3, 3), (3, 4), (4, 2)])
def test_the_soup_logit_scale_is_exactly_the_k_model_lewc_form_on_disjoint_blocks(K, depth):
    out = diagnose.soup_summary(_block_mlps(K, 8, depth), _dataset(), depth)
    assert out["soup_logit_scale_lewc"] == K ** (1 - depth)
    assert out["soup_logit_scale"] == pytest.approx(K ** (1 - depth), rel=1e-5)


def test_the_matched_soup_of_permuted_copies_is_the_model_itself():
    """Known answer: K permuted copies of one network. Their plain soup mixes unrelated units; matching every copy to
    the first undoes each permutation, so the matched soup is the network, with its accuracy and calibrated loss."""
    x, y = _task()
    net = _train(0, x[:400], y[:400])
    spec = merge.permutation_spec(net)
    copies = [net] + [merge.permute(net, merge.random_permutation(spec, torch.Generator().manual_seed(s)), spec)
                      for s in (1, 2, 3)]
    t = [torch.from_numpy(a) for a in (x[:300], y[:300], x[300:400], y[300:400], x[400:], y[400:])]
    out = diagnose.soup_summary(copies, Dataset("task", *t, num_classes=C), 3, spec)
    assert out["acc_soup_matched"] == out["acc_best_single"] == out["acc_ensemble_K"] > 0.7
    assert out["loss_cal_soup_matched"] == pytest.approx(out["loss_cal_ensemble_K"], rel=1e-5)
    assert out["acc_soup"] < out["acc_soup_matched"]


def test_a_report_of_six_checkpoints_stays_legible(files, tmp_path, monkeypatch):
    """K = 6 (15 pairs): each figure's legend holds a few entries (the mean per method, each pair as a thin line),
    no table shows a raw column name, no number prints as -0, and the soup is also given after matching."""
    root, _ = files
    x, y = _task()
    for k in range(6):
        save_file(_train(10 + k, x[:400], y[:400]).state_dict(), str(tmp_path / f"k{k}.safetensors"))
    monkeypatch.chdir(root)
    prep = diagnose.prepare([str(tmp_path / f"k{k}.safetensors") for k in range(6)], "mlp", "task.npz",
                            {"width": 0.25, "depth": 3}, lams=3)
    diag = diagnose.diagnose(prep, progress=False)
    for fig in (plots_width.plot_pair_curves(diag.curves), plots_width.plot_layer_errors(diag.layers)):
        labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        assert 1 <= len(labels) <= 3 and all("15 pairs" in t or "untrained" in t for t in labels), labels
    page = diagnose.render(diag, "test", 1.0)
    assert not any(raw in page for raw in ("lewc_n_excluded", "baseline_additivity_cos", "orth_ratio_ab"))
    assert "LEWC inputs left out" in page and "matched soup accuracy" in page and ">-0<" not in page
    assert "acc_soup_matched" in diag.soup and diagnose.number(-0.0) == "0" and diagnose.number(-1e-5) == "-1e-05"


def test_the_soup_logit_scale_differs_when_the_blocks_overlap():
    nets = []
    for k in range(3):
        torch.manual_seed(k)
        nets.append(models.MLP(D, C, 24, 3).eval())
    out = diagnose.soup_summary(nets, _dataset(), 3)
    assert abs(out["soup_logit_scale"] / out["soup_logit_scale_lewc"] - 1) > 0.05


# -- the report --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report(files):
    root, _ = files
    argv = ["diagnose", "a.safetensors", "b.pt", "c.pth", "--model", "mlp", "--model-args",
            "{width: 0.25, depth: 3}", "--data", "task.npz", "--lams", "5", "--out", "report"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert cli.main(argv) == 0
    return root / "report"


def test_the_report_holds_every_section_and_the_numbers_behind_it(report):
    assert sorted(p.name for p in report.iterdir()) == ["report.csv", "report.html", "summary.json"]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["depth_L"] == 3 and summary["soup"]["K"] == 3
    assert {(p["pair"], p["method"]) for p in summary["pairs"]} == {
        (f"{i}-{j}", m) for i, j in ((1, 2), (1, 3), (2, 3)) for m in ("none", "weight_matching")}
    assert summary["soup"]["soup_logit_scale_lewc"] == 3.0 ** -2
    csv = pd.read_csv(report / "report.csv")
    assert set(csv["section"]) == {"pair", "curve", "layers", "rank", "theory", "soup"}
    assert set(csv.loc[csv["section"] == "layers", "model"]) == {"trained", "untrained"}
    # the summary's numbers are the CSV's
    acc = csv[(csv["section"] == "pair") & (csv["pair"] == "1-2") & (csv["method"] == "none") &
              (csv["metric"] == "acc_merged")]["value"].item()
    assert acc == pytest.approx(next(p["acc_merged"] for p in summary["pairs"] if p["pair"] == "1-2"
                                     and p["method"] == "none"))
    text = (report / "report.html").read_text()
    for heading in ("Summary", "Reading", "Interpolation curves", "LEWC and LLFC by layer", "Weak additivity",
                    "Ranks of the weight matrices", "The uniform soup of all 3"):
        assert heading in text


def test_weight_matching_undoes_a_known_permutation(files, tmp_path, monkeypatch):
    """Known answer: b is a permuted copy of a, so after matching the pair is one model and its barrier is 0."""
    root, nets = files
    spec = merge.permutation_spec(nets[0])
    permuted = merge.permute(nets[0], merge.random_permutation(spec, torch.Generator().manual_seed(3)), spec)
    save_file(permuted.state_dict(), str(tmp_path / "p.safetensors"))
    monkeypatch.chdir(root)
    prep = diagnose.prepare(["a.safetensors", str(tmp_path / "p.safetensors")], "mlp", "task.npz",
                            {"width": 0.25, "depth": 3}, lams=5)
    diag = diagnose.diagnose(prep, progress=False)
    matched = diag.pairs.set_index("method").loc["weight_matching"]
    assert abs(matched["acc_barrier"]) <= 1e-6 and matched["acc_merged"] == matched["acc_a"]


@pytest.mark.integration  # needs the headless Chromium of `make browser`, as the book's browser checks do
def test_the_report_renders_in_a_browser(report):
    sync_api = pytest.importorskip("playwright.sync_api")
    from tests.test_book import _launch

    with sync_api.sync_playwright() as pw:
        browser = _launch(pw, "--disable-background-networking")
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((report / "report.html").as_uri())
        widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        rows = page.locator("table.summary tbody tr").count()
        reading = page.locator("ul.reading li").all_inner_texts()
        browser.close()
    assert len(widths) == 2 and min(widths) > 100, widths
    assert rows == 6 and len(reading) >= 4 and not errors


def test_a_user_spec_and_a_data_function_are_used_and_a_wrong_spec_is_refused(files, monkeypatch):
    root, nets = files
    monkeypatch.chdir(root)
    (root / "mine.py").write_text(
        "import numpy as np\nfrom lmcbook import merge, models\n\n"
        f"SPEC = merge.permutation_spec(models.MLP({D}, {C}, 16, 3))\n"
        "WRONG = merge.PermutationSpec.from_axes({'layers.0.weight': ('P', None), 'layers.1.weight': (None, None), "
        "'layers.2.weight': (None, 'P')}, models.MLP(" + f"{D}, {C}, 16, 3))\n\n\n"
        "def arrays():\n    z = np.load('task.npz')\n    return {k: z[k] for k in z.files}\n")
    args = {"width": 0.25, "depth": 3}
    prep = diagnose.prepare(["a.safetensors", "b.pt"], "mlp", "mine.py:arrays", args, spec="mine.py:SPEC", lams=3)
    assert "--spec mine.py:SPEC" in prep.spec_note and prep.data.sizes() == {"train": 360, "cal": 40, "test": 600}
    with pytest.raises(merge.SpecUnavailable, match="changed"):
        diagnose.prepare(["a.safetensors", "b.pt"], "mlp", "task.npz", args, spec="mine.py:WRONG", lams=3)


def test_a_partial_spec_is_said_to_be_partial_and_decides_nothing_about_permutations(files, monkeypatch):
    """A hand-written spec that leaves the first hidden layer's units in their order still keeps the function, so it
    is used; the reading then states the matched barrier and draws no permutation verdict from it."""
    root, nets = files
    monkeypatch.chdir(root)
    (root / "partial.py").write_text(
        "from lmcbook import merge, models\n\n"
        "SPEC = merge.PermutationSpec.from_axes({'layers.0.weight': (None, None), 'layers.1.weight': ('Q', None), "
        f"'layers.2.weight': (None, 'Q')}}, models.MLP({D}, {C}, 16, 3))\n")
    monkeypatch.setattr(diagnose, "SMALL_ACC_BARRIER", -1.0)  # every gap is read, so the matched sentence is written
    prep = diagnose.prepare(["a.safetensors", "b.pt"], "mlp", "task.npz", {"width": 0.25, "depth": 3},
                            spec="partial.py:SPEC", lams=3)
    assert prep.unpermuted == ["layers.0"] and "It is a partial spec" in prep.spec_note
    text = " ".join(diagnose.diagnose(prep, progress=False).reading)
    assert "with the partial --spec" in text and "no verdict is drawn" in text
    assert "closes most of the gap" not in text and "closes little of the gap" not in text
    full = diagnose.prepare(["a.safetensors", "b.pt"], "mlp", "task.npz", {"width": 0.25, "depth": 3}, lams=3)
    assert full.unpermuted == [] and "partial" not in full.spec_note


@pytest.mark.parametrize("broken, says", [
    ("labels", "the endpoints score"),  # the labels of another order: endpoints near or below chance
    ("huge", "some numbers are not finite"),  # one test input near float32's largest: its logits overflow
    ("limit", "the test split holds 5 examples"),  # --limit 5
])
def test_the_reading_states_no_verdict_where_the_inputs_allow_none(files, monkeypatch, broken, says):
    root, _ = files
    monkeypatch.chdir(root)
    z = dict(np.load("task.npz"))
    if broken == "labels":
        z["y_test"] = (z["y_test"] + 1) % C
    if broken == "huge":
        z["x_test"][3] = 3e38
    np.savez(f"{broken}.npz", **z)
    prep = diagnose.prepare(["a.safetensors", "b.pt"], "mlp", f"{broken}.npz", {"width": 0.25, "depth": 3}, lams=3,
                            limit=5 if broken == "limit" else None)
    reading = diagnose.diagnose(prep, progress=False).reading
    assert reading and all(r.startswith("No reading is given: ") for r in reading), reading
    assert any(says in r for r in reading), reading
    assert not any(w in " ".join(reading) for w in ("plain averaging merges", "barrier is", "LEWC predicts"))


def test_the_endpoints_need_well_above_chance_for_any_number_of_classes():
    floors = {c: diagnose.endpoint_floor(c) for c in (2, 3, 10, 100)}
    assert floors == pytest.approx({2: 0.75, 3: 2 / 3, 10: 0.2, 100: 0.11})


def test_a_sound_input_gets_a_reading_with_its_interval_and_summary_json_is_strict(report):
    summary = json.loads((report / "summary.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"summary.json holds {c}, which is not JSON"))
    assert summary["reading"][0].startswith("Test accuracies are read on 600 examples")
    assert "±" in summary["reading"][0] and not summary["reading"][0].startswith("No reading")
    assert any(p["acc_repair"] is None for p in summary["pairs"])  # NaN written as null
    assert diagnose.strict_json({"a": float("nan"), "b": [np.float32(0.5), np.int64(2), np.inf]}) == {
        "a": None, "b": [0.5, 2, None]}


def test_without_a_spec_the_report_skips_only_the_matched_merge(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    header = f"import torch\nfrom torch import nn\n\nD, C = {D}, {C}\n\n\n"
    (tmp_path / "cat.py").write_text(header + inspect.getsource(Concat))
    x, y = _task()
    np.savez(tmp_path / "task.npz", x_train=x[:400], y_train=y[:400], x_test=x[400:], y_test=y[400:])
    for k in range(2):
        torch.manual_seed(k)
        save_file(Concat().state_dict(), str(tmp_path / f"c{k}.safetensors"))
    prep = diagnose.prepare(["c0.safetensors", "c1.safetensors"], "cat.py:Concat", "task.npz", lams=3)
    diag = diagnose.diagnose(prep, progress=False)
    assert prep.spec is None and "node 'cat'" in diag.notes[1]
    assert list(diag.pairs["method"]) == ["none"] and len(diag.layers) and len(diag.ranks)


def test_models_by_name_are_built_for_the_data():
    pytest.importorskip("torchvision")
    ds = _dataset()
    net = diagnose.model_factory("torchvision:resnet18", {}, ds)()
    assert net.fc.out_features == C  # num_classes from the data
    assert diagnose.model_factory("mlp", {"width": 0.25, "depth": 3}, ds)().layers[0].in_features == D
    for name, message in (("torchvision:resnet9000", "torchvision has no classification model 'resnet9000'"),
                          ("transformer", "expected one of mlp, vgg11, resnet20, torchvision:NAME or MODULE:FACTORY")):
        with pytest.raises(diagnose.SpecError, match=message):
            diagnose.model_factory(name, {}, ds)


def test_a_failed_write_keeps_the_earlier_report_and_leaves_no_temporary(files, report, tmp_path, monkeypatch):
    import shutil

    from lmcbook.tools import diagnose

    monkeypatch.chdir(files[0])
    diag = diagnose.diagnose(diagnose.prepare(["a.safetensors", "b.pt"], "mlp", "task.npz",
                                              {"width": 0.25, "depth": 3}, lams=3), progress=False)
    root = tmp_path
    report = shutil.copytree(report, root / "report")
    before = {p.name: p.read_bytes() for p in report.iterdir()}

    def broken(*args):
        raise RuntimeError("disk full")

    with monkeypatch.context() as m:
        m.setattr(diagnose, "render", broken)
        with pytest.raises(RuntimeError, match="disk full"):
            diagnose.write(diag, report, "lmcbook diagnose …", 0.0)
    assert {p.name: p.read_bytes() for p in report.iterdir()} == before
    assert not [p for p in root.iterdir() if p.name.startswith(".report")]
    diagnose.write(diag, report, "lmcbook diagnose …", 0.0)  # replaces the earlier report whole
    assert sorted(p.name for p in report.iterdir()) == sorted(diagnose.FILES)
    assert json.loads((report / "summary.json").read_text())["lams"] == 3
    assert not [p for p in root.iterdir() if p.name.startswith(".report")]
