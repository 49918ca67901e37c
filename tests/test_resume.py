"""Training resumes from its last epoch checkpoint after an interruption or a kill, bitwise."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from safetensors import safe_open

import lmcbook.train as train_mod
from lmcbook.files import training_source_hash
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, TrainSpec
from lmcbook.train import CHECKPOINT_SUFFIX, DivergedError, Schedule, checkpoint_path, remove_checkpoint, train
from tests.conftest import tiny_spec

PER_EPOCH = 1257 // 64  # digits: 1257 training samples, batch 64 -> 19 steps per epoch


class Interrupted(RuntimeError):
    """Stands in for whatever stops a run between two epochs."""


def _interrupt_at_epoch(monkeypatch, epoch: int) -> None:
    """Make training raise when it fetches the batches of ``epoch``, i.e. after epochs 0 .. epoch - 1."""
    real = Schedule.batches

    def batches(self, spec, data, e):
        if e == epoch:
            raise Interrupted(f"stopped before epoch {e}")
        return real(self, spec, data, e)

    monkeypatch.setattr(Schedule, "batches", batches)


def _meta(path) -> dict:
    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()["lmcbook_checkpoint"])


def _assert_same_run(a, b) -> None:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    assert a.history == b.history
    assert a.metrics == b.metrics
    assert a.step == b.step
    assert (a.momentum_buffers is None) == (b.momentum_buffers is None)
    if a.momentum_buffers is not None:
        assert a.momentum_buffers.keys() == b.momentum_buffers.keys() and a.momentum_buffers
        for k in a.momentum_buffers:
            assert torch.equal(a.momentum_buffers[k], b.momentum_buffers[k]), k


def _aug_spec(epochs: int = 5, **train) -> RunSpec:
    """A small augmented run on digits (augmentation draws depend on the step, so resuming must get it right)."""
    return RunSpec(DataSpec("digits", augment=True), ModelSpec("mlp", 0.25, 64, 3),
                   TrainSpec(**{"epochs": epochs, "batch_size": 64, "seed": 0, **train}))


def test_interrupted_run_resumes_bitwise(digits, tmp_path, monkeypatch, caplog):
    # a parent (stops early, keeps its momentum buffers), so the buffers are compared too
    spec = _aug_spec(epochs=5, stop_step=4 * PER_EPOCH + 5)
    full = train(spec, digits, progress=False)
    assert full.momentum_buffers
    ckpt = tmp_path / "ckpts" / "run.ckpt"
    with monkeypatch.context() as m:
        _interrupt_at_epoch(m, 2)
        with pytest.raises(Interrupted):
            train(spec, digits, progress=False, checkpoint=ckpt)
    assert _meta(ckpt)["step"] == 2 * PER_EPOCH and _meta(ckpt)["run_id"] == spec.id
    with caplog.at_level(logging.INFO, logger="lmcbook.train"):
        resumed = train(spec, digits, progress=False, checkpoint=ckpt)
    assert f"at step {2 * PER_EPOCH}" in caplog.text
    _assert_same_run(resumed, full)
    assert resumed.provenance["resumed_from_step"] == 2 * PER_EPOCH
    assert "resumed_from_step" not in full.provenance
    assert ckpt.exists()  # train never deletes it: the caller does, once the run is stored
    remove_checkpoint(ckpt)
    remove_checkpoint(ckpt)  # idempotent
    assert list(ckpt.parent.iterdir()) == []


def test_child_and_fine_tuning_runs_resume_bitwise(digits, tmp_path, monkeypatch):
    full_spec = tiny_spec(epochs=4)
    k = 25  # mid-epoch: the child starts in epoch 1
    parent_spec = full_spec.with_train(stop_step=k)
    parent = train(parent_spec, digits, progress=False)
    child = RunSpec(full_spec.data, full_spec.model, full_spec.train, parent=parent_spec, spawn_step=k)
    ref = train(child, digits, progress=False, start=parent)
    ckdir = tmp_path / "ckpts"
    ckdir.mkdir()  # a directory: the file is named after the run id
    with monkeypatch.context() as m:
        _interrupt_at_epoch(m, 3)
        with pytest.raises(Interrupted):
            train(child, digits, progress=False, start=parent, checkpoint=ckdir)
    ckpt = checkpoint_path(ckdir, child)
    assert ckpt == ckdir / f"{child.id}{CHECKPOINT_SUFFIX}" and _meta(ckpt)["step"] == 3 * PER_EPOCH
    resumed = train(child, digits, progress=False, start=parent, checkpoint=ckdir)
    _assert_same_run(resumed, ref)
    assert resumed.provenance["resumed_from_step"] == 3 * PER_EPOCH
    with pytest.raises(ValueError, match="directory"):
        remove_checkpoint(ckdir)
    remove_checkpoint(ckdir, child)
    assert list(ckdir.iterdir()) == [] and ckdir.is_dir()

    base_spec = tiny_spec(epochs=1)
    base = train(base_spec, digits, progress=False)
    ft = RunSpec(base_spec.data, base_spec.model, TrainSpec(epochs=3, batch_size=64, lr=0.01, seed=3), init=base_spec)
    ref = train(ft, digits, progress=False, init=base)
    with monkeypatch.context() as m:
        _interrupt_at_epoch(m, 1)
        with pytest.raises(Interrupted):
            train(ft, digits, progress=False, init=base, checkpoint=ckdir)
    resumed = train(ft, digits, progress=False, init=base, checkpoint=ckdir)
    _assert_same_run(resumed, ref)
    assert resumed.provenance["resumed_from_step"] == PER_EPOCH


_KILLED_CHILD = textwrap.dedent("""
    import json, sys, torch
    torch.set_num_threads(int(sys.argv[1]))
    import lmcbook.train as T
    T.training_source_hash = lambda: sys.argv[2]  # the test process's hash, in case the source is edited meanwhile
    from lmcbook.data import load
    from lmcbook.specs import RunSpec
    spec = RunSpec.from_dict(json.loads(sys.argv[3]))
    T.train(spec, load("digits", device="cpu"), progress=False, checkpoint=sys.argv[4])
    print("finished without being killed")
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_process_resumes_bitwise(digits, tmp_path):
    threads = 1
    torch.set_num_threads(threads)
    spec = tiny_spec(width=4, epochs=40)
    ckpt = tmp_path / "run.ckpt"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, str(threads), training_source_hash(),
                             json.dumps(spec.to_dict()), str(ckpt)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ckpt.exists():  # os.replace: the file appears complete or not at all
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the training process ended (rc {proc.returncode}) before its first checkpoint:\n"
                            f"{out}\n{err}")
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, out
    stop = spec.total_steps(len(digits.y_train))
    killed_at = _meta(ckpt)["step"]
    assert 0 < killed_at < stop and killed_at % PER_EPOCH == 0

    full = train(spec, digits, progress=False)  # uninterrupted, same thread count
    resumed = train(spec, digits, progress=False, checkpoint=ckpt)
    assert resumed.provenance["resumed_from_step"] == killed_at > 0
    assert resumed.provenance["threads"] == full.provenance["threads"] == threads
    _assert_same_run(resumed, full)


