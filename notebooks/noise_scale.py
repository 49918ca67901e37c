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
# copies, train each to the end with its own batch order, and average them. The merged
# model can beat its parents, and by how much depends on the optimizer's noise.
# Learning rate $\eta$, batch size $B$ and momentum $\mu$ act together through the
# effective noise scale $S = \eta / (B(1-\mu))$:
#
# - the merging gain is **non-monotonic** in $S$, with an optimum in between (N1);
# - plotted against $\eta$ for each $B$, or against $B$ for each $\eta$, the curves do not
#   line up; plotted against $S$, they **collapse** onto one curve: at fixed $S$, $B$ has
#   no effect (N2, which the book reads as the batch size's coefficient at fixed $S$).
#
# **The protocol** (spawn-and-merge, after Frankle et al. 2020; see the methods page).
# The two children of a pair inherit their parent's weights, momentum buffers and
# schedule position, train to the end with different batch orders, and are merged at
# $\lambda = \tfrac12$. **Merging gain** = acc(merged) − mean(acc of the two children),
# in points on the test set. Every run takes the same number of steps whatever its
# batch size, as in the paper.
#
# **The rule and the minimum effect** (in `lmcbook/claims/thresholds.py`; the scoreboard
# marks each row's test as fixed before its results or changed after them). A cell is excluded only when it failed: a run diverged, or
# the weaker child of a pair ended below {glue:text}`failed_acc:g` training accuracy. A
# cell that trains less well because its noise is high stays in: it is the side on which
# the paper's curve falls. A row whose relevant intervals all lie below the minimum
# effect, {glue:text}`min_effect:g` points (about half the paper's gains), reads ✗: no
# gain of the paper's size in this setting.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
dataset = "mnist1d"  # MNIST-1D: generated offline, 10 classes; smoke "digits"; paper "cifar10"
data_root = None  # where torchvision data sets live (None: the embedded ones need none)
download = False  # let torchvision download a missing data set into data_root
base_width = 64  # hidden units at width multiplier 1
width = 2.0  # multiplier of base_width: 128 hidden units; smoke 0.5; paper 4.0
depth = 4  # linear layers L of the MLP
bias = False  # biases in every layer
steps = 2000  # SGD steps of every run; smoke 60; paper 20000
max_steps = None  # the convergence rule's step cap (None: no second length)
warmup = 0.05  # share of all steps spent in the linear warm-up
lrs = (0.01, 0.02, 0.05, 0.1, 0.2)  # the grid's peak rates η; smoke (0.02, 0.05, 0.1)
batch_sizes = (32, 64, 128, 256)  # the grid's batch sizes B; smoke (32, 128)
noise_scales = None  # S values of the grid (None: the lrs × batch_sizes grid)
protocol = "steps"  # the grid's length rule
momentum = 0.9  # SGD momentum μ (PyTorch's, dampening 0)
weight_decay = 0.0005  # SGD's weight decay (L2)
spawn_fraction = 0.5  # where the grid spawns its children (share of training)
lr_floor = 1.0  # where the rate ends, as a share of its peak (1: constant)
augment = False  # random shifts in the grid and the component sweeps
row_batch_size = 128  # the component sweeps' batch size
momenta = (0.0, 0.5, 0.9)  # the momentum sweep; smoke (0.0, 0.9)
component_lrs = (0.02, 0.05, 0.1, 0.2)  # its rates; smoke (0.02, 0.05, 0.1)
weight_decays = (0.0, 0.0005, 0.005)  # the weight-decay sweep; smoke (0.0, 0.005)
component_lr = 0.05  # the weight-decay sweep's and task arithmetic's peak rate
pair_lrs = (0.01, 0.03, 0.1, 0.3)  # the learning-rate-pair matrix; smoke (0.02, 0.1)
finetune_steps = 500  # task arithmetic's fine-tuning steps; smoke 20
finetune_lrs = (0.01, 0.03, 0.1)  # task arithmetic's fine-tuning rates; smoke (0.05,)
alphas = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)  # task arithmetic's scales of the task vectors; smoke (0.0, 0.5, 1.0)
ties_keep = 0.2  # TIES merging's share of each task vector kept
seeds = 2  # pairs per cell of the other sweeps; smoke 1; paper 10
grid_seeds = 5  # pairs per cell of the grid; smoke 1; paper 10
device = "auto"  # where runs train: auto, cpu, cuda, cuda:N or mps
scheduler = None  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
show_references = True  # show the committed reference runs (results/) beside this run's cells

