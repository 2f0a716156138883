"""FN-UCB: federated neural UCB (Dai et al., ICLR 2023), N synchronous agents; spec fn-ucb.md.

Two registered algorithms built from the same pieces (docs/algorithms/fn_ucb.md walks through
both): `fn_ucb`, the paper's Algorithms 1-2 [P], and `fn_ucb_authors`, the authors' released
code [C] (one network shared by the agents, data joining it only in training rounds).

Iteration s, agent i, features phi = c * d f(x; theta_f) / d theta [p] at theta_f = theta0 [P]
or the shared network [C], c = 1 / sqrt(m) or 1:
    V_i   = lam I + W_sync + W_new_i,   theta_i = V_i^{-1} (B_sync + B_new_i)
    UCB_a = phi . theta_i + nu_tkn sqrt(lam) ||phi||_{V_i^{-1}}
    UCB_b = f(x; theta_sync) + nu_tk sqrt(lam) ||phi||_{Vinv_sync}     ("full": mean of N norms)
    a_i   = argmax (1 - alpha_s) UCB_a + alpha_s UCB_b,   alpha_s = clip((s - 3) / 700, 0, 1)
    round when any (s - t_last)(log det V_i - log det V_last) > D: train the networks,
    theta_sync = their mean (or the shared one), Vinv_sync = mean_i (V^local_i)^{-1},
    W_sync += sum_i W_new_i, B_sync += sum_i B_new_i, W_new = B_new = 0, t_last = s.
A round's communication (`comm_per_round`) is in scalars per receiver (`core.COMM_UNIT`): N uploads up,
the broadcast to all N agents down; the paper's count (N uploads and ONE broadcast, spec §4) is the
diagnostic comm_paper.

State (`FNUCBState`): networks theta [N, ...], theta0, theta_sync and histories X [N, C, d],
y [N, C], n [N]; the covariance tracker (`fn_ucb_cov.Covariances`, [N, p, p] or [N, p]);
b_new [N, p], b_sync [p], t_last, the adaptive alpha and its contexts [M, d].

Pieces: the networks (`Networking`: SEPARATE or SHARED; UCB_b's mean `own_mean` under
aggregate_params=False) and the training data (`TrainingData`: ALL_DATA or ROUND_DATA), which a
factory picks; the covariance tracker's covariance, trigger and variant (`fn_ucb_cov.Tracker`), the
alpha schedule (`AlphaSchedule`), the feature scale and the training objective, which `assemble`
resolves from the option strings once and binds to one static `FNUCBConfig`: no traced function
compares a string. The round and the retraining are `base.batch_cond`s (one conditional for a batch
of runs). Float hyper-parameters (traced): lam, nu_tkn, nu_tk, D, lr.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels.linalg import pad_rows
from bandits_jax.kernels.ntk import PARAMETERIZATIONS, init_network, mlp_apply, network, ntk_values_and_features

from ...core import Algorithm, ConfigError, EnvSpec, Sizing, float_dtype, report
from . import fn_ucb_cov as cov
from ..base import batch_cond, check_static, signed_params
from .fn_ucb_cov import Covariances
from ..single.neural import LOSS_FUNCTIONS, check_even_dim, check_int, feature_scale, gradient_descent, rows1

NAME = "FN-UCB"
NAME_AUTHORS = "FN-UCB (authors' code)"
VARIANTS = ("less", "full")
COVARIANCES = ("full", "diag")
FEATURE_SCALES = ("sqrt_m", "raw")
LOSSES = ("paper", "authors")
TRIGGERS = ("exact", "diag")
ALPHA_MODES = ("linear", "adaptive", "zero", "one")
BOOLS = (True, False)
# the signs of the float hyper-parameters (traced) both algorithms take; the defaults of every option are in
# the factories' signatures (the options they share have the same defaults: tests/test_fn_ucb.py)
SIGNS = {"lam": "positive", "nu_tkn": "nonnegative", "nu_tk": "nonnegative", "D": "nonnegative",
         "lr": "nonnegative"}
# the authors' code [C]: its network (biases, N(0, 1) init), raw gradients, mean-squared loss with
# decay toward 0, diagonal log-det trigger; no min-max rescaling, alpha at every iteration
AUTHORS_CODE = dict(parameterization="authors", feature_scale="raw", loss="authors", trigger="diag",
                    aggregate_params=True, minmax_mean=False, alpha_epoch_start=False)


class Networking(NamedTuple):
    """How the agents' networks relate: a piece a factory picks, SEPARATE [P] or SHARED [C, Q1].

    feature_params(nets) -> the parameters phi is taken at.
    ucb_b_mean(config, nets, contexts [N, K, d]) -> UCB_b's mean [N, K].
    train(config, (params, nets)) -> every agent's parameters [N, ...] after a training round.
    aggregate(theta [N, ...]) -> theta_sync.
    """

    feature_params: Callable
    ucb_b_mean: Callable
    train: Callable
    aggregate: Callable


class TrainingData(NamedTuple):
    """Which observations the networks train on: a piece, ALL_DATA [P] or ROUND_DATA [C, Q2].

    observe(config, nets, s, x [N, d], y [N], write [N]) -> nets, at every iteration.
    round(config, nets, s, x, y, write) -> (nets, train_now, gate) at a round: whether the networks
    train and whether Vinv_sync is refreshed.
    """

    observe: Callable
    round: Callable


class FNUCBConfig(NamedTuple):
    """Static options (`fn_ucb`, `fn_ucb_authors`) and the two pieces; alpha_contexts [M, d] or
    alpha_sampler for alpha_mode "adaptive"."""

    width: int
    depth: int
    variant: str
    covariance: str
    parameterization: str
    feature_scale: str
    loss: str
    trigger: str
    alpha_mode: str
    alpha_warmup: int
    alpha_ramp: int
    aggregate_params: bool
    train_steps: int
    train_until: int
    minmax_mean: bool
    triangular: bool
    alpha_epoch_start: bool
    networks: Networking
    training: TrainingData
    alpha_contexts: Any
    alpha_sampler: Optional[Callable]
    # chosen once from the options above (`assemble`), so that no traced function compares strings:
    tracker: Any = None  # `fn_ucb_cov.Tracker` of covariance, trigger and variant
    schedule: Any = None  # `AlphaSchedule` of alpha_mode
    scale: float = 1.0  # c of phi = c * grad f (feature_scale)
    objective: Optional[Callable] = None  # `neural.LOSS_FUNCTIONS[loss]`
    net: Any = None  # `kernels.ntk.network` of width, depth and parameterization


class Networks(NamedTuple):
    """The networks and their training data. theta: [N, ...] each agent's parameters (flax dict;
    identical under SHARED); theta0: the initial parameters (shared, fixed); theta_sync: the
    parameters UCB_b uses; X [N, C, d], y [N, C], n [N] int32: training histories (rows >= n zero)."""

    theta: Any
    theta0: Any
    theta_sync: Any
    X: jax.Array
    y: jax.Array
    n: jax.Array


class FNUCBState(NamedTuple):
    """State of FN-UCB: the networks, the covariance tracker (`fn_ucb_cov.Covariances`), and

    b_new:   [N, p] B_new_i.          b_sync: [p] B_sync.
    t_last:  int32, iteration of the last communication round (0 before any).
    alpha:   the adaptive alpha (unused by the other modes).
    alpha_x: [M, d] contexts over which the adaptive alpha is computed ([1, d] zeros otherwise).
    """

    nets: Networks
    covs: Covariances
    b_new: jax.Array
    b_sync: jax.Array
    t_last: jax.Array
    alpha: jax.Array
    alpha_x: jax.Array


# ------------------------------------------------------------------------------ init
rows = rows1  # history rows that steps [0, t_end) need: the same rule as one NeuralUCB agent's


def init(config: FNUCBConfig, key, spec: EnvSpec, params, sizes, public=None) -> FNUCBState:
    """theta0 = init_mlp(split(key)[0]) for every agent, V = lam I, empty histories of sizes.rows rows;
    adaptive alpha contexts from alpha_sampler(split(key)[1]) when given."""
    del public
    check_even_dim(NAME, config.net, spec.dim)
    dtype = float_dtype()
    N, d, C = spec.num_agents, spec.dim, int(sizes.rows)
    lam = jnp.asarray(params["lam"], dtype)
    k_net, k_alpha = jax.random.split(key)
    theta0 = init_network(config.net, k_net, d, dtype)
    p = sum(leaf.size for leaf in jax.tree_util.tree_leaves(theta0))
    nets = Networks(theta=per_agent(theta0, N), theta0=theta0, theta_sync=theta0, X=jnp.zeros((N, C, d), dtype),
                    y=jnp.zeros((N, C), dtype), n=jnp.zeros((N,), jnp.int32))
    return FNUCBState(nets=nets, covs=cov.init(config, N, p, lam, dtype), b_new=jnp.zeros((N, p), dtype),
                      b_sync=jnp.zeros((p,), dtype), t_last=jnp.zeros((), jnp.int32), alpha=jnp.zeros((), dtype),
                      alpha_x=config.schedule.contexts(config, k_alpha, d, dtype))


def with_network(state: FNUCBState, theta0) -> FNUCBState:
    """The state `init` built, started from the given initial network instead of its own draw.

    theta0: a parameter dict laid out as `init_mlp`'s and of the state's shapes,
    {"layer_l": {"kernel": [in, out], "bias": [out]}} (a torch.nn.Linear weight W [out, in] is
    the kernel W^T). It becomes theta0, theta_sync and every agent's parameters [N, ...]; nothing
    else in a fresh state depends on the network. Use it before the first step, e.g. as
    `runner.replay(..., start=partial(with_network, theta0=theta0))`, to replay another
    implementation's run from its initial network.
    """
    ref_leaves, ref_tree = jax.tree_util.tree_flatten(state.nets.theta0)
    leaves, tree = jax.tree_util.tree_flatten(theta0)
    if tree != ref_tree or [jnp.shape(a) for a in leaves] != [a.shape for a in ref_leaves]:
        raise ConfigError(f"{NAME}: the initial network must have the state's layout {_layout(state.nets.theta0)}, "
                          f"got {_layout(theta0)}")
    dtype = state.b_sync.dtype
    theta0 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), theta0)
    theta = per_agent(theta0, state.b_new.shape[0])
    return state._replace(nets=state.nets._replace(theta=theta, theta0=theta0, theta_sync=theta0))


def _layout(tree):
    """The shapes of a parameter tree, for messages."""
    return jax.tree_util.tree_map(lambda a: tuple(jnp.shape(a)), tree)


# ------------------------------------------------------------------------------ select
def select(config: FNUCBConfig, params, state: FNUCBState, step, key):
    """a_i = argmax_k (1 - alpha) UCB_a + alpha UCB_b (UCB_a alone while alpha = 0). aux: ()."""
    del key
    dtype = state.b_sync.dtype
    contexts = step.contexts.astype(dtype)
    fparams = config.networks.feature_params(state.nets)
    _, phi = jax.vmap(lambda X: features(config, fparams, X))(contexts)  # [N, K, p]
    ucb_a = cov.ucb_a(config, params, state.covs, state.b_sync, state.b_new, phi)
    bonus_b = cov.bonus_b(config, state.covs, phi)
    ucb_b = ucb_b_mean(config, state.nets, contexts) + params["nu_tk"] * jnp.sqrt(params["lam"]) * bonus_b
    alpha = alpha_now(config, state, step.t)
    score = jnp.where(alpha > 0, (1.0 - alpha) * ucb_a + alpha * ucb_b, ucb_a)
    return jnp.argmax(score, axis=-1).astype(jnp.int32), ()


def ucb_b_mean(config: FNUCBConfig, nets: Networks, contexts):
    """UCB_b's mean [N, K] for contexts [N, K, d], as the networks piece takes it."""
    return config.networks.ucb_b_mean(config, nets, contexts)


