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

Float hyper-parameters live in the state as traced values; `bonus` and `max_history` are static.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from kernels.linalg import chol_solve, chol_update

from ..core import Algorithm, ConfigError, check_hparams, traced_hparams
from .base import independent


class LinearState(NamedTuple):
    """One agent's state (with a leading [N] axis once lifted by `independent`).

    hp:   dict of float hyper-parameters (scalars).
    chol: [d, d] lower Cholesky factor of V = lam I + sum x x^T.
    b:    [d] sum of r x.
    n:    int32 number of observations absorbed.
    """

    hp: dict
    chol: jax.Array
    b: jax.Array
    n: jax.Array


def _float_dtype():
    return jnp.result_type(float)


def _init1(defaults):
    def init1(key, spec, hp, capacity=None):
        del key, capacity
        dtype = _float_dtype()
        hp = traced_hparams(defaults, hp, dtype)
        d = spec.dim
        return LinearState(
            hp=hp,
            chol=jnp.sqrt(hp["lam"]) * jnp.eye(d, dtype=dtype),
            b=jnp.zeros((d,), dtype),
            n=jnp.zeros((), jnp.int32),
        )

    return init1


def _update1(max_history):
    def update1(state, x, reward, key):
        del key
        x = x.astype(state.b.dtype)
        new = LinearState(state.hp, chol_update(state.chol, x), state.b + jnp.asarray(reward, x.dtype) * x, state.n + 1)
        if max_history is None:
            return new
        keep = state.n < max_history
        return jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new, state)

    return update1


def posterior(state: LinearState):
    """mu = V^{-1} b, [d], for one agent."""
    return chol_solve(state.chol, state.b)


def ucb_scores(state: LinearState, contexts, bonus: str = "norm"):
    """LinUCB scores [K] for one agent and contexts[K, d] (see the module docstring)."""
    contexts = contexts.astype(state.b.dtype)
    mu = posterior(state)
    W = solve_triangular(state.chol, contexts.T, lower=True)  # [d, K]; ||x||^2_{V^-1} = sum W^2
    quad = jnp.sum(W * W, axis=0)
    width = jnp.sqrt(quad) if bonus == "norm" else quad
    return contexts @ mu + state.hp["beta"] * width


def ts_scores(state: LinearState, contexts, z):
    """Linear TS scores [K] for one agent, contexts[K, d] and the standard-normal draw z[d]."""
    contexts = contexts.astype(state.b.dtype)
    theta = posterior(state) + state.hp["nu"] * solve_triangular(state.chol, z.astype(state.b.dtype), lower=True, trans="T")
    return contexts @ theta


def _check_max_history(name, max_history):
    if max_history is None:
        return None
    if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
        raise ConfigError(f"{name}: max_history must be a positive integer or None, got {max_history!r}")
    return max_history


def linucb(lam=1.0, beta=1.0, *, bonus: str = "norm", max_history: Optional[int] = None, **kw) -> Algorithm:
    """LinUCB for N independent agents.

    hparams: lam > 0 (ridge), beta >= 0 (exploration weight). Other keyword names raise
    ConfigError. bonus: "norm" [S] or "quadratic" (the baselines' code). max_history: see module.
    """
    defaults = {"lam": 1.0, "beta": 1.0}
    hp = check_hparams("linucb", defaults, dict(lam=lam, beta=beta, **kw), positive=("lam",), nonnegative=("beta",))
    if bonus not in ("norm", "quadratic"):
        raise ConfigError(f"linucb: bonus must be 'norm' or 'quadratic', got {bonus!r}")
    max_history = _check_max_history("linucb", max_history)

    def select1(state, contexts, key):
        del key
        return jnp.argmax(ucb_scores(state, contexts, bonus)).astype(jnp.int32)

    return independent(
        "LinUCB",
        hp,
        _init1(hp),
        select1,
        _update1(max_history),
        description="LinUCB, one ridge regression per agent, no communication",
    )


def lints(lam=1.0, nu=1.0, *, max_history: Optional[int] = None, **kw) -> Algorithm:
    """Linear Thompson sampling for N independent agents.

    hparams: lam > 0 (ridge), nu >= 0 (posterior scale). Other keyword names raise ConfigError.
    Draw: z = jax.random.normal(key, (d,), dtype) with the agent's select key.
    """
    defaults = {"lam": 1.0, "nu": 1.0}
    hp = check_hparams("lints", defaults, dict(lam=lam, nu=nu, **kw), positive=("lam",), nonnegative=("nu",))
    max_history = _check_max_history("lints", max_history)

    def select1(state, contexts, key):
        z = jax.random.normal(key, (contexts.shape[-1],), state.b.dtype)
        return jnp.argmax(ts_scores(state, contexts, z)).astype(jnp.int32)

    return independent(
        "LinTS",
        hp,
        _init1(hp),
        select1,
        _update1(max_history),
        description="linear Thompson sampling, one ridge regression per agent, no communication",
    )
