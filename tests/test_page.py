"""The page helpers that keep notebooks free of plumbing: naming frames to save instead of melting them by hand,
and gluing many values in one call."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lmcbook import page as page_module
from lmcbook.page import Page
from lmcbook.schema import concat, to_long, to_long_frame
from lmcbook.specs import SpecError
from lmcbook.store import RunStore


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


def test_glue_values_and_rows_glue_each_value_under_its_name(monkeypatch):
    glued = {}
    monkeypatch.setattr(page_module, "glue", lambda key, value, display=True: glued.__setitem__(key, value))
    means = pd.DataFrame({"acc_merged": [0.3, 0.9], "acc_ensemble": [0.95, 0.97]}, index=[16, 1024])
    Page.glue_values(n_wide=1024, gap=np.float64(0.07))
    Page.glue_rows(means, {"narrow": 16, "wide": 1024}, ["acc_merged", "acc_ensemble"])
    assert glued == {"n_wide": 1024, "gap": 0.07, "acc_merged_narrow": 0.3, "acc_ensemble_narrow": 0.95,
                     "acc_merged_wide": 0.9, "acc_ensemble_wide": 0.97}
    assert type(glued["gap"]) is float  # numpy scalars are glued as Python numbers


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
    from lmcbook import parts
    from lmcbook.captions import describe_noise

    study = parts.NOISE.study("smoke")
    pairs, models = describe_noise(study), describe_noise(study, spawned=False)
    assert "spawn-and-merge pairs" in pairs and f"{study.grid_pairs} pair(s) per cell of the η × B grid" in pairs
    assert "spawn-and-merge" not in models and f"{study.seeds} such model(s), one per seed" in models
