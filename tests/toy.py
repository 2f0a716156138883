"""A tiny problem and a tiny growing-buffer algorithm for testing the runner machinery."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from kernels.linalg import pad_rows
from bandits_jax.core import Algorithm, EnvSpec, Problem, gaussian_rewards, no_comm


def toy_problem(num_agents=3, num_arms=4, dim=5, horizon=200, noise_std=0.1, with_arrivals=False):
    spec = EnvSpec(num_agents, num_arms, dim, horizon)

    def init(key):
        return {"theta": jax.random.normal(key, (dim,))}

    def contexts(instance, t, key):
        return jax.random.normal(key, (num_agents, num_arms, dim))

    def mean_reward(instance, t, x):
        return x @ instance["theta"]

    def one_arrival(instance, t, key):
        who = jax.random.randint(key, (), 0, num_agents)
        return jnp.arange(num_agents) == who

    active = one_arrival if with_arrivals else None

    return Problem("toy-linear", spec, init, contexts, mean_reward, gaussian_rewards(noise_std), active,
                   "toy linear problem for tests")


def history_greedy(comm_per_step: float = 0.0) -> Algorithm:
    """Greedy on the score <x, sum_j r_j x_j> over a history buffer that grows with t.

    Its buffer makes it exercise capacity segments; it 'communicates' `comm_per_step` scalars
    up and down every step so communication bookkeeping can be checked.
    """

    def capacity(spec, t_end):
        return t_end

    def init(key, spec, hp, cap):
        n = spec.num_agents
        return {"X": jnp.zeros((n, cap, spec.dim)), "y": jnp.zeros((n, cap)), "count": jnp.zeros((n,), jnp.int32),
                "hp": hp}

    def select(state, contexts, key):
        w = jnp.einsum("ncd,nc->nd", state["X"], state["y"])
        explore = jax.random.uniform(key, contexts.shape[:2]) * state["hp"]["eps"]
        return jnp.argmax(jnp.einsum("nkd,nd->nk", contexts, w) + explore, axis=1).astype(jnp.int32), {}

    def update(state, contexts, actions, rewards, active, key):
        x = jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0]
        rows = jnp.arange(state["X"].shape[1])[None, :] == state["count"][:, None]
        write = rows & active[:, None]
        X = jnp.where(write[..., None], x[:, None, :], state["X"])
        y = jnp.where(write, rewards[:, None], state["y"])
        info = no_comm(rewards.dtype)
        info["comm_up"] = info["comm_up"] + comm_per_step
        info["comm_down"] = info["comm_down"] + 2 * comm_per_step
        info["rounds"] = info["rounds"] + (comm_per_step > 0)
        return {"X": X, "y": y, "count": state["count"] + active.astype(jnp.int32), "hp": state["hp"]}, info

    def resize(state, cap):
        return {"X": jax.vmap(lambda a: pad_rows(a, cap))(state["X"]),
                "y": jax.vmap(lambda a: pad_rows(a, cap))(state["y"]),
                "count": state["count"], "hp": state["hp"]}

    return Algorithm("HistoryGreedy", {"eps": 0.5}, init, select, update, capacity, resize, "test algorithm")


def growing_dictionary(limit: int = 1024) -> Algorithm:
    """Greedy on <x, sum of dictionary rows>, keeping each chosen context with probability hp keep.

    Its dictionary is sized by demand (`Algorithm.demand`): the runner gives it rows from its
    fill, not from the time. Overflow marks the run (NaN communication) from then on; comm_up
    reports the dictionary size, so the outputs show every row the run kept.
    """

    def capacity(spec, t_end):
        return t_end

    def init(key, spec, hp, cap):
        return {"D": jnp.zeros((min(cap, limit), spec.dim)), "n": jnp.zeros((), jnp.int32),
                "error": jnp.zeros((), bool), "hp": hp}

    def select(state, contexts, key):
        w = jnp.sum(state["D"], axis=0)
        explore = jax.random.uniform(key, contexts.shape[:2])
        return jnp.argmax(contexts @ w + explore, axis=1).astype(jnp.int32), {}

    def update(state, contexts, actions, rewards, active, key):
        x = jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0, :]
        keep = jax.random.uniform(key, (x.shape[0],)) < state["hp"]["keep"]
        D, n, error = state["D"], state["n"], state["error"]
        for a in range(x.shape[0]):  # static, tiny N
            add = keep[a] & active[a]
            room = n < D.shape[0]
            D = D.at[jnp.where(add & room, n, D.shape[0])].set(x[a] * rewards[a], mode="drop")
            error = error | (add & ~room)
            n = n + (add & room).astype(jnp.int32)
        info = no_comm(rewards.dtype)
        info["comm_up"] = info["comm_up"] + n + jnp.where(error, jnp.nan, 0.0)
        return {"D": D, "n": n, "error": error, "hp": state["hp"]}, info

    def resize(state, rows, dict_rows=None):
        return {**state, "D": pad_rows(state["D"], min(rows if dict_rows is None else dict_rows, limit))}

    return Algorithm("GrowingDictionary", {"keep": 1.0}, init, select, update, capacity, resize, "test algorithm",
                     demand=lambda state: state["n"], demand_limit=limit)
