"""Uniform random arm choice: the floor every learner must beat."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..core import Algorithm, no_comm


def uniform_random() -> Algorithm:
    """Each agent picks one of its K arms uniformly at random at every step."""

    def init(key, spec, hp, capacity=None):
        del key, capacity
        return {"hp": hp, "t": jnp.zeros((), jnp.int32)}

    def select(state, contexts, key):
        n, k = contexts.shape[:2]
        return jax.random.randint(key, (n,), 0, k, dtype=jnp.int32), {}

    def update(state, contexts, actions, rewards, active, key):
        del contexts, actions, active, key
        return {"hp": state["hp"], "t": state["t"] + 1}, no_comm(rewards.dtype)

    return Algorithm("Random", {}, init, select, update, description="uniform random arm")
