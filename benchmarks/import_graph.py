"""The library's shape, measured (issue 50's targets): run ``python benchmarks/import_graph.py [--json]``.

Every ``.py`` file under ``lmcbook/`` is a module (a package's ``__init__`` stands for the package). A module
stands on the floor one above the highest module it imports (a module importing no lmcbook module is on floor 1);
the notebooks stand on top. Prints the modules, lines, import arrows, floors, any cycle, the longest chain of
imports, the functions over 60 lines, and per notebook the share of its code that is hidden from the reader.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from functools import cache
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lmcbook"
MAX_LINES = 60
HIDDEN = {"remove-cell", "remove-input"}


def modules() -> dict[str, Path]:
    """Return every module by its dotted name under lmcbook (``claims`` for claims/__init__.py)."""
    out = {}
    for p in sorted(LIB.rglob("*.py")):
        parts = p.relative_to(LIB).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "lmcbook"
        out[name] = p
    return out


def _targets(node: ast.AST, here: str, mods: dict[str, Path]) -> set[str]:
    """Return the lmcbook modules an import node names, from module ``here``."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            pkg = here.split(".")
            pkg = pkg[: len(pkg) - node.level + (1 if (LIB / Path(*here.split("."))).is_dir() else 0)]
            base = ".".join([*pkg, *(node.module.split(".") if node.module else [])])
        elif node.module and node.module.split(".")[0] == "lmcbook":
            base = node.module.removeprefix("lmcbook").lstrip(".")
        else:
            return set()
        out = set()
        for cand in [base, *(f"{base}.{a.name}".lstrip(".") for a in node.names)]:
            while cand and cand not in mods:
                cand = cand.rpartition(".")[0]
            if cand:
                out.add(cand)
        return out
    if isinstance(node, ast.Import):
        return {a.name.removeprefix("lmcbook.") for a in node.names if a.name.startswith("lmcbook.")} & set(mods)
    return set()


def graph() -> dict[str, set[str]]:
    """Return, per module, the lmcbook modules it imports anywhere in its body (itself and "lmcbook" left out)."""
    mods = modules()
    g = {m: set() for m in mods}
    for m, path in mods.items():
        if m == "lmcbook":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            g[m] |= _targets(node, m, mods) - {m, "lmcbook"}
    return g


def floors(g: dict[str, set[str]]) -> dict[str, int]:
    """Return each module's floor (raises RecursionError on a cycle; find it with ``cycle``)."""
    @cache
    def floor(m: str) -> int:
        return 1 + max((floor(v) for v in g[m]), default=0)
    return {m: floor(m) for m in g}


def cycle(g: dict[str, set[str]]) -> list[str] | None:
    """Return one import cycle (first == last), or None."""
    state: dict[str, int] = {}

    def visit(u: str, path: list[str]) -> list[str] | None:
        state[u] = 1
        for v in sorted(g[u]):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state and (found := visit(v, path + [v])):
                return found
        state[u] = 2
        return None

    return next((c for m in sorted(g) if m not in state and (c := visit(m, [m]))), None)


def long_functions(mods: dict[str, Path]) -> list[tuple[str, str, int]]:
    """Return (module, function, lines) for every function longer than MAX_LINES."""
    out = []
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    out.append((m, node.name, n))
    return sorted(out, key=lambda t: -t[2])


def hidden_share(nb: Path) -> float:
    """Return the share of a notebook's code lines in cells hidden from the reader (remove-cell, remove-input)."""
    cells = [c for c in jupytext.read(nb).cells if c.cell_type == "code"]
    lines = [(len(c.source.splitlines()), bool(HIDDEN & set(c.metadata.get("tags", [])))) for c in cells]
    total = sum(n for n, _ in lines)
    return sum(n for n, h in lines if h) / total if total else 0.0


def measure() -> dict:
    """Return every number this script prints."""
    mods, g = modules(), graph()
    found = cycle(g)
    fl = {} if found else floors(g)
    top = max(fl.values(), default=0)
    chain = []
    if fl:  # the longest chain of imports, from the highest floor down
        m = max(fl, key=fl.get)
        while m:
            chain.append(m)
            m = max(g[m], key=fl.get, default=None)
    nbs = {p.stem: round(hidden_share(p), 3) for p in sorted((ROOT / "notebooks").glob("*.py"))}
    return {"modules": len(mods), "lines": sum(len(p.read_text().splitlines()) for p in mods.values()),
            "arrows": sum(len(v) for v in g.values()), "cycle": found,
            "floors": top + 1 if fl else None,  # the notebooks on top
            "longest_chain": chain, "functions_over_60_lines": long_functions(mods),
            "hidden_code_share": {"all": round(sum(nbs.values()) / len(nbs), 3) if nbs else 0.0, **nbs}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = ap.parse_args(argv)
    out = measure()
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"modules {out['modules']}, lines {out['lines']}, import arrows {out['arrows']}")
    found = out["cycle"]
    print(f"floors (notebooks on top) {out['floors']}" if found is None else f"cycle: {' → '.join(found)}")
    print("longest chain: " + " → ".join(out["longest_chain"]))
    print(f"functions over {MAX_LINES} lines: " + (", ".join(f"{m}.{f} ({n})" for m, f, n in
                                                             out["functions_over_60_lines"]) or "none"))
    print(f"hidden notebook code (mean share per notebook): {out['hidden_code_share']['all']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
