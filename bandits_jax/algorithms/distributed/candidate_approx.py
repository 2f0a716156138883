"""Approx-DisKernelUCB of the DUETS paper kept over its public candidate set
(`approx_dis_kernel_ucb_duets` with storage="candidates").

The algorithm of `approx_dis_kernel.approx_dis_kernel_ucb_duets` (spec duets §4.3); only the storage
and the re-sampling's random numbers differ. On a finite candidate set C [M, d] every number lives
on C, so the cost is bounded by the M candidates, not by the N T points seen. With z(x) the
embedding in the dictionary S (Z [M, m] over the candidates), A = sum z z^T and b = sum z y, the
ridge quantities are those of a Gaussian process with prior covariance Z Z^T and noise variance lam:

    mean(x) = z^T (A + lam I)^{-1} b,   lam var(x) = resid(x) + Sigma[x, x],
    Sigma = lam Z (A + lam I)^{-1} Z^T,  resid = max(k(x, x) - |z|^2, 0).

A client's points since the synchronisation update (mean_G, Sigma_G) exactly as in
`candidate_kernel` (its `SLOTS`); its trigger sum grows by lam var_i(x_t). A synchronisation keeps
candidate c of owner j when one uniform u[j, c] falls below 1 - (1 - p_c)^count[j, c],
p_c = min(1, q lam var_G(c)) (the same law as a draw per point); the new dictionary is the kept
candidates in candidate order; then A = Z^T diag(count) Z, b = Z^T sums and the new model, in
O(M m^2 + M^2 m). Communication as the rows storage counts it (`dis_protocol.sync_comm`, scalars per
receiver), each kept (owner, candidate) pair one uploaded point: up = d (kept pairs) + N (m^2 + m),
down = N (d m + m^2 + m); the DUETS paper's count is the diagnostic comm_paper
(`dis_protocol.paper_sync_comm`), the authors' code's, m (m + 1), comm_code.

State: candidates [M, d], counts [N, M], sums [M], dict_n, mean_g [M], cov_g [M, M], resid [M];
per client the `candidate_kernel.Slots` [N, B, ...], loc_mean [N, M], loc_var [N, M] and the
trigger sums loc_trig [N]. Errors: ERR_DICT (dictionary overflow), ERR_SLOTS (a client with more
than buffer_capacity distinct candidates since the last synchronisation).

Walk-through: docs/algorithms/candidate_storage.md.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.kernels import nystrom

from ...core import EnvSpec, Sizes, flat_uniform, report
from ..base import argmax_or_uniform, batch_cond, capacity_ladder, kernel_params, sized_switch
from .dis_protocol import ERR_DICT, ERR_SLOTS, paper_sync_comm, sync_comm


class CandidateApproxState(NamedTuple):
    """State of one run (M candidates, N clients).

    candidates [M, d]. counts [N, M]: pooled points per owner and candidate; sums [M]: their reward sums.
    dict_n: the dictionary's size. mean_g [M], cov_g [M, M], resid [M]: the pooled model (module docstring).
    loc: `candidate_kernel.Slots` [N, ...] (demand-sized), each client's points since the last sync;
    loc_mean [N, M], loc_var [N, M]: its model (loc_var the diagonal of its Sigma_i).
    loc_trig [N]: trigger sums. elapsed: int32 steps since the last sync. num_syncs: int32.
    """

    candidates: jax.Array
    counts: jax.Array
    sums: jax.Array
    dict_n: jax.Array
    mean_g: jax.Array
    cov_g: jax.Array
    resid: jax.Array
    loc: tuple
    loc_mean: jax.Array
    loc_var: jax.Array
    loc_trig: jax.Array
    elapsed: jax.Array
    num_syncs: jax.Array


# ------------------------------------------------------------------------------ init
def init(config, slots, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> CandidateApproxState:
    """No data, an empty dictionary (Sigma_G = 0, resid = k(x, x)); the clients' slots empty
    (`candidate_kernel.SlotStore` slots, B = `candidate_kernel.slot_count`)."""
    del key
    X, loc = slots.empty("Approx-DisKernelUCB", config, spec, sizes, public)
    dtype, (M, N) = X.dtype, (X.shape[0], spec.num_agents)
    kdiag = config.kernel.diag(X, kernel_params(config.kernel.params, params["lengthscale"], dtype))
    per_candidate = jnp.zeros((N, M), dtype)
    return CandidateApproxState(
        candidates=X, counts=per_candidate, sums=jnp.zeros((M,), dtype), dict_n=jnp.zeros((), jnp.int32),
        mean_g=jnp.zeros((M,), dtype), cov_g=jnp.zeros((M, M), dtype), resid=kdiag, loc=loc,
        loc_mean=per_candidate, loc_var=per_candidate, loc_trig=jnp.zeros((N,), dtype),
        elapsed=jnp.zeros((), jnp.int32), num_syncs=jnp.zeros((), jnp.int32))


# ------------------------------------------------------------------------------ select
def select(config, params, state: CandidateApproxState, step, key):
    """Every client's UCB mean + alpha sqrt(var) over the candidates (var with its 1 / lam);
    `base.uniform_arms` while the dictionary is empty."""
    del config, step
    var = (state.resid + jnp.maximum(state.loc_var, 0.0)) / params["lam"]
    scores = state.loc_mean + params["alpha"] * jnp.sqrt(var)
    actions = argmax_or_uniform(key, scores, state.dict_n == 0, state.mean_g.dtype)
    return actions, {"mean": state.loc_mean, "var": var}


# ------------------------------------------------------------------------------ update
def update(config, slots, params, state: CandidateApproxState, step, actions, rewards, aux, key):
    """Every active client absorbs its point (into its `slots`) and adds lam var_i(x_t) to its trigger
    sum; any sum over the threshold, or the forced first synchronisation, synchronises everyone."""
    del aux
    dtype = state.mean_g.dtype
    N = state.loc_mean.shape[0]
    increment = state.resid[actions] + jnp.maximum(state.loc_var[jnp.arange(N), actions], 0.0)
    ok, loc, mean, var, _ = slots.absorb(
        params["lam"], config.buffer_capacity, state.cov_g, step.active, actions, jnp.asarray(rewards, dtype),
        state.loc, state.loc_mean, state.loc_var, jnp.zeros((N,), dtype))
    trig = state.loc_trig + jnp.where(ok, increment, 0.0)
    forced = (step.t == config.forced_sync) & (state.num_syncs == 0)
    trigger = jnp.any(trig > params["threshold"]) | forced
    pooled = (state.counts, state.sums, state.dict_n, state.mean_g, state.cov_g, state.resid)
    operand = (params, pooled, loc, state.candidates, key)
    pooled, kept, over = batch_cond(trigger, lambda o: synchronise(config, o), quiet, operand, gather=1)
    p_counts, p_sums, dict_n, mean_g, cov_g, resid = pooled
    restart = lambda own, shared: jnp.where(trigger, shared, own)  # noqa: E731
    state = state._replace(
        counts=p_counts, sums=p_sums, dict_n=dict_n, mean_g=mean_g, cov_g=cov_g, resid=resid,
        loc=slots.restart(trigger, loc), loc_mean=restart(mean, mean_g[None, :]),
        loc_var=restart(var, jnp.diagonal(cov_g)[None, :]), loc_trig=restart(trig, 0.0),
        elapsed=restart(state.elapsed + 1, 0), num_syncs=state.num_syncs + trigger.astype(jnp.int32))
    m, d = dict_n.astype(dtype), state.candidates.shape[1]
    up, down = sync_comm(d, N, kept, m, trigger)
    errors = jnp.where(over, ERR_DICT, 0) | jnp.where(jnp.any(step.active & ~ok), ERR_SLOTS, 0)
    return state, report(dtype, up, down, trigger, errors, trigger=trigger, var_sum=jnp.max(trig),
                         dict_size=dict_n, kept=kept, comm_paper=paper_sync_comm(d, N, kept, m, trigger),
                         comm_code=jnp.where(trigger, m * (m + 1), 0.0))


def synchronise(config, operand):
    """Steps (a)-(d) of the module docstring. operand: (params, pooled (counts [N, M], sums [M], dict_n,
    mean_g, cov_g, resid), the clients' new points (`Slots` [N, ...]), candidates [M, d], key).
    Returns (new pooled, kept (owner, candidate) pairs, dictionary overflow). The dictionary's buffer is the
    smallest of `base.capacity_ladder` that holds the kept candidates (`base.sized_switch`), so (c)-(d)
    follow the dictionary's size, not dict_capacity."""
    params, (counts, sums, _, _, cov_g, resid), loc, X, key = operand
    dtype = sums.dtype
    N, M = counts.shape
    counts = counts.at[jnp.arange(N)[:, None], loc.ids].add(loc.counts)  # unused slots add 0
    sums = sums.at[loc.ids].add(loc.sums)
    prob = nystrom.leverage_probability(resid + jnp.maximum(jnp.diagonal(cov_g), 0.0), params["q"])
    keep = owner_keeps(prob, counts, flat_uniform(key, (N, M), dtype))
    chosen = jnp.any(keep, axis=0)
    dict_n, model, over = sized_switch(jnp.sum(chosen), capacity_ladder(min(config.dict_capacity, M)),
                                       partial(pooled_model, config), (params, X, chosen, counts, sums))
    return (counts, sums, dict_n) + model, jnp.sum(keep, dtype=jnp.int32), over


def pooled_model(config, capacity: int, operand):
    """Steps (b)-(d) with a dictionary buffer of `capacity` rows: (dict_n, (mean_g [M], cov_g [M, M],
    resid [M]), overflow). operand: (params, candidates [M, d], chosen [M] (kept by some owner), pooled
    counts [N, M], reward sums [M])."""
    params, X, chosen, counts, sums = operand
    lam = params["lam"]
    p = kernel_params(config.kernel.params, params["lengthscale"], sums.dtype)
    dict_X, dict_n, Linv, over = nystrom.kept_dictionary(config.kernel.fn, X, chosen, capacity, p, config.eig_tol)
    Z = nystrom.embed_chol(config.kernel.fn, X, dict_X, dict_n, Linv, p)                     # [M, capacity]
    Pinv = nystrom.ridge_inverse(Z.T @ (jnp.sum(counts, axis=0)[:, None] * Z), lam)
    ZP = Z @ Pinv
    resid = jnp.maximum(config.kernel.diag(X, p) - jnp.sum(Z * Z, axis=1), 0.0)
    return dict_n, (ZP @ (Z.T @ sums), lam * ZP @ Z.T, resid), over


def quiet(operand):
    """The no-sync branch: the pooled model unchanged, nothing kept, no overflow."""
    _, pooled, _, _, _ = operand
    return pooled, jnp.zeros((), jnp.int32), jnp.zeros((), bool)


# ------------------------------------------------------------------------------ helpers
def owner_keeps(prob, counts, uniforms):
    """keep [N, M]: owner j keeps candidate c when at least one of its counts[j, c] points there is kept
    with probability prob[c] each, i.e. uniforms[j, c] < 1 - (1 - prob[c])^counts[j, c]."""
    seen = counts > 0
    at_least_one = -jnp.expm1(jnp.where(seen, counts, 1.0) * jnp.log1p(-prob))
    return seen & (uniforms < at_least_one)
