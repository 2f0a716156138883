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
    3. the server re-expresses its statistics in S_k with the basis change T (the corrected form
       of eq. 5), adds the upload and sends A(D_k; S_k), b(D_k; S_k) back; the client stores
       them as its new snapshot.

Nyström mean and variance (the variance carries the 1/lam factor; see kernels.nystrom):
    mean(x) = z^T (A + lam I)^{-1} b,   var(x) = max(k(x,x) - |z|^2, 0)/lam + z^T (A + lam I)^{-1} z
    score   = mean + alpha * sqrt(var);  ties (within 1e-10 (1 + |max|)) broken uniformly at
    random with `tie_noise = jax.random.uniform(select_key, (N, K))` (the largest noise wins).

Communication per event (scalars; d per dictionary point, full |S|^2 per matrix):
    up   = d |dS_k| + |S_k|^2 + |S_k|
    down = d |S_{k-1}| + |S_{k-1}|^2 + |S_{k-1}| + |S_k|^2 + |S_k|,   rounds = 1
with |dS_k| the points actually appended (after de-duplication).

Embedding. z(x; S) = L^{-1} k_S(x) with K_SS = L L^T (kernels.nystrom, "Cholesky embedding"):
an orthogonal rotation of the symmetric-root embedding W_S k_S(x) of the paper, so every mean,
variance, leverage probability and action is the same number (up to rounding). Because every
dictionary is a prefix of the server's, the basis change between S_{k-1} and S_k is exactly
T = [I 0] (zero padding): the server's statistics need NO re-expression, the appended points
simply get zero rows/columns of A. A point whose Schur complement against the dictionary is
<= eig_tol * k(x,x) adds no direction and is treated as a duplicate (not appended, not counted
in |dS_k|); exact duplicates are dropped as before.

Server aggregate and cost. The server keeps A, b and P = (A + lam I)^{-1} over the full capacity
(so the zero rows/columns of not-yet-used dictionary slots carry 1/lam on P's diagonal, which is
exactly what appending a point needs). An event costs O(n_buf M^2), n_buf the client's buffered
points: message 1's fresh variances use the stored P; appending a point extends the inverse
factor Linv by one row (Schur complement); each uploaded point is embedded once and folded into
P by a Sherman-Morrison update (and into A, b by its outer products), in loops whose trip count
is the traced buffer size, not the static capacity. Since every client's statistics are
re-expressed in the newest basis at every event (a no-op here), the aggregate equals the spec's
sum of per-client statistics. The NumPy reference (bench/reference/async_kernel_np.py) keeps
per-client statistics in the symmetric-root basis; the tests compare rotation-invariant numbers
and the rotated aggregate.

Selection. `sees_active` is True: select(state, contexts, key, active) scores only the active
client i = argmax(active) (K arms), returns actions[N] with its choice at i (the other entries
are 0 and never used) and info {client, mean[K], var[K], scores[K], tie_noise[N, K]}; the tie
noise is still drawn as uniform(key, (N, K)) and row i is used.

State and capacities (static): the dictionary has `dict_capacity` rows, each client's upload
buffer `buffer_capacity` rows. Client snapshots are stored as (dictionary size, (A + lam I)^{-1},
(A + lam I)^{-1} b): the size selects the prefix of the server's Linv, so only [N, M, M] once
(memory N M^2). Both are sized by demand (`Algorithm.demand`: the dictionary size or the fullest
buffer, whichever is larger): before each of the runner's doubling segments they get room for
about 1.5 times that, up to their capacities, and a segment in which they overflow is run again
with twice the rows. So a step costs as the dictionary in use: at N = 100, T = 1000 (~90
points in use) 2 seeds ran in 2.4 s against 11.4 s with the 512-row buffers of time sizing.
Padding changes no number.

Batching. The default is the runner's batching="vmap". The event is not a `lax.cond` (which
under vmap evaluates both branches and selects every array it returns): `communicate` always
runs, over the buffer on an event and over 0 points on a quiet step, so its loops do nothing
then, and the [N, M, M] snapshot write is a masked write of one client's block. "map" (the
runner maps whole scans over the runs) gives the same numbers at the same speed: 2 seeds at
N = 100, T = 1000, D = 1/N^2, run 9.6 s ("vmap") and 9.2 s ("map") on a loaded 2-core CPU.

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
from kernels.linalg import pad_rows, sherman_morrison

from ..core import (Algorithm, ConfigError, EnvSpec, call_select, call_update, check_hparams, public_info,
                    traced_hparams)
