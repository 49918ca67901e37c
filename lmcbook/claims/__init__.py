"""The claims: every claim's test, its verdict, and the scoreboard built from them.

Each test reads only the long-format CSVs the pages save (their schema: :mod:`lmcbook.schema`) and decides from the
statistics of :mod:`lmcbook.stats`; a page glues the verdicts of :func:`page_claims` on the frame it saved, and the
claims page runs :func:`scoreboard` on the saved CSVs.  The package's layout is its index:

- :mod:`lmcbook.claims.thresholds`: every constant a verdict reads, in one commented table (its value, the rows it
  serves, whether it was fixed before or after their results, and by which commit);
- :mod:`lmcbook.claims.verdicts`: the machinery every family shares (the four states, :class:`ClaimResult`);
- :mod:`lmcbook.claims.width`: the width paper's claims W1–W15;
- :mod:`lmcbook.claims.mechanism`: M1–M6 and the training-regime rows R1–R2, and
  :mod:`lmcbook.claims.mechanism_accounts`: which account they support;
- :mod:`lmcbook.claims.noise`: the noise paper's claims N1–N7, and :mod:`lmcbook.claims.noise_map`: the regime map;
- :mod:`lmcbook.claims.board`: ``PAGE_CLAIMS`` (the pages and the claims each one's verdicts come from) and the
  scoreboard.

Every public name of these modules is importable from ``lmcbook.claims`` itself.
"""

from __future__ import annotations

from .board import (
    BLOCK_TITLES,
    NUMBER_COLUMNS,
    PAGE_CLAIMS,
    SHORTEST_ONLY,
    block_counts,
    board_results,
    board_rows,
    id_order,
    mark_repeats,
    page_claims,
    scoreboard,
    scoreboard_long,
    scoreboard_markdown,
    scoreboard_table,
    shortest_cells,
    state_of,
)
from .mechanism import (
    claim_m1,
    claim_m2,
    claim_m3,
    claim_m4,
    claim_m5,
    claim_m6,
    claim_r1,
    claim_r2,
    equal_d_couples,
    largest_d_cell,
    mechanism_claims,
    mechanism_standard,
    regime_cells,
    short_merge,
)
from .mechanism_accounts import (
    CONCLUSIONS,
    CONTRADICTED,
    HYPOTHESES,
    HYPOTHESIS_ROWS,
    NONE_EXPLAINS,
    OBSERVATION_ROWS,
    OBSERVATIONS,
    SUPPORTED,
    UNDECIDED,
    barrier_cells,
    closest_barrier,
    conclusion,
    conclusion_table,
    data_hypothesis,
    decide,
    deciding_rows,
    hypothesis_states,
    repeated_hypotheses,
    source_label,
)
from .noise import (  # noqa: F401 (_rule_text: tests/test_noise.py reads it)
    ABSENT,
    ABSENT_EFFECT,
    CANNOT_DECIDE,
    Collapse,
    _rule_text,
    absent,
    b_coefficient,
    cell_mean_fit,
    claim_n1,
    claim_n2,
    claim_n3,
    claim_n4,
    claim_n5,
    claim_n6,
    claim_n7,
    collapse,
    mark_kept,
    noise_cells,
    noise_grid_cells,
    noise_pairs,
    sized,
)
from .noise_map import (
    MAP_KEYS,
    MAP_READINGS,
    claim_n8,
    claim_n9,
    describe_setting,
    map_cells,
    map_settings,
    map_spawn_sweep,
    noise_claims,
    pick_setting,
    rule_sensitivity,
)
from .thresholds import (
    ACC_BARRIER_MAX,
    CAL_BARRIER_MAX,
    CAL_OVER_RAW_MAX,
    CHANCE_RATE,
    CHANGED_AFTER_RESULTS,
    COLLAPSE_RATIO_MAX,
    CONVERGED_TRAIN_ACC,
    D_TIE_RTOL,
    DECAY_ACTED_MAX,
    DECAY_IDLE_MIN,
    EQUAL_D_TOL,
    FIRST_PICK,
    FIXED_BEFORE,
    FIXED_BEFORE_SOURCE,
    LEWC_COS_MIN,
    LEWC_LLFC_LAMS,
    LLFC_MATCHED_MAX,
    LOGIT_SCALE_TOL,
    MAP_MIN_PAIRS,
    MATCHED_ACC_TOL,
    MERGED_OVER_ENSEMBLE_MIN,
    MIN_ACC_EFFECT,
    MIN_PAIRS,
    MIN_TREND_POINTS,
    NOISE_B_EFFECT,
    NOISE_CONVERGED_TRAIN_ACC,
    NOISE_FAILED_TRAIN_ACC,
    NOISE_MIN_CELLS,
    NOISE_MIN_EFFECT,
    NOISE_RULE_THRESHOLDS,
    ORTH_FALL_MIN,
    ORTH_OVER_UNTRAINED_MAX,
    ORTH_RATIO_MAX,
    PAPER_MLP_ACC_BARRIER,
    PAPER_TABLE1_MLP,
    PERM_EQUIV_TOL,
    PICK_ORDER,
    PRECISION_LOSS_MARGIN,
    RHO_MIN,
    STABLE_ACC_MARGIN,
)
from .verdicts import (
    BLOCK_CODES,
    BOOK,
    BOOK_ROWS,
    DIAGNOSTIC,
    FAIL,
    INCONCLUSIVE,
    MARKS,
    MATCHED,
    NA,
    PAPER,
    PASS,
    PLAIN,
    REGIMES,
    STATE_CODES,
    TABLE_MARKS,
    ClaimResult,
    chance_passes,
    decay_of,
    ties,
    trend_state,
)
from .width import (
    claim_w1,
    claim_w2,
    claim_w3,
    claim_w4,
    claim_w5,
    claim_w6,
    claim_w6_update,
    claim_w7,
    claim_w8,
    claim_w9,
    claim_w10,
    claim_w11,
    claim_w12,
    claim_w13,
    claim_w14,
    claim_w15,
    lewc_setting_missing,
)

