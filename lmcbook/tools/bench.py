"""``lmcbook bench``: training throughput, probe cost and book time, measured side by side in one process.

Every figure is a ratio measured in the same run, or a median over repeats, because
shared machines are noisy.  Throughput counts *model-samples*: one training example
seen by one model.  lmcbook trains the runs of one width of the quick sweep (its pairs'
seeds) together in one stacked step, so its figure is the stack's model-samples per
second; the naive baseline trains one model with the loop most tutorials write.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from ..data import load
from ..experiments import pair_frames, probe_frames
from ..models import build, count_parameters
from ..specs import DataSpec, ModelSpec, RunSpec, TrainSpec
from ..store import RunStore, trained_pairs
from ..studies import study as part_study
from ..train import STACK_MAX_UNITS, group_key, train, train_many

BENCH_UNITS = (16, 64, 256, 1024, 2048)


def matmul_peak_gflops(n: int = 2048, repeats: int = 5, dtype: torch.dtype = torch.float32) -> float:
    """Return the median GFLOP/s of an n×n matrix product in ``dtype`` (fp32 by default) on this machine."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * n ** 3 / statistics.median(times) / 1e9


def _spec(units: int, seed: int, steps: int) -> RunSpec:
    return RunSpec(DataSpec("digits"), ModelSpec("mlp", units / 64, 64, 4, "none", False),
                   TrainSpec(steps=steps, batch_size=128, lr=0.05, momentum=0.9, weight_decay=3e-3, seed=seed))


def lmcbook_throughput(units: int, steps: int, models: int = 4) -> float:
    """Return model-samples per second of lmcbook's training of ``models`` seeds of one width, as the store
    trains them: stacked in one step up to STACK_MAX_UNITS hidden units; above, side by side in worker
    processes of one thread each on the CPU (:meth:`lmcbook.store.RunStore.get_or_train_many`), timed as the
    busiest worker's training seconds."""

    data = load("digits", device="cpu")
    specs = [_spec(units, s, steps) for s in range(models)]
    if group_key(specs[0], len(data.y_train)) is not None:
        return models * steps * 128 / train_many(specs, data)[0].provenance["batched_seconds"]
    with tempfile.TemporaryDirectory() as tmp:
        runs = RunStore(tmp).get_or_train_many(specs, data=data)
    return models * steps * 128 / side_by_side_seconds([r.provenance for r in runs])


def side_by_side_seconds(provenances: list[dict[str, Any]]) -> float:
    """Return the training time of runs trained side by side: the largest sum of ``train_seconds`` over the runs of
    one process (``pid``); runs of one process add up, processes overlap."""
    by_pid: dict[Any, float] = {}
    for p in provenances:
        by_pid[p["pid"]] = by_pid.get(p["pid"], 0.0) + p["train_seconds"]
    return max(by_pid.values())


def one_process_throughput(units: int, steps: int, models: int = 4) -> float:
    """Return model-samples per second of the other way to train ``models`` wide runs: one after another in this
    process, with all its threads (what lmcbook did before it trained them side by side)."""
    data = load("digits", device="cpu")
    return models * steps * 128 / sum(train(_spec(units, s, steps), data).provenance["train_seconds"]
                                      for s in range(models))


def naive_throughput(units: int, steps: int) -> float:
    """Return samples per second of the tutorial loop: DataLoader(TensorDataset), shuffle, torch.optim.SGD."""
    data = load("digits", device="cpu")
    torch.manual_seed(0)
    model = build(_spec(units, 0, steps).model, data.input_shape, data.num_classes)
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=128, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-3)
    done, samples = 0, 0
    t0 = time.perf_counter()
    while done < steps:
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            samples += len(yb)
            if done == steps:
                break
    return samples / (time.perf_counter() - t0)


def _steps_for(units: int) -> int:
    return {16: 400, 64: 400, 256: 200, 1024: 40, 2048: 12}.get(units, 40)


