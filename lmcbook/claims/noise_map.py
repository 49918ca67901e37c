"""The regime map (the noise_regime page): where can merging gain at all?  And the book's own noise rows: N8 (merging
against annealing, on the map) and N9 (where the grid's optimum lies); and the sensitivity table that reads N1–N7
again at other thresholds of the rule (:func:`rule_sensitivity`).  Each cell of the map (augmentation,
the schedule's floor, the start, η) gets a reading from its intervals over pairs
(:data:`~lmcbook.claims.noise_map.MAP_READINGS`), each setting a ranking (:func:`map_settings`), and the map picks the
setting the noise pages run (:func:`pick_setting`). The map itself decides no claim.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..schema import GAIN, NOISE_SCALE
from ..stats import CONFIDENCE, Interval, above, both, interval, interval_diff, t_interval
from .noise import (
    _gains,
    _noise_row,
    claim_n1,
    claim_n2,
    claim_n3,
    claim_n4,
    claim_n5,
    claim_n6,
    claim_n7,
    mark_kept,
    noise_cells,
    noise_pairs,
)
from .thresholds import (
    EDGE_RESOLUTION,
    MAP_MIN_PAIRS,
    MIN_PAIRS,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    PICK_ORDER,
    STABLE_ACC_MARGIN,
)
from .verdicts import FAIL, INCONCLUSIVE, NA, PASS, TABLE_MARKS, ClaimResult, _values

#: The key columns of a map cell, as the regime map's CSV holds them.
MAP_KEYS = ["augment", "lr_floor", "method", "spawn_fraction", "lr"]
#: A map cell's reading, from its intervals over pairs (:func:`map_cells`), in the order they are tried.
MAP_READINGS = {
    "failed": "excluded by the rule: a run diverged or ended near chance",
    "paper": "merging gains at least the paper's size (its interval lies above the minimum effect)",
    "gains": "merging gains (its interval lies above 0), less than the paper's size",
    "basins": "the merge loses more than the minimum effect while the ensemble gains: the children sit on either "
              "side of a barrier",
    "harvest": "nothing to harvest: the ensemble of the two children gains less than the minimum effect",
    "undecided": "undecided: the intervals straddle",
}


def _map_reading(gain: Interval, ens: Interval, kept: bool) -> str:
    if not kept:
        return "failed"
    if gain.n < MAP_MIN_PAIRS or not gain.decided:
        return "undecided"
    if gain.lo > NOISE_MIN_EFFECT:
        return "paper"
    if gain.lo > 0:
        return "gains"
    if gain.hi < -NOISE_MIN_EFFECT and ens.decided and ens.lo > 0:
        return "basins"
    if ens.decided and ens.hi < NOISE_MIN_EFFECT:
        return "harvest"
    return "undecided"


def map_cells(frame: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> pd.DataFrame:
    """Return one row per cell of the regime map's long frame: its keys (:data:`~lmcbook.claims.noise_map.MAP_KEYS`),
    pairs ``n``, the merging gain and the ensemble gain with their intervals over pairs, the children's disagreement,
    distance and training and test accuracy (means), ``kept`` by the rule, and its ``reading``
    (:data:`~lmcbook.claims.noise_map.MAP_READINGS`)."""
    frame = frame.assign(augment=_as_bool(frame["augment"]))
    pairs = noise_pairs(frame, MAP_KEYS)
    cells = noise_cells(pairs, MAP_KEYS, rule)
    rows = []
    for key, g in pairs.groupby(MAP_KEYS):  # a few pairs a cell: Student-t intervals, not a bootstrap's range
        gain = t_interval(g[GAIN].dropna())
        ens = t_interval(g["ensemble_gain"].dropna()) if "ensemble_gain" in g else t_interval([])
        kept = bool(cells.loc[key, "kept"])
        rows.append({**dict(zip(MAP_KEYS, key)), "n": len(g), "gain": gain.mean, "gain_lo": gain.lo,
                     "gain_hi": gain.hi, "ensemble_gain": ens.mean, "ensemble_gain_lo": ens.lo,
                     "ensemble_gain_hi": ens.hi, "kept": kept, "reading": _map_reading(gain, ens, kept),
                     **{c: g[c].mean() for c in ("disagreement", "pair_distance", "acc_endpoints", "acc_merged",
                                                 "train_acc_min") if c in g}})
    return pd.DataFrame(rows)


def map_settings(cells: pd.DataFrame, order: tuple[str, ...] = PICK_ORDER) -> pd.DataFrame:
    """Return one row per setting of the map (augmentation, floor, start) over its learning rates: how many cells
    gain (``n_gain``: reading paper or gains), how many of the paper's size (``n_paper``), the best cell's gain and
    its interval, and its learning rate (the best: the kept cell with an interval whose lower end is highest, the
    smaller η of a tie; NaN where the setting has no such cell, since a failed cell is never the best); sorted best
    first by ``order`` (:data:`~lmcbook.claims.thresholds.PICK_ORDER`; a setting without a best cell last)."""
    out = []
    for key, g in cells.groupby(MAP_KEYS[:-1]):
        fit = g[g["kept"].astype(bool) & g["gain_lo"].notna()].sort_values("lr")
        best = fit.loc[fit["gain_lo"].idxmax()] if len(fit) else pd.Series(np.nan, index=g.columns)
        out.append({**dict(zip(MAP_KEYS[:-1], key)), "n_cells": len(g),
                    "n_gain": int(g["reading"].isin(["paper", "gains"]).sum()),
                    "n_paper": int((g["reading"] == "paper").sum()), "best_lr": best["lr"], "best_gain": best["gain"],
                    "best_gain_lo": best["gain_lo"], "best_gain_hi": best["gain_hi"]})
    return pd.DataFrame(out).sort_values(list(order), ascending=False, ignore_index=True)


def describe_setting(setting: dict) -> str:
    """Return a map setting (augmentation, floor, spawn point; :func:`pick_setting`) in words."""
    floor = setting["lr_floor"]
    sched = ("a learning rate that decays to zero" if floor == 0 else "a constant learning rate" if floor == 1 else
             f"a learning rate that decays to {floor:g} of its peak")
    start = ("independently initialised pairs" if setting.get("method") == "independent" else
             "children from a shared initialisation" if setting["spawn_fraction"] == 0 else
             f"children spawned at {setting['spawn_fraction']:.0%} of training")
    if setting.get("method") == "anneal":
        start = f"children spawned at {setting['spawn_fraction']:.0%} and annealed to zero from there"
    return f"{start}, {sched}, {'with' if setting['augment'] else 'without'} augmentation"


def _as_bool(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(["true", "1", "1.0"])


def map_spawn_sweep(frame: pd.DataFrame | None, study: Any) -> pd.DataFrame:
    """Return the regime map's spawned pairs (one row per cell and pair, every metric a column, ``kept`` by the rule)
    at a noise study's data set, schedule floor and augmentation: the spawn sweep, read off the map (empty without a
    map, or when the map has no such cells)."""
    if frame is not None and "dataset" in frame:
        frame = frame[frame["dataset"] == study.dataset]
    if frame is not None:
        frame = frame[(frame["method"] == "spawn") & np.isclose(frame["lr_floor"], study.lr_floor)
                      & (_as_bool(frame["augment"]) == bool(study.augment))]
    if frame is None or frame.empty:
        return pd.DataFrame(columns=["spawn_fraction", "lr", GAIN, "ensemble_gain", "acc_endpoints", NOISE_SCALE])
    return mark_kept(noise_pairs(frame, ["spawn_fraction", "lr"]), ["spawn_fraction", "lr"])


def pick_setting(cells: pd.DataFrame, order: tuple[str, ...] = PICK_ORDER) -> dict[str, object] | None:
    """Return the spawn-and-merge setting (augmentation, floor, spawn point) that ranks first by ``order``
    (:data:`~lmcbook.claims.thresholds.PICK_ORDER`: the most cells gaining the paper's size, then gaining at all, then
    the best interval's lower end), or None when no spawned cell gains: the setting the noise study moves to.
    Independent pairs are the control, never picked."""
    spawned = map_settings(cells[cells["method"] == "spawn"], order)
    if spawned.empty or spawned["n_gain"].iloc[0] == 0:
        return None
    return {k: spawned[k].iloc[0] for k in ("augment", "lr_floor", "spawn_fraction")}


def claim_n8(regime: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> ClaimResult:
    """N8 (the book's own row; issue 49): merging gains more than annealing.  On the regime map's frame, at the setting
    the map picks (:func:`pick_setting`), the merged model's test accuracy against the mean of children of the *same
    parents* whose rate decays to zero from the spawn instead (method "anneal": ``NoiseRegimeStudy.anneal``), read
    two ways, each above NOISE_MIN_EFFECT by its interval:

    - *at the pick's best η*: merged minus annealed, paired by parent, over ≥ MIN_PAIRS pairs;
    - *each at its own best η*: the merge's best η and annealing's best η, each chosen on the even pairs among the
      kept cells (no failed pair) and read on the odd ones, so that neither side wins by the choice.

    ✓ when both lie above the minimum effect; ✗ when either lies wholly at or below it (merging gives no more than
    annealing would); n/a when the map picks nothing, its pick decays to zero itself, or the map holds no annealed
    children of the pick (a decay-to-zero cell of the map is no stand-in: its parent's rate had already decayed by the
    spawn).  The row also gives the paired difference at every η where both cells were kept."""
    statement = ("(ours) Merging gains more than annealing: the merged model beats children of the same parents whose "
                 "learning rate decays to zero from the spawn.")
    test = (f"merged accuracy minus the annealed children's, at the picked setting's best η (paired by parent) and "
            f"each at its own best η (chosen on the even pairs, read on the odd), both above the minimum effect, "
            f"{100 * NOISE_MIN_EFFECT:g} points, by a {100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ "
            "if either lies at or below it")
    cells = map_cells(regime, rule)
    pick = pick_setting(cells)
    if pick is None or pick["lr_floor"] == 0:
        return ClaimResult("N8", "noise", statement, "the map picks no setting whose learning rate stays above zero",
                           test, NA, "noise_regime")
    pairs = noise_pairs(regime.assign(augment=_as_bool(regime["augment"])), MAP_KEYS)
    here = pairs[(pairs["augment"] == pick["augment"]) & np.isclose(pairs["spawn_fraction"], pick["spawn_fraction"])
                 & np.isclose(pairs["lr_floor"], pick["lr_floor"])]
    kept = cells[cells["kept"].astype(bool)]
    kept_lrs = {m: {float(lr) for lr in kept.loc[(kept["method"] == m) & (kept["augment"] == pick["augment"])
                                                 & np.isclose(kept["spawn_fraction"], pick["spawn_fraction"])
                                                 & np.isclose(kept["lr_floor"], pick["lr_floor"]), "lr"]}
                for m in ("spawn", "anneal")}
    if not (here["method"] == "anneal").any():
        return ClaimResult("N8", "noise", statement, "this map holds no children annealed from the pick's spawns (its "
                           "decay-to-zero cells are no stand-in: their parents' rate had already decayed by the "
                           "spawn)", test, NA, "noise_regime")
    arms = {m: here[here["method"] == m].set_index(["lr", "pair"])[col]
            for m, col in (("spawn", "acc_merged"), ("anneal", "acc_endpoints"))}
    both_kept = sorted(kept_lrs["spawn"] & kept_lrs["anneal"])
    best = float(map_settings(cells[cells["method"] == "spawn"]).iloc[0]["best_lr"])
    if not any(np.isclose(lr, best) for lr in both_kept):
        return ClaimResult("N8", "noise", statement, f"no kept annealed cell beside the pick at η {best:g}", test, NA,
                           "noise_regime")
    at_pick = _n8_paired(arms, best)
    (m_lr, a_lr), halves = zip(*(_n8_best_odd(arms[m], kept_lrs[m]) for m in ("spawn", "anneal")))
    own = interval_diff(*halves)
    state = both(above(at_pick, NOISE_MIN_EFFECT, MIN_PAIRS), above(own, NOISE_MIN_EFFECT, MIN_PAIRS))
    across = "; ".join(f"η {lr:g}: {_n8_paired(arms, lr).text('.2f', 100)}" for lr in both_kept)
    words = ("" if state != FAIL else "; merging gives less than annealing would" if max(at_pick.hi, own.hi) < 0
             else "; merging gives no more than annealing would")
    words += _n8_shares(here, best)
    return ClaimResult("N8", "noise", statement, f"at the pick's best η {best:g}, merged minus annealed children: "
                       f"{at_pick.text('.2f', 100)} points over {at_pick.n} pairs; each at its own best η (merge "
                       f"{m_lr:g}, annealing {a_lr:g}, chosen on the even pairs): {own.text('.2f', 100)} points on "
                       f"the odd pairs{words}; across the kept η, paired (points): {across}", test, state,
                       "noise_regime", values=_values(at_pick, NOISE_MIN_EFFECT, own=own.mean, own_lo=own.lo,
                                                      own_hi=own.hi))


def _n8_shares(here: pd.DataFrame, lr: float) -> str:
    """Return, in words, what the merge recovers at η ``lr`` of what annealing gains over the constant-rate children
    (means over pairs), and what merging the annealed children adds."""
    at = here[np.isclose(here["lr"], lr)].groupby("method")[["acc_endpoints", "acc_merged"]].mean()
    const, merged = at.loc["spawn", "acc_endpoints"], at.loc["spawn", "acc_merged"]
    annealed, both_merged = at.loc["anneal", "acc_endpoints"], at.loc["anneal", "acc_merged"]
    if not annealed > const:
        return ""
    return (f"; there the constant-rate children reach {const:.3f}, their merge {merged:.3f} and the annealed "
            f"children {annealed:.3f}: the merge recovers {(merged - const) / (annealed - const):.0%} of what "
            f"annealing gains, and merging the annealed children adds {100 * (both_merged - annealed):+.2f} points")


def _n8_paired(arms: dict[str, pd.Series], lr: float) -> Interval:
    """Return merged minus annealed accuracy at η ``lr``, paired by parent, with its interval over pairs."""
    return interval((arms["spawn"].xs(lr, level="lr") - arms["anneal"].xs(lr, level="lr")).dropna())


def _n8_best_odd(arm: pd.Series, lrs: set[float]) -> tuple[float, pd.Series]:
    """Return the η among ``lrs`` where ``arm`` (accuracy by η and pair) is highest on the even pairs, and its odd
    pairs' values there."""
    even = {lr: arm.xs(lr, level="lr")[lambda v: v.index % 2 == 0].mean() for lr in lrs}
    lr = max((x for x in even if np.isfinite(even[x])), key=even.get)
    return lr, arm.xs(lr, level="lr")[lambda v: v.index % 2 == 1].dropna()


def claim_n9(noise: pd.DataFrame, rule: float = NOISE_FAILED_TRAIN_ACC) -> list[ClaimResult]:
    """N9 (the book's own row, one per spawn point of the grid; issue 49): the gain peaks *inside* the range where
    training holds up, against "the gain is highest where training starts to degrade".  The optimum is chosen on the
    even pairs among the kept cells (no pair failed) and read on the odd ones.  Beyond it (larger S), a cell *trains
    as well* when it is kept and its weaker children's mean training accuracy is within STABLE_ACC_MARGIN of the
    optimum's own; the cell compared with the optimum is the one of largest S among those (of several there, the best
    on the even pairs).

    - ✓ (a peak inside): the optimum's gain minus that cell's above NOISE_MIN_EFFECT by its interval;
    - ✗ (highest at the edge): the fall's interval lies wholly at or below the minimum effect (the gain holds while
      training does), or no cell beyond trains as well while one beyond does not, and the grid resolves that edge
      (the first such cell lies within a factor EDGE_RESOLUTION of the optimum in S);
    - inconclusive: the fall's interval straddles the minimum effect, the grid does not resolve the edge, or no cell of
      larger S exists;
    - n/a: fewer than NOISE_MIN_CELLS kept cells."""
    out, keys = [], ["lr", "batch_size"]
    statement = ("(ours) The merging gain peaks inside the range where training holds up: it falls by the paper's "
                 "size before the children train worse, rather than being highest where they start to.")
    test = (f"kept cells (no pair failed; ≥ {NOISE_MIN_CELLS}); the optimum chosen on the even pairs, read on the odd; "
            f"its gain minus that of the largest-S cell beyond it whose weaker children train within "
            f"{STABLE_ACC_MARGIN:g} of the optimum's above the minimum effect, {100 * NOISE_MIN_EFFECT:g} points, by a "
            f"{100 * CONFIDENCE:.0f}% interval over ≥ {MIN_PAIRS} pairs; ✗ if it lies at or below it, or if the first "
            f"cell beyond trains worse and lies within a factor {EDGE_RESOLUTION:.3g} in S")
    for k, part in noise[noise["method"] == "grid"].groupby("spawn_fraction"):
        cid = f"N9 ({k:.0%})"
        pairs = noise_pairs(part, keys)
        cells = noise_cells(pairs, keys, rule)
        cells["S"] = pairs.groupby(keys)[NOISE_SCALE].first()
        kept = cells[cells["kept"]]
        if len(kept) < NOISE_MIN_CELLS:
            out.append(_noise_row(cid, "noise_scale", statement, f"{len(kept)} of {len(cells)} cells kept: fewer than "
                                  f"{NOISE_MIN_CELLS}", test, NA, {"n_kept": len(kept)}))
            continue
        even = {c: _gains(pairs, keys, c, half=0).mean() for c in kept.index}
        best = max(even, key=even.get)
        s_best, acc_best = kept.loc[best, "S"], kept.loc[best, "train_acc_mean"]
        beyond = cells[cells["S"] > s_best * (1 + 1e-9)]
        well = beyond["kept"] & (beyond["train_acc_mean"] >= acc_best - STABLE_ACC_MARGIN - 1e-12)
        head = (f"optimum on the even pairs: η {best[0]:g}, B {best[1]:g} (S = {s_best:.3g}; its weaker children "
                f"train to {acc_best:.3f}); beyond it {int(well.sum())} of {len(beyond)} cells train as well (within "
                f"{STABLE_ACC_MARGIN:g})")
        state, tail, values = _n9_past_the_optimum(pairs, keys, even, best, beyond[well], beyond[~well], s_best)
        out.append(_noise_row(cid, "noise_scale", statement, f"{head}; {tail}", test, state,
                              {**values, "n_kept": len(kept), "s_opt": s_best}))
    return out


def _n9_past_the_optimum(pairs: pd.DataFrame, keys: list[str], even: dict, best: tuple, past: pd.DataFrame,
                         worse: pd.DataFrame, s_best: float) -> tuple[str, str, dict]:
    """Return N9's verdict, words and values past the optimum ``best`` (``even``: the kept cells' even-half mean
    gains; ``past``: the cells of larger S that train as well; ``worse``: those that do not)."""
    if past.empty:
        if worse.empty:
            return INCONCLUSIVE, "no cell of larger S: the grid stops short of the edge", {}
        gap = worse["S"].min() / s_best
        if gap > EDGE_RESOLUTION * (1 + 1e-6):
            return INCONCLUSIVE, (f"the next cell beyond trains worse, but lies a factor {gap:.3g} away in S: the grid "
                                  "does not resolve the edge"), {}
        return FAIL, "the next cell beyond trains worse: the gain is highest where training starts to degrade", {}
    end = max(past.index[np.isclose(past["S"], past["S"].max())], key=lambda c: even.get(c, -np.inf))
    d = interval_diff(_gains(pairs, keys, best, half=1), _gains(pairs, keys, end, half=1))
    state = above(d, NOISE_MIN_EFFECT, MIN_PAIRS)
    words = {PASS: "a peak inside the range where training holds up", INCONCLUSIVE: "undecided",
             FAIL: "no fall of the paper's size: the gain holds while training does"}[state]
    return state, (f"on the odd pairs its gain minus the largest-S such cell's (η {end[0]:g}, B {end[1]:g}, "
                   f"S = {past.loc[end, 'S']:.3g}): {d.text('.2f', 100)} points: {words}"), _values(d, NOISE_MIN_EFFECT)


def noise_claims(noise_scale: pd.DataFrame | None, components: pd.DataFrame | None,
                 rule: float = NOISE_FAILED_TRAIN_ACC) -> list[ClaimResult]:
    """Return N1–N7 at the rule's threshold ``rule`` on a noise_scale frame and a noise_components frame (either may
    be None)."""
    rows = [] if noise_scale is None else claim_n1(noise_scale, rule) + claim_n2(noise_scale, rule)
    if components is not None:
        rows += [f(components, rule) for f in (claim_n3, claim_n4, claim_n5, claim_n6, claim_n7)]
    return rows


def rule_sensitivity(noise_scale: pd.DataFrame | None, components: pd.DataFrame | None,
                     thresholds: tuple[float, ...] = NOISE_RULE_THRESHOLDS) -> pd.DataFrame:
    """Return each noise row's verdict (``TABLE_MARKS``: a word, not Markdown) at each of the rule's ``thresholds``
    (one column per threshold, the first being the rule itself): how the verdicts move as the rule excludes more
    cells."""
    out: dict[str, dict[str, str]] = {}
    for t in thresholds:
        name = f"failed only (< {t:g})" if t <= NOISE_FAILED_TRAIN_ACC else f"weaker child ≥ {t:g}"
        for r in noise_claims(noise_scale, components, t):
            out.setdefault(r.id, {})[name] = TABLE_MARKS[r.state]
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("claim")
