# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The components of the noise: momentum, weight decay, augmentation, learning-rate pairs
#
# **The paper's claims** (Zhang et al., noise paper). Everything that raises the
# optimizer's effective noise moves the merging gain along the same curve:
#
# - **Momentum.** Higher momentum raises the noise: $S = \eta / (B(1-\mu))$. One version
#   of the paper writes $(1-\mu)^2$ instead, so this page plots both forms.
# - **Weight decay.** Stronger weight decay raises the noise, but only in
#   scale-invariant networks, that is, with normalisation layers. Without
#   normalisation it makes almost no difference to merging. Too much weight decay
#   breaks both training and merging.
# - **Augmentation** raises the noise too.
# - **Learning-rate pairs.** Models trained at similar, larger learning rates merge
#   best with each other.
#
# The protocol is spawn-and-merge, as on the previous page, at one batch size. This page
# runs {glue:md}`where_setting`; {doc}`noise_scale` says what the regime map measured in
# the setting it runs, and whether the map picks it.
#
# As there, a cell is excluded only when it failed (a run diverged, or the weaker child
# of a pair ended below {glue:text}`failed_acc:g` training accuracy), every row decides
# only from intervals over at least {glue:md}`min_pairs` pairs per cell, and a row whose
# relevant intervals lie below the minimum effect ({glue:text}`min_effect:g` points)
# reads ✗: no effect of the paper's size in this setting. Cells excluded by the rule:
# {glue:md}`excluded`.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
dataset = "mnist1d"  # MNIST-1D: generated offline, 10 classes; smoke "digits"; paper "cifar10"
data_root = None  # where torchvision data sets live (None: the embedded ones need none)
download = False  # let torchvision download a missing data set into data_root
base_width = 64  # hidden units at width multiplier 1
width = 2.0  # multiplier of base_width: 128 hidden units; smoke 0.5; paper 4.0
depth = 4  # linear layers L of the MLP
bias = False  # biases in every layer
steps = 2000  # SGD steps of every run; smoke 60; paper 20000
max_steps = None  # the convergence rule's step cap (None: no second length)
warmup = 0.05  # share of all steps spent in the linear warm-up
lrs = (0.01, 0.02, 0.05, 0.1, 0.2)  # the grid's peak rates η; smoke (0.02, 0.05, 0.1)
batch_sizes = (32, 64, 128, 256)  # the grid's batch sizes B; smoke (32, 128)
noise_scales = None  # S values of the grid (None: the lrs × batch_sizes grid)
protocol = "steps"  # the grid's length rule
momentum = 0.9  # SGD momentum μ (PyTorch's, dampening 0)
weight_decay = 0.0005  # SGD's weight decay (L2)
spawn_fraction = 0.5  # where the grid spawns its children (share of training)
lr_floor = 1.0  # where the rate ends, as a share of its peak (1: constant)
augment = False  # random shifts in the grid and the component sweeps
row_batch_size = 128  # the component sweeps' batch size
momenta = (0.0, 0.5, 0.9)  # the momentum sweep; smoke (0.0, 0.9)
component_lrs = (0.02, 0.05, 0.1, 0.2)  # its rates; smoke (0.02, 0.05, 0.1)
weight_decays = (0.0, 0.0005, 0.005)  # the weight-decay sweep; smoke (0.0, 0.005)
component_lr = 0.05  # the weight-decay sweep's and task arithmetic's peak rate
pair_lrs = (0.01, 0.03, 0.1, 0.3)  # the learning-rate-pair matrix; smoke (0.02, 0.1)
finetune_steps = 500  # task arithmetic's fine-tuning steps; smoke 20
finetune_lrs = (0.01, 0.03, 0.1)  # task arithmetic's fine-tuning rates; smoke (0.05,)
alphas = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)  # task arithmetic's scales of the task vectors; smoke (0.0, 0.5, 1.0)
ties_keep = 0.2  # TIES merging's share of each task vector kept
seeds = 2  # pairs per cell of the other sweeps; smoke 1; paper 10
grid_seeds = 5  # pairs per cell of the grid; smoke 1; paper 10
device = "auto"  # where runs train: auto, cpu, cuda, cuda:N or mps
scheduler = None  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
show_references = True  # show the committed reference runs (results/) beside this run's cells

# %%
import numpy as np

