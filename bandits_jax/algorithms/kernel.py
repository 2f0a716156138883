"""Kernel contextual bandits (KernelUCB / GP-UCB, kernel Thompson sampling), N independent agents.

Each agent keeps its own history in buffers of static capacity C:

    X[C, d] chosen contexts, y[C] rewards, n = number of live rows,
    chol_inv[C, C] = padded INVERSE Cholesky factor of K_n + lam I, K_n = k(X[:n], X[:n]),

grown by one Schur-complement append per observation (`kernels.linalg.inv_chol_append`,
O(C^2), one new row written). Keeping L^{-1} rather than L turns every per-step triangular
solve into a matrix-vector product, which XLA runs at memory bandwidth on CPU (its
triangular solve is several times slower).
With k_x = k(X[:n], x):

    mean(x) = k_x^T (K_n + lam I)^{-1} y
    var(x)  = k(x, x) - k_x^T (K_n + lam I)^{-1} k_x          (clipped at 0)

and with no data mean = 0, var = k(x, x). Scores for the K contexts of a step:

    kernel_ucb [S] (Srinivas et al. 2010; Valko et al. 2013, up to the scale absorbed in beta):
        mean + beta * sqrt(var)
    kernel_ts [S] (Chowdhury & Gopalan 2017, per-arm independent form):
        mean + sqrt(max(nu^2 var, var_floor)) * z,  z = jax.random.normal(key, (K,), dtype)
        drawn with the agent's select key. var_floor = 0 is standard. The baselines' code of the
        Neural/Federated Neural Bandits papers uses var_floor = 1e-6 (an option).

Actions are jnp.argmax of the scores (the first index on ties).

Option max_history (static): once n reaches it, nothing more is added. The Federated Neural
Bandits baselines cap at 1000. The default None keeps everything. The baselines' code uses the
Laplacian kernel exp(-||x - x'||) (kernel="laplacian", lengthscale=1) and a variance scaled by
lam nu, i.e. beta = sqrt(lam nu) here.

Growing capacity: `capacity1(spec, t_end) = min(t_end, max_history)` rows; `resize1` pads the
buffers (zeros) and the factor (identity), which changes no number. A buffer that is full stops
absorbing data, so the runner must provide `capacity1` rows.

Float hyper-parameters (lam, beta or nu, lengthscale, var_floor) live in the state as traced
values. The kernel and max_history are static.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Union

import jax
import jax.numpy as jnp

from kernels import panels as panel_ops
from kernels.functions import Kernel, get_kernel
from kernels.linalg import (inv_chol_append, mask_upto, pad_chol, pad_rows, posterior_from_product,
                            posterior_mean_var_inv)

from ..core import Algorithm, ConfigError, EnvSpec, check_hparams, traced_hparams
from .base import independent
from .linear import _check_max_history, _float_dtype


class KernelState(NamedTuple):
    """One agent's state (with a leading [N] axis once lifted by `independent`).

    hp:   dict of float hyper-parameters (scalars).
    X:    [C, d] chosen contexts; rows >= n are zero.
    y:    [C] rewards; entries >= n are zero.
    chol_inv: [C, C] padded inverse factor block-diag(chol(K_n + lam I)^{-1}, I_{C-n}).
    n:    int32 number of live rows.
    """

    hp: dict
    X: jax.Array
    y: jax.Array
    chol_inv: jax.Array
    n: jax.Array


class PanelKernelState(NamedTuple):
    """`KernelState` with the inverse factor held as row panels with a pending block
    (`kernels.panels.Factor`) instead of a dense [C, C] buffer: a step costs ~n^2 / 2 for n live
    rows, whatever the capacity C."""

    hp: dict
    X: jax.Array
    y: jax.Array
    factor: panel_ops.Factor
    n: jax.Array


class DistinctKernelState(NamedTuple):
    """Exact kernel ridge regression on data drawn from a finite set of contexts, kept as the distinct
    points Z[m, d] seen so far (m live of a static capacity), their counts[m] and reward sums[m]."""

    hp: dict
    Z: jax.Array
    counts: jax.Array
    sums: jax.Array
    m: jax.Array


def distinct_posterior(kern: Kernel, state: DistinctKernelState, contexts):
    """Exact KRR mean[K], var[K] (no 1/lam) at contexts[K, d] from the distinct points. O(m^3).

    With c the counts, s the reward sums, G = k(Z, Z), D = diag(sqrt(c)) and A = lam I + D G D,
    the push-through identity (K + lam I)^{-1} restricted to repeated points gives, for x with
    k = k(Z, x):
        var(x)  = k(x, x) - (D k)^T A^{-1} (D k)
        mean(x) = (k^T s - (D k)^T A^{-1} D G s) / lam
    i.e. exactly `posterior` on the full history (tested to 1e-10); rows with count 0 drop out.
    """
    dtype = state.sums.dtype
    contexts = contexts.astype(dtype)
    p = kernel_params(kern, state)
    lam = state.hp["lam"]
    sq = jnp.sqrt(state.counts.astype(dtype))
    G = kern.fn(state.Z, state.Z, p)
    A = lam * jnp.eye(G.shape[0], dtype=dtype) + sq[:, None] * G * sq[None, :]
    L = jnp.linalg.cholesky(A)
    kq = kern.fn(state.Z, contexts, p)  # [m, K]
    rhs = jnp.concatenate([sq[:, None] * kq, (sq * (G @ state.sums))[:, None]], axis=1)
    sol = jax.scipy.linalg.solve_triangular(L, rhs, lower=True)
    V, w = sol[:, :-1], sol[:, -1]
    var = jnp.maximum(kern.diag(contexts, p) - jnp.sum(V * V, axis=0), 0.0)
    mean = (kq.T @ state.sums - V.T @ w) / lam
    return mean, var


def _resolve_kernel(algorithm_name, kernel) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    try:
        return get_kernel(kernel)
    except ValueError as err:
        raise ConfigError(f"{algorithm_name}: {err}") from None


def _kernel_params(defaults, lengthscale, dtype):
    """The kernel's default params with every `lengthscale` (also nested) set to the hparam."""
    out = {}
    for name, value in defaults.items():
        if isinstance(value, dict):
            out[name] = _kernel_params(value, lengthscale, dtype)
        elif name == "lengthscale":
            out[name] = lengthscale
        else:
            out[name] = jnp.asarray(value, dtype)
    return out


