"""The claims: every claim's test, its verdict, and the scoreboard built from them.

Each test reads only the long-format CSVs the pages save (their schema: :mod:`lmcbook.schema`) and decides from the
statistics of :mod:`lmcbook.stats`. A row registers itself where it is defined (``@claim("W1",
page="width_accuracy")``, :func:`lmcbook.claims.verdicts.claim`); this module, the board, reads the register: a page
glues ``page_claims(its name, the frame it saved)``, and the claims page runs :func:`scoreboard` on the saved CSVs and
the committed reference runs, so a verdict is computed once, by the same function, wherever it shows. The package's
layout is its index:

- :mod:`lmcbook.claims.thresholds`: every constant a verdict reads, in one commented table (its value, the rows it
  serves, whether it was fixed before or after their results, and by which commit);
- :mod:`lmcbook.claims.verdicts`: the machinery every family shares (the four states, :class:`ClaimResult
  <lmcbook.claims.verdicts.ClaimResult>`, the register);
- :mod:`lmcbook.claims.width`: the width paper's claims W1–W15;
- :mod:`lmcbook.claims.mechanism`: M1–M6, the training-regime rows R1–R2, and which account they support;
- :mod:`lmcbook.claims.noise`: the noise paper's claims N1–N7, the book's N8–N9 and the regime map;
- this module: ``PAGE_CLAIMS`` (the pages and their registered claims), a page's verdicts (:func:`page_claims`),
  the scoreboard and the claims page's CSV written and read back, and W8's reading of it for the landing page
  (:func:`w8_numbers`).

Adding a row touches its family's module, its threshold, its page and its test; nothing re-exports a row.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..schema import (
    ACC_MERGED,
    CLAIM_BLOCK,
    CLAIM_CONTROL,
    CLAIM_ESTIMATE,
    CLAIM_HI,
    CLAIM_LO,
    CLAIM_PASSED,
    CLAIM_REPEATS,
    CLAIM_STATE,
    CLAIM_THRESHOLD,
    DECAY_INTEGRAL,
    select,
)
from ..stats import Interval
from . import mechanism, noise, thresholds, verdicts, width  # noqa: F401 (each family registers its rows)
from .mechanism import source_label
from .thresholds import RHO_MIN
from .verdicts import (
    BLOCK_CODES,
    BOOK,
    DIAGNOSTIC,
    FAIL,
    INCONCLUSIVE,
    MARKS,
    NA,
    PAPER,
    PLAIN,
    STATE_CODES,
    ClaimResult,
    Registered,
    _dataset,
    _in_regime,
    chance_passes,
)


def id_order(cid: str) -> tuple[int, int, str]:
    """Return the sort key of a claim id: W, R, M, N rows in that order, then by number (W2 before W11)."""
    return "WRMN".index(cid[0]), int("".join(c for c in cid.split(" ")[0][1:] if c.isdigit())), cid


def _pages() -> dict[str, tuple[Registered, ...]]:
    """Return every page with claims and its registered claims, both in the order of the claims' ids
    (:func:`id_order`: W, R, M, N rows, then by number), whatever order the families were imported in."""
    out: dict[str, tuple[Registered, ...]] = {}
    for entry in sorted(verdicts.REGISTER.values(), key=lambda e: id_order(e.name)):
        out[entry.page] = (*out.get(entry.page, ()), entry)
    return out


#: Every page with claims, and its registered claims (the scoreboard sorts its rows by source and id).  A page glues
#: ``page_claims(its name, the frame it saved)``; the scoreboard reads the same functions on the saved CSVs.
PAGE_CLAIMS: dict[str, tuple[Registered, ...]] = _pages()


def page_claims(page: str, frame: pd.DataFrame) -> list[ClaimResult]:
    """Return the verdicts of the claims whose evidence is ``page``, computed on that page's long frame.

    Width-paper rows that do not set their regime read the profile's own runs: the short regime.
    """
    if page not in PAGE_CLAIMS:
        raise ValueError(f"page={page!r} has no claims: expected one of {sorted(PAGE_CLAIMS)}")
    rows, read = [], {}
    for entry in PAGE_CLAIMS[page]:
        if entry.reads is not None and entry.reads not in read:  # what several rows read is computed once
            read[entry.reads] = entry.reads(frame)
        out = entry.function(frame if entry.reads is None else read[entry.reads])
        rows += out if isinstance(out, list) else [out]
    for r in rows:
        if r.paper == "width" and r.regime is None and r.page != "mechanism":
            _in_regime(r, frame, "short")
        if r.page == "mechanism" or r.paper == "noise":
            r.dataset = _dataset(frame)
    return rows


def _order(r: ClaimResult) -> tuple:
    return (r.source is not None, r.source or "", *id_order(r.id)[:2], r.regime == "long", r.id)


def scoreboard(frames: dict[str, pd.DataFrame], references: dict[str, pd.DataFrame] | None = None,
               precisions: dict[str | None, str] | None = None,
               short: dict[str, str] | None = None) -> list[ClaimResult]:
    """Return every claim's result, reading the pages' long frames by notebook name, then the committed reference
    runs' frames (by reference name; each scored by its own page's claims, ``source`` = the name), ordered by
    source and claim id, with the repeats marked (:func:`mark_repeats`; ``precisions``: each source's training
    precision, keyed None for this build's mechanism page; ``short``: the data sets' names as the
    book writes them, :data:`lmcbook.data.DATASET_SHORT`, for the label of what a repeat repeats).

    W1, W6 and W7 appear twice: on the profile's own runs (``regime="short"``) and on the
    mechanism page's longest length (``regime="long"``).
    """
    rows = [r for page in PAGE_CLAIMS for r in page_claims(page, frames[page])]
    for name, frame in (references or {}).items():
        if str(frame["notebook"].iloc[0]) not in PAGE_CLAIMS:  # a reference of a page with no claims (the map)
            continue
        for r in page_claims(str(frame["notebook"].iloc[0]), frame):
            r.source = name
            rows.append(r)
    own = {None: frames["mechanism"]} if "mechanism" in frames else {}  # this build's mechanism frame
    return mark_repeats(sorted(rows, key=_order), short, frames={**own, **(references or {})},
                        precisions=precisions)


#: The rows that read only a mechanism frame's shortest training length, at one width (their ``units``): W7 in the
#: short regime (the decay arm) and M4 (the smallest D, standard against small initialisation).  A test recomputes
#: them with the longer lengths removed and finds them unchanged.
SHORTEST_ONLY = frozenset({("W7", "short"), ("M4", None)})


def shortest_cells(frame: pd.DataFrame, units: float) -> dict[tuple[float, float], frozenset[int]]:
    """Return, per (weight decay, initialisation scale) cell a mechanism frame has at its shortest length and
    ``units`` hidden units, the pairs of its plain merges: the cells and seeds a
    :data:`~lmcbook.claims.SHORTEST_ONLY` row reads."""
    f = frame[(frame["metric"] == ACC_MERGED) & (frame["method"] == PLAIN)]
    f = f[(f["epochs"] == frame["epochs"].min()) & (f["hidden_units"] == units)]
    return {(round(float(wd), 12), round(float(s), 12)): frozenset(g["pair"].astype(int))
            for (wd, s), g in f.groupby(["weight_decay", "init_scale"])}


def _same_shape(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Return whether two mechanism frames share their shortest length and their networks' depth."""
    depth = [set(f["depth"].dropna().unique()) if "depth" in f else set() for f in (a, b)]
    return a["epochs"].min() == b["epochs"].min() and depth[0] == depth[1]


