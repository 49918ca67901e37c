# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # What makes merging without permutations work
#
# **The question.** The width paper (Ito et al.) says that two independently trained
# networks merge by plain weight averaging once they are wide enough, and it gives a
# cause: weight decay makes the trained weights low-rank, low-rank weights leave each
# network's hidden representations nearly orthogonal to the other's weights
# ($W_a z_b \approx 0$) and its ReLUs weakly additive, and together these give LEWC.
# The earlier pages of this book measure the width effect after the quick profile's
# short training, where weight decay has barely acted (their captions give the decay
# integral $D$). Those measurements cannot tell whether the effect comes from the
# paper's mechanism or from something else. This page trains the runs that can.
#
# **Five accounts** of what the runs could show, and how each is tested:
#
# - **P, the paper.** Weight decay gives low rank, then reciprocal orthogonality and
#   weak additivity, then LEWC, then merging works, and more width helps. Then, once
#   weight decay has acted (large $D$), wide networks merge as well as their logit
#   ensemble (M1), and the orthogonality ratio falls as $D$ grows (M5).
# - **H1, near initialisation.** In short training, the width effect comes from the
#   two independent random initialisations, which training barely moves; it needs no
#   weight decay. Then shrinking the initial weights weakens it (M4).
# - **H2, permutation collapse.** Once weight decay has acted, both networks reach the
#   same low-rank solution up to a permutation of their hidden units. Then plain
#   averaging fails at large $D$ (M1 fails), the gain of weight matching over plain
#   averaging grows with $D$, and after matching the two networks interpolate linearly
#   layer by layer, LLFC (M2).
# - **H3, width truncation.** With large $D$, plain merging keeps improving with width
#   beyond the widths where it first fails (M3: merged accuracy rises with width up to the
#   widest). Whether it has *recovered*, near the ensemble, is M1's question.
# - **H4, data.** Digits' 64 input dimensions force the two networks to share
#   features; on 784-dimensional MNIST, large $D$ behaves as the paper says.
#
# M6 checks the axis itself: $D = \mathrm{wd}\cdot\sum_t\eta_t$ can grow by training
# longer or by a stronger weight decay, and cells of equal $D$ reached both ways
# should merge alike if $D$ is a fair summary of how much weight decay acted.
#
# **How the verdicts are read.** The tests M1–M6 were written and committed in
# `lmcbook/claims.py` before any run that only this page trains was trained. A referee
# then read their results, and M2–M5 were changed after them, so they count as set
# *after results*: M2 now asks whether the gain of weight matching grows with $D$ (it was
# positive at every $D$, so it could not tell the accounts apart), and M3, M4 and M5 have
# minimum effects ({glue:md}`min_acc_effect` of merged accuracy for M3 and M4,
# {glue:md}`orth_fall_min` of the orthogonality ratio for M5), so that a flat result is a
# ✗, an alternative refuted, rather than *inconclusive*. Cells whose $D$ differ by less
# than {glue:md}`tie_rtol` are one value of $D$, and of two such cells M1 reads the longer
# training, the paper's route. Each reads a
# {glue:md}`confidence` bootstrap interval over pairs (percentile bootstrap; with
# {glue:md}`min_pairs` pairs it is a floor on the uncertainty, not a ceiling), needs at
# least {glue:md}`min_pairs` pairs in every cell its interval reads (a rank correlation
# over widths or cells, as in M3 and M5, may also read cells with fewer), and
# decides only when the interval clears its threshold; otherwise it is
# *inconclusive*. A row is *n/a* outside its regime (for "weight decay has acted",
# weight decay alone, momentum included, would leave at most {glue:md}`acted_max` of a
# weight) or when an endpoint reached less than {glue:md}`converged_acc` training
# accuracy, a convergence rule fixed with the tests.

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
widths = (0.25, 0.5, 1.0, 4.0, 16.0)  # the width study's (16 to 1024 units): runs reused; smoke (0.25, 1.0); paper (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
weight_decays = (0.0001, 0.003, 0.01, 0.03)  # the decay arm; smoke (0.003, 0.006); paper (0.0001, 0.003, 0.009, 0.03)
wide_decays = None  # the decay arm's weight decays at every width
regimes = (60, 200, 600)  # the length arm's epochs (None: no arm); smoke (4, 8); paper (100, 300, 1000)
regime_weight_decays = (0.0001, 0.003)  # the length arm's; smoke (0.003, 0.006)
long_max_width = 1.0  # the length arm's widest; smoke None
init_scales = (0.25,)  # the small-initialisation arm's factors (None: no arm)
decisive_seeds = 5  # pairs where a verdict is read; smoke 2
match_iterations = 100  # weight matching's iteration cap
show_references = True  # show the committed reference runs (results/) beside this run's cells

