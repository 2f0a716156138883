"""Approx-DisKernelUCB: synchronous distributed kernel UCB with a re-sampled Nyström dictionary.

Baseline B3 of the asynchronous-environment study (Li et al., NeurIPS 2022, synchronous; its
internals recalled from that paper, not read from it), in two registered variants built from the
same pieces: `approx_dis_kernel_ucb` (the asynchronous environment) and `approx_dis_kernel_ucb_duets`
(the DUETS paper's baseline, spec duets §4.3; storage "rows" here or "candidates", `candidate_approx`).
All clients share a dictionary S (size m) and the global statistics A_g = sum z z^T, b_g = sum z y of
all data up to the last synchronisation; client i adds its own new points to get (A_i, b_i), and

    mean(x) = z^T (A_i + lam I)^{-1} b_i,   var(x) = max(k(x,x) - |z|^2, 0)/lam + z^T (A_i + lam I)^{-1} z,
    score   = mean + alpha sqrt(var),   z(x; S) = L^{-1} k_S(x), K_SS = L L^T (kernels.nystrom).

After its point x_t the active client adds var_g(x_t) (the global model's) to V_i and triggers
when count * V_i > threshold. A synchronisation of all N clients re-samples every history point
with probability min(1, q var_g(x_s)), forms the de-duplicated dictionary S_new, re-embeds all
histories and broadcasts the new (A_g, b_g); in scalars per receiver (`core.COMM_UNIT`,
`dis_protocol.sync_comm`) up = d sum_j |S_j| + N (m^2 + m), down = N d m + N (m^2 + m), rounds = 1
(spec B3), |S_j| the distinct points client j keeps (`dis_protocol.distinct_kept`). Both variants count
so; the DUETS one keeps the DUETS paper's count as the diagnostic comm_paper
(`dis_protocol.paper_sync_comm`) and the authors' code's, m (m + 1), as comm_code.

State: one pooled arrival-order history (hist_X [C, d], hist_y [C], hist_owner [C], C = t_end);
the dictionary dict_X [M, d] with the inverse Cholesky factor Linv [M, M] of its Gram matrix
(M <= dict_capacity, sized by demand); per client loc_Pinv [N, M, M] = (A_i + lam I)^{-1} and
loc_b [N, M] = b_i; the global g_Pinv [M, M], g_b [M].
Errors: dictionary overflow, full history, more than one active client (`Algorithm.errors`).

Walk-through: docs/algorithms/approx_dis_kernel.md.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels import nystrom
from bandits_jax.kernels.functions import Kernel
from bandits_jax.kernels.linalg import pad_last, pad_ridge_inverse, pad_rows, sherman_morrison

from ...core import Algorithm, ConfigError, EnvSpec, Sizes, Sizing, flat_uniform, float_dtype, report
from . import candidate_approx, candidate_kernel
from ..base import (ERR_MULTI_ACTIVE, MULTI_ACTIVE_MESSAGE, active_index, argmax_or_uniform, argmax_random_ties,
                   batch_cond, check_capacity, check_static, check_tolerance, kernel_params, multi_active_error, one_hot_action,
                   resolve_kernel, signed_params)
from .dis_protocol import (DICT_MESSAGE, ERR_DICT, ERR_HISTORY, ERR_SLOTS, HISTORY_MESSAGE, LOCK_STEP_VMAP,
                           SLOTS_MESSAGE, async_rows, distinct_kept, duets_rows, paper_sync_comm, sync_comm)

NAME = "Approx-DisKernelUCB"
SIGNS = {"lam": "positive", "alpha": "nonnegative", "q": "nonnegative", "threshold": "nonnegative",
         "lengthscale": "positive"}
TRIGGER_COUNTS = ("client", "elapsed")
STORAGES = ("rows", "candidates")
SYNC_GATHER = 1  # batch_cond: the runs that synchronise compute the sync, one at a time (module docstring)


class ApproxDisKernelConfig(NamedTuple):
    """Static options: the kernel, dict_capacity (M), the near-duplicate cut eig_tol, and those of one
    variant (None in the other): trigger_count (`approx_dis_kernel_ucb`), the forced first sync step
    (-1: none; `approx_dis_kernel_ucb_duets`) and, with storage "candidates", a client's slots
    (buffer_capacity distinct candidates)."""

    kernel: Kernel
    dict_capacity: int
    eig_tol: float
    trigger_count: Optional[str] = None
    forced_sync: Optional[int] = None
    buffer_capacity: Optional[int] = None


class ApproxDisKernelState(NamedTuple):
    """State of Approx-DisKernelUCB (C history rows, M dictionary rows, N clients).

    hist_X [C, d], hist_y [C], hist_owner [C] int32, hist_n: all observations, arrival order.
    dict_X [M, d], dict_n, Linv [M, M]: the shared dictionary S and the inverse Cholesky factor of
    its Gram matrix (zero beyond dict_n).
    g_Pinv [M, M] = (A_g + lam I)^{-1}, g_b [M] = b_g: the global statistics of the last sync.
    loc_Pinv [N, M, M] = (A_i + lam I)^{-1}, loc_b [N, M] = b_i: each client's model, valid
    where loc_n > 0 (a client with loc_n = 0 has the global model; `client_model`).
    loc_n [N] int32: new points per client since the last sync; loc_var [N]: their var_g sum.
    elapsed: int32 global steps since the last sync. num_syncs: int32.
    """

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


# ------------------------------------------------------------------------------ init
def init(config: ApproxDisKernelConfig, key, spec: EnvSpec, params, sizes: Sizes, public=None):
    """Empty history and dictionary; every client has the global model (A_g = 0, b_g = 0)."""
    del key, public
    dtype = float_dtype()
    lam = jnp.asarray(params["lam"], dtype)
    C, M = history_and_dict_rows(config, sizes)
    N, d = spec.num_agents, spec.dim
    return ApproxDisKernelState(
        hist_X=jnp.zeros((C, d), dtype), hist_y=jnp.zeros((C,), dtype),
        hist_owner=jnp.zeros((C,), jnp.int32), hist_n=jnp.zeros((), jnp.int32),
        dict_X=jnp.zeros((M, d), dtype), dict_n=jnp.zeros((), jnp.int32), Linv=jnp.zeros((M, M), dtype),
        g_Pinv=jnp.eye(M, dtype=dtype) / lam, g_b=jnp.zeros((M,), dtype),
        loc_Pinv=jnp.zeros((N, M, M), dtype), loc_b=jnp.zeros((N, M), dtype),  # unused while loc_n = 0
        loc_n=jnp.zeros((N,), jnp.int32), loc_var=jnp.zeros((N,), dtype),
        elapsed=jnp.zeros((), jnp.int32), num_syncs=jnp.zeros((), jnp.int32),
    )


# ------------------------------------------------------------------------------ select
def async_select(config: ApproxDisKernelConfig, params, state: ApproxDisKernelState, step, key):
    """UCB arms of every client with its model, or of the active client only under step.one_active."""
    dtype = state.g_b.dtype
    contexts = step.contexts.astype(dtype)
    N, K = contexts.shape[:2]
    noise = flat_uniform(key, (N, K), dtype)
    if step.one_active:
        i = active_index(step.active)
        mean, var = client_mean_var(config, params, state, contexts[i], *client_model(state, i))
        action = argmax_random_ties(mean + params["alpha"] * jnp.sqrt(var), noise[i])
        return one_hot_action(i, action, N), {"client": i, "mean": mean, "var": var}
    Pinv, b = jax.vmap(lambda i: client_model(state, i))(jnp.arange(N))
    mean, var = jax.vmap(lambda X, P, c: client_mean_var(config, params, state, X, P, c))(contexts, Pinv, b)
    return argmax_random_ties(mean + params["alpha"] * jnp.sqrt(var), noise), {"mean": mean, "var": var}


def duets_select(config: ApproxDisKernelConfig, params, state: ApproxDisKernelState, step, key):
    """Every client scores the SAME contexts (the public candidate set, step.contexts[0]), embedded
    once for all; first-index ties, `base.uniform_arms` while the dictionary is empty."""
    dtype = state.g_b.dtype
    X = step.contexts[0].astype(dtype)
    N = step.contexts.shape[0]
    Z = embed(config, params, state, X)
    Pinv, b = jax.vmap(lambda i: client_model(state, i))(jnp.arange(N))
    mean, var = jax.vmap(lambda P, c: client_mean_var(config, params, state, X, P, c, Z))(Pinv, b)
    scores = mean + params["alpha"] * jnp.sqrt(var)
    return argmax_or_uniform(key, scores, state.dict_n == 0, dtype), {"mean": mean, "var": var}


# ------------------------------------------------------------------------------ update
def async_update(config: ApproxDisKernelConfig, params, state: ApproxDisKernelState, step, actions, rewards, aux,
                 key):
    """Client i = argmax(active) adds its point to its model and V_i (+ var_g(x)); all clients
    synchronise (`synchronise`, steps (a)-(d)) when count * V_i > threshold."""
    del aux
    dtype = state.g_b.dtype
    i = active_index(step.active)
    x, y = step.contexts.astype(dtype)[i, actions[i]], jnp.asarray(rewards[i], dtype)
    state, ok, loc_var_i, history_full = add_point(config, global_variance, params, state, x, y, i,
                                                   jnp.any(step.active))
    count = state.loc_n[i] if config.trigger_count == "client" else state.elapsed
    trigger = ok & (count.astype(dtype) * loc_var_i > params["threshold"])
    sync = partial(synchronise, config, scored_variance)
    state, uploaded, kept, over = batch_cond(trigger, sync, quiet, (params, state, key), gather=SYNC_GATHER)
    up, down = sync_comm(x.shape[0], state.loc_n.shape[0], uploaded, state.dict_n.astype(dtype), trigger)
    errors = (jnp.where(history_full, ERR_HISTORY, 0) | jnp.where(over, ERR_DICT, 0)
              | multi_active_error(step.active))
    return state, report(dtype, up, down, trigger, errors, trigger=trigger, var_sum=loc_var_i,
                         dict_size=state.dict_n, kept=kept)


def duets_update(config: ApproxDisKernelConfig, params, state: ApproxDisKernelState, step, actions, rewards, aux,
                 key):
    """Every active client adds its point (client order) and V_i (+ lam var_i(x)); ANY client's sum
    over the threshold, or the forced first sync, synchronises everyone (module docstring)."""
    del aux
    dtype = state.g_b.dtype
    contexts = step.contexts.astype(dtype)
    N = contexts.shape[0]
    elapsed = state.elapsed + 1

    def add(i, carry):
        state, full = carry
        state, _, _, f = add_point(config, own_unscaled_variance, params, state, contexts[i, actions[i]],
                                   jnp.asarray(rewards[i], dtype), i, step.active[i])
        return state, full | f

    state, full = lax.fori_loop(0, N, add, (state, jnp.zeros((), bool)))
    state = state._replace(elapsed=elapsed)
    forced = (step.t == config.forced_sync) & (state.num_syncs == 0)
    trigger = jnp.any(state.loc_var > params["threshold"]) | forced
    sync = partial(synchronise, config, unscaled_variance)
    state, uploaded, kept, over = batch_cond(trigger, sync, quiet, (params, state, key), gather=SYNC_GATHER)
    m, d = state.dict_n.astype(dtype), contexts.shape[-1]
    up, down = sync_comm(d, N, uploaded, m, trigger)
    errors = jnp.where(full, ERR_HISTORY, 0) | jnp.where(over, ERR_DICT, 0)
    return state, report(dtype, up, down, trigger, errors, trigger=trigger, var_sum=jnp.max(state.loc_var),
                         dict_size=state.dict_n, kept=kept, comm_paper=paper_sync_comm(d, N, uploaded, m, trigger),
                         comm_code=jnp.where(trigger, m * (m + 1), 0.0))


def add_point(config, increment, params, state: ApproxDisKernelState, x, y, i, any_active):
    """Client i's point (x, y) into the history, its model (rank-one) and V_i (+ increment(config,
    params, state, x[1, d], z[1, M], P_i, b_i): `global_variance` or `own_unscaled_variance`).

    Returns (state, ok: the point was added, V_i after it, history_full: it found no room)."""
    C = state.hist_y.shape[0]
    z = embed(config, params, state, x[None, :])
    P_i, b_i = client_model(state, i)
    increment = increment(config, params, state, x[None, :], z, P_i, b_i)
    z = z[0]
    room = state.hist_n < C
    ok = any_active & room
    row = jnp.where(ok, state.hist_n, C)  # an out-of-range row writes nothing
    loc_var_i = state.loc_var[i] + increment
    state = state._replace(
        hist_X=state.hist_X.at[row].set(x, mode="drop"), hist_y=state.hist_y.at[row].set(y, mode="drop"),
        hist_owner=state.hist_owner.at[row].set(i, mode="drop"), hist_n=state.hist_n + ok.astype(jnp.int32),
        loc_Pinv=state.loc_Pinv.at[i].set(jnp.where(ok, sherman_morrison(P_i, z), state.loc_Pinv[i])),
        loc_b=state.loc_b.at[i].set(jnp.where(ok, b_i + y * z, state.loc_b[i])),
        loc_n=state.loc_n.at[i].add(ok.astype(jnp.int32)),
        loc_var=jnp.where(ok, state.loc_var.at[i].set(loc_var_i), state.loc_var),
        elapsed=state.elapsed + any_active.astype(jnp.int32),
    )
    return state, ok, loc_var_i, any_active & ~room


def synchronise(config: ApproxDisKernelConfig, leverage_variance, operand):
    """Steps (a)-(d) of the module docstring on operand (params, state, key), the re-sampling drawn with
    leverage_variance(params, var_g) (`scored_variance` or `unscaled_variance`).
    Returns (state, uploaded: the distinct (client, point) pairs kept, `dis_protocol.distinct_kept`,
    kept history rows, dictionary overflow)."""
    params, state, key = operand
    dtype = state.g_b.dtype
    C = state.hist_X.shape[0]
    p = kernel_params(config.kernel.params, params["lengthscale"], dtype)
    valid = jnp.arange(C) < state.hist_n
    # (a) ridge-leverage re-sampling of every history point with the OLD global model
    _, var_g = client_mean_var(config, params, state, state.hist_X, state.g_Pinv, state.g_b)
    var_g = leverage_variance(params, var_g)
    keep = nystrom.include_draws(nystrom.leverage_probability(var_g, params["q"]), rls_uniforms(key, C, dtype), valid)
    kept = jnp.sum(keep, dtype=jnp.int32)
    # (b) the new dictionary: kept points in arrival order, (near-)duplicates dropped
    dict_X, dict_n, Linv, over = nystrom.kept_dictionary(config.kernel.fn, state.hist_X, keep, state.dict_X.shape[0],
                                                         p, config.eig_tol)
    # (c)-(d) re-embed the whole (pooled) history, sum, broadcast
    Z = nystrom.embed_chol(config.kernel.fn, state.hist_X, dict_X, dict_n, Linv, p)
    A, b = nystrom.embedded_stats(Z, state.hist_y, valid)
    uploaded = distinct_kept(state.hist_X, state.hist_owner, keep)
    state = state._replace(
        dict_X=dict_X, dict_n=dict_n, Linv=Linv, g_Pinv=nystrom.ridge_inverse(A, params["lam"]), g_b=b,
        loc_n=jnp.zeros_like(state.loc_n), loc_var=jnp.zeros_like(state.loc_var),
        elapsed=jnp.zeros_like(state.elapsed), num_syncs=state.num_syncs + 1,
    )
    return state, uploaded.astype(jnp.int32), kept, over


def quiet(operand):
    """The no-sync branch: the state unchanged, nothing uploaded or kept, no overflow."""
    _, state, _ = operand
    zero = jnp.zeros((), jnp.int32)
    return state, zero, zero, jnp.zeros((), bool)


# ------------------------------------------------------------------------------ sizes (rows: dis_protocol)
def resize(config: ApproxDisKernelConfig, params, state: ApproxDisKernelState, sizes: Sizes) -> ApproxDisKernelState:
    """Pad the history to C and the dictionary to M rows; the padded block of every (A + lam I)^{-1}
    is I / lam (A is zero there). No number changes."""
    C, M = history_and_dict_rows(config, sizes)
    lam = jnp.asarray(params["lam"], state.g_Pinv.dtype)
    return state._replace(
        hist_X=pad_rows(state.hist_X, C), hist_y=pad_rows(state.hist_y, C),
        hist_owner=pad_rows(state.hist_owner, C), dict_X=pad_rows(state.dict_X, M),
        Linv=pad_last(state.Linv, M, 2), g_Pinv=pad_ridge_inverse(state.g_Pinv, M, lam),
        g_b=pad_last(state.g_b, M), loc_Pinv=pad_ridge_inverse(state.loc_Pinv, M, lam),
        loc_b=pad_last(state.loc_b, M),
    )


def demand(state: ApproxDisKernelState):
    """Dictionary rows in use."""
    return state.dict_n


# ------------------------------------------------------------------------------ the variants' pieces
def global_variance(config, params, state: ApproxDisKernelState, x, z, P_i, b_i):
    """V_i's increment of the asynchronous protocol: var_g(x) (with its 1/lam) of the global model, at
    x[1, d] embedded as z[1, M]."""
    del P_i, b_i
    return client_mean_var(config, params, state, x, state.g_Pinv, state.g_b, z)[1][0]


def own_unscaled_variance(config, params, state: ApproxDisKernelState, x, z, P_i, b_i):
    """V_i's increment of the DUETS baseline: lam var_i(x), the unscaled variance of client i's own
    model (P_i, b_i) before the point."""
    _, var_i = client_mean_var(config, params, state, x, P_i, b_i, z)
    return params["lam"] * var_i[0]


def scored_variance(params, var_g):
    """The re-sampling's variance in the asynchronous protocol: var_g as scored (with its 1/lam)."""
    del params
    return var_g


