"""Pieces every algorithm shares: N independent agents, one-active protocols, scores to actions,
error bits, a conditional that stays one conditional for a whole batch of runs, and the checks of
static options and float hyper-parameters that the factories make before anything compiles.

A single-agent learner is written for one agent and one step:

    init1(key, spec, params, rows) -> state          (spec.num_agents is ignored)
    select1(params, state, contexts[K, d], key) -> action    (int32 scalar)
    update1(params, state, x[d], reward, key) -> state

`independent` vmaps them over the agent axis, masks the update of inactive agents, and reports
zero communication. Per-agent histories have `rows1(spec, t_end)` rows.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable, Optional

import jax
import jax.numpy as jnp
from jax import lax

from ..core import Algorithm, ConfigError, Param, Sizing, declare_params, flat_uniform, report
from ..kernels.functions import Kernel, get_kernel

ERR_MULTI_ACTIVE = 1 << 30
MULTI_ACTIVE_MESSAGE = ("more than one client was active at a step; this algorithm needs exactly one active "
                        "client per step")


def independent(name: str, params: dict, init1: Callable, select1: Callable, update1: Callable,
                rows1: Optional[Callable] = None, resize1: Optional[Callable] = None,
                description: str = "") -> Algorithm:
    """N agents each running the same single-agent learner on its own data, no communication.

    Under a one-active protocol (`step.one_active`) select runs select1 for agent
    i = argmax(active) only, with the same key split(key, N)[i] it gets otherwise (so its action is
    the one the all-agent select gives; the other agents' actions are 0), and update runs update1
    for agent i only: O(one agent) instead of O(N agents). A step with more than one active agent
    then reports ERR_MULTI_ACTIVE, and only agent argmax(active) learns.
    """

    def init(key, spec, params, sizes, public=None):
        del public
        keys = jax.random.split(key, spec.num_agents)
        return jax.vmap(lambda k: init1(k, spec, params, sizes.rows))(keys)

    def select(params, state, step, key):
        N = step.contexts.shape[0]
        keys = jax.random.split(key, N)
        if step.one_active:
            i = active_index(step.active)
            action = select1(params, agent_state(state, i), step.contexts[i], keys[i])
            return one_hot_action(i, action, N), ()
        actions = jax.vmap(select1, in_axes=(None, 0, 0, 0))(params, state, step.contexts, keys)
        return actions.astype(jnp.int32), ()

    def update(params, state, step, actions, rewards, aux, key):
        del aux
        keys = jax.random.split(key, step.contexts.shape[0])
        dtype = rewards.dtype
        if step.one_active:
            i = active_index(step.active)
            old = agent_state(state, i)
            new = update1(params, old, step.contexts[i, actions[i]], rewards[i], keys[i])
            new = jax.tree_util.tree_map(lambda a, b: jnp.where(step.active[i], a, b), new, old)
            state = jax.tree_util.tree_map(lambda s, v: s.at[i].set(v), state, new)
            return state, report(dtype, errors=multi_active_error(step.active))
        chosen = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0, :]
        new = jax.vmap(update1, in_axes=(None, 0, 0, 0, 0))(params, state, chosen, rewards, keys)
        return masked_select(step.active, new, state), report(dtype)

    sizing = None
    if rows1 is not None:
        sizing = Sizing(rows=rows1, resize=lambda params, state, sizes: jax.vmap(lambda s: resize1(s, sizes.rows))(state))
    return Algorithm(name, dict(params), init, select, update, sizing, {ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE},
                     description)


# ------------------------------------------------------------------------------ public candidates
def on_candidates(algorithm: Algorithm) -> Algorithm:
    """`algorithm` on a problem whose arms are a public candidate set (`Problem.public`
    {"candidates": [M, d]}) rather than per-step contexts: the candidates are kept in the state once
    ({"candidates", "inner"}), and at every step the algorithm sees them as every agent's contexts
    ([N, M, d], a broadcast inside the compiled step). Nothing else changes."""

    def init(key, spec, params, sizes, public=None):
        if public is None or "candidates" not in public:
            raise ConfigError(f"{algorithm.name}: on_candidates needs a problem with a public candidate set")
        return {"candidates": public["candidates"], "inner": algorithm.init(key, spec, params, sizes, public)}

    def seen(state, step):
        X = state["candidates"]
        return dataclasses.replace(step, contexts=jnp.broadcast_to(X, step.active.shape + X.shape))

    def select(params, state, step, key):
        return algorithm.select(params, state["inner"], seen(state, step), key)

    def update(params, state, step, actions, rewards, aux, key):
        inner, rep = algorithm.update(params, state["inner"], seen(state, step), actions, rewards, aux, key)
        return {"candidates": state["candidates"], "inner": inner}, rep

    sizing = algorithm.sizing
    if sizing is not None:
        sizing = sizing._replace(
            resize=lambda params, state, sizes: {**state, "inner": algorithm.sizing.resize(params, state["inner"], sizes)},
            demand=None if sizing.demand is None else (lambda state: algorithm.sizing.demand(state["inner"])))
    return algorithm._replace(init=init, select=select, update=update, sizing=sizing)


# ------------------------------------------------------------------------------ one active agent
def active_index(active):
    """int32 index of the active client: argmax of the mask active[N] (0 when none is active)."""
    return jnp.argmax(active).astype(jnp.int32)


def agent_state(state, i):
    """Agent i's slice of a state pytree whose every leaf has a leading agent axis."""
    return jax.tree_util.tree_map(lambda a: a[i], state)


def one_hot_action(i, action, num_agents: int):
    """actions[num_agents] int32: `action` at client i, 0 elsewhere."""
    return jnp.zeros((num_agents,), jnp.int32).at[i].set(jnp.asarray(action).astype(jnp.int32))


def multi_active_error(active):
    """ERR_MULTI_ACTIVE (int32) when more than one client is active, else 0."""
    return jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0).astype(jnp.int32)


