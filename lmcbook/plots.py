"""One visual style, and figure functions that take tidy frames and return figures.

Error bars are always the range (min to max) over replicates (pairs, or models for per-model measures) around
their mean.

**Every figure is readable at the book's text width.** Each text of a figure (tick labels, axis labels, titles,
legend entries and titles, annotations, the suptitle, colour-bar labels) renders at 9 pt (12 CSS px,
``MIN_FONT_PX``) or larger where the page shows it.  The book shows the PNG that IPython saves of a figure (its
tight bounding box at the figure's dpi, ``DPI``) at its natural size, scaled down to the text column when it is
wider; the column is assumed ``TEXT_COLUMN_PX`` = 672 CSS px wide (sphinx-book-theme's article column at a
1280 px wide window, measured in Chromium).  :func:`rendered_font_px` computes each text's rendered size, and
:meth:`lmcbook.page.Page.glue_figure` refuses a figure whose smallest text is smaller (:func:`check_legible`).  So
figures are at most ``FULL_WIDTH`` inches wide (shown unscaled), at most two panels sit side by side (three or more
are stacked), and legends sit beside, below or under their panels instead of shrinking their fonts.
"""

from __future__ import annotations

import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis, Tick
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure, FigureBase
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.spines import Spine
from matplotlib.text import Text
from matplotlib.ticker import NullFormatter
from matplotlib.transforms import ScaledTranslation

from .schema import cell_table, in_cell, pair_values, select
from .stats import cell_stats, interval

#: Width in CSS px of the text column a figure renders in: sphinx-book-theme's article at a 1280 px wide window
#: (its content box is 688 px, less the figure's 8 px padding on each side; 774 px from 1440 px up).
TEXT_COLUMN_PX = 672
#: The smallest text a figure may show, in CSS px at its rendered size: 12 px = 9 pt.
MIN_FONT_PX = 12
#: Dots per inch of the figures and of the PNGs the book shows (IPython saves at the figure's dpi).
DPI = 110
#: The widest figure, in inches: its PNG (with savefig's 0.1 in padding) fits the column without being scaled down.
FULL_WIDTH = 5.9
#: The height of one panel of a stacked or gridded figure, in inches.
PANEL_HEIGHT = 2.5
#: The most panels side by side: at ``FULL_WIDTH``, a third would leave no room for 9 pt ticks and legends.
MAX_COLUMNS = 2

STYLE = {
    "figure.dpi": DPI, "savefig.dpi": DPI, "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
    "legend.frameon": False, "legend.fontsize": 9, "legend.title_fontsize": 9, "lines.linewidth": 1.6,
    "lines.markersize": 4,
}
COLORS = {"merged": "#c0392b", "ensemble": "#2c3e50", "endpoints": "#7f8c8d", "prediction": "#27ae60",
          "raw": "#7f8c8d", "calibrated": "#c0392b", "untrained": "#95a5a6"}


def use_style() -> None:
    """Apply the book's matplotlib style."""
    plt.rcParams.update(STYLE)


# -- legibility at the text width --------------------------------------------------------------
class IllegibleFigure(ValueError):
    """A figure with a text that would render below ``MIN_FONT_PX`` at the book's text width."""


def _texts(artist, kind: str = "text"):
    """Yield (kind, text) for every visible, non-empty Text drawn under ``artist``."""
    for child in artist.get_children():
        if not child.get_visible() or (isinstance(child, (Axis, Spine)) and not child.axes.axison):
            continue
        if isinstance(child, Text):
            if child.get_text().strip():
                title = isinstance(artist, Axes) and child is artist.title
                suptitle = isinstance(artist, FigureBase) and child.get_text() == artist.get_suptitle()
                yield ("title" if title else "suptitle" if suptitle else kind), child
            continue
        sub = ("legend text" if isinstance(child, Legend) else "tick label" if isinstance(child, Tick)
               else "axis label" if isinstance(child, Axis) and kind == "axes text"
               else "axes text" if isinstance(child, Axes) else kind)
        yield from _texts(child, sub)


def png_size_px(fig: Figure) -> tuple[float, float]:
    """Return the width and height in pixels of the PNG the book shows of ``fig``: IPython saves the tight bounding
    box, padded by ``savefig.pad_inches``, at the figure's dpi."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # lays the figure out and creates its tick labels
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
    return box.width * fig.dpi, box.height * fig.dpi


def rendered_font_px(fig: Figure, column_px: float = TEXT_COLUMN_PX) -> list[tuple[str, float]]:
    """Return (description, size in CSS px) for every visible text of ``fig`` as the book renders it: the PNG at
    its natural size, scaled down by ``column_px / width`` when it is wider than the column."""
    width, _ = png_size_px(fig)
    scale = min(1.0, column_px / width)
    out = []
    for kind, t in _texts(fig, "figure text"):
        text = " ".join(t.get_text().split())
        out.append((f"{kind} {text[:40] + ('…' if len(text) > 40 else '')!r}", t.get_fontsize() * fig.dpi / 72 * scale))
    return out


def check_legible(fig: Figure, key: str = "figure", column_px: float = TEXT_COLUMN_PX) -> None:
    """Raise :class:`IllegibleFigure`, naming ``key`` and the smallest text, if any text of ``fig`` would render
    below ``MIN_FONT_PX`` (9 pt) at the text width; return None otherwise."""
    sizes = rendered_font_px(fig, column_px)
    small = [s for s in sizes if s[1] < MIN_FONT_PX - 1e-9]
    if not small:
        return
    name, px = min(small, key=lambda s: s[1])
    width, _ = png_size_px(fig)
    raise IllegibleFigure(
        f"figure {key!r} is not readable at the book's text width: {len(small)} of its {len(sizes)} texts render "
        f"below {MIN_FONT_PX} CSS px (9 pt); the smallest, the {name}, renders at {px:.1f} px ({0.75 * px:.1f} pt). "
        f"Its PNG is {width:.0f} px wide ({fig.get_figwidth():.1f} in at {fig.dpi:g} dpi) and the {column_px:g} px "
        f"column shows it at {min(1.0, column_px / width):.0%}. Make the figure at most {column_px / fig.dpi:.1f} in "
        f"wide (stack its panels: at most {MAX_COLUMNS} side by side; legends beside or below the panels), or "
        f"enlarge that text; see lmcbook/plots.py.")


# -- layout helpers ----------------------------------------------------------------------------
def _figure(nrows: int = 1, ncols: int = 1, height: float = PANEL_HEIGHT, width: float = FULL_WIDTH,
            **kw) -> tuple[Figure, np.ndarray]:
    """Return a styled figure of ``nrows`` × ``ncols`` panels (constrained layout) and its 2-D array of axes."""
    if ncols > MAX_COLUMNS or width > FULL_WIDTH:
        raise ValueError(f"ncols={ncols}, width={width} is not allowed: at most {MAX_COLUMNS} panels side by side "
                         f"and {FULL_WIDTH} in, or the text width shrinks the figure's text below 9 pt")
    use_style()
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height * nrows), layout="constrained", squeeze=False,
                             **kw)
    return fig, axes


def _stack(n: int, height: float = PANEL_HEIGHT, **kw) -> tuple[Figure, np.ndarray]:
    """Return a full-width figure of ``n`` panels stacked top to bottom and its 1-D array of axes."""
    fig, axes = _figure(n, 1, height, **kw)
    return fig, axes[:, 0]


def _ncol(labels, width_in: float, fontsize: float = 9.0) -> int:
    """Return the most legend columns of ``labels`` (filled top to bottom) that fit in ``width_in`` inches."""
    entry = [0.55 * fontsize / 72 * max(len(line) for line in str(lab).split("\n")) + 0.6 for lab in labels]
    for k in range(min(len(entry), 6), 1, -1):  # 0.6 in: the handle and the gaps
        rows = -(-len(entry) // k)
        if sum(max(entry[i:i + rows]) for i in range(0, len(entry), rows)) <= width_in:
            return k
    return 1


def _legend_right(ax, **kw) -> Legend:
    """Draw ``ax``'s legend to the right of the panel, outside it (the layout makes room)."""
    n = len(ax.get_legend_handles_labels()[1])
    return ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), ncol=kw.pop("ncol", 1 if n <= 9 else 2), **kw)


