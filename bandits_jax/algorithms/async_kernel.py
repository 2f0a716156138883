"""Async-KernelUCB: asynchronous distributed kernel UCB with a Nyström dictionary (Li et al., ICLR 2023).

N clients and one server; at each step exactly one client is active (`active[N]`, one True).
The active client picks arms with the SNAPSHOT it received at its last communication (it
never uses its own un-uploaded data), buffers (x, y), and adds its stale variance of x to a
running sum acc_i. When acc_i > threshold (D in the paper) it runs the three-message protocol:

    1. server -> client: dictionary S_{k-1}, A(D_{k-1}; S_{k-1}), b(D_{k-1}; S_{k-1});
    2. the client computes the FRESH variance of each buffered point from these, keeps each
       with probability min(1, q var) (ridge-leverage sampling), drops duplicates of dictionary
       points, appends the rest: S_k; embeds its buffer with S_k and uploads the new points,
       A(dD; S_k), b(dD; S_k);
    3. the server re-expresses its statistics in S_k with the basis change T = W_{k-1} K W_k
       (Λ^{-1/2} on the old side: the corrected form of eq. 5), adds the upload and sends
       A(D_k; S_k), b(D_k; S_k) back; the client stores them as its new snapshot.

Nyström mean and variance (the variance carries the 1/lam factor; see kernels.nystrom):
    mean(x) = z^T (A + lam I)^{-1} b,   var(x) = max(k(x,x) - |z|^2, 0)/lam + z^T (A + lam I)^{-1} z
    score   = mean + alpha * sqrt(var);  ties (within 1e-10 (1 + |max|)) broken uniformly at
    random with `tie_noise = jax.random.uniform(select_key, (N, K))` (the largest noise wins).

Communication per event (scalars; d per dictionary point, full |S|^2 per matrix):
    up   = d |dS_k| + |S_k|^2 + |S_k|
    down = d |S_{k-1}| + |S_{k-1}|^2 + |S_{k-1}| + |S_k|^2 + |S_k|,   rounds = 1
with |dS_k| the points actually appended (after de-duplication).

Server aggregate. The server keeps the AGGREGATE statistics and applies T once per event:
since every client's stored statistics are re-expressed in the newest basis at every event,
sum_j T^T A_j T = T^T (sum_j A_j) T, so this is the spec's per-client update up to rounding, at
O(M^3) per event instead of O(N M^3). The NumPy reference (bench/reference/async_kernel_np.py)
keeps per-client statistics, and the tests check that both agree.

State and capacities (static): the dictionary has `dict_capacity` rows, each client's upload
buffer `buffer_capacity` rows. Client snapshots are stored as (dictionary size, W, (A + lam I)^{-1},
(A + lam I)^{-1} b), i.e. [N, M, M] twice: memory grows as N M^2. The runner grows both buffers
in doubling segments (`capacity`, `resize`); padding changes no number.

Errors are never silent: a dictionary overflow, a buffer overflow or a step with more than one
active client sets a sticky bit in `state.error` and turns the step's comm_up (and comm_down) into
NaN from then on, so the run's communication output shows it; `check_run(output)` (a RunOutput
or any mapping with comm_up / comm_down) and `check_error(state.error)` raise a ConfigError that
names the capacity to raise. `update`'s info also carries dict_size, acc (the active client's
running sum after the step), trigger, error and rls_uniform (the RLS draws of the step, [B]).

Kernel: any registered kernel; the paper's Gaussian kernel exp(-gamma |x - y|^2) is "rbf" with
lengthscale = 1 / sqrt(2 gamma).
"""
from __future__ import annotations

from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
from jax import lax

from kernels import nystrom
from kernels.functions import Kernel
from kernels.linalg import pad_rows

from ..core import Algorithm, ConfigError, EnvSpec, check_hparams, traced_hparams
from .base import MULTI_ACTIVE_MESSAGE, describe_error_bits, raise_on_error_bits, raise_on_nan_comm
from .kernel import _kernel_params, _resolve_kernel
from .linear import _float_dtype

ERR_DICT = 1
ERR_BUFFER = 2
ERR_MULTI_ACTIVE = 4
TIE_RTOL = 1e-10