# %%

from lmcbook import claims, experiments_noise, plots_noise, plots_style, schema, store
from lmcbook.experiments_noise import where_facts
from lmcbook.page import open_page

page, study = open_page("noise_scale", globals())

# %% tags=["remove-cell"]
# where this page runs, against the regime map (None when this page runs alone: a committed reference map, if any)
regime_map = page.read_csv_if("noise_regime")
where, where_numbers = where_facts(study, regime_map)
for key, value in where.items():
    page.choose(key, value)
page.glue_values(**where_numbers)

# %% [markdown]
# **Where this page runs, and why.** This page runs {glue:md}`where_setting`.

# %% [markdown] tags=["when:where=nomap"]
# No regime map of this data set was executed beside this page, and none is committed,
# so none is read here.

# %% [markdown] tags=["when:where=untrained"]
# The regime map read here, {glue:md}`where_map`, did not train this setting, so it says
# nothing about it.

# %% [markdown] tags=["when:where=failed"]
# The regime map read here, {glue:md}`where_map`, trained this setting, but none of its
# cells was kept with an interval (each failed by the rule or had too few pairs for an interval), so it
# says nothing about how this setting merges.

# %% [markdown] tags=["when:where_read=yes"]
# On {glue:md}`where_map`, over {glue:text}`where_n_lrs` learning rates, this setting
# reads as gaining (an interval over at least {glue:text}`where_min_pairs` pairs above zero)
# at {glue:text}`where_n_gain` of them; its best gain is {glue:text}`where_best_gain:.2f`
# points (95% interval {glue:text}`where_best_lo:.2f` to {glue:text}`where_best_hi:.2f`,
# η {glue:text}`where_best_lr:g`); there the children disagree on
# {glue:text}`where_disagree:.1f`% of the test inputs and their ensemble gains
# {glue:text}`where_ens_gain:.2f` points.

# %% [markdown] tags=["when:where_read=no"]
# % the map has no cell of this setting: nothing to quote

# %% [markdown] tags=["when:where=nopick"]
# No spawned setting of the map gains measurably, so none is better placed.

# %% [markdown] tags=["when:where=picked_paper"]
# It is the setting the map picks: the most learning rates that gain the paper's size.

# %% [markdown] tags=["when:where=picked"]
# It is the setting the map picks: the most learning rates that gain.

# %% [markdown] tags=["when:where=other"]
# The map would pick {glue:md}`where_pick` instead; this page keeps its own setting, and
# says so here. The reference runs below name theirs in their commands, which may differ.

# %% [markdown] tags=["when:where_decay=within"]
# At η {glue:text}`where_best_lr:g` the merged model reaches
# {glue:text}`where_acc_merged:.3f` test accuracy and its children
# {glue:text}`where_acc_children:.3f` (the weaker child {glue:text}`where_weak_train:.3f`
# on its own training set); the map's children on a learning rate that decays to zero,
# spawned at the same point of their own run, reach {glue:text}`where_acc_decayed:.3f`,
# within the minimum effect ({glue:text}`where_min_effect:g` points) of the merge. That is
# no measure of what annealing these children would give: those children's parents
# had already decayed their rate by the spawn, so the book's N8 does not read such cells,
# and no interval is drawn here.

