"""The library installs on its own: a wheel, installed without extras into a fresh virtual environment that sees only
the distributions its core requirements need, runs `lmcbook diagnose` on two small checkpoints.

Installing multi-GB torch again would take minutes, so the fresh environment borrows the core requirements, and
only them, from this one: every distribution in the closure of the wheel's own Requires-Dist (extras left out) is
linked into one folder that the fresh environment's site-packages adds to its path.  pip check there proves the
closure satisfies the wheel; papermill, Jupyter Book, Dask, scikit-learn and torchvision stay out of reach.
"""

from __future__ import annotations

import email
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from packaging.requirements import Requirement
from safetensors.torch import save_file

from lmcbook import models

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
EXTRAS_ONLY = ("papermill", "jupytext", "jupyter_book", "dask", "distributed", "sklearn", "mnist1d", "torchvision",
               "myst_nb", "IPython")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def build_wheel(dest: Path) -> Path:
    """Return a wheel of lmcbook built from a copy of the package's sources (the checkout is never written to)."""
    src = dest / "src"
    shutil.copytree(ROOT / "lmcbook", src / "lmcbook", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
          str(dest / "dist"), str(src)])
    (wheel,) = (dest / "dist").glob("lmcbook-*.whl")
    return wheel


def core_requirements(wheel: Path) -> list[Requirement]:
    """Return the wheel's Requires-Dist without those of its extras."""
    with zipfile.ZipFile(wheel) as z:
        meta = email.message_from_bytes(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))))
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist")]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def closure(reqs: list[Requirement]) -> dict[str, md.Distribution]:
    """Return every installed distribution the requirements need, transitively (fail on one that is missing)."""
    seen: dict[str, md.Distribution] = {}
    todo = list(reqs)
    while todo:
        req = todo.pop()
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        dist = md.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (req, dist.version)
        seen[key] = dist
        todo += [r for r in map(Requirement, dist.requires or [])
                 if r.marker is None or r.marker.evaluate({"extra": ""})]
    return seen


def link_distributions(dists: dict[str, md.Distribution], dest: Path) -> None:
    """Link each distribution's top-level files and folders (its RECORD's first path parts) into ``dest``."""
    site = Path(sysconfig.get_paths()["purelib"])
    dest.mkdir()
    for dist in dists.values():
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if (site / top).exists() and not (dest / top).exists():
                (dest / top).symlink_to(site / top)


def test_the_wheel_runs_diagnose_without_extras(tmp_path):
    wheel = build_wheel(tmp_path)
    core = closure(core_requirements(wheel))
    assert {"torch", "numpy", "safetensors"} <= set(core) and not {"papermill", "jupyter-book", "dask"} & set(core)
    link_distributions(core, tmp_path / "core")
    fresh = tmp_path / "fresh"
    _run([sys.executable, "-m", "venv", "--without-pip", str(fresh)])
    py = fresh / "bin" / "python"
    fresh_site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (fresh_site / "core.pth").write_text(str(tmp_path / "core") + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)])
    _run([sys.executable, "-m", "pip", "--python", str(py), "check"])
    probe = "import importlib.util as u, lmcbook; print(lmcbook.__file__); print([m for m in %r if u.find_spec(m)])"
    where, reachable = _run([str(py), "-c", probe % (EXTRAS_ONLY,)], cwd=tmp_path).stdout.splitlines()
    assert where.startswith(str(fresh)) and reachable == "[]", (where, reachable)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6)).astype(np.float32)
    y = (x[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(np.int64)
    np.savez(tmp_path / "task.npz", x_train=x[:200], y_train=y[:200], x_test=x[200:], y_test=y[200:])
    for k in range(2):
        torch.manual_seed(k)
        save_file(models.MLP(6, 2, 8, 3).state_dict(), str(tmp_path / f"m{k}.safetensors"))
    _run([str(fresh / "bin" / "lmcbook"), "diagnose", "m0.safetensors", "m1.safetensors", "--model", "mlp",
          "--model-args", "{width: 0.125, depth: 3}", "--data", "task.npz", "--lams", "5", "--out", "report"],
         cwd=tmp_path)
    assert (tmp_path / "report" / "report.html").stat().st_size > 10_000
    # a data set of the [data] extra is refused with the command that installs it, before any compute
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(fresh / "bin" / "lmcbook"), "diagnose", "m0.safetensors", "m1.safetensors", "--model",
                           "mlp", "--data", "digits", "--out", "other"], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "pip install 'lmcbook[data]'" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "other").exists()
