# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Merged accuracy against width
#
# **The paper's claim** (Ito et al., width paper). Average the weights of two
# independently trained networks, with no permutation, and the merged model is
# useless when the networks are narrow. As the networks get wider, the merged
# model's accuracy rises towards that of the endpoints. Weight averaging needs no
# permutation once the model is wide enough.
#
# **What this page does.** It trains pairs of models from different seeds (both the
# initialisation and the batch order differ) at each width, then evaluates
# $\theta(\lambda) = \lambda\,\theta_a + (1-\lambda)\,\theta_b$ along the line between them.
# The logit ensemble $\tfrac12(f^a_L + f^b_L)$ is the natural reference: it is what
# merging would reach if the two networks' functions simply added up.

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

# %%
from lmcbook import experiments, plots_width, store
from lmcbook.claims.mechanism import claim_m4
from lmcbook.claims.thresholds import PAPER_MLP_ACC_BARRIER
from lmcbook.claims.verdicts import FAIL, PASS
from lmcbook.page import open_page
from lmcbook.studies import describe_study, regime_table

page, study = open_page("width_accuracy", globals())

# %% [markdown]
# Every pair of the sweep is trained (or loaded from the run store), and the whole
# line between each pair's two models is evaluated on the test split:

# %%
pairs = experiments.pair_sweep(study, page.store)
pairs.means[["acc_a", "acc_b", "acc_merged", "acc_ensemble", "acc_barrier", "acc_barrier_mid"]].round(3)

# %% [markdown]
# **One pair by hand.** The merged model is the plain average of the two networks'
# parameters, $\theta(\tfrac12) = \tfrac12\theta_a + \tfrac12\theta_b$. The next cell
# loads the first pair at the widest width from the run store, averages it with
# `merge.interpolate`, checks that every merged parameter is that average, and measures
# the three models' test accuracy with `models.evaluate`. It asserts that these are the
# accuracies in that pair's row of the sweep above, to within $10^{-9}$.

# %%
import pandas as pd
import torch

from lmcbook import merge, models

data = store.study_data(study)
pair = next(p for p in study.pairs() if p.width == max(study.widths))  # the widest width's first pair
a, b = (page.store.load(spec).model for spec in (pair.a, pair.b))
merged = merge.interpolate(a, b, lam=0.5, data=data)  # BatchNorm statistics, if any, recomputed on training data
for p, pa, pb in zip(merged.parameters(), a.parameters(), b.parameters()):
    assert torch.allclose(p, 0.5 * pa + 0.5 * pb)  # θ(½) = ½θa + ½θb
by_hand = {f"acc_{k}": models.evaluate(m, data.x_test, data.y_test).acc for k, m in
           (("a", a), ("b", b), ("merged", merged))}
row = pairs["summary"].set_index(["hidden_units", "pair"]).loc[(pair.hidden_units, pair.index)]
for k, v in by_hand.items():
    assert abs(v - row[k]) <= 1e-9, (k, v, row[k])
pd.DataFrame({"this cell": by_hand, "the sweep's row": row[list(by_hand)]}).rename_axis(
    f"{pair.hidden_units} hidden units, pair {pair.index}")

# %% tags=["remove-cell"]
summary, curves, means = pairs["summary"], pairs["curves"], pairs.means
page.glue_md("setup", describe_study(study, pairs.regime))
page.glue_md("regime", regime_table(pairs.regime))
page.glue_figure("fig_curves", plots_width.plot_interpolation(curves))
page.glue_figure("fig_width", plots_width.plot_width_accuracy(summary))
narrow, wide = means.loc[means.index.min()], means.loc[means.index.max()]
page.glue_values(n_narrow=int(narrow.name), n_wide=int(wide.name), acc_barrier_paper=100 * PAPER_MLP_ACC_BARRIER,
                 acc_merged_narrow=narrow["acc_merged"], acc_ensemble_narrow=narrow["acc_ensemble"],
                 acc_merged_wide=wide["acc_merged"], acc_ensemble_wide=wide["acc_ensemble"],
                 acc_endpoints_wide=wide["acc_endpoints"], gap_wide=wide["acc_ensemble"] - wide["acc_merged"])
