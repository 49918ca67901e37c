"""The execution report of ``lmcbook execute`` (``execution.json``, the report page and the landing page's build
line): what each notebook's latest execution did, and the build's facts."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__, reference
from .page import record_path
from .parts import all_notebooks, part_of
from .provenance import git_sha
from .specs import CODE_VERSION


@dataclass
class Outcome:
    """What executing one notebook did."""

    name: str
    ok: bool
    seconds: float
    loaded: int = 0
    trained: int = 0
    error: str = ""
    cached: bool = False

REPORT_JSON = "execution.json"  #: in the output folder: every notebook's last execution, and the build's facts
REPORT_PAGE = "report.md"  #: the execution report page (About this book), rendered from REPORT_JSON
BUILD_LINE = "build_info.md"  #: one line for the landing page: commit, profile, date, CI run


def ci_run() -> dict[str, str] | None:
    """Return the CI run that is building the book (GitHub Actions' ``GITHUB_SHA``, ``GITHUB_RUN_ID`` and
    ``GITHUB_SERVER_URL``), with its URL, or None when they are not set."""
    sha, run, server = (os.environ.get(k) for k in ("GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_SERVER_URL"))
    if not (sha and run and server):
        return None
    repo = os.environ.get("GITHUB_REPOSITORY", "")
    url = f"{server}/{repo}/actions/runs/{run}" if repo else f"{server}/actions/runs/{run}"
    return {"sha": sha, "run_id": run, "url": url}


def _uncommitted() -> bool | None:
    """Return whether the checkout the library runs from has uncommitted changes (None outside a checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def _machine() -> str:
    import platform

    import torch

    gpu = f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPU cores{gpu})"


