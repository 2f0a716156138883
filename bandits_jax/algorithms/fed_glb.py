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
           stop with theta_g = y_k if |g_k| <= sqrt(2 lam / n^3), else theta_{k+1} = y_k - g_k / L;
       after `max_iters` gradients it stops with theta_g = the last theta_{k+1} (info["agd_converged"]
       is False then). Each gradient costs the server sending y_k and every client returning its
       part of the gradient: d scalars per client each way;
    3. the server broadcasts (A_g, theta_g, n): d^2 + d + 1 scalars per client. All clients set
       theta_i = theta_g and clear dA, db, n.
  Communication: up = N (d^2 + 1) + k N d, down = k N d + N (d^2 + d + 1), rounds = 1 (k gradients).

The raw data stay where they were observed; the simulation keeps them in one arrival-order
buffer (hist_X [C, d], hist_y [C], C = `capacity(spec, t_end) = t_end` rows) because the
gradient of F is a sum over clients. Costs: select O(N (d^3 + K d^2)); a sync O(k C d + d^3).
Batching: the sync is a `lax.cond` around a `lax.while_loop`; under the runner's vmap both
branches run at every step (and the loop until the slowest run converges), so the default is
batching="map" (one run after another, each with its own scan: a quiet step skips the sync);
"vmap" is an option for small problems.
Errors: a full history buffer or a step with more than one active client sets a sticky bit in
`state.error` and turns comm_up / comm_down into NaN; `check_error` / `check_run` raise.

One active client (static `one_active=True`, the asynchronous protocol): the algorithm
`sees_active` and `select(state, contexts, key, active)` scores client i = argmax(active) only,
O(d^3 + K d^2), with row i of the same (N, K) tie noise, so client i's action is the one of the
all-client select; the other clients' actions are 0 (never used) and the select info holds
client i's quantities ([K]) and "client": i.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from kernels.linalg import pad_rows

from ..core import Algorithm, ConfigError, EnvSpec, check_hparams, traced_hparams
from .async_kernel import argmax_random_ties
from .base import (MULTI_ACTIVE_MESSAGE, active_index, check_batching, check_one_active, describe_error_bits,
                   one_hot_action, raise_on_error_bits, raise_on_nan_comm)
from .dis_linear import ridge_logdet, ridge_scores
from .linear import _float_dtype

ERR_HISTORY = 2
ERR_MULTI_ACTIVE = 4


class FedGLBState(NamedTuple):
    """State of FedGLB-UCB (C history rows, N clients, d features).

    hp: dict of float hyper-parameters (lam, alpha, c_mu, threshold).
    hist_X [C, d], hist_y [C], hist_n: all observations in arrival order.
    A_g [d, d], theta_g [d]: the statistics of the last synchronisation.
    dA [N, d, d], db [N, d], loc_n [N] int32: each client's new data since then.
    theta [N, d]: each client's online-Newton iterate.
    num_syncs: int32. error: int32 sticky bits.
    """

    hp: dict
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
    error: jax.Array


def sigmoid(z):
    """mu(z) = 1 / (1 + exp(-z)), elementwise."""
    return jax.nn.sigmoid(z)


