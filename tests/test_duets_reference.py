"""Checks of the plain NumPy DUETS reference and its baselines (reference/duets_np.py)."""
import numpy as np
import pytest

from reference import duets_np as R

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

HP = dict(lam=0.2, noise_std=0.2)


def _branin_problem(M, seed=0):
    rng = np.random.default_rng(seed)
    return R.make_problem("branin", rng, M)


def _duets(prob, dr, **kw):
    args = dict(T1=2, p0=10.0, beta=1.0, lengthscale=prob["lengthscale"], **HP)
    args.update(kw)
    return R.duets_np(prob["X"], prob["f"], dr["eps"], dr["u_query"], dr["u_keep"], dr["u_empty"], **args)


def test_schedule_and_communication_steps():
    nominal, steps = R.epoch_lengths(50, 2)
    assert nominal == [2, 10, 22, 33]
    assert steps == [2, 10, 22, 16]
    assert R.epoch_lengths(20, 2) == ([2, 6, 10, 14], [2, 6, 10, 2])
    assert R.epoch_lengths(10, 20) == ([20], [10])

    prob = _branin_problem(120)
    N, T = 3, 50
    dr = R.draws(np.random.default_rng(1), T, N, 120, 2)
    out = _duets(prob, dr)
    for key in ("syncs", "comm_paper", "comm_up", "comm_down", "comm_code"):
        assert np.flatnonzero(out[key]).tolist() == [1, 11, 33], key
    assert out["T_j"] == [2, 10, 22] and out["steps"] == [2, 10, 22] and out["n_points"] == [6, 30, 66]
    assert len(out["active_masks"]) == 4
    np.testing.assert_allclose(out["regret"], prob["f"].max() - prob["f"][out["actions"]])
    # every query is the shared-randomness draw from the active set of its epoch
    start = 0
    for j, n_steps in enumerate(steps):
        for i in range(n_steps):
            want = R.uniform_queries(dr["u_query"][j][:, i], out["active_masks"][j])
            np.testing.assert_array_equal(out["actions"][start + i], want)
        start += n_steps
    # the logged amounts follow the per-round formula
    for j, (t, s) in enumerate(zip([1, 11, 33], out["S_size"])):
        kept = max(int(np.sum(dr["u_keep"][j] < out["p"][j])), 1)     # before de-duplication
        c = R.duets_comm(s, 2, N, kept)
        assert (out["comm_up"][t], out["comm_down"][t], out["comm_paper"][t], out["comm_code"][t]) == \
            (c["up"], c["down"], 4 * s + 1, N * kept)


def test_nystrom_exact_when_inducing_set_is_the_data():
    rng = np.random.default_rng(3)
    X = rng.random((15, 2))
    Q = rng.random((40, 2))
    y = rng.standard_normal(15)
    lam, ell = 0.2, 0.3
    K_DD, K_DQ = R.se_kernel(X, X, ell), R.se_kernel(X, Q, ell)
    kqq = np.ones(len(Q))
    mu, var = R.exact_mean_var(K_DD, K_DQ, kqq, y, lam)
    mu_z, s2_z = R.nystrom_mean_var(K_DD, K_DD, K_DQ, kqq, y, lam)
    mu_k, s2_k = R.nystrom_mean_var_kform(K_DD, K_DD, K_DQ, kqq, y, lam)
    np.testing.assert_allclose(mu_z, mu, atol=1e-9)
    np.testing.assert_allclose(lam * s2_z, var, atol=1e-9)
    np.testing.assert_allclose(mu_k, mu, atol=1e-9)
    np.testing.assert_allclose(lam * s2_k, var, atol=1e-9)
    # a strict subset as inducing set and data with repeats: the Z-form equals the K-form
    D = np.concatenate([X, X[:5]])
    yD = rng.standard_normal(len(D))
    S = X[[0, 3, 7, 11]]
    args = (R.se_kernel(S, S, ell), R.se_kernel(S, D, ell), R.se_kernel(S, Q, ell), kqq, yD, lam)
    mz, vz = R.nystrom_mean_var(*args)
    mk, vk = R.nystrom_mean_var_kform(*args)
    np.testing.assert_allclose(mz, mk, atol=1e-9)
    np.testing.assert_allclose(vz, vk, atol=1e-9)