def masked_select(mask, new, old):
    """Per-agent choice between two state pytrees with a leading agent axis: new where mask."""

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - 1))
        return jnp.where(m, a, b)

    return jax.tree_util.tree_map(pick, new, old)


# ------------------------------------------------------------------------------ scores to actions
def argmax_random_ties(scores, noise):
    """argmax over the last axis of scores[..., K], ties broken uniformly at random.

    noise[..., K] are uniforms in [0, 1) (one per arm): among the arms whose score is within a
    relative 1e-10 of the maximum (equal up to rounding), the one with the largest noise wins.
    int32 [...].
    """
    best = jnp.max(scores, axis=-1, keepdims=True)
    tied = scores >= best - 1e-10 * (1.0 + jnp.abs(best))
    return jnp.argmax(jnp.where(tied, noise, -1.0), axis=-1).astype(jnp.int32)


def uniform_arm(key, num_arms: int, dtype):
    """int32 arm floor(u K), u = uniform(key, ()): a uniform pick that a NumPy loop fed the same u
    reproduces (the first arm of an agent with no data in the DUETS paper's baselines)."""
    u = jax.random.uniform(key, (), dtype)
    return jnp.minimum(jnp.floor(u * num_arms).astype(jnp.int32), num_arms - 1)


def uniform_arms(key, num_agents: int, num_arms: int, dtype):
    """[N] int32: `uniform_arm` of each agent with its key split(key, N)[i], as `independent` hands
    per-agent keys, so an all-agent algorithm draws what N independent agents draw."""
    return jax.vmap(lambda k: uniform_arm(k, num_arms, dtype))(jax.random.split(key, num_agents))


def argmax_or_uniform(key, scores, empty, dtype):
    """[N] int32: each agent's argmax of scores[N, K] (the first arm on ties, as np.argmax), or its
    `uniform_arms` pick (draws in dtype) where empty ([N], or one bool for all): the arm rule of the
    DUETS paper's kernel baselines, where an agent with no data picks uniformly."""
    N, K = scores.shape
    return jnp.where(empty, uniform_arms(key, N, K, dtype), jnp.argmax(scores, axis=1).astype(jnp.int32))


# aux entries computed from the state select saw (a cache for update): valid only for that same state, so a
# wrapper that changes the state between select and update (`wrappers.serial_update`) drops them
STATE_CACHE = ("column",)


