# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Random permutations: a weak control, and a stronger one
#
# **The paper's control** (Ito et al., width paper). Before merging, permute the
# hidden units of model $b$ at random. A permutation does not change the function $b$
# computes, but it does change which weights get averaged. If wide networks merge
# well for a structural reason, and not because the two happen to be aligned, the
# merged accuracy should not depend on the permutation.
#
# **Why this control is weak.** With i.i.d. initialisation, the randomly permuted $b$
# has *exactly the same distribution* as $b$ itself: it is what training would have
# produced from a permuted initialisation. So the expected merged accuracy is the
# same with or without the permutation, at every width, whatever the explanation of
# the width effect. What the control can show is how much one particular merge depends on the chance
# alignment of units: the **spread** over draws, and how that spread shrinks with
# width. The unpermuted merge is itself one more random permutation of the same
# distribution, so comparing the draws with it cannot fail on average. The scoreboard's
# W8 therefore asks the question the paper's title asks, with a null that can fail: at the
# widest width, does the permutation that weight matching picks merge any better than a
# random one? It reads, per pair, the weight-matched merge minus the mean of that pair's
# random-permutation merges, by an interval over pairs.
#
# **A stronger contrast.** Weight matching (Ainsworth et al. 2023) picks the
# permutation that aligns $b$'s units with $a$'s. If plain averaging of wide networks
# already works as well as an aligned merge, width has made alignment unnecessary.
# If weight matching still gains a lot, it has not.

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
from lmcbook import experiments, plots_width, store
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("random_permutation", globals())

# %% [markdown]
# Each pair is merged as it is, after weight matching, and after each of a number of
# random permutations of $b$; the table gives the merged accuracy per width and method,
# and the spread over the random draws:

# %%
perm = experiments.permutation_frames(study, page.store)
regime = experiments.regime_frame(study, page.store)
means = perm.groupby(["hidden_units", "method"])["acc_merged"].mean().unstack()
rnd = perm[perm["method"] == "random_permutation"]
spread = rnd.groupby(["hidden_units", "pair"])["acc_merged"].agg(lambda v: v.max() - v.min()).groupby(level=0).mean()
means.assign(spread_over_draws=spread).round(4)

# %% [markdown]
# The two ends of the width range: the merged accuracy of each method, what weight matching
# adds to the unpermuted merge, and the spread over random draws, in points:

# %%
ends = means.loc[[spread.index.min(), spread.index.max()]].assign(
    wm_gain=lambda m: m["weight_matching"] - m["none"], spread_points=100 * spread)
ends.round(4)

# %% [markdown]
# The figure below draws every draw's merged accuracy against width:

# %%
page.glue_figure("fig_draws", plots_width.plot_draws(perm))

# %% tags=["remove-cell"]
page.glue_md("setup", describe_study(study, regime))
point = 100 / len(store.study_data(study).y_test)  # one test image, in points
narrow, wide = ends.iloc[0], ends.iloc[-1]
page.glue_values(draws=study.draws, point_per_image=point, n_narrow=int(narrow.name), n_wide=int(wide.name),
                 spread_narrow=narrow["spread_points"], spread_wide=wide["spread_points"],
                 spread_ratio=wide["spread_points"] / narrow["spread_points"] if narrow["spread_points"] > 0
                 else float("nan"),
                 wm_gain_narrow=narrow["wm_gain"], wm_gain_wide=wide["wm_gain"], wm_wide_points=100 * wide["wm_gain"],
                 wm_wide_drop=-100 * wide["wm_gain"], none_narrow=narrow["none"], none_wide=wide["none"],
                 random_permutation_narrow=narrow["random_permutation"],
                 random_permutation_wide=wide["random_permutation"],
                 weight_matching_narrow=narrow["weight_matching"], weight_matching_wide=wide["weight_matching"])
page.choose("wm_wide", "adds" if 100 * wide["wm_gain"] > point else
            "lowers" if 100 * wide["wm_gain"] < -point else "within")

# %% [markdown]
# ```{glue:figure} fig_draws
# :name: fig-random-permutation
#
# Left: merged accuracy at $\lambda = \tfrac12$ for each of {glue:text}`draws` random
# permutations of $b$ per pair (dots), for $b$ itself, and for $b$ weight-matched to $a$.
# Right: the spread of merged accuracy over draws (max − min, averaged over pairs).
# Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** The spread of merged accuracy over random permutations
# is {glue:text}`spread_narrow:.1f` points at {glue:text}`n_narrow` hidden units and
# {glue:text}`spread_wide:.1f` points at {glue:text}`n_wide` (a ratio of
# {glue:text}`spread_ratio:.2f`; one test image is worth {glue:text}`point_per_image:.2f`
# points, so read small spreads with that resolution in mind). The mean over draws,
# {glue:text}`random_permutation_narrow:.3f` and {glue:text}`random_permutation_wide:.3f`,
# stands beside the unpermuted merge, {glue:text}`none_narrow:.3f` and
# {glue:text}`none_wide:.3f`, as it should whatever the explanation. Verdict W8, the
# scoreboard's control row ({glue:md}`w8_test`): {glue:md}`w8_mark`, {glue:md}`w8_measured`.

# %% [markdown] tags=["when:wm_wide=adds"]
# Weight matching changes the merged accuracy by
# {glue:text}`wm_gain_narrow:.3f` at the narrowest width (to
# {glue:text}`weight_matching_narrow:.3f`) and by {glue:text}`wm_gain_wide:.3f` at the
# widest (to {glue:text}`weight_matching_wide:.3f`): alignment still adds
# {glue:text}`wm_wide_points:.1f` points at the widest width, so width has not made it irrelevant.

# %% [markdown] tags=["when:wm_wide=lowers"]
# Weight matching changes the merged accuracy by
# {glue:text}`wm_gain_narrow:.3f` at the narrowest width (to
# {glue:text}`weight_matching_narrow:.3f`) and by {glue:text}`wm_gain_wide:.3f` at the
# widest (to {glue:text}`weight_matching_wide:.3f`): at the widest width alignment
# lowers the merged accuracy by {glue:text}`wm_wide_drop:.1f` points: the matching, which maximises
# weight similarity, is not what these wide pairs need.

# %% [markdown] tags=["when:wm_wide=within"]
# Weight matching changes the merged accuracy by
# {glue:text}`wm_gain_narrow:.3f` at the narrowest width (to
# {glue:text}`weight_matching_narrow:.3f`) and by {glue:text}`wm_gain_wide:.3f` at the
# widest (to {glue:text}`weight_matching_wide:.3f`): at the widest width alignment
# changes the merged accuracy by {glue:text}`wm_wide_points:.1f` points, within one test image, so
# there it no longer matters.

# %% tags=["remove-input"]
page.save(perm=(perm, ["acc_merged", "loss_barrier_cal_mid", "loss_barrier_mid", "acc_endpoints"],
                ["width", "hidden_units", "depth", "method", "index"]),
          regime=regime)
page.glue_verdict("w8", "w8_mark", "w8_measured", "w8_test")
page.provenance()
