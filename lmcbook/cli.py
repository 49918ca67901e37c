"""The ``lmcbook`` command: execute notebooks, build the book, train a part, inspect the store."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from . import __version__
from .data import DataError
from .specs import SpecError
from .store import StoreError


def _params(pairs: list[list[str]] | None) -> dict:
    from .book import parse_param

    return {k: parse_param(v) for k, v in (pairs or [])}


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
    from .profiles import PARTS
    from .store import RunStore

    if args.part not in PARTS:
        raise SpecError(f"part={args.part!r} is not allowed: expected one of {', '.join(map(repr, PARTS))}")
    study = PARTS[args.part].resolve(args.profile, _params(args.p))
    store = RunStore(args.store)
    specs = study.specs()
    for i, spec in enumerate(specs, 1):
        run = store.get_or_train(spec, device=study.device, progress=None)
        print(f"[{i}/{len(specs)}] {spec.short_id} test_acc={run.metrics['test_acc']:.3f}", file=sys.stderr)
    return 0


def cmd_store(args) -> int:
    from .store import RunStore, describe

    store = RunStore(args.store)
    if args.action == "ls":
        for rid, spec in store.iter_specs():
            print(rid[:12], describe(spec))
        return 0
    if args.action == "verify":
        bad = 0
        for rid in store.ids():
            try:
                store.verify(rid)
            except Exception as err:  # report every entry, then fail
                bad += 1
                print(f"CORRUPT {rid[:12]}: {err}")
        print(f"{len(store.ids()) - bad} entries OK, {bad} corrupt")
        return 1 if bad else 0
    raise SpecError(f"store action {args.action!r} is not allowed: expected 'ls' or 'verify'")


def cmd_bench(args) -> int:
    from .bench import run

    run(args.json, book=args.book, quick=args.quick)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    ap = argparse.ArgumentParser(prog="lmcbook", description="Reproduce the width and noise papers on merging.")
    ap.add_argument("--version", action="version", version=f"lmcbook {__version__}")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every run loaded or trained")
    sub = ap.add_subparsers(dest="command", required=True)

    ex = sub.add_parser("execute", help="run notebooks with papermill into book/generated (or --out)")
    ex.add_argument("--profile", default="quick", help="smoke | quick | paper (default: quick)")
    ex.add_argument("--only", action="append", metavar="NAME", help="run only this notebook (repeatable)")
    ex.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"),
                    help='override a parameter; VALUE is YAML, e.g. -p widths "[0.5, 2]"')
    ex.add_argument("--out", type=Path, default=None, help="output directory (default: $LMCBOOK_OUT or book/generated)")
    ex.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="notebook sources")
    ex.add_argument("--store", type=Path, default=None, help="run store (default: $LMCBOOK_STORE or ./runs)")
    ex.add_argument("--force", action="store_true", help="re-execute even notebooks whose cached output is current")
    ex.set_defaults(func=cmd_execute)

    bd = sub.add_parser("build", help="render the executed notebooks with Jupyter Book (-W -n --keep-going)")
    bd.add_argument("--src", type=Path, default=Path("."), help="repository root holding _config.yml")
    bd.add_argument("--generated", type=Path, default=None, help="executed notebooks, if not book/generated")
    bd.add_argument("--builddir", type=Path, default=None, help="staging directory when --generated is given")
    bd.set_defaults(func=cmd_build)

    tr = sub.add_parser("train", help="train (or load) every run of one part of the book")
    tr.add_argument("--profile", default="quick")
    tr.add_argument("--part", default="width")
    tr.add_argument("-p", nargs=2, action="append", metavar=("KEY", "VALUE"))
    tr.add_argument("--store", type=Path, default=None)
    tr.set_defaults(func=cmd_train)

    st = sub.add_parser("store", help="list or verify the run store")
    st.add_argument("action", choices=["ls", "verify"])
    st.add_argument("--store", type=Path, default=None)
    st.set_defaults(func=cmd_store)

    be = sub.add_parser("bench", help="measure training throughput, probe cost and (with --book) book time")
    be.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    be.add_argument("--book", action="store_true", help="also time `make book` cold and warm (minutes)")
    be.add_argument("--quick", action="store_true", help="three small widths, one repeat (a smoke test)")
    be.set_defaults(func=cmd_bench)

    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        return args.func(args)
    except (SpecError, DataError, StoreError) as err:
        print(f"lmcbook: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

