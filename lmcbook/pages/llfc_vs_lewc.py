"""The llfc_vs_lewc page's CSV, its figure's panels and the numbers its prose quotes."""

from __future__ import annotations

import pandas as pd

from ..schema import concat, select, to_long_frame
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


def figure_panels(last: int) -> list[dict]:
    """Return the page's figure panels (:func:`lmcbook.plots.plot_panels`): the cosines and errors of LEWC and LLFC
    at the last hidden layer ``last`` and λ = ¼, then the commutativity error and the orthogonality ratio."""
    quarter = dict(layer=last, lam=0.25)
    at = rf"layer {last}, $\lambda=\frac{{1}}{{4}}$"
    return [dict(metric="lewc_cos", title=f"cosine to LEWC, {at}", filters=quarter),
            dict(metric="llfc_cos", title=f"cosine to LLFC, {at}", filters=quarter),
            dict(metric="lewc_rel_err", title=f"LEWC error, {at}", filters=quarter, logy=True),
            dict(metric="llfc_rel_err", title=f"LLFC error, {at}", filters=quarter, logy=True),
            dict(metric="commutativity_rel_err", title="commutativity error (layers 2..L)", logy=True),
            dict(metric="orth_ratio", title="orthogonality ratio (layers 2..L)", logy=True)]


#: How the figure names the pairs.
PAIR_NAMES = {"trained": "unpermuted", "weight_matched": "weight-matched", "untrained": "untrained pair"}


def compared_long(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Return the page's CSV, which its figure reads: the LEWC and LLFC probes of every pair kind, and the
    orthogonality and commutativity probes at λ = ½ (``frames``: :func:`lmcbook.experiments.probe_frames`)."""
    keys = ["width", "hidden_units", "depth", "layer", "lam", "method"]
    return concat([to_long_frame(frames["lewc"], "llfc_vs_lewc", keys),
                   to_long_frame(select(frames["reciprocal_orthogonality"], lam=0.5), "llfc_vs_lewc", keys)])