def _same_seeds(a: dict[tuple[float, float], frozenset[int]], b: dict[tuple[float, float], frozenset[int]]) -> bool:
    """Return whether two :func:`shortest_cells` share a cell and every cell they share has the same pairs."""
    shared = a.keys() & b.keys()
    return bool(shared) and all(a[k] == b[k] for k in shared)


def mark_repeats(rows: list[ClaimResult], short: dict[str, str] | None = None,
                 frames: dict[str | None, pd.DataFrame] | None = None,
                 precisions: dict[str | None, str] | None = None) -> list[ClaimResult]:
    """Return ``rows`` (in order) with each row that repeats an earlier one marked
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.repeats`: that row's
    :func:`~lmcbook.claims.mechanism.source_label`): the same claim and regime on the same data set, from
    another source, with the same verdict, the same interval and every other number equal (to 1e-12; a row without
    an interval is never a repeat).  A bootstrap interval over pairs is equal only over equal per-pair
    values, so such a row reads the same runs again: a long reference reuses the quick book's 60-epoch cells (the
    same specs), and its rows that read only those repeat this build's where it read them from the same store.

    With ``frames`` (each source's mechanism frame, None for this build's), a
    :data:`~lmcbook.claims.SHORTEST_ONLY` row also repeats an earlier row of the same claim, regime and data
    set from another source, read at the same width and the same D (within 1%: the same cell), where every cell
    both sources trained at that width and length has the same seeds (:func:`shortest_cells`) and both trained in
    the same precision (``precisions``; a source whose precision is not given is never a retrained repeat), at the
    same shortest length and depth: the same specs trained again, whose numbers differ
    only because a batched stack or another thread count trains a spec not bit for bit as before
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.retrained`).  A source that trained other seeds there, or in
    another precision, reads its own runs.  A repeat is shown, never counted."""
    seen: dict[tuple, ClaimResult] = {}
    for r in rows:
        n = r.numbers
        if not (np.isfinite(n["lo"]) and np.isfinite(n["hi"])):
            continue
        key = (r.id, r.regime, r.dataset, r.state)
        first = seen.setdefault(key, r)
        if first is not r and first.source != r.source and set(r.values) == set(first.values) and all(
                np.isclose(v, first.values[k], rtol=0, atol=1e-12, equal_nan=True) for k, v in r.values.items()):
            r.repeats = source_label(first.dataset, first.source, short)
    if frames:
        _mark_retrained(rows, short, frames, precisions or {})
    return rows