# does the width effect survive a small initialisation?  M4 and the small-initialisation arm of the mechanism page
# (None until that page has run: `lmcbook execute` then runs this page again)
mech = page.read_csv_if("mechanism")
m4 = None if mech is None else page.glue_claim(claim_m4(mech), "m4_mark", "m4_measured")
page.choose("small_init", "pending" if m4 is None else {PASS: "vanishes", FAIL: "stays"}.get(m4.state,
                                                                                                          "open"))
# the arm's narrow end, where M4 decides: read only where its endpoints trained (the convergence rule M4 applies)
decided = m4 is not None and m4.state in (PASS, FAIL)
narrow_end, small = experiments.small_init_facts(mech, m4) if decided else ("none", {})
page.choose("small_narrow_end", narrow_end)
page.glue_values(**small)
# and M4 on the committed mechanism reference of another data set
elsewhere, other = experiments.m4_elsewhere(page.references("mechanism"), study.dataset)
page.choose("m4_elsewhere", elsewhere)
page.glue_markdown(**other)

# %% [markdown]
# ```{glue:figure} fig_curves
# :name: fig-width-curves
#
# Test accuracy along the line $\theta(\lambda)$ between two independently trained
# models, one line per width (seed mean; bands span min to max over pairs).
# Trained: {glue:md}`setup`.
# ```
#
# ```{glue:figure} fig_width
# :name: fig-width-accuracy
#
# Accuracy of the merged model $\theta(\tfrac12)$ against width, beside the mean
# of the two endpoints and the logit ensemble (error bars: min to max over pairs).
# Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** At {glue:text}`n_narrow` hidden units the merged model
# reaches {glue:text}`acc_merged_narrow:.3f` while the ensemble of the same two
# models reaches {glue:text}`acc_ensemble_narrow:.3f`. At {glue:text}`n_wide`
# hidden units the merged model reaches {glue:text}`acc_merged_wide:.3f`, against
# {glue:text}`acc_ensemble_wide:.3f` for the ensemble and
# {glue:text}`acc_endpoints_wide:.3f` for the endpoints' mean: a gap to the
# ensemble of {glue:text}`gap_wide:.3f`.
#
# **Verdicts** (the scoreboard's, computed by `lmcbook.claims` on this page's CSV):
# - W1, merged accuracy rises with width ({glue:md}`w1_test`): {glue:md}`w1_mark`,
#   {glue:md}`w1_measured`;
# - W11, a small accuracy barrier at the widest width ({glue:md}`w11_test`; the paper
#   reports about {glue:text}`acc_barrier_paper:g` points for its MLP): {glue:md}`w11_mark`, {glue:md}`w11_measured`.
#
# **Training regime** of these runs:
#
# ```{glue:md} regime
# :format: myst
# ```
#
# Whether that is long enough for weight
# decay, the paper's proposed cause, to have acted is the question of the page
# {doc}`mechanism`, which repeats this sweep with stronger weight decay, for longer and
# from smaller initial weights.

# %% [markdown] tags=["when:small_init=vanishes"]
# **With a small initialisation, wide networks merge worse** on {glue:md}`small_data`
# (the merge at the widest width, not a trend with width: see the arm's narrow end below):
# with initial weights ×{glue:text}`small_scale:g`, at the same length and the weakest
# weight decay of {doc}`mechanism`, plain merged accuracy at {glue:text}`small_n_wide` hidden
# units is only {glue:text}`small_wide:.3f`, against {glue:text}`standard_wide:.3f` with the
# standard initialisation (M4 {glue:md}`m4_mark`: {glue:md}`m4_measured`). On
# {glue:md}`small_data`, how wide networks merge after short training leans on the random
# initialisation, before weight decay can act.

