import subprocess
import sys
from pathlib import Path

import pytest

from lmcbook import book
from lmcbook.cli import main
from lmcbook.page import Page
from lmcbook.specs import SpecError
from lmcbook.studies import study as part_study

ROOT = Path(__file__).resolve().parents[1]


def test_width_study_profiles_and_overrides():
    quick = part_study("width", "quick")
    assert quick.arch == "mlp" and not quick.bias and quick.depth == 4 and quick.dataset == "digits"
    units = [p.hidden_units for p in quick.pairs()]
    assert sorted(set(units)) == [16, 32, 64, 128, 256, 512, 1024]
    # 5 pairs where the width rows read intervals: the widest, the second widest (W1) and the narrowest (W9)
    assert quick.seeds >= 2 and all(units.count(u) == quick.seeds for u in set(units) - {16, 512, 1024})
    assert units.count(16) == units.count(512) == units.count(1024) == quick.decisive_seeds == 5
    pairs = quick.pairs()
    assert pairs[0].a.train.seed == 0 and pairs[0].b.train.seed == 1
    assert len({s.id for s in quick.specs()}) == 2 * len(pairs)
    small = part_study("width", "quick", widths=[0.5, 2], seeds=None)
    assert small.widths == (0.5, 2.0) and small.seeds == quick.seeds
    assert part_study("width", "paper", arch="resnet20").base_width == 16


@pytest.mark.parametrize("kwargs, names", [
    (dict(widths="abc"), ["widths", "list"]),
    (dict(widths=[]), ["widths"]),
    (dict(seeds=0), ["seeds", "[1, 100]"]),
    (dict(epochs="ten"), ["epochs", "int"]),
    (dict(bias="yes"), ["bias", "true or false"]),
    (dict(lams=[0.0, 2.0]), ["lams", "[0, 1]"]),
    (dict(width=2), ["width", "widths"]),
    (dict(arch="mlp2"), ["arch", "'mlp'"]),
])
def test_bad_study_parameters(kwargs, names):
    with pytest.raises(SpecError) as err:
        part_study("width", "quick", **kwargs)
    for n in names:
        assert n in str(err.value)


def test_each_part_resolves_its_own_study_class():
    from lmcbook import studies

    assert list(studies.PARTS.values()) == [studies.WIDTH, studies.PROBES, studies.DEPTH, studies.THEORY,
                                            studies.NOISE_REGIME, studies.NOISE, studies.CONTROLS, studies.MECHANISM,
                                            studies.TUTORIAL, studies.EXPLORE, studies.SUMMARY]
    for name, part in studies.PARTS.items():
        got = part.study("smoke")
        assert type(got) is part.study_type and got == part_study(name, "smoke")
        assert got == studies.resolve(part.study_type, "smoke")
    assert studies.NOISE.study("quick", seeds=3).seeds == 3
    with pytest.raises(SpecError, match="unknown parameter"):
        studies.WIDTH.study("quick", colour=1)


def test_unknown_profile():
    with pytest.raises(SpecError, match="profile='fast'.*'smoke', 'quick', 'paper'"):
        part_study("width", "fast")


def test_notebook_parameters_are_read_from_the_source():
    params = book.notebook_parameters("notebooks/width_accuracy.py")
    for key in ("profile", "dataset", "data_root", "arch", "base_width", "widths", "depth", "bias",
                "weight_decay", "epochs", "seeds", "device", "lams"):
        assert key in params
    assert params["profile"] == "quick"


def test_check_parameters_before_compute():
    book.check_parameters("width_accuracy", "smoke", {"widths": [0.5, 2]})
    with pytest.raises(SpecError, match="unknown parameter.*'colour'"):
        book.check_parameters("width_accuracy", "smoke", {"colour": 1})
    with pytest.raises(SpecError, match="widths"):
        book.check_parameters("width_accuracy", "smoke", {"widths": "wide"})
    with pytest.raises(SpecError, match="does not exist.*width_accuracy"):
        book.check_parameters("nonexistent", "smoke", {})


def test_param_values_are_yaml():
    assert book.parse_param("[0.5, 2]") == [0.5, 2]
    assert book.parse_param("true") is True
    assert book.parse_param("digits") == "digits"
    assert book.parse_param("3e-3") == 0.003
    assert book.parse_param("[1e-4, 3e-3]") == [0.0001, 0.003]
    assert book.parse_param("null") is None


