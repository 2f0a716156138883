"""Async-KernelUCB: asynchronous distributed kernel UCB with a Nyström dictionary (Li et al., ICLR 2023).

N clients and one server; at each step exactly one client is active (`step.active`, one True).
It picks arms with the SNAPSHOT it received at its last communication, buffers (x, y), and adds
its stale variance of x to a running sum acc_i. When acc_i > threshold (D in the paper) it runs
the three-message protocol: the server sends its dictionary and statistics; the client keeps each
buffered point with probability min(1, q var) (ridge leverage, fresh variances), appends the new
points to the dictionary and uploads their embedded statistics; the server adds them and sends
the new statistics back as the client's snapshot.

    mean(x) = z^T (A + lam I)^{-1} b,   var(x) = max(k(x,x) - |z|^2, 0)/lam + z^T (A + lam I)^{-1} z
    score   = mean + alpha * sqrt(var),   z(x; S) = L^{-1} k_S(x), K_SS = L L^T (kernels.nystrom)

Every dictionary is a prefix of the server's, so the basis change of eq. (5) is T = [I 0].
Communication per event: up = d |dS_k| + |S_k|^2 + |S_k|,
down = d |S_{k-1}| + |S_{k-1}|^2 + |S_{k-1}| + |S_k|^2 + |S_k|, rounds = 1.

State: the server's dictionary dict_X [M, d] with Linv [M, M], its A [M, M], b [M] and
P = (A + lam I)^{-1} [M, M]; each client's upload buffer buf_X [N, B, d], buf_y [N, B] and snapshot
(snap_n [N], snap_Pinv [N, M, M], snap_coef [N, M]); M and B are sized by demand (`Sizing.demand`). Errors: dictionary or buffer overflow,
more than one active client. Kernel: any registered one; the paper's exp(-gamma |x - y|^2) is
"rbf" with lengthscale = 1 / sqrt(2 gamma).

Walk-through: docs/algorithms/async_kernel.md.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels import nystrom
from bandits_jax.kernels.functions import Kernel
from bandits_jax.kernels.linalg import pad_last, pad_ridge_inverse, pad_rows, sherman_morrison

from ...core import Algorithm, EnvSpec, Sizes, Sizing, flat_uniform, float_dtype, report
from ..base import (ERR_MULTI_ACTIVE, MULTI_ACTIVE_MESSAGE, active_index, argmax_random_ties, check_capacity,
                   check_tolerance, kernel_params, multi_active_error, one_hot_action, resolve_kernel, signed_params)

NAME = "Async-KernelUCB"
ERR_DICT = 1
ERR_BUFFER = 2
ERRORS = {
    ERR_DICT: "the dictionary outgrew dict_capacity; raise dict_capacity",
    ERR_BUFFER: "a client's upload buffer outgrew buffer_capacity; raise buffer_capacity (or lower the threshold)",
    ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE,
}
SIGNS = {"lam": "positive", "alpha": "nonnegative", "q": "nonnegative", "threshold": "nonnegative",
         "lengthscale": "positive"}


class AsyncKernelConfig(NamedTuple):
    """Static options: the kernel, the capacities (M, B) and the near-duplicate cut eig_tol."""

    kernel: Kernel
    dict_capacity: int
    buffer_capacity: int
    eig_tol: float


class AsyncKernelState(NamedTuple):
    """State of Async-KernelUCB (M = dictionary rows, B = buffer rows).

    dict_X [M, d], dict_n: the server's dictionary (a prefix buffer; every client's dictionary
        is a prefix of it). Linv [M, M]: inverse Cholesky factor of its Gram matrix (zero beyond
        dict_n); a prefix dictionary's factor is its leading block.
    A [M, M], b [M]: server aggregate A(D_k; S_k), b(D_k; S_k) (zero beyond dict_n).
    P [M, M]: (A + lam I)^{-1} over the full capacity (1/lam on the unused diagonal).
    snap_n [N], snap_Pinv [N, M, M], snap_coef [N, M]: each client's snapshot (its dictionary
        size, (A + lam I)^{-1}, (A + lam I)^{-1} b).
    buf_X [N, B, d], buf_y [N, B], buf_n [N]: not-yet-uploaded data; acc [N]: stale-variance sums.
    num_comms: int32 number of communications.
    """

    dict_X: jax.Array
    dict_n: jax.Array
    Linv: jax.Array
    A: jax.Array
    b: jax.Array
    P: jax.Array
    snap_n: jax.Array
    snap_Pinv: jax.Array
    snap_coef: jax.Array
    buf_X: jax.Array
    buf_y: jax.Array
    buf_n: jax.Array
    acc: jax.Array
    num_comms: jax.Array


# ------------------------------------------------------------------------------ init
def init(config: AsyncKernelConfig, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> AsyncKernelState:
    """Empty dictionary, zero statistics, P = I / lam, empty snapshots and buffers."""
    del key, public
    dtype = float_dtype()
    lam = jnp.asarray(params["lam"], dtype)
    M, B = dict_and_buffer_rows(config, sizes)
    N, d = spec.num_agents, spec.dim
    return AsyncKernelState(
        dict_X=jnp.zeros((M, d), dtype), dict_n=jnp.zeros((), jnp.int32),
        Linv=jnp.zeros((M, M), dtype), A=jnp.zeros((M, M), dtype), b=jnp.zeros((M,), dtype),
        P=jnp.eye(M, dtype=dtype) / lam,
        snap_n=jnp.zeros((N,), jnp.int32),
        snap_Pinv=jnp.zeros((N, M, M), dtype), snap_coef=jnp.zeros((N, M), dtype),
        buf_X=jnp.zeros((N, B, d), dtype), buf_y=jnp.zeros((N, B), dtype),
        buf_n=jnp.zeros((N,), jnp.int32), acc=jnp.zeros((N,), dtype),
        num_comms=jnp.zeros((), jnp.int32),
    )


# ------------------------------------------------------------------------------ select
def select(config: AsyncKernelConfig, params, state: AsyncKernelState, step, key):
    """The active client's UCB arm with its snapshot; aux = {client, mean[K], var[K]}."""
    dtype = state.b.dtype
    contexts = step.contexts.astype(dtype)
    N, K = contexts.shape[:2]
    i = active_index(step.active)
    mean, var = snapshot_mean_var(config, params, state, i, contexts[i])
    scores = mean + params["alpha"] * jnp.sqrt(var)
    noise = flat_uniform(key, (N, K), dtype)
    a = argmax_random_ties(scores, noise[i])
    return one_hot_action(i, a, N), {"client": i, "mean": mean, "var": var}


