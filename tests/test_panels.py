"""Row-panel storage of a padded lower-triangular factor (kernels.panels) against the dense buffers of kernels.linalg."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernels import linalg as la
from kernels import panels as pn


def _gram(rows, seed=0):
    X = np.random.default_rng(seed).normal(size=(rows, 3))
    return np.exp(-((X[:, None] - X[None]) ** 2).sum(-1)) + 0.5 * np.eye(rows)


@pytest.mark.parametrize("rows,block", [(37, 8), (30, 100)])
def test_append_and_posterior_equal_the_dense_factor(rows, block):
    with jax.enable_x64(True):
        C = pn.padded_rows(rows, block)
        assert C % min(block, rows) == 0 and rows <= C < rows + block
        K = _gram(C)
        P, M = pn.eye(rows, block, jnp.float64), jnp.eye(C)
        n = min(rows, 25)
        append, append_ref = jax.jit(pn.inv_chol_append), jax.jit(la.inv_chol_append)
        for i in range(n):
            P, l, d = append(P, i, K[i], K[i, i])
            M, l_ref, d_ref = append_ref(M, i, K[i], K[i, i])
            np.testing.assert_allclose(l, l_ref, atol=1e-13)
            assert float(d) == pytest.approx(float(d_ref), abs=1e-13)
        np.testing.assert_allclose(pn.to_dense(P), M, atol=1e-13)
        np.testing.assert_allclose(pn.to_dense(P)[:n, :n], np.linalg.inv(np.linalg.cholesky(K[:n, :n])), atol=1e-10)
        q = np.random.default_rng(1).normal(size=(5, C))
        y = np.random.default_rng(2).normal(size=C)
        mean, var = pn.posterior_mean_var(P, q, np.ones(5), y, n)
        mean_ref, var_ref = la.posterior_mean_var_inv(M, q, np.ones(5), y, n)
        np.testing.assert_allclose(mean, mean_ref, atol=1e-12)
        np.testing.assert_allclose(var, var_ref, atol=1e-12)


def test_products_skip_nothing_live_and_rows_are_never_wrapped():
    with jax.enable_x64(True):
        C, b = 48, 16
        A = np.tril(np.random.default_rng(3).normal(size=(C, C)))
        P = pn.from_dense(jnp.asarray(A), b)
        assert [p.shape for p in P] == [(16, 16), (16, 32), (16, 48)]
        for n in (1, 16, 17, 40, 48):
            v = np.where(np.arange(C) < n, np.random.default_rng(n).normal(size=C), 0.0)
            np.testing.assert_allclose(pn.matmul(P, jnp.asarray(v)[:, None], n)[:n, 0], (A @ v)[:n], atol=1e-12)
            np.testing.assert_allclose(pn.rmatvec(P, jnp.asarray(v), n), v @ A, atol=1e-12)
        # a row beyond the panels writes nothing; row 20 touches only panel 1 (no negative index wraps into panel 2)
        row = jnp.arange(C, dtype=jnp.float64) + 1.0
        np.testing.assert_array_equal(pn.to_dense(pn.set_row(P, C, row)), pn.to_dense(P))
        out = np.asarray(pn.to_dense(pn.set_row(P, 20, jnp.where(jnp.arange(C) <= 20, row, 0.0))))
        expected = np.tril(A).copy()
        expected[20] = np.where(np.arange(C) <= 20, np.arange(C) + 1.0, 0.0)
        np.testing.assert_array_equal(out, expected)


def test_layout_errors():
    with pytest.raises(ValueError, match="positive"):
        pn.layout(0, 8)
    with pytest.raises(ValueError, match="does not split"):
        pn.from_dense(jnp.eye(10), 4)
