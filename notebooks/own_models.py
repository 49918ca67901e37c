# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Tutorial: lmcbook on your own models
#
# lmcbook's merging, calibration and probes work on any `torch.nn.Module` and any data,
# not only on the models and data sets it builds. This page takes your arrays and a
# network that lmcbook knows nothing about and does, step by step:
#
# 1. turn the arrays into a data set with `data.from_arrays`;
# 2. write the network's `PermutationSpec`, the one data structure that tells lmcbook
#    which permutation acts on which axis of which parameter;
# 3. train two copies from different seeds with an ordinary PyTorch loop;
# 4. check that a random permutation leaves the function unchanged;
# 5. merge the two copies, with and without weight matching, and calibrate;
# 6. check the network's layer order with `models.probe_points`, and run the LEWC
#    probes on the pair;
# 7. run the same analysis, and more, with one command, `lmcbook diagnose`, on the two
#    models' checkpoint files;
# 8. read a diagnose report of networks trained other ways: three copies at once, and a
#    small CNN with BatchNorm.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
hidden_units = 256  # units of each hidden layer; smoke 32; paper 1024
epochs = 40  # passes over the training split; smoke 3; paper 60
pair = 0  # the pair index p: model a is seed 2p, model b seed 2p+1

# %%
from lmcbook import schema
from lmcbook.page import open_page

page, study = open_page("own_models", globals())

# %%
import warnings

import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

from lmcbook import data, merge, models, probes

# %% [markdown]
# ## 1. Your data
#
# lmcbook's data set is a `Dataset`: three splits, `train`, `cal` (held out from the
# training data, only to fit temperatures) and `test`, as tensors on one device.
# `data.from_arrays` builds one from your arrays: inputs in $[0, 1]$ and integer labels
# for each split, and the number of classes. It normalises every split with the
# training split's statistics. Here the arrays are scikit-learn's 8x8 handwritten
# digits, split by `data.split_indices` as lmcbook's own `digits` set is, so the result
# holds the same tensors as `data.load("digits")`.

# %%
images, labels = load_digits(return_X_y=True)
x = images.reshape(-1, 1, 8, 8) / 16  # pixel values 0..16 scaled to [0, 1]
train, cal, test = data.split_indices(len(labels), n_cal=180, n_test=360)
digits = data.from_arrays("my_digits", x[train], labels[train], x[cal], labels[cal], x[test], labels[test],
                          num_classes=10, device="cpu")

# %% tags=["remove-cell"]
sizes = digits.sizes()
page.glue_values(n_train=sizes["train"], n_cal=sizes["cal"], n_test=sizes["test"])

# %% [markdown]
# That gives {glue:text}`n_train` training, {glue:text}`n_cal` calibration and
# {glue:text}`n_test` test images. Everything below takes this `digits`, and would take
# any other `Dataset` the same way.

# %% [markdown]
# ## 2. Your network and its permutation spec
#
# A three-layer network with its own names. Its hidden units can be permuted in two
# places: after `encoder` (call the permutation `h1`) and after `mixer` (`h2`). Each
# entry of the spec lists, for one parameter, which permutation acts on each axis.
# A weight of shape (out, in) gets `(p_out, p_in)`, where `None` means the axis is not
# permuted (the input pixels, the output classes). `PermutationSpec.from_axes` checks
# the spec against the model. It raises if a parameter is missing or if one
# permutation is used on axes of different sizes.

