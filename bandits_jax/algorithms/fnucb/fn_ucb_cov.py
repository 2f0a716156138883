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
`base.batch_cond`s. The covariance, the trigger and the variant are pieces (`Covariance`, `Trigger`,
`Variant`), chosen once from their option strings (`tracker`) and read from `config.tracker`.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

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


class Covariance(NamedTuple):
    """How the matrices are kept ("full": inverses by rank-one updates; "diag": diagonals, elementwise):
    init(N, p, lam, dtype) -> Covariances; observe(trigger, covs, phi) -> (covs, pending);
    measure(trigger, covs, lam) -> [N]; apply_pending(covs, pending); synchronise(trigger, covs, lam)
    (Vinv_sync already set); ucb_a(minmax, params, covs, b_sync, b_new, phi) -> [N, K];
    local_inverses(covs) -> [N, P]; matrix_size(p, triangular) -> the scalars of one matrix a message holds.
    """

    init: Callable
    observe: Callable
    measure: Callable
    apply_pending: Callable
    synchronise: Callable
    ucb_a: Callable
    local_inverses: Callable
    matrix_size: Callable


class Trigger(NamedTuple):
    """How the trigger measures log det V_i under full covariance, exactly [P] or by the diagonal
    surrogate [C]: observed(logdet [N], q [N]) after a step, measure(covs, lam) -> [N], and
    at_round(exact log det V_last, lam, W_sync) -> log det V_last."""

    observed: Callable
    measure: Callable
    at_round: Callable


class Variant(NamedTuple):
    """What the server broadcasts of the local inverses, their mean ("less") or all N ("full"):
    start(Vinv_sync of one agent, N), combine(inverses [N, P]), bonus(Vinv_sync, phi [N, K, p]) and
    broadcast(m, p, N) -> the broadcast's scalars, m those of one matrix (`message_sizes`)."""

    start: Callable
    combine: Callable
    bonus: Callable
    broadcast: Callable


class Tracker(NamedTuple):
    """The three pieces, chosen once from the option strings (`tracker`)."""

    covariance: Covariance
    trigger: Trigger
    variant: Variant


def tracker(covariance: str, trigger: str, variant: str) -> Tracker:
    """The pieces of the option strings (validated by the caller)."""
    return Tracker(COVARIANCE[covariance], TRIGGER[trigger], VARIANT[variant])


# ------------------------------------------------------------------------------ the API (config.tracker)
def init(config, num_agents: int, p: int, lam, dtype) -> Covariances:
    """Every V = lam I, W = 0, no rows; the tracker's pieces (`config.tracker`) give their shapes."""
    tracker = config.tracker
    covs = tracker.covariance.init(num_agents, p, lam, dtype)
    return covs._replace(vinv_sync=tracker.variant.start(covs.vinv_sync, num_agents))


def observe(config, covs: Covariances, phi):
    """The statistics after the agents observe features phi [N, p] (zero rows: inactive agents).

    Returns (covs, pending): under full covariance V_i^{-1} is not yet updated (a round would
    reset it); pending = (v = V_i^{-1} phi_i [N, p], q = phi_i' v_i [N]) is what `apply_pending`
    needs. Diagonal: pending = ().
    """
    return config.tracker.covariance.observe(config.tracker.trigger, covs, phi)


def trigger_logdet(config, covs: Covariances, lam):
    """log det V_i [N] as the trigger measures it (after `observe`)."""
    return config.tracker.covariance.measure(config.tracker.trigger, covs, lam)


def apply_pending(config, covs: Covariances, pending) -> Covariances:
    """No round: V_i^{-1} -= v v' / (1 + q) (from V_last^{-1} when synced). Diagonal: nothing."""
    return config.tracker.covariance.apply_pending(covs, pending)


def synchronise(config, covs: Covariances, lam, gate) -> Covariances:
    """The round's part: W_sync += sum_i W_new_i, W_new_i = 0, V_last = lam I + W_sync (and its
    log det), every V_i = V_last; Vinv_sync = the agents' local inverses (their mean for "less")
    where gate holds (false only in the authors' code's non-training rounds, Q2), else unchanged."""
    tracker = config.tracker
    vinv_new = tracker.variant.combine(tracker.covariance.local_inverses(covs))
    covs = covs._replace(vinv_sync=jnp.where(gate, vinv_new, covs.vinv_sync))
    return tracker.covariance.synchronise(tracker.trigger, covs, lam)


