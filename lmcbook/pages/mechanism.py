"""The mechanism page's captions, cell table, hypotheses table, reference runs and the numbers its prose quotes."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .. import reference
from ..claims import page_claims
from ..claims.mechanism import HYPOTHESES, source_label
from ..claims.thresholds import (
    CONVERGED_TRAIN_ACC,
    D_TIE_RTOL,
    DECAY_ACTED_MAX,
    MIN_ACC_EFFECT,
    MIN_PAIRS,
    ORTH_FALL_MIN,
    PRECISION_LOSS_MARGIN,
)
from ..claims.verdicts import ClaimResult
from ..data import DATASET_LABELS, DATASET_SHORT
from ..page import Page
from ..plots_width import plot_mechanism_width
from ..regime import join_and, precision_words, short_fraction
from ..schema import cell_table, in_cell, markdown_table, select
from ..stats import CONFIDENCE, FAIL, INCONCLUSIVE, PASS, t_interval, within


def describe_mechanism(study: Any) -> str:
    """Return a one-sentence Markdown description of what the mechanism study trained (for captions)."""
    cells = study.cells()
    m, t = cells[0].pair(cells[0].widths[0], 0).a.model, cells[0].pair(cells[0].widths[0], 0).a.train
    units = sorted({int(round(study.base_width * w)) for w in study.widths})
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers on "
            f"{DATASET_LABELS[study.dataset]}; SGD (peak lr "
            f"{t.lr:g}, momentum {t.momentum:g}, batch {t.batch_size}"
            f"{precision_words(t.precision)}); "
            f"{', '.join(map(str, units))} hidden units; "
            f"{len(cells)} cells of (length, weight decay, initial-weight factor); {study.seeds} pair(s) per cell and "
            f"width, {max(study.seeds, study.decisive_seeds)} in the cells that decide a verdict")


def mechanism_cut(study: Any) -> str:
    """Return one Markdown sentence saying which cells stop short of the widest width, to fit the time budget."""
    cut = study.cut_widths()
    if not cut:
        return "every cell was trained at every width"
    units = lambda ws: ", ".join(str(int(round(study.base_width * w))) for w in ws)  # noqa: E731
    mid = [d for d in study.weight_decays if d not in study.wide_decays]
    return (f"{units(cut)} hidden units were trained only in the decay arm at weight decay "
            f"{', '.join(f'{d:g}' for d in study.wide_decays)} and in the small-initialisation arm; the length arm"
            + (f" and weight decay {', '.join(f'{d:g}' for d in mid)}" if mid else "")
            + f" stop at {units(study.narrow_widths()[-1:])} units, to keep the book within its time budget (large "
            "D is reached far more cheaply by weight decay than by length)")


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


def hypotheses_markdown(states: dict[str, dict[str, str]], repeated: dict[str, dict[str, str]] | None = None) -> str:
    """Return a Markdown table of each hypothesis' state (supported, contradicted, undecided) per data set; a state
    that repeats an earlier data set's runs (``repeated``: :func:`lmcbook.claims.mechanism.repeated_hypotheses`) says
    so."""
    rep = repeated or {}

    def cell(n: str, h: str) -> str:
        state = states[n].get(h, "—")
        return f"{state} ({rep[n][h]})" if h in rep.get(n, {}) else state

    table = pd.DataFrame({n: {f"**{h}**: {text}": cell(n, h) for h, text in HYPOTHESES.items()} for n in states})
    return markdown_table(table.rename_axis("hypothesis"))


def mechanism_numbers(long: pd.DataFrame) -> dict[str, Any]:
    """Return the numbers the mechanism page quotes, by glue key: at the decay arm's widest width (``units``), in its
    smallest-D (``_lo``) and largest-D (``_hi``) cells, each measure's mean over pairs, the D values, the fraction of a
    weight that weight decay alone leaves (``shrink``), and the distance from initialisation (``dist``); the
    largest-D cell's length and weight decay
    (``epochs_hi``, ``wd_hi``), and the widest width of the cells trained longer than it (``length_widest``, 0 if
    none).  The accuracies and the distance read the whole network; LEWC, LLFC and orthogonality read λ = ½; the
    ranks read the hidden-to-hidden matrices."""
    cells = cell_table(long)
    std = cells[cells["init_scale"] == 1.0]
    widest = std["widest"].max()
    at = std[std["widest"] == widest].sort_values("D")
    lo, hi = at.iloc[0], at.iloc[-1]
    longer = std[std["epochs"] > hi["epochs"]]  # the length arm: the same weight decays, trained longer
    hidden = long[(long["layer"] > 1) & (long["layer"] < long["layer"].max())]

    def lo_hi(metric: str, frame: pd.DataFrame = long, **filters: Any) -> tuple[float, float]:
        """The metric's mean over pairs in the smallest-D and in the largest-D cell, at the widest width."""
        return tuple(float(select(in_cell(frame, cell, widest), metric, **filters).groupby("pair")["value"].mean()
                           .mean()) for cell in (lo, hi))

    acc_plain = lo_hi("acc_merged", method="none")
    acc_matched = lo_hi("acc_merged", method="weight_matching")
    acc_ensemble = lo_hi("acc_ensemble", method="none")
    orth = lo_hi("orth_ratio", method="trained", lam=0.5)
    orth_untrained = lo_hi("orth_ratio", method="untrained", lam=0.5)
    lewc = lo_hi("lewc_rel_err", method="trained", lam=0.5)
    llfc_matched = lo_hi("llfc_rel_err", method="weight_matched", lam=0.5)
    rank = lo_hi("rel_effective_rank", hidden, method="trained")
    rank_untrained = lo_hi("rel_effective_rank", hidden, method="untrained")
    delta_stable_rank = lo_hi("delta_rel_stable_rank", hidden)
    dist = lo_hi("init_distance", long[long["layer"].isna()])
    return {"units": int(widest), "d_lo": float(lo["D"]), "d_hi": float(hi["D"]),
            "shrink_lo": float(lo["shrinkage"]), "shrink_hi": float(hi["shrinkage"]),
            "epochs_hi": float(hi["epochs"]), "wd_hi": float(hi["weight_decay"]),
            "length_widest": int(longer["widest"].max()) if len(longer) else 0,
            "acc_plain_lo": acc_plain[0], "acc_plain_hi": acc_plain[1],
            "acc_matched_lo": acc_matched[0], "acc_matched_hi": acc_matched[1],
            "acc_ensemble_lo": acc_ensemble[0], "acc_ensemble_hi": acc_ensemble[1],
            "orth_lo": orth[0], "orth_hi": orth[1],
            "orth_untrained_lo": orth_untrained[0],
            "lewc_lo": lewc[0], "lewc_hi": lewc[1],
            "llfc_matched_lo": llfc_matched[0], "llfc_matched_hi": llfc_matched[1],
            "rank_lo": rank[0], "rank_hi": rank[1],
            "rank_untrained_lo": rank_untrained[0],
            "delta_stable_rank_lo": delta_stable_rank[0], "delta_stable_rank_hi": delta_stable_rank[1],
            "dist_lo": dist[0], "dist_hi": dist[1]}


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
        label = source_label(str(frame["dataset"].iloc[0]), name, DATASET_SHORT)
        rows[label] = page_claims(page.name, frame)
        for r in rows[label]:
            r.source = name
            page.glue_state(r)
        frames[label] = frame
        figure = figure or plot_mechanism_width(frame, label)
        stale = reference.stale_note(prov)
        notes.append(f"- {reference.describe(name, prov)}." + (f" **{stale}**" if stale else ""))
    texts = {"references": "\n".join(notes) or "No reference run is committed for this page.",
             "precision_check": precision_check(references),
             "ref_figure_name": f"`{next(iter(references))}`" if references else "(none)"}
    return rows, frames, texts, figure, {name: _precision(prov) for name, (_, prov) in references.items()}


