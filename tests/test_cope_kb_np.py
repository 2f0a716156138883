"""The plain NumPy CoPE-KB reference against the spec's own facts: exact design values, rounding,
the estimator against the primal ridge, zero-noise elimination thresholds, the predicted FC speedup
V / rank(K_Z), the FB halving that always takes two rounds, and the baselines' budgets."""
import math

import numpy as np
import pytest

from reference import cope_kb_np as cope
from reference import design_np as design

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

V, N_ARMS = 5, 6
CASES = {"rank1": 1, "rank2": 2, "rank5": 5}
XI = 1e-10


def zero_noise(s):
    return np.zeros((V, N_ARMS))


def gaussian_noise(seed):
    return lambda s: np.random.default_rng([seed, s]).standard_normal((V, N_ARMS))


def same_agent_pairs(alive):
    return cope.within_pairs(alive, N_ARMS)


def gaps(means):
    return means.max(axis=1, keepdims=True) - means


# ----------------------------------------------------------------------------- design primitives

@pytest.mark.parametrize("case,rank", CASES.items())
def test_global_design_values_are_twelve_times_rank(case, rank):
    _, K, _ = cope.cope_instance(case, 0.4)
    everywhere = np.ones(V * N_ARMS, bool)
    lam, rho = design.fw_design(K, XI, same_agent_pairs(everywhere), everywhere)
    # Frank-Wolfe after 2000 iterations: an upper bound within 2.5e-3 relative (spec 2.2)
    assert 12 * rank * (1 - 1e-6) <= rho <= 12 * rank * (1 + 2.6e-3)
    assert lam.sum() == pytest.approx(1.0) and lam.min() >= 0.0
    # mirror descent for omega over ALL pairs, cross-agent ones included: 1e-4 relative
    value = design.omega(K, XI, range(V * N_ARMS))
    assert value == pytest.approx(12 * rank, rel=1e-4)
    assert math.ceil(math.log2(value)) == {1: 4, 2: 5, 5: 6}[rank]


@pytest.mark.parametrize("subset,exact", [((4, 5), 4.0), ((3, 4, 5), 6.0), ((2, 3, 4, 5), 8.0),
                                          ((1, 2, 3, 4, 5), 28 / 3), ((0, 1, 2, 3, 4, 5), 12.0)])
def test_omega_of_sorted_prefixes(subset, exact):
    _, K, _ = cope.cope_instance("rank2", 0.02)
    for agent in (0, 3):  # one agent of each group; lam ranges over all 30 pairs
        value = design.omega(K, XI, [agent * N_ARMS + a for a in subset])
        assert value == pytest.approx(exact, rel=1e-4)
    local = K[:N_ARMS, :N_ARMS]
    assert design.omega(local, XI, subset) == pytest.approx(exact, rel=1e-4)


def test_single_agent_design_is_uniform_with_value_twelve():
    _, K, _ = cope.cope_instance("rank1", 0.4)
    local = K[:N_ARMS, :N_ARMS]
    lam, rho = design.fw_design(local, XI, design.all_pairs(range(N_ARMS)), np.ones(N_ARMS, bool))
    assert rho == pytest.approx(12.0, rel=1e-6)
    np.testing.assert_allclose(lam, np.full(N_ARMS, 1 / 6), atol=1e-9)
    assert design.design_dimension(local, lam, XI) == 4


def test_design_norms_match_primal():
    features, K, _ = cope.cope_instance("rank2", 0.3)
    phi = features.reshape(V * N_ARMS, -1)
    lam = np.random.default_rng(3).dirichlet(np.ones(V * N_ARMS))
    xi = 1e-6
    G = design.design_gram(K, lam, xi)
    A = xi * np.eye(phi.shape[1]) + phi.T @ (lam[:, None] * phi)
    pairs = design.all_pairs(range(V * N_ARMS))
    y = phi[pairs[:, 0]] - phi[pairs[:, 1]]
    primal = np.einsum("pd,de,pe->p", y, np.linalg.inv(A), y)
    np.testing.assert_allclose(design.pair_norms(G, pairs), primal, rtol=1e-8)


def test_rounding_sums_to_n_and_follows_the_weights():
    assert design.pukelsheim_round(np.full(3, 1 / 3), 10).tolist() == [4, 3, 3]
    assert design.pukelsheim_round(np.array([0.5, 0.3, 0.2, 0.0, 5e-6]), 10).tolist() == [5, 3, 2, 0, 0]
    rng = np.random.default_rng(0)
    for _ in range(200):
        lam = rng.dirichlet(np.full(30, 0.3))
        total = int(rng.integers(30, 200_000))
        counts = design.pukelsheim_round(lam, total)
        sup = lam > 1e-5
        w = lam[sup] / lam[sup].sum()
        assert counts.sum() == total
        assert np.all(counts[~sup] == 0)
        assert np.max(np.abs(counts[sup] - total * w)) <= sup.sum()