# ------------------------------------------------------------------------------ update
def update(config: FNUCBConfig, params, state: FNUCBState, step, actions, rewards, aux, key):
    """Absorb the chosen (x, y) of the active agents; a round where any active agent triggers."""
    del aux, key
    dtype = state.b_sync.dtype
    s = jnp.asarray(step.t, jnp.int32)
    alpha_used = alpha_now(config, state, s)
    chosen = jnp.take_along_axis(step.contexts.astype(dtype), actions[:, None, None], axis=1)[:, 0, :]  # [N, d]
    _, phi = features(config, config.networks.feature_params(state.nets), chosen)  # [N, p]
    on = step.active.astype(dtype)
    phi = phi * on[:, None]  # an inactive agent adds a zero feature: every update is a no-op
    y = jnp.asarray(rewards, dtype) * on

    covs, pending = cov.observe(config, state.covs, phi)
    nets = config.training.observe(config, state.nets, s, chosen, y, step.active)
    crit = (s - state.t_last).astype(dtype) * (cov.trigger_logdet(config, covs, params["lam"]) - covs.logdet_last)
    comm = jnp.any(step.active & (crit > params["D"]))
    state = state._replace(nets=nets, covs=covs, b_new=state.b_new + y[:, None] * phi)
    state = batch_cond(comm, partial(round_, config), partial(no_round, config),
                       (params, state, s, chosen, y, step.active, pending))

    N = step.contexts.shape[0]
    up, down = comm_per_round(config, state.b_sync.shape[0], N)
    c = comm.astype(dtype)
    trigger = jnp.max(jnp.where(step.active, crit, 0.0))
    return state, report(dtype, c * up, c * down, c, trigger=trigger, alpha=alpha_used,
                         comm_paper=c * (up + down // N))


def no_round(config: FNUCBConfig, operand) -> FNUCBState:
    """The step without a round: only the deferred update of the agents' V_i^{-1}."""
    _, state, _, _, _, _, pending = operand
    return state._replace(covs=cov.apply_pending(config, state.covs, pending))


def round_(config: FNUCBConfig, operand) -> FNUCBState:
    """The communication round at the end of iteration s: (re)train the networks as the two pieces
    say, synchronise the statistics, and (alpha_mode "adaptive") recompute alpha."""
    params, state, s, chosen, y, active, _ = operand
    nets, train_now, gate = config.training.round(config, state.nets, s, chosen, y, active)
    theta = batch_cond(train_now, partial(config.networks.train, config), lambda op: op[1].theta, (params, nets))
    nets = nets._replace(theta=theta, theta_sync=config.networks.aggregate(theta))
    alpha = config.schedule.refresh(config, state, nets)
    return state._replace(
        nets=nets, covs=cov.synchronise(config, state.covs, params["lam"], gate),
        b_new=jnp.zeros_like(state.b_new), b_sync=state.b_sync + jnp.sum(state.b_new, axis=0), t_last=s, alpha=alpha)


# ------------------------------------------------------------------------------ pieces: networks
def at_theta0(nets: Networks):
    """[P] phi at the fixed initial parameters theta0."""
    return nets.theta0


def at_shared_network(nets: Networks):
    """[C, Q1] phi at the shared network's current parameters."""
    return first_agent(nets.theta)


def sync_mean(config: FNUCBConfig, nets: Networks, contexts):
    """[P] f(x_k; theta_sync) (with aggregate_params=False, Fig. 1c's ablation, `own_mean` instead)."""
    del config
    return jax.vmap(lambda X: mlp_apply(nets.theta_sync, X))(contexts)


def own_mean(config: FNUCBConfig, nets: Networks, contexts):
    """f(x_k; theta_i) with each agent's own parameters (under SHARED: the one network)."""
    del config
    return jax.vmap(mlp_apply)(nets.theta, contexts)


def train_separate(config: FNUCBConfig, operand):
    """[P] every agent trains its own network on its own history (agents with no data keep theta)."""
    params, nets = operand
    return jax.vmap(partial(train_one, config, params, nets.theta0))(nets.theta, nets.X, nets.y, nets.n)


def train_shared(config: FNUCBConfig, operand):
    """[C, Q1] one network, trained by the agents in order 0..N-1 (each from the previous result)."""
    params, nets = operand
    one = partial(train_one, config, params, nets.theta0)
    shared, _ = lax.scan(lambda th, xs: (one(th, *xs), None), first_agent(nets.theta), (nets.X, nets.y, nets.n))
    return per_agent(shared, nets.n.shape[0])


def train_one(config: FNUCBConfig, params, theta0, theta, X, y, n):
    """`train_steps` full-batch SGD steps (rate lr) from theta on one history X [C, d], y [C] of n
    rows, on the objective of `loss` (`neural.LOSS_FUNCTIONS`; none when n = 0)."""
    loss = partial(config.objective, config.width, params["lam"], theta0=theta0, X=X, y=y, n=n)
    return gradient_descent(loss, theta, params["lr"], jnp.where(n > 0, config.train_steps, 0))


def fedavg(theta):
    """[P] theta_sync = the mean of the agents' parameters [N, ...]."""
    return jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), theta)


