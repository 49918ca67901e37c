"""The book's figure style, the legibility check, and the layout helpers that every figure family uses.

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

The figures live by paper, each function taking tidy frames and returning a figure: :mod:`lmcbook.plots_width`
(the width study, its probes, controls and regime, the mechanism study and ``lmcbook diagnose``'s report) and
:mod:`lmcbook.plots_noise` (the noise study).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis, Tick
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure, FigureBase
from matplotlib.legend import Legend
from matplotlib.spines import Spine
from matplotlib.text import Text
from matplotlib.transforms import ScaledTranslation

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
        f"enlarge that text; see lmcbook/plots_style.py.")


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



def placeholder(text: str) -> Figure:
    """Return a small empty figure that says ``text`` (where a page's figure has nothing to show)."""
    fig, axes = _figure(1, 1, 0.8)
    ax = axes[0, 0]
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return fig
