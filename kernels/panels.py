"""A padded lower-triangular matrix stored as row panels, so that products touch only its live part.

The inverse Cholesky factor M = L^{-1} of a growing kernel matrix (see `kernels.linalg`,
`inv_chol_append`) is lower-triangular and, with capacity C and n live rows, its padded form is
block-diag(L_n^{-1}, I). A dense [C, C] buffer makes every product cost C^2, i.e. twice the
triangle and all the padding. Here the C' = nb * b rows are split into nb panels of b rows;
panel I holds rows I b .. (I + 1) b - 1 and only the columns 0 .. (I + 1) b - 1 that a lower
triangle can use:

    panels = (P_0 [b, b], P_1 [b, 2b], ..., P_{nb-1} [b, nb b])

Static shapes, no gathers: each product is one contiguous matrix product per panel, and a
panel whose rows are all padding (I b >= n) is skipped by a conditional. So a product costs
about n^2 / 2 (plus n b / 2 for the diagonal blocks), whatever the capacity: a run of T steps
costs sum_t t^2 / 2 without any resizing. Every function that skips takes the conditional as
`cond` (default `lax.cond`; signature of lax.cond, branches of one operand that close over no
traced value): under `vmap` a lax.cond whose predicate is batched runs both branches, so a
caller that vmaps over runs passes a conditional that stays one for the batch (the bandit
algorithms pass `algorithms.base.batch_cond`). The numbers are the same either way.

Appending a row (the Schur step of `kernels.linalg.inv_chol_append`) needs a pass l^T M; `Factor`
keeps the newest rows pending in a small block and writes them B at a time, so that growing
the factor costs one pass per B points (see its docstring).

Padding convention as in `kernels.linalg`: rows >= n are unit rows, and vectors paired with the
matrix must carry zeros at indices >= n.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
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
    C = panels[-1].shape[1]
    return jnp.concatenate([jnp.pad(p, [(0, 0), (0, C - p.shape[1])]) for p in panels], axis=0)


def from_dense(M, block: int):
    """Panels of the lower triangle of a dense M[C, C] (C a multiple of the panel height)."""
    C = M.shape[0]
    b, nb = layout(C, block)
    if b * nb != C:
        raise ValueError(f"a {C} x {C} matrix does not split into panels of {b} rows")
    return tuple(jnp.tril(M)[i * b:(i + 1) * b, :(i + 1) * b] for i in range(nb))


def matmul(panels, V, n, cond=lax.cond):
    """M V for V[C', m] whose rows >= n are zero; rows of the result >= n are zero. ~n^2 m."""
    b = panels[0].shape[0]
    out = []
    for i, p in enumerate(panels):
        w = p.shape[1]
        out.append(cond(i * b < n, lambda pv, w=w: pv[0] @ pv[1][:w],
                        lambda pv: jnp.zeros((b, pv[1].shape[1]), pv[1].dtype), (p, V)))
    return jnp.concatenate(out, axis=0)


# ---------------------------------------------------------------------------------------------
# appends in blocks: the pending rows


class Factor(NamedTuple):
    """M = L^{-1} of n live rows with the last p = n - n0 rows pending (not yet written in panels).

    Writing row n of M costs a pass l^T M over the triangle (`inv_chol_append`). Here the new rows
    wait in a block of B: with A0 the first n0 rows, W[j] = (M0 k_j)^T for pending point j (zero
    beyond n0) and S = K_pp + lam I - W W^T the Schur complement, of inverse factor S_inv [B, B],

        M = [[M0, 0], [-S_inv W M0, S_inv]],  so  M V = [M0 V_0; S_inv (V_p - W (M0 V_0))]

    costs one pass over M0 plus O(B C m). Every B appends the block is written in one pass
    (W M0 for B rows at once, `flush`), so a step costs one pass over the triangle instead of two.
    n0 is a multiple of B and B divides the panel height, so a block never straddles two panels.
    """

    panels: tuple
    W: jax.Array
    S_inv: jax.Array
    n0: jax.Array


def block_rows(rows: int, block: int, pending: int) -> int:
    """The pending block size B: a divisor of the panel height (gcd of it and `pending`)."""
    return math.gcd(int(pending), layout(rows, block)[0])


def factor_eye(rows: int, block: int, pending: int, dtype) -> Factor:
    """The factor of no data (the identity) for `rows` rows (rounded up to panels)."""
    C = padded_rows(rows, block)
    B = block_rows(rows, block, pending)
    return Factor(eye(rows, block, dtype), jnp.zeros((B, C), dtype), jnp.eye(B, dtype=dtype), jnp.zeros((), jnp.int32))


def rmatmul(panels, U, n, cond=lax.cond):
    """U^T M for U[C', m] whose rows >= n are zero -> [m, C']. ~n^2 m / 2."""
    b = panels[0].shape[0]
    out = jnp.zeros((U.shape[1], panels[-1].shape[1]), U.dtype)
    for i, p in enumerate(panels):
        w = p.shape[1]
        out = cond(i * b < n, lambda oup, w=w, i=i: oup[0].at[:, :w].add(oup[1][i * b:(i + 1) * b].T @ oup[2]),
                   lambda oup: oup[0], (out, U, p))
    return out


def factor_matmul(F: Factor, V, n, cond=lax.cond):
    """M V for V[C', m] whose rows >= n are zero (n live rows, n0 of them written)."""
    B, C = F.W.shape
    top = matmul(F.panels, jnp.where(mask_upto(F.n0, C)[:, None], V, 0.0), F.n0, cond)
    Vp = lax.dynamic_slice(jnp.pad(V, [(0, B), (0, 0)]), (F.n0, jnp.zeros_like(F.n0)), (B, V.shape[1]))
    bottom = F.S_inv @ (Vp - F.W @ top)
    return lax.dynamic_update_slice(jnp.pad(top, [(0, B), (0, 0)]), bottom, (F.n0, jnp.zeros_like(F.n0)))[:C]


def flush(F: Factor, n, cond=lax.cond) -> Factor:
    """Write the pending rows n0 .. n - 1 (rows up to n0 + B - 1 beyond n are identity rows)."""
    B, C = F.W.shape
    b = F.panels[0].shape[0]
    R = -F.S_inv @ rmatmul(F.panels, F.W.T, F.n0, cond)  # [B, C], zero beyond n0
    rows = lax.dynamic_update_slice(jnp.pad(R, [(0, 0), (0, B)]), F.S_inv, (jnp.zeros_like(F.n0), F.n0))[:, :C]
    panels = []
    for i, p in enumerate(F.panels):
        local = F.n0 - i * b
        inside = (local >= 0) & (local < b)
        idx = jnp.where(inside, local + jnp.arange(B), b)  # b: out of range, dropped
        panels.append(p.at[idx].set(rows[:, :p.shape[1]], mode="drop"))
    n0 = jnp.minimum(n, C).astype(jnp.int32)
    return Factor(tuple(panels), jnp.zeros_like(F.W), jnp.eye(B, dtype=F.S_inv.dtype), n0)


def factor_append(F: Factor, n, l, k_nn, keep=True, cond=lax.cond) -> Factor:
    """Append row n (point x) given l = M k(X, x) (`factor_matmul` of the masked kernel column) and
    k_nn = k(x, x) + lam. Nothing is written when keep is False or n >= C'. The block is flushed
    when it is full. Returns the factor of n + 1 rows (n rows if nothing was written)."""
    B, C = F.W.shape
    dtype = F.W.dtype
    k_nn = jnp.asarray(k_nn, dtype)
    d = jnp.sqrt(jnp.maximum(k_nn - jnp.dot(l, l), jnp.finfo(dtype).eps * jnp.abs(k_nn)))
    p = n - F.n0
    keep = jnp.asarray(keep) & (n < C)
    slot = jnp.where(keep, p, B)  # B: out of range, dropped
    top = jnp.where(mask_upto(F.n0, C), l, 0.0)
    lp = lax.dynamic_slice(jnp.pad(l, [(0, B)]), (F.n0,), (B,))  # the pending part, zero beyond p
    row = jnp.where(jnp.arange(B) == p, 1.0 / d, -(lp @ F.S_inv) / d)
    F = F._replace(W=F.W.at[slot].set(top, mode="drop"), S_inv=F.S_inv.at[slot].set(row, mode="drop"))
    n_new = n + keep.astype(jnp.int32)
    return cond(n_new - F.n0 == B, lambda fn: flush(fn[0], fn[1], cond), lambda fn: fn[0], (F, n_new))


def factor_to_dense(F: Factor, n):
    """The [C', C'] matrix M of a factor of n live rows (tests)."""
    return to_dense(flush(jax.tree_util.tree_map(jnp.asarray, F), n).panels)
