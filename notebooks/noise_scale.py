# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Merging gain against the effective noise scale
#
# **The paper's claim** (Zhang et al., noise paper). Train a network, spawn two
# copies at step $k$, train each to the end with its own batch order, and average
# them. The merged model can beat its parents, and by how much depends on the
# optimizer's noise. Learning rate $\eta$, batch size $B$ and momentum $\mu$ act together
# through the effective noise scale $S = \eta / (B(1-\mu))$:
#
# - the merging gain is **non-monotonic** in $S$, with an optimum in between;
# - plotted against $\eta$ for each $B$, or against $B$ for each $\eta$, the curves do not
#   line up; plotted against $S$, they **collapse** onto one curve.
#
# **The protocol** (spawn-and-merge, after Frankle et al. 2020; see the methods page).
#
# - A *parent* trains with the full schedule and stops at step $k$.
# - Its two *children* inherit the weights, the momentum buffers and the schedule
#   position. They train to the end with different batch orders and are merged at
#   $\lambda = \tfrac12$.
# - **Merging gain** = acc(merged) − mean(acc of the two children), in points on the
#   test set. Every run takes the same number of steps whatever its batch size, as in
#   the paper, except that a cell whose children miss the convergence rule below may be
#   trained again for longer (`max_steps`); its rows then come from the longer runs, so
#   S and training length are no longer independent across such cells.
#
# **The data set.** The digits test split has {glue:text}`digits_test` images, so one
# image is {glue:text}`digits_point:.2f` points, while the gains the paper reports are
# about a point. MNIST-1D (Greydanus 2020) is generated offline at any size, and the
# quick profile uses it (the smoke profile trains on digits, the paper profile on
# CIFAR-10). This build ran the {glue:text}`profile_name` profile on
# {glue:text}`data_name`, whose test split has {glue:text}`n_test` examples, so one example is
# {glue:text}`signal_point:.3f` points. The MLPs here reach only {glue:text}`acc_lo:.2f` to
# {glue:text}`acc_hi:.2f` test accuracy on it (cell means), and the weaker child of a pair
# reaches {glue:text}`train_lo:.3f` to {glue:text}`train_hi:.3f` training accuracy:
# {glue:text}`n_short_cells` of the {glue:text}`n_cells` grid cells end below the
# {glue:text}`converged_bar:.2f` that the mechanism rows ask of every network they read.
# The lowest is {glue:md}`weakest_cell`. A cell can miss because it had too few steps or
# because its training was unstable, and this build cannot tell which; either way its
# gain mixes merging with how far training got. So the noise rows read a cell only
# when the weaker child of every pair reached {glue:text}`noise_bar:.2f` training accuracy
# (the convergence rule, set after the noise study's first results and committed in
# `lmcbook/claims.py` before these pages ran under it), within
# {glue:md}`lengths_text`: {glue:text}`n_excluded` of the {glue:text}`n_cells` grid
# cells miss it. They stay in the figures, as grey crosses, and are left out of N1 and N2,
# which say how many they left out.

# %% tags=["parameters"]
profile = "quick"  # and NoiseStudy's fields (lmcbook.profiles); None keeps the profile's value
dataset = data_root = download = base_width = width = depth = bias = steps = max_steps = warmup = lrs = batch_sizes = None
momentum = weight_decay = spawn_fraction = spawn_fractions = row_batch_size = momenta = component_lrs = weight_decays = None
component_lr = pair_lrs = finetune_steps = finetune_lrs = alphas = ties_keep = seeds = device = scheduler = show_references = None

# %% tags=["remove-cell"]
import numpy as np
import pandas as pd

from lmcbook import claims, experiments, plots, reference, schema
from lmcbook.bench import BOOK_TARGETS
from lmcbook.data import DATASET_SHORT
from lmcbook.data import load as load_data
from lmcbook.page import claims_markdown, describe_noise, noise_reference_facts, open_page

page, study = open_page("noise_scale", globals())

# %% [markdown]
# Every cell of the $\eta \times B$ grid is trained as spawn-and-merge pairs; the
# convergence rule marks the cells it excludes, and the converged cells' mean gains are
# fitted against $\log_{10} S$:

# %%
grid = claims.mark_kept(experiments.noise_frame(study, study.grid_cells(), page.store), ["lr", "batch_size"])
fit_s = claims.cell_mean_fit(grid, ["lr", "batch_size"])  # on the converged cells' means, as N2 reads them