def kernel_params(kern: Kernel, state) -> dict:
    """The kernel's params for one agent's state (the lengthscale hparam, the rest defaults)."""
    dtype = state.sums.dtype if isinstance(state, DistinctKernelState) else state.y.dtype
    return _kernel_params(kern.params, state.hp["lengthscale"], dtype)


def panel_posterior(kern: Kernel, state: PanelKernelState, contexts):
    """`posterior` of a PanelKernelState with the columns V[C, K] = L^{-1} k(X, contexts) as well
    (update1 of the panel learner takes the chosen context's column as `l`); the pending rows of
    the factor are included."""
    contexts = contexts.astype(state.y.dtype)
    p = kernel_params(kern, state)
    return posterior_from_product(lambda rhs: panel_ops.factor_matmul(state.factor, rhs, state.n),
                                  kern.fn(contexts, state.X, p), kern.diag(contexts, p), state.y, state.n,
                                  state.y.dtype, columns=True)


def posterior(kern: Kernel, state: KernelState, contexts):
    """Posterior mean[K] and variance[K] of one agent at contexts[K, d] (module docstring)."""
    if isinstance(state, DistinctKernelState):
        return distinct_posterior(kern, state, contexts)
    if isinstance(state, PanelKernelState):
        return panel_posterior(kern, state, contexts)[:2]
    contexts = contexts.astype(state.y.dtype)
    p = kernel_params(kern, state)
    k_cross = kern.fn(contexts, state.X, p)  # [K, C]; columns >= n are masked
    k_diag = kern.diag(contexts, p)  # [K]
    return posterior_mean_var_inv(state.chol_inv, k_cross, k_diag, state.y, state.n)


def ucb_scores(kern: Kernel, state: KernelState, contexts):
    """KernelUCB scores [K] = mean + beta * sqrt(var) for one agent and contexts[K, d]."""
    mean, var = posterior(kern, state, contexts)
    return mean + state.hp["beta"] * jnp.sqrt(var)


def ts_scores(kern: Kernel, state: KernelState, contexts, z):
    """Kernel TS scores [K] = mean + sqrt(max(nu^2 var, var_floor)) * z, for z[K] ~ N(0, I)."""
    mean, var = posterior(kern, state, contexts)
    std = jnp.sqrt(jnp.maximum(state.hp["nu"] ** 2 * var, state.hp["var_floor"]))
    return mean + std * z.astype(mean.dtype)


