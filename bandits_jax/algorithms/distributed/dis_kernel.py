"""Synchronous and pooled kernel baselines of the asynchronous environment (Li et al., ICLR 2023, Sec. 5).

DisKernelUCB, OneKernelUCB and NKernelUCB, with the exact kernel ridge quantities on the scale of
Async-KernelUCB (the variance carries 1/lam), ties to the largest `tie_noise` (`base.argmax_random_ties`):

    mean(x) = k_x^T (K + lam I)^{-1} y,   var(x) = max(k(x, x) - k_x^T (K + lam I)^{-1} k_x, 0) / lam
    score   = mean + alpha * sqrt(var)

DisKernelUCB (exact, shares raw data; internals recalled from Li et al., NeurIPS 2022): every
client holds the pooled data G of the last synchronisation plus its own new points dD_i, and
triggers a synchronisation of all N clients when
    elapsed * log( det(I + K_{G + dD_i} / lam) / det(I + K_G / lam) ) > threshold;
communication [A] in scalars per receiver (`core.COMM_UNIT`): every new point is uploaded once and
forwarded to the N - 1 clients that lack it, up = (d + 1) sum_j |dD_j|, down = (d + 1)(N - 1) sum_j |dD_j|,
rounds = 1 (`dis_protocol.raw_point_comm`). Two registered variants: `dis_kernel_ucb` and
`dis_kernel_ucb_duets` (the DUETS paper's baseline, spec duets §4.2: every client acts each step,
unscaled variance, first-index ties; storage "candidates" in `candidate_kernel`), which counts the same
and keeps the DUETS paper's count as the diagnostic comm_paper, the authors' code's as comm_code.
OneKernelUCB: one exact KernelUCB on all pooled data (storage `kernel.LEARNERS`); up = d + 1,
down = (N - 1)(d + 1) per active step (spec B1 [A]). NKernelUCB: N independent KernelUCBs, no
communication.

State: pooled X [C, d], y [C] and the padded inverse Cholesky factor chol_inv [C, C] of K_G + lam I
(C = t_end rows); per client the factor rows of its own points, loc_rows [N, B, C]. Errors:
ERR_CAPACITY, ERR_BUFFER, more than one active client (`Algorithm.errors`).

Walk-through: docs/algorithms/dis_kernel.md.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels.functions import Kernel
from bandits_jax.kernels.linalg import inv_chol_append, pad_chol, pad_rows, posterior_mean_var_inv

from ...core import Algorithm, EnvSpec, Sizes, Sizing, flat_uniform, float_dtype, report
from . import candidate_kernel
from ..base import (ERR_MULTI_ACTIVE, MULTI_ACTIVE_MESSAGE, argmax_or_uniform, argmax_random_ties, check_capacity,
                   check_static, independent, kernel_args, multi_active_error, resolve_kernel, scaled_ucb,
                   signed_params, ucb_select)
from .dis_protocol import (BUFFER_MESSAGE, CAPACITY_MESSAGE, ERR_BUFFER, ERR_CAPACITY, LOCK_STEP_VMAP, async_rows,
                           duets_report, duets_rows, duets_trigger, raw_point_comm)
from ..single.kernel import (LEARNERS, STORAGES, KernelConfig, KernelState, Learner, init1, posterior, resize1, rows1,
                             update1)

DISTINCT_MESSAGE = "more distinct contexts than distinct_capacity; raise distinct_capacity"

TRIGGER_COUNTS = ("elapsed", "client")
DIS_STORAGES = ("rows", "candidates")
UCB_SIGNS = {"lam": "positive", "alpha": "nonnegative", "lengthscale": "positive"}
# threshold inf: never synchronise (the DUETS paper's N-KernelUCB runs DisKernelUCB so)
DIS_SIGNS = {"lam": "positive", "alpha": "nonnegative", "threshold": "trigger", "lengthscale": "positive"}


# ============================================================================ DisKernelUCB
class DisKernelConfig(NamedTuple):
    """Static options of DisKernelUCB (both variants): the kernel, trigger_count, buffer_capacity."""

    kernel: Kernel
    trigger_count: str
    buffer_capacity: int


class DisKernelState(NamedTuple):
    """State of DisKernelUCB (C = pooled rows, B = per-client rows, N clients).

    X [C, d], y [C], n: the pooled data G of the last synchronisation (n live rows).
    chol_inv [C, C]: padded inverse Cholesky factor of K_G + lam I.
    loc_X [N, B, d], loc_y [N, B], loc_n [N]: each client's observations since the last sync.
    loc_rows [N, B, C]: row j of client i's inverse factor for its j-th new point (position n + j).
    loc_logdet [N]: log det(I + K_{G + dD_i}/lam) - log det(I + K_G/lam).
    elapsed: int32 global steps since the last sync. num_syncs: int32.
    """

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


def dis_init(config: DisKernelConfig, rows, key, spec: EnvSpec, params, sizes: Sizes, public=None) -> DisKernelState:
    """No data: C = sizes.rows pooled rows (default rows(spec, horizon), `dis_protocol.async_rows` or
    `duets_rows`), B = min(C, buffer_capacity) rows per client."""
    del key, params, public
    dtype = float_dtype()
    C = rows(spec, spec.horizon) if sizes.rows is None else int(sizes.rows)
    B = min(C, config.buffer_capacity)
    N, d = spec.num_agents, spec.dim
    return DisKernelState(
        X=jnp.zeros((C, d), dtype), y=jnp.zeros((C,), dtype), n=jnp.zeros((), jnp.int32),
        chol_inv=jnp.eye(C, dtype=dtype),
        loc_X=jnp.zeros((N, B, d), dtype), loc_y=jnp.zeros((N, B), dtype),
        loc_n=jnp.zeros((N,), jnp.int32), loc_rows=jnp.zeros((N, B, C), dtype),
        loc_logdet=jnp.zeros((N,), dtype), elapsed=jnp.zeros((), jnp.int32), num_syncs=jnp.zeros((), jnp.int32),
    )


def async_select(config: DisKernelConfig, params, state: DisKernelState, step, key):
    """Every client (or the active one) scores with exact KRR on G followed by its own dD_i, the
    variance with 1/lam, ties to the largest tie noise (`base.ucb_select`)."""

    def client(i, Xq):
        X, y, chol_inv, n = client_model(state, i)
        mean, var = local_mean_var(config.kernel, params, X, y, chol_inv, n, Xq)
        return mean, var, mean + params["alpha"] * jnp.sqrt(var), None

    return ucb_select(step, key, state.y.dtype, client)


def duets_select(config: DisKernelConfig, params, state: DisKernelState, step, key):
    """Every client scores the SAME contexts (a public candidate set, step.contexts[0]) with the
    unscaled variance; first-index ties, `base.uniform_arms` for a client with no data."""
    mean, var = clients_mean_var(config.kernel, params, state, step.contexts[0])
    scores = mean + params["alpha"] * jnp.sqrt(var)
    actions = argmax_or_uniform(key, scores, (state.n + state.loc_n) == 0, state.y.dtype)
    return actions, {"mean": mean, "var": var, "scores": scores}


def async_update(config: DisKernelConfig, params, state: DisKernelState, step, actions, rewards, aux, key):
    """The active client appends its point to its own factor; its trigger synchronises everyone."""
    del aux, key
    dtype = state.y.dtype
    contexts, active = step.contexts.astype(dtype), step.active
    N, _, d = contexts.shape
    any_active = jnp.any(active)
    i = jnp.argmax(active).astype(jnp.int32)
    state, logdet_i, err = client_append(config, params, state, i, contexts[i, actions[i]],
                                         jnp.asarray(rewards[i], dtype), any_active)
    count = state.elapsed if config.trigger_count == "elapsed" else state.loc_n[i]
    trigger = any_active & (count.astype(dtype) * logdet_i > params["threshold"])
    state, moved, over = synchronise(config.kernel, params, state, trigger)
    up, down = raw_point_comm(moved, d, N, dtype)
    errors = err | jnp.where(over, ERR_CAPACITY, 0) | multi_active_error(active)
    return state, report(dtype, up, down, trigger, errors=errors, trigger=trigger, logdet_ratio=logdet_i,
                         n_global=state.n, num_syncs=state.num_syncs)


def duets_update(config: DisKernelConfig, params, state: DisKernelState, step, actions, rewards, aux, key):
    """Every active client appends its point (client order); ANY client's trigger synchronises
    everyone; communication as `async_update` counts it, the paper's count a diagnostic (module docstring)."""
    del aux, key
    dtype = state.y.dtype
    contexts, active = step.contexts.astype(dtype), step.active
    N, _, d = contexts.shape
    elapsed = state.elapsed + 1

    def append(i, carry):
        state, logdets, err = carry
        state, logdet_i, e = client_append(config, params, state, i, contexts[i, actions[i]],
                                           jnp.asarray(rewards[i], dtype), active[i])
        return state, logdets.at[i].set(logdet_i), err | e

    state, logdets, err = lax.fori_loop(0, N, append, (state, jnp.zeros((N,), dtype), jnp.zeros((), jnp.int32)))
    state = state._replace(elapsed=elapsed)
    trigger = duets_trigger(config, params, active, elapsed, state.loc_n, logdets)
    state, moved, over = synchronise(config.kernel, params, state, trigger)
    errors = err | jnp.where(over, ERR_CAPACITY, 0)
    return state, duets_report(dtype, d, N, moved, trigger, errors, logdets, state.n, state.num_syncs)