def ucb_a(config, params, covs: Covariances, b_sync, b_new, phi):
    """UCB_a [N, K] = phi_k . theta_i + nu_tkn sqrt(lam) ||phi_k||_{V_i^{-1}}, theta_i = V_i^{-1}
    (B_sync + B_new_i), for features phi [N, K, p]; right after a round (full covariance) one
    V_last^{-1} serves every agent. minmax_mean (diagonal only): footnote 4's rescaling of the mean."""
    return config.tracker.covariance.ucb_a(config.minmax_mean, params, covs, b_sync, b_new, phi)


def bonus_b(config, covs: Covariances, phi):
    """UCB_b's width [N, K] before nu_tk sqrt(lam): ||phi_k||_{Vinv_sync} ("less") or the mean of
    the N norms ||phi_k||_{(V^local_j)^{-1}} ("full")."""
    return config.tracker.variant.bonus(covs.vinv_sync, phi)


def local_inverses(config, covs: Covariances):
    """[N, P] (V^local_i)^{-1} (their diagonals for covariance="diag")."""
    return config.tracker.covariance.local_inverses(covs)


# ------------------------------------------------------------------------------ piece: full covariance
def full_init(N: int, p: int, lam, dtype) -> Covariances:
    """V^{-1} = I / lam for every matrix kept; vinv_sync [p, p] (the variant spreads it)."""
    eye = jnp.eye(p, dtype=dtype) / lam  # V_i^{-1}, V_last^{-1}, Vinv_sync
    logdet0 = (p * jnp.log(lam)).astype(dtype)
    return Covariances(
        cov=per_agent(eye, N), local=per_agent(eye, N), w_new=jnp.zeros((p, p), dtype),
        w_new_diag=jnp.zeros((N, p), dtype), logdet=jnp.full((N,), logdet0, dtype), vinv_last=eye,
        rows=jnp.zeros((row_capacity(N, p), p), dtype), nrows=jnp.zeros((), jnp.int32), synced=jnp.asarray(True),
        w_sync=jnp.zeros((p, p), dtype), logdet_last=logdet0, vinv_sync=eye)


def full_observe(trigger: "Trigger", covs: Covariances, phi):
    """Sherman-Morrison on (V^local_i)^{-1}; V_i^{-1}'s update deferred (`full_apply_pending`)."""
    N = phi.shape[0]
    v = batch_cond(~covs.synced, _own_products, _last_products, (covs.cov, covs.vinv_last, phi))
    q = jnp.sum(phi * v, axis=-1)
    R = covs.rows.shape[0]
    fits = covs.nrows + N <= R
    start = (jnp.minimum(covs.nrows, R - N), jnp.zeros((), covs.nrows.dtype))
    rows = jnp.where(fits, lax.dynamic_update_slice(covs.rows, phi, start), covs.rows)
    covs = covs._replace(w_new=covs.w_new + phi.T @ phi, w_new_diag=covs.w_new_diag + phi * phi,
                         local=jax.vmap(sherman_morrison)(covs.local, phi), logdet=trigger.observed(covs.logdet, q),
                         rows=rows, nrows=jnp.where(fits, covs.nrows + N, R + 1))
    return covs, (v, q)


def full_measure(trigger: "Trigger", covs: Covariances, lam):
    return trigger.measure(covs, lam)


def full_apply_pending(covs: Covariances, pending) -> Covariances:
    v, q = pending
    base = jnp.where(covs.synced, covs.vinv_last[None], covs.cov)
    return covs._replace(cov=base - (v[:, :, None] * v[:, None, :]) / (1.0 + q)[:, None, None],
                         synced=jnp.asarray(False))


def full_synchronise(trigger: "Trigger", covs: Covariances, lam) -> Covariances:
    w_sync = covs.w_sync + covs.w_new
    vinv_last, ld_exact = last_inverse(covs, lam, w_sync)
    logdet_last = trigger.at_round(ld_exact, lam, w_sync)
    N = covs.logdet.shape[0]
    return covs._replace(w_new=jnp.zeros_like(covs.w_new), w_sync=w_sync, synced=jnp.asarray(True),
                         vinv_last=vinv_last, logdet_last=logdet_last, logdet=jnp.full((N,), logdet_last),
                         w_new_diag=jnp.zeros_like(covs.w_new_diag), rows=jnp.zeros_like(covs.rows),
                         nrows=jnp.zeros_like(covs.nrows))