__all__ = [
    # thresholds
    "ACC_BARRIER_MAX", "CAL_BARRIER_MAX", "CAL_OVER_RAW_MAX", "CHANCE_RATE", "CHANGED_AFTER_RESULTS",
    "COLLAPSE_RATIO_MAX", "CONVERGED_TRAIN_ACC", "D_TIE_RTOL", "DECAY_ACTED_MAX", "DECAY_IDLE_MIN", "EQUAL_D_TOL",
    "FIRST_PICK", "FIXED_BEFORE", "FIXED_BEFORE_SOURCE", "LEWC_COS_MIN", "LEWC_LLFC_LAMS", "LLFC_MATCHED_MAX",
    "LOGIT_SCALE_TOL", "MAP_MIN_PAIRS", "MATCHED_ACC_TOL", "MERGED_OVER_ENSEMBLE_MIN", "MIN_ACC_EFFECT",
    "MIN_PAIRS", "MIN_TREND_POINTS", "NOISE_B_EFFECT", "NOISE_CONVERGED_TRAIN_ACC", "NOISE_FAILED_TRAIN_ACC",
    "NOISE_MIN_CELLS",
    "NOISE_MIN_EFFECT", "NOISE_RULE_THRESHOLDS", "ORTH_FALL_MIN", "ORTH_OVER_UNTRAINED_MAX", "ORTH_RATIO_MAX",
    "PAPER_MLP_ACC_BARRIER", "PAPER_TABLE1_MLP", "PERM_EQUIV_TOL", "PICK_ORDER", "PRECISION_LOSS_MARGIN", "RHO_MIN",
    "STABLE_ACC_MARGIN",
    # verdicts
    "BLOCK_CODES", "BOOK", "BOOK_ROWS", "DIAGNOSTIC", "FAIL", "INCONCLUSIVE", "MARKS", "MATCHED", "NA", "PAPER",
    "PASS", "PLAIN", "REGIMES", "STATE_CODES", "TABLE_MARKS", "ClaimResult", "chance_passes", "decay_of", "ties",
    "trend_state",
    # width
    "claim_w1", "claim_w2", "claim_w3", "claim_w4", "claim_w5", "claim_w6", "claim_w6_update", "claim_w7",
    "claim_w8", "claim_w9", "claim_w10", "claim_w11", "claim_w12", "claim_w13", "claim_w14", "claim_w15",
    "lewc_setting_missing",
    # mechanism
    "claim_m1", "claim_m2", "claim_m3", "claim_m4", "claim_m5", "claim_m6", "claim_r1", "claim_r2",
    "equal_d_couples", "largest_d_cell", "mechanism_claims", "mechanism_standard", "regime_cells", "short_merge",
    # mechanism_accounts
    "CONCLUSIONS", "CONTRADICTED", "HYPOTHESES", "HYPOTHESIS_ROWS", "NONE_EXPLAINS", "OBSERVATION_ROWS",
    "OBSERVATIONS", "SUPPORTED", "UNDECIDED",
    "barrier_cells", "closest_barrier", "conclusion", "conclusion_table", "data_hypothesis", "deciding_rows", "decide",
    "hypothesis_states", "repeated_hypotheses", "source_label",
    # noise
    "ABSENT", "ABSENT_EFFECT", "CANNOT_DECIDE", "Collapse", "absent", "b_coefficient", "cell_mean_fit", "claim_n1",
    "claim_n2", "claim_n3", "claim_n4", "claim_n5", "claim_n6", "claim_n7", "claim_n8", "claim_n9",
    "collapse", "mark_kept", "noise_cells", "noise_claims",
    "noise_grid_cells", "noise_pairs", "rule_sensitivity", "sized",
    # noise_map
    "MAP_KEYS", "MAP_READINGS", "describe_setting", "map_cells", "map_settings", "map_spawn_sweep", "pick_setting",
    # board
    "BLOCK_TITLES", "NUMBER_COLUMNS", "PAGE_CLAIMS", "block_counts", "board_results", "board_rows", "id_order",
    "SHORTEST_ONLY", "mark_repeats", "shortest_cells",
    "page_claims", "scoreboard", "scoreboard_long", "scoreboard_markdown", "scoreboard_table", "state_of",
]
