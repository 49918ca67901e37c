"""Reference runs: results too costly for the quick book, committed under ``results/`` with their provenance.

A reference run is one notebook executed by the project's own ``lmcbook execute … --out`` with fixed
parameters, wider or on other data than the quick book.  ``lmcbook reference NAME``
(:func:`lmcbook.book.regenerate_reference`) runs it, and :func:`record` copies the CSV that execution wrote, byte
for byte, to ``results/NAME/NOTEBOOK.csv``; beside it, ``provenance.json`` records the
command, the data (with the SHA-256 of every file read), the code version, the git commit, the machine and
the date, and the CSV's own SHA-256.  Nothing in ``results/`` is edited by hand: a test checks every CSV
against its provenance and the results schema.  A page that shows a reference says when its code version is
not the library's (:func:`stale_note`).

The module's last section says what each committed mechanism reference trains (:func:`reference_settings`) and
checks a reference trained in bf16 against an fp32 one of the same page and data set (:func:`precision_check`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from . import __version__
from .claims.thresholds import MIN_ACC_EFFECT, MIN_PAIRS, PRECISION_LOSS_MARGIN
from .data import DATASET_SHORT
from .files import PACKAGE_DIR, git_sha
from .schema import in_cell, join_and, markdown_table, read_results
from .specs import CODE_VERSION, SpecError
from .stats import FAIL, INCONCLUSIVE, PASS, t_interval, within

RESULTS_ENV = "LMCBOOK_RESULTS"


def results_root() -> Path:
    """Return where reference runs live: $LMCBOOK_RESULTS, else the repository's ``results/``."""
    return Path(os.environ.get(RESULTS_ENV, PACKAGE_DIR.parent / "results"))


@dataclass(frozen=True)
class Reference:
    """One reference run: a notebook, a profile and its parameters, and what data it reads."""

    name: str
    notebook: str
    profile: str
    params: dict[str, Any]
    #: What the run trains on, in words (its numbers carry this name wherever they appear).
    data: str
    #: The data set needs ``--data-root`` (a folder that holds it).
    needs_data_root: bool = False
    #: Why the run exists, one sentence.
    purpose: str = ""
    tags: tuple[str, ...] = field(default=())
    #: Why the run is retired (superseded), one sentence; "" for a live one.  A retired run stays committed so that
    #: its page can say what it showed, but the scoreboard no longer scores it and it cannot be regenerated.
    retired: str = ""
    #: Why a declared run is not committed yet, one sentence; "" once it is (a test holds both to this).
    pending: str = ""


_MNIST_STANDIN = ("the 8k/2k MNIST stand-in: MNIST's official 10,000-image test split, its first 8,000 images to train "
                  "(800 held out for calibration) and its last 2,000 to test")
_DIGITS = "scikit-learn's digits (1,797 8×8 images), the quick book's split"
_MNIST1D = ("MNIST-1D (Greydanus 2020), generated offline: 16,000 training signals (1,000 of them held out for "
            "calibration) and 4,000 test signals")

_FULL_MNIST = ("full MNIST, the paper's recipe: the official 60,000 training images (5,000 held out for calibration) "
               "and 10,000 test images, the paper profile's MLP (784 → h → h → h → 10, bias-free, 512 units at 1×)")
