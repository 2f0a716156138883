"""DUETS as the authors' early public code runs it (`DISUS.py`, spec §3.8), beside the paper's `duets`.

Shared with `duets` (its functions): the state (active mask [M], sorted active ids [M], this epoch's
counts and reward sums per candidate [M], the agents' coin and the server's key), the uniform queries
from the active set by shared randomness, per-epoch data discarded at each epoch end, the server's keep
draws, the Nyström model of Eqs. 5-6 and 8 (z = K_SS^{-1/2} k_S, eigenvalue floor), nothing after the
last, cut epoch. From the code (spec §3.8 [C]):

  - T_j = ceil(sqrt(T T_{j-1})) (T = 50, T_1 = 2: 2, 10, 23, 34 cut to 15 steps), not floor (§3.2);
  - p_j = p_log log(N T_j) / (N T_j), p_log = 4, not p0 sigma^2_max: no exact sigma is computed;
  - S_j = every kept draw, repeats included; none kept gives S_j empty (mu~ = 0, constant sigma~:
    nothing is trimmed), not one fallback point. Repeats add no direction, so the code's pinv model
    equals the model on the distinct kept points, which is what is computed;
  - keep x iff mu~(x) + beta sigma~(x) >= max_{X_j} (mu~ - beta sigma~), pointwise, with the Eq. 6
    sigma~^2 = (k(x,x) - k_S^T K_SS^+ k_S) / lam + k_S^T (lam K_SS + K_SD K_DS)^+ k_S (divided by
    lam, §2.3), not Eq. 9's 2 beta sigma_max.

Communication ([A]: the code counts uplink only) at the last step of each completed epoch, in scalars
per receiver (`core.COMM_UNIT`): every agent uploads its |S_j| statistics (one per kept draw) and
receives S_j and vbar_j ((d + 1)|S_j|; no sigma_max: with the code's public randomness every agent can
form Z^T Z itself), so up = N |S_j|, down = N (d + 1)|S_j|, rounds = 1. Diagnostics: comm_paper =
(d + 2)|S_j|, the DUETS paper's count of these messages (the uplink averaged over agents, the broadcast
once); comm_code = N |S_j|, the code's count. Others at epoch ends: epoch_length, p, inducing,
inducing_distinct, sigma_tilde_max over X_j, active_before, active_after, best_survived, regen_mismatch.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Union

import jax.numpy as jnp

from ...core import Algorithm, Table, report
from ...kernels.functions import Kernel
from ..base import check_tolerance, kernel_params, resolve_kernel, signed_params
from .duets import (DuetsConfig, check_epochs, end_of_epoch, epoch_length, epoch_points, epoch_schedule, in_epoch,
                    init, keep_uniforms, kept_slots, nystrom_posterior, record_queries, select, trimmed)

NAME = "DUETS-authors"
SIGNS = {"beta": "nonnegative", "p_log": "nonnegative", "lam": "positive", "lengthscale": "positive"}
DIAGNOSTICS = ("epoch_length", "p", "inducing", "inducing_distinct", "sigma_tilde_max", "active_before",
               "active_after", "best_survived", "comm_paper", "comm_code", "regen_mismatch")


def ceil_next(horizon: int, length: int) -> int:
    """The code's next epoch length, ceil(sqrt(T T_j)) (exact in integers)."""
    root = math.isqrt(horizon * length)
    return root if root * root == horizon * length else root + 1


# ------------------------------------------------------------------------------ update
def update(config: DuetsConfig, params, state, step, actions, rewards, aux, key):
    """Add the queries to the epoch statistics; at the end of a completed epoch, trim (`trim`)."""
    del aux, key
    state = record_queries(state, step, actions, rewards)
    return end_of_epoch(config.schedule, partial(trim, config), DIAGNOSTICS, params, state, step)


