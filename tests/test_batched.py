"""Batched (stacked) training matches training alone up to floating-point summation order.

These are tolerance tests by design: a batched matrix product sums in another order,
so batched runs are never compared bitwise with runs trained alone (a run's id names what
it is, not how it was trained; see *How this book is built*).
"""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lmcbook.data import load
from lmcbook.models import MLP
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec
from lmcbook.store import RunStore
from lmcbook.train import DivergedError, StackedMLP, group_key, train, train_many


def _spec(seed=0, lr=0.05, momentum=0.9, wd=3e-3, norm="none", bias=False, **kw):
    return RunSpec(DataSpec("digits", augment=kw.pop("augment", False)), ModelSpec("mlp", 0.5, 64, 3, norm, bias),
                   TrainSpec(**{"steps": 40, "batch_size": 64, "lr": lr, "momentum": momentum, "weight_decay": wd,
                                "seed": seed, **kw}))


def _close(m1, m2, tol):
    s1, s2 = m1.state_dict(), m2.state_dict()
    return max(float((s1[k] - s2[k]).abs().max()) for k in s1) < tol


def test_stacked_forward_equals_each_model():
    torch.manual_seed(0)
    models = [MLP(64, 10, 16, depth=3, norm="layer", bias=True) for _ in range(3)]
    for m in models:
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(3, 5, 1, 8, 8)
    out = StackedMLP(models)(x)
    for j, m in enumerate(models):
        assert torch.allclose(out[j], m(x[j]), atol=1e-5)


@pytest.mark.parametrize("norm, bias", [("none", False), ("layer", True)])
def test_train_many_matches_train_alone(norm, bias):
    data = load("digits", device="cpu")
    specs = [_spec(0, norm=norm, bias=bias), _spec(1, lr=0.1, momentum=0.5, wd=0.0, norm=norm, bias=bias),
             _spec(2, lr=0.02, momentum=0.0, norm=norm, bias=bias)]
    batched = train_many(specs, data)
    for spec, run in zip(specs, batched):
        alone = train(spec, data)
        assert _close(run.model, alone.model, 1e-4), spec.train
        assert run.provenance["batched_with"] == 3
        assert run.history["loss"][0] == pytest.approx(alone.history["loss"][0], rel=1e-5)


def test_train_many_continues_children_and_keeps_momentum():
    data = load("digits", device="cpu")
    full = [_spec(s) for s in (0, 1)]
    parents = [f.with_train(stop_step=15) for f in full]
    pruns = train_many(parents, data)
    assert all(r.momentum_buffers and r.step == 15 for r in pruns)
    kids = [RunSpec(f.data, f.model, f.train, parent=p, spawn_step=15) for f, p in zip(full, parents)]
    cruns = train_many(kids, data, starts=pruns)
    for f, c in zip(full, cruns):
        assert _close(c.model, train(f, data).model, 1e-4)


def test_a_diverging_model_is_reported_and_the_others_finish():
    data = load("digits", device="cpu")
    specs = [_spec(0, warmup=0.0), _spec(1, lr=1e6, warmup=0.0, momentum=0.0)]
    ok, bad = train_many(specs, data)
    assert isinstance(bad, DivergedError) and bad.run_id == specs[1].id and "step" in str(bad)
    assert not isinstance(ok, Exception) and ok.metrics["test_acc"] > 0.2


def test_store_batches_groups_and_stores_each_run(tmp_path):
    store = RunStore(tmp_path / "s")
    data = load("digits", device="cpu")
    specs = [_spec(s) for s in range(3)] + [_spec(9, batch_size=32)]
    runs = store.get_or_train_many(specs, data=data)
    assert [r.spec for r in runs] == specs
    assert all(store.has(s) for s in specs)
    batched = [e.get("batched_with") for e in store.events() if e["event"] == "trained"]
    assert sorted(batched, key=str) == [3, 3, 3, None]
    again = store.get_or_train_many(specs, data=data)
    assert [e["event"] for e in store.events()][-4:] == ["loaded"] * 4
    assert all(torch.equal(a.model.layers[0].weight, b.model.layers[0].weight) for a, b in zip(runs, again))


