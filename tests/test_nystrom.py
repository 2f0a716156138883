"""Nyström dictionaries: exactness with the full dictionary, basis change, padding, sampling."""
import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.kernels import nystrom
from bandits_jax.kernels.functions import get_kernel

RBF = get_kernel("rbf")


def _np_rbf(A, B, ls):
    return np.exp(-0.5 * np.sum((A[:, None] - B[None]) ** 2, -1) / ls**2)


@jax.jit
def _posterior(points, count, X, Y, Q, lam, ls):
    """Nyström mean/var at Q from data (X, Y) with dictionary points[:count] (JAX, padded)."""
    p = {"lengthscale": jnp.asarray(ls)}
    W, _ = nystrom.dictionary_root(RBF.fn, points, count, p)
    Z = nystrom.embed(RBF.fn, X, points, count, W, p)
    A, b = nystrom.embedded_stats(Z, Y, jnp.ones(X.shape[0], bool))
    Pinv = nystrom.ridge_inverse(A, lam)
    Zq = nystrom.embed(RBF.fn, Q, points, count, W, p)
    return nystrom.ridge_mean_var(Zq, RBF.diag(Q, p), Pinv, Pinv @ b, lam)


def _pad(points, M):
    return jnp.zeros((M, points.shape[1])).at[: points.shape[0]].set(points)


def test_full_dictionary_equals_exact_krr():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        X, Q = rng.normal(size=(12, 3)), rng.normal(size=(7, 3))
        Y = rng.normal(size=12)
        lam, ls = 0.5, 1.3
        mean, var = _posterior(_pad(jnp.asarray(X), 20), 12, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(Q), lam, ls)
        Kinv = np.linalg.inv(_np_rbf(X, X, ls) + lam * np.eye(12))
        kq = _np_rbf(X, Q, ls)
        np.testing.assert_allclose(mean, kq.T @ Kinv @ Y, atol=1e-10)
        np.testing.assert_allclose(var, (1 - np.einsum("ik,ij,jk->k", kq, Kinv, kq)) / lam, atol=1e-10)


def test_empty_dictionary_is_prior():
    with jax.enable_x64(True):
        Q = jnp.asarray(np.random.default_rng(1).normal(size=(4, 2)))
        X = jnp.ones((3, 2))
        mean, var = _posterior(jnp.zeros((5, 2)), 0, X, jnp.ones(3), Q, 2.0, 1.0)
        np.testing.assert_array_equal(mean, 0.0)
        np.testing.assert_allclose(var, 0.5, atol=1e-15)


def test_padding_never_changes_results():
    with jax.enable_x64(True):
        rng = np.random.default_rng(2)
        X, Q, Y = rng.normal(size=(9, 2)), rng.normal(size=(5, 2)), rng.normal(size=9)
        D = X[:6]
        # stale garbage beyond the live rows must be ignored
        garbage = jnp.asarray(rng.normal(size=(30, 2)))
        padded = garbage.at[:6].set(D)
        m0, v0 = _posterior(jnp.asarray(D), 6, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(Q), 1.0, 1.0)
        m1, v1 = _posterior(padded, 6, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(Q), 1.0, 1.0)
        np.testing.assert_allclose(m1, m0, atol=1e-11)
        np.testing.assert_allclose(v1, v0, atol=1e-11)
        # the root's live block matches a plain NumPy pseudo-inverse root; padding is zero
        p = {"lengthscale": jnp.asarray(1.0)}
        W, _ = nystrom.dictionary_root(RBF.fn, padded, 6, p)
        ev, U = np.linalg.eigh(_np_rbf(D, D, 1.0))
        np.testing.assert_allclose(W[:6, :6], (U / np.sqrt(ev)) @ U.T, atol=1e-9)
        assert np.all(np.asarray(W)[6:] == 0) and np.all(np.asarray(W)[:, 6:] == 0)


