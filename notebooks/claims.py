# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The claims scoreboard
#
# One row per claim of the two papers that this book tests. Each row gives the
# paper's statement, the number this run measured, the test that decides it, and
# whether the test passed (✓) or failed (✗), with a link to the page holding the
# evidence.
#
# **The tests were fixed before any result was looked at.** Each is a small function
# in `lmcbook/claims.py` with unit tests that make it pass and fail on synthetic data.
# They read only the CSV files that the other pages save. Conventions:
#
# - numbers are seed means of this profile's runs;
# - ρ is Spearman's rank correlation across widths;
# - "spread" is the mean over cells of max − min over seeds;
# - the noise fits are quadratic least squares on seed-level points;
# - layers and aggregation follow the definitions page.
#
# **Two regimes.** The *regime* column says which runs a row reads, and their decay
# integral $D$ (weight decay alone would shrink the weights by $e^{-D}$ without
# momentum; the {doc}`../methods` page defines it). *Short* rows read the profile's own
# runs, the ones the other width pages show. W1, W6 and W7 are also scored on
# *long* rows, which read the longest runs of {doc}`training_regime`, with the same
# fixed tests. The two rows of a claim can disagree: the paper's explanation runs
# through weight decay, and weight decay needs time to act. A width effect seen after
# a short schedule may come from networks that stayed near their initialisation,
# before the paper's mechanism has acted, and one seen after a long schedule is
# closer to the regime the paper trains in. R1 and R2 test the mechanism itself,
# across all lengths.
#
# A ✗ is a result, not an error: it means this run, in this setting, does not
# reproduce the claim. The linked page shows the evidence and discusses why. Rows
# marked *control* test a control experiment, not a claim of the paper.

# %% tags=["parameters"]
profile = "quick"

# %% tags=["remove-input"]
import lmcbook as lb
from lmcbook import book, claims

study = lb.profiles.summary_study(profile)
page = book.Page("claims", profile, {}, study)
frames = {name: page.read_csv(name) for name in sorted(set(claims.CLAIM_SOURCES.values()))}
rows = claims.scoreboard(frames)

# %% tags=["remove-input"]
from IPython.display import Markdown  # noqa: E402

main_rows = [r for r in rows if not r.control]
page.glue("n_claims", len(main_rows))
page.glue("n_pass", sum(r.passed for r in main_rows))
page.glue("n_width", sum(r.paper == "width" for r in main_rows))
page.glue("n_width_pass", sum(r.passed for r in main_rows if r.paper == "width"))
page.glue("n_noise", sum(r.paper == "noise" for r in main_rows))
page.glue("n_noise_pass", sum(r.passed for r in main_rows if r.paper == "noise"))
Markdown(claims.scoreboard_markdown(rows))

# %% [markdown]
# **In this run**, {glue:text}`n_pass` of {glue:text}`n_claims` claims pass their
# test: {glue:text}`n_width_pass` of {glue:text}`n_width` from the width paper and
# {glue:text}`n_noise_pass` of {glue:text}`n_noise` from the noise paper.

# %% tags=["remove-input"]
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

long = pd.DataFrame([{"notebook": "claims", "metric": metric, "value": float(v), "seed": 0, "method": r.id,
                      "regime": r.regime} for r in rows
                     for metric, v in (("claim_passed", r.passed), ("claim_control", r.control),
                                       ("decay_integral", r.decay_integral)) if np.isfinite(v)])
page.save(long)
page.provenance()