def dis_resize(config: DisKernelConfig, params, state: DisKernelState, sizes: Sizes) -> DisKernelState:
    """Pad the pooled buffers to sizes.rows and the per-client ones to min(rows, buffer_capacity)."""
    del params
    C = int(sizes.rows)
    B = min(C, config.buffer_capacity)
    rows_b = jax.vmap(lambda a: pad_rows(a, B))
    loc_rows = jnp.pad(state.loc_rows, [(0, 0), (0, B - state.loc_rows.shape[1]), (0, C - state.loc_rows.shape[2])])
    return state._replace(X=pad_rows(state.X, C), y=pad_rows(state.y, C), chol_inv=pad_chol(state.chol_inv, C),
                          loc_X=rows_b(state.loc_X), loc_y=rows_b(state.loc_y), loc_rows=loc_rows)


def dis_kernel_ucb(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    alpha=1.0,
    threshold=1.0,
    lengthscale=1.0,
    *,
    trigger_count: str = "elapsed",
    buffer_capacity: int = 256,
) -> Algorithm:
    """DisKernelUCB in the asynchronous environment of Li et al. 2023, one active client a step.

    Module docstring; params: lam > 0, alpha >= 0, threshold >= 0, lengthscale > 0.

    Static: trigger_count ("elapsed" or "client"), buffer_capacity (rows of each client's
    not-yet-synchronised data; overflow is the error ERR_BUFFER).
    """
    name = "DisKernelUCB"
    config = dis_config(name, kernel, trigger_count, buffer_capacity)
    given = dict(lam=lam, alpha=alpha, threshold=threshold, lengthscale=lengthscale)
    return Algorithm(
        name, signed_params(name, DIS_SIGNS, given), partial(dis_init, config, async_rows),
        partial(async_select, config), partial(async_update, config),
        Sizing(async_rows, partial(dis_resize, config)),
        {ERR_CAPACITY: CAPACITY_MESSAGE, ERR_BUFFER: BUFFER_MESSAGE, ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE},
        f"DisKernelUCB ({config.kernel.name} kernel), exact, event-triggered sync of all clients' raw data",
        cpu_vmap=LOCK_STEP_VMAP, one_active=True,
    )