def full_ucb_a(minmax: bool, params, covs: Covariances, b_sync, b_new, phi):
    operand = (params, covs.cov, covs.vinv_last, b_sync, b_new, phi)
    one = partial(_ucb_a1, mean_and_width_inv, minmax)
    return batch_cond(~covs.synced, partial(_ucb_a_own, one), partial(_ucb_a_last, one), operand)


def full_local_inverses(covs: Covariances):
    return covs.local


def full_matrix_size(p: int, triangular: bool) -> int:
    """p^2, or p (p + 1) / 2 for a symmetric matrix sent as its triangle."""
    return p * (p + 1) // 2 if triangular else p * p


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


# ------------------------------------------------------------------------------ piece: diagonal covariance
def diag_init(N: int, p: int, lam, dtype) -> Covariances:
    """diag(V) = lam for every matrix kept; no rows, no V_last^{-1}; vinv_sync [p]."""
    cov1 = lam * jnp.ones((p,), dtype)  # diag(V_i)
    logdet0 = (p * jnp.log(lam)).astype(dtype)
    return Covariances(
        cov=per_agent(cov1, N), local=per_agent(cov1, N), w_new=jnp.zeros((N, p), dtype),
        w_new_diag=jnp.zeros((N, 0), dtype), logdet=jnp.full((N,), logdet0, dtype), vinv_last=jnp.zeros((1,), dtype),
        rows=jnp.zeros((0, p), dtype), nrows=jnp.zeros((), jnp.int32), synced=jnp.asarray(True),
        w_sync=jnp.zeros((p,), dtype), logdet_last=logdet0, vinv_sync=jnp.ones((p,), dtype) / lam)


def diag_observe(trigger: "Trigger", covs: Covariances, phi):
    del trigger  # both triggers are the diagonal's log det
    sq = phi * phi
    return covs._replace(cov=covs.cov + sq, w_new=covs.w_new + sq, local=covs.local + sq), ()


def diag_measure(trigger: "Trigger", covs: Covariances, lam):
    del trigger, lam
    return jnp.sum(jnp.log(covs.cov), axis=-1)


def diag_apply_pending(covs: Covariances, pending) -> Covariances:
    del pending
    return covs


def diag_synchronise(trigger: "Trigger", covs: Covariances, lam) -> Covariances:
    del trigger
    N = covs.logdet.shape[0]
    w_sync = covs.w_sync + jnp.sum(covs.w_new, axis=0)
    cov1 = lam + w_sync
    return covs._replace(w_sync=w_sync, w_new=jnp.zeros_like(covs.w_new),
                         cov=jnp.broadcast_to(cov1, (N,) + cov1.shape), logdet_last=jnp.sum(jnp.log(cov1)))


def diag_ucb_a(minmax: bool, params, covs: Covariances, b_sync, b_new, phi):
    one = partial(_ucb_a1, mean_and_width, minmax)
    return _ucb_a_own(one, (params, covs.cov, covs.vinv_last, b_sync, b_new, phi))


def diag_local_inverses(covs: Covariances):
    return 1.0 / covs.local


def diag_matrix_size(p: int, triangular: bool) -> int:
    del triangular
    return p


# ------------------------------------------------------------------------------ pieces: trigger, variant
def exact_observed(logdet, q):
    """log det V_i after a rank-one update (matrix determinant lemma)."""
    return logdet + jnp.log1p(q)


def exact_measure(covs: Covariances, lam):
    del lam
    return covs.logdet


def exact_at_round(ld_exact, lam, w_sync):
    del lam, w_sync
    return ld_exact


def surrogate_observed(logdet, q):
    del q
    return logdet


def surrogate_measure(covs: Covariances, lam):
    return diag_logdet(lam, covs.w_sync, covs.w_new_diag)


def surrogate_at_round(ld_exact, lam, w_sync):
    del ld_exact
    return diag_logdet(lam, w_sync, jnp.zeros((w_sync.shape[0],), w_sync.dtype))


