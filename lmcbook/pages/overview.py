"""The overview page's numbers and words: the headline of the width pages, the scoreboard's counts, the noise rows."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from .. import reference
from ..claims import block_counts, board_results, id_order, state_of
from ..claims.mechanism import short_merge
from ..claims.noise import (
    PROTOCOL_WORDS,
    claim_n8,
    claim_n9,
    grid_protocol,
    noise_claims,
    noise_pairs,
    rule_sensitivity,
)
from ..claims.thresholds import ACC_BARRIER_MAX, CAL_BARRIER_MAX, PAPER_MLP_ACC_BARRIER
from ..claims.verdicts import BLOCK_CODES, BOOK, FAIL, MARKS, NA, PAPER, PASS, ClaimResult
from ..data import DATASET_SHORT
from ..experiments_noise import moving_rows, noise_map_summary
from ..page import Page
from ..schema import markdown_table, select
from ..stats import cell_stats


def noise_verdict_table(refs: dict[str, tuple[list[ClaimResult], pd.DataFrame | None]]) -> pd.DataFrame:
    """Return, for a landing page, one row per noise run (by label: its rows, and
    :func:`lmcbook.claims.noise.rule_sensitivity`'s table or None): each claim's mark (✗ on an interval below the
    minimum effect reads "✗ (no effect of the paper's size)"), and the claims whose verdict moves as the rule's
    threshold rises ("none" if no row moves)."""
    out = {}
    for label, (rows, sensitivity) in refs.items():
        marks = {r.id: f"{r.mark} ({ABSENT_WORDS})" if r.state == FAIL and "of the paper's size" in r.measured
                 else f"{r.mark} ({CONSTANT_RATE_WORDS})" if r.state == PASS and r.block == PAPER
                 else r.mark for r in sorted(rows, key=lambda r: id_order(r.id))}
        moving = "" if sensitivity is None else moving_rows(sensitivity)
        out[label] = {**marks, "moves with the rule's threshold": moving or "none"}
    table = pd.DataFrame.from_dict(out, orient="index").fillna("—").rename_axis("run")
    ids = sorted((c for c in table.columns if c != "moves with the rule's threshold"), key=id_order)
    return table[[*ids, "moves with the rule's threshold"]]


#: How :func:`noise_verdict_table` says a ✗ that is an absence (an interval below the minimum effect).
ABSENT_WORDS = "no effect of the paper's size"
#: How :func:`noise_verdict_table` qualifies a ✓ of the paper's rows: their gains are over children whose rate stays
#: up, and the book's N8 asks whether annealing such children gives the same (issue 49).
CONSTANT_RATE_WORDS = "against children trained at a constant rate"


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


def short_merge_words(frames: dict[str, pd.DataFrame], repeats: Iterable[str] = ()) -> str:
    """Return, in words, how well wide networks merge before weight decay has acted, per mechanism frame (by its
    label): plain merged accuracy over the logit ensemble's at the widest width in the smallest-D cell
    (:func:`lmcbook.claims.mechanism.short_merge`), its 95% interval and its pairs; "none" where no frame has that cell.
    ``repeats``: the labels whose M4, which reads that cell, repeats an earlier row (the same cells and seeds
    trained again: :func:`lmcbook.claims.mark_repeats`); each says so."""
    said: dict[str, list[str]] = {}  # by the interval's text: runs that share the cell (the same runs) are said once
    again = set(repeats)
    for label, frame in frames.items():
        iv = short_merge(frame)
        if iv.n:
            said.setdefault(f"{iv.text()} ({iv.n} pairs)", []).append(label)
    parts = []
    for text, labels in said.items():
        name = " = ".join(labels) + (" (the same runs)" if len(labels) > 1 else "")
        name += " (a repeat: an earlier one's cells and seeds, trained again)" if again & set(labels) else ""
        parts.append(f"{name}, {text}")
    return "; ".join(parts) or "none"


def w8_numbers(board: pd.DataFrame) -> tuple[str, dict[str, float]]:
    """Return W8's verdict on this build (``board``: the claims page's CSV) and the numbers the landing page quotes
    by glue key: the weight-matched merge minus the random-permutation merge at the widest width, its 95% interval
    and the tolerance, in points."""
    own = board[board["source"].isna()] if "source" in board.columns else board
    row = own[(own["method"] == "W8") & (own["regime"] == "short")].set_index("metric")["value"]
    gap, lo, hi = (100 * row.get(k, float("nan")) for k in ("claim_estimate", "claim_lo", "claim_hi"))
    return state_of(board, "W8", "short"), {
        "w8_gap": gap, "w8_lo": lo, "w8_hi": hi, "w8_tol": 100 * row.get("claim_threshold", float("nan")),
        "w8_drop": -gap, "w8_drop_lo": -hi, "w8_drop_hi": -lo}  # the same, read as how much worse matching merges
