"""``lmcbook bench``: the report's shape and arithmetic (no test here checks a time)."""

import json

import pytest

from lmcbook.tools import bench


def test_throughput_table_has_the_documented_fields_and_ratios():
    peak = bench.matmul_peak_gflops(n=256, repeats=1)
    rows = bench.throughput_table(units=(16, 64), repeats=1, peak=peak, steps=8)
    assert peak > 0 and [w["hidden_units"] for w in rows] == [16, 64]
    for w in rows:
        assert set(w) == {"hidden_units", "lmcbook_samples_per_s", "naive_samples_per_s", "speedup",
                          "achieved_gflops", "fraction_of_peak"}
        assert w["lmcbook_samples_per_s"] > 0 and w["naive_samples_per_s"] > 0
        assert w["speedup"] == pytest.approx(w["lmcbook_samples_per_s"] / w["naive_samples_per_s"])
        assert w["fraction_of_peak"] == pytest.approx(w["achieved_gflops"] / peak)
    report = {"matmul_peak_gflops": peak, "threads": 1, "widths": rows}
    text = bench.format_report(report)
    assert "| 16 |" in text and "| 64 | " in text
    assert "fraction of peak" not in text.split("| target |")[1]  # held only at the widest width, max(BENCH_UNITS)
    assert json.loads(json.dumps(report)) == report  # the --json report is plain JSON


def test_probe_fraction_splits_metrics_from_probes():
    r = bench.probe_fraction("smoke")
    assert r["train_s"] > 0 and r["metrics_s"] > 0 and r["probes_only_s"] > 0
    assert r["probe_s"] == pytest.approx(r["metrics_s"] + r["probes_only_s"])
    assert r["probe_fraction"] == pytest.approx(r["probe_s"] / r["train_s"])
    assert r["probes_only_fraction"] == pytest.approx(r["probes_only_s"] / r["train_s"])
    text = bench.format_report({"matmul_peak_gflops": 1.0, "threads": 1, "widths": [], **r})
    assert f"probe_fraction: {r['probe_fraction']:.3f}" in text
    assert f"a fraction of {r['probes_only_fraction']:.3f}" in text


def test_each_width_is_timed_with_its_own_step_count(monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "lmcbook_throughput", lambda u, steps: calls.append((u, steps)) or 2.0)
    monkeypatch.setattr(bench, "naive_throughput", lambda u, steps: 1.0)
    rows = bench.throughput_table(units=(16, 1024), repeats=1, peak=1.0)
    timed = [c for c in calls if c[1] != 4]  # 4 steps: the warm-up
    assert timed == [(16, bench._steps_for(16)), (1024, bench._steps_for(1024))]
    assert bench._steps_for(16) != bench._steps_for(1024)
    assert [r["speedup"] for r in rows] == [2.0, 2.0]


def test_every_target_is_named_with_its_verdict_and_a_miss_fails_the_command(monkeypatch, capsys):
    rows = [{"hidden_units": u, "lmcbook_samples_per_s": 2.0, "naive_samples_per_s": 1.0, "speedup": sp,
             "achieved_gflops": 1.0, "fraction_of_peak": frac} for u, sp, frac in ((16, 4.0, 0.1), (2048, 1.2, 0.8))]
    report = {"matmul_peak_gflops": 1.0, "threads": 2, "widths": rows, "probe_fraction": 0.05, "probe_s": 1.0,
              "train_s": 20.0, "metrics_s": 0.5, "probes_only_s": 0.5, "probes_only_fraction": 0.025,
              "book": {"cold_s": 800.0, "warm_s": 40.0}}
    verdicts = {t["name"]: t["met"] for t in bench.targets(report)}
    assert verdicts == {"speedup at 16 units": True, "speedup at 2048 units": False,
                        "fraction of peak at 2048 units": True, "probe_fraction": True, "book cold (s)": True,
                        "book warm (s)": False}
    assert "missed: speedup at 2048 units, book warm (s)" in bench.format_report(report)
    from lmcbook import cli

    monkeypatch.setattr(cli, "run_bench", lambda *a, **k: {**report, "targets": bench.targets(report)})
    assert cli.main(["bench"]) == 1
    report["widths"][1]["speedup"], report["book"]["warm_s"] = 1.4, 10.0
    assert cli.main(["bench"]) == 0


def test_side_by_side_time_is_the_busiest_process_and_one_process_adds_every_run(monkeypatch):
    # pid 1 trained two runs (1.0 + 0.5 s), pid 2 one (1.2 s): the processes overlap, a process's runs add up
    provs = [{"pid": 1, "train_seconds": 1.0}, {"pid": 2, "train_seconds": 1.2}, {"pid": 1, "train_seconds": 0.5}]
    assert bench.side_by_side_seconds(provs) == 1.5

    class Fake:  # each seed "takes" 0.25 s more than the last
        def __init__(self, seed):
            self.provenance = {"train_seconds": 0.25 * (seed + 1)}

    monkeypatch.setattr(bench, "train", lambda spec, data: Fake(spec.train.seed))
    assert bench.one_process_throughput(64, steps=3, models=4) == 4 * 3 * 128 / 2.5