def test_group_keys_and_bad_groups():
    n = 1257
    assert group_key(_spec(0), n) == group_key(_spec(1, lr=0.3), n)
    assert group_key(_spec(0), n) != group_key(_spec(0, batch_size=32), n)
    assert group_key(RunSpec(model=ModelSpec("mlp", norm="batch")), n) is None
    with pytest.raises(SpecError, match="group_key"):
        train_many([_spec(0), _spec(0, batch_size=32)], load("digits", device="cpu"))


def _children(momenta, spawn=15):
    """One spawned child per momentum, each from its own parent (the noise study's momentum sweep)."""
    from lmcbook.specs import spawn_pair

    return [spawn_pair(_spec(i, momentum=m), spawn, pair=i)[0] for i, m in enumerate(momenta)]


def _fine_tuned():
    base = _spec(0)
    return [RunSpec(DataSpec("digits", transform="reverse"), base.model,
                    TrainSpec(steps=40, batch_size=64, lr=lr, momentum=0.9, weight_decay=3e-3, seed=0), init=base)
            for lr in (0.01, 0.05)]


CASES = {
    "plain seeds and optimizer settings": lambda: [_spec(0), _spec(1, lr=0.1, momentum=0.5, wd=0.0),
                                                   _spec(2, lr=0.02, momentum=0.0)],
    "layer norm with biases": lambda: [_spec(0, norm="layer", bias=True), _spec(1, norm="layer", bias=True,
                                                                                 momentum=0.0)],
    "augmentation": lambda: [_spec(0, augment=True), _spec(1, augment=True, aug_seed=7)],
    "children of mu = 0 and mu > 0 parents": lambda: _children((0.0, 0.5, 0.9)),
    "fine-tuned runs on a transformed task": _fine_tuned,
    "parents that stop early and keep momentum": lambda: [_spec(i, momentum=m, stop_step=25)
                                                          for i, m in enumerate((0.0, 0.5, 0.9))],
    "a constant schedule without warm-up": lambda: [_spec(0, schedule="constant", warmup=0.0, lr=0.02),
                                                    _spec(1, schedule="constant", warmup=0.0, lr=0.05)],
    "members with their own schedule shapes (to zero, to a floor, constant)":
        lambda: [_spec(0), _spec(1, lr_floor=0.2), _spec(2, schedule="constant"), _spec(3, lr_floor=0.5)],
    "members annealed to zero from a step, beside one that is not":
        lambda: [_spec(0, schedule="constant"), _spec(1, schedule="constant", anneal_from=20),
                 _spec(2, lr_floor=0.2, anneal_from=30)],
}


@pytest.mark.parametrize("case", list(CASES))
def test_stacked_training_equals_training_alone_for_every_kind_it_accepts(case, tmp_path):
    from lmcbook.train import STACK_TOLERANCE

    specs = CASES[case]()
    data = load("digits", device="cpu", transform=specs[0].data.transform)
    assert len({group_key(s, len(data.y_train)) for s in specs}) == 1  # they do train as one stack
    stacked = RunStore(tmp_path / "stacked").get_or_train_many(specs, data=data)
    assert all(r.provenance.get("batched_with") == len(specs) for r in stacked)
    alone = RunStore(tmp_path / "alone")
    for spec, run in zip(specs, stacked):
        ref = alone.get_or_train(spec, data=data)
        assert "batched_with" not in ref.provenance
        assert _close(run.model, ref.model, STACK_TOLERANCE), (case, spec.train)
        assert run.step == ref.step and len(run.history["loss"]) == len(ref.history["loss"])
        assert run.history["loss"] == pytest.approx(ref.history["loss"], abs=STACK_TOLERANCE)
        assert (run.momentum_buffers is None) == (ref.momentum_buffers is None), case
        for name, buf in (ref.momentum_buffers or {}).items():
            assert float((run.momentum_buffers[name] - buf).abs().max()) < STACK_TOLERANCE, (case, name)