from lmcbook import claims, experiments_noise, plots_noise, reference, schema, stats
from lmcbook.claims.noise import describe_setting, mark_kept, rule_sensitivity
from lmcbook.claims.thresholds import MIN_PAIRS, NOISE_FAILED_TRAIN_ACC, NOISE_MIN_EFFECT, NOISE_RULE_THRESHOLDS
from lmcbook.data import max_shift
from lmcbook.page import open_page

page, study = open_page("noise_components", globals())

# %% [markdown]
# ## Momentum
#
# Each cell of learning rate × momentum is trained as spawn-and-merge pairs, and the
# rule marks the cells it excludes:

# %%
mom = experiments_noise.noise_frame(study, study.momentum_cells(), page.store)
mom = mark_kept(mom, ["lr", "momentum"])
mom.groupby(["momentum", "lr"])[["noise_scale", "gain", "ensemble_gain", "train_acc_min", "acc_endpoints"]].mean().round(4)

# %% [markdown]
# How well $S$ collapses the momenta, over every cell (kept or not): the residual
# variance of the cell mean gains around one quadratic in $\log_{10} S$, net of pair
# noise, against that on $\log_{10}\eta$ alone and against that of the $(1-\mu)^2$ form
# (the collapse N6 reads, with intervals over pairs):

# %%
on_eta = claims.noise.collapse(mom, ["lr", "momentum"], "noise_scale", {"η": "lr"})
sq = claims.noise.collapse(mom, ["lr", "momentum"], "noise_scale_sq", {"S": "noise_scale"}, share=1.0)
on_eta.ratio, sq.ratio, sq.excess

# %% tags=["remove-cell"]
page.glue_figure("fig_mom", plots_noise.plot_momentum(mom))
page.glue_md("setup", experiments_noise.describe_noise(study))
page.glue_md("where_setting", describe_setting({"augment": bool(study.augment), "lr_floor": float(study.lr_floor),
                                                      "spawn_fraction": study.spawn_fraction}))
# a ratio of net residual variances, or none where no variance is left beyond pair noise
page.glue_values(eta_ratio=on_eta.ratio, sq_ratio=sq.ratio)
page.choose("mom_ratios", {(True, True): "both", (True, False): "eta", (False, True): "sq",
                           (False, False): "none"}[bool(np.isfinite(on_eta.ratio)), bool(np.isfinite(sq.ratio))])
page.glue_md("mom_diff_sq", sq.excess.text(".3g", 1e4))
few = not sq.excess.decided or sq.excess.n < MIN_PAIRS  # an interval over fewer pairs cannot decide
page.choose("mom_better", "no_interval" if few else "squared" if sq.excess.hi < 0 else
            "main" if sq.excess.lo > 0 else "neither")
page.glue_md("momenta", ", ".join(f"{m:g}" for m in study.momenta))

# %% [markdown]
# ```{glue:figure} fig_mom
# :name: fig-momentum
#
# Merging gain against the effective noise scale in its two forms, for momentum
# $\mu \in$ \{{glue:md}`momenta`\} (seed means; bars: min to max over pairs; grey crosses:
# cells the rule excluded).
# Trained: {glue:md}`setup`.
# ```
#
# If momentum acts only through $S$, the lines for different $\mu$ fall on one curve.

# %% [markdown] tags=["when:mom_ratios=both"]
# Over every cell, kept or not, the residual variance of the cell mean gains around a
# quadratic fit on $\log_{10} S$ (with $(1-\mu)$), net of pair noise, is
# {glue:text}`eta_ratio:.3g` times that on log₁₀ η alone, which ignores momentum; with $(1-\mu)^2$
# in place of $(1-\mu)$ it is {glue:text}`sq_ratio:.3g` times that with (1−μ), a difference of
# {glue:md}`mom_diff_sq` points² (95% interval over pairs).

# %% [markdown] tags=["when:mom_ratios=eta"]
# Over every cell, kept or not, the residual variance of the cell mean gains around a
# quadratic fit on $\log_{10} S$ (with $(1-\mu)$), net of pair noise, is
# {glue:text}`eta_ratio:.3g` times that on log₁₀ η alone, which ignores momentum; with $(1-\mu)^2$
# in place of $(1-\mu)$ it is not comparable with that with (1−μ), since no variance is
# left beyond pair noise, a difference of
# {glue:md}`mom_diff_sq` points² (95% interval over pairs).

