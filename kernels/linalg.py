"""Incremental linear algebra on preallocated buffers of static capacity.

Convention for a symmetric positive-definite matrix A_n (n x n) stored with capacity C >= n:

    padded matrix    block-diag(A_n, I_{C-n})
    padded factor    block-diag(L_n, I_{C-n})       L_n lower-triangular, L_n L_n^T = A_n
    padded inverse   block-diag(A_n^{-1}, I_{C-n})

Padding with the identity keeps every padded object SPD and invertible, and triangular solves
with the padded factor leave the live block untouched. Vectors paired with a padded matrix carry
zeros beyond n; the functions that take a count `n` mask entries >= n themselves, so stale or
garbage values in a buffer never reach a result. `n` may be traced, capacities are static.

All functions are pure and work under `jit` and `vmap`. The dtype follows the inputs.

Costs: rank-one update/downdate, append and Sherman-Morrison are O(C^2). `posterior_mean_var`
is O(C^2 m), for m query points.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular


# ---------------------------------------------------------------------------------------------
# masks and padding


def mask_upto(n, C: int):
    """Boolean [C]: True at indices < n (n may be traced)."""
    return jnp.arange(C) < n


def pad_rows(buf, C_new: int, value=0):
    """Pad the leading axis of buf[C, ...] to C_new rows (static) with `value`."""
    extra = C_new - buf.shape[0]
    if extra < 0:
        raise ValueError(f"cannot shrink a buffer from {buf.shape[0]} to {C_new} rows")
    return jnp.pad(buf, [(0, extra)] + [(0, 0)] * (buf.ndim - 1), constant_values=value)


def pad_last(a, size: int, axes: int = 1):
    """Pad each of the trailing `axes` axes of `a` (all of one length) to `size` (static) with zeros."""
    extra = size - a.shape[-1]
    if extra < 0:
        raise ValueError(f"cannot shrink trailing axes of length {a.shape[-1]} to {size}")
    return jnp.pad(a, [(0, 0)] * (a.ndim - axes) + [(0, extra)] * axes)


def pad_ridge_inverse(P, size: int, lam):
    """P = (A + lam I)^{-1} [..., m, m] -> [..., size, size], the inverse for A padded with zero rows
    and columns: its new diagonal block is I / lam."""
    new = (jnp.arange(size) >= P.shape[-1]).astype(P.dtype)
    return pad_last(P, size, 2) + jnp.diag(new) / lam


def _pad_identity(M, C_new: int):
    C = M.shape[-1]
    if C_new < C:
        raise ValueError(f"cannot shrink a {C} x {C} matrix to {C_new} x {C_new}")
    return jnp.eye(C_new, dtype=M.dtype).at[:C, :C].set(M)


def pad_chol(L, C_new: int):
    """Padded factor L[C, C] -> [C_new, C_new], padding with the identity (C_new static)."""
    return _pad_identity(L, C_new)


def pad_inv(Ainv, C_new: int):
    """Padded inverse Ainv[C, C] -> [C_new, C_new], padding with the identity (C_new static)."""
    return _pad_identity(Ainv, C_new)


# ---------------------------------------------------------------------------------------------
# Cholesky rank-one update / downdate


def _chol_rank_one(L, x, sign):
    """L'L'^T = L L^T + sign x x^T (sign = +1 or -1) without a loop over columns. O(p^2).

    With w = L^{-1} x, L L^T + sign x x^T = L (I + sign w w^T) L^T, and the Cholesky factor of
    I + sign w w^T has a closed form: with t_0 = 1 and t_j = 1 + sign sum_{k<=j} w_k^2,
        M_jj = sqrt(t_j / t_{j-1}),   M_ij = sign w_i w_j / sqrt(t_{j-1} t_j)  (i > j).
    So L' = L M = L diag(m) + S diag(c) with S_ij = sum_{k>j} L_ik w_k (a reversed cumulative
    sum along rows) and c_j = sign w_j / sqrt(t_{j-1} t_j): one triangular solve and a few
    elementwise passes, all vectorised. (A loop over columns costs p sequential steps, each of
    which XLA may turn into a full copy of L.)
    """
    x = x.astype(L.dtype)
    w = solve_triangular(L, x, lower=True)
    t = 1.0 + sign * jnp.cumsum(w * w)
    t_prev = jnp.concatenate([jnp.ones((1,), L.dtype), t[:-1]])
    m = jnp.sqrt(t / t_prev)
    c = sign * w / jnp.sqrt(t_prev * t)
    lw = L * w[None, :]
    tail = jnp.flip(jnp.cumsum(jnp.flip(lw, axis=1), axis=1), axis=1) - lw  # sum over k > j
    return L * m[None, :] + tail * c[None, :]


def chol_update(L, x):
    """Rank-one update: L[p, p] lower factor of A, x[p] -> factor of A + x x^T. O(p^2).

    On a padded factor, x must be zero beyond the live block (padded columns are then unchanged).
    """
    return _chol_rank_one(L, x, 1.0)


def chol_downdate(L, x):
    """Rank-one downdate: factor of A - x x^T from the factor L[p, p] of A; x[p]. O(p^2).

    Valid only while A - x x^T stays positive definite (otherwise the result has NaNs).
    """
    return _chol_rank_one(L, x, -1.0)


# ---------------------------------------------------------------------------------------------
# growing a padded matrix by one row/column


def chol_append(L, n, k_col, k_nn):
    """Append row/column n to a padded factor. O(C^2).

    L[C, C]: padded factor of A_n (n live rows). k_col[C]: the new off-diagonal entries
    A[n, :n] = k_col[:n]; entries at indices >= n are ignored. k_nn: the new diagonal A[n, n].
    Returns the padded factor [C, C] of A_{n+1}. Requires n < C (an index n >= C is dropped).

    Row n of the factor is l = L_n^{-1} k_col[:n] followed by sqrt(k_nn - l.l). The Schur
    complement k_nn - l.l is floored at eps * |k_nn| to avoid a NaN when the new matrix is
    numerically singular; regularise the matrix (e.g. add lam I) rather than rely on the floor.
    """
    C = L.shape[-1]
    mask = mask_upto(n, C)
    k = jnp.where(mask, k_col.astype(L.dtype), 0.0)
    k_nn = jnp.asarray(k_nn, L.dtype)
    l = solve_triangular(L, k, lower=True)  # zero beyond n: the padded block is the identity
    schur = k_nn - jnp.dot(l, l)
    floor = jnp.finfo(L.dtype).eps * jnp.abs(k_nn)
    d = jnp.sqrt(jnp.maximum(schur, floor))
    row = jnp.where(jnp.arange(C) == n, d, l)
    return L.at[n, :].set(row)


def inv_chol_append(M, n, k_col, k_nn):
    """Append row/column n to the padded INVERSE Cholesky factor M = L^{-1}. O(C^2), no solve.

    M[C, C]: padded block-diag(L_n^{-1}, I). k_col[C]: new off-diagonal entries A[n, :n] (entries
    at indices >= n are ignored); k_nn: the new diagonal A[n, n]. Returns (M', l, d): the factor
    of A_{n+1} gains row [l, d] with l = L_n^{-1} k = M k and d = sqrt(k_nn - l.l), so its inverse
    gains the row [-(l^T M_n) / d, 1 / d]. Every step is a matrix-vector product, which runs at
    memory bandwidth where a triangular solve would not; only row n of M is written. An index
    n >= C writes nothing (mode="drop"). The Schur complement is floored as in `chol_append`.
    """
    C = M.shape[-1]
    mask = mask_upto(n, C)
    k = jnp.where(mask, k_col.astype(M.dtype), 0.0)
    k_nn = jnp.asarray(k_nn, M.dtype)
    l = M @ k  # zero beyond n: the padded rows of M are unit rows
    schur = k_nn - jnp.dot(l, l)
    d = jnp.sqrt(jnp.maximum(schur, jnp.finfo(M.dtype).eps * jnp.abs(k_nn)))
    row = jnp.where(jnp.arange(C) == n, 1.0 / d, -(l @ M) / d)
    return M.at[n, :].set(row, mode="drop"), l, d


def inv_append(Ainv, n, k_col, k_nn):
    """Append row/column n to a padded inverse via the Schur complement. O(C^2).

    Ainv[C, C]: padded inverse of A_n. k_col[C], k_nn as in `chol_append` (entries of k_col at
    indices >= n are ignored). Returns the padded inverse [C, C] of A_{n+1}:

        a = A_n^{-1} k,  s = k_nn - k.a,
        A_{n+1}^{-1} = [[A_n^{-1} + a a^T / s, -a / s], [-a^T / s, 1 / s]].

    With u = a - e_n (a is zero at n) this is Ainv + u u^T / s - e_n e_n^T.
    """
    C = Ainv.shape[-1]
    mask = mask_upto(n, C)
    k = jnp.where(mask, k_col.astype(Ainv.dtype), 0.0)
    a = jnp.where(mask, Ainv @ k, 0.0)
    s = jnp.asarray(k_nn, Ainv.dtype) - jnp.dot(k, a)
    e_n = (jnp.arange(C) == n).astype(Ainv.dtype)
    u = a - e_n
    return Ainv + jnp.outer(u, u) / s - jnp.outer(e_n, e_n)


# ---------------------------------------------------------------------------------------------
# inverse updates


def sherman_morrison(Vinv, x):
    """(V + x x^T)^{-1} from the symmetric inverse Vinv[p, p] and x[p]. O(p^2)."""
    x = x.astype(Vinv.dtype)
    v = Vinv @ x
    return Vinv - jnp.outer(v, v) / (1.0 + jnp.dot(x, v))


def woodbury(Vinv, X):
    """(V + X^T X)^{-1} from the symmetric inverse Vinv[p, p] and rows X[k, p]. O(p^2 k + k^3).

    (V + X^T X)^{-1} = Vinv - Vinv X^T (I_k + X Vinv X^T)^{-1} X Vinv. Zero rows of X are no-ops.
    """
    X = X.astype(Vinv.dtype)
    VX = Vinv @ X.T  # [p, k]
    S = jnp.eye(X.shape[0], dtype=Vinv.dtype) + X @ VX
    return Vinv - VX @ jnp.linalg.solve(S, VX.T)


def woodbury_logdet(Vinv, X, logdet):
    """((V + X^T X)^{-1}, log det(V + X^T X)) from Vinv = V^{-1}[p, p], rows X[k, p], logdet = log det V.

    With S = I_k + X V^{-1} X^T = L_S L_S^T and Z = L_S^{-1} X V^{-1}: (V + X^T X)^{-1} = V^{-1} - Z^T Z
    and log det(V + X^T X) = log det V + log det S. O(p^2 k); zero rows of X change nothing.
    """
    VX = Vinv @ X.T  # [p, k]
    S = jnp.eye(X.shape[0], dtype=Vinv.dtype) + X @ VX
    LS = jnp.linalg.cholesky(S)
    Z = solve_triangular(LS, VX.T, lower=True)  # [k, p], a k x k factor
    return Vinv - Z.T @ Z, logdet + logdet_from_chol(LS)


def inverse_and_logdet(A):
    """(A^{-1}, log det A) of a symmetric positive-definite A[p, p] by one Cholesky factorisation. O(p^3)."""
    p = A.shape[0]
    L = jnp.linalg.cholesky(A)
    Linv = solve_triangular(L, jnp.eye(p, dtype=A.dtype), lower=True)
    return Linv.T @ Linv, logdet_from_chol(L)


# ---------------------------------------------------------------------------------------------
# using a factor


def logdet_from_chol(L):
    """log det(L L^T) = 2 sum log diag(L) for L[C, C]; identity padding contributes 0."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


def chol_solve(L, b):
    """A^{-1} b for A = L L^T; L[C, C], b[C] or [C, k] -> same shape as b."""
    b = b.astype(L.dtype)
    z = solve_triangular(L, b, lower=True)
    return solve_triangular(L, z, lower=True, trans="T")


def posterior_mean_var(L, k_cross, k_diag, y, n):
    """Kernel-ridge / GP posterior mean and variance from a padded factor.

    L[C, C]: padded factor of A_n = K_n + lam I. k_cross[m, C]: k(query_i, stored_j); columns
    j >= n are masked to 0. k_diag[m]: k(query_i, query_i). y[C]: targets; entries >= n masked.
    Returns mean[m] = k^T A_n^{-1} y and var[m] = k_diag - diag(k^T A_n^{-1} k), clipped at 0.
    Both come from one triangular solve: with V = L^{-1} k^T and w = L^{-1} y,
    mean = V^T w and var = k_diag - sum(V^2, axis=0).
    """
    C = L.shape[-1]
    mask = mask_upto(n, C)
    kc = jnp.where(mask[None, :], k_cross.astype(L.dtype), 0.0)
    ym = jnp.where(mask, y.astype(L.dtype), 0.0)
    rhs = jnp.concatenate([kc.T, ym[:, None]], axis=1)  # [C, m + 1]
    sol = solve_triangular(L, rhs, lower=True)
    V, w = sol[:, :-1], sol[:, -1]
    mean = V.T @ w
    var = jnp.maximum(k_diag.astype(L.dtype) - jnp.sum(V * V, axis=0), 0.0)
    return mean, var


def posterior_mean_var_inv(M, k_cross, k_diag, y, n):
    """`posterior_mean_var` from the padded inverse factor M = L^{-1} (see `inv_chol_append`).

    One matrix product M [k_cross^T, y] gives V = L^{-1} k^T and w = L^{-1} y; then
    mean = V^T w and var = k_diag - sum(V^2, axis=0), clipped at 0. Shapes as there.
    """
    return posterior_from_product(lambda rhs: M @ rhs, k_cross, k_diag, y, n, M.dtype)


def posterior_from_product(apply, k_cross, k_diag, y, n, dtype, columns=False):
    """Kernel-ridge mean[m], var[m] (clipped at 0) given `apply(rhs) = L^{-1} rhs` for rhs[C, m + 1].

    k_cross[m, C] and y[C] are masked beyond n here; one call of apply on [k_cross^T, y] gives
    V = L^{-1} k^T and w = L^{-1} y, mean = V^T w, var = k_diag - sum(V^2, axis=0). With
    columns=True also V[C, m] (the L^{-1} k column of each query). Any storage of the inverse
    factor (a dense buffer, kernels.panels) supplies its own product.
    """
    C = k_cross.shape[-1]
    mask = mask_upto(n, C)
    kc = jnp.where(mask[None, :], k_cross.astype(dtype), 0.0)
    ym = jnp.where(mask, y.astype(dtype), 0.0)
    sol = apply(jnp.concatenate([kc.T, ym[:, None]], axis=1))  # [C, m + 1]
    V, w = sol[:, :-1], sol[:, -1]
    mean = V.T @ w
    var = jnp.maximum(k_diag.astype(dtype) - jnp.sum(V * V, axis=0), 0.0)
    return (mean, var, V) if columns else (mean, var)
