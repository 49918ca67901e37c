"""The book's machinery: notebook execution with papermill, page helpers, and the Jupyter Book build.

Notebook sources are jupytext percent-format files in ``notebooks/``.
:func:`execute` converts each to a notebook and runs it with papermill into
``book/generated/NAME.ipynb`` (or ``--out``).  Notebooks save their CSVs and
glue their numbers through :class:`Page`.  :func:`build` renders the generated
notebooks with Jupyter Book v1, execution off, warnings as errors.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from . import __version__
from .claims import (
    FAIL,
    INCONCLUSIVE,
    NA,
    PAGE_CLAIMS,
    PASS,
    REGIME_KEYS,
    ClaimResult,
    concat,
    page_claims,
    to_long_frame,
    validate_results,
)
from .profiles import PARTS, PROFILES, all_notebooks, part_of
from .provenance import git_sha
from .specs import SpecError
from .store import RunStore

OUT_ENV = "LMCBOOK_OUT"
log = logging.getLogger("lmcbook.book")


def out_dir() -> Path:
    """Return where executed notebooks and their CSVs go: $LMCBOOK_OUT, else book/generated."""
    return Path(os.environ.get(OUT_ENV, "book/generated"))


# -- inside a notebook ------------------------------------------------------------------
class Page:
    """One book page being computed: provenance, CSV output and glued values."""

    def __init__(self, name: str, profile: str, params: dict[str, Any], study: Any = None,
                 store: RunStore | None = None) -> None:
        self.name, self.profile, self.params, self.study = name, profile, dict(params), study
        self.store = store or RunStore()
        self.run_ids: list[str] = []
        self.csv_reads: dict[str, str] = {}
        self._events0 = len(self.store.events())
        self._t0 = time.time()
        _log_to_stderr()

    @property
    def csv_path(self) -> Path:
        """Return the path of this page's result CSV."""
        return out_dir() / "data" / f"{self.name}.csv"

    def use(self, run_ids) -> None:
        """Record the run ids this page read, for its provenance."""
        self.run_ids += [r for r in run_ids if r not in self.run_ids]

    def read_csv(self, name: str) -> pd.DataFrame:
        """Return another page's result CSV (validated), recording it so that this page re-runs when it changes."""
        from .claims import read_results

        path = out_dir() / "data" / f"{name}.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: execute notebook {name!r} first")
        self.csv_reads[name] = _file_sha(path)  # by page name: the record stays valid if the output moves
        return read_results(path)

    def save(self, long: pd.DataFrame, regime: pd.DataFrame | None = None) -> list[ClaimResult]:
        """Validate the long-format frame, write it as this page's CSV, and glue the verdicts of the claims whose
        evidence this page is, computed on that frame by :func:`lmcbook.claims.page_claims`; return them.

        ``regime`` (:func:`lmcbook.experiments.regime_frame`) adds the runs' training regime
        (decay integral, shrinkage, distance from initialisation, weight norms) to the CSV.
        Each verdict is glued under its key (``w1``, ``w1_long``, ``n1_50``, ...) as
        ``KEY_mark``, ``KEY_verdict``, ``KEY_measured``, ``KEY_test`` and ``KEY_state``.
        """
        if regime is not None:
            long = concat([long, to_long_frame(regime, self.name, REGIME_KEYS)])
        validate_results(long, self.name)
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.csv_path.with_suffix(".csv.tmp")
        long.to_csv(tmp, index=False)
        os.replace(tmp, self.csv_path)
        verdicts = page_claims(self.name, long) if self.name in PAGE_CLAIMS else []
        for r in verdicts:
            self.glue_claim(r)
        return verdicts

    @staticmethod
    def glue(key: str, value: Any) -> None:
        """Glue a number (or any object) under ``key`` without displaying it."""
        import numpy as np
        from myst_nb import glue

        if isinstance(value, np.generic):  # np.float64 reprs as 'np.float64(...)', which {glue:text} cannot format
            value = value.item()
        glue(key, value, display=False)

    @staticmethod
    def glue_md(key: str, text: str) -> None:
        """Glue a Markdown snippet (use it with the ``{glue:md}`` role)."""
        from IPython.display import Markdown
        from myst_nb import glue

        glue(key, Markdown(text), display=False)

    @staticmethod
    def glue_figure(key: str, fig) -> None:
        """Glue a matplotlib figure (use it with the ``glue:figure`` directive) and close it."""
        import matplotlib.pyplot as plt
        from myst_nb import glue

        glue(key, fig, display=False)
        plt.close(fig)

    def glue_claim(self, result: ClaimResult, key: str | None = None) -> ClaimResult:
        """Glue one verdict of :mod:`lmcbook.claims` under ``key`` (default ``result.key``; see :meth:`save`) and
        return it."""
        words = {PASS: "passes", FAIL: "**fails**", INCONCLUSIVE: "is **inconclusive**", NA: "does not apply"}
        key = key or result.key
        self.glue_md(f"{key}_mark", result.mark)
        self.glue_md(f"{key}_verdict", words[result.state])
        self.glue_md(f"{key}_measured", result.measured)
        self.glue_md(f"{key}_test", result.test)
        self.glue(f"{key}_state", result.state)
        return result

    def reproduce_command(self) -> str:
        """Return the shell command that re-executes this page with its parameters."""
        parts = [f"lmcbook execute --profile {self.profile} --only {self.name}"]
        for k, v in self.params.items():
            if v is not None:
                parts.append(f"-p {k} {_shell_yaml(v)}")
        return " ".join(parts)

    def provenance(self):
        """Return a Markdown block: CSV link, reproduce command, profile, parameters, runs and versions."""
        from IPython.display import Markdown

        _write_reads(self.name, self.store, self.run_ids, self.csv_reads)
        events = self.store.events()[self._events0:]
        loaded = sum(e["event"] == "loaded" for e in events)
        trained = sum(e["event"] == "trained" for e in events)
        resolved = self.study.params() if self.study is not None and hasattr(self.study, "params") else {}
        ids = ", ".join(r[:12] for r in self.run_ids) or "none"
        sha = git_sha()
        import torch

        values = ", ".join(f"`{k}={v}`" for k, v in resolved.items() if k != "profile") or "none"
        text = f"""
**Data:** {{download}}`{self.name}.csv <data/{self.name}.csv>` (long format: notebook, metric, value, seed and keys).

:::{{admonition}} Reproduce this page
:class: tip
```bash
{self.reproduce_command()}
```
Profile `{self.profile}`; its values for this page: {values}.
Parameters left at `None` take these values; override any of them with `-p NAME VALUE`.
:::

:::{{admonition}} Provenance
:class: dropdown
| | |
|---|---|
| profile | `{self.profile}` |
| lmcbook | {__version__}{f" (git {sha[:10]})" if sha else ""} |
| torch | {torch.__version__}, {torch.get_num_threads()} threads |
| executed | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, {time.time() - self._t0:.0f} s |
| runs read | {len(self.run_ids)}: {loaded} loaded from the store, {trained} trained during this execution |

Resolved parameters:

```yaml
{yaml.safe_dump(resolved, sort_keys=True, default_flow_style=None).strip()}
```

Run ids (first 12 hex digits): {ids}
:::
"""
        return Markdown(text)