def dis_kernel_ucb_duets(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    alpha=1.0,
    threshold=1.0,
    lengthscale=1.0,
    *,
    trigger_count: str = "elapsed",
    buffer_capacity: int = 256,
    storage: str = "rows",
) -> Algorithm:
    """DisKernelUCB as the DUETS paper's baseline, every client acting at every step.

    params and trigger_count, buffer_capacity as `dis_kernel_ucb`.

    storage: "rows" (the points themselves, this module) or "candidates" (on a problem with a public
    candidate set, the posterior over the candidates and each client's new points by distinct
    candidate, `candidate_kernel`: the same numbers to rounding, at a cost bounded by the number of
    candidates instead of the points seen; buffer_capacity then counts a client's distinct candidates
    since the last synchronisation).
    """
    name = "DisKernelUCB"
    config = dis_config(name, kernel, trigger_count, buffer_capacity)
    params = signed_params(name, DIS_SIGNS, dict(lam=lam, alpha=alpha, threshold=threshold, lengthscale=lengthscale))
    kern = config.kernel.name
    if check_static(name, "storage", storage, DIS_STORAGES) == "candidates":
        cand = candidate_kernel
        return Algorithm(
            name, params, partial(cand.init, config), partial(cand.select, config), partial(cand.update, config),
            cand.slot_sizing(config, ERR_BUFFER), {ERR_BUFFER: BUFFER_MESSAGE},
            f"DisKernelUCB ({kern} kernel), exact, kept over the public candidates, event-triggered sync",
            cpu_vmap=LOCK_STEP_VMAP)
    return Algorithm(
        name, params, partial(dis_init, config, duets_rows), partial(duets_select, config),
        partial(duets_update, config), Sizing(duets_rows, partial(dis_resize, config)),
        {ERR_CAPACITY: CAPACITY_MESSAGE, ERR_BUFFER: BUFFER_MESSAGE},
        f"DisKernelUCB ({kern} kernel), exact, every client acting, event-triggered sync of all clients' raw data",
        cpu_vmap=LOCK_STEP_VMAP,
    )


