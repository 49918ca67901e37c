"""The numbers the theory_lewc page quotes, each under its glue key."""

from __future__ import annotations

import pandas as pd

from ..schema import select


def construction_measures(checks: pd.DataFrame, kind: str, depth: int) -> dict[str, float]:
    """Return one constructed pair's measures (``kind``: ``theory.KINDS``) from the page's checks: the worst absolute
    value over layers and λ of the LEWC error (``lewc``; ``lewc2`` at layer 2 and λ = ½), the additivity error, the
    sign conflicts, the orthogonality ratio and the cross-term error; the logit norm ratio and τ ratio, and their
    distances from the LEWC predictions 2^(1−L) and 2^(L−1) and of the scale-law slope from 1."""
    def worst(metric: str, **filters: float) -> float:
        return float(select(checks, metric, method=kind, **filters)["value"].abs().max())

    def first(metric: str) -> float:
        return float(select(checks, metric, method=kind)["value"].iloc[0])

    norm, tau = first("logit_norm_ratio"), first("tau_ratio")
    return dict(lewc=worst("lewc_rel_err"), lewc2=worst("lewc_rel_err", layer=2, lam=0.5),
                add=worst("additivity_rel_err"), sign=worst("sign_conflict"), orth=worst("orth_ratio"),
                cross=worst("cross_rel_err"), norm=norm, tau=tau, norm_err=abs(norm - 2.0 ** (1 - depth)),
                tau_relerr=abs(tau / 2.0 ** (depth - 1) - 1), beta_err=abs(first("scale_beta") - 1))


def theory_numbers(checks: pd.DataFrame, depth: int) -> dict[str, float]:
    """Return the numbers the page's prose quotes, by glue key ``KIND_MEASURE`` (:func:`construction_measures`)."""
    bd, dr, ov = (construction_measures(checks, kind, depth) for kind in ("block_diagonal", "disjoint_rows",
                                                                           "overlapping"))
    return {"block_diagonal_lewc": bd["lewc"], "block_diagonal_lewc2": bd["lewc2"], "block_diagonal_add": bd["add"],
            "block_diagonal_sign": bd["sign"], "block_diagonal_orth": bd["orth"], "block_diagonal_norm": bd["norm"],
            "block_diagonal_tau": bd["tau"], "block_diagonal_norm_err": bd["norm_err"],
            "block_diagonal_tau_relerr": bd["tau_relerr"], "block_diagonal_beta_err": bd["beta_err"],
            "disjoint_rows_lewc": dr["lewc"], "disjoint_rows_lewc2": dr["lewc2"], "disjoint_rows_add": dr["add"],
            "disjoint_rows_sign": dr["sign"], "disjoint_rows_orth": dr["orth"], "disjoint_rows_norm": dr["norm"],
            "disjoint_rows_tau": dr["tau"], "disjoint_rows_beta_err": dr["beta_err"],
            "overlapping_lewc": ov["lewc"], "overlapping_lewc2": ov["lewc2"], "overlapping_add": ov["add"],
            "overlapping_sign": ov["sign"], "overlapping_orth": ov["orth"], "overlapping_norm": ov["norm"],
            "overlapping_tau": ov["tau"], "overlapping_beta_err": ov["beta_err"]}
