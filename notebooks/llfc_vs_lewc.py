# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # LLFC or LEWC: two ways for a merge to work
#
# **Two accounts.** Zhou et al. (2023) showed that when two networks are linearly
# mode-connected after permutation, their features are linearly connected at every
# layer: $f_l(\theta(\lambda)) \approx \lambda f_l^a + (1-\lambda) f_l^b$ (layerwise linear
# feature connectivity, LLFC). They traced LLFC to a *commutativity* property,
# $W_l^a z_{l-1}^a + W_l^b z_{l-1}^b \approx W_l^a z_{l-1}^b + W_l^b z_{l-1}^a$, which weight
# matching enforces. The width paper's LEWC is a different mechanism: the parents'
# features are not aligned but kept apart, by reciprocal orthogonality
# $W^a z^b \approx 0$, and the merged features shrink as $\lambda^l$.
#
# **The expectation.** Weight-matched pairs should follow LLFC and commutativity.
# Wide unpermuted pairs should follow LEWC and reciprocal orthogonality. This page
# measures all four on both kinds of pair, at every width. It reuses the probes of
# the *Why width works* pages on the weight-matched pairs. Commutativity is reported
# as $\|(W^a - W^b)(z^a - z^b)\| / (\|W^a z^a\| + \|W^b z^b\|)$ *(our normalisation)*.

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
import pandas as pd

from lmcbook import experiments, plots_width, schema, stats
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("llfc_vs_lewc", globals())

# %% [markdown]
# The probes run on every pair as trained, on the same pair after weight matching, and
# on the untrained pair:

# %%
frames = experiments.probe_frames(study, page.store, matched=True)
regime = experiments.regime_frame(study, page.store)
keys = ["width", "hidden_units", "depth", "layer", "lam", "method"]  # the page's CSV, which the figure reads
long = schema.concat([schema.to_long_frame(frames["lewc"], page.name, keys),
                      schema.to_long_frame(schema.select(frames["reciprocal_orthogonality"], lam=0.5), page.name,
                                           keys)])
last = schema.last_hidden(frames["lewc"])

# %% [markdown]
# Per pair and width, the mean over pairs of the cosine and the relative error of each
# account at the last hidden layer and $\lambda = rac14$, and of the commutativity error and
# the orthogonality ratio over layers 2 to $L$:

# %%
quarter = dict(layer=last, lam=0.25)
measures = {"lewc_cos": quarter, "llfc_cos": quarter, "lewc_rel_err": quarter, "llfc_rel_err": quarter,
            "commutativity_rel_err": {}, "orth_ratio": {}}
compared = pd.concat({(pair, metric): stats.cell_stats(long, metric, method=pair, **at)["mean"]
                      for pair in ("trained", "weight_matched", "untrained") for metric, at in measures.items()
                      if len(schema.select(long, metric, method=pair))}, axis=1).T.rename_axis(["pair", "measure"])
compared.round(4)

# %% [markdown]
# The figure below draws them against width, one line per pair kind:

# %%
where = rf"layer {last}, $\lambda=\frac{{1}}{{4}}$"
page.glue_figure("fig_llfc", plots_width.plot_panels(long, [
    dict(metric="lewc_cos", title=f"cosine to LEWC, {where}", filters=quarter),
    dict(metric="llfc_cos", title=f"cosine to LLFC, {where}", filters=quarter),
    dict(metric="lewc_rel_err", title=f"LEWC error, {where}", filters=quarter, logy=True),
    dict(metric="llfc_rel_err", title=f"LLFC error, {where}", filters=quarter, logy=True),
    dict(metric="commutativity_rel_err", title="commutativity error (layers 2..L)", logy=True),
    dict(metric="orth_ratio", title="orthogonality ratio (layers 2..L)", logy=True)], ncols=3,
    labels={"trained": "unpermuted", "weight_matched": "weight-matched", "untrained": "untrained pair"}))