@pytest.mark.parametrize("xi,tol", [(1e-10, 1e-6), (1e-6, 1e-8)])
def test_kernel_estimate_matches_primal_ridge(xi, tol):
    features, K, means = cope.cope_instance("rank2", 0.3)
    phi = features.reshape(V * N_ARMS, -1)
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 5000, V * N_ARMS)
    counts[[3, 7, 20]] = 0
    ybar = np.where(counts > 0, means.ravel() + rng.standard_normal(V * N_ARMS) / np.sqrt(np.maximum(counts, 1)), 0.0)
    total = counts.sum()
    theta = np.linalg.solve(total * xi * np.eye(phi.shape[1]) + phi.T @ (counts[:, None] * phi),
                            phi.T @ (counts * ybar))
    fhat = design.kernel_estimate(K, counts, ybar, xi)
    np.testing.assert_allclose(fhat, phi @ theta, atol=tol)
    # a nonzero ybar on an unsampled pair changes nothing
    ybar[3] = 7.0
    np.testing.assert_allclose(design.kernel_estimate(K, counts, ybar, xi), fhat, atol=1e-12)


# ----------------------------------------------------------------------------- fixed confidence

@pytest.fixture(scope="module")
def zero_noise_fc():
    """CoKernelFC, CoKernel-IndAlloc and IndRAGE (matched) at zero noise, Delta = 0.4, per case."""
    out = {}
    for case in CASES:
        _, K, means = cope.cope_instance(case, 0.4)
        out[case] = {name: getattr(cope, name)(K, means, zero_noise)
                     for name in ("cokernel_fc", "cokernel_ind_alloc", "ind_rage")}
    return out


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("gap,rounds", [(0.8, 1), (0.4, 2), (0.3, 2), (0.2, 3)])
def test_zero_noise_fc_drops_exactly_the_gaps_above_threshold(case, gap, rounds):
    _, K, means = cope.cope_instance(case, gap)
    out = cope.cokernel_fc(K, means, zero_noise)
    assert out["rounds"] == rounds
    assert out["answer"].tolist() == [5] * V
    g = gaps(means).ravel()
    log = out["rounds_log"]
    for r, entry in enumerate(log, start=1):
        after = log[r]["alive"] if r < len(log) else np.isin(np.arange(V * N_ARMS) % N_ARMS, [5])
        assert np.array_equal(after, entry["alive"] & (g < 2.0**-r)), r
        assert entry["counts"].sum() == entry["N"]


def test_zero_noise_fc_sample_sizes(zero_noise_fc):
    """N_r from the size formula by hand: 32 4^r 1.21 rho_r log(2 n^2 V / delta_r) with rho = 12, 4."""
    log = zero_noise_fc["rank1"]["cokernel_fc"]["rounds_log"]
    assert [entry["rho"] for entry in log] == pytest.approx([12.0, 4.0], rel=1e-5)
    for r, entry in enumerate(log, start=1):
        by_hand = 32 * 4**r * 1.21 * entry["rho"] * math.log(2 * 36 * 5 / (0.005 / (2 * r * r)))
        assert entry["N"] == math.ceil(by_hand)
    assert zero_noise_fc["rank1"]["cokernel_fc"]["samples"] == (22076 + 32869) / V


@pytest.mark.parametrize("case,rank", CASES.items())
def test_fc_speedup_is_v_over_rank(zero_noise_fc, case, rank):
    runs = zero_noise_fc[case]
    co, ind = runs["cokernel_fc"]["samples"], runs["ind_rage"]["samples"]
    print(f"{case}: CoKernelFC {co:.1f}, IndRAGE {ind:.1f}, ratio {ind / co:.4f} (predicted {V / rank})")
    # rho is V / rank times larger globally than locally; FW leaves <= 2.5e-3 relative error on rho
    assert ind / co == pytest.approx(V / rank, rel=5e-3)
    assert runs["ind_rage"]["rounds"] == runs["cokernel_fc"]["rounds"] == 2
    # with these fixed 2^-r thresholds, local allocation on shared data costs exactly IndRAGE's samples
    assert runs["cokernel_ind_alloc"]["samples"] == ind
    for run in runs.values():
        assert run["answer"].tolist() == [5] * V


def test_rage_code_phase_sizes_at_zero_noise():
    features, _, means = cope.cope_instance("rank5", 0.4)
    out = cope.ind_rage_code(features, means, zero_noise, var=False)
    # 8 (2^(k-1))^2 1.1 rho_k log(2 n^2 / (delta / V / k^2)), rho = 12 then 4
    by_hand = [8 * 4 ** (k - 1) * 1.1 * rho * math.log(72 / (0.001 / k**2)) for k, rho in ((1, 12), (2, 4))]
    assert by_hand == pytest.approx([1181.07, 1769.96], abs=0.01)
    assert out["samples"] == 1182 + 1770
    assert out["rounds"] == 2 and out["answer"].tolist() == [5] * V


