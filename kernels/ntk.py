"""Fully connected ReLU networks, their empirical tangent features, and the analytic ReLU NTK.

Two parameterisations of a depth-L (number of weight layers, L >= 2), width-m ReLU network
with scalar output:

* ``"paper"``: no biases, ``f(x) = sqrt(m) * W_L relu(W_{L-1} ... relu(W_1 x))``, symmetric
  initialisation (so ``f(x; theta0) = 0`` for an input whose halves duplicate); d and m even
  (`pad_to_even`).
* ``"authors"``: dense layers with biases, every weight and bias iid N(0, 1), no output scaling.

Parameters are a flax parameter dict ``{"layer_0": {"kernel": [d, m], ("bias": [m])}, ...,
"layer_{L-1}": {"kernel": [m, 1], ("bias": [1])}}``, kernels input-major (``x @ kernel``).
Tangent features are the flattened per-example gradients ``g(x; theta) = d f(x; theta) / d theta``
(in the order of `jax.flatten_util.ravel_pytree(params)`), optionally scaled (the paper uses
``phi = g / sqrt(m)``). With the paper parameterisation on unit-norm inputs whose halves duplicate,

    phi(x)^T phi(y) = g(x)^T g(y) / m  ->  H^(L)(x, y)          as m -> infinity,

with ``H^(L)`` and ``Sigma^(L)`` the recursion of `relu_ntk_parts`; the paper's NTK
``relu_ntk = (H^(L) + Sigma^(L)) / 2`` is therefore NOT the limit of the empirical kernel
(``lim phi^T phi = 2 * relu_ntk - Sigma^(L)``).

Walk-through: docs/kernels.md.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .draws import flat_normal

Array = jax.Array
PyTree = Any

PARAMETERIZATIONS = ("paper", "authors")


# ----------------------------------------------------------------------------------------------
# Network
# ----------------------------------------------------------------------------------------------


def _normal(std: float) -> Callable:
    """Initialiser of iid N(0, std^2) entries: flax's `initializers.normal(std)`, the same numbers, drawn
    flat (`draws.flat_normal`)."""

    def init(key, shape, dtype=jnp.float32):
        return std * flat_normal(key, shape, dtype)

    return init


def _block_diag_normal(std: float) -> Callable:
    """Kernel initialiser ``[[W^T, 0], [0, W^T]]`` (input-major) with iid N(0, std^2) entries of W."""

    def init(key, shape, dtype=jnp.float32):
        rows, cols = shape
        block = std * flat_normal(key, (rows // 2, cols // 2), dtype)
        zeros = jnp.zeros_like(block)
        return jnp.block([[block, zeros], [zeros, block]])

    return init


def _antisymmetric_normal(std: float) -> Callable:
    """Last-layer kernel initialiser ``(w, -w)`` of shape [m, 1] with iid N(0, std^2) entries of w."""

    def init(key, shape, dtype=jnp.float32):
        rows, cols = shape
        w = std * flat_normal(key, (rows // 2, cols), dtype)
        return jnp.concatenate([w, -w], axis=0)

    return init


class MLP(nn.Module):
    """ReLU network ``[..., d] -> [...]`` of `depth` weight layers, `width` hidden units each.

    See the module docstring for the two parameterisations. Layer l is named ``layer_{l}``.
    """

    width: int
    depth: int
    paper: bool = False  # the "paper" parameterisation (else "authors"), resolved once by `network`
    param_dtype: Any = jnp.float32

    def __post_init__(self):
        if not isinstance(self.paper, bool):
            raise TypeError(f"MLP's paper is a bool, got {self.paper!r}; build a network by its "
                            "parameterization's name with kernels.ntk.network")
        super().__post_init__()

    @nn.compact
    def __call__(self, x: Array) -> Array:
        paper = self.paper
        m = self.width
        if paper:
            hidden_init = _block_diag_normal(math.sqrt(4.0 / m))
            last_init = _antisymmetric_normal(math.sqrt(2.0 / m))
        else:
            hidden_init = last_init = _normal(1.0)
        dense = dict(use_bias=not paper, bias_init=_normal(1.0), param_dtype=self.param_dtype)
        h = x
        for layer in range(self.depth - 1):
            h = nn.relu(nn.Dense(m, kernel_init=hidden_init, name=f"layer_{layer}", **dense)(h))
        out = nn.Dense(1, kernel_init=last_init, name=f"layer_{self.depth - 1}", **dense)(h)[..., 0]
        return math.sqrt(m) * out if paper else out


def check_mlp_config(d: int, width: int, depth: int, parameterization: str) -> None:
    """Raise ValueError (one line saying how to fix it) for an impossible network configuration."""
    check_input_dim(network(width, depth, parameterization), d)


def network(width: int, depth: int, parameterization: str = "authors") -> MLP:
    """The network `init_mlp` draws, built once: its options checked (ValueError saying how to fix one)
    and the parameterisation's name resolved, so nothing traced compares it again."""
    if parameterization not in PARAMETERIZATIONS:
        raise ValueError(f"unknown parameterization {parameterization!r}; use one of {', '.join(PARAMETERIZATIONS)}")
    for name, value, low in (("width", width, 1), ("depth", depth, 2)):
        _check_int(name, value, low)
    if parameterization == "paper" and width % 2:
        raise ValueError(f"the paper parameterization needs an even width, got width = {width}")
    return MLP(width, depth, parameterization == "paper")


