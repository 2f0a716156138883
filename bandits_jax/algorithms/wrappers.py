"""Algorithm wrappers: how a registered algorithm is sized or checked, and the arrivals it can serve.

`capped_history(algorithm, rows)`: an algorithm with per-agent histories (`state.n` [N], `state.y`
[N, C], e.g. N-KernelUCB) keeps at most `rows` history rows per agent; a step at which an active
agent's history is already full reports ERR_CAPPED_HISTORY (its point would be lost), so an
overflow is never silent. The histories are sized by demand (`Sizing.demand`: the fullest agent's
count): a batch starts them small and the runner re-runs a segment with twice the rows when one
overflows, up to `rows`, where the error stands. Under a one-active protocol an agent holds about
t / N points, so N-KernelUCB's histories stay at a fraction of `rows`; on an all-active problem they
grow with t and the re-runs cost time, not numbers (padding changes no number).

`serial_arrivals(algorithm)`: an algorithm built for one arrival a step (`Algorithm.one_active` True:
Async-KernelUCB, DisKernelUCB, OneKernelUCB, FedLinUCB, FedGLB-UCB, Approx-DisKernelUCB) on a problem
where several agents act at a step, as the asynchronous protocol with the step's arrivals served one
after another in agent order (`serial_select`, `serial_update`). On a problem that declares one
arrival a step it is the algorithm unchanged.
(`base.on_candidates` is the other registered wrapper.)
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from ..core import Algorithm, ConfigError, EnvSpec, Report, Sizes, Step
from .base import STATE_CACHE

ERR_CAPPED_HISTORY = 1 << 16
CAPPED_HISTORY_MESSAGE = "a client's history outgrew nkernel_capacity; raise nkernel_capacity"


def capped_history(algorithm: Algorithm, rows: int = 256) -> Algorithm:
    """At most `rows` history rows per agent; an outgrown history is the error ERR_CAPPED_HISTORY."""
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
        raise ConfigError(f"capped_history: rows must be a positive integer, got {rows!r}")
    if ERR_CAPPED_HISTORY in algorithm.errors:
        raise ValueError(f"{algorithm.name} already uses error bit {ERR_CAPPED_HISTORY}")
    if algorithm.sizing is None or algorithm.sizing.demand is not None:
        raise ConfigError(f"capped_history: {algorithm.name} has no time-sized per-agent histories to cap")

    def capped_rows(spec, t_end):
        return max(1, min(int(t_end), rows))

    def init(key, spec, params, sizes, public=None):
        return algorithm.init(key, spec, params, held(sizes), public)

    def resize(params, state, sizes):
        return algorithm.sizing.resize(params, state, held(sizes))

    def update(params, state, step, actions, rewards, aux, key):
        full = jnp.any(step.active & (state.n >= state.y.shape[-1]))
        state, rep = algorithm.update(params, state, step, actions, rewards, aux, key)
        return state, rep._replace(errors=rep.errors | jnp.where(full, ERR_CAPPED_HISTORY, 0))

    sizing = algorithm.sizing._replace(rows=capped_rows, resize=resize, demand=lambda state: jnp.max(state.n),
                                       demand_limit=rows, overflow=ERR_CAPPED_HISTORY)
    return algorithm._replace(init=init, update=update, sizing=sizing,
                              errors={**algorithm.errors, ERR_CAPPED_HISTORY: CAPPED_HISTORY_MESSAGE})


def held(sizes: Sizes) -> Sizes:
    """The Sizes the wrapped algorithm sizes its histories by: the demand rows, where there are any."""
    return sizes if sizes.demand_rows is None else sizes._replace(rows=sizes.demand_rows)


# ------------------------------------------------------------------------------ serial arrivals
def serial_arrivals(algorithm: Algorithm) -> Algorithm:
    """A one-arrival algorithm on steps where several agents act: the arrivals served in agent order.

    At a step with active agents A (a problem without one arrival a step: `EnvSpec.one_active` False),
    every agent i selects from the state at the START of the step, as the only arrival (the inner
    select on active = one-hot(i), one_active True; vmapped over i, with the key split(key, N)[i]);
    then the arrivals update the state one after another in agent order 0..N-1 (a lax.scan of N
    inner updates, update i on active = one-hot(i) & active[i] with key split(key, N)[i]; an
    inactive agent's update leaves the state as it was). This is the asynchronous protocol with |A|
    arrivals a step served in a fixed order, every selection made before that step's updates: an
    agent does not see the data of the agents served before it in the same step (a delay of one
    step inside the batch), and agent 0 is always served first. It is not the algorithm's own
    all-agent variant where it has one (e.g. dis_kernel_ucb_duets), which scores and triggers in
    its own way.

    The inner algorithm sees N x T arrivals in T steps: its `init` gets the spec with horizon N T and
    one_active True, its time-grown buffers the rows of N t_end arrivals (`Sizing.rows`), and each of
    its updates the step index t (not an arrival index). Report: comm_up, comm_down and rounds summed
    over the active agents' updates (rounds may exceed 1 a step), error bits ORed over them,
    diagnostics those of the LAST active agent's update (the state after the step, for sizes;
    0 on a step without arrivals). On a problem that declares one arrival a step the wrapper is the
    inner algorithm unchanged (same numbers). The result declares no arrivals (`one_active` None).
    """
    if algorithm.one_active is not True:
        raise ConfigError(f"serial_arrivals: {algorithm.name} does not declare one arrival a step "
                          f"(Algorithm.one_active True); it runs on several active agents as it is")

    def init(key, spec, params, sizes, public=None):
        return algorithm.init(key, serial_spec(spec), params, sizes, public)

    def select(params, state, step, key):
        if step.one_active:
            return algorithm.select(params, state, step, key)
        return serial_select(algorithm, params, state, step, key)

    def update(params, state, step, actions, rewards, aux, key):
        if step.one_active:
            return algorithm.update(params, state, step, actions, rewards, aux, key)
        return serial_update(algorithm, params, state, step, actions, rewards, aux, key)

    sizing = algorithm.sizing
    if sizing is not None:
        sizing = sizing._replace(rows=lambda spec, t_end: algorithm.sizing.rows(serial_spec(spec),
                                                                               serial_steps(spec, t_end)))
    return algorithm._replace(init=init, select=select, update=update, sizing=sizing, one_active=None,
                              description=algorithm.description + " (several arrivals a step, served in agent order)")


def serial_select(algorithm: Algorithm, params, state, step: Step, key):
    """(actions[N], aux with a leading agent axis): agent i's action from the inner select on the
    step's start state with agent i the only arrival and key split(key, N)[i]."""
    N = step.active.shape[0]

    def one(i, k):
        return algorithm.select(params, state, arrival(step, i, True), k)

    actions, aux = jax.vmap(one)(jnp.arange(N), jax.random.split(key, N))
    return jnp.diagonal(actions).astype(jnp.int32), aux