# %% [markdown] tags=["when:where_decay=below"]
# At η {glue:text}`where_best_lr:g` the merged model reaches
# {glue:text}`where_acc_merged:.3f` test accuracy and its children
# {glue:text}`where_acc_children:.3f` (the weaker child {glue:text}`where_weak_train:.3f`
# on its own training set); the map's children on a learning rate that decays to zero,
# spawned at the same point of their own run (no stand-in for annealing these children:
# their parents had already decayed their rate), reach
# {glue:text}`where_acc_decayed:.3f`, {glue:text}`where_decay_diff:.2f` points
# below the merge.

# %% [markdown] tags=["when:where_decay=above"]
# At η {glue:text}`where_best_lr:g` the merged model reaches
# {glue:text}`where_acc_merged:.3f` test accuracy and its children
# {glue:text}`where_acc_children:.3f` (the weaker child {glue:text}`where_weak_train:.3f`
# on its own training set); the map's children on a learning rate that decays to zero,
# spawned at the same point of their own run (no stand-in for annealing these children:
# their parents had already decayed their rate), reach
# {glue:text}`where_acc_decayed:.3f`, {glue:text}`where_decay_diff:.2f` points
# above the merge.

# %% [markdown] tags=["when:where_decay=none"]
# % no decay-to-zero cell beside this setting's on the map

# %% [markdown] tags=["when:where_converged=no"]
# There the children are not trained to convergence: the weaker one stays below the old
# convergence rule's {glue:text}`where_converged_acc:g` training accuracy.

# %% [markdown] tags=["when:where_converged=yes"]
# % the weaker child met the old convergence rule: nothing to add

# %% [markdown] tags=["when:where_converged=none"]
# % no decay-to-zero comparison: nothing to add

# %% [markdown] tags=["when:where_first=same"]
# The map's ranking (gains of the paper's size first) was set after the whole MNIST-1D
# map first ran ({doc}`noise_regime` says why); on this map the ranking fixed before it
# picks the same setting. And wherever this page's cells coincide with the map's (the same
# learning rate, batch size and seed), they are the same runs, trained once: the setting
# was chosen partly on runs this page reads.

# %% [markdown] tags=["when:where_first=other"]
# The map's ranking (gains of the paper's size first) was set after the whole MNIST-1D
# map first ran ({doc}`noise_regime` says why); on this map the ranking fixed before it
# picks {glue:md}`where_first_pick`. And wherever this page's cells coincide with the
# map's (the same learning rate, batch size and seed), they are the same runs, trained
# once: the setting was chosen partly on runs this page reads.

# %% [markdown] tags=["when:where_first=nothing"]
# The map's ranking (gains of the paper's size first) was set after the whole MNIST-1D
# map first ran ({doc}`noise_regime` says why); on this map the ranking fixed before it
# picks nothing. And wherever this page's cells coincide with the map's (the same learning
# rate, batch size and seed), they are the same runs, trained once: the setting was chosen
# partly on runs this page reads.

# %% [markdown] tags=["when:where_first=aside_same"]
# The map's ranking (gains of the paper's size first) was set after the whole MNIST-1D
# map first ran ({doc}`noise_regime` says why); on this map the ranking fixed before it
# picks the same setting as that ranking.

# %% [markdown] tags=["when:where_first=aside_other"]
# The map's ranking (gains of the paper's size first) was set after the whole MNIST-1D
# map first ran ({doc}`noise_regime` says why); on this map the ranking fixed before it
# picks {glue:md}`where_first_pick`.

# %% [markdown] tags=["when:where_first=none"]
# % the map picks nothing: no ranking to compare

# %% [markdown]
# Every cell of the $\eta \times B$ grid is trained as {glue:text}`n_pairs` spawn-and-merge
# pairs; the rule marks the cells it excludes, and beside each cell's mean gain stand its
# children's training and test accuracy:

