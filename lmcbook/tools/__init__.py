"""The tools around the book: ``lmcbook diagnose`` on a reader's own checkpoints (:mod:`lmcbook.tools.diagnose`),
the interactive explorer (:mod:`lmcbook.tools.explore`) and the benchmark (:mod:`lmcbook.tools.bench`).  Each
imports the library; the library imports none of them."""
