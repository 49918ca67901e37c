"""lmcbook: the reproducible companion to two ICLR 2026 papers on merging neural networks.

Train once, probe many times: a :class:`~lmcbook.store.RunStore` keyed by the
hash of a frozen :class:`~lmcbook.specs.RunSpec` serves every notebook.
``lmcbook.study(part, profile, **overrides)`` returns a part's validated study
(``"width"``, ``"controls"``, ``"mechanism"``, ``"noise"``, ...), whose ``specs()`` are its runs.

Importing the package imports only :mod:`lmcbook.specs` (the standard library alone), so a light module such as
:mod:`lmcbook.claims`, :mod:`lmcbook.schema` or :mod:`lmcbook.stats` does not load torch. ``RunStore``, ``study``
and every submodule (``lmcbook.studies``, ...) are imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from typing import TYPE_CHECKING, Any

from .specs import CODE_VERSION, DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec

if TYPE_CHECKING:
    from . import studies
    from .store import RunStore
    from .studies import study

__version__ = "0.1.0"

# a lazy attribute and the submodule that defines it
_LAZY = {"RunStore": "store", "study": "studies"}
_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__))


def __getattr__(name: str) -> Any:
    """Return ``RunStore``, ``study`` or a submodule, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """Return the package's names, the lazy ones included."""
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


logging.getLogger("lmcbook").addHandler(logging.NullHandler())

__all__ = ["__version__", "CODE_VERSION", "DataSpec", "ModelSpec", "RunSpec", "RunStore", "SpecError", "TrainSpec",
           "studies", "study"]
