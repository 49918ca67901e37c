"""The width paper's studies: the width sweep and its controls, the mechanism study's cells, the depth sweep.

Every field states, on its line, its quick value, what the smoke and paper profiles run instead, and its check
(:func:`lmcbook.profiles.param`).  :class:`Training` holds the fields every width-paper study shares, with the width
sweep's values; the depth sweep states the ones it runs differently.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .specs import (
    DEFAULT_LAMS,
    PRECISIONS,
    DataSpec,
    ModelSpec,
    RunSpec,
    SpecError,
    TrainSpec,
    check_device,
    check_lams,
    check_scheduler,
)
from .studies import (
    MAX_DRAWS,
    MAX_ITERATIONS,
    MAX_REPLICATES,
    POSITIVE,
    WIDTH,
    Pair,
    Study,
    param,
    positive,
)

#: The paper profile's width multipliers (of ``base_width``): 0.125× to 16×, as the width paper's MLP and VGG-11.
PAPER_WIDTHS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: The smoke profile's λ grid of a width sweep.
SMOKE_LAMS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Training(Study):
    """What every trained study shares: data, model size and options, SGD, seeds.  The model family (``arch``,
    ``depth``) and the regularisation (``init_scale``, ``weight_decay``) are added by the studies that hold them
    fixed (:class:`Recipe`); the depth and mechanism studies sweep one of them and add only the other."""

    dataset: str = param("digits", paper="cifar10")  # the data set (lmcbook.data): 8x8 digits, embedded
    data_root: str | None = param(None)  # where torchvision data sets live (None: the embedded ones need none)
    download: bool = param(False)  # let torchvision download a missing data set into data_root
    base_width: int = param(64, paper=64)  # hidden units (MLP) or first-layer channels at width multiplier 1
    norm: str = param("none", paper="batch")  # normalisation: none, batch or layer (LEWC's theory needs none)
    bias: bool = param(False, paper=True)  # biases in every layer (LEWC's theory needs none)
    epochs: int = param(60, smoke=4, paper=100, lo=1)  # passes over the training split
    batch_size: int = param(128, lo=1)  # examples per SGD step
    lr: float = param(0.05)  # SGD's peak learning rate (linear warm-up, then linear decay to 0)
    momentum: float = param(0.9)  # SGD momentum (PyTorch's, dampening 0)
    warmup: float = param(0.05)  # share of all steps spent in the linear warm-up
    seeds: int = param(2, smoke=1, paper=3, lo=1, hi=MAX_REPLICATES)  # pairs per cell: pair p is seeds 2p and 2p+1
    device: str = param("auto", check=check_device)  # where runs train: auto, cpu, cuda, cuda:N or mps
    lams: tuple[float, ...] = param(DEFAULT_LAMS, smoke=SMOKE_LAMS)  # the λ grid: 21 points in [0, 1]
    scheduler: str | None = param(None)  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
    precision: str = param("fp32", ok=lambda v: v in PRECISIONS,
                           allowed=f"one of {PRECISIONS}")  # fp32, or bf16 autocast (part of each run's spec)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheduler(self.scheduler)
        object.__setattr__(self, "lams", check_lams(self.lams))

    def pairs(self) -> list[Pair]:
        """Return every pair of the study."""
        raise NotImplementedError

    def specs(self) -> list[RunSpec]:
        """Return every run of the study."""
        return [s for p in self.pairs() for s in (p.a, p.b)]

    def training(self) -> dict[str, Any]:
        """Return this study's :class:`Training` fields by name (to build the :class:`Recipe` of one cell)."""
        return {f.name: getattr(self, f.name) for f in fields(Training)}


