"""Greedy on running means (a toy baseline): each agent plays the arm whose rewards it has seen average
highest, plus a bonus that shrinks with the arm's pulls, so that every arm is tried."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ...core import Algorithm, Param, report


def init(key, spec, params, sizes, public=None):
    """State {"sums": [N, K], "counts": [N, K]}: each agent's reward sum and pulls per arm."""
    del key, params, sizes, public
    zeros = jnp.zeros((spec.num_agents, spec.num_arms))
    return {"sums": zeros, "counts": zeros}


def select(params, state, step, key):
    """argmax over arms of mean + bonus / sqrt(1 + pulls), per agent: [N]."""
    del step, key
    means = state["sums"] / jnp.maximum(state["counts"], 1.0)
    return jnp.argmax(means + params["bonus"] / jnp.sqrt(1.0 + state["counts"]), axis=1).astype(jnp.int32), ()


def update(params, state, step, actions, rewards, aux, key):
    """Each active agent adds its reward to its pulled arm; nothing is sent."""
    del params, aux, key
    pulled = jax.nn.one_hot(actions, state["sums"].shape[1]) * step.active[:, None]
    return {"sums": state["sums"] + pulled * rewards[:, None], "counts": state["counts"] + pulled}, \
        report(rewards.dtype)


def toy_greedy(bonus: float = 1.0) -> Algorithm:
    """Each agent plays the arm of its highest running mean plus a shrinking bonus (a toy baseline)."""
    return Algorithm("ToyGreedy", {"bonus": Param(bonus, "positive")}, init, select, update)