from .base import MULTI_ACTIVE_MESSAGE, check_batching, describe_error_bits, raise_on_error_bits, raise_on_nan_comm
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
        is a prefix of it). Linv [M, M]: inverse Cholesky factor of its Gram matrix (zero beyond
        dict_n); a prefix dictionary's factor is its leading block.
    A [M, M], b [M]: server aggregate A(D_k; S_k), b(D_k; S_k) (zero beyond dict_n).
    P [M, M]: (A + lam I)^{-1} over the full capacity (1/lam on the unused diagonal).
    snap_n [N], snap_Pinv [N, M, M], snap_coef [N, M]: each client's snapshot (its dictionary
        size, (A + lam I)^{-1}, (A + lam I)^{-1} b).
    buf_X [N, B, d], buf_y [N, B], buf_n [N]: not-yet-uploaded data; acc [N]: stale-variance sums.
    num_comms: int32 number of communications; error: int32 sticky bits (ERR_*).
    """

    hp: dict
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
    batching: str = "vmap",
    **kw,
) -> Algorithm:
    """Async-KernelUCB. hparams: lam > 0, alpha >= 0, q >= 0 (RLS factor), threshold >= 0 (D),
    lengthscale > 0. Static: dict_capacity (M), buffer_capacity (B, per client), eig_tol (a point
    whose Schur complement is <= eig_tol k(x,x) is a duplicate), batching ("map" or "vmap"; see
    the module docstring)."""
    name = "Async-KernelUCB"
    kern = _resolve_kernel(name, kernel)
    for cap_name, cap in (("dict_capacity", dict_capacity), ("buffer_capacity", buffer_capacity)):
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"{name}: {cap_name} must be a positive integer, got {cap!r}")
    check_batching(name, batching)
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
            Linv=jnp.zeros((M, M), dtype), A=jnp.zeros((M, M), dtype), b=jnp.zeros((M,), dtype),
            P=jnp.eye(M, dtype=dtype) / hp["lam"],
            snap_n=jnp.zeros((N,), jnp.int32),
            snap_Pinv=jnp.zeros((N, M, M), dtype), snap_coef=jnp.zeros((N, M), dtype),
            buf_X=jnp.zeros((N, B, d), dtype), buf_y=jnp.zeros((N, B), dtype),
            buf_n=jnp.zeros((N,), jnp.int32), acc=jnp.zeros((N,), dtype),
            num_comms=jnp.zeros((), jnp.int32), error=jnp.zeros((), jnp.int32),
        )

    def resize(state: AsyncKernelState, rows: int, dict_rows=None) -> AsyncKernelState:
        M, B = _rows(int(rows if dict_rows is None else dict_rows))
        M_old = state.A.shape[-1]

        def sq(a):  # pad the two trailing matrix axes with zeros
            extra = M - a.shape[-1]
            return jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, extra), (0, extra)])

        def vec(a):
            return jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, M - a.shape[-1])])

        new_diag = (jnp.arange(M) >= M_old).astype(state.P.dtype) / state.hp["lam"]
        return state._replace(
            dict_X=pad_rows(state.dict_X, M), Linv=sq(state.Linv), A=sq(state.A), b=vec(state.b),
            P=sq(state.P) + jnp.diag(new_diag),
            snap_Pinv=sq(state.snap_Pinv), snap_coef=vec(state.snap_coef),
            buf_X=jax.vmap(lambda a: pad_rows(a, B))(state.buf_X),
            buf_y=jax.vmap(lambda a: pad_rows(a, B))(state.buf_y),
        )

    def params(state):
        return _kernel_params(kern.params, state.hp["lengthscale"], state.b.dtype)

    def snapshot_mean_var(state, i, X):
        """Client i's snapshot mean[m], var[m] at X[m, d] (its dictionary: a prefix of the server's)."""
        p = params(state)
        Z = nystrom.embed_chol(kern.fn, X, state.dict_X, state.snap_n[i], state.Linv, p)
        return nystrom.ridge_mean_var(Z, kern.diag(X, p), state.snap_Pinv[i], state.snap_coef[i], state.hp["lam"])

    def select(state, contexts, key, active):
        dtype = state.b.dtype
        contexts = contexts.astype(dtype)
        N, K = contexts.shape[:2]
        i = jnp.argmax(active).astype(jnp.int32)
        mean, var = snapshot_mean_var(state, i, contexts[i])
        scores = mean + state.hp["alpha"] * jnp.sqrt(var)
        noise = jax.random.uniform(key, (N, K), dtype)
        a = argmax_random_ties(scores, noise[i])
        actions = jnp.zeros((N,), jnp.int32).at[i].set(a)
        return actions, {"client": i, "mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def communicate(state: AsyncKernelState, i, key, bn):
        """The three-message protocol for client i at O(bn M^2), bn its number of buffered points.

        Returns the server's new (dict_X, dict_n, Linv, A, b, P), the comm counts (up, down), the
        RLS draws u[B] and the overflow flag. Every loop runs bn times, so bn = 0 (the caller's
        choice on a quiet step) changes nothing and costs O(M^2) at most; this replaces a
        `lax.cond`, which under vmap would evaluate both branches and select every server array.
        The snapshot write is left to the caller.
        """
        dtype = state.b.dtype
        lam, p = state.hp["lam"], params(state)
        B = state.buf_y.shape[1]
        bx, by = state.buf_X[i], state.buf_y[i]
        valid = jnp.arange(B) < bn
        kdiag = kern.diag(bx, p)
        n_old = state.dict_n
        # message 1 (download): S_{k-1}, A, b -> fresh variances of the buffered points (stored P)
        def fresh(j, var):
            z = nystrom.embed_chol(kern.fn, bx[j][None, :], state.dict_X, n_old, state.Linv, p)[0]
            v = jnp.maximum(kdiag[j] - jnp.dot(z, z), 0.0) / lam + jnp.maximum(z @ (state.P @ z), 0.0)
            return var.at[j].set(v)

        var_fresh = lax.fori_loop(0, bn, fresh, jnp.zeros((B,), dtype))
        u = jax.random.uniform(key, (B,), dtype)
        keep = nystrom.include_draws(nystrom.leverage_probability(var_fresh, state.hp["q"]), u, valid)

        def append(j, carry):
            X, n, Linv, over = carry
            X, n, Linv, _, o = nystrom.chol_dictionary_append(kern.fn, X, n, Linv, bx[j], keep[j], p, eig_tol)
            return X, n, Linv, over | o

        dict_X, n_new, Linv, over = lax.fori_loop(
            0, bn, append, (state.dict_X, n_old, state.Linv, jnp.zeros((), bool)))
        # message 2 (upload): the buffer embedded with S_k. Server: the basis change is [I 0]
        # (nothing to do); fold each point into A, b and P = (A + lam I)^{-1} (Sherman-Morrison).
        def upload(j, carry):
            A, b, P = carry
            z = nystrom.embed_chol(kern.fn, bx[j][None, :], dict_X, n_new, Linv, p)[0]
            return A + jnp.outer(z, z), b + z * by[j], sherman_morrison(P, z)

        A, b, P = lax.fori_loop(0, bn, upload, (state.A, state.b, state.P))
        d = bx.shape[-1]
        no, nn = n_old.astype(dtype), n_new.astype(dtype)
        up = d * (nn - no) + nn * nn + nn
        down = d * no + no * no + no + nn * nn + nn
        return (dict_X, n_new, Linv, A, b, P), up, down, u, over

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
        # an event runs the protocol over the buffer; a quiet step runs it over 0 points (a no-op)
        server, up, down, u, over = communicate(state, i, key, jnp.where(trigger, state.buf_n[i], 0))
        dict_X, dict_n, Linv, A, b, P = server
        up, down = jnp.where(trigger, up, 0.0), jnp.where(trigger, down, 0.0)
        u = jnp.where(trigger, u, 0.0)
        # message 3 (download) -> client i's snapshot (a masked write of one client's block)
        state = state._replace(
            dict_X=dict_X, dict_n=dict_n, Linv=Linv, A=A, b=b, P=P,
            snap_n=state.snap_n.at[i].set(jnp.where(trigger, dict_n, state.snap_n[i])),
            snap_Pinv=state.snap_Pinv.at[i].set(jnp.where(trigger, P, state.snap_Pinv[i])),
            snap_coef=state.snap_coef.at[i].set(jnp.where(trigger, P @ b, state.snap_coef[i])),
            buf_n=state.buf_n.at[i].set(jnp.where(trigger, 0, state.buf_n[i])),
            acc=state.acc.at[i].set(jnp.where(trigger, 0.0, state.acc[i])),
            num_comms=state.num_comms + trigger.astype(jnp.int32),
            error=state.error | jnp.where(over, ERR_DICT, 0),
        )
        bad = jnp.where(state.error != 0, jnp.nan, 0.0).astype(dtype)
        info = {
            "comm_up": up + bad, "comm_down": down + bad, "rounds": trigger.astype(dtype),
            "dict_size": state.dict_n, "acc": state.acc[i], "trigger": trigger,
            "error": state.error, "rls_uniform": u,
        }
        return state, info

    def demand(state: AsyncKernelState):
        return jnp.maximum(state.dict_n, jnp.max(state.buf_n))

    return Algorithm(
        name, dict(hp0), init, select, update, capacity, resize,
        description=f"Async-KernelUCB ({kern.name} kernel), Nyström dictionary, one active client per step",
        batching=batching, sees_active=True, demand=demand, demand_limit=max(dict_capacity, buffer_capacity),
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
    Returns (final state, actions[T, N], select infos [T, ...], update infos [T, ...]). An algorithm
    with `sees_active` gets the arrival mask in select (for Async-KernelUCB the select infos are
    then the active client's: mean/var/scores [T, K]).
    """
    state = algorithm.init(jax.random.fold_in(key, 10**6), spec, hparams, capacity)

    def body(st, inp):
        t, ctx, rew, act = inp
        k_sel, k_upd = jax.random.split(jax.random.fold_in(key, t))
        actions, sinfo = call_select(algorithm, st, ctx, k_sel, act)
        r = jnp.take_along_axis(rew, actions[:, None], axis=1)[:, 0]
        st, uinfo = call_update(algorithm, st, ctx, actions, r, act, k_upd, sinfo)
        return st, (actions, public_info(sinfo), uinfo)

    T = contexts.shape[0]
    state, (actions, sinfo, uinfo) = lax.scan(body, state, (jnp.arange(T), contexts, rewards, active))
    return state, actions, sinfo, uinfo