def ucb_select(step, key, dtype, client):
    """Tie-broken argmax of the scores of client(i, contexts[i]) -> (mean[K], var[K], scores[K], cols)
    for every client, or (step.one_active) for the active client i only, with row i of the same
    (N, K) tie noise uniform(key, (N, K)). cols: None, or [C, K] columns of which the one-active aux
    keeps the chosen one (`aux["column"]`, for an update on the same state: `STATE_CACHE`).

    Returns (actions[N], aux {mean, var, scores, tie_noise}: [N, K], or [K] of client i, and "column").
    """
    contexts = step.contexts.astype(dtype)
    N, K = contexts.shape[:2]
    noise = flat_uniform(key, (N, K), dtype)
    if step.one_active:
        i = active_index(step.active)
        mean, var, scores, cols = client(i, contexts[i])
        action = argmax_random_ties(scores, noise[i])
        aux = {"mean": mean, "var": var, "scores": scores, "tie_noise": noise[i]}
        if cols is not None:
            aux["column"] = cols[:, action]
        return one_hot_action(i, action, N), aux
    mean, var, scores, _ = jax.vmap(client)(jnp.arange(N), contexts)
    return argmax_random_ties(scores, noise), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}


def scaled_ucb(params, mean, var):
    """(mean, var / lam, mean + alpha sqrt(var / lam)): the UCB of the asynchronous environment's
    kernel baselines, whose variance carries 1/lam."""
    var = var / params["lam"]
    return mean, var, mean + params["alpha"] * jnp.sqrt(var)


# ------------------------------------------------------------------------------ rare work, batched
def batch_cond(pred, true_fn: Callable, false_fn: Callable, operand, *, gather: Optional[int] = None):
    """`lax.cond(pred, true_fn, false_fn, operand)` that stays ONE conditional under `vmap`.

    Written per run, like a plain cond. Under `vmap` a plain cond with a batched predicate becomes
    a select that computes BOTH branches for every run at every call; here the batch takes
    true_fn only when some run needs it, and keeps its result only where that run's predicate
    holds (the other runs keep false_fn's). With `gather=k` (static) only the runs whose predicate
    holds compute true_fn, k at a time in a loop, and are scattered back: for work that is rare per
    run but frequent across a large batch. A vmap of size one is the run's own cond. Nested vmaps
    (agents, seeds, a grid) each add one "any".
    true_fn and false_fn must not close over traced values: pass them in `operand`.
    """

    @jax.custom_batching.custom_vmap
    def cond(pred, operand):
        return lax.cond(pred, true_fn, false_fn, operand)

    @cond.def_vmap
    def cond_batched(axis_size, in_batched, pred, operand):
        pred_batched, operand_batched = in_batched
        operand = batch_everywhere(operand, operand_batched, axis_size)
        vtrue, vfalse = jax.vmap(true_fn), jax.vmap(false_fn)
        if axis_size == 1:  # one run: its own plain cond, without the any/where or the gather
            first = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)  # noqa: E731
            out = jax.tree_util.tree_map(lambda x: x[None], cond(pred[0] if pred_batched else pred, first(operand)))
        elif not pred_batched:
            out = batch_cond(pred, vtrue, vfalse, operand, gather=gather)
        elif gather is None:
            out = batch_cond(jnp.any(pred), lambda po: masked_select(po[0], vtrue(po[1]), vfalse(po[1])),
                             lambda po: vfalse(po[1]), (pred, operand))  # pred travels in: no closure
        else:
            out = _gathered(pred, vtrue, vfalse, operand, min(gather, axis_size), axis_size)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return cond(pred, operand)


def _gathered(pred, vtrue, vfalse, operand, k: int, size: int):
    """vfalse for every run, then vtrue on the runs whose pred holds, k runs a pass."""
    count = jnp.sum(pred.astype(jnp.int32))
    rows = jnp.nonzero(pred, size=size + k, fill_value=size)[0]  # padded with an out-of-range row

    def one_pass(carry):
        j, out = carry
        take = lax.dynamic_slice(rows, (j * k,), (k,))
        sub = jax.tree_util.tree_map(lambda x: x[jnp.minimum(take, size - 1)], operand)
        out = jax.tree_util.tree_map(lambda o, r: o.at[take].set(r, mode="drop"), out, vtrue(sub))
        return j + 1, out

    loop = lambda out: lax.while_loop(lambda c: c[0] * k < count, one_pass, (jnp.zeros((), jnp.int32), out))[1]  # noqa: E731
    # no pass at all: skip the loop, whose carry would be a copy of the operand's batch (it reads both)
    return lax.cond(count > 0, loop, lambda out: out, vfalse(operand))


