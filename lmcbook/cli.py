"""The ``lmcbook`` command: execute notebooks, build the book, train a part, inspect the store."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path

from tqdm.auto import tqdm

from . import __version__, reference, studies
from .data import DataError
from .specs import STORE_ENV, SpecError, check_scheduler, checked_path
from .store import RunStore, StoreError, describe, run_all
from .tools.bench import run as run_bench
from .train import DivergedError


def _params(pairs: list[list[str]] | None) -> dict:
    from .book import parse_param

    return {k: parse_param(v, k) for k, v in (pairs or [])}


# the book's toolchain (papermill, jupytext, Jupyter Book) is the [book] extra: imported only by the commands that
# need it, so that `lmcbook diagnose` runs from a wheel installed without extras
def cmd_execute(args) -> int:
    from .book import execute

    outcomes = execute(args.only, args.profile, _params(args.p), args.out, args.notebooks, args.store, args.force)
    failed = [o for o in outcomes if not o.ok]
    total = sum(o.seconds for o in outcomes)
    print(f"executed {sum(not o.cached for o in outcomes)} notebook(s), skipped {sum(o.cached for o in outcomes)} "
          f"(cached), in {total:.0f} s; "
          f"{sum(o.loaded for o in outcomes)} run(s) loaded from the store, "
          f"{sum(o.trained for o in outcomes)} trained", file=sys.stderr)
    for o in failed:
        print(f"FAILED {o.name}: {o.error}", file=sys.stderr)
    return 1 if failed else 0


def cmd_build(args) -> int:
    from .book import build

    index = build(args.src, args.generated, args.builddir)
    print(index)
    return 0


def cmd_train(args) -> int:
    study = studies.study(args.part, args.profile, **_params(args.p))
    store = RunStore(args.store)
    specs = list(dict.fromkeys(study.specs()))
    by_data: dict[tuple[str, str], list] = {}
    for s in specs:
        by_data.setdefault((s.data.name, s.data.transform), []).append(s)
    runs, failed = {}, {}
    for group in by_data.values():  # runs of one shape train stacked; one call per data set and task
        try:
            runs.update(zip([s.id for s in group], store.get_or_train_many(group, device=study.device)))
        except DivergedError as err:  # the group's other runs are stored; report the diverged one, go on
            failed[err.run_id] = str(err)
            for s in group:
                if s.id != err.run_id and s.id not in failed:
                    try:
                        runs[s.id] = store.load(s, study.device, record=False)
                    except StoreError:
                        failed[s.id] = "not stored: it was not trained after the run above diverged"
    for i, spec in enumerate(specs, 1):
        run = runs.get(spec.id)
        status = f"test_acc={run.metrics['test_acc']:.3f}" if run is not None else f"FAILED: {failed[spec.id]}"
        print(f"[{i}/{len(specs)}] {spec.short_id} {describe(spec)} {status}", file=sys.stderr)
    print(f"{len(runs)} of {len(specs)} runs in the store", file=sys.stderr)
    return 1 if failed else 0


def cmd_store(args) -> int:
    age = _parse_age(args.older_than) if args.older_than is not None else None  # bad input fails first
    store = RunStore(args.store)
    if not store.root.is_dir():
        raise StoreError(f"store={str(store.root)!r} is not allowed: no such directory; expected a run store "
                         f"(--store DIR, or ${STORE_ENV}, default ./runs)")
    foreign = store.foreign_names()
    if foreign:
        raise StoreError(f"store={str(store.root)!r} is not allowed: it is not a run store (it holds "
                         f"{', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}, which a store never "
                         f"does); expected a folder lmcbook made (--store DIR, or ${STORE_ENV}, default ./runs)")
    if args.action == "ls":
        for rid, spec in store.iter_specs():
            print(rid[:12], describe(spec))
        return 0
    problems = store.problems()
    if args.action == "verify":
        for kind, path, detail in problems:
            print(f"{kind.upper()} {path.relative_to(store.root)}: {detail}")
        entries = len(store.ids())
        bad = sum(kind in ("corrupt entry", "entry without a manifest") for kind, _, _ in problems)
        print(f"{entries - bad} entries OK, {bad} corrupt; {len(store.derived_entries())} derived results, "
              f"{sum(k == 'damaged derived result' for k, _, _ in problems)} damaged; "
              f"{len(store.torn_event_lines())} torn event line(s)")
        return 1 if problems else 0
    # gc: stale temporaries, corrupt entries and damaged derived results always (torn event lines are dropped);
    # valid runs only when selected by age
    doomed = [(p, "stale temporary directory") for p in store.stale_temporaries()]
    doomed += [(p, "checkpoint no run will resume from") for p in store.stale_checkpoints()]
    doomed += [(path, kind) for kind, path, _ in problems if kind != "torn event lines"]
    torn = len(store.torn_event_lines())
    if age is not None:
        doomed += [(store.path(r), f"valid run older than {args.older_than}") for r in store.entries_older_than(age)]
    if not doomed and not torn:
        print("nothing to remove")
        return 0
    try:
        store.check_writable()
    except StoreError as err:
        why = getattr(err.__cause__, "strerror", None) or err
        raise StoreError(f"store gc cannot delete from {str(store.root)!r}: it is not writable ({why}); run it as a "
                         "user who can write the store (`store verify` lists the problems without writing)") from err
    for path, why in doomed:
        print(f"remove {path.relative_to(store.root)}  ({why})")
    if torn:
        print(f"repair events.jsonl  (drop {torn} torn line(s))")
    if not args.yes:
        try:
            answer = input(f"Delete these {len(doomed) + bool(torn)} item(s) from {store.root}? [y/N] ")
        except EOFError:
            print("nothing deleted: no answer on standard input (pass --yes to delete without asking)",
                  file=sys.stderr)
            return 1
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    store.remove([p for p, _ in doomed])
    dropped = store.repair_events()
    print(f"deleted {len(doomed)} item(s); dropped {dropped} torn event line(s)")
    return 0


def _parse_age(text: str) -> float:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([smhd])", text.strip())
    if not m:
        raise SpecError(f"--older-than={text!r} is not allowed: expected a number and a unit s, m, h or d (e.g. 30d)")
    return float(m[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]]


def cmd_sweep(args) -> int:
    specs = studies.part_specs(args.profile, args.part, **_params(args.p))
    n = len(dict.fromkeys(specs))
    # a bar on a terminal, else one line per finished run (a log file, a batch job)
    bar = tqdm(total=n, desc="runs", unit="run") if sys.stderr.isatty() else None

    def report(r) -> None:
        status = f"test_acc={r.metrics.get('test_acc', float('nan')):.3f}" if r.ok else f"FAILED: {r.error}"
        if bar is not None:
            bar.update(1)
            bar.write(f"{r.id[:12]} {r.host} {status}")
        else:
            report.done += 1
            print(f"[{report.done}/{n}] {r.id[:12]} {r.host} {status}", flush=True)

    report.done = 0
    try:
        results = run_all(specs, args.scheduler, args.store, args.threads, args.device, on_result=report)
    finally:
        if bar is not None:
            bar.close()
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} runs in the store", file=sys.stderr)
    return 1 if failed else 0


def cmd_explore(args) -> int:
    source = args.notebooks / "explore.py"
    if not source.exists():
        raise SpecError(f"notebook source {str(source)!r} is missing: run lmcbook from the repository root")
    from .tools.explore import ToolError, launch

    try:
        cmd = launch(source, args.dest, args.profile, dry_run=args.dry_run)
    except ToolError as err:  # JupyterLab is not installed: say how to install it
        print(f"lmcbook: error: {err}", file=sys.stderr)
        return 2
    print(" ".join(cmd))
    return 0


def cmd_reference(args) -> int:
    if args.list or args.name is None:
        for name, ref in reference.REFERENCES.items():
            have = "committed" if reference.csv_path(name).exists() else "not committed"
            have += f", retired: {ref.retired}" if ref.retired else f", pending: {ref.pending}" if ref.pending else ""
            print(f"{name} ({have}): notebook {ref.notebook}; {ref.purpose}; data: {ref.data}")
        return 0
    from .book import regenerate_reference

    path = regenerate_reference(args.name, args.data_root, args.store, notebooks=args.notebooks)
    print(path)
    return 0


def cmd_bench(args) -> int:
    report = run_bench(args.json, book=args.book, quick=args.quick)
    return 0 if all(t["met"] for t in report["targets"]) else 1


def cmd_diagnose(args) -> int:
    import shlex
    import time

    from .tools import diagnose

    if args.check:  # the state dicts and the model only: no report is written
        ok, lines = diagnose.compatibility(args.checkpoints, args.model, args.data,
                                           diagnose.parse_model_args(args.model_args), args.data_root, args.spec,
                                           args.device, args.preprocess)
        print("\n".join(f"- {line}" for line in lines))
        return 0 if ok else 1
    t0 = time.perf_counter()
    diagnose.check_out(args.out)  # before any compute, as every other input
    prep = diagnose.prepare(args.checkpoints, args.model, args.data, diagnose.parse_model_args(args.model_args),
                            args.data_root, args.spec, args.limit, args.device,
                            diagnose.DEFAULT_LAMS if args.lams is None else args.lams, args.preprocess)
    diag = diagnose.diagnose(prep)
    command = "lmcbook diagnose " + " ".join(shlex.quote(a) for a in args.argv)
    path = diagnose.write(diag, args.out, command, time.perf_counter() - t0)
    print(diagnose.summary_table(diag).to_string(float_format=diagnose.number))
    for line in diag.reading:
        print("-", line)
    print(path)
    return 0


def parser() -> argparse.ArgumentParser:
    """Return the command line's parser."""
    ap = argparse.ArgumentParser(prog="lmcbook", description="Reproduce the width and noise papers on merging.")
    ap.add_argument("--version", action="version", version=f"lmcbook {__version__}")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every run loaded or trained")
    sub = ap.add_subparsers(dest="command", required=True)

    _book_commands(sub)
    _run_commands(sub)
    _tool_commands(sub)
    return ap


