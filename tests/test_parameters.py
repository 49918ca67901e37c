"""A page's parameters are its study's fields: the parameters cell lists exactly them, a parameter given to many
notebooks reaches those that have it, `download` and `data_root` reach the data loader on every route, and every
`lmcbook` command in the README passes the parameter check as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from lmcbook import book, data, store, studies
from lmcbook.cli import check, main
from lmcbook.specs import SpecError
from lmcbook.store import RunStore
from lmcbook.studies import all_notebooks

from .test_data import write_idx

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", all_notebooks())
def test_every_parameters_cell_lists_exactly_its_studys_fields(name):
    cell = book.notebook_parameters(ROOT / "notebooks" / f"{name}.py")
    assert list(cell) == ["profile", *book.study_fields(name)], name
    study = studies.part_of(name).study_type
    assert cell == {"profile": "quick", **{k: studies.default(study, k) for k in book.study_fields(name)}}, name
    source = (ROOT / "notebooks" / f"{name}.py").read_text()
    assert f'# %% tags=["parameters"]\n{studies.parameters_cell(study)}\n\n# %%' in source, (
        f"{name}: rewrite its parameters cell as lmcbook.studies.parameters_cell({study.__name__}) writes it")


def test_the_parameters_cell_says_what_each_profile_runs_instead():
    cell = studies.parameters_cell(studies.WidthStudy)
    assert "\nepochs = 60  # passes over the training split; smoke 4; paper 100; paper with arch \"mlp\" 60\n" in cell
    assert "\nbatch_size = 128  # examples per SGD step\n" in cell  # no profile changes it
    assert "\nwidths = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  #" in cell
    assert studies.parameters_cell(studies.SummaryStudy) == 'profile = "quick"  # smoke, quick or paper'


def test_a_value_left_as_written_takes_the_profiles_and_a_given_one_is_the_readers():
    """The cell writes the quick values: a value still at it takes the profile's; one changed in the cell, or given
    with -p (papermill's injected cell, in IPython's input history), is the reader's, even at the quick value."""
    cls = studies.WidthStudy
    cell = book.notebook_parameters(ROOT / "notebooks" / "width_accuracy.py")
    assert studies.given_parameters(cls, {**cell, "profile": "paper"}) == {}
    assert studies.resolve(cls, "paper").epochs == 100
    edited = {**cell, "profile": "paper", "lr": 0.1, "widths": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]}
    assert studies.given_parameters(cls, edited) == {"lr": 0.1}  # a list equal to the quick tuple is left as written
    injected = '# Parameters\nprofile = "paper"\nepochs = 60\n'
    namespace = {**cell, "profile": "paper", "In": ["", "profile = 'quick'", injected, "open_page(...)"]}
    given = studies.given_parameters(cls, namespace)
    assert given == {"epochs": 60}
    assert studies.resolve(cls, "paper", **given).epochs == 60 and studies.resolve(cls, "paper").epochs == 100
    assert studies.given_parameters(cls, {**cell, "epochs": True}) == {"epochs": True}  # True is not 1: checked later


def test_none_is_a_value_of_its_own_where_a_field_may_be_none():
    """regimes = None in the cell (or -p regimes null) drops the mechanism study's length arm, as its comment says;
    None for a field that cannot be None keeps the profile's value."""
    given = studies.given_parameters(studies.MechanismStudy, {"profile": "quick", "regimes": None, "epochs": None})
    study = studies.resolve(studies.MechanismStudy, "quick", **given)
    assert study.regimes is None and study.epochs == 60
    assert study.run_count() < studies.resolve(studies.MechanismStudy, "quick").run_count()
    assert studies.sources(studies.MechanismStudy, "quick", given)["regimes"] == "-p"


