"""The interactive explorer's callbacks: plain functions that read the store and never train.

``notebooks/explore.py`` wires these to ipywidgets; tests call them directly.  Pick a
data set, a width, a pair, λ and a layer; :func:`view` returns the pair's
interpolation curve (accuracy, raw and calibrated loss) and the LEWC and LLFC errors
by layer, or, if a run is missing, a message naming it and the command that trains it.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jupytext
import matplotlib.pyplot as plt
import pandas as pd
import papermill
import torch
from matplotlib.figure import Figure

from ..plots_style import COLORS, use_style
from ..probes import PairActivations
from ..store import RunStore, cached_pair_summary, describe, study_data
from ..studies import study


@dataclass
class View:
    """What the explorer shows: a message (non-empty if something is missing), the curve, the layer errors, a figure."""

    message: str
    curve: pd.DataFrame | None = None
    layers: pd.DataFrame | None = None
    figure: Figure | None = None


def options(profile: str = "quick", dataset: str | None = None) -> dict[str, list]:
    """Return the choices of each control for ``profile``: widths, pairs, λ values and layers."""
    sweep = study("width", profile, dataset=dataset)
    return {"width": list(sweep.widths), "pair": list(range(sweep.seeds)), "lam": list(sweep.lams),
            "layer": list(range(1, sweep.layers + 1))}


def train_command(profile: str, dataset: str, width: float) -> str:
    """Return the shell command that trains every pair of one width of the sweep."""
    return (f"lmcbook train --profile {profile} --part width -p dataset {shlex.quote(dataset)} "
            f"-p widths \"[{width:g}]\"")


def view(profile: str = "quick", dataset: str | None = None, width: float | None = None, pair: int = 0,
         lam: float = 0.5, layer: int | None = None, store: RunStore | None = None) -> View:
    """Return the explorer's view of one pair of the width sweep, read from the store (nothing is trained)."""
    base = study("width", profile, dataset=dataset)
    width = base.widths[-1] if width is None else float(width)
    sweep = study("width", profile, dataset=base.dataset, widths=[width])
    if not 0 <= pair < sweep.seeds:
        return View(f"pair={pair} is not allowed: the {profile} profile has pairs 0..{sweep.seeds - 1}")
    store = store or RunStore()
    p = sweep.pair(width, pair)
    for spec in (p.a, p.b):
        if not store.has(spec):
            return View(f"Run {spec.short_id} ({describe(spec)}) is not in the store {store.root}. "
                        f"Train it (and the other pairs of this width) with:\n\n"
                        f"    {train_command(profile, sweep.dataset, width)}")
    data = study_data(sweep)
    ra, rb = store.load(p.a, data.device), store.load(p.b, data.device)
    curve = cached_pair_summary(store, ra, rb, data, sweep.lams)["curve"]
    acts = PairActivations(ra.model, rb.model, data.x_test, train_x=data.x_train, dtype=torch.float32,
                           warn=False)  # the book's methods page says where LEWC's λ^l scale applies
    layers = acts.lewc([lam]).pivot_table(index="layer", columns="metric", values="value")
    layer = sweep.layers - 1 if layer is None else int(layer)
    fig = _figure(curve, layers, lam, layer, p.hidden_units, pair)
    return View("", curve, layers[["lewc_rel_err", "llfc_rel_err", "lewc_cos"]], fig)