def throughput_table(units=BENCH_UNITS, repeats: int = 3, peak: float | None = None,
                     steps: int | None = None, one_process: bool = False) -> list[dict[str, float]]:
    """Return, per width, lmcbook and naive model-samples/s (medians over interleaved repeats) and their ratio.

    ``steps`` (training steps per measurement) defaults to a per-width count long enough to time.
    With ``one_process``, widths too wide to stack also report the throughput of training the runs one after
    another in one process (``one_process_samples_per_s``), measured beside the others.
    """
    peak = peak or matmul_peak_gflops()
    rows = []
    for u in units:
        n_steps = steps or _steps_for(u)
        lm, nv = [], []
        lmcbook_throughput(u, 4), naive_throughput(u, 4)  # warm up allocators and kernels
        for _ in range(repeats):
            lm.append(lmcbook_throughput(u, n_steps))
            nv.append(naive_throughput(u, n_steps))
        lm_s, nv_s = statistics.median(lm), statistics.median(nv)
        params = count_parameters(build(_spec(u, 0, 1).model, (1, 8, 8), 10))
        gflops = 6 * params * lm_s / 1e9
        row = {"hidden_units": u, "lmcbook_samples_per_s": lm_s, "naive_samples_per_s": nv_s,
               "speedup": lm_s / nv_s, "achieved_gflops": gflops, "fraction_of_peak": gflops / peak}
        if one_process and u > STACK_MAX_UNITS:
            row["one_process_samples_per_s"] = statistics.median(one_process_throughput(u, n_steps)
                                                                 for _ in range(repeats))
        rows.append(row)
    return rows


def probe_fraction(profile: str = "quick") -> dict[str, float]:
    """Return the time of all metrics and probes of the width sweep over its training time, measured here.

    Also returns the split: ``metrics_s`` (interpolation curves and barriers of the
    first two pages) and ``probes_only_s`` (the theory probes), with the latter's fraction.

    The sweep is trained into a temporary store (as ``make book`` would, stacked by width),
    then every metric and probe the book computes on it is timed with the cache empty.
    """
    study = part_study("width", profile)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        t0 = time.perf_counter()
        trained_pairs(study, store)
        train_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pair_frames(study, store)
        metrics_s = time.perf_counter() - t0
        probe_frames(study, store)
        probe_s = time.perf_counter() - t0
    return {"train_s": train_s, "probe_s": probe_s, "probe_fraction": probe_s / train_s,
            "metrics_s": metrics_s, "probes_only_s": probe_s - metrics_s,
            "probes_only_fraction": (probe_s - metrics_s) / train_s}


def book_times(root: str | Path = ".") -> dict[str, float]:
    """Return the wall time of ``make book`` cold (empty store, nothing generated) and warm (nothing changed).

    Runs in a copy of the repository's book sources with its own store, so ./runs and
    book/generated are left alone; the environment (.venv) is the current one.
    """
    root = Path(root).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(root, work, ignore=shutil.ignore_patterns(".venv", "runs", "_build", "generated", ".git",
                                                                   "__pycache__", ".pytest_cache"))
        env = dict(os.environ, LMCBOOK_STORE=str(Path(tmp) / "store"))
        env.pop("LMCBOOK_OUT", None)
        exe = Path(sys.executable).parent
        cmds = [[str(exe / "lmcbook"), "execute", "--profile", "quick"], [str(exe / "lmcbook"), "build"]]
        times = {}
        for label in ("cold_s", "warm_s"):
            t0 = time.perf_counter()
            for cmd in cmds:
                proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"book_times ({label}): `{' '.join(cmd[-3:])}` failed (exit {proc.returncode})"
                                       f":\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            times[label] = time.perf_counter() - t0
    return times


#: The wide widths of the paper's MLP on MNIST (784 → h → h → h → 10, bias-free; 4×, 8× and 16× its 512 units).
WIDE_UNITS = (2048, 4096, 8192)
#: Each precision a run's spec can name, and the dtype of its matrix products (``TrainSpec.precision``).
PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
#: A training example of full MNIST that the paper recipe's runs see: 28×28 inputs, 55,000 training images.
MNIST_TRAIN = 55_000


def _paper_mlp_spec(units: int, steps: int, precision: str) -> RunSpec:
    """Return a run of the paper profile's MLP recipe (:data:`lmcbook.studies.PAPER_MLP_RECIPE`) at ``units``
    hidden units, ``steps`` steps long, in ``precision``."""
    from ..studies import PAPER_MLP_RECIPE

    r = {name: value for name, (value, _) in PAPER_MLP_RECIPE.items()}
    return RunSpec(DataSpec("mnist"), ModelSpec("mlp", units / r["base_width"], r["base_width"], r["depth"], r["norm"],
                                                r["bias"]),
                   TrainSpec(steps=steps, batch_size=r["batch_size"], lr=r["lr"], momentum=r["momentum"],
                             weight_decay=r["weight_decay"], warmup=r["warmup"], precision=precision))


