"""Digest of everything ``lmcbook.claims`` decides, to show that a change to it moved code and changed no result.

Run ``python benchmarks/scoreboard_digest.py [--before REV] [DIR ...]``.  Each DIR is a folder of page CSVs (an
``lmcbook execute`` output's ``data/``) holding every page of ``claims.PAGE_CLAIMS``; the committed reference runs
(``results/``) are read as the claims page reads them.  On each input set it computes, with this checkout's
``lmcbook.claims``:

- the scoreboard (every field and property of every row), its Markdown, claims.csv (``scoreboard_long``) as CSV
  bytes, ``scoreboard_table``, ``block_counts``, the rows read back (``board_results``, ``state_of``);
- each reference run's page claims on its own, the noise rows' sensitivity table, the regime map's cells, settings
  and pick, the mechanism's hypotheses, conclusion and conclusion table, and the closest barrier cell.

It prints a sha256 per section and one for all.  With ``--before REV`` it also loads ``lmcbook/claims.py`` (or the
``lmcbook/claims/`` package) as it was at the commit REV, computes the same sections with it, and says, section by
section, whether the bytes are identical (exit status 1 if any differ).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lmcbook import reference  # noqa: E402
from lmcbook.schema import read_results  # noqa: E402

PROPERTIES = ("passed", "fixed_before", "fixed_when", "block", "tested", "can_fail", "numbers", "mark", "key")


def claims_at(rev: str) -> ModuleType:
    """Return ``lmcbook.claims`` as it was at the commit ``rev`` (a module or a package), loaded beside this
    checkout's lmcbook as ``lmcbook._claims_before`` (its relative imports read this checkout's modules)."""
    tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "lmcbook/claims", "lmcbook/claims.py"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    tmp = Path(tempfile.mkdtemp(prefix="claims_before_"))
    for path in tree:
        dest = tmp / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True,
                                        check=True).stdout)
    package = tmp / "lmcbook" / "claims"
    init = package / "__init__.py" if package.is_dir() else tmp / "lmcbook" / "claims.py"
    spec = importlib.util.spec_from_file_location("lmcbook._claims_before", init, submodule_search_locations=[
        str(package)] if package.is_dir() else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def text(obj: Any) -> str:
    """Return a deterministic text of a result: frames as CSV, claim rows as their fields and properties."""
    if isinstance(obj, pd.DataFrame | pd.Series):
        return obj.to_csv()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if type(obj).__name__ == "ClaimResult":
            fields.update({p: getattr(obj, p) for p in PROPERTIES})
        return f"{type(obj).__name__}({text(fields)})"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{k!r}: {text(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, list | tuple):
        return "[" + ", ".join(text(v) for v in obj) + "]"
    return repr(obj)


def references() -> dict[str, pd.DataFrame]:
    """Return the committed reference runs as the claims page reads them (each marked by its data set)."""
    out = {}
    for nb in sorted({r.notebook for r in reference.REFERENCES.values()}):
        for name in reference.available(nb):
            frame, _ = reference.load(name)
            out[name] = frame if "dataset" in frame else frame.assign(dataset=reference.dataset(name))
    return out


def reference_sections(claims: ModuleType, refs: dict[str, pd.DataFrame]) -> dict[str, str]:
    """Return the sections computed from the committed reference runs alone."""
    out, noise, mechanism = {}, claims.noise, claims.mechanism
    for name, frame in refs.items():
        nb = str(frame["notebook"].iloc[0])
        if nb in claims.PAGE_CLAIMS:
            out[f"ref {name}: page_claims"] = text(claims.page_claims(nb, frame))
        if nb == "noise_scale":
            out[f"ref {name}: rule_sensitivity"] = text(claims.noise.rule_sensitivity(frame, None))
            out[f"ref {name}: noise_grid_cells"] = text(claims.noise.noise_grid_cells(frame))
            keys, grid = ["lr", "batch_size"], frame[frame["method"] == "grid"]
            out[f"ref {name}: cell_mean_fit"] = text([noise.cell_mean_fit(noise.noise_pairs(part, keys), keys)
                                                      for _, part in grid.groupby("spawn_fraction")])
        if nb == "noise_components":
            out[f"ref {name}: rule_sensitivity"] = text(claims.noise.rule_sensitivity(None, frame))
        if nb == "noise_regime":
            out[f"ref {name}: map"] = map_text(claims, frame)
        if nb == "mechanism":
            out[f"ref {name}: largest_d_cell"] = text([mechanism.largest_d_cell(frame), mechanism.short_merge(frame)])
    return out


def map_text(claims: ModuleType, frame: pd.DataFrame) -> str:
    """Return the regime map's cells, settings (both rankings) and picks."""
    noise, first = claims.noise, claims.thresholds.FIRST_PICK
    cells = noise.map_cells(frame)
    picks = [p for p in (noise.pick_setting(cells), noise.pick_setting(cells, first)) if p]
    studies = [SimpleNamespace(dataset=d, **p) for p in picks for d in frame.get("dataset", pd.Series()).unique()]
    return text([cells, noise.map_settings(cells), noise.map_settings(cells, first), picks,
                 [noise.describe_setting(p) for p in picks], [noise.map_spawn_sweep(frame, s) for s in studies]])