# %%
import pandas as pd

from lmcbook import claims, experiments, plots_style, plots_width, store
from lmcbook.claims import claims_markdown
from lmcbook.data import DATASET_SHORT
from lmcbook.page import open_page
from lmcbook.schema import markdown_table

page, study = open_page("mechanism", globals())

# %% [markdown]
# Every cell of the three arms below is trained (or loaded from the run store), and each
# of its pairs is merged plainly and after weight matching, probed, and its training
# regime measured:

# %%
frames = experiments.mechanism_frames(study, page.store)  # every cell's merges, probes and regime, cached

# %% [markdown]
# **One pair by hand.** The decay integral $D = \mathrm{wd}\cdot\sum_t\eta_t$ is the sum of
# the learning rate over every step a run took, times its weight decay. The next cell
# takes the decay arm's strongest weight decay and its widest width, and the first pair
# there. It sums that pair's learning-rate schedule step by step (`train.lr_at`), merges
# the pair with `merge.interpolate`, and measures the merged model's test accuracy with
# `models.evaluate`. It asserts that both numbers are the ones in the frames above, to
# within $10^{-9}$ (relative).

# %%
from lmcbook import merge, models
from lmcbook.train import lr_at

data = store.study_data(study)
cell = max((c for c in study.cells() if c.epochs == study.epochs and c.init_scale == 1.0),
           key=lambda c: c.weight_decay)  # the decay arm's strongest weight decay
pair = next(p for p in cell.pairs() if p.width == max(cell.widths))  # its widest width's first pair
tr, steps = pair.a.train, pair.a.total_steps(len(data.y_train))
a, b = (page.store.load(spec).model for spec in (pair.a, pair.b))
by_hand = {"decay_integral": tr.weight_decay * sum(lr_at(t, steps, tr.lr, tr.warmup, tr.schedule, tr.lr_floor)
                                                   for t in range(steps)),  # D = wd · Σ_t η_t
           "acc_merged": models.evaluate(merge.interpolate(a, b, 0.5, data), data.x_test, data.y_test).acc}
keys = dict(weight_decay=cell.weight_decay, epochs=cell.epochs, init_scale=1.0, hidden_units=pair.hidden_units)
regime, summary = frames["regime"], frames["summary"]
found = {"decay_integral": regime.loc[regime[list(keys)].eq(pd.Series(keys)).all(axis=1)
                                      & (regime["metric"] == "decay_integral") & (regime["seed"] == tr.seed), "value"],
         "acc_merged": summary.loc[summary[list(keys)].eq(pd.Series(keys)).all(axis=1)
                                   & (summary["method"] == "none") & (summary["pair"] == pair.index), "acc_merged"]}
found = {k: float(v.squeeze()) for k, v in found.items()}
for k, v in by_hand.items():
    assert abs(v - found[k]) <= 1e-9 * max(1.0, abs(found[k])), (k, v, found[k])
pd.DataFrame({"this cell": by_hand, "the frames above": found}).rename_axis(
    f"wd {cell.weight_decay:g}, {cell.epochs} epochs, {pair.hidden_units} hidden units, pair {pair.index}")

# %% [markdown]
# The page's own tables and words: the cells as a table, the committed reference runs scored, and the
# thresholds as the prose writes them (the cell is folded; open it to read them).

# %% tags=["hide-input"]
from typing import Any

from lmcbook import reference
from lmcbook.claims.thresholds import (
    CONVERGED_TRAIN_ACC,
    D_TIE_RTOL,
    DECAY_ACTED_MAX,
    MIN_ACC_EFFECT,
    MIN_PAIRS,
    ORTH_FALL_MIN,
    PRECISION_LOSS_MARGIN,
)
from lmcbook.claims.verdicts import ClaimResult
from lmcbook.page import Page
from lmcbook.schema import cell_table, in_cell, select
from lmcbook.stats import CONFIDENCE
from lmcbook.studies import describe_mechanism, mechanism_cut, short_fraction


