import pytest
import torch

from lmcbook.store import RunStore
from lmcbook.train import DivergedError, Schedule, lr_at, train
from tests.conftest import tiny_spec


def _same(m1, m2) -> bool:
    s1, s2 = m1.state_dict(), m2.state_dict()
    return s1.keys() == s2.keys() and all(torch.equal(s1[k], s2[k]) for k in s1)


def test_training_is_bitwise_deterministic(digits):
    spec = tiny_spec()
    a, b = train(spec, digits), train(spec, digits)
    assert _same(a.model, b.model)
    assert a.history["loss"] == b.history["loss"]


def test_seeds_change_the_result(digits):
    base = train(tiny_spec(seed=0), digits)
    assert not _same(base.model, train(tiny_spec(seed=1), digits).model)
    other_order = train(tiny_spec(seed=0, data_seed=5), digits)
    assert not _same(base.model, other_order.model)


def test_training_learns(digits):
    run = train(tiny_spec(width=1, epochs=8), digits)
    assert run.metrics["test_acc"] > 0.85
    assert run.history["loss"][-1] < run.history["loss"][0] / 3


def test_schedule_warmup_then_linear_decay():
    assert lr_at(0, 100, 1.0, 0.1, "linear") == pytest.approx(0.1)
    assert lr_at(9, 100, 1.0, 0.1, "linear") == pytest.approx(1.0)
    assert lr_at(10, 100, 1.0, 0.1, "linear") == pytest.approx(1.0)
    assert lr_at(55, 100, 1.0, 0.1, "linear") == pytest.approx(0.5)
    assert lr_at(99, 100, 1.0, 0.1, "linear") == pytest.approx(1 / 90)
    assert lr_at(99, 100, 1.0, 0.1, "constant") == 1.0
    assert lr_at(0, 100, 2.0, 0.0, "linear") == 2.0


def test_schedule_decays_to_a_floor():
    # 10 warm-up steps, then 90 steps from the peak towards 0.2 × peak
    assert lr_at(9, 100, 1.0, 0.1, "linear", floor=0.2) == pytest.approx(1.0)
    assert lr_at(10, 100, 1.0, 0.1, "linear", floor=0.2) == pytest.approx(1.0)
    assert lr_at(55, 100, 1.0, 0.1, "linear", floor=0.2) == pytest.approx(0.2 + 0.8 * 0.5)
    assert lr_at(99, 100, 2.0, 0.1, "linear", floor=0.2) == pytest.approx(2.0 * (0.2 + 0.8 / 90))
    assert lr_at(99, 100, 1.0, 0.1, "linear", floor=0.0) == pytest.approx(1 / 90)  # floor 0: the old decay
    sched = Schedule(total=100, per_epoch=10, first=0, stop=100)
    spec = tiny_spec().with_train(lr=0.5, warmup=0.1, lr_floor=0.1)
    assert sched.lr(99, spec) == pytest.approx(0.5 * (0.1 + 0.9 / 90))


def test_stop_and_continue_reproduces_the_full_run(digits):
    full_spec = tiny_spec(epochs=3)
    full = train(full_spec, digits)
    k = 25  # mid-epoch: 1257 // 64 = 19 steps per epoch
    parent_spec = full_spec.with_train(stop_step=k)
    parent = train(parent_spec, digits)
    assert parent.step == k and parent.momentum_buffers
    from lmcbook.specs import RunSpec

    child = RunSpec(full_spec.data, full_spec.model, full_spec.train, parent=parent_spec, spawn_step=k)
    cont = train(child, digits, start=parent)
    assert _same(cont.model, full.model)
    assert cont.history["loss"] == full.history["loss"][k:]


def test_nan_guard_names_the_step_and_stores_nothing(digits, tmp_path):
    spec = tiny_spec(lr=1e6, warmup=0.0, momentum=0.0)
    store = RunStore(tmp_path / "s")
    with pytest.raises(DivergedError) as err:
        store.get_or_train(spec, data=digits)
    e = err.value
    assert e.step >= 0 and f"step {e.step}" in str(e) and spec.short_id in str(e)
    assert store.ids() == [] and not store.has(spec)
    assert list((tmp_path / "s" / ".tmp").iterdir()) == []


def test_batch_larger_than_training_set_fails_before_compute(digits, tmp_path):
    from lmcbook.specs import SpecError

    spec = tiny_spec(batch_size=5000)
    store = RunStore(tmp_path / "s")
    with pytest.raises(SpecError, match=r"batch_size=5000.*\[1, 1257\]"):
        store.get_or_train(spec, data=digits)
    assert store.ids() == []


def test_the_progress_bar_does_not_change_the_run(digits):
    spec = tiny_spec()
    quiet, shown = train(spec, digits, progress=False), train(spec, digits, progress=True)
    assert _same(quiet.model, shown.model) and quiet.history == shown.history
