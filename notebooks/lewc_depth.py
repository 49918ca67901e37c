# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The depth law: do merged logits halve with every layer?
#
# **Why this page.** The width paper varies width at a fixed depth. But LEWC makes a
# sharp prediction about *depth*. If the merged network computes
# $f_l(\theta(\tfrac12)) = 2^{-l}(f_l^a + f_l^b)$ at every layer, then a network with $L$
# linear layers has merged logits $2^{1-L}$ times the ensemble's mean logits. So the
# logit norm ratio should halve with every added layer, and the temperature ratio
# $\tau_{merged}/\tau_{ens}$ should double. The paper does not run this test. Averaging
# two unrelated networks also shrinks their features, so the law is judged against
# untrained pairs at the same depths: a law that random networks meet as well says
# nothing about LEWC.
#
# **Setup.** Bias-free ReLU MLPs at several depths, all at one width, trained with
# the width sweep's recipe (the caption gives the depths and pairs).
# Besides the two logit-scale signatures, each pair gets the scale-law fit
# $\log_2 r_l = \alpha - \beta(l-1)$ over its own layers (LEWC: $\alpha = 0$, $\beta = 1$).

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
dataset = "digits"  # the data set (lmcbook.data): 8x8 digits, embedded; paper "mnist"
data_root = None  # where torchvision data sets live (None: the embedded ones need none)
download = False  # let torchvision download a missing data set into data_root
base_width = 64  # hidden units at width multiplier 1; paper 512
norm = "none"  # no normalisation: LEWC's λ^l scale holds for bare MLPs
bias = False  # no biases: LEWC's λ^l scale holds for bare MLPs
epochs = 60  # passes over the training split; smoke 4
batch_size = 128  # examples per SGD step
lr = 0.05  # SGD's peak learning rate (linear warm-up, then linear decay to 0)
momentum = 0.9  # SGD momentum (PyTorch's, dampening 0)
warmup = 0.05  # share of all steps spent in the linear warm-up
seeds = 1  # pairs per depth (W10 reads 5 in the paper profile); paper 5
device = "auto"  # where runs train: auto, cpu, cuda, cuda:N or mps
lams = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)  # the λ grid: 21 points in [0, 1]; smoke (0.0, 0.5, 1.0)
scheduler = None  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
precision = "fp32"  # fp32, or bf16 autocast (part of each run's spec)
init_scale = 1.0  # factor on the initial weights (1: PyTorch's initialisation)
weight_decay = 0.003  # SGD's weight decay (L2), as the width sweep's
width = 8.0  # multiplier of base_width: 512 hidden units; smoke 0.25; paper 2.0
depths = (2, 3, 4, 5, 6)  # the linear layers L of each MLP; smoke (2, 3)

# %%
import numpy as np

from lmcbook import claims, experiments, plots_width, probes, schema, stats
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("lewc_depth", globals())

# %% [markdown]
# Every pair of the depth sweep is trained (or loaded from the run store) and evaluated
# along the line between its two models, and the probes fit the scale law to each
# pair. The table sets the two signatures beside their predictions:

# %%
res = experiments.pair_frames(study, page.store)
frames = experiments.probe_frames(study, page.store)
regime = experiments.regime_frame(study, page.store)
summary, scale = res.summary, frames["scale_law"]
by_depth = summary.groupby("depth").mean(numeric_only=True)
by_depth["norm_pred"], by_depth["tau_pred"] = 2.0 ** (1 - by_depth.index), 2.0 ** (by_depth.index - 1)  # LEWC
beta = stats.cell_stats(scale, "scale_beta", by="depth", method="trained")
by_depth["beta"] = beta["mean"]
by_depth["alpha"] = stats.cell_stats(scale, "scale_alpha", by="depth", method="trained")["mean"]
by_depth[["logit_norm_ratio", "norm_pred", "tau_ratio", "tau_pred", "alpha", "beta", "acc_merged",
          "acc_ensemble"]].round(4)

