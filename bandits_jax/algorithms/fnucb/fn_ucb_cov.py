"""FN-UCB's covariance tracker and communication trigger (the linear half of `fn_ucb`).

For N agents over features phi [p] it keeps V_i = lam I + W_sync + W_new_i (UCB_a's matrix),
V^local_i = lam I + every phi agent i observed (never reset; UCB_b's matrices), the synchronised
W_sync and V_last = lam I + W_sync, and the log-determinants the trigger compares:

    trigger_i = (s - t_last) * (log det V_i - log det V_last)

with the true log det (trigger="exact", [P]) or the authors' diagonal surrogate sum_j log
diag(V_i)_j (trigger="diag", [C]).

covariance="full": every matrix is kept as an INVERSE so that UCB_a is a matrix product (XLA's
triangular solves are slow on CPU): V_i^{-1} and (V^local_i)^{-1} by one Sherman-Morrison update
a step; log det V_i by log det V + log(1 + phi' V^{-1} phi); V_last^{-1} at a round by rank-N
Woodbury updates (`woodbury_logdet`), one per step since the previous round, with the features
kept in a buffer of R rows (`row_capacity`: 2N for D = 0, a round at every step, up to about
p / 4); only a round after more than R rows (a large D with rare rounds) refactorises
lam I + W_sync afresh, O(p^3). Right after a round every V_i equals V_last and the per-agent
inverses are not rewritten (`synced`): V_i^{-1} = V_last^{-1} is used instead. Nothing O(p^3) runs
per step; a step costs O(N p^2).

covariance="diag" [P, Sec. 3.5]: every p x p matrix is replaced by its diagonal and all
operations are elementwise (theta = B / V, ||phi||^2 = sum phi^2 / V, Vinv_sync = mean 1 / V^local);
then both triggers coincide.

Each step: `observe` (the statistics of the new features), then either `apply_pending` (no round:
the deferred rank-one update of V_i^{-1}) or `synchronise` (a round). Rare expensive branches are
`base.batch_cond`s.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import solve_triangular

from bandits_jax.kernels.linalg import chol_solve, inverse_and_logdet, sherman_morrison, woodbury_logdet

from ..base import batch_cond


class Covariances(NamedTuple):
    """The tracker's state. [N, ...] per agent; P = [p, p] (full) or [p] (diag).

    cov:         [N, p, p] V_i^{-1} (full, stale while `synced`), or [N, p] diag(V_i) (diag).
    local:       [N, P] (V^local_i)^{-1} (full) or diag(V^local_i) (diag).
    w_new:       [p, p] sum_i W_new_i (full) or [N, p] diag(W_new_i) (diag).
    w_new_diag:  [N, p] diag(W_new_i) (full; the diagonal trigger), [N, 0] otherwise.
    logdet:      [N] log det V_i (full covariance, trigger "exact"; constant otherwise).
    vinv_last:   [p, p] V_last^{-1} (full), [1] otherwise.
    rows, nrows: [R, p] the features observed since the last round (full; N rows a step, zero
                 beyond nrows) and their count, R + 1 once they no longer fit ([0, p] for diag).
    synced:      bool, True right after a round (full): every V_i = V_last.
    w_sync:      [P] W_sync.
    logdet_last: log det V_last (exact or diagonal surrogate, as the trigger).
    vinv_sync:   [P] (variant "less") or [N, P] ("full"): the broadcast local inverses.
    """

    cov: jax.Array
    local: jax.Array
    w_new: jax.Array
    w_new_diag: jax.Array
    logdet: jax.Array
    vinv_last: jax.Array
    rows: jax.Array
    nrows: jax.Array
    synced: jax.Array
    w_sync: jax.Array
    logdet_last: jax.Array
    vinv_sync: jax.Array


def init(config, num_agents: int, p: int, lam, dtype) -> Covariances:
    """Every V = lam I, W = 0, no rows; `config` gives covariance and variant."""
    N = num_agents
    per_agent = lambda a: jnp.broadcast_to(a, (N,) + a.shape)  # noqa: E731
    logdet0 = (p * jnp.log(lam)).astype(dtype)
    if config.covariance == "full":
        cov1 = vinv_last = vinv1 = jnp.eye(p, dtype=dtype) / lam  # V_i^{-1}, V_last^{-1}, Vinv_sync
        w_sync, w_new, w_new_diag = jnp.zeros((p, p), dtype), jnp.zeros((p, p), dtype), jnp.zeros((N, p), dtype)
        rows = jnp.zeros((row_capacity(N, p), p), dtype)
    else:
        cov1 = lam * jnp.ones((p,), dtype)  # diag(V_i)
        w_sync, w_new, w_new_diag = jnp.zeros((p,), dtype), jnp.zeros((N, p), dtype), jnp.zeros((N, 0), dtype)
        vinv_last, rows, vinv1 = jnp.zeros((1,), dtype), jnp.zeros((0, p), dtype), jnp.ones((p,), dtype) / lam
    return Covariances(
        cov=per_agent(cov1), local=per_agent(cov1), w_new=w_new, w_new_diag=w_new_diag,
        logdet=jnp.full((N,), logdet0, dtype), vinv_last=vinv_last, rows=rows, nrows=jnp.zeros((), jnp.int32),
        synced=jnp.asarray(True), w_sync=w_sync, logdet_last=logdet0,
        vinv_sync=vinv1 if config.variant == "less" else per_agent(vinv1))


# ------------------------------------------------------------------------------ a step
def observe(config, covs: Covariances, phi):
    """The statistics after the agents observe features phi [N, p] (zero rows: inactive agents).

    Returns (covs, pending): under full covariance V_i^{-1} is not yet updated (a round would
    reset it); pending = (v = V_i^{-1} phi_i [N, p], q = phi_i' v_i [N]) is what `apply_pending`
    needs. Diagonal: pending = ().
    """
    if config.covariance == "diag":
        sq = phi * phi
        return covs._replace(cov=covs.cov + sq, w_new=covs.w_new + sq, local=covs.local + sq), ()
    N = phi.shape[0]
    v = batch_cond(~covs.synced, _own_products, _last_products, (covs.cov, covs.vinv_last, phi))
    q = jnp.sum(phi * v, axis=-1)
    logdet = covs.logdet + jnp.log1p(q) if config.trigger == "exact" else covs.logdet
    R = covs.rows.shape[0]
    fits = covs.nrows + N <= R
    start = (jnp.minimum(covs.nrows, R - N), jnp.zeros((), covs.nrows.dtype))
    rows = jnp.where(fits, lax.dynamic_update_slice(covs.rows, phi, start), covs.rows)
    covs = covs._replace(w_new=covs.w_new + phi.T @ phi, w_new_diag=covs.w_new_diag + phi * phi,
                         local=jax.vmap(sherman_morrison)(covs.local, phi), logdet=logdet, rows=rows,
                         nrows=jnp.where(fits, covs.nrows + N, R + 1))
    return covs, (v, q)


def trigger_logdet(config, covs: Covariances, lam):
    """log det V_i [N] as the trigger measures it (after `observe`)."""
    if config.covariance == "diag":
        return jnp.sum(jnp.log(covs.cov), axis=-1)
    if config.trigger == "exact":
        return covs.logdet
    return diag_logdet(lam, covs.w_sync, covs.w_new_diag)


def apply_pending(config, covs: Covariances, pending) -> Covariances:
    """No round: V_i^{-1} -= v v' / (1 + q) (from V_last^{-1} when synced). Diagonal: nothing."""
    if config.covariance == "diag":
        return covs
    v, q = pending
    base = jnp.where(covs.synced, covs.vinv_last[None], covs.cov)
    return covs._replace(cov=base - (v[:, :, None] * v[:, None, :]) / (1.0 + q)[:, None, None],
                         synced=jnp.asarray(False))


def synchronise(config, covs: Covariances, lam, gate) -> Covariances:
    """The round's part: W_sync += sum_i W_new_i, W_new_i = 0, V_last = lam I + W_sync (and its
    log det), every V_i = V_last; Vinv_sync = the agents' local inverses (their mean for "less")
    where gate holds (false only in the authors' code's non-training rounds, Q2), else unchanged."""
    inverses = local_inverses(config, covs)
    vinv_new = _mean0(inverses) if config.variant == "less" else inverses
    N = covs.logdet.shape[0]
    if config.covariance == "diag":
        w_sync = covs.w_sync + jnp.sum(covs.w_new, axis=0)
        cov1 = lam + w_sync
        return covs._replace(w_sync=w_sync, w_new=jnp.zeros_like(covs.w_new),
                             vinv_sync=jnp.where(gate, vinv_new, covs.vinv_sync),
                             cov=jnp.broadcast_to(cov1, (N,) + cov1.shape), logdet_last=jnp.sum(jnp.log(cov1)))
    w_sync = covs.w_sync + covs.w_new
    vinv_last, ld_exact = last_inverse(covs, lam, w_sync)
    covs = covs._replace(w_new=jnp.zeros_like(covs.w_new), vinv_sync=jnp.where(gate, vinv_new, covs.vinv_sync))
    if config.trigger == "exact":
        logdet_last = ld_exact
    else:
        logdet_last = diag_logdet(lam, w_sync, jnp.zeros((w_sync.shape[0],), w_sync.dtype))
    return covs._replace(w_sync=w_sync, synced=jnp.asarray(True), vinv_last=vinv_last, logdet_last=logdet_last,
                         logdet=jnp.full((N,), logdet_last), w_new_diag=jnp.zeros_like(covs.w_new_diag),
                         rows=jnp.zeros_like(covs.rows), nrows=jnp.zeros_like(covs.nrows))


def last_inverse(covs: Covariances, lam, w_sync):
    """(V_last^{-1}, log det V_last) of lam I + w_sync: rank-N Woodbury updates of the previous
    ones by the rows observed since the last round, or (once they no longer fit) a fresh
    factorisation (rare, O(p^3): a `batch_cond`)."""
    R, p = covs.rows.shape
    N = covs.logdet.shape[0]

    def chunk(j, carry):  # the rows come in blocks of N, one block per step since the last round
        block = lax.dynamic_slice(covs.rows, (j * N, jnp.zeros_like(j)), (N, p))
        return woodbury_logdet(carry[0], block, carry[1])

    n_chunks = jnp.where(covs.nrows > R, 0, covs.nrows // N)
    updated = lax.fori_loop(0, n_chunks, chunk, (covs.vinv_last, covs.logdet_last))
    return batch_cond(covs.nrows > R, _fresh_inverse, lambda op: op[2], (lam, w_sync, updated))


# ------------------------------------------------------------------------------ scores
def ucb_a(config, params, covs: Covariances, b_sync, b_new, phi):
    """UCB_a [N, K] = phi_k . theta_i + nu_tkn sqrt(lam) ||phi_k||_{V_i^{-1}}, theta_i = V_i^{-1}
    (B_sync + B_new_i), for features phi [N, K, p]; right after a round (full covariance) one
    V_last^{-1} serves every agent."""
    operand = (params, covs.cov, covs.vinv_last, b_sync, b_new, phi)
    if config.covariance == "diag":
        return _ucb_a_own(config, operand)
    return batch_cond(~covs.synced, partial(_ucb_a_own, config), partial(_ucb_a_last, config), operand)


def bonus_b(config, covs: Covariances, phi):
    """UCB_b's width [N, K] before nu_tk sqrt(lam): ||phi_k||_{Vinv_sync} ("less") or the mean of
    the N norms ||phi_k||_{(V^local_j)^{-1}} ("full")."""
    if config.variant == "less":
        return jax.vmap(lambda ph: norms(ph, covs.vinv_sync))(phi)
    return jax.vmap(lambda ph: jnp.mean(jax.vmap(lambda A: norms(ph, A))(covs.vinv_sync), axis=0))(phi)


def local_inverses(config, covs: Covariances):
    """[N, P] (V^local_i)^{-1} (their diagonals for covariance="diag")."""
    return covs.local if config.covariance == "full" else 1.0 / covs.local


# ------------------------------------------------------------------------------ helpers
def mean_and_width(chol, b, phi):
    """UCB_a's terms (phi_k . V^{-1} b [K], ||phi_k||_{V^{-1}} [K]) for phi [K, p], b [p].

    chol: [p, p] lower Cholesky factor of V (full covariance) or [p] diag(V) (diagonal).
    """
    if chol.ndim == 2:
        theta = chol_solve(chol, b)
        solved = solve_triangular(chol, phi.T, lower=True)  # [p, K]
        return phi @ theta, jnp.sqrt(jnp.sum(solved * solved, axis=0))
    return phi @ (b / chol), jnp.sqrt(jnp.sum(phi * phi / chol, axis=-1))


def mean_and_width_inv(vinv, b, phi):
    """`mean_and_width` from the inverse V^{-1} [p, p]: one matrix product V^{-1} [b, phi^T], no solve."""
    sol = vinv @ jnp.concatenate([b[:, None], phi.T], axis=1)  # [p, K + 1]
    return phi @ sol[:, 0], jnp.sqrt(jnp.maximum(jnp.sum(phi.T * sol[:, 1:], axis=0), 0.0))


def norms(phi, A):
    """||phi_k||_A [K] for phi [K, p] and A [p, p] (full) or [p] (a diagonal)."""
    if A.ndim == 1:
        q = jnp.sum(phi * phi * A, axis=-1)
    else:
        q = jnp.einsum("kp,pq,kq->k", phi, A, phi)
    return jnp.sqrt(jnp.maximum(q, 0.0))


def diag_logdet(lam, w_sync, w_new_diag):
    """The diagonal surrogate sum_j log(lam + W_sync[j, j] + W_new[j]) (over the last axis)."""
    return jnp.sum(jnp.log(lam + jnp.diagonal(w_sync) + w_new_diag), axis=-1)


def row_capacity(num_agents: int, p: int) -> int:
    """R, the feature rows kept between rounds (N per step): at least 2N, which covers D = 0 (a
    round every step from s = 1), and up to about p / 4 rows, where the rank-N Woodbury updates
    (4 p^2 N flops each) start to cost more than a fresh O(p^3) factorisation and inverse."""
    return num_agents * max(2, p // (4 * num_agents))


def _ucb_a1(config, params, cov, b_sync, b_new, phi):
    """One agent's UCB_a [K] from its V^{-1} (full) or diag(V) (diag)."""
    if config.covariance == "full":
        mean_a, width_a = mean_and_width_inv(cov, b_sync + b_new, phi)
    else:
        mean_a, width_a = mean_and_width(cov, b_sync + b_new, phi)
    if config.minmax_mean:
        lo, hi = jnp.min(mean_a), jnp.max(mean_a)
        mean_a = jnp.where(hi > lo, (mean_a - lo) / jnp.where(hi > lo, hi - lo, 1.0), 0.0)
    return mean_a + params["nu_tkn"] * jnp.sqrt(params["lam"]) * width_a


def _ucb_a_own(config, operand):  # every agent with its own V_i
    params, cov, _, b_sync, b_new, phi = operand
    return jax.vmap(partial(_ucb_a1, config, params), in_axes=(0, None, 0, 0))(cov, b_sync, b_new, phi)


def _ucb_a_last(config, operand):  # every agent with V_last
    params, _, vinv_last, b_sync, b_new, phi = operand
    return jax.vmap(partial(_ucb_a1, config, params, vinv_last, b_sync))(b_new, phi)


def _own_products(operand):
    cov, _, phi = operand
    return jnp.einsum("npq,nq->np", cov, phi)


def _last_products(operand):
    _, vinv_last, phi = operand
    return phi @ vinv_last


def _fresh_inverse(operand):
    lam, w_sync, _ = operand
    return inverse_and_logdet(lam * jnp.eye(w_sync.shape[0], dtype=w_sync.dtype) + w_sync)


def _mean0(a):
    """mean over the leading (agent) axis as a chain of adds (XLA's reduce over a major axis of
    [N, p, p] is many times slower than memory bandwidth on CPU)."""
    total = a[0]
    for i in range(1, a.shape[0]):
        total = total + a[i]
    return total / a.shape[0]
