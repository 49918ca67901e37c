# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Neuron overlap: do the two networks use different neurons?
#
# **The paper's claim** (Ito et al., width paper). In a wide network trained with
# weight decay, a few neurons carry most of the activity. Two independently trained
# networks pick their active neurons almost independently of each other, so the two
# sets barely overlap. This is what makes the parents' pre-activations rarely
# conflict (weak additivity) and their features fall into each other's null spaces
# (reciprocal orthogonality).
#
# **How it is measured.** For every hidden neuron $i$, the root second moment
# $\sqrt{E[z_i^2]}$ of its post-activation over the test split. Each model's
# *active set* is its top $k = \max(1, \mathrm{round}(q n))$ neurons, with $q = 10\%$. The
# overlap is the Jaccard index $|A \cap B| / |A \cup B|$ of the two sets. It stands
# beside its exact chance level for two random $k$-subsets of $n$ neurons:
# $E[J] = \sum_i P(i)\, i/(2k - i)$ with $i$ hypergeometric. That level tends to
# $q/(2 - q) \approx 0.053$ for large $n$, but not for small $n$. Note that neuron $i$ of
# network $a$ and neuron $i$ of network $b$ are unrelated unless training made them
# so: a Jaccard index at chance means the two active sets are placed independently.

# %% tags=["parameters"]
profile = "quick"
dataset = None
data_root = None
arch = None
base_width = None
widths = None
depth = None
bias = None
weight_decay = None
epochs = None
seeds = None
device = None
lams = None

# %%
import lmcbook as lb
from lmcbook import book, claims, experiments, plots

params = dict(dataset=dataset, data_root=data_root, arch=arch, base_width=base_width, widths=widths, depth=depth,
              bias=bias, weight_decay=weight_decay, epochs=epochs, seeds=seeds, device=device, lams=lams)
study = lb.profiles.width_study(profile, **params)
page = book.Page("neuron_overlap", profile, params, study)
frames, run_ids = experiments.probe_frames(study, page.store)
page.use(run_ids)
regime = experiments.regime_frame(study, page.store)
nm = frames["neuron_moments"]

# %% tags=["hide-input"]
page.glue_md("setup", book.describe_study(study, regime))
page.glue_figure("fig_overlap", plots.plot_neuron_overlap(nm))
jac = claims.cell_stats(nm, "jaccard", method="trained")  # mean over hidden layers
chance = claims.cell_stats(nm, "jaccard_chance", method="trained")
jac_un = claims.cell_stats(nm, "jaccard", method="untrained")
table = jac.join(chance, rsuffix="_chance").join(jac_un, rsuffix="_untrained")[
    ["mean", "lo", "hi", "mean_chance", "mean_untrained"]]
narrow, wide = jac.index.min(), jac.index.max()
page.glue("n_narrow", int(narrow))
page.glue("n_wide", int(wide))
for key, frame in (("jac", jac), ("chance", chance), ("jac_un", jac_un)):
    page.glue(f"{key}_narrow", frame.loc[narrow, "mean"])
    page.glue(f"{key}_wide", frame.loc[wide, "mean"])
page.glue("jac_wide_spread", jac.loc[wide, "spread"])
above = (jac["mean"] - chance["mean"] > jac["spread"]).sum()
page.glue("n_above", int(above))
page.glue("n_widths", len(table))
table.round(4)

# %% [markdown]
# ```{glue:figure} fig_overlap
# :name: fig-neuron-overlap
#
# Left: Jaccard index of the two models' top-10% neurons per hidden layer against
# width, with the exact chance level (dotted) and untrained pairs (dashed). Right:
# the root second moments of the last hidden layer's neurons at the widest width,
# sorted and divided by the largest. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** Averaged over hidden layers, the Jaccard index is
# {glue:text}`jac_narrow:.3f` at {glue:text}`n_narrow` hidden units (chance
# {glue:text}`chance_narrow:.3f`) and {glue:text}`jac_wide:.3f` (spread
# {glue:text}`jac_wide_spread:.3f`) at {glue:text}`n_wide` (chance
# {glue:text}`chance_wide:.3f`). The untrained pairs give
# {glue:text}`jac_un_narrow:.3f` and {glue:text}`jac_un_wide:.3f`. At
# {glue:text}`n_above` of the {glue:text}`n_widths` widths the trained overlap
# exceeds chance by more than its spread over seeds. The right panel shows how
# concentrated the activity is: in trained networks the second moments fall off
# far faster with rank than in untrained ones.

# %%
page.save(claims.to_long_frame(nm, "neuron_overlap", ["width", "hidden_units", "depth", "layer", "method"]), regime)
page.provenance()
