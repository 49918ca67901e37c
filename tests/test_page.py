"""The page helpers that keep notebooks free of plumbing: naming frames to save instead of melting them by hand,
and gluing many values in one call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmcbook import page as page_module
from lmcbook.page import Page
from lmcbook.schema import concat, to_long, to_long_frame
from lmcbook.specs import SpecError
from lmcbook.store import RunStore

ROOT = Path(__file__).resolve().parents[1]


def _frames():
    curves = pd.DataFrame({"width": [1.0, 1.0, 2.0, 2.0], "hidden_units": [64, 64, 128, 128], "lam": [0, 1, 0, 1.0],
                           "pair": [0, 0, 0, 0], "acc": [0.5, 0.6, 0.7, 0.8]})
    summary = pd.DataFrame({"width": [1.0, 2.0], "hidden_units": [64, 128], "pair": [0, 0],
                            "acc_merged": [0.3, 0.9], "acc_ensemble": [0.95, 0.97]})
    probes = pd.DataFrame({"width": [1.0], "hidden_units": [64], "layer": [2], "lam": [0.5], "pair": [0],
                           "metric": ["lewc_rel_err"], "value": [0.1]})
    return curves, summary, probes


def test_save_melts_named_frames_exactly_as_melting_them_by_hand(tmp_path):
    curves, summary, probes = _frames()
    p = Page("explore", "smoke", {}, store=RunStore(tmp_path / "s"))  # a page with no verdicts to glue
    by_hand = concat([to_long(curves, p.name, ["acc"], ["width", "hidden_units", "lam"]),
                      to_long(summary, p.name, ["acc_merged", "acc_ensemble"], ["width", "hidden_units"]),
                      to_long_frame(probes, p.name, ["width", "hidden_units", "layer", "lam"])])
    p.save(by_hand)
    expected = p.csv_path.read_bytes()
    p.save(curves=(curves, ["acc"], ["width", "hidden_units", "lam"]),
           summary=(summary, ["acc_merged", "acc_ensemble"]),  # keys: the schema's key columns it has
           probes=probes)
    assert p.csv_path.read_bytes() == expected
    with pytest.raises(SpecError, match="page.save"):
        p.save()


def test_glue_values_and_markdown_glue_each_value_under_its_name(monkeypatch):
    glued = {}
    monkeypatch.setattr(page_module, "glue", lambda key, value, display=True: glued.__setitem__(key, value))
    Page.glue_values(n_wide=1024, gap=np.float64(0.07))
    Page.glue_markdown(trend="rises")
    assert glued.keys() == {"n_wide", "gap", "trend"} and glued["n_wide"] == 1024 and glued["gap"] == 0.07
    assert type(glued["gap"]) is float  # numpy scalars are glued as Python numbers
    assert glued["trend"].data == "rises"  # Markdown, for the {glue:md} role


def test_a_verdict_is_glued_under_the_literal_keys_the_prose_quotes(tmp_path, monkeypatch):
    """save() glues each verdict's state for the book's checks; the words the prose quotes are glued only under keys
    the notebook writes out, each naming its part by its last word."""
    from lmcbook import claims

    glued = {}
    monkeypatch.setattr(page_module, "glue", lambda key, value, display=True: glued.__setitem__(key, value))
    row = claims.verdicts.ClaimResult("W1", "width", "Merged accuracy rises with width.", "0.9 [0.8, 1.0]", "ρ ≥ 0.9",
                             claims.verdicts.PASS, "width_accuracy")
    p = Page("width_accuracy", "smoke", {}, store=RunStore(tmp_path / "s"))
    p.verdicts = {row.key: row}
    p.glue_verdict("w1", "w1_mark", "w1_measured", "w1_test")
    assert {k: getattr(v, "data", v) for k, v in glued.items()} == {
        "w1_mark": row.mark, "w1_measured": "0.9 [0.8, 1.0]", "w1_test": "ρ ≥ 0.9"}
    Page.glue_state(row)
    assert glued["w1_state"] == claims.verdicts.PASS
    with pytest.raises(SpecError, match="must end in one of _mark"):
        Page.glue_claim(row, "w1_words")
    with pytest.raises(SpecError, match=r"verdicts are \['w1'\]"):
        p.glue_verdict("w2", "w2_mark")


def _legibility():
    """benchmarks/legibility.py, the measures of issue 38, imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("legibility", ROOT / "benchmarks" / "legibility.py")
    legibility = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(legibility)
    return legibility


