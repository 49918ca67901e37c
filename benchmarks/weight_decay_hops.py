"""Trace the calls from a page's ``weight_decay`` parameter to the optimizer that uses it (issue 38): run
``python benchmarks/weight_decay_hops.py``.

It opens the width_accuracy page at the smoke profile with ``weight_decay`` given (one pair, one width), trains that
pair in a temporary store, and prints the lmcbook frames on three call stacks: where the study checks the value
(it enters the study), where a run's TrainSpec is built from it, and where the optimizer applies it; then how many
distinct lmcbook calls and modules the three paths cross.
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("LMCBOOK_OUT", tempfile.mkdtemp())

from lmcbook import store  # noqa: E402
from lmcbook.page import open_page  # noqa: E402
from lmcbook.store import RunStore  # noqa: E402

stacks: dict[str, list[tuple[str, str]]] = {}


def chain(frame) -> list[tuple[str, str]]:
    """Return the (module file, function) of every lmcbook frame from the outermost to ``frame``."""
    out = []
    while frame is not None:
        if "/lmcbook/" in frame.f_code.co_filename:
            out.append((os.path.basename(frame.f_code.co_filename), frame.f_code.co_qualname))
        frame = frame.f_back
    return out[::-1]


def spy(frame, event, arg) -> None:
    """Record the first call stack of each of the three points the value passes."""
    if event != "call":
        return
    name, local = frame.f_code.co_name, frame.f_locals
    if name == "check_float" and local.get("name") == "weight_decay":
        stacks.setdefault("the study checks it", chain(frame))
    elif name == "__init__" and type(local.get("self")).__name__ == "TrainSpec" and stacks:
        stacks.setdefault("a run's TrainSpec takes it", chain(frame.f_back) + [("specs.py", "TrainSpec.__init__")])
    elif name == "_sgd_step" or (name == "__init__" and "SGD" in frame.f_code.co_qualname):
        stacks.setdefault("the optimizer applies it", chain(frame))


def main() -> None:
    ns = {"profile": "smoke", "weight_decay": 0.004, "widths": [0.25], "seeds": 1, "decisive_seeds": 1}
    sys.setprofile(spy)
    try:
        _, study = open_page("width_accuracy", ns, RunStore(tempfile.mkdtemp()))
        store.trained_pairs(study, RunStore(tempfile.mkdtemp()))
    finally:
        sys.setprofile(None)
    seen: list[tuple[str, str]] = []
    for what, frames in stacks.items():
        print(f"{what} ({len(frames)} frames):")
        for module, function in frames:
            print(f"    {module} {function}")
        seen += [f for f in frames if f not in seen]
    modules = sorted({m for m, _ in seen})
    print(f"distinct lmcbook calls on the three paths: {len(seen)}, through {len(modules)} modules: "
          + ", ".join(modules))


if __name__ == "__main__":
    main()
