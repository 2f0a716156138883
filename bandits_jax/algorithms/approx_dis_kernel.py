"""Approx-DisKernelUCB: synchronous distributed kernel UCB with a re-sampled Nyström dictionary.

Baseline B3 of the asynchronous-environment study (Li et al., NeurIPS 2022, synchronous). Its
internals are recalled from that paper, not read from it; this module implements this reading:

    - all clients share a dictionary S (size m) and the global statistics A_g = sum z z^T,
      b_g = sum z y over ALL data up to the last synchronisation, z = z(x; S) the Nyström
      embedding (kernels.nystrom); client i adds its own new points since then:
          A_i = A_g + sum_{s new on i} z_s z_s^T,   b_i = b_g + sum_{s new on i} z_s y_s;
    - score with the Nyström ridge quantities of (A_i, b_i) (the variance carries 1/lam):
          mean(x) = z^T (A_i + lam I)^{-1} b_i,
          var(x)  = max(k(x,x) - |z|^2, 0)/lam + z^T (A_i + lam I)^{-1} z,
          score   = mean + alpha sqrt(var);  ties (within 1e-10 (1 + |max|)) go to the largest
          `tie_noise = jax.random.uniform(select_key, (N, K))`;
    - after the active client i adds its point x_t, it adds the GLOBAL-model variance
      var_g(x_t) (that of (A_g, b_g)) to a sum V_i, and triggers a synchronisation when
          count * V_i > threshold,
      count = n_i, the client's number of new points (trigger_count="client", the spec's
      reading), or the global steps since the last synchronisation ("elapsed");
    - a synchronisation involves ALL N clients:
        (a) each client j re-samples its WHOLE history by ridge leverage: point s is kept with
            probability min(1, q var_g(x_s)) (old global model), using the uniform draw
            u[s] = jax.random.uniform(fold_in(update_key, s)) of its position s in the pooled
            arrival order (independent of the buffer size, so `resize` changes no draw); it
            uploads the kept points, |S_j| of them (no client-side de-duplication);
        (b) the server forms S_new = the kept points in arrival order, duplicates dropped: a kept
            point equal to one already in S_new, or whose Schur complement
            k(x,x) - k_S(x)^T K_SS^{-1} k_S(x) against it is <= eig_tol k(x,x) (numerically in its
            span, no new direction), is not added;
        (c) every client re-embeds its whole history with S_new and uploads Z^T Z, Z^T y;
        (d) the server sums them into (A_g, b_g) and broadcasts them; buffers and sums clear.
  Communication (spec B3, counting all N clients, seen or not; d per point, full m^2 matrices):
      up   = d sum_j |S_j| + N (m^2 + m),   down = N d m + N (m^2 + m),   rounds = 1,
  with m = |S_new|.

Embedding. z(x; S) = L^{-1} k_S(x) with K_SS = L L^T (the Cholesky form of Async-KernelUCB,
kernels.nystrom.embed_chol); the state keeps the inverse factor Linv = L^{-1}, zero-padded to
M x M. It is an orthogonal rotation of the symmetric-root embedding K_SS^{-1/2} k_S(x), so every
Gram product, mean, variance and action is the same number up to rounding. It replaced the
symmetric root because that root needs an eigendecomposition of the PADDED M x M Gram matrix at
every synchronisation (about 9 M^3 flops, and under the runner's vmap a `lax.cond` computes the
sync at every step); the Cholesky factor is built by appending the kept points one at a time
(`nystrom.chol_dictionary_append`, O(M^2) each, a `lax.fori_loop` over the traced number of kept
points), with its near-duplicate rule in place of the eigenvalue cut.

State. The history of all clients lives in one arrival-order buffer (hist_X [C, d], hist_y [C],
hist_owner [C]), C = `capacity(spec, t_end) = t_end` rows; since the rebuilt statistics are
sums over clients, (c)-(d) are computed as one embedding of the pooled history. The dictionary
has at most dict_capacity rows, sized by demand (`Algorithm.demand`): before each of the runner's
doubling segments, room for about 1.5 times the dictionary in use, and a segment in which a
re-sampled dictionary overflows is run again with twice the rows. The work of a step and of a
synchronisation then follows the dictionary's actual size (~110 points on synthetic f1) instead
of its capacity. Each client keeps (A_i + lam I)^{-1} (loc_Pinv [N, M, M],
Sherman-Morrison rank-one updates between syncs) and b_i; a client with no new point since the
last sync (loc_n = 0) uses the global (g_Pinv, g_b) instead, so a sync writes the one fresh
Cholesky inverse of the global model and no N x M x M broadcast.
Costs: select O(N K M (d + M)); a quiet update O(M^2); a sync O(C M (d + M) + n M^2 + M^3), n the
number of kept points (the M^3 is the Cholesky inverse of A_g + lam I).

Batching. The synchronisation is a `lax.cond`, and under the runner's vmap a cond whose
predicate differs between runs computes both branches: every step of every run would pay for a
sync, O(C M (d + M) + M^3) at the padded sizes. So the default is batching="map" (the runner
runs the batch one run after another, each with its own scan), where a quiet step costs only
its O(K M (d + M)) select and O(M^2) update; "vmap" is an option for small problems.

One active client (static `one_active=True`, the asynchronous protocol): the algorithm
`sees_active` and `select(state, contexts, key, active)` scores client i = argmax(active) only,
O(K M (d + M)), with row i of the same (N, K) tie noise, so client i's action is the one of the
all-client select; the other clients' actions are 0 (never used) and the select info holds
client i's quantities ([K]) and "client": i.

Errors are never silent: a dictionary overflow (raise dict_capacity), a full history buffer or a
step with more than one active client sets a sticky bit in `state.error` and turns comm_up /
comm_down into NaN from then on; `check_error(state.error)` / `check_run(output)` raise.
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
from .async_kernel import argmax_random_ties
from .base import (MULTI_ACTIVE_MESSAGE, active_index, check_batching, check_one_active, describe_error_bits,
                   one_hot_action, raise_on_error_bits, raise_on_nan_comm)
from .kernel import _kernel_params, _resolve_kernel
from .linear import _float_dtype

ERR_DICT = 1
ERR_HISTORY = 2
ERR_MULTI_ACTIVE = 4

TRIGGER_COUNTS = ("client", "elapsed")


class ApproxDisKernelState(NamedTuple):
    """State of Approx-DisKernelUCB (C history rows, M dictionary rows, N clients).

    hp: dict of float hyper-parameters (lam, alpha, q, threshold, lengthscale).
    hist_X [C, d], hist_y [C], hist_owner [C] int32, hist_n: all observations, arrival order.
    dict_X [M, d], dict_n, Linv [M, M]: the shared dictionary S and the inverse Cholesky factor of
    its Gram matrix (zero beyond dict_n).
    g_Pinv [M, M] = (A_g + lam I)^{-1}, g_b [M] = b_g: the global statistics of the last sync.
    loc_Pinv [N, M, M] = (A_i + lam I)^{-1}, loc_b [N, M] = b_i: each client's model, valid
    where loc_n > 0 (a client with loc_n = 0 has the global model; `client_model`).
    loc_n [N] int32: new points per client since the last sync; loc_var [N]: their var_g sum.
    elapsed: int32 global steps since the last sync. num_syncs: int32. error: int32 sticky bits.
    """

    hp: dict
    hist_X: jax.Array
    hist_y: jax.Array
    hist_owner: jax.Array
    hist_n: jax.Array
    dict_X: jax.Array
    dict_n: jax.Array
    Linv: jax.Array
    g_Pinv: jax.Array
    g_b: jax.Array
    loc_Pinv: jax.Array
    loc_b: jax.Array
    loc_n: jax.Array
    loc_var: jax.Array
    elapsed: jax.Array
    num_syncs: jax.Array
    error: jax.Array


def approx_dis_kernel_ucb(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    alpha=1.0,
    q=1.0,
    threshold=1.0,
    lengthscale=1.0,
    *,
    trigger_count: str = "client",
    dict_capacity: int = 256,
    eig_tol: float = 1e-10,
    one_active: bool = False,
    batching: str = "map",
    **kw,
) -> Algorithm:
    """Approx-DisKernelUCB (module docstring).

    hparams: lam > 0, alpha >= 0, q >= 0 (RLS factor), threshold >= 0 (D_A), lengthscale > 0.
    Static: trigger_count ("client" or "elapsed"), dict_capacity (M; overflow is an error),
    eig_tol (near-duplicate cut: a kept point whose Schur complement against the dictionary is
    <= eig_tol k(x,x) is not added), one_active (score only the active client), batching ("map",
    the default, or "vmap"; module docstring).
    """
    name = "Approx-DisKernelUCB"
    kern = _resolve_kernel(name, kernel)
    check_one_active(name, one_active)
    if isinstance(dict_capacity, bool) or not isinstance(dict_capacity, int) or dict_capacity < 1:
        raise ConfigError(f"{name}: dict_capacity must be a positive integer, got {dict_capacity!r}")
    if trigger_count not in TRIGGER_COUNTS:
        raise ConfigError(f"{name}: trigger_count must be one of {TRIGGER_COUNTS}, got {trigger_count!r}")
    check_batching(name, batching)
    defaults = {"lam": 1.0, "alpha": 1.0, "q": 1.0, "threshold": 1.0, "lengthscale": 1.0}
    hp0 = check_hparams(
        name, defaults, dict(lam=lam, alpha=alpha, q=q, threshold=threshold, lengthscale=lengthscale, **kw),
        positive=("lam", "lengthscale"), nonnegative=("alpha", "q", "threshold"),
    )

    def capacity(spec: EnvSpec, t_end: int) -> int:
        return max(1, int(t_end))

    def _rows(rows):
        return rows, min(rows, dict_capacity)

    def init(key, spec, hparams, cap=None):
        del key
        dtype = _float_dtype()
        hp = traced_hparams(hp0, hparams, dtype)
        C, M = _rows(capacity(spec, spec.horizon) if cap is None else int(cap))
        N, d = spec.num_agents, spec.dim
        P0 = jnp.eye(M, dtype=dtype) / hp["lam"]
        return ApproxDisKernelState(
            hp=hp, hist_X=jnp.zeros((C, d), dtype), hist_y=jnp.zeros((C,), dtype),
            hist_owner=jnp.zeros((C,), jnp.int32), hist_n=jnp.zeros((), jnp.int32),
            dict_X=jnp.zeros((M, d), dtype), dict_n=jnp.zeros((), jnp.int32), Linv=jnp.zeros((M, M), dtype),
            g_Pinv=P0, g_b=jnp.zeros((M,), dtype),
            loc_Pinv=jnp.zeros((N, M, M), dtype), loc_b=jnp.zeros((N, M), dtype),  # unused while loc_n = 0
            loc_n=jnp.zeros((N,), jnp.int32), loc_var=jnp.zeros((N,), dtype),
            elapsed=jnp.zeros((), jnp.int32), num_syncs=jnp.zeros((), jnp.int32),
            error=jnp.zeros((), jnp.int32),
        )

    def resize(state: ApproxDisKernelState, rows: int, dict_rows=None) -> ApproxDisKernelState:
        C, M = _rows(int(rows))
        if dict_rows is not None:
            M = min(int(dict_rows), dict_capacity)
        m0 = state.Linv.shape[0]
        lam = state.hp["lam"]

        def pinv(P):  # the padded block of (A + lam I)^{-1} is I / lam (A is zero there)
            pad = [(0, 0)] * (P.ndim - 2) + [(0, M - m0), (0, M - m0)]
            tail = jnp.diag(jnp.where(jnp.arange(M) < m0, 0.0, 1.0).astype(P.dtype)) / lam
            return jnp.pad(P, pad) + tail

        def vec(a):
            return jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, M - a.shape[-1])])

        return state._replace(
            hist_X=pad_rows(state.hist_X, C), hist_y=pad_rows(state.hist_y, C),
            hist_owner=pad_rows(state.hist_owner, C), dict_X=pad_rows(state.dict_X, M),
            Linv=jnp.pad(state.Linv, [(0, M - m0), (0, M - m0)]), g_Pinv=pinv(state.g_Pinv), g_b=vec(state.g_b),
            loc_Pinv=pinv(state.loc_Pinv), loc_b=vec(state.loc_b),
        )

    def params(state):
        return _kernel_params(kern.params, state.hp["lengthscale"], state.g_b.dtype)

    def client_model(state, i):
        """Client i's ((A_i + lam I)^{-1}, b_i): the global model while it has no new point."""
        fresh = state.loc_n[i] == 0
        return (jnp.where(fresh, state.g_Pinv, state.loc_Pinv[i]), jnp.where(fresh, state.g_b, state.loc_b[i]))

    def embed(state, X):
        """z[m, M] of X[m, d] in the current dictionary."""
        return nystrom.embed_chol(kern.fn, X, state.dict_X, state.dict_n, state.Linv, params(state))

    def select(state, contexts, key):
        dtype = state.g_b.dtype
        contexts = contexts.astype(dtype)
        N, K = contexts.shape[:2]
        lam, p = state.hp["lam"], params(state)

        def one(X, Pinv, b):
            return nystrom.ridge_mean_var(embed(state, X), kern.diag(X, p), Pinv, Pinv @ b, lam)

        Pinv, b = jax.vmap(lambda i: client_model(state, i))(jnp.arange(N))
        mean, var = jax.vmap(one)(contexts, Pinv, b)
        scores = mean + state.hp["alpha"] * jnp.sqrt(var)
        noise = jax.random.uniform(key, (N, K), dtype)
        return argmax_random_ties(scores, noise), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def select_one(state, contexts, key, active):
        dtype = state.g_b.dtype
        contexts = contexts.astype(dtype)
        N, K = contexts.shape[:2]
        lam, p = state.hp["lam"], params(state)
        i = active_index(active)
        X, (Pinv, b) = contexts[i], client_model(state, i)
        mean, var = nystrom.ridge_mean_var(embed(state, X), kern.diag(X, p), Pinv, Pinv @ b, lam)
        scores = mean + state.hp["alpha"] * jnp.sqrt(var)
        noise = jax.random.uniform(key, (N, K), dtype)[i]
        action = argmax_random_ties(scores, noise)
        return one_hot_action(i, action, N), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise,
                                              "client": i}

    def synchronise(state: ApproxDisKernelState, key):
        """Steps (a)-(d) of the module docstring. Returns (state, up, down, kept_per_client[N], u[C])."""
        dtype = state.g_b.dtype
        C, d = state.hist_X.shape
        N = state.loc_n.shape[0]
        lam, p = state.hp["lam"], params(state)
        valid = jnp.arange(C) < state.hist_n
        # (a) ridge-leverage re-sampling of every history point with the OLD global model
        Z_old = embed(state, state.hist_X)
        _, var_g = nystrom.ridge_mean_var(Z_old, kern.diag(state.hist_X, p), state.g_Pinv,
                                          state.g_Pinv @ state.g_b, lam)
        u = rls_uniforms(key, C, dtype)
        keep = nystrom.include_draws(nystrom.leverage_probability(var_g, state.hp["q"]), u, valid)
        kept = jnp.zeros((N,), jnp.int32).at[state.hist_owner].add(keep.astype(jnp.int32))
        # (b) the new dictionary: kept points in arrival order, (near-)duplicates dropped, its inverse
        # Cholesky factor grown one point at a time, O(M^2) per kept point (no M x M factorisation)
        order = jnp.nonzero(keep, size=C, fill_value=0)[0]  # kept history rows, arrival order

        def append(j, carry):
            pts, n, Linv, over = carry
            pts, n, Linv, _, o = nystrom.chol_dictionary_append(kern.fn, pts, n, Linv, state.hist_X[order[j]],
                                                                 True, p, eig_tol)
            return pts, n, Linv, over | o

        init_dict = (jnp.zeros_like(state.dict_X), jnp.zeros((), jnp.int32), jnp.zeros_like(state.Linv),
                     jnp.zeros((), bool))
        dict_X, dict_n, Linv, over = lax.fori_loop(0, jnp.sum(keep.astype(jnp.int32)), append, init_dict)
        # (c)-(d) re-embed the whole (pooled) history, sum, broadcast
        Z = nystrom.embed_chol(kern.fn, state.hist_X, dict_X, dict_n, Linv, p)
        A, b = nystrom.embedded_stats(Z, state.hist_y, valid)
        Pinv = nystrom.ridge_inverse(A, lam)
        m = dict_n.astype(dtype)
        up = d * jnp.sum(kept).astype(dtype) + N * (m * m + m)
        down = N * d * m + N * (m * m + m)
        state = state._replace(
            dict_X=dict_X, dict_n=dict_n, Linv=Linv, g_Pinv=Pinv, g_b=b,  # every client's model now
            loc_n=jnp.zeros_like(state.loc_n), loc_var=jnp.zeros_like(state.loc_var),
            elapsed=jnp.zeros_like(state.elapsed), num_syncs=state.num_syncs + 1,
            error=state.error | jnp.where(over, ERR_DICT, 0),
        )
        return state, up, down, kept, u

    def update(state: ApproxDisKernelState, contexts, actions, rewards, active, key):
        dtype = state.g_b.dtype
        contexts = contexts.astype(dtype)
        C = state.hist_y.shape[0]
        N = contexts.shape[0]
        lam, p = state.hp["lam"], params(state)
        any_active = jnp.any(active)
        i = jnp.argmax(active).astype(jnp.int32)
        x, y = contexts[i, actions[i]], jnp.asarray(rewards[i], dtype)
        z = embed(state, x[None, :])
        _, var_g = nystrom.ridge_mean_var(z, kern.diag(x[None, :], p), state.g_Pinv,
                                          state.g_Pinv @ state.g_b, lam)
        z = z[0]
        # client i's rank-one update of (A_i + lam I)^{-1} (Sherman-Morrison) and b_i
        P_i, b_i = client_model(state, i)
        Pz = P_i @ z
        P_new = P_i - jnp.outer(Pz, Pz) / (1.0 + z @ Pz)
        room = state.hist_n < C
        ok = any_active & room
        row = jnp.where(ok, state.hist_n, C)  # an out-of-range row writes nothing
        loc_var_i = state.loc_var[i] + var_g[0]
        err = (jnp.where(any_active & ~room, ERR_HISTORY, 0)
               | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0))
        state = state._replace(
            hist_X=state.hist_X.at[row].set(x, mode="drop"), hist_y=state.hist_y.at[row].set(y, mode="drop"),
            hist_owner=state.hist_owner.at[row].set(i, mode="drop"), hist_n=state.hist_n + ok.astype(jnp.int32),
            loc_Pinv=state.loc_Pinv.at[i].set(jnp.where(ok, P_new, state.loc_Pinv[i])),  # one row, no full copy
            loc_b=state.loc_b.at[i].set(jnp.where(ok, b_i + y * z, state.loc_b[i])),
            loc_n=state.loc_n.at[i].add(ok.astype(jnp.int32)),
            loc_var=jnp.where(ok, state.loc_var.at[i].set(loc_var_i), state.loc_var),
            elapsed=state.elapsed + any_active.astype(jnp.int32), error=state.error | err,
        )
        count = state.loc_n[i] if trigger_count == "client" else state.elapsed
        trigger = ok & (count.astype(dtype) * loc_var_i > state.hp["threshold"])
        zero = jnp.zeros((), dtype)

        def quiet(s):
            return s, zero, zero, jnp.zeros((N,), jnp.int32), jnp.zeros((C,), dtype)

        state, up, down, kept, u = lax.cond(trigger, lambda s: synchronise(s, key), quiet, state)
        bad = jnp.where(state.error != 0, jnp.nan, 0.0).astype(dtype)
        info = {"comm_up": up + bad, "comm_down": down + bad, "rounds": trigger.astype(dtype),
                "trigger": trigger, "var_sum": loc_var_i, "dict_size": state.dict_n, "kept": kept,
                "rls_uniform": u, "error": state.error}
        return state, info

    return Algorithm(
        name, dict(hp0), init, select_one if one_active else select, update, capacity, resize,
        description=f"Approx-DisKernelUCB ({kern.name} kernel), Nyström dictionary re-sampled at every "
                    "synchronisation of all clients",
        sees_active=one_active, batching=batching, demand=lambda state: state.dict_n, demand_limit=dict_capacity,
    )


