"""A padded lower-triangular matrix stored as row panels, so that products touch only its live part.

The inverse Cholesky factor M = L^{-1} of a growing kernel matrix (see `kernels.linalg`,
`inv_chol_append`) is lower-triangular and, with capacity C and n live rows, its padded form is
block-diag(L_n^{-1}, I). A dense [C, C] buffer makes every product cost C^2, i.e. twice the
triangle and all the padding. Here the C' = nb * b rows are split into nb panels of b rows;
panel I holds rows I b .. (I + 1) b - 1 and only the columns 0 .. (I + 1) b - 1 that a lower
triangle can use:

    panels = (P_0 [b, b], P_1 [b, 2b], ..., P_{nb-1} [b, nb b])

Static shapes, no gathers: each product is one contiguous matrix product per panel, and a
panel whose rows are all padding (I b >= n) is skipped by a `lax.cond`. So a product costs
about n^2 / 2 (plus n b / 2 for the diagonal blocks), whatever the capacity: a run of T steps
costs sum_t t^2 / 2 without any resizing. Under `vmap` a cond whose predicate is batched runs
both branches, so the skipping needs the runs of a batch to be run one after another (the
runner's batching="map"); the numbers are the same either way.

Padding convention as in `kernels.linalg`: rows >= n are unit rows, vectors paired with the
matrix carry zeros at indices >= n (the functions that take n mask their inputs themselves).
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .linalg import mask_upto


def layout(rows: int, block: int):
    """(b, nb): panel height b = min(block, rows) and the number of panels for `rows` rows."""
    rows, block = int(rows), int(block)
    if rows < 1 or block < 1:
        raise ValueError(f"rows and block must be positive, got {rows} and {block}")
    b = min(block, rows)
    return b, -(-rows // b)


def padded_rows(rows: int, block: int) -> int:
    """The number of rows C' = nb * b that panels for `rows` rows hold (rows rounded up to b)."""
    b, nb = layout(rows, block)
    return b * nb


def eye(rows: int, block: int, dtype):
    """Panels of the identity of C' = padded_rows(rows, block) rows."""
    b, nb = layout(rows, block)
    return tuple(jnp.eye(b, (i + 1) * b, i * b, dtype=dtype) for i in range(nb))


def to_dense(panels):
    """The [C', C'] matrix of `panels` (tests and debugging)."""
    b, C = panels[0].shape[0], panels[-1].shape[1]
    return jnp.concatenate([jnp.pad(p, [(0, 0), (0, C - p.shape[1])]) for p in panels], axis=0)


def from_dense(M, block: int):
    """Panels of the lower triangle of a dense M[C, C] (C a multiple of the panel height)."""
    C = M.shape[0]
    b, nb = layout(C, block)
    if b * nb != C:
        raise ValueError(f"a {C} x {C} matrix does not split into panels of {b} rows")
    return tuple(jnp.tril(M)[i * b:(i + 1) * b, :(i + 1) * b] for i in range(nb))


def matmul(panels, V, n):
    """M V for V[C', m] whose rows >= n are zero; rows of the result >= n are zero. ~n^2 m."""
    b = panels[0].shape[0]
    zero = jnp.zeros((b, V.shape[1]), V.dtype)
    out = []
    for i, p in enumerate(panels):
        w = p.shape[1]
        out.append(lax.cond(i * b < n, lambda p=p, w=w: p @ V[:w], lambda: zero))
    return jnp.concatenate(out, axis=0)


def rmatvec(panels, v, n):
    """v^T M for v[C'] whose entries >= n are zero. ~n^2 / 2."""
    b = panels[0].shape[0]
    out = jnp.zeros((panels[-1].shape[1],), v.dtype)
    for i, p in enumerate(panels):
        w = p.shape[1]
        out = lax.cond(i * b < n, lambda o, p=p, w=w, i=i: o.at[:w].add(v[i * b:(i + 1) * b] @ p),
                       lambda o: o, out)
    return out


def set_row(panels, r, row):
    """Panels with row r (traced) replaced by row[C'] (only its first (I + 1) b entries are kept,
    I = r // b, i.e. the row must be zero beyond). An r >= C' writes nothing."""
    b = panels[0].shape[0]
    out = []
    for i, p in enumerate(panels):
        local = r - i * b
        local = jnp.where((local >= 0) & (local < b), local, b)  # b: out of range, dropped (never wrapped)
        out.append(p.at[local].set(row[:p.shape[1]], mode="drop"))
    return tuple(out)


def inv_chol_append(panels, n, k_col, k_nn, l=None):
    """`kernels.linalg.inv_chol_append` on panels: append row/column n of A to M = L^{-1}.

    k_col[C'] (entries >= n ignored), k_nn = A[n, n]. Returns (panels', l, d) with l = M k and
    d = sqrt(k_nn - l.l) (floored as there); row n of M becomes [-(l^T M) / d, 1 / d]. Two
    passes over the live triangle (M k and l^T M), one when the caller already has l = M k
    (e.g. the column of `posterior_mean_var` for this point), passed as `l`. An n >= C' writes
    nothing.
    """
    C = panels[-1].shape[1]
    dtype = panels[0].dtype
    k_nn = jnp.asarray(k_nn, dtype)
    if l is None:
        k = jnp.where(mask_upto(n, C), k_col.astype(dtype), 0.0)
        l = matmul(panels, k[:, None], n)[:, 0]
    d = jnp.sqrt(jnp.maximum(k_nn - jnp.dot(l, l), jnp.finfo(dtype).eps * jnp.abs(k_nn)))
    row = jnp.where(jnp.arange(C) == n, 1.0 / d, -rmatvec(panels, l, n) / d)
    return set_row(panels, n, row), l, d


def posterior_mean_var(panels, k_cross, k_diag, y, n, columns=False):
    """`kernels.linalg.posterior_mean_var_inv` on panels: mean[m], var[m] (clipped at 0) of kernel
    ridge regression at m queries, from one product M [k_cross^T, y]. k_cross[m, C'], y[C'].
    With columns=True also V[C', m] = M k_cross^T (the `l` of `inv_chol_append` for each query)."""
    C = panels[-1].shape[1]
    dtype = panels[0].dtype
    mask = mask_upto(n, C)
    kc = jnp.where(mask[None, :], k_cross.astype(dtype), 0.0)
    ym = jnp.where(mask, y.astype(dtype), 0.0)
    sol = matmul(panels, jnp.concatenate([kc.T, ym[:, None]], axis=1), n)
    V, w = sol[:, :-1], sol[:, -1]
    var = jnp.maximum(k_diag.astype(dtype) - jnp.sum(V * V, axis=0), 0.0)
    return (V.T @ w, var, V) if columns else (V.T @ w, var)
