"""The diagnose report: one self-contained HTML page (figures inlined as PNG), its CSV and a JSON summary.

The three files are written into a fresh temporary folder beside the output folder,
which then replaces the output folder in one rename: a report is never half-written.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from .. import __version__, plots
from ..specs import SpecError
from .diagnose import Diagnosis, long_frame, summary_table

FILES = ("report.html", "report.csv", "summary.json")  #: what a report folder holds

#: What each number of the summary table means (the report prints this beside it).
MEANINGS = {
    "acc a": "test accuracy of the pair's first checkpoint (λ = 1)",
    "acc b": "test accuracy of the second checkpoint (λ = 0); after weight matching, the permuted second checkpoint",
    "merged acc (λ=½)": "test accuracy of the weight average θ(½) (BatchNorm statistics recomputed on training data)",
    "ensemble acc": "test accuracy of the logit ensemble ½(f_a + f_b), the reference a merge aims at",
    "acc barrier": "max over λ of the linear interpolation of the endpoints' accuracies minus θ(λ)'s",
    "loss barrier (raw)": "max over λ of θ(λ)'s test loss minus the endpoints' interpolated loss (nats)",
    "loss barrier (calibrated)": "the same with every model's own inverse temperature, fitted on the calibration split",
    "logit norm ratio": "‖f(θ(½))‖ / ‖½(f_a + f_b)‖ on the test split; exact LEWC predicts 2^(1−L)",
    "REPAIR acc (λ=½)": "merged accuracy after weight matching and REPAIR (each hidden channel's mean and std reset "
                        "to the endpoints' interpolated statistics)",
}


def check_out(out: str | Path) -> Path:
    """Return the output folder, refusing (before any compute) one that exists and is not a diagnose report, or
    whose parent folder is missing."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or not set(p.name for p in out.iterdir()) <= set(FILES)):
        raise SpecError(f"--out {str(out)!r} is not allowed: it exists and is not an earlier diagnose report "
                        f"(which holds only {', '.join(FILES)}); expected a new folder or an earlier report")
    if not out.absolute().parent.is_dir():
        raise SpecError(f"--out {str(out)!r} is not allowed: its parent folder does not exist")
    return out


def write(diag: Diagnosis, out: str | Path, command: str, seconds: float) -> Path:
    """Write report.html, report.csv and summary.json into ``out`` at once; return the path of report.html."""
    out = check_out(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.absolute().parent))
    try:
        long_frame(diag).to_csv(tmp / "report.csv", index=False)
        (tmp / "summary.json").write_text(json.dumps(summary(diag, command, seconds), indent=1, default=float))
        (tmp / "report.html").write_text(render(diag, command, seconds))
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "report.html"


def summary(diag: Diagnosis, command: str, seconds: float) -> dict:
    """Return the JSON summary: inputs, L, every pair's numbers, the soup, the reading and the notes."""
    p = diag.prepared
    return {"command": command, "lmcbook": __version__, "seconds": round(seconds, 1),
            "checkpoints": p.paths, "model": p.model_name, "data": p.data_name, "sizes": p.data.sizes(),
            "lams": len(p.lams), "depth_L": diag.depth, "spec": p.spec_note,
            "pairs": diag.pairs.to_dict(orient="records"), "soup": diag.soup, "reading": diag.reading,
            "notes": diag.notes}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _table(df: pd.DataFrame, cls: str) -> str:
    return df.to_html(classes=cls, float_format=lambda v: f"{v:.4g}", na_rep="–", border=0)


def _list(items: list[str], cls: str) -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{html.escape(s)}</li>" for s in items) + "</ul>"


STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd;
text-align:right}th{background:#f4f4f4}code{background:#f4f4f4;padding:.1rem .3rem}img{max-width:100%}
.reading li{margin:.3rem 0}table.meanings td{text-align:left}"""


def render(diag: Diagnosis, command: str, seconds: float) -> str:
    """Return the report as one self-contained HTML page."""
    p = diag.prepared
    meanings = pd.DataFrame({"what it means": MEANINGS}).rename_axis("number")
    layers = diag.layers.pivot_table(index=["model", "pair", "layer"], columns="metric", values="value")
    ranks = diag.ranks[diag.ranks["metric"].isin(["effective_rank", "stable_rank", "rel_effective_rank"])]
    parts = [
        f"<h1>lmcbook diagnose</h1><p><code>{html.escape(command)}</code></p>",
        f"<p>{len(p.models)} checkpoints of <code>{html.escape(p.model_name)}</code> on "
        f"<code>{html.escape(p.data_name)}</code> ({', '.join(f'{k} {v}' for k, v in p.data.sizes().items())} "
        f"examples); L = {diag.depth} layers; {len(p.lams)} λ points; {seconds:.1f} s; lmcbook {__version__}.</p>",
        "<h2>Summary</h2>", _table(summary_table(diag), "summary"),
        "<h2>Reading</h2>", _list(diag.reading, "reading"), "<h2>Notes</h2>", _list(diag.notes, "notes"),
        "<h2>What each number means</h2>", _table(meanings, "meanings"),
        "<h2>Interpolation curves</h2>", _png(plots.plot_pair_curves(diag.curves)),
        "<h2>All numbers per pair</h2>", _table(diag.pairs.set_index(["pair", "method"]).T, "pairs"),
        "<h2>LEWC and LLFC by layer, against an untrained pair</h2>", _png(plots.plot_layer_errors(diag.layers)),
        _table(layers, "layers"),
    ]
    if len(diag.theory):
        theory = diag.theory.pivot_table(index=["pair", "layer"], columns="metric", values="value")
        parts += ["<h2>Weak additivity and reciprocal orthogonality (λ = ½)</h2>", _table(theory, "theory")]
    parts += ["<h2>Ranks of the weight matrices</h2>",
              _table(ranks.pivot_table(index=["checkpoint", "layer", "name"], columns="metric", values="value"),
                     "ranks")]
    if diag.soup:
        parts += [f"<h2>The uniform soup of all {diag.soup['K']}</h2>",
                  _table(pd.DataFrame({"value": diag.soup}), "soup")]
    parts.append(f"<p>Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; every number is in "
                 "<code>report.csv</code>, the summary in <code>summary.json</code>.</p>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>lmcbook diagnose</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
