"""FN-UCB: federated neural upper confidence bound (Dai et al., ICLR 2023), N synchronous agents.

One `core.Algorithm` whose state holds a leading agent axis [N] for the per-agent parts and
unbatched global parts (the server's synchronised statistics). Agents act in parallel (vmap);
a communication round, started by ANY agent's trigger, runs inside `update` under `base.batch_cond`
at the end of the iteration, and its results are used from the next iteration on.

Features. phi(x) = c * g(x; theta0), g = d f / d theta at the FIXED initial parameters theta0
shared by all agents [P]; c = 1/sqrt(m) (feature_scale="sqrt_m", [P]) or c = 1 ("raw", [C]).
p = number of network parameters.

Per iteration s = 0, 1, ... (0-based; `step.t` = s) and agent i, contexts x_k [K, d]:

    V_i     = lam I + W_sync + W_new_i,   theta_i = V_i^{-1} (B_sync + B_new_i)
    UCB_a   = phi_k . theta_i + nu_tkn sqrt(lam) ||phi_k||_{V_i^{-1}}
    UCB_b   = f(x_k; theta_sync) + nu_tk sqrt(lam) * bonus_k
              variant="less" [P, the main experiments]: bonus_k = ||phi_k||_{Vinv_sync},
                  Vinv_sync = (1/N) sum_j (V^local_j)^{-1}   (a mean of INVERSES)
              variant="full" [P]: bonus_k = (1/N) sum_j ||phi_k||_{(V^local_j)^{-1}} (mean of norms)
    score   = (1 - alpha) UCB_a + alpha UCB_b   (UCB_a alone while alpha = 0);  a_i = argmax_k
    after observing y_i:  W_new_i += phi phi^T, B_new_i += y phi, V^local_i += phi phi^T (never reset)
    trigger_i = (s - t_last) * (log det V_i - log det V_last) > D

The log-determinant is the true one from the Cholesky factor of V_i (trigger="exact", [P]) or
the authors' diagonal surrogate sum_j log diag(V_i)_j (trigger="diag", [C]). Since t_last
starts at 0 and s is 0-based, the first iteration never communicates; D = 0 communicates at
every later iteration [C].

Communication round at the end of iteration s (every agent takes part):
    1. while s < train_until: each agent trains its own network, warm-started from its current
       parameters, by `train_steps` full-batch gradient-descent steps (optax SGD, rate lr) on its
       whole local history (masked fixed-capacity buffer):
         loss="paper" [P, eq. (1)]:  1/2 sum (f - y)^2 + m lam / 2 ||theta - theta0||^2
         loss="authors" [C]:         mean (f - y)^2 + (lam / n) / 2 ||theta||^2 (decay toward 0)
       (the same objective as `neural.training_loss`, which is reused).
    2. theta_sync = FedAvg (mean) of the agents' parameters.
    3. Vinv_sync = mean_i (V^local_i)^{-1} ("less"), or the N inverses are kept ("full").
    4. W_sync += sum_i W_new_i, B_sync += sum_i B_new_i; W_new_i = B_new_i = 0;
       V_last = lam I + W_sync (its inverse updated as `fn_ucb_cov` says); t_last = s.
    5. alpha_mode="adaptive": alpha = min_i sigma_min,i / sigma_max,i with
       sigma_i(x) = sqrt(lam) ||phi(x)||_{(V^local_i)^{-1}} over a fixed sample of contexts [P*].

Covariances (`fn_ucb_cov`). covariance="full" keeps every matrix as an inverse, updated by
Sherman-Morrison per step and by rank-N Woodbury updates at a round (a fresh O(p^3)
factorisation only after rare rounds); covariance="diag" [P, Sec. 3.5] replaces every p x p matrix
by its diagonal (then both triggers coincide). A step costs O(N p^2) plus the round's training.
Option minmax_mean (diag only, footnote 4 [P], not in the code, default off): the mean term of
UCB_a is rescaled to [0, 1] across the K contexts (fnucb/fig2c and fig2d switch it on in
mode=paper).

alpha. alpha_mode="linear" (default; the experiments' schedule [P, C] with the code's
indexing): alpha_s = clip((s - alpha_warmup) / alpha_ramp, 0, 1), i.e. 0 for s <= 3, 699/700
at s = 702, 1 from s = 703 on with the defaults 3 and 700. "adaptive": the sigma_min / sigma_max
rule (used at every iteration, the general algorithm of App. F) over `alpha_contexts` [M, d],
or M contexts drawn once at init by `alpha_sampler(key) -> [M, d]`; alpha = 0 until the first
round. "zero" (alpha = 0: UCB_a only) and "one" (alpha = 1 from the start: UCB_b only) are the
ablations of Fig. 1c, as is aggregate_params=False (UCB_b uses the agent's own parameters).
alpha_epoch_start=True is the variant analysed in Theorem 1 [P]: the weight of any mode is used
only at the FIRST iteration of each epoch (s = 0, and s = t_last + 1 after a round at t_last)
and alpha = 0 at every other iteration; with a round at every iteration (D = 0) it changes
nothing from s = 2 on. Default False: the general algorithm (App. F), alpha at every iteration.

Network. parameterization="paper" [P] (no biases, sqrt(m) output, symmetric init: f(x; theta0)
= 0 on duplicated inputs; d and m even) or "authors" [C] (biases, N(0, 1) init); see
`kernels.ntk`. Defaults are the paper's; to reproduce the published curves use
parameterization="authors", feature_scale="raw", loss="authors", trigger="diag",
authors_code=True, lam and nu on the raw-gradient scale.

authors_code=True emulates two quirks of the official code [C] (off by default):
    Q1: one network shared by all agents: in a training round the agents train it one after
        another (agent 0 first, each from the previous agent's result), the features are taken
        at its CURRENT parameters, and theta_sync is that network.
    Q2: an observation enters an agent's training set only in a training round (its own
        observation of that iteration), and training rounds are the rounds with s <
        train_until and alpha_{s+1} > 0 (alpha_{s+1} > 0 also gates the update of Vinv_sync).

Communication accounting (spec Sec. 4), reported by `update` per iteration: rounds = 1 in an
iteration with a round; comm_up = N * upload; comm_down = broadcast, counted ONCE per round (a
multicast to all agents), in scalars:
    diag:  upload 4p + 1; broadcast 4p + 1 ("less") or 3p + 1 + N p ("full").
    full:  upload 2p^2 + 2p + 1; broadcast 2p^2 + 2p + 1 ("less") or (N + 1) p^2 + 2p + 1 ("full");
           with triangular=True each symmetric p x p matrix counts p (p + 1) / 2.

Inactive agents (active[i] = False) add nothing and raise no trigger but take part in rounds.

Per-step diagnostics (`Report.diagnostics`): "trigger", the largest trigger_i of the active
agents (0 when none is active; a round happened iff it exceeds D), and "alpha", the weight used.

Structure. The round (a `base.batch_cond` on "any agent triggers": rare per run, it retrains
every network) and, inside it, the retraining (a `batch_cond` on s < train_until) stay one
conditional for a whole batch of runs; the alpha schedule reads the unbatched step index
`step.t`. Parts: `fn_ucb_cov` (covariance tracker and trigger), the alpha schedule
(`alpha_now`, `adaptive_alpha`), the trainer (`train_agents`), the round (`round_`).

Float hyper-parameters (traced `params`): lam > 0, nu_tkn >= 0, nu_tk >= 0, D >= 0, lr >= 0.
Everything else is the static `FNUCBConfig`. The history buffers [N, C, d] declare
`Sizing.rows` (C = min(t_end, train_until) rows) and `resize`, so the runner grows them in
doubling segments.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.kernels.linalg import pad_rows
from bandits_jax.kernels.ntk import PARAMETERIZATIONS, init_mlp, mlp_apply, ntk_values_and_features

from ..core import Algorithm, ConfigError, EnvSpec, Param, Sizing, declare_params, float_dtype, report
from . import fn_ucb_cov as cov
from .base import batch_cond, check_static
from .fn_ucb_cov import Covariances
from .neural import check_even_dim, check_int, feature_scale, gradient_descent, rows1, training_loss

NAME = "FN-UCB"
VARIANTS = ("less", "full")
COVARIANCES = ("full", "diag")
FEATURE_SCALES = ("sqrt_m", "raw")
LOSSES = ("paper", "authors")
TRIGGERS = ("exact", "diag")
ALPHA_MODES = ("linear", "adaptive", "zero", "one")
BOOLS = (True, False)
PARAMS = {"lam": Param(0.1, "positive"), "nu_tkn": Param(0.1, "nonnegative"), "nu_tk": Param(0.1, "nonnegative"),
          "D": Param(0.0, "nonnegative"), "lr": Param(0.01, "nonnegative")}


class FNUCBConfig(NamedTuple):
    """Static options (module docstring); alpha_contexts [M, d] or alpha_sampler for "adaptive"."""

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
    authors_code: bool
    minmax_mean: bool
    triangular: bool
    alpha_epoch_start: bool
    alpha_contexts: Any = None
    alpha_sampler: Optional[Callable] = None


class Networks(NamedTuple):
    """The networks and their training data. theta: [N, ...] each agent's parameters (flax dict;
    identical under Q1); theta0: the initial parameters (shared, fixed); theta_sync: the FedAvg
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
    check_even_dim(NAME, config.parameterization, spec.dim)
    dtype = float_dtype()
    N, d, C = spec.num_agents, spec.dim, int(sizes.rows)
    lam = jnp.asarray(params["lam"], dtype)
    k_net, k_alpha = jax.random.split(key)
    theta0 = init_mlp(k_net, d, config.width, config.depth, config.parameterization, dtype)
    p = sum(leaf.size for leaf in jax.tree_util.tree_leaves(theta0))
    nets = Networks(theta=jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (N,) + a.shape), theta0),
                    theta0=theta0, theta_sync=theta0, X=jnp.zeros((N, C, d), dtype), y=jnp.zeros((N, C), dtype),
                    n=jnp.zeros((N,), jnp.int32))
    return FNUCBState(nets=nets, covs=cov.init(config, N, p, lam, dtype), b_new=jnp.zeros((N, p), dtype),
                      b_sync=jnp.zeros((p,), dtype), t_last=jnp.zeros((), jnp.int32), alpha=jnp.zeros((), dtype),
                      alpha_x=alpha_contexts(config, k_alpha, d, dtype))


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
    N = state.b_new.shape[0]
    theta = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (N,) + a.shape), theta0)
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
    fparams = feature_params(config, state.nets)
    _, phi = jax.vmap(lambda X: features(config, fparams, X))(contexts)  # [N, K, p]
    ucb_a = cov.ucb_a(config, params, state.covs, state.b_sync, state.b_new, phi)
    bonus_b = cov.bonus_b(config, state.covs, phi)
    ucb_b = ucb_b_mean(config, state.nets, contexts) + params["nu_tk"] * jnp.sqrt(params["lam"]) * bonus_b
    alpha = alpha_now(config, state, step.t)
    score = jnp.where(alpha > 0, (1.0 - alpha) * ucb_a + alpha * ucb_b, ucb_a)
    return jnp.argmax(score, axis=-1).astype(jnp.int32), ()