@dataclass(frozen=True)
class Recipe(Training):
    """One training recipe: the shared fields with a model family and a regularisation."""

    arch: str = param("mlp", paper="vgg11")  # mlp, vgg11 or resnet20 (in the paper profile it picks its recipe)
    depth: int | None = param(4)  # linear layers L of the MLP (None for VGG11 and ResNet20)
    init_scale: float = param(1.0, **POSITIVE)  # factor on the initial weights (1: PyTorch's initialisation)
    weight_decay: float = param(3e-3, lo=0)  # SGD's weight decay (L2), the width paper's 3e-3

    def spec(self, width: float, seed: int) -> RunSpec:
        """Return the RunSpec of one model (init and data seed ``seed``)."""
        return RunSpec(
            data=DataSpec(self.dataset, self.data_root, download=self.download),
            model=ModelSpec(self.arch, width, self.base_width, self.depth if self.arch == "mlp" else None,
                            self.norm, self.bias, self.init_scale),
            train=TrainSpec(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, momentum=self.momentum,
                            weight_decay=self.weight_decay, warmup=self.warmup, seed=seed,
                            precision=self.precision),
        )

    def pair(self, width: float, p: int) -> Pair:
        """Return pair number ``p`` at ``width``: seeds 2p and 2p+1."""
        return Pair(width, p, self.spec(width, 2 * p), self.spec(width, 2 * p + 1))

    @property
    def layers(self) -> int:
        """Return the number L of linear/conv layers on the main path (MLP depth, 9 for VGG11, 20 for ResNet20)."""
        return {"mlp": self.depth, "vgg11": 9, "resnet20": 20}[self.arch]


def _check_width_depth(study: Any) -> None:
    """Raise SpecError unless a width sweep's MLP has a hidden layer (depth >= 2): one linear layer has no hidden
    units, so every width would be the same model under another label."""
    if study.arch == "mlp" and study.depth is not None and study.depth < 2:
        raise SpecError(f"depth={study.depth!r} is not allowed for {type(study).__name__} (a width sweep): expected "
                        "an integer >= 2, the number of linear layers of an MLP with hidden units to widen")


def deciding_widths(widths: tuple[float, ...]) -> tuple[float, ...]:
    """Return the widths of a width sweep whose cells decide a width row: the widest (most rows), the second widest
    (W1's last step of width) and the narrowest (W9 compares it with the widest)."""
    ws = sorted(widths)
    return tuple(sorted({ws[0], *ws[-2:]}))