# ------------------------------------------------------------------------------ update
def update(config: AsyncKernelConfig, params, state: AsyncKernelState, step, actions, rewards, aux, key):
    """Buffer (x, y) of the active client, add its stale variance to acc_i, and run the protocol
    (`communicate`) when acc_i > threshold."""
    dtype = state.b.dtype
    i = aux["client"]
    any_active = jnp.any(step.active)
    state, acc_i, buffer_full = buffer_point(config, params, state, step.contexts.astype(dtype)[i, actions[i]],
                                             jnp.asarray(rewards[i], dtype), i, any_active)
    trigger = any_active & (acc_i > params["threshold"])
    # an event runs the protocol over the buffer; a quiet step runs it over 0 points (a no-op)
    server, up, down, over = communicate(config, params, state, i, key, jnp.where(trigger, state.buf_n[i], 0))
    dict_X, dict_n, Linv, A, b, P = server
    # message 3 (download) -> client i's snapshot (a masked write of one client's block)
    state = state._replace(
        dict_X=dict_X, dict_n=dict_n, Linv=Linv, A=A, b=b, P=P,
        snap_n=state.snap_n.at[i].set(jnp.where(trigger, dict_n, state.snap_n[i])),
        snap_Pinv=state.snap_Pinv.at[i].set(jnp.where(trigger, P, state.snap_Pinv[i])),
        snap_coef=state.snap_coef.at[i].set(jnp.where(trigger, P @ b, state.snap_coef[i])),
        buf_n=state.buf_n.at[i].set(jnp.where(trigger, 0, state.buf_n[i])),
        acc=state.acc.at[i].set(jnp.where(trigger, 0.0, state.acc[i])),
        num_comms=state.num_comms + trigger.astype(jnp.int32),
    )
    errors = (jnp.where(buffer_full, ERR_BUFFER, 0) | jnp.where(over, ERR_DICT, 0)
              | multi_active_error(step.active))
    return state, report(dtype, jnp.where(trigger, up, 0.0), jnp.where(trigger, down, 0.0), trigger, errors,
                         dict_size=state.dict_n, acc=state.acc[i], trigger=trigger)