# %%
grid = experiments_noise.noise_frame(study, study.grid_cells(), page.store, pairs=study.grid_pairs)
grid = claims.noise.mark_kept(grid, ["lr", "batch_size"])
per_cell = grid.groupby(["batch_size", "lr"])
table = per_cell[["noise_scale", "gain", "ensemble_gain", "train_acc_min", "acc_endpoints"]].mean()
(table * [1, 100, 100, 1, 1]).round(3)

# %% [markdown]
# **One pair by hand.** The merging gain of a pair is
# $\mathrm{acc}(\theta(\tfrac12)) - \tfrac12\big(\mathrm{acc}(\theta_a) + \mathrm{acc}(\theta_b)\big)$,
# and its cell's effective noise scale is $S = \eta / (B(1-\mu))$. The next cell takes the
# grid cell with the largest mean gain in the table above and loads its first pair of
# children from the run store. It merges them with `merge.interpolate`, measures the three
# models' test accuracy with `models.evaluate`, and computes $S$. It asserts that the
# gain and $S$ are the ones in that pair's row of the grid, to within $10^{-9}$.

# %%
import pandas as pd

from lmcbook import merge, models

data = store.study_data(study)
batch_size, lr = table["gain"].idxmax()  # the grid cell with the largest mean gain
row = grid[(grid["lr"] == lr) & (grid["batch_size"] == batch_size) & (grid["pair"] == 0)].iloc[0]
spec_a, spec_b = study.children_that_took(study.cell(float(lr), int(batch_size)), 0, int(row["train_steps"]))
a, b = (page.store.load(spec).model for spec in (spec_a, spec_b))
acc = {k: models.evaluate(m, data.x_test, data.y_test).acc for k, m in
       (("a", a), ("b", b), ("merged", merge.interpolate(a, b, 0.5, data)))}
by_hand = {"gain": acc["merged"] - (acc["a"] + acc["b"]) / 2,  # acc(θ(½)) − ½(acc(θa) + acc(θb))
           "noise_scale": lr / (batch_size * (1 - study.momentum))}  # S = η / (B(1 − μ))
assert by_hand["noise_scale"] == experiments_noise.effective_noise_scale(float(lr), int(batch_size), study.momentum)
for k, v in by_hand.items():
    assert abs(v - row[k]) <= 1e-9, (k, v, row[k])
pd.DataFrame({"this cell": by_hand, "the grid's row": row[list(by_hand)]}).rename_axis(
    f"η {lr:g}, B {batch_size}, pair 0")

# %% [markdown]
# The sensitivity of N1 and N2 to the rule's threshold: each row's verdict with only
# failed runs excluded (the rule), with every pair's weaker child at
# {glue:md}`rule_between` training accuracy or more, and at {glue:text}`rule_old:g`
# (the book's earlier convergence rule, which removed the high-noise side):

# %%
keys = ["lr", "batch_size", "momentum", "spawn_fraction", "lr_floor", "augment", "method", "dataset"]
metrics = ["gain", "gain_best", "loss_gain", "ensemble_gain", "disagreement", "pair_distance", "noise_scale",
           "noise_scale_sq", "acc_a", "acc_b", "acc_endpoints", "acc_merged", "acc_ensemble", "train_acc_min",
           "train_acc_merged", "train_steps", "diverged"]
long = schema.to_long(grid.assign(method="grid", dataset=study.dataset), page.name, metrics, keys, drop_missing=True)
sensitivity = claims.noise.rule_sensitivity(long, None)
sensitivity

# %% [markdown] tags=["when:rule_moves=some"]
# As the threshold rises, the verdicts of {glue:md}`rule_moving` change (the table gives
# how); the other rows' do not.

# %% [markdown] tags=["when:rule_moves=none"]
# No row's verdict changes with the threshold.

# %% [markdown]
# N2 reads the kept cells' mean gains against $\log_{10} S$ through a quadratic fit; its
# coefficients, and the vertex $\log_{10} S$ where it peaks (or bottoms out):