def _other_run(path, digits, monkeypatch):
    with monkeypatch.context() as m:
        _interrupt_at_epoch(m, 1)
        with pytest.raises(Interrupted):
            train(tiny_spec(seed=7, epochs=3), digits, progress=False, checkpoint=path)


def _other_source(path, digits, monkeypatch):
    spec = tiny_spec(epochs=3)
    with monkeypatch.context() as m:
        m.setattr(train_mod, "training_source_hash", lambda: "0" * 64)
        _interrupt_at_epoch(m, 1)
        with pytest.raises(Interrupted):
            train(spec, digits, progress=False, checkpoint=path)
    assert _meta(path)["run_id"] == spec.id


def _corrupt(path, digits, monkeypatch):
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a safetensors header at all")


def _truncated(path, digits, monkeypatch):
    spec = tiny_spec(epochs=3)
    with monkeypatch.context() as m:
        _interrupt_at_epoch(m, 1)
        with pytest.raises(Interrupted):
            train(spec, digits, progress=False, checkpoint=path)
    path.write_bytes(path.read_bytes()[:-100])


def _flipped(path, digits, monkeypatch):
    """A valid checkpoint with one byte of its weights flipped: still a readable safetensors file (issue 39)."""
    with monkeypatch.context() as m:
        _interrupt_at_epoch(m, 1)
        with pytest.raises(Interrupted):
            train(tiny_spec(epochs=3), digits, progress=False, checkpoint=path)
    data = bytearray(path.read_bytes())
    data[-1000] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("make_bad", [_other_run, _other_source, _corrupt, _truncated, _flipped])