# %% [markdown] tags=["when:mom_ratios=sq"]
# Over every cell, kept or not, the residual variance of the cell mean gains around a
# quadratic fit on $\log_{10} S$ (with $(1-\mu)$), net of pair noise, is
# not comparable with that on log₁₀ η alone, which ignores momentum, since no variance
# is left beyond pair noise; with $(1-\mu)^2$
# in place of $(1-\mu)$ it is {glue:text}`sq_ratio:.3g` times that with (1−μ), a difference of
# {glue:md}`mom_diff_sq` points² (95% interval over pairs).

# %% [markdown] tags=["when:mom_ratios=none"]
# Over every cell, kept or not, the residual variance of the cell mean gains around a
# quadratic fit on $\log_{10} S$ (with $(1-\mu)$), net of pair noise, is
# not comparable with that on log₁₀ η alone, which ignores momentum, since no variance
# is left beyond pair noise; with $(1-\mu)^2$
# in place of $(1-\mu)$ it is not comparable with that with (1−μ), since no variance is
# left beyond pair noise, a difference of
# {glue:md}`mom_diff_sq` points² (95% interval over pairs).

# %% [markdown] tags=["when:mom_better=squared"]
# Of the two forms, the $(1-\mu)^2$ form collapses them better, beyond the interval.

# %% [markdown] tags=["when:mom_better=main"]
# Of the two forms, the main text's $(1-\mu)$ form collapses them better, beyond the
# interval.

# %% [markdown] tags=["when:mom_better=no_interval"]
# With too few pairs for a deciding interval of the difference (fewer than
# {glue:md}`min_pairs` per cell), these runs cannot say which form collapses them better.

# %% [markdown] tags=["when:mom_better=neither"]
# Neither form collapses them measurably better than the other: the interval of the
# difference holds 0.

# %% [markdown]
# Verdict N6, on the kept cells and the main text's $(1-\mu)$ form
# ({glue:md}`n6_test`): {glue:md}`n6_mark`, {glue:md}`n6_measured`.
#
# What N6 can and cannot separate: at one batch size, $S = \eta/(B(1-\mu))$ is the
# *effective learning rate* $\eta/(1-\mu)$ divided by a constant, so a collapse on $S$
# here says that momentum acts through the effective learning rate; it cannot tell the
# optimizer's noise from the step size. Its baseline, $\log\eta$ alone, ignores $\mu$, so
# any sensible use of $\mu$ beats it; the comparison of the two forms of $S$ above is the
# part of this test that discriminates.

# %% [markdown]
# ## Weight decay, with and without normalisation
#
# The same pairs, at one learning rate, for each weight decay, without normalisation
# and with LayerNorm:

# %%
wd = mark_kept(experiments_noise.noise_frame(study, study.weight_decay_cells(), page.store),
                           ["norm", "weight_decay"])
g = wd.groupby(["norm", "weight_decay"])[["gain", "acc_endpoints", "train_acc_min"]].mean()
g.round(4)

# %% tags=["remove-cell"]
page.glue_figure("fig_wd", plots_noise.plot_weight_decay(wd))
gain_range = g["gain"].groupby(level="norm").agg(lambda v: v.max() - v.min())
page.glue_values(wd_dgain_none=100 * gain_range["none"], wd_dgain_layer=100 * gain_range["layer"],
                 wd_spread=100 * stats.spread(wd, ["norm", "weight_decay"], "gain"), wd_lr=study.component_lr)

# %% [markdown]
# ```{glue:figure} fig_wd
# :name: fig-weight-decay-noise
#
# Merging gain (left) and the children's accuracy (right) against weight decay, for
# networks without normalisation and with LayerNorm ($\eta =$ {glue:text}`wd_lr`; grey
# crosses: cells the rule excluded).
# Trained: {glue:md}`setup`.
# ```
#
# Across the weight decays tried, the gain changes by {glue:text}`wd_dgain_none:.2f`
# points without normalisation and by {glue:text}`wd_dgain_layer:.2f` points with
# LayerNorm (every cell, kept or not). The spread over pairs, max − min averaged
# over cells, is {glue:text}`wd_spread:.2f` points; no verdict reads it. The paper
# expects the first change to be small and the second to favour the stronger weight
# decay. Verdicts (the scoreboard's, computed by `lmcbook.claims` on this page's CSV):
# - N3, without normalisation weight decay barely changes merging ({glue:md}`n3_test`):
#   {glue:md}`n3_mark`, {glue:md}`n3_measured`;
# - N4, with LayerNorm stronger weight decay gives a larger gain ({glue:md}`n4_test`):
#   {glue:md}`n4_mark`, {glue:md}`n4_measured`.

