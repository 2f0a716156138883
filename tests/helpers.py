"""Helpers shared by several test files."""
from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
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


def drive_with_and_without_resize(algo, spec, contexts, rewards, active, split: int):
    """Run an algorithm step by step on given arrays twice: with capacity T from the start, and with
    capacity `split` resized to T at step `split`. Float64 hparams; call inside jax.enable_x64.
    Returns (state_full, actions_full [T, N], state_resized, actions_resized [T, N])."""
    T, N = contexts.shape[0], contexts.shape[1]
    hp = {k: jnp.asarray(v, jnp.float64) for k, v in algo.hparams.items()}
    key = jax.random.PRNGKey(0)
    select, update = jax.jit(algo.select), jax.jit(algo.update)

    def steps(state, t0, t1):
        acts = []
        for t in range(t0, t1):
            a, _ = select(state, jnp.asarray(contexts[t]), jax.random.fold_in(key, t))
            r = jnp.asarray(rewards[t])[jnp.arange(N), a]
            state, _ = update(state, jnp.asarray(contexts[t]), a, r, jnp.asarray(active[t]), key)
            acts.append(np.asarray(a))
        return state, acts

    full, acts_full = steps(algo.init(key, spec, hp, T), 0, T)
    small, acts_small = steps(algo.init(key, spec, hp, split), 0, split)
    small, acts_rest = steps(algo.resize(small, T), split, T)
    return full, np.array(acts_full), small, np.array(acts_small + acts_rest)


def agent_slice(tree, i):
    """Agent i's part of a pytree with a leading agent axis, as NumPy arrays."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a[i]), tree)


def per_agent_normal_draws(step_keys, steps: int, num_agents: int, size: int):
    """[steps, N, size] standard normals as `independent` hands them out: agent i of step t draws
    normal(split(select_key_t, N)[i], (size,), float64), select_key_t = step_keys(t)[0]."""
    out = np.zeros((steps, num_agents, size))
    for t in range(steps):
        keys = jax.random.split(step_keys(t)[0], num_agents)
        for i in range(num_agents):
            out[t, i] = np.asarray(jax.random.normal(keys[i], (size,), jnp.float64))
    return out