def reference_settings(references: dict[str, tuple[pd.DataFrame, dict[str, Any]]]) -> str:
    """Return, in words, what each committed mechanism reference trains, read from its CSV and provenance: its data
    set, its training lengths with the widest width each reaches, and its precision where not fp32 ("none" without
    one)."""
    said = []
    for name, (frame, prov) in references.items():
        dataset = str(frame["dataset"].iloc[0])
        widest = frame.groupby("epochs")["hidden_units"].max()
        by_width: dict[int, list[str]] = {}
        for epochs, units in widest.items():
            by_width.setdefault(int(units), []).append(str(int(epochs)))
        lengths = ", ".join(f"{join_and(es)} epochs up to {u} hidden units" for u, es in by_width.items())
        low = "" if _precision(prov) == "fp32" else f", in {_precision(prov)}"
        said.append(f"`{name}` ({DATASET_SHORT.get(dataset, dataset)}, {lengths}{low})")
    return "; ".join(said) or "none"


def threshold_words() -> dict[str, str]:
    """Return the thresholds the page's prose names, by glue key, as the prose writes them."""
    return {"confidence": f"{CONFIDENCE:.0%}", "acted_max": f"{DECAY_ACTED_MAX:.0%}",
            "converged_acc": f"{CONVERGED_TRAIN_ACC:.0%}", "min_pairs": str(MIN_PAIRS),
            "min_acc_effect": f"{100 * MIN_ACC_EFFECT:g} points", "orth_fall_min": f"{ORTH_FALL_MIN:g}",
            "tie_rtol": f"{D_TIE_RTOL:.1%}", "precision_loss_margin": f"{PRECISION_LOSS_MARGIN:g} nats"}


