# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # LLFC or LEWC: two ways for a merge to work
#
# **Two accounts.** Zhou et al. (2023) showed that when two networks are linearly
# mode-connected after permutation, their features are linearly connected at every
# layer: $f_l(\theta(\lambda)) \approx \lambda f_l^a + (1-\lambda) f_l^b$ (layerwise linear
# feature connectivity, LLFC). They traced LLFC to a *commutativity* property,
# $W_l^a z_{l-1}^a + W_l^b z_{l-1}^b \approx W_l^a z_{l-1}^b + W_l^b z_{l-1}^a$, which weight
# matching enforces. The width paper's LEWC is a different mechanism: the parents'
# features are not aligned but kept apart, by reciprocal orthogonality
# $W^a z^b \approx 0$, and the merged features shrink as $\lambda^l$.
#
# **The expectation.** Weight-matched pairs should follow LLFC and commutativity.
# Wide unpermuted pairs should follow LEWC and reciprocal orthogonality. This page
# measures all four on both kinds of pair, at every width. It reuses the probes of
# the *Why width works* pages on the weight-matched pairs. Commutativity is reported
# as $\|(W^a - W^b)(z^a - z^b)\| / (\|W^a z^a\| + \|W^b z^b\|)$ *(our normalisation)*.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
profile = "quick"  # and ControlsStudy's fields (lmcbook.profiles); None keeps the profile's value
dataset = data_root = download = base_width = norm = bias = epochs = batch_size = lr = momentum = warmup = None
seeds = device = lams = scheduler = precision = arch = depth = init_scale = weight_decay = widths = decisive_seeds = None
weak_weight_decay = draws = match_iterations = None

# %%
from lmcbook import experiments, plots, schema
from lmcbook.captions import describe_study
from lmcbook.page import open_page
from lmcbook.pages.llfc_vs_lewc import PAIR_NAMES, compared_long, compared_numbers, figure_panels

page, study = open_page("llfc_vs_lewc", globals())

# %% [markdown]
# The probes run on every pair as trained, on the same pair after weight matching, and
# on the untrained pair:

# %%
frames = experiments.probe_frames(study, page.store, matched=True)
regime = experiments.regime_frame(study, page.store)

# %% tags=["remove-cell"]
long = compared_long(frames)  # the page's CSV; the figure reads it
last = schema.last_hidden(frames["lewc"])
page.glue_figure("fig_llfc", plots.plot_panels(long, figure_panels(last), ncols=3, labels=PAIR_NAMES))
page.glue_md("setup", describe_study(study, regime))
page.glue_values(last=int(last), n_narrow=int(long["hidden_units"].min()), n_wide=int(long["hidden_units"].max()),
                 **compared_numbers(long, last))

# %% [markdown]
# ```{glue:figure} fig_llfc
# :name: fig-llfc-vs-lewc
#
# Cosine (top row) and relative error (middle row) of the
# LEWC and LLFC predictions at the last hidden layer, $\lambda = \tfrac14$, where the two
# predictions differ in direction as well as scale; commutativity error and
# orthogonality ratio, averaged over layers $2..L$ (bottom row). Unpermuted pairs, the
# same pairs after weight matching, and the untrained pairs (seed means; bars: min to
# max over pairs). Trained: {glue:md}`setup`.
# ```
#
# **What this run shows.** At the widest width ({glue:text}`n_wide` hidden units),
# layer {glue:text}`last` and $\lambda = \tfrac14$, the unpermuted pairs' merged
# features have a cosine of {glue:text}`trained_lewc_cos_wide:.3f` to the LEWC
# prediction and {glue:text}`trained_llfc_cos_wide:.3f` to the LLFC prediction
# (relative errors {glue:text}`trained_lewc_rel_err_wide:.3f` and
# {glue:text}`trained_llfc_rel_err_wide:.3f`). The untrained pairs, two unrelated
# networks, give {glue:text}`untrained_lewc_cos_wide:.3f` and
# {glue:text}`untrained_llfc_cos_wide:.3f`. Relative errors favour LEWC whenever
# activations shrink, even for unrelated networks (see {doc}`../methods`). So the
# verdict asks for the crossover the paper contrasts: LEWC's error below LLFC's
# without matching, *and* LLFC's below LEWC's after weight matching, where the same
# scale effect would still favour LEWC. Verdict W15
# ({glue:md}`w15_test`): {glue:md}`w15_mark`, {glue:md}`w15_measured`.
#
# The weight-matched pairs have cosines of {glue:text}`weight_matched_lewc_cos_wide:.3f`
# (LEWC) and {glue:text}`weight_matched_llfc_cos_wide:.3f` (LLFC), and LLFC errors of
# {glue:text}`weight_matched_llfc_rel_err_narrow:.3f` at {glue:text}`n_narrow` hidden
# units and {glue:text}`weight_matched_llfc_rel_err_wide:.3f` at the widest, against
# {glue:text}`trained_llfc_rel_err_narrow:.3f` and {glue:text}`trained_llfc_rel_err_wide:.3f`
# unpermuted.
#
# The mechanisms differ as expected if commutativity is low for matched pairs and
# the orthogonality ratio is low for unpermuted wide pairs. The commutativity error
# at the widest width is {glue:text}`weight_matched_commutativity_rel_err_wide:.3f`
# matched against {glue:text}`trained_commutativity_rel_err_wide:.3f` unpermuted. The
# orthogonality ratio is {glue:text}`trained_orth_ratio_wide:.3f` unpermuted against
# {glue:text}`weight_matched_orth_ratio_wide:.3f` matched. Weight matching aligns
# units, so it makes $W^a z^b$ large again by design.

# %% tags=["remove-input"]
page.save(long, regime=regime)
page.glue_verdict("w15", "w15_mark", "w15_measured", "w15_test")
page.provenance()
