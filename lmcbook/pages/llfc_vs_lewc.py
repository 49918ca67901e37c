"""The numbers the llfc_vs_lewc page quotes, each under its glue key."""

from __future__ import annotations

import pandas as pd

from ..stats import cell_stats


def compared_numbers(long: pd.DataFrame, last: int) -> dict[str, float]:
    """Return the numbers the page's prose quotes, by glue key ``PAIRS_METRIC_WIDTH``: for the unpermuted
    (``trained``), ``weight_matched`` and ``untrained`` pairs, the mean over pairs of a measure at the narrowest or
    widest width; LEWC and LLFC read layer ``last`` at λ = ¼, the others every layer from 2."""
    units = sorted(long["hidden_units"].unique())
    narrow, wide = units[0], units[-1]

    def at(method: str, metric: str, width: float, quarter: bool = True) -> float:
        filters = dict(layer=last, lam=0.25) if quarter else {}
        return float(cell_stats(long, metric, method=method, **filters).loc[width, "mean"])

    return {
        "trained_lewc_rel_err_wide": at("trained", "lewc_rel_err", wide),
        "trained_llfc_rel_err_narrow": at("trained", "llfc_rel_err", narrow),
        "trained_llfc_rel_err_wide": at("trained", "llfc_rel_err", wide),
        "trained_lewc_cos_wide": at("trained", "lewc_cos", wide),
        "trained_llfc_cos_wide": at("trained", "llfc_cos", wide),
        "trained_commutativity_rel_err_wide": at("trained", "commutativity_rel_err", wide, quarter=False),
        "trained_orth_ratio_wide": at("trained", "orth_ratio", wide, quarter=False),
        "weight_matched_llfc_rel_err_narrow": at("weight_matched", "llfc_rel_err", narrow),
        "weight_matched_llfc_rel_err_wide": at("weight_matched", "llfc_rel_err", wide),
        "weight_matched_lewc_cos_wide": at("weight_matched", "lewc_cos", wide),
        "weight_matched_llfc_cos_wide": at("weight_matched", "llfc_cos", wide),
        "weight_matched_commutativity_rel_err_wide": at("weight_matched", "commutativity_rel_err", wide,
                                                        quarter=False),
        "weight_matched_orth_ratio_wide": at("weight_matched", "orth_ratio", wide, quarter=False),
        "untrained_lewc_cos_wide": at("untrained", "lewc_cos", wide),
        "untrained_llfc_cos_wide": at("untrained", "llfc_cos", wide),
    }
