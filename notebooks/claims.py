# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The claims scoreboard
#
# One row per claim of the two papers that this book tests: the paper's statement, the
# number this run measured, the test that decides it, and its verdict (✓ passes, ✗ fails,
# *inconclusive* when the fixed test cannot decide, *n/a* when the setting breaks the
# claim's assumptions), with a link to the page holding the evidence. How the rows are
# decided follows the table.

# %% tags=["parameters"]
profile = "quick"

# %% tags=["remove-cell"]
from IPython.display import Markdown

from lmcbook import claims, reference
from lmcbook.page import open_page

page, study = open_page("claims", globals())
frames = {name: page.read_csv(name) for name in claims.PAGE_CLAIMS}
references = {name: frame if "dataset" in frame else frame.assign(dataset=reference.dataset(name))  # marked by data set
              for nb in sorted({r.notebook for r in reference.REFERENCES.values()})
              for name, (frame, _) in page.references(nb).items()}

# %% [markdown]
# Every row is decided by `lmcbook.claims` from the evidence pages' CSVs and the
# committed reference runs:

# %%
rows = claims.scoreboard(frames, references)
Markdown(claims.scoreboard_markdown(rows))

# %% tags=["remove-cell"]
main_rows = [r for r in rows if not r.control and r.source is None]
ref_rows = [r for r in rows if r.source is not None]
tested = [r for r in rows if r.tested]
expected, upper = claims.chance_passes(len(tested))
page.glue_md("min_pairs", str(claims.MIN_PAIRS))
page.glue_md("min_trend", str(claims.MIN_TREND_POINTS))
page.glue_md("noise_bar", f"{claims.NOISE_FAILED_TRAIN_ACC:g}")
page.glue_md("noise_min_effect", f"{100 * claims.NOISE_MIN_EFFECT:g}")
page.glue_md("noise_scale_refs", reference.listing("noise_scale"))
page.glue_md("noise_components_refs", reference.listing("noise_components"))
page.glue_md("refs_phrase", "The committed reference run" if len(references) == 1 else
             f"The {len(references)} committed reference runs")
page.glue_values(
    n_ref_rows=len(ref_rows), n_refs=len(references), n_ref_pass=sum(r.passed for r in ref_rows),
    n_claims=len(main_rows), n_tested=len(tested), n_tested_pass=sum(r.passed for r in tested),
    chance_rate=f"{claims.CHANCE_RATE:.0%}", chance_expected=f"{expected:.1f}", chance_upper=upper,
    fixed_before_ids=", ".join(sorted(claims.FIXED_BEFORE, key=lambda c: ("WRMN".index(c[0]), int(c[1:]))))
    + "".join(f", and {' and '.join(sorted(ids))} on reference `{name}`"
              for name, ids in claims.FIXED_BEFORE_SOURCE.items() if reference.csv_path(name).exists()),
    n_fixed_before=sum(r.fixed_before for r in tested),
    n_fixed_before_pass=sum(r.fixed_before and r.passed for r in tested))
for paper in ("width", "noise"):
    page.glue(f"n_{paper}", sum(r.paper == paper for r in main_rows))
    for state in claims.MARKS:
        page.glue(f"n_{paper}_{state.replace('/', '')}", sum(r.state == state for r in main_rows if r.paper == paper))
for state in claims.MARKS:
    page.glue(f"n_{state.replace('/', '')}", sum(r.state == state for r in main_rows))

# %% [markdown]
# **In this run**, of {glue:text}`n_claims` claim rows, {glue:text}`n_pass` pass,
# {glue:text}`n_fail` fail, {glue:text}`n_inconclusive` are inconclusive and
# {glue:text}`n_na` do not apply: from the width paper {glue:text}`n_width_pass`
# ✓, {glue:text}`n_width_fail` ✗, {glue:text}`n_width_inconclusive` inconclusive and
# {glue:text}`n_width_na` n/a of {glue:text}`n_width`; from the noise paper
# {glue:text}`n_noise_pass` ✓, {glue:text}`n_noise_fail` ✗,
# {glue:text}`n_noise_inconclusive` inconclusive and {glue:text}`n_noise_na` n/a of
# {glue:text}`n_noise`. {glue:md}`refs_phrase` add
# {glue:text}`n_ref_rows` rows, of which {glue:text}`n_ref_pass` pass.
#
# **Chance passes.** The table tests {glue:text}`n_tested` rows (every row but the n/a
# ones, references and controls included), and {glue:text}`n_tested_pass` of them pass.
# If no claim had an effect behind it and each row passed by chance at a rate of
# {glue:text}`chance_rate`, about {glue:text}`chance_expected` rows would pass, and in
# 95% of such books at most {glue:text}`chance_upper`. The rate is an assumption, not a
# measurement: it is about how often a rank correlation over the width study's widths
# meets the trend threshold by chance, and how often a one-sided 95% interval clears its threshold, but
# the rows are not independent (several read the same pairs). Of the tested rows,
# {glue:text}`n_fixed_before` had their threshold fixed before their results, and
# {glue:text}`n_fixed_before_pass` of those pass.