def _make_learner(kern: Kernel, defaults: dict, max_history: Optional[int]):
    """init1 / update1 / capacity1 / resize1 shared by kernel_ucb and kernel_ts."""

    def capacity1(spec: EnvSpec, t_end: int) -> int:
        rows = int(t_end) if max_history is None else min(int(t_end), max_history)
        return max(rows, 1)

    def init1(key, spec, hp, capacity=None):
        del key
        dtype = _float_dtype()
        hp = traced_hparams(defaults, hp, dtype)
        C = capacity1(spec, spec.horizon) if capacity is None else int(capacity)
        return KernelState(
            hp=hp,
            X=jnp.zeros((C, spec.dim), dtype),
            y=jnp.zeros((C,), dtype),
            chol_inv=jnp.eye(C, dtype=dtype),
            n=jnp.zeros((), jnp.int32),
        )

    def update1(state: KernelState, x, reward, key, keep=True):
        """Absorb (x, reward); with keep False (traced) nothing is written (no copy of the state)."""
        del key
        dtype = state.y.dtype
        x = x.astype(dtype)
        C = state.y.shape[0]
        limit = C if max_history is None else min(C, max_history)
        p = kernel_params(kern, state)
        k_col = kern.fn(x[None, :], state.X, p)[0]  # [C]; entries >= n are masked in the append
        k_nn = kern.diag(x[None, :], p)[0] + state.hp["lam"]
        keep = keep & (state.n < limit)
        row = jnp.where(keep, state.n, C)  # an out-of-range row index writes nothing
        chol_inv, _, _ = inv_chol_append(state.chol_inv, row, k_col, k_nn)
        return KernelState(
            hp=state.hp,
            X=state.X.at[row].set(x, mode="drop"),
            y=state.y.at[row].set(jnp.asarray(reward, dtype), mode="drop"),
            chol_inv=chol_inv,
            n=state.n + keep.astype(jnp.int32),
        )

    def resize1(state: KernelState, rows: int) -> KernelState:
        rows = int(rows)
        return state._replace(
            X=pad_rows(state.X, rows), y=pad_rows(state.y, rows), chol_inv=pad_chol(state.chol_inv, rows)
        )

    return init1, update1, capacity1, resize1


def _make_panel_learner(kern: Kernel, defaults: dict, block: int, pending: int):
    """init1 / update1 / capacity1 / resize1 of one exact learner on panels (`PanelKernelState`).

    The capacity is the horizon rounded up to the panel height, fixed for the whole run (a step
    costs ~n^2 / 2 for n live rows, so nothing is gained by growing it; the memory, C^2 / 2 numbers,
    is taken at the start). update1 absorbs every point (no max_history). New rows wait in a block
    of `pending` (kernels.panels.Factor) and are written together.
    """

    def capacity1(spec: EnvSpec, t_end: int) -> int:
        del t_end
        return panel_ops.padded_rows(max(int(spec.horizon), 1), block)

    def init1(key, spec, hp, capacity=None):
        del key
        dtype = _float_dtype()
        hp = traced_hparams(defaults, hp, dtype)
        rows = capacity1(spec, spec.horizon) if capacity is None else int(capacity)
        C = panel_ops.padded_rows(rows, block)
        return PanelKernelState(hp=hp, X=jnp.zeros((C, spec.dim), dtype), y=jnp.zeros((C,), dtype),
                                factor=panel_ops.factor_eye(rows, block, pending, dtype), n=jnp.zeros((), jnp.int32))

    def update1(state: PanelKernelState, x, reward, key, keep=True, l=None):
        """Absorb (x, reward); with keep False (traced) nothing is written (no copy of the state).
        l: the column L^{-1} k(X, x) if the caller has it (`panel_posterior`), saving a pass."""
        del key
        dtype = state.y.dtype
        x = x.astype(dtype)
        C = state.y.shape[0]
        p = kernel_params(kern, state)
        k_nn = kern.diag(x[None, :], p)[0] + state.hp["lam"]
        if l is None:
            k_col = jnp.where(mask_upto(state.n, C), kern.fn(x[None, :], state.X, p)[0], 0.0)
            l = panel_ops.factor_matmul(state.factor, k_col[:, None], state.n)[:, 0]
        keep = keep & (state.n < C)
        row = jnp.where(keep, state.n, C)  # a full buffer (or keep False) writes nothing
        factor = panel_ops.factor_append(state.factor, state.n, l, k_nn, keep)
        return PanelKernelState(hp=state.hp, X=state.X.at[row].set(x, mode="drop"),
                                y=state.y.at[row].set(jnp.asarray(reward, dtype), mode="drop"),
                                factor=factor, n=state.n + keep.astype(jnp.int32))

    def resize1(state: PanelKernelState, rows: int) -> PanelKernelState:
        if panel_ops.padded_rows(int(rows), block) != state.y.shape[0]:
            raise ConfigError(f"panel storage has a fixed capacity of {state.y.shape[0]} rows (the horizon); "
                              f"it cannot be resized to {rows}")
        return state

    return init1, update1, capacity1, resize1