def test_a_stacked_mu_half_child_keeps_its_parents_momentum(tmp_path):
    """The bug this guards against: in a stack with a μ = 0 child, a μ > 0 child started from a fresh buffer."""
    data = load("digits", device="cpu")
    zero, half = _children((0.0, 0.5))
    stacked = RunStore(tmp_path / "s").get_or_train_many([zero, half], data=data)[1]
    parent = RunStore(tmp_path / "p").get_or_train(half.parent, data=data)
    assert parent.momentum_buffers  # the parent stored its buffers
    fresh = train(half, data, start=replace(parent, momentum_buffers=None))  # what the bug computed
    assert not _close(stacked.model, fresh.model, 1e-5)


def test_wide_runs_train_side_by_side_as_they_would_alone(tmp_path, monkeypatch):
    """MLPs too wide to stack (up to SIDE_BY_SIDE_MAX_UNITS) train in worker processes, one thread each; each equals
    training it alone (up to the summation order of another thread count), is counted once as trained, and a
    diverged one is reported with nothing stored."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    data = load("digits", device="cpu")
    wide = ModelSpec("mlp", 9.0, 64, 2, "none", False)  # 576 units: over STACK_MAX_UNITS
    specs = [replace(_spec(s, warmup=0.0), model=wide) for s in (0, 1)]
    store = RunStore(tmp_path / "s")
    store.get_or_train_many(specs, data=data)
    assert [e["event"] for e in store.events()] == ["trained", "trained"]  # no "loaded" for runs just trained
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for spec in specs:
            got = store.load(spec)
            assert got.provenance["pid"] != os.getpid() and got.provenance["threads"] == 1
            assert _close(got.model, train(spec, data).model, 1e-4)
    finally:
        torch.set_num_threads(before)
    bad = replace(_spec(2, lr=1e6, warmup=0.0, momentum=0.0), model=wide)
    other = replace(_spec(3, warmup=0.0), model=wide)
    with pytest.raises(DivergedError) as err:
        store.get_or_train_many([bad, other], data=data)
    assert err.value.run_id == bad.id and not store.has(bad) and store.has(other)


def test_runs_too_wide_or_a_failed_pool_train_in_this_process(tmp_path, monkeypatch):
    import concurrent.futures
    import os
    from concurrent.futures.process import BrokenProcessPool

    from lmcbook.store import SIDE_BY_SIDE_MAX_UNITS

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    data = load("digits", device="cpu")
    wider = ModelSpec("mlp", (SIDE_BY_SIDE_MAX_UNITS + 64) / 64, 64, 2, "none", False)
    store = RunStore(tmp_path / "s")
    specs = [replace(_spec(s, steps=3, warmup=0.0), model=wider) for s in (0, 1)]
    assert all(r.provenance["pid"] == os.getpid() for r in store.get_or_train_many(specs, data=data))

    def broken(*args, **kwargs):
        raise BrokenProcessPool("a worker was killed")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", broken)
    wide = ModelSpec("mlp", 9.0, 64, 2, "none", False)
    specs = [replace(_spec(s, steps=3, warmup=0.0), model=wide) for s in (0, 1)]
    runs = store.get_or_train_many(specs, data=data)
    assert all(r.provenance["pid"] == os.getpid() for r in runs) and all(store.has(s) for s in specs)


def test_train_and_train_many_run_one_and_the_same_loop(monkeypatch, tmp_path):
    """The guard against two loops drifting apart: both paths call lmcbook.train.train_loop, once per run or stack,
    and every step's batch (augmentation included) comes from lmcbook.train.batch."""
    import lmcbook.train as train_mod

    real_loop, real_batch = train_mod.train_loop, train_mod.batch
    loops, batches = [], []

    def loop(stepper, *args, **kwargs):
        loops.append(type(stepper).__name__)
        return real_loop(stepper, *args, **kwargs)

    def batch(specs, data, rows, step):
        batches.append((len(specs), step))
        return real_batch(specs, data, rows, step)

    monkeypatch.setattr(train_mod, "train_loop", loop)
    monkeypatch.setattr(train_mod, "batch", batch)
    data = load("digits", device="cpu")
    specs = [_spec(0, augment=True, steps=8), _spec(1, augment=True, steps=8)]
    train(specs[0], data, progress=True)
    assert loops == ["ModuleStepper"] and batches == [(1, t) for t in range(8)]
    loops.clear(), batches.clear()
    train_many(specs, data, progress=True)
    assert loops == ["StackStepper"] and batches == [(2, t) for t in range(8)]
    loops.clear()
    RunStore(tmp_path / "s").get_or_train_many(specs + [_spec(2, batch_size=32, steps=8)], data=data)
    assert sorted(loops) == ["ModuleStepper", "StackStepper"]