# %% [markdown]
# ## Augmentation
#
# The same pairs with augmentation off and on, at each learning rate:

# %%
aug = mark_kept(experiments_noise.noise_frame(study, study.augment_cells(), page.store), ["lr", "augment"])
aug.groupby(["augment", "lr"])[["gain", "ensemble_gain", "train_acc_min", "acc_endpoints"]].mean().round(4)

# %% tags=["remove-cell"]
page.glue_figure("fig_aug", plots_noise.plot_augment(aug))
page.glue_md("aug_shift", f"{max_shift(study.dataset)} {'positions' if study.dataset == 'mnist1d' else 'pixels'}")
a = aug.groupby(["augment"])["gain"].mean()
page.glue_values(aug_off=100 * a.loc[False], aug_on=100 * a.loc[True])

# %% [markdown]
# ```{glue:figure} fig_aug
# :name: fig-augment
#
# Merging gain against $\eta$ with augmentation off and on (random shifts of up to
# {glue:md}`aug_shift`, drawn per step from the child's own augmentation seed; grey crosses: cells
# the rule excluded). Trained:
# {glue:md}`setup`.
# ```
#
# Averaged over the learning rates, the gain is {glue:text}`aug_off:.2f` points
# without augmentation and {glue:text}`aug_on:.2f` points with it. If augmentation
# only adds noise, a child with it at learning rate $\eta$ behaves like one without it at
# a larger $\eta$: the *on* curve is the *off* curve moved to a *smaller* $\eta$, so on
# the rising side of the curve (the smallest $\eta$, below the off curve's best)
# augmentation raises the gain. Verdict N7 ({glue:md}`n7_test`): {glue:md}`n7_mark`,
# {glue:md}`n7_measured`.

# %% [markdown]
# ## Learning-rate pairs
#
# Two children of one parent, continued at peak learning rates $\eta_a$ (rows) and
# $\eta_b$ (columns); the table gives their mean merging gain:

# %%
pairs = mark_kept(experiments_noise.lr_pair_frame(study, page.store), ["lr", "lr_b"])
m = pairs.groupby(["lr", "lr_b"])["gain"].mean().unstack()
m.round(4)

# %% tags=["remove-cell"]
page.glue_figure("fig_pairs", plots_noise.plot_lr_pairs(pairs))
diag = np.diag(m.to_numpy())
off = m.to_numpy()[~np.eye(len(m), dtype=bool)]
best = np.unravel_index(np.nanargmax(m.to_numpy()), m.shape)
page.glue_values(diag_mean=100 * diag.mean(), off_mean=100 * off.mean(), best_a=m.index[best[0]],
                 best_b=m.columns[best[1]], best_gain=100 * m.to_numpy()[best], pair_parent_lr=study.component_lr,
                 rho_diag=stats.spearman(m.index, diag))
# the introduction's counts: the cells the rule excludes, per section
kept = {name: frame.groupby(keys)["kept"].first() for name, frame, keys in (
    ("momentum", mom, ["lr", "momentum"]), ("weight_decay", wd, ["norm", "weight_decay"]),
    ("augmentation", aug, ["lr", "augment"]), ("lr_pairs", pairs, ["lr", "lr_b"]))}
page.glue_values(failed_acc=NOISE_FAILED_TRAIN_ACC, min_effect=100 * NOISE_MIN_EFFECT,
                 n_pairs=study.seeds, rule_old=NOISE_RULE_THRESHOLDS[-1], ref_pairs=2 * MIN_PAIRS)
page.glue_md("rule_between", experiments_noise.rule_between_words())
page.glue_md("min_pairs", str(MIN_PAIRS))
page.glue_md("excluded", "; ".join(f"{name.replace('_', ' ')}: {int((~c).sum())} of {len(c)}"
                                    for name, c in kept.items()))

