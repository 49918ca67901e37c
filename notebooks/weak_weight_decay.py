# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Weak weight decay: does the width effect need weight decay?
#
# **The paper's claim** (Ito et al., width paper). The width effect rests on
# low-rank weights, and the low rank comes from weight decay. With weak weight
# decay, wide networks no longer merge well, and the LEWC signatures fade.
#
# **What this page does.** It trains the width sweep a second time. The only
# change is the weight decay: the weak value (the paper uses $10^{-4}$) against the
# sweep's own. Everything else is the same: data, widths, seeds and schedule. It
# compares the two on the quantities of the earlier pages. It reuses the probes of
# those pages; the untrained baseline is shared, because the two sweeps start from
# the same initialisations.

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
from lmcbook.studies import describe_study, regime_table

page, study = open_page("weak_weight_decay", globals())

# %% [markdown]
# The sweep is trained (or loaded from the run store) at the two weight decays, from
# the same seeds, and each pair is merged and probed as on the earlier pages:

# %%
sweeps = [(s.weight_decay, experiments.pair_frames(s, page.store).summary, experiments.probe_frames(s, page.store),
           experiments.regime_frame(s, page.store)) for s in (study, study.weak())]
# the page's CSV, which the figure and the table read: per weight decay the pair summaries, the LEWC error at the last
# hidden layer and λ = ½, and the relative effective rank of the hidden-to-hidden matrices (trained pairs)
parts = []
for wd, summary, probes, _ in sweeps:
    last = schema.last_hidden(probes["lewc"])
    rank = schema.select(probes["rank"], "rel_effective_rank", method="trained")
    parts.append(schema.concat([
        schema.to_long(summary, page.name, ["acc_merged", "acc_endpoints", "acc_ensemble", "loss_barrier_cal_mid",
                                            "loss_barrier_mid", "logit_norm_ratio", "tau_ratio"],
                       ["width", "hidden_units", "depth"]),
        schema.to_long_frame(schema.select(probes["lewc"], "lewc_rel_err", lam=0.5, layer=last, method="trained"),
                             page.name, ["width", "hidden_units", "depth", "layer", "lam"]),
        schema.to_long_frame(rank[rank["role"] == "hidden"], page.name, ["width", "hidden_units", "depth", "layer"]),
    ]).assign(weight_decay=wd))
long = schema.concat(parts)

# %% [markdown]
# The figure below draws six of its measures against width, one line per weight decay:

# %%
L = study.layers
wds = {"strong": study.weight_decay, "weak": study.weak_weight_decay}
label = {wd: f"weight decay {wd:g}" for wd in wds.values()}
page.glue_figure("fig_wd", plots_width.plot_panels(long, [
    dict(metric="acc_merged", title=r"merged accuracy, $\lambda=\frac{1}{2}$"),
    dict(metric="loss_barrier_cal_mid", title="calibrated midpoint loss barrier (nats)"),
    dict(metric="lewc_rel_err", title=rf"LEWC relative error, layer {last}, $\lambda=\frac{{1}}{{2}}$"),
    dict(metric="rel_effective_rank", title="relative effective rank (hidden-to-hidden)"),
    dict(metric="logit_norm_ratio", title="logit norm ratio", hline=(2.0 ** (1 - L), "LEWC: $2^{1-L}$"), logy=True),
    dict(metric="acc_endpoints", title="endpoint accuracy (mean of a, b)")], group="weight_decay", labels=label))

# %% tags=["remove-cell"]
regime = pd.concat([r for *_, r in sweeps], ignore_index=True)
page.glue_md("setup", describe_study(study, regime))
page.glue_md("regime", regime_table(regime))
units = sorted(long["hidden_units"].unique())
wide, wide2, narrow = units[-1], units[-2] if len(units) > 1 else units[-1], units[0]  # _0: the widest, _1: the next


def at(metric: str, strength: str, u: float, col: str = "mean") -> float:
    """A measure's mean (or spread) over pairs at ``strength``'s weight decay and ``u`` hidden units."""
    return stats.cell_stats(long, metric, weight_decay=wds[strength]).loc[u, col]


gap = at("acc_merged", "strong", wide) - at("acc_merged", "weak", wide)
page.glue_values(
    norm_pred=2.0 ** (1 - L), wd_strong=wds["strong"], wd_weak=wds["weak"], n_wide=int(wide), n_wide2=int(wide2),
    n_narrow=int(narrow), gap=gap,
    shrink_strong=schema.select(regime, "decay_shrinkage", weight_decay=wds["strong"])["value"].mean(),
    shrink_weak=schema.select(regime, "decay_shrinkage", weight_decay=wds["weak"])["value"].mean(),
    acc_merged_strong_0=at("acc_merged", "strong", wide), acc_merged_strong_1=at("acc_merged", "strong", wide2),
    acc_merged_strong_0_spread=at("acc_merged", "strong", wide, "spread"),
    acc_merged_weak_0=at("acc_merged", "weak", wide), acc_merged_weak_1=at("acc_merged", "weak", wide2),
    acc_merged_weak_0_spread=at("acc_merged", "weak", wide, "spread"),
    acc_merged_weak_narrow=at("acc_merged", "weak", narrow),
    acc_endpoints_strong_0=at("acc_endpoints", "strong", wide), acc_endpoints_weak_0=at("acc_endpoints", "weak", wide),
    logit_norm_ratio_strong_0=at("logit_norm_ratio", "strong", wide),
    logit_norm_ratio_strong_1=at("logit_norm_ratio", "strong", wide2),
    logit_norm_ratio_weak_0=at("logit_norm_ratio", "weak", wide),
    logit_norm_ratio_weak_1=at("logit_norm_ratio", "weak", wide2),
    lewc_rel_err_strong_0=at("lewc_rel_err", "strong", wide), lewc_rel_err_weak_0=at("lewc_rel_err", "weak", wide),
    rel_effective_rank_strong_0=at("rel_effective_rank", "strong", wide),
    rel_effective_rank_weak_0=at("rel_effective_rank", "weak", wide))
