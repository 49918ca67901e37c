import copy

import numpy as np
import pytest
import torch

from lmcbook import experiments_noise, merge, specs
from lmcbook.data import load
from lmcbook.merge import pair_summary
from lmcbook.models import MLP
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec
from lmcbook.store import RunStore, study_data
from lmcbook.train import train


def test_effective_noise_scale_hand_computed():
    assert experiments_noise.effective_noise_scale(0.1, 128, 0.9) == pytest.approx(0.1 / (128 * 0.1))
    assert experiments_noise.effective_noise_scale(0.1, 128, 0.9, power=2) == pytest.approx(0.1 / (128 * 0.01))
    assert experiments_noise.effective_noise_scale(0.05, 32, 0.0) == pytest.approx(0.05 / 32)
    assert experiments_noise.effective_noise_scale(0.2, 64, 0.5, power=2) == pytest.approx(0.2 / (64 * 0.25))
    for bad in (dict(lr=0, batch_size=8), dict(lr=0.1, batch_size=0), dict(lr=0.1, batch_size=8, momentum=1.0),
                dict(lr=0.1, batch_size=8, power=3)):
        with pytest.raises(SpecError):
            experiments_noise.effective_noise_scale(**bad)


def _full(**kw):
    return RunSpec(DataSpec("digits"), ModelSpec("mlp", 0.25, 64, 3),
                   TrainSpec(**{"steps": 60, "batch_size": 64, "lr": 0.05, "seed": 3, **kw}))


def _same(m1, m2):
    s1, s2 = m1.state_dict(), m2.state_dict()
    return all(torch.equal(s1[k], s2[k]) for k in s1)


def test_child_with_the_parents_data_seed_reproduces_the_uninterrupted_run(tmp_path):
    store = RunStore(tmp_path / "s")
    data = load("digits", device="cpu")
    full = _full()
    parent = specs.parent_spec(full, 25)
    child = specs.child_spec(parent, data_seed=full.train.data_seed)
    uninterrupted = store.get_or_train(full, data=data)
    continued = store.get_or_train(child, data=data)
    assert _same(uninterrupted.model, continued.model)
    assert store.has(parent) and store.load(parent).momentum_buffers  # the parent's entry keeps its momentum buffers
    assert store.load(parent).step == 25


def test_children_differ_by_data_seed_and_momentum_matters(tmp_path):
    store = RunStore(tmp_path / "s")
    data = load("digits", device="cpu")
    a, b = specs.spawn_pair(_full(), 25)
    ra, rb = store.get_or_train(a, data=data), store.get_or_train(b, data=data)
    assert not _same(ra.model, rb.model)
    parent = store.load(a.parent)
    zeroed = copy.copy(parent)
    zeroed.momentum_buffers = {k: torch.zeros_like(v) for k, v in parent.momentum_buffers.items()}
    assert not _same(train(a, data, start=zeroed).model, ra.model)


def test_two_children_with_the_same_seed_are_identical_and_gain_nothing(tmp_path):
    store = RunStore(tmp_path / "s")
    data = load("digits", device="cpu")
    parent = specs.parent_spec(_full(), 25)
    c1 = train(specs.child_spec(parent, 77), data, start=store.get_or_train(parent, data=data))
    c2 = train(specs.child_spec(parent, 77), data, start=store.get_or_train(parent, data=data))
    assert _same(c1.model, c2.model)
    _, summ = pair_summary(c1.model, c2.model, data, (0.0, 0.5, 1.0))
    assert experiments_noise.merging_gain(summ)["gain"] == 0.0


def test_child_specs_are_validated():
    parent = specs.parent_spec(_full(), 25)
    with pytest.raises(SpecError, match="batch_size"):
        specs.child_spec(parent, 5, batch_size=32)
    with pytest.raises(SpecError, match="stop_step=None"):
        specs.child_spec(_full(), 5)
    with pytest.raises(SpecError, match="spawn_fraction"):
        specs.spawn_step(_full(), 1.5, 1257)
    lr_child = specs.child_spec(parent, 5, lr=0.2)  # a continuation may change its peak learning rate
    assert lr_child.train.lr == 0.2 and lr_child.spawn_step == 25


def test_task_arithmetic_known_answers():
    torch.manual_seed(0)
    base, t1, t2 = MLP(8, 3, 6, depth=2), MLP(8, 3, 6, depth=2), MLP(8, 3, 6, depth=2)
    v1, v2 = merge.task_vector(t1, base), merge.task_vector(t2, base)
    at0 = merge.task_arithmetic(base, [v1, v2], 0.0)
    assert _same(at0, base)
    zero = {k: torch.zeros_like(v) for k, v in v2.items()}
    at1 = merge.task_arithmetic(base, [v1, zero], 1.0)
    assert all(torch.allclose(at1.state_dict()[k], t1.state_dict()[k], atol=1e-6) for k in v1)


