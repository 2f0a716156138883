"""kernels.ntk: network parameterisations, tangent features and the analytic ReLU NTK vs NumPy."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bandits_jax.kernels.ntk import (
    init_mlp,
    mlp_apply,
    mlp_config,
    ntk_features,
    ntk_values_and_features,
    num_params,
    pad_to_even,
    relu_ntk,
    relu_ntk_parts,
)


def _np_params(params):
    return jax.tree_util.tree_map(np.asarray, params)


def _np_forward_backward(params, x):
    """Hand-written forward pass and backprop of the MLP on one input x [d]: (f, grads dict)."""
    depth = len(params)
    width = params["layer_0"]["kernel"].shape[1]
    has_bias = "bias" in params["layer_0"]
    scale = 1.0 if has_bias else math.sqrt(width)
    layers = [params[f"layer_{l}"] for l in range(depth)]
    hs, zs = [x], []
    for layer in layers[:-1]:
        z = hs[-1] @ layer["kernel"] + (layer["bias"] if has_bias else 0.0)
        zs.append(z)
        hs.append(np.maximum(z, 0.0))
    last = layers[-1]
    out = scale * (hs[-1] @ last["kernel"][:, 0] + (last["bias"][0] if has_bias else 0.0))
    grads = {}
    delta = np.array([scale])
    grads[f"layer_{depth - 1}"] = {"kernel": np.outer(hs[-1], delta)}
    if has_bias:
        grads[f"layer_{depth - 1}"]["bias"] = delta
    back = last["kernel"] @ delta
    for l in range(depth - 2, -1, -1):
        dz = back * (zs[l] > 0)
        grads[f"layer_{l}"] = {"kernel": np.outer(hs[l], dz)}
        if has_bias:
            grads[f"layer_{l}"]["bias"] = dz
        back = layers[l]["kernel"] @ dz
    return out, grads


def _duplicated_unit(rng, n, d):
    u = rng.normal(size=(n, d // 2))
    X = np.concatenate([u, u], axis=1)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize(
    "parameterization,d,width,depth", [("authors", 5, 7, 2), ("authors", 4, 6, 3), ("paper", 6, 8, 3)]
)
def test_features_match_numpy_backprop(parameterization, d, width, depth):
    with jax.enable_x64(True):
        params = init_mlp(jax.random.key(3), d, width, depth, parameterization)
        X = np.random.default_rng(0).normal(size=(6, d))
        values, feats = jax.jit(ntk_values_and_features, static_argnums=0)(mlp_apply, params, jnp.asarray(X), 0.5)
        np_params = _np_params(params)
        for i in range(X.shape[0]):
            out, grads = _np_forward_backward(np_params, X[i])
            np.testing.assert_allclose(values[i], out, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(feats[i], 0.5 * np.asarray(ravel_pytree(grads)[0]), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mlp_apply(params, jnp.asarray(X)), values, rtol=1e-12, atol=1e-12)
        assert feats.shape == (6, num_params(d, width, depth, parameterization))


def test_paper_two_layer_closed_form():
    d, m = 10, 20
    with jax.enable_x64(True):
        params = init_mlp(jax.random.key(0), d, m, 2, "paper")
        X = np.random.default_rng(1).normal(size=(5, d))
        phi = np.asarray(ntk_features(mlp_apply, params, jnp.asarray(X), scale=1 / math.sqrt(m)))
    W1 = np.asarray(params["layer_0"]["kernel"]).T  # [m, d], the paper's W_1
    w = np.asarray(params["layer_1"]["kernel"])[:, 0]  # [m]
    for i, x in enumerate(X):
        z = W1 @ x
        a = (z > 0).astype(float)
        # kernel grads are stored input-major: d f / d kernel[j, r] = sqrt(m) w_r a_r x_j
        expected = np.concatenate([np.outer(x, w * a).ravel(), np.maximum(z, 0.0)])
        np.testing.assert_allclose(phi[i], expected, rtol=1e-12, atol=1e-14)


def test_paper_init_structure_and_zero_output():
    rng = np.random.default_rng(2)
    for d, m, depth in ((10, 20, 2), (6, 16, 3), (4, 8, 4)):
        with jax.enable_x64(True):
            params = init_mlp(jax.random.key(d + m), d, m, depth, "paper")
            K0 = np.asarray(params["layer_0"]["kernel"])
            np.testing.assert_array_equal(K0[: d // 2, m // 2 :], 0.0)
            np.testing.assert_array_equal(K0[: d // 2, : m // 2], K0[d // 2 :, m // 2 :])
            last = np.asarray(params[f"layer_{depth - 1}"]["kernel"])[:, 0]
            np.testing.assert_array_equal(last[: m // 2], -last[m // 2 :])
            X = _duplicated_unit(rng, 8, d)
            np.testing.assert_allclose(mlp_apply(params, jnp.asarray(X)), 0.0, atol=1e-12)
            # inputs that do not duplicate: the output is generically nonzero
            Y = rng.normal(size=(8, d))
            assert np.max(np.abs(np.asarray(mlp_apply(params, jnp.asarray(Y))))) > 1e-3


def test_authors_init_is_standard_normal():
    params = init_mlp(jax.random.key(0), 30, 200, 3, "authors")
    flat = np.asarray(ravel_pytree(params)[0])
    assert flat.size == 30 * 200 + 200 + 200 * 200 + 200 + 200 + 1
    assert abs(flat.mean()) < 0.02 and abs(flat.std() - 1.0) < 0.02
    assert abs(np.asarray(params["layer_0"]["bias"]).std() - 1.0) < 0.2  # biases are N(0, 1) too
    assert mlp_config(params) == (30, 200, 3, "authors")


def test_param_counts():
    table = {(10, 20): 241, (63, 20): 1301, (63, 50): 3251, (20, 20): 441}
    for (d, m), p in table.items():
        assert num_params(d, m, 2, "authors") == p
    assert num_params(10, 20, 2, "paper") == 220
    assert num_params(20, 20, 2, "paper") == 420
    assert num_params(64, 20, 2, "paper") == 1300  # shuttle after zero-padding 63 -> 64
    assert num_params(64, 50, 2, "paper") == 3250
    assert num_params(10, 20, 3, "paper") == 220 + 400
    for parameterization, d, m, depth in (("authors", 63, 20, 2), ("paper", 10, 20, 2), ("paper", 8, 6, 3)):
        shapes = jax.eval_shape(lambda k: init_mlp(k, d, m, depth, parameterization), jax.random.key(0))
        size = sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes))
        assert size == num_params(d, m, depth, parameterization)


def test_paper_odd_sizes_rejected():
    with pytest.raises(ValueError, match="pad_to_even"):
        init_mlp(jax.random.key(0), 63, 20, 2, "paper")
    with pytest.raises(ValueError, match="even width"):
        init_mlp(jax.random.key(0), 10, 21, 2, "paper")
    with pytest.raises(ValueError, match="depth"):
        init_mlp(jax.random.key(0), 10, 20, 1, "authors")
    with pytest.raises(ValueError, match="parameterization"):
        num_params(10, 20, 2, "torch")
    X = jnp.ones((3, 63))
    padded = pad_to_even(X)
    assert padded.shape == (3, 64)
    np.testing.assert_array_equal(padded[:, :63], 1.0)
    np.testing.assert_array_equal(padded[:, 63], 0.0)
    assert pad_to_even(padded) is padded
    assert init_mlp(jax.random.key(0), 64, 20, 2, "paper")["layer_0"]["kernel"].shape == (64, 20)


def _np_relu_ntk_monte_carlo(x, y, depth, rng, samples=400_000):
    """The recursion of relu_ntk_parts with each expectation estimated by Monte Carlo in NumPy."""
    sxx, syy, sxy = x @ x, y @ y, x @ y
    h = sxy
    for _ in range(depth - 1):
        cov = np.array([[sxx, sxy], [sxy, syy]])
        uv = rng.multivariate_normal(np.zeros(2), cov, size=samples)
        u, v = uv[:, 0], uv[:, 1]
        sxx_new = 2 * np.mean(np.maximum(u, 0) ** 2)
        syy_new = 2 * np.mean(np.maximum(v, 0) ** 2)
        sxy_new = 2 * np.mean(np.maximum(u, 0) * np.maximum(v, 0))
        h = 2 * h * np.mean((u > 0) & (v > 0)) + sxy_new
        sxx, syy, sxy = sxx_new, syy_new, sxy_new
    return h, sxy


def test_relu_ntk_closed_forms_match_monte_carlo():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2, 4)) * np.array([[0.5], [2.0]])
    Y = rng.normal(size=(2, 4))
    with jax.enable_x64(True):
        for depth in (2, 3):
            H, S = relu_ntk_parts(jnp.asarray(X), jnp.asarray(Y), depth)
            for i in range(2):
                for j in range(2):
                    h_mc, s_mc = _np_relu_ntk_monte_carlo(X[i], Y[j], depth, rng)
                    scale = np.linalg.norm(X[i]) * np.linalg.norm(Y[j])
                    assert abs(float(H[i, j]) - h_mc) < 1e-2 * scale * depth
                    assert abs(float(S[i, j]) - s_mc) < 1e-2 * scale
            np.testing.assert_allclose(relu_ntk(jnp.asarray(X), jnp.asarray(Y), depth), 0.5 * (H + S), rtol=1e-14)


def test_relu_ntk_symmetric_psd_and_diagonal():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3)) * rng.uniform(0.2, 3.0, size=(40, 1))
    X[7] = 0.0  # a zero input must not produce NaNs
    with jax.enable_x64(True):
        for depth in (2, 3, 5):
            K = np.asarray(relu_ntk(jnp.asarray(X), jnp.asarray(X), depth))
            assert np.all(np.isfinite(K))
            np.testing.assert_allclose(K, K.T, atol=1e-12)
            assert np.linalg.eigvalsh(K).min() > -1e-9
            # on the diagonal Sigma = |x|^2 and H = L |x|^2, so the NTK is (L + 1) |x|^2 / 2
            # (arccos near rho = 1 limits the relative accuracy to about 1e-8)
            np.testing.assert_allclose(np.diag(K), (depth + 1) / 2 * np.sum(X * X, 1), rtol=1e-7)
            Z = jnp.asarray(X[:10])
            np.testing.assert_allclose(relu_ntk(Z, jnp.asarray(X), depth), K[:10], rtol=1e-12)


def _empirical_ntk(key, X, width, depth, draws):
    """Empirical kernels phi(x)^T phi(y) (paper parameterisation, phi = g / sqrt(m)): [draws, n, n]."""

    def one(k):
        params = init_mlp(k, X.shape[1], width, depth, "paper")
        phi = ntk_features(mlp_apply, params, X, scale=1 / math.sqrt(width))
        return phi @ phi.T

    return np.asarray(jax.lax.map(one, jax.random.split(key, draws)))


def test_empirical_ntk_approaches_analytic():
    X = _duplicated_unit(np.random.default_rng(6), 5, 6)
    with jax.enable_x64(True):
        Xj = jnp.asarray(X)
        H, S = (np.asarray(a) for a in relu_ntk_parts(Xj, Xj, 2))
        paper = np.asarray(relu_ntk(Xj, Xj, 2))
        # m = 4096: a single draw is within 0.3 of H^(2); the mean of 8 draws within 0.1
        E = _empirical_ntk(jax.random.key(1), Xj, 4096, 2, 8)
        assert np.abs(E[0] - H).max() < 0.3
        assert np.abs(E.mean(0) - H).max() < 0.1
        # the limit is 2 * relu_ntk - Sigma, not relu_ntk itself (diagonal 2 versus 1.5)
        np.testing.assert_allclose(2 * paper - S, H, rtol=1e-12)
        assert np.abs(np.diag(E.mean(0)) - np.diag(paper)).min() > 0.4
        # for L = 2 the expectation is H^(2) at any even width: average many narrow networks
        E_narrow = _empirical_ntk(jax.random.key(2), Xj, 64, 2, 256)
        assert np.abs(E_narrow[0] - H).max() > 0.2
        assert np.abs(E_narrow.mean(0) - H).max() < 0.05
        # L = 3: same limit H^(3) (diagonal 3); 16 draws at m = 1024 average within 0.35 of it,
        # while relu_ntk's diagonal is 2
        H3, _ = relu_ntk_parts(Xj, Xj, 3)
        E3 = _empirical_ntk(jax.random.key(3), Xj, 1024, 3, 16)
        assert np.abs(E3.mean(0) - np.asarray(H3)).max() < 0.35
        np.testing.assert_allclose(np.diag(relu_ntk(Xj, Xj, 3)), 2.0, rtol=1e-7)