def recipe_steps() -> int:
    """Return the steps of one run of the paper MLP recipe on full MNIST: its epochs over 55,000 images."""
    from ..specs import steps_per_epoch
    from ..studies import PAPER_MLP_RECIPE

    return PAPER_MLP_RECIPE["epochs"][0] * steps_per_epoch(MNIST_TRAIN, PAPER_MLP_RECIPE["batch_size"][0])


def _wide_steps(units: int, precision: str) -> int:
    """Return a step count long enough to time at ``units`` (about 2 s of work, at least 2 steps)."""
    return max(2, int(2 * (2048 / units) ** 2 * (4 if precision == "fp32" else 1)))


def wide_table(units=WIDE_UNITS, precisions=tuple(PRECISION_DTYPES), steps: int | None = None,
               repeats: int = 2) -> dict[str, Any]:
    """Return the paper MLP's training throughput at wide widths in each precision, as a fraction of that
    precision's matrix-product peak measured in the same run, and what one run of the recipe costs.

    Each row trains the recipe's MLP (:func:`lmcbook.train.train`, the one training path, on MNIST-shaped random
    inputs: the cost does not depend on the pixels) for ``steps`` steps after a one-step warm-up, the median of
    ``repeats``; ``fraction_of_peak`` is its achieved GFLOP/s (6 × parameters × batch per step) over
    ``peaks[precision]``; ``hours_per_network`` is :func:`recipe_steps` at that rate, with this process's threads.
    """
    from ..data import from_arrays

    rng = np.random.default_rng(0)
    n = 512
    x, y = rng.random((n, 1, 28, 28), dtype=np.float32), np.arange(n) % 10
    data = from_arrays("mnist", x, y, x[:64], y[:64], x[:64], y[:64], 10, device="cpu")
    peaks = {p: matmul_peak_gflops(dtype=PRECISION_DTYPES[p]) for p in precisions}
    total = recipe_steps()
    rows = []
    for u in units:
        for p in precisions:
            n_steps = steps or _wide_steps(u, p)
            train(_paper_mlp_spec(u, 1, p), data)  # warm-up: allocations, kernels
            per_step = statistics.median(train(_paper_mlp_spec(u, n_steps, p), data).provenance["train_seconds"]
                                         / n_steps for _ in range(repeats))
            spec = _paper_mlp_spec(u, 1, p)
            params = count_parameters(build(spec.model, (1, 28, 28), 10))
            gflops = 6 * params * spec.train.batch_size / per_step / 1e9
            rows.append({"hidden_units": u, "precision": p, "seconds_per_step": per_step, "achieved_gflops": gflops,
                         "peak_gflops": peaks[p], "fraction_of_peak": gflops / peaks[p],
                         "hours_per_network": total * per_step / 3600})
    return {"peaks": peaks, "recipe_steps": total, "threads": torch.get_num_threads(), "rows": rows}


# -- lmcbook diagnose on the checkpoints people have --------------------------------------------------------------
#: A small MNIST CNN (conv → max-pool → conv → max-pool → flatten → linear), as a reader's factory file would give it.
_CNN_FILE = """from torch import nn


def cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5, padding=2),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
"""
#: Each diagnose case's targets on 2 cores (issue 52): wall seconds, peak memory (MB), system over user time.
DIAGNOSE_TARGETS = {"two-seed CNN": {"wall_s": 10.0, "max_rss_mb": 1024.0, "sys_over_user": 0.2},
                    "soup of 8 MLPs": {"wall_s": 30.0}}


