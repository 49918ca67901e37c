# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Task arithmetic and the fine-tuning learning rate
#
# **The paper's claim** (Zhang et al., noise paper). The optimizer's noise also
# shapes how well *fine-tuned* models combine. Fine-tune copies of one pretrained model
# on different tasks, and add their task vectors $v_i = \theta_i - \theta_0$ back to the
# pretrained weights: $\theta = \theta_0 + \alpha(v_1 + v_2)$ (task arithmetic, Ilharco et
# al. 2023). The paper reports that the fine-tuning learning rate, part of the
# noise, changes how well this works.
#
# **A transfer setting built here.** No pretrained CLIP is available offline, so this
# page builds its own.
#
# - $\theta_0$ is trained on MNIST-1D.
# - Two copies are fine-tuned, with a fresh optimizer, on two new tasks defined by
#   input transforms: the signals reversed in time (*reverse*) and the signals negated
#   (*negate*).
# - Each task keeps the original labels, so $\theta_0$ starts out poor on both.
# - Fine-tuning is repeated at several learning rates.
# - The page shows each task's test loss against $\alpha$, for task arithmetic and for
#   TIES-merging (Yadav et al. 2023). TIES trims each task vector to its largest
#   entries, elects a sign per entry, and averages only the entries that agree with it.

# %% [markdown]
# ```{glue:md} what_ran
# :format: myst
# ```

# %% tags=["parameters"]
# The values below run at the quick profile. Another profile (smoke, paper) replaces each value that equals the one
# written here by its own (the line's comment); a value changed here, or any value given with `-p NAME VALUE`, is yours.
profile = "quick"
dataset = "mnist1d"  # MNIST-1D: generated offline, 10 classes; smoke "digits"; paper "cifar10"
data_root = None  # where torchvision data sets live (None: the embedded ones need none)
download = False  # let torchvision download a missing data set into data_root
base_width = 64  # hidden units at width multiplier 1
width = 2.0  # multiplier of base_width: 128 hidden units; smoke 0.5; paper 4.0
depth = 4  # linear layers L of the MLP
bias = False  # biases in every layer
steps = 2000  # SGD steps of every run; smoke 60; paper 20000
max_steps = None  # the convergence rule's step cap (None: no second length)
warmup = 0.05  # share of all steps spent in the linear warm-up
lrs = (0.01, 0.02, 0.05, 0.1, 0.2)  # the grid's peak rates η; smoke (0.02, 0.05, 0.1)
batch_sizes = (32, 64, 128, 256)  # the grid's batch sizes B; smoke (32, 128)
noise_scales = None  # S values of the grid (None: the lrs × batch_sizes grid)
protocol = "steps"  # the grid's length rule
momentum = 0.9  # SGD momentum μ (PyTorch's, dampening 0)
weight_decay = 0.0005  # SGD's weight decay (L2)
spawn_fraction = 0.5  # where the grid spawns its children (share of training)
lr_floor = 1.0  # where the rate ends, as a share of its peak (1: constant)
augment = False  # random shifts in the grid and the component sweeps
row_batch_size = 128  # the component sweeps' batch size
momenta = (0.0, 0.5, 0.9)  # the momentum sweep; smoke (0.0, 0.9)
component_lrs = (0.02, 0.05, 0.1, 0.2)  # its rates; smoke (0.02, 0.05, 0.1)
weight_decays = (0.0, 0.0005, 0.005)  # the weight-decay sweep; smoke (0.0, 0.005)
component_lr = 0.05  # the weight-decay sweep's and task arithmetic's peak rate
pair_lrs = (0.01, 0.03, 0.1, 0.3)  # the learning-rate-pair matrix; smoke (0.02, 0.1)
finetune_steps = 500  # task arithmetic's fine-tuning steps; smoke 20
finetune_lrs = (0.01, 0.03, 0.1)  # task arithmetic's fine-tuning rates; smoke (0.05,)
alphas = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)  # task arithmetic's scales of the task vectors; smoke (0.0, 0.5, 1.0)
ties_keep = 0.2  # TIES merging's share of each task vector kept
seeds = 2  # pairs per cell of the other sweeps; smoke 1; paper 10
grid_seeds = 5  # pairs per cell of the grid; smoke 1; paper 10
device = "auto"  # where runs train: auto, cpu, cuda, cuda:N or mps
scheduler = None  # where missing runs train: None (here), "local:N" or "tcp://HOST:PORT"
show_references = True  # show the committed reference runs (results/) beside this run's cells

# %%

import numpy as np

from lmcbook import experiments_noise, plots_noise
from lmcbook.experiments_noise import describe_noise
from lmcbook.page import open_page
from lmcbook.studies import TASKS

page, study = open_page("task_arithmetic", globals())

