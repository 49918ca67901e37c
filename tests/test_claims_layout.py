"""The claims package's layout is its index: a module of thresholds, one of the shared verdict machinery, one per
family (its rows, and what they conclude or map) and the board (the package's ``__init__``), each importing only those
before it, with short functions and honest signatures; each row registers itself, and the board reads the register."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

import pytest

from lmcbook import claims
from lmcbook.claims.verdicts import ClaimResult

PACKAGE = Path(claims.__file__).parent
#: The package's modules in the order of its index: each may import only those before it.
ORDER = ["thresholds", "verdicts", "width", "mechanism", "noise", "__init__"]
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
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER)
    long = {p.name: n for p in PACKAGE.glob("*.py") if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long
    functions = [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines" for name in ORDER
                 for node in ast.walk(_tree(name)) if isinstance(node, ast.FunctionDef)
                 and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not functions, functions


def test_each_module_imports_only_the_modules_before_it():
    for i, name in enumerate(ORDER):
        inside = {m for n in ast.walk(_tree(name)) if isinstance(n, ast.ImportFrom) and n.level == 1
                  for m in ([n.module] if n.module else [a.name for a in n.names])}
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


def test_the_board_reads_the_register_and_re_exports_nothing():
    """PAGE_CLAIMS is the register by page (every registered claim once, each page's in id order), and the board's
    public names are its own: no family's name is re-exported."""
    from lmcbook.claims import verdicts

    listed = [e for entries in claims.PAGE_CLAIMS.values() for e in entries]
    assert sorted(e.name for e in listed) == sorted(verdicts.REGISTER) and len(listed) == len(verdicts.REGISTER)
    for page, entries in claims.PAGE_CLAIMS.items():
        assert all(e.page == page for e in entries)
        assert [e.name for e in entries] == sorted((e.name for e in entries), key=claims.id_order), page
    own = {n.name for n in _tree("__init__").body if isinstance(n, ast.FunctionDef | ast.ClassDef)} | {
        name for name, _, _ in _assignments(_tree("__init__"))}
    assert set(claims.__all__) <= own, set(claims.__all__) - own
    assert not [n for n in vars(claims) if n.startswith("claim_")]


def _claim_functions() -> list:
    from lmcbook.claims import verdicts

    return [e.function for e in verdicts.REGISTER.values()]


@pytest.mark.parametrize("fn", _claim_functions(), ids=lambda f: f.__name__)
def test_every_claim_is_its_own_function_whose_annotation_tells_the_truth(fn):
    """The register's decorator hands back the function it registers: the function is the one its module defines
    under its name, unwrapped, and it says it returns a row (or, for the rows it makes one per spawn point or per
    regime, a list of them)."""
    module = inspect.getmodule(fn)
    assert module.__name__.startswith("lmcbook.claims.") and getattr(module, fn.__name__) is fn
    assert fn.__code__.co_name == fn.__name__ and not hasattr(fn, "__wrapped__")
    tree = ast.parse(inspect.getsource(module))
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fn.__name__]
    assert [ast.unparse(d.func) for d in node.decorator_list if isinstance(d, ast.Call)] == ["claim"], fn.__name__
    returns = typing.get_type_hints(fn)["return"]
    assert returns in (ClaimResult, list[ClaimResult]), (fn.__name__, returns)


def test_every_row_function_is_registered_or_read_through_a_registered_one():
    """A family's ``claim_*`` function is registered, except W7, which only the mechanism page's regime rows read
    (in the short and the long regime)."""
    from lmcbook.claims import mechanism, noise, verdicts, width

    registered = {e.function for e in verdicts.REGISTER.values()}
    loose = sorted(name for m in (width, mechanism, noise) for name, f in vars(m).items()
                   if name.startswith("claim_") and inspect.getmodule(f) is m and f not in registered)
    assert loose == ["claim_w7"]
    assert "claim_w7(" in inspect.getsource(width.width_rows_by_regime)


def test_a_new_row_is_one_registered_function(monkeypatch):
    """Adding a row needs its function and the decorator: the board finds it on its page with no other edit, and a
    name registered twice is refused, naming both functions."""
    import pandas as pd

    from lmcbook.claims import verdicts

    monkeypatch.setattr(verdicts, "REGISTER", dict(verdicts.REGISTER))

    @verdicts.claim("W99", page="toy_page", reads=lambda f: f[f["x"] > 0])
    def claim_w99(frame: pd.DataFrame) -> ClaimResult:
        return ClaimResult("W99", "width", "a toy row", f"{len(frame)} rows read", "none", verdicts.PASS, "toy_page",
                           regime="short")

    monkeypatch.setattr(claims, "PAGE_CLAIMS", claims._pages())
    (row,) = claims.page_claims("toy_page", pd.DataFrame({"x": [-1, 1, 2]}))
    assert row.id == "W99" and row.measured == "2 rows read"  # read through ``reads``
    with pytest.raises(ValueError, match="W99.*claim_w99.*lambda"):
        verdicts.claim("W99", page="toy_page")(lambda f: None)  # noqa: E731 (a second function for the same name)
    with pytest.raises(ValueError, match="page='nowhere' has no claims"):
        claims.page_claims("nowhere", pd.DataFrame())


def test_the_torch_free_import_covers_every_module_of_the_package():
    import subprocess
    import sys

    modules = [f"lmcbook.claims.{m}" if m != "__init__" else "lmcbook.claims" for m in ORDER]
    code = "import sys, " + ", ".join(modules) + "; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parents[1], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "False"
