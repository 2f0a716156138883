"""DUETS: distributed uniform exploration of trimmed sets (Pavlovic, Salgia and Zhao 2024, Algorithms 1-2).

A phased elimination over a finite, public candidate set (`Problem.public`: {"candidates": [M, d],
"best": int32}). Epoch j lasts T_j steps: T_1 is given, T_j = floor(sqrt(T T_{j-1})), and the last
epoch is cut at the horizon T. In epoch j every agent queries T_j candidates drawn uniformly, with
replacement, from the active set X_j; there is no UCB and no exploitation. After each epoch but
the last the server regenerates the agents' queries from their shared coins, computes the exact
posterior variance sigma_j^2 (Eq. 4, no 1/lam) of the epoch's points over X_j, keeps each point
with probability p_j = min(1, p0 sigma^2_max) (S_j the distinct kept candidates), forms
vbar = (lam I + Z^T Z)^{-1} sum_n Z_n^T Y_n (Eq. 8, z(x) = K_SS^{-1/2} k_S(x)), and everyone trims
(Eq. 9):

    X_{j+1} = {x in X_j : mu(x) >= max_{X_j} mu - 2 beta sigma_max},   mu(x) = z(x)^T vbar.

Communication at the last step of each completed epoch, in scalars per receiver (`core.COMM_UNIT`): every
agent uploads v_n (|S_j| scalars) and receives S_j, vbar and sigma_max (d|S_j| + |S_j| + 1), so
up = N |S_j|, down = N (d|S_j| + |S_j| + 1), rounds = 1. The paper's own count (spec §3.6, Eq. 2: the
uplink averaged over agents, the broadcast counted once), (d + 2)|S_j| + 1, is the diagnostic `comm_paper`;
the authors' code's, N |S_j| draws, the diagnostic `comm_code`.

State: candidates [M, d], best; active [M] bool, active_ids [M] int32, n_active; the epoch's
counts [M] and reward sums [M] (all agents); the agents' coin root and the server's key. An epoch
costs O(R^3 + M R^2), R = min(N T_j, M) distinct points (kernels.krr.repeated_points_posterior).
Defaults follow the paper where the spec marks a choice (spec §7): floor for T_j, the exact
unscaled sigma in p_j and in Eq. 9, 2 beta, p_j clipped at 1, de-duplicated S_j.

Walk-through: docs/algorithms/duets.md.
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
from jax import lax

from ...core import Algorithm, ConfigError, EnvSpec, Sizes, Table, flat_uniform, float_dtype, report
from ...kernels import krr, nystrom
from ...kernels.functions import Kernel
from ..base import capacity_ladder, check_tolerance, kernel_params, resolve_kernel, signed_params, sized_switch

NAME = "DUETS"
COIN, SERVER = 1, 2
SIGNS = {"beta": "nonnegative", "p0": "positive", "lam": "positive", "lengthscale": "positive"}
DIAGNOSTICS = ("epoch_length", "sigma2_max", "p", "inducing", "active_before", "active_after", "best_survived",
               "comm_paper", "comm_code", "regen_mismatch")


class Schedule(NamedTuple):
    """The static epoch plan: nominal lengths T_j, steps run (the last one cut at T), first steps."""

    lengths: tuple
    steps: tuple
    starts: tuple


class DuetsConfig(NamedTuple):
    """Static options: the kernel, the schedule, the eigenvalue floor of K_SS^{-1/2}, and the name and
    factory that messages give."""

    kernel: Kernel
    schedule: Schedule
    eig_tol: float
    name: str = NAME
    factory: str = "duets"


class DuetsState(NamedTuple):
    """State of one run (M candidates).

    candidates [M, d], best: from `Problem.public`.
    active [M] bool; active_ids [M] int32 (the active ids in increasing order, then padding);
    n_active int32.
    counts [M], sums [M]: this epoch's queries per candidate and their reward sums (all agents).
    coin, server: the agents' coin root and the server's key.
    """

    candidates: jax.Array
    best: jax.Array
    active: jax.Array
    active_ids: jax.Array
    n_active: jax.Array
    counts: jax.Array
    sums: jax.Array
    coin: jax.Array
    server: jax.Array


def floor_next(horizon: int, length: int) -> int:
    """The paper's next epoch length, floor(sqrt(T T_j)) (exact in integers)."""
    return math.isqrt(horizon * length)