def test_basis_change_preserves_gram_and_composes():
    with jax.enable_x64(True):
        rng = np.random.default_rng(3)
        pts = jnp.asarray(rng.normal(size=(10, 2)))
        p = {"lengthscale": jnp.asarray(0.9)}
        roots = {m: nystrom.dictionary_root(RBF.fn, pts, m, p) for m in (3, 6, 10)}
        X = jnp.asarray(rng.normal(size=(8, 2)))
        Y = jnp.asarray(rng.normal(size=8))
        W3, _ = roots[3]
        W6, K6 = roots[6]
        W10, K10 = roots[10]
        T36 = nystrom.basis_change(W3, K6, W6)
        T610 = nystrom.basis_change(W6, K10, W10)
        T310 = nystrom.basis_change(W3, K10, W10)
        np.testing.assert_allclose(T36 @ T610, T310, atol=1e-9)
        # a point of the old span maps onto its new embedding; Grams are preserved
        Zold = nystrom.embed(RBF.fn, pts[:3], pts, 3, W3, p)
        Znew = nystrom.embed(RBF.fn, pts[:3], pts, 10, W10, p)
        np.testing.assert_allclose(Zold @ T310, Znew, atol=1e-9)
        Zx = nystrom.embed(RBF.fn, X, pts, 3, W3, p)
        np.testing.assert_allclose((Zx @ T310) @ (Zx @ T310).T, Zx @ Zx.T, atol=1e-10)
        # T T^T = I on the old span
        np.testing.assert_allclose(T310 @ T310.T, np.eye(10) * (np.arange(10) < 3), atol=1e-9)
        # statistics: changed stats == stats of the transformed embeddings; the +1/2 form would not be
        A, b = nystrom.embedded_stats(Zx, Y, jnp.ones(8, bool))
        A2, b2 = nystrom.change_stats(T310, A, b)
        np.testing.assert_allclose(A2, (Zx @ T310).T @ (Zx @ T310), atol=1e-10)
        np.testing.assert_allclose(b2, (Zx @ T310).T @ Y, atol=1e-10)


def test_leverage_probabilities_against_numpy():
    with jax.enable_x64(True):
        rng = np.random.default_rng(4)
        S, X = rng.normal(size=(5, 2)), rng.normal(size=(7, 2))
        Q = np.concatenate([S[:3], 5.0 + rng.normal(size=(3, 2))])  # low and high variance
        Y = rng.normal(size=7)
        lam, q = 0.7, 1.5
        _, var = _posterior(_pad(jnp.asarray(S), 8), 5, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(Q), lam, 1.0)
        prob = nystrom.leverage_probability(var, q)
        # NumPy: Nyström embedding with the eigen root, then the spec's variance and min(1, q var)
        ev, U = np.linalg.eigh(_np_rbf(S, S, 1.0))
        W = U @ np.diag(ev ** -0.5) @ U.T
        Z, Zq = _np_rbf(X, S, 1.0) @ W, _np_rbf(Q, S, 1.0) @ W
        Pinv = np.linalg.inv(Z.T @ Z + lam * np.eye(5))
        v = np.maximum(1 - np.sum(Zq**2, 1), 0) / lam + np.einsum("mi,ij,mj->m", Zq, Pinv, Zq)
        np.testing.assert_allclose(prob, np.minimum(1, q * v), atol=1e-10)
        assert np.any(np.asarray(prob) < 1) and np.any(np.asarray(prob) == 1)  # both branches
        u = jnp.asarray(rng.uniform(size=6))
        valid = jnp.asarray([True] * 5 + [False])
        np.testing.assert_array_equal(nystrom.include_draws(prob, u, valid),
                                      (np.asarray(u) < np.minimum(1, q * v)) & np.asarray(valid))
        # uniform inclusion: frequency close to the probability
        keep = nystrom.uniform_inclusion(jax.random.PRNGKey(0), jnp.ones(20000, bool), 0.3)
        assert abs(float(jnp.mean(keep)) - 0.3) < 0.015


def test_append_deduplicates_and_flags_overflow():
    pts = jnp.zeros((3, 2)).at[0].set(jnp.array([1.0, 2.0]))
    cand = jnp.array([[1.0, 2.0], [3.0, 4.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 9.0]])
    keep = jnp.array([True, True, True, False, True, True])
    out, n, appended, over = nystrom.sample_and_append(pts, 1, cand, keep)
    assert int(n) == 3 and bool(over)
    np.testing.assert_array_equal(appended, [False, True, False, False, True, False])
    np.testing.assert_array_equal(out, [[1, 2], [3, 4], [7, 8]])
    out, n, _, over = nystrom.sample_and_append(pts, 1, cand[:3], keep[:3])
    assert int(n) == 2 and not bool(over)


