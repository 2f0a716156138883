"""FN-UCB: federated neural upper confidence bound (Dai et al., ICLR 2023), N synchronous agents.

One `core.Algorithm` whose state holds a leading agent axis [N] for the per-agent parts and
unbatched global parts (the server's synchronised statistics). Agents act in parallel (vmap);
a communication round, started by ANY agent's trigger, runs inside `update` under `lax.cond`
at the end of the iteration, and its results are used from the next iteration on.

Features. phi(x) = c * g(x; theta0), g = d f / d theta at the FIXED initial parameters theta0
shared by all agents [P]; c = 1/sqrt(m) (feature_scale="sqrt_m", [P]) or c = 1 ("raw", [C]).
p = number of network parameters.

Per iteration s = 0, 1, ... (0-based; `state.t` = s) and agent i, contexts x_k [K, d]:

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
       V_last = lam I + W_sync (factorised afresh, once per round); t_last = s.
    5. alpha_mode="adaptive": alpha = min_i sigma_min,i / sigma_max,i with
       sigma_i(x) = sqrt(lam) ||phi(x)||_{(V^local_i)^{-1}} over a fixed sample of contexts [P*].

Covariances. covariance="full": everything is kept as an INVERSE so that UCB_a is a matrix
product (XLA's triangular solves are slow on CPU): V_i^{-1} and (V^local_i)^{-1} by one
Sherman-Morrison update a step; log det V_i (trigger "exact") by log det V + log(1 + phi' V^{-1}
phi); V_last^{-1} at a round by rank-N Woodbury updates (`woodbury_logdet`), one per step since
the previous round, with the features kept in a buffer of R rows (`_row_capacity`: 2N for D = 0,
a round at every step, up to about p / 4); only a round after more than R rows (a large D with
rare rounds) refactorises lam I + W_sync afresh, O(p^3). Right after a
round every V_i equals V_last and the per-agent inverses are not rewritten (`synced`). Nothing
O(p^3) runs per step; a step costs O(N p^2) plus the round's training. The algorithm declares
batching="map": under the runner's vmap a lax.cond would run the round's both branches. covariance="diag" [P, Sec. 3.5]: every
p x p matrix is replaced by its diagonal and all operations are elementwise (theta = B / V,
||phi||^2 = sum phi^2 / V, Vinv_sync = mean 1 / V^local); then both triggers coincide.
Option minmax_mean (diag only, footnote 4 [P], not in the code, default off): the mean term of
UCB_a is rescaled to [0, 1] across the K contexts.

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

Float hyper-parameters (traced, in `state.hp`): lam > 0, nu_tkn >= 0, nu_tk >= 0, D >= 0,
lr >= 0. Everything else is static. The history buffers [N, C, d] declare `capacity` (C =
min(t_end, train_until) rows) and `resize`, so the runner grows them in doubling segments.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.scipy.linalg import solve_triangular

from kernels.linalg import chol_solve, logdet_from_chol, pad_rows, sherman_morrison
from kernels.ntk import PARAMETERIZATIONS, init_mlp, mlp_apply, ntk_values_and_features

from ..core import Algorithm, ConfigError, EnvSpec, check_hparams, traced_hparams
from .neural import NeuralConfig, NeuralState, training_loss

VARIANTS = ("less", "full")
COVARIANCES = ("full", "diag")
FEATURE_SCALES = ("sqrt_m", "raw")
LOSSES = ("paper", "authors")
TRIGGERS = ("exact", "diag")
ALPHA_MODES = ("linear", "adaptive", "zero", "one")
ROUND_FIELDS = ("params", "theta_sync", "vinv_sync", "w_sync", "b_sync", "w_new", "b_new", "X", "y", "n",
                "logdet_last", "t_last", "alpha")
DEFAULT_HPARAMS = {"lam": 0.1, "nu_tkn": 0.1, "nu_tk": 0.1, "D": 0.0, "lr": 0.01}


class FNUCBState(NamedTuple):
    """State of FN-UCB. [N, ...] per agent; the rest is global. P = [p, p] (full) or [p] (diag).

    hp:          dict of traced float hyper-parameters (scalars).
    t:           int32, iterations absorbed (= index s of the next iteration).
    t_last:      int32, iteration of the last communication round (0 before any).
    params:      [N, ...] each agent's network parameters (flax dict; identical under Q1).
    cov:         [N, p, p] V_i^{-1}, V_i = lam I + W_sync + W_new_i (full), or [N, p] diag(V_i) (diag).
    w_new:       [p, p] sum_i W_new_i (full) or [N, p] diag(W_new_i) (diag).   b_new: [N, p] B_new_i.
    local:       [N, P] (V^local_i)^{-1} (full) or diag(V^local_i) (diag).
    w_new_diag:  [N, p] diag(W_new_i) (full; the diagonal trigger), [N, 0] otherwise.
    logdet:      [N] log det V_i (full covariance, trigger "exact"), zeros otherwise.
    vinv_last:   [p, p] V_last^{-1} (full), [1] otherwise.
    rows, nrows: [R, p] the features phi_i observed since the last round (full; N rows a step,
                 R = `_row_capacity`, zero beyond nrows) and their count, R + 1 once they no
                 longer fit.
    synced:      bool, True right after a round (full): then every V_i = V_last and `cov` is stale
                 (not rewritten at the round); V_i^{-1} = vinv_last is used instead.
    X, y, n:     [N, C, d], [N, C], [N] int32: training histories (rows >= n are zero).
    theta0:      initial parameters (shared, fixed).
    theta_sync:  FedAvg parameters used by UCB_b.
    w_sync:      [P] W_sync.              b_sync: [p] B_sync.
    logdet_last: log det V_last (exact or diagonal surrogate, as the trigger).
    vinv_sync:   [P] (variant "less") or [N, P] ("full"): the broadcast local inverses.
    alpha:       the adaptive alpha (unused by the other modes).
    alpha_x:     [M, d] contexts over which the adaptive alpha is computed ([1, d] zeros otherwise).
    """

    hp: dict
    t: jax.Array
    t_last: jax.Array
    params: Any
    cov: jax.Array
    w_new: jax.Array
    b_new: jax.Array
    local: jax.Array
    w_new_diag: jax.Array
    logdet: jax.Array
    vinv_last: jax.Array
    rows: jax.Array
    nrows: jax.Array
    synced: jax.Array
    X: jax.Array
    y: jax.Array
    n: jax.Array
    theta0: Any
    theta_sync: Any
    w_sync: jax.Array
    b_sync: jax.Array
    logdet_last: jax.Array
    vinv_sync: jax.Array
    alpha: jax.Array
    alpha_x: jax.Array


class FNUCBConfig(NamedTuple):
    """Static options (module docstring)."""

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

    hparams (traced): lam > 0, nu_tkn >= 0 (UCB_a width), nu_tk >= 0 (UCB_b width), D >= 0
    (communication threshold), lr >= 0 (training step size).
    Static: width m, depth L >= 2, variant "less" [P default] | "full", covariance "full" | "diag",
    parameterization "paper" [P] | "authors" [C], feature_scale "sqrt_m" [P] | "raw" [C], loss
    "paper" [P] | "authors" [C], trigger "exact" [P] | "diag" [C], alpha_mode "linear" (default)
    | "adaptive" | "zero" | "one", alpha_warmup, alpha_ramp (linear schedule), alpha_contexts
    [M, d] or alpha_sampler(key) -> [M, d] (adaptive), aggregate_params, train_steps,
    train_until, authors_code (Q1 + Q2), minmax_mean (diag only), triangular (accounting),
    alpha_epoch_start (Theorem 1's variant: alpha only at the first iteration of an epoch).

    select -> (actions [N] int32, info {"alpha": scalar, "ucb_a", "ucb_b", "mean_b": [N, K]}).
    update -> (state, info {"comm_up", "comm_down", "rounds", "trigger": [N], "alpha"}).
    Bad options raise ConfigError before anything compiles.
    """
    name = "FN-UCB"
    hp_defaults = check_hparams(name, DEFAULT_HPARAMS, dict(lam=lam, nu_tkn=nu_tkn, nu_tk=nu_tk, D=D, lr=lr),
                                positive=("lam",), nonnegative=("nu_tkn", "nu_tk", "D", "lr"))
    cfg = _check_config(name, width, depth, variant, covariance, parameterization, feature_scale, loss, trigger,
                        alpha_mode, alpha_warmup, alpha_ramp, aggregate_params, train_steps, train_until,
                        authors_code, minmax_mean, triangular, alpha_epoch_start)
    if alpha_mode == "adaptive" and (alpha_contexts is None) == (alpha_sampler is None):
        raise ConfigError(f"{name}: alpha_mode='adaptive' needs exactly one of alpha_contexts [M, d] or alpha_sampler")
    ncfg = NeuralConfig(width, depth, train_steps, train_until, covariance, parameterization,
                        "sqrt_m" if feature_scale == "sqrt_m" else "raw", loss)
    scale = 1.0 / math.sqrt(width) if feature_scale == "sqrt_m" else 1.0
    full_cov = covariance == "full"

    # ------------------------------------------------------------------------------- helpers
    def feature_params(state):
        # Q1: the features drift with the one shared network; otherwise theta0, fixed
        if cfg.authors_code:
            return jax.tree_util.tree_map(lambda a: a[0], state.params)
        return state.theta0

    def features(params, X):
        """(f(X) [n], phi(X) [n, p]) at params for X [n, d]."""
        return ntk_values_and_features(mlp_apply, params, X, scale)

    def alpha_at(state, s):
        if cfg.alpha_mode == "linear":
            return jnp.clip((s.astype(state.b_sync.dtype) - cfg.alpha_warmup) / cfg.alpha_ramp, 0.0, 1.0)
        if cfg.alpha_mode == "zero":
            return jnp.zeros((), state.b_sync.dtype)
        if cfg.alpha_mode == "one":
            return jnp.ones((), state.b_sync.dtype)
        return state.alpha

    def alpha_now(state):
        """The weight used at iteration state.t (zero off an epoch's first iteration under alpha_epoch_start)."""
        alpha = alpha_at(state, state.t)
        if cfg.alpha_epoch_start:  # Theorem 1; a round at s = 0 never happens, so t_last > 0 means "after a round"
            first = (state.t == 0) | ((state.t_last > 0) & (state.t == state.t_last + 1))
            alpha = jnp.where(first, alpha, jnp.zeros_like(alpha))
        return alpha

    def log_det(logdet, w_sync, w_new_diag, lam):
        """The trigger's log det of V_i [N] (full: the exact one, kept incrementally, or the
        diagonal surrogate from diag(W_sync) + diag(W_new_i) [N, p]; diag: logdet = diag(V_i))."""
        if not full_cov:
            return jnp.sum(jnp.log(logdet), axis=-1)
        if cfg.trigger == "exact":
            return logdet
        diag = lam + jnp.diagonal(w_sync) + w_new_diag
        return jnp.sum(jnp.log(diag), axis=-1)

    # ------------------------------------------------------------------------------- init
    def capacity(spec: EnvSpec, t_end: int) -> int:
        return max(1, min(int(t_end), cfg.train_until))

    def init(key, spec, hparams=None, cap=None):
        if cfg.parameterization == "paper" and spec.dim % 2:
            raise ConfigError(f"{name}: parameterization='paper' needs an even context dimension, got d = {spec.dim}; "
                              "zero-pad the contexts (kernels.ntk.pad_to_even) or use parameterization='authors'")
        dtype = jnp.result_type(float)
        N, d = spec.num_agents, spec.dim
        hp = traced_hparams(hp_defaults, hparams, dtype)
        k_net, k_alpha = jax.random.split(key)
        theta0 = init_mlp(k_net, d, cfg.width, cfg.depth, cfg.parameterization, dtype)
        p = sum(leaf.size for leaf in jax.tree_util.tree_leaves(theta0))
        lam = hp["lam"]
        logdet0 = (p * jnp.log(lam)).astype(dtype)
        R = _row_capacity(N, p)
        if full_cov:
            cov1, zero_p, local1 = jnp.eye(p, dtype=dtype) / lam, jnp.zeros((p, p), dtype), jnp.eye(p, dtype=dtype) / lam
            w_new0, w_new_diag0 = zero_p, jnp.zeros((N, p), dtype)
            vinv_last0, rows0 = jnp.eye(p, dtype=dtype) / lam, jnp.zeros((R, p), dtype)
        else:
            cov1, zero_p, local1 = lam * jnp.ones((p,), dtype), jnp.zeros((p,), dtype), lam * jnp.ones((p,), dtype)
            w_new0, w_new_diag0 = jnp.zeros((N, p), dtype), jnp.zeros((N, 0), dtype)
            vinv_last0, rows0 = jnp.zeros((1,), dtype), jnp.zeros((0, p), dtype)
        vinv1 = jnp.eye(p, dtype=dtype) / lam if full_cov else jnp.ones((p,), dtype) / lam
        per_agent = lambda a: jnp.broadcast_to(a, (N,) + a.shape)
        C = capacity(spec, spec.horizon) if cap is None else int(cap)
        if cfg.alpha_mode == "adaptive":
            ax = alpha_contexts if alpha_contexts is not None else alpha_sampler(k_alpha)
            ax = jnp.asarray(ax, dtype)
            if ax.ndim != 2 or ax.shape[1] != d:
                raise ConfigError(f"{name}: alpha contexts must have shape [M, {d}], got {tuple(ax.shape)}")
        else:
            ax = jnp.zeros((1, d), dtype)
        return FNUCBState(
            hp=hp,
            t=jnp.zeros((), jnp.int32),
            t_last=jnp.zeros((), jnp.int32),
            params=jax.tree_util.tree_map(per_agent, theta0),
            cov=per_agent(cov1),
            w_new=w_new0,
            b_new=jnp.zeros((N, p), dtype),
            local=per_agent(local1),
            w_new_diag=w_new_diag0,
            logdet=jnp.full((N,), logdet0, dtype),
            vinv_last=vinv_last0,
            rows=rows0,
            nrows=jnp.zeros((), jnp.int32),
            synced=jnp.asarray(True),
            X=jnp.zeros((N, C, d), dtype),
            y=jnp.zeros((N, C), dtype),
            n=jnp.zeros((N,), jnp.int32),
            theta0=theta0,
            theta_sync=theta0,
            w_sync=zero_p,
            b_sync=jnp.zeros((p,), dtype),
            logdet_last=logdet0,
            vinv_sync=vinv1 if cfg.variant == "less" else per_agent(vinv1),
            alpha=jnp.zeros((), dtype),
            alpha_x=ax,
        )

    # ------------------------------------------------------------------------------- select
    def select(state, contexts, key):
        del key
        dtype = state.b_sync.dtype
        contexts = contexts.astype(dtype)
        lam = state.hp["lam"]
        root_lam = jnp.sqrt(lam)
        fparams = feature_params(state)
        _, phi = jax.vmap(lambda X: features(fparams, X))(contexts)  # [N, K, p]

        def ucb_a1(cov, b_new, phi_i):
            if full_cov:
                mean_a, width_a = mean_and_width_inv(cov, state.b_sync + b_new, phi_i)
            else:
                mean_a, width_a = mean_and_width(cov, state.b_sync + b_new, phi_i)
            if cfg.minmax_mean:
                lo, hi = jnp.min(mean_a), jnp.max(mean_a)
                mean_a = jnp.where(hi > lo, (mean_a - lo) / jnp.where(hi > lo, hi - lo, 1.0), 0.0)
            return mean_a + state.hp["nu_tkn"] * root_lam * width_a

        if full_cov:  # right after a round every agent uses V_last^{-1}: one product for all agents
            def shared():
                return jax.vmap(lambda b_new, phi_i: ucb_a1(state.vinv_last, b_new, phi_i))(state.b_new, phi)

            ucb_a = _maybe(~state.synced, lambda: jax.vmap(ucb_a1)(state.cov, state.b_new, phi), shared())
        else:
            ucb_a = jax.vmap(ucb_a1)(state.cov, state.b_new, phi)

        if cfg.aggregate_params and not cfg.authors_code:
            mean_b = jax.vmap(lambda X: mlp_apply(state.theta_sync, X))(contexts)
        else:  # own parameters (ablation), or the one shared network (Q1)
            mean_b = jax.vmap(mlp_apply)(state.params, contexts)
        if cfg.variant == "less":
            bonus_b = jax.vmap(lambda ph: _norms(ph, state.vinv_sync))(phi)
        else:
            bonus_b = jax.vmap(lambda ph: jnp.mean(jax.vmap(lambda A: _norms(ph, A))(state.vinv_sync), axis=0))(phi)
        ucb_b = mean_b + state.hp["nu_tk"] * root_lam * bonus_b

        alpha = alpha_now(state)
        score = jnp.where(alpha > 0, (1.0 - alpha) * ucb_a + alpha * ucb_b, ucb_a)
        actions = jnp.argmax(score, axis=-1).astype(jnp.int32)
        return actions, {"alpha": alpha, "ucb_a": ucb_a, "ucb_b": ucb_b, "mean_b": mean_b}

    # ------------------------------------------------------------------------------- update
    def update(state, contexts, actions, rewards, active, key):
        del key
        dtype = state.b_sync.dtype
        N = contexts.shape[0]
        s = state.t
        lam = state.hp["lam"]
        alpha_used = alpha_now(state)
        chosen = jnp.take_along_axis(contexts.astype(dtype), actions[:, None, None], axis=1)[:, 0, :]  # [N, d]
        fparams = feature_params(state)
        _, phi = features(fparams, chosen)  # [N, p]
        on = active.astype(dtype)
        phi = phi * on[:, None]  # an inactive agent adds a zero feature: every update is a no-op
        y = jnp.asarray(rewards, dtype) * on

        if full_cov:
            # V_i^{-1} by Sherman-Morrison: v_i = V_i^{-1} phi_i, q_i = phi_i' v_i; the rank-one
            # correction is applied below only if no round follows (a round resets V_i anyway)
            v = _maybe(~state.synced, lambda: jnp.einsum("npq,nq->np", state.cov, phi), phi @ state.vinv_last)
            q = jnp.sum(phi * v, axis=-1)
            logdet = state.logdet + jnp.log1p(q) if cfg.trigger == "exact" else state.logdet
            w_new = state.w_new + phi.T @ phi
            w_new_diag = state.w_new_diag + phi * phi
            local = jax.vmap(sherman_morrison)(state.local, phi)
            R = state.rows.shape[0]
            fits = state.nrows + N <= R
            rows = jnp.where(fits, lax.dynamic_update_slice(state.rows, phi, (jnp.minimum(state.nrows, R - N), jnp.zeros((), state.nrows.dtype))),
                             state.rows)
            nrows = jnp.where(fits, state.nrows + N, R + 1)
            extra = dict(w_new_diag=w_new_diag, logdet=logdet, rows=rows, nrows=nrows)
            cov_ld = logdet
        else:
            cov = state.cov + phi * phi
            w_new = state.w_new + phi * phi
            local = state.local + phi * phi
            extra = dict(cov=cov)
            cov_ld = cov
        b_new = state.b_new + y[:, None] * phi

        X, Y, n = state.X, state.y, state.n
        if not cfg.authors_code:  # every observation joins the training set while training goes on
            X, Y, n = _append(X, Y, n, chosen, y, active & (s < cfg.train_until))

        ld = log_det(cov_ld, state.w_sync, extra.get("w_new_diag"), lam)
        crit = (s - state.t_last).astype(dtype) * (ld - state.logdet_last)
        flags = active & (crit > state.hp["D"])
        comm = jnp.any(flags)

        state = state._replace(w_new=w_new, b_new=b_new, local=local, X=X, y=Y, n=n, **extra)
        if full_cov:
            def no_round(st):
                base = jnp.where(st.synced, st.vinv_last[None], st.cov)
                return {"cov": base - (v[:, :, None] * v[:, None, :]) / (1.0 + q)[:, None, None],
                        "synced": jnp.asarray(False)}
        else:
            no_round = lambda st: {}
        # the round and its alternative as two guarded updates of the disjoint fields they change
        # (a lax.cond on a predicate batched by the runner's vmap would run both branches)
        if full_cov:
            state = state._replace(**_maybe(~comm, lambda: no_round(state), {"cov": state.cov, "synced": state.synced}))
        keys = ROUND_FIELDS + (("synced", "vinv_last", "logdet", "w_new_diag", "rows", "nrows") if full_cov else ("cov",))
        state = state._replace(**_maybe(comm, lambda: round_(state, s, chosen, y, active),
                                        {k: getattr(state, k) for k in keys}))
        state = state._replace(t=s + 1)

        up, down = comm_per_round(state.b_sync.shape[0], N, cfg.variant, cfg.covariance, cfg.triangular)
        c = comm.astype(dtype)
        info = {"comm_up": c * up, "comm_down": c * down, "rounds": c, "trigger": crit, "alpha": alpha_used}
        return state, info

    def round_(state, s, chosen, y, active):
        """The communication round at the end of iteration s (module docstring, steps 1-5)."""
        lam = state.hp["lam"]
        if cfg.authors_code:
            gate = next_alpha_positive(s)
            train_now = (s < cfg.train_until) & gate
            X, Y, n = _append(state.X, state.y, state.n, chosen, y, active & train_now)
            state = state._replace(X=X, y=Y, n=n)
        else:
            gate = jnp.asarray(True)
            train_now = s < cfg.train_until
        params = train_all(state, train_now)
        if cfg.authors_code:
            theta_sync = jax.tree_util.tree_map(lambda a: a[0], params)
        else:
            theta_sync = jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), params)

        if full_cov:
            inverses = state.local
        else:
            inverses = 1.0 / state.local
        vinv_new = _mean0(inverses) if cfg.variant == "less" else inverses
        vinv_sync = jnp.where(gate, vinv_new, state.vinv_sync)

        b_sync = state.b_sync + jnp.sum(state.b_new, axis=0)
        N = state.b_new.shape[0]
        per_agent = lambda a: jnp.broadcast_to(a, (N,) + a.shape)
        if full_cov:
            # V_last^{-1} of lam I + W_sync: a rank-R Woodbury update of the previous one by the rows
            # observed since the last round, or (once they no longer fit) a fresh factorisation
            w_sync = state.w_sync + state.w_new
            R = state.rows.shape[0]
            p = b_sync.shape[0]

            def chunk(j, carry):  # the rows come in blocks of N, one block per step since the last round
                return woodbury_logdet(carry[0], lax.dynamic_slice(state.rows, (j * N, jnp.zeros_like(j)), (N, p)), carry[1])

            n_chunks = jnp.where(state.nrows > R, 0, state.nrows // N)
            updated = lax.fori_loop(0, n_chunks, chunk, (state.vinv_last, state.logdet_last))
            vinv_last, ld_exact = _maybe(state.nrows > R, lambda: _fresh_inverse(lam, w_sync), updated)
            if cfg.trigger == "exact":
                logdet_last = ld_exact
            else:
                logdet_last = log_det(None, w_sync, jnp.zeros_like(b_sync), lam)
            cov_extra = dict(synced=jnp.asarray(True), vinv_last=vinv_last, logdet=jnp.full((N,), logdet_last),
                             w_new_diag=jnp.zeros_like(state.w_new_diag), rows=jnp.zeros_like(state.rows),
                             nrows=jnp.zeros_like(state.nrows))
        else:
            w_sync = state.w_sync + jnp.sum(state.w_new, axis=0)
            cov1 = lam + w_sync
            logdet_last = jnp.sum(jnp.log(cov1))
            cov_extra = dict(cov=per_agent(cov1))

        alpha = state.alpha
        if cfg.alpha_mode == "adaptive":
            fp = jax.tree_util.tree_map(lambda a: a[0], params) if cfg.authors_code else state.theta0
            _, phi_x = features(fp, state.alpha_x)  # [M, p]
            sig = jax.vmap(lambda A: _norms(phi_x, A))(inverses)  # [N, M]; sqrt(lam) cancels in the ratio
            alpha = jnp.min(jnp.min(sig, axis=1) / jnp.max(sig, axis=1))

        return dict(
            params=params, theta_sync=theta_sync, vinv_sync=vinv_sync, w_sync=w_sync, b_sync=b_sync,
            w_new=jnp.zeros_like(state.w_new), b_new=jnp.zeros_like(state.b_new), X=state.X, y=state.y, n=state.n,
            logdet_last=logdet_last, t_last=s, alpha=alpha, **cov_extra)

    def next_alpha_positive(s):
        if cfg.alpha_mode == "linear":
            return (s + 1) > cfg.alpha_warmup
        return jnp.asarray(cfg.alpha_mode != "zero")

    def train_all(state, train_now):
        """Every agent's parameters after the round's local training (unchanged if not train_now)."""
        lam, lr = state.hp["lam"], state.hp["lr"]
        optimizer = optax.sgd(lr)

        def train1(params, X, Y, n):
            hist = NeuralState(hp={"lam": lam}, params=params, params0=state.theta0, cov=None, X=X, y=Y, n=n, t=None)
            grad_fn = jax.grad(lambda prm: training_loss(ncfg, prm, hist, n))

            def step(_, carry):
                prm, opt_state = carry
                updates, opt_state = optimizer.update(grad_fn(prm), opt_state, prm)
                return optax.apply_updates(prm, updates), opt_state

            steps = jnp.where(train_now & (n > 0), cfg.train_steps, 0)
            return lax.fori_loop(0, steps, step, (params, optimizer.init(params)))[0]

        if not cfg.authors_code:
            return jax.vmap(train1)(state.params, state.X, state.y, state.n)
        # Q1: one network, trained by the agents in order 0..N-1
        shared = jax.tree_util.tree_map(lambda a: a[0], state.params)
        shared, _ = lax.scan(lambda prm, xs: (train1(prm, *xs), None), shared, (state.X, state.y, state.n))
        N = state.n.shape[0]
        return jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (N,) + a.shape), shared)

    def resize(state, rows):
        rows = int(rows)
        return state._replace(X=jax.vmap(lambda a: pad_rows(a, rows))(state.X),
                              y=jax.vmap(lambda a: pad_rows(a, rows))(state.y))

    algo = Algorithm(name, dict(hp_defaults), init, select, update, capacity, resize,
                     f"FN-UCB ({variant}, width {width}, {covariance} covariance, alpha {alpha_mode}"
                     f"{', authors-code quirks' if authors_code else ''})", batching="map")
    return algo


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


