# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Weak additivity: is the ReLU of a sum the sum of the ReLUs?
#
# **The paper's claim** (Ito et al., width paper). LEWC needs the merged network's
# ReLUs to act on each parent's contribution separately:
# $\sigma(u + v) \approx \sigma(u) + \sigma(v)$ with $u = \lambda^l f_l^a$ and
# $v = (1-\lambda)^l f_l^b$. This holds exactly when the two parents' pre-activations
# never have opposite signs ($f_l^a \odot f_l^b \ge 0$ elementwise). The paper argues
# that wide networks trained with weight decay come close, because each network
# uses a small, mostly disjoint set of neurons.
#
# **How it is measured.** At every hidden layer: the additivity relative error
# $\|\sigma(u+v) - \sigma(u) - \sigma(v)\| / \|\sigma(u) + \sigma(v)\|$; the cosine
# $\cos(\sigma(u+v), \sigma(u)+\sigma(v))$, averaged per input; and the fraction of sign
# conflicts. The cosine alone is not enough: $\sigma(u+v) = c\,(\sigma(u)+\sigma(v))$ with
# $c < 1$ has cosine 1. The baselines are independent Gaussians with the layer's width,
# number of inputs and scale ratio (dotted; computed by Monte Carlo), and the
# untrained pair (dashed). This page reads the width sweep's pairs.

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

page, study = open_page("weak_additivity", globals())

# %% [markdown]
# The probes run on every trained pair of the width sweep and on the same pairs
# untrained. The table gives the additivity relative error at $\lambda = \tfrac12$,
# averaged over the hidden layers:

# %%
probes = experiments.probe_sweep(study, page.store)
table = stats.cell_means(probes["weak_additivity"], {"err": "additivity_rel_err", "base": "baseline_additivity_rel_err",
                                                     "sign": "sign_conflict", "cos": "additivity_cos",
                                                     "cos_base": "baseline_additivity_cos"}, lam=0.5)
table[["err", "err_spread", "base", "err_un"]].round(4)  # means over the hidden layers; _un: the untrained pairs

# %% tags=["remove-cell"]
add = probes["weak_additivity"]
page.glue_md("setup", describe_study(study, probes.regime))
page.glue_figure("fig_add", plots_width.plot_additivity(add, 0.5))
narrow, wide = table.loc[table.index.min()], table.loc[table.index.max()]
page.glue_values(n_narrow=int(narrow.name), n_wide=int(wide.name), err_narrow=narrow["err"], err_wide=wide["err"],
                 err_wide_spread=wide["err_spread"], err_un_wide=wide["err_un"], base_wide=wide["base"],
                 sign_narrow=narrow["sign"], sign_wide=wide["sign"], sign_un_wide=wide["sign_un"],
                 cos_narrow=narrow["cos"], cos_wide=wide["cos"], cos_base_wide=wide["cos_base"])
rho = stats.spearman(table.index, table["err"])
page.glue_values(err_rho=rho)
page.glue_md("err_trend", stats.trend(rho))
page.choose("err_falls", stats.trend(rho) == "falls")

# %% [markdown]
# ```{glue:figure} fig_add
# :name: fig-weak-additivity
#
# Weak additivity at $\lambda = \tfrac12$, one color per hidden layer: relative error
# (top), per-input cosine (middle) and the fraction of coordinates where the parents'
# pre-activations have opposite signs (bottom). Solid: trained pairs; dashed: untrained
# pairs; dotted: the Gaussian baseline. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** Averaged over hidden layers, the additivity relative
# error at $\lambda = \tfrac12$ is {glue:text}`err_narrow:.3f` at {glue:text}`n_narrow`
# hidden units, and {glue:text}`err_wide:.3f` (spread {glue:text}`err_wide_spread:.3f`)
# at {glue:text}`n_wide`, against a Gaussian baseline of {glue:text}`base_wide:.3f`
# there; the untrained pair gives
# {glue:text}`err_un_wide:.3f`. The sign-conflict fraction is
# {glue:text}`sign_narrow:.3f` at the narrowest and {glue:text}`sign_wide:.3f` at
# the widest width, against {glue:text}`sign_un_wide:.3f` for the untrained pair
# and ½ for independent Gaussians. The cosine goes from {glue:text}`cos_narrow:.3f`
# to {glue:text}`cos_wide:.3f`, against a Gaussian baseline of
# {glue:text}`cos_base_wide:.3f`.
#
# **Verdict W4** (the scoreboard's, computed by `lmcbook.claims` on this page's CSV;
# {glue:md}`w4_test`): {glue:md}`w4_mark`, {glue:md}`w4_measured`.

# %% [markdown] tags=["when:err_falls=true"]
# Across widths the error {glue:md}`err_trend` (Spearman ρ = {glue:text}`err_rho:.2f`), as
# the paper says.

# %% [markdown] tags=["when:err_falls=false"]
# **Against the paper.** Across widths the error {glue:md}`err_trend` (Spearman ρ =
# {glue:text}`err_rho:.2f`): weak additivity does not improve with width in these runs.

# %% tags=["remove-input"]
page.save(weak_additivity=add, keys=schema.PROBE_KEYS, regime=probes.regime)
page.glue_verdict("w4", "w4_mark", "w4_measured", "w4_test")
page.provenance()