class AsyncKernelState(NamedTuple):
    """State of Async-KernelUCB (M = dictionary rows, B = buffer rows).

    hp: dict of float hyper-parameters (lam, alpha, q, threshold, lengthscale).
    dict_X [M, d], dict_n: the server's dictionary (a prefix buffer; every client's dictionary
        is a prefix of it). W [M, M]: its symmetric pseudo-inverse root.
    A [M, M], b [M]: server aggregate A(D_k; S_k), b(D_k; S_k).
    snap_n [N], snap_W [N, M, M], snap_Pinv [N, M, M], snap_coef [N, M]: each client's snapshot
        (its dictionary size, root, (A + lam I)^{-1}, (A + lam I)^{-1} b).
    buf_X [N, B, d], buf_y [N, B], buf_n [N]: not-yet-uploaded data; acc [N]: stale-variance sums.
    num_comms: int32 number of communications; error: int32 sticky bits (ERR_*).
    """

    hp: dict
    dict_X: jax.Array
    dict_n: jax.Array
    W: jax.Array
    A: jax.Array
    b: jax.Array
    snap_n: jax.Array
    snap_W: jax.Array
    snap_Pinv: jax.Array
    snap_coef: jax.Array
    buf_X: jax.Array
    buf_y: jax.Array
    buf_n: jax.Array
    acc: jax.Array
    num_comms: jax.Array
    error: jax.Array


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
    **kw,
) -> Algorithm:
    """Async-KernelUCB. hparams: lam > 0, alpha >= 0, q >= 0 (RLS factor), threshold >= 0 (D),
    lengthscale > 0. Static: dict_capacity (M), buffer_capacity (B, per client), eig_tol."""
    name = "Async-KernelUCB"
    kern = _resolve_kernel(name, kernel)
    for cap_name, cap in (("dict_capacity", dict_capacity), ("buffer_capacity", buffer_capacity)):
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"{name}: {cap_name} must be a positive integer, got {cap!r}")
    defaults = {"lam": 1.0, "alpha": 1.0, "q": 1.0, "threshold": 1e-4, "lengthscale": 1.0}
    hp0 = check_hparams(
        name, defaults, dict(lam=lam, alpha=alpha, q=q, threshold=threshold, lengthscale=lengthscale, **kw),
        positive=("lam", "lengthscale"), nonnegative=("alpha", "q", "threshold"),
    )

    def capacity(spec: EnvSpec, t_end: int) -> int:
        return max(1, min(int(t_end), max(dict_capacity, buffer_capacity)))

    def _rows(rows):
        return min(rows, dict_capacity), min(rows, buffer_capacity)

    def init(key, spec, hparams, cap=None):
        del key
        dtype = _float_dtype()
        hp = traced_hparams(hp0, hparams, dtype)
        rows = capacity(spec, spec.horizon) if cap is None else int(cap)
        M, B = _rows(rows)
        N, d = spec.num_agents, spec.dim
        return AsyncKernelState(
            hp=hp,
            dict_X=jnp.zeros((M, d), dtype), dict_n=jnp.zeros((), jnp.int32),
            W=jnp.zeros((M, M), dtype), A=jnp.zeros((M, M), dtype), b=jnp.zeros((M,), dtype),
            snap_n=jnp.zeros((N,), jnp.int32), snap_W=jnp.zeros((N, M, M), dtype),
            snap_Pinv=jnp.zeros((N, M, M), dtype), snap_coef=jnp.zeros((N, M), dtype),
            buf_X=jnp.zeros((N, B, d), dtype), buf_y=jnp.zeros((N, B), dtype),
            buf_n=jnp.zeros((N,), jnp.int32), acc=jnp.zeros((N,), dtype),
            num_comms=jnp.zeros((), jnp.int32), error=jnp.zeros((), jnp.int32),
        )

    def resize(state: AsyncKernelState, rows: int) -> AsyncKernelState:
        M, B = _rows(int(rows))

        def sq(a):  # pad the two trailing matrix axes with zeros
            extra = M - a.shape[-1]
            return jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, extra), (0, extra)])

        def vec(a):
            return jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, M - a.shape[-1])])

        return state._replace(
            dict_X=pad_rows(state.dict_X, M), W=sq(state.W), A=sq(state.A), b=vec(state.b),
            snap_W=sq(state.snap_W), snap_Pinv=sq(state.snap_Pinv), snap_coef=vec(state.snap_coef),
            buf_X=jax.vmap(lambda a: pad_rows(a, B))(state.buf_X),
            buf_y=jax.vmap(lambda a: pad_rows(a, B))(state.buf_y),
        )

    def params(state):
        return _kernel_params(kern.params, state.hp["lengthscale"], state.b.dtype)

    def snapshot_mean_var(state, i, X):
        """Client i's snapshot mean[m], var[m] at X[m, d]."""
        p = params(state)
        Z = nystrom.embed(kern.fn, X, state.dict_X, state.snap_n[i], state.snap_W[i], p)
        return nystrom.ridge_mean_var(Z, kern.diag(X, p), state.snap_Pinv[i], state.snap_coef[i], state.hp["lam"])

    def select(state, contexts, key):
        contexts = contexts.astype(state.b.dtype)
        N, K = contexts.shape[:2]
        mean, var = jax.vmap(lambda i, X: snapshot_mean_var(state, i, X))(jnp.arange(N), contexts)
        scores = mean + state.hp["alpha"] * jnp.sqrt(var)
        noise = jax.random.uniform(key, (N, K), state.b.dtype)
        actions = argmax_random_ties(scores, noise)
        return actions, {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def communicate(state: AsyncKernelState, i, key):
        """The three-message protocol for client i; returns (state, up, down)."""
        dtype = state.b.dtype
        lam, p = state.hp["lam"], params(state)
        B = state.buf_y.shape[1]
        bx, by, bn = state.buf_X[i], state.buf_y[i], state.buf_n[i]
        valid = jnp.arange(B) < bn
        n_old = state.dict_n
        # message 1 (download): S_{k-1}, A, b -> fresh variances of the buffered points
        Pinv_old = nystrom.ridge_inverse(state.A, lam)
        Z_old = nystrom.embed(kern.fn, bx, state.dict_X, n_old, state.W, p)
        _, var_fresh = nystrom.ridge_mean_var(Z_old, kern.diag(bx, p), Pinv_old, Pinv_old @ state.b, lam)
        u = jax.random.uniform(key, (B,), dtype)
        keep = nystrom.include_draws(nystrom.leverage_probability(var_fresh, state.hp["q"]), u, valid)
        dict_X, n_new, _, over = nystrom.sample_and_append(state.dict_X, n_old, bx, keep)
        W_new, K_new = nystrom.dictionary_root(kern.fn, dict_X, n_new, p, eig_tol)
        # message 2 (upload): new points and the buffer's statistics in the new basis
        Z_new = nystrom.embed(kern.fn, bx, dict_X, n_new, W_new, p)
        dA, db = nystrom.embedded_stats(Z_new, by, valid)
        # server: basis change of the aggregate, add the upload; message 3 (download)
        T = nystrom.basis_change(state.W, K_new, W_new)
        A, b = nystrom.change_stats(T, state.A, state.b)
        A, b = A + dA, b + db
        Pinv = nystrom.ridge_inverse(A, lam)
        d = bx.shape[-1]
        no, nn = n_old.astype(dtype), n_new.astype(dtype)
        up = d * (nn - no) + nn * nn + nn
        down = d * no + no * no + no + nn * nn + nn
        state = state._replace(
            dict_X=dict_X, dict_n=n_new, W=W_new, A=A, b=b,
            snap_n=state.snap_n.at[i].set(n_new), snap_W=state.snap_W.at[i].set(W_new),
            snap_Pinv=state.snap_Pinv.at[i].set(Pinv), snap_coef=state.snap_coef.at[i].set(Pinv @ b),
            buf_n=state.buf_n.at[i].set(0), acc=state.acc.at[i].set(0.0),
            num_comms=state.num_comms + 1,
            error=state.error | jnp.where(over, ERR_DICT, 0),
        )
        return state, up, down, u

    def update(state: AsyncKernelState, contexts, actions, rewards, active, key):
        dtype = state.b.dtype
        contexts = contexts.astype(dtype)
        B = state.buf_y.shape[1]
        any_active = jnp.any(active)
        i = jnp.argmax(active).astype(jnp.int32)
        x = contexts[i, actions[i]]
        y = jnp.asarray(rewards[i], dtype)
        _, var_stale = snapshot_mean_var(state, i, x[None, :])
        pos = state.buf_n[i]
        room = pos < B
        row = jnp.where(any_active & room, pos, B)
        acc_i = state.acc[i] + var_stale[0]
        err = (jnp.where(any_active & ~room, ERR_BUFFER, 0)
               | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0))
        state = state._replace(
            buf_X=state.buf_X.at[i, row].set(x, mode="drop"),
            buf_y=state.buf_y.at[i, row].set(y, mode="drop"),
            buf_n=state.buf_n.at[i].add(jnp.where(any_active & room, 1, 0)),
            acc=jnp.where(any_active, state.acc.at[i].set(acc_i), state.acc),
            error=state.error | err,
        )
        trigger = any_active & (acc_i > state.hp["threshold"])
        zero = jnp.zeros((), dtype)

        def quiet(s):
            return s, zero, zero, jnp.zeros((B,), dtype)

        state, up, down, u = lax.cond(trigger, lambda s: communicate(s, i, key), quiet, state)
        bad = jnp.where(state.error != 0, jnp.nan, 0.0).astype(dtype)
        info = {
            "comm_up": up + bad, "comm_down": down + bad, "rounds": trigger.astype(dtype),
            "dict_size": state.dict_n, "acc": state.acc[i], "trigger": trigger,
            "error": state.error, "rls_uniform": u,
        }
        return state, info

    return Algorithm(
        name, dict(hp0), init, select, update, capacity, resize,
        description=f"Async-KernelUCB ({kern.name} kernel), Nyström dictionary, one active client per step",
    )


