"""kernels.functions against direct NumPy formulas, evaluated pair by pair."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.kernels import functions as kf


def np_kernel(name, x, y, p):
    """One kernel value, written from the textbook formula."""
    r = math.sqrt(float(np.sum((x - y) ** 2)))
    if name == "rbf":
        return math.exp(-(r**2) / (2 * p["lengthscale"] ** 2))
    if name == "matern32":
        s = math.sqrt(3) * r / p["lengthscale"]
        return (1 + s) * math.exp(-s)
    if name == "matern52":
        s = math.sqrt(5) * r / p["lengthscale"]
        return (1 + s + s * s / 3) * math.exp(-s)
    if name == "laplacian":
        return math.exp(-r / p["lengthscale"])
    if name == "linear":
        return float(x @ y)
    if name == "polynomial":
        return (float(x @ y) + p["c"]) ** p["degree"]
    raise KeyError(name)


def np_gram(name, X, Y, p):
    return np.array([[np_kernel(name, x, y, p) for y in Y] for x in X])


PARAMS = {
    "rbf": {"lengthscale": 0.7},
    "matern32": {"lengthscale": 1.3},
    "matern52": {"lengthscale": 0.9},
    "laplacian": {"lengthscale": 1.1},
    "linear": {},
    "polynomial": {"degree": 3.0, "c": 0.5},
}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_kernel_matches_numpy_formula_and_is_psd(name):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 3))
    Y = rng.standard_normal((5, 3))
    k = kf.get_kernel(name)
    with jax.enable_x64(True):
        p = {key: jnp.asarray(v) for key, v in PARAMS[name].items()}
        cross = np.asarray(jax.jit(k.fn)(jnp.asarray(X), jnp.asarray(Y), p))
        G = np.asarray(k.fn(jnp.asarray(X), jnp.asarray(X), p))
        diag = np.asarray(k.diag(jnp.asarray(X), p))
    assert cross.shape == (7, 5) and diag.shape == (7,)
    np.testing.assert_allclose(cross, np_gram(name, X, Y, PARAMS[name]), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(G, np_gram(name, X, X, PARAMS[name]), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(G, G.T)
    np.testing.assert_allclose(diag, np.diag(G), rtol=1e-13)
    assert np.linalg.eigvalsh(G).min() > -1e-10 * np.abs(G).max()


@pytest.mark.parametrize("name", ["rbf", "matern32", "matern52", "laplacian"])
def test_stationary_known_values(name):
    k = kf.get_kernel(name)
    p = {"lengthscale": 2.0}
    x = jnp.array([[0.3, -1.0]])
    assert float(k.fn(x, x, p)[0, 0]) == 1.0  # exactly 1 at distance 0, also in float32
    assert float(k.diag(x, p)[0]) == 1.0
    # distance l = 2: closed forms
    y = x + jnp.array([[2.0, 0.0]])
    expect = {
        "rbf": math.exp(-0.5),
        "matern32": (1 + math.sqrt(3)) * math.exp(-math.sqrt(3)),
        "matern52": (1 + math.sqrt(5) + 5 / 3) * math.exp(-math.sqrt(5)),
        "laplacian": math.exp(-1.0),
    }[name]
    assert float(k.fn(x, y, p)[0, 0]) == pytest.approx(expect, rel=1e-6)
    # far apart: vanishes
    assert float(k.fn(x, x + 100.0, p)[0, 0]) < 1e-20


def test_float32_gram_has_exact_unit_diagonal():
    # distances from coordinate differences: no cancellation error at x = y
    X = jnp.asarray(np.random.default_rng(1).standard_normal((20, 4)) * 30, jnp.float32)
    for name in ("rbf", "laplacian", "matern32"):
        G = kf.get_kernel(name).fn(X, X, {"lengthscale": 1.0})
        assert G.dtype == jnp.float32
        np.testing.assert_array_equal(np.diag(np.asarray(G)), 1.0)


def test_polynomial_and_linear_known_values():
    x = jnp.array([[1.0, 2.0]])
    y = jnp.array([[3.0, -1.0]])
    assert float(kf.get_kernel("linear").fn(x, y, {})[0, 0]) == 1.0
    assert float(kf.get_kernel("polynomial").fn(x, y, {"degree": 2.0, "c": 1.0})[0, 0]) == 4.0
    assert float(kf.get_kernel("polynomial").fn(x, -y, {"degree": 3.0, "c": 0.0})[0, 0]) == -1.0
    assert float(kf.get_kernel("polynomial").diag(x, {"degree": 2.0, "c": 1.0})[0]) == 36.0


def test_product_kernel_on_split_features():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 5))
    Y = rng.standard_normal((4, 5))
    k = kf.product(kf.get_kernel("rbf"), kf.get_kernel("linear"), 2)
    assert k.name == "rbf*linear"
    p = {"a": {"lengthscale": 0.8}, "b": {}}
    with jax.enable_x64(True):
        got = np.asarray(k.fn(jnp.asarray(X), jnp.asarray(Y), p))
        diag = np.asarray(k.diag(jnp.asarray(X), p))
    expect = np_gram("rbf", X[:, :2], Y[:, :2], p["a"]) * (X[:, 2:] @ Y[:, 2:].T)
    np.testing.assert_allclose(got, expect, rtol=1e-12)
    np.testing.assert_allclose(diag, np.sum(X[:, 2:] ** 2, 1), rtol=1e-12)
    # default params have the nested layout
    assert k.params == {"a": {"lengthscale": 1.0}, "b": {}}


def test_registry():
    assert kf.get_kernel("se").name == "rbf"
    assert kf.get_kernel("exponential").name == "laplacian"
    with pytest.raises(ValueError, match="known kernels: .*matern52.*rbf"):
        kf.get_kernel("gaussian-process")
    # defaults are copies: editing them does not leak into the registry
    kf.get_kernel("rbf").params["lengthscale"] = 99.0
    assert kf.get_kernel("rbf").params["lengthscale"] == 1.0


@pytest.mark.parametrize("name", ["rbf", "matern32", "matern52", "laplacian"])
def test_gradients_finite_at_coincident_points(name):
    k = kf.get_kernel(name)
    X = jnp.array([[0.1, 0.2], [0.1, 0.2], [1.0, -1.0]])

    def total(X, ls):
        return jnp.sum(k.fn(X, X, {"lengthscale": ls}))

    gx, gl = jax.jit(jax.grad(total, argnums=(0, 1)))(X, 1.5)
    assert np.all(np.isfinite(np.asarray(gx))) and np.isfinite(float(gl))
    # d k(x, y) / dx at x = y is 0 for the differentiable kernels
    if name != "laplacian":
        gxy = jax.jit(jax.grad(lambda x: k.fn(x[None], X[:1], {"lengthscale": 1.5})[0, 0]))(X[0])
        np.testing.assert_array_equal(np.asarray(gxy), 0.0)


def test_vmap_over_lengthscale_grid():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4, 2))
    grid = np.array([0.5, 1.0, 2.0])
    k = kf.get_kernel("matern52")
    with jax.enable_x64(True):
        Gs = np.asarray(jax.vmap(lambda ls: k.fn(jnp.asarray(X), jnp.asarray(X), {"lengthscale": ls}))(jnp.asarray(grid)))
    for G, ls in zip(Gs, grid):
        np.testing.assert_allclose(G, np_gram("matern52", X, X, {"lengthscale": ls}), rtol=1e-12)
