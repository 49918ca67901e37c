"""The mechanism study's figures (the three arms against width, every measure against the decay integral D) and
those of ``lmcbook diagnose``'s report (a pair's interpolation curves, LEWC and LLFC by layer)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .plots_style import COLORS, _figure, _legend_right, _ncol, _stack, _width_axis
from .schema import cell_table, in_cell, pair_values
from .stats import interval


# -- the mechanism study ---------------------------------------------------------------------
def _draw(ax, pts, **style) -> None:
    pts = [(x, iv) for x, iv in pts if np.isfinite(iv.mean)]
    if not pts:
        return
    x = np.array([p[0] for p in pts], float)
    m = np.array([p[1].mean for p in pts])
    lo = np.array([p[1].lo if p[1].decided else p[1].mean for p in pts])
    hi = np.array([p[1].hi if p[1].decided else p[1].mean for p in pts])
    ax.errorbar(x, m, yerr=[m - lo, hi - m], capsize=2, **style)


def _cells(long: pd.DataFrame) -> pd.DataFrame:
    """Return the mechanism frame's cells (schema.cell_table) with the decay arm's length marked."""
    cells = cell_table(long)
    base = cells.loc[cells["widest"].idxmax(), "epochs"]
    return cells.assign(decay_arm=np.isclose(cells["epochs"], base))


def _series(long, metric, cell, units, **filters):
    return [(u, interval(pair_values(long, metric, cell, u, **filters))) for u in units]


def plot_mechanism_width(long: pd.DataFrame, title: str = "") -> Figure:
    """Return merged accuracy at λ=½ against width in the three arms of the mechanism study: the decay arm (every
    weight decay; plain merges solid, weight-matched dashed, the strongest decay's ensemble dotted), the
    small-initialisation arm against the standard initialisation at the weakest decay, and the length arm.
    Points are means over pairs with their 95% bootstrap interval.  The three arms are stacked top to bottom."""
    cells = _cells(long)
    std = cells[cells["init_scale"] == 1.0]
    decay = std[std["decay_arm"]].sort_values("weight_decay")
    fig, axes = _stack(3, sharex=True, sharey=True)
    cmap = plt.get_cmap("viridis")
    units_of = lambda c: sorted(in_cell(long, c)["hidden_units"].dropna().unique())  # noqa: E731
    for i, (_, c) in enumerate(decay.iterrows()):
        col = cmap(0.85 * i / max(len(decay) - 1, 1))
        us = units_of(c)
        _draw(axes[0], _series(long, "acc_merged", c, us, method="none"), color=col, marker="o",
              label=f"wd {c['weight_decay']:g} (D = {c['D']:.2g})")
        _draw(axes[0], _series(long, "acc_merged", c, us, method="weight_matching"), color=col, marker="s", ls="--")
    strong = decay.iloc[-1]
    _draw(axes[0], _series(long, "acc_ensemble", strong, units_of(strong), method="none"), color="k", ls=":",
          marker=None, label="ensemble (strongest wd)")
    axes[0].set_title(f"decay arm, {decay['epochs'].iloc[0]:g} epochs (dashed: weight-matched)")
    weakest = decay.iloc[0]
    small = cells[cells["init_scale"] != 1.0]
    for j, (_, c) in enumerate([(None, weakest)] + list(small.iterrows())):
        lab = "standard init" if c["init_scale"] == 1.0 else f"initial weights ×{c['init_scale']:g}"
        _draw(axes[1], _series(long, "acc_merged", c, units_of(c), method="none"), marker="o",
              color=COLORS["merged"] if j == 0 else plt.get_cmap("tab10")(j), label=lab)
    _draw(axes[1], _series(long, "acc_ensemble", weakest, units_of(weakest), method="none"), color="k", ls=":",
          marker=None, label="ensemble (standard)")
    axes[1].set_title(f"initialisation, wd {weakest['weight_decay']:g}")
    length = std[std["weight_decay"].isin(std.loc[~std["decay_arm"], "weight_decay"])].sort_values(
        ["weight_decay", "epochs"])
    lengths = sorted(length["epochs"].unique())
    for _, c in length.iterrows():
        k = lengths.index(c["epochs"])
        _draw(axes[2], _series(long, "acc_merged", c, units_of(c), method="none"),
              color=cmap(0.85 * k / max(len(lengths) - 1, 1)), marker="o",
              ls="-" if c["weight_decay"] == length["weight_decay"].max() else "--",
              label=f"{c['epochs']:g} ep, wd {c['weight_decay']:g} (D = {c['D']:.2g})")
    axes[2].set_title("length arm" if len(lengths) > 1 else "length arm (not run)")
    for ax in axes:
        _width_axis(ax, long["hidden_units"].dropna(), label=ax is axes[-1])
        ax.set_ylabel("merged test accuracy,\n" + r"$\lambda=\frac{1}{2}$")
        _legend_right(ax)
    if title:
        fig.suptitle(title)
    return fig


def plot_mechanism_d(frames: dict[str, pd.DataFrame]) -> Figure:
    """Return, against the decay integral D (the decay arm's cells, at each data set's widest width), merged
    accuracy (plain, weight-matched, ensemble), the orthogonality ratio, the LEWC error of the plain pair and the
    LLFC error after weight matching, the relative effective rank of W and the relative stable rank of W − W₀
    (hidden-to-hidden matrices), and the distance from initialisation; one colour per data set, means over pairs
    (over models for per-model measures) with 95% bootstrap intervals.  Two panels per row; one legend under them
    names the data sets (colours) and the line styles."""
    fig, axes = _figure(3, 2, 2.4)
    axes = axes.ravel()
    names = {}
    for k, (label, long) in enumerate(frames.items()):
        col = plt.get_cmap("tab10")(k)
        cells = _cells(long)
        decay = cells[cells["decay_arm"] & (cells["init_scale"] == 1.0)].sort_values("D")
        units = float(decay["widest"].max())
        names[f"{label}, {units:g} units"] = col
        hidden = long[(long["layer"] > 1) & (long["layer"] < long["layer"].max())]
        panels = [
            (0, long, "acc_merged", dict(method="none"), dict(marker="o")),
            (0, long, "acc_merged", dict(method="weight_matching"), dict(marker="s", ls="--")),
            (0, long, "acc_ensemble", dict(method="none"), dict(marker=None, ls=":")),
            (1, long, "orth_ratio", dict(method="trained"), dict(marker="o")),
            (1, long, "orth_ratio", dict(method="untrained"), dict(marker=None, ls="-.", alpha=0.6)),
            (2, long, "lewc_rel_err", dict(method="trained", lam=0.5), dict(marker="o")),
            (2, long, "llfc_rel_err", dict(method="weight_matched", lam=0.5), dict(marker="s", ls="--")),
            (3, hidden, "rel_effective_rank", dict(method="trained"), dict(marker="o")),
            (3, hidden, "rel_effective_rank", dict(method="untrained"), dict(marker=None, ls="-.", alpha=0.6)),
            (4, hidden, "delta_rel_stable_rank", {}, dict(marker="o")),
            (5, long[long["layer"].isna()], "init_distance", {}, dict(marker="o")),
        ]
        for ax_i, df, metric, filters, style in panels:
            pts = [(c["D"], interval(pair_values(df, metric, c, units, **filters))) for _, c in decay.iterrows()]
            _draw(axes[ax_i], pts, color=col, **style)
    titles = [r"accuracy at $\lambda=\frac{1}{2}$", r"orthogonality $\|W_a z_b\|/\|W_a z_a\|$",
              "relative error at the last\nhidden layer, " + r"$\lambda=\frac{1}{2}$",
              "relative effective rank of W\n(hidden-to-hidden)", r"relative stable rank of $W - W_0$",
              "distance from initialisation\n" + r"$\|\theta_T-\theta_0\|/\|\theta_0\|$"]
    for ax, t in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_xlabel(r"decay integral $D$")
        ax.set_title(t)
    _mechanism_legend(fig, names)
    return fig


def _mechanism_legend(fig: Figure, names: dict[str, object]) -> None:
    """Draw :func:`plot_mechanism_d`'s legend under its panels: one colour per data set, then the line styles."""
    handles = [Line2D([], [], color=c, marker="o", label=n) for n, c in names.items()]
    handles += [Line2D([], [], color="0.35", marker=m, ls=ls, label=lab) for m, ls, lab in (
        ("o", "-", "plain pair, trained (error: LEWC)"), ("s", "--", "weight-matched pair (error: LLFC)"),
        (None, ":", "logit ensemble"), (None, "-.", "untrained"))]
    fig.legend(handles=handles, loc="outside lower center",
               ncol=_ncol([h.get_label() for h in handles], fig.get_figwidth() - 0.3))


# -- lmcbook diagnose ---------------------------------------------------------------------------
def plot_pair_curves(curves: pd.DataFrame) -> Figure:
    """Return test accuracy, raw loss and calibrated loss against λ, one line per pair and merge method (a
    diagnose report's interpolation curves), stacked top to bottom."""
    fig, axes = _stack(3)
    styles = {"none": "-", "weight_matching": "--"}
    colors = plt.get_cmap("tab10")
    pairs = list(dict.fromkeys(curves["pair"]))
    for ax, col, label in zip(axes, ("acc", "loss", "loss_cal"), ("test accuracy", "test loss (nats)",
                                                                  "calibrated test loss")):
        for (pair, method), c in curves.groupby(["pair", "method"], sort=False):
            ax.plot(c["lam"], c[col], ls=styles.get(method, ":"), color=colors(pairs.index(pair) % 10),
                    label=f"pair {pair}, {method.replace('_', ' ')}")
        ax.set_ylabel(label)
    axes[-1].set_xlabel(r"$\lambda$   ($\theta(\lambda)=\lambda\theta_a+(1-\lambda)\theta_b$)")
    _legend_right(axes[0])
    return fig


def plot_layer_errors(layers: pd.DataFrame) -> Figure:
    """Return the LEWC and LLFC relative errors at λ = ½ against the layer, trained pairs (solid) beside the
    untrained pair (dashed)."""
    fig, axes = _stack(2)
    colors = plt.get_cmap("tab10")
    pairs = list(dict.fromkeys(layers.loc[layers["model"] == "trained", "pair"]))
    for ax, (metric, title) in zip(axes, (("lewc_rel_err", "LEWC"), ("llfc_rel_err", "LLFC"))):
        d = layers[(layers["metric"] == metric) & (layers["lam"] == 0.5)]
        for pair, c in d[d["model"] == "trained"].groupby("pair", sort=False):
            ax.plot(c["layer"], c["value"], "o-", color=colors(pairs.index(pair) % 10), label=f"pair {pair}")
        base = d[d["model"] == "untrained"].drop_duplicates("layer")
        ax.plot(base["layer"], base["value"], "s--", color=COLORS["untrained"], label="untrained pair")
        ax.set_yscale("log")
        ax.set_ylabel("relative error")
        ax.set_title(rf"{title} prediction at $\lambda = 1/2$")
    axes[-1].set_xlabel("layer $l$ (in call order)")
    _legend_right(axes[0])
    return fig