@pytest.fixture(scope="module")
def unfound_keys() -> dict[str, list[str]]:
    return _legibility().measure()["missing"]


@pytest.mark.parametrize("notebook", [p.stem for p in sorted((ROOT / "notebooks").glob("*.py"))])
def test_every_glued_key_the_prose_names_is_literal_in_code(notebook, unfound_keys):
    """``grep KEY`` finds where each glued number comes from: every key a page's prose names appears, as a word, in
    its notebook's code or in the code (not a comment or a docstring) of an lmcbook function the notebook names
    (benchmarks/legibility.py's strict check)."""
    assert notebook not in unfound_keys, unfound_keys.get(notebook)


def test_the_strict_check_ignores_comments_and_docstrings():
    legibility = _legibility()
    source = 'def f():\n    """Glue ``acc_wide``."""\n    # acc_narrow\n    return {"n_wide": 1}\n'
    bare = legibility.bare(source)
    assert "n_wide" in bare and "acc_wide" not in bare and "acc_narrow" not in bare
    prose = "{glue:text}`acc_wide:.3f` and {glue:md}`setup`, {glue:figure} fig_x"
    assert {a or b for a, b in legibility.GLUE_REF.findall(prose)} == {"acc_wide", "setup", "fig_x"}


CHOICE_SOURCE = '''# %%
from lmcbook.page import Page
Page.choose("outcome", "against")
Page.choose("enough", False)

# %% [markdown] tags=["when:outcome=for"]
# The data support the account.

# %% [markdown] tags=["when:outcome=against"]
# The data contradict the account.

# %% [markdown] tags=["when:enough=true"]
# Enough pairs.

# %% [markdown] tags=["when:enough=false"]
# Too few pairs.

# %% [markdown]
# Always shown.
'''


def _shown(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown" and "remove-cell" not in c.metadata.get("tags", [])]


@pytest.mark.integration
def test_alternative_prose_is_chosen_in_markdown_by_the_glued_outcome(tmp_path):
    """Prose that depends on an outcome is written once per outcome in the Markdown; the executed page shows the
    chosen one, and a page whose choices and cells do not fit fails with the key and the values written for it."""
    import jupytext
    import nbformat
    import papermill

    from lmcbook.book import ChoiceError, show_chosen

    src = tmp_path / "choice.ipynb"
    jupytext.write(jupytext.reads(CHOICE_SOURCE, fmt="py:percent"), str(src))
    papermill.execute_notebook(str(src), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False)
    executed = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    nb = nbformat.from_dict(executed)
    show_chosen(nb)
    assert _shown(nb) == ["The data contradict the account.", "Too few pairs.", "Always shown."]

    orphan = nbformat.from_dict(executed)
    orphan.cells.append(nbformat.v4.new_markdown_cell("?", metadata={"tags": ["when:verdict=pass"]}))
    with pytest.raises(ChoiceError, match=r"never chose 'verdict'.*page.choose\('verdict'"):
        show_chosen(orphan)
    unwritten = nbformat.from_dict(executed)
    unwritten.cells = [c for c in unwritten.cells if "when:outcome=against" not in c.metadata.get("tags", [])]
    with pytest.raises(ChoiceError, match=r"chose outcome = 'against'.*written for 'for'"):
        show_chosen(unwritten)
    malformed = nbformat.from_dict(executed)
    malformed.cells[1].metadata["tags"] = ["when:outcome"]
    with pytest.raises(ChoiceError, match="when:KEY=VALUE"):
        show_chosen(malformed)
    with pytest.raises(SpecError, match="page.choose"):
        Page.choose("outcome", "two words")


def test_describe_noise_says_what_was_trained():
    from lmcbook import studies
    from lmcbook.experiments_noise import describe_noise

    study = studies.NOISE.study("smoke")
    pairs, models = describe_noise(study), describe_noise(study, spawned=False)
    assert "spawn-and-merge pairs" in pairs and f"{study.grid_pairs} pair(s) per cell of the η × B grid" in pairs
    assert "spawn-and-merge" not in models and f"{study.seeds} such model(s), one per seed" in models