page.choose("weak_merges", bool(gap <= 0))

# %% [markdown]
# Seed means per width of each quantity, at the sweep's weight decay (*strong*) and at
# the weak one:

# %%
metrics = ["acc_merged", "logit_norm_ratio", "loss_barrier_cal_mid", "lewc_rel_err", "rel_effective_rank",
           "acc_endpoints"]
pd.DataFrame({(metric, name): stats.cell_stats(long, metric, weight_decay=wd)["mean"]
              for name, wd in wds.items() for metric in metrics}).round(4)

# %% [markdown]
# ```{glue:figure} fig_wd
# :name: fig-weak-weight-decay
#
# The width sweep at weight decay {glue:text}`wd_strong` and {glue:text}`wd_weak`
# (seed means; bars: min to max over pairs). Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** At the widest width ({glue:text}`n_wide` hidden units)
# the merged model's accuracy is {glue:text}`acc_merged_strong_0:.3f` (spread {glue:text}`acc_merged_strong_0_spread:.3f`)
# at weight decay {glue:text}`wd_strong` against {glue:text}`acc_merged_weak_0:.3f`
# (spread {glue:text}`acc_merged_weak_0_spread:.3f`) at {glue:text}`wd_weak`, a gap of
# {glue:text}`gap:.3f`. The scoreboard does not read W7 here: weight decay has not acted
# in these runs (below), so its W7 rows read {doc}`mechanism`'s decay arm and its longest
# runs, at the widest width where a weight decay has acted. At {glue:text}`n_wide2` hidden units the two give
# {glue:text}`acc_merged_strong_1:.3f` and {glue:text}`acc_merged_weak_1:.3f`.
#
# The logit norm ratio at the widest width is {glue:text}`logit_norm_ratio_strong_0:.3f`
# with the strong and {glue:text}`logit_norm_ratio_weak_0:.3f` with the weak weight
# decay, against the LEWC prediction {glue:text}`norm_pred:.3f`. At
# {glue:text}`n_wide2` hidden units they are {glue:text}`logit_norm_ratio_strong_1:.3f`
# and {glue:text}`logit_norm_ratio_weak_1:.3f`. The LEWC relative error at the last
# hidden layer is {glue:text}`lewc_rel_err_strong_0:.3f` against
# {glue:text}`lewc_rel_err_weak_0:.3f`, and the relative effective rank is
# {glue:text}`rel_effective_rank_strong_0:.3f` against
# {glue:text}`rel_effective_rank_weak_0:.3f`. The endpoints themselves reach
# {glue:text}`acc_endpoints_strong_0:.3f` and {glue:text}`acc_endpoints_weak_0:.3f`.
#
# **How much weight decay acts here.** Over this schedule, weight decay alone
# (gradients aside) shrinks a weight to {glue:text}`shrink_strong:.2f` of its size at
# weight decay {glue:text}`wd_strong`, and to {glue:text}`shrink_weak:.3f` at
# {glue:text}`wd_weak`. The closer the first number is to 1, the less this
# comparison can say about the paper's claim, which concerns networks trained until
# weight decay has reshaped their spectra. The low-rank page shows how far the
# strong setting gets.
#
# **Training regime** of these runs:
#
# ```{glue:md} regime
# :format: myst
# ```
#
# The page {doc}`mechanism` repeats this
# comparison on longer runs and with stronger weight decay, where weight decay has
# acted, and the claims scoreboard scores this claim in both regimes.

# %% [markdown] tags=["when:weak_merges=true"]
# **Against the paper.** Here the weak weight decay merges as well as the strong one or
# better, and the width effect is there with almost no weight decay: with the weak weight decay the merged
# model goes from {glue:text}`acc_merged_weak_narrow:.3f` at {glue:text}`n_narrow` hidden
# units to {glue:text}`acc_merged_weak_0:.3f` at {glue:text}`n_wide`. In these runs weak
# weight decay does not break merging without permutations.

# %% [markdown] tags=["when:weak_merges=false"]
# The strong weight decay merges better here by the gap above, in runs where weight decay
# has barely acted; W7, on {doc}`mechanism`, reads the comparison where it has. With the weak weight decay the merged model goes from
# {glue:text}`acc_merged_weak_narrow:.3f` at {glue:text}`n_narrow` hidden units to
# {glue:text}`acc_merged_weak_0:.3f` at {glue:text}`n_wide`.

# %% tags=["remove-input"]
page.save(long, regime=regime)
page.provenance()