def the_shared_network(theta):
    """[C, Q1] theta_sync = the one network (agent 0's copy of it)."""
    return first_agent(theta)


SEPARATE = Networking(at_theta0, sync_mean, train_separate, fedavg)
SHARED = Networking(at_shared_network, own_mean, train_shared, the_shared_network)


# ------------------------------------------------------------------------------ pieces: training data
def append_while_training(config: FNUCBConfig, nets: Networks, s, x, y, write) -> Networks:
    """[P] every observation joins the agent's history while s < train_until."""
    return append(nets, x, y, write & (s < config.train_until))


def keep_history(config: FNUCBConfig, nets: Networks, s, x, y, write) -> Networks:
    """[C, Q2] nothing joins the history outside a training round."""
    del config, s, x, y, write
    return nets


def train_before_until(config: FNUCBConfig, nets: Networks, s, x, y, write):
    """[P] every round trains while s < train_until and refreshes Vinv_sync."""
    del x, y, write
    return nets, s < config.train_until, jnp.asarray(True)


def append_in_training_rounds(config: FNUCBConfig, nets: Networks, s, x, y, write):
    """[C, Q2] the training rounds are those with s < train_until and alpha_{s+1} > 0, and only in
    them this iteration's observations join; alpha_{s+1} > 0 also gates Vinv_sync."""
    gate = config.schedule.gate(config, s)  # alpha_{s+1} > 0
    train_now = (s < config.train_until) & gate
    return append(nets, x, y, write & train_now), train_now, gate


