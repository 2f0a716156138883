"""DisKernelUCB of the DUETS paper kept over its public candidate set (storage="candidates").

The same algorithm as `dis_kernel` with mechanics="duets" (that module's docstring: every client
acts at every step, any client's elapsed * log-det ratio > threshold synchronises everyone, the
unscaled variance, first-index ties, a uniform first arm, communication in the DUETS paper's units);
only the storage differs. On a finite candidate set C [M, d] every number the UCB needs lives on
C, so the cost is bounded by the M candidates, not by the N T points seen:

Pooled data G of the last synchronisation: counts and reward sums per candidate ([M] each). With U
the candidates seen (at most R = min(M, N T), padded with count 0) and kernels.krr's push-through
form A = lam I + D K_UU D = L L^T, D = diag(sqrt(counts_U)), the pooled model over C is

    V = L^{-1} D K_UC  [R, M],  mean_G, var_G [M]  (krr.repeated_points_factor),
    Sigma_G(C, a) = k(C, a) - V^T V[:, a]          (posterior covariance with candidate a),

recomputed at every synchronisation, O(R^3 + M R^2) (a `base.batch_cond` with gather=1: in a
batch of runs only those that synchronise compute it, one after another).

Client i: its points since the synchronisation are absorbed one at a time by the Gaussian-process
update with noise variance lam. For a point at candidate a with reward y:

    u = Sigma_G(C, a) - W_i^T W_i[:, a],   h = lam + u[a],
    mean_i += u (y - mean_i[a]) / h,   var_i -= u^2 / h,   W_i[j] = u / sqrt(h),   logdet_i += log(h / lam)

(W_i [B, M], row j for its j-th point), O(M (R + B)) a point: the numbers of the rows storage
(one inverse-Cholesky row per point, the log-det ratio from its diagonal) to rounding. A client
with more than B = buffer_capacity points since the last synchronisation is the error ERR_BUFFER.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..core import ConfigError, EnvSpec, Sizes
from ..kernels import krr
from .base import argmax_or_uniform, batch_cond, float_dtype
from .dis_kernel import ERR_BUFFER, duets_report, duets_trigger
from .kernel import kernel_args


class CandidateDisState(NamedTuple):
    """State of one run (M candidates, R pooled distinct slots, N clients, B client rows).

    candidates [M, d]. counts [M], sums [M], n: the pooled data (n points).
    V [R, M]: the pooled model's factor over the candidates (module docstring).
    loc_ids [N, B] int32, loc_y [N, B], loc_n [N]: each client's points since the last sync.
    loc_W [N, B, M], loc_mean [N, M], loc_var [N, M], loc_logdet [N]: each client's model.
    elapsed: int32 steps since the last sync. num_syncs: int32.
    """

    candidates: jax.Array
    counts: jax.Array
    sums: jax.Array
    n: jax.Array
    V: jax.Array
    loc_ids: jax.Array
    loc_y: jax.Array
    loc_n: jax.Array
    loc_W: jax.Array
    loc_mean: jax.Array
    loc_var: jax.Array
    loc_logdet: jax.Array
    elapsed: jax.Array
    num_syncs: jax.Array


# ------------------------------------------------------------------------------ init
def init(config, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> CandidateDisState:
    """No data: the prior over the candidates; R = min(M, N T) pooled slots, B = buffer_capacity."""
    del key, sizes
    if public is None or "candidates" not in public:
        raise ConfigError("DisKernelUCB: storage='candidates' needs a problem with a public candidate set")
    dtype = float_dtype()
    X = public["candidates"].astype(dtype)
    M = X.shape[0]
    N, B, R = spec.num_agents, config.buffer_capacity, min(M, spec.num_agents * spec.horizon)
    prior_var = config.kernel.diag(X, kernel_args(config.kernel, params, dtype))
    zeros = jnp.zeros((M,), dtype)
    return CandidateDisState(
        candidates=X, counts=zeros, sums=zeros, n=jnp.zeros((), jnp.int32), V=jnp.zeros((R, M), dtype),
        loc_ids=jnp.zeros((N, B), jnp.int32), loc_y=jnp.zeros((N, B), dtype),
        loc_n=jnp.zeros((N,), jnp.int32), loc_W=jnp.zeros((N, B, M), dtype),
        loc_mean=jnp.zeros((N, M), dtype), loc_var=jnp.broadcast_to(prior_var, (N, M)),
        loc_logdet=jnp.zeros((N,), dtype), elapsed=jnp.zeros((), jnp.int32), num_syncs=jnp.zeros((), jnp.int32))


# ------------------------------------------------------------------------------ select
def select(config, params, state: CandidateDisState, step, key):
    """Every client's UCB over the candidates; a client with no data at all picks `base.uniform_arms`."""
    del config
    var = jnp.maximum(state.loc_var, 0.0)
    scores = state.loc_mean + params["alpha"] * jnp.sqrt(var)
    actions = argmax_or_uniform(key, scores, (state.n + state.loc_n) == 0, state.sums.dtype)
    return actions, {"mean": state.loc_mean, "var": var, "scores": scores}


