"""Every glued figure is readable at the book's text width: its texts render at 9 pt (12 CSS px) or larger.

These tests read figures' sizes and font sizes directly (no notebook is executed); the book's execution tests
check every real figure, because :meth:`lmcbook.page.Page.glue_figure` refuses an illegible one.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from lmcbook import plots_style, plots_width  # noqa: E402
from lmcbook.page import Page  # noqa: E402

UNITS = [16, 32, 64, 128, 256, 512, 1024]  # the quick profile's seven widths: the most legend entries


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _wide_figure_with_small_ticks() -> plt.Figure:
    plots_style.use_style()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    for ax in axes:
        ax.plot([1, 2, 3], [3, 1, 2], label="a line")
        ax.tick_params(labelsize=6)
    fig.tight_layout()
    return fig


def test_the_rule_is_nine_points_at_the_measured_column_width():
    assert plots_style.MIN_FONT_PX == 12  # CSS: 9 pt = 12 px
    assert plots_style.TEXT_COLUMN_PX == 672
    # a full-width figure is shown unscaled
    assert plots_style.FULL_WIDTH * plots_style.DPI < plots_style.TEXT_COLUMN_PX
    assert "9 pt" in plots_style.__doc__ and "672" in plots_style.__doc__


def test_glue_figure_refuses_an_illegible_figure_and_names_its_key():
    fig = _wide_figure_with_small_ticks()
    with pytest.raises(plots_style.IllegibleFigure) as err:
        Page.glue_figure("fig_tiny_ticks", fig)
    message = str(err.value)
    assert "'fig_tiny_ticks'" in message and "tick label" in message and "9 pt" in message
    assert "stack its panels" in message  # says what to do
    assert not plt.fignum_exists(fig.number)  # closed even though it was refused


def test_the_smallest_text_is_the_one_named():
    fig = _wide_figure_with_small_ticks()
    sizes = plots_style.rendered_font_px(fig)
    name, px = min(sizes, key=lambda s: s[1])
    assert name.startswith("tick label")
    width, _ = plots_style.png_size_px(fig)
    assert width > 1000  # 10 in at 110 dpi
    assert px == pytest.approx(6 * plots_style.DPI / 72 * plots_style.TEXT_COLUMN_PX / width)
    assert px < plots_style.MIN_FONT_PX


def test_a_single_panel_figure_at_default_settings_passes():
    plots_style.use_style()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.set_title("a title")
    ax.set_xlabel("x")
    ax.legend()
    plots_style.check_legible(fig, "fig_default")  # does not raise
    assert min(px for _, px in plots_style.rendered_font_px(fig)) >= plots_style.MIN_FONT_PX


def test_glue_figure_glues_a_legible_figure(monkeypatch):
    glued = []
    monkeypatch.setattr("lmcbook.page.glue", lambda key, value, display: glued.append((key, value, display)))
    plots_style.use_style()
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 1])
    Page.glue_figure("fig_ok", fig)
    assert glued == [("fig_ok", fig, False)]
    assert not plt.fignum_exists(fig.number)


def test_rendered_size_halves_when_the_png_is_twice_the_column():
    plots_style.use_style()
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x label")
    width, _ = plots_style.png_size_px(fig)
    natural = plots_style.rendered_font_px(fig, column_px=10_000)  # wider than the PNG: not scaled
    half = plots_style.rendered_font_px(fig, column_px=width / 2)
    assert [n for n, _ in natural] == [n for n, _ in half]
    assert all(h == pytest.approx(n / 2) for (_, n), (_, h) in zip(natural, half))
    label = dict(natural)["axis label 'x label'"]
    assert label == pytest.approx(10 * plots_style.DPI / 72)  # 10 pt at 110 dpi, shown at its natural size


def test_a_figure_twice_as_wide_renders_its_text_at_about_half_the_size():
    plots_style.use_style()
    sizes = {}
    for inches in (12.0, 24.0):  # both wider than the column
        fig = plt.figure(figsize=(inches, 2))
        fig.text(0.01, 0.5, "left")
        fig.text(0.99, 0.5, "right", ha="right")  # the tight box spans the whole width
        sizes[inches] = dict(plots_style.rendered_font_px(fig))["figure text 'left'"]
    assert sizes[24.0] / sizes[12.0] == pytest.approx(0.5, rel=0.02)


def test_every_kind_of_text_is_read_and_hidden_ones_are_not():
    plots_style.use_style()
    fig, (ax, off, hidden) = plt.subplots(1, 3, figsize=(5.5, 3))
    im = ax.imshow(np.arange(4.0).reshape(2, 2))
    ax.set_title("the title")
    ax.set_xlabel("the x label")
    ax.annotate("an annotation", (0, 0))
    ax.plot([0, 1], [0, 1], label="a legend entry")
    ax.legend(title="legend title")
    fig.colorbar(im, ax=ax, label="colour-bar label")
    fig.suptitle("the suptitle")
    off.axis("off")
    off.text(0.5, 0.5, "text on an axis-less panel")
    hidden.set_title("hidden panel")
    hidden.set_visible(False)
    invisible = ax.text(0, 1, "invisible")
    invisible.set_visible(False)
    names = [n for n, _ in plots_style.rendered_font_px(fig)]
    for expected in ("title 'the title'", "axis label 'the x label'", "axes text 'an annotation'",
                     "legend text 'a legend entry'", "legend text 'legend title'", "axis label 'colour-bar label'",
                     "suptitle 'the suptitle'", "axes text 'text on an axis-less panel'"):
        assert expected in names, (expected, names)
    assert any(n.startswith("tick label") for n in names)
    assert not any("hidden panel" in n or "invisible" in n for n in names)
    # the axis-less panel's (hidden) tick labels are not read: every tick label belongs to the image or colour bar
    assert sum(n.startswith("tick label") for n in names) < 40


def test_a_legend_outside_the_figure_widens_the_png_and_is_counted():
    plots_style.use_style()
    fig, ax = plt.subplots(figsize=(5.9, 3))
    ax.plot([0, 1], [0, 1], label="a very long legend entry " * 3)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    width, _ = plots_style.png_size_px(fig)
    assert width > plots_style.TEXT_COLUMN_PX  # the tight box includes the legend, as IPython's PNG does
    with pytest.raises(plots_style.IllegibleFigure):
        plots_style.check_legible(fig, "fig_spilling_legend")


def test_more_than_two_panels_side_by_side_is_refused_by_the_layout_helper():
    with pytest.raises(ValueError, match="at most 2 panels side by side"):
        plots_style._figure(1, 3)


# -- the book's own figures, at the quick profile's seven widths --------------------------------------------------
def _curves() -> pd.DataFrame:
    rows = [dict(hidden_units=u, lam=lam, seed=s, acc=0.9 - 0.3 * lam * (1 - lam) * (1 + s) / np.log2(u))
            for u in UNITS for lam in np.linspace(0, 1, 21) for s in range(3)]
    return pd.DataFrame(rows)


def _long(groups=("none", "weight_matching", "random_permutation", "repair")) -> pd.DataFrame:
    rows = [dict(metric=m, value=v * (1 + 0.1 * i + 0.05 * p) / np.log2(u), hidden_units=u, method=g, pair=p)
            for m, v in (("acc_barrier", 0.5), ("loss_barrier", 1.0), ("loss_barrier_cal", 0.3),
                         ("acc_merged", 2.0), ("lewc_rel_err", 1.5), ("orth_ratio", 3.0))
            for i, g in enumerate(groups) for u in UNITS for p in range(3)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("make", [
    lambda: plots_width.plot_interpolation(_curves()),
    lambda: plots_width.plot_width_accuracy(pd.DataFrame(
        [dict(hidden_units=u, seed=s, acc_ensemble=0.95 - s / 100, acc_endpoints=0.9 - s / 100,
              acc_merged=0.5 + 0.05 * np.log2(u) / 10 - s / 50)
         for u in UNITS for s in range(3)])),
    lambda: plots_width.plot_panels(_long(), [dict(metric=m, title=t) for m, t in (
        ("acc_barrier", "accuracy barrier"), ("loss_barrier", "raw loss barrier (nats)"),
        ("loss_barrier_cal", "calibrated loss barrier (nats)"))]),
    lambda: plots_width.plot_panels(_long(), [dict(metric=m, title=f"a rather long panel title about {m}", logy=True)
                                        for m in ("acc_barrier", "loss_barrier", "loss_barrier_cal", "acc_merged",
                                                  "lewc_rel_err", "orth_ratio")], ncols=3),
    lambda: plots_style.placeholder("No reference run of this page is committed."),
], ids=["interpolation", "width_accuracy", "panels_3", "panels_6_ncols_3", "placeholder"])
def test_book_figures_at_seven_widths_are_legible_and_fit_the_column(make):
    fig = make()
    plots_style.check_legible(fig, "fig")
    width, _ = plots_style.png_size_px(fig)
    assert width <= plots_style.TEXT_COLUMN_PX
    # no two tick labels of one axis overlap
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        boxes = sorted((t.get_window_extent() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()),
                       key=lambda b: b.x0)
        assert all(a.x1 <= b.x0 + 1 for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in ax.get_xticklabels()]
