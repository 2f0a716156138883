"""Uniform random arm choice: the floor every learner must beat."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ...core import Algorithm, report


def init(key, spec, params, sizes, public=None):
    """No state beyond a step count."""
    del key, spec, params, sizes, public
    return {"t": jnp.zeros((), jnp.int32)}


def select(params, state, step, key):
    """Every agent draws one of its K arms: randint(key, (N,), 0, K)."""
    del params, state
    n, k = step.contexts.shape[:2]
    return jax.random.randint(key, (n,), 0, k, dtype=jnp.int32), ()


def update(params, state, step, actions, rewards, aux, key):
    del params, step, actions, aux, key
    return {"t": state["t"] + 1}, report(rewards.dtype)


def uniform_random() -> Algorithm:
    """Each agent picks one of its K arms uniformly at random at every step."""
    return Algorithm("Random", {}, init, select, update, description="uniform random arm")