def test_quick_bench_is_not_held_to_the_peak_fraction_of_the_widest_width():
    rows = [{"hidden_units": u, "speedup": 3.0, "fraction_of_peak": 0.1} for u in (16, 64, 256)]
    names = [t["name"] for t in bench.targets({"widths": rows})]
    assert names == ["speedup at 16 units", "speedup at 64 units", "speedup at 256 units"]


def test_wide_table_reports_each_precision_against_its_own_peak_and_the_recipes_cost(monkeypatch):
    """The wide rows (issue 48): per width and precision, the paper MLP's seconds per step, its GFLOP/s as a
    fraction of that precision's matmul peak from the same run, and the hours one run of the recipe takes."""
    from lmcbook.models import build, count_parameters
    from lmcbook.studies import PAPER_MLP_RECIPE

    peaks = {"fp32": 100.0, "bf16": 50.0}
    monkeypatch.setattr(bench, "matmul_peak_gflops", lambda dtype=None, **k: peaks[
        {bench.torch.float32: "fp32", bench.torch.bfloat16: "bf16"}[dtype]])
    w = bench.wide_table(units=(32, 64), steps=2, repeats=1)
    assert w["peaks"] == peaks
    assert w["recipe_steps"] == PAPER_MLP_RECIPE["epochs"][0] * (55_000 // PAPER_MLP_RECIPE["batch_size"][0])
    assert [(r["hidden_units"], r["precision"]) for r in w["rows"]] == [(32, "fp32"), (32, "bf16"), (64, "fp32"),
                                                                         (64, "bf16")]
    for r in w["rows"]:
        assert set(r) == {"hidden_units", "precision", "seconds_per_step", "achieved_gflops", "peak_gflops",
                          "fraction_of_peak", "hours_per_network"}
        spec = bench._paper_mlp_spec(r["hidden_units"], 1, r["precision"])
        assert spec.model.width * spec.model.base_width == r["hidden_units"] and not spec.model.bias
        assert spec.train.precision == r["precision"] and spec.train.weight_decay == 3e-3
        params = count_parameters(build(spec.model, (1, 28, 28), 10))
        assert params == 784 * r["hidden_units"] + 2 * r["hidden_units"] ** 2 + 10 * r["hidden_units"]
        assert r["achieved_gflops"] == pytest.approx(6 * params * 128 / r["seconds_per_step"] / 1e9)
        assert r["peak_gflops"] == peaks[r["precision"]]
        assert r["fraction_of_peak"] == pytest.approx(r["achieved_gflops"] / peaks[r["precision"]])
        assert r["hours_per_network"] == pytest.approx(w["recipe_steps"] * r["seconds_per_step"] / 3600)
    report = {"matmul_peak_gflops": 1.0, "threads": 1, "widths": [], "wide": w}
    assert json.loads(json.dumps(report)) == report
    text = bench.format_report(report)
    assert "| 64 | bf16 |" in text and f"{w['recipe_steps']:,} steps" in text


def test_the_bf16_target_holds_at_4096_and_8192_units_only():
    rows = [{"hidden_units": u, "precision": p, "fraction_of_peak": f}
            for u, p, f in ((2048, "bf16", 0.1), (4096, "bf16", 0.65), (8192, "bf16", 0.5), (8192, "fp32", 0.1))]
    verdicts = {t["name"]: t["met"] for t in bench.targets({"widths": [], "wide": {"rows": rows}})}
    assert verdicts == {"bf16 fraction of the bf16 peak at 4096 units (paper MLP)": True,
                        "bf16 fraction of the bf16 peak at 8192 units (paper MLP)": False}


def test_the_diagnose_cases_are_held_to_their_targets_and_printed():
    rows = [{"case": "two-seed CNN", "wall_s": 8.0, "user_s": 10.0, "sys_s": 3.0, "sys_over_user": 0.3,
             "max_rss_mb": 900.0},
            {"case": "soup of 8 MLPs", "wall_s": 45.0, "user_s": 80.0, "sys_s": 1.0, "sys_over_user": 0.0125,
             "max_rss_mb": 700.0}]
    verdicts = {t["name"]: t["met"] for t in bench.targets({"widths": [], "diagnose": rows})}
    assert verdicts == {"diagnose, two-seed CNN: wall_s": True, "diagnose, two-seed CNN: max_rss_mb": True,
                        "diagnose, two-seed CNN: sys_over_user": False, "diagnose, soup of 8 MLPs: wall_s": False}
    text = bench.format_report({"matmul_peak_gflops": 1.0, "threads": 2, "widths": [], "diagnose": rows})
    assert "| two-seed CNN | 8.0 | 10.0 | 3.0 | 0.30 | 900 |" in text and "soup of 8 MLPs: wall_s" in text
