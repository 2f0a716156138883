"""Synchronous and pooled kernel baselines of the asynchronous environment (Li et al., ICLR 2023, Sec. 5).

All three run in the asynchronous environment: one active client per step (`active[N]`, one
True), and the same contexts, arrivals and noise as Async-KernelUCB. The UCB uses the exact
kernel ridge quantities on the same scale as Async-KernelUCB (the variance carries 1/lam):

    mean(x) = k_x^T (K + lam I)^{-1} y,   var(x) = max(k(x, x) - k_x^T (K + lam I)^{-1} k_x, 0) / lam
    score   = mean + alpha * sqrt(var);   ties (within 1e-10 (1 + |max|)) go to the largest
    `tie_noise = jax.random.uniform(select_key, (N, K))`, as in Async-KernelUCB.

DisKernelUCB (exact, shares raw data; the exact counterpart of Approx-DisKernelUCB). Its internals
are recalled from Li et al. (NeurIPS 2022), not read from it; this module implements this reading:
    - every client holds the pooled data G of the last synchronisation (identical on all clients)
      plus its own observations since then, dD_i; it scores with exact KRR on G followed by dD_i;
    - after the active client i adds its observation, it triggers a synchronisation when
          elapsed * log( det(I + K_{G + dD_i} / lam) / det(I + K_G / lam) ) > threshold
      with elapsed = global steps since the last synchronisation, this one included
      (trigger_count="elapsed", the spec's form), or elapsed = |dD_i| (trigger_count="client",
      the count the authors' DisLinUCB code uses);
    - a synchronisation involves ALL N clients: each uploads its raw new points, the server appends
      them to G in client order (client 0's points in arrival order, then client 1's, ...) and
      sends every client the points of the others; all dD_j are cleared.
  Communication [A] (d + 1 scalars per raw point; all N clients counted, seen or not):
      up = (d + 1) * sum_j |dD_j|,   down = (d + 1) * (N - 1) * sum_j |dD_j|,   rounds = 1.
  With threshold = 0 every step synchronises and DisKernelUCB is OneKernelUCB, messages included.

OneKernelUCB: one exact KernelUCB on all clients' pooled data, every point absorbed at once.
Communication (spec B1 [A]): each active step, up = d + 1, down = (N - 1)(d + 1), rounds = 1.

NKernelUCB: N independent exact KernelUCBs (client i uses only its own data); no communication.

Exact statistics. The pooled data G live in X[C, d], y[C] with the padded INVERSE Cholesky factor
chol_inv[C, C] of K_G + lam I (kernels.linalg, grown by `inv_chol_append`, one row per point).
Client i's factor is that of G followed by dD_i; since an append writes only one row, client i
stores only the rows of its own points, loc_rows[i][B, C], and `client_factor` splices them
below the live block of chol_inv. At a synchronisation the server appends all new points to
chol_inv one by one (exact, O(C^2) a point; no fresh factorisation is needed).

Costs. `select` scores every client's K contexts (it does not know who is active): O(N K C^2) a
step for DisKernelUCB and OneKernelUCB, O(K C_i^2) a client for NKernelUCB. With the static option
`one_active=True` (the asynchronous protocol: exactly one active client per step) the algorithm
`sees_active` and `select(state, contexts, key, active)` scores client i = argmax(active) only,
O(K C^2): the same random draws (row i of the (N, K) tie noise; NKernelUCB: key split(key, N)[i]),
so client i's action is the one of the all-client select; the other clients' actions are 0 (the
runner never uses them) and the select info holds client i's quantities ([K]) and "client": i. A sync costs
O(|new points| C^2). Capacities (static) grow with the runner's doubling segments: the pooled
buffers have `capacity(spec, t_end) = t_end` rows, the per-client buffers min(t_end,
buffer_capacity) rows; `resize` pads without changing a number.

Errors are never silent (as in Async-KernelUCB): an overflow of the pooled or per-client buffers,
or a step with more than one active client, sets a sticky bit in `state.error` and turns comm_up
and comm_down into NaN from then on; `check_error(state.error)` / `check_run(output)` raise.
NKernelUCB has no error state: with one_active=True a step with more than one active client turns
that step's comm_up / comm_down (otherwise 0) into NaN, which `check_run` reports.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
from jax import lax

from kernels.functions import Kernel
from kernels.linalg import inv_chol_append, pad_chol, pad_rows, posterior_mean_var_inv

from ..core import Algorithm, ConfigError, EnvSpec, check_hparams, traced_hparams
from .async_kernel import argmax_random_ties
from .base import (MULTI_ACTIVE_MESSAGE, active_index, check_batching, check_one_active, describe_error_bits,
                   independent, one_hot_action, raise_on_error_bits, raise_on_nan_comm)
from .kernel import (DistinctKernelState, KernelState, PanelKernelState, _kernel_params, _make_distinct_learner,
                     _make_learner, _make_panel_learner, _resolve_kernel, panel_posterior, posterior)
from .linear import _float_dtype

ERR_CAPACITY = 1
ERR_BUFFER = 2
ERR_MULTI_ACTIVE = 4

TRIGGER_COUNTS = ("elapsed", "client")


# ============================================================================ DisKernelUCB
class DisKernelState(NamedTuple):
    """State of DisKernelUCB (C = pooled rows, B = per-client rows, N clients).

    hp: dict of float hyper-parameters (lam, alpha, threshold, lengthscale).
    X [C, d], y [C], n: the pooled data G of the last synchronisation (n live rows).
    chol_inv [C, C]: padded inverse Cholesky factor of K_G + lam I.
    loc_X [N, B, d], loc_y [N, B], loc_n [N]: each client's observations since the last sync.
    loc_rows [N, B, C]: row j of client i's inverse factor for its j-th new point (position n + j).
    loc_logdet [N]: log det(I + K_{G + dD_i}/lam) - log det(I + K_G/lam).
    elapsed: int32 global steps since the last sync. num_syncs: int32. error: int32 sticky bits.
    """

    hp: dict
    X: jax.Array
    y: jax.Array
    n: jax.Array
    chol_inv: jax.Array
    loc_X: jax.Array
    loc_y: jax.Array
    loc_n: jax.Array
    loc_rows: jax.Array
    loc_logdet: jax.Array
    elapsed: jax.Array
    num_syncs: jax.Array
    error: jax.Array


def dis_kernel_ucb(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    alpha=1.0,
    threshold=1.0,
    lengthscale=1.0,
    *,
    trigger_count: str = "elapsed",
    buffer_capacity: int = 256,
    one_active: bool = False,
    **kw,
) -> Algorithm:
    """DisKernelUCB (module docstring). hparams: lam > 0, alpha >= 0, threshold >= 0, lengthscale > 0.

    Static: trigger_count ("elapsed" or "client"), buffer_capacity (rows of each client's
    not-yet-synchronised data; overflow is an error, see `check_error`), one_active (score only
    the active client; module docstring).
    """
    name = "DisKernelUCB"
    kern = _resolve_kernel(name, kernel)
    check_one_active(name, one_active)
    _check_capacity(name, "buffer_capacity", buffer_capacity)
    if trigger_count not in TRIGGER_COUNTS:
        raise ConfigError(f"{name}: trigger_count must be one of {TRIGGER_COUNTS}, got {trigger_count!r}")
    defaults = {"lam": 1.0, "alpha": 1.0, "threshold": 1.0, "lengthscale": 1.0}
    hp0 = check_hparams(
        name, defaults, dict(lam=lam, alpha=alpha, threshold=threshold, lengthscale=lengthscale, **kw),
        positive=("lam", "lengthscale"), nonnegative=("alpha", "threshold"),
    )

    def capacity(spec: EnvSpec, t_end: int) -> int:
        return max(1, int(t_end))

    def _rows(rows):
        return rows, min(rows, buffer_capacity)

    def init(key, spec, hparams, cap=None):
        del key
        dtype = _float_dtype()
        hp = traced_hparams(hp0, hparams, dtype)
        C, B = _rows(capacity(spec, spec.horizon) if cap is None else int(cap))
        N, d = spec.num_agents, spec.dim
        return DisKernelState(
            hp=hp, X=jnp.zeros((C, d), dtype), y=jnp.zeros((C,), dtype), n=jnp.zeros((), jnp.int32),
            chol_inv=jnp.eye(C, dtype=dtype),
            loc_X=jnp.zeros((N, B, d), dtype), loc_y=jnp.zeros((N, B), dtype),
            loc_n=jnp.zeros((N,), jnp.int32), loc_rows=jnp.zeros((N, B, C), dtype),
            loc_logdet=jnp.zeros((N,), dtype), elapsed=jnp.zeros((), jnp.int32),
            num_syncs=jnp.zeros((), jnp.int32), error=jnp.zeros((), jnp.int32),
        )

    def resize(state: DisKernelState, rows: int) -> DisKernelState:
        C, B = _rows(int(rows))
        rows_b = jax.vmap(lambda a: pad_rows(a, B))
        loc_rows = jnp.pad(state.loc_rows, [(0, 0), (0, B - state.loc_rows.shape[1]),
                                            (0, C - state.loc_rows.shape[2])])
        return state._replace(
            X=pad_rows(state.X, C), y=pad_rows(state.y, C), chol_inv=pad_chol(state.chol_inv, C),
            loc_X=rows_b(state.loc_X), loc_y=rows_b(state.loc_y), loc_rows=loc_rows,
        )

    def params(state):
        return _kernel_params(kern.params, state.hp["lengthscale"], state.y.dtype)

    def client_mean_var(state, i, Xq):
        """Client i's exact mean[m], var[m] (var with the 1/lam factor) at Xq[m, d]."""
        return local_mean_var(kern, params(state), state.hp["lam"], *client_model(state, i), Xq)

    def select(state, contexts, key):
        contexts = contexts.astype(state.y.dtype)
        N, K = contexts.shape[:2]
        mean, var = jax.vmap(lambda i, Xq: client_mean_var(state, i, Xq))(jnp.arange(N), contexts)
        scores = mean + state.hp["alpha"] * jnp.sqrt(var)
        noise = jax.random.uniform(key, (N, K), state.y.dtype)
        return argmax_random_ties(scores, noise), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def select_one(state, contexts, key, active):
        contexts = contexts.astype(state.y.dtype)
        N, K = contexts.shape[:2]
        i = active_index(active)
        mean, var = client_mean_var(state, i, contexts[i])
        scores = mean + state.hp["alpha"] * jnp.sqrt(var)
        noise = jax.random.uniform(key, (N, K), state.y.dtype)[i]
        action = argmax_random_ties(scores, noise)
        return one_hot_action(i, action, N), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise,
                                              "client": i}

    def update(state: DisKernelState, contexts, actions, rewards, active, key):
        del key
        dtype = state.y.dtype
        contexts = contexts.astype(dtype)
        C, B = state.X.shape[0], state.loc_y.shape[1]
        lam, p = state.hp["lam"], params(state)
        any_active = jnp.any(active)
        i = jnp.argmax(active).astype(jnp.int32)
        x, y = contexts[i, actions[i]], jnp.asarray(rewards[i], dtype)
        # client i appends its point to its own factor (G followed by dD_i)
        X_i, _, M_i, n_i = client_model(state, i)
        k_col = kern.fn(x[None, :], X_i, p)[0]
        k_nn = kern.diag(x[None, :], p)[0] + lam
        m = state.loc_n[i]
        room = (m < B) & (n_i < C)
        new_factor, _, diag = inv_chol_append(M_i, jnp.minimum(n_i, C - 1), k_col, k_nn)
        new_row = new_factor[jnp.minimum(n_i, C - 1)]
        ok = any_active & room
        slot = jnp.where(ok, m, B)  # an out-of-range slot writes nothing
        logdet_i = state.loc_logdet[i] + jnp.where(ok, 2.0 * jnp.log(diag) - jnp.log(lam), 0.0)
        err = (jnp.where(any_active & ~room, jnp.where(m < B, ERR_CAPACITY, ERR_BUFFER), 0)
               | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0))
        elapsed = state.elapsed + 1
        state = state._replace(
            loc_X=state.loc_X.at[i, slot].set(x, mode="drop"),
            loc_y=state.loc_y.at[i, slot].set(y, mode="drop"),
            loc_rows=state.loc_rows.at[i, slot].set(new_row, mode="drop"),
            loc_n=state.loc_n.at[i].add(ok.astype(jnp.int32)),
            loc_logdet=state.loc_logdet.at[i].set(logdet_i),
            elapsed=elapsed, error=state.error | err,
        )
        count = elapsed if trigger_count == "elapsed" else state.loc_n[i]
        trigger = any_active & (count.astype(dtype) * logdet_i > state.hp["threshold"])
        state, moved = synchronise(kern, state, trigger)
        up, down = raw_point_comm(moved, contexts.shape[-1], contexts.shape[0], dtype)
        bad = jnp.where(state.error != 0, jnp.nan, 0.0).astype(dtype)
        info = {"comm_up": up + bad, "comm_down": down + bad, "rounds": trigger.astype(dtype),
                "trigger": trigger, "logdet_ratio": logdet_i, "n_global": state.n, "error": state.error}
        return state, info

    return Algorithm(
        name, dict(hp0), init, select_one if one_active else select, update, capacity, resize,
        description=f"DisKernelUCB ({kern.name} kernel), exact, event-triggered sync of all clients' raw data",
        sees_active=one_active,
    )