def _mark_retrained(rows: list[ClaimResult], short: dict[str, str] | None,
                    frames: dict[str | None, pd.DataFrame], precisions: dict[str | None, str]) -> None:
    """Mark each :data:`~lmcbook.claims.SHORTEST_ONLY` row that reads the cells and seeds an earlier source
    trained too (:func:`mark_repeats`)."""
    earlier: list[ClaimResult] = []
    for r in rows:
        if (r.id, r.regime) not in SHORTEST_ONLY or r.page != "mechanism" or r.source not in frames:
            continue
        units = r.values.get("units", float("nan"))
        for first in earlier:
            if (r.repeats is None and (first.id, first.regime, first.dataset) == (r.id, r.regime, r.dataset)
                    and first.source != r.source and first.values.get("units") == units
                    and np.isclose(first.decay_integral, r.decay_integral, rtol=0.01, atol=0)
                    and precisions.get(first.source) is not None
                    and precisions.get(first.source) == precisions.get(r.source)
                    and _same_shape(frames[first.source], frames[r.source])
                    and _same_seeds(shortest_cells(frames[first.source], units),
                                    shortest_cells(frames[r.source], units))):
                r.repeats, r.retrained = source_label(first.dataset, first.source, short), True
        if r.repeats is None:
            earlier.append(r)


BLOCK_TITLES = {PAPER: "The papers' claims", BOOK: "The book's own alternatives and controls",
                DIAGNOSTIC: "Diagnostics (shown, never counted)"}  #: each scoreboard block's heading


def scoreboard_markdown(rows: list[ClaimResult], short: dict[str, str] | None = None, own: str | None = None) -> str:
    """Return the scoreboard as MyST tables, one per block (:data:`~lmcbook.claims.BLOCK_TITLES`), each row's claim
    linking to the page with its evidence; a row of a committed reference run names it and its data set (as
    ``short`` writes it: :data:`lmcbook.data.DATASET_SHORT`), and a row of this build that records no data set (the
    width pages') shows ``own``, this build's."""
    parts, full = [], []
    for block, title in BLOCK_TITLES.items():
        some = [r for r in rows if r.block == block]
        if some:
            parts.append(f"**{title}** ({len(some)} rows)\n\n{_compact(some, short or {}, own)}")
            full.append(f"**{title}**, in full\n\n{_table(some, short or {})}")
    return "\n\n".join(parts + (["Every row in full: the statement, what was measured, the test and when its "
                                  "threshold was fixed."] if full else []) + full)