ALL_DATA = TrainingData(append_while_training, train_before_until)
ROUND_DATA = TrainingData(keep_history, append_in_training_rounds)


# ------------------------------------------------------------------------------ alpha
def alpha_now(config: FNUCBConfig, state: FNUCBState, s):
    """The weight used at iteration s (zero off an epoch's first iteration under alpha_epoch_start)."""
    alpha = config.schedule.at(config, state.alpha, jnp.asarray(s, jnp.int32), state.b_sync.dtype)
    if config.alpha_epoch_start:  # Theorem 1; a round at s = 0 never happens, so t_last > 0 means "after a round"
        first = (s == 0) | ((state.t_last > 0) & (s == state.t_last + 1))
        alpha = jnp.where(first, alpha, jnp.zeros_like(alpha))
    return alpha


def adaptive_alpha(config: FNUCBConfig, theta, alpha_x, inverses):
    """min_i sigma_min,i / sigma_max,i over the contexts alpha_x [M, d], sigma_i = ||phi||_{inverses_i}
    (sqrt(lam) cancels in the ratio), phi at theta."""
    _, phi_x = features(config, theta, alpha_x)  # [M, p]
    sig = jax.vmap(lambda A: cov.norms(phi_x, A))(inverses)  # [N, M]
    return jnp.min(jnp.min(sig, axis=1) / jnp.max(sig, axis=1))


