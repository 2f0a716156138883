"""Positive-definite kernel functions on R^d that broadcast over two sets of points.

Every kernel is a pair of pure functions

    fn(X[n, d], Y[m, d], params) -> [n, m]     the cross-covariance k(X_i, Y_j)
    diag(X[n, d], params) -> [n]               k(X_i, X_i), without building the n x n matrix

where `params` is a dict of floats. The values may be traced, so a grid over a lengthscale is a
`jax.vmap` over the dict, not a recompile. The result dtype follows the inputs.

Stationary kernels (RBF, Matérn, Laplacian) compute distances from the coordinate differences,
sum_k (x_k - y_k)^2, rather than from ||x||^2 + ||y||^2 - 2 x.y. This costs O(n m d) without BLAS,
but the distance of a point to itself is exactly 0. With the expanded form, cancellation leaves
~sqrt(eps) * ||x|| of error in sqrt(r^2); the Laplacian kernel would then give k(x, x) = 1 - 3e-4
in float32, and the Gram diagonal would disagree with `diag`. The square root uses a double
`where`, so gradients at x = y are 0, never NaN.

Kernels:
    rbf (alias se)   exp(-r^2 / (2 l^2))                               params: lengthscale
    matern32         (1 + s) exp(-s),  s = sqrt(3) r / l               params: lengthscale
    matern52         (1 + s + s^2/3) exp(-s),  s = sqrt(5) r / l       params: lengthscale
    laplacian (alias exponential)   exp(-r / l)                        params: lengthscale
    linear           x . y                                             params: (none)
    polynomial       (x . y + c)^degree                                params: degree, c
    product(ka, kb, d1)   ka(x[:d1], x'[:d1]) * kb(x[d1:], x'[d1:])    params: {"a": ..., "b": ...}
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax.numpy as jnp


class Kernel(NamedTuple):
    """A kernel as pure functions plus its default parameters.

    name:   registry name (e.g. "rbf").
    fn:     fn(X[n, d], Y[m, d], params) -> [n, m].
    diag:   diag(X[n, d], params) -> [n], equal to the diagonal of fn(X, X, params).
    params: dict of default parameter values (floats, or nested dicts for a product kernel).
    """

    name: str
    fn: Callable
    diag: Callable
    params: dict


# ---------------------------------------------------------------------------------------------
# distances


def sq_dist(X, Y):
    """Squared Euclidean distances [n, m] between the rows of X[n, d] and Y[m, d], clipped at 0."""
    diff = X[:, None, :] - Y[None, :, :]
    return jnp.maximum(jnp.sum(diff * diff, axis=-1), 0.0)


def _safe_sqrt(sq):
    """sqrt with a zero (not NaN) gradient at 0."""
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def dist(X, Y):
    """Euclidean distances [n, m] between the rows of X[n, d] and Y[m, d]; gradient-safe at 0."""
    return _safe_sqrt(sq_dist(X, Y))


def _ones_diag(X, params):
    del params
    return jnp.ones(X.shape[:1], X.dtype)


# ---------------------------------------------------------------------------------------------
# stationary kernels (k(x, x) = 1)


def rbf(X, Y, params):
    """Squared exponential exp(-||x - y||^2 / (2 l^2)); X[n, d], Y[m, d] -> [n, m]."""
    ls = params["lengthscale"]
    return jnp.exp(-0.5 * sq_dist(X, Y) / (ls * ls))


def matern32(X, Y, params):
    """Matérn nu = 3/2: (1 + sqrt(3) r / l) exp(-sqrt(3) r / l); X[n, d], Y[m, d] -> [n, m]."""
    s = math.sqrt(3.0) * dist(X, Y) / params["lengthscale"]
    return (1.0 + s) * jnp.exp(-s)


def matern52(X, Y, params):
    """Matérn nu = 5/2: (1 + s + s^2 / 3) exp(-s), s = sqrt(5) r / l; X[n, d], Y[m, d] -> [n, m]."""
    s = math.sqrt(5.0) * dist(X, Y) / params["lengthscale"]
    return (1.0 + s + s * s / 3.0) * jnp.exp(-s)


def laplacian(X, Y, params):
    """Laplacian / exponential kernel exp(-||x - y|| / l); X[n, d], Y[m, d] -> [n, m]."""
    return jnp.exp(-dist(X, Y) / params["lengthscale"])


# ---------------------------------------------------------------------------------------------
# dot-product kernels


def linear(X, Y, params):
    """Linear kernel x . y; X[n, d], Y[m, d] -> [n, m]."""
    del params
    return X @ Y.T


def linear_diag(X, params):
    """||x||^2 for each row of X[n, d] -> [n]."""
    del params
    return jnp.sum(X * X, axis=-1)


def polynomial(X, Y, params):
    """Polynomial kernel (x . y + c)^degree; X[n, d], Y[m, d] -> [n, m].

    `degree` is a float (it may be traced). A negative base is only valid for an integer-valued
    degree, which jnp.power handles.
    """
    return jnp.power(X @ Y.T + params["c"], params["degree"])


def polynomial_diag(X, params):
    """(||x||^2 + c)^degree for each row of X[n, d] -> [n]."""
    return jnp.power(jnp.sum(X * X, axis=-1) + params["c"], params["degree"])


# ---------------------------------------------------------------------------------------------
# registry and combinators


_LS = {"lengthscale": 1.0}

_REGISTRY = {
    "rbf": Kernel("rbf", rbf, _ones_diag, _LS),
    "matern32": Kernel("matern32", matern32, _ones_diag, _LS),
    "matern52": Kernel("matern52", matern52, _ones_diag, _LS),
    "laplacian": Kernel("laplacian", laplacian, _ones_diag, _LS),
    "linear": Kernel("linear", linear, linear_diag, {}),
    "polynomial": Kernel("polynomial", polynomial, polynomial_diag, {"degree": 2.0, "c": 1.0}),
}
_ALIASES = {"se": "rbf", "exponential": "laplacian"}


def kernel_names() -> tuple:
    """Registry names accepted by `get_kernel` (aliases included)."""
    return tuple(sorted(set(_REGISTRY) | set(_ALIASES)))


def get_kernel(name: str) -> Kernel:
    """The kernel registered under `name`; ValueError naming the known kernels otherwise.

    The default params dict is copied, so callers may edit it.
    """
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise ValueError(f"unknown kernel {name!r}; known kernels: {', '.join(kernel_names())}")
    k = _REGISTRY[key]
    return k._replace(params=dict(k.params))


def product(ka: Kernel, kb: Kernel, d1: int) -> Kernel:
    """Product kernel on split features: k((x, z), (x', z')) = ka(x, x') kb(z, z').

    x = the first d1 coordinates, z = the rest. d1 is static. params = {"a": params of ka,
    "b": params of kb}. fn: X[n, d], Y[m, d] -> [n, m]; diag: X[n, d] -> [n].
    """
    d1 = int(d1)
    if d1 < 0:
        raise ValueError(f"product kernel: d1 must be >= 0, got {d1}")

    def fn(X, Y, params):
        return ka.fn(X[:, :d1], Y[:, :d1], params["a"]) * kb.fn(X[:, d1:], Y[:, d1:], params["b"])

    def diag(X, params):
        return ka.diag(X[:, :d1], params["a"]) * kb.diag(X[:, d1:], params["b"])

    return Kernel(f"{ka.name}*{kb.name}", fn, diag, {"a": dict(ka.params), "b": dict(kb.params)})


def gram(kernel: Kernel, X, params=None):
    """Gram matrix [n, n] of X[n, d]; params default to the kernel's."""
    return kernel.fn(X, X, kernel.params if params is None else params)