def describe_study(study: Any, regime: pd.DataFrame | None = None) -> str:
    """Return a one-sentence Markdown description of what a study trained (for figure captions), ending with
    its training regime (:func:`describe_regime`, brief) when ``regime`` is given."""
    pairs = study.pairs()
    units = sorted({p.hidden_units for p in pairs})
    depths = sorted({p.depth for p in pairs if p.depth is not None})
    m, t = pairs[0].a.model, pairs[0].a.train
    epochs = " or ".join(f"{e:g}" for e in sorted({p.epochs for p in pairs}))
    decays = " or ".join(f"{d:g}" for d in sorted({p.weight_decay for p in pairs}))
    if m.arch == "mlp":
        ls = f"L = {depths[0]}" if len(depths) == 1 else f"L = {', '.join(map(str, depths))}"
        arch = f"ReLU MLP with {ls} linear layers"
    else:
        arch = {"vgg11": "VGG11", "resnet20": "ResNet20 (activation probes read residual-block outputs)"}[m.arch]
    unit = "hidden units" if m.arch == "mlp" else "base channels"
    return (f"{'bias-free ' if not m.bias else ''}{arch}, norm {m.norm}, on {study.dataset}; "
            f"{epochs} epochs of SGD (peak lr {t.lr:g}, momentum {t.momentum:g}, weight decay {decays}, "
            f"batch {t.batch_size}); {', '.join(map(str, units))} {unit}; "
            f"{study.seeds} independent pair(s) per {'width' if len(units) > 1 else 'depth'}"
            + (f"; regime: {describe_regime(regime, brief=True)}" if regime is not None else ""))


def _frac(x: float) -> str:
    return f"{x:.3f}" if x >= 0.01 else f"{x:.1e}"