# %% [markdown]
# ```{glue:figure} fig_pairs
# :name: fig-lr-pairs
#
# Merging gain of two children spawned from one parent (trained at $\eta =$
# {glue:text}`pair_parent_lr`) and continued at peak learning rates $\eta_a$ and
# $\eta_b$, with different batch orders (mean over pairs; in grey and in brackets, cells
# the rule excluded). Trained: {glue:md}`setup`.
# ```
#
# Children continued at the same learning rate (the diagonal) gain
# {glue:text}`diag_mean:.2f` points on average, and children at different learning
# rates gain {glue:text}`off_mean:.2f`. The best pair is $\eta_a =$ {glue:text}`best_a`,
# $\eta_b =$ {glue:text}`best_b`, with {glue:text}`best_gain:.2f` points. Along the
# diagonal, Spearman's ρ between learning rate and gain is {glue:text}`rho_diag:.2f`
# (every cell, kept or not). The paper expects a positive ρ and the best pairs on
# the diagonal at large $\eta$. Verdict N5, on the kept cells
# ({glue:md}`n5_test`): {glue:md}`n5_mark`, {glue:md}`n5_measured`.

# %% [markdown]
# ## How the verdicts depend on the rule
#
# Each row's verdict with only failed runs excluded (the rule), with every pair's weaker
# child at {glue:md}`rule_between` training accuracy or more, and at {glue:text}`rule_old:g` (the book's earlier convergence
# rule):

# %%
keys = ["lr", "batch_size", "momentum", "weight_decay", "spawn_fraction", "lr_floor", "norm", "augment", "method",
        "dataset"]
metrics = ["gain", "gain_best", "loss_gain", "ensemble_gain", "disagreement", "pair_distance", "noise_scale",
           "noise_scale_sq", "acc_endpoints", "acc_merged", "train_acc_min", "train_steps", "diverged"]
# a diverged cell has no gain: its missing metrics are left out
parts = [schema.to_long(frame.assign(method=name, dataset=study.dataset), page.name, metrics, keys,
                        drop_missing=True)
         for name, frame in (("momentum", mom), ("weight_decay", wd), ("augmentation", aug))]
parts.append(schema.to_long(pairs.assign(method="lr_pairs", dataset=study.dataset), page.name,
                            [m for m in metrics if not m.startswith("noise_scale")], ["lr", "lr_b", "method", "dataset"],
                            drop_missing=True))
components = schema.concat(parts)
sensitivity = rule_sensitivity(None, components)
sensitivity

# %% tags=["remove-cell"]
page.choose("rule_moves", "some" if experiments_noise.moving_rows(sensitivity) else "none")
page.glue_md("rule_moving", experiments_noise.moving_rows(sensitivity))
ref_blocks = [page.noise_reference_block(name, frame, prov)[0]
              for name, (frame, prov) in (page.references() if study.show_references else {}).items()]
page.glue_md("noise_references", "\n\n".join([reference.listing(page.name), *ref_blocks]))

# %% [markdown] tags=["when:rule_moves=some"]
# As the threshold rises, the verdicts of {glue:md}`rule_moving` change (the table gives
# how); the other rows' do not.

# %% [markdown] tags=["when:rule_moves=none"]
# No row's verdict changes with the threshold.

# %% [markdown] tags=["when:decides=false"]
# **What this build cannot decide.** Every row here reads intervals over at least
# {glue:md}`min_pairs` pairs per cell; this build has {glue:text}`n_pairs`, so its rows
# that reach an interval are *inconclusive*. The committed reference runs, with {glue:text}`ref_pairs` pairs
# per cell, decide them: the scoreboard scores each.

# %% [markdown] tags=["when:decides=true"]
# With {glue:text}`n_pairs` pairs per cell, every interval above reads enough pairs.

# %% [markdown]
# ## The reference runs
#
# Committed under `results/` with their provenance, these run this page with {glue:text}`ref_pairs` pairs per
# cell in the same setting; their tests, the rule and the minimum effect were fixed, and
# committed, before they ran.
#
# ```{glue:md} noise_references
# :format: myst
# ```

# %% tags=["remove-input"]
page.choose("decides", study.seeds >= MIN_PAIRS)
page.save(components)
page.glue_verdict("n3", "n3_mark", "n3_measured", "n3_test")
page.glue_verdict("n4", "n4_mark", "n4_measured", "n4_test")
page.glue_verdict("n5", "n5_mark", "n5_measured", "n5_test")
page.glue_verdict("n6", "n6_mark", "n6_measured", "n6_test")
page.glue_verdict("n7", "n7_mark", "n7_measured", "n7_test")
page.provenance()
