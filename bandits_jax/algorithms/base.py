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
import numpy as np

from ..core import Algorithm, ConfigError, no_comm


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


# Sticky error bits: an algorithm that detects, inside jit, a condition it cannot handle (a full
# buffer, two active clients) ORs a bit into `state.error` and turns its communication outputs
# into NaN. These host-side helpers turn the bits or the NaN marker into a ConfigError.
MULTI_ACTIVE_MESSAGE = ("more than one client was active at a step; this algorithm needs exactly one active "
                        "client per step")


def describe_error_bits(code: int, name: str, meanings: dict) -> str:
    """One line naming every set bit of `code` by its meaning ({bit: text}); '' when none is set."""
    parts = [text for bit, text in meanings.items() if code & bit]
    return f"{name}: " + "; ".join(parts) if parts else ""


def raise_on_error_bits(error, name: str, meanings: dict) -> None:
    """Raise ConfigError if any element of `error` (any shape) has a bit set."""
    code = int(np.bitwise_or.reduce(np.asarray(error, dtype=np.int64).ravel(), initial=0))
    if code:
        raise ConfigError(describe_error_bits(code, name, meanings))


def raise_on_nan_comm(output, message: str) -> None:
    """Raise ConfigError(message) if a run's comm_up / comm_down (RunOutput or mapping) hold NaN."""
    get = output.get if isinstance(output, dict) else (lambda k: getattr(output, k))
    if np.isnan(np.asarray(get("comm_up"))).any() or np.isnan(np.asarray(get("comm_down"))).any():
        raise ConfigError(message)