def _legend_below(ax, **kw) -> Legend:
    """Draw ``ax``'s legend under the panel, below its x label, in as many columns as fit its width."""
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    bottom = ax.get_window_extent(renderer).y0
    below = (bottom - min(bottom, ax.xaxis.get_tightbbox(renderer).y0)) / fig.dpi + 0.05
    labels = ax.get_legend_handles_labels()[1]
    width = ax.get_position().width * fig.get_figwidth()
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0),
                     bbox_transform=ax.transAxes + ScaledTranslation(0, -below, fig.dpi_scale_trans),
                     ncol=kw.pop("ncol", _ncol(labels, width)), **kw)


def _figure_legend(fig: Figure, handles=None, labels=None, **kw) -> Legend:
    """Draw one legend for the whole figure (the given entries, or every distinct label of its panels): in its
    empty panel slot if it has one (a hidden axes), else under the panels."""
    if handles is None:
        seen: dict[str, object] = {}
        for ax in fig.axes:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        handles, labels = list(seen.values()), list(seen)
    spare = next((ax for ax in fig.axes if not ax.get_visible()), None)
    if spare is not None:
        spare.set_visible(True)
        spare.axis("off")
        return spare.legend(handles, labels, loc="center", **kw)
    return fig.legend(handles, labels, loc="outside lower center",
                      ncol=kw.pop("ncol", _ncol(labels, fig.get_figwidth() - 0.3)), **kw)


def _wrap_titles(fig: Figure) -> None:
    """Break each panel title wider than its panel into two lines, at the space nearest its middle (outside $…$)."""
    fig.draw_without_rendering()
    for ax in fig.axes:
        text = ax.get_title()
        if not ax.get_visible() or "\n" in text or ax.title.get_window_extent().width <= ax.get_window_extent().width:
            continue
        spaces = [i for i, ch in enumerate(text) if ch == " " and text[:i].count("$") % 2 == 0]
        if spaces:
            i = min(spaces, key=lambda i: abs(i - len(text) / 2))
            ax.set_title(text[:i] + "\n" + text[i + 1:])


def seed_stats(df: pd.DataFrame, by: str | list[str], col: str) -> pd.DataFrame:
    """Return mean, min and max of ``col`` over seeds for each value of ``by``."""
    g = df.groupby(by)[col]
    return pd.DataFrame({"mean": g.mean(), "lo": g.min(), "hi": g.max(), "n": g.size()}).reset_index()


def errorbar(ax, df: pd.DataFrame, x: str, col: str, **kw) -> None:
    """Plot the seed mean of ``col`` against ``x`` with min-max error bars."""
    s = seed_stats(df, x, col)
    ax.errorbar(s[x], s["mean"], yerr=[s["mean"] - s["lo"], s["hi"] - s["mean"]], capsize=2.5, marker="o", **kw)


def _label_width(labels) -> float:
    """Return the room in inches that the widest of ``labels`` needs as a 10 pt tick label, with a gap."""
    return 0.075 * max(len(str(lab)) for lab in labels) + 0.15


def _width_axis(ax, units, label: bool = True) -> None:
    """Put hidden units on a log2 x axis, every width a tick; a label is left out (the widest kept) where it would
    touch its neighbour."""
    ticks = sorted(set(units))
    names = [str(int(u)) for u in ticks]
    width = 0.8 * ax.get_position().width * ax.figure.get_figwidth()  # before the layout: leave room for margins
    per_octave = width / max(math.log2(ticks[-1] / ticks[0]), 1.0)
    keep, last = [], None
    for u in reversed(ticks):
        keep.append(last is None or math.log2(last / u) * per_octave >= _label_width(names))
        last = u if keep[-1] else last
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([n if k else "" for n, k in zip(names, reversed(keep))])
    if label:
        ax.set_xlabel("hidden units (base width × multiplier)" if width > 3.5 else "hidden units")


def plot_interpolation(curves: pd.DataFrame, col: str = "acc", ylabel: str = "test accuracy") -> Figure:
    """Return ``col`` against λ, one line per width (seed mean, min-max band)."""
    fig, axes = _figure(1, 1, 3.4)
    ax = axes[0, 0]
    units = sorted(curves["hidden_units"].unique())
    cmap = plt.get_cmap("viridis")
    for i, u in enumerate(units):
        s = seed_stats(curves[curves["hidden_units"] == u], "lam", col)
        c = cmap(i / max(len(units) - 1, 1))
        ax.plot(s["lam"], s["mean"], color=c, label=f"{u}")
        ax.fill_between(s["lam"], s["lo"], s["hi"], color=c, alpha=0.2, lw=0)
    ax.set_xlabel(r"$\lambda$   ($\theta(\lambda)=\lambda\theta_a+(1-\lambda)\theta_b$)")
    ax.set_ylabel(ylabel)
    _legend_right(ax, title="hidden units")
    return fig