def mean_and_width(chol, b, phi):
    """UCB_a's terms (phi_k . V^{-1} b [K], ||phi_k||_{V^{-1}} [K]) for phi [K, p], b [p].

    chol: [p, p] lower Cholesky factor of V (full covariance) or [p] diag(V) (diagonal).
    """
    if chol.ndim == 2:
        theta = chol_solve(chol, b)
        solved = solve_triangular(chol, phi.T, lower=True)  # [p, K]
        return phi @ theta, jnp.sqrt(jnp.sum(solved * solved, axis=0))
    return phi @ (b / chol), jnp.sqrt(jnp.sum(phi * phi / chol, axis=-1))


def mean_and_width_inv(vinv, b, phi):
    """`mean_and_width` from the inverse V^{-1} [p, p]: one matrix product V^{-1} [b, phi^T], no solve."""
    sol = vinv @ jnp.concatenate([b[:, None], phi.T], axis=1)  # [p, K + 1]
    return phi @ sol[:, 0], jnp.sqrt(jnp.maximum(jnp.sum(phi.T * sol[:, 1:], axis=0), 0.0))


def woodbury_logdet(vinv, X, logdet):
    """((V + X^T X)^{-1}, log det(V + X^T X)) from vinv = V^{-1} [p, p], rows X [k, p], logdet = log det V.

    With S = I_k + X V^{-1} X^T = L_S L_S^T and Z = L_S^{-1} X V^{-1}: (V + X^T X)^{-1} = V^{-1} - Z^T Z
    and log det(V + X^T X) = log det V + log det S. O(p^2 k); zero rows of X change nothing.
    """
    VX = vinv @ X.T  # [p, k]
    S = jnp.eye(X.shape[0], dtype=vinv.dtype) + X @ VX
    LS = jnp.linalg.cholesky(S)
    Z = solve_triangular(LS, VX.T, lower=True)  # [k, p], a k x k factor
    return vinv - Z.T @ Z, logdet + logdet_from_chol(LS)