# %%
fit_s = claims.noise.cell_mean_fit(grid, ["lr", "batch_size"])  # None with too few kept cells
pd.Series(fit_s or {}, dtype=float).rename_axis("term").to_frame("gain ≈ c2·x² + c1·x + c0, x = log10 S")

# %% [markdown]
# The page's own numbers and its account of the committed reference runs (the cell is folded; open it to
# read them).

# %% tags=["hide-input"]
import re
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from lmcbook import reference
from lmcbook.claims.noise import grid_pairs, grid_protocol, noise_cells
from lmcbook.claims.thresholds import (
    MIN_PAIRS,
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
)
from lmcbook.experiments_noise import noise_reference_facts
from lmcbook.page import Page
from lmcbook.schema import markdown_table


def grid_numbers(study: Any, grid: pd.DataFrame, fit: dict[str, float] | None, n_test: int) -> dict[str, float]:
    """Return the numbers the page's prose quotes about its η × B grid, by glue key: the cells the rule kept and
    excluded, the grid's ranges (S, the children's test accuracy, the weaker child's training accuracy), the cell
    means' range and the best cell, the most a cell's ensemble gains, the vertex of the quadratic ``fit``
    (:func:`lmcbook.claims.noise.cell_mean_fit`, NaN without one), the thresholds, and the test split's size
    ``n_test``."""
    cells = noise_cells(grid, ["lr", "batch_size"])
    per_cell = grid.groupby(["batch_size", "lr"])
    cell_means, n_ok = per_cell["gain"].mean(), int(cells["kept"].sum())
    best = cell_means.idxmax()
    s = grid["noise_scale"]
    return dict(
        failed_acc=NOISE_FAILED_TRAIN_ACC, min_effect=100 * NOISE_MIN_EFFECT, n_excluded=len(cells) - n_ok,
        n_kept=n_ok, n_pairs=study.grid_pairs, n_test=n_test, signal_point=100 / n_test,
        n_cells=len(cells), n_lrs=len({c.lr for c in study.grid_cells()}), n_bs=len(study.batch_sizes),
        mu=study.momentum,
        wd=study.weight_decay, s_lo=s.min(), s_hi=s.max(), min_pairs=MIN_PAIRS, decades=np.log10(s.max() / s.min()),
        min_cells=NOISE_MIN_CELLS, gain_min=100 * cell_means.min(), gain_max=100 * cell_means.max(),
        best_cell_s=per_cell["noise_scale"].first()[best], best_lr=best[1], best_b=best[0],
        ens_max=100 * per_cell["ensemble_gain"].mean().max(),
        acc_lo=per_cell["acc_endpoints"].mean().min(), acc_hi=per_cell["acc_endpoints"].mean().max(),
        train_lo=per_cell["train_acc_min"].mean().min(), train_hi=per_cell["train_acc_min"].mean().max(),
        fit_vertex_s=np.nan if fit is None else 10 ** fit["vertex"],
        fit_vertex_gain=np.nan if fit is None else 100 * fit["fit_vertex"],
        n1_pairs=2 * MIN_PAIRS, rule_old=NOISE_RULE_THRESHOLDS[-1])


