"""What the mechanism rows conclude: the hypotheses they decide between (:data:`HYPOTHESES`), each one's state per
data set, the outcome the pages' sentences choose, the conclusion table (which account explains which observation),
and the trained cell whose accuracy barrier comes closest to the width paper's.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..schema import ACC_BARRIER, DECAY_INTEGRAL, DECAY_SHRINKAGE
from ..stats import MIN_REPLICATES, Interval, at_least, interval
from .mechanism import short_merge
from .thresholds import DECAY_ACTED_MAX, MERGED_OVER_ENSEMBLE_MIN, MIN_PAIRS, PAPER_MLP_ACC_BARRIER
from .verdicts import FAIL, PASS, PLAIN, ClaimResult

#: The hypotheses the mechanism study decides between, and the M rows each reads.
HYPOTHESES = {
    "P": "the paper's account: weight decay gives low rank, reciprocal orthogonality and LEWC, and wide networks "
         "then merge without permutations",
    "H1": "near initialisation: in short training the width effect comes from the two random initialisations",
    "H2": "permutation collapse: weight decay drives the two networks to one solution up to a permutation, so plain "
          "averaging fails at large D where weight matching succeeds, and matching gains more as D grows (M2)",
    "H3": "width truncation: with large D, plain merging keeps improving with width beyond the widths where "
          "it first fails (M3, on the decay arm's widths; M1 says whether it has recovered)",
    "H4": "data: digits' 64 input dimensions force shared features, and on 784-dimensional MNIST large D behaves "
          "as the paper says",
}
SUPPORTED, CONTRADICTED, UNDECIDED = "supported", "contradicted", "undecided"
REPEATS = "repeats"  #: a hypothesis whose deciding rows repeat an earlier data set's (:func:`repeated_hypotheses`)
#: The M rows each hypothesis' state can read (:func:`hypothesis_states`); which of them decide it depends on the
#: verdicts (:func:`deciding_rows`).
HYPOTHESIS_ROWS = {"P": ("M1", "M5"), "H1": ("M4",), "H2": ("M1", "M2"), "H3": ("M3",)}


def deciding_rows(h: str, rows: dict[str, ClaimResult]) -> list[ClaimResult]:
    """Return the rows (of ``rows``, by id) that decide hypothesis ``h``'s state as :func:`hypothesis_states` reads
    them: P contradicted rests on M1 alone (a failed M1); H2 contradicted on the rows that contradict it (a passed
    M1, a failed M2: either alone does, so where both do, both are its evidence); otherwise every row of
    :data:`~lmcbook.claims.mechanism_accounts.HYPOTHESIS_ROWS` the data set has."""
    state = {k: r.state for k, r in rows.items()}
    ids: tuple[str, ...] = HYPOTHESIS_ROWS[h]
    if h == "P" and state.get("M1") == FAIL:
        ids = ("M1",)
    elif h == "H2":
        ids = tuple(i for i, s in (("M1", PASS), ("M2", FAIL)) if state.get(i) == s) or ids
    return [rows[i] for i in ids if i in rows]


def repeated_hypotheses(rows_by_label: dict[str, list[ClaimResult]]) -> dict[str, dict[str, str]]:
    """Return, per label, the hypotheses whose deciding rows (:func:`deciding_rows`) all repeat an earlier label's
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.repeats`), each with what it repeats in words
    (:attr:`~lmcbook.claims.verdicts.ClaimResult.repeat_phrase`: "the same runs as X", or the same cells and seeds
    trained again): their state there is not a second data set's evidence."""
    out: dict[str, dict[str, str]] = {}
    for label, rows in rows_by_label.items():
        by_id = {r.id: r for r in rows}
        for h in HYPOTHESIS_ROWS:
            read = deciding_rows(h, by_id)
            if read and all(r.repeats for r in read):
                out.setdefault(label, {})[h] = read[0].repeat_phrase
    return out


def hypothesis_states(rows: Iterable[ClaimResult]) -> dict[str, str]:
    """Return, from one data set's M rows, whether each of P, H1, H2 and H3 is supported, contradicted or undecided.

    P: M1 and M5 pass (supported), M1 fails (contradicted).  H1: M4 passes or fails.
    H2: M1 fails and M2 passes (supported); M1 passes or M2 fails (contradicted).  H3: M3 passes or fails.
    Anything else (inconclusive or n/a rows) leaves the hypothesis undecided.
    """
    m = {r.id: r.state for r in rows if r.id.startswith("M")}

    def rule(sup: bool, con: bool) -> str:
        return SUPPORTED if sup else CONTRADICTED if con else UNDECIDED

    return {"P": rule(m.get("M1") == PASS and m.get("M5") == PASS, m.get("M1") == FAIL),
            "H1": rule(m.get("M4") == PASS, m.get("M4") == FAIL),
            "H2": rule(m.get("M1") == FAIL and m.get("M2") == PASS, m.get("M1") == PASS or m.get("M2") == FAIL),
            "H3": rule(m.get("M3") == PASS, m.get("M3") == FAIL)}


def data_hypothesis(digits: dict[str, str], mnist: dict[str, str] | None) -> str:
    """Return H4's state: supported when the paper's account holds on MNIST and is contradicted on digits,
    contradicted when it is contradicted on MNIST too, else undecided (and undecided without an MNIST run)."""
    if mnist is None:
        return UNDECIDED
    if mnist["P"] == SUPPORTED and digits["P"] == CONTRADICTED:
        return SUPPORTED
    return CONTRADICTED if mnist["P"] == CONTRADICTED else UNDECIDED


def source_label(dataset: str | None, source: str | None, short: dict[str, str] | None = None) -> str:
    """Return how the book names the runs of a set of rows: the data set (short name), and "this build" or the
    reference run's name."""
    name = (short or {}).get(dataset or "", dataset or "runs")
    return f"{name} (this build)" if source is None else f"{name} (reference {source})"


def decide(rows_by_label: dict[str, list[ClaimResult]]) -> dict[str, dict[str, str]]:
    """Return each data set's hypothesis states (:func:`hypothesis_states`) with H4 added: this build's digits rows
    against the MNIST rows (:func:`data_hypothesis`), which decide it only where every MNIST source gives P the same
    state (so that the order the sources come in never changes H4)."""
    states = {k: hypothesis_states(v) for k, v in rows_by_label.items()}
    datasets = {k: next((r.dataset for r in v if r.dataset), None) for k, v in rows_by_label.items()}
    sources = {k: next((r.source for r in v), None) for k, v in rows_by_label.items()}
    digits = next((states[k] for k in states if datasets[k] == "digits" and sources[k] is None), None)
    ps = {states[k]["P"] for k in states if (datasets[k] or "").startswith("mnist")}
    mnist = None if not ps else {"P": ps.pop() if len(ps) == 1 else UNDECIDED}
    for s in states.values():
        s["H4"] = data_hypothesis(digits, mnist) if digits is not None else UNDECIDED
    return states


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


CONCLUSIONS = ("contradicted", "supported", "mixed", "undecided")  #: the outcomes :func:`conclusion` chooses among


def conclusion(states: dict[str, dict[str, str]],
               repeated: dict[str, dict[str, str]] | None = None) -> tuple[str, dict[str, str]]:
    """Return which account the data support, from :func:`hypothesis_states` per data set (keyed by the data set's
    name as the book writes it): one of ``CONCLUSIONS``, and the lists the pages' sentences glue.  A hypothesis
    whose state on a data set repeats an earlier one's runs (``repeated``: :func:`repeated_hypotheses`) is left out
    there: the same runs are not a second data set's evidence.

    The outcome is ``contradicted`` when P is contradicted on some data set and supported on none, ``supported``
    in the reverse case, ``mixed`` when both occur, and ``undecided`` when P is decided nowhere.  The lists:
    ``against_sets`` and ``for_sets`` (the data sets that contradict or support P), ``open_sets`` (the others, or
    "none"), and ``alternatives``: which of H1-H3 each data set that contradicts P supports ("none of H1-H3" where
    one is refuted and none supported; "H1-H3 all undecided"; "none of H1-H3 decided by its own runs" where each is
    undecided or repeats an earlier data set's runs).
    The sentences themselves are the pages' Markdown, one per outcome (``page.choose``).
    """
    rep = repeated or {}
    own = {n: s for n, s in states.items() if "P" not in rep.get(n, {})}
    against = [n for n, s in own.items() if s["P"] == CONTRADICTED]
    for_p = [n for n, s in own.items() if s["P"] == SUPPORTED]
    rest = [n for n in own if n not in against and n not in for_p]
    groups: dict[tuple[str, ...], list[str]] = {}
    for n in against:  # data sets that support the same alternatives share a clause
        hs = tuple(h for h in ("H1", "H2", "H3") if states[n][h] == SUPPORTED and h not in rep.get(n, {}))
        own_states = [states[n][h] for h in ("H1", "H2", "H3") if h not in rep.get(n, {})]
        if not hs and CONTRADICTED not in own_states:  # none supported because none is decided: not refuted
            hs = (UNDECIDED,) if len(own_states) == 3 else (REPEATS,)
        groups.setdefault(hs, []).append(n)
    named = {(UNDECIDED,): "H1-H3 all undecided", (REPEATS,): "none of H1-H3 decided by its own runs",
             (): "none of H1-H3"}
    alternatives = "; ".join(f"{named.get(hs) or _join(list(hs))} on {_join(where)}" for hs, where in groups.items())
    outcome = ("mixed" if against and for_p else "contradicted" if against else "supported" if for_p
               else "undecided")
    return outcome, {"against_sets": _join(against) if against else "none", "for_sets": _join(for_p) if for_p
                     else "none", "open_sets": _join(rest) if rest else "none", "alternatives": alternatives or "none"}


#: The mechanism's observations, in the conclusion table's order (:func:`conclusion_table`): each one's row title and
#: its short name in the last row, :data:`~lmcbook.claims.mechanism_accounts.NONE_EXPLAINS`.
OBSERVATIONS = {
    "short": ("After short training (smallest D, weight decay idle), wide networks' plain merge over their ensemble",
              "the merge after short training"),
    "large_d": ("Once weight decay has acted (largest D), plain averaging of wide networks", "the merge at large D"),
    "width": ("At the largest D, merging as width grows", "the width trend at large D"),
    "orth": ("Reciprocal orthogonality as D grows", "the orthogonality ratio"),
}
NONE_EXPLAINS = "What no account explains"  #: the conclusion table's last row


def _explained(r: ClaimResult | None, passed: str, failed: str) -> str:
    """Return ``passed`` or ``failed`` by the row's verdict (each naming the row), else "undecided"."""
    if r is None:
        return "undecided (not scored)"
    return {PASS: f"{passed} ({r.id} ✓)", FAIL: f"{failed} ({r.id} ✗)"}.get(r.state, f"undecided ({r.id} {r.mark})")


def _near_init(short: Interval, m4: ClaimResult | None) -> str:
    """Return who explains how wide networks merge after short training: H1 when a small initialisation destroys
    it (M4 ✓); none when the merge is near the ensemble and a small initialisation leaves it intact (M4 ✗)."""
    seen = at_least(short, MERGED_OVER_ENSEMBLE_MIN, MIN_PAIRS)
    text = f"{short.text()}: " if short.n else ""
    if seen == FAIL:
        return text + "not near the ensemble"
    if seen == PASS and m4 is not None and m4.state == FAIL:
        return (text + "none: a small initialisation leaves it intact, so H1 is refuted (M4 ✗), and weight decay has "
                "not acted, so the paper's account does not reach it")
    return text + _explained(m4, "H1, near initialisation: a small initialisation destroys it",
                             "H1 is refuted: a small initialisation leaves it intact")


#: The M rows each observation of :data:`OBSERVATIONS` is read from (the short-training merge is M4's standard cell;
#: the large-D merge reads M2 only where M1 fails).
OBSERVATION_ROWS = {"short": ("M4",), "large_d": ("M1", "M2"), "width": ("M3",), "orth": ("M5",)}


def _observe(rows: dict[str, ClaimResult], short: Interval) -> dict[str, str]:
    """Return, for one data set, which account explains each observation of ``OBSERVATIONS``, from its M rows and
    :func:`short_merge`; an alternative whose row fails is *refuted*; and the observations none explains.  An
    observation whose every row repeats an earlier label's runs says so first."""
    m1 = rows.get("M1")
    large = _explained(m1, "merges near the ensemble: the paper's account", "falls short of the ensemble")
    if m1 is not None and m1.state == FAIL:
        large += "; " + _explained(rows.get("M2"), "H2, permutation collapse: the gain of weight matching grows with D",
                                   "none: H2 is refuted")
    out = {"short": _near_init(short, rows.get("M4")), "large_d": large,
           "width": _explained(rows.get("M3"), "still improves up to the widest width: H3, width truncation",
                               "no longer improves by the minimum effect: H3 is refuted"),
           "orth": _explained(rows.get("M5"), "falls: the paper's chain",
                              "falls less than the minimum effect, or rises: evidence against the paper's chain")}
    none = [OBSERVATIONS[k][1] for k, v in out.items() if "none:" in v]
    for k, ids in OBSERVATION_ROWS.items():
        if k == "large_d" and (m1 is None or m1.state != FAIL):
            ids = ("M1",)  # M2 is read only where M1 fails
        read = [rows[i] for i in ids if i in rows]
        if read and all(r.repeats for r in read):
            out[k] = f"{read[0].repeat_phrase}: {out[k]}"
    open_ = [OBSERVATIONS[k][1] for k, v in out.items() if "undecided" in v]
    if none:  # what no account explains, then, apart, what is still undecided
        said = "; ".join(none) + (f"; undecided: {_join(open_)}" if open_ else "")
    else:
        said = f"nothing refuted (undecided: {_join(open_)})" if open_ else "nothing"
    return {**out, "none": said}


def conclusion_table(rows_by_label: dict[str, list[ClaimResult]],
                     frames_by_label: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Return the mechanism's conclusion as a table: one row per observation (``OBSERVATIONS``, then
    :data:`~lmcbook.claims.mechanism_accounts.NONE_EXPLAINS`), one column per data set (the keys of ``rows_by_label``),
    each cell the account that explains it there, chosen from the verdicts of the M rows (an alternative whose test or
    equivalence branch fails is said to be refuted)."""
    cols = {label: _observe({r.id: r for r in rows if r.id.startswith("M")}, short_merge(frames_by_label[label]))
            for label, rows in rows_by_label.items()}
    return pd.DataFrame(cols).rename(index={**{k: v[0] for k, v in OBSERVATIONS.items()}, "none": NONE_EXPLAINS})


def barrier_cells(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Return one row per trained cell of the given frames (by label: the width pages' and the mechanism frames, this
    build's and the references'): its label, length, weight decay, initial-weight factor and width, the plain merge's
    accuracy barrier (max over λ; mean over pairs, its interval and pairs) and its distance from the width paper's
    barrier, PAPER_MLP_ACC_BARRIER, with the cell's decay integral ``D`` and ``weight_left``, the share of a weight
    that weight decay alone (momentum included: the ``decay_shrinkage`` metric) would leave; means over runs, NaN
    where the frame records none."""
    keys = ["epochs", "weight_decay", "init_scale", "hidden_units"]
    out = []
    for label, frame in frames.items():
        d, dec, shr = (frame[frame["metric"] == m] for m in (ACC_BARRIER, DECAY_INTEGRAL, DECAY_SHRINKAGE))
        if "method" in d:
            d = d[d["method"].isna() | (d["method"] == PLAIN)]
        d, dec, shr = (x.assign(init_scale=x["init_scale"].fillna(1.0) if "init_scale" in x else 1.0)
                       for x in (d, dec, shr))
        decay, left = (x.groupby(keys)["value"].mean() if len(x) and set(keys) <= set(x) else pd.Series(dtype=float)
                       for x in (dec, shr))
        for cell, g in d.groupby(keys):
            iv = interval(g.groupby("pair")["value"].mean())
            out.append({"label": label, **dict(zip(keys, cell)), "barrier": iv.mean, "lo": iv.lo, "hi": iv.hi,
                        "pairs": iv.n, "distance": abs(iv.mean - PAPER_MLP_ACC_BARRIER),
                        "D": float(decay.get(cell, np.nan)), "weight_left": float(left.get(cell, np.nan))})
    return pd.DataFrame(out)


def closest_barrier(frames: dict[str, pd.DataFrame]) -> dict[str, object] | None:
    """Return the cell of :func:`barrier_cells` whose accuracy barrier comes closest to the width paper's (about half
    a point), among the cells with an interval (two pairs or more), with ``setting`` (it in words) and ``cells`` (how
    many were searched), or None without any such cell.  Beside it, the smallest barrier among the cells where weight
    decay has acted (``weight_left`` ≤ DECAY_ACTED_MAX): ``acted_barrier`` (with ``acted_lo``, ``acted_hi``,
    ``acted_weight_left`` and ``acted_setting``; absent when no cell records such a D) out of ``acted_cells``."""
    cells = barrier_cells(frames)
    cells = cells[cells["pairs"] >= MIN_REPLICATES] if len(cells) else cells
    if cells.empty:
        return None
    best = cells.loc[cells["distance"].idxmin()]
    acted = cells[cells["weight_left"] <= DECAY_ACTED_MAX]
    low = acted.loc[acted["barrier"].idxmin()] if len(acted) else None
    return {**best.to_dict(), "setting": _barrier_setting(best), "cells": len(cells),
            "acted_cells": len(acted), **({} if low is None else {
                "acted_barrier": low["barrier"], "acted_lo": low["lo"], "acted_hi": low["hi"],
                "acted_weight_left": low["weight_left"], "acted_setting": _barrier_setting(low)})}


def _barrier_setting(cell: pd.Series) -> str:
    """Return a cell of :func:`barrier_cells` in words."""
    init = f", initial weights ×{cell['init_scale']:g}" if cell["init_scale"] != 1.0 else ""
    return (f"{cell['label']}: {cell['hidden_units']:g} hidden units, {cell['epochs']:g} epochs at weight decay "
            f"{cell['weight_decay']:g}{init}")