# ------------------------------------------------------------------------ DisKernelUCB pieces
def client_model(state: DisKernelState, i):
    """Client i's exact model: (X_i [C, d], y_i [C], chol_inv_i [C, C], n_i), i.e. G followed by dD_i.

    Rows n..n+|dD_i|-1 of the pooled buffers and of the inverse factor are replaced by client i's
    own rows; the rest (the live block of G, the identity padding) is shared. O(C^2).
    """
    return splice_local(state.X, state.y, state.chol_inv, state.n,
                        state.loc_X[i], state.loc_y[i], state.loc_rows[i], state.loc_n[i])


def splice_local(X, y, chol_inv, n, loc_X, loc_y, loc_rows, loc_n):
    """Rows r in [n, n + loc_n) of (X[C, d], y[C], chol_inv[C, C]) taken from (loc_X, loc_y, loc_rows)[r - n].

    loc_X[B, d], loc_y[B], loc_rows[B, C]. Returns (X', y', chol_inv', n + loc_n).
    """
    C, B = X.shape[0], loc_y.shape[0]
    r = jnp.arange(C)
    mine = (r >= n) & (r < n + loc_n)
    j = jnp.clip(r - n, 0, B - 1)
    X = jnp.where(mine[:, None], loc_X[j], X)
    y = jnp.where(mine, loc_y[j], y)
    chol_inv = jnp.where(mine[:, None], loc_rows[j], chol_inv)
    return X, y, chol_inv, n + loc_n


