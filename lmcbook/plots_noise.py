"""The noise study's figures: merging gain against η, B and the noise scale S, the regime map, spawn points, the
components (momentum, weight decay, augmentation, learning-rate pairs) and task arithmetic."""

from __future__ import annotations

import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from .claims.noise import cell_mean_fit
from .plots_style import (
    COLORS,
    _figure,
    _figure_legend,
    _label_width,
    _legend_below,
    _legend_right,
    _stack,
    errorbar,
    seed_stats,
)


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


def plot_reference_grid(grid: pd.DataFrame) -> Figure:
    """Return :func:`plot_noise_grid` of a noise run's η × B grid (:func:`lmcbook.claims.noise.grid_pairs`) with the
    quadratic fit on log10 S over its kept cells' means: the figure the noise-scale and landing pages show of a
    reference run."""
    return plot_noise_grid(grid, cell_mean_fit(grid, ["lr", "batch_size"]))


def _start_label(method: str, fraction: float) -> str:
    if method == "anneal":
        return f"spawn at {fraction:.0%}, annealed"
    return "independent" if method == "independent" else "shared init" if fraction == 0 else f"spawn at {fraction:.0%}"


def plot_noise_map(cells: pd.DataFrame) -> Figure:
    """Return the regime map (:func:`lmcbook.claims.noise.map_cells`): merging gain against η with its interval over
    pairs, one line per start (spawn point, shared initialisation, independent pairs), one panel per schedule floor
    (rows) and augmentation (columns); a grey cross marks a cell the rule excluded, and the band is ± half a point."""
    from .claims.thresholds import NOISE_MIN_EFFECT

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


def plot_anneal(maps: dict[str, pd.DataFrame]) -> Figure:
    """Return merging against annealing on each regime map that annealed children (method "anneal", N8): left, the
    merge's gain over its own constant-rate children; right, merged minus the annealed children of the same parents
    (paired by parent); both against S = η/(B(1−μ)), with 95% intervals over pairs, one line per map and
    augmentation, on the cells where neither arm failed.  The band is ± the minimum effect."""
    from .claims.noise import MAP_KEYS, map_cells, noise_pairs
    from .claims.thresholds import NOISE_MIN_EFFECT
    from .stats import interval

    fig, axes = _figure(1, 2, 3.0, sharex=True)
    for k, (label, frame) in enumerate(maps.items()):
        frame = frame.assign(augment=frame["augment"].astype(str).str.lower().isin(["true", "1", "1.0"]))
        kept = map_cells(frame)
        kept = kept[kept["kept"].astype(bool)]
        pairs = noise_pairs(frame, MAP_KEYS)
        scale = float(frame["batch_size"].iloc[0] * (1 - frame["momentum"].iloc[0]))
        for (aug, floor, frac), part in pairs.groupby(["augment", "lr_floor", "spawn_fraction"]):
            here = kept[(kept["augment"] == aug) & np.isclose(kept["lr_floor"], floor)
                        & np.isclose(kept["spawn_fraction"], frac)]
            ok = [lr for lr in sorted(part["lr"].unique())
                  if {"spawn", "anneal"} <= set(here.loc[np.isclose(here["lr"], lr), "method"])]
            if not ok:
                continue
            arms = {m: part[part["method"] == m].set_index(["lr", "pair"]) for m in ("spawn", "anneal")}
            gain = [interval(arms["spawn"].xs(lr, level="lr")["gain"].dropna()) for lr in ok]
            diff = [interval((arms["spawn"].xs(lr, level="lr")["acc_merged"]
                              - arms["anneal"].xs(lr, level="lr")["acc_endpoints"]).dropna()) for lr in ok]
            s = np.array(ok) / scale
            for ax, ivs in ((axes[0, 0], gain), (axes[0, 1], diff)):
                mean = np.array([iv.mean for iv in ivs])
                ax.errorbar(s, 100 * mean, yerr=[100 * np.nan_to_num(mean - [iv.lo for iv in ivs]),
                                                 100 * np.nan_to_num([iv.hi for iv in ivs] - mean)],
                            marker="o", ms=3, capsize=2, color=plt.get_cmap("tab10")(k), ls="-" if aug else "--",
                            label=f"{label.strip('`')}, {'augmented' if aug else 'no augmentation'}")
    for ax, title in ((axes[0, 0], "merge − constant-rate children"), (axes[0, 1], "merge − annealed children")):
        ax.axhspan(-100 * NOISE_MIN_EFFECT, 100 * NOISE_MIN_EFFECT, color="0.92", lw=0)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=2)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel(r"$S = \eta / (B(1-\mu))$")
        ax.set_title(title, fontsize=10)
    axes[0, 0].set_ylabel("points (linear within ± 2)")
    _figure_legend(fig)
    return fig
