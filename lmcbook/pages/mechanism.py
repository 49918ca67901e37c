"""The mechanism page's captions, cell table, hypotheses table and the numbers its prose quotes."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..captions import direction, markdown_table, short_fraction
from ..claims import HYPOTHESES
from ..data import DATASET_LABELS
from ..schema import cell_table, in_cell, select


def describe_mechanism(study: Any) -> str:
    """Return a one-sentence Markdown description of what the mechanism study trained (for captions)."""
    cells = study.cells()
    m, t = cells[0].pair(cells[0].widths[0], 0).a.model, cells[0].pair(cells[0].widths[0], 0).a.train
    units = sorted({int(round(study.base_width * w)) for w in study.widths})
    return (f"{'bias-free ' if not m.bias else ''}ReLU MLP with L = {m.depth} linear layers on "
            f"{DATASET_LABELS[study.dataset]}; SGD (peak lr "
            f"{t.lr:g}, momentum {t.momentum:g}, batch {t.batch_size}); {', '.join(map(str, units))} hidden units; "
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


def hypotheses_markdown(states: dict[str, dict[str, str]]) -> str:
    """Return a Markdown table of each hypothesis' state (supported, contradicted, undecided) per data set."""
    table = pd.DataFrame({n: {f"**{h}**: {text}": states[n].get(h, "—") for h, text in HYPOTHESES.items()}
                          for n in states})
    return markdown_table(table.rename_axis("hypothesis"))


#: What :func:`mechanism_numbers` reads at the decay arm's widest width: (glue name, metric, filters, hidden-only).
_MECHANISM_NUMBERS = (
    ("acc_plain", "acc_merged", {"method": "none"}, False),
    ("acc_matched", "acc_merged", {"method": "weight_matching"}, False),
    ("acc_ensemble", "acc_ensemble", {"method": "none"}, False),
    ("orth", "orth_ratio", {"method": "trained", "lam": 0.5}, False),
    ("orth_untrained", "orth_ratio", {"method": "untrained", "lam": 0.5}, False),
    ("lewc", "lewc_rel_err", {"method": "trained", "lam": 0.5}, False),
    ("llfc_matched", "llfc_rel_err", {"method": "weight_matched", "lam": 0.5}, False),
    ("rank", "rel_effective_rank", {"method": "trained"}, True),
    ("rank_untrained", "rel_effective_rank", {"method": "untrained"}, True),
    ("delta_stable_rank", "delta_rel_stable_rank", {}, True),
)


def mechanism_numbers(long: pd.DataFrame) -> dict[str, Any]:
    """Return the numbers the mechanism page quotes: at the decay arm's widest width, in its smallest-D (``_lo``)
    and largest-D (``_hi``) cells, each measure's mean over pairs, the D values, the distance from initialisation,
    and the direction of each change (``_dir``); the largest-D cell's length and weight decay (``epochs_hi``,
    ``wd_hi``), and the widest width of the cells trained longer than it (``length_widest``, 0 if none)."""
    cells = cell_table(long)
    std = cells[cells["init_scale"] == 1.0]
    widest = std["widest"].max()
    at = std[std["widest"] == widest].sort_values("D")
    lo, hi = at.iloc[0], at.iloc[-1]
    hidden = long[(long["layer"] > 1) & (long["layer"] < long["layer"].max())]
    longer = std[std["epochs"] > hi["epochs"]]  # the length arm: the same weight decays, trained longer
    out: dict[str, Any] = {"units": int(widest), "d_lo": float(lo["D"]), "d_hi": float(hi["D"]),
                           "shrink_lo": float(lo["shrinkage"]), "shrink_hi": float(hi["shrinkage"]),
                           "epochs_hi": float(hi["epochs"]), "wd_hi": float(hi["weight_decay"]),
                           "length_widest": int(longer["widest"].max()) if len(longer) else 0}
    whole = long[long["layer"].isna()]
    rows = _MECHANISM_NUMBERS + (("dist", "init_distance", {}, False),)
    for name, metric, filters, only_hidden in rows:
        df = hidden if only_hidden else whole if name == "dist" else long
        for tag, cell in (("lo", lo), ("hi", hi)):
            out[f"{name}_{tag}"] = float(select(in_cell(df, cell, widest), metric, **filters)
                                         .groupby("pair")["value"].mean().mean())
        out[f"{name}_dir"] = direction(out[f"{name}_lo"], out[f"{name}_hi"])
    return out