def argmax_random_ties(scores, noise):
    """actions[...] = argmax over the last axis, ties (within TIE_RTOL (1 + |max|)) to the largest noise."""
    best = jnp.max(scores, axis=-1, keepdims=True)
    tied = scores >= best - TIE_RTOL * (1.0 + jnp.abs(best))
    return jnp.argmax(jnp.where(tied, noise, -1.0), axis=-1).astype(jnp.int32)


ERROR_MEANINGS = {
    ERR_DICT: "the dictionary outgrew dict_capacity; raise dict_capacity",
    ERR_BUFFER: "a client's upload buffer outgrew buffer_capacity; raise buffer_capacity (or lower the threshold)",
    ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE,
}


def error_message(code: int, name: str = "Async-KernelUCB") -> str:
    """One line describing the error bits `code` (0: empty string)."""
    return describe_error_bits(code, name, ERROR_MEANINGS)


def check_error(error, name: str = "Async-KernelUCB") -> None:
    """Raise ConfigError if a state's sticky error bits (any shape) are set."""
    raise_on_error_bits(error, name, ERROR_MEANINGS)


def check_run(output, name: str = "Async-KernelUCB") -> None:
    """Raise ConfigError if a run's communication outputs carry the NaN error marker.

    output: a runner RunOutput, or a mapping with "comm_up"/"comm_down". The marker does not say
    which capacity overflowed; rerun with `rollout` (or inspect state.error) for the exact bits.
    """
    raise_on_nan_comm(output, f"{name}: a capacity was exceeded (or more than one client was active at a step): "
                              "raise dict_capacity and/or buffer_capacity")


def rollout(algorithm: Algorithm, spec: EnvSpec, hparams, contexts, rewards, active, key, capacity=None):
    """Run an algorithm on given arrays with one `lax.scan` (for tests and small studies).

    contexts[T, N, K, d], rewards[T, N, K] (the reward of every arm), active[T, N] bool, key: the
    algorithm key; step t uses split(fold_in(key, t)) -> (init-free select key, update key).
    Returns (final state, actions[T, N], select infos [T, ...], update infos [T, ...]).
    """
    state = algorithm.init(jax.random.fold_in(key, 10**6), spec, hparams, capacity)

    def body(st, inp):
        t, ctx, rew, act = inp
        k_sel, k_upd = jax.random.split(jax.random.fold_in(key, t))
        actions, sinfo = algorithm.select(st, ctx, k_sel)
        r = jnp.take_along_axis(rew, actions[:, None], axis=1)[:, 0]
        st, uinfo = algorithm.update(st, ctx, actions, r, act, k_upd)
        return st, (actions, sinfo, uinfo)

    T = contexts.shape[0]
    state, (actions, sinfo, uinfo) = lax.scan(body, state, (jnp.arange(T), contexts, rewards, active))
    return state, actions, sinfo, uinfo
