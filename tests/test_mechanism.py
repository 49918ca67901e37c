"""The mechanism study: the initial-weight factor, the 8k/2k MNIST stand-in, the study's cells, its frames, and
the committed reference runs."""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from lmcbook import claims, data, experiments, reference, schema
from lmcbook import store as run_store
from lmcbook.claims.verdicts import INCONCLUSIVE, NA
from lmcbook.models import build
from lmcbook.specs import CODE_VERSION, DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec
from lmcbook.store import RunStore
from lmcbook.studies import MechanismStudy, resolve
from lmcbook.studies import study as part_study
from lmcbook.train import init_model


# -- the initial-weight factor -----------------------------------------------------------
def test_init_scale_multiplies_the_initial_weights_of_every_layer(digits):
    base = RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.5, 64, 4), TrainSpec(seed=3))
    small = RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.5, 64, 4, init_scale=0.25), TrainSpec(seed=3))
    a, b = init_model(base, digits), init_model(small, digits)
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(q, p * 0.25), name
    torch.manual_seed(0)
    ref = build(ModelSpec("mlp", 0.5, 64, 3, norm="layer", bias=True), (64,), 10)
    torch.manual_seed(0)
    biased = build(ModelSpec("mlp", 0.5, 64, 3, norm="layer", bias=True, init_scale=2.0), (64,), 10)
    assert torch.equal(biased.layers[0].bias, 2 * ref.layers[0].bias)  # biases scale too
    assert torch.equal(biased.norms[0].weight, ref.norms[0].weight)  # LayerNorm keeps its own


def test_the_default_init_scale_changes_no_run_id():
    spec = RunSpec(DataSpec("digits"), ModelSpec("mlp", 16.0, 64, 4), TrainSpec(seed=1))
    # this id was computed by the code before init_scale existed (CODE_VERSION 3)
    assert spec.id == "182768027fa5916db6d8beb8ea1420354c42cda9d3a725e37c13b9b2470f0d97"
    assert "init_scale" not in spec.hashed_dict()["model"]
    small = RunSpec(DataSpec("digits"), ModelSpec("mlp", 16.0, 64, 4, init_scale=0.25), TrainSpec(seed=1))
    assert small.id != spec.id and small.hashed_dict()["model"]["init_scale"] == 0.25
    assert RunSpec.from_dict(small.to_dict()) == small
    with pytest.raises(SpecError, match="init_scale=0.0 .*> 0"):
        ModelSpec(init_scale=0.0)


# -- the 8k/2k MNIST stand-in ------------------------------------------------------------
def _write_test_split(folder, n=10_000, gz=False):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    for name, payload in (("t10k-images-idx3-ubyte", struct.pack(">IIII", 0x803, n, 28, 28) + imgs.tobytes()),
                          ("t10k-labels-idx1-ubyte", struct.pack(">II", 0x801, n) + labels.tobytes())):
        if gz:
            with gzip.open(folder / f"{name}.gz", "wb") as f:
                f.write(payload)
        else:
            (folder / name).write_bytes(payload)
    return imgs, labels


@pytest.mark.parametrize("gz, sub", [(True, ""), (False, "MNIST/raw")])
def test_standin_is_the_official_test_split_cut_8000_to_2000(tmp_path, gz, sub):
    imgs, labels = _write_test_split(tmp_path / sub if sub else tmp_path, gz=gz)
    ds = data.load("mnist_standin", tmp_path, device="cpu")
    assert ds.sizes() == {"train": 7200, "cal": 800, "test": 2000}
    assert ds.input_shape == (1, 28, 28)
    assert ds.y_test.tolist() == labels[8000:].tolist()  # the last 2,000 images test
    # the normalisation is the training split's: undo it and the test images are the raw last 2,000
    train_raw = imgs[:8000][data.split_indices(8000, n_cal=800)[0]].astype(np.float32) / 255
    mean, std = train_raw.mean(), train_raw.std() + 1e-6
    back = (ds.x_test[:, 0].numpy() * std + mean) * 255
    assert np.allclose(back, imgs[8000:], atol=1e-2)
    assert "8k/2k MNIST stand-in" in data.DATASET_LABELS["mnist_standin"]


