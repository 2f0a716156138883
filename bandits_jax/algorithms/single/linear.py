"""Linear contextual bandits (LinUCB, linear Thompson sampling), N independent agents.

Each agent keeps the ridge-regression statistics of its own observations

    V = lam I + sum_s x_s x_s^T    (as its Cholesky factor, updated by one rank-one update a step)
    b = sum_s r_s x_s,             mu = V^{-1} b,

and never forms V^{-1}. Scores for the K contexts x_k of a step:

    linucb [S] (Abbasi-Yadkori et al. 2011): x_k . mu + beta * ||x_k||_{V^{-1}}
        option bonus="quadratic": x_k . mu + beta * x_k^T V^{-1} x_k. This is the quirk of the code
        behind the Neural/Federated Neural Bandits baselines (the quadratic form is not
        square-rooted there, with beta = sqrt(lam nu)).
    lints [S] (Agrawal & Goyal 2013): theta~ = mu + nu * L^{-T} z, z ~ N(0, I_d), score x_k . theta~.
        theta~ ~ N(mu, nu^2 V^{-1}). The draw is z = jax.random.normal(key, (d,), dtype) with the
        agent's select key. (The baselines' code samples N(mu, lam nu V^{-1}): nu = sqrt(lam nu_code).)

Actions are jnp.argmax of the scores (the first index on ties).
Option max_history (static): an agent stops updating after that many observations. The
baselines' code stops at 2000. The default None never stops.

Float hyper-parameters (lam, beta or nu) are the traced `params`; `bonus` and `max_history` are the
static `LinearConfig`. The state has a fixed size (no Sizing).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from bandits_jax.kernels.linalg import chol_solve, chol_update

from ...core import Algorithm, EnvSpec, float_dtype
from ..base import check_max_history, check_static, independent, signed_params

BONUSES = ("norm", "quadratic")
SIGNS = {
    "ucb": {"lam": "positive", "beta": "nonnegative"},
    "ts": {"lam": "positive", "nu": "nonnegative"},
}


class LinearConfig(NamedTuple):
    """Static options: kind "ucb" | "ts", bonus (UCB only) and max_history (None: no cap)."""

    kind: str
    bonus: str = "norm"
    max_history: Optional[int] = None


class LinearState(NamedTuple):
    """One agent's state (with a leading [N] axis once lifted by `independent`).

    chol: [d, d] lower Cholesky factor of V = lam I + sum x x^T.
    b:    [d] sum of r x.
    n:    int32 number of observations absorbed.
    """

    chol: jax.Array
    b: jax.Array
    n: jax.Array


# ------------------------------------------------------------------------------ one agent
def init1(config: LinearConfig, key, spec: EnvSpec, params, rows=None) -> LinearState:
    """V = lam I (chol = sqrt(lam) I), b = 0."""
    del config, key, rows
    dtype = float_dtype()
    d = spec.dim
    lam = jnp.asarray(params["lam"], dtype)
    return LinearState(chol=jnp.sqrt(lam) * jnp.eye(d, dtype=dtype), b=jnp.zeros((d,), dtype),
                       n=jnp.zeros((), jnp.int32))


def select1(config: LinearConfig, params, state: LinearState, contexts, key):
    """argmax_k of the UCB scores, or of the TS scores with z = normal(key, (d,))."""
    if config.kind == "ucb":
        return jnp.argmax(ucb_scores(params, state, contexts, config.bonus)).astype(jnp.int32)
    z = jax.random.normal(key, (contexts.shape[-1],), state.b.dtype)
    return jnp.argmax(ts_scores(params, state, contexts, z)).astype(jnp.int32)


def update1(config: LinearConfig, params, state: LinearState, x, reward, key) -> LinearState:
    """V += x x^T, b += r x (nothing once max_history observations are absorbed)."""
    del params, key
    x = x.astype(state.b.dtype)
    new = LinearState(chol_update(state.chol, x), state.b + jnp.asarray(reward, x.dtype) * x, state.n + 1)
    if config.max_history is None:
        return new
    keep = state.n < config.max_history
    return jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new, state)


# ------------------------------------------------------------------------------ scores
def posterior(state: LinearState):
    """mu = V^{-1} b, [d], for one agent."""
    return chol_solve(state.chol, state.b)


def ucb_scores(params, state: LinearState, contexts, bonus: str = "norm"):
    """LinUCB scores [K] for one agent and contexts[K, d] (see the module docstring)."""
    contexts = contexts.astype(state.b.dtype)
    mu = posterior(state)
    W = solve_triangular(state.chol, contexts.T, lower=True)  # [d, K]; ||x||^2_{V^-1} = sum W^2
    quad = jnp.sum(W * W, axis=0)
    width = jnp.sqrt(quad) if bonus == "norm" else quad
    return contexts @ mu + params["beta"] * width


def ts_scores(params, state: LinearState, contexts, z):
    """Linear TS scores [K] for one agent, contexts[K, d] and the standard-normal draw z[d]."""
    contexts = contexts.astype(state.b.dtype)
    dtype = state.b.dtype
    theta = posterior(state) + params["nu"] * solve_triangular(state.chol, z.astype(dtype), lower=True, trans="T")
    return contexts @ theta


# ------------------------------------------------------------------------------ factories
def _build(name: str, config: LinearConfig, given: dict, description: str) -> Algorithm:
    return independent(name, signed_params(name, SIGNS[config.kind], given), partial(init1, config),
                       partial(select1, config), partial(update1, config), description=description)


def linucb(lam=1.0, beta=1.0, *, bonus: str = "norm", max_history: Optional[int] = None) -> Algorithm:
    """LinUCB for N independent agents.

    params: lam > 0 (ridge), beta >= 0 (exploration weight). bonus: "norm" [S] or "quadratic" (the
    baselines' code). max_history: see module.
    """
    config = LinearConfig("ucb", check_static("linucb", "bonus", bonus, BONUSES),
                          check_max_history("linucb", max_history))
    return _build("LinUCB", config, dict(lam=lam, beta=beta),
                  "LinUCB, one ridge regression per agent, no communication")


def lints(lam=1.0, nu=1.0, *, max_history: Optional[int] = None) -> Algorithm:
    """Linear Thompson sampling for N independent agents.

    params: lam > 0 (ridge), nu >= 0 (posterior scale).
    Draw: z = jax.random.normal(key, (d,), dtype) with the agent's select key.
    """
    config = LinearConfig("ts", max_history=check_max_history("lints", max_history))
    return _build("LinTS", config, dict(lam=lam, nu=nu),
                  "linear Thompson sampling, one ridge regression per agent, no communication")
