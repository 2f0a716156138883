"""Kernel contextual bandits (KernelUCB / GP-UCB, kernel Thompson sampling), N independent agents.

Each agent keeps its own history in buffers of C rows:

    X[C, d] chosen contexts, y[C] rewards, n = number of live rows,
    chol_inv[C, C] = padded INVERSE Cholesky factor of K_n + lam I, K_n = k(X[:n], X[:n]),

grown by one Schur-complement append per observation (`kernels.linalg.inv_chol_append`, O(C^2)).
With k_x = k(X[:n], x):

    mean(x) = k_x^T (K_n + lam I)^{-1} y
    var(x)  = k(x, x) - k_x^T (K_n + lam I)^{-1} k_x          (clipped at 0)

and with no data mean = 0, var = k(x, x). Scores for the K contexts of a step:

    kernel_ucb [S] (Srinivas et al. 2010; Valko et al. 2013): mean + beta * sqrt(var)
    kernel_ts [S] (Chowdhury & Gopalan 2017, per-arm independent form):
        mean + sqrt(max(nu^2 var, var_floor)) * z,  z = jax.random.normal(key, (K,), dtype)

Actions are jnp.argmax of the scores (the first index on ties). Options: max_history (static; the
Federated Neural Bandits baselines cap at 1000), var_floor (their code uses 1e-6). Two other
storages of the same exact model, "panels" and "distinct", serve `dis_kernel.one_kernel_ucb`
(`LEARNERS[storage]`). Float hyper-parameters (lam, beta or nu, lengthscale, var_floor) are the
traced `params`; the kernel, max_history and the storage's sizes are the static `KernelConfig`.

Walk-through: docs/algorithms/kernel.md.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp

from bandits_jax.kernels import panels as panel_ops
from bandits_jax.kernels.functions import Kernel
from bandits_jax.kernels.krr import repeated_points_posterior
from bandits_jax.kernels.linalg import (inv_chol_append, mask_upto, pad_chol, pad_rows, posterior_from_product,
                                        posterior_mean_var_inv)

from ...core import Algorithm, ConfigError, EnvSpec, float_dtype
from ..base import (batch_cond, check_max_history, check_static, independent, kernel_args, resolve_kernel,
                   signed_params, uniform_arm)

STORAGES = ("dense", "panels", "distinct")
FIRST_ARMS = ("argmax", "uniform")
SIGNS = {
    "ucb": {"lam": "positive", "beta": "nonnegative", "lengthscale": "positive"},
    "ts": {"lam": "positive", "nu": "nonnegative", "lengthscale": "positive", "var_floor": "nonnegative"},
}


class KernelConfig(NamedTuple):
    """Static options of one exact kernel learner.

    kernel: the Kernel. kind: "ucb" | "ts" (select1's scores). max_history: dense rows cap (None:
    none). first: the arm of an agent with no data, "argmax" of the prior scores (the first arm on
    ties) or "uniform" (`base.uniform_arm` with the agent's key; the DUETS baselines' code).
    block, pending: the panel height and the pending block (the "panels" `Learner`). distinct_rows:
    rows of the "distinct" `Learner`.
    """

    kernel: Kernel
    kind: str = "ucb"
    max_history: Optional[int] = None
    first: str = "argmax"
    block: int = 1024
    pending: int = 64
    distinct_rows: int = 64


class KernelState(NamedTuple):
    """One agent's state (with a leading [N] axis once lifted by `independent`).

    X:    [C, d] chosen contexts; rows >= n are zero.
    y:    [C] rewards; entries >= n are zero.
    chol_inv: [C, C] padded inverse factor block-diag(chol(K_n + lam I)^{-1}, I_{C-n}).
    n:    int32 number of live rows.
    """

    X: jax.Array
    y: jax.Array
    chol_inv: jax.Array
    n: jax.Array


class PanelKernelState(NamedTuple):
    """`KernelState` with the inverse factor held as row panels with a pending block
    (`kernels.panels.Factor`) instead of a dense [C, C] buffer: a step costs ~n^2 / 2 for n live
    rows, whatever the capacity C."""

    X: jax.Array
    y: jax.Array
    factor: panel_ops.Factor
    n: jax.Array


class DistinctKernelState(NamedTuple):
    """Exact kernel ridge regression on data drawn from a finite set of contexts, kept as the distinct
    points Z[m, d] seen so far (m live of a static capacity), their counts[m] and reward sums[m]."""

    Z: jax.Array
    counts: jax.Array
    sums: jax.Array
    m: jax.Array


AnyKernelState = Union[KernelState, PanelKernelState, DistinctKernelState]


class Learner(NamedTuple):
    """One storage of the exact kernel model as its functions (`LEARNERS`), picked once by a factory.

    rows(config, spec, t_end) -> int: rows that steps [0, t_end) need (None: no time-grown buffer).
    init(config, key, spec, params, rows) -> state: no data (rows None: the horizon's).
    posterior(kern, params, state, contexts[K, d]) -> (mean[K], var[K], cols): cols is None, or
        [C, K] columns L^{-1} k(X, contexts) of which update may take the chosen one as `l`.
    update(config, params, state, x[d], reward, key, keep, l) -> state: absorb (x, reward) when keep.
    resize(config, state, rows) -> state: padded, no number changed (None with rows None).
    has_room(state, x[d]) -> bool: whether absorbing x writes it.
    dtype(state) -> the float dtype of the model.
    """

    rows: Optional[Callable]
    init: Callable
    posterior: Callable
    update: Callable
    resize: Optional[Callable]
    has_room: Callable
    dtype: Callable


# ------------------------------------------------------------------------------ one agent (dense)
def rows1(config: KernelConfig, spec: EnvSpec, t_end: int) -> int:
    """Rows that steps [0, t_end) need: min(t_end, max_history), at least 1."""
    del spec
    rows = int(t_end) if config.max_history is None else min(int(t_end), config.max_history)
    return max(rows, 1)


def init1(config: KernelConfig, key, spec: EnvSpec, params, rows: Optional[int] = None) -> KernelState:
    """An agent with no data and buffers of `rows` rows (default: the horizon's)."""
    del key, params
    dtype, d = float_dtype(), spec.dim
    rows = rows1(config, spec, spec.horizon) if rows is None else int(rows)
    return KernelState(X=jnp.zeros((rows, d), dtype), y=jnp.zeros((rows,), dtype),
                       chol_inv=jnp.eye(rows, dtype=dtype), n=jnp.zeros((), jnp.int32))


def select1(config: KernelConfig, params, state: KernelState, contexts, key):
    """argmax_k of the UCB scores, or of the TS scores with z = normal(key, (K,))."""
    if config.kind == "ucb":
        action = jnp.argmax(ucb_scores(config.kernel, params, state, contexts)).astype(jnp.int32)
        if config.first == "uniform":
            action = jnp.where(state.n == 0, uniform_arm(key, contexts.shape[0], state.y.dtype), action)
        return action
    z = jax.random.normal(key, (contexts.shape[0],), state.y.dtype)
    return jnp.argmax(ts_scores(config.kernel, params, state, contexts, z)).astype(jnp.int32)


def update1(config: KernelConfig, params, state: KernelState, x, reward, key, keep=True, l=None) -> KernelState:
    """Absorb (x, reward): one inverse-factor row appended (O(C^2)); nothing once max_history rows
    are live, nor with keep False (traced; no copy of the state). l: unused (the panels' column)."""
    del key, l
    dtype = state.y.dtype
    x = x.astype(dtype)
    C = state.y.shape[0]
    limit = C if config.max_history is None else min(C, config.max_history)
    p = kernel_args(config.kernel, params, dtype)
    k_col = config.kernel.fn(x[None, :], state.X, p)[0]  # [C]; entries >= n are masked in the append
    k_nn = config.kernel.diag(x[None, :], p)[0] + params["lam"]
    keep = keep & (state.n < limit)
    row = jnp.where(keep, state.n, C)  # an out-of-range row index writes nothing
    chol_inv, _, _ = inv_chol_append(state.chol_inv, row, k_col, k_nn)
    return KernelState(X=state.X.at[row].set(x, mode="drop"),
                       y=state.y.at[row].set(jnp.asarray(reward, dtype), mode="drop"),
                       chol_inv=chol_inv, n=state.n + keep.astype(jnp.int32))


def resize1(config: KernelConfig, state: KernelState, rows: int) -> KernelState:
    """The same agent with buffers of `rows` rows (padding changes no number)."""
    del config
    rows = int(rows)
    return state._replace(X=pad_rows(state.X, rows), y=pad_rows(state.y, rows), chol_inv=pad_chol(state.chol_inv, rows))


def has_room(state: Union[KernelState, PanelKernelState], x):
    """Whether absorbing x writes it (bool): a free row."""
    del x
    return state.n < state.y.shape[0]


# ------------------------------------------------------------------------------ posterior (dense)
def posterior(kern: Kernel, params, state: KernelState, contexts):
    """Posterior mean[K] and variance[K] of one agent at contexts[K, d] (module docstring)."""
    contexts = contexts.astype(state.y.dtype)
    p = kernel_args(kern, params, state.y.dtype)
    k_cross = kern.fn(contexts, state.X, p)  # [K, C]; columns >= n are masked
    k_diag = kern.diag(contexts, p)  # [K]
    return posterior_mean_var_inv(state.chol_inv, k_cross, k_diag, state.y, state.n)


def dense_posterior(kern: Kernel, params, state: KernelState, contexts):
    """`posterior` as a `Learner` gives it: (mean[K], var[K], None)."""
    return (*posterior(kern, params, state, contexts), None)


def ucb_scores(kern: Kernel, params, state: KernelState, contexts):
    """KernelUCB scores [K] = mean + beta * sqrt(var) for one agent and contexts[K, d]."""
    mean, var = posterior(kern, params, state, contexts)
    return mean + params["beta"] * jnp.sqrt(var)


def ts_scores(kern: Kernel, params, state: KernelState, contexts, z):
    """Kernel TS scores [K] = mean + sqrt(max(nu^2 var, var_floor)) * z, for z[K] ~ N(0, I)."""
    mean, var = posterior(kern, params, state, contexts)
    std = jnp.sqrt(jnp.maximum(params["nu"] ** 2 * var, params["var_floor"]))
    return mean + std * z.astype(mean.dtype)


def rows_dtype(state: Union[KernelState, PanelKernelState]):
    """The float dtype of a model kept as rows (dense, panels)."""
    return state.y.dtype


# ------------------------------------------------------------------------------ the panel storage
def panel_rows(config: KernelConfig, spec: EnvSpec, t_end: int) -> int:
    """The horizon rounded up to the panel height, fixed for the run (a step costs ~n^2 / 2
    whatever the capacity)."""
    del t_end
    return panel_ops.padded_rows(max(int(spec.horizon), 1), config.block)


def panel_init(config: KernelConfig, key, spec: EnvSpec, params, rows: Optional[int] = None) -> PanelKernelState:
    """No data, a capacity of `rows` rows rounded up to the panel height (default: the horizon's)."""
    del key, params
    dtype, d = float_dtype(), spec.dim
    rows = panel_rows(config, spec, spec.horizon) if rows is None else int(rows)
    C = panel_ops.padded_rows(rows, config.block)
    return PanelKernelState(X=jnp.zeros((C, d), dtype), y=jnp.zeros((C,), dtype),
                            factor=panel_ops.factor_eye(rows, config.block, config.pending, dtype),
                            n=jnp.zeros((), jnp.int32))


def panel_posterior(kern: Kernel, params, state: PanelKernelState, contexts):
    """(mean[K], var[K], V[C, K] = L^{-1} k(X, contexts)) of a PanelKernelState (update takes the
    chosen context's column as `l`); the pending rows of the factor are included."""
    contexts = contexts.astype(state.y.dtype)
    p = kernel_args(kern, params, state.y.dtype)
    return posterior_from_product(lambda rhs: panel_ops.factor_matmul(state.factor, rhs, state.n, batch_cond),
                                  kern.fn(contexts, state.X, p), kern.diag(contexts, p), state.y, state.n,
                                  state.y.dtype, columns=True)


def panel_update(config: KernelConfig, params, state: PanelKernelState, x, reward, key, keep=True,
                 l=None) -> PanelKernelState:
    """One row appended to the pending block (flushed into the panels when full). l: the column
    L^{-1} k(X, x) if the caller has it (`panel_posterior`)."""
    del key
    dtype = state.y.dtype
    x = x.astype(dtype)
    C = state.y.shape[0]
    p = kernel_args(config.kernel, params, dtype)
    k_nn = config.kernel.diag(x[None, :], p)[0] + params["lam"]
    if l is None:
        k_col = jnp.where(mask_upto(state.n, C), config.kernel.fn(x[None, :], state.X, p)[0], 0.0)
        l = panel_ops.factor_matmul(state.factor, k_col[:, None], state.n, batch_cond)[:, 0]
    keep = keep & (state.n < C)
    row = jnp.where(keep, state.n, C)  # a full buffer (or keep False) writes nothing
    factor = panel_ops.factor_append(state.factor, state.n, l, k_nn, keep, batch_cond)
    return PanelKernelState(X=state.X.at[row].set(x, mode="drop"),
                            y=state.y.at[row].set(jnp.asarray(reward, dtype), mode="drop"),
                            factor=factor, n=state.n + keep.astype(jnp.int32))


def panel_resize(config: KernelConfig, state: PanelKernelState, rows: int) -> PanelKernelState:
    """Panels have a fixed capacity (the horizon) and refuse any other."""
    if panel_ops.padded_rows(int(rows), config.block) != state.y.shape[0]:
        raise ConfigError(f"panel storage has a fixed capacity of {state.y.shape[0]} rows (the horizon); "
                          f"it cannot be resized to {int(rows)}")
    return state


# ------------------------------------------------------------------------------ the distinct storage
def distinct_init(config: KernelConfig, key, spec: EnvSpec, params, rows: Optional[int] = None) -> DistinctKernelState:
    """No distinct point yet, room for config.distinct_rows of them (`rows` is not used)."""
    del key, params, rows
    dtype, d, R = float_dtype(), spec.dim, config.distinct_rows
    return DistinctKernelState(Z=jnp.zeros((R, d), dtype), counts=jnp.zeros((R,), dtype),
                               sums=jnp.zeros((R,), dtype), m=jnp.zeros((), jnp.int32))


def distinct_posterior(kern: Kernel, params, state: DistinctKernelState, contexts):
    """(mean[K], var[K], None): exact KRR on the repeated points (`kernels.krr`)."""
    p = kernel_args(kern, params, state.sums.dtype)
    return (*repeated_points_posterior(kern, p, params["lam"], state.Z, state.counts, state.sums, contexts), None)


def distinct_update(config: KernelConfig, params, state: DistinctKernelState, x, reward, key, keep=True,
                    l=None) -> DistinctKernelState:
    """A point equal to a stored one adds to its count and reward sum; a new point takes the next
    row; a point without room (more than distinct_rows distinct points) is not written."""
    del config, params, key, l
    dtype = state.sums.dtype
    rows = state.Z.shape[0]
    x = x.astype(dtype)
    same = _same_point(state, x)
    found = jnp.any(same)
    room = found | (state.m < rows)
    slot = jnp.where(found, jnp.argmax(same), state.m)
    slot = jnp.where(keep & room, slot, rows)  # out of range: nothing is written
    new = keep & room & ~found
    return state._replace(Z=state.Z.at[slot].set(x, mode="drop"),
                          counts=state.counts.at[slot].add(1.0, mode="drop"),
                          sums=state.sums.at[slot].add(jnp.asarray(reward, dtype), mode="drop"),
                          m=state.m + new.astype(jnp.int32))


def distinct_has_room(state: DistinctKernelState, x):
    """Whether absorbing x writes it (bool): x already stored, or a free row."""
    return jnp.any(_same_point(state, x)) | (state.m < state.Z.shape[0])


def distinct_dtype(state: DistinctKernelState):
    """The float dtype of a distinct-points model."""
    return state.sums.dtype


def _same_point(state: DistinctKernelState, x):
    """[R] bool: the live rows of Z equal (bitwise) to x."""
    rows = state.Z.shape[0]
    return jnp.all(state.Z == x.astype(state.Z.dtype)[None, :], axis=1) & (jnp.arange(rows) < state.m)


LEARNERS = {
    "dense": Learner(rows1, init1, dense_posterior, update1, resize1, has_room, rows_dtype),
    "panels": Learner(panel_rows, panel_init, panel_posterior, panel_update, panel_resize, has_room, rows_dtype),
    "distinct": Learner(None, distinct_init, distinct_posterior, distinct_update, None, distinct_has_room,
                        distinct_dtype),
}


# ------------------------------------------------------------------------------ factories
def _build(name: str, kind: str, kernel, max_history, given: dict, description: str,
           first: str = "argmax") -> Algorithm:
    kern = resolve_kernel(name, kernel)
    config = KernelConfig(kern, kind, check_max_history(name, max_history),
                          first=check_static(name, "first", first, FIRST_ARMS))
    return independent(name, signed_params(name, SIGNS[kind], given), partial(init1, config),
                       partial(select1, config), partial(update1, config), partial(rows1, config),
                       partial(resize1, config), description.format(kern=kern.name))


def kernel_ucb(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    beta=1.0,
    lengthscale=1.0,
    max_history: Optional[int] = None,
    *,
    first: str = "argmax",
) -> Algorithm:
    """KernelUCB / GP-UCB for N independent agents: score = mean + beta * sqrt(var).

    kernel: a registry name (see kernels.functions) or a Kernel. params: lam > 0,
    beta >= 0, lengthscale > 0 (used by kernels that have one). max_history: see the module docstring. first: "argmax" or "uniform" (KernelConfig).
    """
    return _build("KernelUCB", "ucb", kernel, max_history, dict(lam=lam, beta=beta, lengthscale=lengthscale),
                  "KernelUCB ({kern} kernel), one kernel ridge regression per agent, no communication", first)


def kernel_ts(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    nu=1.0,
    lengthscale=1.0,
    max_history: Optional[int] = None,
    var_floor=0.0,
) -> Algorithm:
    """Kernel Thompson sampling for N independent agents: per-arm N(mean, max(nu^2 var, var_floor)).

    params: lam > 0, nu >= 0, lengthscale > 0, var_floor >= 0. Draw: z = jax.random.normal(key,
    (K,), dtype) with the agent's select key.
    """
    return _build("KernelTS", "ts", kernel, max_history,
                  dict(lam=lam, nu=nu, lengthscale=lengthscale, var_floor=var_floor),
                  "kernel Thompson sampling ({kern} kernel), one GP posterior per agent, no communication")