def test_foreign_or_broken_checkpoint_is_ignored(digits, tmp_path, monkeypatch, caplog, make_bad):
    spec = tiny_spec(epochs=3)
    ref = train(spec, digits, progress=False)
    ckpt = tmp_path / "run.ckpt"
    make_bad(ckpt, digits, monkeypatch)
    assert ckpt.exists()
    with caplog.at_level(logging.INFO, logger="lmcbook.train"), pytest.warns(train_mod.CheckpointWarning):
        run = train(spec, digits, progress=False, checkpoint=ckpt)
    assert "discarded checkpoint" in caplog.text and "resumed" not in caplog.text
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    assert "resumed_from_step" not in run.provenance
    _assert_same_run(run, ref)
    meta = _meta(ckpt)  # overwritten by this run's own checkpoint
    assert meta["run_id"] == spec.id and meta["source_hash"] == training_source_hash() and meta["step"] == 2 * PER_EPOCH


def test_without_checkpoint_nothing_is_written(digits, tmp_path, monkeypatch):
    spec = tiny_spec(epochs=3)
    ref_keys = set(train(spec, digits, progress=False).provenance)
    monkeypatch.chdir(tmp_path)

    def no_write(*a, **k):
        raise AssertionError("a checkpoint was written without checkpoint=")

    monkeypatch.setattr(train_mod, "save_file", no_write)
    monkeypatch.setattr(train_mod, "_write_checkpoint", no_write)
    monkeypatch.setattr(train_mod, "_read_checkpoint", no_write)
    run = train(spec, digits, progress=False)
    assert list(tmp_path.iterdir()) == []
    assert set(run.provenance) == ref_keys and "resumed_from_step" not in ref_keys
    with pytest.raises(ValueError, match="checkpoint_every"):
        train(spec, digits, checkpoint=tmp_path / "c", checkpoint_every=0)


def test_checkpoint_cadence_and_nan_guard_first(digits, tmp_path, monkeypatch):
    spec = tiny_spec(epochs=5)
    written = []
    real_write = train_mod._write_checkpoint

    def spy(path, spec, model, opt, params, losses, step, sched):
        written.append(step)
        real_write(path, spec, model, opt, params, losses, step, sched)

    monkeypatch.setattr(train_mod, "_write_checkpoint", spy)
    train(spec, digits, progress=False, checkpoint=tmp_path / "a.ckpt", checkpoint_every=2)
    assert written == [2 * PER_EPOCH, 4 * PER_EPOCH]  # none at the run's last step
    written.clear()
    train(spec, digits, progress=False, checkpoint=tmp_path / "b.ckpt")
    assert written == [1 * PER_EPOCH, 2 * PER_EPOCH, 3 * PER_EPOCH, 4 * PER_EPOCH]

    # a loss found non-finite at the end of epoch 2: that epoch's state is never checkpointed
    real_div = train_mod.divergence

    def diverges_in_epoch_2(spec, losses, sched):
        if len(losses) == 3 * PER_EPOCH:
            return DivergedError(spec.id, 2 * PER_EPOCH + 3, float("nan"), 0.1)
        return real_div(spec, losses, sched)

    monkeypatch.setattr(train_mod, "divergence", diverges_in_epoch_2)
    written.clear()
    with pytest.raises(DivergedError):
        train(spec, digits, progress=False, checkpoint=tmp_path / "c.ckpt")
    assert written == [PER_EPOCH, 2 * PER_EPOCH] and _meta(tmp_path / "c.ckpt")["step"] == 2 * PER_EPOCH
