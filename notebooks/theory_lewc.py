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

# %% tags=["parameters"]
profile = "quick"  # and TheoryStudy's fields (lmcbook.profiles); None keeps the profile's value
lams = depth = hidden = in_features = inputs = seed = None

# %%
import pandas as pd

from lmcbook import plots, schema, theory
from lmcbook.page import open_page
from lmcbook.pages.theory_lewc import theory_numbers

page, study = open_page("theory_lewc", globals())

# %% [markdown]
# `lmcbook.theory.check_pair` builds each of the three pairs described below and
# measures every quantity of the theorem on it, in float64:

# %%
checks = pd.concat([theory.check_pair(kind, study.depth, study.hidden, study.in_features, study.inputs, study.seed,
                                      study.lams) for kind in theory.KINDS], ignore_index=True)
L = study.depth


def worst(kind, metric, **f):
    return float(schema.select(checks, metric, method=kind, **f)["value"].abs().max())


# The theorem's answer is known for the block-diagonal pair: exact LEWC, and the logit norm ratio 2^(1-L).
# A page whose construction misses it fails to execute.
assert worst("block_diagonal", "lewc_rel_err") < 1e-12, "LEWC is not exact for the block-diagonal pair"
assert abs(float(schema.select(checks, "logit_norm_ratio", method="block_diagonal")["value"].iloc[0])
           - 2.0 ** (1 - L)) < 1e-12, "the block-diagonal pair's logit norm ratio is not 2^(1-L)"

# %% tags=["remove-cell"]
page.glue_figure("fig_theory", plots.plot_theory(checks))
page.glue_values(L=L, hidden=study.hidden, n_inputs=study.inputs, norm_pred=2.0 ** (1 - L), tau_pred=2.0 ** (L - 1))
page.glue_values(**theory_numbers(checks, L))

# %% tags=["remove-input"]
page.save(theory_lewc=checks, keys=["hidden_units", "depth", "layer", "lam", "method"])
page.provenance()