def epoch_schedule(horizon: int, first: int, next_length=floor_next) -> Schedule:
    """T_1 = first, T_j = next_length(T, T_{j-1}) (floor(sqrt(T T_{j-1})) by default), until the steps
    reach T (the last one cut)."""
    lengths, steps, starts, t = [], [], [], 0
    length = first
    while t < horizon:
        lengths.append(length)
        steps.append(min(length, horizon - t))
        starts.append(t)
        t += steps[-1]
        length = next_length(horizon, length)
    return Schedule(tuple(lengths), tuple(steps), tuple(starts))


# ------------------------------------------------------------------------------ init
def init(config: DuetsConfig, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> DuetsState:
    """Every candidate active; empty epoch statistics."""
    del params, sizes
    if public is None:
        raise ConfigError(f"{config.name} needs a problem with a public candidate set (Problem.public)")
    if sum(config.schedule.steps) != spec.horizon:
        raise ConfigError(f"{config.name} was built for a horizon of {sum(config.schedule.steps)} steps, the "
                          f"problem has {spec.horizon}; build it with {config.factory}(horizon={spec.horizon}, ...)")
    dtype = float_dtype()
    M = spec.num_arms
    active = jnp.ones((M,), bool)
    return DuetsState(
        candidates=public["candidates"].astype(dtype), best=public["best"], active=active,
        active_ids=jnp.arange(M, dtype=jnp.int32), n_active=jnp.asarray(M, jnp.int32),
        counts=jnp.zeros((M,), dtype), sums=jnp.zeros((M,), dtype),
        coin=jax.random.fold_in(key, COIN), server=jax.random.fold_in(key, SERVER))


# ------------------------------------------------------------------------------ select
def select(config: DuetsConfig, params, state: DuetsState, step, key):
    """Agent n's query at step t: its draw i = t - start_j of epoch j from its coin (`query_ids`)."""
    del params, key
    epoch, local = step_tables(config.schedule)[:2]
    N = step.active.shape[0]
    ids = query_ids(state, epoch[step.t], jnp.arange(N)[:, None], local[step.t][None, None])
    return ids[:, 0], ()


# ------------------------------------------------------------------------------ update
def update(config: DuetsConfig, params, state: DuetsState, step, actions, rewards, aux, key):
    """Add the queries to the epoch statistics; at the end of a completed epoch, trim (`epoch_end`)."""
    del aux, key
    state = record_queries(state, step, actions, rewards)
    return end_of_epoch(config.schedule, partial(trim, config), DIAGNOSTICS, params, state, step)


def record_queries(state: DuetsState, step, actions, rewards) -> DuetsState:
    """The step's queries added to the epoch's counts and reward sums (acting agents only)."""
    dtype = state.sums.dtype
    acted = step.active.astype(dtype)
    return state._replace(counts=state.counts.at[actions].add(acted),
                          sums=state.sums.at[actions].add(acted * rewards.astype(dtype)))


def end_of_epoch(schedule: Schedule, trim_fn, diagnostics: tuple, params, state: DuetsState, step):
    """(state, Report): `epoch_end` with trim_fn at the last step of a completed epoch, else `quiet`
    (zero diagnostics of these names). One branch serves every completed epoch, its index traced."""
    epoch, _, ends = step_tables(schedule)
    N = step.active.shape[0]
    stay = partial(quiet, diagnostics)
    if len(schedule.steps) == 1:  # no epoch completes before the horizon
        return stay(params, state)
    return lax.cond(ends[step.t], partial(epoch_end, schedule, trim_fn, N), lambda j, *operand: stay(*operand),
                    epoch[step.t], params, state)


def epoch_end(schedule: Schedule, trim_fn, N: int, j, params, state: DuetsState):
    """Steps 1-5 of the module docstring for completed epoch j (traced): (new state, Report). The
    epoch's queries fill the first T_j of W columns, W the longest completed epoch (ids [N, W], M past
    T_j: no candidate), so one program serves every epoch. Its distinct points fill R of
    min(N T_j, M) + 1 slots; the dense work, trim_fn(N, capacity, operand) (`trim`), runs on the
    capacity `epoch_capacity` picks (`base.sized_switch`), so its O(R^3 + M R^2) follows the points
    actually drawn."""
    dtype = state.sums.dtype
    M = state.candidates.shape[0]
    i = jnp.arange(completed_width(schedule))
    ids = jnp.where(in_epoch(schedule, j), query_ids(state, j, jnp.arange(N)[:, None], i[None, :]), M)  # [N, W]
    counts = jnp.zeros((M,), dtype).at[ids].add(1.0, mode="drop")
    tops = [min(N * length, M) + 1 for length in schedule.lengths[:-1]]
    uniq = jnp.unique(ids, size=max(tops), fill_value=M)
    distinct = jnp.sum(uniq < M)
    capacities = tuple(sorted(set(capacity_ladder(max(tops))) | set(tops)))
    return sized_switch(epoch_capacity(distinct, jnp.asarray(tops)[j], max(tops)), capacities, partial(trim_fn, N),
                        (params, state, j, ids, counts, uniq))


def epoch_capacity(distinct, top, most: int):
    """The capacity of an epoch's dense work: the smallest of `base.capacity_ladder(top)` that holds
    `distinct` points, top = min(N T_j, M) + 1 the epoch's own slots (traced; `most` >= top the largest
    over epochs). That is the smallest rung of `capacity_ladder(most)` that holds them where it is
    below top, else top. It grows with `distinct`, so under a vmap the largest run's is every run's."""
    rungs = jnp.asarray(capacity_ladder(most))
    rung = rungs[jnp.minimum(jnp.searchsorted(rungs, distinct), len(rungs) - 1)]
    return jnp.where(rung < top, rung, top)


def trim(config: DuetsConfig, N: int, capacity: int, operand):
    """Steps 2-5 for epoch j (traced, in the operand) with the epoch's distinct candidates in
    uniq[:capacity] (sorted, M beyond them): (new state, Report)."""
    params, state, j, ids, counts, uniq = operand
    dtype = state.sums.dtype
    M, d = state.candidates.shape
    kp = kernel_params(config.kernel.params, params["lengthscale"], dtype)
    uniq, U, c, s, live = epoch_points(state, counts, uniq, capacity)

    _, var = krr.repeated_points_posterior(config.kernel, kp, params["lam"], U, c, jnp.zeros_like(c),
                                           state.candidates)
    sigma2_max = jnp.max(jnp.where(state.active, var, -jnp.inf))
    p = jnp.minimum(1.0, params["p0"] * sigma2_max)
    in_S, code_count = inducing_slots(config.schedule, state, j, ids, uniq, live, p, N)
    mu, _ = nystrom_posterior(config, kp, params["lam"], state.candidates, U, in_S, c, s)

    top = jnp.max(jnp.where(state.active, mu, -jnp.inf))
    active = state.active & (mu >= top - 2.0 * params["beta"] * jnp.sqrt(jnp.maximum(sigma2_max, 0.0)))
    new, n_active = trimmed(state, active)
    size = jnp.sum(in_S).astype(dtype)
    diags = dict(epoch_length=epoch_length(config.schedule, j), sigma2_max=sigma2_max, p=p, inducing=size,
                 active_before=state.n_active, active_after=n_active, best_survived=active[state.best],
                 comm_paper=(d + 2) * size + 1.0, comm_code=N * code_count,
                 regen_mismatch=jnp.sum(counts != state.counts))
    rep = report(dtype, comm_up=N * size, comm_down=N * (d * size + size + 1.0), rounds=1.0, active=n_active,
                 **{name: jnp.asarray(v).astype(dtype) for name, v in diags.items()})
    return new, rep


def quiet(diagnostics: tuple, params, state: DuetsState):
    """A step inside an epoch: nothing is sent; the diagnostics (these names) are zero."""
    del params
    dtype = state.sums.dtype
    zeros = {name: jnp.zeros((), dtype) for name in diagnostics}
    return state, report(dtype, active=state.n_active, **zeros)


# ------------------------------------------------------------------------------ helpers
def step_tables(schedule: Schedule):
    """Static per-step tables [T]: epoch index, position inside the epoch, and whether a
    communication round ends the step (the last step of every epoch but the final one)."""
    epoch, local, ends = [], [], []
    last = len(schedule.steps) - 1
    for j, (start, run) in enumerate(zip(schedule.starts, schedule.steps)):
        epoch += [j] * run
        local += list(range(run))
        ends += [False] * (run - 1) + [j < last]
    return (jnp.asarray(epoch, jnp.int32), jnp.asarray(local, jnp.int32), jnp.asarray(ends, bool))


def completed_width(schedule: Schedule) -> int:
    """W, the longest completed epoch's T_j: the columns of an epoch's queries and keep draws."""
    return max(schedule.lengths[:-1], default=1)


def epoch_length(schedule: Schedule, j):
    """T_j of epoch j (traced int32)."""
    return jnp.asarray(schedule.lengths, jnp.int32)[j]


def in_epoch(schedule: Schedule, j):
    """[W] bool: the columns of `completed_width` that epoch j's T_j points fill."""
    return jnp.arange(completed_width(schedule)) < epoch_length(schedule, j)


def query_ids(state: DuetsState, j, n, i):
    """Candidate ids of agent n's i-th query of epoch j (broadcast over n and i): the same function
    serves the agents' queries and the server's regeneration."""

    def one(n1, i1):
        key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(state.coin, n1), j), i1)
        u = jax.random.uniform(key, (), state.sums.dtype)
        pos = jnp.minimum(jnp.floor(u * state.n_active).astype(jnp.int32), state.n_active - 1)
        return state.active_ids[pos]

    n, i = jnp.broadcast_arrays(n, i)
    return jax.vmap(jax.vmap(one))(n, i)


