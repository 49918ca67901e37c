"""Every page shows what ran: under its title, each field of its study, the value it took and where from (the
field's quick value, the profile, or a parameter given with ``-p``); and the values written on the fields' lines
of lmcbook/studies.py are the values the studies run."""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import fields
from pathlib import Path

import pytest

from lmcbook import book, page, studies
from lmcbook.studies import STUDIES, default, profile_values, resolve, sources, what_ran

ROOT = Path(__file__).resolve().parents[1]
#: The pages that run no study of their own (they read the other pages' CSVs): no table.
NO_TABLE = ("claims", "overview")
STUDY_MODULES = ("lmcbook.studies",)


def _cells(text: str) -> list[tuple[str, str]]:
    parts_ = re.split(r"^(# %%.*)$", text, flags=re.M)
    return [(parts_[i], parts_[i + 1]) for i in range(1, len(parts_) - 1, 2)]


@pytest.mark.parametrize("name", [n for n in studies.all_notebooks() if n not in NO_TABLE])
def test_every_page_shows_its_table_right_after_its_title(name):
    cells = _cells((ROOT / "notebooks" / f"{name}.py").read_text())
    (title, text), (head, body), (params, _) = cells[:3]
    assert "[markdown]" in title and text.lstrip("\n").startswith("# # "), name
    assert "[markdown]" in head and "{glue:md} what_ran" in body and ":format: myst" in body, name
    assert "parameters" in params, name


@pytest.mark.parametrize("name", [n for n in studies.all_notebooks() if n not in NO_TABLE])
def test_the_table_lists_every_field_with_its_value_and_source(name):
    study_type = studies.part_of(name).study_type
    params = {}  # nothing given: every value is the quick one or the profile's
    quick = sources(study_type, "quick", params)
    assert list(quick) == book.study_fields(name) and set(quick.values()) == {"default"}
    smoke = sources(study_type, "smoke", params)
    changed = profile_values(study_type, "smoke")
    assert {k for k, s in smoke.items() if s == "profile"} == set(changed)
    study = studies.part_of(name).resolve("smoke", params)
    table = what_ran(study, params)
    for k in book.study_fields(name):
        row = re.search(rf"`{k}` \| ([^|]*) \| ([^|]*) \|", table)
        assert row, (name, k)
        assert row.group(2).strip() == smoke[k]
        assert row.group(1).strip() == studies._cell(getattr(study, k))


def test_a_planted_override_shows_as_given():
    params = {"weight_decay": 0.004, "widths": [0.5, 1.0]}
    src = sources(studies.WidthStudy, "smoke", params)
    assert src["weight_decay"] == src["widths"] == "-p"
    assert src["epochs"] == "profile" and src["lr"] == "default"  # smoke sets epochs; nothing sets lr
    table = what_ran(studies.WIDTH.resolve("smoke", params), params)
    assert "| `weight_decay` | 0.004 | **-p** |" in table and "| `widths` | [0.5, 1] | **-p** |" in table
    arch = sources(studies.WidthStudy, "quick", {"arch": "resnet20"})
    assert arch["arch"] == "-p" and arch["base_width"] == arch["depth"] == "-p arch"  # set by the architecture


def test_open_page_glues_the_table(monkeypatch, tmp_path):
    glued = {}
    monkeypatch.setattr(page.Page, "glue_md", staticmethod(lambda key, text: glued.__setitem__(key, text)))
    ns = {"profile": "smoke", "weight_decay": 0.004, "seeds": None}
    page.open_page("width_accuracy", ns, store=page.RunStore(tmp_path))
    assert "**What ran** (profile `smoke`)" in glued["what_ran"]
    table = glued["what_ran"]
    assert "| `weight_decay` | 0.004 | **-p** |" in table and "| `seeds` | 1 | profile |" in table


# -- the literals on the fields' lines are what the studies run ---------------------------------------------------
def _value(node: ast.expr, module) -> object:
    """Return the value of an expression written in ``module`` (a literal, or a constant it names)."""
    return eval(compile(ast.Expression(node), module.__name__, "eval"), vars(module))  # noqa: S307 (our source)


def _written() -> dict[tuple[str, str], dict[str, object]]:
    """Return, per (study class, field) declared with param(...), the values written on its line by profile."""
    out = {}
    for modname in STUDY_MODULES:
        module = importlib.import_module(modname)
        tree = ast.parse(Path(module.__file__).read_text())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Call) \
                        and getattr(node.value.func, "id", "") == "param":
                    got = {"quick": _value(node.value.args[0], module)}
                    got |= {k.arg: _value(k.value, module) for k in node.value.keywords if k.arg in ("smoke", "paper")}
                    out[cls.name, node.target.id] = got
    return out


def test_every_study_field_states_its_quick_value_on_its_line():
    written = _written()
    for cls in STUDIES:
        for f in fields(cls):
            if f.name != "profile":
                owner = next(c for c in cls.__mro__ if (c.__name__, f.name) in written)
                assert written[owner.__name__, f.name]["quick"] == default(cls, f.name), (cls.__name__, f.name)


@pytest.mark.parametrize("profile", studies.PROFILES)
def test_the_values_on_the_fields_lines_are_the_values_the_studies_run(profile):
    written = _written()
    for cls in STUDIES:
        study = resolve(cls, profile)
        arch = studies._PAPER_ARCH.get(getattr(study, "arch", None), {}) if profile == "paper" else {}
        for f in fields(cls):
            if f.name == "profile" or f.name in arch or (f.name == "depth" and getattr(study, "arch", "mlp") != "mlp"):
                continue  # set by the paper profile's architecture (its recipe; VGG11 and ResNet20 have no depth)
            line = written[next(c for c in cls.__mro__ if (c.__name__, f.name) in written).__name__, f.name]
            want = line.get(profile, line["quick"])
            got = getattr(study, f.name)
            if want is None and f.name == "wide_decays":  # None: computed from weight_decays
                continue
            assert got == (tuple(want) if isinstance(want, list) else want), (cls.__name__, profile, f.name)


def test_the_width_sweeps_runs_train_with_the_literals_of_its_lines():
    written = _written()
    spec = resolve(studies.WidthStudy, "quick").specs()[0]
    for name in ("epochs", "batch_size", "lr", "momentum", "warmup"):
        assert getattr(spec.train, name) == written["Training", name]["quick"], name
    assert spec.train.weight_decay == written["Recipe", "weight_decay"]["quick"] == 3e-3
    assert spec.model.depth == written["Recipe", "depth"]["quick"] and spec.data.name == "digits"