def buffer_point(config, params, state: AsyncKernelState, x, y, i, any_active):
    """Append (x, y) to client i's buffer and its stale variance var(x) to acc_i (when a client is
    active). Returns (state, acc_i, buffer_full: the point found no room)."""
    B = state.buf_y.shape[1]
    _, var_stale = snapshot_mean_var(config, params, state, i, x[None, :])
    pos = state.buf_n[i]
    room = pos < B
    row = jnp.where(any_active & room, pos, B)
    acc_i = state.acc[i] + var_stale[0]
    state = state._replace(
        buf_X=state.buf_X.at[i, row].set(x, mode="drop"),
        buf_y=state.buf_y.at[i, row].set(y, mode="drop"),
        buf_n=state.buf_n.at[i].add(jnp.where(any_active & room, 1, 0)),
        acc=jnp.where(any_active, state.acc.at[i].set(acc_i), state.acc),
    )
    return state, acc_i, any_active & ~room


def communicate(config: AsyncKernelConfig, params, state: AsyncKernelState, i, key, bn):
    """The three-message protocol for client i at O(bn M^2), bn its number of buffered points.

    Returns the server's new (dict_X, dict_n, Linv, A, b, P), the comm counts (up, down) and the
    overflow flag. Every loop runs bn times, so bn = 0 (the caller's choice on a quiet step)
    changes nothing and costs O(M^2) at most. The snapshot write is left to the caller.
    """
    p = kernel_params(config.kernel.params, params["lengthscale"], state.b.dtype)
    bx, by = state.buf_X[i], state.buf_y[i]
    n_old = state.dict_n
    # message 1 (download): S_{k-1}, A, b -> fresh variances of the buffered points (stored P)
    var_fresh = fresh_variances(config, params, state, bx, bn, p)
    u = flat_uniform(key, by.shape, state.b.dtype)
    valid = jnp.arange(by.shape[0]) < bn
    keep = nystrom.include_draws(nystrom.leverage_probability(var_fresh, params["q"]), u, valid)

    def append(j, carry):
        X, n, Linv, over = carry
        X, n, Linv, _, o = nystrom.chol_dictionary_append(config.kernel.fn, X, n, Linv, bx[j], keep[j], p,
                                                          config.eig_tol)
        return X, n, Linv, over | o

    dict_X, n_new, Linv, over = lax.fori_loop(0, bn, append, (state.dict_X, n_old, state.Linv, jnp.zeros((), bool)))

    # message 2 (upload): the buffer embedded with S_k. Server: the basis change is [I 0]
    # (nothing to do); fold each point into A, b and P = (A + lam I)^{-1} (Sherman-Morrison).
    def upload(j, carry):
        A, b, P = carry
        z = nystrom.embed_chol(config.kernel.fn, bx[j][None, :], dict_X, n_new, Linv, p)[0]
        return A + jnp.outer(z, z), b + z * by[j], sherman_morrison(P, z)

    A, b, P = lax.fori_loop(0, bn, upload, (state.A, state.b, state.P))
    up, down = event_comm(bx.shape[-1], n_old.astype(state.b.dtype), n_new.astype(state.b.dtype))
    return (dict_X, n_new, Linv, A, b, P), up, down, over


# ------------------------------------------------------------------------------ sizes
def rows(config: AsyncKernelConfig, spec: EnvSpec, t_end: int) -> int:
    """Rows that steps [0, t_end) can need (the demand-sized buffers are capped by the capacities)."""
    return max(1, min(int(t_end), max(config.dict_capacity, config.buffer_capacity)))


def resize(config: AsyncKernelConfig, params, state: AsyncKernelState, sizes: Sizes) -> AsyncKernelState:
    """Pad the dictionary to M and the buffers to B rows (`dict_and_buffer_rows`), P's new block with
    I / lam; no number changes."""
    M, B = dict_and_buffer_rows(config, sizes)
    lam = jnp.asarray(params["lam"], state.P.dtype)
    return state._replace(
        dict_X=pad_rows(state.dict_X, M), Linv=pad_last(state.Linv, M, 2), A=pad_last(state.A, M, 2),
        b=pad_last(state.b, M), P=pad_ridge_inverse(state.P, M, lam),
        snap_Pinv=pad_last(state.snap_Pinv, M, 2), snap_coef=pad_last(state.snap_coef, M),
        buf_X=jax.vmap(lambda a: pad_rows(a, B))(state.buf_X),
        buf_y=jax.vmap(lambda a: pad_rows(a, B))(state.buf_y),
    )


