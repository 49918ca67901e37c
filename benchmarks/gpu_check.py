"""Check lmcbook's GPU path: train a ResNet20 pair on a learnable synthetic CIFAR-shaped task and time it.

Inputs are CIFAR-shaped Gaussian images; labels come from a fixed random teacher
network, so the loss must fall.  The script trains two ResNet20 models (a pair)
with lmcbook's own training loop: bf16 autocast (the runs' precision) and channels_last on CUDA, data
resident on the device in fp16.  It prints images per second, the time a
100-epoch CIFAR-10 pair would take at that speed, whether the loss fell by at
least 30%, and whether bf16 and fp32 training reach losses within 5% (relative)
after the same steps.  It exits 1 if a check fails.

    python benchmarks/gpu_check.py                     # on a GPU, about 2 minutes
    python benchmarks/gpu_check.py --device cpu --steps 120 --width 0.25 --n 2048 --batch 32 --classes 2  # CPU smoke
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch

from lmcbook.data import from_arrays, resolve_device
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, TrainSpec
from lmcbook.train import train

CIFAR10_TRAIN = 50_000


def synthetic(n: int, device: torch.device, seed: int = 0, classes: int = 10):
    """Return a Dataset of n CIFAR-shaped Gaussian images labelled by a fixed random teacher network.

    The teacher is a random 5x5 convolution to 32 channels, a ReLU, a global average
    pool and a random linear map: translation-invariant, like the ResNet20 student, so
    the student can learn it and the loss must fall.  Its logits are standardised per
    class before the argmax, so the classes are balanced.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n + 2048, 3, 32, 32, generator=g)
    conv = torch.randn(32, 3, 5, 5, generator=g) / 75 ** 0.5
    head = torch.randn(32, classes, generator=g)
    with torch.no_grad():
        feats = torch.cat([torch.relu(torch.nn.functional.conv2d(x[i:i + 1024], conv, padding=2)).mean((2, 3))
                           for i in range(0, len(x), 1024)])
    z = feats @ head
    y = ((z - z.mean(0)) / z.std(0)).argmax(1)
    x, y = x.numpy(), y.numpy()
    return from_arrays("synthetic", x[:n], y[:n], x[n:n + 1024], y[n:n + 1024], x[n + 1024:], y[n + 1024:],
                       classes, device)


def run_pair(data, steps: int, width: float, batch: int, precision: str):
    """Return (seconds, per-step losses of model a, test accuracies) of a ResNet20 pair trained for ``steps`` at
    ``precision`` (fp32 or bf16, the runs' spec field)."""
    specs = [RunSpec(DataSpec("cifar10"), ModelSpec("resnet20", width, depth=None, norm="batch", bias=False),
                     TrainSpec(steps=steps, batch_size=batch, lr=0.1, momentum=0.9, weight_decay=5e-4, seed=s,
                               precision=precision))
             for s in (0, 1)]
    if data.device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    runs = [train(s, data, progress=False) for s in specs]
    if data.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, runs[0].history["loss"], [r.metrics["test_acc"] for r in runs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--n", type=int, default=CIFAR10_TRAIN, help="synthetic training images")
    ap.add_argument("--classes", type=int, default=10, help="classes of the teacher")
    args = ap.parse_args(argv)
    dev = resolve_device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    print(f"device: {name}; torch {torch.__version__}")
    data = synthetic(args.n, dev, classes=args.classes)
    print(f"data: {args.n} synthetic 3x32x32 images, {args.classes} classes, on {dev} as {data.x_train.dtype}")
    precision = "bf16" if dev.type == "cuda" else "fp32"  # bf16 on the CPU needs AMX to be fast
    print(f"precision: {precision}")
    run_pair(data, 5, args.width, args.batch, precision)  # warm-up: kernels, allocator, autotuning
    seconds, losses, accs = run_pair(data, args.steps, args.width, args.batch, precision)
    ips = 2 * args.steps * args.batch / seconds
    print(f"images/s (pair, training): {ips:,.0f}")
    print(f"a 100-epoch CIFAR-10 pair would take: {2 * 100 * CIFAR10_TRAIN / ips / 60:.1f} min at this speed")
    w = max(5, args.steps // 20)
    first, last = statistics.mean(losses[:w]), statistics.mean(losses[-w:])
    fell = 1 - last / first
    ok = [fell >= 0.30]
    print(f"loss fell by {100 * fell:.0f}% ({first:.3f} -> {last:.3f}; check >= 30%): {'PASS' if ok[0] else 'FAIL'}")
    print(f"test accuracy of the pair on held-out synthetic images: {np.round(accs, 3).tolist()}")
    if dev.type == "cuda":
        _, l32, _ = run_pair(data, args.steps, args.width, args.batch, "fp32")
        a, b = statistics.mean(losses[-w:]), statistics.mean(l32[-w:])
        rel = abs(a - b) / b
        ok.append(rel <= 0.05)
        print(f"bf16 vs fp32 final loss: {a:.4f} vs {b:.4f}, relative difference {100 * rel:.1f}% "
              f"(check <= 5%): {'PASS' if ok[-1] else 'FAIL'}")
    else:
        print("bf16 vs fp32: not checked here (the check trains in bf16 on CUDA only)")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