def _fresh_inverse(lam, w_sync):
    """((lam I + W)^{-1}, log det(lam I + W)) by one Cholesky factorisation. O(p^3)."""
    p = w_sync.shape[0]
    L = jnp.linalg.cholesky(lam * jnp.eye(p, dtype=w_sync.dtype) + w_sync)
    Linv = solve_triangular(L, jnp.eye(p, dtype=w_sync.dtype), lower=True)
    return Linv.T @ Linv, logdet_from_chol(L)


def _maybe(pred, fn, default):
    """fn() where pred, else default (same structure); fn runs only when pred holds.

    FN-UCB declares batching="map", so pred is never batched by the runner and lax.cond takes one
    branch (under vmap a batched lax.cond would compute both: the full round, the fallback
    O(p^3) refactorisation and the per-agent products at every step).
    """
    return lax.cond(pred, fn, lambda: default)


def _mean0(a):
    """mean over the leading (agent) axis as a chain of adds (XLA's reduce over a major axis of
    [N, p, p] is many times slower than memory bandwidth on CPU)."""
    total = a[0]
    for i in range(1, a.shape[0]):
        total = total + a[i]
    return total / a.shape[0]


def _row_capacity(num_agents: int, p: int) -> int:
    """R, the feature rows kept between rounds (N per step): at least 2N, which covers D = 0 (a
    round every step from s = 1), and up to about p / 4 rows, where the rank-N Woodbury updates
    (4 p^2 N flops each) start to cost more than a fresh O(p^3) factorisation and inverse."""
    return num_agents * max(2, p // (4 * num_agents))


def _norms(phi, A):
    """||phi_k||_A [K] for phi [K, p] and A [p, p] (full) or [p] (a diagonal)."""
    if A.ndim == 1:
        q = jnp.sum(phi * phi * A, axis=-1)
    else:
        q = jnp.einsum("kp,pq,kq->k", phi, A, phi)
    return jnp.sqrt(jnp.maximum(q, 0.0))


def _append(X, Y, n, x, y, write):
    """Append row (x_i, y_i) to agent i's history where write[i]; X [N, C, d], Y [N, C], n [N]."""
    C = Y.shape[1]
    row = jnp.where(write, n, C)  # index C is out of bounds: the write is dropped
    X = jax.vmap(lambda a, r, v: a.at[r].set(v, mode="drop"))(X, row, x)
    Y = jax.vmap(lambda a, r, v: a.at[r].set(v, mode="drop"))(Y, row, y)
    return X, Y, n + write.astype(jnp.int32)


def _check_config(name, width, depth, variant, covariance, parameterization, feature_scale, loss, trigger,
                  alpha_mode, alpha_warmup, alpha_ramp, aggregate_params, train_steps, train_until, authors_code,
                  minmax_mean, triangular, alpha_epoch_start=False) -> FNUCBConfig:
    for field, value, low in (("width", width, 1), ("depth", depth, 2), ("train_steps", train_steps, 0),
                              ("train_until", train_until, 0), ("alpha_warmup", alpha_warmup, 0),
                              ("alpha_ramp", alpha_ramp, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name}: {field} must be an integer >= {low}, got {value!r}")
    for field, value, allowed in (("variant", variant, VARIANTS), ("covariance", covariance, COVARIANCES),
                                  ("parameterization", parameterization, PARAMETERIZATIONS),
                                  ("feature_scale", feature_scale, FEATURE_SCALES), ("loss", loss, LOSSES),
                                  ("trigger", trigger, TRIGGERS), ("alpha_mode", alpha_mode, ALPHA_MODES)):
        if value not in allowed:
            raise ConfigError(f"{name}: {field} must be one of {', '.join(allowed)}, got {value!r}")
    for field, value in (("aggregate_params", aggregate_params), ("authors_code", authors_code),
                         ("minmax_mean", minmax_mean), ("triangular", triangular),
                         ("alpha_epoch_start", alpha_epoch_start)):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: {field} must be True or False, got {value!r}")
    if parameterization == "paper" and width % 2:
        raise ConfigError(f"{name}: parameterization='paper' needs an even width, got {width}")
    if minmax_mean and covariance != "diag":
        raise ConfigError(f"{name}: minmax_mean applies to covariance='diag' only")
    return FNUCBConfig(width, depth, variant, covariance, parameterization, feature_scale, loss, trigger, alpha_mode,
                       alpha_warmup, alpha_ramp, aggregate_params, train_steps, train_until, authors_code, minmax_mean,
                       triangular, alpha_epoch_start)
