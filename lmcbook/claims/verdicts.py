"""The verdict machinery every family shares: the four states and how they show, the scoreboard's blocks, a row
(:class:`ClaimResult`), and the helpers the width, mechanism and noise rows all use.

Each test reads only the long-format CSVs the pages save (their schema: :mod:`lmcbook.schema`) and decides from the
statistics of :mod:`lmcbook.stats`; its thresholds are :mod:`lmcbook.claims.thresholds`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..schema import DECAY_INTEGRAL, TRAIN_ACC, in_cell, select
from ..stats import Interval, above, interval_diff, trend_and_ends
from .thresholds import (
    CHANCE_RATE,
    CHANGED_AFTER_RESULTS,
    CONVERGED_TRAIN_ACC,
    D_TIE_RTOL,
    FIXED_BEFORE,
    FIXED_BEFORE_SOURCE,
    MIN_PAIRS,
    MIN_TREND_POINTS,
    RHO_MIN,
)

PASS, FAIL, INCONCLUSIVE, NA = "pass", "fail", "inconclusive", "n/a"
#: The four verdicts, and how the scoreboard and the pages show them.
MARKS = {PASS: "✓", FAIL: "✗", INCONCLUSIVE: "*inconclusive*", NA: "*n/a*"}
#: The verdicts in a table a notebook shows as a frame (HTML, where Markdown's asterisks would print as they are).
TABLE_MARKS = {PASS: "✓", FAIL: "✗", INCONCLUSIVE: "inconclusive", NA: "n/a"}
#: The value of the ``claim_state`` metric for each verdict.
STATE_CODES = {FAIL: 0.0, PASS: 1.0, INCONCLUSIVE: 2.0, NA: 3.0}
#: The scoreboard's blocks: the papers' claims, the book's own alternatives and controls (H1–H3's rows, M6's axis,
#: W10's depth law and the control rows) and diagnostics, which are shown and never counted.
PAPER, BOOK, DIAGNOSTIC = "paper", "book", "diagnostic"
BLOCK_CODES = {PAPER: 0.0, BOOK: 1.0, DIAGNOSTIC: 2.0}  #: the value of the ``claim_block`` metric for each block
BOOK_ROWS = frozenset({"W10", "M2", "M3", "M4", "M6", "N8", "N9"})  #: the book's own rows that are not controls
PLAIN, MATCHED = "none", "weight_matching"  #: the ``method`` of a plain and of a weight-matched merge's summary
#: The training regimes a width row can read: the profile's own length, or the regime page's longest.
REGIMES = ("short", "long")


def chance_passes(n_tested: int, rate: float = CHANCE_RATE) -> tuple[float, int]:
    """Return how many of ``n_tested`` rows would pass by chance alone if none had an effect behind it and each
    passed with probability ``rate`` independently: the expected count and the 95th percentile of
    Binomial(n_tested, rate)."""
    from scipy.stats import binom

    if n_tested < 0 or not 0 <= rate <= 1:
        raise ValueError(f"n_tested={n_tested!r} and rate={rate!r} are not allowed: expected n_tested >= 0 and "
                         "0 <= rate <= 1")
    return n_tested * rate, int(binom.ppf(0.95, n_tested, rate))


#: The counts a row may carry among its values, and the least its test needs of each to decide: (the key, what it
#: counts, one and many, the least, who needs it).  An inconclusive row with fewer says so where the book shows it.
COUNTS = (("n_widths", ("width", "widths"), MIN_TREND_POINTS, "a trend needs"),
          ("n_d", ("value of D", "values of D"), MIN_TREND_POINTS, "a trend needs"),
          ("n", ("pair", "pairs"), MIN_PAIRS, "an interval needs"),
          ("n_models", ("model", "models"), MIN_PAIRS, "an interval needs"))


@dataclass
class ClaimResult:
    """One row of the scoreboard: the paper's statement, what was measured, the test, and its verdict."""

    id: str
    paper: str
    statement: str
    measured: str
    test: str
    #: One of ``pass``, ``fail``, ``inconclusive`` (the spread is too large for the fixed test to decide) and
    #: ``n/a`` (the setting does not meet the claim's assumptions).
    state: str
    page: str
    control: bool = False
    values: dict[str, float] = field(default_factory=dict)
    #: "short" (the profile's own training length) or "long" (the regime page's longest); None where it
    #: does not apply (the noise study, claims across lengths).
    regime: str | None = None
    #: The decay integral D of the runs the row reads (the strongest weight decay's), NaN if not recorded.
    decay_integral: float = float("nan")
    #: The data set of the runs the row reads, where a page's rows can come from several (the mechanism page).
    dataset: str | None = None
    #: Where the row's CSV comes from: None for this build's own pages, else a committed reference run's name.
    source: str | None = None
    #: A diagnostic row: shown on the scoreboard, outside every count (its result is expected whatever account holds).
    diagnostic: bool = False
    #: The label of an earlier row this one repeats (:func:`~lmcbook.claims.mark_repeats`: the same claim and
    #: regime on the same data set, with the same interval and verdict, so the same runs read again, as where a long
    #: reference reuses the quick book's 60-epoch cells); None for a row of its own.  A repeat is shown, never counted
    #: (the scoreboard's blocks: :func:`~lmcbook.claims.block_counts`).
    repeats: str | None = None
    #: The repeat is of the same cells and seeds trained again (the same specs, trained in another stack or at
    #: another thread count, which change a run's last digits: :mod:`lmcbook.train`), not of the same runs read
    #: again.
    retrained: bool = False

    @property
    def repeat_phrase(self) -> str:
        """Return what a repeat (:attr:`repeats`) reads again, in words: "the same runs as X" or "the same cells and
        seeds as X at U units, trained again" (the width its verdict reads; what else the row shows, such as W7's
        width effect from a narrower width, may read other seeds); "" for a row of its own."""
        if not self.repeats:
            return ""
        if not self.retrained:
            return f"the same runs as {self.repeats}"
        units = self.values.get("units")
        at = f" at {units:g} units" if units is not None and np.isfinite(units) else ""
        return f"the same cells and seeds as {self.repeats}{at}, trained again"

    def __post_init__(self) -> None:
        if self.state not in MARKS:
            raise ValueError(f"state={self.state!r} is not allowed: expected one of {list(MARKS)}")

    @property
    def measured_shown(self) -> str:
        """Return the measured text as the book shows it: an inconclusive row adds what it has too few of to decide
        (:meth:`too_few`), if anything; a trend that passes at its threshold says so (:meth:`at_threshold`); a repeat
        (:attr:`repeats`) says whose runs it reads again."""
        short = self.too_few() if self.state == INCONCLUSIVE else ""
        text = f"{self.measured}; too few to decide: {short}" if short else self.measured
        edge = self.at_threshold()
        text = f"{text}; {edge}" if edge else text
        if not self.repeats:
            return text
        return f"{self.repeat_phrase}: {text}" if self.retrained else f"{self.repeat_phrase}, read again: {text}"

    def at_threshold(self) -> str:
        """Return, for a trend row that passes with its rank correlation exactly at RHO_MIN, that it passes at its
        threshold, in words ("" otherwise): over 5 points ρ = ±0.9 means one adjacent pair out of order (Σd² = 2), the
        only disorder that still passes (every other has Σd² ≥ 4, and ρ at most 0.8 in size)."""
        rho, n = self.values.get("rho", float("nan")), self.values.get("n_widths", self.values.get("n_d", 0))
        if self.state != PASS or not np.isfinite(rho) or abs(abs(rho) - RHO_MIN) > 1e-9:
            return ""
        why = (": over 5 points, one adjacent pair out of order, the only disorder that still passes" if n == 5
               else "")
        return f"passes at its threshold (ρ = {rho:.2f}){why}"

    def too_few(self) -> str:
        """Return, in words, what the row has fewer of than its test needs ("" when nothing is short), from its
        counts among :attr:`values` (:data:`~lmcbook.claims.verdicts.COUNTS`): "3 widths (a trend needs 4)"."""
        short = [f"{int(self.values[key])} {noun[int(self.values[key]) != 1]} ({needs} {least})"
                 for key, noun, least, needs in COUNTS if key in self.values and self.values[key] < least]
        return "; ".join(short)

    @property
    def passed(self) -> bool:
        """Return True for a ✓."""
        return self.state == PASS

    @property
    def fixed_before(self) -> bool:
        """Return True when the row's test was fixed before any of its results were computed
        (:data:`~lmcbook.claims.thresholds.FIXED_BEFORE`; for a reference run's row, also
        :data:`~lmcbook.claims.thresholds.FIXED_BEFORE_SOURCE`), False when its threshold was set after a pilot run or
        beside its first results."""
        cid = self.id.split(" ")[0]
        return cid in FIXED_BEFORE or cid in FIXED_BEFORE_SOURCE.get(self.source or "", frozenset())

    @property
    def fixed_when(self) -> str:
        """Return when the row's test was fixed, as the scoreboard says it: "before results", "after results"
        (changed after its results were read: :data:`~lmcbook.claims.thresholds.CHANGED_AFTER_RESULTS`) or "after a
        pilot"."""
        if self.fixed_before:
            return "before results"
        changed = self.id in CHANGED_AFTER_RESULTS or self.id.split(" ")[0] in CHANGED_AFTER_RESULTS
        return "after results" if changed else "after a pilot"

    @property
    def block(self) -> str:
        """Return the scoreboard block of the row: ``PAPER`` (a claim of a paper), ``BOOK`` (the book's own
        alternatives and controls) or ``DIAGNOSTIC`` (never counted)."""
        if self.diagnostic:
            return DIAGNOSTIC
        return BOOK if self.control or self.id.split(" ")[0] in BOOK_ROWS else PAPER

    @property
    def tested(self) -> bool:
        """Return True unless the row is n/a (its setting is outside the claim's assumptions)."""
        return self.state != NA

    @property
    def can_fail(self) -> bool:
        """Return True for a row whose test could fail here: tested, and not a diagnostic (whose result is expected
        whatever account holds).  :func:`~lmcbook.claims.verdicts.chance_passes` counts only these."""
        return self.tested and not self.diagnostic

    @property
    def numbers(self) -> dict[str, float]:
        """Return the row's estimate, its interval's ends and its threshold (NaN where the row has none)."""
        return {k: float(self.values.get(k, float("nan"))) for k in ("estimate", "lo", "hi", "threshold")}

    @property
    def mark(self) -> str:
        """Return the verdict as the scoreboard shows it: ✓, ✗, *inconclusive* or *n/a*."""
        return MARKS[self.state]

    @property
    def key(self) -> str:
        """Return the row's glue key: the id in lower case, e.g. ``w1``, ``w1_long``, ``n1_50``, and for a reference
        run's row its name after it (``m1_mechanism_mnist_standin``)."""
        base = "".join(c if c.isalnum() else "_" for c in self.id.lower()).strip("_")
        key = "_".join(filter(None, base.split("_"))) + ("_long" if self.regime == "long" else "")
        return key + ("_" + "".join(c if c.isalnum() else "_" for c in self.source) if self.source else "")