#: The full-MNIST references' widths: the paper's MLP from 0.125× to 8× (64 to 4,096 hidden units), 5 pairs each.
TABLE1_WIDTHS = [0.125, 0.25, 0.5, 1, 2, 4, 8]
#: The finer grid's effective noise scales (issue 49): 1/64 to 1/32 in steps of 2^(1/4).
FINE_NOISE_SCALES = [float(f"{2 ** (k / 4) / 64:.10g}") for k in range(5)]
_TABLE1 = {"arch": "mlp", "widths": TABLE1_WIDTHS, "seeds": 5, "decisive_seeds": 5}
#: The pages the full-MNIST reference is read by, each with what it adds (one training: the width pages read the
#: strong sweep, the weight-matching page its weak twin too, the mechanism page both as its decay arm).
TABLE1_PAGES = {
    "width_accuracy": ("width-accuracy", {}, "merged accuracy against width beside the ensemble (W1, W11)"),
    "loss_barrier_calibration": ("barrier", {}, "raw and calibrated loss barriers and the logit scale (W2, W9, W12)"),
    "weight_matching": ("weight-matching", {}, "none, weight matching, random permutation and REPAIR at every width, "
                        "with the weak-weight-decay twin (1e-4) at every width"),
    "lewc": ("lewc", {}, "LEWC along λ (W3, W13)"),
    "reciprocal_orthogonality": ("orthogonality", {}, "reciprocal orthogonality (W5, W14)"),
    "low_rank": ("low-rank", {}, "the weights' relative rank (W6)"),
    "mechanism": ("mechanism", {"weight_decays": [1e-4, 3e-3], "regimes": [60], "init_scales": [1],
                                "long_max_width": 8, "show_references": False},
                  "the decay arm at weight decay 1e-4 and 3e-3 at every width (W7, R1, R2, M1-M6)"),
}
_TABLE1_PENDING = ("not made yet: its runs (5 pairs at each of 7 widths at weight decay 3e-3 and at 1e-4, 140 "
                   "networks) take about 40 hours of a 2-core CPU in fp32, most of it the 4,096-unit networks (1.6 "
                   "hours each, lmcbook bench); they bank in the run store and resume after a stop, and the page is "
                   "made once they are trained")