@dataclass(frozen=True)
class WidthStudy(Recipe):
    """The width sweep: pairs of independently trained models at each width multiplier."""

    widths: tuple[float, ...] = param((0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), smoke=(0.25, 1.0),
                                      paper=PAPER_WIDTHS)  # multipliers of base_width: 16 to 1024 hidden units
    #: Pairs at the widths where the width rows read intervals over pairs (``deciding_widths()``; ``seeds`` at
    #: the others).
    decisive_seeds: int = param(5, smoke=1, lo=1, hi=MAX_REPLICATES)  # pairs where the width rows decide

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_width_depth(self)
        for w in self.widths:  # validates every field of every spec
            self.spec(w, 0)

    def deciding_widths(self) -> tuple[float, ...]:
        """Return the widths whose cells decide a width row (:func:`deciding_widths`)."""
        return deciding_widths(self.widths)

    def pairs_at(self, width: float) -> int:
        """Return the number of pairs trained at ``width``: ``decisive_seeds`` at a decisive width, else ``seeds``."""
        decisive = any(abs(width - w) < 1e-12 for w in self.deciding_widths())
        return max(self.seeds, self.decisive_seeds) if decisive else self.seeds

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, widths outermost."""
        return [self.pair(w, p) for w in self.widths for p in range(self.pairs_at(w))]

    def run_count(self) -> int:
        """Return how many runs the sweep trains."""
        return 2 * sum(self.pairs_at(w) for w in self.widths)


@dataclass(frozen=True)
class ControlsStudy(WidthStudy):
    """The width sweep plus its controls: a weak-weight-decay twin, random permutations, weight matching."""

    weak_weight_decay: float = param(1e-4, lo=0)  # the weak-weight-decay twin's weight decay
    draws: int = param(5, smoke=2, lo=1, hi=MAX_DRAWS)  # random permutations drawn per pair
    match_iterations: int = param(100, smoke=20, lo=1, hi=MAX_ITERATIONS)  # weight matching's iteration cap

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.weak_weight_decay < self.weight_decay:
            raise SpecError(f"weak_weight_decay={self.weak_weight_decay:g} is not allowed with weight_decay="
                            f"{self.weight_decay:g}: expected weak_weight_decay < weight_decay (the control is the "
                            "same sweep at a weaker decay)")

    def weak(self) -> WidthStudy:
        """Return the same sweep (a WidthStudy: the controls' own fields do not apply to it) trained with the weak
        weight decay."""
        same = {f.name: getattr(self, f.name) for f in fields(WidthStudy)}
        return WidthStudy(**{**same, "weight_decay": self.weak_weight_decay})

    def specs(self) -> list[RunSpec]:
        """Return every run: the sweep at weight_decay and at weak_weight_decay."""
        return WidthStudy.specs(self) + WidthStudy.specs(self.weak())

    def run_count(self) -> int:
        """Return how many runs the sweep and its weak twin train."""
        return 2 * WidthStudy.run_count(self)


@dataclass(frozen=True)
class CellStudy(WidthStudy):
    """One cell of the mechanism study: a width sweep at one training length, weight decay and initialisation
    scale, with ``decisive_seeds`` pairs (instead of ``seeds``) at the widths in ``decisive_widths``."""

    decisive_widths: tuple[float, ...] | None = param(None)  # the widths with decisive_seeds pairs
    match_iterations: int = param(100, lo=1, hi=MAX_ITERATIONS)  # weight matching's iteration cap

    def pairs_at(self, width: float) -> int:
        """Return the number of pairs trained at ``width``: ``decisive_seeds`` at a decisive width, else ``seeds``."""
        decisive = any(abs(width - w) < 1e-12 for w in self.decisive_widths or ())
        return max(self.seeds, self.decisive_seeds) if decisive else self.seeds

    def pairs(self) -> list[Pair]:
        """Return every pair of the cell, widths outermost."""
        return [self.pair(w, p) for w in self.widths for p in range(self.pairs_at(w))]


@dataclass(frozen=True)
class MechanismStudy(Training):
    """What makes merging without permutations work: the width sweep in cells of three arms.

    - the *decay arm*: every weight decay of ``weight_decays`` at ``epochs`` (the cheap route to a large
      decay integral D), at every width for ``wide_decays`` and up to ``long_max_width`` for the others;
    - the *length arm*: every length of ``regimes`` at every weight decay of ``regime_weight_decays``, at the widths
      up to ``long_max_width`` (the time budget's cut: the decay arm reaches large D at every width far more
      cheaply);
    - the *small-initialisation arm*: the initial weights multiplied by each factor of ``init_scales``, at the
      weakest weight decay and ``epochs``.

    Cells that coincide (the length arm at ``epochs``, say) are one cell.  Every cell has ``seeds`` pairs per
    width, and ``decisive_seeds`` where a verdict of :mod:`lmcbook.claims` is read: the widest width at the
    weakest and strongest weight decay, at the width pages' own weight decay and their weak twin's (whose runs
    they share: the narrowest and the two widest widths), in the small-initialisation arm, the longest length's
    two widest widths at every weight decay of the length arm (the long W1 and W7), the widest width all lengths
    share in the smallest-D cell (R1 and R2), the two widest at the strongest (M3 compares them), and the length
    arm's widest width in every pair of cells of equal D reached by length and by weight decay (M6).
    It has no ``weight_decay`` or ``init_scale``: ``weight_decays`` and ``init_scales`` sweep them; each cell is a
    :class:`CellStudy` built from this study's fields.
    """

    #: Parameters a width page has and this study does not, with what sweeps them instead.
    not_fields = {"weight_decay": "it sweeps weight_decays", "init_scale": "it sweeps init_scales"}

    arch: str = param("mlp", paper="vgg11")  # mlp, vgg11 or resnet20 (in the paper profile it picks its recipe)
    depth: int | None = param(4)  # linear layers L of the MLP (None for VGG11 and ResNet20)
    widths: tuple[float, ...] = param((0.25, 0.5, 1.0, 4.0, 16.0), smoke=(0.25, 1.0),
                                      paper=PAPER_WIDTHS)  # the width study's (16 to 1024 units): runs reused
    weight_decays: tuple[float, ...] = param((1e-4, 3e-3, 1e-2, 3e-2), smoke=(3e-3, 6e-3),
                                             paper=(1e-4, 3e-3, 9e-3, 3e-2))  # the decay arm
    #: The decay arm's weight decays trained at every width; the others stop at ``long_max_width``, like the length
    #: arm (the time budget's cut).  It must hold the weakest and the strongest, whose cells decide verdicts.
    #: None: those two and the width study's own weight decay, whose runs the width pages train anyway.
    wide_decays: tuple[float, ...] | None = param(None)  # the decay arm's weight decays at every width
    regimes: tuple[int, ...] | None = param((60, 200, 600), smoke=(4, 8),
                                            paper=(100, 300, 1000))  # the length arm's epochs (None: no arm)
    regime_weight_decays: tuple[float, ...] = param((1e-4, 3e-3), smoke=(3e-3, 6e-3))  # the length arm's
    long_max_width: float | None = param(1.0, smoke=None, ok=lambda v: v > 0,
                                         allowed="a width multiplier > 0, or None")  # the length arm's widest
    init_scales: tuple[float, ...] | None = param((0.25,))  # the small-initialisation arm's factors (None: no arm)
    decisive_seeds: int = param(5, smoke=2, lo=1, hi=MAX_REPLICATES)  # pairs where a verdict is read
    match_iterations: int = param(100, lo=1, hi=MAX_ITERATIONS)  # weight matching's iteration cap
    show_references: bool = param(True)  # show the committed reference runs (results/) beside this run's cells

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_width_depth(self)
        if any(d < 0 for d in self.weight_decays + self.regime_weight_decays):
            raise SpecError(f"weight_decays={list(self.weight_decays)!r} and regime_weight_decays="
                            f"{list(self.regime_weight_decays)!r} are not allowed: expected numbers >= 0")
        object.__setattr__(self, "weight_decays", tuple(sorted({float(d) for d in self.weight_decays})))
        if len(self.weight_decays) < 2:
            raise SpecError(f"weight_decays={list(self.weight_decays)!r} is not allowed: expected at least two "
                            "different weight decays (the decay arm)")
        object.__setattr__(self, "regime_weight_decays", tuple(sorted({float(d) for d in self.regime_weight_decays})))
        regimes = self.regimes or ()
        if any(isinstance(e, float) and not e.is_integer() or e < 1 for e in regimes):
            raise SpecError(f"regimes={list(regimes)!r} is not allowed: expected training lengths in epochs "
                            "(integers >= 1), or None for no length arm")
        object.__setattr__(self, "regimes", tuple(sorted({int(e) for e in regimes})) or None)
        object.__setattr__(self, "widths", tuple(sorted({float(w) for w in self.widths})))
        if self.init_scales is not None:
            object.__setattr__(self, "init_scales", positive("init_scales", self.init_scales))
        free = {self.weight_decays[0], self.weight_decays[-1]} | ({WidthStudy.weight_decay} & set(self.weight_decays))
        wide = tuple(sorted(free if self.wide_decays is None else {float(d) for d in self.wide_decays}))
        if not set(wide) <= set(self.weight_decays) or {self.weight_decays[0], self.weight_decays[-1]} - set(wide):
            raise SpecError(f"wide_decays={list(wide)!r} is not allowed: expected weight decays of weight_decays="
                            f"{list(self.weight_decays)!r}, including the weakest and the strongest")
        object.__setattr__(self, "wide_decays", wide)
        if self.regimes and not self.widths_at(self.regimes[-1]):
            raise SpecError(f"long_max_width={self.long_max_width!r} is not allowed: it cuts every width of "
                            f"{list(self.widths)} at the longer lengths; expected a multiplier >= {min(self.widths)}")
        for cell in self.cells():  # validates every spec
            cell.spec(cell.widths[0], 0)

    def narrow_widths(self) -> tuple[float, ...]:
        """Return the widths up to ``long_max_width`` (every width if it is None)."""
        return tuple(w for w in self.widths if self.long_max_width is None or w <= self.long_max_width)

    def widths_at(self, epochs: int) -> tuple[float, ...]:
        """Return the widths the length arm trains at ``epochs``: all at the decay arm's length, those up to
        long_max_width at the other lengths."""
        return self.widths if epochs == self.epochs else self.narrow_widths()

    def cut_widths(self) -> tuple[float, ...]:
        """Return the widths that only the decay arm's ``wide_decays`` and the small-initialisation arm train."""
        return tuple(w for w in self.widths if w not in self.narrow_widths())

    def equal_d_couples(self) -> list[tuple[tuple[int, float], tuple[int, float]]]:
        """Return the pairs of cells, ((length, weight decay) of the length arm, (epochs, weight decay) of the decay
        arm), whose products weight decay × length agree: equal D reached by length and by weight decay."""
        out = []
        for e in self.regimes or ():
            for wd in self.regime_weight_decays:
                if e == self.epochs:
                    continue
                for wd2 in self.weight_decays:
                    if abs(wd2 * self.epochs - wd * e) <= 1e-9 * max(wd * e, 1e-12):
                        out.append(((e, wd), (self.epochs, wd2)))
        return out

    def _decisive(self) -> dict[tuple[int, float, float], set[float]]:
        wide = self.widths[-2:]
        lo, hi = self.weight_decays[0], self.weight_decays[-1]
        out: dict[tuple[int, float, float], set[float]] = {}
        out.setdefault((self.epochs, lo, 1.0), set()).add(wide[-1])
        out.setdefault((self.epochs, hi, 1.0), set()).update(wide)
        # the width pages' own cell and their weak-weight-decay twin's share their runs: the same pairs where the
        # width rows decide (WidthStudy.deciding_widths on these widths)
        shared = deciding_widths(self.widths)
        for wd in {WidthStudy.weight_decay, ControlsStudy.weak_weight_decay} & set(self.wide_decays):
            out.setdefault((self.epochs, wd, 1.0), set()).update(shared)
        for s in self.init_scales or ():
            out.setdefault((self.epochs, lo, s), set()).add(wide[-1])
        if self.regimes:
            longest = max(self.regimes)
            common = max(self.widths_at(longest))
            # the long rows W1 and W7 read the two widest widths of the longest length (W6 (update)'s trend over its
            # 3 widths cannot decide, so its narrowest keeps `seeds` pairs: the time budget's cut)
            for wd in self.regime_weight_decays:
                out.setdefault((longest, wd, 1.0), set()).update(sorted(self.widths_at(longest))[-2:])
            # R1 and R2 compare the smallest-D cell with the largest-D ones (M6's couples) at the common width
            out.setdefault((self.epochs, lo, 1.0), set()).add(common)
            for (e, wd), (e2, wd2) in self.equal_d_couples():
                out.setdefault((e, wd, 1.0), set()).add(common)
                out.setdefault((e2, wd2, 1.0), set()).add(common)
        return out

    def cells(self) -> list[CellStudy]:
        """Return every cell (decay arm, length arm, small-initialisation arm), coinciding cells merged, ordered by
        (init_scale, epochs, weight_decay)."""
        widths: dict[tuple[int, float, float], set[float]] = {}
        for wd in self.weight_decays:
            kept = self.widths if wd in self.wide_decays else self.narrow_widths()
            widths.setdefault((self.epochs, wd, 1.0), set()).update(kept)
        for e in self.regimes or ():
            for wd in self.regime_weight_decays:
                widths.setdefault((e, wd, 1.0), set()).update(self.widths_at(e))
        for s in self.init_scales or ():
            widths.setdefault((self.epochs, self.weight_decays[0], s), set()).update(self.widths)
        decisive = self._decisive()
        keep = {**self.training(), "arch": self.arch, "depth": self.depth}
        return [CellStudy(**{**keep, "epochs": e, "weight_decay": wd, "init_scale": s, "widths": tuple(sorted(ws)),
                             "decisive_widths": tuple(sorted(decisive.get((e, wd, s), ()))) or None,
                             "decisive_seeds": self.decisive_seeds, "match_iterations": self.match_iterations})
                for (e, wd, s), ws in sorted(widths.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1]))]

    def pairs(self) -> list[Pair]:
        """Return every pair of every cell."""
        return [p for c in self.cells() for p in c.pairs()]

    def run_count(self) -> int:
        """Return how many runs the cells train."""
        return sum(c.run_count() for c in self.cells())