def _figure(curve: pd.DataFrame, layers: pd.DataFrame, lam: float, layer: int, units: int, pair: int) -> Figure:
    use_style()
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(12.5, 3.3))
    ax1.plot(curve["lam"], curve["acc"], color=COLORS["merged"], marker="o", ms=3)
    ax1.set_ylabel("test accuracy")
    ax2.plot(curve["lam"], curve["loss"], color=COLORS["raw"], marker="o", ms=3, label="raw")
    ax2.plot(curve["lam"], curve["loss_cal"], color=COLORS["calibrated"], marker="o", ms=3, label="calibrated")
    ax2.set_ylabel("test loss (nats)")
    ax2.legend()
    for ax in (ax1, ax2):
        ax.axvline(lam, color="k", ls=":", lw=1)
        ax.set_xlabel(r"$\lambda$")
    ls = layers.index.to_numpy()
    ax3.plot(ls, layers["lewc_rel_err"], marker="o", color=COLORS["merged"], label="LEWC")
    ax3.plot(ls, layers["llfc_rel_err"], marker="s", color=COLORS["ensemble"], label="LLFC")
    ax3.axvline(layer, color="k", ls=":", lw=1)
    ax3.set_yscale("log")
    ax3.set_xticks(ls)
    ax3.set_xlabel("layer")
    ax3.set_ylabel(rf"relative error at $\lambda = {lam:g}$")
    ax3.legend()
    fig.suptitle(f"{units} hidden units, pair {pair}", fontsize=10)
    fig.tight_layout()
    plt.close(fig)  # shown once, by the caller's display(); the inline backend would show it again
    return fig


class ToolError(RuntimeError):
    """A program a command needs is not installed; the message says how to install it."""


def live_command(notebook: Path) -> list[str]:
    """Return the command that opens ``notebook`` in JupyterLab (or the classic notebook if Lab is absent)."""
    try:
        import jupyterlab  # noqa: F401

        return [sys.executable, "-m", "jupyterlab", str(notebook)]
    except ImportError:
        if shutil.which("jupyter-notebook") or _has_module("notebook"):
            return [sys.executable, "-m", "notebook", str(notebook)]
        raise ToolError("lmcbook explore needs JupyterLab: pip install 'lmcbook[lab]' "
                        "(or pip install jupyterlab), then run it again") from None


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def prepare_live(source: Path, dest: Path, profile: str = "quick") -> Path:
    """Write the explorer's source as a notebook with ``interactive = True`` injected; return its path."""
    nb = jupytext.read(str(source))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".src.ipynb")
    jupytext.write(nb, str(tmp))
    nb = papermill.parameterize.parameterize_notebook(
        papermill.iorw.load_notebook_node(str(tmp)), {"profile": profile, "interactive": True})
    papermill.iorw.write_ipynb(nb, str(dest))
    tmp.unlink()
    return dest


def launch(source: Path, dest: Path, profile: str = "quick", dry_run: bool = False) -> list[str]:
    """Prepare the live explorer notebook and open it in Jupyter (unless ``dry_run``); return the command."""
    cmd = live_command(dest) if not dry_run else [sys.executable, "-m", "jupyterlab", str(dest)]  # (before writing)
    prepare_live(source, dest, profile)
    if not dry_run:
        subprocess.run(cmd, check=False)
    return cmd


def show(profile: str, study: Any, store: RunStore, width: float | None, pair: int, lam: float,
         layer: int | None) -> View:
    """Draw the explorer's view of ``study``'s data set (:func:`view`): its figure, or the message naming what is
    missing; return the view."""
    from IPython.display import display

    v = view(profile, study.dataset, width, pair, lam, layer, store)
    if v.message:
        print(v.message)
    else:
        display(v.figure)
    return v


def live_controls(profile: str, study: Any, store: RunStore) -> None:
    """Show the controls, and redraw the view whenever one of them changes (run live by ``lmcbook explore``)."""
    import ipywidgets as w
    from IPython.display import clear_output, display

    opts = options(profile, study.dataset)
    controls = {"width": w.Dropdown(options=opts["width"], value=study.width or opts["width"][-1],
                                    description="width ×"),
                "pair": w.Dropdown(options=opts["pair"], value=study.pair, description="pair"),
                "lam": w.SelectionSlider(options=opts["lam"], value=study.lam, description="λ"),
                "layer": w.Dropdown(options=opts["layer"], value=study.layer or opts["layer"][-2],
                                    description="layer")}
    out = w.Output()

    def update(change: Any = None) -> None:
        with out:
            clear_output(wait=True)
            show(profile, study, store, **{k: c.value for k, c in controls.items()})

    for c in controls.values():
        c.observe(update, names="value")
    display(w.HBox(list(controls.values())), out)
    update()