def test_a_stack_is_not_checkpointed():
    from lmcbook.train import Schedule, StackStepper

    specs = [_spec(0), _spec(1)]
    stepper = StackStepper(specs, StackedMLP([MLP(64, 10, 32, depth=3) for _ in specs]), [None, None])
    with pytest.raises(NotImplementedError, match="not checkpointed"):
        stepper.save(Path("unused"), torch.zeros(1, 2), 1, Schedule(40, 19, 0, 40))


def test_bf16_runs_train_under_autocast_alone_and_stacked_and_never_stack_with_fp32(monkeypatch):
    """precision="bf16" puts the passes under bfloat16 autocast (the weights stay fp32): the same seed then gives
    other weights than fp32, close to them; a stack of bf16 runs follows its members trained alone (to bf16's
    rounding), and a bf16 run never stacks with an fp32 one."""
    data = load("digits", device="cpu")
    fp32, bf16 = _spec(0), _spec(0, precision="bf16")
    a, b = train(fp32, data), train(bf16, data)
    assert next(b.model.parameters()).dtype == torch.float32
    diff = max(float((p - q).detach().abs().max()) for p, q in zip(a.model.parameters(), b.model.parameters()))
    assert 0 < diff < 0.05
    calls = []
    real = torch.autocast
    monkeypatch.setattr(torch, "autocast", lambda *a, **k: calls.append(k.get("enabled", True)) or real(*a, **k))
    stacked = train_many([bf16, _spec(1, precision="bf16")], data)
    assert calls and all(calls)
    assert _close(stacked[0].model, b.model, 0.05) and not _close(stacked[0].model, a.model, 1e-6)
    assert group_key(fp32, 1000) != group_key(bf16, 1000)


@pytest.mark.parametrize("momentum, wd", [(0.9, 3e-3), (0.0, 1e-2), (0.5, 0.0)])
def test_the_stacked_sgd_step_is_torch_sgd_step_by_step(momentum, wd):
    """The stack's update (train._sgd_step) against torch.optim.SGD, one member at a time, over 20 steps of random
    gradients with a changing learning rate: every parameter and momentum buffer within float32 rounding at every
    step, and each member with its own learning rate, momentum and weight decay."""
    from lmcbook.train import _Opt, _sgd_step

    torch.manual_seed(0)
    k, shape = 3, (7, 5)
    moms, wds = [momentum, momentum / 2, 0.0], [wd, 2 * wd, wd / 3]
    stacked = torch.nn.Parameter(torch.randn(k, *shape))
    alone = [torch.nn.Parameter(stacked[j].detach().clone()) for j in range(k)]
    opts = [torch.optim.SGD([alone[j]], lr=0.1, momentum=moms[j], weight_decay=wds[j]) for j in range(k)]
    opt = _Opt(torch.full((k,), 0.1), torch.tensor(moms), torch.tensor(wds))
    bufs = {"w": None}
    for t in range(20):
        lrs = [0.1 * (1 + 0.05 * t) * (j + 1) for j in range(k)]
        grads = torch.randn(k, *shape)
        stacked.grad = grads.clone()
        _sgd_step([("w", stacked)], bufs, opt, torch.tensor(lrs))
        for j in range(k):
            opts[j].param_groups[0]["lr"] = lrs[j]
            alone[j].grad = grads[j].clone()
            opts[j].step()
            torch.testing.assert_close(stacked[j].detach(), alone[j].detach(), rtol=1e-6, atol=1e-6)
            if moms[j] > 0:
                torch.testing.assert_close(bufs["w"][j], opts[j].state[alone[j]]["momentum_buffer"], rtol=1e-6,
                                           atol=1e-6)