# %%
class TinyNet(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.encoder = nn.Linear(64, width, bias=False)
        self.mixer = nn.Linear(width, width, bias=False)
        self.readout = nn.Linear(width, 10, bias=False)

    def forward(self, x):
        return self.readout(torch.relu(self.mixer(torch.relu(self.encoder(x.flatten(1))))))


# %%
spec = merge.PermutationSpec.from_axes(
    {"encoder.weight": ("h1", None), "mixer.weight": ("h2", "h1"), "readout.weight": (None, "h2")},
    TinyNet(study.hidden_units))
pd.Series(spec.sizes).rename_axis("permuted axis").to_frame("units")

# %% [markdown]
# ## 3. Train two copies with your own loop
#
# lmcbook does not need to own the training loop. The batches come from
# `lmcbook.data.epoch_batches`, which makes each batch order a pure function of a seed.


# %%
def fit(seed: int, network=None, epochs: int | None = None) -> nn.Module:
    torch.manual_seed(seed)
    model = network() if network is not None else TinyNet(study.hidden_units)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-3)
    for epoch in range(epochs or study.epochs):
        for idx in data.epoch_batches(len(digits.y_train), 128, seed, epoch):
            loss = F.cross_entropy(model(digits.x_train[idx]), digits.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


a, b = fit(2 * study.pair), fit(2 * study.pair + 1)

# %% [markdown]
# ## 4. A permutation changes the weights, not the function

# %%
perms = merge.random_permutation(spec, torch.Generator().manual_seed(0))
b_perm = merge.permute(b, perms, spec)
with torch.no_grad():
    gap = (b(digits.x_test) - b_perm(digits.x_test)).abs().max().item()
moved = (b.mixer.weight - b_perm.mixer.weight).abs().max().item()
# Known answer: the permuted network computes the same function (to float32 rounding), with other weights.
assert gap < 1e-4 and moved > 0, f"a permutation changed the function (largest logit change {gap:.1e})"

# %% tags=["remove-cell"]
page.glue_values(perm_gap=gap, perm_moved=moved)

# %% [markdown]
# After a random permutation the largest change in `mixer`'s weights is {glue:text}`perm_moved:.3f`.
# The largest change in any test logit is {glue:text}`perm_gap:.1e`, which is rounding.
#
# ## 5. Merge, with and without weight matching, and calibrate
#
# `weight_matching` searches, by coordinate descent, for the permutation of `b` that
# aligns its weights with `a`'s. `pair_summary` evaluates the whole interpolation path. It fits an inverse
# temperature for every model on the calibration split, and returns the barriers
# and the logit-ensemble reference.

# %%
match = merge.weight_matching(a, b, spec)
b_matched = merge.permute(b, match.perms, spec)
rows = []
for method, other in (("none", b), ("weight_matching", b_matched)):
    curve, summary = merge.pair_summary(a, other, digits)
    rows.append({"method": method, "pair": study.pair, **summary})
table = pd.DataFrame(rows).set_index("method")
table[["acc_a", "acc_b", "acc_merged", "acc_ensemble", "loss_barrier_mid", "loss_barrier_cal_mid", "tau_ratio"]]

# %% tags=["remove-cell"]
page.glue_values(acc_none=table.loc["none", "acc_merged"], acc_wm=table.loc["weight_matching", "acc_merged"],
                 cal_none=table.loc["none", "loss_barrier_cal_mid"],
                 cal_wm=table.loc["weight_matching", "loss_barrier_cal_mid"], sweeps=match.iterations,
                 width_=study.hidden_units)

# %% [markdown]
# With {glue:text}`width_` hidden units, the plain average reaches
# {glue:text}`acc_none:.3f` accuracy at $\lambda = \tfrac12$. After weight matching, which
# took {glue:text}`sweeps` coordinate-descent sweeps, it reaches {glue:text}`acc_wm:.3f`.
# The calibrated midpoint loss barriers are {glue:text}`cal_none:.3f` and
# {glue:text}`cal_wm:.3f` nats.
#
# ## 6. Your layer order, and the probes
#
# The probes need each layer's number $l$: LEWC predicts that layer $l$ of the merged
# model shrinks as $\lambda^l$. `models.probe_points(model, x)` lists the layers as the
# probes number them. For a module that does not list its own, every `nn.Linear` and
# `nn.Conv` is a layer, numbered in the order a forward pass on `x` calls it. The
# order in which `__init__` defines the layers does not matter (without `x`,
# `probe_points` can only follow that order; `PairActivations` always traces a
# forward pass). The network below is
# `TinyNet` again, with its `readout` defined first and the rest in an `nn.Sequential`.


# %%
class ReadoutFirst(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.readout = nn.Linear(width, 10, bias=False)
        self.body = nn.Sequential(nn.Linear(64, width, bias=False), nn.ReLU(),
                                  nn.Linear(width, width, bias=False), nn.ReLU())

    def forward(self, x):
        return self.readout(self.body(x.flatten(1)))


def readout_first(net: TinyNet) -> ReadoutFirst:
    out = ReadoutFirst(study.hidden_units)
    out.load_state_dict({"readout.weight": net.readout.weight, "body.0.weight": net.encoder.weight,
                         "body.2.weight": net.mixer.weight})
    return out.eval()


points = models.probe_points(readout_first(a), digits.x_test[:1])
assert points[-1].name == "readout", "the readout is called last, so it must be the last layer"
pd.DataFrame([(p.name, p.layer, p.role) for p in points], columns=["module", "layer", "role"])

# %% tags=["remove-cell"]
page.glue("readout_layer", next(p.layer for p in points if p.name == "readout"))

# %% [markdown]
# `readout` is defined first but called last, so it is layer
# {glue:text}`readout_layer`, the output layer. `PairActivations` numbers the layers
# the same way, from the one hooked forward pass per model that then serves every
# probe. A network with biases or normalisation layers gets a `probes.ScaleWarning`
# that names them: biases merge linearly in $\lambda$ and a norm rescales its input, so
# LEWC's $\lambda^l$ scale does not hold exactly there. For example, a small network with
# biases and a LayerNorm:

# %%
biased = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, 10))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    probes.PairActivations(biased, biased, digits.x_test[:8])
scale_warnings = [str(w.message) for w in caught if issubclass(w.category, probes.ScaleWarning)]
assert len(scale_warnings) == 1, "a biased, normalised network gets exactly one ScaleWarning"
print(scale_warnings[0])

