import re
import subprocess
import sys

import pytest

from lmcbook.specs import CODE_VERSION, DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec, check_lams


def test_hash_is_stable_across_processes():
    spec = RunSpec(model=ModelSpec(width=2), train=TrainSpec(seed=3, lr=0.1))
    code = ("from lmcbook.specs import *; "
            "print(RunSpec(model=ModelSpec(width=2.0), train=TrainSpec(seed=3, lr=0.1)).id)")
    for hashseed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": hashseed, "PATH": ""})
        assert out.stdout.strip() == spec.id
    assert re.fullmatch(r"[0-9a-f]{64}", spec.id)  # a SHA-256 in lowercase hex: the store's entry name
    assert spec.id != RunSpec(model=ModelSpec(width=2.0), train=TrainSpec(seed=4, lr=0.1)).id


def test_hash_changes_with_code_version_and_content():
    spec = RunSpec()
    assert spec.run_id(CODE_VERSION) == spec.id
    assert spec.run_id(CODE_VERSION + 1) != spec.id
    assert spec.with_train(seed=1).id != spec.id
    assert RunSpec(model=ModelSpec(width=2)).id != spec.id


def test_provenance_is_not_hashed_and_numbers_are_normalised():
    assert RunSpec(DataSpec(root="/a")).id == RunSpec(DataSpec(root="/b")).id
    assert RunSpec(model=ModelSpec(width=1)).id == RunSpec(model=ModelSpec(width=1.0)).id
    assert RunSpec(train=TrainSpec(data_seed=None, seed=4)).id == RunSpec(train=TrainSpec(data_seed=4, seed=4)).id


def test_roundtrip_through_dict():
    parent = RunSpec(train=TrainSpec(stop_step=10, seed=1))
    child = RunSpec(parent.data, parent.model, TrainSpec(seed=1, data_seed=7), parent=parent, spawn_step=10)
    for spec in (RunSpec(model=ModelSpec("vgg11", 0.5, depth=None, norm="batch")), child):
        again = RunSpec.from_dict(spec.to_dict())
        assert again == spec and again.id == spec.id


@pytest.mark.parametrize("make, names", [
    (lambda: ModelSpec(arch="transformer"), ["arch", "'mlp'", "'vgg11'", "'resnet20'"]),
    (lambda: ModelSpec(norm="group"), ["norm", "'none'", "'batch'", "'layer'"]),
    (lambda: DataSpec(name="imagenet"), ["dataset", "'digits'", "'cifar10'"]),
    (lambda: ModelSpec(width=0), ["width", "> 0"]),
    (lambda: ModelSpec(width=-1.0), ["width", "> 0"]),
    (lambda: ModelSpec(width=0.001), ["width", "0 channels", ">="]),
    (lambda: ModelSpec(depth=0), ["depth", ">= 1"]),
    (lambda: ModelSpec(arch="vgg11", depth=4), ["depth", "None"]),
    (lambda: TrainSpec(lr=0), ["lr", "> 0"]),
    (lambda: TrainSpec(momentum=1.0), ["momentum", "[0, 1)"]),
    (lambda: TrainSpec(weight_decay=-1e-4), ["weight_decay", ">= 0"]),
    (lambda: TrainSpec(epochs=0), ["epochs", "[1, 100000]"]),
    (lambda: TrainSpec(batch_size=0), ["batch_size", ">= 1"]),
    (lambda: TrainSpec(lr=float("nan")), ["lr"]),
    (lambda: TrainSpec(epochs=2.5), ["epochs", "integer"]),
    (lambda: check_lams([0.5, 1.5]), ["lams", "[0, 1]"]),
    (lambda: check_lams(-0.1), ["lams", "[0, 1]"]),
    (lambda: RunSpec(parent=RunSpec(), spawn_step=None), ["parent", "spawn_step"]),
])
def test_bad_values_raise_naming_parameter_and_allowed(make, names):
    with pytest.raises(SpecError) as err:
        make()
    for name in names:
        assert name in str(err.value)


def test_from_dict_rejects_unknown_keys():
    d = RunSpec().to_dict()
    d["model"]["activation"] = "gelu"
    with pytest.raises(SpecError, match="activation"):
        RunSpec.from_dict(d)


def test_channels_round_base_width_times_multiplier():
    assert ModelSpec(width=0.25).channels == 16
    assert ModelSpec(width=16).channels == 1024
    assert ModelSpec("resnet20", 0.5, depth=None).channels == 8