@pytest.mark.integration
def test_papermill_parameters_are_given_even_at_their_quick_value(tmp_path):
    """Executed by papermill, a page reads the names its injected cell assigns as given: ``-p epochs 60`` with the
    paper profile runs 60 epochs, not the paper's 100."""
    import jupytext
    import nbformat
    import papermill

    source = ('# %% tags=["parameters"]\n' + studies.parameters_cell(studies.WidthStudy) + "\n\n# %%\n"
              "from lmcbook import studies\n"
              "given = studies.given_parameters(studies.WidthStudy, globals())\n"
              "print(sorted(given.items()), studies.resolve(studies.WidthStudy, profile, **given).epochs)\n")
    src = tmp_path / "given.ipynb"
    jupytext.write(jupytext.reads(source, fmt="py:percent"), str(src))
    papermill.execute_notebook(str(src), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False,
                               parameters={"profile": "paper", "epochs": 60, "lr": 0.05}, language="python")
    out = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4).cells[-1].outputs[0]["text"]
    assert out.strip() == "[('epochs', 60), ('lr', 0.05)] 60"


def test_a_parameter_given_to_every_notebook_reaches_only_those_whose_study_has_it():
    own = book.plan(None, "paper", {"data_root": "~/data", "arch": "resnet20", "dataset": "cifar100"},
                    ROOT / "notebooks")
    assert list(own) == all_notebooks()
    assert own["width_accuracy"] == {"data_root": "~/data", "arch": "resnet20", "dataset": "cifar100"}
    assert own["theory_lewc"] == {} and own["overview"] == {}
    assert "arch" not in own["lewc_depth"] and own["lewc_depth"]["data_root"] == "~/data"  # the depth sweep is MLPs
    with pytest.raises(SpecError) as err:
        book.plan(["theory_lewc", "width_accuracy"], "quick", {"colour": 1, "widths": [1.0]}, ROOT / "notebooks")
    msg = str(err.value)
    assert "['colour']" in msg and "theory_lewc: lams, depth, hidden" in msg and "width_accuracy" in msg


# -- download and data_root reach the loader --------------------------------------------------------------------
class FakeMNIST:
    """Stands in for torchvision.datasets.MNIST: records each call's ``download`` and, asked to download, writes a
    small fake set into ``root/MNIST/raw`` (whose checksums the fixture makes the ones checked)."""

    calls: list[tuple[str, bool, bool]] = []

    def __init__(self, root: str, train: bool, download: bool) -> None:
        FakeMNIST.calls.append((root, train, download))
        if download and not (Path(root) / "MNIST" / "raw").exists():
            write_idx(Path(root), "MNIST/raw", n_train=400, n_test=100)


@pytest.fixture
def fake_mnist(monkeypatch, tmp_path):
    import torchvision.datasets

    FakeMNIST.calls = []
    monkeypatch.setattr(torchvision.datasets, "MNIST", FakeMNIST)
    monkeypatch.setattr(data, "_CACHE", {})
    write_idx(tmp_path / "checksums", "", n_train=400, n_test=100, monkeypatch=monkeypatch)
    return str(tmp_path / "mnist-root")


ROUTE = {"dataset": "mnist", "download": True, "widths": [0.25], "seeds": 1, "epochs": 1}


def _asked(root: str) -> set[tuple[str, bool]]:
    return {(r, d) for r, _, d in FakeMNIST.calls}


def test_download_reaches_the_loader_through_the_python_api(fake_mnist, tmp_path):
    study = studies.study("width", "smoke", data_root=fake_mnist, **ROUTE)
    spec = study.specs()[0]
    assert spec.data.download and spec.data.root == fake_mnist
    assert spec.id == studies.study("width", "smoke", data_root="elsewhere", **{**ROUTE, "download": False}
                                  ).specs()[0].id  # where the data come from is provenance, not the run's id
    RunStore(tmp_path / "s").get_or_train(spec, device="cpu")
    assert _asked(fake_mnist) == {(fake_mnist, True)}