def ucb_b_mean(config: FNUCBConfig, nets: Networks, contexts):
    """UCB_b's mean [N, K]: f(x_k; theta_sync), or the agent's own network (ablation, or Q1's one
    shared network)."""
    if config.aggregate_params and not config.authors_code:
        return jax.vmap(lambda X: mlp_apply(nets.theta_sync, X))(contexts)
    return jax.vmap(mlp_apply)(nets.theta, contexts)


# ------------------------------------------------------------------------------ update
def update(config: FNUCBConfig, params, state: FNUCBState, step, actions, rewards, aux, key):
    """Absorb the chosen (x, y) of the active agents; a round where any active agent triggers."""
    del aux, key
    dtype = state.b_sync.dtype
    s = jnp.asarray(step.t, jnp.int32)
    N = step.contexts.shape[0]
    alpha_used = alpha_now(config, state, s)
    chosen = jnp.take_along_axis(step.contexts.astype(dtype), actions[:, None, None], axis=1)[:, 0, :]  # [N, d]
    _, phi = features(config, feature_params(config, state.nets), chosen)  # [N, p]
    on = step.active.astype(dtype)
    phi = phi * on[:, None]  # an inactive agent adds a zero feature: every update is a no-op
    y = jnp.asarray(rewards, dtype) * on

    covs, pending = cov.observe(config, state.covs, phi)
    nets = state.nets
    if not config.authors_code:  # every observation joins the training set while training goes on
        nets = append(nets, chosen, y, step.active & (s < config.train_until))
    crit = (s - state.t_last).astype(dtype) * (cov.trigger_logdet(config, covs, params["lam"]) - covs.logdet_last)
    comm = jnp.any(step.active & (crit > params["D"]))
    state = state._replace(nets=nets, covs=covs, b_new=state.b_new + y[:, None] * phi)
    state = batch_cond(comm, partial(round_, config), partial(no_round, config),
                       (params, state, s, chosen, y, step.active, pending))

    up, down = comm_per_round(state.b_sync.shape[0], N, config.variant, config.covariance, config.triangular)
    c = comm.astype(dtype)
    trigger = jnp.max(jnp.where(step.active, crit, 0.0))
    return state, report(dtype, c * up, c * down, c, trigger=trigger, alpha=alpha_used)