def test_ties_known_answers():
    v = {"w": torch.tensor([0.5, -2.0, 1.0]), "b": torch.tensor([[3.0]])}
    same = merge.ties_vector([v, copy.deepcopy(v)], keep=1.0)
    assert all(torch.allclose(same[k], v[k]) for k in v)
    v1, v2 = {"w": torch.tensor([3.0, -1.0, 0.1])}, {"w": torch.tensor([-1.0, 2.0, 0.2])}
    out = merge.ties_vector([v1, v2], keep=2 / 3)
    assert torch.allclose(out["w"], torch.tensor([3.0, 2.0, 0.0]))
    with pytest.raises(SpecError, match="keep"):
        merge.ties_vector([v1], keep=0.0)


def test_fine_tuning_starts_from_the_init_run(tmp_path):
    store = RunStore(tmp_path / "s")
    base = _full()
    tuned = RunSpec(DataSpec("digits", transform="reverse"), base.model, base.train.__class__(
        steps=10, batch_size=64, lr=0.01, seed=3), init=base)
    run = store.get_or_train(tuned)
    b = store.load(base).model.state_dict()

    def dist(model):
        return sum(float((model.state_dict()[k] - b[k]).abs().sum()) for k in b)

    delta = dist(run.model)
    assert 0 < delta  # it moved, from the base's weights (a fresh init would be far away)
    fresh = train(RunSpec(tuned.data, tuned.model, tuned.train), load("digits", device="cpu", transform="reverse"))
    far = dist(fresh.model)
    assert delta < far / 5
    assert RunSpec.from_dict(tuned.to_dict()) == tuned


def test_new_fields_keep_old_ids():
    spec = RunSpec()
    assert "transform" not in spec.hashed_dict()["data"]
    assert RunSpec(DataSpec(transform="negate")).id != spec.id


def test_training_lengths_of_the_convergence_rule():
    from lmcbook.studies import NoiseStudy, resolve

    assert resolve(NoiseStudy, "smoke", steps=100, max_steps=450).lengths() == (100, 200, 400)
    assert resolve(NoiseStudy, "smoke", steps=100).lengths() == (100,)
    with pytest.raises(SpecError, match="max_steps=50 is not allowed: expected an integer >= steps"):
        resolve(NoiseStudy, "smoke", steps=100, max_steps=50)


@pytest.mark.parametrize("bar, steps_used", [(0.0, 20), (1.01, 40)])
def test_a_cell_that_misses_the_convergence_rule_trains_again_longer(tmp_path, monkeypatch, bar, steps_used):
    """A rule every cell meets stops at the first length; one no cell meets runs every length, and the rows say
    which length they come from."""
    from lmcbook import claims
    from lmcbook.studies import NoiseStudy, resolve

    monkeypatch.setattr(claims.thresholds, "NOISE_CONVERGED_TRAIN_ACC", bar)
    study = resolve(NoiseStudy, "smoke", steps=20, max_steps=45)
    store = RunStore(tmp_path / "s")
    cells = study.grid_cells()[:2]
    frame = experiments_noise.noise_frame(study, cells, store)
    assert len(frame) == len(cells) * study.seeds and set(frame["train_steps"]) == {steps_used}
    longer = [study.children(c, p, 40) for c in cells for p in range(study.seeds)]
    assert all(store.has(s) == (steps_used == 40) for pair in longer for s in pair)


def test_a_diverged_noise_cell_is_reported_and_excluded_never_merged(tmp_path, caplog):
    """A learning rate that blows up: its cell's rows say so, carry no gain, count as missing the rule, and the other
    cells are trained, stored and merged as usual."""
    from lmcbook import claims, schema
    from lmcbook.studies import NoiseStudy, resolve

    study = resolve(NoiseStudy, "smoke", steps=20, lrs=(0.05, 1e4, 2e4), batch_sizes=(32,))
    store = RunStore(tmp_path / "s")
    with caplog.at_level("WARNING", logger="lmcbook.experiments"):
        frame = experiments_noise.noise_frame(study, study.grid_cells(), store)
    # both diverged cells were found in one call, so the runs were loaded back once: one retry, not one per cell
    assert sum(e["event"] == "loaded" for e in store.events()) <= 2 * study.seeds
    frame = frame[frame["lr"] < 2e4]
    bad, good = frame[frame["lr"] == 1e4], frame[frame["lr"] == 0.05]
    assert (bad["diverged"] == 1).all() and bad["gain"].isna().all() and (bad["train_acc_min"] == 0).all()
    assert (good["diverged"] == 0).all() and good["gain"].notna().all()
    assert "diverged and is excluded" in caplog.text
    long = schema.to_long(frame.assign(method="grid"), "n", ["gain", "train_acc_min", "diverged"],
                          ["lr", "batch_size", "method"], drop_missing=True)
    schema.validate_results(long)
    cells = claims.noise.noise_cells(claims.noise.noise_pairs(long, ["lr", "batch_size"]), ["lr", "batch_size"])
    assert cells.loc[(1e4, 32), "diverged"] and not cells.loc[(1e4, 32), "kept"]
    assert "1 of them diverged" in claims.noise._rule_text(cells)