def _make_distinct_learner(kern: Kernel, defaults: dict, rows: int):
    """init1 / update1 / capacity1 (None) / resize1 of one exact learner on the distinct points
    (`DistinctKernelState`, `rows` of them at most), and has_room(state, x) -> (room, same). A point
    equal (bitwise) to a stored one adds to its count and reward sum; a new point takes the next
    row; a point without room (more than `rows` distinct points) is not written."""

    def init1(key, spec, hp, capacity=None):
        del key, capacity
        dtype = _float_dtype()
        hp = traced_hparams(defaults, hp, dtype)
        return DistinctKernelState(hp=hp, Z=jnp.zeros((rows, spec.dim), dtype), counts=jnp.zeros((rows,), dtype),
                                   sums=jnp.zeros((rows,), dtype), m=jnp.zeros((), jnp.int32))

    def has_room(state: DistinctKernelState, x):
        same = jnp.all(state.Z == x.astype(state.Z.dtype)[None, :], axis=1) & (jnp.arange(rows) < state.m)
        return jnp.any(same) | (state.m < rows), same

    def update1(state: DistinctKernelState, x, reward, key, keep=True):
        del key
        dtype = state.sums.dtype
        x = x.astype(dtype)
        room, same = has_room(state, x)
        found = jnp.any(same)
        slot = jnp.where(found, jnp.argmax(same), state.m)
        slot = jnp.where(keep & room, slot, rows)  # out of range: nothing is written
        new = keep & room & ~found
        return state._replace(Z=state.Z.at[slot].set(x, mode="drop"),
                              counts=state.counts.at[slot].add(1.0, mode="drop"),
                              sums=state.sums.at[slot].add(jnp.asarray(reward, dtype), mode="drop"),
                              m=state.m + new.astype(jnp.int32))

    return init1, update1, None, None, has_room


def _common_checks(name, kernel, max_history):
    return _resolve_kernel(name, kernel), _check_max_history(name, max_history)


def kernel_ucb(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    beta=1.0,
    lengthscale=1.0,
    max_history: Optional[int] = None,
    **kw,
) -> Algorithm:
    """KernelUCB / GP-UCB for N independent agents: score = mean + beta * sqrt(var).

    kernel: a registry name (see kernels.functions) or a Kernel. hparams: lam > 0,
    beta >= 0, lengthscale > 0 (used by kernels that have one). Other keyword names raise
    ConfigError. max_history: see the module docstring.
    """
    name = "KernelUCB"
    kern, max_history = _common_checks(name, kernel, max_history)
    defaults = {"lam": 1.0, "beta": 1.0, "lengthscale": 1.0}
    hp = check_hparams(
        name, defaults, dict(lam=lam, beta=beta, lengthscale=lengthscale, **kw),
        positive=("lam", "lengthscale"), nonnegative=("beta",),
    )
    init1, update1, capacity1, resize1 = _make_learner(kern, hp, max_history)

    def select1(state, contexts, key):
        del key
        return jnp.argmax(ucb_scores(kern, state, contexts)).astype(jnp.int32)

    return independent(
        name, hp, init1, select1, update1, capacity1, resize1,
        description=f"KernelUCB ({kern.name} kernel), one kernel ridge regression per agent, no communication",
    )


def kernel_ts(
    kernel: Union[str, Kernel] = "rbf",
    lam=1.0,
    nu=1.0,
    lengthscale=1.0,
    max_history: Optional[int] = None,
    var_floor=0.0,
    **kw,
) -> Algorithm:
    """Kernel Thompson sampling for N independent agents: per-arm N(mean, max(nu^2 var, var_floor)).

    hparams: lam > 0, nu >= 0, lengthscale > 0, var_floor >= 0. Draw: z = jax.random.normal(key,
    (K,), dtype) with the agent's select key.
    """
    name = "KernelTS"
    kern, max_history = _common_checks(name, kernel, max_history)
    defaults = {"lam": 1.0, "nu": 1.0, "lengthscale": 1.0, "var_floor": 0.0}
    hp = check_hparams(
        name, defaults, dict(lam=lam, nu=nu, lengthscale=lengthscale, var_floor=var_floor, **kw),
        positive=("lam", "lengthscale"), nonnegative=("nu", "var_floor"),
    )
    init1, update1, capacity1, resize1 = _make_learner(kern, hp, max_history)

    def select1(state, contexts, key):
        z = jax.random.normal(key, (contexts.shape[0],), state.y.dtype)
        return jnp.argmax(ts_scores(kern, state, contexts, z)).astype(jnp.int32)

    return independent(
        name, hp, init1, select1, update1, capacity1, resize1,
        description=f"kernel Thompson sampling ({kern.name} kernel), one GP posterior per agent, no communication",
    )