def mechanism_standard(df: pd.DataFrame) -> pd.DataFrame:
    """Return the rows of a mechanism frame that the width claims read: standard initialisation, and no
    weight-matched merge or probe (so W1, W6, W7 and R1–R2 read it as they read the training-regime page)."""
    keep = ~df.get("method", pd.Series(index=df.index, dtype=object)).isin([MATCHED, "weight_matched"])
    if "init_scale" in df.columns:
        keep &= df["init_scale"].fillna(1.0).eq(1.0)
    return df[keep]


# ---- The register ----
# Each claim row registers itself where it is defined: ``@claim("W1", page="width_accuracy")`` above its function
# records which page's frame it reads, and returns the function unchanged. The board (:mod:`lmcbook.claims`) reads
# the register, so adding a row touches its family's module, its threshold, its page and its test.

#: What a row's function returns: one row, or (for the rows made per spawn point or per regime) a list of them.
ClaimFunction = Callable[[pd.DataFrame], ClaimResult | list[ClaimResult]]


@dataclass(frozen=True)
class Registered:
    """A registered claim: its name, the page whose saved frame it reads, the function that decides it, and what the
    function reads of that frame (None: the frame as saved)."""

    name: str
    page: str
    function: ClaimFunction
    reads: Callable[[pd.DataFrame], pd.DataFrame] | None = None