def reference_texts(page: Page, study: Any) -> tuple[dict[str, str], Figure]:
    """Return, by glue key, the Markdown of the page's committed reference runs (each scored and its verdicts' states
    glued, :meth:`lmcbook.page.Page.noise_reference_block`; the retired ones described under their own rule) and the
    first one's figure (a placeholder if none is committed)."""
    old_rule = NOISE_CONVERGED_TRAIN_ACC
    retired = [f"**Retired:** `{name}`, {reference.get(name).retired} What it showed, under its own rule (the weaker "
               f"child of every pair at {old_rule:g} training accuracy):\n\n"
               + markdown_table(noise_reference_facts(frame, rule=old_rule))
               for name, (frame, _) in (page.references(retired=True) if study.show_references else {}).items()]
    blocks, rows, figure, by_protocol = [], {}, None, []
    for name, (frame, prov) in (page.references() if study.show_references else {}).items():
        ref = grid_pairs(frame)
        figure = figure or plots_noise.plot_reference_grid(ref)
        facts = (f"{int(ref.groupby(['lr', 'batch_size'])['pair'].nunique().min())} pairs per cell.\n\n"
                 + markdown_table(noise_reference_facts(frame)))
        block, rows[name] = page.noise_reference_block(name, frame, prov, facts)
        blocks.append(block)
        n2 = next(r for r in rows[name] if r.id.startswith("N2"))
        by_protocol.append({"reference": f"`{name}`", "data": re.split("[:,]", reference.get(name).data)[0],
                            "protocol": grid_protocol(ref), "B per decade at fixed S (points)":
                            f"{100 * n2.values['estimate']:+.2f} [{100 * n2.values['lo']:+.2f}, "
                            f"{100 * n2.values['hi']:+.2f}]"
                            if "lo" in n2.values else "—", "N2": n2.mark})
    texts = {"ref_figure_name": f"`{next(iter(rows))}`" if rows else "(none)",
             "noise_references": "\n\n".join([reference.listing(page.name), *blocks, *retired]),
             "n2_protocols": markdown_table(pd.DataFrame(by_protocol).set_index("reference")) if by_protocol else
             "*No reference run of this page is committed.*",
             "ref_summary": "; ".join(f"`{n}`: " + ", ".join(f"{r.id} {r.mark}" for r in rs) for n, rs in rows.items())
             or "none is committed"}
    return texts, figure or plots_style.placeholder("No reference run of this page is committed.")


# %% tags=["remove-cell"]
page.glue_figure("fig_grid", plots_noise.plot_noise_grid(grid, fit_s))
page.glue_md("setup", experiments_noise.describe_noise(study))
page.glue_values(**grid_numbers(study, grid, fit_s, len(store.study_data(study).y_test)))
page.choose("fit_drawn", fit_s is not None)
page.choose("fit", "none" if fit_s is None else "interior" if fit_s["interior"] else
            "minimum" if fit_s["c2"] > 0 else "edge")
page.choose("n1_decides", study.grid_pairs >= 2 * claims.thresholds.MIN_PAIRS)
page.choose("rule_moves", "some" if experiments_noise.moving_rows(sensitivity) else "none")
page.glue_markdown(rule_between=experiments_noise.rule_between_words(), rule_moving=experiments_noise.moving_rows(sensitivity),
                   legacy="`lmcbook execute --only noise_scale -p lr_floor 0 -p spawn_fraction 0.5 -p augment false`")

# %% [markdown]
# **Setup.** {glue:md}`setup`. The grid has {glue:text}`n_lrs` peak learning rates ×
# {glue:text}`n_bs` batch sizes (momentum {glue:text}`mu`, weight decay
# {glue:text}`wd`); $S$ spans {glue:text}`s_lo:.2e` to {glue:text}`s_hi:.2e`
# ({glue:text}`decades:.1f` decades). The test split has {glue:text}`n_test` examples, so
# one example is {glue:text}`signal_point:.3f` points. The children's mean test accuracy
# runs from {glue:text}`acc_lo:.3f` to {glue:text}`acc_hi:.3f` across cells, and the
# weaker child's training accuracy from {glue:text}`train_lo:.3f` to
# {glue:text}`train_hi:.3f`: {glue:text}`n_excluded` of the {glue:text}`n_cells` cells
# failed. The book's first protocol (a decay to zero, children spawned at 50%) is one
# command away: {glue:md}`legacy`.

# %% [markdown] tags=["when:fit_drawn=true"]
# ```{glue:figure} fig_grid
# :name: fig-noise-grid
#
# Merging gain against $\eta$ (one line per $B$), against $B$ (one line per $\eta$), and
# against $S$ (every pair, colored by $B$; grey crosses: cells the rule excluded;
# dashed: a quadratic fit on $\log_{10} S$ over the kept cells). Lines: pair means; bars: min to max over pairs. Trained:
# {glue:md}`setup`.
# ```