def mechanism_cells_markdown(long: pd.DataFrame) -> str:
    """Return a Markdown table of the mechanism study's cells, one row each: arm, length, weight decay, initial-weight
    factor, D, what weight decay alone would leave of a weight, the widest width and its pairs, the distance from
    initialisation and the lowest endpoint training accuracy there."""
    cells = cell_table(long).sort_values(["init_scale", "epochs", "weight_decay"])
    base = cells.loc[cells["widest"].idxmax(), "epochs"]
    lines = ["| arm | epochs | weight decay | init × | D | weight decay alone leaves | widest (pairs) | "
             "‖θ_T − θ₀‖/‖θ₀‖ | min. train acc |", "|---|---|---|---|---|---|---|---|---|"]
    for _, c in cells.iterrows():
        arm = "small init" if c["init_scale"] != 1.0 else "decay" if c["epochs"] == base else "length"
        at = in_cell(long, c, c["widest"])
        pairs = select(at, "acc_merged", method="none")["pair"].nunique()
        dist = select(at[at["layer"].isna()], "init_distance")["value"].mean()
        acc = select(at, "train_acc")["value"].min()
        lines.append(f"| {arm} | {c['epochs']:g} | {c['weight_decay']:g} | {c['init_scale']:g} | {c['D']:.3g} | "
                     f"{short_fraction(c['shrinkage'])} | {c['widest']:g} ({pairs}) | {dist:.2f} | {acc:.3f} |")
    return "\n".join(lines)


def reference_rows(page: Page, show: bool) -> tuple[dict[str, list[ClaimResult]], dict[str, pd.DataFrame],
                                                   dict[str, str], Any, dict[str, str]]:
    """Return the page's committed reference runs scored (``show``: read them at all): each one's verdict rows and
    frame by its label (:func:`lmcbook.claims.mechanism.source_label`), each verdict's state glued
    (:meth:`~lmcbook.page.Page.glue_state`); by glue key, their Markdown list (stale ones marked) and the name of the
    first one, whose figure of the arms comes last (None without one); and each one's training precision by name
    (for :func:`lmcbook.claims.mark_repeats`)."""
    rows, frames, notes, figure = {}, {}, [], None
    references = page.references() if show else {}
    for name, (frame, prov) in references.items():
        label = claims.mechanism.source_label(str(frame["dataset"].iloc[0]), name, DATASET_SHORT)
        rows[label] = claims.page_claims(page.name, frame)
        for r in rows[label]:
            r.source = name
            page.glue_state(r)
        frames[label] = frame
        figure = figure or plots_width.plot_mechanism_width(frame, label)
        stale = reference.stale_note(prov)
        notes.append(f"- {reference.describe(name, prov)}." + (f" **{stale}**" if stale else ""))
    texts = {"references": "\n".join(notes) or "No reference run is committed for this page.",
             "precision_check": reference.precision_check(references),
             "ref_figure_name": f"`{next(iter(references))}`" if references else "(none)"}
    return rows, frames, texts, figure, {name: reference.precision_of(prov) for name, (_, prov) in references.items()}


def threshold_words() -> dict[str, str]:
    """Return the thresholds the page's prose names, by glue key, as the prose writes them."""
    return {"confidence": f"{CONFIDENCE:.0%}", "acted_max": f"{DECAY_ACTED_MAX:.0%}",
            "converged_acc": f"{CONVERGED_TRAIN_ACC:.0%}", "min_pairs": str(MIN_PAIRS),
            "min_acc_effect": f"{100 * MIN_ACC_EFFECT:g} points", "orth_fall_min": f"{ORTH_FALL_MIN:g}",
            "tie_rtol": f"{D_TIE_RTOL:.1%}", "precision_loss_margin": f"{PRECISION_LOSS_MARGIN:g} nats"}


# %% [markdown]
# The page's CSV is the frames above in long format; the verdicts of the claims it is evidence
# for are computed on it (and on each committed reference run's CSV), and they decide,
# per data set, each account of the width effect below:

