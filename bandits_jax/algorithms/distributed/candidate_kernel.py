"""DisKernelUCB of the DUETS paper kept over its public candidate set (`dis_kernel_ucb_duets` with
storage="candidates"), and the clients' candidate slots that `candidate_approx` shares.

The same algorithm as `dis_kernel.dis_kernel_ucb_duets` (spec duets §4.2); only the storage differs.
On a finite candidate set C [M, d] every number the UCB needs lives on C, so the cost is bounded by
the M candidates, not by the N T points seen. The pooled data G of the last synchronisation are the
Gaussian-process posterior over the candidates with noise variance lam (prior 0 and k(C, C)). A
synchronisation folds in the new points by candidate: P the distinct candidates, c their counts, s
their reward sums, D = diag(sqrt(c)), A = lam I + D Sigma_G[P, P] D = L L^T,

    W = L^{-1} D Sigma_G[P, :],   mean_G += W^T L^{-1} (s / sqrt(c) - D mean_G[P]),   Sigma_G -= W^T W.

Client i's model is the pooled one updated by its points since then, held in at most B candidate
slots (ids_i, counts, sums) and Q_i [B, B]: Sigma_i = Sigma_G - S_i^T Q_i S_i, S_i = Sigma_G[ids_i, :];
a point at candidate a (slot j) with reward y is absorbed as

    g = Sigma_G[ids_i, a],   z = e_j - Q_i g,   u = S_i^T z,   h = lam + u[a],
    mean_i += u (y - mean_i[a]) / h,   var_i -= u^2 / h,   Q_i += z z^T / h,   logdet_i += log(h / lam)

State: candidates [M, d], mean_g [M], cov_g [M, M]; per client the `Slots` [N, B, ...] (B sized by
demand up to buffer_capacity, `slot_sizing`), loc_mean [N, M], loc_var [N, M], loc_logdet [N].
Costs: a sync O(|P| M^2), a point O(M |P_i| + B^2). Error: ERR_BUFFER (too many distinct candidates).

Walk-through: docs/algorithms/candidate_storage.md.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ...core import ConfigError, EnvSpec, Sizes, Sizing, float_dtype
from ..base import argmax_or_uniform, batch_cond, kernel_args, sized_switch
from .dis_protocol import ERR_BUFFER, duets_report, duets_trigger

POOL_BLOCK = 32  # candidates folded into the pooled posterior per pass over Sigma_G
SLOT_CHUNK = 8   # a client's slots read per pass (`combine_rows`)


class Slots(NamedTuple):
    """A client's points since the last sync by distinct candidate (B slots, a multiple of SLOT_CHUNK;
    with a leading [N] axis in a state): ids [B] int32 (its candidates), counts [B], sums [B] (their
    rewards), used (slots in use; its number of points is the sum of its counts), Q [B, B] (module
    docstring). Zeros are a client without points."""

    ids: jax.Array
    counts: jax.Array
    sums: jax.Array
    used: jax.Array
    Q: jax.Array


class SlotStore(NamedTuple):
    """The clients' slots as functions, for another model over the candidates to compose (`SLOTS`):
    empty(name, config, spec, sizes, public) -> (candidates [M, d], `Slots` [N, ...]);
    absorb(lam, capacity, cov_g, active, a, y, slots, mean, var, logdet) -> (ok, slots, mean, var, logdet);
    restart(trigger, slots) -> slots; sizing(config, overflow) -> `core.Sizing`."""

    empty: Callable
    absorb: Callable
    restart: Callable
    sizing: Callable


class CandidateDisState(NamedTuple):
    """State of one run (M candidates, N clients).

    candidates [M, d]. n: the number of pooled points.
    mean_g [M], cov_g [M, M]: the pooled posterior over the candidates (module docstring).
    loc: `Slots` [N, ...], each client's points since the last sync.
    loc_mean [N, M], loc_var [N, M], loc_logdet [N]: each client's model.
    elapsed: int32 steps since the last sync. num_syncs: int32.
    """

    candidates: jax.Array
    n: jax.Array
    mean_g: jax.Array
    cov_g: jax.Array
    loc: Slots
    loc_mean: jax.Array
    loc_var: jax.Array
    loc_logdet: jax.Array
    elapsed: jax.Array
    num_syncs: jax.Array


# ------------------------------------------------------------------------------ init
def init(config, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> CandidateDisState:
    """No data: the prior over the candidates; B = `slot_count`."""
    del key
    X, loc = empty_clients("DisKernelUCB", config, spec, sizes, public)
    dtype, (M, N) = X.dtype, (X.shape[0], spec.num_agents)
    prior = config.kernel.fn(X, X, kernel_args(config.kernel, params, dtype))
    return CandidateDisState(
        candidates=X, n=jnp.zeros((), jnp.int32), mean_g=jnp.zeros((M,), dtype), cov_g=prior, loc=loc,
        loc_mean=jnp.zeros((N, M), dtype), loc_var=jnp.broadcast_to(jnp.diagonal(prior), (N, M)),
        loc_logdet=jnp.zeros((N,), dtype), elapsed=jnp.zeros((), jnp.int32), num_syncs=jnp.zeros((), jnp.int32))


def empty_clients(name: str, config, spec: EnvSpec, sizes: Sizes, public):
    """(X [M, d]: the public candidates in the float dtype, `Slots` [N, ...] of clients without
    points), B = `slot_count`."""
    if public is None or "candidates" not in public:
        raise ConfigError(f"{name}: storage='candidates' needs a problem with a public candidate set")
    dtype = float_dtype()
    N, B = spec.num_agents, slot_count(config, sizes)
    slots = jnp.zeros((N, B), dtype)
    return public["candidates"].astype(dtype), Slots(jnp.zeros((N, B), jnp.int32), slots, slots,
                                                    jnp.zeros((N,), jnp.int32), jnp.zeros((N, B, B), dtype))


# ------------------------------------------------------------------------------ select
def select(config, params, state: CandidateDisState, step, key):
    """Every client's UCB over the candidates; a client with no data at all picks `base.uniform_arms`."""
    del config
    var = jnp.maximum(state.loc_var, 0.0)
    scores = state.loc_mean + params["alpha"] * jnp.sqrt(var)
    empty = (state.n == 0) & (jnp.sum(state.loc.counts, axis=1) == 0)
    actions = argmax_or_uniform(key, scores, empty, state.mean_g.dtype)
    return actions, {"mean": state.loc_mean, "var": var, "scores": scores}


