# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Low rank: does weight decay make the weights low-rank?
#
# **The paper's claim** (Ito et al., width paper). Both conditions of LEWC, weak
# additivity and reciprocal orthogonality, come from one property of networks
# trained with weight decay: their weight matrices are low-rank, and more so
# relative to their size as the network gets wider.
#
# **How it is measured.** For each weight matrix $W$ (in float64), with singular
# values $\sigma_i$:
# - the *effective rank* $\exp(H(p))$, with $p_i = \sigma_i / \sum_j \sigma_j$ and $H$ the
#   entropy. It is exactly $r$ for $r$ equal non-zero singular values;
# - the *stable rank* $\|W\|_F^2 / \|W\|_2^2$;
# - each divided by $\min(m, n)$: the *relative* rank.
#
# The first layer's $\min(m, n)$ is the input size ({glue:text}`n_inputs` features), not the width, so the
# figure shows only the hidden-to-hidden matrices; all layers are in the CSV. Rank
# is a property of one model, so here the spread and the CSV's `seed` column run
# over every trained model (seed $2p$ for model $a$ of pair $p$, $2p+1$ for model $b$).

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
import numpy as np

from lmcbook import experiments, plots_width, schema, stats, store
from lmcbook.claims.mechanism import claim_r2
from lmcbook.claims.verdicts import FAIL, PASS, mechanism_standard
from lmcbook.page import open_page
from lmcbook.studies import describe_study, regime_table

page, study = open_page("low_rank", globals())

# %% [markdown]
# The ranks are measured on every model of the width sweep, trained and at its
# initialisation. The table gives the relative effective rank of the hidden-to-hidden
# matrices, and the absolute effective rank beside it:

# %%
probes = experiments.probe_sweep(study, page.store)
# means over the hidden-to-hidden matrices and both models; _un: the untrained pairs
table = stats.cell_means(probes["rank"], {"er": "rel_effective_rank", "abs_er": "effective_rank", "sr": "rel_stable_rank"},
                         role="hidden")
table[["er", "er_spread", "er_un", "abs_er"]].round(4)

# %% tags=["remove-cell"]
rank, regime = probes["rank"], probes.regime
page.glue_md("setup", describe_study(study, regime))
page.glue_figure("fig_rank", plots_width.plot_rank(rank))
narrow, wide = table.loc[table.index.min()], table.loc[table.index.max()]
page.glue_values(n_narrow=int(narrow.name), n_wide=int(wide.name), er_narrow=narrow["er"], er_wide=wide["er"],
                 er_wide_spread=wide["er_spread"], er_un_wide=wide["er_un"], sr_narrow=narrow["sr"], sr_wide=wide["sr"],
                 abs_er_narrow=narrow["abs_er"], abs_er_wide=wide["abs_er"])
upd = schema.hidden_to_hidden(regime[regime["metric"].str.startswith("delta_rel")])  # what training added, W − W₀
upd_er, upd_sr = (stats.cell_stats(upd, m)["mean"] for m in ("delta_rel_effective_rank", "delta_rel_stable_rank"))
page.glue_values(upd_er_narrow=upd_er.iloc[0], upd_er_wide=upd_er.iloc[-1], upd_sr_narrow=upd_sr.iloc[0],
                 upd_sr_wide=upd_sr.iloc[-1])
page.glue_values(n_inputs=int(np.prod(store.study_data(study).input_shape)),
                 shrink=schema.select(regime, "decay_shrinkage")["value"].mean())
page.glue_md("regime", regime_table(regime))
# did lower rank help merging?  R2, on the mechanism page's cells (None until that page has run: `lmcbook execute`
# then runs this page again)
mech = page.read_csv_if("mechanism")
r2 = None if mech is None else page.glue_claim(claim_r2(mechanism_standard(mech)), "r2_mark", "r2_measured", "r2_test")
page.choose("r2_reading", "pending" if r2 is None else {PASS: "helped", FAIL: "not"}.get(r2.state, "open"))