REFERENCES: dict[str, Reference] = {r.name: r for r in (
    *(Reference(f"table1-mnist-{tag}", page, "paper", {**_TABLE1, **extra}, _FULL_MNIST, needs_data_root=True,
                purpose=f"the width paper's own setting (its Table 1: the MLP on full MNIST): {what}",
                pending=_TABLE1_PENDING)
      for page, (tag, extra, what) in TABLE1_PAGES.items()),
    Reference("mechanism-mnist-standin", "mechanism", "quick",
              {"dataset": "mnist_standin", "widths": [0.25, 1, 4, 16, 32], "regime_weight_decays": [3e-3],
               "long_max_width": 1, "wide_decays": [1e-4, 3e-3, 1e-2, 3e-2], "show_references": False},
              _MNIST_STANDIN, needs_data_root=True,
              purpose="the mechanism study's arms on 784-dimensional real data, every weight decay up to 2048 hidden "
                      "units (H3, H4)"),
    *(Reference(f"mechanism-long-{tag}", "mechanism", "quick",
                {**({"dataset": "mnist_standin", "precision": "bf16"} if tag == "mnist-standin" else {}),
                 "regimes": [60, 600],
                 "regime_weight_decays": [1e-4, 3e-3], "long_max_width": 16, "show_references": False},
                _MNIST_STANDIN if tag == "mnist-standin" else _DIGITS, needs_data_root=tag == "mnist-standin",
                purpose="the width paper's own route to a large decay integral: the quick recipe trained 600 epochs "
                        "at weight decay 1e-4 and 3e-3 at every width up to 1024 hidden units, 5 pairs at the two "
                        "widest (M1 and M6 by the paper's route; W1 and W7 in the long regime, and W6, which the 2 "
                        "pairs, 4 models, at the narrowest width leave unable to decide)"
                        + (", every run in bfloat16 autocast (the runs' precision field), which the mechanism page "
                           "checks against the fp32 reference `mechanism-mnist-standin` on the cells both train"
                           if tag == "mnist-standin" else ""))
      for tag in ("digits", "mnist-standin")),
    Reference("noise-regime-mnist-standin", "noise_regime", "quick",
              {"dataset": "mnist_standin", "lr_floors": [0.0, 0.2, 1.0], "spawn_fractions": [0.0, 0.1, 0.25, 0.5],
               "independent": True, "augment": True, "seeds": 3, "show_references": False},
              _MNIST_STANDIN, needs_data_root=True,
              purpose="the regime map of merging gain (schedule floor × start × augmentation × η) on 784-dimensional "
                      "real data, to see whether MNIST-1D's map holds on another data set"),
    Reference("noise-regime-mnist1d", "noise_regime", "quick",
              {"lr_floors": [0.0, 0.2, 1.0], "spawn_fractions": [0.0, 0.1, 0.25, 0.5], "independent": True,
               "augment": True, "seeds": 3, "show_references": False},
              _MNIST1D,
              purpose="the whole regime map of merging gain (three schedule floors × five starts × augmentation × "
                      "five η) on the quick book's data, of which the quick book trains a part"),
    *(Reference(f"noise-{page.replace('noise_', '')}-{tag}", page, "quick",
                {**({"dataset": "mnist_standin"} if tag == "mnist-standin" else {}), "lr_floor": 1.0,
                 "spawn_fraction": 0.5, "augment": True, "seeds": 10, "grid_seeds": 10,
                 "show_references": False},
                _MNIST_STANDIN if tag == "mnist-standin" else _MNIST1D, needs_data_root=tag == "mnist-standin",
                purpose=f"{what} in the setting the regime map picked, with 10 pairs per cell so that every noise row "
                        "can decide, under the rule that excludes only failed runs"
                        + ("; made again with augmentation after the whole MNIST-1D map had been read, a setting "
                           "chosen after results (the ranking that picks it was set after the map first ran, and "
                           "won by one cell of the paper's size with overlapping intervals)" if tag == "mnist1d"
                           else ""))
      for tag in ("mnist1d", "mnist-standin")
      for page, what in (("noise_scale", "the η × B grid"),
                         ("noise_components", "momentum, weight decay, augmentation and learning-rate pairs"))),
    *(Reference(f"noise-{kind}-{tag}", "noise_scale", "quick",
                {**({"dataset": "mnist_standin"} if tag == "mnist-standin" else {}), "lr_floor": 1.0,
                 "spawn_fraction": 0.5, "augment": True, "seeds": 10, "grid_seeds": 10, **extra,
                 "show_references": False},
                _MNIST_STANDIN if tag == "mnist-standin" else _MNIST1D, needs_data_root=tag == "mnist-standin",
                purpose=purpose)
      for tag in ("mnist1d", "mnist-standin")
      for kind, extra, rows, purpose in (
          ("fine", {"noise_scales": FINE_NOISE_SCALES, "batch_sizes": [32, 64]}, "N2, N9",
           "the finer grid of S between the η × B grid's best cell (S = 1/64) and the next, whose children train "
           "markedly worse (1/32): five values of S a factor 2^(1/4) apart at B = 32 and 64, 10 pairs per cell, so "
           "that N9 can say whether the gain peaks inside the range where training holds up or at its edge"),
          ("epochs", {"protocol": "epochs"}, "N1, N2, N9",
           "the η × B grid under the linear scaling rule's protocol: every run sees as many examples (B = 128's "
           "2,000 steps; 8,000 at B = 32), where the fixed-steps grid gives a B = 32 run a quarter of them, so that "
           "N2 is scored once per protocol"))),
    *(Reference(f"noise-anneal-{tag}", "noise_regime", "quick",
                {**({"dataset": "mnist_standin"} if tag == "mnist-standin" else {}), "lr_floors": [1.0],
                 "spawn_fractions": [0.5], "independent": False, "augment": True, "anneal": True, "seeds": 10,
                 "show_references": False},
                _MNIST_STANDIN if tag == "mnist-standin" else _MNIST1D, needs_data_root=tag == "mnist-standin",
                purpose="N8, the book's own row: does merging gain more than annealing? Children spawned at 50% with a "
                        "constant learning rate, merged, against two more children of each parent whose rate is "
                        "annealed to zero from the spawn, at every η, with and without augmentation, 10 pairs per "
                        "cell")
      for tag in ("mnist1d", "mnist-standin")),
    Reference("noise-scale-converged", "noise_scale", "quick",
              {"lrs": [0.02, 0.05, 0.1, 0.2], "spawn_fractions": [0.5], "seeds": 10, "max_steps": 8000,
               "show_references": False},
              _MNIST1D,
              purpose="the η × B grid with each cell trained until its children meet the convergence rule or reach 4 "
                      "times the steps, and 10 pairs per cell, so that N1 and N2 can decide; the grid starts at "
                      "η = 0.02, since η = 0.01 is the quick grid's slowest row",
              retired="superseded by `noise-scale-mnist1d`: it spawned at 50% of a schedule that decays to zero, so "
                      "its children had almost nothing to differ in, and its convergence rule removed the high-noise "
                      "side of the paper's curve."),
)}


