"""A tiny problem and tiny algorithms (a growing buffer, a demand-sized dictionary) for testing the
runner machinery."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from bandits_jax.core import Algorithm, EnvSpec, Param, Problem, Sizes, Sizing, gaussian_rewards, report
from bandits_jax.kernels.linalg import pad_rows

ERR_FULL = 1


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
    up and down every step so communication bookkeeping can be checked, and reports the buffer's
    fill of agent 0 as the diagnostic "count".
    """

    def init(key, spec, params, sizes, public):
        n = spec.num_agents
        return {"X": jnp.zeros((n, sizes.rows, spec.dim)), "y": jnp.zeros((n, sizes.rows)),
                "count": jnp.zeros((n,), jnp.int32)}

    def select(params, state, step, key):
        w = jnp.einsum("ncd,nc->nd", state["X"], state["y"])
        explore = jax.random.uniform(key, step.contexts.shape[:2]) * params["eps"]
        return jnp.argmax(jnp.einsum("nkd,nd->nk", step.contexts, w) + explore, axis=1).astype(jnp.int32), ()

    def update(params, state, step, actions, rewards, aux, key):
        x = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0]
        rows = jnp.arange(state["X"].shape[1])[None, :] == state["count"][:, None]
        write = rows & step.active[:, None]
        X = jnp.where(write[..., None], x[:, None, :], state["X"])
        y = jnp.where(write, rewards[:, None], state["y"])
        count = state["count"] + step.active.astype(jnp.int32)
        rep = report(rewards.dtype, comm_per_step, 2 * comm_per_step, float(comm_per_step > 0), count=count[0])
        return {"X": X, "y": y, "count": count}, rep

    def resize(params, state, sizes):
        return {"X": jax.vmap(lambda a: pad_rows(a, sizes.rows))(state["X"]),
                "y": jax.vmap(lambda a: pad_rows(a, sizes.rows))(state["y"]), "count": state["count"]}

    return Algorithm("HistoryGreedy", {"eps": Param(0.5, "nonnegative")}, init, select, update,
                     Sizing(rows=lambda spec, t_end: t_end, resize=resize), {}, "test algorithm")


def breaks_at_eps() -> Algorithm:
    """history_greedy whose run reports error bit 2 at every step once it holds eps points."""
    alg = history_greedy()

    def update(params, state, step, actions, rewards, aux, key):
        new, rep = alg.update(params, state, step, actions, rewards, aux, key)
        return new, rep._replace(errors=jnp.where(state["count"][0] >= params["eps"], 2, 0))

    return alg._replace(update=update, errors={2: "the buffer holds eps points; raise eps"})


def growing_dictionary(limit: int = 1024) -> Algorithm:
    """Greedy on <x, sum of dictionary rows>, keeping each chosen context with probability `keep`.

    Its dictionary is sized by demand: the runner gives it rows from its fill, not from the time.
    Overflow sets ERR_FULL at every step from then on; comm_up reports the dictionary size, so the
    outputs show every row the run kept.
    """

    def rows(sizes):  # demand-sized, or (with the demand switched off) sized by time
        return sizes.demand_rows if sizes.demand_rows is not None else min(sizes.rows, limit)

    def init(key, spec, params, sizes, public):
        return {"D": jnp.zeros((rows(sizes), spec.dim)), "n": jnp.zeros((), jnp.int32),
                "error": jnp.zeros((), bool)}

    def select(params, state, step, key):
        w = jnp.sum(state["D"], axis=0)
        explore = jax.random.uniform(key, step.contexts.shape[:2])
        return jnp.argmax(step.contexts @ w + explore, axis=1).astype(jnp.int32), ()

    def update(params, state, step, actions, rewards, aux, key):
        x = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0, :]
        keep = jax.random.uniform(key, (x.shape[0],)) < params["keep"]
        D, n, error = state["D"], state["n"], state["error"]
        for a in range(x.shape[0]):  # static, tiny N
            add = keep[a] & step.active[a]
            room = n < D.shape[0]
            D = D.at[jnp.where(add & room, n, D.shape[0])].set(x[a] * rewards[a], mode="drop")
            error = error | (add & ~room)
            n = n + (add & room).astype(jnp.int32)
        rep = report(rewards.dtype, comm_up=n, errors=jnp.where(error, ERR_FULL, 0))
        return {"D": D, "n": n, "error": error}, rep

    def resize(params, state, sizes):
        return {**state, "D": pad_rows(state["D"], rows(sizes))}

    sizing = Sizing(rows=lambda spec, t_end: t_end, resize=resize, demand=lambda state: state["n"],
                    demand_limit=limit, overflow=ERR_FULL)
    return Algorithm("GrowingDictionary", {"keep": Param(1.0, "nonnegative")}, init, select, update, sizing,
                     {ERR_FULL: "the dictionary outgrew its limit; raise limit"}, "test algorithm")


def greedy_with_eps(eps: float = 0.5) -> Algorithm:
    """HistoryGreedy with its eps as the factory's option (a registered toy of the sweep tests)."""
    return history_greedy().with_defaults(eps=eps)