def local_mean_var(kern: Kernel, params, lam, X, y, chol_inv, n, Xq):
    """Exact KRR mean[m] and var[m] = (k(x,x) - k_x^T (K + lam I)^{-1} k_x)/lam at Xq[m, d].

    X[C, d], y[C], chol_inv[C, C] (padded inverse factor of K_n + lam I), n live rows.
    """
    Xq = Xq.astype(y.dtype)
    mean, var = posterior_mean_var_inv(chol_inv, kern.fn(Xq, X, params), kern.diag(Xq, params), y, n)
    return mean, var / lam


def append_points(kern: Kernel, params, lam, X, y, chol_inv, n, new_X, new_y, count):
    """Append new_X[:count], new_y[:count] (in order) to pooled data with one inverse-factor row each.

    X[C, d], y[C], chol_inv[C, C], n; new_X[P, d], new_y[P]; count <= P (traced). Points that do
    not fit (row >= C) are not written. Returns (X, y, chol_inv, n + count). O(count C^2);
    under vmap the loop runs the batch's largest count.
    """
    C = X.shape[0]

    def body(carry):
        j, X, y, M = carry
        x = new_X[j]
        row = n + j
        k_col = kern.fn(x[None, :], X, params)[0]
        k_nn = kern.diag(x[None, :], params)[0] + lam
        M, _, _ = inv_chol_append(M, jnp.where(row < C, row, C), k_col, k_nn)
        X = X.at[row].set(x, mode="drop")
        y = y.at[row].set(new_y[j], mode="drop")
        return j + 1, X, y, M

    _, X, y, chol_inv = lax.while_loop(lambda c: c[0] < count, body, (jnp.zeros((), jnp.int32), X, y, chol_inv))
    return X, y, chol_inv, n + count


