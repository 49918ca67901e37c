"""The GPU path, exercised on the CPU: fp16 data storage, per-batch casts, and the GPU check script."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from lmcbook.data import _to_dataset
from lmcbook.merge import interpolate, pair_summary
from lmcbook.probes import PairActivations
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, TrainSpec
from lmcbook.train import train

ROOT = Path(__file__).resolve().parents[1]


def test_fp16_stored_data_trains_and_evaluates():
    rng = np.random.default_rng(0)
    x = rng.random((300, 3, 8, 8)).astype(np.float32)
    y = (x[:, 0].mean((1, 2)) > 0.5).astype(np.int64)
    data = _to_dataset("cifar10", x[:200], y[:200], x[200:250], y[200:250], x[250:], y[250:], 2, torch.device("cpu"),
                       dtype=torch.float16)
    assert data.x_train.dtype == torch.float16
    specs = [RunSpec(DataSpec("cifar10", augment=True), ModelSpec("vgg11", 0.125, depth=None, norm="batch"),
                     TrainSpec(steps=20, batch_size=32, lr=0.05, seed=s)) for s in (0, 1)]
    a, b = (train(s, data) for s in specs)
    merged = interpolate(a.model, b.model, 0.5, data.x_train)  # reset_bn reads fp16 inputs
    _, summary = pair_summary(a.model, b.model, data, (0.0, 0.5, 1.0))
    assert 0 <= summary["acc_merged"] <= 1 and np.isfinite(summary["loss_barrier_cal_mid"])
    assert len(PairActivations(a.model, merged, data.x_test, train_x=data.x_train, warn=False).lewc([0.5])) > 0


def test_gpu_check_script_runs_on_the_cpu():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu",
                          "--steps", "120", "--width", "0.25", "--n", "2048", "--batch", "32", "--classes", "2"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for line in ("images/s (pair, training):", "a 100-epoch CIFAR-10 pair would take:", "loss fell by",
                 "PASS", "bf16 vs fp32: not checked here"):
        assert line in out.stdout