def plot_width_accuracy(summary: pd.DataFrame) -> Figure:
    """Return merged accuracy at λ=½ against width, with the endpoints' mean and the logit ensemble."""
    fig, axes = _figure(1, 1, 3.4, width=5.2)
    ax = axes[0, 0]
    for col, label, key in (("acc_ensemble", "logit ensemble", "ensemble"),
                            ("acc_endpoints", "endpoints (mean of a, b)", "endpoints"),
                            ("acc_merged", r"merged, $\lambda=\frac{1}{2}$", "merged")):
        errorbar(ax, summary, "hidden_units", col, color=COLORS[key], label=label)
    _width_axis(ax, summary["hidden_units"])
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right")
    return fig


def plot_barriers(summary: pd.DataFrame) -> Figure:
    """Return the raw and calibrated midpoint loss barriers against width."""
    fig, axes = _figure(1, 1, 3.4, width=5.2)
    ax = axes[0, 0]
    errorbar(ax, summary, "hidden_units", "loss_barrier_mid", color=COLORS["raw"], label="raw")
    errorbar(ax, summary, "hidden_units", "loss_barrier_cal_mid", color=COLORS["calibrated"],
             label="calibrated (own τ per model)")
    ax.axhline(0, color="k", lw=0.6)
    _width_axis(ax, summary["hidden_units"])
    ax.set_ylabel(r"midpoint loss barrier (nats)")
    ax.legend()
    return fig


def plot_lewc_signatures(summary: pd.DataFrame, depth: int) -> Figure:
    """Return the logit norm ratio (prediction 2^(1-L)) and τ_merged/τ_ens (prediction 2^(L-1)) against width."""
    fig, axes = _figure(1, 2, 3.0)
    axes = axes[0]
    for ax, col, pred, label in ((axes[0], "logit_norm_ratio", 2.0 ** (1 - depth),
                                  r"$\|f_L(\theta(\frac{1}{2}))\| \,/\, \|\frac{1}{2}(f_L^a+f_L^b)\|$"),
                                 (axes[1], "tau_ratio", 2.0 ** (depth - 1), r"$\tau_{merged} / \tau_{ens}$")):
        errorbar(ax, summary, "hidden_units", col, color=COLORS["merged"], label="measured")
        ax.axhline(pred, color=COLORS["prediction"], ls="--", label=f"LEWC prediction ({pred:g})")
        ax.axhline(1, color="k", lw=0.6, ls=":")
        _width_axis(ax, summary["hidden_units"])
        ax.set_yscale("log", base=2)
        ax.set_ylabel(label)
        _legend_below(ax, ncol=1)
    return fig


def _layer_colors(layers) -> dict:
    layers = sorted(set(int(v) for v in layers))
    cmap = plt.get_cmap("plasma")
    return {l: cmap(0.1 + 0.75 * i / max(len(layers) - 1, 1)) for i, l in enumerate(layers)}


def lines_by_layer(ax, df: pd.DataFrame, metric: str, x: str = "hidden_units", layers=None,
                   methods=("trained", "untrained"), label_untrained: bool = True) -> None:
    """Plot ``metric`` against ``x`` (seed mean, min-max bars), one color per layer; untrained pairs dashed."""
    d = df[df["metric"] == metric]
    if layers is not None:
        d = d[d["layer"].isin(layers)]
    colors = _layer_colors(d["layer"])
    for l, c in colors.items():
        for method in methods:
            s = d[(d["layer"] == l) & (d["method"] == method)]
            if s.empty:
                continue
            st = seed_stats(s, x, "value")
            trained = method == "trained"
            label = f"layer {l}" if trained else (f"layer {l}, untrained" if label_untrained else None)
            ax.errorbar(st[x], st["mean"], yerr=[st["mean"] - st["lo"], st["hi"] - st["mean"]], color=c,
                        ls="-" if trained else "--", marker="o" if trained else "x", capsize=2, label=label,
                        alpha=1.0 if trained else 0.6)


def plot_lewc_vs_llfc(lewc: pd.DataFrame) -> Figure:
    """Return LEWC and LLFC relative errors against width, one row per λ, one line per layer l >= 2.

    Layer 1 is left out: both predictions are exact there (f_1 is linear in θ).
    """
    lams = sorted(lewc["lam"].unique(), reverse=True)
    fig, axes = _figure(len(lams), 2, sharey="row")
    for r, lam in enumerate(lams):
        for c, (metric, title) in enumerate((("lewc_rel_err", "LEWC"), ("llfc_rel_err", "LLFC"))):
            ax = axes[r, c]
            lines_by_layer(ax, lewc[(lewc["lam"] == lam) & (lewc["layer"] > 1)], metric, label_untrained=False)
            _width_axis(ax, lewc["hidden_units"])
            ax.set_yscale("log")
            ax.set_title(rf"{title} prediction, $\lambda = {lam:g}$")
            ax.set_ylabel("relative error" if c == 0 else "")
    _figure_legend(fig, title="solid: trained, dashed: untrained")
    return fig


def plot_scale_law(scale: pd.DataFrame) -> Figure:
    """Return log2 r_l against l for each width (prediction 1 − l), and the fitted β against width (prediction 1)."""
    fig, axes = _figure(1, 2, 3.0)
    ax1, ax2 = axes[0]
    tr = scale[(scale["metric"] == "scale_ratio") & (scale["method"] == "trained")].copy()
    tr["log2r"] = np.log2(tr["value"])
    units = sorted(tr["hidden_units"].unique())
    cmap = plt.get_cmap("viridis")
    for i, u in enumerate(units):
        st = seed_stats(tr[tr["hidden_units"] == u], "layer", "log2r")
        ax1.plot(st["layer"], st["mean"], marker="o", color=cmap(i / max(len(units) - 1, 1)), label=str(u))
    ls = np.array(sorted(tr["layer"].unique()))
    ax1.plot(ls, 1 - ls, "k--", label=r"LEWC: $1-l$")
    ax1.set_xlabel("layer $l$")
    ax1.set_ylabel(r"$\log_2 r_l$")
    ax1.set_xticks(ls)
    _legend_below(ax1, title="hidden units")
    for method, ls_, mk in (("trained", "-", "o"), ("untrained", "--", "x")):
        s = scale[(scale["metric"] == "scale_beta") & (scale["method"] == method)]
        st = seed_stats(s, "hidden_units", "value")
        ax2.errorbar(st["hidden_units"], st["mean"], yerr=[st["mean"] - st["lo"], st["hi"] - st["mean"]],
                     ls=ls_, marker=mk, capsize=2, color=COLORS["merged" if method == "trained" else "untrained"],
                     label=f"fitted β, {method}")
    ax2.axhline(1, color=COLORS["prediction"], ls="--", label="LEWC: β = 1")
    _width_axis(ax2, scale["hidden_units"])
    ax2.set_ylabel(r"$\beta$ in $\log_2 r_l = \alpha - \beta(l-1)$")
    _legend_below(ax2, ncol=1)
    return fig