def compact(valid, *arrays):
    """Move the rows where valid[P] to the front, in order. arrays[P, ...] -> (count, arrays)."""
    P = valid.shape[0]
    pos = jnp.where(valid, jnp.cumsum(valid) - 1, P)
    out = tuple(jnp.zeros_like(a).at[pos].set(a, mode="drop") for a in arrays)
    return jnp.sum(valid).astype(jnp.int32), out


def synchronise(kern: Kernel, state: DisKernelState, trigger):
    """If trigger: append every client's new data to G (client order), clear all dD_i.

    Returns (state, moved): moved = number of raw points uploaded (0 without a sync).
    """
    N, B, d = state.loc_X.shape
    C = state.X.shape[0]
    valid = (jnp.arange(B)[None, :] < state.loc_n[:, None]).reshape(-1)
    total, (new_X, new_y) = compact(valid, state.loc_X.reshape(N * B, d), state.loc_y.reshape(-1))
    count = jnp.where(trigger, total, 0)
    p = _kernel_params(kern.params, state.hp["lengthscale"], state.y.dtype)
    X, y, chol_inv, n = append_points(kern, p, state.hp["lam"], state.X, state.y, state.chol_inv, state.n,
                                      new_X, new_y, count)
    over = n > C
    state = state._replace(
        X=X, y=y, chol_inv=chol_inv, n=jnp.minimum(n, C),
        loc_n=jnp.where(trigger, 0, state.loc_n),
        loc_logdet=jnp.where(trigger, 0.0, state.loc_logdet),
        elapsed=jnp.where(trigger, 0, state.elapsed),
        num_syncs=state.num_syncs + trigger.astype(jnp.int32),
        error=state.error | jnp.where(over, ERR_CAPACITY, 0),
    )
    return state, count


