"""Shared fixtures: every test gets its own run store and output directory, never ./runs or book/generated."""

from __future__ import annotations

import pytest
import torch

from lmcbook.data import load
from lmcbook.specs import DataSpec, ModelSpec, RunSpec, TrainSpec


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCBOOK_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("LMCBOOK_OUT", str(tmp_path / "generated"))
    torch.set_num_threads(2)


@pytest.fixture(scope="session")
def digits():
    return load("digits", device="cpu")


def tiny_spec(width: float = 0.25, seed: int = 0, epochs: int = 2, **train) -> RunSpec:
    """A run that trains in well under a second on digits."""
    return RunSpec(DataSpec("digits"), ModelSpec("mlp", width, 64, 3),
                   TrainSpec(**{"epochs": epochs, "batch_size": 64, "seed": seed, **train}))
