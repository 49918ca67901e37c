# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Four ways to merge, at every width
#
# **The paper's comparison** (Ito et al., width paper, Table 1). The paper compares
# plain weight averaging of wide networks with permutation-based merging. This page
# extends that table to every width of the sweep and to four methods:
#
# - **none:** average the weights as they are.
# - **weight matching** (Ainsworth et al. 2023): permute $b$'s hidden units to
#   maximise $\sum_l \langle W_l^a, P_l W_l^b P_{l-1}^\top \rangle$, by coordinate descent over
#   layers with exact linear assignment (`scipy.optimize.linear_sum_assignment`), then
#   average.
# - **random permutation:** permute $b$ at random, then average (one draw per pair;
#   the previous page explains why this is a control).
# - **none + REPAIR** (Jordan et al. 2022): average, then give each hidden channel of
#   the merged model the mean and standard deviation that interpolating the two
#   endpoints' statistics predicts, through an explicit per-channel scale and shift
#   fitted on the training inputs. This is the activation-level alternative to
#   temperature calibration.
#
# For each method and width: the accuracy barrier, and the raw and calibrated loss
# barriers, in their max-over-λ form (see the methods page). The time weight matching
# takes is measured when its permutations are first computed.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
dataset = "digits"  # the data set (lmcbook.data): 8x8 digits, embedded; paper "cifar10"; paper with arch "mlp" "mnist"
data_root = None  # where torchvision data sets live (None: the embedded ones need none)
download = False  # let torchvision download a missing data set into data_root
base_width = 64  # hidden units (MLP) or first-layer channels at width multiplier 1; paper with arch "mlp" 512
norm = "none"  # normalisation: none, batch or layer (LEWC's theory needs none); paper "batch"; paper with arch "mlp" "none"
bias = False  # biases in every layer (LEWC's theory needs none); paper True; paper with arch "mlp" False
epochs = 60  # passes over the training split; smoke 4; paper 100; paper with arch "mlp" 60
batch_size = 128  # examples per SGD step
lr = 0.05  # SGD's peak learning rate (linear warm-up, then linear decay to 0)
momentum = 0.9  # SGD momentum (PyTorch's, dampening 0)
warmup = 0.05  # share of all steps spent in the linear warm-up
seeds = 2  # pairs per cell: pair p is seeds 2p and 2p+1; smoke 1; paper 3
device = "auto"  # where runs train: auto, cpu, cuda, cuda:N or mps
lams = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)  # the λ grid: 21 points in [0, 1]; smoke (0.0, 0.25, 0.5, 0.75, 1.0)
scheduler = None  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
precision = "fp32"  # fp32, or bf16 autocast (part of each run's spec)
arch = "mlp"  # mlp, vgg11 or resnet20 (in the paper profile it picks its recipe); paper "vgg11"
depth = 4  # linear layers L of the MLP (None for VGG11 and ResNet20)
init_scale = 1.0  # factor on the initial weights (1: PyTorch's initialisation)
weight_decay = 0.003  # SGD's weight decay (L2), the width paper's 3e-3
widths = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # multipliers of base_width: 16 to 1024 hidden units; smoke (0.25, 1.0); paper (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
decisive_seeds = 5  # pairs where the width rows decide; smoke 1
weak_weight_decay = 0.0001  # the weak-weight-decay twin's weight decay
draws = 5  # random permutations drawn per pair; smoke 2
match_iterations = 100  # weight matching's iteration cap; smoke 20

# %%
from lmcbook import experiments, plots_width, schema
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("weight_matching", globals())

# %% [markdown]
# Every pair of the sweep is merged by each of the four methods, and each merge is
# evaluated along the whole line between the two models:

# %%
curves, summary = experiments.method_frames(study, page.store)
regime = experiments.regime_frame(study, page.store)
summary.groupby(["hidden_units", "method"])[["acc_barrier", "loss_barrier", "loss_barrier_cal"]].mean().round(3)

# %% [markdown]
# The page's CSV holds each method's barriers and merged accuracy per pair, and weight
# matching's time, sweeps and objective; the two figures below read it:

# %%
keys = ["width", "hidden_units", "depth", "method"]
long = schema.concat([
    schema.to_long(summary, "weight_matching", ["acc_barrier", "loss_barrier", "loss_barrier_cal", "acc_barrier_mid",
                                                "loss_barrier_mid", "loss_barrier_cal_mid", "acc_merged"], keys),
    schema.to_long(summary[summary["method"] == "weight_matching"], "weight_matching",
                   ["match_seconds", "match_iterations", "match_objective"], keys)])
page.glue_figure("fig_methods", plots_width.plot_panels(long, [
    dict(metric="acc_barrier", title="accuracy barrier"), dict(metric="loss_barrier", title="raw loss barrier (nats)"),
    dict(metric="loss_barrier_cal", title="calibrated loss barrier (nats)")]))
