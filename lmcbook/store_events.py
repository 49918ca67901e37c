"""The run store's event log, ``ROOT/events.jsonl``: every load and training, appended with the process id and the
session ($LMCBOOK_SESSION, set by ``lmcbook execute`` per notebook), so that each execution counts only its own
events.  The log is best effort: a read-only store skips it (one warning), readers skip a torn line (one warning),
and ``lmcbook store gc`` repairs it.  :class:`EventLog` is mixed into :class:`lmcbook.store.RunStore`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .files import write_atomic
from .specs import RunSpec
from .store_files import _warn_once

#: The environment variable naming the current session (one notebook execution): its events carry it.
SESSION_ENV = "LMCBOOK_SESSION"


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


class EventLog:
    """The event log's methods of :class:`~lmcbook.store.RunStore` (which provides ``root`` and ``_note``)."""

    #: The store's root folder (set by :class:`~lmcbook.store.RunStore`).
    root: Path

    def _event(self, event: str, spec: RunSpec, **extra: Any) -> None:
        """Append an event (best effort: a store that cannot be written skips it, with one warning)."""
        self._note(spec, event)
        line = json.dumps({"time": time.time(), "event": event, "id": spec.id, "pid": os.getpid(),
                           "session": os.environ.get(SESSION_ENV), **extra})
        p = self.root / "events.jsonl"
        try:
            with open(p, "ab") as f:
                torn = f.tell() > 0 and _last_byte(p) != b"\n"  # never append to a torn line
                f.write((b"\n" if torn else b"") + line.encode() + b"\n")
        except OSError as err:
            _warn_once("events", self.root, f"the run store {self.root} cannot be written ({err.strerror}): "
                                            "its event log is not updated; reading goes on")

    def _event_lines(self) -> tuple[list[dict[str, Any]], list[int]]:
        """Return the readable events and the (1-based) numbers of the torn lines."""
        p = self.root / "events.jsonl"
        if not p.exists():
            return [], []
        good, torn = [], []
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
                if not isinstance(ev, dict) or "event" not in ev:
                    raise ValueError(line)
                good.append(ev)
            except ValueError:
                torn.append(i)
        return good, torn

    def events(self, session: str | None = None) -> list[dict[str, Any]]:
        """Return every recorded load and training, oldest first (only ``session``'s, if given).

        A torn line (a write cut short) is skipped with one warning; ``lmcbook store gc`` repairs the log.
        """
        good, torn = self._event_lines()
        if torn:
            _warn_once("torn", self.root, f"skipped {len(torn)} torn line(s) of {self.root / 'events.jsonl'} "
                                          f"(line {torn[0]}{', ...' if len(torn) > 1 else ''}); "
                                          "`lmcbook store gc` repairs it")
        return good if session is None else [e for e in good if e.get("session") == session]

    def torn_event_lines(self) -> list[int]:
        """Return the (1-based) numbers of the event log's torn lines."""
        return self._event_lines()[1]

    def repair_events(self) -> int:
        """Rewrite the event log without its torn lines (atomically); return how many were dropped."""
        good, torn = self._event_lines()
        if torn:
            p = self.root / "events.jsonl"
            write_atomic(p, "".join(json.dumps(e) + "\n" for e in good))
        return len(torn)