def test_standin_refuses_what_is_not_the_test_split(tmp_path):
    with pytest.raises(data.DataError, match="needs data_root"):
        data.load("mnist_standin", None, device="cpu")
    with pytest.raises(data.DataError, match="lacks t10k-images-idx3-ubyte"):
        data.load("mnist_standin", tmp_path / "empty", device="cpu")
    _write_test_split(tmp_path / "small", n=30)
    with pytest.raises(data.DataError, match="10,000 images"):
        data.load("mnist_standin", tmp_path / "small", device="cpu")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03" + struct.pack(">III", 5, 28, 28))
    (tmp_path / "bad" / "t10k-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, 5) + bytes(5))
    with pytest.raises(data.DataError, match="truncated"):
        data.load("mnist_standin", tmp_path / "bad", device="cpu")


# -- the study -----------------------------------------------------------------------------
def test_quick_study_cells_arms_and_decisive_pairs():
    st = part_study("mechanism", "quick")
    cells = {(c.epochs, c.weight_decay, c.init_scale): c for c in st.cells()}
    assert set(cells) == {(60, 1e-4, 0.25), (60, 1e-4, 1.0), (60, 3e-3, 1.0), (60, 1e-2, 1.0), (60, 3e-2, 1.0),
                          (200, 1e-4, 1.0), (200, 3e-3, 1.0), (600, 1e-4, 1.0), (600, 3e-3, 1.0)}
    assert st.widths == (0.25, 0.5, 1.0, 4.0, 16.0)
    # the wide decays reach 1024 units; 1e-2 and the length arm stop at long_max_width (the budget's cut)
    for key in ((60, 1e-4, 1.0), (60, 3e-3, 1.0), (60, 3e-2, 1.0), (60, 1e-4, 0.25)):
        assert cells[key].widths == st.widths
    assert max(cells[60, 1e-2, 1.0].widths) == max(cells[600, 3e-3, 1.0].widths) == 1.0
    assert st.cut_widths() == (4.0, 16.0)
    assert st.equal_d_couples() == [((200, 3e-3), (60, 1e-2)), ((600, 3e-3), (60, 3e-2))]
    # 5 pairs where a verdict is read, 2 elsewhere
    assert cells[60, 3e-2, 1.0].pairs_at(16.0) == cells[60, 3e-2, 1.0].pairs_at(4.0) == 5  # M1-M3, M5
    assert cells[60, 1e-4, 0.25].pairs_at(16.0) == cells[60, 1e-4, 1.0].pairs_at(16.0) == 5  # M4, M5
    assert cells[600, 3e-3, 1.0].pairs_at(1.0) == cells[60, 1e-2, 1.0].pairs_at(1.0) == 5  # M6
    assert cells[60, 3e-2, 1.0].pairs_at(1.0) == cells[200, 3e-3, 1.0].pairs_at(1.0) == 5
    # the width pages' own cell and their weak twin's: the width rows' deciding widths on these widths
    assert [cells[60, 3e-3, 1.0].pairs_at(w) for w in st.widths] == [5, 2, 2, 5, 5]
    # ... and at 1e-4, the smallest-D cell, also the width every length shares (R1, R2 compare it)
    assert [cells[60, 1e-4, 1.0].pairs_at(w) for w in st.widths] == [5, 2, 5, 5, 5]
    # the long rows' cells: the two widest widths of the longest length, at both weight decays
    assert all(cells[600, wd, 1.0].pairs_at(w) == 5 for wd in (1e-4, 3e-3) for w in (0.5, 1.0))
    assert cells[600, 1e-4, 1.0].pairs_at(0.25) == 2
    assert cells[200, 1e-4, 1.0].pairs_at(0.5) == 2
    # the width and weak-weight-decay pages' runs are the same runs here: the store trains them once
    ids = {s.id for s in st.specs()}
    width = part_study("controls", "quick", widths=list(st.widths))
    assert {s.id for s in width.specs()} <= ids  # the strong and the weak sweep at the widths they share
    assert len(ids) == len(st.specs())  # no run listed twice


@pytest.mark.parametrize("overrides, match", [
    ({"weight_decay": 0.1}, r"weight_decay=0.1 is not allowed: MechanismStudy has no weight_decay \(it "
                            "sweeps weight_decays"),
    ({"init_scale": 0.5}, "it sweeps init_scales"),
    ({"weight_decays": [3e-3]}, "at least two different weight decays"),
    ({"init_scales": [0.0]}, "init_scales=.*numbers > 0"),
    ({"regimes": [60, 2.5]}, "regimes="),
    ({"long_max_width": 0.1}, "long_max_width"),
    ({"regime_weight_decays": [-1.0]}, "regime_weight_decays"),
    ({"wide_decays": [1e-4, 1e-2]}, "wide_decays=.*including the weakest and the strongest"),
    ({"wide_decays": [1e-4, 5e-3, 3e-2]}, "wide_decays="),
])
def test_bad_mechanism_parameters_name_themselves(overrides, match):
    with pytest.raises(SpecError, match=match):
        resolve(MechanismStudy, "quick", **overrides)


def test_a_study_without_length_or_small_init_arm_has_no_couples():
    st = part_study("mechanism", "quick", widths=[0.25, 1], weight_decays=[1e-4, 3e-2], wide_decays=[1e-4, 3e-2],
                    regimes=[60], regime_weight_decays=[1e-4], init_scales=[1])
    assert [(c.epochs, c.weight_decay, c.init_scale) for c in st.cells()] == [(60, 1e-4, 1.0), (60, 3e-2, 1.0)]
    assert st.equal_d_couples() == [] and st.cut_widths() == ()


@pytest.mark.integration
def test_mechanism_frames_measure_every_cell_once(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    st = part_study("mechanism", "smoke", widths=[0.25], epochs=2, regimes=[2, 4], weight_decays=[3e-3, 6e-3],
                    regime_weight_decays=[3e-3], decisive_seeds=2)
    frames = experiments.mechanism_frames(st, store)
    summary = frames["summary"]
    assert set(summary["method"]) == {"none", "weight_matching"}
    assert set(frames["lewc"]["method"]) == {"trained", "untrained", "weight_matched"}
    small = frames["lewc"][frames["lewc"]["init_scale"] < 1]
    assert "untrained" not in set(small["method"])  # no baseline is read for the small initialisation
    assert set(zip(summary["epochs"], summary["weight_decay"], summary["init_scale"])) == {
        (2, 3e-3, 1.0), (2, 6e-3, 1.0), (4, 3e-3, 1.0), (2, 3e-3, 0.25)}
    # weight matching a pair of one seed each never lowers the merge below what plain averaging found by much,
    # and both summaries read the same endpoints
    s = summary.set_index(["epochs", "weight_decay", "init_scale", "pair", "method"])
    assert np.allclose(s.xs("none", level="method")["acc_a"], s.xs("weight_matching", level="method")["acc_a"])
    long = experiments.mechanism_long(frames)
    schema.validate_results(long, "mechanism")
    assert set(long["dataset"]) == {"digits"}
    rows = claims.page_claims("mechanism", long)
    assert {r.id for r in rows} >= {"M1", "M2", "M3", "M4", "M5", "M6", "R1", "R2"}
    assert all(r.state == INCONCLUSIVE or r.state == NA for r in rows if r.id.startswith("M"))
    n = sum(e["event"] == "trained" for e in store.events())
    for module in (experiments, run_store):  # where the matched and the plain summaries are computed
        monkeypatch.setattr(module, "pair_summary", lambda *a, **k: pytest.fail("a cached summary recomputed"))
    again = experiments.mechanism_frames(st, store)
    assert sum(e["event"] == "trained" for e in store.events()) == n
    assert again["summary"].equals(summary)


# -- the committed reference runs --------------------------------------------------------
@pytest.mark.parametrize("name", sorted(reference.REFERENCES))
def test_committed_references_are_what_execute_wrote_and_follow_the_schema(name):
    committed = reference.csv_path(name).exists()
    assert committed != bool(reference.get(name).pending), (
        f"reference {name!r}: committed={committed}, but its pending note is {reference.get(name).pending!r}")
    if not committed:  # declared, not made yet: the README says so, and the pages show the others
        assert f"`{name}`" in (Path(__file__).resolve().parents[1] / "README.md").read_text()
        return
    frame, prov = reference.load(name)  # raises unless the CSV's SHA-256 is the one its provenance records
    schema.validate_results(frame, reference.get(name).notebook)
    for key in ("command", "execute_command", "data", "code_version", "git_commit", "machine", "date"):
        assert prov.get(key), key
    assert prov["command"].startswith(f"lmcbook reference {name}")
    # current, or else the page says it is stale
    assert prov["code_version"] == CODE_VERSION or "stale" in reference.stale_note(prov)
    if "dataset" in frame and "mnist_standin" in set(frame["dataset"]):
        assert "8k/2k MNIST stand-in" in prov["data"]["description"]


def test_a_changed_reference_csv_is_refused_and_a_stale_one_says_so(tmp_path):
    name = "mechanism-mnist-standin"
    path = reference.csv_path(name, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("notebook,metric,value,pair\nmechanism,acc_merged,0.5,0\n")
    prov = {"csv_sha256": "0" * 64, "code_version": CODE_VERSION - 1, "command": f"lmcbook reference {name}"}
    reference.provenance_path(name, tmp_path).write_text(json.dumps(prov))
    with pytest.raises(ValueError, match="changed after"):
        reference.load(name, tmp_path)
    assert "stale" in reference.stale_note(prov) and f"lmcbook reference {name}" in reference.stale_note(prov)
    assert reference.stale_note({**prov, "code_version": CODE_VERSION}) is None
    with pytest.raises(SpecError, match="reference='nope'"):
        reference.get("nope")
    with pytest.raises(SpecError, match="--data-root"):
        reference.params_for("mechanism-mnist-standin", None)


def _absolute_paths(obj) -> list[str]:
    """Return every string of a JSON value that holds an absolute path (a word starting with / or ~/)."""
    import re

    if isinstance(obj, dict):
        return [p for v in obj.values() for p in _absolute_paths(v)]
    if isinstance(obj, list):
        return [p for v in obj for p in _absolute_paths(v)]
    return [obj] if isinstance(obj, str) and re.search(r"(^|[\s='\"])(/|~/)[\w.]", obj) else []


def test_no_committed_provenance_names_an_absolute_path():
    root = Path(__file__).resolve().parents[1] / "results"
    provenances = sorted(root.glob("*/provenance.json"))
    assert provenances
    for path in provenances:
        assert not _absolute_paths(json.loads(path.read_text())), path
    assert _absolute_paths({"a": ["lmcbook x --data-root /work/data"]}) and not _absolute_paths({"a": "8k/2k, η/B"})


def test_reference_provenance_names_its_data_relative_to_the_repository(tmp_path, monkeypatch):
    name = "mechanism-mnist-standin"
    data_dir = tmp_path / "mnist"
    data_dir.mkdir()
    (data_dir / "t10k-images-idx3-ubyte.gz").write_bytes(b"images")
    written = tmp_path / "written.csv"
    written.write_text("notebook,metric,value,pair\nmechanism,acc_merged,0.5,0\n")
    params = reference.params_for(name, str(data_dir))
    csv = reference.record(name, written, params, 1.0, 0.5, str(data_dir), tmp_path / "results")
    prov = json.loads(reference.provenance_path(name, tmp_path / "results").read_text())
    rel = reference.repo_relative(data_dir)
    assert not Path(rel).is_absolute() and (Path(reference.PACKAGE_DIR.parent) / rel).resolve() == data_dir.resolve()
    assert prov["data"]["data_root"] == prov["params"]["data_root"] == rel
    assert prov["command"].endswith(f"--data-root {rel}") and f"-p data_root {rel}" in prov["execute_command"]
    assert not _absolute_paths(prov) and prov["data"]["files_sha256"] == {
        "t10k-images-idx3-ubyte.gz": hashlib.sha256(b"images").hexdigest()}
    assert prov["csv_sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest()
    # an older provenance with an absolute path is rewritten, its CSV and every SHA-256 kept
    old = reference._data_root_text(prov, str(data_dir))
    assert _absolute_paths(old)
    reference.provenance_path(name, tmp_path / "results").write_text(json.dumps(old))
    reference.relativize_provenance(name, tmp_path / "results")
    fixed = json.loads(reference.provenance_path(name, tmp_path / "results").read_text())
    assert fixed == prov and reference.load(name, tmp_path / "results")[1] == prov


@pytest.mark.integration
def test_prefetched_matchings_are_what_matched_permutation_computes(tmp_path, digits):
    from lmcbook.merge import weight_matching

    store = RunStore(tmp_path / "runs")
    specs = [RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.5, 64, 4), TrainSpec(epochs=2, seed=s)) for s in range(4)]
    runs = store.get_or_train_many(specs, data=digits)
    pairs = [(runs[0], runs[1]), (runs[2], runs[3])]
    assert experiments.prefetch_matchings(pairs, store, iterations=50, workers=2) == 2
    assert experiments.prefetch_matchings(pairs, store, iterations=50, workers=2) == 0  # all cached now
    for ra, rb in pairs:
        perms, info = experiments.matched_permutation(ra, rb, store, 50)
        direct = weight_matching(ra.model, rb.model, max_iter=50)
        assert all(torch.equal(perms[p], direct.perms[p]) for p in direct.perms)
        assert info["match_iterations"] == direct.iterations


def test_a_page_lists_its_committed_and_pending_references(tmp_path, monkeypatch):
    planned = reference.Reference("noise-scale-planned", "noise_scale", "quick", {}, "MNIST-1D",
                                  pending="not made yet: it needs a GPU")  # listed after those pending today
    monkeypatch.setitem(reference.REFERENCES, planned.name, planned)
    declared = [r for r in reference.REFERENCES.values() if r.notebook == "noise_scale"]
    text = reference.listing("noise_scale")
    for r in declared:
        committed = reference.csv_path(r.name).exists()
        assert (f"`{r.name}`" in text.split("Declared but not made yet")[0]) == committed, r.name
        if r.pending:
            assert r.pending.removeprefix("not made yet: ") in text
    assert "`noise-scale-planned` (it needs a GPU)." in text.split("Declared but not made yet: ")[1]
    assert reference.listing("noise_scale", tmp_path).startswith("Committed: none.")  # an empty results root
    assert reference.listing("theory_lewc") == "No reference run of this page is declared."


def _precision_frame(shift=0.0, pairs=5, units=1024, seed=0):
    """A synthetic mechanism CSV of one cell: plain and matched merges per pair, training accuracy per seed."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    base = {"notebook": "mechanism", "width": units / 64, "hidden_units": units, "depth": 4, "weight_decay": 0.03,
            "epochs": 60, "init_scale": 1.0, "dataset": "mnist_standin"}
    rows = []
    for p in range(pairs):
        for metric, method, v in (("acc_merged", "none", 0.85 + 0.02 * p), ("acc_merged", "weight_matching", 0.95),
                                  ("acc_ensemble", "none", 0.951 + 0.001 * p)):
            rows.append({**base, "metric": metric, "method": method, "pair": p,
                         "value": v + (shift if metric == "acc_merged" and method == "none" else 0.0)
                         + rng.normal(0, 1e-3)})
        for s in (2 * p, 2 * p + 1):
            rows.append({**base, "metric": "train_acc", "seed": s, "value": 0.97 + rng.normal(0, 1e-3)})
    return pd.DataFrame(rows)


def test_the_precision_check_is_an_equivalence_test_on_paired_differences_and_can_fail():
    """bf16 within noise of fp32 reads 'agree'; every pair's plain merge 4 points lower reads 'differ' (the two
    intervals over pairs would still overlap); a noisy difference reads 'undecided'; a length no fp32 run shares is
    named unchecked; a bf16 reference with no fp32 twin of its data set, or too few shared pairs, is 'unchecked';
    all-fp32 pages need no check."""
    import pandas as pd

    from lmcbook import reference

    fp32, near, shifted = _precision_frame(), _precision_frame(seed=1), _precision_frame(-0.04, seed=1)
    prov32, prov16 = {"params": {}}, {"params": {"precision": "bf16"}}
    cell = {"epochs": 60, "weight_decay": 0.03, "init_scale": 1.0, "hidden_units": 1024}
    assert reference.precision_cells(fp32, near) == [cell]
    ok = reference.precision_check({"a": (fp32, prov32), "b": (near, prov16)})
    assert "`b` trains every run in bfloat16" in ok and "the two precisions agree" in ok and "**differ**" not in ok
    table = reference.precision_table(fp32, near, cell)
    assert set(table["precisions"]) == {"agree"} and len(table) == 4  # the quantities this frame carries
    moved = reference.precision_table(fp32, shifted, cell)
    assert moved.loc["plain merge's test accuracy (%)", "precisions"] == "**differ**"
    assert set(moved["precisions"].drop("plain merge's test accuracy (%)")) == {"agree"}
    assert "plain merge's test accuracy (%) differ beyond the margin" in reference.precision_check(
        {"a": (fp32, prov32), "b": (shifted, prov16)})
    noisy = near.copy()
    noisy.loc[noisy["metric"] == "acc_merged", "value"] += np.random.default_rng(3).normal(0, 0.03, 10)
    assert "undecided" in reference.precision_check({"a": (fp32, prov32), "b": (noisy, prov16)})
    long = pd.concat([near, _precision_frame(seed=2).assign(epochs=600)])
    text = reference.precision_check({"a": (fp32, prov32), "b": (long, prov16)})
    assert "the two precisions agree" in text and "\n\nNo cell of 600 epochs is checked" in text
    assert ("1 of 2 are unchecked: 600 epochs, weight decay 0.03, 1024 hidden units: **the rows that read any of "
            "them rest on bf16 alone**") in text
    assert all(not line.startswith("|") or line.endswith("|") for line in text.splitlines())  # the table ends clean
    narrow = {"a": (pd.concat([fp32, _precision_frame(units=16, pairs=2)]), prov32),  # shared with 2 pairs only
              "b": (pd.concat([near, _precision_frame(0.05, units=16, pairs=2, seed=1)]), prov16)}
    said = reference.precision_check(narrow)
    assert "On the 1 cell it shares with `a` with fewer than 5 pairs (too few to test)" in said
    assert "by length and width: 60 epochs, 16 units +5.0." in said and "the two precisions agree" in said
    assert "fewer than" not in ok  # no such cell there
    digits = near.assign(dataset="digits")
    assert "unchecked" in reference.precision_check({"a": (fp32, prov32), "b": (digits, prov16)})
    few = _precision_frame(pairs=2, seed=1)
    assert reference.precision_cells(fp32, few) == []
    assert "unchecked" in reference.precision_check({"a": (fp32, prov32), "b": (few, prov16)})
    assert "no precision check is needed" in reference.precision_check({"a": (fp32, prov32)})


def test_the_claims_page_says_what_each_mechanism_reference_trains_from_its_csv():
    import pandas as pd

    from lmcbook import reference

    frame = pd.concat([_precision_frame(), _precision_frame(units=16).assign(epochs=600)])
    said = reference.reference_settings({"a": (frame, {"params": {"precision": "bf16"}}),
                                    "b": (frame.assign(dataset="digits"), {"params": {}})})
    assert said == ("`a` (8k/2k MNIST stand-in, 60 epochs up to 1024 hidden units, 600 epochs up to 16 hidden units, "
                    "in bf16); `b` (digits, 60 epochs up to 1024 hidden units, 600 epochs up to 16 hidden units)")
    assert reference.reference_settings({}) == "none"
