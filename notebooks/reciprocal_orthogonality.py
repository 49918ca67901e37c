# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Reciprocal orthogonality: does each network ignore the other's features?
#
# **The paper's claim** (Ito et al., width paper). The second condition of LEWC is
# that each network's weights barely respond to the other network's hidden
# features: $W_l^a z_{l-1}^b \approx 0$ and $W_l^b z_{l-1}^a \approx 0$. Then the cross
# terms of the merged layer vanish:
#
# $$\big(\lambda W^a + (1-\lambda) W^b\big)\big(\lambda^{l-1} z^a + (1-\lambda)^{l-1} z^b\big)
# \approx \lambda^l W^a z^a + (1-\lambda)^l W^b z^b .$$
#
# The paper traces this to the low-rank weights that weight decay induces: a
# low-rank $W^a$ has a large null space, and the other network's features mostly
# fall into it.
#
# **How it is measured.** For each layer $l \ge 2$ (at $l = 1$ both models read the
# same input): the norm ratios $\|W_l^a z_{l-1}^b\| / \|W_l^a z_{l-1}^a\|$ and
# $\|W_l^b z_{l-1}^a\| / \|W_l^b z_{l-1}^b\|$ over the test split, and the cross-term check
# $y$ against $y_0$ above, as a relative error. The untrained pair is the baseline.
# This separates orthogonality from additivity: the cross-term check uses only the
# linear map of layer $l$, never a ReLU.

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
from lmcbook import experiments, plots_width, schema, stats
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("reciprocal_orthogonality", globals())

# %% [markdown]
# The probes run on every trained pair of the width sweep and on the same pairs
# untrained. The table gives, at $\lambda = \tfrac12$ and averaged over the layers
# $l \ge 2$, the norm ratio (both directions) and the cross-term error:

# %%
probes = experiments.probe_sweep(study, page.store)
# means over both directions and the layers l >= 2; _un: the untrained pairs
table = stats.cell_means(probes["reciprocal_orthogonality"], {"ratio": "orth_ratio", "cross": "cross_rel_err"}, lam=0.5)
table.round(4)

# %% tags=["remove-cell"]
orth = probes["reciprocal_orthogonality"]
page.glue_md("setup", describe_study(study, probes.regime))
page.glue_figure("fig_orth", plots_width.plot_orthogonality(orth, 0.5))
narrow, wide = table.loc[table.index.min()], table.loc[table.index.max()]
page.glue_values(n_narrow=int(narrow.name), n_wide=int(wide.name), ratio_narrow=narrow["ratio"], ratio_wide=wide["ratio"],
                 ratio_wide_spread=wide["ratio_spread"], ratio_un_narrow=narrow["ratio_un"], ratio_un_wide=wide["ratio_un"],
                 cross_narrow=narrow["cross"], cross_wide=wide["cross"], cross_un_wide=wide["cross_un"])

# %% [markdown]
# ```{glue:figure} fig_orth
# :name: fig-orthogonality
#
# Left: the orthogonality norm ratio (mean of the two directions) for layers
# $l \ge 2$ against width. Right: the relative error of dropping the cross terms,
# $\|y - y_0\| / \|y\|$, at $\lambda = \tfrac12$. Solid: trained pairs; dashed: untrained
# pairs. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** The norm ratio, averaged over both directions and the
# layers $2..L$, goes from {glue:text}`ratio_narrow:.3f` at {glue:text}`n_narrow` hidden units to
# {glue:text}`ratio_wide:.3f` (spread {glue:text}`ratio_wide_spread:.3f`) at
# {glue:text}`n_wide`. For the untrained pairs it is {glue:text}`ratio_un_narrow:.3f`
# and {glue:text}`ratio_un_wide:.3f`. Random weights are not orthogonal to random
# features, so a ratio near 1 is what no structure looks like. The cross-term
# relative error goes from {glue:text}`cross_narrow:.3f` to {glue:text}`cross_wide:.3f`,
# against {glue:text}`cross_un_wide:.3f` for the untrained pair at the widest width.
#
# **Verdicts** (the scoreboard's, computed by `lmcbook.claims` on this page's CSV):
# - W5, orthogonality strengthens with width and the ratio itself becomes small ({glue:md}`w5_test`): {glue:md}`w5_mark`,
#   {glue:md}`w5_measured`;
# - W14, wide pairs are far more orthogonal than random ones, and the ratio itself is small ({glue:md}`w14_test`):
#   {glue:md}`w14_mark`, {glue:md}`w14_measured`.

# %% tags=["remove-input"]
page.save(reciprocal_orthogonality=orth, keys=schema.PROBE_KEYS, regime=probes.regime)
page.glue_verdict("w5", "w5_mark", "w5_measured", "w5_test")
page.glue_verdict("w14", "w14_mark", "w14_measured", "w14_test")
page.provenance()
