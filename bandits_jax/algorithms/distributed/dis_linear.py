"""Linear baselines of the asynchronous environment: DisLinUCB (synchronous) and FedLinUCB (asynchronous).

Both use raw contexts (no bias term) and ridge statistics A = sum x x^T, b = sum y x; with
V = A + lam I and theta = V^{-1} b a client scores (`kernels.ridge.ridge_scores`)

    mean(x) = x^T theta,   var(x) = x^T V^{-1} x,   score = mean + alpha * sqrt(var),

ties going to the largest `tie_noise` (`base.argmax_random_ties`). Their internals are recalled
from the cited papers and the authors' code, not read from them (spec §4, B4 and B5).

DisLinUCB (Wang et al. 2019; spec B4): client i scores with A_g + dA_i, b_g + db_i and triggers
a sync of ALL clients when

    n_i * ( log det(A_i + lam I) - log det(A_g + lam I) ) >= threshold;

up = down = N (d^2 + d + 1) scalars, rounds = 1.
State: A_g [d, d], b_g [d], dA [N, d, d], db [N, d], n_loc [N].

FedLinUCB (He et al. 2022; spec B5): client i scores with what it last DOWNLOADED and buffers
(dPhi_i, db_i); when

    log det(lam I + Phi_i + dPhi_i) - log det(lam I + Phi_i) > log(1 + alpha_c)

it uploads its buffers and downloads the server's statistics: up = down = d^2 + d, rounds = 1.
State: A_g [d, d], b_g [d], A_dl [N, d, d], b_dl [N, d], dA [N, d, d], db [N, d].

Walk-through: docs/algorithms/dis_linear.md.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.kernels.ridge import ridge_logdet, ridge_scores

from ...core import Algorithm, EnvSpec, Sizes, float_dtype, report
from ..base import ERR_MULTI_ACTIVE, MULTI_ACTIVE_MESSAGE, active_index, multi_active_error, signed_params, ucb_select

ERRORS = {ERR_MULTI_ACTIVE: MULTI_ACTIVE_MESSAGE}


# ============================================================================ DisLinUCB
DIS_SIGNS = {"lam": "positive", "alpha": "nonnegative", "threshold": "nonnegative"}


class DisLinState(NamedTuple):
    """State of DisLinUCB.

    A_g [d, d], b_g [d]: global statistics of the last sync.
    dA [N, d, d], db [N, d], n_loc [N]: each client's statistics since the last sync.
    num_syncs: int32.
    """

    A_g: jax.Array
    b_g: jax.Array
    dA: jax.Array
    db: jax.Array
    n_loc: jax.Array
    num_syncs: jax.Array


def dis_lin_init(key, spec: EnvSpec, params, sizes: Sizes, public=None) -> DisLinState:
    """No data: zero statistics."""
    del key, params, sizes, public
    dtype = float_dtype()
    N, d = spec.num_agents, spec.dim
    return DisLinState(jnp.zeros((d, d), dtype), jnp.zeros((d,), dtype), jnp.zeros((N, d, d), dtype),
                       jnp.zeros((N, d), dtype), jnp.zeros((N,), jnp.int32), jnp.zeros((), jnp.int32))


def dis_lin_select(params, state: DisLinState, step, key):
    """Client i scores with the global statistics plus its own since the last sync."""

    def client(i, contexts):
        return (*ridge_scores(state.A_g + state.dA[i], state.b_g + state.db[i], params["lam"], params["alpha"],
                              contexts), None)

    return ucb_select(step, key, state.b_g.dtype, client)


def dis_lin_update(params, state: DisLinState, step, actions, rewards, aux, key):
    """Every active client adds its observation; any client over the threshold syncs everyone."""
    del aux, key
    dtype = state.b_g.dtype
    active = step.active
    N, _, d = step.contexts.shape
    x = _chosen(step.contexts.astype(dtype), actions)
    act = active.astype(dtype)
    dA = state.dA + act[:, None, None] * jnp.einsum("ni,nj->nij", x, x)
    db = state.db + (act * rewards.astype(dtype))[:, None] * x
    n_loc = state.n_loc + active.astype(jnp.int32)
    i = active_index(active)

    def logdet_ratio(dA_j):
        return ridge_logdet(state.A_g + dA_j, params["lam"]) - ridge_logdet(state.A_g, params["lam"])

    if step.one_active:  # only the active client can trigger: one log-determinant instead of N
        ratio_i = logdet_ratio(dA[i])
        trigger = active[i] & (n_loc[i].astype(dtype) * ratio_i >= params["threshold"])
    else:
        ratio = jax.vmap(logdet_ratio)(dA)
        trigger, ratio_i = jnp.any(active & (n_loc.astype(dtype) * ratio >= params["threshold"])), ratio[i]
    state = DisLinState(
        jnp.where(trigger, state.A_g + dA.sum(0), state.A_g),
        jnp.where(trigger, state.b_g + db.sum(0), state.b_g),
        jnp.where(trigger, 0.0, dA), jnp.where(trigger, 0.0, db), jnp.where(trigger, 0, n_loc),
        state.num_syncs + trigger.astype(jnp.int32),
    )
    msg = jnp.where(trigger, N * (d * d + d + 1), 0)
    errors = multi_active_error(active) if step.one_active else 0  # a second client's action was never scored
    return state, report(dtype, msg, msg, trigger, errors=errors, trigger=trigger,
                         logdet_ratio=ratio_i, num_syncs=state.num_syncs)


def dis_lin_ucb(lam=1.0, alpha=1.0, threshold=1.0) -> Algorithm:
    """DisLinUCB: distributed linear UCB, all clients synchronised when one's log-det trigger fires.

    params: lam > 0, alpha >= 0, threshold >= 0 (module docstring).

    The spec's default threshold is T / (N d ln(N T)) (the authors' code convention).
    """
    name = "DisLinUCB"
    return Algorithm(name, signed_params(name, DIS_SIGNS, dict(lam=lam, alpha=alpha, threshold=threshold)),
                     dis_lin_init, dis_lin_select, dis_lin_update, errors=ERRORS,
                     description="DisLinUCB, event-triggered synchronisation of all clients' ridge statistics")


# ============================================================================ FedLinUCB
FED_SIGNS = {"lam": "positive", "alpha": "nonnegative", "alpha_c": "nonnegative"}


class FedLinState(NamedTuple):
    """State of FedLinUCB.

    A_g [d, d], b_g [d]: the server's statistics.
    A_dl [N, d, d], b_dl [N, d]: what each client last downloaded. dA [N, d, d], db [N, d]: its
    upload buffers.
    """

    A_g: jax.Array
    b_g: jax.Array
    A_dl: jax.Array
    b_dl: jax.Array
    dA: jax.Array
    db: jax.Array


def fed_lin_init(key, spec: EnvSpec, params, sizes: Sizes, public=None) -> FedLinState:
    """No data: zero statistics everywhere."""
    del key, params, sizes, public
    dtype = float_dtype()
    N, d = spec.num_agents, spec.dim
    zA, zb = jnp.zeros((N, d, d), dtype), jnp.zeros((N, d), dtype)
    return FedLinState(jnp.zeros((d, d), dtype), jnp.zeros((d,), dtype), zA, zb, zA, zb)


def fed_lin_select(params, state: FedLinState, step, key):
    """Client i scores with the statistics it last downloaded."""

    def client(i, contexts):
        return (*ridge_scores(state.A_dl[i], state.b_dl[i], params["lam"], params["alpha"], contexts), None)

    return ucb_select(step, key, state.b_g.dtype, client)


def fed_lin_update(params, state: FedLinState, step, actions, rewards, aux, key):
    """The active client buffers its observation and, over the det-ratio threshold, uploads and downloads."""
    del aux, key
    dtype = state.b_g.dtype
    active = step.active
    d = step.contexts.shape[-1]
    any_active = jnp.any(active)
    i = jnp.argmax(active)
    x = step.contexts[i, actions[i]].astype(dtype)
    on = any_active.astype(dtype)
    dA_i = state.dA[i] + on * jnp.outer(x, x)
    db_i = state.db[i] + on * jnp.asarray(rewards[i], dtype) * x
    lam = params["lam"]
    ratio = ridge_logdet(state.A_dl[i] + dA_i, lam) - ridge_logdet(state.A_dl[i], lam)
    trigger = any_active & (ratio > jnp.log1p(params["alpha_c"]))
    A_g = jnp.where(trigger, state.A_g + dA_i, state.A_g)
    b_g = jnp.where(trigger, state.b_g + db_i, state.b_g)
    state = FedLinState(
        A_g, b_g,
        state.A_dl.at[i].set(jnp.where(trigger, A_g, state.A_dl[i])),
        state.b_dl.at[i].set(jnp.where(trigger, b_g, state.b_dl[i])),
        state.dA.at[i].set(jnp.where(trigger, 0.0, dA_i)),
        state.db.at[i].set(jnp.where(trigger, 0.0, db_i)),
    )
    msg = jnp.where(trigger, d * d + d, 0)
    return state, report(dtype, msg, msg, trigger, errors=multi_active_error(active), trigger=trigger,
                         logdet_ratio=ratio)


def fed_lin_ucb(lam=1.0, alpha=1.0, alpha_c=1e-2) -> Algorithm:
    """FedLinUCB: federated linear UCB whose clients upload on their own trigger (asynchronous).

    params: lam > 0, alpha >= 0, alpha_c >= 0 (theory: 1/N^2); module docstring."""
    name = "FedLinUCB"
    return Algorithm(name, signed_params(name, FED_SIGNS, dict(lam=lam, alpha=alpha, alpha_c=alpha_c)),
                     fed_lin_init, fed_lin_select, fed_lin_update, errors=ERRORS,
                     description="FedLinUCB, asynchronous det-ratio-triggered upload/download of the active client",
                     one_active=True)


# ============================================================================ helpers
def _chosen(contexts, actions):
    """contexts[N, K, d] at actions[N] -> [N, d]."""
    return jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0, :]