def demand(state: AsyncKernelState):
    """Rows in use: the dictionary size or the fullest buffer, whichever is larger."""
    return jnp.maximum(state.dict_n, jnp.max(state.buf_n))


# ------------------------------------------------------------------------------ helpers
def dict_and_buffer_rows(config: AsyncKernelConfig, sizes: Sizes):
    """(M, B): the demand rows (the time rows without demand sizing), capped by each capacity."""
    n = int(sizes.rows if sizes.demand_rows is None else sizes.demand_rows)
    return min(n, config.dict_capacity), min(n, config.buffer_capacity)


def snapshot_mean_var(config: AsyncKernelConfig, params, state: AsyncKernelState, i, X):
    """Client i's snapshot mean[m], var[m] at X[m, d] (its dictionary: a prefix of the server's)."""
    kern = config.kernel
    p = kernel_params(kern.params, params["lengthscale"], state.b.dtype)
    Z = nystrom.embed_chol(kern.fn, X, state.dict_X, state.snap_n[i], state.Linv, p)
    return nystrom.ridge_mean_var(Z, kern.diag(X, p), state.snap_Pinv[i], state.snap_coef[i], params["lam"])


def fresh_variances(config: AsyncKernelConfig, params, state: AsyncKernelState, bx, bn, p):
    """var[B] of the first bn buffered points bx[B, d] under the server's model (0 beyond bn)."""
    kdiag = config.kernel.diag(bx, p)

    def fresh(j, var):
        z = nystrom.embed_chol(config.kernel.fn, bx[j][None, :], state.dict_X, state.dict_n, state.Linv, p)[0]
        v = jnp.maximum(kdiag[j] - jnp.dot(z, z), 0.0) / params["lam"] + jnp.maximum(z @ (state.P @ z), 0.0)
        return var.at[j].set(v)

    return lax.fori_loop(0, bn, fresh, jnp.zeros(bx.shape[:1], state.b.dtype))


def event_comm(d: int, n_old, n_new):
    """(up, down) scalars of an event that grows the dictionary from n_old to n_new points."""
    up = d * (n_new - n_old) + n_new * n_new + n_new
    down = d * n_old + n_old * n_old + n_old + n_new * n_new + n_new
    return up, down


# ------------------------------------------------------------------------------ factory
def async_kernel_ucb(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    alpha=1.0,
    q=1.0,
    threshold=1e-4,
    lengthscale=1.0,
    *,
    dict_capacity: int = 256,
    buffer_capacity: int = 256,
    eig_tol: float = 1e-10,
) -> Algorithm:
    """Async-KernelUCB (Li et al. 2023): Nystrom kernel UCB whose clients synchronise on their own trigger.

    params: lam > 0, alpha >= 0, q >= 0 (RLS factor), threshold >= 0 (D), lengthscale > 0. Static: dict_capacity (M), buffer_capacity (B, per client), eig_tol (a point
    whose Schur complement is <= eig_tol k(x,x) is a duplicate)."""
    kern = resolve_kernel(NAME, kernel)
    config = AsyncKernelConfig(kern, check_capacity(NAME, "dict_capacity", dict_capacity),
                               check_capacity(NAME, "buffer_capacity", buffer_capacity),
                               check_tolerance(NAME, "eig_tol", eig_tol))
    given = dict(lam=lam, alpha=alpha, q=q, threshold=threshold, lengthscale=lengthscale)
    sizing = Sizing(partial(rows, config), partial(resize, config), demand,
                    max(dict_capacity, buffer_capacity), ERR_DICT | ERR_BUFFER)
    return Algorithm(NAME, signed_params(NAME, SIGNS, given), partial(init, config), partial(select, config),
                     partial(update, config), sizing, dict(ERRORS),
                     f"Async-KernelUCB ({kern.name} kernel), Nyström dictionary, one active client per step",
                     one_active=True)