def test_lr_floor_keeps_every_existing_run_id():
    """Ids computed before TrainSpec.lr_floor existed (commit 7fd6a79): the default floor is left out of the hash."""
    from lmcbook import studies

    assert RunSpec().id == "6a14211c4d1c6f5423a8130b4af9ba20c1d59b8019d01827eea74e013a41d54c"
    study = studies.resolve(studies.NoiseStudy, "quick", lr_floor=0.0)  # the first protocol's schedule
    child, _ = study.children(study.grid_cells()[0], 0)
    assert child.id == "02b9f7b779f7911cf6b13cc52ebbb57a9fc24de66c58140013d6421e1e7afaa8"
    assert "lr_floor" not in RunSpec().hashed_dict()["train"]
    floored = RunSpec(train=TrainSpec(lr_floor=0.1))
    assert floored.id != RunSpec().id and floored.hashed_dict()["train"]["lr_floor"] == 0.1


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan"), "0.1"])
def test_lr_floor_is_a_fraction(bad):
    with pytest.raises(SpecError, match="lr_floor"):
        TrainSpec(lr_floor=bad)


def test_lr_floor_needs_a_linear_decay():
    with pytest.raises(SpecError, match=r"lr_floor=0.1 .*schedule='constant'"):
        TrainSpec(schedule="constant", lr_floor=0.1)


def test_precision_keeps_every_existing_run_id_and_names_bf16_runs_apart():
    """fp32 (the default) is left out of the hash, so every run made before the field keeps its id; bf16 is a run
    of its own."""
    assert "precision" not in RunSpec().hashed_dict()["train"]
    assert RunSpec(train=TrainSpec(precision="fp32")).id == RunSpec().id
    bf16 = RunSpec(train=TrainSpec(precision="bf16"))
    assert bf16.id != RunSpec().id and bf16.hashed_dict()["train"]["precision"] == "bf16"
    assert RunSpec.from_dict(bf16.to_dict()) == bf16


@pytest.mark.parametrize("bad", ["fp16", "BF16", None, 32])
def test_precision_is_fp32_or_bf16(bad):
    with pytest.raises(SpecError, match=r"precision.*fp32.*bf16"):
        TrainSpec(precision=bad)


def test_a_study_passes_its_precision_to_every_run_and_rejects_others():
    from lmcbook import studies
    from lmcbook.studies import MechanismStudy, WidthStudy, describe_mechanism

    study = studies.resolve(MechanismStudy, "smoke", precision="bf16")
    assert {s.train.precision for p in study.pairs() for s in (p.a, p.b)} == {"bf16"}
    assert "every run in bf16 autocast" in describe_mechanism(study)
    assert "autocast" not in describe_mechanism(studies.resolve(MechanismStudy, "smoke"))
    assert {s.train.precision for s in studies.resolve(WidthStudy, "smoke").specs()} == {"fp32"}
    from lmcbook.studies import describe_study

    assert "every run in bf16 autocast" in describe_study(studies.resolve(WidthStudy, "smoke", precision="bf16"))
    assert "autocast" not in describe_study(studies.resolve(WidthStudy, "smoke"))
    with pytest.raises(SpecError, match=r"precision='fp16'.*fp32.*bf16"):
        studies.resolve(WidthStudy, "smoke", precision="fp16")


def test_anneal_from_keeps_every_existing_run_id_and_decays_to_zero_from_its_step():
    """TrainSpec.anneal_from (issue 49's N8): None is left out of the hash; from the step on, the rate falls linearly
    from the schedule's value there to zero one step past the end; a child may anneal from its spawn, not before."""
    from lmcbook.specs import spawn_pair
    from lmcbook.train import lr_at

    assert RunSpec().id == "6a14211c4d1c6f5423a8130b4af9ba20c1d59b8019d01827eea74e013a41d54c"
    assert "anneal_from" not in RunSpec().hashed_dict()["train"]
    annealed = RunSpec(train=TrainSpec(steps=40, schedule="constant", anneal_from=20))
    assert annealed.hashed_dict()["train"]["anneal_from"] == 20 and RunSpec.from_dict(annealed.to_dict()) == annealed
    rates = [lr_at(t, 40, 0.1, 0.0, "constant", anneal_from=20) for t in range(40)]
    assert rates[:21] == [0.1] * 21 and rates[30] == pytest.approx(0.05) and rates[39] == pytest.approx(0.005)
    decayed = [lr_at(t, 40, 0.1, 0.0, "linear", 0.2, anneal_from=20) for t in (19, 20, 30)]
    assert decayed[1] == pytest.approx(0.1 * (0.2 + 0.8 * 20 / 40)) and decayed[2] == pytest.approx(decayed[1] / 2)
    full = RunSpec(train=TrainSpec(steps=40, schedule="constant"))
    child, _ = spawn_pair(full, 20, anneal_from=20)
    assert child.train.anneal_from == 20 and child.parent == spawn_pair(full, 20)[0].parent
    with pytest.raises(SpecError, match=r"anneal_from=10 .*spawn_step=20"):
        spawn_pair(full, 20, anneal_from=10)
    with pytest.raises(SpecError, match=r"anneal_from=40 .*steps=40"):
        TrainSpec(steps=40, anneal_from=40)