def test_execute_only_unknown_notebook_fails_cleanly(tmp_path, capsys):
    code = main(["execute", "--profile", "smoke", "--only", "nope", "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "nope" in err and "width_accuracy" in err
    assert not (tmp_path / "out").exists()


def test_execute_bad_parameter_type_fails_before_running(tmp_path, capsys):
    code = main(["execute", "--profile", "smoke", "--only", "width_accuracy", "-p", "epochs", "many",
                 "--out", str(tmp_path / "out")])
    assert code == 2 and "epochs" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_reproduce_command_roundtrips():
    page = Page.__new__(Page)
    page.name, page.profile, page.params = "width_accuracy", "quick", {"widths": [0.5, 2], "seeds": None}
    assert page.reproduce_command() == 'lmcbook execute --profile quick --only width_accuracy -p widths "[0.5, 2]"'


def test_cli_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "lmcbook.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "lmcbook" in out.stdout


def test_execute_reports_a_failing_notebook_with_its_cell_and_runs_the_rest(tmp_path, capsys):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    head = '# %% tags=["parameters"]\nprofile = "quick"\n\n'
    (nbs / "claims.py").write_text(head + "# %%\nx = 1\n\n# %%\nraise ZeroDivisionError('planted failure')\n")
    (nbs / "overview.py").write_text(head + SAVES)
    out = tmp_path / "out"
    code = main(["execute", "--only", "claims", "--only", "overview", "--notebooks", str(nbs),
                 "--out", str(out), "--store", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 1
    assert "FAILED claims" in err and "ZeroDivisionError" in err and "planted failure" in err
    assert "raise ZeroDivisionError" in err  # the failing cell is named by its source
    assert (out / "overview.ipynb").exists() and "overview: done" in err


SAVES = """# %%
import pandas as pd
from lmcbook.page import open_page

page, study = open_page("overview", globals())
page.save(pd.DataFrame([{"notebook": "overview", "metric": "acc", "value": 1.0, "pair": 0}]))
"""


def test_a_notebook_that_never_saves_its_page_fails(tmp_path, capsys):
    """Its dependencies would go unrecorded, and the cache would skip it forever after."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    (nbs / "overview.py").write_text('# %% tags=["parameters"]\nprofile = "quick"\n\n# %%\nprint("no save")\n')
    code = main(["execute", "--only", "overview", "--notebooks", str(nbs), "--out", str(tmp_path / "out"),
                 "--store", str(tmp_path / "runs")])
    assert code == 1 and "never saved its page" in capsys.readouterr().err


def test_execute_shows_neither_the_kernels_tcp_warning_nor_papermills_unknown_parameter_warning(tmp_path):
    """A global ``-p`` reaches the pages whose study declares it (here theory_lewc's ``seed``, in a chained
    ``a = b = None`` row that papermill cannot read), and the kernel talks over IPC: what the command prints on a
    user's terminal (its stderr and the kernel's, run as a user runs it) shows neither warning."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    (nbs / "overview.py").write_text('# %% tags=["parameters"]\nprofile = "quick"\n\n' + SAVES)
    (nbs / "theory_lewc.py").write_text(
        '# %% tags=["parameters"]\nprofile = "quick"\nlams = depth = hidden = in_features = inputs = seed = None\n\n'
        "# %%\nimport json\nfrom ipykernel.connect import get_connection_file\n"
        "print('transport', json.load(open(get_connection_file()))['transport'])\n"
        "assert seed == 3\n" + SAVES.split("# %%", 1)[1].replace('"overview"', '"theory_lewc"'))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "lmcbook.cli", "execute", "--profile", "smoke", "--only", "overview",
                           "--only", "theory_lewc", "-p", "seed", "3", "--notebooks", str(nbs), "--out", str(out),
                           "--store", str(tmp_path / "runs")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "overview: done" in proc.stderr and "theory_lewc: done" in proc.stderr
    assert "without encryption" not in proc.stderr and "Passed unknown parameter" not in proc.stderr, proc.stderr
    assert "transport ipc" in (out / "theory_lewc.ipynb").read_text()


@pytest.mark.integration
def test_explore_re_executes_once_its_missing_runs_exist(tmp_path, monkeypatch):
    """The page's dependencies come from the store's read log, missing runs included, so no page can cache a
    'run not in the store' state after the run was trained."""
    from pathlib import Path

    from lmcbook.data import load
    from lmcbook.store import RunStore

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    out, store = tmp_path / "out", tmp_path / "store"
    run = lambda: book.execute(["explore"], "smoke", {}, out, root / "notebooks", store)[0]  # noqa: E731
    first = run()
    assert first.ok and not first.cached and first.trained == 0
    assert not run().cached  # a missing run keeps the page re-executing
    sweep = part_study("width", "smoke")
    pair = sweep.pair(sweep.widths[-1], 0)
    RunStore(store).get_or_train_many([pair.a, pair.b], data=load("digits", device="cpu"))
    after = run()
    assert after.ok and not after.cached and after.loaded == 2
    assert run().cached  # now nothing it read has changed