# %%
long = experiments.mechanism_long(frames)  # the page's CSV, which the table, the figures and the verdicts read
label = claims.mechanism.source_label(study.dataset, None, DATASET_SHORT)
ref_rows, ref_frames, ref_texts, ref_figure, ref_precisions = reference_rows(page, study.show_references)
rows = {label: claims.page_claims(page.name, long), **ref_rows}
claims.mark_repeats([r for v in rows.values() for r in v], DATASET_SHORT,  # a reference's rows that repeat ours
                    frames={None: long, **{v[0].source: ref_frames[k] for k, v in ref_rows.items() if v}},
                    precisions={None: study.precision, **ref_precisions})
m_rows = {k: [r for r in v if r.id.startswith("M")] for k, v in rows.items()}  # the mechanism claims M1–M6
states = claims.mechanism.decide(m_rows)  # per hypothesis: supported, contradicted or undecided
pd.DataFrame(states)

# %% tags=["remove-cell"]
ref_frames = {label: long, **ref_frames}
page_numbers = claims.mechanism.mechanism_numbers(long)
page.glue_values(**page_numbers)
page.glue_markdown(**threshold_words())
page.glue_md("setup", describe_mechanism(study))
page.glue_md("cut", mechanism_cut(study))
page.glue_md("cells", mechanism_cells_markdown(long))
page.glue_figure("fig_width", plots_width.plot_mechanism_width(long, label))
page.glue_figure("fig_d", plots_width.plot_mechanism_d(ref_frames))
page.glue_md("verdicts", "\n\n".join(f"**{k}**\n\n{claims_markdown(v)}" for k, v in m_rows.items()))
page.glue_md("regime_rows", claims_markdown([r for r in rows[label] if not r.id.startswith("M")]))
page.glue_markdown(**ref_texts)
page.glue_figure("fig_width_ref", ref_figure or plots_style.placeholder("No reference run of this page is committed."))
repeated = claims.mechanism.repeated_hypotheses(m_rows)  # states that are the same runs as an earlier column's
page.glue_md("hypotheses", claims.mechanism.hypotheses_markdown(states, repeated))
conclusions = claims.mechanism.conclusion_table(m_rows, ref_frames).rename_axis("observation")
page.glue_md("conclusion_table", markdown_table(conclusions))
own_m5 = next(r for r in rows[label] if r.id == "M5")
page.choose("m5_reading", {claims.verdicts.PASS: "for", claims.verdicts.FAIL: "against"}.get(own_m5.state, "open"))
outcome, conclusion_lists = claims.mechanism.conclusion(states, repeated)
page.choose("conclusion", outcome)  # the Markdown below has one sentence per outcome
page.choose("length_reaches", "none" if not page_numbers["length_widest"] else
            "widest" if page_numbers["length_widest"] >= page_numbers["units"] else "narrower")
page.glue_values(**conclusion_lists)