@pytest.mark.parametrize("bar, steps_used", [(0.0, 20), (1.01, 40)])
def test_the_learning_rate_pair_matrix_trains_again_longer_as_a_whole(tmp_path, monkeypatch, bar, steps_used):
    """One parent feeds a whole row of the matrix, so a cell that misses the rule retrains every cell, parents
    included, at the next length; a matrix that meets it stops at the first."""
    from lmcbook import claims
    from lmcbook.studies import NoiseStudy, resolve

    monkeypatch.setattr(claims.thresholds, "NOISE_CONVERGED_TRAIN_ACC", bar)
    study = resolve(NoiseStudy, "smoke", steps=20, max_steps=45, pair_lrs=(0.02, 0.1))
    store = RunStore(tmp_path / "s")
    frame = experiments_noise.lr_pair_frame(study, store)
    assert len(frame) == 4 * study.seeds and set(frame["train_steps"]) == {steps_used}
    assert (frame["diverged"] == 0).all() and frame["gain"].notna().all()
    cell = study.cell(study.component_lr)
    longer = [s for p in range(study.seeds) for lr in study.pair_lrs for s in study.children(cell, p, 40, lr=lr)]
    assert all(store.has(s) == (steps_used == 40) for s in longer)


def test_a_shared_initialisation_and_independent_pairs():
    """Spawn point 0: two runs from one initialisation with their own batch orders, no parent; an independent cell:
    two seeds; a floor of 1 is a constant rate, a floor between is a linear decay to it."""
    from lmcbook.studies import NoiseStudy, resolve

    study = resolve(NoiseStudy, "smoke")
    a, b = study.children(study.cell(0.05, spawn_fraction=0.0), 3)
    assert a.parent is None and b.parent is None
    assert a.train.seed == b.train.seed == 3 and (a.train.data_seed, b.train.data_seed) == (1006, 1007)
    a, b = study.children(study.cell(0.05, independent=True), 3)
    assert (a.train.seed, b.train.seed) == (6, 7) and a.parent is None
    const = study.spec(study.cell(0.05, lr_floor=1.0), 0).train
    floor = study.spec(study.cell(0.05, lr_floor=0.2), 0).train
    assert const.schedule == "constant" and const.lr_floor == 0
    assert floor.schedule == "linear" and floor.lr_floor == 0.2
    spawned, _ = study.children(study.cell(0.05, lr_floor=0.2, spawn_fraction=0.25), 0)
    assert spawned.parent.train.lr_floor == 0.2 and spawned.spawn_step == 15  # 25% of 60 steps


@pytest.mark.parametrize("bad, allowed", [(dict(spawn_fraction=1.0), r"\[0, 1\)"), (dict(lr_floor=1.5), r"\[0, 1\]"),
                                          (dict(lr_floor=-0.1), r"\[0, 1\]")])
def test_noise_setting_bounds(bad, allowed):
    from lmcbook.studies import NoiseStudy, resolve

    with pytest.raises(SpecError, match=allowed):
        resolve(NoiseStudy, "smoke", **bad)


def test_the_regime_map_measures_every_pair(tmp_path):
    """One learning rate, a shared initialisation and independent pairs: every pair gets its merging and ensemble
    gains, disagreement and distance; the ensemble gain agrees with the pair summary's, and a shared-initialisation
    pair's distance is measured from that initialisation."""
    from lmcbook.merge import relative_distance
    from lmcbook.studies import NoiseRegimeStudy, resolve
    from lmcbook.train import init_model

    study = resolve(NoiseRegimeStudy, "smoke", steps=20, lrs=(0.05,), lr_floors=(0.0,), spawn_fractions=(0.0, 0.5),
                    augment=False, seeds=1)
    store = RunStore(tmp_path / "s")
    frame = experiments_noise.regime_map_frame(study, store)
    assert sorted(frame["method"]) == ["independent", "spawn", "spawn"]
    for col in ("ensemble_gain", "disagreement", "pair_distance", "train_acc_a", "train_loss_merged", "loss_b"):
        assert frame[col].notna().all(), col
    assert np.allclose(frame["ensemble_gain"], frame["acc_ensemble"] - frame["acc_endpoints"], atol=1e-6)
    shared = frame[frame["method"] == "spawn"].iloc[0]
    data = study_data(study)
    a, b = (store.load(s) for s in study.noise_study().children(study.cells()[0], 0))
    assert shared["pair_distance"] == pytest.approx(relative_distance(a.model, b.model, init_model(a.spec, data)))
    # spawned children: measured from their parent at the spawn, not from the initialisation
    spawned = frame[(frame["method"] == "spawn") & (frame["spawn_fraction"] == 0.5)].iloc[0]
    ca, cb = (store.load(s) for s in study.noise_study().children(study.cells()[1], 0))
    parent = store.load(ca.spec.parent).model
    assert spawned["pair_distance"] == pytest.approx(relative_distance(ca.model, cb.model, parent))
    assert spawned["pair_distance"] != pytest.approx(relative_distance(ca.model, cb.model, init_model(ca.spec, data)))
    assert (frame["disagreement"] >= 0).all() and (frame["disagreement"] <= 1).all()