def _book_commands(sub) -> None:
    """Add the book's commands: execute, build, explore, reference."""
    ex = sub.add_parser("execute", help="run notebooks with papermill into book/generated (or --out)")
    ex.add_argument("--profile", default="quick", help="smoke | quick | paper (default: quick)")
    ex.add_argument("--only", action="append", metavar="NAME", help="run only this notebook (repeatable)")
    ex.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"),
                    help='override a parameter; VALUE is YAML, e.g. -p widths "[0.5, 2]"')
    ex.add_argument("--out", type=str, default=None, help="output directory (default: $LMCBOOK_OUT or book/generated)")
    ex.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="notebook sources")
    ex.add_argument("--store", type=str, default=None, help="run store (default: $LMCBOOK_STORE or ./runs)")
    ex.add_argument("--force", action="store_true", help="re-execute even notebooks whose cached output is current")
    ex.set_defaults(func=cmd_execute)

    bd = sub.add_parser("build", help="render the executed notebooks with Jupyter Book (-W -n --keep-going)")
    bd.add_argument("--src", type=Path, default=Path("."), help="repository root holding _config.yml")
    bd.add_argument("--generated", type=Path, default=None, help="executed notebooks, if not book/generated")
    bd.add_argument("--builddir", type=Path, default=None, help="staging directory when --generated is given")
    bd.set_defaults(func=cmd_build)

    xp = sub.add_parser("explore", help="open the interactive explorer live in JupyterLab")
    xp.add_argument("--profile", default="quick")
    xp.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    xp.add_argument("--dest", type=Path, default=Path(".lmcbook") / "explore.ipynb", help="where to write it")
    xp.add_argument("--dry-run", action="store_true", help="write the notebook and print the command only")
    xp.set_defaults(func=cmd_explore)

    rf = sub.add_parser("reference", help="regenerate a committed reference run (results/NAME/) and its provenance")
    rf.add_argument("name", nargs="?", default=None, help="the reference run; without it, list them")
    rf.add_argument("--list", action="store_true", help="list the reference runs")
    rf.add_argument("--data-root", default=None, help="the folder holding the run's data set, where it needs one")
    rf.add_argument("--store", type=str, default=None, help="run store (default: $LMCBOOK_STORE or ./runs)")
    rf.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="notebook sources")
    rf.set_defaults(func=cmd_reference)