def no_round(config: FNUCBConfig, operand) -> FNUCBState:
    """The step without a round: only the deferred update of the agents' V_i^{-1}."""
    _, state, _, _, _, _, pending = operand
    return state._replace(covs=cov.apply_pending(config, state.covs, pending))


def round_(config: FNUCBConfig, operand) -> FNUCBState:
    """The communication round at the end of iteration s (module docstring, steps 1-5)."""
    params, state, s, chosen, y, active, _ = operand
    nets = state.nets
    if config.authors_code:  # Q2: the round's own observations enter the training set, in training rounds
        gate = alpha_gate(config, s)
        train_now = (s < config.train_until) & gate
        nets = append(nets, chosen, y, active & train_now)
    else:
        gate = jnp.asarray(True)
        train_now = s < config.train_until
    theta = batch_cond(train_now, partial(train_agents, config), lambda op: op[1].theta, (params, nets))
    if config.authors_code:
        theta_sync = jax.tree_util.tree_map(lambda a: a[0], theta)
    else:
        theta_sync = jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), theta)
    alpha = state.alpha
    if config.alpha_mode == "adaptive":
        fp = jax.tree_util.tree_map(lambda a: a[0], theta) if config.authors_code else nets.theta0
        alpha = adaptive_alpha(config, fp, state.alpha_x, cov.local_inverses(config, state.covs))
    return state._replace(
        nets=nets._replace(theta=theta, theta_sync=theta_sync),
        covs=cov.synchronise(config, state.covs, params["lam"], gate),
        b_new=jnp.zeros_like(state.b_new), b_sync=state.b_sync + jnp.sum(state.b_new, axis=0), t_last=s, alpha=alpha)