# ------------------------------------------------------------------------------ update
def update(config, params, state: CandidateDisState, step, actions, rewards, aux, key):
    """Every active client absorbs its point; any client's trigger synchronises everyone."""
    del aux, key
    dtype = state.mean_g.dtype
    active = step.active
    N = state.loc_mean.shape[0]
    d = state.candidates.shape[1]
    ok, loc, mean, var, logdet = absorb(
        params["lam"], config.buffer_capacity, state.cov_g, active, actions, jnp.asarray(rewards, dtype), state.loc,
        state.loc_mean, state.loc_var, state.loc_logdet)
    elapsed = state.elapsed + 1
    loc_n = jnp.sum(loc.counts, axis=1).astype(jnp.int32)
    trigger = duets_trigger(config, params, active, elapsed, loc_n, logdet)
    moved = jnp.where(trigger, jnp.sum(loc_n), 0)
    mean_g, cov_g = batch_cond(trigger, pool, lambda operand: operand[0],
                               ((state.mean_g, state.cov_g), loc.ids, loc.counts, loc.sums, params["lam"]), gather=1)
    n = state.n + moved.astype(state.n.dtype)
    restart = lambda own, shared: jnp.where(trigger, shared, own)  # noqa: E731
    state = state._replace(
        n=n, mean_g=mean_g, cov_g=cov_g, loc=restart_slots(trigger, loc),
        loc_mean=restart(mean, mean_g[None, :]), loc_var=restart(var, jnp.diagonal(cov_g)[None, :]),
        loc_logdet=restart(logdet, 0.0), elapsed=restart(elapsed, 0),
        num_syncs=state.num_syncs + trigger.astype(jnp.int32))
    errors = jnp.where(jnp.any(active & ~ok), ERR_BUFFER, 0)
    return state, duets_report(dtype, d, N, moved, trigger, errors, logdet, state.n, state.num_syncs)


