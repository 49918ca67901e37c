"""The explorer's callbacks are plain functions: called directly here, with and without the runs they read."""

import nbformat
import pytest

from lmcbook.cli import main
from lmcbook.data import load
from lmcbook.store import RunStore
from lmcbook.studies import study as part_study
from lmcbook.tools import explore


def test_a_missing_run_is_named_with_the_command_that_trains_it(tmp_path):
    store = RunStore(tmp_path / "empty")
    v = explore.view("smoke", width=1.0, pair=0, store=store)
    pair = part_study("width", "smoke", widths=[1.0]).pair(1.0, 0)
    assert pair.a.short_id in v.message
    assert 'lmcbook train --profile smoke --part width -p dataset digits -p widths "[1]"' in v.message
    assert v.figure is None and store.ids() == []  # nothing was trained


def test_view_reads_the_store_and_draws(tmp_path):
    store = RunStore(tmp_path / "s")
    study = part_study("width", "smoke", widths=[0.25])
    pair = study.pair(0.25, 0)
    store.get_or_train_many([pair.a, pair.b], data=load("digits", device="cpu"))
    n = len(store.events())
    store = RunStore(tmp_path / "s")  # a fresh instance: its read log holds only what the view read
    v = explore.view("smoke", width=0.25, pair=0, lam=0.25, layer=2, store=store)
    assert v.message == "" and v.figure is not None
    assert list(v.curve["lam"]) == list(study.lams)
    assert list(v.layers.index) == [1, 2, 3, 4]
    assert v.layers.loc[1, "lewc_rel_err"] < 1e-5  # layer 1 is linear: exact for both predictions
    assert {r for r, st in store.reads.items() if st == "loaded"} == {pair.a.id, pair.b.id}  # its read log
    assert [(e["event"], e["id"]) for e in store.events()[n:]] == [("loaded", pair.a.id), ("loaded", pair.b.id)]
    assert explore.view("smoke", width=0.25, pair=5, store=store).message.startswith("pair=5 is not allowed")


def test_options_list_the_sweep():
    opts = explore.options("quick")
    assert opts["width"] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    assert opts["layer"] == [1, 2, 3, 4] and 0.5 in opts["lam"] and opts["pair"] == [0, 1]


def test_explore_command_prepares_a_live_notebook(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    dest = tmp_path / "explore.ipynb"
    assert main(["explore", "--dest", str(dest), "--dry-run"]) == 0
    assert "jupyterlab" in capsys.readouterr().out
    nb = nbformat.read(dest, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "interactive = True" in injected[0].source


def test_explorer_settings_are_validated():
    with pytest.raises(Exception, match="lams"):
        part_study("explore", "quick", lam=2.0)
    with pytest.raises(Exception, match="pair"):
        part_study("explore", "quick", pair=-1)