# ------------------------------------------------------------------------------ trainer
def train_agents(config: FNUCBConfig, operand):
    """Every agent's parameters [N, ...] after `train_steps` SGD steps on its own history (agents
    with no data keep theta); under Q1 one network trained by the agents in order 0..N-1."""
    params, nets = operand

    def train1(theta, X, y, n):
        loss = partial(training_loss, config.loss, config.width, params["lam"], theta0=nets.theta0, X=X, y=y, n=n)
        return gradient_descent(loss, theta, params["lr"], jnp.where(n > 0, config.train_steps, 0))

    if not config.authors_code:
        return jax.vmap(train1)(nets.theta, nets.X, nets.y, nets.n)
    shared = jax.tree_util.tree_map(lambda a: a[0], nets.theta)
    shared, _ = lax.scan(lambda th, xs: (train1(th, *xs), None), shared, (nets.X, nets.y, nets.n))
    N = nets.n.shape[0]
    return jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (N,) + a.shape), shared)


def append(nets: Networks, x, y, write) -> Networks:
    """Append row (x_i, y_i) to agent i's history where write[i]; x [N, d], y [N]."""
    C = nets.y.shape[1]
    row = jnp.where(write, nets.n, C)  # index C is out of bounds: the write is dropped
    X = jax.vmap(lambda a, r, v: a.at[r].set(v, mode="drop"))(nets.X, row, x)
    Y = jax.vmap(lambda a, r, v: a.at[r].set(v, mode="drop"))(nets.y, row, y)
    return nets._replace(X=X, y=Y, n=nets.n + write.astype(jnp.int32))


