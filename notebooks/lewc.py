# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # LEWC: does the merged network compute a shrunken sum of its parents?
#
# **The paper's claim** (Ito et al., width paper). For wide networks, layerwise
# exponentially weighted connectivity holds:
#
# $$f_l(\theta(\lambda)) \approx \lambda^l f_l(\theta_a) + (1-\lambda)^l f_l(\theta_b).$$
#
# At layer $l$ the merged network computes the two parents' features, each
# weighted by a power of its interpolation weight. This is different from
# *linear* layerwise feature connectivity (LLFC, Zhou et al. 2023), which predicts
# $\lambda f_l^a + (1-\lambda) f_l^b$ and is what permutation-aligned pairs follow.
#
# **How to judge it.** At $\lambda = \tfrac12$ both predictions are multiples of
# $f_l^a + f_l^b$, so their *cosines* to the merged features are identical. The
# relative error $\|f_l(\theta(\lambda)) - p\| / \|f_l(\theta(\lambda))\|$ tells them apart.
# But when the merged model's activations shrink, the LEWC error beats the LLFC
# error even for networks that have nothing in common. So each number below stands
# beside the same measure on an **untrained pair**: the two initialisations of the
# same pair, at the same width and layer. This page reads the pairs that the width
# sweep trained; it trains nothing new.

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
from lmcbook import claims, experiments, plots_width, schema, stats, store
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("lewc", globals())

# %% [markdown]
# The probes run on every trained pair of the width sweep and on the same pairs
# untrained. The table gives the LEWC relative error at the last hidden layer and
# $\lambda = \tfrac12$:

# %%
probes = experiments.probe_sweep(study, page.store)
lewc, scale = probes["lewc"], probes["scale_law"]
last = schema.last_hidden(lewc)
table = stats.cell_means(lewc, {"err": "lewc_rel_err", "llfc": "llfc_rel_err"}, layer=last, lam=0.5)
table[["err", "err_spread", "err_un"]].round(4)  # _un: the untrained pairs

# %% [markdown]
# **One pair by hand.** LEWC predicts the merged network's pre-activations at layer $l$
# to be $\lambda^l f^a_l + (1-\lambda)^l f^b_l$. The next cell records the first pair at
# the widest width and its merged model $\theta(\tfrac12)$ on the test split
# (`probes.record`), at the last hidden layer. It forms the LEWC and LLFC predictions
# there and their relative errors $\|f_l(\theta(\tfrac12)) - p\| / \|f_l(\theta(\tfrac12))\|$
# (`probes.rel_err`). It asserts that they are that pair's entries in the probe sweep
# above, to within $10^{-6}$ (relative).

# %%
import pandas as pd

from lmcbook import merge
from lmcbook.probes import record, rel_err

data = store.study_data(study)
pair = next(p for p in study.pairs() if p.width == max(study.widths))  # the widest width's first pair
a, b = (page.store.load(spec).model for spec in (pair.a, pair.b))
l, lam = int(last), 0.5
f_a, f_b, f_m = (record(m, data.x_test).outputs[l] for m in (a, b, merge.interpolate(a, b, lam, data)))
by_hand = {"lewc_rel_err": rel_err(f_m, lam ** l * f_a + (1 - lam) ** l * f_b),  # LEWC: λ^l f_a + (1-λ)^l f_b
           "llfc_rel_err": rel_err(f_m, lam * f_a + (1 - lam) * f_b)}  # LLFC: λ f_a + (1-λ) f_b
rows = lewc[(lewc["method"] == "trained") & (lewc["layer"] == l) & (lewc["lam"] == lam)
            & (lewc["hidden_units"] == pair.hidden_units) & (lewc["pair"] == pair.index)].set_index("metric")["value"]
for k, v in by_hand.items():
    assert abs(v - rows[k]) <= 1e-6 * max(1.0, abs(rows[k])), (k, v, rows[k])
pd.DataFrame({"this cell": by_hand, "the probe sweep": rows[list(by_hand)]}).rename_axis(
    f"layer {l}, {pair.hidden_units} hidden units, pair {pair.index}")