# ------------------------------------------------------------------------------ pieces: alpha schedules
def linear_at(config: FNUCBConfig, adaptive, s, dtype):
    """clip((s - warmup) / ramp, 0, 1)."""
    del adaptive
    return jnp.clip((s.astype(dtype) - config.alpha_warmup) / config.alpha_ramp, 0.0, 1.0)


def linear_gate(config: FNUCBConfig, s):
    return (s + 1) > config.alpha_warmup


def zero_at(config: FNUCBConfig, adaptive, s, dtype):
    del config, adaptive, s
    return jnp.zeros((), dtype)


def one_at(config: FNUCBConfig, adaptive, s, dtype):
    del config, adaptive, s
    return jnp.ones((), dtype)


def adaptive_at(config: FNUCBConfig, adaptive, s, dtype):
    """The value the last round computed (`adaptive_refresh`)."""
    del config, s, dtype
    return adaptive


def never(config: FNUCBConfig, s):
    del config, s
    return jnp.asarray(False)


def always(config: FNUCBConfig, s):
    del config, s
    return jnp.asarray(True)


def keep_alpha(config: FNUCBConfig, state: FNUCBState, nets: Networks):
    del config, nets
    return state.alpha


def adaptive_refresh(config: FNUCBConfig, state: FNUCBState, nets: Networks):
    """`adaptive_alpha` at the round's new networks over the local inverses before the round."""
    inverses = cov.local_inverses(config, state.covs)
    return adaptive_alpha(config, config.networks.feature_params(nets), state.alpha_x, inverses)


