"""What an executed notebook shows: its parameters cells removed, and of its alternative cells (tagged
``when:KEY=VALUE``) only those the page chose with :meth:`lmcbook.page.Page.choose`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import nbformat


def _finish_notebook(path: Path) -> None:
    """Tag the parameters and injected-parameters cells ``remove-cell`` (the provenance box shows the values) and
    show only the chosen alternatives (:func:`show_chosen`)."""
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "parameters" in tags or "injected-parameters" in tags:
            _remove(cell)
    show_chosen(nb)
    nbformat.write(nb, str(path))


WHEN = "when:"  #: the tag prefix of an alternative cell: ``when:KEY=VALUE``


class ChoiceError(ValueError):
    """A page's alternative cells and its choices (``page.choose``) do not fit together."""


def _remove(cell: Any) -> None:
    tags = cell.metadata.get("tags", [])
    if "remove-cell" not in tags:
        cell.metadata["tags"] = tags + ["remove-cell"]


def glued_words(nb: Any) -> dict[str, str]:
    """Return every value an executed notebook glued as a plain string (:meth:`lmcbook.page.Page.choose`), by key."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook")
            text = o.get("data", {}).get(f"{(meta or {}).get('mime_prefix', '')}text/plain")
            if meta and isinstance(text, str) and text[:1] in "'\"":
                try:
                    out[meta["name"]] = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    pass
    return out


def show_chosen(nb: Any) -> None:
    """Hide every alternative cell the page did not choose.

    A cell tagged ``when:KEY=VALUE`` is shown only if the page called ``page.choose(KEY, VALUE)``.  Raise
    :class:`ChoiceError` (the execution fails) for a malformed tag, for a key the page never chose, and for a
    chosen value that no cell is written for, naming the values that are.
    """
    chosen = glued_words(nb)
    written: dict[str, list[str]] = {}
    for cell in nb.cells:
        for tag in [t for t in cell.metadata.get("tags", []) if t.startswith(WHEN)]:
            key, sep, value = tag[len(WHEN):].partition("=")
            if not (sep and key and value):
                raise ChoiceError(f"cell tag {tag!r} is not of the form when:KEY=VALUE")
            written.setdefault(key, []).append(value)
            if key not in chosen:
                raise ChoiceError(f"a cell is tagged {tag!r}, but the page never chose {key!r}: call "
                                  f"page.choose({key!r}, ...) before the cell")
            if chosen[key] != value:
                _remove(cell)
    for key, values in written.items():
        if chosen[key] not in values:
            raise ChoiceError(f"the page chose {key} = {chosen[key]!r}, but no cell is tagged when:{key}={chosen[key]} "
                              f"(cells are written for {', '.join(map(repr, sorted(set(values))))})")

