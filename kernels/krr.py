"""Exact kernel ridge regression on data with repeated points, kept as distinct points and counts.

Data of t points drawn from m distinct points Z[m, d], point j seen c_j times with reward sum s_j.
With G = k(Z, Z), D = diag(sqrt(c)) and A = lam I + D G D (m x m), the push-through identity
restricts (K_t + lam I)^{-1} of the full history to the distinct points: for a query x with
k = k(Z, x),

    var(x)  = k(x, x) - (D k)^T A^{-1} (D k)                 (clipped at 0; no 1/lam)
    mean(x) = (k^T s - (D k)^T A^{-1} D G s) / lam,

i.e. exactly the posterior of the full history, at O(m^3) instead of O(t^2). Rows with count 0
drop out (their rows of D are zero), so padding rows change no number.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .functions import Kernel


def repeated_points_posterior(kern: Kernel, params, lam, Z, counts, sums, Xq):
    """KRR mean[K] and var[K] at Xq[K, d] of distinct points Z[m, d] with counts[m] and reward sums[m].

    params: the kernel's params; lam > 0 the ridge. Float dtype of `sums`.
    """
    mean, var, _ = repeated_points_factor(kern, params, lam, Z, counts, sums, Xq)
    return mean, var


def repeated_points_factor(kern: Kernel, params, lam, Z, counts, sums, Xq):
    """(mean[K], var[K], V[m, K]) as `repeated_points_posterior`, with V = L^{-1} D k(Z, Xq), L L^T = A:
    the posterior covariance of queries a and b is k(a, b) - V[:, a] . V[:, b]."""
    dtype = sums.dtype
    Xq = Xq.astype(dtype)
    sq = jnp.sqrt(counts.astype(dtype))
    G = kern.fn(Z, Z, params)
    A = lam * jnp.eye(G.shape[0], dtype=dtype) + sq[:, None] * G * sq[None, :]
    L = jnp.linalg.cholesky(A)
    kq = kern.fn(Z, Xq, params)  # [m, K]
    rhs = jnp.concatenate([sq[:, None] * kq, (sq * (G @ sums))[:, None]], axis=1)
    sol = jax.scipy.linalg.solve_triangular(L, rhs, lower=True)
    V, w = sol[:, :-1], sol[:, -1]
    var = jnp.maximum(kern.diag(Xq, params) - jnp.sum(V * V, axis=0), 0.0)
    mean = (kq.T @ sums - V.T @ w) / lam
    return mean, var, V