def no_contexts(config: FNUCBConfig, key, d: int, dtype):
    del config, key
    return jnp.zeros((1, d), dtype)


def given_or_drawn(config: FNUCBConfig, key, d: int, dtype):
    ax = config.alpha_contexts if config.alpha_contexts is not None else config.alpha_sampler(key)
    ax = jnp.asarray(ax, dtype)
    if ax.ndim != 2 or ax.shape[1] != d:
        raise ConfigError(f"{NAME}: alpha contexts must have shape [M, {d}], got {tuple(ax.shape)}")
    return ax


class AlphaSchedule(NamedTuple):
    """How alpha is set, chosen once from alpha_mode: at(config, adaptive value, s, dtype) -> alpha_s;
    gate(config, s) -> alpha_{s+1} > 0; refresh(config, state, new networks) -> the adaptive value after
    a round; contexts(config, key, d, dtype) -> [M, d] the adaptive alpha's contexts."""

    at: Callable
    gate: Callable
    refresh: Callable
    contexts: Callable


ALPHA_SCHEDULES = {
    "linear": AlphaSchedule(linear_at, linear_gate, keep_alpha, no_contexts),
    "zero": AlphaSchedule(zero_at, never, keep_alpha, no_contexts),
    "one": AlphaSchedule(one_at, always, keep_alpha, no_contexts),
    "adaptive": AlphaSchedule(adaptive_at, always, adaptive_refresh, given_or_drawn),
}


# ------------------------------------------------------------------------------ helpers
def features(config: FNUCBConfig, theta, X):
    """(f(X) [n], phi(X) [n, p]) at theta for X [n, d]."""
    return ntk_values_and_features(mlp_apply, theta, X, config.scale)


