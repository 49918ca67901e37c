# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The theorem: when LEWC holds exactly
#
# This page states the result behind the width paper's account, proves it, and
# checks it in float64 on networks built so that its conditions hold, or fail, by
# construction. No training is involved.
#
# **Setting.** A bias-free ReLU MLP with $L$ linear layers computes
# $f_l = W_l z_{l-1}$, $z_l = \sigma(f_l)$, $z_0 = x$, where $\sigma$ is the ReLU, and
# $f_L$ are the logits. For two such networks $\theta_a$, $\theta_b$ of equal shape write
# $f_l^a, z_l^a$ and $f_l^b, z_l^b$, and $\theta(\lambda) = \lambda\theta_a + (1-\lambda)\theta_b$.
#
# ```{admonition} Theorem (exact LEWC)
# :class: important
#
# Suppose that for every input $x$
#
# - **(A) weak additivity:** $f_l^a \odot f_l^b \ge 0$ elementwise at every hidden layer $1 \le l \le L-1$, and
# - **(O) reciprocal orthogonality:** $W_l^a z_{l-1}^b = 0$ and $W_l^b z_{l-1}^a = 0$ for $2 \le l \le L$.
#
# Then for every $\lambda \in [0, 1]$ and every layer $l$,
# $f_l(\theta(\lambda)) = \lambda^l f_l^a + (1-\lambda)^l f_l^b$.
# ```
#
# *Proof* (induction over $l$). At $l = 1$ both networks read the same $x$:
# $f_1(\theta(\lambda)) = (\lambda W_1^a + (1-\lambda)W_1^b)\,x = \lambda f_1^a + (1-\lambda) f_1^b$.
# Suppose the claim holds at layer $l-1$, and write $u = \lambda^{l-1} f_{l-1}^a$ and
# $v = (1-\lambda)^{l-1} f_{l-1}^b$. Positive scalars do not change signs, so by (A) the
# entries of $u$ and $v$ never have opposite signs, and then
# $\sigma(u+v) = \sigma(u) + \sigma(v)$ entrywise (if both are $\ge 0$ the ReLU is the
# identity; if both are $\le 0$ both sides are 0). The ReLU is positively homogeneous, so
#
# $$z_{l-1}(\theta(\lambda)) = \lambda^{l-1} z_{l-1}^a + (1-\lambda)^{l-1} z_{l-1}^b .$$
#
# Multiplying by the merged weights,
#
# $$f_l(\theta(\lambda)) = \lambda^l W_l^a z_{l-1}^a + (1-\lambda)^l W_l^b z_{l-1}^b
#   + \lambda(1-\lambda)^{l-1}\, W_l^a z_{l-1}^b + (1-\lambda)\lambda^{l-1}\, W_l^b z_{l-1}^a ,$$
#
# and by (O) the two cross terms vanish, which leaves
# $\lambda^l f_l^a + (1-\lambda)^l f_l^b$. $\blacksquare$
#
# **Consequences for the logits.** At $\lambda = \tfrac12$ the theorem gives
# $f_L(\theta(\tfrac12)) = 2^{-L}(f_L^a + f_L^b) = 2^{1-L} \cdot \tfrac12(f_L^a + f_L^b)$: the merged
# logits are the logit ensemble's, shrunk by $2^{1-L}$. Two things follow.
#
# 1. The logit norm ratio $\|f_L(\theta(\tfrac12))\| / \|\tfrac12(f_L^a+f_L^b)\|$ is exactly $2^{1-L}$.
# 2. The NLL of $\mathrm{softmax}(\tau f_L(\theta(\frac12)))$ equals the ensemble's NLL at
#    $2^{1-L}\tau$. So the fitted inverse temperatures satisfy
#    $\tau_{merged} = 2^{L-1}\tau_{ens}$, on any calibration set where neither fit ends at a
#    bound. After calibration, the merged model *is* the ensemble. This is why
#    calibration can remove the loss barrier entirely when LEWC holds.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
lams = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)  # the λ grid
depth = 4  # linear layers L of the constructed networks
hidden = 32  # hidden units (two disjoint halves); smoke 16; paper 256
in_features = 16  # input size
inputs = 256  # random inputs the identities are checked on; smoke 64; paper 1024
seed = 0  # seed of the weights and inputs