#: What the precision check compares on a cell: (metric, method, label, scale to the shown unit, format, margin).
#: The margin is the largest paired difference bf16 − fp32 that counts as agreement (in the metric's own unit).
PRECISION_METRICS = (("acc_merged", "none", "plain merge's test accuracy (%)", 100.0, ".1f", MIN_ACC_EFFECT),
                     ("acc_merged", "weight_matching", "weight-matched merge's test accuracy (%)", 100.0, ".1f",
                      MIN_ACC_EFFECT),
                     ("acc_ensemble", "none", "ensemble's test accuracy (%)", 100.0, ".1f", MIN_ACC_EFFECT),
                     ("acc_barrier", "none", "plain merge's accuracy barrier (points)", 100.0, ".1f", MIN_ACC_EFFECT),
                     ("loss_barrier_cal_mid", "none", "calibrated loss barrier at ½ (nats)", 1.0, ".3f",
                      PRECISION_LOSS_MARGIN),
                     ("train_acc", None, "endpoints' training accuracy (%)", 100.0, ".2f", MIN_ACC_EFFECT))
_CELL = ["epochs", "weight_decay", "init_scale", "hidden_units"]
_AGREE = {PASS: "agree", FAIL: "**differ**", INCONCLUSIVE: "undecided"}


def _precision(prov: dict[str, Any]) -> str:
    return str(prov.get("params", {}).get("precision") or "fp32")


def _replicates(frame: pd.DataFrame, cell: dict[str, Any], metric: str, method: str | None) -> pd.Series:
    """Return one cell's values of ``metric`` (and ``method``) by replicate: by pair for a pair metric, by seed for a
    run's."""
    rows = in_cell(frame, cell, cell["hidden_units"])
    rows = rows[rows["metric"] == metric]
    rows = rows[rows["method"] == method] if method is not None else rows[rows["method"].isna()]
    key = "pair" if rows["seed"].isna().all() else "seed"
    return rows.groupby(key)["value"].mean()


def _pairs(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["metric"] == "acc_merged") & (frame["method"] == "none")]
    return rows[_CELL + ["pair"]].drop_duplicates()


def _shared_pairs(fp32: pd.DataFrame, low: pd.DataFrame) -> pd.Series:
    """Return, per cell both frames trained, how many pairs (the same seeds) they have in common."""
    return _pairs(fp32).merge(_pairs(low), on=_CELL + ["pair"]).groupby(_CELL).size()


def precision_cells(fp32: pd.DataFrame, low: pd.DataFrame) -> list[dict[str, Any]]:
    """Return every cell both frames trained with at least :data:`~lmcbook.claims.thresholds.MIN_PAIRS` pairs in
    common (the same seeds), the longest and widest first."""
    counts = _shared_pairs(fp32, low)
    keys = sorted(counts[counts >= MIN_PAIRS].index, key=lambda k: (-k[0], -k[3], -k[1], k[2]))
    return [dict(zip(_CELL, k)) for k in keys]


def precision_table(fp32: pd.DataFrame, low: pd.DataFrame, cell: dict[str, Any]) -> pd.DataFrame:
    """Return, on ``cell``, each quantity of :data:`PRECISION_METRICS` in fp32 and in bf16 (mean and 95% t-interval
    over the replicates both trained: the same seeds) and the verdict of an equivalence test on their paired
    difference bf16 − fp32: *agree* if its 95% t-interval lies within ± the quantity's margin, *differ* if wholly
    outside, else *undecided* (:func:`lmcbook.stats.within`)."""
    out = []
    for metric, method, label, scale, fmt, margin in PRECISION_METRICS:
        a, b = _replicates(fp32, cell, metric, method), _replicates(low, cell, metric, method)
        common = a.index.intersection(b.index)
        if common.empty:
            continue
        diff = t_interval(b[common] - a[common])
        out.append({"quantity": label, "fp32": t_interval(a[common]).text(fmt, scale),
                    "bf16": t_interval(b[common]).text(fmt, scale), "bf16 − fp32 (paired)": diff.text(fmt, scale),
                    "margin": f"±{format(scale * margin, 'g')}", "precisions": _AGREE[within(diff, margin)]})
    return pd.DataFrame(out).set_index("quantity")


