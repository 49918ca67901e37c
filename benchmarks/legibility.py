"""Legibility measures of the book's sources (issue 38): run ``python benchmarks/legibility.py``.

- hidden: code lines (non-blank, not comments) of the notebooks that sit in cells tagged ``remove-cell``,
  ``remove-input`` or ``hide-input``, over all code lines of the notebooks (the ``parameters`` cells included);
- glue keys: the keys a page's prose names (``{glue:...}`key```, ``{glue:figure} key``) that appear literally
  (as a whole word) neither in the notebook's code nor in the code of an ``lmcbook`` function the notebook
  names in its code (and, apart, those not in the notebook's own code).  Comments and docstrings do not count:
  a key must be written where its value is glued or computed, so that ``grep KEY`` finds where a number comes
  from;
- largest module: the longest ``lmcbook`` module, in lines.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIDDEN_TAGS = ("remove-cell", "remove-input", "hide-input")
GLUE_REF = re.compile(r"\{glue(?::\w+)?\}`([A-Za-z0-9_]+)(?::[^`]*)?`|\{glue:figure\}\s+([A-Za-z0-9_]+)")


def cells(text: str) -> list[tuple[str, str]]:
    """Split a jupytext percent file into (header, body) cells."""
    parts = re.split(r"^(# %%.*)$", text, flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


def code_lines(body: str) -> int:
    return sum(1 for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def bare(source: str) -> str:
    """Return Python source without its comments and docstrings (unparsed); the source itself if it does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def helper_sources(code: str) -> str:
    """The source of every lmcbook function or class the code names (``page.glue_x`` names ``Page.glue_x`` too)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    out = []
    for mod in pkgutil.walk_packages([str(ROOT / "lmcbook")], "lmcbook."):
        module = importlib.import_module(mod.name)
        for name, obj in vars(module).items():
            if name in names and getattr(obj, "__module__", "").startswith("lmcbook"):
                out.append(_source(obj))
            if inspect.isclass(obj) and getattr(obj, "__module__", "") == mod.name:
                out += [_source(m) for n, m in vars(obj).items()
                        if n in names and (inspect.isfunction(m) or isinstance(m, (staticmethod, classmethod)))]
    return "\n".join(out)


def _source(obj: object) -> str:
    try:
        return bare(inspect.getsource(getattr(obj, "__func__", obj)))
    except (OSError, TypeError):  # generated (dataclass) methods have no source
        return ""


def measure() -> dict[str, object]:
    hidden = total = 0
    missing: dict[str, list[str]] = {}
    referenced = outside_notebook = 0
    for nb in sorted((ROOT / "notebooks").glob("*.py")):
        code, prose = [], []
        for header, body in cells(nb.read_text()):
            if "[markdown]" in header:
                prose.append(body)
                continue
            code.append(body)
            n = code_lines(body)
            total += n
            hidden += n if any(t in header for t in HIDDEN_TAGS) else 0
        code_text = "\n".join(bare(body) for body in code)
        keys = {a or b for a, b in GLUE_REF.findall("\n".join(prose))}
        referenced += len(keys)
        outside_notebook += sum(1 for k in keys if not re.search(rf"\b{re.escape(k)}\b", code_text))
        searched = code_text + "\n" + helper_sources(code_text)
        gone = sorted(k for k in keys if not re.search(rf"\b{re.escape(k)}\b", searched))
        if gone:
            missing[nb.stem] = gone
    modules = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
               for p in (ROOT / "lmcbook").rglob("*.py")}
    largest = max(modules, key=modules.get)
    return {"hidden_lines": hidden, "code_lines": total, "hidden_share": hidden / total,
            "glue_keys": referenced, "glue_keys_not_literal": sum(map(len, missing.values())),
            "glue_keys_not_in_notebook": outside_notebook,
            "missing": missing, "largest_module": largest, "largest_module_lines": modules[largest]}


if __name__ == "__main__":
    m = measure()
    print(f"hidden code lines: {m['hidden_lines']} of {m['code_lines']} ({m['hidden_share']:.0%})")
    print(f"glue keys in prose not literal in code: {m['glue_keys_not_literal']} of {m['glue_keys']}")
    print(f"glue keys in prose not literal in their notebook's own code: {m['glue_keys_not_in_notebook']}")
    print(f"largest module: {m['largest_module']} ({m['largest_module_lines']} lines)")
    if "-v" in sys.argv:
        for nb, keys in m["missing"].items():
            print(f"  {nb}: {' '.join(keys)}")