def test_the_regime_map_anneals_children_of_the_same_parents(tmp_path):
    """NoiseRegimeStudy.anneal: beside each spawned cell whose rate stays above zero, children of the same parents
    annealed to zero from the spawn; the map frame names them method "anneal" and keeps its columns."""
    from dataclasses import replace

    from lmcbook.studies import NoiseRegimeStudy, resolve

    study = resolve(NoiseRegimeStudy, "smoke", steps=20, lrs=(0.05,), lr_floors=(0.0, 1.0), spawn_fractions=(0.5,),
                    augment=False, independent=False, seeds=1, anneal=True)
    annealed = [c for c in study.cells() if c.anneal]
    assert [(c.lr_floor, c.spawn_fraction) for c in annealed] == [(1.0, 0.5)]  # none beside the decay to zero
    noise = study.noise_study()
    (a, _), (c, _) = noise.children(annealed[0], 0), noise.children(replace(annealed[0], anneal=False), 0)
    assert a.parent == c.parent and a.train.anneal_from == a.spawn_step == 10 and c.train.anneal_from is None
    frame = experiments_noise.regime_map_frame(study, RunStore(tmp_path / "s"))
    assert sorted(frame["method"]) == ["anneal", "spawn", "spawn"] and "anneal" not in frame
    ann, const = (frame[(frame["method"] == m) & (frame["lr_floor"] == 1.0)].iloc[0] for m in ("anneal", "spawn"))
    assert ann["acc_endpoints"] != const["acc_endpoints"]  # the annealed children trained on differently


def test_the_grid_by_noise_scale_and_the_epochs_protocol():
    """noise_scales: the grid samples S × B (η = S·B·(1−μ), so a cell of the η × B grid is the same cell); the
    "epochs" protocol gives each grid run steps × row_batch_size / B steps (equal examples seen), the component
    sweeps their usual length; bad values are refused by name."""
    from lmcbook.studies import NoiseStudy, resolve

    study = resolve(NoiseStudy, "quick", noise_scales=(0.015625, 0.015625 * 2 ** 0.25), batch_sizes=(32, 64))
    assert [(c.lr, c.batch_size) for c in study.grid_cells()] == [(0.05, 32), (0.05946035575, 32), (0.1, 64),
                                                                   (0.1189207115, 64)]
    plain = resolve(NoiseStudy, "quick")
    assert study.children(study.grid_cells()[0], 0)[0].id == plain.children(plain.cell(0.05, 32), 0)[0].id
    epochs = resolve(NoiseStudy, "quick", protocol="epochs")
    assert [epochs.spec(epochs.cell(0.05, b), 0).train.steps for b in (32, 128, 256)] == [8000, 2000, 1000]
    assert epochs.spec(epochs.component_cells()[0], 0).id == plain.spec(plain.component_cells()[0], 0).id
    wide = epochs.cell(0.05, 32)  # a frame row's train_steps names the runs it took, under either protocol
    kids = epochs.children(wide, 1)
    assert kids[0].train.steps == 8000 and epochs.children_that_took(wide, 1, 8000) == kids
    assert plain.children_that_took(wide, 1, 2000) == plain.children(wide, 1)
    with pytest.raises(SpecError, match=r"train_steps=2000 .*\[8000\]"):
        epochs.children_that_took(wide, 1, 2000)
    with pytest.raises(SpecError, match=r"protocol='epoch' .*'steps'.*'epochs'"):
        resolve(NoiseStudy, "quick", protocol="epoch")
    with pytest.raises(SpecError, match=r"noise_scales=\(0.0,\) .*numbers > 0"):
        resolve(NoiseStudy, "quick", noise_scales=(0.0,))