def _diagnose_inputs(root: Path, quick: bool) -> dict[str, list[str]]:
    """Write MNIST-shaped data (random pixels, 10 classes; the cost does not depend on what the pixels show), two
    seeds of the CNN and eight MLPs (784 → 200 → 200 → 10, federated averaging's "2NN") into ``root``; return each
    case's diagnose arguments."""
    rng = np.random.default_rng(0)
    n_train, n_test = (500, 500) if quick else (5000, 10000)
    x = rng.random((n_train + n_test, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, n_train + n_test)
    for name, xs in (("images", x), ("flat", x.reshape(len(x), -1))):
        np.savez(root / f"{name}.npz", x_train=xs[:n_train], y_train=y[:n_train], x_test=xs[n_train:],
                 y_test=y[n_train:])
    (root / "cnn.py").write_text(_CNN_FILE)
    namespace: dict[str, Any] = {}
    exec(compile(_CNN_FILE, "cnn.py", "exec"), namespace)  # noqa: S102 (our own source, above)
    from safetensors.torch import save_file

    for seed in range(2):
        torch.manual_seed(seed)
        save_file(namespace["cnn"]().state_dict(), str(root / f"cnn{seed}.safetensors"))
    for seed in range(8):
        torch.manual_seed(seed)
        mlp = build(ModelSpec("mlp", 1.0, 200, 3, "none", False), (784,), 10)
        save_file(mlp.state_dict(), str(root / f"mlp{seed}.safetensors"))
    return {"two-seed CNN": ["cnn0.safetensors", "cnn1.safetensors", "--model", "cnn.py:cnn", "--data", "images.npz"],
            "soup of 8 MLPs": [*(f"mlp{k}.safetensors" for k in range(8)), "--model", "mlp", "--model-args",
                               "{base_width: 200, width: 1, depth: 3}", "--data", "flat.npz"]}


def diagnose_cases(quick: bool = False) -> list[dict[str, Any]]:
    """Return, per diagnose case, the command's wall seconds, user and system seconds and peak memory, each run as
    a reader runs it (``lmcbook diagnose`` in a fresh process, its imports included), measured with ``os.wait4``."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, args in _diagnose_inputs(root, quick).items():
            env = {**os.environ, "LMCBOOK_PROGRESS": "0"}
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-m", "lmcbook.cli", "diagnose", *args, "--out", "report"],
                                    cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            if status != 0:
                raise RuntimeError(f"lmcbook diagnose ({name}) failed: {proc.stderr.read().decode()[-2000:]}")
            proc.stderr.close()
            rss_kb = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)  # bytes on macOS, KiB on Linux
            rows.append({"case": name, "wall_s": wall, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
                         "sys_over_user": usage.ru_stime / max(usage.ru_utime, 1e-9), "max_rss_mb": rss_kb / 1024})
    return rows


#: The targets each ``lmcbook bench`` row is held to.
SPEEDUP_TARGETS = {16: 3.0, 64: 3.0, 256: 1.5, 1024: 1.3, 2048: 1.3}
PEAK_TARGET = 0.7  #: fraction of the matmul peak at the widest benchmarked width, max(BENCH_UNITS)
#: bf16 training of the paper's MLP, fraction of the bf16 matmul peak, at each of these widths (issue 48)
WIDE_BF16_TARGET = 0.6
WIDE_TARGET_UNITS = (4096, 8192)
PROBE_TARGET = 0.10  #: probes and metrics over training time, on the quick width sweep
BOOK_TARGETS = {"cold_s": 900.0, "warm_s": 30.0}  #: the quick book, seconds


def _target(name: str, value: float, bound: float, at_least: bool) -> dict[str, Any]:
    met = value >= bound if at_least else value <= bound
    return {"name": name, "value": value, "target": f"{'>=' if at_least else '<='} {bound:g}", "met": bool(met)}


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Return every target the report is held to: its name, the measured value, the bound, and whether it is met."""
    out = []
    widest = max((r["hidden_units"] for r in report["widths"]), default=None)
    for r in report["widths"]:
        u = r["hidden_units"]
        out.append(_target(f"speedup at {u} units", r["speedup"], SPEEDUP_TARGETS.get(u, 1.0), True))
        if u == widest == max(BENCH_UNITS):
            out.append(_target(f"fraction of peak at {u} units", r["fraction_of_peak"], PEAK_TARGET, True))
    for r in report.get("wide", {}).get("rows", []):
        if r["precision"] == "bf16" and r["hidden_units"] in WIDE_TARGET_UNITS:
            out.append(_target(f"bf16 fraction of the bf16 peak at {r['hidden_units']} units (paper MLP)",
                               r["fraction_of_peak"], WIDE_BF16_TARGET, True))
    if "probe_fraction" in report:
        out.append(_target("probe_fraction", report["probe_fraction"], PROBE_TARGET, False))
    for row in report.get("diagnose", []):
        for key, bound in DIAGNOSE_TARGETS.get(row["case"], {}).items():
            out.append(_target(f"diagnose, {row['case']}: {key}", row[key], bound, False))
    for key, bound in BOOK_TARGETS.items() if "book" in report else ():
        out.append(_target(f"book {key[:-2]} (s)", report["book"][key], bound, False))
    return out


def run(json_path: str | Path | None = None, book: bool = False, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark, print its table and its targets, and return (and optionally write) the JSON report.

    ``report["targets"]`` lists every target and whether it was met; ``lmcbook bench`` exits
    non-zero when any is missed.
    """
    torch.set_num_threads(os.cpu_count() or 1)
    peak = matmul_peak_gflops()
    units = (16, 64, 256) if quick else BENCH_UNITS
    report: dict[str, Any] = {"matmul_peak_gflops": peak, "threads": torch.get_num_threads(),
                              "widths": throughput_table(units, repeats=1 if quick else 3, peak=peak,
                                                         one_process=not quick)}
    if not quick:
        report["wide"] = wide_table()
        report.update(probe_fraction())
    report["diagnose"] = diagnose_cases(quick)
    if book:
        report["book"] = book_times()
    report["targets"] = targets(report)
    print(format_report(report))
    if json_path is not None:
        Path(json_path).write_text(json.dumps(report, indent=1))
    return report


def format_report(report: dict[str, Any]) -> str:
    """Return the report as Markdown: the throughput table, probe and book times, and every target's verdict."""
    lines = [f"matmul peak (fp32, {report.get('threads', '?')} threads): {report['matmul_peak_gflops']:.0f} GFLOP/s",
             "", "| hidden units | lmcbook samples/s | naive samples/s | speedup | GFLOP/s | of peak | one process, "
             "runs in turn |", "|---|---|---|---|---|---|---|"]
    for r in report["widths"]:
        two = r.get("one_process_samples_per_s")
        lines.append(f"| {r['hidden_units']} | {r['lmcbook_samples_per_s']:,.0f} | {r['naive_samples_per_s']:,.0f} | "
                     f"{r['speedup']:.2f} | {r['achieved_gflops']:.1f} | {r['fraction_of_peak']:.2f} | "
                     + (f"{two:,.0f} ({two / r['naive_samples_per_s']:.2f}× naive) |" if two else "— |"))
    if "wide" in report:
        w = report["wide"]
        lines += ["", f"the paper's MLP on MNIST (784 → h → h → h → 10, batch 128), {w['threads']} threads; one run of "
                  f"its recipe is {w['recipe_steps']:,} steps; peaks: "
                  + ", ".join(f"{p} {g:.0f} GFLOP/s" for p, g in w["peaks"].items()), "",
                  "| hidden units | precision | s/step | GFLOP/s | of its peak | hours per network |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['hidden_units']} | {r['precision']} | {r['seconds_per_step']:.3f} | "
                  f"{r['achieved_gflops']:.0f} | {r['fraction_of_peak']:.2f} | {r['hours_per_network']:.2f} |"
                  for r in w["rows"]]
    if "probe_fraction" in report:
        lines += ["", f"probe_fraction: {report['probe_fraction']:.3f} (probes and metrics {report['probe_s']:.1f} s "
                  f"over training {report['train_s']:.1f} s)",
                  f"  of which metrics (interpolation curves, barriers) {report['metrics_s']:.1f} s and probes "
                  f"{report['probes_only_s']:.1f} s, a fraction of {report['probes_only_fraction']:.3f}"]
    if report.get("diagnose"):
        lines += ["", "lmcbook diagnose, as a reader runs it (a fresh process, imports included):", "",
                  "| case | wall s | user s | system s | system / user | peak memory MB |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['case']} | {r['wall_s']:.1f} | {r['user_s']:.1f} | {r['sys_s']:.1f} | "
                  f"{r['sys_over_user']:.2f} | {r['max_rss_mb']:.0f} |" for r in report["diagnose"]]
    if "book" in report:
        lines += ["", f"book: cold {report['book']['cold_s']:.0f} s, warm {report['book']['warm_s']:.0f} s"]
    verdicts = report.get("targets") or targets(report)
    lines += ["", "| target | measured | bound | met |", "|---|---|---|---|"]
    lines += [f"| {t['name']} | {t['value']:.3g} | {t['target']} | {'yes' if t['met'] else 'NO'} |" for t in verdicts]
    missed = [t["name"] for t in verdicts if not t["met"]]
    lines.append(f"missed: {', '.join(missed)}" if missed else "every target met")
    return "\n".join(lines)