def _panels_at(df: pd.DataFrame, lam: float, n: int):
    """Return the rows at ``lam``, a styled figure of ``n`` panels (two side by side; three stacked, sharing the
    width axis) and its axes."""
    fig, axes = _figure(1, 2, 3.0) if n == 2 else _stack(n, sharex=True)
    return df[df["lam"] == lam], fig, axes.ravel()


def plot_additivity(add: pd.DataFrame, lam: float = 0.5) -> Figure:
    """Return the additivity error, cosine and sign-conflict fraction against width, with Gaussian baselines."""
    d, fig, axes = _panels_at(add, lam, 3)
    for ax, metric, base, title in ((axes[0], "additivity_rel_err", "baseline_additivity_rel_err", "relative error"),
                                    (axes[1], "additivity_cos", "baseline_additivity_cos", "cosine"),
                                    (axes[2], "sign_conflict", "baseline_sign_conflict", "sign-conflict fraction")):
        lines_by_layer(ax, d, metric, label_untrained=False)
        b = d[(d["metric"] == base) & (d["method"] == "trained")]
        colors = _layer_colors(b["layer"])
        for l, c in colors.items():
            st = seed_stats(b[b["layer"] == l], "hidden_units", "value")
            ax.plot(st["hidden_units"], st["mean"], color=c, ls=":", lw=1.2)
        _width_axis(ax, d["hidden_units"], label=ax is axes[-1])
        ax.set_title(title + rf", $\lambda={lam:g}$")
    axes[0].set_yscale("log")
    _legend_right(axes[0], title="solid: trained,\ndashed: untrained,\ndotted: Gaussian\nbaseline")
    return fig


def plot_orthogonality(orth: pd.DataFrame, lam: float = 0.5) -> Figure:
    """Return the orthogonality norm ratio and the cross-term relative error against width, per layer."""
    d, fig, axes = _panels_at(orth, lam, 2)
    lines_by_layer(axes[0], d, "orth_ratio", label_untrained=False)
    axes[0].set_title("orthogonality ratio\n" + r"$\frac{1}{2}(\|W^a z^b\|/\|W^a z^a\| + \|W^b z^a\|/\|W^b z^b\|)$")
    lines_by_layer(axes[1], d, "cross_rel_err", label_untrained=False)
    axes[1].set_title("cross terms\n" + rf"$\|y - y_0\|/\|y\|$, $\lambda={lam:g}$")
    for ax in axes:
        _width_axis(ax, d["hidden_units"])
        ax.set_yscale("log")
    _figure_legend(fig, *axes[0].get_legend_handles_labels(), title="solid: trained, dashed: untrained")
    return fig


def plot_neuron_overlap(nm: pd.DataFrame) -> Figure:
    """Return the Jaccard index of the top-10% neurons against width with its chance level, the share of activity
    in the top 10% against width, and the sorted root second moments of the widest pair's last hidden layer,
    stacked top to bottom."""
    fig, (ax1, ax3, ax2) = _stack(3)
    lines_by_layer(ax3, nm, "top_share", label_untrained=False)
    _width_axis(ax3, nm["hidden_units"])
    kn = nm[nm["metric"].isin(["top_k", "n_neurons"])].pivot_table(index="hidden_units", columns="metric",
                                                                    values="value")
    ax3.plot(kn.index, kn["top_k"] / kn["n_neurons"], "k:", label="equal activity (k/n)")
    ax3.set_ylabel("share of\n" + r"$\sum_i E[z_i^2]$ in the top 10%")
    _legend_right(ax3)
    lines_by_layer(ax1, nm, "jaccard", label_untrained=False)
    ch = nm[(nm["metric"] == "jaccard_chance") & (nm["method"] == "trained")]
    st = seed_stats(ch[ch["layer"] == ch["layer"].min()], "hidden_units", "value")
    ax1.plot(st["hidden_units"], st["mean"], "k:", label="chance")
    _width_axis(ax1, nm["hidden_units"])
    ax1.set_ylabel("Jaccard index\nof top-10% sets")
    _legend_right(ax1, title="solid: trained,\ndashed: untrained")
    wide, last = nm["hidden_units"].max(), nm[nm["metric"] == "jaccard"]["layer"].max()
    for method, ls in (("trained", "-"), ("untrained", "--")):
        for key, c in (("rms_a", COLORS["merged"]), ("rms_b", COLORS["ensemble"])):
            s = nm[(nm["metric"] == key) & (nm["method"] == method) & (nm["hidden_units"] == wide)
                   & (nm["layer"] == last) & (nm["pair"] == nm["pair"].min())]
            v = np.sort(s["value"].to_numpy())[::-1]
            if len(v):
                ax2.plot(np.arange(1, len(v) + 1) / len(v), v / v[0], ls=ls, color=c,
                         label=f"model {key[-1]}, {method}")
    ax2.set_xscale("log")
    ax2.set_xlabel("neuron rank / number of neurons")
    ax2.set_ylabel(r"$\sqrt{E[z_i^2]}$ / max")
    ax2.set_title(f"layer {int(last)}, {int(wide)} hidden units")
    _legend_right(ax2)
    return fig


def plot_rank(rank: pd.DataFrame) -> Figure:
    """Return the relative effective and stable ranks of hidden-to-hidden matrices against width, and the
    spectra of the widest models, stacked top to bottom."""
    fig, axes = _stack(3)
    hid = rank[rank["role"] == "hidden"]
    for ax, metric, title in ((axes[0], "rel_effective_rank", "relative effective rank"),
                              (axes[1], "rel_stable_rank", "relative stable rank")):
        lines_by_layer(ax, hid, metric, label_untrained=False)
        _width_axis(ax, hid["hidden_units"])
        ax.set_yscale("log")
        ax.set_title(title + " (hidden-to-hidden)")
    _legend_right(axes[0], title="solid: trained,\ndashed: untrained")
    wide = hid["hidden_units"].max()
    sv = hid[(hid["metric"] == "singular_value") & (hid["hidden_units"] == wide) & (hid["seed"] == hid["seed"].min())
             & (hid["model"] == "a")]
    colors = _layer_colors(sv["layer"])
    for (l, method), s in sv.groupby(["layer", "method"]):
        v = s.sort_values("index")["value"].to_numpy()
        axes[2].plot(np.arange(1, len(v) + 1), v / v[0], color=colors[int(l)], ls="-" if method == "trained" else "--",
                     label=f"layer {int(l)}, {method}")
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("index $i$")
    axes[2].set_ylabel(r"$\sigma_i / \sigma_1$")
    axes[2].set_title(f"spectra at {int(wide)} hidden units (model a)")
    _legend_right(axes[2])
    return fig