def epoch_points(state: DuetsState, counts, uniq, capacity: int):
    """The epoch's distinct candidates in the first `capacity` slots: (uniq[R], U[R, d], counts c[R],
    reward sums s[R], live[R]), R = capacity; slots past the distinct ones (uniq = M) are dead, with
    count and sum 0."""
    M = state.candidates.shape[0]
    uniq = uniq[:capacity]
    live = uniq < M
    safe = jnp.minimum(uniq, M - 1)
    return (uniq, state.candidates[safe], jnp.where(live, counts[safe], 0.0), jnp.where(live, state.sums[safe], 0.0),
            live)


def trimmed(state: DuetsState, active):
    """(state with the active set `active` [M] and empty epoch statistics, its size n_active)."""
    M = active.shape[0]
    n_active = jnp.sum(active).astype(jnp.int32)
    active_ids = jnp.nonzero(active, size=M, fill_value=M - 1)[0].astype(jnp.int32)
    return state._replace(active=active, active_ids=active_ids, n_active=n_active,
                          counts=jnp.zeros_like(state.counts), sums=jnp.zeros_like(state.sums)), n_active


def keep_uniforms(schedule: Schedule, state: DuetsState, j, N: int):
    """The server's draws of epoch j: (u_keep [N, W], one uniform per point of the epoch in its first
    T_j columns (W: `completed_width`), and u_empty, one more uniform), from fold_in(server, j)."""
    k_keep, k_empty = jax.random.split(jax.random.fold_in(state.server, j))
    dtype = state.sums.dtype
    u_keep = flat_uniform(k_keep, (N, completed_width(schedule)), dtype)
    return u_keep, jax.random.uniform(k_empty, (), dtype)