# %% [markdown]
# ```{glue:figure} fig_rank
# :name: fig-low-rank
#
# Relative effective rank (top) and relative stable rank (middle) of the
# hidden-to-hidden weight matrices against width, one color per layer (solid:
# trained; dashed: untrained). Bottom: normalised singular values of model $a$'s
# hidden-to-hidden matrices at the widest width. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** The relative effective rank of the hidden-to-hidden
# matrices goes from {glue:text}`er_narrow:.3f` at {glue:text}`n_narrow` hidden units to
# {glue:text}`er_wide:.4f` (spread {glue:text}`er_wide_spread:.4f`) at
# {glue:text}`n_wide`. The untrained matrices stay near
# {glue:text}`er_un_wide:.3f`. In absolute terms a trained matrix at the widest width
# has an effective rank of {glue:text}`abs_er_wide:.1f`, against
# {glue:text}`abs_er_narrow:.1f` at the narrowest. The relative stable rank goes
# from {glue:text}`sr_narrow:.3f` to {glue:text}`sr_wide:.4f`. Verdict W6 (the
# scoreboard's short-regime row, computed by `lmcbook.claims` on this page's CSV;
# {glue:md}`w6_test`): {glue:md}`w6_mark`, {glue:md}`w6_measured`.
#
# **Which rank, of which matrix.** The paper's sentence is about the weights $W$
# themselves, so W6 reads the rank of $W$, by the relative effective rank. By the relative
# stable rank, $W$ also falls with width (above), so on $W$ the verdict depends on the
# measure. In short training $W$ is mostly its random initialisation, so the scoreboard
# also scores, as a diagnostic row the paper does not state, what training *added*,
# $W - W_0$ (W6 (update); {glue:md}`w6_update_test`): {glue:md}`w6_update_mark`,
# {glue:md}`w6_update_measured`. Its relative effective rank goes from
# {glue:text}`upd_er_narrow:.3f` to {glue:text}`upd_er_wide:.3f` and its relative stable
# rank from {glue:text}`upd_sr_narrow:.3f` to {glue:text}`upd_sr_wide:.3f`: the update is
# concentrated in a few directions by the stable rank, whichever way the effective rank
# goes. The row was added after W6's results were known, and the scoreboard marks it so.
#
# **Why the two ranks can disagree.** Over this training schedule, weight decay
# alone (gradients aside) shrinks a weight to {glue:text}`shrink:.2f` of its
# initial size. What remains of the random initialisation keeps a broad bulk of
# singular values, and the effective rank, an entropy over the whole spectrum,
# counts that bulk. The stable rank is dominated by the few largest singular
# values, which training grows. A longer schedule or stronger weight decay removes
# more of the bulk; the paper profile trains for longer.
#
# **Training regime** of these runs:
#
# ```{glue:md} regime
# :format: myst
# ```
#
# The page {doc}`mechanism` trains the same
# networks with stronger weight decay and for longer, shows whether the rank falls as
# weight decay acts, and measures the rank of what training added, $W - W_0$; the
# claims scoreboard scores this claim in both regimes.

# %% [markdown] tags=["when:r2_reading=not"]
# **Lower rank did not help merging.** Across the cells of {doc}`mechanism`, where
# weight decay acts for longer and the rank falls, merged accuracy does not rise with the
# decay integral (R2 {glue:md}`r2_mark`, {glue:md}`r2_test`): {glue:md}`r2_measured`.

# %% [markdown] tags=["when:r2_reading=helped"]
# **Lower rank went with better merging.** Across the cells of {doc}`mechanism`, merged
# accuracy rises as weight decay acts for longer (R2 {glue:md}`r2_mark`,
# {glue:md}`r2_test`): {glue:md}`r2_measured`.

# %% [markdown] tags=["when:r2_reading=open"]
# **Did lower rank help merging?** Across the cells of {doc}`mechanism` the test does not
# decide (R2 {glue:md}`r2_mark`, {glue:md}`r2_test`): {glue:md}`r2_measured`.

# %% [markdown] tags=["when:r2_reading=pending"]
# **Did lower rank help merging?** R2 reads the cells of {doc}`mechanism`, which had not
# run when this page was executed; `lmcbook execute` runs this page again once it has.

# %% tags=["remove-input"]
page.save(low_rank=rank, keys=schema.PROBE_KEYS, regime=regime)
page.glue_verdict("w6", "w6_mark", "w6_measured", "w6_test")
page.glue_verdict("w6_update", "w6_update_mark", "w6_update_measured", "w6_update_test")
page.provenance()
