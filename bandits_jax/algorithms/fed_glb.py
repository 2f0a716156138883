"""FedGLB-UCB: synchronous federated generalised linear bandit with a sigmoid link (Li & Wang 2022).

Baseline B6 of the asynchronous-environment study. The link mu(z) = 1 / (1 + exp(-z)) is stated
in the paper; everything else (the local online Newton steps, the online-to-confidence-set
centre, the trigger, the accelerated-gradient synchronisation and its stopping rule) is RECALLED
from the paper and the authors' public code, not read from them (spec §4, B6). This module
implements this reading; rewards are used as they are, even when not binary.

Statistics (raw contexts, no bias term; V-regulariser lam / c_mu):
    A_g [d, d] = sum x x^T over all data up to the last sync; theta_g [d] the synchronised estimate;
    client i adds its new points: dA_i = sum x x^T, db_i = sum x z_s with z_s = x_s^T theta_{i,s}
    (the prediction of its online iterate before the step), and
        V_i = A_g + dA_i + (lam / c_mu) I,    centre theta_hat_i = V_i^{-1} (A_g theta_g + db_i)
    (ridge regression onto the predicted values, the global data predicted by theta_g).
Score: mean = x^T theta_hat_i, var = x^T V_i^{-1} x, score = mean + alpha sqrt(var); ties
(within 1e-10 (1 + |max|)) go to the largest `tie_noise = jax.random.uniform(select_key, (N, K))`.

Local step of the active client i on (x, y), after adding x to dA_i and x z to db_i (z = x^T theta_i):
    theta_i <- theta_i - (1 / c_mu) V_i^{-1} (mu(x^T theta_i) - y) x      (online Newton step, no projection).
Trigger (as DisLinUCB): n_i * (log det V_i - log det V_g) >= threshold, V_g = A_g + (lam / c_mu) I,
n_i = client i's number of new points.

Synchronisation (ALL N clients, seen or not):
    1. every client uploads dA_j and n_j (d^2 + 1 scalars); A_g <- A_g + sum_j dA_j;
    2. distributed Nesterov accelerated gradient descent on the regularised logistic loss of all
       n data points (a sum, as the clients return summed gradients sum_s (mu(x_s^T theta) - y_s) x_s),
           F(theta) = sum_s [log(1 + exp(x_s^T theta)) - y_s x_s^T theta] + lam |theta|^2 / 2,
       from theta_g, with step 1/L, L = lambda_max(A_g) / 4 + lam, constant momentum
       beta = (sqrt(kappa) - 1) / (sqrt(kappa) + 1), kappa = L / lam:
           y_k = theta_k + beta (theta_k - theta_{k-1}); g_k = grad F(y_k);
           stop with theta_g = y_k if |g_k| <= sqrt(2 lam / n), else theta_{k+1} = y_k - g_k / L.
       The rule is the paper's |grad f| <= sqrt(2 lam / n^3) for the MEAN loss f = F / n, which is
       (lam / n)-strongly convex, so that f(y_k) - min f <= n |grad f|^2 / (2 lam) <= 1 / n^2; on
       the summed gradient g_k = n grad f it reads |g_k| <= n sqrt(2 lam / n^3) = sqrt(2 lam / n).
       after `max_iters` gradients it stops with theta_g = the last theta_{k+1} (diagnostic
       agd_converged is False then). Each gradient costs the server sending y_k and every client
       returning its part of the gradient: d scalars per client each way;
    3. the server broadcasts (A_g, theta_g, n): d^2 + d + 1 scalars per client. All clients set
       theta_i = theta_g and clear dA, db, n.
  Communication: up = N (d^2 + 1) + k N d, down = k N d + N (d^2 + d + 1), rounds = 1 (k gradients).

The raw data stay where they were observed; the simulation keeps them in one arrival-order
buffer (hist_X [C, d], hist_y [C], C = `rows(spec, t_end) = t_end` rows) because the gradient of
F is a sum over clients. Costs: select O(N (d^3 + K d^2)); a sync O(k C d + d^3).

Batching. The sync is a `base.batch_cond` (gather=1) around a `lax.while_loop`: under the
runner's vmap only the runs that synchronise at a step run the loop, one after another, each to
its own convergence (gather=None would run it for the whole batch until its slowest run
converges); a quiet step skips it.

Protocol. With `step.one_active` (the asynchronous problems) select scores client
i = argmax(step.active) only, O(d^3 + K d^2), with row i of the same (N, K) tie noise, so its
action is the one of the all-client select; the other clients' actions are 0 (never used).
aux: the scored clients' mean and var ([K], plus "client", under one_active; [N, K] otherwise;
update does not read it). Update learns from client argmax(step.active) only, in both modes: a
step with more than one active client reports ERR_MULTI_ACTIVE.

Errors (`Algorithm.errors`, per step): a full history buffer, more than one active client.
Diagnostics per step: trigger, logdet_ratio, agd_iters (gradients of a sync, 0 otherwise),
agd_converged.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels.linalg import pad_rows
from bandits_jax.kernels.ridge import ridge_logdet, ridge_scores

from ..core import Algorithm, EnvSpec, Sizes, Sizing, float_dtype, report
from .base import (ERR_MULTI_ACTIVE, MULTI_ACTIVE_MESSAGE, active_index, argmax_random_ties, batch_cond, check_capacity,
                   multi_active_error, one_hot_action, signed_params)

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
    noise = jax.random.uniform(key, (N, K), dtype)

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


def resize(state: FedGLBState, sizes: Sizes) -> FedGLBState:
    """Pad the history to sizes.rows rows (no number changes)."""
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
def fed_glb_ucb(lam=1.0, alpha=1.0, c_mu=0.2, threshold=1.0, *, max_iters: int = 10000, **kw) -> Algorithm:
    """FedGLB-UCB: federated logistic-bandit UCB with gradient rounds at each synchronisation.

    params: lam > 0, alpha >= 0, c_mu > 0, threshold >= 0 (module docstring).

    Static: max_iters (gradient rounds per synchronisation, at most).
    """
    config = FedGLBConfig(check_capacity(NAME, "max_iters", max_iters))
    given = dict(lam=lam, alpha=alpha, c_mu=c_mu, threshold=threshold, **kw)
    return Algorithm(NAME, signed_params(NAME, SIGNS, given), partial(init, config), partial(select, config),
                     partial(update, config), Sizing(rows, resize), dict(ERRORS),
                     "FedGLB-UCB (sigmoid link), local online Newton steps, distributed accelerated gradient at syncs")