def _run_commands(sub) -> None:
    """Add the commands that train and keep runs: train, store, sweep."""
    tr = sub.add_parser("train", help="train (or load) every run of one part of the book")
    tr.add_argument("--profile", default="quick")
    tr.add_argument("--part", default="width")
    tr.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"))
    tr.add_argument("--store", type=str, default=None)
    tr.set_defaults(func=cmd_train)

    st = sub.add_parser("store", help="list, verify or clean the run store")
    st.add_argument("action", choices=["ls", "verify", "gc"])
    st.add_argument("--store", type=str, default=None)
    st.add_argument("--older-than", default=None, metavar="AGE",
                    help="gc: also delete valid runs last written before AGE (e.g. 30d, 12h)")
    st.add_argument("--yes", action="store_true", help="gc: delete without asking")
    st.set_defaults(func=cmd_store)

    sw = sub.add_parser("sweep", help="train every run of a part, in-process or on a Dask cluster")
    sw.add_argument("--profile", default="quick")
    sw.add_argument("--part", default="width")
    sw.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sw.add_argument("--scheduler", default=None, help="local:N or tcp://HOST:PORT (default: in-process)")
    sw.add_argument("--store", type=str, default=None, help="a store root every worker can see")
    sw.add_argument("--threads", type=int, default=None, help="torch threads per task (default: cores / workers)")
    sw.add_argument("--device", default="auto")
    sw.set_defaults(func=cmd_sweep)