# %% [markdown]
# ## The arms
#
# Every cell is a width sweep of pairs trained from independent seeds (initialisation
# and batch order differ). The *decay arm* reaches a large $D$ cheaply, with a strong
# weight decay at the quick profile's training length; the *length arm* reaches it by
# training longer; the *small-initialisation arm* shrinks the initial weights, at the
# weakest weight decay. Pairs trained for the width and control pages are the same
# runs here, loaded from the store. One row per cell:
#
# ```{glue:md} cells
# :format: myst
# ```
#
# The last columns are read at each cell's widest width. What was cut: {glue:md}`cut`.
#
# ```{glue:figure} fig_width
# :name: fig-mechanism-width
#
# Merged test accuracy at $\lambda=\frac12$ against width in each arm (means over
# pairs with their 95% bootstrap interval). Top: the decay arm, one colour per weight
# decay, plain averaging solid and averaging after weight matching dashed; the dotted
# line is the logit ensemble at the strongest weight decay. Middle: standard against
# small initial weights at the weakest weight decay. Bottom: the length arm.
# Trained: {glue:md}`setup`.
# ```
#
# ## What weight decay does at the widest width
#
# ```{glue:figure} fig_d
# :name: fig-mechanism-d
#
# Against the decay integral $D$, the decay arm's cells at each data set's widest
# width: merged accuracy (plain, after weight matching, and the ensemble); the
# orthogonality ratio $\|W_a z_b\|/\|W_a z_a\|$ (mean over layers 2 to $L$, with the
# untrained pairs'); the LEWC relative error of the plain pair and the LLFC relative
# error after weight matching, at the last hidden layer; the relative effective rank
# of the hidden-to-hidden matrices (with the untrained networks'); the relative
# stable rank of what training added, $W - W_0$; and the distance from
# initialisation. Means over pairs (over both models of a pair for per-model
# measures) with 95% bootstrap intervals. Trained (this build): {glue:md}`setup`.
# ```
#
# At {glue:text}`units` hidden units, from the smallest $D$
# ({glue:text}`d_lo:.2g`, where weight decay alone would leave {glue:text}`shrink_lo:.2f` of
# a weight) to the largest ({glue:text}`d_hi:.2g`, leaving {glue:text}`shrink_hi:.2g`):
#
# - plain merged accuracy goes from {glue:text}`acc_plain_lo:.3f` to
#   {glue:text}`acc_plain_hi:.3f`; after weight matching it is {glue:text}`acc_matched_lo:.3f`
#   and {glue:text}`acc_matched_hi:.3f`, and the logit ensemble {glue:text}`acc_ensemble_lo:.3f`
#   and {glue:text}`acc_ensemble_hi:.3f`;
# - the relative effective rank of the hidden-to-hidden matrices goes from
#   {glue:text}`rank_lo:.3f` to {glue:text}`rank_hi:.3f` (untrained networks:
#   {glue:text}`rank_untrained_lo:.3f`);
# - the LEWC error of the plain pair goes from {glue:text}`lewc_lo:.3f` to
#   {glue:text}`lewc_hi:.3f`, and the LLFC error after weight matching goes
#   from {glue:text}`llfc_matched_lo:.3f` to {glue:text}`llfc_matched_hi:.3f`. Where the latter
#   is small, the two networks, once permuted onto each other, interpolate linearly layer by
#   layer (LLFC): the signature of one solution up to a permutation, not of LEWC;
# - the distance from initialisation goes from {glue:text}`dist_lo:.2f` to
#   {glue:text}`dist_hi:.2f`, and the relative stable rank of $W - W_0$ goes
#   from {glue:text}`delta_stable_rank_lo:.3f` to {glue:text}`delta_stable_rank_hi:.3f`. Read
#   the latter with care: once weight decay has removed most of the initialisation, $W - W_0$
#   contains $-W_0$, whose rank is the random initialisation's; it reads what training added only
#   while the distance from initialisation is small.

# %% [markdown] tags=["when:m5_reading=against"]
# The orthogonality ratio goes from {glue:text}`orth_lo:.3f` to
# {glue:text}`orth_hi:.3f` (untrained pairs: {glue:text}`orth_untrained_lo:.3f`). That is
# **evidence against** the paper's chain, not for it: the chain needs the ratio to fall
# towards 0 as weight decay acts, and M5 finds no fall beyond its minimum effect,
# {glue:md}`orth_fall_min` ({glue:md}`m5_mark`).

# %% [markdown] tags=["when:m5_reading=for"]
# The orthogonality ratio goes from {glue:text}`orth_lo:.3f` to
# {glue:text}`orth_hi:.3f` (untrained pairs: {glue:text}`orth_untrained_lo:.3f`): the fall
# the paper's chain predicts, beyond M5's minimum effect of {glue:md}`orth_fall_min`
# ({glue:md}`m5_mark`).

# %% [markdown] tags=["when:m5_reading=open"]
# The orthogonality ratio goes from {glue:text}`orth_lo:.3f` to
# {glue:text}`orth_hi:.3f` (untrained pairs: {glue:text}`orth_untrained_lo:.3f`); M5 does
# not decide whether that is the fall the paper's chain predicts ({glue:md}`m5_mark`).