# %% [markdown]
# Across depths, the scale law fitted to the logit norm ratios themselves,
# $\log_2(\text{ratio}) = \alpha - \beta\,(L-1)$; LEWC predicts $\alpha = 0$, $\beta = 1$:

# %%
alpha_depth, beta_depth = probes.fit_scale_law(summary["depth"], np.log2(summary["logit_norm_ratio"]))
alpha_depth, beta_depth

# %% tags=["remove-cell"]
page.glue_md("setup", describe_study(study, regime))
page.glue_figure("fig_depth", plots_width.plot_depth(summary, scale))
rel = np.abs(by_depth["logit_norm_ratio"] / by_depth["norm_pred"] - 1)
page.glue_values(units=int(study.spec(study.width, 0, 2).model.channels), beta_depth=beta_depth,
                 alpha_depth=alpha_depth, beta_mean=float(beta["mean"].mean()), beta_min=float(beta["mean"].min()),
                 beta_max=float(beta["mean"].max()), L_min=int(by_depth.index.min()), L_max=int(by_depth.index.max()),
                 n_within=int((rel <= claims.thresholds.LOGIT_SCALE_TOL).sum()), n_depths=len(by_depth))
page.glue_md("tol_pct", f"{claims.thresholds.LOGIT_SCALE_TOL:.0%}")
page.choose("w10_enough_pairs", study.seeds >= claims.thresholds.MIN_PAIRS)
page.glue_values(depth_pairs=study.seeds, min_pairs=claims.thresholds.MIN_PAIRS)

# %% [markdown]
# ```{glue:figure} fig_depth
# :name: fig-depth-law
#
# Top: the logit norm ratio $\|f_L(\theta(\tfrac12))\| / \|\tfrac12(f_L^a+f_L^b)\|$ against
# depth, with the LEWC prediction $2^{1-L}$. Middle: $\tau_{merged}/\tau_{ens}$ with
# $2^{L-1}$. Bottom: the per-network scale-law fit. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** Across depths {glue:text}`L_min` to {glue:text}`L_max` at
# {glue:text}`units` hidden units, a fit of $\log_2$ of the logit norm ratio against
# $L - 1$ gives a slope β = {glue:text}`beta_depth:.3f` and an intercept α =
# {glue:text}`alpha_depth:.3f`; LEWC predicts 1 and 0. Verdict W10, against the
# untrained pairs ({glue:md}`w10_test`): {glue:md}`w10_mark`, {glue:md}`w10_measured`.

# %% [markdown] tags=["when:w10_enough_pairs=false"]
# W10 reads an interval over at least {glue:text}`min_pairs` pairs per depth; this
# profile's budget trains {glue:text}`depth_pairs` pair(s) per depth, so W10 cannot decide here.

# %% [markdown] tags=["when:w10_enough_pairs=true"]
# With {glue:text}`depth_pairs` pairs per depth, W10's interval over pairs has the
# {glue:text}`min_pairs` it needs to decide.

# %% [markdown]
# The norm ratio is
# within {glue:md}`tol_pct` of $2^{1-L}$ at {glue:text}`n_within` of the {glue:text}`n_depths`
# depths. Fitted layer by layer within each network, and averaged over the networks of
# each depth, β lies between {glue:text}`beta_min:.3f` and {glue:text}`beta_max:.3f`
# across depths (mean {glue:text}`beta_mean:.3f`). The temperature ratio is the more fragile signature:
# it equals $2^{L-1}$ only if the merged logits are an exact multiple of the
# ensemble's, so any disagreement between the merged model's and the ensemble's
# predictions pulls it below the prediction.

# %% tags=["remove-input"]
page.save(summary=(summary, ["logit_norm_ratio", "tau_ratio", "acc_merged", "acc_ensemble", "acc_endpoints",
                             "loss_barrier_cal_mid", "loss_barrier_mid"], ["width", "hidden_units", "depth"]),
          scale_law=scale, keys=schema.PROBE_KEYS, regime=regime)
page.glue_verdict("w10", "w10_mark", "w10_measured", "w10_test")
page.provenance()