def append(nets: Networks, x, y, write) -> Networks:
    """Append row (x_i, y_i) to agent i's history where write[i]; x [N, d], y [N]."""
    C = nets.y.shape[1]
    row = jnp.where(write, nets.n, C)  # index C is out of bounds: the write is dropped
    X = jax.vmap(lambda a, r, v: a.at[r].set(v, mode="drop"))(nets.X, row, x)
    Y = jax.vmap(lambda a, r, v: a.at[r].set(v, mode="drop"))(nets.y, row, y)
    return nets._replace(X=X, y=Y, n=nets.n + write.astype(jnp.int32))


def resize(params, state: FNUCBState, sizes) -> FNUCBState:
    """The same run with histories of sizes.rows rows (zero padding; no number changes)."""
    del params
    rows_ = int(sizes.rows)
    pad = jax.vmap(lambda a: pad_rows(a, rows_))
    return state._replace(nets=state.nets._replace(X=pad(state.nets.X), y=pad(state.nets.y)))


def per_agent(tree, num_agents: int):
    """Every leaf broadcast to a leading agent axis [N, ...]."""
    return jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (num_agents,) + a.shape), tree)


def first_agent(tree):
    """Agent 0's slice of a tree with a leading agent axis (under SHARED: the one network)."""
    return jax.tree_util.tree_map(lambda a: a[0], tree)


def comm_per_round(config: FNUCBConfig, p: int, num_agents: int) -> tuple:
    """(scalars up, scalars down) of one round in scalars per receiver (`core.COMM_UNIT`): every agent's
    upload reaches the server, up = N * upload, and the broadcast reaches every agent, down = N * broadcast
    (`fn_ucb_cov.message_sizes`). The paper's count (spec §4: N uploads and one multicast broadcast),
    N * upload + broadcast, is the diagnostic comm_paper."""
    upload, broadcast = cov.message_sizes(config.tracker, p, num_agents, config.triangular)
    return num_agents * upload, num_agents * broadcast


def check_config(config: FNUCBConfig) -> FNUCBConfig:
    """The static options, validated (ConfigError with the option's name otherwise)."""
    c = config
    for field, low in (("width", 1), ("depth", 2), ("train_steps", 0), ("train_until", 0), ("alpha_warmup", 0),
                       ("alpha_ramp", 1)):
        check_int(NAME, field, getattr(c, field), low)
    for field, allowed in (("variant", VARIANTS), ("covariance", COVARIANCES), ("parameterization", PARAMETERIZATIONS),
                           ("feature_scale", FEATURE_SCALES), ("loss", LOSSES), ("trigger", TRIGGERS),
                           ("alpha_mode", ALPHA_MODES), ("aggregate_params", BOOLS), ("minmax_mean", BOOLS),
                           ("triangular", BOOLS), ("alpha_epoch_start", BOOLS)):
        check_static(NAME, field, getattr(c, field), allowed)
    if c.parameterization == "paper" and c.width % 2:
        raise ConfigError(f"{NAME}: parameterization='paper' needs an even width, got {c.width}")
    if c.minmax_mean and c.covariance != "diag":
        raise ConfigError(f"{NAME}: minmax_mean applies to covariance='diag' only")
    if c.alpha_mode == "adaptive" and (c.alpha_contexts is None) == (c.alpha_sampler is None):
        raise ConfigError(f"{NAME}: alpha_mode='adaptive' needs exactly one of alpha_contexts [M, d] or alpha_sampler")
    return config