# %% tags=["remove-cell"]
cells = claims.noise_cells(grid, ["lr", "batch_size"])
n_ok = int(cells["kept"].sum())
per_cell = grid.groupby(["lr", "batch_size"])
train_acc, cell_means = per_cell["train_acc_min"].mean(), per_cell["gain"].mean()
s_of = per_cell["noise_scale"].first()
page.glue_figure("fig_grid", plots.plot_noise_grid(grid, fit_s))
page.glue_md("fit_caption", "dashed: a quadratic fit on $\\log_{10} S$ over the converged cells" if fit_s is not None
             else f"no fit: fewer than {claims.NOISE_MIN_CELLS} cells met the rule")
longer = int((per_cell["train_steps"].first() > study.steps).sum())
page.glue_md("lengths_text", f"the study's {study.steps} steps" if len(study.lengths()) == 1 else
             f"{study.steps} steps, or for a cell that missed it at first {', '.join(map(str, study.lengths()[1:]))} "
             f"steps in turn ({longer} cells trained longer)")
page.glue_md("setup", describe_noise(study))
data = experiments.study_data(study)
digits_test = len(load_data("digits", device="cpu").y_test)
model = study.spec(study.grid_cells()[0], 0).model
page.glue_values(
    noise_bar=claims.NOISE_CONVERGED_TRAIN_ACC, n_excluded=len(cells) - n_ok, n_converged=n_ok, n_pairs=study.seeds,
    n_test=len(data.y_test), signal_point=100 / len(data.y_test), digits_test=digits_test,
    digits_point=100 / digits_test, units=model.channels, data_name=DATASET_SHORT[study.dataset],
    bias_word="Biased" if model.bias else "Bias-free", L=study.depth, steps=study.steps, n_lrs=len(study.lrs),
    n_bs=len(study.batch_sizes), mu=study.momentum, wd=study.weight_decay, k_grid=100 * study.spawn_fraction,
    acc_lo=per_cell["acc_endpoints"].mean().min(), acc_hi=per_cell["acc_endpoints"].mean().max(),
    train_lo=train_acc.min(), train_hi=train_acc.max(), converged_bar=claims.CONVERGED_TRAIN_ACC,
    n_short_cells=int((train_acc < claims.CONVERGED_TRAIN_ACC).sum()), n_cells=len(train_acc),
    budget_min=BOOK_TARGETS["cold_s"] / 60, profile_name=page.profile, min_pairs=claims.MIN_PAIRS,
    s_lo=grid["noise_scale"].min(), s_hi=grid["noise_scale"].max(),
    decades=np.log10(grid["noise_scale"].max() / grid["noise_scale"].min()),
    gain_min=100 * cell_means.min(), gain_max=100 * cell_means.max(),
    best_cell_gain=100 * cell_means.max(), best_cell_s=s_of[cell_means.idxmax()])
weak_lr, weak_b = train_acc.idxmin()
weak_s = s_of[(weak_lr, weak_b)]
page.glue_md("weakest_cell", f"η {weak_lr:g} at B {weak_b:g} (S = {weak_s:.2e}"
             + (", the largest S of the grid)" if np.isclose(weak_s, grid["noise_scale"].max()) else ")"))
page.choose("fit", "none" if fit_s is None else "interior" if fit_s["interior"] else
            "minimum" if fit_s["c2"] > 0 else "edge")
page.glue_values(min_cells=claims.NOISE_MIN_CELLS, fit_vertex_s=np.nan if fit_s is None else 10 ** fit_s["vertex"],
                 fit_vertex_gain=np.nan if fit_s is None else 100 * fit_s["fit_vertex"])
page.glue_md("best_cell_converged", "that converged" if bool(cells.loc[cell_means.idxmax(), "converged"]) else
             "excluded by the convergence rule")