def _compact(rows: list[ClaimResult], short: dict[str, str], own: str | None = None, words_shown: int = 9) -> str:
    """Return a block's compact table: the claim (linked to its evidence page), its verdict, the statement in its
    first ``words_shown`` words (the full table follows), the data (``own`` for this build's rows that record none)
    and the number that decides it (the test's estimate and interval against its threshold, in the test's own
    units)."""
    lines = ["| claim | result | statement | data | deciding number |", "|---|---|---|---|---|"]
    for r in rows:
        label = f"{r.id} (control)" if r.control and not r.diagnostic else r.id
        words = r.statement.split()
        said = " ".join(words[:words_shown]) + (" …" if len(words) > words_shown else "")
        data = r.dataset or (None if r.source else own)
        data = short.get(data, data) if data else "—"
        data = f"{data} (`{r.source}`)" if r.source else data
        mark = f"{r.mark} (a repeat)" if r.repeats else r.mark
        cells = [f"{{doc}}`{label} <{r.page}>`", mark, said, data + (f", {r.regime}" if r.regime else ""),
                 deciding_number(r)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def deciding_number(r: ClaimResult) -> str:
    """Return the numbers that decide a row, in its test's own units, as the scoreboard's compact table and the landing
    page show them: the estimate, its 95% interval and the threshold ("—" where the interval or the threshold is
    undefined: too few pairs, or a test whose number has no threshold of its own); a two-sided tolerance reads
    "vs ±tol".  A test that also reads a trend across widths or D gives its Spearman ρ first, against the side it
    needs (``rho_needed``: ≥ RHO_MIN for a rise, ≤ −RHO_MIN for a fall, :data:`~lmcbook.claims.thresholds.RHO_MIN`),
    and one that also reads a second interval (``also_*``) gives it after the first: any part can decide the row."""
    v = r.values
    number = _interval_vs(v, "", "±" if v.get("two_sided") else "")
    also = _interval_vs(v, "also_", "")
    if number != "—" and also != "—":
        number += f"; {also}"
    if "rho" in v and np.isfinite(v["rho"]):
        need = v.get("rho_needed", float("nan"))
        side = f"{'≥' if need > 0 else '≤'} {need:+.2g}" if np.isfinite(need) else f"±{RHO_MIN:g}"
        return f"ρ {v['rho']:+.2f} vs {side}; {number}"
    return number


def _interval_vs(v: dict[str, float], prefix: str, side: str) -> str:
    """Return ``estimate [lo, hi] vs threshold`` from a row's values under ``prefix`` ("" or "also_"), the threshold
    after ``side`` ("±" for a two-sided tolerance); "—" where the interval is undefined or there is no threshold."""
    keys = [prefix + k for k in ("estimate", "lo", "hi", "threshold")]
    if not set(keys) <= v.keys():
        return "—"
    iv = Interval(v[keys[0]], v[keys[1]], v[keys[2]], 0)
    if not (np.isfinite(iv.mean) and iv.decided):
        return "—"  # no interval: no number
    return f"{iv.text('.3g')} vs {side}{v[keys[3]]:.3g}"


def _where(r: ClaimResult) -> str:
    """Return the scoreboard's note on the cell a regime row reads: its length and width where the row records them
    (W7's short and long cells can share a D and differ in both), and its D."""
    said = [f"{r.values[k]:g} {noun}" for k, noun in (("epochs", "epochs"), ("units", "units")) if k in r.values]
    if np.isfinite(r.decay_integral):
        said.append(f"D = {r.decay_integral:.3g}")
    return f" ({', '.join(said)})" if said else ""


def _table(rows: list[ClaimResult], short: dict[str, str]) -> str:
    """Return a block's full table: every column of every row (its verdict under ``verdict``)."""
    lines = ["| claim | data | regime | statement (the paper's, or the book's own) | measured here | test | "
             "threshold fixed | verdict | evidence |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        label = f"{r.id} (control)" if r.control and not r.diagnostic else r.id
        regime = "—" if r.regime is None else r.regime + _where(r)
        data = short.get(r.dataset, r.dataset) if r.dataset else "—"
        data = f"{data} (reference `{r.source}`)" if r.source else data
        whose = f"the book's own, on the {r.paper} paper" if r.block == BOOK else f"{r.paper} paper"
        mark = f"{r.mark} (a repeat, not counted)" if r.repeats else r.mark
        cells = [label, data, regime, f"{whose}: {r.statement}", r.measured_shown, r.test, r.fixed_when, mark,
                 f"{{doc}}`{r.page}`"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def block_counts(rows: Iterable[ClaimResult]) -> dict[str, dict[str, float]]:
    """Return, for the blocks that are counted (the papers' claims, the book's own rows), how many rows each has,
    how many of them reach each verdict (keys ``pass``, ``fail``, ``inconclusive``, ``na``), how many can fail
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.can_fail`) and pass among those, the chance passes among those
    (:func:`~lmcbook.claims.verdicts.chance_passes`: ``chance_expected``, ``chance_upper``), and how many were fixed
    before their results and pass among those (and, among all the block's rows fixed before, how many read ✗,
    *inconclusive* and *n/a*: ``fixed_before_fail``, ``fixed_before_inconclusive``, ``fixed_before_na``).  A repeat
    (:func:`mark_repeats`) is not counted: ``repeats`` says how many of the block's rows were left out so."""
    out = {}
    rows = list(rows)
    for block in (PAPER, BOOK):
        some = [r for r in rows if r.block == block and not r.repeats]
        live = [r for r in some if r.can_fail]
        expected, upper = chance_passes(len(live))
        out[block] = {"rows": len(some), **{s.replace("/", ""): sum(r.state == s for r in some) for s in MARKS},
                      "can_fail": len(live), "can_fail_pass": sum(r.passed for r in live),
                      "chance_expected": expected, "chance_upper": upper,
                      "fixed_before": sum(r.fixed_before for r in live),
                      "fixed_before_pass": sum(r.fixed_before and r.passed for r in live),
                      **{f"fixed_before_{s.replace('/', '')}": sum(r.fixed_before and r.state == s for r in some)
                         for s in (FAIL, INCONCLUSIVE, NA)},
                      "repeats": sum(r.block == block and bool(r.repeats) for r in rows)}
    return out


def scoreboard_long(rows: list[ClaimResult]) -> pd.DataFrame:
    """Return the scoreboard as the claims page's long frame: per row its state code, pass flag, control flag, block
    (:data:`~lmcbook.claims.verdicts.BLOCK_CODES`), D, and its numbers (the estimate its test decides on, that
    interval's ends and its threshold; a number a row does not have is left out), a repeat's flag (only on repeats:
    :func:`mark_repeats`), keyed by ``method`` (the claim id),
    ``regime``, ``dataset`` and ``source`` (a reference run's name)."""
    out = []
    for r in rows:
        n = r.numbers
        for metric, v in ((CLAIM_STATE, STATE_CODES[r.state]), (CLAIM_PASSED, float(r.passed)),
                          (CLAIM_CONTROL, float(r.control)), (CLAIM_BLOCK, BLOCK_CODES[r.block]),
                          (CLAIM_REPEATS, 1.0 if r.repeats else float("nan")),
                          (DECAY_INTEGRAL, r.decay_integral), (CLAIM_ESTIMATE, n["estimate"]), (CLAIM_LO, n["lo"]),
                          (CLAIM_HI, n["hi"]), (CLAIM_THRESHOLD, n["threshold"])):
            if np.isfinite(v):
                out.append({"notebook": "claims", "metric": metric, "value": v, "pair": 0, "method": r.id,
                            "regime": r.regime, "dataset": r.dataset, "source": r.source})
    return pd.DataFrame(out)


#: The columns of :func:`scoreboard_table`'s numbers, and the metric of claims.csv each comes from.
NUMBER_COLUMNS = {"estimate": CLAIM_ESTIMATE, "lo": CLAIM_LO, "hi": CLAIM_HI, "threshold": CLAIM_THRESHOLD}


def scoreboard_table(board: pd.DataFrame) -> pd.DataFrame:
    """Return claims.csv as one row per scoreboard row: ``claim``, ``regime``, ``dataset``, ``source``, its verdict
    (``state``), ``block``, ``repeats`` (True for a row that reads an earlier row's runs again, :func:`mark_repeats`),
    and the numeric columns ``estimate``, ``lo``, ``hi`` and ``threshold`` (NaN where the row has none), so that the
    verdicts can be plotted or filtered."""
    wide = _board_wide(board)
    missing = pd.Series(np.nan, index=wide.index)
    out = wide.reindex(columns=[k for k in ("method", "regime", "dataset", "source")]).rename(
        columns={"method": "claim"})
    out["state"] = wide[CLAIM_STATE].map({v: k for k, v in STATE_CODES.items()})
    out["block"] = wide.get(CLAIM_BLOCK, missing).map({v: k for k, v in BLOCK_CODES.items()})
    out["repeats"] = wide.get(CLAIM_REPEATS, missing).eq(1.0)
    for column, metric in NUMBER_COLUMNS.items():
        out[column] = wide.get(metric, missing)
    order = sorted(out.index, key=lambda i: id_order(out.loc[i, "claim"]))
    return out.loc[order].reset_index(drop=True)


def state_of(board: pd.DataFrame, claim: str, regime: str | None = None, source: str | None = None) -> str:
    """Return a claim's verdict read back from the claims page's CSV (``source``: a reference run's name, None for
    this build's own row)."""
    d = select(board, CLAIM_STATE, method=claim)
    d = d[d["regime"].isna()] if regime is None else d[d["regime"] == regime]
    if "source" in d.columns:
        d = d[d["source"].isna()] if source is None else d[d["source"] == source]
    if len(d) != 1:
        raise KeyError(f"claims.csv has {len(d)} rows for claim {claim!r}, regime {regime!r}, source {source!r}: "
                       "expected 1")
    return {v: k for k, v in STATE_CODES.items()}[float(d["value"].iloc[0])]


def board_results(board: pd.DataFrame) -> list[ClaimResult]:
    """Return the rows of the claims page's CSV as verdict rows: the state, regime, data set, source, and the control,
    diagnostic and repeat flags (no texts; a repeat's label reads "an earlier row")."""
    names, blocks = {v: k for k, v in STATE_CODES.items()}, {v: k for k, v in BLOCK_CODES.items()}
    out = []
    for _, row in _board_wide(board).iterrows():
        keys = {k: row.get(k) for k in ("regime", "dataset", "source")}
        out.append(ClaimResult(row["method"], "noise" if row["method"].startswith("N") else "width", "", "", "",
                               names[float(row[CLAIM_STATE])], "", control=bool(row.get(CLAIM_CONTROL, 0.0)),
                               diagnostic=blocks.get(row.get(CLAIM_BLOCK), PAPER) == DIAGNOSTIC,
                               repeats="an earlier row" if row.get(CLAIM_REPEATS, 0.0) == 1.0 else None, **keys))
    return sorted(out, key=_order)


def _board_wide(board: pd.DataFrame) -> pd.DataFrame:
    """Return the claims page's CSV with one row per scoreboard row: its keys (None where a key is empty) and one
    column per metric."""
    keys = [k for k in ("method", "regime", "dataset", "source") if k in board]
    wide = board.assign(**{k: board[k].astype(object).where(board[k].notna(), "") for k in keys})
    wide = wide.pivot_table(index=keys, columns="metric", values="value", aggfunc="first").reset_index()
    for k in keys:
        wide[k] = wide[k].astype(object).where(wide[k] != "", None)
    return wide


def board_rows(board: pd.DataFrame, short: dict[str, str] | None = None) -> dict[str, list[ClaimResult]]:
    """Return the M rows of the claims page's CSV as verdict rows (state only), grouped by
    :func:`~lmcbook.claims.mechanism.source_label`."""
    out: dict[str, list[ClaimResult]] = {}
    for r in board_results(board):
        if r.id.startswith("M"):
            out.setdefault(source_label(r.dataset, r.source, short), []).append(r)
    return out


def claims_markdown(rows: list[ClaimResult]) -> str:
    """Return verdict rows as a Markdown list: the claim, its test, what was measured and the verdict."""
    if not rows:
        return "(no rows)"
    return "\n".join(f"- **{r.id}**{f' ({r.regime})' if r.regime else ''}: {r.statement} *Test:* {r.test}. "
                     f"*Measured:* {r.measured_shown}. **{r.mark}**" for r in rows)


__all__ = ["PAGE_CLAIMS", "page_claims", "id_order", "scoreboard", "SHORTEST_ONLY", "shortest_cells", "mark_repeats",
           "BLOCK_TITLES", "scoreboard_markdown", "block_counts", "scoreboard_long", "NUMBER_COLUMNS",
           "scoreboard_table", "state_of", "board_results", "board_rows", "claims_markdown", "w8_numbers",
           "deciding_number"]


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