def kept_slots(ids, kept, uniq, live, M: int):
    """[R] bool: the distinct slots (uniq[R]) whose candidate some kept point (kept [N, W] over
    ids [N, W]) is."""
    hit = jnp.zeros((M + 1,), bool).at[jnp.where(kept, ids, M)].set(True)
    return hit[uniq] & live


def check_epochs(name: str, horizon, first_epoch) -> None:
    """Refuse a horizon or first epoch length that is not a positive integer (ConfigError)."""
    for option, value in (("horizon", horizon), ("first_epoch", first_epoch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}: {option} must be a positive integer, got {value!r}")


def inducing_slots(schedule: Schedule, state: DuetsState, j, ids, uniq, live, p, N: int):
    """(in_S over the distinct slots, number of kept draws): each point of the epoch (the first T_j
    columns of ids [N, W]) kept with probability p; when none is, the point at flat position
    floor(u N T_j) (agent-major)."""
    dtype = state.sums.dtype
    length = epoch_length(schedule, j)
    u_keep, u_empty = keep_uniforms(schedule, state, j, N)
    kept = (u_keep < p) & in_epoch(schedule, j)
    flat = jnp.floor(u_empty * (N * length)).astype(jnp.int32)
    fallback = ids[flat // length, flat % length]
    M = state.candidates.shape[0]
    in_S = jnp.where(jnp.any(kept), kept_slots(ids, kept, uniq, live, M), (uniq == fallback) & live)
    return in_S, jnp.maximum(jnp.sum(kept), 1).astype(dtype)


def nystrom_posterior(config: DuetsConfig, kp, lam, X, U, in_S, c, s):
    """(mu[M], var[M]) of the Nystrom model of Eqs. 5-6 and 8 at X[M, d], with the inducing slots in_S of
    the distinct points U[R, d] (counts c[R], reward sums s[R]): mu = z(X)^T P^{-1} Z_U^T s and the
    Eq. 6 variance (`nystrom.ridge_mean_var`), z = K_SS^{-1/2} k_S, P = lam I + Z_U^T diag(c) Z_U.

    Coordinates past |S| are 0 and decouple from the rest, so the model is computed with the smallest
    rung of `base.capacity_ladder` that holds |S| (`base.sized_switch`), not all R coordinates: the
    kept draws are a few of the epoch's distinct points (p_j is small), and the cost is O(M |S|^2)."""
    order, count = jnp.argsort(~in_S, stable=True), jnp.sum(in_S)
    return sized_switch(count, capacity_ladder(U.shape[0]), partial(_posterior_on, config),
                        (kp, lam, X, U, U[order], count, c, s))


def _posterior_on(config: DuetsConfig, size: int, operand):
    """`nystrom_posterior` with the inducing points in S[:size] (the first `count` live)."""
    kp, lam, X, U, S, count, c, s = operand
    S = S[:size]
    W, _ = nystrom.dictionary_root(config.kernel.fn, S, count, kp, config.eig_tol)
    Z = nystrom.embed(config.kernel.fn, U, S, count, W, kp)
    Pinv = nystrom.ridge_inverse((Z * c[:, None]).T @ Z, lam)
    ZX = nystrom.embed(config.kernel.fn, X, S, count, W, kp)
    return nystrom.ridge_mean_var(ZX, config.kernel.diag(X, kp), Pinv, Pinv @ (Z.T @ s), lam)


# ------------------------------------------------------------------------------ factory
# the per-epoch diagnostics its summaries show (the round follows step t, counted from 1)
EPOCH_TABLE = Table("per epoch", {"epoch_length": "T_j", "inducing": "inducing points", "p": "p_j",
                                  "sigma2_max": "sigma^2_max", "active_before": "active before",
                                  "active_after": "active after", "best_survived": "best kept"})


def duets(horizon: int, first_epoch: int = 2, kernel: Union[str, Kernel] = "rbf", beta=1.0, p0=10.0, lam=0.2,
          lengthscale=1.0, *, eig_tol: float = 1e-10) -> Algorithm:
    """DUETS as the paper writes it: epochs of uniform queries from the active set, Nystrom trimming.

    A horizon of `horizon` steps with T_1 = first_epoch (module docstring).

    params: beta >= 0 (Eq. 9's width factor), p0 > 0 (inducing probability factor), lam > 0,
    lengthscale > 0 (the SE kernel exp(-||x - x'||^2 / (2 l^2)) by default).
    """
    check_epochs(NAME, horizon, first_epoch)
    kern = resolve_kernel(NAME, kernel)
    config = DuetsConfig(kern, epoch_schedule(horizon, first_epoch), check_tolerance(NAME, "eig_tol", eig_tol))
    given = dict(beta=beta, p0=p0, lam=lam, lengthscale=lengthscale)
    return Algorithm(NAME, signed_params(NAME, SIGNS, given), partial(init, config), partial(select, config),
                     partial(update, config), None, {},
                     f"DUETS ({kern.name} kernel): uniform queries from the active set with shared randomness, "
                     f"epochs {list(config.schedule.steps)}", tables=(EPOCH_TABLE,))
