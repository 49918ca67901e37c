# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # lmcbook: merging neural networks, reproduced
#
# Two ICLR 2026 papers on merging networks by averaging their weights, reproduced figure
# by figure: the **width paper** {cite}`ito2026width` (wide networks merge without
# permutations once the merged model's temperature is refitted) and the **noise paper**
# {cite}`zhang2026noise` (the merging gain peaks at an intermediate noise scale
# $S = \eta / (B(1-\mu))$). Every number on this page was computed before the book was
# rendered, and each line below links to its evidence.
#
# ```{glue:md} findings
# :format: myst
# ```
#
# Each line is a claim's row on the largest data set it was scored on, linked to its
# evidence; among those rows, the long training regime first (weight decay has acted
# there), then a test fixed before its results, a reference run before this build, a
# grid's own protocol before its variants. Its last column counts all the claim's rows,
# the {glue:text}`n_repeats` repeats of earlier runs left out; the scoreboard ({doc}`claims`)
# has all {glue:text}`n_board_rows`.
#
# ```{glue:figure} fig_headline
# :name: fig-headline
#
# **The width paper's headline.** Accuracy of the merged model $\theta(\tfrac12)$ of two
# independently trained networks against width, beside the mean of the two networks
# themselves and their logit ensemble (error bars span min to max over pairs). Trained: {glue:md}`setup`.
# The page *Merged accuracy against width* has the details.
# ```
#
# ```{glue:figure} fig_noise_headline
# :name: fig-noise-headline
#
# **The noise paper's headline.** Merging gain over the η × B grid of the committed
# reference run {glue:md}`noise_headline_source` ({glue:md}`noise_headline_data`), from
# top to bottom against η (a line per $B$), against $B$ (a line per η) and against the
# noise scale $S$ (every pair, with the quadratic fit on $\log_{10} S$); grey crosses are
# cells the rule excluded. Trained: {glue:md}`noise_headline_setup`. The page
# {doc}`noise_scale` has this build's grid and every reference.
# ```
#
# ```{include} build_info.md
# ```

# %% tags=["parameters"]
profile = "quick"  # smoke, quick or paper

# %% tags=["remove-cell"]
# The landing page's imports, and its own numbers and words: the width pages' headline, the scoreboard's counts,
# the noise rows.
import pandas as pd

from lmcbook import claims, plots_noise, plots_style, plots_width, reference
from lmcbook.claims import block_counts, board_results, deciding_number, id_order, state_of, w8_numbers
from lmcbook.claims.mechanism import (
    closest_barrier,
    largest_d_cell,
    repeated_hypotheses,
    short_merge_words,
    source_label,
)
from lmcbook.claims.noise import (
    PROTOCOL_WORDS,
    claim_n8,
    claim_n9,
    grid_protocol,
    noise_claims,
    noise_pairs,
    rule_sensitivity,
)
from lmcbook.claims.thresholds import (
    ACC_BARRIER_MAX,
    CAL_BARRIER_MAX,
    DECAY_ACTED_MAX,
    DECAY_IDLE_MIN,
    MIN_PAIRS,
    NOISE_MIN_EFFECT,
    PAPER_MLP_ACC_BARRIER,
)
from lmcbook.claims.verdicts import BLOCK_CODES, BOOK, FAIL, MARKS, NA, PAPER, PASS
from lmcbook.data import DATASET_SHORT
from lmcbook.experiments_noise import describe_noise, noise_map_summary, noise_verdict_table
from lmcbook.page import Page, open_page, study_of
from lmcbook.schema import markdown_table, select
from lmcbook.stats import cell_stats
from lmcbook.studies import describe_study, part_of, regime_table