page.glue_figure("fig_time", plots_width.plot_panels(long, [
    dict(metric="match_seconds", title="weight matching time (s)", logy=True),
    dict(metric="match_iterations", title="coordinate-descent sweeps")], ncols=2))

# %% tags=["remove-cell"]
page.glue_md("setup", describe_study(study, regime))
means = summary.groupby(["method", "hidden_units"]).mean(numeric_only=True)  # over pairs
narrow, wide = summary["hidden_units"].min(), summary["hidden_units"].max()
page.glue_values(
    cap=study.match_iterations, n_narrow=int(narrow), n_wide=int(wide),
    t_narrow=means.loc[("weight_matching", narrow), "match_seconds"],
    t_wide=means.loc[("weight_matching", wide), "match_seconds"],
    it_wide=means.loc[("weight_matching", wide), "match_iterations"],
    none_acc_barrier_narrow=means.loc[("none", narrow), "acc_barrier"],
    none_acc_barrier_wide=means.loc[("none", wide), "acc_barrier"],
    none_loss_barrier_wide=means.loc[("none", wide), "loss_barrier"],
    none_loss_barrier_cal_wide=means.loc[("none", wide), "loss_barrier_cal"],
    weight_matching_acc_barrier_narrow=means.loc[("weight_matching", narrow), "acc_barrier"],
    weight_matching_acc_barrier_wide=means.loc[("weight_matching", wide), "acc_barrier"],
    weight_matching_loss_barrier_wide=means.loc[("weight_matching", wide), "loss_barrier"],
    weight_matching_loss_barrier_cal_wide=means.loc[("weight_matching", wide), "loss_barrier_cal"],
    random_permutation_acc_barrier_narrow=means.loc[("random_permutation", narrow), "acc_barrier"],
    random_permutation_acc_barrier_wide=means.loc[("random_permutation", wide), "acc_barrier"],
    random_permutation_loss_barrier_cal_wide=means.loc[("random_permutation", wide), "loss_barrier_cal"],
    repair_acc_barrier_narrow=means.loc[("repair", narrow), "acc_barrier"],
    repair_acc_barrier_wide=means.loc[("repair", wide), "acc_barrier"],
    repair_loss_barrier_wide=means.loc[("repair", wide), "loss_barrier"],
    repair_loss_barrier_cal_wide=means.loc[("repair", wide), "loss_barrier_cal"])
best = means.xs(wide, level="hidden_units")["loss_barrier_cal"].idxmin()
page.glue_md("best_wide", best.replace("_", " "))

# %% [markdown]
# The table above gives, for every width and method, the seed mean of the accuracy
# barrier, the raw loss barrier and the calibrated loss barrier; the CSV holds every
# seed and the midpoint forms.
#
# ```{glue:figure} fig_methods
# :name: fig-merge-methods
#
# Barriers of four merging methods against width (seed means; bars: min to max over
# pairs). Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** At {glue:text}`n_narrow` hidden units the accuracy barrier
# is {glue:text}`none_acc_barrier_narrow:.3f` without permutation,
# {glue:text}`weight_matching_acc_barrier_narrow:.3f` with weight matching,
# {glue:text}`random_permutation_acc_barrier_narrow:.3f` with a random permutation and
# {glue:text}`repair_acc_barrier_narrow:.3f` with REPAIR. At {glue:text}`n_wide`
# hidden units the same four are {glue:text}`none_acc_barrier_wide:.3f`,
# {glue:text}`weight_matching_acc_barrier_wide:.3f`,
# {glue:text}`random_permutation_acc_barrier_wide:.3f` and
# {glue:text}`repair_acc_barrier_wide:.3f`.
#
# The raw loss barrier at the widest width is {glue:text}`none_loss_barrier_wide:.3f`
# nats without permutation, against {glue:text}`weight_matching_loss_barrier_wide:.3f`
# with weight matching and {glue:text}`repair_loss_barrier_wide:.3f` with REPAIR.
# Calibrated, the four become {glue:text}`none_loss_barrier_cal_wide:.3f`,
# {glue:text}`weight_matching_loss_barrier_cal_wide:.3f`,
# {glue:text}`random_permutation_loss_barrier_cal_wide:.3f` and
# {glue:text}`repair_loss_barrier_cal_wide:.3f` nats. The lowest calibrated barrier at
# that width is {glue:md}`best_wide`'s. REPAIR and temperature calibration correct the
# same defect, the merged model's shrunken activations, one layer by layer and the
# other at the logits.
#
# ```{glue:figure} fig_time
# :name: fig-match-time
#
# The cost of weight matching: wall time on this machine and the number of
# coordinate-descent sweeps until no permutation improved (cap {glue:text}`cap`).
# Trained: {glue:md}`setup`.
# ```
#
# Weight matching took {glue:text}`t_narrow:.3f` s per pair at the narrowest width
# and {glue:text}`t_wide:.2f` s at the widest, where it needed
# {glue:text}`it_wide:.1f` sweeps on average.

# %% tags=["remove-input"]
page.save(long, regime=regime)
page.provenance()