# %% tags=["remove-cell"]
page.glue_md("setup", describe_study(study, regime))
narrow, wide = compared.columns.min(), compared.columns.max()
page.glue_values(
    last=int(last), n_narrow=int(narrow), n_wide=int(wide),
    trained_lewc_rel_err_wide=compared.loc[("trained", "lewc_rel_err"), wide],
    trained_llfc_rel_err_narrow=compared.loc[("trained", "llfc_rel_err"), narrow],
    trained_llfc_rel_err_wide=compared.loc[("trained", "llfc_rel_err"), wide],
    trained_lewc_cos_wide=compared.loc[("trained", "lewc_cos"), wide],
    trained_llfc_cos_wide=compared.loc[("trained", "llfc_cos"), wide],
    trained_commutativity_rel_err_wide=compared.loc[("trained", "commutativity_rel_err"), wide],
    trained_orth_ratio_wide=compared.loc[("trained", "orth_ratio"), wide],
    weight_matched_llfc_rel_err_narrow=compared.loc[("weight_matched", "llfc_rel_err"), narrow],
    weight_matched_llfc_rel_err_wide=compared.loc[("weight_matched", "llfc_rel_err"), wide],
    weight_matched_lewc_cos_wide=compared.loc[("weight_matched", "lewc_cos"), wide],
    weight_matched_llfc_cos_wide=compared.loc[("weight_matched", "llfc_cos"), wide],
    weight_matched_commutativity_rel_err_wide=compared.loc[("weight_matched", "commutativity_rel_err"), wide],
    weight_matched_orth_ratio_wide=compared.loc[("weight_matched", "orth_ratio"), wide],
    untrained_lewc_cos_wide=compared.loc[("untrained", "lewc_cos"), wide],
    untrained_llfc_cos_wide=compared.loc[("untrained", "llfc_cos"), wide])

# %% [markdown]
# ```{glue:figure} fig_llfc
# :name: fig-llfc-vs-lewc
#
# Cosine (top row) and relative error (middle row) of the
# LEWC and LLFC predictions at the last hidden layer, $\lambda = \tfrac14$, where the two
# predictions differ in direction as well as scale; commutativity error and
# orthogonality ratio, averaged over layers $2..L$ (bottom row). Unpermuted pairs, the
# same pairs after weight matching, and the untrained pairs (seed means; bars: min to
# max over pairs). Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** At the widest width ({glue:text}`n_wide` hidden units),
# layer {glue:text}`last` and $\lambda = \tfrac14$, the unpermuted pairs' merged
# features have a cosine of {glue:text}`trained_lewc_cos_wide:.3f` to the LEWC
# prediction and {glue:text}`trained_llfc_cos_wide:.3f` to the LLFC prediction
# (relative errors {glue:text}`trained_lewc_rel_err_wide:.3f` and
# {glue:text}`trained_llfc_rel_err_wide:.3f`). The untrained pairs, two unrelated
# networks, give {glue:text}`untrained_lewc_cos_wide:.3f` and
# {glue:text}`untrained_llfc_cos_wide:.3f`. Relative errors favour LEWC whenever
# activations shrink, even for unrelated networks (see {doc}`../methods`). So the
# verdict asks for the crossover the paper contrasts: LEWC's error below LLFC's
# without matching, *and* LLFC's below LEWC's after weight matching, where the same
# scale effect would still favour LEWC. Verdict W15
# ({glue:md}`w15_test`): {glue:md}`w15_mark`, {glue:md}`w15_measured`.
#
# The weight-matched pairs have cosines of {glue:text}`weight_matched_lewc_cos_wide:.3f`
# (LEWC) and {glue:text}`weight_matched_llfc_cos_wide:.3f` (LLFC), and LLFC errors of
# {glue:text}`weight_matched_llfc_rel_err_narrow:.3f` at {glue:text}`n_narrow` hidden
# units and {glue:text}`weight_matched_llfc_rel_err_wide:.3f` at the widest, against
# {glue:text}`trained_llfc_rel_err_narrow:.3f` and {glue:text}`trained_llfc_rel_err_wide:.3f`
# unpermuted.
#
# The mechanisms differ as expected if commutativity is low for matched pairs and
# the orthogonality ratio is low for unpermuted wide pairs. The commutativity error
# at the widest width is {glue:text}`weight_matched_commutativity_rel_err_wide:.3f`
# matched against {glue:text}`trained_commutativity_rel_err_wide:.3f` unpermuted. The
# orthogonality ratio is {glue:text}`trained_orth_ratio_wide:.3f` unpermuted against
# {glue:text}`weight_matched_orth_ratio_wide:.3f` matched. Weight matching aligns
# units, so it makes $W^a z^b$ large again by design.

# %% tags=["remove-input"]
page.save(long, regime=regime)
page.glue_verdict("w15", "w15_mark", "w15_measured", "w15_test")
page.provenance()
