"""Neural UCB and Neural Thompson sampling, N independent agents.

Each agent owns a ReLU network f(x; theta) (`kernels.ntk`), trained on its own history, and a
covariance Z over the network's tangent features g(x) = d f(x; theta) / d theta taken at the
CURRENT parameters:

    g_k    = c * grad_theta f(x_k; theta)          c = 1 (feature_scale="raw") or 1/sqrt(m) ("sqrt_m")
    width_k = sqrt(g_k^T Z^{-1} g_k)               Z = lam I + sum_s g_s g_s^T   (or its diagonal)
    Neural UCB: score_k = f(x_k; theta) + beta * width_k
    Neural TS:  score_k = f(x_k; theta) + nu * width_k * z_k,   z = jax.random.normal(key, (K,), dtype)
                (one standard-normal draw per arm, with the agent's select key)

The action is jnp.argmax of the scores (the first index on ties). After the choice:

    1. Z += g g^T of the chosen arm's features (at the parameters used for the selection); full
       covariance keeps the Cholesky factor of Z, updated by one rank-one `chol_update` (O(p^2),
       no inverse is ever formed); covariance="diag" keeps diag(Z) and adds g^2.
    2. While the agent's step counter t < train_until: append (x, r) to its history, then run
       `train_steps` full-batch gradient-descent steps (optax SGD, learning rate lr), warm-started
       from the current parameters, on the n rows of the history:
         loss="authors": mean_i (f(x_i) - y_i)^2 + (lam / n) / 2 * ||theta||^2
                         (torch SGD with weight_decay = lam / n; the decay pulls toward 0)
         loss="paper":   1/2 sum_i (f(x_i) - y_i)^2 + m lam / 2 * ||theta - theta0||^2
       From t = train_until on the network is frozen; Z keeps updating.

Which is which ([C]: the official code behind the baselines of Federated Neural Bandits, Dai et
al. 2023; [S]: the standard definitions):
    defaults = the official code [C]: parameterization="authors" (biases, N(0, 1) init), raw
    gradients, loss="authors", 30 steps of lr 0.01, training until step 2000.
    standard forms [S] (Zhou et al. 2020; Zhang et al. 2021): parameterization="paper",
    feature_scale="sqrt_m", loss="paper". (The standard algorithms retrain from theta0 with J
    steps; here training is always warm-started.)
    The code writes the width as sqrt(lam * nu_code * g^T U^{-1} g): beta (or nu) = sqrt(lam * nu_code)
    gives the same scores. The default beta = nu = sqrt(0.1 * 0.01) is the synthetic experiments'
    setting (lam = 0.1, nu_code = 0.01).

State per agent (`NeuralState`, leading [N] axis once lifted): the history is a buffer of static
capacity C with a count n; the loss is masked to the first n rows, so padding (`resize1`) changes
no number. `capacity1(spec, t_end) = min(t_end, train_until)` rows (at least 1): no history is
stored once training has stopped. The training loop's trip count is train_steps while t <
train_until and 0 afterwards, so under vmap it costs nothing once every agent has stopped.

`select` returns info {"mean": [N, K] f(x_k), "width": [N, K] sqrt(g^T Z^{-1} g)}; agent i's
select key is jax.random.split(key, N)[i], as in `base.independent`, which provides init, update
and resize.

Float hyper-parameters (lam, beta or nu, lr) live in the state as traced values; everything else
(width, depth, steps, names) is static.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.scipy.linalg import solve_triangular

from kernels.linalg import chol_update, pad_rows
from kernels.ntk import PARAMETERIZATIONS, init_mlp, mlp_apply, ntk_values_and_features

from ..core import Algorithm, ConfigError, EnvSpec, check_hparams, traced_hparams
from .base import independent

COVARIANCES = ("full", "diag")
FEATURE_SCALES = ("raw", "sqrt_m")
LOSSES = ("authors", "paper")


class NeuralState(NamedTuple):
    """One agent's state (with a leading [N] axis once lifted by `independent`).

    hp:      dict of float hyper-parameters (scalars): lam, beta (UCB) or nu (TS), lr.
    params:  current network parameters (flax dict, `kernels.ntk` layout); p scalars in all.
    params0: theta0, kept only for loss="paper" (None otherwise).
    cov:     [p, p] lower Cholesky factor of Z (covariance="full") or [p] diag(Z) ("diag").
    X:       [C, d] history contexts; rows >= n are zero.
    y:       [C] history rewards; entries >= n are zero.
    n:       int32 number of history rows.
    t:       int32 number of updates absorbed (the agent's step counter).
    """

    hp: dict
    params: Any
    params0: Any
    cov: jax.Array
    X: jax.Array
    y: jax.Array
    n: jax.Array
    t: jax.Array


class NeuralConfig(NamedTuple):
    """Static options shared by neural_ucb and neural_ts (see the module docstring)."""

    width: int
    depth: int
    train_steps: int
    train_until: int
    covariance: str
    parameterization: str
    feature_scale: str
    loss: str


def _float_dtype():
    return jnp.result_type(float)


def _feature_scale(cfg: NeuralConfig) -> float:
    return 1.0 / math.sqrt(cfg.width) if cfg.feature_scale == "sqrt_m" else 1.0


def mean_and_features(cfg: NeuralConfig, state: NeuralState, contexts):
    """f(x_k; theta) [K] and the scaled tangent features g_k [K, p] of one agent, contexts [K, d]."""
    contexts = contexts.astype(state.y.dtype)
    return ntk_values_and_features(mlp_apply, state.params, contexts, _feature_scale(cfg))


def feature_width(cfg: NeuralConfig, state: NeuralState, feats):
    """sqrt(g_k^T Z^{-1} g_k) [K] for features feats [K, p] of one agent."""
    if cfg.covariance == "diag":
        return jnp.sqrt(jnp.sum(feats * feats / state.cov, axis=-1))
    solved = solve_triangular(state.cov, feats.T, lower=True)  # [p, K]
    return jnp.sqrt(jnp.sum(solved * solved, axis=0))


def mean_and_width(cfg: NeuralConfig, state: NeuralState, contexts):
    """(f(x_k) [K], sqrt(g_k^T Z^{-1} g_k) [K]) of one agent at contexts [K, d]."""
    mean, feats = mean_and_features(cfg, state, contexts)
    return mean, feature_width(cfg, state, feats)


def training_loss(cfg: NeuralConfig, params, state: NeuralState, n):
    """The training objective of the module docstring over the first n rows of the history."""
    resid = mlp_apply(params, state.X) - state.y
    sq = jnp.where(jnp.arange(state.y.shape[0]) < n, resid * resid, 0.0)
    lam = state.hp["lam"]
    if cfg.loss == "authors":
        n = n.astype(resid.dtype)
        sq_norm = sum(jnp.sum(leaf * leaf) for leaf in jax.tree_util.tree_leaves(params))
        return jnp.sum(sq) / n + 0.5 * (lam / n) * sq_norm
    diff = jax.tree_util.tree_map(lambda a, b: a - b, params, state.params0)
    sq_dist = sum(jnp.sum(leaf * leaf) for leaf in jax.tree_util.tree_leaves(diff))
    return 0.5 * jnp.sum(sq) + 0.5 * cfg.width * lam * sq_dist


def _make_learner(cfg: NeuralConfig, defaults: dict):
    """init1 / update1 / capacity1 / resize1 shared by neural_ucb and neural_ts."""

    def capacity1(spec: EnvSpec, t_end: int) -> int:
        return max(1, min(int(t_end), cfg.train_until))

    def init1(key, spec, hp, capacity=None):
        if cfg.parameterization == "paper" and spec.dim % 2:
            raise ConfigError(
                f"parameterization='paper' needs an even context dimension, got d = {spec.dim}; "
                "zero-pad the contexts to even d (kernels.ntk.pad_to_even) or use parameterization='authors'"
            )
        dtype = _float_dtype()
        hp = traced_hparams(defaults, hp, dtype)
        params = init_mlp(key, spec.dim, cfg.width, cfg.depth, cfg.parameterization, dtype)
        p = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
        if cfg.covariance == "full":
            cov = jnp.sqrt(hp["lam"]) * jnp.eye(p, dtype=dtype)
        else:
            cov = hp["lam"] * jnp.ones((p,), dtype)
        C = capacity1(spec, spec.horizon) if capacity is None else int(capacity)
        return NeuralState(
            hp=hp,
            params=params,
            params0=params if cfg.loss == "paper" else None,
            cov=cov,
            X=jnp.zeros((C, spec.dim), dtype),
            y=jnp.zeros((C,), dtype),
            n=jnp.zeros((), jnp.int32),
            t=jnp.zeros((), jnp.int32),
        )

    def update1(state: NeuralState, x, reward, key):
        del key
        dtype = state.y.dtype
        x = x.astype(dtype)
        _, g = mean_and_features(cfg, state, x[None, :])
        g = g[0]
        cov = chol_update(state.cov, g) if cfg.covariance == "full" else state.cov + g * g

        training = state.t < cfg.train_until
        C = state.y.shape[0]
        row = jnp.where(training, state.n, C)  # index C is out of bounds: the write is dropped
        X = state.X.at[row].set(x, mode="drop")
        y = state.y.at[row].set(jnp.asarray(reward, dtype), mode="drop")
        n = state.n + training.astype(jnp.int32)
        state = state._replace(cov=cov, X=X, y=y, n=n, t=state.t + 1)

        optimizer = optax.sgd(state.hp["lr"])
        grad_fn = jax.grad(lambda params: training_loss(cfg, params, state, n))

        def sgd_step(_, carry):
            params, opt_state = carry
            updates, opt_state = optimizer.update(grad_fn(params), opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        steps = jnp.where(training, cfg.train_steps, 0)
        params, _ = jax.lax.fori_loop(0, steps, sgd_step, (state.params, optimizer.init(state.params)))
        return state._replace(params=params)

    def resize1(state: NeuralState, rows: int) -> NeuralState:
        rows = int(rows)
        return state._replace(X=pad_rows(state.X, rows), y=pad_rows(state.y, rows))

    return init1, update1, capacity1, resize1


def _check_config(name, width, depth, train_steps, train_until, covariance, parameterization, feature_scale, loss):
    for field, value, low in (("width", width, 1), ("depth", depth, 2), ("train_steps", train_steps, 0),
                              ("train_until", train_until, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name}: {field} must be an integer >= {low}, got {value!r}")
    for field, value, allowed in (("covariance", covariance, COVARIANCES),
                                  ("parameterization", parameterization, PARAMETERIZATIONS),
                                  ("feature_scale", feature_scale, FEATURE_SCALES), ("loss", loss, LOSSES)):
        if value not in allowed:
            raise ConfigError(f"{name}: {field} must be one of {', '.join(allowed)}, got {value!r}")
    if parameterization == "paper" and width % 2:
        raise ConfigError(f"{name}: parameterization='paper' needs an even width, got {width}")
    return NeuralConfig(width, depth, train_steps, train_until, covariance, parameterization, feature_scale, loss)


def _build(name, kind, hp, cfg: NeuralConfig, description) -> Algorithm:
    init1, update1, capacity1, resize1 = _make_learner(cfg, hp)

    def scores1(state, contexts, key):
        mean, width = mean_and_width(cfg, state, contexts)
        if kind == "ucb":
            bonus = state.hp["beta"] * width
        else:
            bonus = state.hp["nu"] * width * jax.random.normal(key, mean.shape, mean.dtype)
        return mean + bonus, mean, width

    def select1(state, contexts, key):
        return jnp.argmax(scores1(state, contexts, key)[0]).astype(jnp.int32)

    def select(state, contexts, key):
        keys = jax.random.split(key, contexts.shape[0])
        scores, mean, width = jax.vmap(scores1)(state, contexts, keys)
        return jnp.argmax(scores, axis=-1).astype(jnp.int32), {"mean": mean, "width": width}

    alg = independent(name, hp, init1, select1, update1, capacity1, resize1, description)
    return alg._replace(select=select)


def neural_ucb(
    lam=0.1,
    beta=math.sqrt(0.1 * 0.01),
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
    **kw,
) -> Algorithm:
    """Neural UCB for N independent agents: score = f(x) + beta * sqrt(g^T Z^{-1} g).

    hparams (traced): lam > 0 (Z0 = lam I and the loss's regulariser), beta >= 0, lr >= 0.
    Static: width m, depth L >= 2, train_steps, train_until, covariance "full" | "diag",
    parameterization "authors" | "paper", feature_scale "raw" | "sqrt_m", loss "authors" | "paper"
    (module docstring). Unknown names or bad values raise ConfigError before anything compiles.
    """
    name = "NeuralUCB"
    hp = check_hparams(name, {"lam": 0.1, "beta": math.sqrt(0.1 * 0.01), "lr": 0.01},
                       dict(lam=lam, beta=beta, lr=lr, **kw), positive=("lam",), nonnegative=("beta", "lr"))
    cfg = _check_config(name, width, depth, train_steps, train_until, covariance, parameterization, feature_scale, loss)
    return _build(name, "ucb", hp, cfg,
                  f"Neural UCB (width {width}, depth {depth}, {covariance} covariance), one network per agent, "
                  "no communication")


def neural_ts(
    lam=0.1,
    nu=math.sqrt(0.1 * 0.01),
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
    **kw,
) -> Algorithm:
    """Neural TS for N independent agents: score_k = f(x_k) + nu * sqrt(g_k^T Z^{-1} g_k) * z_k.

    z = jax.random.normal(key, (K,), dtype) with the agent's select key. hparams (traced): lam > 0,
    nu >= 0, lr >= 0. Static options as in `neural_ucb`.
    """
    name = "NeuralTS"
    hp = check_hparams(name, {"lam": 0.1, "nu": math.sqrt(0.1 * 0.01), "lr": 0.01},
                       dict(lam=lam, nu=nu, lr=lr, **kw), positive=("lam",), nonnegative=("nu", "lr"))
    cfg = _check_config(name, width, depth, train_steps, train_until, covariance, parameterization, feature_scale, loss)
    return _build(name, "ts", hp, cfg,
                  f"Neural TS (width {width}, depth {depth}, {covariance} covariance), one network per agent, "
                  "no communication")