def unscaled_variance(params, var_g):
    """The re-sampling's variance of the DUETS baseline: lam var_g (q is the paper's q-bar)."""
    return params["lam"] * var_g


# ------------------------------------------------------------------------------ helpers
def history_and_dict_rows(config: ApproxDisKernelConfig, sizes: Sizes):
    """(C, M): the history rows, and the demand rows (the history rows without demand sizing) capped
    by dict_capacity."""
    C = int(sizes.rows)
    return C, min(C if sizes.demand_rows is None else int(sizes.demand_rows), config.dict_capacity)


def client_model(state: ApproxDisKernelState, i):
    """Client i's ((A_i + lam I)^{-1}, b_i): the global model while it has no new point."""
    fresh = state.loc_n[i] == 0
    return jnp.where(fresh, state.g_Pinv, state.loc_Pinv[i]), jnp.where(fresh, state.g_b, state.loc_b[i])


def embed(config: ApproxDisKernelConfig, params, state: ApproxDisKernelState, X):
    """z[m, M] of X[m, d] in the current dictionary."""
    p = kernel_params(config.kernel.params, params["lengthscale"], state.g_b.dtype)
    return nystrom.embed_chol(config.kernel.fn, X, state.dict_X, state.dict_n, state.Linv, p)


def client_mean_var(config: ApproxDisKernelConfig, params, state, X, Pinv, b, Z=None):
    """Nyström ridge mean[m], var[m] at X[m, d] of the model ((A + lam I)^{-1} = Pinv, b); Z: the
    embedding of X when already computed."""
    p = kernel_params(config.kernel.params, params["lengthscale"], state.g_b.dtype)
    Z = embed(config, params, state, X) if Z is None else Z
    return nystrom.ridge_mean_var(Z, config.kernel.diag(X, p), Pinv, Pinv @ b, params["lam"])