def headline_numbers(acc: pd.DataFrame, bar: pd.DataFrame) -> dict[str, float]:
    """Return the width pages' numbers the landing page quotes, by glue key (``acc``, ``bar``: the CSVs of
    width_accuracy and loss_barrier_calibration): merged and ensemble accuracy, the raw and calibrated midpoint loss
    barriers, the accuracy barrier and the logit norm ratio (means over pairs) at the narrowest and widest width,
    beside the LEWC prediction 2^(1−L) and the paper's thresholds."""
    merged = cell_stats(acc, "acc_merged")["mean"]
    narrow, wide = merged.index.min(), merged.index.max()
    depth = int(select(bar, "logit_norm_ratio")["depth"].iloc[0])
    return {"n_narrow": int(narrow), "n_wide": int(wide), "acc_narrow": merged[narrow], "acc_wide": merged[wide],
            "ens_wide": cell_stats(acc, "acc_ensemble").loc[wide, "mean"],
            "cal_wide": cell_stats(bar, "loss_barrier_cal_mid").loc[wide, "mean"],
            "raw_wide": cell_stats(bar, "loss_barrier_mid").loc[wide, "mean"],
            "norm_wide": cell_stats(bar, "logit_norm_ratio").loc[wide, "mean"], "norm_pred": 2.0 ** (1 - depth),
            "L": depth, "acc_barrier_wide": 100 * cell_stats(acc, "acc_barrier").loc[wide, "mean"],
            "acc_barrier_max": 100 * ACC_BARRIER_MAX, "cal_barrier_max": CAL_BARRIER_MAX,
            "acc_barrier_paper": 100 * PAPER_MLP_ACC_BARRIER}


def board_numbers(board: pd.DataFrame) -> tuple[dict[str, int], dict[str, str]]:
    """Return what the landing page quotes from the scoreboard (``board``: the claims page's CSV; this build's rows,
    not the references'), by glue key: the counts of the papers' and the book's rows and of their verdicts, and of
    the width rows read in the long regime; and in words, the long rows' marks beside the short ones', the marks of
    R1, R2, W11 and W12, the noise rows' marks and the width rows that fail in the short regime."""
    own = board[board["source"].isna()] if "source" in board.columns else board
    flags = own.fillna({"regime": "none"}).pivot_table(index=["method", "regime"], columns="metric", values="value")
    main = flags[flags["claim_block"] == BLOCK_CODES[PAPER]]  # the papers' claims
    long_rows = main.xs("long", level="regime")
    counts = block_counts(board_results(own))  # each block counted on its own
    paper, book = counts[PAPER], counts[BOOK]
    noise = [state_of(board, c) for c in main.index.get_level_values("method").unique() if c.startswith("N")]
    short = main.xs("short", level="regime") if "short" in main.index.get_level_values("regime") else main.iloc[:0]
    failing = sorted((c for c in short.index if state_of(board, c, "short") == FAIL), key=id_order)
    every = block_counts(board_results(board))[PAPER]  # this build and every reference together
    numbers = {"fixed_before_pass": every["fixed_before_pass"], "fixed_before_fail": every["fixed_before_fail"],
               "fixed_before_inconclusive": every["fixed_before_inconclusive"],
               "fixed_before_na": every["fixed_before_na"],
               "n_long": len(long_rows), "n_long_pass": int(long_rows["claim_passed"].sum()),
               "paper_rows": paper["rows"], "paper_pass": paper["pass"], "paper_fail": paper["fail"],
               "paper_inconclusive": paper["inconclusive"], "paper_na": paper["na"], "book_rows": book["rows"],
               "book_pass": book["pass"], "n_noise_rows": len(noise)}
    words = {"long_rows": "; ".join(f"{c} {MARKS[state_of(board, c, 'long')]} (short: "
                                    f"{MARKS[state_of(board, c, 'short')]})" for c in long_rows.index) or "none",
             "r1_mark": MARKS[state_of(board, "R1")], "r2_mark": MARKS[state_of(board, "R2")],
             "w11_mark": MARKS[state_of(board, "W11", "short")], "w12_mark": MARKS[state_of(board, "W12", "short")],
             "noise_rows": ", ".join(f"{noise.count(s)} {MARKS[s]}" for s in MARKS if noise.count(s)) or "none",
             "short_failing": ", ".join(failing) or "none"}
    return numbers, words