# %%
import pandas as pd

from lmcbook import plots_width, probes, schema
from lmcbook.page import open_page

page, study = open_page("theory_lewc", globals())

# %% [markdown]
# `lmcbook.probes.check_pair` builds each of the three pairs described below and
# measures every quantity of the theorem on it, in float64:

# %%
checks = pd.concat([probes.check_pair(kind, study.depth, study.hidden, study.in_features, study.inputs, study.seed,
                                      study.lams) for kind in probes.KINDS], ignore_index=True)
L = study.depth


def worst(kind, metric, **f):
    return float(schema.select(checks, metric, method=kind, **f)["value"].abs().max())


# The theorem's answer is known for the block-diagonal pair: exact LEWC, and the logit norm ratio 2^(1-L).
# A page whose construction misses it fails to execute.
assert worst("block_diagonal", "lewc_rel_err") < 1e-12, "LEWC is not exact for the block-diagonal pair"
assert abs(float(schema.select(checks, "logit_norm_ratio", method="block_diagonal")["value"].iloc[0])
           - 2.0 ** (1 - L)) < 1e-12, "the block-diagonal pair's logit norm ratio is not 2^(1-L)"

# %% [markdown]
# Per pair, the worst absolute value over layers and $\lambda$ of each error (the LEWC error
# also at layer 2 and $\lambda = \frac12$, `lewc2`), the sign conflicts, the orthogonality
# ratio, the logit norm and $\tau$ ratios with their distances from LEWC's predictions
# $2^{1-L}$ and $2^{L-1}$, and the scale law's slope's distance from 1:

# %%
def first(kind, metric):
    return float(schema.select(checks, metric, method=kind)["value"].iloc[0])


measures = pd.DataFrame({kind: {
    "lewc": worst(kind, "lewc_rel_err"), "lewc2": worst(kind, "lewc_rel_err", layer=2, lam=0.5),
    "add": worst(kind, "additivity_rel_err"), "sign": worst(kind, "sign_conflict"), "orth": worst(kind, "orth_ratio"),
    "cross": worst(kind, "cross_rel_err"), "norm": first(kind, "logit_norm_ratio"), "tau": first(kind, "tau_ratio"),
    "beta_err": abs(first(kind, "scale_beta") - 1)} for kind in probes.KINDS}).T
measures = measures.assign(norm_err=(measures["norm"] - 2.0 ** (1 - L)).abs(),
                           tau_relerr=(measures["tau"] / 2.0 ** (L - 1) - 1).abs())
measures

# %% tags=["remove-cell"]
page.glue_figure("fig_theory", plots_width.plot_theory(checks))
page.glue_values(L=L, hidden=study.hidden, n_inputs=study.inputs, norm_pred=2.0 ** (1 - L), tau_pred=2.0 ** (L - 1))
bd, dr, ov = (measures.loc[k] for k in ("block_diagonal", "disjoint_rows", "overlapping"))
page.glue_values(
    block_diagonal_lewc=bd["lewc"], block_diagonal_lewc2=bd["lewc2"], block_diagonal_add=bd["add"],
    block_diagonal_sign=bd["sign"], block_diagonal_orth=bd["orth"], block_diagonal_norm=bd["norm"],
    block_diagonal_tau=bd["tau"], block_diagonal_norm_err=bd["norm_err"], block_diagonal_tau_relerr=bd["tau_relerr"],
    block_diagonal_beta_err=bd["beta_err"], disjoint_rows_lewc=dr["lewc"], disjoint_rows_lewc2=dr["lewc2"],
    disjoint_rows_add=dr["add"], disjoint_rows_sign=dr["sign"], disjoint_rows_orth=dr["orth"],
    disjoint_rows_norm=dr["norm"], disjoint_rows_tau=dr["tau"], disjoint_rows_beta_err=dr["beta_err"],
    overlapping_lewc=ov["lewc"], overlapping_lewc2=ov["lewc2"], overlapping_add=ov["add"],
    overlapping_sign=ov["sign"], overlapping_orth=ov["orth"], overlapping_norm=ov["norm"], overlapping_tau=ov["tau"],
    overlapping_beta_err=ov["beta_err"])