def test_cholesky_embedding_is_a_rotation_with_prefix_factors_and_skips_duplicates():
    """Appending points one by one builds L^{-1} of the Gram; the embedding L^{-1} k_S is the
    symmetric-root one rotated (same Grams, means, variances); a prefix uses the leading block;
    an exact or numerical duplicate is not appended; a full dictionary flags overflow."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(5)
        pts = rng.normal(size=(7, 2))
        X, Y, Q = rng.normal(size=(9, 2)), rng.normal(size=9), rng.normal(size=(5, 2))
        p = {"lengthscale": jnp.asarray(0.9)}
        M, lam = 10, 0.6
        append = jax.jit(lambda P, n, Li, x: nystrom.chol_dictionary_append(RBF.fn, P, n, Li, x, True, p))
        P, n, Li = jnp.zeros((M, 2)), jnp.zeros((), jnp.int32), jnp.zeros((M, M))
        cands = np.concatenate([pts[:4], pts[1:2], pts[4:], pts[2:3] + 1e-9])  # exact and near duplicates
        added = []
        for x in cands:
            P, n, Li, add, over = append(P, n, Li, jnp.asarray(x))
            added.append(bool(add))
            assert not bool(over)
        assert added == [True] * 4 + [False] + [True] * 3 + [False] and int(n) == 7
        np.testing.assert_array_equal(P[:7], pts)
        L = np.linalg.cholesky(_np_rbf(pts, pts, 0.9))
        np.testing.assert_allclose(Li[:7, :7] @ L, np.eye(7), atol=1e-10)
        assert np.all(np.asarray(Li)[7:] == 0) and np.all(np.asarray(Li)[:, 7:] == 0)
        for m in (3, 7):  # prefix dictionaries use the leading block of the newest factor
            Zc = nystrom.embed_chol(RBF.fn, jnp.asarray(X), P, m, Li, p)
            W, _ = nystrom.dictionary_root(RBF.fn, P, m, p)
            Zs = nystrom.embed(RBF.fn, jnp.asarray(X), P, m, W, p)
            assert np.all(np.asarray(Zc)[:, m:] == 0)
            np.testing.assert_allclose(Zc @ Zc.T, Zs @ Zs.T, atol=1e-10)
            Zq = nystrom.embed_chol(RBF.fn, jnp.asarray(Q), P, m, Li, p)
            A, b = nystrom.embedded_stats(Zc, jnp.asarray(Y), jnp.ones(9, bool))
            Pinv = nystrom.ridge_inverse(A, lam)
            mean, var = nystrom.ridge_mean_var(Zq, RBF.diag(jnp.asarray(Q), p), Pinv, Pinv @ b, lam)
            m0, v0 = _posterior(P, m, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(Q), lam, 0.9)
            np.testing.assert_allclose(mean, m0, atol=1e-10)
            np.testing.assert_allclose(var, v0, atol=1e-10)
        # no room: nothing written, overflow flagged; not wanted: nothing at all
        small = jnp.zeros((2, 2))
        S2, n2, L2, _, _ = nystrom.chol_dictionary_append(RBF.fn, small, 0, jnp.zeros((2, 2)), jnp.asarray(pts[0]), True, p)
        S2, n2, L2, _, _ = nystrom.chol_dictionary_append(RBF.fn, S2, n2, L2, jnp.asarray(pts[1]), True, p)
        S3, n3, L3, add, over = nystrom.chol_dictionary_append(RBF.fn, S2, n2, L2, jnp.asarray(pts[2]), True, p)
        assert int(n3) == 2 and bool(over) and not bool(add) and np.array_equal(S3, S2) and np.array_equal(L3, L2)
        _, n4, _, add, over = nystrom.chol_dictionary_append(RBF.fn, small, 0, jnp.zeros((2, 2)), jnp.asarray(pts[0]), False, p)
        assert int(n4) == 0 and not bool(add) and not bool(over)