def raw_point_comm(moved, d: int, N: int, dtype):
    """(up, down) scalars when `moved` raw points (d + 1 scalars each) reach all N clients."""
    moved = jnp.asarray(moved, dtype)
    return (d + 1) * moved, (d + 1) * (N - 1) * moved


# ============================================================================ OneKernelUCB
class OneKernelState(NamedTuple):
    """State of OneKernelUCB: the pooled model (kernel.PanelKernelState; kernel.KernelState with
    storage="dense", kernel.DistinctKernelState with storage="distinct") and sticky error bits."""

    model: Union[KernelState, PanelKernelState, DistinctKernelState]
    error: jax.Array


def _ucb_defaults(name, kernel, lam, alpha, lengthscale, kw):
    kern = _resolve_kernel(name, kernel)
    defaults = {"lam": 1.0, "alpha": 1.0, "lengthscale": 1.0}
    hp = check_hparams(name, defaults, dict(lam=lam, alpha=alpha, lengthscale=lengthscale, **kw),
                       positive=("lam", "lengthscale"), nonnegative=("alpha",))
    return kern, hp


def scaled_ucb_scores(kern: Kernel, model: KernelState, contexts):
    """(mean[K], var[K], scores[K]) of one kernel.KernelState at contexts[K, d], var with 1/lam."""
    return _scaled_ucb(model, *posterior(kern, model, contexts))


def _scaled_ucb(model, mean, var):
    """(mean, var / lam, mean + alpha sqrt(var / lam)) with the model's hyper-parameters."""
    var = var / model.hp["lam"]
    return mean, var, mean + model.hp["alpha"] * jnp.sqrt(var)


STORAGES = ("panels", "dense", "distinct")


