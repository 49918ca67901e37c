"""The README runs as written: every Python block in it executes, at the smoke profile, in a temporary store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]

#: Stands in for dask-jobqueue's SLURMCluster where there is no Slurm: an in-process Dask cluster.
FAKE_JOBQUEUE = '''
from dask.distributed import LocalCluster


class SLURMCluster:
    def __init__(self, **slurm_options):
        self._cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                                     dashboard_address=None)

    @property
    def scheduler_address(self):
        return self._cluster.scheduler_address

    def scale(self, jobs=0):
        pass
'''


def python_blocks(text: str) -> list[str]:
    """Return the body of every ```python block of a Markdown text."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def at_smoke(code: str, store: Path) -> str:
    """Return a README block set to the smoke profile, the CPU and a temporary store."""
    for a, b in (('"quick"', '"smoke"'), ('"paper"', '"smoke"'), ('"cuda"', '"cpu"'),
                 ('"/shared/lmcbook-runs"', repr(str(store)))):
        code = code.replace(a, b)
    return code


def test_the_readme_has_the_python_blocks_this_test_runs():
    blocks = python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2 and any("lb.study(" in b for b in blocks)


@pytest.mark.parametrize("index", range(len(python_blocks((ROOT / "README.md").read_text()))))
def test_every_python_block_of_the_readme_runs(index, tmp_path):
    code = at_smoke(python_blocks((ROOT / "README.md").read_text())[index], tmp_path / "store")
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "dask_jobqueue.py").write_text(FAKE_JOBQUEUE)
    env = {**os.environ, "LMCBOOK_STORE": str(tmp_path / "store"), "TMPDIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), str(ROOT)])}
    (tmp_path / "example.py").write_text(code)  # run as a script, so that spawned workers import it again
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"README block {index} failed:\n{code}\n{proc.stderr[-3000:]}"
    if "get_or_train_many" in code:  # one line per pair, not one per process that imported the script
        lines = [line for line in proc.stdout.splitlines() if re.match(r"^\d+ \d", line)]
        assert len(lines) == len(set(lines)) == 2, proc.stdout