def serial_update(algorithm: Algorithm, params, state, step: Step, actions, rewards, aux, key):
    """(state, Report) after the inner updates of agents 0..N-1 in turn, each the only arrival where
    it is active and a step that changes nothing where it is not (`serial_arrivals`). The selections saw
    the step's start state, so their caches of it (`base.STATE_CACHE`) are dropped: each update recomputes
    them on the state it is given."""
    N = step.active.shape[0]
    aux = {name: value for name, value in aux.items() if name not in STATE_CACHE} if isinstance(aux, dict) else aux

    def one(state, inputs):
        i, k, aux_i = inputs
        on = step.active[i]
        new, rep = algorithm.update(params, state, arrival(step, i, on), actions, rewards, aux_i, k)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(on, a, b), new, state), rep

    state, reps = lax.scan(one, state, (jnp.arange(N), jax.random.split(key, N), aux))
    return state, served_report(reps, step.active)


def served_report(reps: Report, active) -> Report:
    """One Report of N stacked ones ([N] leaves): communication summed and error bits ORed over the
    active agents, the diagnostics of the last active one (0 where none is active)."""

    def summed(values):
        return jnp.sum(jnp.where(active, values, jnp.zeros_like(values)))

    errors = lax.reduce(jnp.where(active, reps.errors, 0).astype(jnp.int32), jnp.int32(0), lax.bitwise_or, (0,))
    last = active.shape[0] - 1 - jnp.argmax(active[::-1])
    any_on = jnp.any(active)
    diagnostics = {name: jnp.where(any_on, value[last], jnp.zeros_like(value[last]))
                   for name, value in reps.diagnostics.items()}
    return Report(summed(reps.comm_up), summed(reps.comm_down), summed(reps.rounds), errors, diagnostics)


def arrival(step: Step, i, on) -> Step:
    """The step as a one-arrival algorithm sees agent i served alone: active = one-hot(i) & on."""
    return dataclasses.replace(step, active=(jnp.arange(step.active.shape[0]) == i) & on, one_active=True)


def serial_spec(spec: EnvSpec) -> EnvSpec:
    """The spec the inner algorithm is built for: N T arrivals, one a step (unchanged where the problem
    has one arrival a step already)."""
    if spec.one_active:
        return spec
    return spec._replace(horizon=spec.num_agents * spec.horizon, one_active=True)


def serial_steps(spec: EnvSpec, t_end: int) -> int:
    """Inner steps (arrivals) that problem steps [0, t_end) can hold: N t_end, or t_end for one a step."""
    return int(t_end) if spec.one_active else spec.num_agents * int(t_end)