# %% [markdown] tags=["when:fit_drawn=false"]
# ```{glue:figure} fig_grid
# :name: fig-noise-grid
#
# Merging gain against $\eta$ (one line per $B$), against $B$ (one line per $\eta$), and
# against $S$ (every pair, colored by $B$; grey crosses: cells the rule excluded;
# no fit: fewer than {glue:text}`min_cells` cells kept). Lines: pair means; bars: min to max over pairs. Trained:
# {glue:md}`setup`.
# ```

# %% [markdown]
# **What this run shows.** The cell means of the gain range from
# {glue:text}`gain_min:.2f` to {glue:text}`gain_max:.2f` points; the largest is at
# $\eta =$ {glue:text}`best_lr:g`, $B =$ {glue:text}`best_b:g` ($S =$
# {glue:text}`best_cell_s:.2e`). The most a cell's logit ensemble gains is
# {glue:text}`ens_max:.2f` points: a yardstick for what two children have to harvest, not a
# bound (a merge can gain more than its children's ensemble).
#
# - **Optimum.** Verdict N1 ({glue:md}`n1_test`): {glue:md}`n1_mark`, {glue:md}`n1_measured`.
#   Choosing the best cell on one half of the pairs and reading it on the other keeps the
#   winner's curse out of the reading.
# - **The batch size at fixed $S$.** Verdict N2 ({glue:md}`n2_test`): {glue:md}`n2_mark`, {glue:md}`n2_measured`.
#   The linear scaling rule, by which $S$ alone would say what $B$ does, assumes equal
#   epochs (every run sees as many examples); this grid gives every run the same steps, so
#   a run at $B = 32$ sees a quarter of the examples one at $B = 128$ sees. The references
#   `noise-epochs-mnist1d` and `noise-epochs-mnist-standin` run the grid at equal epochs
#   (their facts below give each batch size's steps), and N2 is scored once per grid. Every
#   committed grid, with its protocol, the batch size's coefficient at fixed $S$ (tolerance
#   ± {glue:text}`n2_tolerance:g` points) and its N2:
#
#   ```{glue:md} n2_protocols
#   :format: myst
#   ```
# - **Where the optimum lies** (the book's own row, scored apart from the paper's claims).
#   Verdict N9 ({glue:md}`n9_test`): {glue:md}`n9_mark`, {glue:md}`n9_measured`. A peak at
#   the edge of stability would say that the gain grows with noise until training breaks;
#   a peak inside says there is an optimum to aim for. The finer grids of $S$
#   (`noise-fine-mnist1d`, `noise-fine-mnist-standin`) ask it between the best cell and the
#   first whose children train markedly worse.

# %% [markdown] tags=["when:n1_decides=false"]
# **What this build cannot decide.** N1 chooses the best cell on the even pairs and reads
# it on the odd ones, so placing the optimum needs {glue:text}`min_pairs` pairs on each
# half, {glue:text}`n1_pairs` per cell, and this build has {glue:text}`n_pairs`: its N1
# can still read an absence (every cell's gain below the minimum effect, over all its
# pairs), but not place an optimum. The reference runs below have {glue:text}`n1_pairs`.

# %% [markdown] tags=["when:n1_decides=true"]
# With {glue:text}`n_pairs` pairs per cell, N1 has {glue:text}`min_pairs` or more on each
# half, and N2 its intervals over pairs.

# %% [markdown] tags=["when:fit=none"]
# **The fit.** With {glue:text}`n_kept` kept cell(s), fewer than
# {glue:text}`min_cells` or fewer than 3 values of $S$, no fit is read.

