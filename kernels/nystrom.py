"""Nyström dictionaries on fixed-capacity buffers.

A dictionary is a PREFIX buffer: `points[M, d]` with `count` live rows (mask = arange(M) < count);
rows are only ever appended, so an older dictionary is a prefix of a newer one. M is static,
`count` may be traced. With K_SS the Gram matrix of the live points, the symmetric root embedding is

    W_S = U diag(w) U^T,   K_SS = U diag(ev) U^T,   w_j = ev_j^{-1/2} if ev_j > tol * max(ev) else 0,

z(x; S) = W_S k_S(x) in R^M (zero beyond `count`; padding never changes a result). Ridge
regression on the embedding, with A = sum_s z_s z_s^T, b = sum_s z_s y_s:

    mean(x) = z^T (A + lam I)^{-1} b
    var(x)  = max(k(x, x) - ||z||^2, 0) / lam + max(z^T (A + lam I)^{-1} z, 0)

Basis change between nested dictionaries S_old -> S_new:

    T = W_old K_{S_old, S_new} W_new      [M, M],   A_new = T^T A_old T,   b_new = T^T b_old.

Cholesky embedding: with K_SS = L L^T, z(x; S) = L^{-1} k_S(x) is an orthogonal rotation of the
symmetric-root one (every mean and variance the same), and for prefix dictionaries T = [I 0]. The
state keeps Linv = L^{-1} [M, M] (zero-padded); `embed_chol` embeds, `chol_dictionary_append`
appends a point in O(M^2), skipping one whose Schur complement is <= tol * k(x, x).

Sampling: ridge-leverage inclusion keeps a candidate with variance v with probability
min(1, q v); duplicates are dropped; a kept candidate without room sets the overflow flag, which
callers turn into an error naming the capacity to raise.

Walk-through: docs/kernels.md.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def live_mask(count, capacity: int):
    """Boolean [capacity]: True at the live rows (index < count)."""
    return jnp.arange(capacity) < count


def masked_gram(kernel_fn, points, count, params):
    """Gram matrix [M, M] of the live rows of points[M, d]; zero outside the live block."""
    M = points.shape[0]
    mask = live_mask(count, M)
    K = kernel_fn(points, points, params)
    return jnp.where(mask[:, None] & mask[None, :], K, 0.0)


def masked_cross(kernel_fn, queries, points, count, params):
    """k(queries[m, d], points[M, d]) -> [m, M] with the columns >= count set to 0."""
    mask = live_mask(count, points.shape[0])
    return jnp.where(mask[None, :], kernel_fn(queries, points, params), 0.0)


def inv_sqrt_root(gram, count, tol=1e-10):
    """Symmetric pseudo-inverse square root W[M, M] of a zero-padded Gram matrix gram[M, M].

    Eigenvalues <= tol * (largest eigenvalue) get weight 0 (duplicates, rank deficiency).
    W is zero outside the live block (rows/columns >= count).
    """
    M = gram.shape[0]
    mask = live_mask(count, M)
    gram = 0.5 * (gram + gram.T)
    ev, U = jnp.linalg.eigh(gram)
    top = jnp.max(ev)
    keep = ev > tol * jnp.maximum(top, jnp.finfo(gram.dtype).tiny)
    w = jnp.where(keep, 1.0 / jnp.sqrt(jnp.where(keep, ev, 1.0)), 0.0)
    W = (U * w[None, :]) @ U.T
    W = 0.5 * (W + W.T)
    return jnp.where(mask[:, None] & mask[None, :], W, 0.0)


def dictionary_root(kernel_fn, points, count, params, tol=1e-10):
    """(W[M, M], K[M, M]) for the live dictionary: its root and its zero-padded Gram matrix."""
    K = masked_gram(kernel_fn, points, count, params)
    return inv_sqrt_root(K, count, tol), K


def embed(kernel_fn, queries, points, count, W, params):
    """Nyström embedding z[m, M] = W k_S(x) of queries[m, d]; coordinates >= count are 0."""
    return masked_cross(kernel_fn, queries, points, count, params) @ W


def embedded_stats(Z, y, row_mask):
    """A = Z^T Z [M, M] and b = Z^T y [M] over the rows of Z[n, M], y[n] where row_mask[n]."""
    Zm = jnp.where(row_mask[:, None], Z, 0.0)
    ym = jnp.where(row_mask, y, 0.0)
    return Zm.T @ Zm, Zm.T @ ym


def ridge_inverse(A, lam):
    """(A + lam I)^{-1} [M, M] for a symmetric PSD A[M, M] and lam > 0 (Cholesky solve)."""
    M = A.shape[0]
    eye = jnp.eye(M, dtype=A.dtype)
    L = jnp.linalg.cholesky(0.5 * (A + A.T) + lam * eye)
    Linv = jax.scipy.linalg.solve_triangular(L, eye, lower=True)
    return Linv.T @ Linv


def ridge_mean_var(Z, k_diag, Pinv, coef, lam):
    """Nyström ridge mean[m] and variance[m] (module docstring) at embeddings Z[m, M].

    k_diag[m] = k(x, x); Pinv[M, M] = (A + lam I)^{-1}; coef[M] = Pinv b. Both variance terms
    are clipped at 0. An empty dictionary (Z = 0) gives mean 0 and variance k(x, x) / lam.
    """
    mean = Z @ coef
    resid = jnp.maximum(k_diag - jnp.sum(Z * Z, axis=-1), 0.0) / lam
    # z^T Pinv z as one product and a fused multiply-sum: the einsum "mi,ij,mj->m" under a vmap over
    # agents was lowered to a batched dot per row with a transposed copy of Z Pinv in between
    quad = jnp.maximum(jnp.sum((Z @ Pinv) * Z, axis=-1), 0.0)
    return mean, resid + quad


def leverage_probability(var, q):
    """Ridge-leverage inclusion probability min(1, q var), elementwise."""
    return jnp.minimum(1.0, q * var)


def include_draws(prob, uniforms, valid):
    """Bernoulli inclusion: valid & (uniforms < prob), all [n]."""
    return valid & (uniforms < prob)


def uniform_inclusion(key, valid, prob):
    """Uniform sampling: each valid candidate of valid[n] kept with probability prob. -> [n] bool."""
    u = jax.random.uniform(key, valid.shape)
    return include_draws(prob, u, valid)


def sample_and_append(points, count, candidates, include):
    """Append the kept, non-duplicate candidates to a prefix dictionary, in order.

    points[M, d], count: the dictionary. candidates[n, d], include[n] bool.
    Returns (points[M, d], count, appended[n] bool, overflow bool). A candidate equal
    (coordinate-wise) to a live point or to an earlier appended candidate is skipped. A kept,
    non-duplicate candidate for which there is no row left is not written and sets overflow.
    """
    M = points.shape[0]

    def body(carry, inp):
        pts, n, over = carry
        x, keep = inp
        same = jnp.all(pts == x[None, :], axis=-1) & live_mask(n, M)
        want = keep & ~jnp.any(same)
        room = n < M
        add = want & room
        row = jnp.where(add, n, M)  # an out-of-range row writes nothing
        pts = pts.at[row].set(x, mode="drop")
        return (pts, n + add.astype(n.dtype), over | (want & ~room)), add

    count = jnp.asarray(count, jnp.int32)
    (points, count, overflow), appended = lax.scan(
        body, (points, count, jnp.zeros((), bool)), (candidates.astype(points.dtype), include)
    )
    return points, count, appended, overflow


def basis_change(W_old, gram_new, W_new):
    """T[M, M] = W_old K_{S_old, S_new} W_new between nested dictionaries.

    gram_new is the zero-padded Gram matrix of the new (larger) dictionary; W_old is zero
    outside the old live block, so its rows select K_{S_old, S_new} by themselves.
    """
    return W_old @ gram_new @ W_new


def change_stats(T, A, b):
    """Re-express statistics in the new basis: (T^T A T [M, M], T^T b [M])."""
    return T.T @ A @ T, T.T @ b


# ---------------------------------------------------------------------------------------------
# Cholesky (incremental) embedding


def embed_chol(kernel_fn, queries, points, count, Linv, params):
    """Nyström embedding z[m, M] = L^{-1} k_S(x) of queries[m, d] with the PREFIX S = points[:count].

    Linv[M, M]: inverse Cholesky factor of the Gram matrix of a dictionary that has `count` or more
    live rows (its leading count x count block is the prefix's inverse factor). Coordinates
    >= count are 0. O(m M^2), a matrix product (no triangular solve).
    """
    M = points.shape[0]
    mask = live_mask(count, M)
    Z = masked_cross(kernel_fn, queries, points, count, params) @ Linv.T
    return jnp.where(mask[None, :], Z, 0.0)


def chol_dictionary_append(kernel_fn, points, count, Linv, x, want, params, tol=1e-10):
    """Append x[d] to a prefix dictionary with inverse Cholesky factor Linv, if wanted. O(M^2).

    points[M, d], count, Linv[M, M] (zero beyond count): the dictionary. want: bool (e.g. the
    RLS draw). x is skipped when it equals a live point coordinate-wise or when its Schur
    complement s = k(x,x) - |l|^2, l = Linv k_S(x), is <= tol * k(x,x) (no new direction).
    Otherwise row `count` of the factor becomes [l, sqrt(s)], i.e. row `count` of Linv becomes
    [-(l^T Linv) / sqrt(s), 1 / sqrt(s)] (see kernels.linalg.inv_chol_append); if there is no
    row left, nothing is written and overflow is set.
    Returns (points, count, Linv, appended bool, overflow bool).
    """
    M = points.shape[0]
    count = jnp.asarray(count, jnp.int32)
    mask = live_mask(count, M)
    x = x.astype(points.dtype)
    k_col = masked_cross(kernel_fn, x[None, :], points, count, params)[0]
    kxx = kernel_fn(x[None, :], x[None, :], params)[0, 0]
    l = Linv @ k_col  # zero beyond count (Linv is zero there)
    schur = kxx - jnp.dot(l, l)
    same = jnp.any(jnp.all(points == x[None, :], axis=-1) & mask)
    new_dir = want & ~same & (schur > tol * jnp.abs(kxx))
    room = count < M
    add = new_dir & room
    d = jnp.sqrt(jnp.where(add, schur, 1.0))
    row = jnp.where(jnp.arange(M) == count, 1.0 / d, -(l @ Linv) / d)
    at = jnp.where(add, count, M)  # an out-of-range row writes nothing
    Linv = Linv.at[at].set(row, mode="drop")
    points = points.at[at].set(x, mode="drop")
    return points, count + add.astype(count.dtype), Linv, add, new_dir & ~room


def kept_dictionary(kernel_fn, points, keep, capacity: int, params, tol=1e-10):
    """A dictionary of the kept rows of points[C, d] (keep[C] bool), appended in order to an empty one of
    `capacity` rows by `chol_dictionary_append` (equal or numerically dependent points skipped), its
    inverse Cholesky factor grown one point at a time: O(capacity^2) per kept point, no
    capacity x capacity factorisation. Returns (points [capacity, d], count, Linv [capacity, capacity],
    overflow bool).
    """
    C = keep.shape[0]
    order = jnp.nonzero(keep, size=C, fill_value=0)[0]  # kept rows, in order

    def append(j, carry):
        pts, n, Linv, over = carry
        pts, n, Linv, _, o = chol_dictionary_append(kernel_fn, pts, n, Linv, points[order[j]], True, params, tol)
        return pts, n, Linv, over | o

    empty = (jnp.zeros((capacity, points.shape[1]), points.dtype), jnp.zeros((), jnp.int32),
             jnp.zeros((capacity, capacity), points.dtype), jnp.zeros((), bool))
    return lax.fori_loop(0, jnp.sum(keep.astype(jnp.int32)), append, empty)
