"""The optimizer-noise study: effective noise scale, spawn-and-merge and merging gain.

Spawn-and-merge (after Frankle et al. 2020), as lmcbook defines it:

- a *parent* is a full RunSpec stopped at ``stop_step`` = k; it keeps the
  full-length learning-rate schedule, and its store entry also holds the
  momentum buffers and the step;
- a *child* is ``RunSpec(parent, spawn_step=k, data_seed=...)``: it inherits the
  weights, the momentum buffers and the schedule position, and trains to the end
  with its own batch order (and augmentation draws);
- two children that differ only in their data seed are merged at λ = ½.

Batch t is a pure function of (data_seed, epoch), so a child with the parent's own
data seed reproduces the uninterrupted run bitwise.
"""

from __future__ import annotations

from dataclasses import replace

from .specs import RunSpec, SpecError

#: Offsets that keep children's data seeds apart from any parent's.
CHILD_SEED_BASE = 1000


def effective_noise_scale(lr: float, batch_size: int, momentum: float = 0.0, power: int = 1) -> float:
    """Return S = η / (B (1 − μ)^power): η the schedule's peak learning rate, μ PyTorch's SGD momentum (dampening 0).

    ``power=1`` is the form of the noise paper's main text; ``power=2`` is the
    (1 − μ)² variant that appears in another version of the paper.
    """
    if not lr > 0:
        raise SpecError(f"lr={lr!r} is not allowed: expected a number > 0")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise SpecError(f"batch_size={batch_size!r} is not allowed: expected an integer >= 1")
    if not 0 <= momentum < 1:
        raise SpecError(f"momentum={momentum!r} is not allowed: expected a number in [0, 1)")
    if power not in (1, 2):
        raise SpecError(f"power={power!r} is not allowed: expected 1 or 2")
    return lr / (batch_size * (1 - momentum) ** power)


def spawn_step(spec: RunSpec, fraction: float, n_train: int | None = None) -> int:
    """Return the step k at ``fraction`` of the spec's full schedule (at least 1); ``n_train`` is needed only for a
    schedule in epochs."""
    if not 0 < fraction < 1:
        raise SpecError(f"spawn_fraction={fraction!r} is not allowed: expected a fraction in (0, 1)")
    return max(1, int(round(fraction * spec.total_steps(n_train))))


def parent_spec(spec: RunSpec, k: int) -> RunSpec:
    """Return the parent of a spawn: ``spec`` stopped at step k, with its full-length schedule."""
    return spec.with_train(stop_step=k)


def child_spec(parent: RunSpec, data_seed: int, aug_seed: int | None = None, **train_changes) -> RunSpec:
    """Return a child of ``parent`` with its own batch order (and augmentation draws).

    ``train_changes`` may change what a continuation may change, such as ``lr``
    (the learning-rate-pair study); the schedule's length must stay the parent's.
    """
    if parent.train.stop_step is None:
        raise SpecError("parent has stop_step=None: a parent is a run stopped at its spawn step (parent_spec)")
    train = replace(parent.train, stop_step=None, data_seed=data_seed,
                    aug_seed=data_seed if aug_seed is None else aug_seed, **train_changes)
    return RunSpec(parent.data, parent.model, train, parent=parent, spawn_step=parent.train.stop_step)


def spawn_pair(spec: RunSpec, k: int, pair: int = 0, **train_changes) -> tuple[RunSpec, RunSpec]:
    """Return the two children of one spawn-and-merge pair: same parent, data seeds 1000 + 2·pair and + 1."""
    parent = parent_spec(spec, k)
    base = CHILD_SEED_BASE + 2 * pair
    return (child_spec(parent, base, **train_changes), child_spec(parent, base + 1, **train_changes))


def merging_gain(summary: dict) -> dict[str, float]:
    """Return the merging gains of a pair summary (from :func:`lmcbook.merge.pair_summary`).

    - ``gain``: acc(θ(½)) − mean(acc_a, acc_b);
    - ``gain_best``: acc(θ(½)) − max(acc_a, acc_b);
    - ``loss_gain``: mean(loss_a, loss_b) − loss(θ(½)) (positive when merging lowers the loss).
    """
    return {"gain": summary["acc_merged"] - summary["acc_endpoints"],
            "gain_best": summary["acc_merged"] - max(summary["acc_a"], summary["acc_b"]),
            "loss_gain": summary["loss_endpoints"] - summary["loss_merged"]}
