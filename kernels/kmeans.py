"""k-means clustering with k-means++ seeding, as pure jit-able JAX functions.

    kmeans_plusplus(key, x, k) -> (centers [k, d], indices [k] int32)
        D^2 seeding (Arthur & Vassilvitskii, 2007): the first center is a uniformly drawn row of
        x; each further center is row j with probability D(j)^2 / sum_i D(i)^2, where D(j) is
        the distance from row j to its nearest center chosen so far.
    lloyd(x, centers, max_iter, tol) -> KMeansResult
        Lloyd's iterations from the given centers, under lax.while_loop, until the assignments
        stop changing, the squared center shift sum_c ||c_new - c_old||^2 is <= tol, or max_iter
        iterations have run. A cluster that loses all its points keeps its previous center.
    kmeans(key, x, k, n_init, max_iter, tol) -> KMeansResult
        n_init independent seedings + Lloyd runs (one after another, lax.map); the run with the lowest inertia wins.
        `tol` is relative, as in common k-means libraries: the absolute threshold is
        tol * mean over features of the per-feature variance of x.

Shapes: x [n, d] float; all sizes static. Assignments and inertia always refer to the RETURNED
centers (a final assignment step is done after the loop). Use float64 (jax.enable_x64) when
results must be reproducible to rounding.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


class KMeansResult(NamedTuple):
    """centers [k, d]; assignments [n] int32; inertia: sum of squared distances to the assigned
    centers (scalar); iterations: Lloyd updates done (int32); converged: bool (stopped before
    max_iter ran out, or at the last iteration by the criterion)."""

    centers: jax.Array
    assignments: jax.Array
    inertia: jax.Array
    iterations: jax.Array
    converged: jax.Array


def squared_distances(x, centers):
    """||x_i - c_j||^2 for x [n, d], centers [k, d] -> [n, k], clipped at 0.

    Expanded as ||x||^2 - 2 x.c + ||c||^2 so no [n, k, d] intermediate is formed.
    """
    xx = jnp.sum(x * x, axis=1)[:, None]
    cc = jnp.sum(centers * centers, axis=1)[None, :]
    return jnp.maximum(xx - 2.0 * (x @ centers.T) + cc, 0.0)


def assign(x, centers):
    """Nearest-center labels [n] int32 (ties: lowest index) and their squared distances [n]."""
    d2 = squared_distances(x, centers)
    labels = jnp.argmin(d2, axis=1).astype(jnp.int32)
    return labels, jnp.take_along_axis(d2, labels[:, None], axis=1)[:, 0]


def update_centers(x, labels, centers):
    """Means of the points assigned to each cluster [k, d]; empty clusters keep `centers`."""
    k = centers.shape[0]
    onehot = jax.nn.one_hot(labels, k, dtype=x.dtype)  # [n, k]
    counts = jnp.sum(onehot, axis=0)  # [k]
    sums = onehot.T @ x  # [k, d]
    means = sums / jnp.maximum(counts, 1.0)[:, None]
    return jnp.where((counts > 0)[:, None], means, centers)


def kmeans_plusplus(key, x, k: int):
    """k-means++ seeding: (centers [k, d] = x[indices], indices [k] int32); see the module docstring.

    If every remaining row coincides with a chosen center (all D = 0), further picks are uniform.
    """
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k-means++: need 1 <= k <= n, got k={k}, n={n}")
    keys = jax.random.split(key, k)
    first = jax.random.randint(keys[0], (), 0, n).astype(jnp.int32)
    d2 = jnp.sum((x - x[first]) ** 2, axis=1)
    indices = jnp.zeros((k,), jnp.int32).at[0].set(first)

    def body(j, carry):
        d2, indices = carry
        total = jnp.sum(d2)
        probs = jnp.where(total > 0, d2 / jnp.where(total > 0, total, 1.0), 1.0 / n)
        pick = jax.random.choice(keys[j], n, p=probs).astype(jnp.int32)
        d2 = jnp.minimum(d2, jnp.sum((x - x[pick]) ** 2, axis=1))
        return d2, indices.at[j].set(pick)

    _, indices = lax.fori_loop(1, k, body, (d2, indices))
    return x[indices], indices


def lloyd(x, centers, max_iter: int = 300, tol=0.0) -> KMeansResult:
    """Lloyd's algorithm from `centers` [k, d] on x [n, d]; absolute `tol` on the squared shift."""
    labels0, _ = assign(x, centers)

    def cond(carry):
        _, _, it, done = carry
        return jnp.logical_and(it < max_iter, jnp.logical_not(done))

    def body(carry):
        c, labels, it, _ = carry
        new_c = update_centers(x, labels, c)
        new_labels, _ = assign(x, new_c)
        shift = jnp.sum((new_c - c) ** 2)
        done = jnp.logical_or(jnp.all(new_labels == labels), shift <= tol)
        return new_c, new_labels, it + 1, done

    init = (centers, labels0, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    c, _, it, done = lax.while_loop(cond, body, init)
    labels, dist = assign(x, c)
    return KMeansResult(c, labels, jnp.sum(dist), it, done)


def kmeans(key, x, k: int, n_init: int = 10, max_iter: int = 300, tol: float = 1e-4) -> KMeansResult:
    """Best of `n_init` k-means++ + Lloyd runs on x [n, d] (lowest inertia); see the module docstring."""
    if n_init < 1 or max_iter < 1:
        raise ValueError(f"k-means: n_init and max_iter must be >= 1, got {n_init}, {max_iter}")
    tol_abs = tol * jnp.mean(jnp.var(x, axis=0))

    def one(key):
        centers, _ = kmeans_plusplus(key, x, k)
        return lloyd(x, centers, max_iter, tol_abs)

    runs = lax.map(one, jax.random.split(key, n_init))  # sequential: a vmapped while_loop runs every
    # restart for as many iterations as the slowest one and was slower here
    best = jnp.argmin(runs.inertia)
    return jax.tree_util.tree_map(lambda a: a[best], runs)