# %% [markdown]
# **Setup.** {glue:text}`bias_word` ReLU MLPs with $L =$ {glue:text}`L` layers and
# {glue:text}`units` hidden units on {glue:text}`data_name`, {glue:text}`steps` SGD steps per run
# (momentum {glue:text}`mu`, weight decay {glue:text}`wd`, linear warm-up then decay).
# The grid has {glue:text}`n_lrs` peak learning rates × {glue:text}`n_bs` batch sizes,
# with children spawned at {glue:text}`k_grid:.0f`% of training. $S$ spans
# {glue:text}`s_lo:.2e` to {glue:text}`s_hi:.2e` ({glue:text}`decades:.1f` decades).
# There are {glue:text}`n_pairs` spawn-and-merge pairs per cell, each from its own
# parent. The test split has {glue:text}`n_test` examples.
#
# **Settings that differ from the paper, and why.** At the quick profile the network is
# small and the schedule short so that the whole quick book runs within its
# {glue:text}`budget_min:.0f`-minute budget on two CPU cores; the paper profile trains
# larger networks for longer, and the reference run below trains each cell until its
# children meet the convergence rule or reach a step cap. Every run takes
# {glue:md}`lengths_text`, so cells end differently trained: the children's mean
# accuracy ranges from
# {glue:text}`acc_lo:.3f` to {glue:text}`acc_hi:.3f` across cells. The grid and the
# spawn points were set after a small pilot run.
#
# ```{glue:figure} fig_grid
# :name: fig-noise-grid
#
# Merging gain against $\eta$ (one line per $B$), against $B$ (one line per $\eta$), and
# against $S$ (every pair, colored by $B$; grey crosses: cells that missed the
# convergence rule; {glue:md}`fit_caption`).
# Lines: pair means; bars: min to max over pairs. Trained: {glue:md}`setup`; momentum
# {glue:text}`mu`, weight decay {glue:text}`wd`, spawned at {glue:text}`k_grid:.0f`%.
# ```
#
# **What this run shows.** Over all cells, converged or not, the cell means of the gain
# range from {glue:text}`gain_min:.2f` to {glue:text}`gain_max:.2f` points; the largest,
# {glue:text}`best_cell_gain:.2f` points at $S =$ {glue:text}`best_cell_s:.2e`, is in a
# cell {glue:md}`best_cell_converged`.
#
# - **Optimum.** Verdict N1 ({glue:md}`n1_test`): {glue:md}`n1_mark`, {glue:md}`n1_measured`.
#   Choosing the best cell on one half of the pairs and reading it on the other keeps the
#   winner's curse out of the reading.
# - **Collapse.** Verdict N2 ({glue:md}`n2_test`): {glue:md}`n2_mark`, {glue:md}`n2_measured`.

# %% [markdown] tags=["when:fit=none"]
# **The fit.** With {glue:text}`n_converged` converged cell(s), fewer than
# {glue:text}`min_cells` or fewer than 3 values of $S$, no fit is read.

# %% [markdown] tags=["when:fit=interior"]
# **The fit.** Over the {glue:text}`n_converged` converged cells' means, a quadratic fit
# on $\log_{10} S$ has its vertex at $S^* =$ {glue:text}`fit_vertex_s:.2e`, inside their
# range, where the fitted gain is {glue:text}`fit_vertex_gain:.2f` points.

# %% [markdown] tags=["when:fit=minimum"]
# **The fit.** Over the {glue:text}`n_converged` converged cells' means, a quadratic fit
# on $\log_{10} S$ curves upwards: it has a minimum, not an optimum, at
# $S =$ {glue:text}`fit_vertex_s:.2e`, where the fitted gain is
# {glue:text}`fit_vertex_gain:.2f` points.

# %% [markdown] tags=["when:fit=edge"]
# **The fit.** Over the {glue:text}`n_converged` converged cells' means, a quadratic fit
# on $\log_{10} S$ has its maximum at $S =$ {glue:text}`fit_vertex_s:.2e`, outside the range
# of the converged cells' $S$; the fitted gain there is {glue:text}`fit_vertex_gain:.2f` points.

# %% tags=["remove-cell"]
ref_blocks, ref_rows, ref_figure = [], {}, None
for name, (frame, prov) in (page.references() if study.show_references else {}).items():
    ref = claims.mark_kept(claims.noise_pairs(frame[frame["method"] == "grid"], ["lr", "batch_size"]),
                                ["lr", "batch_size"])
    ref_figure = ref_figure or plots.plot_noise_grid(ref, claims.cell_mean_fit(ref, ["lr", "batch_size"]))
    ref_rows[name] = claims.page_claims(page.name, frame)
    for r in ref_rows[name]:
        r.source = name
        page.glue_claim(r)
    stale = reference.stale_note(prov)
    ref_blocks.append(
        f"**Reference** {reference.describe(name, prov)}." + (f" **{stale}**" if stale else "")
        + f" Its grid: η ∈ {{{', '.join(f'{v:g}' for v in sorted(ref['lr'].unique()))}}} × B ∈ "
        f"{{{', '.join(f'{v:g}' for v in sorted(ref['batch_size'].unique()))}}}, "
        f"{int(ref.groupby(['lr', 'batch_size'])['pair'].nunique().min())} pairs per cell. "
        + noise_reference_facts(frame, ref_rows[name], 100 / len(data.y_test))
        + f"\n\n{claims_markdown(ref_rows[name])}")