def plot_depth(summary: pd.DataFrame, scale: pd.DataFrame) -> Figure:
    """Return the logit norm ratio (prediction 2^(1−L)), τ_merged/τ_ens (2^(L−1)) and the fitted α, β against depth,
    stacked top to bottom."""
    fig, axes = _stack(3, sharex=True)
    ls = np.array(sorted(summary["depth"].unique()))
    for ax, col, pred, label in ((axes[0], "logit_norm_ratio", 2.0 ** (1 - ls), "logit norm ratio"),
                                 (axes[1], "tau_ratio", 2.0 ** (ls - 1), r"$\tau_{merged}/\tau_{ens}$")):
        errorbar(ax, summary, "depth", col, color=COLORS["merged"], label="measured")
        ax.plot(ls, pred, "--", color=COLORS["prediction"], label="LEWC prediction")
        ax.set_yscale("log", base=2)
        ax.set_xticks(ls)
        ax.set_ylabel(label)
        _legend_right(ax)
    tr = scale[scale["method"] == "trained"]
    for metric, pred, c in (("scale_beta", 1.0, COLORS["merged"]), ("scale_alpha", 0.0, COLORS["ensemble"])):
        errorbar(axes[2], tr[tr["metric"] == metric], "depth", "value", color=c, label=metric.split("_")[1])
        axes[2].axhline(pred, color=c, ls=":", lw=1)
    axes[2].set_xlabel("depth $L$ (linear layers)")
    axes[2].set_xticks(ls)
    axes[2].set_title(r"fit $\log_2 r_l = \alpha - \beta(l-1)$; LEWC: $\alpha=0, \beta=1$")
    _legend_right(axes[2])
    return fig


def plot_theory(frame: pd.DataFrame) -> Figure:
    """Return the LEWC relative error against λ per layer for each constructed pair (floored at 1e-17 for log axes),
    two panels per row."""
    kinds = list(dict.fromkeys(frame["method"]))
    ncols = min(len(kinds), MAX_COLUMNS)
    fig, axes = _figure(-(-len(kinds) // ncols), ncols, sharey=True)
    d = frame[(frame["metric"] == "lewc_rel_err") & (frame["lam"] > 0) & (frame["lam"] < 1)]
    colors = _layer_colors(d["layer"])
    for ax, kind in zip(axes.flat, kinds):
        for l, c in colors.items():
            s = d[(d["method"] == kind) & (d["layer"] == l)].sort_values("lam")
            ax.plot(s["lam"], np.maximum(s["value"], 1e-17), marker="o", color=c, label=f"layer {l}")
        ax.set_yscale("log")
        ax.set_title(kind.replace("_", " "))
        ax.set_xlabel(r"$\lambda$")
    for ax in axes[:, 0]:
        ax.set_ylabel("LEWC relative error")
    for ax in list(axes.flat)[len(kinds):]:
        ax.set_visible(False)
    _figure_legend(fig)
    return fig


GROUP_STYLE = {"none": ("#2c3e50", "o", "-"), "weight_matching": ("#27ae60", "s", "-"),
               "random_permutation": ("#8e44ad", "^", "--"), "repair": ("#c0392b", "D", "-"),
               "trained": ("#c0392b", "o", "-"), "weight_matched": ("#27ae60", "s", "-"),
               "untrained": ("#95a5a6", "x", "--")}


def plot_panels(df: pd.DataFrame, panels: list[dict], group: str = "method", x: str = "hidden_units",
                ncols: int = 3, labels: dict | None = None) -> Figure:
    """Return one panel per entry of ``panels``, each a long-frame metric against ``x``, one line per ``group``.

    A panel is a dict with ``metric`` and ``title``, and optionally ``filters`` (column=value),
    ``logy`` (bool), ``hline`` ((value, label)) and ``ylabel``.  Lines are seed means with
    min-max bars; values of several layers within one seed are averaged first.  At most
    ``min(ncols, MAX_COLUMNS)`` panels sit side by side, read row by row; one legend under
    the panels names every line.
    """
    ncols = min(ncols, MAX_COLUMNS, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = _figure(nrows, ncols)
    groups = list(dict.fromkeys(df[group].dropna()))
    cmap = plt.get_cmap("tab10")
    for ax, spec in zip(axes.flat, panels):
        for i, gname in enumerate(groups):
            st = cell_stats(df, spec["metric"], by=x, **{group: gname, **spec.get("filters", {})})
            if st.empty:
                continue
            color, marker, ls = GROUP_STYLE.get(gname, (cmap(i), "o", "-"))
            ax.errorbar(st.index, st["mean"], yerr=[st["mean"] - st["lo"], st["hi"] - st["mean"]], color=color,
                        marker=marker, ls=ls, capsize=2, label=(labels or {}).get(gname, str(gname)))
        if "hline" in spec:
            ax.axhline(spec["hline"][0], color=COLORS["prediction"], ls=":", label=spec["hline"][1])
        if x == "hidden_units":
            _width_axis(ax, df["hidden_units"].dropna())
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.set_title(spec["title"])
        ax.set_ylabel(spec.get("ylabel", ""))
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    _wrap_titles(fig)
    _figure_legend(fig)
    return fig


def plot_draws(perm: pd.DataFrame, metric: str = "acc_merged") -> Figure:
    """Return merged accuracy for every random-permutation draw against width (with no permutation and weight
    matching beside it), and the spread over draws against width."""
    fig, axes = _figure(1, 2, 3.0)
    ax1, ax2 = axes[0]
    rnd = perm[perm["method"] == "random_permutation"]
    units = sorted(perm["hidden_units"].unique())
    jitter = {s: 1 + 0.04 * (s - rnd["pair"].mean()) for s in rnd["pair"].unique()}
    ax1.scatter(rnd["hidden_units"] * rnd["pair"].map(jitter), rnd[metric], s=10, alpha=0.6,
                color=GROUP_STYLE["random_permutation"][0], label="a with randomly permuted b\n(each draw)")
    for method, label in (("none", "a with b"), ("weight_matching", "a with weight-matched b")):
        errorbar(ax1, perm[perm["method"] == method], "hidden_units", metric, color=GROUP_STYLE[method][0],
                 label=label)
    _width_axis(ax1, units)
    ax1.set_ylabel(r"merged accuracy, $\lambda = \frac{1}{2}$")
    _legend_below(ax1, ncol=1)
    spread = rnd.groupby(["hidden_units", "pair"])[metric].agg(lambda v: v.max() - v.min()).reset_index()
    errorbar(ax2, spread, "hidden_units", metric, color=GROUP_STYLE["random_permutation"][0],
             label="max − min over draws")
    _width_axis(ax2, units)
    ax2.set_ylim(bottom=0)
    ax2.set_ylabel("spread of merged accuracy\nover draws")
    _legend_below(ax2, ncol=1)
    return fig


def _gain_lines(ax, df: pd.DataFrame, x: str, by: str, fmt, logx: bool = True, y: str = "gain") -> None:
    """Plot the seed mean of ``y`` (in points) against ``x``, one line per value of ``by`` (min-max bars); with a
    ``kept`` column, the means of cells that the rule excluded get a grey cross over their marker."""
    vals = sorted(df[by].unique())
    cmap = plt.get_cmap("viridis")
    for i, v in enumerate(vals):
        st = seed_stats(df[df[by] == v], x, y)
        ax.errorbar(st[x], 100 * st["mean"], yerr=[100 * (st["mean"] - st["lo"]), 100 * (st["hi"] - st["mean"])],
                    marker="o", capsize=2, color=cmap(i / max(len(vals) - 1, 1)), label=fmt(v))
    if "kept" in df and not df["kept"].astype(bool).all():
        out = df[~df["kept"].astype(bool)].groupby([by, x])[y].mean().reset_index()
        ax.scatter(out[x], 100 * out[y], marker="x", s=60, color="0.5", zorder=5,
                   label="excluded by the rule")
    if logx:
        ax.set_xscale("log")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylabel("merging gain (points)")


def _log_ticks(ax) -> None:
    """Label a log10 x axis with plain numbers, as densely as its laid-out width allows without labels touching (at
    1 to 9, at 1, 2 and 5, at 1 and 3, or at 1 per decade, or every other decade), and no minor labels."""
    ax.figure.draw_without_rendering()
    width = ax.get_window_extent().width / ax.figure.dpi
    lo, hi = sorted(ax.get_xlim())
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    options = [[s * 10.0 ** k for k in decades for s in subs] for subs in ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 5),
                                                                         (1, 3), (1,))]
    options.append([10.0 ** k for k in decades if k % 2 == 0])
    options = [[t for t in ticks if lo <= t <= hi] for ticks in options]
    inch = width / math.log10(hi / lo)  # inches per decade
    fits = [t for t in options if len(t) >= 2 and all(
        math.log10(b / a) * inch >= _label_width([f"{a:g}", f"{b:g}"]) for a, b in zip(t, t[1:]))]
    ticks = fits[0] if fits else next((t for t in reversed(options) if t), None)
    if ticks:  # else the span holds no 1..9 × 10^k: keep matplotlib's labels
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())