def _tool_commands(sub) -> None:
    """Add the tools' commands: bench and diagnose."""
    be = sub.add_parser("bench", help="measure training throughput, probe cost and (with --book) book time")
    be.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    be.add_argument("--book", action="store_true", help="also time `make book` cold and warm (minutes)")
    be.add_argument("--quick", action="store_true", help="three small widths, one repeat (a smoke test)")
    be.set_defaults(func=cmd_bench)

    dg = sub.add_parser("diagnose", help="measure your own checkpoints: barriers, calibration, LEWC, matching; "
                        "writes an HTML report with its CSV and JSON")
    dg.add_argument("checkpoints", nargs="+", metavar="CKPT", help="two or more .safetensors or PyTorch state dicts")
    dg.add_argument("--model", required=True, help="mlp | vgg11 | resnet20 | torchvision:NAME | MODULE:FACTORY")
    dg.add_argument("--model-args", default=None, metavar="YAML",
                    help="the model's arguments: for mlp, vgg11 and resnet20 the fields of lmcbook's ModelSpec, e.g. "
                    "'{base_width: 64, width: 2, depth: 3}'; for MODULE:FACTORY its keyword arguments")
    dg.add_argument("--data", required=True,
                    help="an lmcbook data set (digits, mnist1d, mnist, cifar10, ...), FILE.npz or MODULE:FUNCTION")
    dg.add_argument("--data-root", default=None, help="folder of the torchvision data sets")
    dg.add_argument("--spec", default=None, metavar="MODULE:NAME", help="a PermutationSpec (default: derived)")
    dg.add_argument("--preprocess", default=None, metavar="|".join(("standardize", "none")),
                    help="standardize: each input less the training split's mean, over its standard deviation (per "
                    "channel for images), as lmcbook's models train; none: as given (pixels in [0, 1] for lmcbook's "
                    "image sets). Default: standardize for lmcbook's data sets, none for .npz and MODULE:FUNCTION")
    dg.add_argument("--limit", type=int, default=None, help="use at most this many examples of each split")
    dg.add_argument("--lams", type=int, default=None, help="points of the λ grid in [0, 1] (default 11)")
    dg.add_argument("--device", default="auto", help="auto | cpu | cuda (default: auto)")
    dg.add_argument("--out", default="diagnose-report", help="the report folder (default: diagnose-report)")
    dg.add_argument("--check", action="store_true",
                    help="only check, from the state dicts, the model and a few inputs, whether the checkpoints share "
                    "the model's architecture, whether a permutation spec is found, whether BatchNorm statistics must "
                    "be reset, "
                    "and which merges the report would run (exit 1 if they cannot be merged); writes nothing")
    dg.set_defaults(func=cmd_diagnose)


def check(argv: list[str]) -> None:
    """Parse a command line and check its parameters as the command would, without computing anything: raise
    SpecError (or exit as argparse does) on what the command would refuse.  The README's commands are checked so."""
    args = parser().parse_args(argv)
    if args.command == "execute":
        from .book import plan

        plan(args.only, args.profile, _params(args.p), args.notebooks)
    elif args.command in ("train", "sweep"):
        studies.study(args.part, args.profile, **_params(args.p))
        if args.command == "sweep":
            check_scheduler(args.scheduler)
    elif args.command == "store" and args.older_than is not None:
        _parse_age(args.older_than)
    elif args.command == "reference" and args.name is not None:
        reference.get(args.name)
    for name in ("store", "out"):
        if getattr(args, name, None) is not None:
            checked_path(getattr(args, name), f"--{name}")


def _quiet_dask(record: logging.LogRecord) -> bool:
    """Keep Dask's own lines (it sets its loggers to INFO) out of the terminal unless -v, but its errors."""
    return record.levelno >= logging.ERROR or not record.name.startswith("distributed")


#: The modules of the optional extras (pyproject.toml), by the extra that installs them.
EXTRAS = {**dict.fromkeys(("jupytext", "papermill", "jupyter_book", "myst_nb", "nbformat", "nbclient", "ipykernel",
                           "IPython", "ipywidgets", "sphinx"), "book"),
          **dict.fromkeys(("sklearn", "mnist1d"), "data"), "torchvision": "vision",
          **dict.fromkeys(("dask", "distributed", "dask_jobqueue"), "cluster")}


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)[1:]
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:  # basicConfig's (not a test harness's)
            handler.setLevel(level)
            (handler.removeFilter if args.verbose else handler.addFilter)(_quiet_dask)
    try:
        return args.func(args)
    except (SpecError, DataError, StoreError) as err:
        print(f"lmcbook: error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:  # an extra that this install lacks: say which, in one line
        extra = EXTRAS.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"lmcbook: error: `lmcbook {args.command}` needs {err.name}, from the [{extra}] extra: "
              f"pip install 'lmcbook[{extra}]'", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, and the shell's code for SIGINT; nothing half-written stays
        print(f"lmcbook: interrupted ({args.command})", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `lmcbook store ls | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no second error at exit)
        return 0
    except OSError as err:  # a full disk, a read-only folder, ...: one line that names the path
        where = f" ({err.filename})" if err.filename else ""
        print(f"lmcbook: error: {err.strerror or err}{where}; nothing was changed there", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