def resize(state: FNUCBState, sizes) -> FNUCBState:
    """The same run with histories of sizes.rows rows (zero padding; no number changes)."""
    rows_ = int(sizes.rows)
    pad = jax.vmap(lambda a: pad_rows(a, rows_))
    return state._replace(nets=state.nets._replace(X=pad(state.nets.X), y=pad(state.nets.y)))


# ------------------------------------------------------------------------------ alpha
def alpha_at(config: FNUCBConfig, adaptive, s, dtype):
    """The weight of iteration s: the linear schedule clip((s - warmup) / ramp, 0, 1), 0, 1, or the
    adaptive value."""
    if config.alpha_mode == "linear":
        return jnp.clip((s.astype(dtype) - config.alpha_warmup) / config.alpha_ramp, 0.0, 1.0)
    if config.alpha_mode == "zero":
        return jnp.zeros((), dtype)
    if config.alpha_mode == "one":
        return jnp.ones((), dtype)
    return adaptive


def alpha_now(config: FNUCBConfig, state: FNUCBState, s):
    """The weight used at iteration s (zero off an epoch's first iteration under alpha_epoch_start)."""
    alpha = alpha_at(config, state.alpha, jnp.asarray(s, jnp.int32), state.b_sync.dtype)
    if config.alpha_epoch_start:  # Theorem 1; a round at s = 0 never happens, so t_last > 0 means "after a round"
        first = (s == 0) | ((state.t_last > 0) & (s == state.t_last + 1))
        alpha = jnp.where(first, alpha, jnp.zeros_like(alpha))
    return alpha


def alpha_gate(config: FNUCBConfig, s):
    """alpha_{s+1} > 0 (Q2's training rounds)."""
    if config.alpha_mode == "linear":
        return (s + 1) > config.alpha_warmup
    return jnp.asarray(config.alpha_mode != "zero")


def adaptive_alpha(config: FNUCBConfig, theta, alpha_x, inverses):
    """min_i sigma_min,i / sigma_max,i over the contexts alpha_x [M, d], sigma_i = ||phi||_{inverses_i}
    (sqrt(lam) cancels in the ratio), phi at theta."""
    _, phi_x = features(config, theta, alpha_x)  # [M, p]
    sig = jax.vmap(lambda A: cov.norms(phi_x, A))(inverses)  # [N, M]
    return jnp.min(jnp.min(sig, axis=1) / jnp.max(sig, axis=1))


def alpha_contexts(config: FNUCBConfig, key, d: int, dtype):
    """[M, d] contexts of the adaptive alpha (given, or drawn by alpha_sampler(key)); [1, d] zeros otherwise."""
    if config.alpha_mode != "adaptive":
        return jnp.zeros((1, d), dtype)
    ax = config.alpha_contexts if config.alpha_contexts is not None else config.alpha_sampler(key)
    ax = jnp.asarray(ax, dtype)
    if ax.ndim != 2 or ax.shape[1] != d:
        raise ConfigError(f"{NAME}: alpha contexts must have shape [M, {d}], got {tuple(ax.shape)}")
    return ax


# ------------------------------------------------------------------------------ helpers
def features(config: FNUCBConfig, theta, X):
    """(f(X) [n], phi(X) [n, p]) at theta for X [n, d]."""
    return ntk_values_and_features(mlp_apply, theta, X, feature_scale(config.feature_scale, config.width))


def feature_params(config: FNUCBConfig, nets: Networks):
    """theta0, fixed; under Q1 the features drift with the one shared network."""
    if config.authors_code:
        return jax.tree_util.tree_map(lambda a: a[0], nets.theta)
    return nets.theta0


def comm_per_round(p: int, num_agents: int, variant: str = "less", covariance: str = "full",
                   triangular: bool = False) -> tuple:
    """(scalars up, scalars down) of one round: up = N * upload, down = one multicast broadcast."""
    if covariance == "full":
        mat = p * (p + 1) // 2 if triangular else p * p
        up = 2 * mat + 2 * p + 1
        down = up if variant == "less" else (num_agents + 1) * mat + 2 * p + 1
    else:
        up = 4 * p + 1
        down = up if variant == "less" else 3 * p + 1 + num_agents * p
    return num_agents * up, down


