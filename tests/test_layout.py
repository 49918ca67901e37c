"""The library's shape: no import cycle between its modules, and no function longer than a screen."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lmcbook"
sys.path.insert(0, str(LIB.parent / "benchmarks"))
from import_graph import cycle as find_cycle  # noqa: E402  (benchmarks/import_graph.py, the targets' script)

MAX_LINES = 60


def _imports() -> dict[str, set[str]]:
    """Return, per lmcbook module (the top level's, and the tools' as ``tools.NAME``), the lmcbook modules it imports
    anywhere in its body (functions included)."""
    mods = {p.stem: p for p in LIB.glob("*.py")}
    mods |= {f"tools.{p.stem}": p for p in (LIB / "tools").glob("*.py") if p.stem != "__init__"}
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        here = m.rsplit(".", 1)[0] + "." if "." in m else ""  # a tool's sibling: tools.NAME
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                base = here if node.level == 1 else ""  # level 2 from a tool is the top level
                full = base + (node.module or "")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lmcbook."):
                full = node.module.removeprefix("lmcbook.")
            else:
                continue
            # "from .x import y" names module x, or module x.y where x is a package ("from .tools import bench")
            for cand in [full, *(f"{full}.{a.name}".lstrip(".") for a in node.names)]:
                key = ".".join(cand.split(".")[:2]) if cand.startswith("tools.") else cand.split(".")[0]
                if key in mods:
                    graph[m].add(key)
    return graph


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_lmcbook_has_no_import_cycle():
    cycle = find_cycle(_imports())
    assert cycle is None, " -> ".join(cycle)


def test_the_library_imports_none_of_its_tools():
    """The tools (diagnose, explore, bench) stand on the library; only the command line reaches them."""
    graph = _imports()
    users = sorted(m for m, deps in graph.items() if not m.startswith("tools.") and m != "cli"
                   and any(d.startswith("tools.") for d in deps))
    assert not users, users
    assert {"tools.diagnose", "tools.bench"} <= graph["cli"] and "merge" in graph["tools.diagnose"]


def test_no_function_is_longer_than_a_screen():
    long = []
    for path in sorted(LIB.rglob("*.py")):  # every module, the packages' included
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{path.stem}.{node.name}: {n} lines")
    assert not long, long


def test_the_linter_passes_on_the_library_the_tests_and_the_notebooks():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "lmcbook", "tests", "notebooks"], cwd=LIB.parent,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]


def _loads_torch(module: str) -> bool:
    """Return whether importing ``module`` in a fresh interpreter imports torch."""
    import subprocess
    import sys

    code = f"import sys, {module}; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=LIB.parent, capture_output=True, text=True, check=True)
    return proc.stdout.strip() == "True"


def test_the_light_modules_import_without_torch():
    """The package imports nothing eagerly that runs back up the module graph, so the verdicts, the schema and the
    statistics load without torch; importing the training side does load it (the check can fail)."""
    for module in ("lmcbook", "lmcbook.specs", "lmcbook.schema", "lmcbook.stats", "lmcbook.claims"):
        assert not _loads_torch(module), module
    assert _loads_torch("lmcbook.store")


def test_the_package_names_stay_importable_from_lmcbook():
    import lmcbook
    from lmcbook import CODE_VERSION, RunSpec, RunStore, studies, study
    from lmcbook.specs import CODE_VERSION as SPECS_CODE_VERSION
    from lmcbook.store import RunStore as StoreRunStore
    from lmcbook.studies import study as parts_study

    assert (RunStore, study, CODE_VERSION) == (StoreRunStore, parts_study, SPECS_CODE_VERSION)
    assert studies.__name__ == "lmcbook.studies" and RunSpec.__module__ == "lmcbook.specs"
    assert all(hasattr(lmcbook, name) for name in lmcbook.__all__)
    assert lmcbook.train.__name__ == "lmcbook.train"  # any submodule, on first use
    with pytest.raises(AttributeError, match="no_such_name"):
        lmcbook.no_such_name  # noqa: B018


def test_the_import_graph_script_measures_floors_and_hidden_code(tmp_path):
    """benchmarks/import_graph.py (issue 50's targets): floors on a planted graph, package-relative imports resolved
    to their modules, and the hidden share of a planted notebook."""
    import import_graph as ig

    assert ig.floors({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == {"a": 3, "b": 2, "c": 1}
    assert ig.cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    g = ig.graph()
    assert {"claims.verdicts", "claims.thresholds"} <= g["claims.noise"]  # from .verdicts import ... in a package
    assert "store" in g["tools.diagnose"] or "merge" in g["tools.diagnose"]  # from ..merge import ... in a tool
    assert len(g) == len(list(LIB.rglob("*.py")))
    nb = tmp_path / "n.py"
    nb.write_text("# %% tags=[\"remove-cell\"]\nx = 1\ny = 2\nz = 3\n\n# %%\nprint(x)\n")
    assert ig.hidden_share(nb) == 0.75