def test_alba_first_step_size_and_zero_noise_answer():
    features, _, means = cope.cope_instance("rank1", 0.4)
    asked = []

    def draw_counts(s, total, probs):
        asked.append(total.copy())
        assert np.allclose(probs.sum(axis=1), 1.0)
        return np.array([pukelsheim_or_zero(t, p) for t, p in zip(total, probs)])

    out = cope.ind_alba(features, means, zero_noise, draw_counts)
    # L^2 = 2.76, c0 = 11.04, l_1 = 135.41, delta_1 = 36 (delta / V) / pi^4
    assert asked[0].tolist() == [1680] * V
    assert out["answer"].tolist() == [5] * V
    assert out["samples"] == sum(asked_step[0] for asked_step in asked)
    poly = cope.ind_poly_alba(features, means, zero_noise, draw_counts)
    assert poly["answer"].tolist() == [5] * V


def pukelsheim_or_zero(total, probs):
    return design.pukelsheim_round(probs, int(total)) if total > 0 else np.zeros(len(probs), np.int64)


# ----------------------------------------------------------------------------- fixed budget

@pytest.mark.parametrize("case,R", [("rank1", 4), ("rank2", 5), ("rank5", 6)])
def test_fb_halving_takes_two_rounds(case, R):
    _, K, means = cope.cope_instance(case, 0.02)
    budget = 7000
    for noise in (zero_noise, gaussian_noise(11)):
        out = cope.cokernel_fb(K, means, noise, budget)
        assert out["R"] == R and out["rounds"] == 2
        assert out["budget_used"] == 2 * ((budget * V) // R) / (budget * V)
        assert out["budget_used"] == pytest.approx(2 / R, abs=1e-3)
        sizes = [entry["alive"].reshape(V, N_ARMS).sum(axis=1) for entry in out["rounds_log"]]
        assert sizes[0].tolist() == [6] * V and set(sizes[1].tolist()) <= {2, 3}
    assert out["answer"].shape == (V,)
    alloc = cope.cokernel_fb_ind_alloc(K, means, zero_noise, budget)
    assert alloc["R"] == R and alloc["rounds"] == 2
    assert alloc["samples"] == 2 * (budget // R)
    assert alloc["answer"].tolist() == [5] * V


def test_fb_top3_tie_is_kept():
    """omega(top-3) = 6 = omega(all)/2 exactly: the tolerance keeps three arms (spec 4)."""
    _, K, means = cope.cope_instance("rank1", 0.02)
    out = cope.cokernel_fb(K, means, zero_noise, 7000)
    second = out["rounds_log"][1]["alive"].reshape(V, N_ARMS)
    assert second.sum(axis=1).tolist() == [3] * V
    assert np.all(second[:, [4, 5]]) and out["answer"].tolist() == [5] * V


def test_ind_uniform_fb_counts_and_estimators():
    _, K, means = cope.cope_instance("rank2", 0.05)
    noise = gaussian_noise(5)
    ridge = cope.ind_uniform_fb(K, means, noise, 7000)
    by_means = cope.ind_uniform_fb(K, means, noise, 7000, estimator="means")
    assert ridge["counts"][0].tolist() == [1167, 1167, 1167, 1167, 1166, 1166]
    assert ridge["counts"].sum() == 7000 * V and ridge["budget_used"] == 1.0
    counts = ridge["counts"]
    ybar = means + noise(1) / np.sqrt(counts)
    assert by_means["answer"].tolist() == np.argmax(ybar, axis=1).tolist()
    # ridge on own data: least squares on the agent's 4 coordinates (xi T is negligible)
    X = cope.B4
    expect = [int(np.argmax(X @ np.linalg.solve(X.T @ (counts[v][:, None] * X), X.T @ (counts[v] * ybar[v]))))
              for v in range(V)]
    assert ridge["answer"].tolist() == expect


def test_ind_peace_fb_rounds():
    _, K, means = cope.cope_instance("rank5", 0.02)
    budget = 7000
    gamma = cope.ind_peace_fb_gamma(K, means, zero_noise, budget)
    omega = cope.ind_peace_fb_omega(K, means, zero_noise, budget)
    assert [agent["R"] for agent in gamma["agents"]] == [5] * V
    assert [agent["R"] for agent in omega["agents"]] == [4] * V
    # gamma keeps 3, then 2, then 1 arm; omega keeps 3 then 1 (spec 5.6)
    assert gamma["rounds"] == 3 and gamma["samples"] == 3 * (budget // 5)
    assert omega["rounds"] == 2 and omega["samples"] == 2 * (budget // 4)
    assert gamma["answer"].tolist() == omega["answer"].tolist() == [5] * V
    draws = np.random.default_rng(0).standard_normal((10_000, N_ARMS))
    local = K[:N_ARMS, :N_ARMS]
    assert cope.cached_gamma(local, XI, range(6), draws, hash(draws.tobytes()))[0] == pytest.approx(21.0, rel=0.02)
    assert cope.cached_gamma(local, XI, (4, 5), draws, hash(draws.tobytes()))[0] == pytest.approx(8 / math.pi, rel=0.02)