def check_config(config: FNUCBConfig) -> FNUCBConfig:
    """The static options, validated (ConfigError with the option's name otherwise)."""
    c = config
    for field, low in (("width", 1), ("depth", 2), ("train_steps", 0), ("train_until", 0), ("alpha_warmup", 0),
                       ("alpha_ramp", 1)):
        check_int(NAME, field, getattr(c, field), low)
    for field, allowed in (("variant", VARIANTS), ("covariance", COVARIANCES), ("parameterization", PARAMETERIZATIONS),
                           ("feature_scale", FEATURE_SCALES), ("loss", LOSSES), ("trigger", TRIGGERS),
                           ("alpha_mode", ALPHA_MODES), ("aggregate_params", BOOLS), ("authors_code", BOOLS),
                           ("minmax_mean", BOOLS), ("triangular", BOOLS), ("alpha_epoch_start", BOOLS)):
        check_static(NAME, field, getattr(c, field), allowed)
    if c.parameterization == "paper" and c.width % 2:
        raise ConfigError(f"{NAME}: parameterization='paper' needs an even width, got {c.width}")
    if c.minmax_mean and c.covariance != "diag":
        raise ConfigError(f"{NAME}: minmax_mean applies to covariance='diag' only")
    if c.alpha_mode == "adaptive" and (c.alpha_contexts is None) == (c.alpha_sampler is None):
        raise ConfigError(f"{NAME}: alpha_mode='adaptive' needs exactly one of alpha_contexts [M, d] or alpha_sampler")
    return config


# ------------------------------------------------------------------------------ factory
def fn_ucb(
    lam=0.1,
    nu_tkn=0.1,
    nu_tk=0.1,
    D=0.0,
    lr=0.01,
    *,
    width: int = 20,
    depth: int = 2,
    variant: str = "less",
    covariance: str = "full",
    parameterization: str = "paper",
    feature_scale: str = "sqrt_m",
    loss: str = "paper",
    trigger: str = "exact",
    alpha_mode: str = "linear",
    alpha_warmup: int = 3,
    alpha_ramp: int = 700,
    alpha_contexts=None,
    alpha_sampler: Optional[Callable] = None,
    aggregate_params: bool = True,
    train_steps: int = 30,
    train_until: int = 2000,
    authors_code: bool = False,
    minmax_mean: bool = False,
    triangular: bool = False,
    alpha_epoch_start: bool = False,
) -> Algorithm:
    """FN-UCB as one `core.Algorithm` (module docstring for the method and every option).

    params (traced): lam > 0, nu_tkn >= 0 (UCB_a width), nu_tk >= 0 (UCB_b width), D >= 0
    (communication threshold), lr >= 0 (training step size).
    Static: width m, depth L >= 2, variant "less" [P default] | "full", covariance "full" | "diag",
    parameterization "paper" [P] | "authors" [C], feature_scale "sqrt_m" [P] | "raw" [C], loss
    "paper" [P] | "authors" [C], trigger "exact" [P] | "diag" [C], alpha_mode "linear" (default)
    | "adaptive" | "zero" | "one", alpha_warmup, alpha_ramp (linear schedule), alpha_contexts
    [M, d] or alpha_sampler(key) -> [M, d] (adaptive), aggregate_params, train_steps,
    train_until, authors_code (Q1 + Q2), minmax_mean (diag only), triangular (accounting),
    alpha_epoch_start (Theorem 1's variant: alpha only at the first iteration of an epoch).
    Report diagnostics: "trigger" and "alpha" (module docstring). Bad options raise ConfigError
    before anything compiles.
    """
    config = check_config(FNUCBConfig(
        width, depth, variant, covariance, parameterization, feature_scale, loss, trigger, alpha_mode, alpha_warmup,
        alpha_ramp, aggregate_params, train_steps, train_until, authors_code, minmax_mean, triangular,
        alpha_epoch_start, alpha_contexts, alpha_sampler))
    declared = declare_params(NAME, PARAMS, dict(lam=lam, nu_tkn=nu_tkn, nu_tk=nu_tk, D=D, lr=lr))
    return Algorithm(NAME, declared, partial(init, config), partial(select, config), partial(update, config),
                     Sizing(rows=partial(rows, config), resize=resize), {},
                     f"FN-UCB ({variant}, width {width}, {covariance} covariance, alpha {alpha_mode}"
                     f"{', authors-code quirks' if authors_code else ''})")