def get(name: str) -> Reference:
    """Return the reference run ``name``, or raise SpecError naming the ones that exist."""
    if name not in REFERENCES:
        raise SpecError(f"reference={name!r} is not allowed: expected one of {', '.join(map(repr, REFERENCES))}")
    return REFERENCES[name]


def dataset(name: str) -> str:
    """Return the data set reference ``name`` trains on (its study's, at its profile and parameters)."""
    from .studies import part_of

    ref = get(name)
    return str(part_of(ref.notebook).resolve(ref.profile, ref.params).dataset)


def csv_path(name: str, root: Path | None = None) -> Path:
    """Return where reference ``name``'s CSV lives: results/NAME/NOTEBOOK.csv."""
    ref = get(name)
    return (root or results_root()) / name / f"{ref.notebook}.csv"


def provenance_path(name: str, root: Path | None = None) -> Path:
    """Return where reference ``name``'s provenance lives: results/NAME/provenance.json."""
    return (root or results_root()) / name / "provenance.json"


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def listing(notebook: str, root: Path | None = None) -> str:
    """Return one Markdown sentence naming the reference runs declared for ``notebook``: which are committed (and
    which of those retired), and which are declared but not made yet, with why (their ``pending`` note)."""
    declared = [r for r in REFERENCES.values() if r.notebook == notebook]
    committed = set(available(notebook, root)) | set(available(notebook, root, retired=True))
    made = [f"`{r.name}`" + (" (retired)" if r.retired else "") for r in declared if r.name in committed]
    pending = [f"`{r.name}` ({r.pending.removeprefix('not made yet: ')})" for r in declared if r.pending]
    if not declared:
        return "No reference run of this page is declared."
    return (f"Committed: {', '.join(made) if made else 'none'}."
            + (f" Declared but not made yet: {'; '.join(pending)}." if pending else ""))


def available(notebook: str, root: Path | None = None, retired: bool = False) -> list[str]:
    """Return the names of the committed reference runs of ``notebook`` (those with a CSV and a provenance): the live
    ones, or with ``retired`` the retired ones."""
    return [n for n, r in REFERENCES.items() if r.notebook == notebook and bool(r.retired) == retired
            and csv_path(n, root).exists() and provenance_path(n, root).exists()]


def fingerprint(root: Path | None = None) -> dict[str, str]:
    """Return the SHA-256 of every committed reference run's CSV, by name (what pages that show them depend on)."""
    return {n: _sha(csv_path(n, root)) for n in REFERENCES if csv_path(n, root).exists()}