def pool(operand):
    """The synchronisation's pooled part: every client's new points folded into the pooled posterior by
    candidate (module docstring). operand: ((mean_g [M], cov_g [M, M]), loc_ids [N, B],
    loc_counts [N, B], loc_sums [N, B] (unused slots count 0), lam); returns the new (mean_g, cov_g)."""
    (mean, cov), loc_ids, loc_counts, loc_sums, lam = operand
    M = mean.shape[0]
    counts = jnp.zeros((M,), mean.dtype).at[loc_ids].add(loc_counts)
    sums = jnp.zeros((M,), mean.dtype).at[loc_ids].add(loc_sums)
    slots = round_up(min(M, loc_ids.size), POOL_BLOCK)
    new = jnp.sum(counts > 0)
    ids = jnp.nonzero(counts > 0, size=slots, fill_value=0)[0]
    c = jnp.where(jnp.arange(slots) < new, counts[ids], 0.0)

    def fold(carry):
        j, mean, cov = carry
        block = lax.dynamic_slice(ids, (j * POOL_BLOCK,), (POOL_BLOCK,))
        cb = lax.dynamic_slice(c, (j * POOL_BLOCK,), (POOL_BLOCK,))
        mean, cov = fold_block(lam, block, cb, sums[block], mean, cov)
        return j + 1, mean, cov

    _, mean, cov = lax.while_loop(lambda carry: carry[0] * POOL_BLOCK < new, fold,
                                  (jnp.zeros((), jnp.int32), mean, cov))
    return mean, cov


# ------------------------------------------------------------------------------ helpers
def fold_block(lam, ids, counts, sums, mean, cov):
    """The posterior (mean [M], cov [M, M]) after counts[b] observations with reward sums[b] at the
    distinct candidates ids[b] (a count of 0 drops its slot out); O(b M^2)."""
    sq = jnp.sqrt(counts)
    rows = cov[ids]                                                                    # [b, M]
    A = lam * jnp.eye(ids.shape[0], dtype=cov.dtype) + sq[:, None] * rows[:, ids] * sq[None, :]
    L = jnp.linalg.cholesky(A)
    W = jax.scipy.linalg.solve_triangular(L, sq[:, None] * rows, lower=True)
    resid = jnp.where(counts > 0, sums / jnp.where(counts > 0, sq, 1.0), 0.0) - sq * mean[ids]
    w = jax.scipy.linalg.solve_triangular(L, resid, lower=True)
    return mean + W.T @ w, cov - W.T @ W


def absorb(lam, capacity, cov_g, active, a, y, slots: Slots, mean, var, logdet):
    """Every client absorbs its point (candidate a, reward y) when active and it has a slot for a (module
    docstring). cov_g [M, M] the pooled covariance; per client (leading [N]): active, a, y, its `Slots`
    (B', at most min(capacity, B') in use), mean [M], var [M], logdet. Returns (absorbed [N], slots,
    mean, var, logdet)."""
    ok, slots, z = jax.vmap(take_slot, in_axes=(None, None, 0, 0, 0, 0))(capacity, cov_g, active, a, y, slots)
    u = client_rows(cov_g, slots.ids, z, slots.used)                                          # [N, M]
    return (ok,) + jax.vmap(add_point, in_axes=(None,) + (0,) * 9)(lam, ok, a, y, z, u, slots, mean, var, logdet)


def take_slot(capacity, cov_g, active, a, y, slots: Slots):
    """One client's bookkeeping for its point: (ok, slots with a's slot counted, z = e_slot - Q g with
    g = Sigma_G[ids, a]; z = -Q g when not ok, and then nothing is written)."""
    ids, counts, sums, used, Q = slots
    B = ids.shape[0]
    have = (ids == a) & (jnp.arange(B) < used)
    found = jnp.any(have)
    ok = active & (found | (used < min(capacity, B)))
    slot = jnp.where(ok, jnp.where(found, jnp.argmax(have), used), B)  # an out-of-range slot writes nothing
    ids = ids.at[slot].set(a, mode="drop")
    used = used + (ok & ~found).astype(used.dtype)
    z = jax.nn.one_hot(slot, B, dtype=Q.dtype) - Q @ cov_g[ids, a]
    slots = Slots(ids, counts.at[slot].add(1.0, mode="drop"), sums.at[slot].add(y, mode="drop"), used, Q)
    return ok, slots, z


def add_point(lam, ok, a, y, z, u, slots: Slots, mean, var, logdet):
    """One client's model after its point, given u = Sigma_i[:, a] (module docstring):
    (slots with Q updated, mean, var, logdet)."""
    h = lam + u[a]
    gain = jnp.where(ok, u / h, 0.0)
    slots = slots._replace(Q=slots.Q + jnp.where(ok, jnp.outer(z, z) / h, 0.0))
    return slots, mean + gain * (y - mean[a]), var - gain * u, logdet + jnp.where(ok, jnp.log(h / lam), 0.0)