def placeholder(text: str) -> Figure:
    """Return a small empty figure that says ``text`` (where a page's figure has nothing to show)."""
    fig, axes = _figure(1, 1, 0.8)
    ax = axes[0, 0]
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return fig


def plot_noise_grid(grid: pd.DataFrame, fit_s: dict | None = None) -> Figure:
    """Return gain against η (one line per B), against B (one line per η) and against S (all points, with the
    quadratic fit on log10 S if given); with a ``kept`` column, the points of cells that the rule excluded are
    grey crosses.  The three panels are stacked top to bottom."""
    fig, axes = _stack(3)
    _gain_lines(axes[0], grid, "lr", "batch_size", lambda v: f"B = {v}")
    axes[0].set_xlabel(r"peak learning rate $\eta$")
    _gain_lines(axes[1], grid, "batch_size", "lr", lambda v: rf"$\eta$ = {v:g}")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("batch size $B$")
    ax = axes[2]
    ok = grid["kept"].astype(bool) if "kept" in grid else pd.Series(True, index=grid.index)
    logb = np.log2(grid["batch_size"])
    sc = ax.scatter(grid.loc[ok, "noise_scale"], 100 * grid.loc[ok, "gain"], c=logb[ok], cmap="viridis", s=14,
                    vmin=logb.min(), vmax=logb.max())
    if (~ok).any():
        ax.scatter(grid.loc[~ok, "noise_scale"], 100 * grid.loc[~ok, "gain"], marker="x", color="0.6", s=14,
                   label="excluded by the rule (failed)")
    if fit_s is not None and ok.any():
        xs = np.linspace(np.log10(grid.loc[ok, "noise_scale"].min()), np.log10(grid.loc[ok, "noise_scale"].max()),
                         100)
        ax.plot(10 ** xs, 100 * np.polyval([fit_s["c2"], fit_s["c1"], fit_s["c0"]], xs), "k--",
                label=r"quadratic fit on $\log_{10} S$ (kept cells)")
    ax.set_xscale("log")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel(r"$S = \eta / (B(1-\mu))$")
    ax.set_ylabel("merging gain (points),\neach pair")
    cb = fig.colorbar(sc, ax=ax)
    cb.set_label(r"$\log_2 B$")
    for a in axes:
        if a.get_legend_handles_labels()[0]:
            _legend_below(a)
    _log_ticks(axes[0])
    _log_ticks(ax)
    return fig


def _start_label(method: str, fraction: float) -> str:
    return "independent" if method == "independent" else "shared init" if fraction == 0 else f"spawn at {fraction:.0%}"


