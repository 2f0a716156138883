"""kernels.linalg against fresh NumPy factorisations and inverses.

Float64 checks run inside `jax.enable_x64(True)`; float32 checks run in the default mode.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.kernels import functions as kf
from bandits_jax.kernels import linalg as la


def random_spd(rng, p, jitter=0.5):
    B = rng.standard_normal((p, p))
    return B @ B.T / p + jitter * np.eye(p)


def padded(M, C):
    """block-diag(M, I_{C-n}) in NumPy."""
    out = np.eye(C)
    out[: M.shape[0], : M.shape[0]] = M
    return out


def rel(a, b):
    return np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b)


# ---------------------------------------------------------------------------------------------
# rank-one update / downdate


def test_chol_update_and_downdate_match_fresh_cholesky():
    rng = np.random.default_rng(0)
    update, downdate = jax.jit(la.chol_update), jax.jit(la.chol_downdate)
    with jax.enable_x64(True):
        for p in (1, 3, 8):
            A = random_spd(rng, p)
            x = rng.standard_normal(p)
            L = np.linalg.cholesky(A)
            up = np.asarray(update(jnp.asarray(L), jnp.asarray(x)))
            np.testing.assert_allclose(up, np.linalg.cholesky(A + np.outer(x, x)), rtol=1e-12, atol=1e-12)
            # downdate by a small vector that keeps A - x x^T positive definite
            xs = 0.3 * x / np.linalg.norm(x)
            down = np.asarray(downdate(jnp.asarray(L), jnp.asarray(xs)))
            np.testing.assert_allclose(down, np.linalg.cholesky(A - np.outer(xs, xs)), rtol=1e-11, atol=1e-12)
            # the downdate undoes the update
            back = np.asarray(downdate(update(jnp.asarray(L), jnp.asarray(x)), jnp.asarray(x)))
            np.testing.assert_allclose(back, L, rtol=1e-10, atol=1e-11)


def test_chol_update_on_padded_factor_keeps_padding():
    rng = np.random.default_rng(1)
    with jax.enable_x64(True):
        n, C = 5, 9
        A = random_spd(rng, n)
        x = np.zeros(C)
        x[:n] = rng.standard_normal(n)
        out = np.asarray(la.chol_update(jnp.asarray(padded(np.linalg.cholesky(A), C)), jnp.asarray(x)))
        expect = padded(np.linalg.cholesky(A + np.outer(x[:n], x[:n])), C)
        np.testing.assert_allclose(out, expect, rtol=1e-12, atol=1e-13)


def test_chol_update_vmaps_over_a_batch():
    rng = np.random.default_rng(2)
    with jax.enable_x64(True):
        As = np.stack([random_spd(rng, 4) for _ in range(3)])
        xs = rng.standard_normal((3, 4))
        Ls = np.linalg.cholesky(As)
        out = np.asarray(jax.vmap(la.chol_update)(jnp.asarray(Ls), jnp.asarray(xs)))
        for i in range(3):
            np.testing.assert_allclose(out[i], np.linalg.cholesky(As[i] + np.outer(xs[i], xs[i])), rtol=1e-12)


def _update_sequence(dtype, seed):
    """2,000 rank-one updates of a 20 x 20 factor; V = 1e-2 I + sum x x^T, cond(V) ~ 1e4.

    The coordinates of x have scales from 1 down to 1e-2, so V is not a multiple of I.
    """
    p, T, lam = 20, 2000, 1e-2
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, p)) * np.logspace(0, -2, p)
    step = lambda L, x: (la.chol_update(L, x), None)
    run = jax.jit(lambda L, X: jax.lax.scan(step, L, X)[0])
    L = np.asarray(run(jnp.sqrt(lam) * jnp.eye(p, dtype=dtype), jnp.asarray(X, dtype)))
    V = lam * np.eye(p) + X.T @ X
    assert L.dtype == dtype
    return L.astype(np.float64), V


def test_chol_update_2000_steps_float64():
    with jax.enable_x64(True):
        L, V = _update_sequence(jnp.float64, 3)
    assert rel(L, np.linalg.cholesky(V)) < 1e-9
    assert rel(L @ L.T, V) < 1e-9


# Float32 tolerance for long update sequences: 5e-5 relative (Frobenius).
# Each rank-one update is a product of plane rotations and is backward stable: it adds an error
# of order eps * ||V|| to V. Over T updates the errors add up at most linearly and in practice
# like sqrt(T). The error in the factor L is that backward error amplified by up to cond(V). The
# a-priori bound T * eps * cond(V) ~ 2000 * 6e-8 * 1e4 = 1 is useless; the observed relative
# error is 0.6e-6 to 1.5e-6 for L and 1e-6 to 3.5e-6 for L L^T (cond(V) ~ 1e4, seeds 0-2).
# 5e-5 leaves more than 10x margin. Float64 errors are ~1e-15 on the same problem.
F32_UPDATE_TOL = 5e-5


@pytest.mark.parametrize("seed", [0, 1])
def test_chol_update_2000_steps_float32(seed):
    L, V = _update_sequence(jnp.float32, seed)
    assert rel(L, np.linalg.cholesky(V)) < F32_UPDATE_TOL
    assert rel(L @ L.T, V) < F32_UPDATE_TOL


# ---------------------------------------------------------------------------------------------
# growth by appending rows


def _append_run(L0, X, start, stop, lam, params):
    """Append stored points start..stop-1 of X[C, d] to the padded factor L0 of K + lam I."""
    k = kf.get_kernel("rbf")

    def step(L, i):
        col = k.fn(X[i][None], X, params)[0]  # entries >= i are stale and must be masked
        return la.chol_append(L, i, col, 1.0 + lam), None

    return jax.lax.scan(step, L0, jnp.arange(start, stop))[0]


def _append_growth(dtype, seed):
    """300 appends (capacity 300, in two scans of 150) on an RBF Gram + 1e-2 I, cond ~ 4e3.

    300 is large enough for the Schur recursion to accumulate error and small enough that a
    scan of O(C^2) appends runs in well under a second on two cores.
    """
    C, lam = 300, 1e-2
    params = {"lengthscale": 0.5}
    rng = np.random.default_rng(seed)
    Xn = rng.uniform(-1, 1, (C, 3))
    X = jnp.asarray(Xn, dtype)
    run = jax.jit(_append_run, static_argnums=(2, 3))
    half = run(jnp.eye(C, dtype=dtype), X, 0, C // 2, lam, params)
    full = run(half, X, C // 2, C, lam, params)
    sq = ((Xn[:, None, :] - Xn[None, :, :]) ** 2).sum(-1)
    A = np.exp(-sq / (2 * 0.5**2)) + lam * np.eye(C)
    return np.asarray(half).astype(np.float64), np.asarray(full).astype(np.float64), A


def test_chol_append_growth_float64():
    with jax.enable_x64(True):
        half, full, A = _append_growth(jnp.float64, 0)
    C = A.shape[0]
    # midway, the padded factor is block-diag(L_150, I)
    assert rel(half, padded(np.linalg.cholesky(A[: C // 2, : C // 2]), C)) < 1e-9
    assert rel(full, np.linalg.cholesky(A)) < 1e-9


# Float32 tolerance for append growth: 1e-4 relative (Frobenius). Row n of the factor is a
# triangular solve against L_n plus a square root of the Schur complement. Its error grows with
# cond(K_n + lam I), which reaches ~4e3 here, and errors of earlier rows feed into later ones.
# Observed: 5.6e-6 over three seeds. The margin is ~20x.
F32_APPEND_TOL = 1e-4


def test_chol_append_growth_float32():
    half, full, A = _append_growth(jnp.float32, 1)
    assert rel(full, np.linalg.cholesky(A)) < F32_APPEND_TOL


def test_chol_append_ignores_entries_beyond_n_and_pads_with_identity():
    rng = np.random.default_rng(4)
    with jax.enable_x64(True):
        n, C = 4, 7
        A = random_spd(rng, n + 1)
        L = jnp.asarray(padded(np.linalg.cholesky(A[:n, :n]), C))
        col = np.zeros(C)
        col[:n] = A[n, :n]
        garbage = col.copy()
        garbage[n:] = rng.standard_normal(C - n) * 100
        a = np.asarray(la.chol_append(L, n, jnp.asarray(col), A[n, n]))
        b = np.asarray(jax.jit(la.chol_append)(L, jnp.int32(n), jnp.asarray(garbage), A[n, n]))
        expect = padded(np.linalg.cholesky(A), C)
        np.testing.assert_allclose(a, expect, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b, a, rtol=0, atol=0)


def test_inv_append_matches_fresh_inverse():
    rng = np.random.default_rng(5)
    with jax.enable_x64(True):
        p, C = 6, 10
        A = random_spd(rng, p)
        Ainv = jnp.eye(C)
        for n in range(p):
            col = np.full(C, 7.0)  # stale entries >= n must be ignored
            col[:n] = A[n, :n]
            Ainv = la.inv_append(Ainv, n, jnp.asarray(col), A[n, n])
            np.testing.assert_allclose(
                np.asarray(Ainv), padded(np.linalg.inv(A[: n + 1, : n + 1]), C), rtol=1e-10, atol=1e-12
            )


def test_sherman_morrison_and_woodbury_match_inverse():
    rng = np.random.default_rng(6)
    with jax.enable_x64(True):
        V = random_spd(rng, 5)
        x = rng.standard_normal(5)
        got = np.asarray(la.sherman_morrison(jnp.asarray(np.linalg.inv(V)), jnp.asarray(x)))
        np.testing.assert_allclose(got, np.linalg.inv(V + np.outer(x, x)), rtol=1e-11, atol=1e-12)
        X = rng.standard_normal((3, 5))
        got = np.asarray(la.woodbury(jnp.asarray(np.linalg.inv(V)), jnp.asarray(X)))
        np.testing.assert_allclose(got, np.linalg.inv(V + X.T @ X), rtol=1e-11, atol=1e-12)


def test_logdet_and_solve_with_padding():
    rng = np.random.default_rng(7)
    with jax.enable_x64(True):
        n, C = 5, 8
        A = random_spd(rng, n)
        L = np.linalg.cholesky(A)
        Lp = jnp.asarray(padded(L, C))
        np.testing.assert_allclose(float(la.logdet_from_chol(Lp)), np.linalg.slogdet(A)[1], rtol=1e-12)
        b = rng.standard_normal(n)
        B = rng.standard_normal((n, 3))
        np.testing.assert_allclose(np.asarray(la.chol_solve(jnp.asarray(L), jnp.asarray(b))), np.linalg.solve(A, b), rtol=1e-11)
        got = np.asarray(la.chol_solve(Lp, jnp.asarray(np.vstack([B, np.zeros((C - n, 3))]))))
        np.testing.assert_allclose(got[:n], np.linalg.solve(A, B), rtol=1e-11)
        np.testing.assert_array_equal(got[n:], 0.0)


def _posterior_np(A, Kc, kd, y):
    Ainv = np.linalg.inv(A)
    return Kc @ Ainv @ y, np.maximum(kd - np.einsum("ij,jk,ik->i", Kc, Ainv, Kc), 0.0)


def test_posterior_mean_var_masks_and_padding():
    rng = np.random.default_rng(8)
    with jax.enable_x64(True):
        n, C, m = 6, 11, 4
        A = random_spd(rng, n)
        Kc = rng.standard_normal((m, n))
        kd = 5.0 + rng.uniform(size=m)
        y = rng.standard_normal(n)
        mean_np, var_np = _posterior_np(A, Kc, kd, y)
        L = np.linalg.cholesky(A)
        # unpadded
        mean, var = la.posterior_mean_var(jnp.asarray(L), jnp.asarray(Kc), jnp.asarray(kd), jnp.asarray(y), n)
        np.testing.assert_allclose(np.asarray(mean), mean_np, rtol=1e-11)
        np.testing.assert_allclose(np.asarray(var), var_np, rtol=1e-11)
        # padded, with garbage in the masked columns / entries
        Kc_p = np.hstack([Kc, 50 * rng.standard_normal((m, C - n))])
        y_p = np.concatenate([y, 50 * rng.standard_normal(C - n)])
        fn = jax.jit(la.posterior_mean_var)
        mean_p, var_p = fn(jnp.asarray(padded(L, C)), jnp.asarray(Kc_p), jnp.asarray(kd), jnp.asarray(y_p), jnp.int32(n))
        np.testing.assert_allclose(np.asarray(mean_p), mean_np, rtol=1e-11)
        np.testing.assert_allclose(np.asarray(var_p), var_np, rtol=1e-11)
        # no data: prior
        mean0, var0 = fn(jnp.asarray(padded(L, C)), jnp.asarray(Kc_p), jnp.asarray(kd), jnp.asarray(y_p), jnp.int32(0))
        np.testing.assert_array_equal(np.asarray(mean0), 0.0)
        np.testing.assert_array_equal(np.asarray(var0), kd)


def test_posterior_variance_clipped_at_zero():
    with jax.enable_x64(True):
        L = jnp.eye(2)
        _, var = la.posterior_mean_var(L, jnp.array([[3.0, 0.0]]), jnp.array([1.0]), jnp.zeros(2), 1)
        assert float(var[0]) == 0.0  # 1 - 9 clipped


def test_pad_then_continue_equals_large_capacity_from_start():
    rng = np.random.default_rng(9)
    with jax.enable_x64(True):
        p = 8
        A = random_spd(rng, p)

        chol_append, inv_append = jax.jit(la.chol_append), jax.jit(la.inv_append)

        def grow(L, Ainv, lo, hi):
            for n in range(lo, hi):
                col = np.zeros(L.shape[0])
                col[:n] = A[n, :n]
                L = chol_append(L, n, jnp.asarray(col), A[n, n])
                Ainv = inv_append(Ainv, n, jnp.asarray(col), A[n, n])
            return L, Ainv

        Ls, Ais = grow(jnp.eye(4), jnp.eye(4), 0, 4)
        Ls, Ais = grow(la.pad_chol(Ls, 12), la.pad_inv(Ais, 12), 4, p)
        Lb, Aib = grow(jnp.eye(12), jnp.eye(12), 0, p)
        np.testing.assert_allclose(np.asarray(Ls), np.asarray(Lb), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(np.asarray(Ais), np.asarray(Aib), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(np.asarray(Ls), padded(np.linalg.cholesky(A), 12), rtol=1e-11, atol=1e-12)


def test_pad_rows_and_mask():
    buf = jnp.arange(6.0).reshape(3, 2)
    out = np.asarray(la.pad_rows(buf, 5, value=-1))
    np.testing.assert_array_equal(out, [[0, 1], [2, 3], [4, 5], [-1, -1], [-1, -1]])
    np.testing.assert_array_equal(np.asarray(la.pad_rows(jnp.arange(2.0), 3)), [0, 1, 0])
    with pytest.raises(ValueError):
        la.pad_rows(buf, 2)
    with pytest.raises(ValueError):
        la.pad_chol(jnp.eye(3), 2)
    np.testing.assert_array_equal(np.asarray(la.mask_upto(2, 4)), [True, True, False, False])
    np.testing.assert_array_equal(np.asarray(jax.jit(la.mask_upto, static_argnums=1)(jnp.int32(0), 3)), [False] * 3)


def test_float32_inputs_stay_float32():
    L = jnp.eye(3, dtype=jnp.float32)
    x = jnp.ones(3, jnp.float32)
    assert la.chol_update(L, x).dtype == jnp.float32
    assert la.chol_append(L, 1, x, 2.0).dtype == jnp.float32
    assert la.inv_append(L, 1, x, 2.0).dtype == jnp.float32
    assert la.sherman_morrison(L, x).dtype == jnp.float32
    mean, var = la.posterior_mean_var(L, jnp.ones((2, 3), jnp.float32), jnp.ones(2, jnp.float32), x, 1)
    assert mean.dtype == var.dtype == jnp.float32


# ---------------------------------------------------------------------------------------------
# inverse Cholesky factor growth


def test_inv_chol_append_growth_matches_fresh_inverse_factor():
    rng = np.random.default_rng(11)
    C, n_end = 60, 45
    Xn = rng.uniform(-1, 1, (C, 3))
    sq = ((Xn[:, None, :] - Xn[None, :, :]) ** 2).sum(-1)
    A = np.exp(-sq / 0.5) + 0.05 * np.eye(C)
    with jax.enable_x64(True):
        step = jax.jit(la.inv_chol_append)
        M = jnp.eye(C)
        for n in range(n_end):
            # garbage beyond n must be ignored
            col = np.where(np.arange(C) < n, A[n], 99.0)
            M, l, d = step(M, jnp.int32(n), jnp.asarray(col), A[n, n])
            L_np = np.linalg.cholesky(A[: n + 1, : n + 1])
            np.testing.assert_allclose(np.asarray(l)[:n], L_np[n, :n], rtol=1e-9, atol=1e-12)
            assert abs(float(d) - L_np[n, n]) < 1e-10
        expect = padded(np.linalg.inv(np.linalg.cholesky(A[:n_end, :n_end])), C)
        assert rel(np.asarray(M), expect) < 1e-9
        # an index at the capacity writes nothing
        M2, _, _ = step(M, jnp.int32(C), jnp.asarray(A[0]), 1.0)
        np.testing.assert_array_equal(np.asarray(M2), np.asarray(M))
        # posterior from the inverse factor equals the one from the factor
        Kc = rng.standard_normal((4, C))
        kd = 3.0 + rng.uniform(size=4)
        y = rng.standard_normal(C)
        L = padded(np.linalg.cholesky(A[:n_end, :n_end]), C)
        m1, v1 = la.posterior_mean_var(jnp.asarray(L), jnp.asarray(Kc), jnp.asarray(kd), jnp.asarray(y), n_end)
        m2, v2 = la.posterior_mean_var_inv(M, jnp.asarray(Kc), jnp.asarray(kd), jnp.asarray(y), n_end)
        np.testing.assert_allclose(np.asarray(m2), np.asarray(m1), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(np.asarray(v2), np.asarray(v1), rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# Woodbury log-det, ridge scores, kernel ridge on repeated points: against NumPy's exact answers


def test_woodbury_logdet_and_inverse_and_logdet_equal_numpy():
    rng = np.random.default_rng(7)
    p, k = 6, 3
    V = random_spd(rng, p)
    X = rng.standard_normal((k, p))
    X[1] = 0.0  # zero rows change nothing
    with jax.enable_x64(True):
        Vinv, logdet = la.inverse_and_logdet(jnp.asarray(V))
        np.testing.assert_allclose(Vinv, np.linalg.inv(V), rtol=1e-10, atol=1e-12)
        assert abs(float(logdet) - np.linalg.slogdet(V)[1]) < 1e-10
        new_inv, new_logdet = la.woodbury_logdet(Vinv, jnp.asarray(X), logdet)
    W = V + X.T @ X
    np.testing.assert_allclose(new_inv, np.linalg.inv(W), rtol=1e-10, atol=1e-12)
    assert abs(float(new_logdet) - np.linalg.slogdet(W)[1]) < 1e-10


def test_ridge_scores_and_logdet_equal_numpy():
    from bandits_jax.kernels.ridge import ridge_logdet, ridge_scores

    rng = np.random.default_rng(8)
    d, K, lam, alpha = 4, 5, 0.7, 1.3
    Xh = rng.standard_normal((9, d))
    A, b = Xh.T @ Xh, Xh.T @ rng.standard_normal(9)
    ctx = rng.standard_normal((K, d))
    Vinv = np.linalg.inv(A + lam * np.eye(d))
    mean = ctx @ Vinv @ b
    var = np.einsum("kd,de,ke->k", ctx, Vinv, ctx)
    with jax.enable_x64(True):
        m, v, s = ridge_scores(jnp.asarray(A), jnp.asarray(b), lam, alpha, jnp.asarray(ctx))
        ld = ridge_logdet(jnp.asarray(A), lam)
    np.testing.assert_allclose(m, mean, rtol=1e-10)
    np.testing.assert_allclose(v, var, rtol=1e-10)
    np.testing.assert_allclose(s, mean + alpha * np.sqrt(var), rtol=1e-10)
    assert abs(float(ld) - np.linalg.slogdet(A + lam * np.eye(d))[1]) < 1e-10


def test_repeated_points_posterior_equals_full_history_krr():
    from bandits_jax.kernels.krr import repeated_points_posterior

    rng = np.random.default_rng(9)
    d, m, lam, ls = 3, 4, 0.5, 0.8
    Z = rng.standard_normal((m, d))
    counts = np.array([3, 0, 1, 2])  # a padding row with count 0
    idx = np.repeat(np.arange(m), counts)
    X, y = Z[idx], rng.standard_normal(idx.size)
    sums = np.zeros(m)
    np.add.at(sums, idx, y)
    Xq = rng.standard_normal((5, d))
    rbf = lambda A, B: np.exp(-((A[:, None] - B[None]) ** 2).sum(-1) / (2 * ls ** 2))  # noqa: E731
    Kinv = np.linalg.inv(rbf(X, X) + lam * np.eye(idx.size))
    kq = rbf(X, Xq)
    mean = kq.T @ Kinv @ y
    var = 1.0 - np.einsum("nk,nm,mk->k", kq, Kinv, kq)
    kern = kf.get_kernel("rbf")
    with jax.enable_x64(True):
        got_m, got_v = repeated_points_posterior(kern, {"lengthscale": ls}, lam, jnp.asarray(Z),
                                                 jnp.asarray(counts), jnp.asarray(sums), jnp.asarray(Xq))
    # push-through: var(x) = k(x,x) - k^T (K + lam I)^{-1} k; the module's var has no 1/lam either
    np.testing.assert_allclose(got_m, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got_v, var, rtol=1e-9, atol=1e-12)


def test_pad_ridge_inverse_is_the_inverse_of_the_zero_padded_statistics():
    rng = np.random.default_rng(10)
    m, size, lam = 3, 5, 0.4
    X = rng.standard_normal((6, m))
    A = X.T @ X
    padded_A = np.zeros((size, size))
    padded_A[:m, :m] = A
    with jax.enable_x64(True):
        P = jnp.asarray(np.linalg.inv(A + lam * np.eye(m)))
        got = la.pad_ridge_inverse(jnp.stack([P, 2 * P]), size, lam)  # a leading batch axis too
        vec = la.pad_last(jnp.ones((2, m)), size)
    np.testing.assert_allclose(got[0], np.linalg.inv(padded_A + lam * np.eye(size)), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(got[1])[m:, m:], np.eye(size - m) / lam)
    np.testing.assert_array_equal(np.asarray(vec), np.concatenate([np.ones((2, m)), np.zeros((2, size - m))], 1))
    with pytest.raises(ValueError, match="cannot shrink"):
        la.pad_last(jnp.ones((2, m)), m - 1)
