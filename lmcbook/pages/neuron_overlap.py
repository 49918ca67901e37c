"""The numbers the neuron_overlap page quotes, each under its glue key."""

from __future__ import annotations

import pandas as pd

from ..stats import spearman, trend


def overlap_numbers(table: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """Return what the page's prose quotes from its table (:func:`lmcbook.stats.cell_means` of the neuron moments,
    by hidden units; ``_un``: the untrained pairs), by glue key: the Jaccard index of the active sets, its chance
    level, the top share and the participation ratio at the narrowest and the widest width; and in words, whether
    the top share and the participation ratio rise or fall with width."""
    narrow, wide = table.loc[table.index.min()], table.loc[table.index.max()]
    numbers = {"n_narrow": int(narrow.name), "n_wide": int(wide.name), "jac_narrow": narrow["jac"],
               "jac_wide": wide["jac"], "jac_wide_spread": wide["jac_spread"], "jac_un_narrow": narrow["jac_un"],
               "jac_un_wide": wide["jac_un"], "chance_narrow": narrow["chance"], "chance_wide": wide["chance"],
               "top_share_narrow": narrow["top_share"], "top_share_wide": wide["top_share"],
               "top_share_un_narrow": narrow["top_share_un"], "top_share_un_wide": wide["top_share_un"],
               "participation_ratio_narrow": narrow["participation_ratio"],
               "participation_ratio_wide": wide["participation_ratio"],
               "participation_ratio_un_narrow": narrow["participation_ratio_un"],
               "participation_ratio_un_wide": wide["participation_ratio_un"]}
    words = {"top_share_trend": trend(spearman(table.index, table["top_share"]), "rises", "falls"),
             "participation_ratio_trend": trend(spearman(table.index, table["participation_ratio"]), "rises", "falls")}
    return numbers, words