def plot_noise_map(cells: pd.DataFrame) -> Figure:
    """Return the regime map (:func:`lmcbook.claims.map_cells`): merging gain against η with its interval over pairs,
    one line per start (spawn point, shared initialisation, independent pairs), one panel per schedule floor (rows)
    and augmentation (columns); a grey cross marks a cell the rule excluded, and the band is ± half a point."""
    from .claims import NOISE_MIN_EFFECT

    floors, augs = sorted(cells["lr_floor"].unique()), sorted(cells["augment"].unique())
    fig, axes = _figure(len(floors), len(augs), 2.3, sharex=True, sharey=True)
    starts = sorted({(m, f) for m, f in zip(cells["method"], cells["spawn_fraction"])}, key=lambda t: (t[0], t[1]))
    cmap = plt.get_cmap("viridis")
    for (i, fl), (j, aug) in itertools.product(enumerate(floors), enumerate(augs)):
        ax = axes[i, j]
        ax.axhspan(-100 * NOISE_MIN_EFFECT, 100 * NOISE_MIN_EFFECT, color="0.92", lw=0)
        for k, (m, f) in enumerate(starts):
            d = cells[(cells["lr_floor"] == fl) & (cells["augment"] == aug) & (cells["method"] == m)
                      & (cells["spawn_fraction"] == f)].sort_values("lr")
            color = "0.35" if m == "independent" else cmap(k / max(len(starts) - 2, 1))
            ax.errorbar(d["lr"], 100 * d["gain"], yerr=[100 * (d["gain"] - d["gain_lo"]).fillna(0),
                                                        100 * (d["gain_hi"] - d["gain"]).fillna(0)],
                        marker="o", ms=3, capsize=2, color=color, ls="--" if m == "independent" else "-",
                        label=_start_label(m, f))
            out = d[~d["kept"].astype(bool)]
            ax.scatter(out["lr"], 100 * out["gain"], marker="x", s=40, color="0.5", zorder=5,
                       label="excluded by the rule" if len(out) else None)
            lost = out[out["gain"].isna()]  # diverged: no gain to draw, so a mark at the panel's foot
            ax.scatter(lost["lr"], np.full(len(lost), 0.03), marker="v", s=30, color="0.5", zorder=5,
                       transform=ax.get_xaxis_transform(), label="diverged (no gain)" if len(lost) else None)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=2)
        floor = "decay to 0" if fl == 0 else "constant" if fl == 1 else f"floor {fl:g}"
        ax.set_title(f"{floor}, {'augmented' if aug else 'no augmentation'}", fontsize=10)
        if j == 0:
            ax.set_ylabel("gain (points)")
        if i == len(floors) - 1:
            ax.set_xlabel(r"peak learning rate $\eta$")
    _figure_legend(fig)
    return fig


def plot_spawn_points(spawn: pd.DataFrame) -> Figure:
    """Return gain against S on one row of the grid, one line per spawn point, and the endpoints' accuracy."""
    fig, axes = _figure(1, 2, 3.0)
    ax1, ax2 = axes[0]
    _gain_lines(ax1, spawn, "noise_scale", "spawn_fraction", lambda v: _start_label("spawn", v))
    ax1.set_xlabel(r"$S = \eta / (B(1-\mu))$")
    vals = sorted(spawn["spawn_fraction"].unique())
    cmap = plt.get_cmap("viridis")
    for i, v in enumerate(vals):
        errorbar(ax2, spawn[spawn["spawn_fraction"] == v], "noise_scale", "acc_endpoints",
                 color=cmap(i / max(len(vals) - 1, 1)), label=_start_label("spawn", v))
    ax2.set_xscale("log")
    ax2.set_xlabel(r"$S$")
    ax2.set_ylabel("endpoint accuracy\n(mean of the two children)")
    _figure_legend(fig, *ax1.get_legend_handles_labels())
    _log_ticks(ax1)
    _log_ticks(ax2)
    return fig


def plot_momentum(mom: pd.DataFrame) -> Figure:
    """Return gain against S in the (1 − μ) and the (1 − μ)² forms, one line per momentum."""
    fig, axes = _figure(1, 2, 3.0, sharey=True)
    axes = axes[0]
    for ax, col, label in ((axes[0], "noise_scale", r"$S = \eta / (B(1-\mu))$"),
                           (axes[1], "noise_scale_sq", r"$S_2 = \eta / (B(1-\mu)^2)$")):
        _gain_lines(ax, mom, col, "momentum", lambda v: rf"$\mu$ = {v:g}")
        ax.set_xlabel(label)
    _figure_legend(fig, *axes[0].get_legend_handles_labels())
    for ax in axes:
        _log_ticks(ax)
    return fig


def plot_weight_decay(wd: pd.DataFrame) -> Figure:
    """Return merging gain and endpoint accuracy against weight decay, without normalisation and with LayerNorm;
    with a ``kept`` column, the cells that the rule excluded get a grey cross."""
    fig, axes = _figure(1, 2, 3.0)
    ax1, ax2 = axes[0]
    for norm, color in (("none", COLORS["ensemble"]), ("layer", COLORS["merged"])):
        s = wd[wd["norm"] == norm]
        for ax, col, scale in ((ax1, "gain", 100), (ax2, "acc_endpoints", 1)):
            st = seed_stats(s, "weight_decay", col)
            x = np.arange(len(st))
            ax.errorbar(x, scale * st["mean"], yerr=[scale * (st["mean"] - st["lo"]), scale * (st["hi"] - st["mean"])],
                        marker="o", capsize=2, color=color, label=f"norm = {norm}")
            if "kept" in s:
                miss = ~s.groupby("weight_decay")["kept"].all().reindex(st["weight_decay"]).to_numpy(bool)
                ax.scatter(x[miss], scale * st["mean"].to_numpy()[miss], marker="x", s=60, color="0.5", zorder=5,
                           label="excluded by the rule (failed)" if norm == "none" and miss.any() else None)
            ax.set_xticks(x)
            ax.set_xticklabels([f"{v:g}" for v in st["weight_decay"]])
            ax.set_xlabel("weight decay")
    ax1.axhline(0, color="k", lw=0.6)
    ax1.set_ylabel("merging gain (points)")
    ax2.set_ylabel("endpoint accuracy")
    _figure_legend(fig, *ax1.get_legend_handles_labels())
    return fig


def plot_augment(aug: pd.DataFrame) -> Figure:
    """Return merging gain against η with augmentation off and on."""
    fig, axes = _figure(1, 1, 3.4, width=4.8)
    ax = axes[0, 0]
    _gain_lines(ax, aug.assign(aug=aug["augment"].map({False: "off", True: "on"})), "lr", "aug",
                lambda v: f"augmentation {v}")
    ax.set_xlabel(r"peak learning rate $\eta$")
    ax.legend()
    _log_ticks(ax)
    return fig