def one_kernel_ucb(kernel: Union[str, Kernel] = "rbf", lam=1.0, alpha=1.0, lengthscale=1.0, *,
                   one_active: bool = False, storage: str = "panels", block: int = 1024, pending: int = 64,
                   distinct_capacity: int = 64, batching: Optional[str] = None, **kw) -> Algorithm:
    """OneKernelUCB (spec B1): one exact KernelUCB on the pooled data of all clients.

    hparams: lam > 0, alpha >= 0, lengthscale > 0. A step costs O(N K t^2), or O(K t^2) with the
    static one_active=True, which scores the active client only (module docstring).

    Static storage of the inverse factor (the numbers are the same, to rounding):
      "panels" (default): row panels of `block` rows (kernels.panels) holding only the lower
          triangle, with a capacity of the horizon (rounded up to the panel height) from the start;
          panels beyond the live rows are skipped, so a step at time t reads ~t^2 / 2 numbers.
          New rows wait in a block of `pending` and are written together, and the update reuses
          select's column for the chosen context, so a step makes ONE pass over the triangle (the
          product with the K contexts and y). Default batching "map": the skipping and the block
          writes are lax.conds, which under vmap would run both branches at every step.
      "dense": a [C, C] buffer grown by the runner's doubling segments (`capacity(spec, t_end) =
          t_end` rows); a step reads C^2 numbers, C <= 2 t. Default batching "vmap".
      "distinct": for problems whose contexts come from a finite set (the k-means arms of the UCI
          environments): the distinct points seen, at most `distinct_capacity`, with their counts
          and reward sums (kernel.distinct_posterior), O(m^3) a step for m distinct points instead
          of O(t^2). Exact, not an approximation: KRR on repeated points equals this form. More
          distinct points than distinct_capacity is an overflow (the error bit, NaN communication).
          Default batching "vmap".
    """
    name = "OneKernelUCB"
    kern, hp0 = _ucb_defaults(name, kernel, lam, alpha, lengthscale, kw)
    check_one_active(name, one_active)
    if storage not in STORAGES:
        raise ConfigError(f"{name}: storage must be one of {STORAGES}, got {storage!r}")
    _check_capacity(name, "block", block)
    _check_capacity(name, "pending", pending)
    batching = check_batching(name, batching or ("map" if storage == "panels" else "vmap"))
    _check_capacity(name, "distinct_capacity", distinct_capacity)
    if storage == "panels":
        init1, update1, capacity1, resize1 = _make_panel_learner(kern, hp0, block, pending)
    elif storage == "dense":
        init1, update1, capacity1, resize1 = _make_learner(kern, hp0, None)
    else:
        init1, update1, capacity1, resize1, has_room = _make_distinct_learner(kern, hp0, distinct_capacity)

    def init(key, spec, hparams, cap=None):
        return OneKernelState(init1(key, spec, hparams, cap), jnp.zeros((), jnp.int32))

    def select(state, contexts, key):
        mean, var, scores = jax.vmap(lambda c: scaled_ucb_scores(kern, state.model, c))(contexts)
        noise = jax.random.uniform(key, scores.shape, scores.dtype)
        return argmax_random_ties(scores, noise), {"mean": mean, "var": var, "scores": scores, "tie_noise": noise}

    def select_one(state, contexts, key, active):
        N, K = contexts.shape[:2]
        i = active_index(active)
        if storage == "panels":  # keep the chosen context's column for update1 (one pass fewer)
            mean, var, cols = panel_posterior(kern, state.model, contexts[i])
            mean, var, scores = _scaled_ucb(state.model, mean, var)
        else:
            mean, var, scores = scaled_ucb_scores(kern, state.model, contexts[i])
        noise = jax.random.uniform(key, (N, K), scores.dtype)[i]
        action = argmax_random_ties(scores, noise)
        info = {"mean": mean, "var": var, "scores": scores, "tie_noise": noise, "client": i}
        if storage == "panels":
            info["_column"] = cols[:, action]
        return one_hot_action(i, action, N), info

    def update(state, contexts, actions, rewards, active, key, select_info=None):
        model = state.model
        dtype = (model.sums if storage == "distinct" else model.y).dtype
        N, _, d = contexts.shape
        any_active = jnp.any(active)
        i = jnp.argmax(active)
        x = contexts[i, actions[i]]
        room = has_room(model, x)[0] if storage == "distinct" else model.n < model.y.shape[0]
        # a step without an active client writes nothing (a where over the state would copy it)
        if select_info is not None and "_column" in select_info:
            model = update1(model, x, rewards[i], key, keep=any_active, l=select_info["_column"])
        else:
            model = update1(model, x, rewards[i], key, keep=any_active)
        err = state.error | (jnp.where(any_active & ~room, ERR_CAPACITY, 0)
                             | jnp.where(jnp.sum(active) > 1, ERR_MULTI_ACTIVE, 0))
        up, down = raw_point_comm(any_active, d, N, dtype)
        bad = jnp.where(err != 0, jnp.nan, 0.0).astype(dtype)
        info = {"comm_up": up + bad, "comm_down": down + bad, "rounds": any_active.astype(dtype), "error": err}
        return OneKernelState(model, err), info

    def resize(state, rows):
        return state._replace(model=resize1(state.model, rows))

    return Algorithm(name, dict(hp0), init, select_one if one_active else select, update, capacity1,
                     None if capacity1 is None else resize,
                     description=f"OneKernelUCB ({kern.name} kernel), one exact model on all clients' data",
                     sees_active=one_active, batching=batching,
                     update_sees_select=one_active and storage == "panels")