def test_download_reaches_the_loader_through_execute(fake_mnist):
    """`lmcbook execute` hands each notebook its study's parameters; the notebook loads through the study."""
    own = book.plan(["width_accuracy"], "smoke", {"data_root": fake_mnist, **ROUTE}, ROOT / "notebooks")
    study = studies.part_of("width_accuracy").resolve("smoke", own["width_accuracy"])
    store.study_data(study)
    assert _asked(fake_mnist) == {(fake_mnist, True)}


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_download_reaches_the_loader_through_train_and_sweep(command, fake_mnist, tmp_path):
    argv = [command, "--profile", "smoke", "--part", "width", "--store", str(tmp_path / "s"),
            "-p", "data_root", fake_mnist] + [a for k, v in ROUTE.items() for a in ("-p", k, str(v).lower())]
    assert main(argv) == 0
    assert _asked(fake_mnist) == {(fake_mnist, True)}


# -- the README's commands ---------------------------------------------------------------------------------------
def readme_commands(text: str) -> list[str]:
    """Return every `lmcbook` command line of a Markdown text: in code blocks, and in inline code that is a whole
    command (not one with an ellipsis or an optional [--flag])."""
    found = []
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S):
        found += [ln for ln in block.splitlines() if re.match(r"\s*(\.venv/bin/)?lmcbook ", ln)]
    found += [c for c in re.findall(r"`((?:\.venv/bin/)?lmcbook [^`]+)`", text) if "…" not in c and "[--" not in c]
    return [re.sub(r"^\s*(\.venv/bin/)?lmcbook ", "", c.split(" # ")[0]).strip() for c in found]


def test_the_readme_has_the_commands_this_test_checks():
    cmds = readme_commands((ROOT / "README.md").read_text())
    assert len(cmds) >= 15
    assert any(c.startswith("execute --profile paper -p data_root") for c in cmds)
    assert any(c.startswith("sweep ") for c in cmds) and any(c.startswith("store ") for c in cmds)


@pytest.mark.parametrize("command", readme_commands((ROOT / "README.md").read_text()))
def test_every_readme_command_passes_the_parameter_check(command, monkeypatch):
    monkeypatch.chdir(ROOT)
    check(shlex.split(command))


@pytest.mark.parametrize("doc", ["README.md", "book/building.md"])
def test_the_profile_tables_are_generated_from_the_studies(doc):
    from lmcbook.studies import profile_table

    text = (ROOT / doc).read_text()
    found = re.search(r"<!-- profile-table:[^>]*-->\n(.*?)\n<!-- /profile-table -->", text, flags=re.S)
    assert found, f"{doc} has no generated profile table"
    assert found.group(1) == profile_table(), f"{doc}'s profile table is stale: paste profile_table() there"


def test_the_paper_mlp_recipe_is_the_cited_one():
    """The paper profile's MLP recipe holds the values the width paper states (Table 1's MLP on MNIST up to 16×,
    weight decay 3e-3, 1e-4 in its ablation) and says of every other field that it is the book's own choice."""
    from lmcbook.claims.thresholds import PAPER_TABLE1_MLP
    from lmcbook.studies import PAPER_MLP_RECIPE

    cited = {name for name, (_, source) in PAPER_MLP_RECIPE.items() if source.startswith("the paper:")}
    assert cited == {"dataset", "widths", "weight_decay"}
    assert all(source.startswith(("the paper:", "the book's:")) for _, source in PAPER_MLP_RECIPE.values())
    assert PAPER_MLP_RECIPE["dataset"][0] == "mnist" and PAPER_MLP_RECIPE["weight_decay"][0] == 3e-3
    assert max(PAPER_MLP_RECIPE["widths"][0]) == PAPER_TABLE1_MLP["width"] == 16
    width = studies.study("width", "paper", arch="mlp")
    for name, (value, _) in PAPER_MLP_RECIPE.items():
        assert getattr(width, name) == value, name
    assert studies.study("controls", "paper", arch="mlp").weak_weight_decay == 1e-4
    mech = studies.study("mechanism", "paper", arch="mlp")  # it sweeps weight decay, from the weak to the strong value
    assert mech.dataset == "mnist" and {1e-4, 3e-3} <= set(mech.weight_decays)
    assert PAPER_TABLE1_MLP == {"width": 16.0, "acc_barrier": 0.00519, "loss_barrier": 0.013,
                                "wm_acc_barrier": -0.00027, "wm_loss_barrier": -0.003}