# %% [markdown]
# ## How the rows are decided
#
# A verdict is one of four:
#
# - ✓: the test passes;
# - ✗: it fails;
# - *inconclusive*: the interval over pairs straddles the threshold, a cell it reads has
#   too few pairs, or a trend has too few points, so the fixed test cannot decide either
#   way (absence of evidence is never a ✓);
# - *n/a*: the setting does not meet the claim's assumptions, for example LEWC's
#   $\lambda^l$ scale in a network with biases or BatchNorm.
#
# **Where the tests come from.** Each is a small function in `lmcbook/claims.py`, with
# unit tests that produce every verdict on synthetic data. The evidence pages glue the
# same functions' verdicts, so a page and this table cannot disagree. The tests read
# only the CSV files that the other pages save. The *threshold fixed* column says when
# each test was set: {glue:text}`fixed_before_ids` were fixed and committed before any of
# their results were computed; the other rows' thresholds, and the grid and spawn points
# of the noise study, were set after a small pilot run or beside their first results,
# so their verdicts are weaker evidence. Conventions:
#
# - numbers are means over pairs (or models) of this profile's runs, or of the committed
#   reference run a row names;
# - ρ is Spearman's rank correlation across widths;
# - every W, R and M row reads 95% percentile-bootstrap intervals over pairs (over random
#   draws for W8, over models for the rank rows W6, W6 (update) and R1) at the width or cell the
#   row is about, and decide only with at least {glue:md}`min_pairs` in every cell their
#   interval reads (for a trend, both ends); the measured column gives the number of pairs;
# - a W or R row's trend over fewer than {glue:md}`min_trend` widths or cells, or with fewer
#   than {glue:md}`min_pairs` replicates at either end, is *inconclusive*, whatever its ρ;
#   M3 (fixed before its results) and M5 (after a pilot) read ρ over the widths or cells
#   they have together with an interval between their ends, which decides;
# - the noise rows read the same intervals, over at least {glue:md}`min_pairs` pairs in
#   every cell they read; they exclude only the cells that failed (a run diverged, or the
#   weaker child of a pair ended below {glue:md}`noise_bar` training accuracy), and say
#   how many; each has a minimum effect of {glue:md}`noise_min_effect` points: an interval
#   wholly below it reads ✗, "no gain of the paper's size in this setting";
# - the trend rows (W6, W6 (update), R1, R2) read ρ together with the interval of
#   the change between their end widths or cells (W1: over its last step of width);
# - the noise fits (N2, N6) are quadratic least squares on the kept cells' mean
#   gains, their residual variances net of pair noise, decided by an interval over pairs;
# - layers and aggregation follow the definitions page.
#
# **Two regimes.** The *regime* column says which runs a row reads, and their decay
# integral $D$ (weight decay alone would shrink the weights by $e^{-D}$ without
# momentum; the {doc}`../methods` page defines it). *Short* rows read the profile's own
# runs, the ones the other width pages show. W1, W6, W6 (update) and W7 are also scored on
# *long* rows, which read the longest runs of {doc}`mechanism`'s length arm, with the
# same fixed tests. The two rows of a claim can disagree: the paper's explanation runs
# through weight decay, and weight decay needs time to act. A width effect seen after
# a short schedule may come from networks that stayed near their initialisation,
# before the paper's mechanism has acted. R1 and R2 test the first and last links of
# the mechanism across every cell of {doc}`mechanism`.
#
# **The mechanism rows.** M1–M6 decide between the paper's account and the
# alternatives that {doc}`mechanism` sets out. Their tests were committed before the
# runs they read were trained, except the cell they share with the width pages (their
# length and weight decay), whose results were on those pages: M5 reads it, so M5 counts
# as set after a pilot. Each reads a 95% bootstrap interval over at least
# {glue:md}`min_pairs` pairs in every cell the interval reads, and each is scored on this build's digits
# runs and on every committed reference run of the mechanism page (the *data* column
# names it): the 8k/2k MNIST stand-in (MNIST's official test split, 8,000 images to
# train and 2,000 to test), at widths beyond this book's. N1–N7 are also scored on the
# noise pages' committed reference runs, with 10 pairs per cell. The grid's:
# {glue:md}`noise_scale_refs` The components': {glue:md}`noise_components_refs` Their tests,
# the rule and the minimum effect were committed before those runs were made; the setting
# they run in was picked by a ranking of the regime map that was set after the whole
# MNIST-1D map first ran ({doc}`noise_regime` says why).
#
# A ✗ is a result, not an error: it means this run, in this setting, does not
# reproduce the claim. The linked page shows the evidence and discusses why. Rows
# marked *control* test a control experiment, not a claim of the paper.

# %% tags=["remove-input"]
page.save(claims.scoreboard_long(rows))
page.provenance()
