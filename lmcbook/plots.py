"""One visual style, and figure functions that take tidy frames and return figures.

Error bars are always the range (min to max) over seeds around the seed mean.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

STYLE = {
    "figure.dpi": 110, "savefig.dpi": 110, "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
    "legend.frameon": False, "legend.fontsize": 8, "lines.linewidth": 1.6, "lines.markersize": 4,
}
COLORS = {"merged": "#c0392b", "ensemble": "#2c3e50", "endpoints": "#7f8c8d", "prediction": "#27ae60",
          "raw": "#7f8c8d", "calibrated": "#c0392b", "untrained": "#95a5a6"}


def use_style() -> None:
    """Apply the book's matplotlib style."""
    plt.rcParams.update(STYLE)


def seed_stats(df: pd.DataFrame, by: str | list[str], col: str) -> pd.DataFrame:
    """Return mean, min and max of ``col`` over seeds for each value of ``by``."""
    g = df.groupby(by)[col]
    return pd.DataFrame({"mean": g.mean(), "lo": g.min(), "hi": g.max(), "n": g.size()}).reset_index()


def errorbar(ax, df: pd.DataFrame, x: str, col: str, **kw) -> None:
    """Plot the seed mean of ``col`` against ``x`` with min-max error bars."""
    s = seed_stats(df, x, col)
    ax.errorbar(s[x], s["mean"], yerr=[s["mean"] - s["lo"], s["hi"] - s["mean"]], capsize=2.5, marker="o", **kw)


def _width_axis(ax, units) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(units)))
    ax.set_xticklabels([str(int(u)) for u in sorted(set(units))])
    ax.set_xlabel("hidden units (base width × multiplier)")


def plot_interpolation(curves: pd.DataFrame, col: str = "acc", ylabel: str = "test accuracy") -> Figure:
    """Return ``col`` against λ, one line per width (seed mean, min-max band)."""
    use_style()
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    units = sorted(curves["hidden_units"].unique())
    cmap = plt.get_cmap("viridis")
    for i, u in enumerate(units):
        s = seed_stats(curves[curves["hidden_units"] == u], "lam", col)
        c = cmap(i / max(len(units) - 1, 1))
        ax.plot(s["lam"], s["mean"], color=c, label=f"{u}")
        ax.fill_between(s["lam"], s["lo"], s["hi"], color=c, alpha=0.2, lw=0)
    ax.set_xlabel(r"$\lambda$   ($\theta(\lambda)=\lambda\theta_a+(1-\lambda)\theta_b$)")
    ax.set_ylabel(ylabel)
    ax.legend(title="hidden units", ncol=2)
    fig.tight_layout()
    return fig


def plot_width_accuracy(summary: pd.DataFrame) -> Figure:
    """Return merged accuracy at λ=½ against width, with the endpoints' mean and the logit ensemble."""
    use_style()
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for col, label, key in (("acc_ensemble", "logit ensemble", "ensemble"),
                            ("acc_endpoints", "endpoints (mean of a, b)", "endpoints"),
                            ("acc_merged", r"merged, $\lambda=\frac{1}{2}$", "merged")):
        errorbar(ax, summary, "hidden_units", col, color=COLORS[key], label=label)
    _width_axis(ax, summary["hidden_units"])
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def plot_barriers(summary: pd.DataFrame) -> Figure:
    """Return the raw and calibrated midpoint loss barriers against width."""
    use_style()
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    errorbar(ax, summary, "hidden_units", "loss_barrier_mid", color=COLORS["raw"], label="raw")
    errorbar(ax, summary, "hidden_units", "loss_barrier_cal_mid", color=COLORS["calibrated"],
             label="calibrated (own τ per model)")
    ax.axhline(0, color="k", lw=0.6)
    _width_axis(ax, summary["hidden_units"])
    ax.set_ylabel(r"midpoint loss barrier (nats)")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_lewc_signatures(summary: pd.DataFrame, depth: int) -> Figure:
    """Return the logit norm ratio (prediction 2^(1-L)) and τ_merged/τ_ens (prediction 2^(L-1)) against width."""
    use_style()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.3))
    for ax, col, pred, label in ((axes[0], "logit_norm_ratio", 2.0 ** (1 - depth),
                                  r"$\|f_L(\theta(\frac{1}{2}))\| \,/\, \|\frac{1}{2}(f_L^a+f_L^b)\|$"),
                                 (axes[1], "tau_ratio", 2.0 ** (depth - 1), r"$\tau_{merged} / \tau_{ens}$")):
        errorbar(ax, summary, "hidden_units", col, color=COLORS["merged"], label="measured")
        ax.axhline(pred, color=COLORS["prediction"], ls="--", label=f"LEWC prediction ({pred:g})")
        ax.axhline(1, color="k", lw=0.6, ls=":")
        _width_axis(ax, summary["hidden_units"])
        ax.set_yscale("log", base=2)
        ax.set_ylabel(label)
        ax.legend()
    fig.tight_layout()
    return fig