def describe_regime(regime: pd.DataFrame, brief: bool = False) -> str:
    """Return one Markdown sentence saying which training regime a page's runs are in.

    ``regime`` is :func:`lmcbook.experiments.regime_frame`'s output (or those rows of a page's CSV).
    Per (length, weight decay) it states the decay integral D, what weight decay alone would leave
    of a weight (momentum included), and the distance from initialisation ‖θ_T − θ_0‖/‖θ_0‖ at the
    narrowest and the widest width; ``brief`` gives D and the distances only, for captions.
    """
    whole = regime[regime["layer"].isna()]
    parts = []
    for (epochs, wd), cell in whole.groupby(["epochs", "weight_decay"]):
        mean = cell.groupby(["metric", "hidden_units"])["value"].mean()
        dist = mean["init_distance"]
        lo, hi = dist.index.min(), dist.index.max()
        d = f"{mean['decay_integral'].mean():.3g}"
        far = f"{dist[lo]:.2f} at {lo:g} hidden units" + (f" and {dist[hi]:.2f} at {hi:g}" if hi != lo else "")
        if brief:
            parts.append(f"{epochs:g} epochs at weight decay {wd:g}: D = {d}, ‖θ_T − θ_0‖/‖θ_0‖ = {far}")
        else:
            parts.append(f"{epochs:g} epochs at weight decay {wd:g} give a decay integral D = {d} (weight decay "
                         f"alone, momentum included, would leave {_frac(mean['decay_shrinkage'].mean())} of a weight), "
                         f"and the trained weights ended ‖θ_T − θ_0‖/‖θ_0‖ = {far} from their initialisation")
    return "; ".join(parts)


def describe_noise(study: Any) -> str:
    """Return a one-sentence Markdown description of what the noise study trained (for captions)."""
    m = study.spec(study.grid_cells()[0], 0).model
    return (f"bias-free ReLU MLP with L = {m.depth} linear layers and {m.channels} hidden units on {study.dataset}; "
            f"{study.steps} SGD steps per run (linear warm-up then decay), spawn-and-merge pairs from their own "
            f"parents; {study.seeds} pair(s) per cell")


def _shell_yaml(v: Any) -> str:
    s = yaml.safe_dump(v, default_flow_style=True).strip()
    if s.endswith("\n..."):
        s = s[:-4].strip()
    s = s.removesuffix("...").strip()
    return f'"{s}"' if any(c in s for c in " []{},:") else s


_LOGGING_SET = False


def _log_to_stderr() -> None:
    global _LOGGING_SET
    if _LOGGING_SET:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    lg = logging.getLogger("lmcbook")
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    _LOGGING_SET = True


# -- executing notebooks ----------------------------------------------------------------
@dataclass
class Outcome:
    """What executing one notebook did."""

    name: str
    ok: bool
    seconds: float
    loaded: int = 0
    trained: int = 0
    error: str = ""
    cached: bool = False


# -- the notebook cache (jupyter-cache semantics) ---------------------------------------
def _file_sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _cache_dir(out: Path | None = None) -> Path:
    return (out if out is not None else out_dir()) / ".cache"


def _write_reads(name: str, store: RunStore, run_ids: list[str], csv_reads: dict[str, str]) -> None:
    """Record what a page read: each run's manifest hash and each CSV's hash (written by the notebook itself)."""
    runs = {}
    for rid in run_ids:
        manifest = store.path(rid) / "manifest.json"
        runs[rid] = _file_sha(manifest) if manifest.exists() else None
    path = _cache_dir() / f"{name}.reads.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"store": str(store.root.resolve()), "runs": runs, "csv": csv_reads}, sort_keys=True))


def study_of(name: str) -> Any:
    """Return the study that the last execution of notebook ``name`` (in $LMCBOOK_OUT) resolved, from its record."""
    record = _cache_dir() / f"{name}.json"
    if not record.exists():
        raise FileNotFoundError(f"{record} does not exist: execute notebook {name!r} first")
    key = json.loads(record.read_text())["key"]
    return part_of(name).resolve(key["profile"], key["params"])


def cache_key(name: str, profile: str, params: dict[str, Any], notebooks: str | Path = "notebooks") -> dict[str, Any]:
    """Return what a notebook's output depends on besides what it reads: its source, parameters, the library."""
    from .provenance import source_hash

    src = notebook_source(name, notebooks)
    return {"source": _file_sha(src), "profile": profile, "params": json.loads(json.dumps(params, sort_keys=True)),
            "lmcbook": source_hash()}