def noise_words(page: Page) -> dict[str, str]:
    """Return, by glue key, the noise paper's results as Markdown tables: each committed noise reference run's marks
    (:func:`noise_verdict_table`) and the claims they read, and each regime map's summary, this build's and every
    committed one's (:func:`lmcbook.experiments_noise.noise_map_summary`)."""
    refs = {}
    for name, (frame, _) in {**page.references("noise_scale"), **page.references("noise_components")}.items():
        scale, comp = (frame, None) if reference.get(name).notebook == "noise_scale" else (None, frame)
        refs[f"`{name}` ({DATASET_SHORT[reference.dataset(name)]})"] = (
            noise_claims(scale, comp) + ([] if scale is None else claim_n9(scale)), rule_sensitivity(scale, comp))
    n2_said: dict[str, list[str]] = {}  # N2 by the grid's protocol: the linear scaling rule assumes fixed epochs
    for name, (frame, _) in page.references("noise_scale").items():
        (n2,) = (r for r in refs[f"`{name}` ({DATASET_SHORT[reference.dataset(name)]})"][0] if r.id.startswith("N2"))
        protocol = grid_protocol(noise_pairs(frame[frame["method"] == "grid"], ["lr", "batch_size"]))
        n2_said.setdefault(protocol, []).append(
            f"{n2.mark} on `{name}` ({DATASET_SHORT[reference.dataset(name)]}"
            + (f", {100 * n2.values['estimate']:+.2f} [{100 * n2.values['lo']:+.2f}, {100 * n2.values['hi']:+.2f}] "
               "points per decade of B" if "lo" in n2.values else "") + ")")
    n8_said = []
    for name, (frame, _) in page.references("noise_regime").items():  # N8 where a map annealed children
        n8 = claim_n8(frame)
        if n8.state != NA:
            label = f"`{name}` ({DATASET_SHORT[reference.dataset(name)]})"
            refs[label] = ([n8], None)
            n8_said.append(f"on {label}, {n8.mark}: {n8.measured}")
    maps = {"this build": page.read_csv("noise_regime"),
            **{f"`{n}`": f for n, (f, _) in page.references("noise_regime").items()}}
    claims_said = {r.id: r.statement.rstrip(".") for rows, _ in refs.values() for r in rows}
    return {"n8_words": "; ".join(n8_said) or "no reference run of it is committed yet",
            "n2_protocol_words": "; ".join(f"at {PROTOCOL_WORDS[p]}: {', '.join(said)}" for p, said in
                                           sorted(n2_said.items())) or "no grid reference run is committed",
            "noise_ref_rows": markdown_table(noise_verdict_table(refs)) if refs else "No noise reference run is "
            "committed.", "noise_map": markdown_table(noise_map_summary(maps)),
            "noise_claim_names": "; ".join(f"{cid}: {s}" for cid, s in sorted(claims_said.items(),
                                                                             key=lambda kv: id_order(kv[0])))
            or "none"}


# %% tags=["remove-cell"]
page, study = open_page("overview", globals())
acc = page.read_csv("width_accuracy")
bar = page.read_csv("loss_barrier_calibration")
board = page.read_csv("claims")
mech = page.read_csv("mechanism")
own_label = source_label(study_of("mechanism").dataset, None, DATASET_SHORT)
mech_refs = {source_label(str(f["dataset"].iloc[0]), n, DATASET_SHORT): (f, p)
             for n, (f, p) in page.references("mechanism").items()}
mech_frames = {own_label: mech, **{k: f for k, (f, _) in mech_refs.items()}}
low = {k for k, (_, p) in mech_refs.items() if p.get("params", {}).get("precision", "fp32") != "fp32"}

# %% tags=["remove-cell"]
summary = acc[acc["lam"].isna() & acc["metric"].str.startswith("acc")]
summary = summary.pivot_table(index=["hidden_units", "pair"], columns="metric", values="value")
summary = summary.reset_index()
page.glue_figure("fig_headline", plots_width.plot_width_accuracy(summary))
# the findings: per paper, each headline claim on one line, from the scoreboard (this build's CSVs and the committed
# reference runs, repeats left out): the claim's row on the largest data set; among those, the long training regime
# first (weight decay has acted there), a test fixed before its results first, a reference run before this build's,
# a grid's own protocol before its variants, then by the reference's name; the last column counts every row of it
HEADLINES = {"The width paper": ["W1", "W2", "W3", "W11", "M1"],
             "The noise paper": ["N1", "N2", "N3", "N4", "N5", "N6", "N7"],
             "The book's own question": ["N8"]}