#: Every registered claim by name, in the order their modules define them (a page's rows come in this order).
REGISTER: dict[str, Registered] = {}


def claim(name: str, page: str, reads: Callable[[pd.DataFrame], pd.DataFrame] | None = None
          ) -> Callable[[ClaimFunction], ClaimFunction]:
    """Register the decorated function as the test of claim ``name``, read on ``page``'s saved frame (through
    ``reads``, if given), and return the function unchanged; a name registered twice is refused."""
    def register(function: ClaimFunction) -> ClaimFunction:
        if name in REGISTER:
            raise ValueError(f"claim {name!r} is registered twice: by {REGISTER[name].function.__qualname__} and by "
                             f"{function.__qualname__}; expected one function per claim")
        REGISTER[name] = Registered(name, page, function, reads)
        return function
    return register


def _values(iv: Interval, threshold: float, **extra: float) -> dict[str, float]:
    """Return a row's values: the interval its test decides on (``estimate``, ``lo``, ``hi``), its ``threshold``
    and any ``extra`` numbers (the scoreboard's numeric columns read the first four)."""
    return {"estimate": iv.mean, "lo": iv.lo, "hi": iv.hi, "threshold": threshold, **extra}


def _also(iv: Interval, threshold: float) -> dict[str, float]:
    """Return a second interval a row's test also reads and its threshold (``also_estimate``, ``also_lo``,
    ``also_hi``, ``also_threshold``), which :func:`lmcbook.claims.deciding_number` shows beside the first."""
    return {"also_estimate": iv.mean, "also_lo": iv.lo, "also_hi": iv.hi, "also_threshold": threshold}