# %% [markdown]
# The tutorial's own networks are bias-free and unnormalised, so they get none:

# %%
with warnings.catch_warnings():
    warnings.simplefilter("error", probes.ScaleWarning)  # a ScaleWarning here fails the page
    acts = probes.PairActivations(a, b, digits.x_test)
lewc = acts.lewc([0.5])
reordered = probes.PairActivations(readout_first(a), readout_first(b), digits.x_test).lewc([0.5])
reorder_gap = (reordered.value - lewc.value).abs().max()
assert reorder_gap < 1e-9, f"defining the readout first changed the probes (by {reorder_gap:.1e})"
lewc.pivot_table(index="layer", columns="metric", values="value")[["lewc_rel_err", "llfc_rel_err"]]

# %% tags=["remove-cell"]
page.glue("reorder_gap", reorder_gap)

# %% [markdown]
# Probing the pair as `ReadoutFirst` gives the same numbers at every layer: the
# largest difference is {glue:text}`reorder_gap:.1e`.

# %% [markdown]
# ## 7. The same analysis in one command
#
# `lmcbook diagnose` does all of the above, and more, on checkpoint files: the interpolation
# curve with raw and calibrated losses, the logit ensemble, weight matching with a
# permutation spec it derives itself (by tracing the network with `torch.fx`, then checking
# that a random permutation leaves the outputs unchanged), the LEWC and LLFC errors by
# layer against an untrained pair, weak additivity, reciprocal orthogonality and ranks. It
# writes a self-contained HTML report with its CSV and a JSON summary. Here the page saves
# its two models with `safetensors`, its three splits as an `.npz` (with `x_cal`, `y_cal`, so
# that the command calibrates on the same split), and the network's class as a module,
# then runs the command in that folder:

# %%
import contextlib
import io
import json
import linecache
import shlex

import numpy as np
from safetensors.torch import save_file

from lmcbook import cli
from lmcbook.files import out_dir

files = out_dir() / "own_models_files"
files.mkdir(parents=True, exist_ok=True)


def save_module(cls: type, path) -> None:
    """Write the cell that defined ``cls`` as a module (IPython keeps every cell's text in linecache)."""
    cell = "".join(linecache.getlines(cls.forward.__code__.co_filename))
    path.write_text("import torch\nfrom torch import nn\n\n\n" + cell)


save_module(TinyNet, files / "tinynet.py")
for name, net in (("a", a), ("b", b)):
    save_file(net.state_dict(), str(files / f"{name}.safetensors"))
np.savez(files / "digits.npz", **{f"{k}_{split}": t.numpy() for split in ("train", "cal", "test")
                                  for k, t in zip("xy", digits.split(split))})
command = ["diagnose", "a.safetensors", "b.safetensors", "--model", "tinynet.py:TinyNet", "--model-args",
           f"{{width: {study.hidden_units}}}", "--data", "digits.npz", "--lams", "21", "--out", "report"]
with contextlib.chdir(files), contextlib.redirect_stdout(io.StringIO()):
    assert cli.main(command) == 0
report = json.loads((files / "report" / "summary.json").read_text())
same = pd.DataFrame(report["pairs"]).set_index("method")
# Known answer: the command's plain merge is section 5's, number for number.
assert (same.loc["none", table.columns.drop("pair")] == table.loc["none"].drop("pair")).all()
# And its weight matching, on the spec it derived by tracing TinyNet, is section 5's on the hand-written spec.
cols = table.columns.drop("pair")
assert np.allclose(same.loc["weight_matching", cols].astype(float), table.loc["weight_matching", cols].astype(float),
                   rtol=0, atol=1e-9), "the traced spec's weight matching differs from the hand-written spec's"