# %% [markdown] tags=["when:fit=interior"]
# **The fit.** Over the {glue:text}`n_kept` kept cells' means, a quadratic fit on
# $\log_{10} S$ has its vertex at $S^* =$ {glue:text}`fit_vertex_s:.2e`, inside their range,
# where the fitted gain is {glue:text}`fit_vertex_gain:.2f` points.

# %% [markdown] tags=["when:fit=minimum"]
# **The fit.** Over the {glue:text}`n_kept` kept cells' means, a quadratic fit on
# $\log_{10} S$ curves upwards: it has a minimum, not an optimum, at
# $S =$ {glue:text}`fit_vertex_s:.2e`, where the fitted gain is
# {glue:text}`fit_vertex_gain:.2f` points.

# %% [markdown] tags=["when:fit=edge"]
# **The fit.** Over the {glue:text}`n_kept` kept cells' means, a quadratic fit on
# $\log_{10} S$ has its maximum at $S =$ {glue:text}`fit_vertex_s:.2e`, outside the range of
# the kept cells' $S$; the fitted gain there is {glue:text}`fit_vertex_gain:.2f` points.

# %% tags=["remove-cell"]
ref_texts, ref_figure = reference_texts(page, study)
page.glue_markdown(**ref_texts)
page.glue_values(n2_tolerance=100 * claims.thresholds.NOISE_B_EFFECT)  # N2's tolerance, in points of accuracy
page.glue_figure("fig_grid_ref", ref_figure)

# %% [markdown]
# ## The reference runs
#
# A *reference run*, committed under `results/` with its provenance and regenerated with
# the command it names, runs this page with {glue:text}`n1_pairs` pairs per cell, enough for
# N1's split half, in the setting that command names. Its verdicts are in the scoreboard beside this build's
# ({glue:md}`ref_summary`). Not every test was fixed before its run: the scoreboard marks,
# row by row, which were fixed before their results and which were changed after them.
#
# ```{glue:md} noise_references
# :format: myst
# ```
#
# ```{glue:figure} fig_grid_ref
# :name: fig-noise-grid-reference
#
# The first reference run's grid, drawn as above: grey crosses are the cells the rule
# excluded; dashed, the quadratic fit on the kept cells' means. Trained: as the
# reference run {glue:md}`ref_figure_name` records above (its provenance).
# ```

# %% [markdown]
# ## The spawn point
#
# The regime map trained its spawn points ({glue:md}`map_spawns`) at one batch size.
# Read at this page's schedule and augmentation, it gives the spawn point's effect on the
# gain without training anything new (the reference maps have more spawn points):

# %%
spawn = claims.noise.map_spawn_sweep(regime_map, study)
spawn.groupby(["spawn_fraction", "lr"])[["gain", "ensemble_gain", "acc_endpoints"]].mean().unstack(0).round(4)

# %% tags=["remove-cell"]
page.glue_figure("fig_spawn", plots_noise.plot_spawn_points(spawn) if len(spawn) else
                 plots_style.placeholder("The regime map has no cells at this page's schedule and augmentation."))
page.glue_md("map_spawns", ", ".join("a shared initialisation" if f == 0 else f"{f:.0%}"
                                     for f in sorted(spawn["spawn_fraction"].unique())) or "none here")

# %% [markdown]
# ```{glue:figure} fig_spawn
# :name: fig-spawn-point
#
# Left: merging gain against $S$ on the regime map's row (one batch size), one line per
# spawn point (0%: a shared initialisation), at this page's schedule and augmentation.
# Right: the children's own accuracy. No verdict reads it. Trained: as the regime map
# records (the previous page).
# ```

# %% tags=["remove-input"]
n1, n2, n9 = page.save(long)  # the grid has one spawn point: one row each of N1, N2 and N9
page.glue_claim(n1, "n1_mark", "n1_measured", "n1_test")
page.glue_claim(n2, "n2_mark", "n2_measured", "n2_test")
page.glue_claim(n9, "n9_mark", "n9_measured", "n9_test")
page.provenance()