def load(name: str, root: Path | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Return a reference run's CSV (validated against the schema) and its provenance, after checking that the CSV
    is the one its provenance names (SHA-256)."""
    path, prov_path = csv_path(name, root), provenance_path(name, root)
    if not path.exists() or not prov_path.exists():
        raise FileNotFoundError(f"reference {name!r} is not committed: {path} or {prov_path} is missing; "
                                f"regenerate it with `lmcbook reference {name}`")
    prov = json.loads(prov_path.read_text())
    if prov.get("csv_sha256") != _sha(path):
        raise ValueError(f"{path} is not the CSV its provenance names (SHA-256 differs): it was changed after "
                         f"`lmcbook reference {name}` wrote it; regenerate it")
    return read_results(path), prov


def stale_note(prov: dict[str, Any]) -> str | None:
    """Return a sentence saying that a reference was made by another code version than this library's, or None."""
    made = prov.get("code_version")
    if made == CODE_VERSION:
        return None
    return (f"This reference run was made at code version {made}; the library is now at {CODE_VERSION}, whose "
            "training differs. Its numbers are stale until it is regenerated with "
            f"`{prov.get('command', 'lmcbook reference NAME')}`.")


def _data_files(root: str | Path | None) -> dict[str, str]:
    """Return the SHA-256 of every file directly in ``root`` and in ``root/MNIST/raw`` (the data the run read)."""
    if root is None:
        return {}
    base = Path(root).expanduser()
    out = {}
    for folder in (base, base / "MNIST" / "raw"):
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                if p.is_file() and p.suffix in ("", ".gz") and "ubyte" in p.name:
                    out[str(p.relative_to(base))] = _sha(p)
    return out


def repo_relative(path: str | Path) -> str:
    """Return ``path`` (``~`` expanded; a relative one taken from the working directory) relative to the repository
    that holds the library, as a provenance records it: never an absolute path of the machine."""
    return os.path.relpath(Path(path).expanduser().resolve(), PACKAGE_DIR.parent.resolve())


def _data_root_text(prov: dict[str, Any], data_root: str | None) -> dict[str, Any]:
    """Return a provenance with its data root (``data.data_root``, ``params.data_root``) replaced by ``data_root``,
    and the commands that name the old one naming the new one."""
    old = prov.get("data", {}).get("data_root")
    out = json.loads(json.dumps(prov))
    out.setdefault("data", {})["data_root"] = data_root
    if "data_root" in out.get("params", {}):
        out["params"]["data_root"] = data_root
    for key in ("command", "execute_command"):
        if old and data_root and key in out:
            out[key] = out[key].replace(shlex.quote(str(old)), shlex.quote(data_root))  # as record() quoted it
    return out


def relativize_provenance(name: str, root: Path | None = None) -> Path:
    """Rewrite reference ``name``'s committed provenance so that its data root, and the commands that name it, are
    relative to the repository (:func:`repo_relative`); the CSV and every SHA-256 stay as they are.  Return the
    provenance's path (unchanged when its data root already was relative, or it has none)."""
    path = provenance_path(name, root)
    prov = json.loads(path.read_text())
    old = prov.get("data", {}).get("data_root")
    if old and Path(old).expanduser().is_absolute():
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(_data_root_text(prov, repo_relative(old)), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    return path


def command(name: str, data_root: str | None = None) -> str:
    """Return the shell command that regenerates reference ``name``."""
    cmd = f"lmcbook reference {name}"
    return cmd + (f" --data-root {shlex.quote(str(data_root))}" if data_root is not None else "")


def record(name: str, written: Path, params: dict[str, Any], seconds: float, train_seconds: float,
           data_root: str | None = None, root: Path | None = None) -> Path:
    """Copy the CSV that ``lmcbook execute --out`` wrote (``written``), byte for byte, to results/NAME/ and write its
    provenance beside it; return the CSV's new path.  Both files are replaced atomically.  The provenance names the
    data root relative to the repository (:func:`repo_relative`), with the SHA-256 of every data file read."""
    ref = get(name)
    target = csv_path(name, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_target = target.with_suffix(".csv.tmp")
    shutil.copyfile(written, tmp_target)
    execute_cmd = " ".join([f"lmcbook execute --profile {ref.profile} --only {ref.notebook}"]
                           + [f"-p {k} {shlex.quote(json.dumps(v) if isinstance(v, list) else str(v))}"
                              for k, v in params.items()] + ["--out DIR"])
    prov = {
        "name": name, "notebook": ref.notebook, "profile": ref.profile, "params": params,
        "command": command(name, data_root), "execute_command": execute_cmd, "purpose": ref.purpose,
        "data": {"description": ref.data, "data_root": None if data_root is None else str(data_root),
                 "files_sha256": _data_files(data_root)},
        "code_version": CODE_VERSION, "lmcbook_version": __version__, "git_commit": git_sha(),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 1), "train_seconds": train_seconds, "csv_sha256": _sha(tmp_target),
    }
    if data_root is not None:
        prov = _data_root_text(prov, repo_relative(data_root))
    os.replace(tmp_target, target)
    prov_tmp = provenance_path(name, root).with_suffix(".json.tmp")
    prov_tmp.write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")
    os.replace(prov_tmp, provenance_path(name, root))
    return target


def params_for(name: str, data_root: str | None) -> dict[str, Any]:
    """Return the notebook parameters of reference ``name`` (its own, and ``data_root`` where it needs one), or raise
    SpecError when it needs a data root and has none."""
    ref = get(name)
    if ref.retired:
        raise SpecError(f"reference={name!r} is retired and cannot be regenerated: {ref.retired}")
    if ref.needs_data_root and data_root is None:
        raise SpecError(f"data_root=None is not allowed for reference {name!r}: pass --data-root DIR, a folder "
                        f"holding {ref.data.split(':')[0]}")
    return dict(ref.params, **({"data_root": str(data_root)} if data_root is not None else {}))


def describe(name: str, prov: dict[str, Any]) -> str:
    """Return one Markdown sentence describing a reference run from its provenance (for pages and reports)."""
    ref = get(name)
    commit = (prov.get("git_commit") or "unknown")[:10]
    took = (f"executed in {_duration(prov.get('seconds', float('nan')))}; its runs' recorded training times, those "
            f"trained earlier and loaded from the store included, sum to "
            f"{_duration(prov.get('train_seconds', float('nan')))}")
    return (f"`{name}`: {ref.purpose}; data: {ref.data}; made {prov.get('date', '?')[:10]} at commit {commit}, "
            f"code version {prov.get('code_version')}, on {prov.get('machine', {}).get('cpus', '?')} CPU cores "
            f"({took}); regenerate with `{prov.get('command')}`")


def _duration(seconds: float) -> str:
    """Return a duration in minutes below two hours, else in hours."""
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


# ---- What the mechanism references train, and the bf16 precision check ----


def reference_settings(references: dict[str, tuple[pd.DataFrame, dict[str, Any]]]) -> str:
    """Return, in words, what each committed mechanism reference trains, read from its CSV and provenance: its data
    set, its training lengths with the widest width each reaches, and its precision where not fp32 ("none" without
    one)."""
    said = []
    for name, (frame, prov) in references.items():
        dataset = str(frame["dataset"].iloc[0])
        widest = frame.groupby("epochs")["hidden_units"].max()
        by_width: dict[int, list[str]] = {}
        for epochs, units in widest.items():
            by_width.setdefault(int(units), []).append(str(int(epochs)))
        lengths = ", ".join(f"{join_and(es)} epochs up to {u} hidden units" for u, es in by_width.items())
        low = "" if precision_of(prov) == "fp32" else f", in {precision_of(prov)}"
        said.append(f"`{name}` ({DATASET_SHORT.get(dataset, dataset)}, {lengths}{low})")
    return "; ".join(said) or "none"


#: What the precision check compares on a cell: (metric, method, label, scale to the shown unit, format, margin).
#: The margin is the largest paired difference bf16 − fp32 that counts as agreement (in the metric's own unit).
PRECISION_METRICS = (("acc_merged", "none", "plain merge's test accuracy (%)", 100.0, ".1f", MIN_ACC_EFFECT),
                     ("acc_merged", "weight_matching", "weight-matched merge's test accuracy (%)", 100.0, ".1f",
                      MIN_ACC_EFFECT),
                     ("acc_ensemble", "none", "ensemble's test accuracy (%)", 100.0, ".1f", MIN_ACC_EFFECT),
                     ("acc_barrier", "none", "plain merge's accuracy barrier (points)", 100.0, ".1f", MIN_ACC_EFFECT),
                     ("loss_barrier_cal_mid", "none", "calibrated loss barrier at ½ (nats)", 1.0, ".3f",
                      PRECISION_LOSS_MARGIN),
                     ("train_acc", None, "endpoints' training accuracy (%)", 100.0, ".2f", MIN_ACC_EFFECT))


_CELL = ["epochs", "weight_decay", "init_scale", "hidden_units"]


_AGREE = {PASS: "agree", FAIL: "**differ**", INCONCLUSIVE: "undecided"}


def precision_of(prov: dict[str, Any]) -> str:
    """Return the training precision a reference run's provenance records ("fp32" where it records none)."""
    return str(prov.get("params", {}).get("precision") or "fp32")


def _replicates(frame: pd.DataFrame, cell: dict[str, Any], metric: str, method: str | None) -> pd.Series:
    """Return one cell's values of ``metric`` (and ``method``) by replicate: by pair for a pair metric, by seed for a
    run's."""
    rows = in_cell(frame, cell, cell["hidden_units"])
    rows = rows[rows["metric"] == metric]
    rows = rows[rows["method"] == method] if method is not None else rows[rows["method"].isna()]
    key = "pair" if rows["seed"].isna().all() else "seed"
    return rows.groupby(key)["value"].mean()


def _pairs(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["metric"] == "acc_merged") & (frame["method"] == "none")]
    return rows[_CELL + ["pair"]].drop_duplicates()


def _shared_pairs(fp32: pd.DataFrame, low: pd.DataFrame) -> pd.Series:
    """Return, per cell both frames trained, how many pairs (the same seeds) they have in common."""
    return _pairs(fp32).merge(_pairs(low), on=_CELL + ["pair"]).groupby(_CELL).size()


def precision_cells(fp32: pd.DataFrame, low: pd.DataFrame) -> list[dict[str, Any]]:
    """Return every cell both frames trained with at least :data:`~lmcbook.claims.thresholds.MIN_PAIRS` pairs in
    common (the same seeds), the longest and widest first."""
    counts = _shared_pairs(fp32, low)
    keys = sorted(counts[counts >= MIN_PAIRS].index, key=lambda k: (-k[0], -k[3], -k[1], k[2]))
    return [dict(zip(_CELL, k)) for k in keys]


def precision_table(fp32: pd.DataFrame, low: pd.DataFrame, cell: dict[str, Any]) -> pd.DataFrame:
    """Return, on ``cell``, each quantity of :data:`PRECISION_METRICS` in fp32 and in bf16 (mean and 95% t-interval
    over the replicates both trained: the same seeds) and the verdict of an equivalence test on their paired
    difference bf16 − fp32: *agree* if its 95% t-interval lies within ± the quantity's margin, *differ* if wholly
    outside, else *undecided* (:func:`lmcbook.stats.within`)."""
    out = []
    for metric, method, label, scale, fmt, margin in PRECISION_METRICS:
        a, b = _replicates(fp32, cell, metric, method), _replicates(low, cell, metric, method)
        common = a.index.intersection(b.index)
        if common.empty:
            continue
        diff = t_interval(b[common] - a[common])
        out.append({"quantity": label, "fp32": t_interval(a[common]).text(fmt, scale),
                    "bf16": t_interval(b[common]).text(fmt, scale), "bf16 − fp32 (paired)": diff.text(fmt, scale),
                    "margin": f"±{format(scale * margin, 'g')}", "precisions": _AGREE[within(diff, margin)]})
    return pd.DataFrame(out).set_index("quantity")


def _few_pair_words(twin: str, fp32: pd.DataFrame, low: pd.DataFrame) -> str:
    """Return, for the cells a bf16 reference shares with the fp32 reference ``twin`` with fewer than
    :data:`~lmcbook.claims.thresholds.MIN_PAIRS` pairs (too few to test), the range of the plain merge's mean paired
    difference bf16 − fp32 at each length and width, in points; "" where they share none."""
    counts = _shared_pairs(fp32, low)
    by_cell: dict[tuple[int, int], list[float]] = {}
    for key in counts[counts < MIN_PAIRS].index:
        cell = dict(zip(_CELL, key))
        a, b = (_replicates(f, cell, "acc_merged", "none") for f in (fp32, low))
        common = a.index.intersection(b.index)
        by_cell.setdefault((int(cell["epochs"]), int(cell["hidden_units"])), []).append(
            100 * float((b[common] - a[common]).mean()))
    if not by_cell:
        return ""
    ranges = "; ".join(f"{e} epochs, {u} units {min(v):+.1f}" + (f" to {max(v):+.1f}" if len(v) > 1 else "")
                       for (e, u), v in sorted(by_cell.items()))
    n = sum(len(v) for v in by_cell.values())
    return (f"On the {n} cell{'s' if n != 1 else ''} it shares with `{twin}` with fewer than {MIN_PAIRS} pairs "
            f"(too few to test), the plain "
            f"merge's mean paired difference bf16 − fp32, in points, by length and width: {ranges}.")


def _cell_words(cell: dict[str, Any]) -> str:
    return (f"{cell['epochs']} epochs, weight decay {cell['weight_decay']:g}, {cell['hidden_units']} hidden units"
            + (f", initialisation ×{cell['init_scale']:g}" if cell["init_scale"] != 1 else ""))


def precision_check(references: dict[str, tuple[pd.DataFrame, dict[str, Any]]]) -> str:
    """Return the check of every committed reference trained in bf16 against an fp32 reference of the same page
    and data set, in Markdown: on every cell both trained with :data:`~lmcbook.claims.thresholds.MIN_PAIRS` pairs
    in common (:func:`precision_cells`), an equivalence test of each quantity the verdicts read on the paired difference
    (:func:`precision_table`); a sentence that says which cells agree, which differ, and which lengths of training
    no fp32 run checks."""
    parts = []
    for name, (frame, prov) in references.items():
        if precision_of(prov) == "fp32":
            continue
        dataset = frame["dataset"].iloc[0]
        found = [(n, f, c) for n, (f, p) in references.items()
                 if precision_of(p) == "fp32" and f["dataset"].iloc[0] == dataset for c in precision_cells(f, frame)]
        lengths = sorted({int(e) for e in _pairs(frame)["epochs"]})
        unchecked = [e for e in lengths if e not in {c["epochs"] for _, _, c in found}]
        checked = {tuple(c[k] for k in _CELL) for _, _, c in found}
        counts = _pairs(frame).groupby(_CELL).size()
        open_cells = [dict(zip(_CELL, k)) for k in counts[counts >= MIN_PAIRS].index if tuple(k) not in checked]
        left = (f"No cell of {' or '.join(map(str, unchecked))} epochs is checked (no fp32 reference of this data "
                f"set shares {MIN_PAIRS} pairs of one with it). " if unchecked else "")
        left += (f"Of the cells this reference trains with {MIN_PAIRS} pairs or more, {len(open_cells)} of "
                 f"{len(open_cells) + len(checked)} are unchecked: " + "; ".join(_cell_words(c) for c in open_cells)
                 + ": **the rows that read any of them rest on bf16 alone**." if open_cells else "")
        if not found:
            parts.append(f"`{name}` trains in {precision_of(prov)}, and no fp32 reference of this page on "
                         f"{DATASET_SHORT.get(dataset, dataset)} shares {MIN_PAIRS} pairs of a cell with it: "
                         "**its precision is unchecked**.")
            continue
        for twin, fp32, cell in found:
            table = precision_table(fp32, frame, cell)
            states = set(table["precisions"])
            n = len(_replicates(fp32, cell, "acc_merged", "none").index.intersection(
                _replicates(frame, cell, "acc_merged", "none").index))
            verdict = ("every quantity's paired difference lies within its margin: on this cell the two precisions "
                       "agree" if states == {"agree"} else
                       "**" + ", ".join(q for q, v in table["precisions"].items() if v == _AGREE[FAIL])
                       + " differ beyond the margin: bf16 changes this cell's result**" if _AGREE[FAIL] in states else
                       "some paired differences are neither within nor beyond their margin: on this cell the check "
                       "is **undecided** for " + ", ".join(q for q, v in table["precisions"].items()
                                                           if v != "agree"))
            parts.append(f"**Precision check.** `{name}` trains every run in bfloat16 autocast "
                         f"(`precision=\"bf16\"`); `{twin}` trains in fp32. On a cell both train ({_cell_words(cell)}; "
                         f"{n} pairs, the same seeds), {verdict}:\n\n{markdown_table(table)}")
        few = _few_pair_words(found[0][0], found[0][1], frame)
        if few:  # a paragraph after the last table
            parts[-1] += "\n\n" + few
        if left:  # a paragraph of its own: appended to the table's last line it would read as a cell
            parts[-1] += "\n\n" + left
    return "\n\n".join(parts) or "Every reference of this page trains in fp32 (no precision check is needed)."
