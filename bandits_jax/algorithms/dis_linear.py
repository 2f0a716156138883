"""Linear baselines of the asynchronous environment: DisLinUCB (synchronous) and FedLinUCB (asynchronous).

Both use raw contexts (no bias term) and ridge statistics A = sum x x^T, b = sum y x; with
V = A + lam I and theta = V^{-1} b a client scores

    mean(x) = x^T theta,   var(x) = x^T V^{-1} x,   score = mean + alpha * sqrt(var),

ties (within 1e-10 (1 + |max|)) going to the largest `tie_noise = jax.random.uniform(select_key,
(N, K))`, as in Async-KernelUCB. V is factorised afresh per client and step (O(N d^3), d small).
The internals of both are recalled from the cited papers and the authors' public code, not read
from them (spec §4, B4 and B5); this module implements that reading.

DisLinUCB (Wang et al. 2019; spec B4). Client i holds the global statistics of the last sync
(A_g, b_g) plus its own since then (dA_i, db_i) and scores with A_i = A_g + dA_i, b_i = b_g + db_i.
After its step, with n_i its number of new observations, it triggers a sync of ALL clients when

    n_i * ( log det(A_i + lam I) - log det(A_g + lam I) ) >= threshold.

At a sync every client uploads (dA_j, db_j, n_j) and the server broadcasts (A_g, b_g, n):
up = down = N (d^2 + d + 1) scalars (the authors' code's count), rounds = 1. Several active
clients at a step are allowed (each adds to its own buffer; any trigger syncs everyone), except
with one_active=True (below), where more than one sets the sticky error bit and turns
comm_up / comm_down into NaN, as FedLinUCB does.

FedLinUCB (He et al. 2022; spec B5). Client i scores with the statistics it last DOWNLOADED
(Phi_i, b_i) only, and buffers (dPhi_i, db_i). After its step, if

    log det(lam I + Phi_i + dPhi_i) - log det(lam I + Phi_i) > log(1 + alpha_c)

it uploads its buffers (d^2 + d), the server adds them to its statistics, and the client downloads
the server's statistics (d^2 + d) and clears its buffers: up = down = d^2 + d, rounds = 1. Only
the active client communicates; exactly one active client per step is required (more sets the
sticky error bit, as in Async-KernelUCB, and turns comm_up/comm_down into NaN).

One active client (static `one_active=True` of both, the asynchronous protocol): the algorithm
`sees_active` and `select(state, contexts, key, active)` scores client i = argmax(active) only,
O(d^3 + K d^2) instead of O(N (d^3 + K d^2)), with row i of the same (N, K) tie noise, so
client i's action is the one of the all-client select; the other clients' actions are 0 (never
used) and the select info holds client i's quantities ([K]) and "client": i.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..core import Algorithm, EnvSpec, check_hparams, traced_hparams
from .async_kernel import argmax_random_ties
from .base import active_index, check_one_active, one_hot_action
from .linear import _float_dtype

ERR_MULTI_ACTIVE = 4


# ============================================================================ shared pieces
def ridge_scores(A, b, lam, alpha, contexts):
    """(mean[K], var[K], scores[K]) of ridge statistics A[d, d], b[d] at contexts[K, d]."""
    d = A.shape[-1]
    L = jnp.linalg.cholesky(0.5 * (A + A.T) + lam * jnp.eye(d, dtype=A.dtype))
    W = jax.scipy.linalg.solve_triangular(L, contexts.T, lower=True)  # [d, K]
    w = jax.scipy.linalg.solve_triangular(L, b, lower=True)
    mean = W.T @ w
    var = jnp.sum(W * W, axis=0)
    return mean, var, mean + alpha * jnp.sqrt(var)


def ridge_logdet(A, lam):
    """log det(A + lam I) for a symmetric PSD A[d, d]."""
    d = A.shape[-1]
    L = jnp.linalg.cholesky(0.5 * (A + A.T) + lam * jnp.eye(d, dtype=A.dtype))
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))


def _chosen(contexts, actions):
    return jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0, :]


def _select(stats_fn, client_stats_fn, one_active: bool):
    """select(state, contexts, key) scoring client i with stats_fn(state) -> (A[N, d, d], b[N, d]);
    with one_active, select(state, contexts, key, active) scoring only client i = argmax(active)
    with client_stats_fn(state, i) -> (A[d, d], b[d]) and row i of the same (N, K) tie noise."""

    def select(state, contexts, key):
        contexts = contexts.astype(state.b_g.dtype)
        A, b = stats_fn(state)
        mean, var, scores = jax.vmap(ridge_scores, in_axes=(0, 0, None, None, 0))(
            A, b, state.hp["lam"], state.hp["alpha"], contexts)
        noise = jax.random.uniform(key, scores.shape, scores.dtype)
        return argmax_random_ties(scores, noise), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def select_one(state, contexts, key, active):
        contexts = contexts.astype(state.b_g.dtype)
        N, K = contexts.shape[:2]
        i = active_index(active)
        A, b = client_stats_fn(state, i)
        mean, var, scores = ridge_scores(A, b, state.hp["lam"], state.hp["alpha"], contexts[i])
        noise = jax.random.uniform(key, (N, K), scores.dtype)[i]
        action = argmax_random_ties(scores, noise)
        return one_hot_action(i, action, N), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise,
                                              "client": i}

    return select_one if one_active else select


# ============================================================================ DisLinUCB
class DisLinState(NamedTuple):
    """State of DisLinUCB.

    hp: dict (lam, alpha, threshold). A_g [d, d], b_g [d]: global statistics of the last sync.
    dA [N, d, d], db [N, d], n_loc [N]: each client's statistics since the last sync.
    num_syncs: int32. error: int32 sticky bits (only set with one_active=True).
    """

    hp: dict
    A_g: jax.Array
    b_g: jax.Array
    dA: jax.Array
    db: jax.Array
    n_loc: jax.Array
    num_syncs: jax.Array
    error: jax.Array


def dis_lin_ucb(lam=1.0, alpha=1.0, threshold=1.0, *, one_active: bool = False, **kw) -> Algorithm:
    """DisLinUCB (module docstring). hparams: lam > 0, alpha >= 0, threshold >= 0.

    The spec's default threshold is T / (N d ln(N T)) (the authors' code convention).
    Static one_active: score only the active client (module docstring).
    """
    name = "DisLinUCB"
    check_one_active(name, one_active)
    defaults = {"lam": 1.0, "alpha": 1.0, "threshold": 1.0}
    hp0 = check_hparams(name, defaults, dict(lam=lam, alpha=alpha, threshold=threshold, **kw),
                        positive=("lam",), nonnegative=("alpha", "threshold"))

    def init(key, spec: EnvSpec, hparams, cap=None):
        del key, cap
        dtype = _float_dtype()
        hp = traced_hparams(hp0, hparams, dtype)
        N, d = spec.num_agents, spec.dim
        return DisLinState(hp, jnp.zeros((d, d), dtype), jnp.zeros((d,), dtype), jnp.zeros((N, d, d), dtype),
                           jnp.zeros((N, d), dtype), jnp.zeros((N,), jnp.int32), jnp.zeros((), jnp.int32),
                           jnp.zeros((), jnp.int32))

    select = _select(lambda s: (s.A_g[None] + s.dA, s.b_g[None] + s.db),
                     lambda s, i: (s.A_g + s.dA[i], s.b_g + s.db[i]), one_active)

    def update(state: DisLinState, contexts, actions, rewards, active, key):
        del key
        dtype = state.b_g.dtype
        N, _, d = contexts.shape
        x = _chosen(contexts.astype(dtype), actions)
        act = active.astype(dtype)
        dA = state.dA + act[:, None, None] * jnp.einsum("ni,nj->nij", x, x)
        db = state.db + (act * rewards.astype(dtype))[:, None] * x
        n_loc = state.n_loc + active.astype(jnp.int32)
        lam = state.hp["lam"]
        ratio = jax.vmap(lambda a: ridge_logdet(state.A_g + a, lam))(dA) - ridge_logdet(state.A_g, lam)
        trigger = jnp.any(active & (n_loc.astype(dtype) * ratio >= state.hp["threshold"]))
        error = state.error
        if one_active:  # the actions of a second active client were never scored
            error = error | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0)
        state = DisLinState(
            state.hp,
            jnp.where(trigger, state.A_g + dA.sum(0), state.A_g),
            jnp.where(trigger, state.b_g + db.sum(0), state.b_g),
            jnp.where(trigger, 0.0, dA), jnp.where(trigger, 0.0, db), jnp.where(trigger, 0, n_loc),
            state.num_syncs + trigger.astype(jnp.int32), error,
        )
        msg = jnp.where(trigger, N * (d * d + d + 1), 0).astype(dtype)
        info = {"comm_up": msg, "comm_down": msg, "rounds": trigger.astype(dtype), "trigger": trigger,
                "logdet_ratio": ratio}
        if one_active:
            bad = jnp.where(error != 0, jnp.nan, 0.0).astype(dtype)
            info = {**info, "comm_up": msg + bad, "comm_down": msg + bad, "error": error}
        return state, info

    return Algorithm(name, dict(hp0), init, select, update,
                     description="DisLinUCB, event-triggered synchronisation of all clients' ridge statistics",
                     sees_active=one_active)


# ============================================================================ FedLinUCB
class FedLinState(NamedTuple):
    """State of FedLinUCB.

    hp: dict (lam, alpha, alpha_c). A_g [d, d], b_g [d]: the server's statistics.
    A_dl [N, d, d], b_dl [N, d]: what each client last downloaded. dA [N, d, d], db [N, d]: its
    upload buffers. error: int32 sticky bits.
    """

    hp: dict
    A_g: jax.Array
    b_g: jax.Array
    A_dl: jax.Array
    b_dl: jax.Array
    dA: jax.Array
    db: jax.Array
    error: jax.Array


def fed_lin_ucb(lam=1.0, alpha=1.0, alpha_c=1e-2, *, one_active: bool = False, **kw) -> Algorithm:
    """FedLinUCB (module docstring). hparams: lam > 0, alpha >= 0, alpha_c >= 0 (theory: 1/N^2).

    Static one_active: score only the active client (module docstring).
    """
    name = "FedLinUCB"
    check_one_active(name, one_active)
    defaults = {"lam": 1.0, "alpha": 1.0, "alpha_c": 1e-2}
    hp0 = check_hparams(name, defaults, dict(lam=lam, alpha=alpha, alpha_c=alpha_c, **kw),
                        positive=("lam",), nonnegative=("alpha", "alpha_c"))

    def init(key, spec: EnvSpec, hparams, cap=None):
        del key, cap
        dtype = _float_dtype()
        hp = traced_hparams(hp0, hparams, dtype)
        N, d = spec.num_agents, spec.dim
        zA, zb = jnp.zeros((N, d, d), dtype), jnp.zeros((N, d), dtype)
        return FedLinState(hp, jnp.zeros((d, d), dtype), jnp.zeros((d,), dtype), zA, zb, zA, zb,
                           jnp.zeros((), jnp.int32))

    select = _select(lambda s: (s.A_dl, s.b_dl), lambda s, i: (s.A_dl[i], s.b_dl[i]), one_active)

    def update(state: FedLinState, contexts, actions, rewards, active, key):
        del key
        dtype = state.b_g.dtype
        N, _, d = contexts.shape
        any_active = jnp.any(active)
        i = jnp.argmax(active)
        x = contexts[i, actions[i]].astype(dtype)
        on = any_active.astype(dtype)
        dA_i = state.dA[i] + on * jnp.outer(x, x)
        db_i = state.db[i] + on * jnp.asarray(rewards[i], dtype) * x
        lam = state.hp["lam"]
        ratio = ridge_logdet(state.A_dl[i] + dA_i, lam) - ridge_logdet(state.A_dl[i], lam)
        trigger = any_active & (ratio > jnp.log1p(state.hp["alpha_c"]))
        A_g = jnp.where(trigger, state.A_g + dA_i, state.A_g)
        b_g = jnp.where(trigger, state.b_g + db_i, state.b_g)
        error = state.error | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0)
        state = FedLinState(
            state.hp, A_g, b_g,
            state.A_dl.at[i].set(jnp.where(trigger, A_g, state.A_dl[i])),
            state.b_dl.at[i].set(jnp.where(trigger, b_g, state.b_dl[i])),
            state.dA.at[i].set(jnp.where(trigger, 0.0, dA_i)),
            state.db.at[i].set(jnp.where(trigger, 0.0, db_i)),
            error,
        )
        bad = jnp.where(error != 0, jnp.nan, 0.0).astype(dtype)
        msg = jnp.where(trigger, d * d + d, 0).astype(dtype)
        info = {"comm_up": msg + bad, "comm_down": msg + bad, "rounds": trigger.astype(dtype),
                "trigger": trigger, "logdet_ratio": ratio, "error": error}
        return state, info

    return Algorithm(name, dict(hp0), init, select, update,
                     description="FedLinUCB, asynchronous det-ratio-triggered upload/download of the active client",
                     sees_active=one_active)