# ------------------------------------------------------------------------------ factories
def fn_ucb(lam=0.1, nu_tkn=0.1, nu_tk=0.1, D=0.0, lr=0.01, *, width: int = 20, depth: int = 2,
           variant: str = "less", covariance: str = "full", alpha_mode: str = "linear", alpha_warmup: int = 3,
           alpha_ramp: int = 700, alpha_contexts=None, alpha_sampler=None, train_steps: int = 30,
           train_until: int = 2000, triangular: bool = False, parameterization: str = "paper",
           feature_scale: str = "sqrt_m", loss: str = "paper", trigger: str = "exact", aggregate_params: bool = True,
           minmax_mean: bool = False, alpha_epoch_start: bool = False) -> Algorithm:
    """FN-UCB as the paper writes it [P]: separate networks trained on all local data, FedAvg.

    The options both algorithms share are `assemble`'s. Its own: parameterization "paper" [P] |
    "authors" [C], feature_scale "sqrt_m" | "raw", loss "paper" (eq. 1) | "authors", trigger "exact" |
    "diag" (the code's network and trigger on the paper's protocol are Fig. 1c's no-aggregation
    ablation in mode=authors); aggregate_params=False: UCB_b with the agent's own network (Fig. 1c);
    minmax_mean: footnote 4's rescaling of UCB_a's mean to [0, 1] across the arms (covariance "diag"
    only); alpha_epoch_start: Theorem 1's variant, alpha only at the first iteration of an epoch.
    """
    return assemble(NAME, SEPARATE, ALL_DATA, dict(locals()))


def fn_ucb_authors(lam=0.1, nu_tkn=0.1, nu_tk=0.1, D=0.0, lr=0.01, *, width: int = 20, depth: int = 2,
                   variant: str = "less", covariance: str = "full", alpha_mode: str = "linear",
                   alpha_warmup: int = 3, alpha_ramp: int = 700, alpha_contexts=None, alpha_sampler=None,
                   train_steps: int = 30, train_until: int = 2000, triangular: bool = False) -> Algorithm:
    """FN-UCB as the authors' released code runs it [C], the code behind the published curves: one
    network shared by the agents, trained by them in turn, with the features at its current
    parameters (Q1); observations join the training data only in training rounds, those with
    alpha_{s+1} > 0 (Q2); the code's network, raw features, loss and diagonal trigger
    (AUTHORS_CODE). lam and nu are on the raw-gradient scale. Options: as `assemble`.
    """
    return assemble(NAME_AUTHORS, SHARED, ROUND_DATA, {**locals(), **AUTHORS_CODE}, note=", authors-code quirks")


def assemble(name: str, networks: Networking, training: TrainingData, options: dict, *, note: str = "") -> Algorithm:
    """One `core.Algorithm` from the two pieces and a factory's `options` (every keyword of its signature).

    The options both factories take: the float hyper-parameters lam > 0, nu_tkn >= 0 (UCB_a width),
    nu_tk >= 0 (UCB_b width), D >= 0 (threshold), lr >= 0; and the static options width m, depth
    L >= 2, variant "less" | "full", covariance "full" | "diag", alpha_mode "linear" | "adaptive" |
    "zero" | "one", alpha_warmup and alpha_ramp (linear), alpha_contexts [M, d] or alpha_sampler(key)
    -> [M, d] (adaptive), train_steps, train_until, triangular (accounting). Report diagnostics
    "trigger" (the largest trigger_i of the active agents) and "alpha" (the weight used). Bad options
    raise ConfigError before anything compiles.
    """
    static = {k: v for k, v in options.items() if k not in SIGNS}
    config = check_config(FNUCBConfig(**static, networks=networks, training=training))
    if not config.aggregate_params:  # Fig. 1c's ablation: UCB_b with the agent's own network
        config = config._replace(networks=config.networks._replace(ucb_b_mean=own_mean))
    config = config._replace(tracker=cov.tracker(config.covariance, config.trigger, config.variant),
                             schedule=ALPHA_SCHEDULES[config.alpha_mode],
                             scale=feature_scale(config.feature_scale, config.width),
                             objective=LOSS_FUNCTIONS[config.loss],
                             net=network(config.width, config.depth, config.parameterization))
    hyper = signed_params(name, SIGNS, {k: v for k, v in options.items() if k in SIGNS})
    c = config
    description = f"FN-UCB ({c.variant}, width {c.width}, {c.covariance} covariance, alpha {c.alpha_mode}{note})"
    return Algorithm(name, hyper, partial(init, c), partial(select, c), partial(update, c),
                     Sizing(rows=partial(rows, c), resize=resize), {}, description)
