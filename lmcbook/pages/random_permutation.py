"""The numbers the random_permutation page quotes, each under its glue key."""

from __future__ import annotations

import pandas as pd


def permutation_numbers(means: pd.DataFrame, spread: pd.Series) -> dict[str, float]:
    """Return the numbers the page's prose quotes, by glue key: the merged accuracy (means over pairs, ``means``: by
    hidden units and method) of the unpermuted pair (``none``), of random permutations and after weight matching, at
    the narrowest and the widest width; what weight matching adds (``wm_gain``, and at the widest width in points,
    ``wm_wide_points``, and its negative, ``wm_wide_drop``); and the spread over random draws (``spread``: by hidden
    units) in points, and its ratio from the narrowest to the widest width."""
    narrow, wide = means.loc[spread.index.min()], means.loc[spread.index.max()]
    s_narrow, s_wide = spread.loc[narrow.name], spread.loc[wide.name]
    wm_wide = 100 * (wide["weight_matching"] - wide["none"])
    return {"n_narrow": int(narrow.name), "n_wide": int(wide.name), "spread_narrow": 100 * s_narrow,
            "spread_wide": 100 * s_wide, "spread_ratio": s_wide / s_narrow if s_narrow > 0 else float("nan"),
            "wm_gain_narrow": narrow["weight_matching"] - narrow["none"],
            "wm_gain_wide": wide["weight_matching"] - wide["none"], "wm_wide_points": wm_wide, "wm_wide_drop": -wm_wide,
            "none_narrow": narrow["none"], "none_wide": wide["none"],
            "random_permutation_narrow": narrow["random_permutation"],
            "random_permutation_wide": wide["random_permutation"],
            "weight_matching_narrow": narrow["weight_matching"], "weight_matching_wide": wide["weight_matching"]}
