"""The two contracts every part of the simulator speaks: a problem and an algorithm.

A *problem* is the world: it draws an instance once per seed (`init`), then at each global
step `t` hands every agent K contexts and knows their noiseless mean rewards. Rewards for
ALL K arms are drawn at each step from the problem's own key, so two algorithms run on the
same seed see the same contexts and the same noise (common random numbers).

An *algorithm* is a NamedTuple of pure functions in the manner of optax:

    init(key, spec, hparams, capacity) -> state
    select(state, contexts[N, K, d], key) -> (actions[N] int32, info)
        (or select(state, contexts, key, active[N] bool) when `sees_active` is True)
    update(state, contexts[N, K, d], actions[N], rewards[N], active[N] bool, key) -> (state, info)

`hparams` is a dict of float hyper-parameters; `init` stores them in the state as traced
values, so a grid over them is a `vmap`, not a recompile. Everything shape-like (N, K, d,
capacities, the horizon, network widths) is static and lives in the closure that built the
algorithm.

`update` reports communication in its info dict under the keys of `COMM_KEYS`: scalars sent
up to the server (or to peers), scalars sent down, and whether a communication round took
place at this step (0 or 1). Algorithms that never communicate report zeros.

Algorithms whose state grows with time (a Gram matrix, a training history) declare
`capacity(spec, t_end) -> rows` (buffer rows needed to run steps 0..t_end-1) and
`resize(state, rows) -> state` (pad the buffers to a larger static size, without changing any
result). The runner then splits the horizon into segments of doubling capacity so a step
costs in proportion to the data seen so far, not to the final size.

Buffers whose fill is not a function of time (a Nyström dictionary, per-client upload buffers)
are sized by demand instead: the algorithm declares `demand(state) -> rows in use` (one run's
state, an int32 scalar) and `demand_limit` (the largest size it accepts), and its `resize` takes
a third argument, `resize(state, rows, dict_rows)`, the size of those buffers. Before each
segment the runner reads the largest demand of the batch and gives the buffers room to grow;
if a run overflows inside the segment anyway (the algorithm's error marker), the segment is run
again from its start with the buffers doubled, up to `demand_limit`. A dictionary of 100 points
then costs as 100-odd rows, not as its worst-case capacity.

Pure-exploration algorithms, which run in phases rather than steps, are plain functions
`trial(key) -> outcome` and go through `runner.run_trials`, with the same keys and sharding.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

Array = jax.Array
PyTree = Any

COMM_KEYS = ("comm_up", "comm_down", "rounds")


class ConfigError(ValueError):
    """Bad user input (shape, name, value). Raised before anything is compiled.

    The message is one line that says what is wrong and how to fix it; the CLI prints it and
    exits with status 2.
    """


class EnvSpec(NamedTuple):
    """Static sizes of a multi-agent contextual bandit run.

    num_agents: N, agents acting at each global step (inactive ones are masked).
    num_arms:   K, contexts offered to each agent per step.
    dim:        d, context dimension.
    horizon:    T, number of global steps.
    """

    num_agents: int
    num_arms: int
    dim: int
    horizon: int


class Problem(NamedTuple):
    """A bandit environment, as pure functions of an instance pytree.

    init(key) -> instance:                 the per-seed draw (hidden vector, data shuffles, ...).
    contexts(instance, t, key) -> [N, K, d]
    mean_reward(instance, t, contexts) -> [N, K]   the noiseless means; regret is measured on them.
    sample_rewards(instance, means, key) -> [N, K]  a noisy reward for every arm (CRN).
    active(instance, t, key) -> [N] bool     which agents act at step t (None: all of them).
    description: one line, shown in outputs (e.g. "synthetic stand-in for MovieLens").
    """

    name: str
    spec: EnvSpec
    init: Callable[[Array], PyTree]
    contexts: Callable[[PyTree, Array, Array], Array]
    mean_reward: Callable[[PyTree, Array, Array], Array]
    sample_rewards: Callable[[PyTree, Array, Array], Array]
    active: Optional[Callable[[PyTree, Array, Array], Array]] = None
    description: str = ""


class Algorithm(NamedTuple):
    """A (multi-agent) bandit algorithm as pure functions; see the module docstring.

    batching: how the runner spreads a batch of runs over one step. "vmap" (default) vectorises
    them; "map" loops over them inside the compiled step (`lax.map`). Under `vmap` a `lax.cond`
    whose predicate differs between runs becomes a select that computes BOTH branches, so an
    algorithm whose rare event-triggered work (a synchronisation, a retraining) is expensive
    may be faster with "map", where each run pays only for the branch it takes. Under "map" each
    run executes its whole segment scan in turn (runs are mapped outside the time loop).

    sees_active: when True the runner passes the step's arrival mask to `select` as a fourth
    argument, so an algorithm of a one-client-per-step protocol scores only the active client
    (the actions of inactive agents are never used: their regret is 0 and `update` ignores them).

    update_sees_select: when True the runner passes the step's select info to `update` as the
    keyword `select_info`, so work done while scoring (e.g. a column that the update needs again)
    is not repeated. Keys of the select info that begin with "_" are such caches: the runner never
    stores them (see `public_info`).

    demand, demand_limit: demand-sized buffers (module docstring); demand None means none.
    """

    name: str
    hparams: dict
    init: Callable[..., PyTree]
    select: Callable[..., tuple]
    update: Callable[..., tuple]
    capacity: Optional[Callable[[EnvSpec, int], int]] = None
    resize: Optional[Callable[[PyTree, int], PyTree]] = None
    description: str = ""
    batching: str = "vmap"
    sees_active: bool = False
    update_sees_select: bool = False
    demand: Optional[Callable[[PyTree], Array]] = None
    demand_limit: int = 0


def call_select(algorithm: "Algorithm", state, contexts, key, active):
    """algorithm.select with the arrival mask passed on when the algorithm asks for it."""
    if algorithm.sees_active:
        return algorithm.select(state, contexts, key, active)
    return algorithm.select(state, contexts, key)


def call_update(algorithm: "Algorithm", state, contexts, actions, rewards, active, key, select_info):
    """algorithm.update with the select info passed on when the algorithm asks for it."""
    if algorithm.update_sees_select:
        return algorithm.update(state, contexts, actions, rewards, active, key, select_info=select_info)
    return algorithm.update(state, contexts, actions, rewards, active, key)


def public_info(info: dict) -> dict:
    """A select info without its caches (the keys that begin with "_")."""
    return {k: v for k, v in info.items() if not k.startswith("_")}


def gaussian_rewards(noise_std: float) -> Callable[[PyTree, Array, Array], Array]:
    """`sample_rewards` for additive Gaussian noise of a fixed standard deviation."""

    def sample(instance, means, key):
        del instance
        return means + noise_std * jax.random.normal(key, means.shape, means.dtype)

    return sample


def bernoulli_rewards(instance, means, key):
    """`sample_rewards` for 0/1 rewards with success probability clip(mean, 0, 1)."""
    del instance
    p = jnp.clip(means, 0.0, 1.0)
    return jax.random.bernoulli(key, p).astype(means.dtype)


def no_comm(dtype=jnp.float32) -> dict:
    """The info dict of a step without communication."""
    zero = jnp.zeros((), dtype)
    return {"comm_up": zero, "comm_down": zero, "rounds": zero}


def check_hparams(algorithm_name: str, defaults: dict, given: dict, positive=(), nonnegative=()) -> dict:
    """Merge user hyper-parameters into the defaults, refusing unknown names and bad signs."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(
            f"{algorithm_name}: unknown hyper-parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(defaults))}"
        )
    out = dict(defaults)
    for name, value in given.items():
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{algorithm_name}: hyper-parameter {name} must be a number, got {value!r}") from None
    for name in positive:
        if not out[name] > 0:
            raise ConfigError(f"{algorithm_name}: {name} must be > 0, got {out[name]}")
    for name in nonnegative:
        if not out[name] >= 0:
            raise ConfigError(f"{algorithm_name}: {name} must be >= 0, got {out[name]}")
    return out


def traced_hparams(defaults: dict, given, dtype) -> dict:
    """The hyper-parameters an `init` stores in its state: `given` (a dict of scalars or traced
    values, possibly None) over `defaults`, as arrays of `dtype`."""
    given = given or {}
    return {name: jnp.asarray(given.get(name, value), dtype) for name, value in defaults.items()}


def check_spec(spec: EnvSpec) -> EnvSpec:
    """Refuse impossible sizes with a message that names the field."""
    for field in EnvSpec._fields:
        value = getattr(spec, field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{field} must be a positive integer, got {value!r}")
    return spec