LARGEST_FIRST = ["mnist", "mnist_standin", "fashion_mnist", "mnist1d", "digits"]
VARIANTS = ("-epochs-", "-fine-")  # the noise grid under the linear scaling rule's protocol, and its finer grid


def size_rank(dataset: str) -> int:
    return LARGEST_FIRST.index(dataset) if dataset in LARGEST_FIRST else len(LARGEST_FIRST)


def finding(of: list) -> dict[str, str]:
    r = min(of, key=lambda r: (size_rank(r.dataset), r.regime != "long", not r.fixed_before, r.source is None,
                               any(v in (r.source or "") for v in VARIANTS), r.source or ""))
    counts = {m: sum(x.state == s for x in of) for s, m in ((PASS, "✓"), (FAIL, "✗"))}
    setting = DATASET_SHORT.get(r.dataset, r.dataset) + (f", reference {r.source}" if r.source else ", this build")
    return {"claim": f"{{doc}}`{r.id} <{r.page}>`", "verdict": r.mark, "the claim": r.statement.rstrip("."),
            "deciding number": deciding_number(r), "setting": setting + (f" ({r.regime} regime)" if r.regime else "")
            + f"; test fixed {r.fixed_when}", "its rows": f"{counts['✓']} ✓, {counts['✗']} ✗ of {len(of)}"}


board_rows = claims.scoreboard(*page.scoreboard_inputs(), DATASET_SHORT)
rows = [r for r in board_rows if not r.repeats]
for r in rows:  # this build's width pages name no data set: their study's
    r.dataset = r.dataset or study_of(r.page).dataset
findings = {paper: [finding(of) for cid in ids if (of := [r for r in rows if r.id.split(" ")[0] == cid])]
            for paper, ids in HEADLINES.items()}
tables = {paper: markdown_table(pd.DataFrame(lines).set_index("claim")) for paper, lines in findings.items()}
page.glue_md("findings", "\n\n".join(f"**{paper}**\n\n{table}" for paper, table in tables.items()))
page.glue_values(n_board_rows=len(board_rows), n_repeats=len(board_rows) - len(rows))
# the noise paper's headline figure: its η × B grid on the largest data set a committed reference grid has
grids = page.references("noise_scale")
ref_name = min(grids, default=None, key=lambda n: (size_rank(str(grids[n][0]["dataset"].iloc[0])),
                                               not n.startswith("noise-scale")))
if ref_name is None:
    page.glue_figure("fig_noise_headline", plots_style.placeholder("No reference grid of the noise paper is committed."))
    page.glue_md("noise_headline_source", "(none)")
    page.glue_md("noise_headline_data", "none")
    page.glue_md("noise_headline_setup", "nothing")
else:
    ref = reference.get(ref_name)
    page.glue_figure("fig_noise_headline", plots_noise.plot_reference_grid(claims.noise.grid_pairs(grids[ref_name][0])))
    page.glue_md("noise_headline_source", f"`{ref_name}`")
    page.glue_md("noise_headline_data", DATASET_SHORT[str(grids[ref_name][0]["dataset"].iloc[0])])
    page.glue_md("noise_headline_setup", describe_noise(part_of(ref.notebook).resolve(ref.profile, ref.params), sweeps=False))
board_counts, board_words = board_numbers(board)
w8_state, w8 = w8_numbers(board)  # does the permutation matter for wide networks? (W8, the book's control)
page.choose("w8", "same" if w8_state == PASS else "open" if w8_state != FAIL
            else "better" if w8["w8_gap"] > 0 else "worse")
page.glue_values(**w8)
page.glue_md("w8_mark", MARKS[w8_state])
page.glue_values(**headline_numbers(acc, bar), **board_counts)
page.glue_markdown(**board_words, **noise_words(page), min_pairs=str(MIN_PAIRS))
page.glue_md("setup", describe_study(study_of("width_accuracy")))
page.glue_md("regime", regime_table(acc[acc["metric"].isin(["decay_integral", "decay_shrinkage",
                                                                      "init_distance"])]))
