"""Helpers shared by several test files."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from bandits_jax.problems.datasets import DATA_DIR_ENV

# The offline copies of the real data sets live next to the repository; a user's clone has none.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL_DIR = Path(os.environ.get(DATA_DIR_ENV) or SHARED_DATA)


def needs_data(name: str):
    """Skip a test when the data file `name` is not in the shared data folder."""
    return pytest.mark.skipif(not (REAL_DIR / name).is_file(),
                              reason=f"{name} not found in the shared data folder (../shared/data next to the "
                                     f"repository) or in ${DATA_DIR_ENV}")


def async_arrays(N, K, d, T, seed):
    """contexts [T, N, K, d], noisy rewards [T, N, K], arrivals [T] and active masks [T, N] for tests."""
    rng = np.random.default_rng(seed)
    contexts = rng.normal(size=(T, N, K, d)) / np.sqrt(d)
    theta = rng.normal(size=d)
    rewards = np.cos(3 * contexts @ theta) + 0.1 * rng.normal(size=(T, N, K))
    arrivals = rng.integers(0, N, size=T)
    active = np.arange(N)[None, :] == arrivals[:, None]
    return contexts, rewards, arrivals, active