# ------------------------------------------------------------------------------ update
def update(config, params, state: CandidateDisState, step, actions, rewards, aux, key):
    """Every active client absorbs its point; any client's trigger synchronises everyone."""
    del aux, key
    dtype = state.sums.dtype
    active = step.active
    N, B = state.loc_ids.shape
    d = state.candidates.shape[1]
    kp = kernel_args(config.kernel, params, dtype)
    room = state.loc_n < B
    cols = pooled_columns(config.kernel, kp, state, actions)                        # [N, M]
    W, mean, var, logdet, ids, ys = jax.vmap(absorb, in_axes=(None,) + (0,) * 11)(
        params["lam"], active & room, cols, actions, jnp.asarray(rewards, dtype), state.loc_W, state.loc_mean,
        state.loc_var, state.loc_logdet, state.loc_n, state.loc_ids, state.loc_y)
    elapsed = state.elapsed + 1
    loc_n = state.loc_n + (active & room).astype(jnp.int32)
    trigger = duets_trigger(config, params, active, elapsed, loc_n, logdet)
    moved = jnp.where(trigger, jnp.sum(loc_n), 0)
    counts, sums, n, V, mean_g, var_g = batch_cond(
        trigger, partial(pool, config.kernel), no_pool,
        ((state.counts, state.sums, state.n, state.V), state.candidates, ids, ys, loc_n, params["lam"], kp), gather=1)
    restart = lambda own, shared: jnp.where(trigger, shared, own)  # noqa: E731
    state = state._replace(
        counts=counts, sums=sums, n=n, V=V, loc_ids=ids, loc_y=ys,
        loc_n=restart(loc_n, 0), loc_W=W, loc_mean=restart(mean, mean_g[None, :]),
        loc_var=restart(var, var_g[None, :]), loc_logdet=restart(logdet, 0.0), elapsed=restart(elapsed, 0),
        num_syncs=state.num_syncs + trigger.astype(jnp.int32))
    errors = jnp.where(jnp.any(active & ~room), ERR_BUFFER, 0)
    return state, duets_report(dtype, d, N, moved, trigger, errors, logdet, state.n, state.num_syncs)


def pool(kern, operand):
    """The synchronisation's pooled part: every client's points join the pooled counts and the pooled
    model over the candidates is recomputed. operand: ((counts, sums, n, V), candidates, loc_ids [N, B],
    loc_y [N, B], loc_n [N], lam, kernel params); returns (counts, sums, n, V, mean [M], var [M]), the
    mean and variance the clients restart from."""
    (counts, sums, n, V), X, loc_ids, loc_y, loc_n, lam, kp = operand
    B = loc_ids.shape[1]
    R = V.shape[0]
    live = jnp.arange(B)[None, :] < loc_n[:, None]
    counts = counts.at[loc_ids].add(live.astype(sums.dtype))
    sums = sums.at[loc_ids].add(jnp.where(live, loc_y, 0.0))
    ids = jnp.nonzero(counts > 0, size=R, fill_value=0)[0]
    seen = jnp.arange(R) < jnp.sum(counts > 0)
    mean, var, V = krr.repeated_points_factor(kern, kp, lam, X[ids], jnp.where(seen, counts[ids], 0.0),
                                              jnp.where(seen, sums[ids], 0.0), X)
    return counts, sums, n + jnp.sum(loc_n).astype(n.dtype), V, mean, var


def no_pool(operand):
    """The step without a synchronisation: the pooled part unchanged (zeros where `pool` gives the
    restart mean and variance, which only a synchronising run reads)."""
    (counts, sums, n, V), X = operand[:2]
    zeros = jnp.zeros((X.shape[0],), sums.dtype)
    return counts, sums, n, V, zeros, zeros


# ------------------------------------------------------------------------------ helpers
def pooled_columns(kern, kp, state: CandidateDisState, ids):
    """Sigma_G(C, a) for each a in ids[N]: [N, M], O(N M R)."""
    return kern.fn(state.candidates[ids], state.candidates, kp) - (state.V[:, ids].T @ state.V)


def absorb(lam, ok, col, a, y, W, mean, var, logdet, n, ids, ys):
    """One client absorbs the point (candidate a, reward y) when ok, col = Sigma_G(C, a) [M] (module
    docstring). W [B, M] (rows >= n are stale and ignored), mean [M], var [M], logdet, n (its points
    so far), ids [B], ys [B]. Returns the new (W, mean, var, logdet, ids, ys)."""
    live = jnp.arange(W.shape[0]) < n
    u = col - jnp.where(live, W[:, a], 0.0) @ W
    h = lam + u[a]
    gain = jnp.where(ok, u / h, 0.0)
    slot = jnp.where(ok, n, W.shape[0])  # an out-of-range slot writes nothing
    return (W.at[slot].set(u / jnp.sqrt(h), mode="drop"), mean + gain * (y - mean[a]), var - gain * u,
            logdet + jnp.where(ok, jnp.log(h / lam), 0.0), ids.at[slot].set(a, mode="drop"),
            ys.at[slot].set(y, mode="drop"))
