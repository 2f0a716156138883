"""Neural UCB and Neural Thompson sampling, N independent agents.

Each agent owns a ReLU network f(x; theta) (`kernels.ntk`), trained on its own history, and a
covariance Z over the network's tangent features taken at the CURRENT parameters:

    g_k    = c * grad_theta f(x_k; theta)          c = 1 (feature_scale="raw") or 1/sqrt(m) ("sqrt_m")
    width_k = sqrt(g_k^T Z^{-1} g_k)               Z = lam I + sum_s g_s g_s^T   (or its diagonal)
    Neural UCB: score_k = f(x_k; theta) + beta * width_k
    Neural TS:  score_k = f(x_k; theta) + nu * width_k * z_k,   z = jax.random.normal(key, (K,), dtype)

The action is jnp.argmax of the scores (the first index on ties). After the choice Z += g g^T
(a rank-one update of its Cholesky factor, or of diag(Z)), and while t < train_until the agent
appends (x, r) to its history and runs `train_steps` full-batch gradient-descent steps,
warm-started, on one of two losses:
    loss="authors": mean_i (f(x_i) - y_i)^2 + (lam / n) / 2 * ||theta||^2
    loss="paper":   1/2 sum_i (f(x_i) - y_i)^2 + m lam / 2 * ||theta - theta0||^2
Defaults are the official code behind the baselines of Federated Neural Bandits [C]; the standard
forms [S] (Zhou et al. 2020; Zhang et al. 2021) are parameterization="paper",
feature_scale="sqrt_m", loss="paper".

State per agent (`NeuralState`, leading [N] axis once lifted by `base.independent`): the network
parameters, Z's Cholesky factor [p, p] (or diagonal [p]), and a history buffer of
C = min(t_end, train_until) rows with a count n. Float hyper-parameters (lam, beta or nu, lr) are
the traced `params`; everything else is the static `NeuralConfig`.

Walk-through: docs/algorithms/neural.md.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.scipy.linalg import solve_triangular

from bandits_jax.kernels.linalg import chol_update, pad_rows
from bandits_jax.kernels.ntk import MLP, PARAMETERIZATIONS, init_network, mlp_apply, network, ntk_values_and_features

from ...core import Algorithm, ConfigError, EnvSpec, float_dtype
from ..base import check_static, independent, signed_params

COVARIANCES = ("full", "diag")
FEATURE_SCALES = ("raw", "sqrt_m")
LOSSES = ("authors", "paper")
KINDS = ("ucb", "ts")
DEFAULT_WIDTH_COEF = math.sqrt(0.1 * 0.01)
SIGNS = {
    "ucb": {"lam": "positive", "beta": "nonnegative", "lr": "nonnegative"},
    "ts": {"lam": "positive", "nu": "nonnegative", "lr": "nonnegative"},
}


class NeuralConfig(NamedTuple):
    """Static options of neural_ucb and neural_ts (module docstring); kind "ucb" | "ts"."""

    kind: str
    width: int
    depth: int
    train_steps: int
    train_until: int
    covariance: str
    parameterization: str
    feature_scale: str
    loss: str
    net: MLP  # `kernels.ntk.network` of width, depth and parameterization, built once


class NeuralState(NamedTuple):
    """One agent's state (with a leading [N] axis once lifted by `independent`).

    theta:   current network parameters (flax dict, `kernels.ntk` layout); p scalars in all.
    theta0:  the initial parameters, kept only for loss="paper" (None otherwise).
    cov:     [p, p] lower Cholesky factor of Z (covariance="full") or [p] diag(Z) ("diag").
    X:       [C, d] history contexts; rows >= n are zero.
    y:       [C] history rewards; entries >= n are zero.
    n:       int32 number of history rows.
    t:       int32 number of updates absorbed (the agent's step counter).
    """

    theta: Any
    theta0: Any
    cov: jax.Array
    X: jax.Array
    y: jax.Array
    n: jax.Array
    t: jax.Array


# ------------------------------------------------------------------------------ one agent
def rows1(config: NeuralConfig, spec: EnvSpec, t_end: int) -> int:
    """History rows that steps [0, t_end) need: none are stored once training has stopped."""
    return max(1, min(int(t_end), config.train_until))


def init1(config: NeuralConfig, key, spec: EnvSpec, params, rows: int) -> NeuralState:
    """theta = init_mlp(key), Z = lam I, an empty history of `rows` rows."""
    check_even_dim("Neural" + config.kind.upper(), config.net, spec.dim)
    dtype = float_dtype()
    lam = jnp.asarray(params["lam"], dtype)
    theta = init_network(config.net, key, spec.dim, dtype)
    p = sum(leaf.size for leaf in jax.tree_util.tree_leaves(theta))
    cov = jnp.sqrt(lam) * jnp.eye(p, dtype=dtype) if config.covariance == "full" else lam * jnp.ones((p,), dtype)
    return NeuralState(
        theta=theta,
        theta0=theta if config.loss == "paper" else None,
        cov=cov,
        X=jnp.zeros((int(rows), spec.dim), dtype),
        y=jnp.zeros((int(rows),), dtype),
        n=jnp.zeros((), jnp.int32),
        t=jnp.zeros((), jnp.int32),
    )


def select1(config: NeuralConfig, params, state: NeuralState, contexts, key):
    """argmax_k of f(x_k) + beta width_k (UCB) or f(x_k) + nu width_k z_k (TS), contexts [K, d]."""
    mean, width = mean_and_width(config, state, contexts)
    if config.kind == "ucb":
        bonus = params["beta"] * width
    else:
        bonus = params["nu"] * width * jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.argmax(mean + bonus).astype(jnp.int32)


def update1(config: NeuralConfig, params, state: NeuralState, x, reward, key) -> NeuralState:
    """Z += g g^T at the chosen context x [d]; while t < train_until, append (x, reward) and train."""
    del key
    dtype = state.y.dtype
    x = x.astype(dtype)
    _, g = mean_and_features(config, state, x[None, :])
    g = g[0]
    cov = chol_update(state.cov, g) if config.covariance == "full" else state.cov + g * g

    training = state.t < config.train_until
    C = state.y.shape[0]
    row = jnp.where(training, state.n, C)  # index C is out of bounds: the write is dropped
    X = state.X.at[row].set(x, mode="drop")
    y = state.y.at[row].set(jnp.asarray(reward, dtype), mode="drop")
    n = state.n + training.astype(jnp.int32)
    state = state._replace(cov=cov, X=X, y=y, n=n, t=state.t + 1)

    loss = partial(training_loss, config.loss, config.width, params["lam"], theta0=state.theta0, X=X, y=y, n=n)
    theta = gradient_descent(loss, state.theta, params["lr"], jnp.where(training, config.train_steps, 0))
    return state._replace(theta=theta)


def resize1(state: NeuralState, rows: int) -> NeuralState:
    """The same agent with a history of `rows` rows (zero padding; no number changes)."""
    rows = int(rows)
    return state._replace(X=pad_rows(state.X, rows), y=pad_rows(state.y, rows))


# ------------------------------------------------------------------------------ helpers
def feature_scale(name: str, width: int) -> float:
    """c of g = c * grad f: 1/sqrt(m) for "sqrt_m", 1 for "raw"."""
    return 1.0 / math.sqrt(width) if name == "sqrt_m" else 1.0


def mean_and_features(config: NeuralConfig, state: NeuralState, contexts):
    """f(x_k; theta) [K] and the scaled tangent features g_k [K, p] of one agent, contexts [K, d]."""
    contexts = contexts.astype(state.y.dtype)
    return ntk_values_and_features(mlp_apply, state.theta, contexts, feature_scale(config.feature_scale, config.width))


def feature_width(config: NeuralConfig, state: NeuralState, feats):
    """sqrt(g_k^T Z^{-1} g_k) [K] for features feats [K, p] of one agent."""
    if config.covariance == "diag":
        return jnp.sqrt(jnp.sum(feats * feats / state.cov, axis=-1))
    solved = solve_triangular(state.cov, feats.T, lower=True)  # [p, K]
    return jnp.sqrt(jnp.sum(solved * solved, axis=0))


def mean_and_width(config: NeuralConfig, state: NeuralState, contexts):
    """(f(x_k) [K], sqrt(g_k^T Z^{-1} g_k) [K]) of one agent at contexts [K, d]."""
    mean, feats = mean_and_features(config, state, contexts)
    return mean, feature_width(config, state, feats)


def training_loss(loss: str, width: int, lam, theta, *, theta0, X, y, n):
    """The training objective `loss` ("paper" or "authors", `LOSS_FUNCTIONS`) of the module docstring."""
    return LOSS_FUNCTIONS[loss](width, lam, theta, theta0=theta0, X=X, y=y, n=n)


def paper_loss(width: int, lam, theta, *, theta0, X, y, n):
    """1/2 sum of squared residuals + m lam / 2 ||theta - theta0||^2 over the first n rows of X [C, d], y [C]."""
    sq = squared_residuals(theta, X, y, n)
    diff = jax.tree_util.tree_map(lambda a, b: a - b, theta, theta0)
    sq_dist = sum(jnp.sum(leaf * leaf) for leaf in jax.tree_util.tree_leaves(diff))
    return 0.5 * jnp.sum(sq) + 0.5 * width * lam * sq_dist


def authors_loss(width: int, lam, theta, *, theta0, X, y, n):
    """The authors' code: mean squared residual + lam / (2 n) ||theta||^2 (decay toward 0, not theta0)."""
    del width, theta0
    sq = squared_residuals(theta, X, y, n)
    n = n.astype(sq.dtype)
    sq_norm = sum(jnp.sum(leaf * leaf) for leaf in jax.tree_util.tree_leaves(theta))
    return jnp.sum(sq) / n + 0.5 * (lam / n) * sq_norm


def squared_residuals(theta, X, y, n):
    """[C] (f(x_j; theta) - y_j)^2 for the first n rows, 0 beyond."""
    resid = mlp_apply(theta, X) - y
    return jnp.where(jnp.arange(y.shape[0]) < n, resid * resid, 0.0)


LOSS_FUNCTIONS = {"paper": paper_loss, "authors": authors_loss}


def gradient_descent(loss, theta, lr, steps):
    """`steps` (traced int) full-batch optax SGD steps of rate lr on loss(theta), from theta."""
    optimizer = optax.sgd(lr)
    grad_fn = jax.grad(loss)

    def sgd_step(_, carry):
        theta, opt_state = carry
        updates, opt_state = optimizer.update(grad_fn(theta), opt_state, theta)
        return optax.apply_updates(theta, updates), opt_state

    return jax.lax.fori_loop(0, steps, sgd_step, (theta, optimizer.init(theta)))[0]


def check_int(name: str, field: str, value, low: int) -> int:
    """Refuse an option that is not an integer >= low."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: {field} must be an integer >= {low}, got {value!r}")
    return value


def check_even_dim(name: str, net: MLP, dim: int) -> None:
    """The paper network needs an even context dimension (raised when `init` sees the problem)."""
    if net.paper and dim % 2:
        raise ConfigError(f"{name}: parameterization='paper' needs an even context dimension, got d = {dim}; "
                          "zero-pad the contexts to even d (kernels.ntk.pad_to_even) or use "
                          "parameterization='authors'")


def neural_config(name, kind, width, depth, train_steps, train_until, covariance, parameterization, feature_scale,
                  loss) -> NeuralConfig:
    """The validated static options (ConfigError with the option's name otherwise)."""
    for field, value, low in (("width", width, 1), ("depth", depth, 2), ("train_steps", train_steps, 0),
                              ("train_until", train_until, 0)):
        check_int(name, field, value, low)
    for field, value, allowed in (("covariance", covariance, COVARIANCES),
                                  ("parameterization", parameterization, PARAMETERIZATIONS),
                                  ("feature_scale", feature_scale, FEATURE_SCALES), ("loss", loss, LOSSES)):
        check_static(name, field, value, allowed)
    if parameterization == "paper" and width % 2:
        raise ConfigError(f"{name}: parameterization='paper' needs an even width, got {width}")
    return NeuralConfig(kind, width, depth, train_steps, train_until, covariance, parameterization, feature_scale,
                        loss, network(width, depth, parameterization))


def _build(name, config: NeuralConfig, given: dict, description: str) -> Algorithm:
    return independent(name, signed_params(name, SIGNS[config.kind], given), partial(init1, config),
                       partial(select1, config), partial(update1, config), partial(rows1, config), resize1,
                       description)


# ------------------------------------------------------------------------------ factories
def neural_ucb(
    lam=0.1,
    beta=DEFAULT_WIDTH_COEF,
    lr=0.01,
    *,
    width: int = 20,
    depth: int = 2,
    train_steps: int = 30,
    train_until: int = 2000,
    covariance: str = "full",
    parameterization: str = "authors",
    feature_scale: str = "raw",
    loss: str = "authors",
) -> Algorithm:
    """Neural UCB for N independent agents: score = f(x) + beta * sqrt(g^T Z^{-1} g).

    params (traced): lam > 0 (Z0 = lam I and the loss's regulariser), beta >= 0, lr >= 0.
    Static: width m, depth L >= 2, train_steps, train_until, covariance "full" | "diag",
    parameterization "authors" | "paper", feature_scale "raw" | "sqrt_m", loss "authors" | "paper"
    (module docstring). Unknown names or bad values raise ConfigError before anything compiles.
    """
    name = "NeuralUCB"
    config = neural_config(name, "ucb", width, depth, train_steps, train_until, covariance, parameterization,
                           feature_scale, loss)
    return _build(name, config, dict(lam=lam, beta=beta, lr=lr),
                  f"Neural UCB (width {width}, depth {depth}, {covariance} covariance), one network per agent, "
                  "no communication")


def neural_ts(
    lam=0.1,
    nu=DEFAULT_WIDTH_COEF,
    lr=0.01,
    *,
    width: int = 20,
    depth: int = 2,
    train_steps: int = 30,
    train_until: int = 2000,
    covariance: str = "full",
    parameterization: str = "authors",
    feature_scale: str = "raw",
    loss: str = "authors",
) -> Algorithm:
    """Neural TS for N independent agents: score_k = f(x_k) + nu * sqrt(g_k^T Z^{-1} g_k) * z_k.

    z = jax.random.normal(key, (K,), dtype) with the agent's select key. params (traced): lam > 0,
    nu >= 0, lr >= 0. Static options as in `neural_ucb`.
    """
    name = "NeuralTS"
    config = neural_config(name, "ts", width, depth, train_steps, train_until, covariance, parameterization,
                           feature_scale, loss)
    return _build(name, config, dict(lam=lam, nu=nu, lr=lr),
                  f"Neural TS (width {width}, depth {depth}, {covariance} covariance), one network per agent, "
                  "no communication")
