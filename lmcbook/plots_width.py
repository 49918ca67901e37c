"""The width paper's figures: interpolation curves, accuracy and barriers against width, LEWC and its scale law,
the mechanism probes (additivity, orthogonality, neuron overlap, rank), depth, the constructed pairs of the theory,
the controls (merge methods, random permutations) and the training regime; the mechanism study (the three arms
against width, every measure against the decay integral D); and those of ``lmcbook diagnose``'s report (a pair's
interpolation curves, LEWC and LLFC by layer)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .plots_style import (
    COLORS,
    MAX_COLUMNS,
    _figure,
    _figure_legend,
    _legend_below,
    _legend_right,
    _ncol,
    _stack,
    _width_axis,
    _wrap_titles,
    errorbar,
    seed_stats,
)
from .schema import cell_table, in_cell, pair_values
from .stats import cell_stats, interval


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
#: Pairs a diagnose figure draws one by one, each with its own legend entry; above it (K ≥ 4 checkpoints: 6 pairs
#: and more) every pair is a thin line of its method's colour and the mean over pairs a thick one, so that the
#: figure and its legend stay legible for any K.
PAIRS_NAMED = 3
_METHOD_COLORS = {"none": "C0", "weight_matching": "C1"}


def _pair_lines(ax, frame: pd.DataFrame, x: str, y: str, by: list[str], style: dict[str, dict],
                pairs: list[str]) -> None:
    """Draw ``y`` against ``x`` for each group of ``by`` (pair first, then maybe the method): one coloured line per
    pair while there are at most PAIRS_NAMED pairs, else thin lines and their mean per method."""
    if len(pairs) <= PAIRS_NAMED:
        for key, c in frame.groupby(by, sort=False):
            pair, method = (key[0] if isinstance(key, tuple) else key, "none") if len(by) == 1 else key
            ax.plot(c[x], c[y], color=plt.get_cmap("tab10")(pairs.index(pair) % 10), **style.get(method, {}),
                    label=f"pair {pair}" + (f", {'plain' if method == 'none' else method.replace('_', ' ')}"
                                            if len(by) > 1 else ""))
        return
    methods = frame[by[1]] if len(by) > 1 else pd.Series("none", index=frame.index)
    for method, m in frame.groupby(methods, sort=False):
        color, words = _METHOD_COLORS.get(method, "0.4"), "plain" if method == "none" else method.replace("_", " ")
        for _, c in m.groupby(by[0], sort=False):
            ax.plot(c[x], c[y], color=color, lw=0.6, alpha=0.35, ls=style.get(method, {}).get("ls", "-"))
        mean = m.groupby(x)[y].mean()
        ax.plot(mean.index, mean.values, color=color, lw=2.2, ls=style.get(method, {}).get("ls", "-"),
                marker=style.get(method, {}).get("marker"),
                label=f"mean of {len(pairs)} pairs" + (f", {words}" if len(by) > 1 else "") + " (thin: each pair)")


def plot_pair_curves(curves: pd.DataFrame) -> Figure:
    """Return test accuracy, raw loss and calibrated loss against λ, per pair and merge method (a diagnose report's
    interpolation curves; every pair named up to PAIRS_NAMED pairs, then each pair thin and their mean), stacked."""
    fig, axes = _stack(3)
    styles = {"none": {"ls": "-"}, "weight_matching": {"ls": "--"}}
    pairs = list(dict.fromkeys(curves["pair"]))
    for ax, col, label in zip(axes, ("acc", "loss", "loss_cal"), ("test accuracy", "test loss (nats)",
                                                                  "calibrated test loss")):
        _pair_lines(ax, curves, "lam", col, ["pair", "method"], styles, pairs)
        ax.set_ylabel(label)
    axes[-1].set_xlabel(r"$\lambda$   ($\theta(\lambda)=\lambda\theta_a+(1-\lambda)\theta_b$)")
    _legend_below(axes[-1])
    return fig


def plot_layer_errors(layers: pd.DataFrame) -> Figure:
    """Return the LEWC and LLFC relative errors at λ = ½ against the layer, trained pairs (solid; every pair named up
    to PAIRS_NAMED pairs, then each pair thin and their mean) beside the untrained pair (dashed)."""
    fig, axes = _stack(2)
    pairs = list(dict.fromkeys(layers.loc[layers["model"] == "trained", "pair"]))
    for ax, (metric, title) in zip(axes, (("lewc_rel_err", "LEWC"), ("llfc_rel_err", "LLFC"))):
        d = layers[(layers["metric"] == metric) & (layers["lam"] == 0.5)]
        _pair_lines(ax, d[d["model"] == "trained"], "layer", "value", ["pair"], {"none": {"marker": "o"}}, pairs)
        base = d[d["model"] == "untrained"].drop_duplicates("layer")
        ax.plot(base["layer"], base["value"], "s--", color=COLORS["untrained"], label="untrained pair")
        ax.set_yscale("log")
        ax.set_ylabel("relative error")
        ax.set_title(rf"{title} prediction at $\lambda = 1/2$")
    axes[-1].set_xlabel("layer $l$ (in call order)")
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _legend_below(axes[-1])
    return fig
