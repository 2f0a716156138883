"""Ridge-regression quantities of accumulated statistics, as used by the linear baselines.

Statistics A = sum x x^T [d, d] (symmetric PSD) and b = sum y x [d], a ridge lam > 0 and
V = A + lam I (A symmetrised before the factorisation, V = L L^T by Cholesky):

    mean(x) = x^T V^{-1} b,   var(x) = x^T V^{-1} x,   score(x) = mean(x) + alpha * sqrt(var(x)),
    log det V = 2 sum log diag(L).

V is factorised afresh per call (O(d^3)); meant for small d.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def _chol(A, lam):
    """Cholesky factor L[d, d] of 0.5 (A + A^T) + lam I."""
    d = A.shape[-1]
    return jnp.linalg.cholesky(0.5 * (A + A.T) + lam * jnp.eye(d, dtype=A.dtype))


def ridge_scores(A, b, lam, alpha, contexts):
    """(mean[K], var[K], scores[K]) of statistics A[d, d], b[d] at the rows of contexts[K, d]."""
    L = _chol(A, lam)
    W = jax.scipy.linalg.solve_triangular(L, contexts.T, lower=True)  # [d, K]
    w = jax.scipy.linalg.solve_triangular(L, b, lower=True)
    mean = W.T @ w
    var = jnp.sum(W * W, axis=0)
    return mean, var, mean + alpha * jnp.sqrt(var)


def ridge_logdet(A, lam):
    """log det(A + lam I) (scalar) of a symmetric PSD A[d, d]."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(_chol(A, lam))))