def test_trimming_nested_keeps_argmax_and_large_beta_keeps_all():
    prob = _branin_problem(150)
    N, T = 3, 20
    eliminated = 0
    for seed in range(3):
        dr = R.draws(np.random.default_rng(seed), T, N, 150, 2)
        out = _duets(prob, dr, beta=0.05)
        masks = out["active_masks"]
        for j, mu in enumerate(out["mu_tilde"]):
            ids = np.flatnonzero(masks[j])
            assert len(mu) == len(ids) == out["active_before"][j]
            assert not np.any(masks[j + 1] & ~masks[j])                 # X_{j+1} subset of X_j
            assert masks[j + 1][ids[np.argmax(mu)]]                      # argmax mu~_j survives
            assert masks[j + 1].sum() == out["active_after"][j]
            assert 1 <= out["S_size"][j] <= out["n_points"][j]
            assert 0.0 < out["p"][j] <= 1.0
        eliminated += out["active_before"][0] - out["active_after"][-1]
        wide = _duets(prob, dr, beta=1e9)
        assert all(m.all() for m in wide["active_masks"])
        assert wide["active_after"] == [150] * len(wide["active_after"])
    assert eliminated > 0


def test_communication_unit_hand_built_epoch():
    # spec test 6: |S_j| = 5, d = 2 gives the paper's C_j = 4 * 5 + 1 = 21; in scalars per receiver each
    # of the N = 3 agents uploads 5 and receives 2 * 5 + 5 + 1 = 16: 15 up, 48 down
    c = R.duets_comm(5, 2, 3)
    assert (c["up"], c["down"], c["paper"], c["code"]) == (15, 48, 21, 15)
    # M = 5 candidates in 2-d; N = 3 agents, T1 = 2: D_1 = ids [0, 1, 2, 3, 4, 0], p = 1 -> |S_1| = 5
    X = np.array([[0.1, 0.2], [0.4, 0.9], [0.8, 0.3], [0.5, 0.5], [0.9, 0.9]])
    f = -((X - 0.5) ** 2).sum(1)
    T, N = 4, 3
    u_query = [((np.array([[0, 1], [2, 3], [4, 0]]) + 0.5) / 5.0), np.full((N, 2), 0.5)]
    eps = np.random.default_rng(0).standard_normal((T, N, 5))
    out = R.duets_np(X, f, eps, u_query, [np.full(N * 2, 0.5)], [0.5], T1=2, p0=1e6, beta=1.0, lam=0.2,
                     lengthscale=0.5, noise_std=0.2)
    assert out["p"] == [1.0]
    np.testing.assert_array_equal(out["S_ids"][0], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(out["comm_paper"], [0, 21, 0, 0])
    np.testing.assert_array_equal(out["comm_up"] + out["comm_down"], [0, 63, 0, 0])
    np.testing.assert_array_equal(out["comm_code"], [0, 18, 0, 0])   # N x 6 kept draws, duplicate included
    # no point kept: the fallback takes D_j[floor(u_empty * N T_j)] = D_j[4] = candidate 4
    D = np.array([0, 1, 2, 3, 4, 0])
    np.testing.assert_array_equal(R.select_inducing(D, np.full(6, 0.9), 0.5, 0.7), [4])
    np.testing.assert_array_equal(R.select_inducing(D, np.array([0.9, 0.1, 0.9, 0.2, 0.9, 0.3]), 0.5, 0.0),
                                  [1, 3, 0])


def test_dis_kernel_ucb_limits():
    prob = _branin_problem(100)
    N, T, M = 3, 20, 100
    dr = R.draws(np.random.default_rng(5), T, N, M, 2)
    args = dict(beta=1.0, lengthscale=prob["lengthscale"], **HP)
    nk = R.n_kernel_ucb_np(prob["X"], prob["f"], dr["eps"], dr["u_first"], **args)
    inf = R.dis_kernel_ucb_np(prob["X"], prob["f"], dr["eps"], dr["u_first"], D=np.inf, **args)
    np.testing.assert_array_equal(inf["actions"], nk["actions"])
    np.testing.assert_array_equal(inf["regret"], nk["regret"])
    assert inf["syncs"].sum() == 0 and inf["comm_paper"].sum() == 0 and nk["comm_paper"].sum() == 0
    np.testing.assert_array_equal(nk["actions"][0], np.floor(dr["u_first"] * M).astype(int))
    zero = R.dis_kernel_ucb_np(prob["X"], prob["f"], dr["eps"], dr["u_first"], D=0.0, **args)
    np.testing.assert_array_equal(zero["syncs"], np.ones(T))
    d = 2
    # every step N new points of d + 1 scalars: each uploaded once and sent to the N - 1 agents that lack it
    np.testing.assert_array_equal(zero["comm_up"], np.full(T, N * (d + 1)))
    np.testing.assert_array_equal(zero["comm_down"], np.full(T, (N - 1) * N * (d + 1)))
    np.testing.assert_array_equal(zero["comm_paper"], np.full(T, (N + 1) * (d + 1)))
    np.testing.assert_array_equal(zero["comm_code"], np.full(T, N * (d + 1)))
    ten = R.dis_kernel_ucb_np(prob["X"], prob["f"], dr["eps"], dr["u_first"], D=10.0, **args)
    steps = np.flatnonzero(ten["syncs"])
    gaps = np.diff(np.concatenate([[-1], steps]))
    np.testing.assert_array_equal(ten["comm_code"][steps], N * gaps * (d + 1))


def test_approx_dis_kernel_ucb_syncs():
    prob = _branin_problem(100)
    N, T, M, d = 3, 25, 100, 2
    dr = R.draws(np.random.default_rng(7), T, N, M, 2)
    args = dict(beta=1.0, lengthscale=prob["lengthscale"], **HP)
    run = lambda **kw: R.approx_dis_kernel_ucb_np(prob["X"], prob["f"], dr["eps"], dr["u_uniform"],
                                                  dr["u_incl"], **args, **kw)
    # no forced sync: each uniform step adds exactly 1 to tr_n, so tr_n = 21 > 20 first at step 20
    free = run(D=20.0, forced_first_sync=None)
    assert np.flatnonzero(free["syncs"])[0] == 20
    np.testing.assert_array_equal(free["actions"][:21], np.floor(dr["u_uniform"][:21] * M).astype(int))
    # forced first sync at step 10: sigma2_last = 1 and q_bar = 4, so every point is kept
    out = run(D=20.0, forced_first_sync=10)
    assert np.flatnonzero(out["syncs"])[0] == 10
    np.testing.assert_array_equal(out["actions"][:11], np.floor(dr["u_uniform"][:11] * M).astype(int))
    per_agent = [len(np.unique(out["actions"][:11, n])) for n in range(N)]
    r = len(np.unique(out["actions"][:11]))
    assert out["comm_up"][10] == d * np.sum(per_agent) + N * (r * r + r)
    assert out["comm_down"][10] == N * (d * r + r * r + r)
    assert out["comm_paper"][10] == pytest.approx(d * np.mean(per_agent) + 2 * (r * r + r) + d * r)
    assert out["comm_code"][10] == r * (r + 1)
    # a tiny threshold syncs at every step, the dictionary is never empty after the first
    every = run(D=1e-12, forced_first_sync=None)
    np.testing.assert_array_equal(every["syncs"], np.ones(T))
    assert np.all(every["comm_code"] >= 2)


def test_test_functions():
    maximisers = np.array([[0.123894, 0.818333], [0.542773, 0.151667], [0.961652, 0.165]])
    np.testing.assert_allclose(R.branin(maximisers), 1.047394, atol=1e-5)
    assert R.hartmann4(np.array([[0.1874, 0.1942, 0.5579, 0.2648]]))[0] == pytest.approx(3.7298, abs=1e-3)
    rng = np.random.default_rng(0)
    p1, p2 = R.make_problem("h1", rng, 200), R.make_problem("h2", rng, 200)
    for p in (p1, p2):
        assert p["X"].shape == (200, 10) and p["lengthscale"] == 1.0
        np.testing.assert_allclose(np.linalg.norm(p["X"], axis=1), 1.0)
        assert np.linalg.norm(p["theta"]) == pytest.approx(1.0)
    assert not np.allclose(p1["theta"], p2["theta"])
    z = p2["X"] @ p2["theta"]
    np.testing.assert_allclose(p2["f"], (z - 1) ** 3 + 4)
    np.testing.assert_allclose(R.h2(p2["theta"][None], p2["theta"]), 4.0)
    np.testing.assert_allclose(R.h1(np.zeros((1, 10)), p1["theta"]), 1.0)
    b, h = R.make_problem("branin", rng, 300), R.make_problem("hartmann4", rng, 300)
    assert b["X"].shape == (300, 2) and b["lengthscale"] == 0.2 and b["f"].max() <= 1.047395
    assert h["X"].shape == (300, 4) and h["X"].min() >= 0 and h["X"].max() < 1 and h["f"].max() <= 3.7299
