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
# $q/(2 - q) \approx 0.053$ for large $n$, but not for small $n$.
#
# **Why the overlap cannot be evidence here.** For two independently initialised
# networks the expected Jaccard index equals that chance level *exactly*, by
# symmetry: network $b$'s initialisation is invariant under relabelling its hidden
# units, and training commutes with relabelling, so $b$'s active set is a uniformly
# placed $k$-subset whatever $a$'s is. A trained pair's Jaccard index differs from
# chance only by sampling noise, so this page shows it as a sanity check and reads
# nothing into departures from chance.
#
# **What the mechanism needs instead** is concentration: that a few neurons carry
# most of each layer's activity, more so as width grows. Two measures, per hidden
# layer and model, with $m_i = E[z_i^2]$: the share $\sum_{\text{top } k} m_i / \sum_i m_i$
# held by the top 10% of neurons ($k/n$ if all are equal), and the relative
# participation ratio $(\sum_i m_i)^2 / (n \sum_i m_i^2)$ (1 if all are equal, $1/n$ if one
# neuron carries everything), each beside the untrained pair.

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
from lmcbook import experiments, plots_width, stats
from lmcbook.page import open_page
from lmcbook.studies import describe_study

page, study = open_page("neuron_overlap", globals())

# %% [markdown]
# The second moments are measured on every trained pair of the width sweep and on the
# same pairs untrained. The table gives the overlap and the two concentration
# measures, each averaged over the hidden layers:

# %%
probes = experiments.probe_sweep(study, page.store)
measures = {"jac": "jaccard", "chance": "jaccard_chance", "top_share": "top_share",
            "participation_ratio": "participation_ratio"}  # column: metric
table = stats.cell_means(probes["neuron_moments"], measures)
table.drop(columns="chance_un").round(4)  # means over the hidden layers; _un: the untrained pairs

# %% [markdown]
# The figure below draws them per hidden layer against width:

# %%
page.glue_figure("fig_overlap", plots_width.plot_neuron_overlap(probes["neuron_moments"]))

# %% tags=["remove-cell"]
page.glue_md("setup", describe_study(study, probes.regime))
narrow, wide = table.iloc[0], table.iloc[-1]  # the narrowest and the widest width (_un: the untrained pairs)
page.glue_values(n_narrow=int(narrow.name), n_wide=int(wide.name), jac_narrow=narrow["jac"], jac_wide=wide["jac"],
                 jac_wide_spread=wide["jac_spread"], jac_un_narrow=narrow["jac_un"], jac_un_wide=wide["jac_un"],
                 chance_narrow=narrow["chance"], chance_wide=wide["chance"], top_share_narrow=narrow["top_share"],
                 top_share_wide=wide["top_share"], top_share_un_narrow=narrow["top_share_un"],
                 top_share_un_wide=wide["top_share_un"], participation_ratio_narrow=narrow["participation_ratio"],
                 participation_ratio_wide=wide["participation_ratio"],
                 participation_ratio_un_narrow=narrow["participation_ratio_un"],
                 participation_ratio_un_wide=wide["participation_ratio_un"])
page.glue_markdown(top_share_trend=stats.trend(stats.spearman(table.index, table["top_share"]), "rises", "falls"),
                   participation_ratio_trend=stats.trend(stats.spearman(table.index, table["participation_ratio"]),
                                                         "rises", "falls"))
# against the untrained pairs, at every width: does training concentrate the activity?
more = (table["top_share"] > table["top_share_un"]) & (table["participation_ratio"] < table["participation_ratio_un"])
less = (table["top_share"] < table["top_share_un"]) & (table["participation_ratio"] > table["participation_ratio_un"])
page.choose("concentration", "more" if more.all() else "less" if less.all() else "mixed")

# %% [markdown]
# ```{glue:figure} fig_overlap
# :name: fig-neuron-overlap
#
# Top: Jaccard index of the two models' top-10% neurons per hidden layer against
# width, with the exact chance level (dotted) and untrained pairs (dashed). Middle:
# the share of $\sum_i E[z_i^2]$ held by the top 10% of neurons, with equal activity
# (dotted). Bottom:
# the root second moments of the last hidden layer's neurons at the widest width,
# sorted and divided by the largest. Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** Averaged over hidden layers, the Jaccard index is
# {glue:text}`jac_narrow:.3f` at {glue:text}`n_narrow` hidden units (chance
# {glue:text}`chance_narrow:.3f`) and {glue:text}`jac_wide:.3f` (spread
# {glue:text}`jac_wide_spread:.3f`) at {glue:text}`n_wide` (chance
# {glue:text}`chance_wide:.3f`). The untrained pairs give
# {glue:text}`jac_un_narrow:.3f` and {glue:text}`jac_un_wide:.3f`. By the symmetry
# argument above, these differ from chance only by sampling noise.
#
# **Concentration.** The share of activity held by the top 10% of neurons (mean over
# hidden layers and the two models) is {glue:text}`top_share_narrow:.3f` at
# {glue:text}`n_narrow` hidden units and {glue:text}`top_share_wide:.3f` at
# {glue:text}`n_wide`, against {glue:text}`top_share_un_narrow:.3f` and
# {glue:text}`top_share_un_wide:.3f` for the untrained pairs; across widths it
# {glue:md}`top_share_trend`. The relative participation ratio is
# {glue:text}`participation_ratio_narrow:.3f` and
# {glue:text}`participation_ratio_wide:.3f` (untrained
# {glue:text}`participation_ratio_un_narrow:.3f` and
# {glue:text}`participation_ratio_un_wide:.3f`); it {glue:md}`participation_ratio_trend`
# with width. The right panel shows the sorted second moments at the widest width.

# %% [markdown] tags=["when:concentration=less"]
# **Against the paper.** At every width the trained networks spread their activity *more
# evenly* than the untrained ones: a smaller top-10% share and a larger participation
# ratio. In these runs training does not make a few neurons carry most of the activity,
# which is the concentration the mechanism needs.

# %% [markdown] tags=["when:concentration=more"]
# At every width the trained networks concentrate their activity more than the untrained
# ones: a larger top-10% share and a smaller participation ratio, as the mechanism needs.

# %% [markdown] tags=["when:concentration=mixed"]
# Against the untrained pairs the two measures do not agree at every width on whether
# training concentrates the activity, so these runs do not show the concentration the
# mechanism needs.

# %% tags=["remove-input"]
page.save(neuron_overlap=probes["neuron_moments"], keys=["width", "hidden_units", "depth", "layer", "method"], regime=probes.regime)
page.provenance()