def is_cached(name: str, key: dict[str, Any], out: Path) -> bool:
    """Return True if ``out`` holds this notebook's output for ``key`` and nothing it read has changed since."""
    record = _cache_dir(out) / f"{name}.json"
    if not (out / f"{name}.ipynb").exists() or not record.exists():
        return False
    try:
        rec = json.loads(record.read_text())
    except ValueError:
        return False
    if rec.get("key") != key:
        return False
    reads = rec.get("reads", {})
    store = RunStore(reads.get("store", "runs"))
    for rid, sha in reads.get("runs", {}).items():
        manifest = store.path(rid) / "manifest.json"
        if sha is None or not manifest.exists() or _file_sha(manifest) != sha:
            return False
    for name_read, sha in reads.get("csv", {}).items():
        path = out / "data" / f"{name_read}.csv"
        if not path.exists() or _file_sha(path) != sha:
            return False
    return True


def _record(name: str, key: dict[str, Any], out: Path) -> None:
    reads_path = _cache_dir(out) / f"{name}.reads.json"
    reads = json.loads(reads_path.read_text()) if reads_path.exists() else {}
    _cache_dir(out).mkdir(parents=True, exist_ok=True)
    (_cache_dir(out) / f"{name}.json").write_text(json.dumps({"key": key, "reads": reads}, sort_keys=True))


def notebook_source(name: str, notebooks: str | Path = "notebooks") -> Path:
    """Return the jupytext source of notebook ``name``, or raise naming the notebooks that exist."""
    part_of(name)
    path = Path(notebooks) / f"{name}.py"
    if not path.exists():
        raise SpecError(f"notebook source {str(path)!r} is missing: run lmcbook from the repository root "
                        "or pass --notebooks DIR")
    return path


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """Return the names and default values of a notebook source's ``parameters`` cell."""
    import jupytext

    nb = jupytext.read(str(path))
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            scope: dict[str, Any] = {}
            exec(compile(cell.source, f"{path}:parameters", "exec"), {}, scope)  # noqa: S102 (our own source)
            return scope
    raise SpecError(f"notebook {str(path)!r} has no cell tagged 'parameters'")


def check_parameters(name: str, profile: str, params: dict[str, Any], notebooks: str | Path = "notebooks") -> None:
    """Raise SpecError, before any compute, if ``params`` are unknown to the notebook or invalid for its study."""
    if profile not in PROFILES:
        raise SpecError(f"profile={profile!r} is not allowed: expected one of {', '.join(map(repr, PROFILES))}")
    allowed = notebook_parameters(notebook_source(name, notebooks))
    if "profile" in params:
        raise SpecError("parameter 'profile' is set with --profile, not with -p")
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise SpecError(f"unknown parameter(s) {unknown} for notebook {name!r}: expected some of "
                        f"{sorted(k for k in allowed if k != 'profile')}")
    part_of(name).resolve(profile, params)


def parse_param(value: str) -> Any:
    """Return a ``-p`` value parsed as YAML, so that lists and numbers work ("[0.5, 2]").

    YAML 1.1 reads ``3e-3`` (no dot) as a string; such numeric strings become floats.
    """
    return _numbers(yaml.safe_load(value))