def restart_slots(trigger, slots: Slots) -> Slots:
    """Every client's slots emptied when a synchronisation pooled them (trigger), else kept."""
    return jax.tree_util.tree_map(lambda a: jnp.where(trigger, jnp.zeros_like(a), a), slots)


def client_rows(cov_g, ids, z, used):
    """u [N, M] with u[i] = z[i] @ cov_g[ids[i]] over each client's first used[i] slots (z is zero beyond
    them); ids, z [N, B']. While every client uses few slots, their rows are gathered SLOT_CHUNK at a
    time (`combine_rows`: the cost follows the slots in use); once some client uses more than
    `dense_from`, one [N, M] x [M, M] product (z scattered onto the candidates) reads Sigma_G once
    instead (the same numbers to rounding). `base.sized_switch` picks per step, and for a batch of runs
    by its largest client."""
    M, (N, B) = cov_g.shape[0], ids.shape
    start = dense_from(M, N)
    capacities = (start, B) if B > start else (B,)
    return sized_switch(jnp.max(used), capacities, partial(_rows, start), (cov_g, ids, z, used))


def _rows(start: int, capacity: int, operand):
    """`client_rows` by gathering (capacity <= start) or by one product."""
    cov_g, ids, z, used = operand
    if capacity <= start:
        return jax.vmap(combine_rows, in_axes=(None, 0, 0, 0))(cov_g, ids, z, used)
    N, M = z.shape[0], cov_g.shape[0]
    return jnp.zeros((N, M), z.dtype).at[jnp.arange(N)[:, None], ids].add(z) @ cov_g


def dense_from(M: int, N: int) -> int:
    """The slots per client beyond which `client_rows` takes the product. The product reads M^2 numbers
    once (as many as M / N slots of every client's rows) and does 2 N M^2 flops; gathered rows cost in
    proportion to the slots, less when the clients' candidates are near one another (their rows stay in
    cache). M / 16 is where the two met on the DUETS candidate sets at 100 clients (docs/reproduction/duets.md, speed)."""
    return max(M // N, M // 16, SLOT_CHUNK)


def combine_rows(cov_g, ids, z, used):
    """z @ cov_g[ids] over the first `used` slots only (z is zero beyond them), SLOT_CHUNK rows a pass:
    the cost follows the slots in use, not the capacity. ids, z [B'] with B' a multiple of SLOT_CHUNK."""

    def one_chunk(carry):
        j, u = carry
        rows = lax.dynamic_slice(ids, (j * SLOT_CHUNK,), (SLOT_CHUNK,))
        return j + 1, u + lax.dynamic_slice(z, (j * SLOT_CHUNK,), (SLOT_CHUNK,)) @ cov_g[rows]

    start = (jnp.zeros((), jnp.int32), jnp.zeros(cov_g.shape[:1], cov_g.dtype))
    return lax.while_loop(lambda carry: carry[0] * SLOT_CHUNK < used, one_chunk, start)[1]


# ------------------------------------------------------------------------------ slots
def slot_sizing(config, overflow: int) -> Sizing:
    """Demand-sized client slots (module docstring) for a state whose `loc` are the clients' `Slots`;
    `overflow` is the error bit of a client out of slots."""
    limit = round_up(config.buffer_capacity)
    return Sizing(lambda spec, t_end: int(t_end), resize_slots, lambda state: jnp.max(state.loc.used), limit, overflow)


def slot_count(config, sizes) -> int:
    """B: the demand rows of `sizes` (buffer_capacity without them), a multiple of SLOT_CHUNK."""
    want = config.buffer_capacity if sizes is None or sizes.demand_rows is None else sizes.demand_rows
    return round_up(min(want, config.buffer_capacity))


def resize_slots(params, state, sizes: Sizes):
    """Pad every client's slots to B = round_up(sizes.demand_rows) with empty ones; no number changes."""
    del params
    loc = state.loc
    pad = round_up(sizes.demand_rows) - loc.ids.shape[1]
    slot_pad = lambda a: jnp.pad(a, [(0, 0), (0, pad)])  # noqa: E731
    return state._replace(loc=Slots(slot_pad(loc.ids), slot_pad(loc.counts), slot_pad(loc.sums), loc.used,
                                    jnp.pad(loc.Q, [(0, 0), (0, pad), (0, pad)])))


def round_up(n: int, quantum: int = SLOT_CHUNK) -> int:
    """n rounded up to a multiple of quantum."""
    return -(-int(n) // quantum) * quantum


SLOTS = SlotStore(empty_clients, absorb, restart_slots, slot_sizing)