noise = study_of("noise_scale")
# N1 places an optimum from an interval on each half of the grid's pairs; N2 reads them all; N3–N7 the sweeps'
page.choose("noise_intervals", "all" if noise.grid_pairs // 2 >= MIN_PAIRS and noise.seeds >= MIN_PAIRS
            else "n2" if noise.grid_pairs >= MIN_PAIRS else "none")
page.glue_values(grid_pairs=noise.grid_pairs, sweep_pairs=noise.seeds, noise_min_effect=100 * NOISE_MIN_EFFECT)
m_rows = claims.board_rows(board, DATASET_SHORT)
outcome, conclusion_lists = claims.mechanism.conclusion(claims.mechanism.decide(m_rows), repeated_hypotheses(m_rows))
page.choose("conclusion", outcome)  # the Markdown below has one paragraph per outcome
page.glue_values(**conclusion_lists)
# the cells M1 reads, where weight decay has acted: which length and weight decay the conclusion rests on
page.glue_md("acted_cells", "; ".join(f"{k}: {largest_d_cell(f)}"
                                     + (" (in bf16; the mechanism page's precision check)" if k in low else "")
                                     for k, f in mech_frames.items()))
# and how well wide networks merge before it has acted (the smallest D): the effect the paper reports, reproduced
short_merge = short_merge_words(mech_frames, {k for k, v in m_rows.items() if any(r.id == "M4" and r.repeats for r in v)})
page.choose("short_merge_read", "none" if short_merge == "none" else "some")
page.glue_md("short_merge", short_merge)
# the paper's barrier, looked for over every cell the book and its references train
width = study_of("width_accuracy")  # its CSV leaves the one length and weight decay out of its keys: give them
width_cells = acc.assign(epochs=acc["epochs"].fillna(width.epochs), weight_decay=acc["weight_decay"].fillna(
    width.weight_decay))
closest = closest_barrier({f"{own_label}, width pages": width_cells, **mech_frames})
page.choose("barrier_side", "none" if closest is None else
            "below" if closest["barrier"] < PAPER_MLP_ACC_BARRIER else "above")
if closest is not None:
    page.glue_md("barrier_setting", closest["setting"])
    page.glue_values(barrier_cells=closest["cells"], barrier_best=100 * closest["barrier"],
                     barrier_lo=100 * closest["lo"], barrier_hi=100 * closest["hi"], barrier_pairs=closest["pairs"],
                     barrier_gap=100 * closest["distance"])
    # how far weight decay had acted there, and the smallest barrier where it had (the paper's regime)
    left = closest["weight_left"]
    page.glue_md("barrier_decay", " Its decay integral is not recorded." if left != left else
                 f" There weight decay alone would leave {left:.2f} of a weight"
                 + (": it had barely acted." if left >= DECAY_IDLE_MIN else "."))
    page.glue_md("barrier_acted", f"Among the {closest['acted_cells']} cells where it had acted (at most "
                 f"{DECAY_ACTED_MAX:g} of a weight left), the smallest barrier is "
                 f"{100 * closest['acted_barrier']:.1f} points (95% interval {100 * closest['acted_lo']:.1f} to "
                 f"{100 * closest['acted_hi']:.1f}), in {closest['acted_setting']}." if "acted_barrier" in closest else
                 "No cell where weight decay had acted records a barrier over two pairs.")

# %% [markdown] tags=["when:conclusion=contradicted"]
# **What makes merging without permutations work: not what the paper says**, by the
# book's own tests of the paper's account (the M rows of {doc}`mechanism`). On
# {glue:text}`against_sets`, in the cell of largest $D$ at the widest width, where weight
# decay has acted, plain averaging does not merge wide networks as the paper says it does.
# Alternatives the data support: {glue:text}`alternatives`. The cells this rests on:
# {glue:md}`acted_cells`: one cell per run, and the other lengths and weight decays are not
# read by it; {doc}`mechanism` says what they leave untested.