@dataclass(frozen=True)
class DepthStudy(Training):
    """The depth sweep: bias-free MLPs of L = 2..6 linear layers at one width.  It has no ``arch`` or ``depth``:
    it trains MLPs and sweeps ``depths``, each depth a :class:`Recipe` built from this study's fields.  Its data,
    length, λ grid and pairs differ from the width sweep's; so do its paper values (no normalisation, no biases)."""

    #: Parameters a width page has and this study does not, and why.
    not_fields = {"depth": "it sweeps depths", "arch": "it trains MLPs only"}

    dataset: str = param("digits", paper="mnist")  # the data set (lmcbook.data): 8x8 digits, embedded
    base_width: int = param(64, paper=512)  # hidden units at width multiplier 1
    norm: str = param("none")  # no normalisation: LEWC's λ^l scale holds for bare MLPs
    bias: bool = param(False)  # no biases: LEWC's λ^l scale holds for bare MLPs
    epochs: int = param(60, smoke=4, paper=60, lo=1)  # passes over the training split
    seeds: int = param(1, paper=5, lo=1, hi=MAX_REPLICATES)  # pairs per depth (W10 reads 5 in the paper profile)
    lams: tuple[float, ...] = param(DEFAULT_LAMS, smoke=(0.0, 0.5, 1.0))  # the λ grid: 21 points in [0, 1]
    init_scale: float = param(1.0, **POSITIVE)  # factor on the initial weights (1: PyTorch's initialisation)
    weight_decay: float = param(3e-3, lo=0)  # SGD's weight decay (L2), as the width sweep's
    width: float = param(8.0, smoke=0.25, paper=2.0, **WIDTH)  # multiplier of base_width: 512 hidden units
    depths: tuple[int, ...] = param((2, 3, 4, 5, 6), smoke=(2, 3))  # the linear layers L of each MLP

    def __post_init__(self) -> None:
        super().__post_init__()
        if any(not float(d).is_integer() or d < 2 for d in self.depths):
            raise SpecError(f"depths={list(self.depths)!r} is not allowed: expected integers >= 2")
        object.__setattr__(self, "depths", tuple(int(d) for d in self.depths))
        for d in self.depths:
            self.spec(self.width, 0, d)

    def recipe(self, depth: int) -> Recipe:
        """Return the recipe of one depth: an MLP of ``depth`` linear layers with this study's fields."""
        return Recipe(**self.training(), arch="mlp", depth=depth, init_scale=self.init_scale,
                      weight_decay=self.weight_decay)

    def spec(self, width: float, seed: int, depth: int) -> RunSpec:
        """Return the RunSpec of one model at ``depth``."""
        return self.recipe(depth).spec(width, seed)

    def pairs(self) -> list[Pair]:
        """Return every pair of the sweep, depths outermost."""
        return [self.recipe(d).pair(self.width, p) for d in self.depths for p in range(self.seeds)]

    def run_count(self) -> int:
        """Return how many runs the sweep trains."""
        return 2 * self.seeds * len(self.depths)
