"""lmcbook: the reproducible companion to two ICLR 2026 papers on merging neural networks.

Train once, probe many times: a :class:`~lmcbook.store.RunStore` keyed by the
hash of a frozen :class:`~lmcbook.specs.RunSpec` serves every notebook.
``lmcbook.study(part, profile, **overrides)`` returns a part's validated study
(``"width"``, ``"controls"``, ``"mechanism"``, ``"noise"``, ...), whose ``specs()`` are its runs.
"""

import logging

__version__ = "0.1.0"

from . import profiles  # noqa: E402
from .parts import study  # noqa: E402
from .specs import CODE_VERSION, DataSpec, ModelSpec, RunSpec, SpecError, TrainSpec  # noqa: E402
from .store import RunStore  # noqa: E402

logging.getLogger("lmcbook").addHandler(logging.NullHandler())

__all__ = ["__version__", "CODE_VERSION", "DataSpec", "ModelSpec", "RunSpec", "RunStore", "SpecError", "TrainSpec",
           "profiles", "study"]