def trim(config: DuetsConfig, N: int, capacity: int, operand):
    """The code's epoch end for epoch j (traced, in the operand), the epoch's distinct candidates in
    uniq[:capacity]: (new state, Report)."""
    params, state, j, ids, counts, uniq = operand
    dtype = state.sums.dtype
    M, d = state.candidates.shape
    lam, beta = params["lam"], params["beta"]
    kp = kernel_params(config.kernel.params, params["lengthscale"], dtype)
    uniq, U, c, s, live = epoch_points(state, counts, uniq, capacity)

    rates = [math.log(N * length) / (N * length) for length in config.schedule.lengths[:-1]]  # log(n)/n per epoch
    p = jnp.minimum(1.0, params["p_log"] * jnp.asarray(rates, dtype)[j])
    kept = (keep_uniforms(config.schedule, state, j, N)[0] < p) & in_epoch(config.schedule, j)   # [N, W]
    in_S = kept_slots(ids, kept, uniq, live, M)
    mu, var = nystrom_posterior(config, kp, lam, state.candidates, U, in_S, c, s)
    sigma = jnp.sqrt(var)

    lcb_top = jnp.max(jnp.where(state.active, mu - beta * sigma, -jnp.inf))
    active = state.active & (mu + beta * sigma >= lcb_top)
    new, n_active = trimmed(state, active)
    size = jnp.sum(kept).astype(dtype)
    diags = dict(epoch_length=epoch_length(config.schedule, j), p=p, inducing=size, inducing_distinct=jnp.sum(in_S),
                 sigma_tilde_max=jnp.max(jnp.where(state.active, sigma, -jnp.inf)), active_before=state.n_active,
                 active_after=n_active, best_survived=active[state.best], comm_paper=(d + 2) * size,
                 comm_code=N * size, regen_mismatch=jnp.sum(counts != state.counts))
    rep = report(dtype, comm_up=N * size, comm_down=N * (d + 1) * size, rounds=1.0, active=n_active,
                 **{name: jnp.asarray(v).astype(dtype) for name, v in diags.items()})
    return new, rep


# ------------------------------------------------------------------------------ factory
# the per-epoch diagnostics its summaries show (the round follows step t, counted from 1)
EPOCH_TABLE = Table("per epoch", {"epoch_length": "T_j", "inducing": "kept draws", "inducing_distinct": "distinct",
                                  "p": "p_j", "sigma_tilde_max": "sigma~_max", "active_before": "active before",
                                  "active_after": "active after", "best_survived": "best kept"})


def duets_authors(horizon: int, first_epoch: int = 2, kernel: Union[str, Kernel] = "rbf", beta=1.0, p_log=4.0,
                  lam=0.2, lengthscale=1.0, *, eig_tol: float = 1e-10) -> Algorithm:
    """DUETS as the authors' early code runs it: ceil epochs, p = 4 log(n)/n, pointwise trimming.

    For a horizon of `horizon` steps with T_1 = first_epoch (the code's own runs used T_1 = 5 at
    T = 100; the paper's experiments T_1 = 2). params: beta >= 0 (the pointwise width factor),
    p_log >= 0 (p_j = p_log log(N T_j) / (N T_j)), lam > 0, lengthscale > 0 (the SE kernel
    exp(-||x - x'||^2 / (2 l^2)) by default). eig_tol in [0, 1): the eigenvalue floor of K_SS^{-1/2},
    relative to the largest (the code's pinv drops those below 1e-15).
    """
    check_epochs(NAME, horizon, first_epoch)
    kern = resolve_kernel(NAME, kernel)
    config = DuetsConfig(kern, epoch_schedule(horizon, first_epoch, ceil_next), check_tolerance(NAME, "eig_tol", eig_tol), NAME, "duets_authors")
    given = dict(beta=beta, p_log=p_log, lam=lam, lengthscale=lengthscale)
    return Algorithm(NAME, signed_params(NAME, SIGNS, given), partial(init, config), partial(select, config),
                     partial(update, config), None, {},
                     f"DUETS as the authors' code runs it ({kern.name} kernel): ceil epochs "
                     f"{list(config.schedule.steps)}, p = p_log log(N T_j)/(N T_j), pointwise UCB >= max LCB",
                     tables=(EPOCH_TABLE,))