# %% [markdown] tags=["when:conclusion=supported"]
# **What makes merging without permutations work: as the paper says**, by the book's own
# tests of its account (the M rows of {doc}`mechanism`). On
# {glue:text}`for_sets`, once weight decay has acted, wide networks merge without
# permutations, in the cells of largest weight-decay integral at the widest width:
# {glue:md}`acted_cells`.

# %% [markdown] tags=["when:conclusion=mixed"]
# **What makes merging without permutations work: it depends on the data.** The data
# support the paper's account on {glue:text}`for_sets` and contradict it on
# {glue:text}`against_sets`.

# %% [markdown] tags=["when:conclusion=undecided"]
# **What makes merging without permutations work: not decided.** On
# {glue:text}`open_sets`, the verdicts do not decide between the paper's account and
# the alternatives.

# %% [markdown] tags=["when:short_merge_read=some"]
# **The width effect itself, before weight decay has acted** (the smallest weight-decay
# integral $D$ at the widest width): plain averaging reaches this share of the logit
# ensemble's accuracy (merged over ensemble, 95% interval): {glue:md}`short_merge`.

# %% [markdown] tags=["when:short_merge_read=none"]
# % no mechanism frame has a smallest-D cell where weight decay is idle and the endpoints converged

# %% [markdown]
# The page {doc}`mechanism` sets out the accounts, the runs that decide between them
# and the verdicts, on this build's digits runs and on the committed reference runs.
#
# **What this book's runs show.**
#
# - **Width.** Plain weight averaging gives {glue:text}`acc_narrow:.2f` accuracy at
#   {glue:text}`n_narrow` hidden units and {glue:text}`acc_wide:.2f` at
#   {glue:text}`n_wide`. The logit ensemble of the same two networks reaches
#   {glue:text}`ens_wide:.2f` at the widest width.
# - **Calibration.** At the widest width, refitting the merged model's temperature
#   changes the midpoint loss barrier from {glue:text}`raw_wide:.2f` to
#   {glue:text}`cal_wide:.2f` nats.
# - **Against the paper, in this setting.** At the widest width the accuracy barrier is
#   {glue:text}`acc_barrier_wide:.1f` points, where the paper reports about
#   {glue:text}`acc_barrier_paper:g` for its MLP
#   (W11, at most {glue:text}`acc_barrier_max:g` points: {glue:md}`w11_mark`), and the calibrated
#   barrier is the {glue:text}`cal_wide:.2f` nats above, not near zero (W12, at most
#   {glue:text}`cal_barrier_max:g` nats: {glue:md}`w12_mark`). The rows of this setting that fail:
#   {glue:md}`short_failing`. The paper's barrier, looked for across every setting this
#   book and its reference runs train, is below.
# - **Logit scale.** The merged logits are {glue:text}`norm_wide:.3f` times the
#   ensemble's, against LEWC's prediction of {glue:text}`norm_pred:.3f`.
# - **Training regime.** The table below gives how far weight decay acted
#   in the width runs. The page {doc}`mechanism` trains the same networks with
#   stronger weight decay and for longer, and asks whether the paper's proposed cause,
#   weight decay making the weights low-rank, is what makes merging work. R1 tests a
#   falling trend of the weights' rank as weight decay acts longer (along $D$):
#   {glue:md}`r1_mark`; R2 a rising trend of merged accuracy along $D$:
#   {glue:md}`r2_mark` (a ✗ is no rising trend). On this build's longest runs {glue:text}`n_long_pass` of the
#   {glue:text}`n_long` claims scored in both regimes pass: {glue:md}`long_rows` (the long
#   reference runs' rows are on the scoreboard, {doc}`claims`).
# - **Scoreboard**, this build's rows, in two blocks counted apart. Of the
#   {glue:text}`paper_rows` rows that test the papers' claims, {glue:text}`paper_pass` pass,
#   {glue:text}`paper_fail` fail, {glue:text}`paper_inconclusive` are *inconclusive* and
#   {glue:text}`paper_na` *n/a*. Of the {glue:text}`book_rows` rows that test the book's own
#   alternatives to them and its controls, {glue:text}`book_pass` pass: a pass there supports
#   an alternative, not a paper. Of the papers' rows whose test was fixed before its
#   results, this build and every reference run together: {glue:text}`fixed_before_pass` ✓,
#   {glue:text}`fixed_before_fail` ✗, {glue:text}`fixed_before_inconclusive` *inconclusive*
#   and {glue:text}`fixed_before_na` *n/a*. The scoreboard ({doc}`claims`) has each test and its
#   evidence, the reference runs' rows, which of those ✓ would turn at a nearby threshold,
#   and the diagnostics that neither block counts.
#
# **Training regime** of the width runs:
#
# ```{glue:md} regime
# :format: myst
# ```