def dis_config(name: str, kernel, trigger_count: str, buffer_capacity: int) -> DisKernelConfig:
    """The checked static options of either variant."""
    return DisKernelConfig(resolve_kernel(name, kernel),
                           check_static(name, "trigger_count", trigger_count, TRIGGER_COUNTS),
                           check_capacity(name, "buffer_capacity", buffer_capacity))


# ------------------------------------------------------------------------ DisKernelUCB pieces
def client_append(config: DisKernelConfig, params, state: DisKernelState, i, x, y, any_active):
    """Client i appends (x, y) to its own factor (G followed by dD_i) when any_active and it has room.

    Returns (state with elapsed + 1, client i's log-det ratio, error bits ERR_CAPACITY / ERR_BUFFER).
    """
    C, B = state.X.shape[0], state.loc_y.shape[1]
    lam, p = params["lam"], kernel_args(config.kernel, params, state.y.dtype)
    X_i, _, M_i, n_i = client_model(state, i)
    k_col = config.kernel.fn(x[None, :], X_i, p)[0]
    k_nn = config.kernel.diag(x[None, :], p)[0] + lam
    m = state.loc_n[i]
    room = (m < B) & (n_i < C)
    new_factor, _, diag = inv_chol_append(M_i, jnp.minimum(n_i, C - 1), k_col, k_nn)
    new_row = new_factor[jnp.minimum(n_i, C - 1)]
    ok = any_active & room
    slot = jnp.where(ok, m, B)  # an out-of-range slot writes nothing
    logdet_i = state.loc_logdet[i] + jnp.where(ok, 2.0 * jnp.log(diag) - jnp.log(lam), 0.0)
    err = jnp.where(any_active & ~room, jnp.where(m < B, ERR_CAPACITY, ERR_BUFFER), 0)
    state = state._replace(
        loc_X=state.loc_X.at[i, slot].set(x, mode="drop"),
        loc_y=state.loc_y.at[i, slot].set(y, mode="drop"),
        loc_rows=state.loc_rows.at[i, slot].set(new_row, mode="drop"),
        loc_n=state.loc_n.at[i].add(ok.astype(jnp.int32)),
        loc_logdet=state.loc_logdet.at[i].set(logdet_i),
        elapsed=state.elapsed + 1,
    )
    return state, logdet_i, err


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


def local_mean_var(kern: Kernel, params, X, y, chol_inv, n, Xq):
    """Exact KRR mean[m] and var[m] = (k(x,x) - k_x^T (K + lam I)^{-1} k_x)/lam at Xq[m, d].

    X[C, d], y[C], chol_inv[C, C] (padded inverse factor of K_n + lam I), n live rows.
    """
    Xq = Xq.astype(y.dtype)
    p = kernel_args(kern, params, y.dtype)
    mean, var = posterior_mean_var_inv(chol_inv, kern.fn(Xq, X, p), kern.diag(Xq, p), y, n)
    return mean, var / params["lam"]


def clients_mean_var(kern: Kernel, params, state: DisKernelState, Xq):
    """Every client's exact mean[N, m] and unscaled var[N, m] at the SAME queries Xq[m, d] (a public
    candidate set). Rows < n of each client's inverse factor are G's, so G's part V_G = L_G^{-1} k_G(Xq)
    is computed once, O(C^2 m); client i adds the rows of its own points (loc_rows[i], whose columns
    n + j hold its j-th point), O(B C m)."""
    dtype = state.y.dtype
    p = kernel_args(kern, params, dtype)
    C, B = state.X.shape[0], state.loc_y.shape[1]
    Xq = Xq.astype(dtype)
    pooled = jnp.arange(C) < state.n
    KG = jnp.where(pooled[:, None], kern.fn(state.X, Xq, p), 0.0)
    sol = state.chol_inv @ jnp.concatenate([KG, jnp.where(pooled, state.y, 0.0)[:, None]], axis=1)
    VG, wG = sol[:, :-1], sol[:, -1]
    mean_g, left = VG.T @ wG, kern.diag(Xq, p) - jnp.sum(VG * VG, axis=0)
    cols = state.n + jnp.arange(B)

    def client(i):
        live = jnp.arange(B) < state.loc_n[i]
        R = jnp.where(live[:, None], state.loc_rows[i], 0.0)
        R_own = jnp.where((cols < C)[None, :], R[:, jnp.minimum(cols, C - 1)], 0.0)
        KL = jnp.where(live[:, None], kern.fn(state.loc_X[i], Xq, p), 0.0)
        V = R @ KG + R_own @ KL
        w = R @ jnp.where(pooled, state.y, 0.0) + R_own @ jnp.where(live, state.loc_y[i], 0.0)
        return mean_g + V.T @ w, jnp.maximum(left - jnp.sum(V * V, axis=0), 0.0)

    return jax.vmap(client)(jnp.arange(state.loc_n.shape[0]))


