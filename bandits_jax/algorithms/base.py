"""Pieces shared by algorithms: lifting a single-agent learner to N independent agents.

A single-agent learner is written for one agent and one step:

    init1(key, spec, hp, capacity) -> state          (spec.num_agents is ignored)
    select1(state, contexts[K, d], key) -> action    (int32 scalar)
    update1(state, x[d], reward, key) -> state

`independent` vmaps them over the agent axis, masks the update of inactive agents, and
reports zero communication. Per-agent histories have `capacity1(spec, t_end)` rows.
"""
from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp

from ..core import Algorithm, no_comm


def independent(
    name: str,
    hparams: dict,
    init1: Callable,
    select1: Callable,
    update1: Callable,
    capacity1: Optional[Callable] = None,
    resize1: Optional[Callable] = None,
    description: str = "",
) -> Algorithm:
    """N agents each running the same single-agent learner on its own data, no communication."""

    def init(key, spec, hp, capacity=None):
        keys = jax.random.split(key, spec.num_agents)
        return jax.vmap(lambda k: init1(k, spec, hp, capacity))(keys)

    def select(state, contexts, key):
        keys = jax.random.split(key, contexts.shape[0])
        actions = jax.vmap(select1)(state, contexts, keys)
        return actions.astype(jnp.int32), {}

    def update(state, contexts, actions, rewards, active, key):
        keys = jax.random.split(key, contexts.shape[0])
        chosen = jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0, :]
        new = jax.vmap(update1)(state, chosen, rewards, keys)
        state = masked_select(active, new, state)
        return state, no_comm(rewards.dtype)

    resize = None if resize1 is None else (lambda state, rows: jax.vmap(lambda s: resize1(s, rows))(state))
    return Algorithm(name, dict(hparams), init, select, update, capacity1, resize, description)


def masked_select(mask, new, old):
    """Per-agent choice between two state pytrees with a leading agent axis: new where mask."""

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - 1))
        return jnp.where(m, a, b)

    return jax.tree_util.tree_map(pick, new, old)