def trend_state(rho: float, sign: int, n: int | None = None) -> str:
    """Return pass if ρ has the claimed sign (+1 rises, −1 falls) and sign·ρ ≥ RHO_MIN, else fail; inconclusive
    when the trend has ``n`` < MIN_TREND_POINTS points (over 2 points ρ is ±1 whatever the data, over 3 it is 1 by
    chance one time in six)."""
    if n is not None and n < MIN_TREND_POINTS:
        return INCONCLUSIVE
    return PASS if np.isfinite(rho) and sign * rho >= RHO_MIN else FAIL


def decay_of(df: pd.DataFrame) -> float:
    """Return the mean decay integral D recorded in a page's frame at its strongest weight decay (NaN if absent)."""
    d = select(df, DECAY_INTEGRAL)
    if d.empty:
        return float("nan")
    if "weight_decay" in d.columns and d["weight_decay"].notna().any():
        d = d[np.isclose(d["weight_decay"], d["weight_decay"].max())]
    return float(d["value"].mean())


def _in_regime(r: ClaimResult, df: pd.DataFrame, regime: str) -> ClaimResult:
    """Return the row ``r`` marked as read in ``regime`` (:data:`REGIMES`), with the D of its frame."""
    if regime not in REGIMES:
        raise ValueError(f"regime={regime!r} is not allowed: expected one of {REGIMES}")
    r.regime, r.decay_integral = regime, decay_of(df)
    return r


def _dataset(df: pd.DataFrame) -> str | None:
    """Return the data set a frame's rows name (None where it names none)."""
    return str(df["dataset"].dropna().iloc[0]) if "dataset" in df.columns and df["dataset"].notna().any() else None


def _cell_name(cell: dict | pd.Series) -> str:
    """Return a training cell (length, weight decay, initial scale) in words."""
    init = f", initial weights ×{cell['init_scale']:g}" if cell["init_scale"] != 1.0 else ""
    return f"{cell['epochs']:g} epochs at weight decay {cell['weight_decay']:g}{init}"


def ties(ds: Iterable[float]) -> np.ndarray:
    """Return, for each D, the smallest D of its tie: values that differ from the tie's smallest by less than
    D_TIE_RTOL of it are one value of D (equal D reached by length and by weight decay, as 0.840 and 0.841)."""
    ds = np.asarray(list(ds), float)
    out, start = np.empty_like(ds), float("nan")
    for i in np.argsort(ds, kind="stable"):
        if not ds[i] < start * (1 + D_TIE_RTOL):
            start = ds[i]
        out[i] = start
    return out


def _ends_state(sign: int, hi: pd.Series, lo: pd.Series) -> tuple[str, Interval]:
    """Return the verdict of "moved the claimed way (sign) from ``lo`` to ``hi``" by the interval of mean(hi) −
    mean(lo) over their replicates (at least MIN_PAIRS each), and that interval."""
    diff = interval_diff(hi, lo)
    signed = diff if sign > 0 else Interval(-diff.mean, -diff.hi, -diff.lo, diff.n)
    return above(signed, 0.0, MIN_PAIRS), diff


def _trend_verdict(rho: float, sign: int, ends: str, diff: Interval, n_points: int) -> str:
    """Return :func:`lmcbook.stats.trend_and_ends`, or inconclusive over fewer than MIN_TREND_POINTS points or with
    fewer than MIN_PAIRS replicates at the ends: too few to decide either way, a missing trend included."""
    if n_points < MIN_TREND_POINTS or diff.n < MIN_PAIRS:
        return INCONCLUSIVE
    return trend_and_ends(rho, sign, ends, RHO_MIN)


def unfit(df: pd.DataFrame, cell: dict, units: float) -> str | None:
    """Return why the endpoints of a cell at a width break the convergence rule (None when they meet it)."""
    acc = select(in_cell(df, cell, units), TRAIN_ACC)["value"]
    if acc.empty:
        return f"no training accuracy is recorded at {units:g} units"
    if acc.min() < CONVERGED_TRAIN_ACC:
        return (f"an endpoint at {units:g} units reached training accuracy {acc.min():.3f} < {CONVERGED_TRAIN_ACC:g} "
                "(the convergence rule)")
    return None
