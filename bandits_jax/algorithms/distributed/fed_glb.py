"""FedGLB-UCB: synchronous federated generalised linear bandit with a sigmoid link (Li & Wang 2022).

Baseline B6 of the asynchronous-environment study. The link mu(z) = 1 / (1 + exp(-z)) is stated
in the paper; the rest (local online Newton steps, the confidence-set centre, the trigger, the
accelerated-gradient synchronisation) is RECALLED from the paper and the authors' code (spec §4, B6).

    V_i = A_g + dA_i + (lam / c_mu) I,   theta_hat_i = V_i^{-1} (A_g theta_g + db_i),
    score = x^T theta_hat_i + alpha sqrt(x^T V_i^{-1} x)   (ties to the largest `tie_noise`),
with db_i = sum x z_s, z_s = x_s^T theta_{i,s}. The active client's local step on (x, y):
    theta_i <- theta_i - (1 / c_mu) V_i^{-1} (mu(x^T theta_i) - y) x.
Trigger: n_i * (log det V_i - log det V_g) >= threshold, V_g = A_g + (lam / c_mu) I.

Synchronisation (all N clients): A_g += sum_j dA_j; distributed Nesterov accelerated gradient
descent on F(theta) = sum_s [log(1 + exp(x_s^T theta)) - y_s x_s^T theta] + lam |theta|^2 / 2 from
theta_g, step 1/L, stopping when |grad F| <= sqrt(2 lam / n) or after `max_iters` gradients; the
server broadcasts (A_g, theta_g, n). Communication, k gradients:
    up = N (d^2 + 1) + k N d,   down = k N d + N (d^2 + d + 1),   rounds = 1.

State: A_g [d, d], theta_g [d]; per client dA [N, d, d], db [N, d], theta [N, d], loc_n [N]; the
pooled history hist_X [C, d], hist_y [C] (C = t_end), which the gradient of F sums over.
Errors: full history, more than one active client (`Algorithm.errors`).

Walk-through: docs/algorithms/fed_glb.md.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels.linalg import pad_rows
from bandits_jax.kernels.ridge import ridge_logdet, ridge_scores

from ...core import Algorithm, EnvSpec, Sizes, Sizing, flat_uniform, float_dtype, report
from ..base import (ERR_MULTI_ACTIVE, MULTI_ACTIVE_MESSAGE, active_index, argmax_random_ties, batch_cond,
                   check_capacity, multi_active_error, one_hot_action, signed_params)

NAME = "FedGLB-UCB"
ERR_HISTORY = 2
ERRORS = {
    ERR_HISTORY: "the history outgrew its rows; give init rows for the whole horizon",
    ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE,
}
SIGNS = {"lam": "positive", "alpha": "nonnegative", "c_mu": "positive", "threshold": "nonnegative"}
SYNC_GATHER = 1  # batch_cond: the runs that synchronise run the loop, one at a time (module docstring)


class FedGLBConfig(NamedTuple):
    """Static options: max_iters, the most gradient rounds of a synchronisation."""

    max_iters: int


class FedGLBState(NamedTuple):
    """State of FedGLB-UCB (C history rows, N clients, d features).

    hist_X [C, d], hist_y [C], hist_n: all observations in arrival order.
    A_g [d, d], theta_g [d]: the statistics of the last synchronisation.
    dA [N, d, d], db [N, d], loc_n [N] int32: each client's new data since then.
    theta [N, d]: each client's online-Newton iterate.
    num_syncs: int32.
    """

    hist_X: jax.Array
    hist_y: jax.Array
    hist_n: jax.Array
    A_g: jax.Array
    theta_g: jax.Array
    dA: jax.Array
    db: jax.Array
    loc_n: jax.Array
    theta: jax.Array
    num_syncs: jax.Array


# ------------------------------------------------------------------------------ init
def init(config: FedGLBConfig, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> FedGLBState:
    """Empty history, zero statistics and iterates."""
    del config, key, params, public
    dtype = float_dtype()
    C, N, d = int(sizes.rows), spec.num_agents, spec.dim
    return FedGLBState(
        hist_X=jnp.zeros((C, d), dtype), hist_y=jnp.zeros((C,), dtype), hist_n=jnp.zeros((), jnp.int32),
        A_g=jnp.zeros((d, d), dtype), theta_g=jnp.zeros((d,), dtype),
        dA=jnp.zeros((N, d, d), dtype), db=jnp.zeros((N, d), dtype), loc_n=jnp.zeros((N,), jnp.int32),
        theta=jnp.zeros((N, d), dtype), num_syncs=jnp.zeros((), jnp.int32),
    )


# ------------------------------------------------------------------------------ select
def select(config: FedGLBConfig, params, state: FedGLBState, step, key):
    """UCB arms of every client, or of the active client only under step.one_active."""
    del config
    dtype = state.A_g.dtype
    contexts = step.contexts.astype(dtype)
    N, K = contexts.shape[:2]
    centre_b = state.A_g @ state.theta_g
    noise = flat_uniform(key, (N, K), dtype)

    def one(dA, db, X):
        return ridge_scores(state.A_g + dA, centre_b + db, reg(params), params["alpha"], X)

    if step.one_active:
        i = active_index(step.active)
        mean, var, scores = one(state.dA[i], state.db[i], contexts[i])
        return one_hot_action(i, argmax_random_ties(scores, noise[i]), N), {"client": i, "mean": mean, "var": var}
    mean, var, scores = jax.vmap(one)(state.dA, state.db, contexts)
    return argmax_random_ties(scores, noise), {"mean": mean, "var": var}


# ------------------------------------------------------------------------------ update
def update(config: FedGLBConfig, params, state: FedGLBState, step, actions, rewards, aux, key):
    """Client i = argmax(active) takes its online Newton step; all clients synchronise
    (`synchronise`) when n_i (log det V_i - log det V_g) >= threshold."""
    del aux, key
    dtype = state.A_g.dtype
    i = active_index(step.active)
    x, y = step.contexts.astype(dtype)[i, actions[i]], jnp.asarray(rewards[i], dtype)
    state, ok, dA_i, history_full = newton_step(params, state, x, y, i, jnp.any(step.active))
    ratio = ridge_logdet(dA_i + state.A_g, reg(params)) - ridge_logdet(state.A_g, reg(params))
    trigger = ok & (state.loc_n[i].astype(dtype) * ratio >= params["threshold"])
    state, up, down, iters, converged = batch_cond(trigger, partial(synchronise, config), quiet, (params, state),
                                                   gather=SYNC_GATHER)
    errors = jnp.where(history_full, ERR_HISTORY, 0) | multi_active_error(step.active)
    return state, report(dtype, up, down, trigger, errors, trigger=trigger, logdet_ratio=ratio, agd_iters=iters,
                         agd_converged=converged)


def newton_step(params, state: FedGLBState, x, y, i, any_active):
    """Client i's point (x, y): into the history, dA_i, db_i, and its online Newton step.

    Returns (state, ok: the point was added, dA_i with x, history_full: it found no room)."""
    dtype = state.A_g.dtype
    C, d = state.hist_X.shape
    th = state.theta[i]
    z = x @ th
    dA_i = state.dA[i] + jnp.outer(x, x)
    V = state.A_g + dA_i + reg(params) * jnp.eye(d, dtype=dtype)
    th_new = th - jnp.linalg.solve(V, (sigmoid(z) - y) * x) / params["c_mu"]
    room = state.hist_n < C
    ok = any_active & room
    row = jnp.where(ok, state.hist_n, C)  # an out-of-range row writes nothing
    state = state._replace(
        hist_X=state.hist_X.at[row].set(x, mode="drop"), hist_y=state.hist_y.at[row].set(y, mode="drop"),
        hist_n=state.hist_n + ok.astype(jnp.int32),
        dA=jnp.where(ok, state.dA.at[i].set(dA_i), state.dA),
        db=jnp.where(ok, state.db.at[i].add(z * x), state.db),
        loc_n=state.loc_n.at[i].add(ok.astype(jnp.int32)),
        theta=jnp.where(ok, state.theta.at[i].set(th_new), state.theta),
    )
    return state, ok, dA_i, any_active & ~room


def synchronise(config: FedGLBConfig, operand):
    """Steps 1-3 of the module docstring on operand (params, state).
    Returns (state, up, down, gradients k, converged)."""
    params, state = operand
    dtype = state.A_g.dtype
    C, d = state.hist_X.shape
    N = state.dA.shape[0]
    A = state.A_g + jnp.sum(state.dA, axis=0)
    k, theta, done = accelerated_gradient(config, params["lam"], A, state.hist_X, state.hist_y, state.hist_n,
                                          state.theta_g)
    kf = k.astype(dtype)
    up = N * (d * d + 1) + kf * N * d
    down = kf * N * d + N * (d * d + d + 1)
    state = state._replace(
        A_g=A, theta_g=theta, dA=jnp.zeros_like(state.dA), db=jnp.zeros_like(state.db),
        loc_n=jnp.zeros_like(state.loc_n), theta=jnp.broadcast_to(theta, state.theta.shape),
        num_syncs=state.num_syncs + 1,
    )
    return state, up, down, k, done


def quiet(operand):
    """The no-sync branch: the state unchanged, no communication, no gradient."""
    _, state = operand
    zero = jnp.zeros((), state.A_g.dtype)
    return state, zero, zero, jnp.zeros((), jnp.int32), jnp.ones((), bool)


def accelerated_gradient(config: FedGLBConfig, lam, A, hist_X, hist_y, hist_n, theta0):
    """Nesterov's accelerated gradient on F over the first hist_n rows, from theta0 (step 2 of the
    module docstring). Returns (gradients k, theta_g, converged)."""
    dtype = A.dtype
    C = hist_X.shape[0]
    n = hist_n.astype(dtype)
    valid = jnp.arange(C) < hist_n
    X = jnp.where(valid[:, None], hist_X, 0.0)
    Y = jnp.where(valid, hist_y, 0.0)

    def grad(th):
        resid = jnp.where(valid, sigmoid(X @ th) - Y, 0.0)
        return X.T @ resid + lam * th

    L = 0.25 * jnp.linalg.eigvalsh(A)[-1] + lam
    kappa = L / lam
    beta = (jnp.sqrt(kappa) - 1.0) / (jnp.sqrt(kappa) + 1.0)
    tol = jnp.sqrt(2.0 * lam / n)  # |grad F| = n |grad (F / n)| <= n sqrt(2 lam / n^3) (module docstring)

    def cond(c):
        k, _, _, _, done = c
        return (~done) & (k < config.max_iters)

    def body(c):
        k, th, th_prev, _, _ = c
        yk = th + beta * (th - th_prev)
        g = grad(yk)
        done = jnp.linalg.norm(g) <= tol
        nxt = jnp.where(done, yk, yk - g / L)
        return k + 1, nxt, th, nxt, done

    k, _, _, theta, done = lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), theta0, theta0, theta0,
                                                       jnp.zeros((), bool)))
    return k, theta, done


# ------------------------------------------------------------------------------ sizes
def rows(spec: EnvSpec, t_end: int) -> int:
    """History rows that steps [0, t_end) need: one per step."""
    return max(1, int(t_end))


def resize(params, state: FedGLBState, sizes: Sizes) -> FedGLBState:
    """Pad the history to sizes.rows rows (no number changes)."""
    del params
    return state._replace(hist_X=pad_rows(state.hist_X, int(sizes.rows)),
                          hist_y=pad_rows(state.hist_y, int(sizes.rows)))


# ------------------------------------------------------------------------------ helpers
def sigmoid(z):
    """mu(z) = 1 / (1 + exp(-z)), elementwise."""
    return jax.nn.sigmoid(z)


def reg(params):
    """The V-regulariser lam / c_mu."""
    return params["lam"] / params["c_mu"]


# ------------------------------------------------------------------------------ factory
def fed_glb_ucb(lam=1.0, alpha=1.0, c_mu=0.2, threshold=1.0, *, max_iters: int = 10000) -> Algorithm:
    """FedGLB-UCB: federated logistic-bandit UCB with gradient rounds at each synchronisation.

    params: lam > 0, alpha >= 0, c_mu > 0, threshold >= 0 (module docstring).

    Static: max_iters (gradient rounds per synchronisation, at most).
    """
    config = FedGLBConfig(check_capacity(NAME, "max_iters", max_iters))
    given = dict(lam=lam, alpha=alpha, c_mu=c_mu, threshold=threshold)
    return Algorithm(NAME, signed_params(NAME, SIGNS, given), partial(init, config), partial(select, config),
                     partial(update, config), Sizing(rows, resize), dict(ERRORS),
                     "FedGLB-UCB (sigmoid link), local online Newton steps, distributed accelerated gradient at syncs",
                     one_active=True)