# %% [markdown] tags=["when:w8=better"]
# **Permutations still matter here.** At the widest width of the width runs, weight
# matching merges better than a random permutation of the same pair by
# {glue:text}`w8_gap:.1f` points (95% interval {glue:text}`w8_lo:.1f` to
# {glue:text}`w8_hi:.1f`; W8, the book's control, allows ±{glue:text}`w8_tol:g`):
# {glue:md}`w8_mark`. In this setting, wide networks do not yet make the permutation
# irrelevant, as the width paper's title asks ({doc}`random_permutation`).

# %% [markdown] tags=["when:w8=worse"]
# **Permutations matter here, the wrong way.** At the widest width of the width runs,
# weight matching merges worse than a random permutation of the same pair, by
# {glue:text}`w8_drop:.1f` points (95% interval {glue:text}`w8_drop_lo:.1f` to
# {glue:text}`w8_drop_hi:.1f`; W8, the book's control, allows ±{glue:text}`w8_tol:g`):
# {glue:md}`w8_mark` ({doc}`random_permutation`).

# %% [markdown] tags=["when:w8=same"]
# **Permutations do not matter here.** At the widest width of the width runs, weight
# matching merges within ±{glue:text}`w8_tol:g` points of a random permutation of the same
# pair ({glue:text}`w8_gap:.1f` points, 95% interval {glue:text}`w8_lo:.1f` to
# {glue:text}`w8_hi:.1f`; W8, the book's control): {glue:md}`w8_mark`, as the width paper's
# title suggests ({doc}`random_permutation`).

# %% [markdown] tags=["when:w8=open"]
# **Do permutations matter here?** W8, the book's control at the widest width of the
# width runs, does not decide ({glue:md}`w8_mark`; {doc}`random_permutation`).

# %% [markdown] tags=["when:barrier_side=above"]
# **The paper's barrier, looked for.** Of the {glue:text}`barrier_cells` cells that this
# book's width and mechanism pages and its committed reference runs train (a cell that two
# of them train counts once for each), the one whose accuracy barrier comes closest
# to the width paper's, about {glue:text}`acc_barrier_paper:g` points for its wide MLP, is
# {glue:md}`barrier_setting`, with {glue:text}`barrier_best:.1f` points (95% interval
# {glue:text}`barrier_lo:.1f` to {glue:text}`barrier_hi:.1f`, {glue:text}`barrier_pairs`
# pairs), {glue:text}`barrier_gap:.1f` points above the paper's.{glue:md}`barrier_decay`
# {glue:md}`barrier_acted`

# %% [markdown] tags=["when:barrier_side=below"]
# **The paper's barrier, looked for.** Of the {glue:text}`barrier_cells` cells that this
# book's width and mechanism pages and its committed reference runs train (a cell that two
# of them train counts once for each), the one whose accuracy barrier comes closest
# to the width paper's, about {glue:text}`acc_barrier_paper:g` points for its wide MLP, is
# {glue:md}`barrier_setting`, with {glue:text}`barrier_best:.1f` points (95% interval
# {glue:text}`barrier_lo:.1f` to {glue:text}`barrier_hi:.1f`, {glue:text}`barrier_pairs`
# pairs), {glue:text}`barrier_gap:.1f` points below the paper's.{glue:md}`barrier_decay`
# {glue:md}`barrier_acted`