# %% [markdown] tags=["when:small_init=stays"]
# **A small initialisation leaves this width effect intact** on {glue:md}`small_data`:
# with initial weights ×{glue:text}`small_scale:g`, plain merged accuracy at
# {glue:text}`small_n_wide` hidden units is {glue:text}`small_wide:.3f`, against
# {glue:text}`standard_wide:.3f` with the standard initialisation (M4 {glue:md}`m4_mark`:
# {glue:md}`m4_measured`).

# %% [markdown] tags=["when:small_narrow_end=trained"]
# At {glue:text}`small_n_narrow` hidden units, the narrowest width of that arm whose endpoints
# all reach the convergence rule's training accuracy of {glue:text}`small_converged_rule:g`,
# it is {glue:text}`small_narrow:.3f`. The widths whose endpoints did not all reach it:
# {glue:md}`small_untrained_widths` units.

# %% [markdown] tags=["when:small_narrow_end=all"]
# Every width of that arm trained (each endpoint at the convergence rule's training accuracy of
# {glue:text}`small_converged_rule:g` or more); at {glue:text}`small_n_narrow` hidden units,
# its narrowest, it is {glue:text}`small_narrow:.3f`.

# %% [markdown] tags=["when:small_narrow_end=untrained"]
# The arm has no width trend this page can read: below {glue:text}`small_n_wide` hidden
# units (at {glue:md}`small_untrained_widths`) no width has all its endpoints at the
# convergence rule's training accuracy of {glue:text}`small_converged_rule:g`; the closest,
# {glue:text}`small_n_closest` units, has its weakest endpoint at
# {glue:text}`small_closest_min:.3f`. So only its widest width is read.

# %% [markdown] tags=["when:small_narrow_end=single"]
# The arm was trained at {glue:text}`small_n_wide` hidden units only, so it has no width
# trend of its own.

# %% [markdown] tags=["when:small_narrow_end=none"]
# % M4 does not decide here: no narrow end of the small-initialisation arm is quoted.

# %% [markdown] tags=["when:small_init=open"]
# **Does the width effect survive a small initialisation?** M4, on the page
# {doc}`mechanism`, does not decide ({glue:md}`m4_mark`: {glue:md}`m4_measured`).

# %% [markdown] tags=["when:small_init=pending"]
# **Does the width effect survive a small initialisation?** {doc}`mechanism` answers it
# (M4), but had not run when this page was executed; `lmcbook execute` runs this page
# again once it has.

# %% [markdown] tags=["when:m4_elsewhere=refuted"]
# **On {glue:md}`m4_other_data`** (the committed reference run {glue:md}`m4_other_source`),
# a small initialisation leaves wide networks merging, so M4 reads {glue:md}`m4_other_mark`
# ({glue:md}`m4_other_measured`) and the book's account H1, that the width effect of short
# training comes from the random initialisation, is refuted on that data set at the width it
# reads. {glue:md}`m4_other_rest`

# %% [markdown] tags=["when:m4_elsewhere=agrees"]
# **On {glue:md}`m4_other_data`** (the committed reference run {glue:md}`m4_other_source`),
# a small initialisation takes the width effect away: M4 reads {glue:md}`m4_other_mark`
# ({glue:md}`m4_other_measured`). {glue:md}`m4_other_rest`

# %% [markdown] tags=["when:m4_elsewhere=none"]
# No committed reference run of {doc}`mechanism` on another data set decides M4.

# %% [markdown]
# Accuracy does not depend on the softmax temperature, so this figure needs no
# calibration.
# The loss does: the next page shows why the merged model's loss
# barrier stays large until its temperature is refitted, and how the size of that
# temperature correction follows from the LEWC theory.

# %% tags=["remove-input"]
page.save(curves=(curves, ["acc"], ["width", "hidden_units", "lam"]),
          summary=(summary, ["acc_a", "acc_b", "acc_endpoints", "acc_merged", "acc_ensemble", "acc_barrier",
                             "acc_barrier_mid"], ["width", "hidden_units"]),
          regime=pairs.regime)
page.glue_verdict("w1", "w1_mark", "w1_measured", "w1_test")
page.glue_verdict("w11", "w11_mark", "w11_measured", "w11_test")
page.provenance()
