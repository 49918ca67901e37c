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

The figures live by paper, each function taking tidy frames and returning a figure: ``plots_width.py`` (the
width study, its probes, controls and regime, the mechanism study and ``lmcbook diagnose``'s report) and
``plots_noise.py`` (the noise study); the style, the legibility check and the layout helpers they share are in
``plots_style.py``.  This module gathers their public names: a page reads every figure as
``plots.NAME``.
"""

from __future__ import annotations

from .plots_noise import (
    plot_anneal,
    plot_augment,
    plot_lr_pairs,
    plot_momentum,
    plot_noise_grid,
    plot_noise_map,
    plot_spawn_points,
    plot_task_arithmetic,
    plot_weight_decay,
)
from .plots_style import (
    COLORS,
    DPI,
    FULL_WIDTH,
    MAX_COLUMNS,
    MIN_FONT_PX,
    PANEL_HEIGHT,
    STYLE,
    TEXT_COLUMN_PX,
    IllegibleFigure,
    check_legible,
    errorbar,
    placeholder,
    png_size_px,
    rendered_font_px,
    seed_stats,
    use_style,
)
from .plots_width import (
    GROUP_STYLE,
    lines_by_layer,
    plot_additivity,
    plot_barriers,
    plot_depth,
    plot_draws,
    plot_interpolation,
    plot_layer_errors,
    plot_lewc_signatures,
    plot_lewc_vs_llfc,
    plot_mechanism_d,
    plot_mechanism_width,
    plot_neuron_overlap,
    plot_orthogonality,
    plot_pair_curves,
    plot_panels,
    plot_rank,
    plot_regime,
    plot_regime_map,
    plot_scale_law,
    plot_theory,
    plot_width_accuracy,
)

__all__ = ["COLORS", "DPI", "FULL_WIDTH", "GROUP_STYLE", "MAX_COLUMNS", "MIN_FONT_PX", "PANEL_HEIGHT", "STYLE",
           "TEXT_COLUMN_PX", "check_legible", "errorbar", "IllegibleFigure", "lines_by_layer", "placeholder",
           "plot_additivity", "plot_anneal", "plot_augment", "plot_barriers", "plot_depth", "plot_draws",
           "plot_interpolation",
           "plot_layer_errors", "plot_lewc_signatures", "plot_lewc_vs_llfc", "plot_lr_pairs", "plot_mechanism_d",
           "plot_mechanism_width", "plot_momentum", "plot_neuron_overlap", "plot_noise_grid", "plot_noise_map",
           "plot_orthogonality", "plot_pair_curves", "plot_panels", "plot_rank", "plot_regime", "plot_regime_map",
           "plot_scale_law", "plot_spawn_points", "plot_task_arithmetic", "plot_theory", "plot_weight_decay",
           "plot_width_accuracy", "png_size_px", "rendered_font_px", "seed_stats", "use_style"]
