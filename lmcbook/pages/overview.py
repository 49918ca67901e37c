"""The overview page's account of a run's noise rows in words."""

from __future__ import annotations

import pandas as pd

from ..captions import sensitivity_words
from ..claims import FAIL, INCONCLUSIVE, NA, PASS, ClaimResult, id_order


def noise_verdict_words(label: str, rows: list[ClaimResult], sensitivity: pd.DataFrame | None = None) -> str:
    """Return, for a landing page, what a run's noise rows found in words: each claim of the noise paper, and whether
    it holds, fails, shows no effect of the paper's size, is undecided or does not apply there; then (``sensitivity``:
    :func:`lmcbook.claims.rule_sensitivity`'s table) which verdicts move with the rule's threshold."""
    said = {PASS: "holds", FAIL: "does not hold", INCONCLUSIVE: "is undecided", NA: "does not apply"}
    words = []
    for r in sorted(rows, key=lambda r: id_order(r.id)):
        verb = ABSENT_WORDS if r.state == FAIL and ("of the paper's size" in r.measured) else said[r.state]
        words.append(f"{r.id} ({r.mark}) {verb}: “{r.statement.rstrip('.')}”")
    text = f"On {label}: " + "; ".join(words) + "."
    return text + (f" {sensitivity_words(sensitivity)}" if sensitivity is not None else "")


#: How :func:`noise_verdict_words` says a ✗ that is an absence (an interval below the minimum effect).
ABSENT_WORDS = "shows no effect of the paper's size"