def write_report(out: Path, outcomes: list[Outcome], profile: str, params: dict[str, dict[str, Any]]) -> dict:
    """Write the execution report of ``out`` (``execution.json``, ``report.md`` and ``build_info.md``) and return it.

    Every notebook of the book has a row: what the latest :func:`execute` that included it did (``executed``,
    ``cached`` or ``failed``), its wall time in that execution, the runs it loaded and trained, and the code
    version its output was computed with; a notebook no execution has included yet is ``not executed``.  The
    build's facts: commit, profile, data sets, machine, date, and the CI run when one is building.
    """
    path = out / REPORT_JSON
    try:
        before = json.loads(path.read_text()).get("notebooks", {}) if path.exists() else {}
    except ValueError:
        before = {}
    rows = dict(before)
    for o in outcomes:
        prev = rows.get(o.name, {})
        try:
            rec = json.loads(record_path(out, o.name).read_text())
        except (OSError, ValueError):
            rec = {}
        status = "cached" if o.cached else "executed" if o.ok else "failed"
        study = part_of(o.name).resolve(profile, params.get(o.name, {}))
        # a failed execution keeps the last good output (if any): its record says what computed it
        rows[o.name] = {"status": status, "seconds": round(o.seconds, 1), "loaded": o.loaded, "trained": o.trained,
                        "code_version": rec.get("code_version", prev.get("code_version")), "error": o.error,
                        "profile": profile if o.ok else prev.get("profile"),
                        "dataset": getattr(study, "dataset", None) if o.ok else prev.get("dataset")}
    datasets = {r["dataset"] for r in rows.values() if r.get("dataset")}
    report = {"notebooks": {n: rows[n] for n in all_notebooks() if n in rows},
              "build": {"commit": git_sha(), "uncommitted_changes": _uncommitted(), "profile": profile,
                        "datasets": sorted(datasets), "machine": _machine(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "lmcbook": __version__,
                        "code_version": CODE_VERSION, "ci": ci_run()}}
    _write_atomic(path, json.dumps(report, indent=1))  # notebooks in the book's order
    _write_atomic(out / REPORT_PAGE, report_markdown(report))
    _write_atomic(out / BUILD_LINE, build_line(report))
    return report


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def build_line(report: dict) -> str:
    """Return the landing page's line about this build: commit, profile, date, and the CI run if there is one."""
    b = report["build"]
    commit = f"commit `{(b['commit'] or 'unknown')[:10]}`" + (" with uncommitted changes" if b.get(
        "uncommitted_changes") else "")
    ci = f"; [CI run {b['ci']['run_id']}]({b['ci']['url']})" if b.get("ci") else ""
    profiles = sorted({str(r.get("profile")) for r in report["notebooks"].values() if r.get("profile")})
    profile = f"profile `{b['profile']}`" if profiles in ([], [b["profile"]]) else \
        "profiles " + ", ".join(f"`{p}`" for p in profiles) + " (mixed)"
    return (f"*This build: {commit}, {profile}, {b['date']}{ci}. What each page did is in the "
            "{doc}`execution report <report>`.*\n")


def report_markdown(report: dict) -> str:
    """Return the execution report page (MyST Markdown) of :func:`write_report`'s record."""
    b, rows = report["build"], report["notebooks"]
    lines = ["# Execution report", "",
             f"This book was built from commit `{b['commit'] or 'unknown'}`"
             f"{' with uncommitted changes' if b.get('uncommitted_changes') else ''} at the `{b['profile']}` "
             f"profile on {b['date']}, on {b['machine']}, with lmcbook {b['lmcbook']} "
             f"(code version {b['code_version']}). Data sets: {', '.join(b['datasets']) or 'none'}."]
    if b.get("ci"):
        lines += ["", f"Built in CI: [run {b['ci']['run_id']}]({b['ci']['url']}), commit `{b['ci']['sha']}`."]
    lines += ["", "Each notebook as the latest `lmcbook execute` that included it left it: *executed* (run now), "
              "*cached* (its source, parameters, library and inputs were unchanged, so its last output was kept) or "
              "*failed* (the last good output was kept). Wall time, runs loaded and runs trained are that "
              "execution's; the code version is the one its output was computed with.", "",
              "| notebook | status | wall time (s) | runs loaded | runs trained | code version |",
              "|---|---|---:|---:|---:|---:|"]
    for name in all_notebooks():
        r = rows.get(name)
        if r is None:
            lines.append(f"| {name} | not executed | | | | |")
            continue
        lines.append(f"| {{doc}}`{name} <{name}>` | {r['status']} | {r['seconds']:.1f} | {r['loaded']} | "
                     f"{r['trained']} | {'–' if r['code_version'] is None else r['code_version']} |")
    counts = {s: sum(r["status"] == s for r in rows.values()) for s in ("executed", "cached", "failed")}
    lines.append(f"| **total** | {', '.join(f'{n} {s}' for s, n in counts.items())} | "
                 f"{sum(r['seconds'] for r in rows.values()):.1f} | {sum(r['loaded'] for r in rows.values())} | "
                 f"{sum(r['trained'] for r in rows.values())} | |")
    profiles = sorted({str(r.get("profile")) for r in rows.values() if r.get("profile")})
    if len(profiles) > 1:  # an `execute --only` at another profile replaced some pages
        lines += ["", "**Mixed profiles.** These pages come from executions at different profiles: " + "; ".join(
            f"`{p}`: {', '.join(n for n, r in rows.items() if r.get('profile') == p)}" for p in profiles) + "."]
    failed = [(n, r["error"]) for n, r in rows.items() if r["status"] == "failed"]
    if failed:
        lines += ["", "Failures:", ""] + [f"- `{n}`: {e}" for n, e in failed]
    lines += ["", "## Reference runs", "",
              "Results too costly for this build are committed under `results/` with their provenance, and the pages "
              "show them beside this build's runs. `lmcbook reference NAME` regenerates one and rewrites its "
              "provenance.", ""]
    for name in reference.REFERENCES:
        try:
            _, prov = reference.load(name)
            lines.append(f"- {reference.describe(name, prov)}.")
        except (OSError, ValueError) as e:  # not committed, or not the CSV its provenance names
            lines.append(f"- `{name}`: not available ({e}).")
    return "\n".join(lines) + "\n"

