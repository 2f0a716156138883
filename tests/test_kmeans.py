"""k-means: Lloyd's iterations against a NumPy reference, k-means++ seeding statistics."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.kernels.kmeans import kmeans, kmeans_plusplus, lloyd


def numpy_lloyd(x, centers, max_iter, tol):
    """Plain Lloyd: assign, move centers to the means (empty ones stay), stop on stable labels
    or squared shift <= tol."""
    c = np.array(centers, np.float64)
    labels = np.argmin(((x[:, None, :] - c[None]) ** 2).sum(-1), axis=1)
    it = 0
    while it < max_iter:
        new_c = c.copy()
        for j in range(c.shape[0]):
            if np.any(labels == j):
                new_c[j] = x[labels == j].mean(axis=0)
        new_labels = np.argmin(((x[:, None, :] - new_c[None]) ** 2).sum(-1), axis=1)
        shift = ((new_c - c) ** 2).sum()
        c, it = new_c, it + 1
        stop = np.array_equal(new_labels, labels) or shift <= tol
        labels = new_labels
        if stop:
            break
    labels = np.argmin(((x[:, None, :] - c[None]) ** 2).sum(-1), axis=1)
    return c, labels, it


def blobs(seed, n=300, d=3, k=5):
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 3, (k, d))
    return means[rng.integers(0, k, n)] + rng.normal(0, 1.0, (n, d))


@pytest.mark.parametrize("seed,tol", [(0, 0.0), (1, 0.0), (2, 1e-3)])
def test_lloyd_matches_numpy_from_same_centers(seed, tol):
    x = blobs(seed)
    with jax.enable_x64(True):
        c0, idx = kmeans_plusplus(jax.random.PRNGKey(seed), jnp.asarray(x), 6)
        res = jax.jit(lloyd, static_argnums=2)(jnp.asarray(x), c0, 100, tol)
        assert res.centers.dtype == jnp.float64
    ref_c, ref_labels, ref_it = numpy_lloyd(x, np.asarray(c0), 100, tol)
    np.testing.assert_array_equal(np.asarray(res.assignments), ref_labels)
    np.testing.assert_allclose(np.asarray(res.centers), ref_c, rtol=0, atol=1e-10)
    assert int(res.iterations) == ref_it and ref_it > 1
    assert bool(res.converged)
    inertia = ((x - ref_c[ref_labels]) ** 2).sum()
    assert abs(float(res.inertia) - inertia) < 1e-8 * inertia


def test_lloyd_keeps_empty_cluster_and_respects_max_iter():
    x = np.array([[0.0], [0.1], [1.0], [1.1]])
    with jax.enable_x64(True):
        res = lloyd(jnp.asarray(x), jnp.asarray([[0.0], [1.0], [50.0]]), 10, 0.0)
        np.testing.assert_allclose(np.asarray(res.centers)[:, 0], [0.05, 1.05, 50.0], atol=1e-12)
        np.testing.assert_array_equal(np.asarray(res.assignments), [0, 0, 1, 1])
        x2 = blobs(3)
        one = lloyd(jnp.asarray(x2), jnp.asarray(x2[:6]), 1, 0.0)
    ref_c, _, _ = numpy_lloyd(x2, x2[:6], 1, 0.0)
    assert int(one.iterations) == 1
    np.testing.assert_allclose(np.asarray(one.centers), ref_c, atol=1e-10)


def test_kmeanspp_picks_distinct_data_rows():
    x = blobs(4, n=200)
    with jax.enable_x64(True):
        centers, idx = jax.jit(kmeans_plusplus, static_argnums=2)(jax.random.PRNGKey(0), jnp.asarray(x), 8)
    idx = np.asarray(idx)
    assert len(set(idx.tolist())) == 8
    np.testing.assert_array_equal(np.asarray(centers), x[idx])


def test_kmeanspp_second_pick_is_distance_squared_proportional():
    x = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [1.0, 1.0]])
    num = 40000
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(7), num)
        _, idx = jax.jit(jax.vmap(lambda k: kmeans_plusplus(k, jnp.asarray(x), 2)))(keys)
    idx = np.asarray(idx)
    # first pick: uniform over the 5 rows
    first = np.bincount(idx[:, 0], minlength=5) / num
    assert np.max(np.abs(first - 0.2)) < 0.015  # 5 sigma is about 0.01
    for j in range(5):
        sel = idx[:, 0] == j
        d2 = ((x - x[j]) ** 2).sum(1)
        p = d2 / d2.sum()
        freq = np.bincount(idx[sel, 1], minlength=5) / sel.sum()
        sigma = np.sqrt(p * (1 - p) / sel.sum())
        assert np.all(np.abs(freq - p) <= 5 * sigma + 1e-12), (j, freq, p)
        assert freq[j] == 0.0


def test_kmeans_recovers_separated_clusters_and_best_of_n_init():
    rng = np.random.default_rng(0)
    means = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    true = np.repeat(np.arange(4), 50)
    x = means[true] + rng.normal(0, 0.5, (200, 2))
    with jax.enable_x64(True):
        res = jax.jit(kmeans, static_argnums=(2, 3))(jax.random.PRNGKey(1), jnp.asarray(x), 4, 5)
    labels = np.asarray(res.assignments)
    # a perfect partition: each true cluster maps to one label and vice versa
    pairs = set(zip(true.tolist(), labels.tolist()))
    assert len(pairs) == 4
    for j in range(4):
        np.testing.assert_allclose(np.asarray(res.centers)[labels[true == j][0]], x[true == j].mean(0), atol=1e-10)
    with pytest.raises(ValueError):
        kmeans_plusplus(jax.random.PRNGKey(0), jnp.asarray(x[:3]), 4)