# %% tags=["remove-cell"]
regime = probes.regime
page.glue_md("setup", describe_study(study, regime))
page.glue_figure("fig_lewc", plots_width.plot_lewc_vs_llfc(lewc))
page.glue_figure("fig_scale", plots_width.plot_scale_law(scale))
quarter = stats.cell_means(lewc, {"q_err": "lewc_rel_err", "q_llfc": "llfc_rel_err"}, layer=last, lam=0.25)
beta = stats.cell_means(scale, {"beta": "scale_beta"})
narrow, wide = table.loc[table.index.min()], table.join(quarter).join(beta).loc[table.index.max()]
page.glue_values(last=int(last), n_narrow=int(narrow.name), n_wide=int(wide.name), err_narrow=narrow["err"],
                 err_wide=wide["err"], err_wide_spread=wide["err_spread"], err_un_wide=wide["err_un"],
                 llfc_wide=wide["llfc"], q_err_wide=wide["q_err"], q_llfc_wide=wide["q_llfc"], beta_wide=wide["beta"],
                 beta_wide_spread=wide["beta_spread"], beta_un_wide=wide["beta_un"])
why = claims.width.lewc_setting_missing(schema.to_long_frame(regime, "lewc", schema.REGIME_KEYS))
page.choose("scale_applies", why is None)
page.glue_values(scale_missing=why or "")

# %% [markdown]
# ```{glue:figure} fig_lewc
# :name: fig-lewc
#
# Relative error of the LEWC and LLFC predictions of each layer's pre-activations,
# against width, at $\lambda = \tfrac12$ and $\lambda = \tfrac14$ (seed mean; bars: min to
# max over pairs; dashed: the untrained pair). Layer 1 is not shown: it is linear in
# the weights, so both predictions are exact there. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** At the last hidden layer ($l =$ {glue:text}`last`) and
# $\lambda = \tfrac12$, the LEWC relative error goes from {glue:text}`err_narrow:.3f` at
# {glue:text}`n_narrow` hidden units to {glue:text}`err_wide:.3f` (spread
# {glue:text}`err_wide_spread:.3f`) at {glue:text}`n_wide`, where the untrained pair's
# error is {glue:text}`err_un_wide:.3f`. The LLFC prediction's error at the same
# layer is {glue:text}`llfc_wide:.3f`. At $\lambda = \tfrac14$, where the two
# predictions are no longer multiples of each other, the LEWC error at the
# widest width is {glue:text}`q_err_wide:.3f` against {glue:text}`q_llfc_wide:.3f`
# for LLFC.
#
# **Verdicts** (the scoreboard's, computed by `lmcbook.claims` on this page's CSV):
# - W3, LEWC holds better as width grows, against the untrained pair
#   ({glue:md}`w3_test`): {glue:md}`w3_mark`, {glue:md}`w3_measured`;
# - W13, wide networks follow LEWC closely, read where LEWC's prediction and LLFC's differ
#   (at $\lambda = \tfrac12$ their cosines coincide, so a cosine there cannot tell them
#   apart; {glue:md}`w13_test`): {glue:md}`w13_mark`, {glue:md}`w13_measured`.

# %% [markdown]
# ## The scale law
#
# Under exact LEWC at $\lambda = \tfrac12$ each layer's merged pre-activations are
# $2^{1-l}$ times the mean of the parents':
# $r_l = \|f_l(\theta(\tfrac12))\| / \|\tfrac12(f_l^a + f_l^b)\| = 2^{1-l}$. A least-squares
# fit of $\log_2 r_l = \alpha - \beta (l - 1)$ over the layers should then give
# $\alpha = 0$ and $\beta = 1$.
#
# ```{glue:figure} fig_scale
# :name: fig-scale-law
#
# Left: $\log_2 r_l$ against layer for each width (seed mean), with the LEWC line
# $1 - l$. Right: the fitted slope $\beta$ against width, for trained and untrained
# pairs. Trained: {glue:md}`setup`.
# ```
#
# At the widest width the fitted β is {glue:text}`beta_wide:.3f` (spread over
# pairs {glue:text}`beta_wide_spread:.3f`); for the untrained pair it is
# {glue:text}`beta_un_wide:.3f`.

# %% [markdown] tags=["when:scale_applies=true"]
# These networks are bias-free MLPs without normalisation, the setting the law is
# derived for.

# %% [markdown] tags=["when:scale_applies=false"]
# The law does not apply here (*n/a*): {glue:text}`scale_missing`.

# %% [markdown]
# The depth-sweep page tests the same law at one width and several depths.

# %% tags=["remove-input"]
page.save(lewc=lewc, scale_law=scale, keys=schema.PROBE_KEYS, regime=regime)
page.glue_verdict("w3", "w3_mark", "w3_measured", "w3_test")
page.glue_verdict("w13", "w13_mark", "w13_measured", "w13_test")
page.provenance()