def sized_switch(size, capacities, fn: Callable, operand):
    """fn(capacity, operand) for the smallest static capacity in `capacities` (increasing) that holds
    `size` (the last when none does), as ONE `lax.switch` that stays one under `vmap`.

    For work whose cost follows a static buffer size while the data fill only `size` of it: fn must
    give the same numbers (to float rounding) for every capacity >= size. Under `vmap` the batch
    takes the smallest capacity that holds its largest size (a plain switch with a batched index
    would compute every capacity for every run). fn must not close over traced values: pass them
    in `operand`.
    """
    capacities = tuple(int(c) for c in capacities)
    branches = [lambda op, c=c: fn(c, op) for c in capacities]

    @jax.custom_batching.custom_vmap
    def switch(size, operand):
        index = jnp.searchsorted(jnp.asarray(capacities[:-1]), size, side="left")
        return lax.switch(index, branches, operand)

    @switch.def_vmap
    def switch_batched(axis_size, in_batched, size, operand):
        size_batched, operand_batched = in_batched
        operand = batch_everywhere(operand, operand_batched, axis_size)
        largest = jnp.max(size) if size_batched else size
        out = sized_switch(largest, capacities, lambda c, op: jax.vmap(partial(fn, c))(op), operand)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return switch(size, operand)


def batch_everywhere(tree, batched, axis_size: int):
    """Inside a `custom_vmap` rule: every leaf of `tree` with the batch axis in front (the unbatched
    leaves, per `batched`, broadcast to axis_size)."""
    return jax.tree_util.tree_map(
        lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x)), tree, batched)


def capacity_ladder(most: int) -> tuple:
    """Capacities for `sized_switch` up to `most`: the powers of two from 64 below it, then `most`."""
    return tuple(c for c in (64 << k for k in range(max(most, 64).bit_length())) if c < most) + (most,)


# ------------------------------------------------------------------------------ checks
def check_static(name: str, option: str, value, allowed) -> object:
    """Refuse a static option outside `allowed` with a message that lists them."""
    if value not in allowed or isinstance(value, bool) != isinstance(next(iter(allowed)), bool):
        raise ConfigError(f"{name}: {option} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def check_capacity(name: str, option: str, value) -> int:
    """Refuse a capacity that is not a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: {option} must be a positive integer, got {value!r}")
    return value


def check_tolerance(name: str, option: str, value) -> float:
    """Refuse a relative tolerance (a near-duplicate cut, an eigenvalue floor) outside [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"{name}: {option} must be a number in [0, 1) (e.g. 1e-10), got {value!r}")
    return float(value)


def check_max_history(name: str, max_history) -> Optional[int]:
    """None, or a positive integer (ConfigError otherwise)."""
    return None if max_history is None else check_capacity(name, "max_history", max_history)


def signed_params(name: str, signs: dict, given: dict) -> dict:
    """{name: Param} of a factory's float hyper-parameters: `signs` {name: "positive" | "nonnegative" |
    "probability" | "trigger" | ""} (`core.Param`) declares them and `given` (the factory's keyword
    values) sets each default, so a default is written once, in the factory's signature. Unknown
    names and wrong signs raise ConfigError."""
    missing = sorted(set(signs) - set(given))
    if missing:
        raise TypeError(f"{name}: the factory passes no value for {', '.join(missing)}")
    return declare_params(name, {k: Param(float("nan"), sign) for k, sign in signs.items()}, given)


def resolve_kernel(algorithm_name: str, kernel) -> Kernel:
    """A Kernel, or one by name; an unknown name is a ConfigError that names the algorithm."""
    if isinstance(kernel, Kernel):
        return kernel
    try:
        return get_kernel(kernel)
    except ValueError as err:
        raise ConfigError(f"{algorithm_name}: {err}") from None


def kernel_args(kern: Kernel, params, dtype) -> dict:
    """The kernel's params for the traced hyper-parameters (the lengthscale; the rest defaults)."""
    return kernel_params(kern.params, params["lengthscale"], dtype)


def kernel_params(defaults: dict, lengthscale, dtype) -> dict:
    """A kernel's params (`Kernel.params`) with every `lengthscale`, also nested (product kernels), set
    to the traced hyper-parameter and the rest cast to `dtype`."""
    out = {}
    for name, value in defaults.items():
        if isinstance(value, dict):
            out[name] = kernel_params(value, lengthscale, dtype)
        elif name == "lengthscale":
            out[name] = lengthscale
        else:
            out[name] = jnp.asarray(value, dtype)
    return out