def _few_pair_words(twin: str, fp32: pd.DataFrame, low: pd.DataFrame) -> str:
    """Return, for the cells a bf16 reference shares with the fp32 reference ``twin`` with fewer than
    :data:`~lmcbook.claims.thresholds.MIN_PAIRS` pairs (too few to test), the range of the plain merge's mean paired
    difference bf16 − fp32 at each length and width, in points; "" where they share none."""
    counts = _shared_pairs(fp32, low)
    by_cell: dict[tuple[int, int], list[float]] = {}
    for key in counts[counts < MIN_PAIRS].index:
        cell = dict(zip(_CELL, key))
        a, b = (_replicates(f, cell, "acc_merged", "none") for f in (fp32, low))
        common = a.index.intersection(b.index)
        by_cell.setdefault((int(cell["epochs"]), int(cell["hidden_units"])), []).append(
            100 * float((b[common] - a[common]).mean()))
    if not by_cell:
        return ""
    ranges = "; ".join(f"{e} epochs, {u} units {min(v):+.1f}" + (f" to {max(v):+.1f}" if len(v) > 1 else "")
                       for (e, u), v in sorted(by_cell.items()))
    n = sum(len(v) for v in by_cell.values())
    return (f"On the {n} cell{'s' if n != 1 else ''} it shares with `{twin}` with fewer than {MIN_PAIRS} pairs "
            f"(too few to test), the plain "
            f"merge's mean paired difference bf16 − fp32, in points, by length and width: {ranges}.")


def _cell_words(cell: dict[str, Any]) -> str:
    return (f"{cell['epochs']} epochs, weight decay {cell['weight_decay']:g}, {cell['hidden_units']} hidden units"
            + (f", initialisation ×{cell['init_scale']:g}" if cell["init_scale"] != 1 else ""))


def precision_check(references: dict[str, tuple[pd.DataFrame, dict[str, Any]]]) -> str:
    """Return the check of every committed reference trained in bf16 against an fp32 reference of the same page
    and data set, in Markdown: on every cell both trained with :data:`~lmcbook.claims.thresholds.MIN_PAIRS` pairs
    in common (:func:`precision_cells`), an equivalence test of each quantity the verdicts read on the paired difference
    (:func:`precision_table`); a sentence that says which cells agree, which differ, and which lengths of training
    no fp32 run checks."""
    parts = []
    for name, (frame, prov) in references.items():
        if _precision(prov) == "fp32":
            continue
        dataset = frame["dataset"].iloc[0]
        found = [(n, f, c) for n, (f, p) in references.items()
                 if _precision(p) == "fp32" and f["dataset"].iloc[0] == dataset for c in precision_cells(f, frame)]
        lengths = sorted({int(e) for e in _pairs(frame)["epochs"]})
        unchecked = [e for e in lengths if e not in {c["epochs"] for _, _, c in found}]
        checked = {tuple(c[k] for k in _CELL) for _, _, c in found}
        counts = _pairs(frame).groupby(_CELL).size()
        open_cells = [dict(zip(_CELL, k)) for k in counts[counts >= MIN_PAIRS].index if tuple(k) not in checked]
        left = (f"No cell of {' or '.join(map(str, unchecked))} epochs is checked (no fp32 reference of this data "
                f"set shares {MIN_PAIRS} pairs of one with it). " if unchecked else "")
        left += (f"Of the cells this reference trains with {MIN_PAIRS} pairs or more, {len(open_cells)} of "
                 f"{len(open_cells) + len(checked)} are unchecked: " + "; ".join(_cell_words(c) for c in open_cells)
                 + ": **the rows that read any of them rest on bf16 alone**." if open_cells else "")
        if not found:
            parts.append(f"`{name}` trains in {_precision(prov)}, and no fp32 reference of this page on "
                         f"{DATASET_SHORT.get(dataset, dataset)} shares {MIN_PAIRS} pairs of a cell with it: "
                         "**its precision is unchecked**.")
            continue
        for twin, fp32, cell in found:
            table = precision_table(fp32, frame, cell)
            states = set(table["precisions"])
            n = len(_replicates(fp32, cell, "acc_merged", "none").index.intersection(
                _replicates(frame, cell, "acc_merged", "none").index))
            verdict = ("every quantity's paired difference lies within its margin: on this cell the two precisions "
                       "agree" if states == {"agree"} else
                       "**" + ", ".join(q for q, v in table["precisions"].items() if v == _AGREE[FAIL])
                       + " differ beyond the margin: bf16 changes this cell's result**" if _AGREE[FAIL] in states else
                       "some paired differences are neither within nor beyond their margin: on this cell the check "
                       "is **undecided** for " + ", ".join(q for q, v in table["precisions"].items()
                                                           if v != "agree"))
            parts.append(f"**Precision check.** `{name}` trains every run in bfloat16 autocast "
                         f"(`precision=\"bf16\"`); `{twin}` trains in fp32. On a cell both train ({_cell_words(cell)}; "
                         f"{n} pairs, the same seeds), {verdict}:\n\n{markdown_table(table)}")
        few = _few_pair_words(found[0][0], found[0][1], frame)
        if few:  # a paragraph after the last table
            parts[-1] += "\n\n" + few
        if left:  # a paragraph of its own: appended to the table's last line it would read as a cell
            parts[-1] += "\n\n" + left
    return "\n\n".join(parts) or "Every reference of this page trains in fp32 (no precision check is needed)."
