"""The claims package's layout is its index: a module of thresholds, one of the shared verdict machinery, one per
family (its rows, and what they conclude or map) and the board, each importing only those before it, with short
functions and honest signatures."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

import pytest

from lmcbook import claims
from lmcbook.claims import ClaimResult

PACKAGE = Path(claims.__file__).parent
#: The package's modules in the order of its index: each may import only those before it.
ORDER = ["thresholds", "verdicts", "width", "mechanism", "noise", "board"]
#: A family is one module (its rows and what they conclude or map), so a module may be long; its functions may not.
MAX_MODULE_LINES = 1000
MAX_FUNCTION_LINES = 60  # as tests/test_layout.py asks of the top-level modules
#: When a threshold was fixed, as the table's second field says it (its first words).
FIXED = ("before", "after a pilot", "after results", "the paper")
#: The sets that record which rows were fixed before their results and which were changed after (not rows of the table).
PROVENANCE = ("FIXED_BEFORE", "CHANGED_AFTER_RESULTS", "FIXED_BEFORE_SOURCE")
ROW = re.compile(r"^[^|]+\|(?P<fixed>[^|]+)\|(?P<commit>[^|]+)\|[^|]+$", re.S)


def _tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{name}.py").read_text())


def test_the_package_holds_the_modules_of_its_index_and_each_is_short():
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER + ["__init__"])
    long = {p.name: n for p in PACKAGE.glob("*.py") if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long
    functions = [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines" for name in ORDER
                 for node in ast.walk(_tree(name)) if isinstance(node, ast.FunctionDef)
                 and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not functions, functions


def test_each_module_imports_only_the_modules_before_it():
    for i, name in enumerate(ORDER):
        inside = {n.module for n in ast.walk(_tree(name)) if isinstance(n, ast.ImportFrom) and n.level == 1}
        assert inside <= set(ORDER[:i]), (name, inside - set(ORDER[:i]))
    assert not [n for n in ast.walk(_tree("thresholds")) if isinstance(n, ast.ImportFrom | ast.Import)
                and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]


def _assignments(tree: ast.Module) -> list[tuple[str, ast.expr, int]]:
    out = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        for t in targets:
            for e in t.elts if isinstance(t, ast.Tuple) else [t]:
                out.append((e.id, node.value, node.lineno))
    return out


def _is_number(value: ast.expr) -> bool:
    """Return True for a literal number, or a tuple of numbers (a threshold), signs included."""
    if isinstance(value, ast.UnaryOp):
        value = value.operand
    if isinstance(value, ast.Tuple):
        return any(_is_number(e) for e in value.elts)
    return isinstance(value, ast.Constant) and isinstance(value.value, int | float) and not isinstance(value.value,
                                                                                                        bool)


def test_every_number_a_verdict_reads_is_a_row_of_the_thresholds_table():
    """No module but thresholds defines a numeric constant, and every constant there has its row: the rows it serves,
    when it was fixed (before or after results, or the paper's number) and the commit, above it."""
    elsewhere = [(name, n) for name in ORDER if name != "thresholds"
                 for n, value, _ in _assignments(_tree(name)) if _is_number(value)]
    assert not elsewhere, elsewhere
    lines = (PACKAGE / "thresholds.py").read_text().splitlines()
    for name, _, lineno in _assignments(_tree("thresholds")):
        doc = []
        for line in reversed(lines[:lineno - 1]):
            if not line.startswith("#:"):
                break
            doc.insert(0, line[2:].strip())
        if name in PROVENANCE:  # the record of the rows' provenance, after the table: prose, and its commits
            assert re.search(r"\b[0-9a-f]{7}\b", " ".join(doc)), f"{name} names no commit"
            continue
        row = ROW.match(" ".join(doc))
        assert row, f"{name} has no row of the table above it: ROWS | FIXED | COMMIT | what it is"
        assert row["fixed"].strip().startswith(FIXED), name
        assert re.search(r"\b[0-9a-f]{7}\b", row["commit"]), f"{name} names no commit"


def test_the_board_opens_with_its_index():
    body = [n for n in _tree("board").body if not isinstance(n, ast.Import | ast.ImportFrom)]
    assert isinstance(body[0], ast.Expr)  # the docstring
    first = body[1]
    assert isinstance(first, ast.AnnAssign) and first.target.id == "PAGE_CLAIMS"


def _claim_functions() -> list:
    return [f for name, f in vars(claims).items() if name.startswith("claim_") and callable(f)]


@pytest.mark.parametrize("fn", _claim_functions(), ids=lambda f: f.__name__)
def test_every_claim_is_a_plain_function_whose_annotation_tells_the_truth(fn):
    """No decorator stands between a claim and its signature: the function is the one its module defines under its
    name, and it says it returns a row (or, for the rows it makes one per spawn point, a list of them)."""
    module = inspect.getmodule(fn)
    assert module.__name__.startswith("lmcbook.claims.") and getattr(module, fn.__name__) is fn
    assert fn.__code__.co_name == fn.__name__ and not hasattr(fn, "__wrapped__")
    tree = ast.parse(inspect.getsource(module))
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fn.__name__]
    assert not node.decorator_list, fn.__name__
    returns = typing.get_type_hints(fn)["return"]
    assert returns in (ClaimResult, list[ClaimResult]), (fn.__name__, returns)


def test_the_torch_free_import_covers_every_module_of_the_package():
    import subprocess
    import sys

    code = ("import sys, " + ", ".join(f"lmcbook.claims.{m}" for m in ORDER) + "; print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parents[1], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "False"