def plot_lr_pairs(pairs: pd.DataFrame) -> Figure:
    """Return the matrix of merging gains for children continued at learning rates η_a (rows) and η_b (columns);
    with a ``kept`` column, a cell that the rule excluded shows its number in grey, in brackets."""
    m = pairs.groupby(["lr", "lr_b"])["gain"].mean().unstack() * 100
    fig, axes = _figure(1, 1, 4.0, width=4.8)
    ax = axes[0, 0]
    lim = float(np.nanmax(np.abs(m.to_numpy()))) or 1.0
    im = ax.imshow(m.to_numpy(), cmap="RdBu", vmin=-lim, vmax=lim)
    ok = (pairs.groupby(["lr", "lr_b"])["kept"].all().unstack().reindex_like(m)
          if "kept" in pairs else m.notna())
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            good = bool(ok.iat[i, j])
            ax.text(j, i, f"{m.iat[i, j]:.1f}" if good else f"({m.iat[i, j]:.1f})", ha="center", va="center",
                    fontsize=9, color="k" if good else "0.45")
    ax.set_xticks(range(m.shape[1]))
    ax.set_xticklabels([f"{v:g}" for v in m.columns])
    ax.set_yticks(range(m.shape[0]))
    ax.set_yticklabels([f"{v:g}" for v in m.index])
    ax.set_xlabel(r"$\eta$ of child b")
    ax.set_ylabel(r"$\eta$ of child a")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="merging gain (points)")
    return fig


def plot_task_arithmetic(ta: pd.DataFrame) -> Figure:
    """Return each task's test loss against α, one panel per task, one color per fine-tuning learning rate
    (solid: task arithmetic; dashed: TIES), the panels stacked top to bottom."""
    tasks = ["reverse", "negate", "original"]
    fig, axes = _stack(len(tasks), sharex=True, sharey=True)
    lrs = sorted(ta["lr"].unique())
    cmap = plt.get_cmap("viridis")
    for ax, task in zip(axes, tasks):
        for i, lr in enumerate(lrs):
            for method, ls in (("task_arithmetic", "-"), ("ties", "--")):
                s = ta[(ta["task"] == task) & (ta["lr"] == lr) & (ta["method"] == method)]
                st = seed_stats(s, "alpha", "task_loss")
                ax.plot(st["alpha"], st["mean"], ls=ls, marker="o", ms=3, color=cmap(i / max(len(lrs) - 1, 1)),
                        label=f"lr {lr:g}, {method.replace('_', ' ')}" if task == tasks[0] else None)
        ax.set_title(f"task: {task}")
        ax.set_ylabel("test loss (nats)")
    axes[-1].set_xlabel(r"$\alpha$ in $\theta_0 + \alpha\,(v_1 + v_2)$")
    _legend_right(axes[0])
    return fig


def _cell_style(df: pd.DataFrame) -> dict[tuple[int, float], dict]:
    """Return a line style per (epochs, weight decay): colour by length, solid for the strongest decay."""
    lengths = sorted(df["epochs"].dropna().unique())
    decays = sorted(df["weight_decay"].dropna().unique())
    cmap = plt.get_cmap("viridis")
    return {(e, wd): dict(color=cmap(0.85 * i / max(len(lengths) - 1, 1)), ls="-" if wd == decays[-1] else "--",
                          marker="o" if wd == decays[-1] else "s", label=f"{int(e)} epochs, wd {wd:g}")
            for i, e in enumerate(lengths) for wd in decays}


def plot_regime(long: pd.DataFrame) -> Figure:
    """Return four panels against width, one line per (training length, weight decay): merged accuracy beside the
    ensemble, the calibrated midpoint loss barrier, the relative effective rank of the hidden-to-hidden matrices
    beside the untrained baseline, and the distance from initialisation."""

    fig, axes = _figure(2, 2, 2.8)
    styles = _cell_style(long)
    hidden = long[(long["layer"] > 1) & (long["layer"] < long["layer"].max())]
    half = r"$\lambda=\frac{1}{2}$"
    panels = ((axes[0, 0], long, "acc_merged", {}, f"merged accuracy, {half}\n(dotted: ensemble)"),
              (axes[0, 1], long, "loss_barrier_cal_mid", {}, "calibrated midpoint\nloss barrier (nats)"),
              (axes[1, 0], hidden, "rel_effective_rank", {"method": "trained"},
               "relative effective rank,\nhidden-to-hidden"),
              (axes[1, 1], long[long["layer"].isna()], "init_distance", {},
               "distance from initialisation\n" + r"$\|\theta_T-\theta_0\|/\|\theta_0\|$"))
    for ax, df, metric, filters, title in panels:
        for (e, wd), st in styles.items():
            s = cell_stats(df, metric, epochs=e, weight_decay=wd, **filters)
            if s.empty:
                continue
            ax.errorbar(s.index, s["mean"], yerr=[s["mean"] - s["lo"], s["hi"] - s["mean"]], capsize=2, **st)
            if metric == "acc_merged":
                ens = cell_stats(df, "acc_ensemble", epochs=e, weight_decay=wd)
                ax.plot(ens.index, ens["mean"], color=st["color"], ls=":", lw=1)
        ax.set_title(title)
        _width_axis(ax, long["hidden_units"].dropna())
    base = cell_stats(select(hidden, method="untrained"), "rel_effective_rank")
    untrained = axes[1, 0].plot(base.index, base["mean"], color=COLORS["untrained"], ls="-.", lw=2)[0]
    handles, labels = axes[0, 0].get_legend_handles_labels()
    _figure_legend(fig, handles + [untrained], labels + ["untrained networks"])
    return fig


def plot_regime_map(long: pd.DataFrame) -> Figure:
    """Return the regime map: width against the decay integral D (log axis), merged accuracy as colour."""

    fig, axes = _figure(1, 1, 3.8)
    ax = axes[0, 0]
    pts = []
    for _, cell in long.groupby(["epochs", "weight_decay"]):
        d = float(cell.loc[cell["metric"] == "decay_integral", "value"].mean())
        acc = cell_stats(cell, "acc_merged")
        pts += [(u, d, a) for u, a in acc["mean"].items()]
    u, d, a = (np.array(v, float) for v in zip(*pts))
    sc = ax.scatter(u, d, c=a, cmap="RdYlGn", vmin=0, vmax=1, s=700, marker="s", edgecolors="k", linewidths=0.4)
    for x, y, v in pts:
        ax.annotate(f"{v:.2f}", (x, y), ha="center", va="center", fontsize=9)
    ax.set_yscale("log")
    ax.set_ylabel(r"decay integral $D = \mathrm{wd}\cdot\sum_t \eta_t$")
    _width_axis(ax, u)
    fig.colorbar(sc, ax=ax, label=r"merged accuracy, $\lambda=\frac{1}{2}$")
    ax.grid(False)
    return fig


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