def one_copy(vinv1, num_agents: int):
    del num_agents
    return vinv1


def bonus_less(vinv_sync, phi):
    return jax.vmap(lambda ph: norms(ph, vinv_sync))(phi)


def broadcast_less(m: int, p: int, num_agents: int) -> int:
    """The upload's size: W_sync, the mean inverse, B_sync, theta_sync's norm term (spec §4)."""
    del num_agents
    return 2 * m + 2 * p + 1


def every_agents(inverses):
    return inverses


def bonus_full(vinv_sync, phi):
    return jax.vmap(lambda ph: jnp.mean(jax.vmap(lambda A: norms(ph, A))(vinv_sync), axis=0))(phi)


def broadcast_full(m: int, p: int, num_agents: int) -> int:
    """W_sync and every agent's local inverse, B_sync and the rest (spec §4)."""
    return (num_agents + 1) * m + 2 * p + 1


def message_sizes(tracker: Tracker, p: int, num_agents: int, triangular: bool = False) -> tuple:
    """(one agent's upload, the broadcast) of one round, in scalars (spec §4), m the scalars of one matrix
    (p^2, p (p + 1) / 2 with triangular, or p for diagonals): upload 2 m + 2p + 1; broadcast the same
    ("less") or (N + 1) m + 2p + 1 ("full")."""
    m = tracker.covariance.matrix_size(p, triangular)
    return 2 * m + 2 * p + 1, tracker.variant.broadcast(m, p, num_agents)


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


def _ucb_a1(mean_width, minmax: bool, params, cov, b_sync, b_new, phi):
    """One agent's UCB_a [K] from its V^{-1} (full: `mean_and_width_inv`) or diag(V) (diag: `mean_and_width`)."""
    mean_a, width_a = mean_width(cov, b_sync + b_new, phi)
    if minmax:
        lo, hi = jnp.min(mean_a), jnp.max(mean_a)
        mean_a = jnp.where(hi > lo, (mean_a - lo) / jnp.where(hi > lo, hi - lo, 1.0), 0.0)
    return mean_a + params["nu_tkn"] * jnp.sqrt(params["lam"]) * width_a


def _ucb_a_own(one, operand):  # every agent with its own V_i
    params, cov, _, b_sync, b_new, phi = operand
    return jax.vmap(partial(one, params), in_axes=(0, None, 0, 0))(cov, b_sync, b_new, phi)


def _ucb_a_last(one, operand):  # every agent with V_last
    params, _, vinv_last, b_sync, b_new, phi = operand
    return jax.vmap(partial(one, params, vinv_last, b_sync))(b_new, phi)


def _own_products(operand):
    cov, _, phi = operand
    return jnp.einsum("npq,nq->np", cov, phi)


def _last_products(operand):
    _, vinv_last, phi = operand
    return phi @ vinv_last


def _fresh_inverse(operand):
    lam, w_sync, _ = operand
    return inverse_and_logdet(lam * jnp.eye(w_sync.shape[0], dtype=w_sync.dtype) + w_sync)


def per_agent(a, num_agents: int):
    """a broadcast to a leading agent axis [N, ...]."""
    return jnp.broadcast_to(a, (num_agents,) + a.shape)


def _mean0(a):
    """mean over the leading (agent) axis as a chain of adds (XLA's reduce over a major axis of
    [N, p, p] is many times slower than memory bandwidth on CPU)."""
    total = a[0]
    for i in range(1, a.shape[0]):
        total = total + a[i]
    return total / a.shape[0]


# ------------------------------------------------------------------------------ the pieces by option
COVARIANCE = {
    "full": Covariance(full_init, full_observe, full_measure, full_apply_pending, full_synchronise, full_ucb_a,
                       full_local_inverses, full_matrix_size),
    "diag": Covariance(diag_init, diag_observe, diag_measure, diag_apply_pending, diag_synchronise, diag_ucb_a,
                       diag_local_inverses, diag_matrix_size),
}
TRIGGER = {"exact": Trigger(exact_observed, exact_measure, exact_at_round),
           "diag": Trigger(surrogate_observed, surrogate_measure, surrogate_at_round)}
VARIANT = {"less": Variant(one_copy, _mean0, bonus_less, broadcast_less),
           "full": Variant(per_agent, every_agents, bonus_full, broadcast_full)}
