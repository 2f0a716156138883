"""Row-panel storage of an inverse Cholesky factor with pending rows (kernels.panels) against the dense
buffers of kernels.linalg."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.kernels import linalg as la
from bandits_jax.kernels import panels as pn


def _gram(rows, seed=0):
    X = np.random.default_rng(seed).normal(size=(rows, 3))
    return np.exp(-((X[:, None] - X[None]) ** 2).sum(-1)) + 0.5 * np.eye(rows)


@pytest.mark.parametrize("rows,block,pending,B", [(37, 8, 64, 8), (40, 16, 4, 4), (30, 100, 4, 2)])
def test_factor_grows_as_the_dense_inverse_factor(rows, block, pending, B):
    """Every column M k and the final factor equal kernels.linalg's dense append, through several flushes."""
    with jax.enable_x64(True):
        C = pn.padded_rows(rows, block)
        assert C % min(block, rows) == 0 and rows <= C < rows + block
        K = _gram(C)
        F, M = pn.factor_eye(rows, block, pending, jnp.float64), jnp.eye(C)
        assert F.W.shape == (B, C)
        matmul, append, append_ref = jax.jit(pn.factor_matmul), jax.jit(pn.factor_append), jax.jit(la.inv_chol_append)
        for n in range(rows):
            k = np.where(np.arange(C) < n, K[n], 0.0)
            l = matmul(F, jnp.asarray(k)[:, None], n)[:, 0]
            M, l_ref, _ = append_ref(M, n, K[n], K[n, n])
            np.testing.assert_allclose(l, l_ref, atol=1e-13)
            F = append(F, n, l, K[n, n])
        assert int(F.n0) == rows - rows % B  # the full blocks were written
        np.testing.assert_allclose(pn.factor_to_dense(F, rows), M, atol=1e-13)
        np.testing.assert_allclose(M[:rows, :rows], np.linalg.inv(np.linalg.cholesky(K[:rows, :rows])), atol=1e-10)
        V = np.where(np.arange(C)[:, None] < rows, np.random.default_rng(1).normal(size=(C, 5)), 0.0)
        np.testing.assert_allclose(matmul(F, jnp.asarray(V), rows), M @ V, atol=1e-12)
        # keep=False and a full buffer write nothing
        F2 = pn.factor_append(F, rows, jnp.zeros(C), 2.0, keep=False)
        np.testing.assert_array_equal(pn.factor_to_dense(F2, rows), pn.factor_to_dense(F, rows))


def test_products_skip_nothing_live():
    with jax.enable_x64(True):
        C, b = 48, 16
        A = np.tril(np.random.default_rng(3).normal(size=(C, C)))
        P = pn.from_dense(jnp.asarray(A), b)
        assert [p.shape for p in P] == [(16, 16), (16, 32), (16, 48)]
        for n in (1, 16, 17, 40, 48):
            U = np.where(np.arange(C)[:, None] < n, np.random.default_rng(n).normal(size=(C, 2)), 0.0)
            np.testing.assert_allclose(pn.matmul(P, jnp.asarray(U), n)[:n], (A @ U)[:n], atol=1e-12)
            np.testing.assert_allclose(pn.rmatmul(P, jnp.asarray(U), n), U.T @ A, atol=1e-12)


def test_layout_errors():
    with pytest.raises(ValueError, match="positive"):
        pn.layout(0, 8)
    with pytest.raises(ValueError, match="does not split"):
        pn.from_dense(jnp.eye(10), 4)