def _numbers(v: Any) -> Any:
    if isinstance(v, list):
        return [_numbers(x) for x in v]
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def execute(names: list[str] | None = None, profile: str = "quick", params: dict[str, Any] | None = None,
            out: str | Path | None = None, notebooks: str | Path = "notebooks",
            store: str | Path | None = None, force: bool = False) -> list[Outcome]:
    """Execute notebooks with papermill into ``out``; return one Outcome per notebook.

    Every notebook's parameters are checked before the first one runs.  Notebooks
    run in dependency order (the book's part order).  A notebook is skipped, and
    says so, when its source, parameters, profile and the library's source are
    unchanged since its last output, and so is every store entry and CSV it read
    (``force`` re-executes).  A failing notebook is reported with its failing
    cell, and the rest still run.
    """
    import jupytext
    import papermill
    from tqdm.auto import tqdm

    params = dict(params or {})
    names = list(names) if names else all_notebooks()
    for name in names:
        check_parameters(name, profile, params, notebooks)
    out = Path(out) if out is not None else out_dir()
    (out / "data").mkdir(parents=True, exist_ok=True)
    env_before = {k: os.environ.get(k) for k in (OUT_ENV, "LMCBOOK_STORE")}
    os.environ[OUT_ENV] = str(out.resolve())
    if store is not None:
        os.environ["LMCBOOK_STORE"] = str(Path(store).resolve())
    rs = RunStore()
    outcomes = []
    try:
        bar = tqdm(names, desc="notebooks", unit="nb", disable=None)
        for name in bar:
            bar.set_postfix_str(name)
            key = cache_key(name, profile, params, notebooks)
            if not force and is_cached(name, key, out):
                outcomes.append(Outcome(name, True, 0.0, cached=True))
                tqdm.write(f"{name}: skipped: cached (its source, parameters, library and inputs are unchanged)",
                           file=sys.stderr)
                continue
            (_cache_dir(out) / f"{name}.reads.json").unlink(missing_ok=True)
            (_cache_dir(out) / f"{name}.json").unlink(missing_ok=True)
            src = notebook_source(name, notebooks)
            nb = jupytext.read(str(src))
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
            n0 = len(rs.events())
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                src_nb = Path(tmp) / f"{name}.ipynb"
                jupytext.write(nb, str(src_nb))
                try:
                    papermill.execute_notebook(str(src_nb), str(out / f"{name}.ipynb"),
                                               parameters={"profile": profile, **params}, kernel_name="python3",
                                               language="python", progress_bar=False, cwd=os.getcwd())
                    ok, err = True, ""
                    _hide_parameter_cells(out / f"{name}.ipynb")
                    _record(name, key, out)
                except papermill.PapermillExecutionError as e:
                    first = next((ln for ln in e.source.splitlines() if ln.strip()), "")
                    ok, err = False, (f"cell {e.exec_count} (`{first.strip()[:80]}`): {e.ename}: {e.evalue}; "
                                      f"the partial output is {out / f'{name}.ipynb'}")
                except Exception as e:  # a dead kernel or a broken source: report it, run the rest
                    ok, err = False, f"{type(e).__name__}: {e}"
            ev = rs.events()[n0:]
            o = Outcome(name, ok, time.perf_counter() - t0, sum(e["event"] == "loaded" for e in ev),
                        sum(e["event"] == "trained" for e in ev), err)
            outcomes.append(o)
            msg = (f"{name}: {'done' if ok else 'FAILED'} in {o.seconds:.1f} s; "
                   f"{o.loaded} run(s) loaded from the store, {o.trained} trained")
            tqdm.write(msg + (f"\n  {err}" if err else ""), file=sys.stderr)
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return outcomes


def _hide_parameter_cells(path: Path) -> None:
    """Tag the parameters and injected-parameters cells ``remove-cell``: the provenance box shows the values."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if ("parameters" in tags or "injected-parameters" in tags) and "remove-cell" not in tags:
            cell.metadata["tags"] = tags + ["remove-cell"]
    nbformat.write(nb, str(path))


# -- building the book ------------------------------------------------------------------
BOOK_SOURCES = ("_config.yml", "_toc.yml", "book")


def build(src: str | Path = ".", generated: str | Path | None = None, builddir: str | Path | None = None) -> Path:
    """Build the book with Jupyter Book v1 (-W -n --keep-going) and return the path of index.html.

    With ``generated`` (executed notebooks somewhere other than book/generated),
    the book's sources are staged with them in ``builddir`` first, so that the
    repository's own book/generated is never touched.
    """
    src = Path(src).resolve()
    root = src
    if generated is not None and Path(generated).resolve() != (src / "book" / "generated").resolve():
        if builddir is None:
            raise SpecError("builddir=None is not allowed with generated=DIR: pass a staging directory")
        root = Path(builddir).resolve() / "src"
        if root.exists():
            shutil.rmtree(root)
        for name in BOOK_SOURCES:
            p = src / name
            if p.is_dir():
                shutil.copytree(p, root / name, ignore=shutil.ignore_patterns("generated"))
            else:
                root.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, root / name)
        shutil.copytree(Path(generated), root / "book" / "generated")
    missing = [nb for nb in all_notebooks() if not (root / "book" / "generated" / f"{nb}.ipynb").exists()]
    if missing:
        raise SpecError(f"executed notebooks missing: {missing}. Run `lmcbook execute` first (or `make book`).")
    cli = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"
    cmd = [sys.executable, "-c", cli, "build", str(root), "-W", "-n", "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}\n"
                           f"{proc.stderr[-4000:]}")
    return root / "_build" / "html" / "index.html"


def parts_summary() -> str:
    """Return a one-line-per-part listing of notebooks and quick-profile budgets."""
    return "\n".join(f"{p.name}: {', '.join(p.notebooks)} (quick budget {p.budget_s.get('quick', 0) / 60:.0f} min)"
                     for p in PARTS.values())


__all__ = ["Page", "Outcome", "build", "check_parameters", "execute", "notebook_parameters", "out_dir",
           "parse_param", "parts_summary"]