def rls_uniforms(key, rows: int, dtype):
    """u[rows]: u[s] = jax.random.uniform(fold_in(key, s)), the RLS draw of history position s."""
    return jax.vmap(lambda s: jax.random.uniform(jax.random.fold_in(key, s), (), dtype))(jnp.arange(rows))


# ------------------------------------------------------------------------------ factories
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
) -> Algorithm:
    """Approx-DisKernelUCB in the asynchronous environment of Li et al. 2023, one active client a step.

    params: lam > 0, alpha >= 0, q >= 0 (RLS factor), threshold >= 0 (D_A), lengthscale > 0.
    Static: trigger_count ("client" or "elapsed"), dict_capacity (M; overflow is an error),
    eig_tol (near-duplicate cut: a kept point whose Schur complement against the dictionary is
    <= eig_tol k(x,x) is not added).
    """
    kern = resolve_kernel(NAME, kernel)
    config = ApproxDisKernelConfig(kern, check_capacity(NAME, "dict_capacity", dict_capacity),
                                   check_tolerance(NAME, "eig_tol", eig_tol),
                                   trigger_count=check_static(NAME, "trigger_count", trigger_count, TRIGGER_COUNTS))
    given = dict(lam=lam, alpha=alpha, q=q, threshold=threshold, lengthscale=lengthscale)
    sizing = Sizing(async_rows, partial(resize, config), demand, dict_capacity, ERR_DICT)
    return Algorithm(NAME, signed_params(NAME, SIGNS, given), partial(init, config), partial(async_select, config),
                     partial(async_update, config), sizing,
                     {ERR_DICT: DICT_MESSAGE, ERR_HISTORY: HISTORY_MESSAGE, ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE},
                     f"Approx-DisKernelUCB ({kern.name} kernel), Nyström dictionary re-sampled at every "
                     "synchronisation of all clients", cpu_vmap=LOCK_STEP_VMAP, one_active=True)