def append_points(kern: Kernel, params, X, y, chol_inv, n, new_X, new_y, count):
    """Append new_X[:count], new_y[:count] (in order) to pooled data with one inverse-factor row each.

    X[C, d], y[C], chol_inv[C, C], n; new_X[P, d], new_y[P]; count <= P (traced). Points that do
    not fit (row >= C) are not written. Returns (X, y, chol_inv, n + count). O(count C^2);
    under vmap the loop runs the batch's largest count (0 at a step without a sync).
    """
    C = X.shape[0]
    lam, p = params["lam"], kernel_args(kern, params, y.dtype)

    def body(carry):
        j, X, y, M = carry
        x = new_X[j]
        row = n + j
        k_col = kern.fn(x[None, :], X, p)[0]
        k_nn = kern.diag(x[None, :], p)[0] + lam
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


def synchronise(kern: Kernel, params, state: DisKernelState, trigger):
    """If trigger: append every client's new data to G (client order), clear all dD_i.

    Returns (state, moved, over): moved = number of raw points uploaded (0 without a sync), over:
    the pooled buffers were outgrown.
    """
    N, B, d = state.loc_X.shape
    C = state.X.shape[0]
    valid = (jnp.arange(B)[None, :] < state.loc_n[:, None]).reshape(-1)
    total, (new_X, new_y) = compact(valid, state.loc_X.reshape(N * B, d), state.loc_y.reshape(-1))
    count = jnp.where(trigger, total, 0)
    X, y, chol_inv, n = append_points(kern, params, state.X, state.y, state.chol_inv, state.n, new_X, new_y, count)
    state = state._replace(
        X=X, y=y, chol_inv=chol_inv, n=jnp.minimum(n, C),
        loc_n=jnp.where(trigger, 0, state.loc_n),
        loc_logdet=jnp.where(trigger, 0.0, state.loc_logdet),
        elapsed=jnp.where(trigger, 0, state.elapsed),
        num_syncs=state.num_syncs + trigger.astype(jnp.int32),
    )
    return state, count, n > C


# ============================================================================ OneKernelUCB
def one_init(model: KernelConfig, learner: Learner, key, spec: EnvSpec, params, sizes: Sizes, public=None):
    """The pooled model with no data, in the learner's storage."""
    del public
    return learner.init(model, key, spec, params, sizes.rows)


def one_select(model: KernelConfig, learner: Learner, params, state, step, key):
    """Every client (or the active one) scores with the pooled model. With the panels learner the
    one-active aux also keeps the chosen context's column L^{-1} k(X, x) for update (one pass fewer)."""

    def client(i, Xq):
        del i
        mean, var, cols = learner.posterior(model.kernel, params, state, Xq)
        return (*scaled_ucb(params, mean, var), cols)

    return ucb_select(step, key, learner.dtype(state), client)


def one_update(model: KernelConfig, learner: Learner, params, state, step, actions, rewards, aux, key):
    """The active client's point joins the pooled model; it is sent up and to every other client."""
    dtype = learner.dtype(state)
    N, _, d = step.contexts.shape
    any_active = jnp.any(step.active)
    i = jnp.argmax(step.active)
    x = step.contexts[i, actions[i]]
    room = learner.has_room(state, x)
    # a step without an active client writes nothing (a where over the state would copy it)
    state = learner.update(model, params, state, x, rewards[i], key, keep=any_active, l=aux.get("column"))
    errors = jnp.where(any_active & ~room, ERR_CAPACITY, 0) | multi_active_error(step.active)
    up, down = raw_point_comm(any_active, d, N, dtype)
    return state, report(dtype, up, down, any_active, errors=errors)


