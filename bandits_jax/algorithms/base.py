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
    one_active: bool = False,
) -> Algorithm:
    """N agents each running the same single-agent learner on its own data, no communication.

    one_active (static): the protocol has exactly one active agent per step. The algorithm then
    `sees_active`, and `select(state, contexts, key, active)` runs select1 for agent
    i = argmax(active) only, with the same key split(key, N)[i] it gets otherwise (so its action
    is the one the all-agent select gives); actions[N] is 0 for the other agents. `update` then
    runs update1 for agent i only (the others are inactive and keep their state anyway), O(one
    agent) instead of O(N agents). A step with more than one active agent turns that step's
    comm_up / comm_down into NaN (see `multi_active_nan`); only agent argmax(active) learns then.
    """
    check_one_active(name, one_active)

    def init(key, spec, hp, capacity=None):
        keys = jax.random.split(key, spec.num_agents)
        return jax.vmap(lambda k: init1(k, spec, hp, capacity))(keys)

    def select(state, contexts, key):
        keys = jax.random.split(key, contexts.shape[0])
        actions = jax.vmap(select1)(state, contexts, keys)
        return actions.astype(jnp.int32), {}

    def select_one(state, contexts, key, active):
        N = contexts.shape[0]
        keys = jax.random.split(key, N)
        i = active_index(active)
        action = select1(agent_state(state, i), contexts[i], keys[i])
        return one_hot_action(i, action, N), {"client": i}

    def update(state, contexts, actions, rewards, active, key):
        keys = jax.random.split(key, contexts.shape[0])
        chosen = jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0, :]
        new = jax.vmap(update1)(state, chosen, rewards, keys)
        state = masked_select(active, new, state)
        return state, no_comm(rewards.dtype)

    def update_one(state, contexts, actions, rewards, active, key):
        keys = jax.random.split(key, contexts.shape[0])
        i = active_index(active)
        old = agent_state(state, i)
        new = update1(old, contexts[i, actions[i]], rewards[i], keys[i])
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(active[i], a, b), new, old)
        state = jax.tree_util.tree_map(lambda s, v: s.at[i].set(v), state, new)
        info = no_comm(rewards.dtype)
        bad = multi_active_nan(active, rewards.dtype)
        return state, {**info, "comm_up": info["comm_up"] + bad, "comm_down": info["comm_down"] + bad}

    resize = None if resize1 is None else (lambda state, rows: jax.vmap(lambda s: resize1(s, rows))(state))
    return Algorithm(name, dict(hparams), init, select_one if one_active else select,
                     update_one if one_active else update, capacity1, resize, description, sees_active=one_active)


# One active client per step (`one_active=True` of the asynchronous-environment baselines): select
# scores client i = argmax(active) only; the other agents' actions are 0 (never used by the runner).
def check_one_active(name: str, one_active) -> bool:
    """Refuse a non-bool `one_active` option (it is static: it changes the compiled program)."""
    if not isinstance(one_active, bool):
        raise ConfigError(f"{name}: one_active must be True or False, got {one_active!r}")
    return one_active


def check_batching(name: str, batching) -> str:
    """Refuse a `batching` option other than the runner's "map" or "vmap" (core.Algorithm)."""
    if batching not in ("map", "vmap"):
        raise ConfigError(f"{name}: batching must be 'map' or 'vmap', got {batching!r}")
    return batching


def active_index(active):
    """int32 index of the active client: argmax of the mask active[N] (0 when none is active)."""
    return jnp.argmax(active).astype(jnp.int32)


def agent_state(state, i):
    """Agent i's slice of a state pytree whose every leaf has a leading agent axis."""
    return jax.tree_util.tree_map(lambda a: a[i], state)


def one_hot_action(i, action, num_agents: int):
    """actions[num_agents] int32: `action` at client i, 0 elsewhere."""
    return jnp.zeros((num_agents,), jnp.int32).at[i].set(jnp.asarray(action).astype(jnp.int32))


def multi_active_nan(active, dtype):
    """NaN (of dtype) when more than one client is active, else 0: added to comm_up / comm_down."""
    return jnp.where(jnp.sum(active) > 1, jnp.nan, 0.0).astype(dtype)


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