def approx_dis_kernel_ucb_duets(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    alpha=1.0,
    q=1.0,
    threshold=1.0,
    lengthscale=1.0,
    *,
    dict_capacity: int = 256,
    eig_tol: float = 1e-10,
    forced_sync: int = -1,
    storage: str = "rows",
    buffer_capacity: int = 64,
) -> Algorithm:
    """Approx-DisKernelUCB as the DUETS paper's baseline, every client acting at every step.

    Module docstring; params, dict_capacity and eig_tol as `approx_dis_kernel_ucb` (q is the paper's q-bar).

    Static: forced_sync (the 0-based step t at which a first synchronisation is forced when none has
    happened before: 0 forces one at the very first step, 10 is the authors' code; -1, the default, forces
    none), storage ("rows": the
    history itself, this module; "candidates": on a problem with a public candidate set, counts and
    sums per candidate, `candidate_approx`: the same model at a cost bounded by the candidates, the
    re-sampling drawn per (client, candidate) instead of per point) and buffer_capacity (storage
    "candidates": the distinct candidates a client may hold between synchronisations; more is the
    error ERR_SLOTS).
    """
    kern = resolve_kernel(NAME, kernel)
    if isinstance(forced_sync, bool) or not isinstance(forced_sync, int) or forced_sync < -1:
        raise ConfigError(f"{NAME}: forced_sync must be a step index >= 0, or -1 for none; got {forced_sync!r}")
    config = ApproxDisKernelConfig(kern, check_capacity(NAME, "dict_capacity", dict_capacity),
                                   check_tolerance(NAME, "eig_tol", eig_tol),
                                   forced_sync=forced_sync,
                                   buffer_capacity=check_capacity(NAME, "buffer_capacity", buffer_capacity))
    params = signed_params(NAME, SIGNS, dict(lam=lam, alpha=alpha, q=q, threshold=threshold, lengthscale=lengthscale))
    if check_static(NAME, "storage", storage, STORAGES) == "candidates":
        cand, slots = candidate_approx, candidate_kernel.SLOTS
        return Algorithm(NAME, params, partial(cand.init, config, slots), partial(cand.select, config),
                         partial(cand.update, config, slots), slots.sizing(config, ERR_SLOTS),
                         {ERR_DICT: DICT_MESSAGE, ERR_SLOTS: SLOTS_MESSAGE},
                         f"Approx-DisKernelUCB ({kern.name} kernel), kept over the public candidates, Nyström "
                         "dictionary re-sampled at every synchronisation of all clients", cpu_vmap=LOCK_STEP_VMAP)
    sizing = Sizing(duets_rows, partial(resize, config), demand, dict_capacity, ERR_DICT)
    return Algorithm(NAME, params, partial(init, config), partial(duets_select, config),
                     partial(duets_update, config), sizing, {ERR_DICT: DICT_MESSAGE, ERR_HISTORY: HISTORY_MESSAGE},
                     f"Approx-DisKernelUCB ({kern.name} kernel), every client acting, Nyström dictionary "
                     "re-sampled at every synchronisation of all clients", cpu_vmap=LOCK_STEP_VMAP)