def scaled_ucb_scores(kern: Kernel, params, model: KernelState, contexts):
    """(mean[K], var[K], scores[K]) of one dense kernel model at contexts[K, d], var with 1/lam."""
    return scaled_ucb(params, *posterior(kern, params, model, contexts))


def one_kernel_ucb(kernel: Union[str, Kernel] = "rbf", lam=1.0, alpha=1.0, lengthscale=1.0, *,
                   storage: str = "panels", block: int = 1024, pending: int = 64,
                   distinct_capacity: int = 64) -> Algorithm:
    """OneKernelUCB (spec B1): one exact KernelUCB on the pooled data of all clients.

    params: lam > 0, alpha >= 0, lengthscale > 0. A step costs O(N K t^2), or O(K t^2) under a
    one-active protocol, which scores the active client only (module docstring).

    Static storage of the inverse factor (the numbers are the same, to rounding):
      "panels" (default): row panels of `block` rows (kernels.panels) holding only the lower
          triangle, with a capacity of the horizon (rounded up to the panel height) from the start;
          panels beyond the live rows are skipped, so a step at time t reads ~t^2 / 2 numbers.
          New rows wait in a block of `pending` and are written together, and under a one-active
          protocol the update reuses select's column for the chosen context, so a step makes ONE
          pass over the triangle (the product with the K contexts and y).
      "dense": a [C, C] buffer grown by the runner's doubling segments (`rows(spec, t_end) =
          t_end`); a step reads C^2 numbers, C <= 2 t.
      "distinct": for problems whose contexts come from a finite set (the k-means arms of the UCI
          environments): the distinct points seen, at most `distinct_capacity`, with their counts
          and reward sums (kernels.krr), O(m^3) a step for m distinct points instead of O(t^2).
          Exact, not an approximation: KRR on repeated points equals this form. More distinct
          points than distinct_capacity is the error ERR_CAPACITY.
    """
    name = "OneKernelUCB"
    kern = resolve_kernel(name, kernel)
    learner = LEARNERS[check_static(name, "storage", storage, STORAGES)]
    model = KernelConfig(kern, block=check_capacity(name, "block", block),
                         pending=check_capacity(name, "pending", pending),
                         distinct_rows=check_capacity(name, "distinct_capacity", distinct_capacity))
    sizing = None
    if learner.rows is not None:
        sizing = Sizing(partial(learner.rows, model),
                        lambda params, state, sizes: learner.resize(model, state, sizes.rows))
    given = dict(lam=lam, alpha=alpha, lengthscale=lengthscale)
    return Algorithm(name, signed_params(name, UCB_SIGNS, given), partial(one_init, model, learner),
                     partial(one_select, model, learner), partial(one_update, model, learner), sizing,
                     {ERR_CAPACITY: DISTINCT_MESSAGE if storage == "distinct" else CAPACITY_MESSAGE,
                      ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE},
                     f"OneKernelUCB ({kern.name} kernel), one exact model on all clients' data", one_active=True)


# ============================================================================ NKernelUCB
def n_select1(model: KernelConfig, params, state: KernelState, contexts, key):
    """Client's action: tie-broken argmax of its scaled UCB, tie noise uniform(key, (K,))."""
    _, _, scores = scaled_ucb_scores(model.kernel, params, state, contexts)
    return argmax_random_ties(scores, flat_uniform(key, scores.shape, scores.dtype))


def n_kernel_ucb(kernel: Union[str, Kernel] = "rbf", lam=1.0, alpha=1.0, lengthscale=1.0) -> Algorithm:
    """NKernelUCB (spec B2): N independent exact KernelUCBs, no communication.

    params as `one_kernel_ucb`. The select key is split into N per-client keys; client i's
    tie_noise is jax.random.uniform(keys[i], (K,)). Per-client histories have t_end rows. Under a
    one-active protocol only the active client is scored (`base.independent`).
    """
    name = "NKernelUCB"
    kern = resolve_kernel(name, kernel)
    model = KernelConfig(kern)
    given = dict(lam=lam, alpha=alpha, lengthscale=lengthscale)
    return independent(name, signed_params(name, UCB_SIGNS, given), partial(init1, model),
                       partial(n_select1, model), partial(update1, model), partial(rows1, model),
                       partial(resize1, model),
                       f"NKernelUCB ({kern.name} kernel), one exact model per client, no communication")