# %% [markdown]
# ## The verdicts
#
# Each row gives the account it tests, the fixed test, what was measured (the interval
# in brackets) and the verdict.
#
# ```{glue:md} verdicts
# :format: myst
# ```
#
# ## Real data and wider networks: the reference runs
#
# Runs too costly for this book's time budget are committed as *reference runs*:
# CSVs written by `lmcbook execute … --out`, never edited, each with a provenance file
# that names the command, the data and its checksums, the code version, the commit,
# the machine and the date. A test checks each against the results schema and its
# provenance, and the page says when a reference is stale.
#
# ```{glue:md} references
# :format: myst
# ```
#
# A reference may train in bfloat16 autocast (the runs' `precision`, part of each run's
# id), where fp32 would not fit the machine's time. The check below reads every cell that
# a bf16 reference shares with an fp32 reference of the same data set, with
# {glue:md}`min_pairs` pairs or more on the same seeds, and tests each pair's difference
# bf16 − fp32: the two precisions *agree* on a quantity when the difference's 95%
# interval lies within {glue:md}`min_acc_effect` (accuracies and barriers) or
# {glue:md}`precision_loss_margin` (the calibrated loss barrier). It names the lengths of
# training and the cells with {glue:md}`min_pairs` pairs or more that no fp32 run checks (the rows
# that read them rest on bf16 alone), and gives the plain merge's differences on the cells
# the two share with too few pairs to test.
#
# ```{glue:md} precision_check
# :format: myst
# ```
#
# ```{glue:figure} fig_width_ref
# :name: fig-mechanism-reference
#
# The same three arms on the reference run {glue:md}`ref_figure_name` (its CSV is
# committed in `results/`). Trained: as its provenance, above, records.
# ```
#
# ## The earlier regime rows
#
# The scoreboard's *long* rows score W1, W6, W6 (update) and W7 on the length arm's longest runs;
# W7's *short* row reads the decay arm, at the widest width where weight decay has acted
# (the width pages' own runs are too short for that); and R1 and R2 test the first and last
# links of the paper's chain across every standard-initialisation cell, at the widest width
# trained in all of them:
#
# ```{glue:md} regime_rows
# :format: myst
# ```
#
# ## Conclusion
#
# Which account each data set supports, read off the verdicts above (a hypothesis is
# *undecided* when the rows it rests on are inconclusive or n/a; H4 compares this build's
# digits with the MNIST references, and is decided only where they agree on P):
#
# ```{glue:md} hypotheses
# :format: myst
# ```
#
# **Which account explains which observation**, per data set, chosen from the same
# verdicts; an alternative whose test fails, by its equivalence margin or otherwise, is
# *refuted*, and the last row says what no account explains:
#
# ```{glue:md} conclusion_table
# :format: myst
# ```

# %% [markdown] tags=["when:conclusion=contradicted"]
# **In one sentence:** on {glue:text}`against_sets`, once weight decay has acted, plain
# averaging does not merge wide networks as the paper says it does. Alternatives the
# data support: {glue:text}`alternatives`. Data sets on which the verdicts do not
# decide: {glue:text}`open_sets`.

# %% [markdown] tags=["when:conclusion=supported"]
# **In one sentence:** on {glue:text}`for_sets`, the data support the paper's account:
# once weight decay has acted, wide networks merge without permutations. Data sets on
# which the verdicts do not decide: {glue:text}`open_sets`.

# %% [markdown] tags=["when:conclusion=mixed"]
# **In one sentence:** the data support the paper's account on {glue:text}`for_sets` and
# contradict it on {glue:text}`against_sets`: whether weight decay makes wide networks
# mergeable without permutations depends on the data.

# %% [markdown] tags=["when:conclusion=undecided"]
# **In one sentence:** on {glue:text}`open_sets`, the verdicts do not decide between
# the paper's account and the alternatives.

# %% [markdown]
# **What this rests on.** M1 reads one cell: the largest $D$ at
# {glue:text}`units` hidden units, reached in {glue:text}`epochs_hi:g` epochs at weight
# decay {glue:text}`wd_hi:g`; M2 compares it with the smaller-$D$ cells at that width.

# %% [markdown] tags=["when:length_reaches=narrower"]
# The cells that reach a large $D$ by training longer at a weaker weight decay stop at
# {glue:text}`length_widest` hidden units, so whether equal $D$ reached that way merges
# as badly at the widest width is not tested by this build's runs (the committed long
# reference runs above test it at their widest width: their M1 and M6 rows); where the two
# routes meet here, M6 compares them: {glue:md}`m6_mark`.

# %% [markdown] tags=["when:length_reaches=widest"]
# The cells that reach a large $D$ by training longer at a weaker weight decay reach the
# same width; M6 compares the two routes at equal $D$: {glue:md}`m6_mark`.

# %% [markdown] tags=["when:length_reaches=none"]
# No cell reaches a large $D$ by training longer, so these runs cannot say whether the
# route to $D$ matters.

# %% tags=["remove-input"]
page.save(long)
page.glue_verdict("m5", "m5_mark")
page.glue_verdict("m6", "m6_mark")
page.provenance()