def check_input_dim(net: MLP, d: int) -> None:
    """Raise ValueError for an input dimension d that `net` cannot take (odd d under "paper")."""
    _check_int("d", d, 1)
    if net.paper and d % 2:
        raise ValueError(f"the paper parameterization needs an even input dimension, got d = {d}; "
                         "zero-pad the inputs to even d with kernels.ntk.pad_to_even")


def _check_int(name: str, value, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def init_mlp(key: Array, d: int, width: int, depth: int, parameterization: str = "authors", dtype=None) -> PyTree:
    """Draw initial parameters theta0 of a depth-`depth`, width-`width` ReLU network on R^d.

    Args:
      key: PRNG key.
      d: input dimension (even for ``"paper"``).
      width: m, hidden units per layer (even for ``"paper"``).
      depth: L >= 2, number of weight layers.
      parameterization: ``"paper"`` or ``"authors"`` (module docstring).
      dtype: parameter dtype; default the default float dtype (float64 inside an x64 scope).
    Returns:
      the flax parameter dict (module docstring for its layout).
    """
    return init_network(network(width, depth, parameterization), key, d, dtype)


def init_network(net: MLP, key: Array, d: int, dtype=None) -> PyTree:
    """`init_mlp` for a network built by `network`: its parameters on R^d, of dtype `dtype`."""
    check_input_dim(net, d)
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    return _init_mlp(key, d, net.clone(param_dtype=dtype))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _init_mlp(key, d, net):
    # one compiled call instead of many small eager ones
    return net.init(key, jnp.zeros((1, d), net.param_dtype))["params"]


def mlp_config(params: PyTree) -> tuple:
    """(d, width, depth, parameterization) read back from a parameter dict of `init_mlp`."""
    d, width = params["layer_0"]["kernel"].shape
    return d, width, len(params), "paper" if _paper_layout(params) else "authors"


def mlp_apply(params: PyTree, X: Array) -> Array:
    """Network output f(X; params): X [n, d] -> [n] (or [d] -> scalar)."""
    width = params["layer_0"]["kernel"].shape[1]
    return MLP(width, len(params), _paper_layout(params)).apply({"params": params}, X)


def _paper_layout(params: PyTree) -> bool:
    """Whether a parameter dict is laid out for the paper parameterisation (it has no biases)."""
    return "bias" not in params["layer_0"]


def num_params(d: int, width: int, depth: int, parameterization: str = "authors") -> int:
    """p0, the number of scalar parameters: m d + (L - 2) m^2 + m (+ (L - 1) m + 1 biases)."""
    check_mlp_config(d, width, depth, parameterization)
    count = width * d + (depth - 2) * width * width + width
    if parameterization == "authors":
        count += (depth - 1) * width + 1
    return count


def pad_to_even(X: Array) -> Array:
    """Append one zero column to X [..., d] when d is odd: [..., d] -> [..., d + d % 2]."""
    if X.shape[-1] % 2 == 0:
        return X
    return jnp.concatenate([X, jnp.zeros(X.shape[:-1] + (1,), X.dtype)], axis=-1)


# ----------------------------------------------------------------------------------------------
# Tangent features
# ----------------------------------------------------------------------------------------------


def ntk_features(apply_fn: Callable, params: PyTree, X: Array, scale=1.0) -> Array:
    """Per-example flattened gradients ``scale * d apply_fn(params, x) / d params``.

    Args:
      apply_fn: ``(params, X[n, d]) -> [n]``, e.g. `mlp_apply`.
      params: the parameter pytree to differentiate at.
      X: [n, d] inputs.
      scale: multiplies the gradients (1 / sqrt(m) gives the paper's phi).
    Returns:
      [n, p] features, rows in `ravel_pytree` order of `params`.
    """
    values_and_features = ntk_values_and_features(apply_fn, params, X, scale)
    return values_and_features[1]


def ntk_values_and_features(apply_fn: Callable, params: PyTree, X: Array, scale=1.0) -> tuple:
    """(f(X) [n], scale * g(X) [n, p]) in one pass; see `ntk_features`."""

    def one(x):
        value, grad = jax.value_and_grad(lambda p: apply_fn(p, x[None, :])[0])(params)
        return value, ravel_pytree(grad)[0]

    values, feats = jax.vmap(one)(X)
    return values, scale * feats


# ----------------------------------------------------------------------------------------------
# Analytic ReLU NTK
# ----------------------------------------------------------------------------------------------


def relu_ntk_parts(X: Array, Y: Array, depth: int) -> tuple:
    """The recursion (H^(L), Sigma^(L)) of the ReLU NTK between X [n, d] and Y [k, d].

    H^(1) = Sigma^(1) = <x, y>; with rho = Sigma^(l) / sqrt(|x|^2 |y|^2) (the diagonal
    Sigma^(l)(x, x) = |x|^2 is preserved by the recursion),

        Sigma^(l+1) = |x| |y| (sqrt(1 - rho^2) + (pi - arccos rho) rho) / pi
        H^(l+1)     = H^(l) (pi - arccos rho) / pi + Sigma^(l+1),

    the arc-cosine closed forms of 2 E[relu(u) relu(v)] and 2 E[1(u > 0) 1(v > 0)].
    Returns:
      (H [n, k], Sigma [n, k]).
    """
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    sigma = X @ Y.T
    scale = jnp.sqrt(jnp.sum(X * X, -1)[:, None] * jnp.sum(Y * Y, -1)[None, :])
    safe = jnp.where(scale > 0, scale, 1.0)
    h = sigma
    for _ in range(depth - 1):
        rho = jnp.clip(jnp.where(scale > 0, sigma / safe, 0.0), -1.0, 1.0)
        angle = jnp.pi - jnp.arccos(rho)
        sigma = scale * (jnp.sqrt(1.0 - rho * rho) + angle * rho) / jnp.pi
        h = h * angle / jnp.pi + sigma
    return h, sigma


def relu_ntk(X: Array, Y: Array, depth: int) -> Array:
    """The paper's NTK matrix (H^(L) + Sigma^(L)) / 2 between X [n, d] and Y [k, d] -> [n, k].

    See the module docstring for how it relates to the empirical kernel phi(x)^T phi(y).
    """
    h, sigma = relu_ntk_parts(X, Y, depth)
    return 0.5 * (h + sigma)