def rls_uniforms(key, rows: int, dtype):
    """u[rows]: u[s] = jax.random.uniform(fold_in(key, s)), the RLS draw of history position s."""
    return jax.vmap(lambda s: jax.random.uniform(jax.random.fold_in(key, s), (), dtype))(jnp.arange(rows))


ERROR_MEANINGS = {
    ERR_DICT: "the re-sampled dictionary outgrew dict_capacity; raise dict_capacity",
    ERR_HISTORY: "the history outgrew its capacity; give init a capacity of at least the horizon",
    ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE,
}


def error_message(code: int, name: str = "Approx-DisKernelUCB") -> str:
    """One line describing the error bits `code` (0: empty string)."""
    return describe_error_bits(code, name, ERROR_MEANINGS)


def check_error(error, name: str = "Approx-DisKernelUCB") -> None:
    """Raise ConfigError if a state's sticky error bits (any shape) are set."""
    raise_on_error_bits(error, name, ERROR_MEANINGS)


def check_run(output, name: str = "Approx-DisKernelUCB") -> None:
    """Raise ConfigError if a run's comm_up / comm_down (RunOutput or mapping) carry the NaN error marker."""
    raise_on_nan_comm(output, f"{name}: a capacity was exceeded (or more than one client was active at a step): "
                              "raise dict_capacity / the capacity, or rerun and call check_error(state.error)")