def fed_glb_ucb(lam=1.0, alpha=1.0, c_mu=0.2, threshold=1.0, *, max_iters: int = 10000, one_active: bool = False,
                batching: str = "map", **kw) -> Algorithm:
    """FedGLB-UCB (module docstring). hparams: lam > 0, alpha >= 0, c_mu > 0, threshold >= 0.

    Static: max_iters (gradient rounds per synchronisation, at most), one_active (score only the
    active client), batching ("map", the default, or "vmap"; module docstring).
    """
    name = "FedGLB-UCB"
    check_one_active(name, one_active)
    if isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 1:
        raise ConfigError(f"{name}: max_iters must be a positive integer, got {max_iters!r}")
    check_batching(name, batching)
    defaults = {"lam": 1.0, "alpha": 1.0, "c_mu": 0.2, "threshold": 1.0}
    hp0 = check_hparams(name, defaults, dict(lam=lam, alpha=alpha, c_mu=c_mu, threshold=threshold, **kw),
                        positive=("lam", "c_mu"), nonnegative=("alpha", "threshold"))

    def capacity(spec: EnvSpec, t_end: int) -> int:
        return max(1, int(t_end))

    def init(key, spec, hparams, cap=None):
        del key
        dtype = _float_dtype()
        hp = traced_hparams(hp0, hparams, dtype)
        C = capacity(spec, spec.horizon) if cap is None else int(cap)
        N, d = spec.num_agents, spec.dim
        return FedGLBState(
            hp=hp, hist_X=jnp.zeros((C, d), dtype), hist_y=jnp.zeros((C,), dtype), hist_n=jnp.zeros((), jnp.int32),
            A_g=jnp.zeros((d, d), dtype), theta_g=jnp.zeros((d,), dtype),
            dA=jnp.zeros((N, d, d), dtype), db=jnp.zeros((N, d), dtype), loc_n=jnp.zeros((N,), jnp.int32),
            theta=jnp.zeros((N, d), dtype), num_syncs=jnp.zeros((), jnp.int32), error=jnp.zeros((), jnp.int32),
        )

    def resize(state: FedGLBState, rows: int) -> FedGLBState:
        return state._replace(hist_X=pad_rows(state.hist_X, int(rows)), hist_y=pad_rows(state.hist_y, int(rows)))

    def reg(state):
        return state.hp["lam"] / state.hp["c_mu"]

    def select(state, contexts, key):
        dtype = state.A_g.dtype
        contexts = contexts.astype(dtype)
        N, K = contexts.shape[:2]
        centre_b = state.A_g @ state.theta_g

        def one(dA, db, X):
            return ridge_scores(state.A_g + dA, centre_b + db, reg(state), state.hp["alpha"], X)

        mean, var, scores = jax.vmap(one)(state.dA, state.db, contexts)
        noise = jax.random.uniform(key, (N, K), dtype)
        return argmax_random_ties(scores, noise), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def select_one(state, contexts, key, active):
        dtype = state.A_g.dtype
        contexts = contexts.astype(dtype)
        N, K = contexts.shape[:2]
        i = active_index(active)
        centre_b = state.A_g @ state.theta_g
        mean, var, scores = ridge_scores(state.A_g + state.dA[i], centre_b + state.db[i], reg(state),
                                         state.hp["alpha"], contexts[i])
        noise = jax.random.uniform(key, (N, K), dtype)[i]
        action = argmax_random_ties(scores, noise)
        return one_hot_action(i, action, N), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise,
                                              "client": i}

    def synchronise(state: FedGLBState):
        """Steps 1-3 of the module docstring. Returns (state, up, down, gradients k, converged)."""
        dtype = state.A_g.dtype
        C, d = state.hist_X.shape
        N = state.dA.shape[0]
        lam = state.hp["lam"]
        A = state.A_g + jnp.sum(state.dA, axis=0)
        n = state.hist_n.astype(dtype)
        valid = jnp.arange(C) < state.hist_n
        X = jnp.where(valid[:, None], state.hist_X, 0.0)
        Y = jnp.where(valid, state.hist_y, 0.0)

        def grad(th):
            resid = jnp.where(valid, sigmoid(X @ th) - Y, 0.0)
            return X.T @ resid + lam * th

        L = 0.25 * jnp.linalg.eigvalsh(A)[-1] + lam
        kappa = L / lam
        beta = (jnp.sqrt(kappa) - 1.0) / (jnp.sqrt(kappa) + 1.0)
        tol = jnp.sqrt(2.0 * lam / n**3)

        def cond(c):
            k, _, _, _, done = c
            return (~done) & (k < max_iters)

        def body(c):
            k, th, th_prev, _, _ = c
            yk = th + beta * (th - th_prev)
            g = grad(yk)
            done = jnp.linalg.norm(g) <= tol
            nxt = jnp.where(done, yk, yk - g / L)
            return k + 1, nxt, th, nxt, done

        th0 = state.theta_g
        k, _, _, theta, done = lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), th0, th0, th0,
                                                           jnp.zeros((), bool)))
        kf = k.astype(dtype)
        up = N * (d * d + 1) + kf * N * d
        down = kf * N * d + N * (d * d + d + 1)
        state = state._replace(
            A_g=A, theta_g=theta, dA=jnp.zeros_like(state.dA), db=jnp.zeros_like(state.db),
            loc_n=jnp.zeros_like(state.loc_n), theta=jnp.broadcast_to(theta, state.theta.shape),
            num_syncs=state.num_syncs + 1,
        )
        return state, up, down, k, done

    def update(state: FedGLBState, contexts, actions, rewards, active, key):
        del key
        dtype = state.A_g.dtype
        contexts = contexts.astype(dtype)
        C, d = state.hist_X.shape
        any_active = jnp.any(active)
        i = jnp.argmax(active).astype(jnp.int32)
        x, y = contexts[i, actions[i]], jnp.asarray(rewards[i], dtype)
        th = state.theta[i]
        z = x @ th
        dA_i = state.dA[i] + jnp.outer(x, x)
        V = state.A_g + dA_i + reg(state) * jnp.eye(d, dtype=dtype)
        th_new = th - jnp.linalg.solve(V, (sigmoid(z) - y) * x) / state.hp["c_mu"]
        room = state.hist_n < C
        ok = any_active & room
        row = jnp.where(ok, state.hist_n, C)  # an out-of-range row writes nothing
        err = (jnp.where(any_active & ~room, ERR_HISTORY, 0)
               | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0))
        state = state._replace(
            hist_X=state.hist_X.at[row].set(x, mode="drop"), hist_y=state.hist_y.at[row].set(y, mode="drop"),
            hist_n=state.hist_n + ok.astype(jnp.int32),
            dA=jnp.where(ok, state.dA.at[i].set(dA_i), state.dA),
            db=jnp.where(ok, state.db.at[i].add(z * x), state.db),
            loc_n=state.loc_n.at[i].add(ok.astype(jnp.int32)),
            theta=jnp.where(ok, state.theta.at[i].set(th_new), state.theta),
            error=state.error | err,
        )
        ratio = ridge_logdet(dA_i + state.A_g, reg(state)) - ridge_logdet(state.A_g, reg(state))
        trigger = ok & (state.loc_n[i].astype(dtype) * ratio >= state.hp["threshold"])
        zero = jnp.zeros((), dtype)

        def quiet(s):
            return s, zero, zero, jnp.zeros((), jnp.int32), jnp.ones((), bool)

        state, up, down, iters, converged = lax.cond(trigger, synchronise, quiet, state)
        bad = jnp.where(state.error != 0, jnp.nan, 0.0).astype(dtype)
        info = {"comm_up": up + bad, "comm_down": down + bad, "rounds": trigger.astype(dtype), "trigger": trigger,
                "logdet_ratio": ratio, "agd_iters": iters, "agd_converged": converged, "error": state.error}
        return state, info

    return Algorithm(
        name, dict(hp0), init, select_one if one_active else select, update, capacity, resize,
        description="FedGLB-UCB (sigmoid link), local online Newton steps, distributed accelerated gradient at syncs",
        sees_active=one_active, batching=batching,
    )


ERROR_MEANINGS = {
    ERR_HISTORY: "the history outgrew its capacity; give init a capacity of at least the horizon",
    ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE,
}


def error_message(code: int, name: str = "FedGLB-UCB") -> str:
    """One line describing the error bits `code` (0: empty string)."""
    return describe_error_bits(code, name, ERROR_MEANINGS)


def check_error(error, name: str = "FedGLB-UCB") -> None:
    """Raise ConfigError if a state's sticky error bits (any shape) are set."""
    raise_on_error_bits(error, name, ERROR_MEANINGS)


def check_run(output, name: str = "FedGLB-UCB") -> None:
    """Raise ConfigError if a run's comm_up / comm_down (RunOutput or mapping) carry the NaN error marker."""
    raise_on_nan_comm(output, f"{name}: the history capacity was exceeded (or more than one client was active at a "
                              "step): rerun and call check_error(state.error)")