# %% [markdown]
# ## Checking it in float64
#
# Three pairs of networks with {glue:text}`L` layers and {glue:text}`hidden` hidden
# units, evaluated on {glue:text}`n_inputs` Gaussian inputs (see
# `lmcbook.probes.constructed_pair`):
#
# - **block diagonal:** model $a$ owns the first half of the hidden units and model
#   $b$ the second half, and each reads only its own units. The two share only the
#   input columns of $W_1$ and the output rows of $W_L$. (A) and (O) hold exactly.
# - **disjoint rows:** each model writes only its own half of the units, but reads
#   all of them. (A) holds, because $f^a$ and $f^b$ have disjoint supports, but (O) fails.
# - **overlapping:** dense random weights for both. Neither condition holds.
#
# ```{glue:figure} fig_theory
# :name: fig-theory
#
# LEWC relative error $\|f_l(\theta(\lambda)) - \lambda^l f_l^a - (1-\lambda)^l f_l^b\| / \|f_l(\theta(\lambda))\|$
# against $\lambda$ for each layer and each construction (exact zeros drawn at $10^{-17}$).
# ```
#
# | | block diagonal | disjoint rows | overlapping |
# |---|---|---|---|
# | (A) max additivity error | {glue:text}`block_diagonal_add:.1e` | {glue:text}`disjoint_rows_add:.1e` | {glue:text}`overlapping_add:.2f` |
# | (A) max sign-conflict fraction | {glue:text}`block_diagonal_sign:.2f` | {glue:text}`disjoint_rows_sign:.2f` | {glue:text}`overlapping_sign:.2f` |
# | (O) max orthogonality ratio | {glue:text}`block_diagonal_orth:.1e` | {glue:text}`disjoint_rows_orth:.2f` | {glue:text}`overlapping_orth:.2f` |
# | max LEWC error, all layers and λ | {glue:text}`block_diagonal_lewc:.1e` | {glue:text}`disjoint_rows_lewc:.2f` | {glue:text}`overlapping_lewc:.2f` |
# | LEWC error at layer 2, λ = ½ | {glue:text}`block_diagonal_lewc2:.1e` | {glue:text}`disjoint_rows_lewc2:.2f` | {glue:text}`overlapping_lewc2:.2f` |
# | logit norm ratio (prediction {glue:text}`norm_pred:.4f`) | {glue:text}`block_diagonal_norm:.6f` | {glue:text}`disjoint_rows_norm:.4f` | {glue:text}`overlapping_norm:.4f` |
# | τ_merged / τ_ens (prediction {glue:text}`tau_pred:.0f`) | {glue:text}`block_diagonal_tau:.6f` | {glue:text}`disjoint_rows_tau:.3f` | {glue:text}`overlapping_tau:.3f` |
# | \|β − 1\| of the scale law | {glue:text}`block_diagonal_beta_err:.1e` | {glue:text}`disjoint_rows_beta_err:.2f` | {glue:text}`overlapping_beta_err:.2f` |
#
# **What this shows.** On the block-diagonal pair every check agrees with the
# theorem to rounding: the worst LEWC error over all layers and λ is
# {glue:text}`block_diagonal_lewc:.1e`, the logit norm ratio misses $2^{1-L}$ by
# {glue:text}`block_diagonal_norm_err:.1e`, and the temperature ratio misses
# $2^{L-1}$ by a relative {glue:text}`block_diagonal_tau_relerr:.1e` (the tolerance of
# the τ fit). The disjoint-rows pair shows that weak additivity alone is not enough.
# Its additivity error is {glue:text}`disjoint_rows_add:.1e`, yet its LEWC error at
# layer 2 is already {glue:text}`disjoint_rows_lewc2:.2f`, because each model's weights
# read the other model's units. With overlapping supports both conditions fail.
#
# The trained networks of the width sweep satisfy neither condition exactly. The
# following pages measure how close they come as width grows.

# %% tags=["remove-input"]
page.save(theory_lewc=checks, keys=["hidden_units", "depth", "layer", "lam", "method"])
page.provenance()