page.glue_md("ref_figure_name", f"`{next(iter(ref_rows))}`" if ref_rows else "(none)")
page.glue_figure("fig_grid_ref", ref_figure or plots.placeholder("No reference run of this page is committed."))
page.glue_md("noise_references", "\n\n".join(ref_blocks) or "No reference run of this page is committed.")
page.glue_md("ref_summary", "; ".join(f"`{n}`: " + ", ".join(f"{r.id} {r.mark}" for r in rows)
                                      for n, rows in ref_rows.items()) or "none is committed")

# %% [markdown]
# ## Trained to the rule: the reference run
#
# In this build's grid {glue:text}`n_excluded` of the {glue:text}`n_cells` cells miss the
# convergence rule, and each cell has {glue:text}`n_pairs` pair(s); an interval reads at
# least {glue:text}`min_pairs` (N1: {glue:text}`min_pairs` on each half of the pairs). A
# *reference run*, committed under
# `results/` with its provenance and regenerated with the command it names, trains each
# cell of a grid until its children meet the rule or reach the step cap, with enough
# pairs for the intervals; cells that still miss the rule are excluded, as here. Its
# verdicts are in the scoreboard beside this build's ({glue:md}`ref_summary`). The tests
# that read it were fixed, and committed, before it ran (the scoreboard marks its rows so).
#
# ```{glue:md} noise_references
# :format: myst
# ```
#
# ```{glue:figure} fig_grid_ref
# :name: fig-noise-grid-reference
#
# The reference run's grid, drawn as above: grey crosses are the cells that missed the
# convergence rule; dashed, the quadratic fit on the converged cells' means. Trained: as
# the reference run {glue:md}`ref_figure_name` records above (its provenance).
# ```

# %% [markdown]
# ## The spawn point
#
# The spawn point changes the picture, so this section sweeps it over
# {glue:md}`spawn_points` of training. To fit the time budget it does so on one row
# of the grid, $B =$ {glue:text}`row_b`, and on one row $S$ is proportional to $\eta$, so the
# row can show where the optimum sits but cannot test the collapse.

# %%
spawn = claims.mark_kept(experiments.noise_frame(study, study.spawn_cells(), page.store),
                              ["lr", "batch_size", "spawn_fraction"])

# %% tags=["hide-input"]
rows = []
for f, g in spawn.groupby("spawn_fraction"):
    best = g.groupby("noise_scale")["gain"].mean()
    conv = claims.noise_cells(g, ["lr", "batch_size"])["kept"]
    rows.append({"spawn at": f"{f:.0%}", "cells converged": f"{int(conv.sum())} of {len(conv)}",
                 "mean gain (points)": 100 * g["gain"].mean(),
                 "best S on the row": best.idxmax(), "gain there (points)": 100 * best.max(),
                 "best S interior (cell means)": bool(best.index.min() < best.idxmax() < best.index.max()),
                 "endpoint acc": g["acc_endpoints"].mean()})
    page.glue(f"spawn_gain_{int(round(100 * f))}", 100 * g["gain"].mean())
page.glue_figure("fig_spawn", plots.plot_spawn_points(spawn))
page.glue("row_b", study.row_batch_size)
page.glue_md("spawn_points", ", ".join(f"{100 * f:.0f}%" for f in study.spawn_fractions))
pd.DataFrame(rows).set_index("spawn at").round(4)

# %% [markdown]
# ```{glue:figure} fig_spawn
# :name: fig-spawn-point
#
# Left: merging gain against $S$ on the row $B =$ {glue:text}`row_b`, one line per spawn
# point. Right: the children's own accuracy. Trained: {glue:md}`setup`.
# ```
#
# The table above gives, for each spawn point, how many cells of the row met the
# convergence rule, the mean gain over the row, the best $S$ on the row and the gain
# there, whether that best S lies strictly inside the row (on cell means), and the children's
# mean accuracy. No verdict reads this row: it is descriptive, and its unconverged cells
# are in it.

# %% tags=["remove-input"]
keys = ["lr", "batch_size", "momentum", "spawn_fraction", "method"]
metrics = ["gain", "gain_best", "loss_gain", "noise_scale", "noise_scale_sq", "acc_endpoints", "acc_merged",
           "train_acc_min", "train_steps", "diverged"]
verdicts = page.save(schema.concat([  # a diverged cell has no gain: its missing metrics are left out
    schema.to_long(grid.assign(method="grid"), page.name, metrics, keys, drop_missing=True),
    schema.to_long(spawn.assign(method="spawn_sweep"), page.name, metrics, keys, drop_missing=True)]))
for v in verdicts:  # the grid has one spawn point: its rows also under the keys n1 and n2
    page.glue_claim(v, key=v.key.split("_")[0])
page.provenance()