# %% [markdown]
# Every fine-tuned model and every merge along $\alpha$ is evaluated on each task; for
# each method and fine-tuning learning rate, $\alpha$ is chosen where the mean
# calibration loss of the two new tasks is lowest:

# %%
ta = experiments_noise.task_arithmetic_frame(study, page.store)
merged = ta[ta["method"].isin(["task_arithmetic", "ties"]) & ta["task"].isin(TASKS)]
joint = merged.groupby(["method", "lr", "alpha"])[["task_cal_loss", "task_loss"]].mean()
best = joint.loc[joint.groupby(level=["method", "lr"])["task_cal_loss"].idxmin()].reset_index("alpha")
best.round(4)

# %% [markdown]
# The figure below draws each task's loss along $\alpha$:

# %%
page.glue_figure("fig_ta", plots_noise.plot_task_arithmetic(ta))

# %% tags=["remove-cell"]
page.glue_md("setup", describe_noise(study, spawned=False))
ft = ta[ta["method"] == "finetuned"].groupby("lr")["task_loss"].mean()  # the fine-tuned models, per rate
base = ta[(ta["method"] == "task_arithmetic") & (ta["alpha"] == 0.0) & (ta["task"] != "original")]  # pretrained
ta_loss, ties_loss = best.loc["task_arithmetic", "task_loss"], best.loc["ties", "task_loss"]  # by fine-tuning lr
page.glue_values(n_lrs=len(study.finetune_lrs), ft_steps=study.finetune_steps, keep=study.ties_keep,
                 ft_loss_lo=float(ft.min()), ft_loss_hi=float(ft.max()), base_loss=float(base["task_loss"].mean()),
                 alpha_max=float(max(study.alphas)), task_arithmetic_best_lr=float(ta_loss.idxmin()),
                 task_arithmetic_best_loss=float(ta_loss.min()), task_arithmetic_worst_loss=float(ta_loss.max()),
                 ties_best_lr=float(ties_loss.idxmin()), ties_best_loss=float(ties_loss.min()),
                 ties_worst_loss=float(ties_loss.max()))
at_edge = best[np.isclose(best["alpha"], max(study.alphas))].index  # (method, lr) whose best α ends the grid
names = {"task_arithmetic": "task arithmetic", "ties": "TIES"}
page.glue_markdown(edge_cases="; ".join(
    f"{names[m]} with fine-tuning learning rate(s) " + ", ".join(f"{lr:g}" for mm, lr in at_edge if mm == m)
    for m in dict.fromkeys(m for m, _ in at_edge)) or "none")
page.choose("alpha_edge", len(at_edge) > 0)

# %% [markdown]
# ```{glue:figure} fig_ta
# :name: fig-task-arithmetic
#
# Test loss on each task against $\alpha$, one color per fine-tuning learning rate
# (solid: task arithmetic; dashed: TIES, keeping the top {glue:text}`keep` of each
# task vector). The *original* panel shows what the merge keeps of the pretraining
# task. Trained: the pretrained model is a {glue:md}`setup`; fine-tuning ran
# {glue:text}`ft_steps` steps per task.
# ```
#
# **What this run shows.** The pretrained model's mean loss on the two new tasks is
# {glue:text}`base_loss:.3f` nats, and the fine-tuned models reach, averaged over the two
# tasks and per fine-tuning learning rate, a loss between {glue:text}`ft_loss_lo:.3f` and
# {glue:text}`ft_loss_hi:.3f` nats on their own task. The
# table above gives, for each method and fine-tuning learning rate, the $\alpha$ that
# minimises the mean loss of the two tasks on their calibration splits (held out from
# training, never the test set), and the mean test loss at that $\alpha$.
#
# - **Task arithmetic** does best with fine-tuning learning rate
#   {glue:text}`task_arithmetic_best_lr` ({glue:text}`task_arithmetic_best_loss:.3f`
#   nats). Across the {glue:text}`n_lrs` learning rates, the best achievable loss ranges
#   up to {glue:text}`task_arithmetic_worst_loss:.3f`.
# - **TIES** does best at {glue:text}`ties_best_lr`
#   ({glue:text}`ties_best_loss:.3f` nats), and its worst is
#   {glue:text}`ties_worst_loss:.3f`.

# %% [markdown] tags=["when:alpha_edge=true"]
# For {glue:md}`edge_cases`, the best $\alpha$ is the largest of the grid
# ({glue:text}`alpha_max:g`), so the best loss there is a bound set by the grid: a larger
# $\alpha$ might do better.

# %% [markdown] tags=["when:alpha_edge=false"]
# Every best $\alpha$ lies inside the grid (its largest value is
# {glue:text}`alpha_max:g`).

# %% tags=["remove-input"]
page.save(ta=(ta, ["task_loss", "task_acc", "task_cal_loss"], ["lr", "alpha", "task", "method"]))
page.provenance()