def page_sections(claims: ModuleType, data: Path, refs: dict[str, pd.DataFrame]) -> dict[str, str]:
    """Return the sections computed from one folder of page CSVs with the committed reference runs."""
    frames = {name: read_results(data / f"{name}.csv") for name in claims.PAGE_CLAIMS}
    rows = claims.scoreboard(frames, refs)
    long = claims.scoreboard_long(rows)
    out = {"scoreboard rows": text(rows), "scoreboard markdown": claims.scoreboard_markdown(rows),
           "claims.csv": long.to_csv(index=False), "scoreboard_table": text(claims.scoreboard_table(long)),
           "block_counts": text(claims.block_counts(rows)),
           "board_results": text(claims.board_results(long)),
           "state_of": text([claims.state_of(long, r.id, r.regime, r.source) for r in rows])}
    out["rule_sensitivity"] = text(claims.noise.rule_sensitivity(frames["noise_scale"], frames["noise_components"]))
    if (data / "noise_regime.csv").exists():
        out["map"] = map_text(claims, read_results(data / "noise_regime.csv"))
    mech = {"own": frames["mechanism"], **{n: f for n, f in refs.items() if f["notebook"].iloc[0] == "mechanism"}}
    by_label = {k: claims.page_claims("mechanism", f) for k, f in mech.items()}
    m = claims.mechanism
    out["mechanism"] = text([m.decide(by_label), m.conclusion(m.decide(by_label)), m.conclusion_table(by_label, mech),
                             m.largest_d_cell(frames["mechanism"])])
    widths = {k: frames[k] for k in ("width_accuracy", "loss_barrier_calibration")}
    out["closest_barrier"] = text([m.closest_barrier({**widths, **mech}), m.barrier_cells(mech)])
    return out


def sections(claims: ModuleType, dirs: list[Path]) -> dict[str, str]:
    """Return every section's text, by name, on the committed references and each folder of page CSVs."""
    refs = references()
    out = reference_sections(claims, refs)
    for d in dirs:
        try:
            out.update({f"{d.name}: {k}": v for k, v in page_sections(claims, d, refs).items()})
        except Exception as e:  # a folder the claims cannot read (an older schema): its error is its digest
            out[f"{d.name}: error"] = f"{type(e).__name__}: {e}"
    return out


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="folders of page CSVs (an execute output's data/)")
    ap.add_argument("--before", help="a commit whose lmcbook/claims to compare against")
    args = ap.parse_args(argv)
    from lmcbook import claims

    now = sections(claims, args.dirs)
    print(f"{'all':60s} {sha(''.join(sha(k) + sha(v) for k, v in now.items()))}")
    if not args.before:
        for k, v in now.items():
            print(f"{k:60s} {sha(v)}")
        return 0
    before = sections(claims_at(args.before), args.dirs)
    print(f"{'all at ' + args.before:60s} {sha(''.join(sha(k) + sha(v) for k, v in before.items()))}")
    differ = [k for k in now.keys() | before.keys() if now.get(k) != before.get(k)]
    for k, v in now.items():
        print(f"{k:60s} {sha(v)} {'DIFFERS' if k in differ else 'identical'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
