# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Explorer: one pair at a time
#
# Pick a width, a pair, an interpolation weight $\lambda$ and a layer. The
# explorer shows that pair's interpolation curve (accuracy, and test loss raw and
# calibrated) and the relative errors of the LEWC and LLFC predictions at every layer,
# at the chosen $\lambda$. Everything is read from the run store; nothing is trained.
# When a run is missing, the explorer names it and gives the command that trains it.
#
# ```{note}
# This page shows the explorer's default state, rendered when the book was built.
# To use the controls, run it live: `lmcbook explore` converts this page to a
# notebook and opens it in JupyterLab (install it with `pip install 'lmcbook[lab]'`).
# ```

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
dataset = "digits"  # the width sweep's data set; paper "cifar10"
width = None  # the width multiplier shown first (None: the widest)
pair = 0  # the pair index p
lam = 0.5  # the λ shown first
layer = None  # the layer shown first (None: the last hidden layer)
interactive = False  # widgets (a live kernel) instead of the static figures

# %%
import pandas as pd

import lmcbook as lb
from lmcbook.page import open_page
from lmcbook.studies import describe_study
from lmcbook.tools import explore

page, study = open_page("explore", globals())


# %% [markdown]
# The view is `explore.view` of the chosen pair, read from the run store, drawn with the
# page's parameters as the controls' values:

# %%
if study.interactive:
    explore.live_controls(profile, study, page.store)
    view = None
else:
    view = explore.show(profile, study, page.store, study.width, study.pair, study.lam, study.layer)

# %% tags=["remove-cell"]
page.glue_md("setup", describe_study(lb.study("width", profile, dataset=study.dataset)))

# %% [markdown]
# *The default state above:* the widest pair of the width sweep, pair 0, its
# interpolation curve (left, middle; the dotted line marks $\lambda$), and the LEWC and
# LLFC errors at every layer at that $\lambda$ (right). The width sweep: {glue:md}`setup`.

# %% tags=["remove-input"]
if view is not None and not view.message:
    layers = view.layers.reset_index().melt(id_vars="layer", var_name="metric", value_name="value")
    page.save(curve=(view.curve.assign(pair=study.pair), ["acc", "loss", "loss_cal"], ["lam"]),
              layers=layers.assign(pair=study.pair, lam=study.lam))  # its keys: layer and lam
else:  # the runs are missing (or the controls are live): the page records that it needs them
    page.save(missing=(pd.DataFrame([{"pair": study.pair, "runs_missing": float(view is not None)}]),
                       ["runs_missing"], []))
page.provenance()