# ============================================================================ NKernelUCB
def n_kernel_ucb(kernel: Union[str, Kernel] = "rbf", lam=1.0, alpha=1.0, lengthscale=1.0, *,
                 one_active: bool = False, **kw) -> Algorithm:
    """NKernelUCB (spec B2): N independent exact KernelUCBs, no communication.

    hparams as `one_kernel_ucb`. The select key is split into N per-client keys; client i's
    tie_noise is jax.random.uniform(keys[i], (K,)). Per-client histories have t_end rows.
    Static one_active: score the active client only (`base.independent`); a step with more than
    one active client then has NaN comm_up / comm_down.
    """
    name = "NKernelUCB"
    kern, hp0 = _ucb_defaults(name, kernel, lam, alpha, lengthscale, kw)
    init1, update1, capacity1, resize1 = _make_learner(kern, hp0, None)

    def select1(state, contexts, key):
        _, _, scores = scaled_ucb_scores(kern, state, contexts)
        return argmax_random_ties(scores, jax.random.uniform(key, scores.shape, scores.dtype))

    return independent(name, hp0, init1, select1, update1, capacity1, resize1,
                       description=f"NKernelUCB ({kern.name} kernel), one exact model per client, no communication",
                       one_active=one_active)


# ============================================================================ errors
def _check_capacity(name, cap_name, cap):
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ConfigError(f"{name}: {cap_name} must be a positive integer, got {cap!r}")


ERROR_MEANINGS = {
    ERR_CAPACITY: "the pooled data outgrew its capacity; give init a capacity of at least the horizon",
    ERR_BUFFER: "a client's unsynchronised data outgrew buffer_capacity; raise buffer_capacity "
                "(or lower the threshold)",
    ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE,
}


def error_message(code: int, name: str = "DisKernelUCB") -> str:
    """One line describing the error bits `code` (0: empty string)."""
    return describe_error_bits(code, name, ERROR_MEANINGS)


def check_error(error, name: str = "DisKernelUCB") -> None:
    """Raise ConfigError if a state's sticky error bits (any shape) are set."""
    raise_on_error_bits(error, name, ERROR_MEANINGS)


def check_run(output, name: str = "DisKernelUCB") -> None:
    """Raise ConfigError if a run's comm_up / comm_down (RunOutput or mapping) carry the NaN error marker."""
    raise_on_nan_comm(output, f"{name}: a buffer capacity was exceeded (or more than one client was active at a "
                              "step): raise buffer_capacity / the capacity, or rerun and call check_error(state.error)")