same[["acc_merged", "acc_ensemble", "loss_barrier_mid", "loss_barrier_cal_mid", "logit_norm_ratio"]]

# %% tags=["remove-cell"]
page.glue_values(diagnose_seconds=report["seconds"])

# %% [markdown]
# The command, run in the folder holding the files, is printed below. It took {glue:text}`diagnose_seconds:.1f` s. Its plain merge is section 5's to the last
# digit, and so is its weight matching, which uses the spec it derived by tracing the network
# rather than the one section 5 used (the page asserts both). Its report's reading:

# %%
print("lmcbook", shlex.join(command), end="\n\n")
for line in report["reading"]:
    print("-", line)

# %% [markdown]
# ## 8. A diagnose report of networks trained other ways
#
# Two cases the book's studies do not train. First, three copies of `TinyNet`, the third
# from one more seed: with K = 3 checkpoints the report covers every pair and the uniform
# soup of all three, against the three-model logit ensemble, the best single model, and
# the logit scale that the K-model form of LEWC predicts, K^(1−L). Second, a small CNN with
# BatchNorm, which the report merges after resetting the BatchNorm statistics.

# %%
class SmallCNN(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width)
        self.conv2, self.norm2 = nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width)
        self.head = nn.Linear(2 * width, 10)

    def forward(self, x):
        x = torch.relu(self.norm1(self.conv1(x)))
        x = torch.relu(self.norm2(self.conv2(nn.functional.max_pool2d(x, 2))))
        return self.head(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


# %%
c = fit(2 * study.pair + 2)
save_file(c.state_dict(), str(files / "c.safetensors"))
for seed in (0, 1):
    save_file(fit(seed, SmallCNN, max(1, study.epochs // 4)).state_dict(), str(files / f"cnn{seed}.safetensors"))
save_module(SmallCNN, files / "smallcnn.py")
runs = {"three MLPs": command[:3] + ["c.safetensors"] + command[3:-1] + ["report_k3"],
        "CNN with BatchNorm": ["diagnose", "cnn0.safetensors", "cnn1.safetensors", "--model", "smallcnn.py:SmallCNN",
                               "--data", "digits.npz", "--out", "report_cnn"]}
with contextlib.chdir(files), contextlib.redirect_stdout(io.StringIO()):
    assert all(cli.main(argv) == 0 for argv in runs.values())
reports = {name: json.loads((files / argv[-1] / "summary.json").read_text()) for name, argv in runs.items()}
soup = pd.Series(reports["three MLPs"]["soup"])
soup

# %% tags=["remove-cell"]
page.glue_values(soup_acc=soup["acc_soup"], soup_ens=soup["acc_ensemble_K"], soup_best=soup["acc_best_single"],
                 soup_scale=soup["soup_logit_scale"], soup_pred=soup["soup_logit_scale_lewc"])

# %% [markdown]
# The three MLPs, by the first command printed below. The soup of all three reaches {glue:text}`soup_acc:.3f` accuracy, against
# {glue:text}`soup_ens:.3f` for the three-model logit ensemble and {glue:text}`soup_best:.3f`
# for the best single model. Its logits are {glue:text}`soup_scale:.3f` of the ensemble's
# in norm; the K-model LEWC form predicts {glue:text}`soup_pred:.3f`. Every pair's summary,
# and the report's reading:

# %%
for argv in runs.values():
    print("lmcbook", shlex.join(argv))

# %%
pd.DataFrame(reports["three MLPs"]["pairs"]).set_index(["pair", "method"])[
    ["acc_merged", "acc_ensemble", "acc_barrier", "loss_barrier_cal", "logit_norm_ratio"]]

# %%
for line in reports["three MLPs"]["reading"]:
    print("-", line)

# %% [markdown]
# The CNN with BatchNorm, by the second command:

# %%
pd.DataFrame(reports["CNN with BatchNorm"]["pairs"]).set_index("method")[
    ["acc_a", "acc_b", "acc_merged", "acc_ensemble", "acc_barrier", "loss_barrier_cal", "logit_norm_ratio"]]

# %%
for line in reports["CNN with BatchNorm"]["reading"] + reports["CNN with BatchNorm"]["notes"]:
    print("-", line)

# %% tags=["remove-input"]
page.save(table=(table.reset_index(), ["acc_merged", "acc_endpoints", "loss_barrier_cal_mid", "loss_barrier_mid"],
                 ["method"]),
          lewc=schema.to_long_frame(lewc.assign(pair=study.pair), "own_models", ["layer", "lam"]))
page.provenance()