# %% [markdown] tags=["when:barrier_side=none"]
# **The paper's barrier, looked for.** No setting of this build or its reference runs
# recorded an accuracy barrier over two pairs or more, so the book cannot say how close
# it comes to the paper's {glue:text}`acc_barrier_paper:g` points.

# %% [markdown]
# **The noise paper.** Its claims are about the size of a merging gain, so the book first
# maps where a gain exists at all ({doc}`noise_regime`); each map's cells, by how they
# read, the setting it picks and its best gain in points (95% interval):
#
# ```{glue:md} noise_map
# :format: myst
# ```
#
# The noise pages then run the paper's claims in the setting the map picked. Its
# {glue:text}`n_noise_rows` rows exclude only failed cells, and decide from intervals over
# at least {glue:md}`min_pairs` pairs per cell, with a minimum effect of
# {glue:text}`noise_min_effect:g` points (an interval below it reads ✗: no gain of the
# paper's size): {glue:md}`noise_rows`. Every gain they read is over children trained at a
# constant rate. The book's own row N8 asks whether merging gains more than annealing
# gives: two more children of each parent whose learning rate decays to zero from the
# spawn; N9 asks whether the gain peaks inside the stable range or at its edge.
#
# **Merging against annealing (N8).** {glue:md}`n8_words`. The paper's merging gains are
# measured over children that keep a constant rate; N8 asks whether merging them beats
# annealing the same children instead. At the best η its reading says how much of
# annealing's gain the merge recovers; at smaller η, where annealing cuts short children
# that are still undertrained, its across-η list shows where merging does better.
#
# **The batch size at fixed $S$ (N2).** The linear scaling rule, by which $S$ alone would
# say what $B$ does, compares runs that see as many examples. The committed grids, by how
# long their runs were: {glue:md}`n2_protocol_words`.

# %% [markdown] tags=["when:noise_intervals=none"]
# With {glue:text}`grid_pairs` pair(s) per cell of the grid and {glue:text}`sweep_pairs` per
# cell of the component sweeps, fewer than the {glue:md}`min_pairs` an interval reads,
# this profile's noise study can decide no interval row.

# %% [markdown] tags=["when:noise_intervals=n2"]
# With {glue:text}`grid_pairs` pairs per cell of the grid, this profile's noise study has
# N2's intervals, and N1 can read an absence but not place an optimum (that takes
# {glue:md}`min_pairs` pairs on each half); with {glue:text}`sweep_pairs` per cell of the
# component sweeps, N3–N7 cannot decide. The reference runs below can.

# %% [markdown] tags=["when:noise_intervals=all"]
# With {glue:text}`grid_pairs` pairs per cell of the grid and {glue:text}`sweep_pairs` per
# cell of the component sweeps, this profile's noise study has the pairs every interval
# row needs.

# %% [markdown]
# Where a noise row is *n/a* or *inconclusive*, this build's runs neither confirm nor
# refute the paper; the pages {doc}`noise_scale` and {doc}`noise_components` say why.
# The committed noise reference runs' verdicts, and those that move as the rule's
# threshold rises:
#
# ```{glue:md} noise_ref_rows
# :format: myst
# ```
#
# The claims: {glue:md}`noise_claim_names`. The noise pages show the reference runs and
# all their cells.
#
# ## How to read this book
#
# - **{doc}`claims`**: every claim, its test, the measured number, ✓ or ✗.
# - **{doc}`../methods`**: every quantity defined, including the choices the papers
#   leave open.
# - **Width and linear mode connectivity**, **Why width works** and **Controls**: the
#   width paper.
# - **How the optimizer shapes merging**: the noise paper.
# - **Using lmcbook on your own models**: a tutorial, the explorer and the API
#   reference.
# - **{doc}`../building`**: the run store, the caches, the profiles, and how to rerun
#   any page with other parameters.
#
# Each page ends with the command that reproduces it, for example
# `lmcbook execute --only width_accuracy -p widths "[0.5, 2]"`. Trained models are
# kept in a content-addressed store, so a rerun that changes only what is measured
# trains nothing.

# %% tags=["remove-input"]
page.save(summary=(summary, ["acc_merged", "acc_ensemble", "acc_endpoints"], ["hidden_units"]))
page.provenance()
