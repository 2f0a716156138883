"""CoPE-KB trials: each against the NumPy loops of reference/cope_kb_np.py on the same random
numbers, zero-noise elimination facts, the FB halving and its tie, the world's cached tables against
direct solves, and float64 enforcement.

Same random numbers: the NumPy loop gets noise(s) = normal(fold_in(key, s), (V, n)) and, for the
ALBA types, draw_counts = cope_kb_alba.alba_draw with the trial's key. The two sides solve their
designs with different code (Frank-Wolfe in JAX and in NumPy), whose values agree to ~1e-12
relative; N^(r) = ceil(...) of such a value, so a sample count may differ by one where the ceiling
argument sits within that noise of an integer: sample counts are compared to 1e-4 relative.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import runner
from bandits_jax.algorithms.cope import cope_kb
from bandits_jax.algorithms.cope import cope_kb_alba
from bandits_jax.algorithms import make_algorithm
from bandits_jax.core import ConfigError
from bandits_jax.kernels import design
from bandits_jax.problems import cope, make_problem
from bandits_jax.trials import run_trials
from reference import cope_kb_np as ref

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

SEEDS = (0, 1)
CASE = "rank2"
V, N_ARMS = 5, 6


@pytest.fixture(scope="module")
def world():
    """(arms, public as float64 arrays) of the rank-2 world (its tables do not depend on Delta)."""
    arms = make_problem("cope-kb", case=CASE, gap=0.4)
    with jax.enable_x64(True):
        public = arms.public(arms.init(jax.random.PRNGKey(0)))
    return arms, public


def algorithm_key(seed):
    return runner.problem_and_algorithm_keys(runner.seed_key(seed))[1]


@functools.lru_cache(maxsize=None)
def compiled(name, arms_id):
    """jit(vmap) of the trial's raw outputs (answer included) over keys, means and noise scale given,
    so one compilation serves every Delta and the zero-noise runs (the world's one public number that
    depends on Delta, ALBA's oracle norm, is passed in too)."""
    trial = make_algorithm(name)
    arms, public = _WORLD[arms_id]

    def one(key, params, means, scale, theta_norm):
        def pull(counts, k):
            c = counts.astype(means.dtype)
            return c * means + scale * jnp.sqrt(c) * jax.random.normal(k, means.shape, means.dtype)

        return trial.run(key, params, arms, {**public, "theta_norm": theta_norm}, pull)

    return trial, jax.jit(jax.vmap(one, in_axes=(0, 0, None, None, None)))


_WORLD = {}


def raw(world, name, gap, seeds=SEEDS, scale=1.0, **params):
    """{output: [len(seeds)]} of trial `name` on the world with Delta = gap."""
    _WORLD[id(world[0])] = world
    trial, f = compiled(name, id(world[0]))
    values = {k: np.full(len(seeds), params.get(k, v)) for k, v in trial.defaults.items()}
    with jax.enable_x64(True):
        keys = jnp.stack([algorithm_key(s) for s in seeds])
        features, _, means = ref.cope_instance(CASE, gap)
        norms = cope.agent_theta_norms(features, cope.world_features(CASE, gap)[1])
        out = f(keys, {k: jnp.asarray(v) for k, v in values.items()}, jnp.asarray(means), scale, jnp.asarray(norms))
    return {k: np.asarray(v) for k, v in out.items()}


def noise_of(seed, scale=1.0):
    key = algorithm_key(seed)

    def noise(s):
        with jax.enable_x64(True):
            return scale * np.asarray(jax.random.normal(jax.random.fold_in(key, s), (V, N_ARMS), jnp.float64))

    return noise


def draws_of(seed):
    key = algorithm_key(seed)

    def draw_counts(s, totals, probs):
        with jax.enable_x64(True):
            return np.asarray(cope_kb_alba.alba_draw(key, s, jnp.asarray(totals), jnp.asarray(probs, jnp.float64)))

    return draw_counts


def assert_same(got, want, i, tol=1e-4):
    np.testing.assert_array_equal(got["answer"][i], want["answer"])
    assert int(got["rounds"][i]) == int(want["rounds"])
    np.testing.assert_allclose(got["samples"][i], want["samples"], rtol=tol)
    assert got["errors"][i] == 0


FC_REFERENCE = {"cokernel_fc": ("gram", ref.cokernel_fc), "cokernel_ind_alloc": ("gram", ref.cokernel_ind_alloc),
                "ind_rage": ("gram", ref.ind_rage), "ind_rage_code": ("features", ref.ind_rage_code),
                "ind_rage_code_threshold": ("features", functools.partial(ref.ind_rage_code, var=False))}


@pytest.mark.parametrize("name", list(FC_REFERENCE))
def test_fc_trials_match_numpy(world, name):
    gap = 0.3
    features, gram, means = ref.cope_instance(CASE, gap)
    got = raw(world, name, gap)
    first, loop = FC_REFERENCE[name]
    for i, seed in enumerate(SEEDS):
        want = loop(gram if first == "gram" else features, means, noise_of(seed))
        assert_same(got, want, i)
    if name in ("cokernel_fc", "cokernel_ind_alloc"):  # communication: 2n scalars per agent and round
        np.testing.assert_array_equal(got["scalars"], 2 * N_ARMS * V * got["rounds"])
    else:
        assert not got["scalars"].any()


FB_REFERENCE = {
    "cokernel_fb": ref.cokernel_fb, "cokernel_fb_ind_alloc": ref.cokernel_fb_ind_alloc,
    "ind_peace_fb_omega": ref.ind_peace_fb_omega, "ind_uniform_fb": ref.ind_uniform_fb,
    "ind_uniform_fb_means": functools.partial(ref.ind_uniform_fb, estimator="means"),
}


@pytest.mark.parametrize("name", list(FB_REFERENCE))
def test_fb_trials_match_numpy(world, name):
    gap, budget = 0.05, 7000
    _, gram, means = ref.cope_instance(CASE, gap)
    got = raw(world, name, gap, budget=budget)
    for i, seed in enumerate(SEEDS):
        want = FB_REFERENCE[name](gram, means, noise_of(seed), budget)
        assert_same(got, want, i)
        np.testing.assert_allclose(got["budget_used"][i], want["budget_used"], rtol=1e-12)


def test_peace_gamma_matches_numpy_on_the_same_draws(world):
    """IndPeaceFB against the NumPy loop fed the world's Monte Carlo draws: the halving decisions
    (gamma of prefixes against half the set's) agree, so answers, rounds and budgets do."""
    gap, budget = 0.05, 7000
    _, gram, means = ref.cope_instance(CASE, gap)
    with jax.enable_x64(True):
        zeta = np.asarray(jax.random.normal(jax.random.PRNGKey(20230501), (cope.GAMMA_DRAWS, N_ARMS), jnp.float64))
    got = raw(world, "ind_peace_fb", gap, budget=budget)
    for i, seed in enumerate(SEEDS):
        want = ref.ind_peace_fb_gamma(gram, means, noise_of(seed), budget, draws=zeta)
        assert_same(got, want, i)


@pytest.mark.parametrize("name", ["ind_alba", "ind_poly_alba"])
def test_alba_trials_match_numpy(world, name):
    gap = 0.8
    features, _, means = ref.cope_instance(CASE, gap)
    got = raw(world, name, gap, seeds=(0,))
    want = getattr(ref, name)(features, means, noise_of(0), draws_of(0))
    assert_same(got, want, 0, tol=1e-12)  # n_s depends on the step only, never on the design


def test_zero_noise_fc_eliminates_exactly_the_gaps_above_the_threshold(world):
    """At zero noise an arm with gap g leaves in the first round r with 2^-r <= g (Deltas chosen off
    the thresholds): Delta = 0.3 needs 2 rounds, 0.2 needs 3; every answer is right, and the
    per-agent samples are those of the NumPy loop."""
    for gap, rounds in ((0.3, 2), (0.2, 3)):
        out = raw(world, "cokernel_fc", gap, seeds=(0,), scale=0.0)
        _, gram, means = ref.cope_instance(CASE, gap)
        want = ref.cokernel_fc(gram, means, lambda s: np.zeros((V, N_ARMS)))
        assert int(out["rounds"][0]) == rounds == want["rounds"]
        np.testing.assert_array_equal(out["answer"][0], np.full(V, 5))
        np.testing.assert_allclose(out["samples"][0], want["samples"], rtol=1e-4)
        np.testing.assert_allclose(want["rounds_log"][0]["rho"], 24.0, rtol=3e-3)  # rho_1 = 12 rank K_Z, FW 24.06


def test_fb_halving_keeps_the_top3_tie(world):
    """omega(top-3) = 6 = omega(6 arms) / 2 exactly: the halving keeps three arms (the tolerance
    favours keeping), without the tolerance it keeps two; at zero noise CoKernelFB needs 2 of its
    R = 5 rounds and spends 2/5 of the budget."""
    _, public = world
    table = np.asarray(public["omega_table"][0])
    with jax.enable_x64(True):
        fhat = jnp.arange(N_ARMS, dtype=jnp.float64)  # sorted like the true means: best arm last
        kept = cope_kb.halve(jnp.asarray(table), jnp.ones(N_ARMS, bool), fhat)
        strict = cope_kb.halve(jnp.asarray(np.where(np.arange(64) == 0b111000, 6.0 + 1e-2, table)),
                               jnp.ones(N_ARMS, bool), fhat)
    np.testing.assert_array_equal(np.asarray(kept), [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(strict), [0, 0, 0, 0, 1, 1])
    out = raw(world, "cokernel_fb", 0.05, seeds=(0,), scale=0.0, budget=7000)
    assert int(out["rounds"][0]) == 2 and np.all(out["answer"][0] == 5)
    assert out["budget_used"][0] == pytest.approx(2 * (7000 * V // 5) / (7000 * V))


def test_cached_tables_equal_direct_solves(world):
    """The world's tables (solved on a reduced pool) against design.omega on all 30 points, and the
    Gaussian width against its closed form for two arms, (2/pi) ||x - y||^2_{A^-1} = (2/pi) 4."""
    _, public = world
    K = jnp.asarray(public["gram"])
    with jax.enable_x64(True):
        for v, mask in ((0, 0b111000), (2, 0b111100), (4, 0b111111), (3, 0b100001)):
            members = np.zeros(V * N_ARMS, bool)
            members[v * N_ARMS:(v + 1) * N_ARMS] = (mask >> np.arange(N_ARMS)) & 1
            direct = float(design.omega(K, 1e-10, jnp.asarray(members)))
            assert public["omega_table"][v, mask] == pytest.approx(direct, rel=1e-6)
    assert public["omega_all"] == pytest.approx(24.0, rel=1e-6)
    assert public["omega_local"][0, 63] == pytest.approx(12.0, rel=1e-6)
    assert public["gamma_table"][1, 0b110000] == pytest.approx(8 / np.pi, rel=0.03)
    assert public["gamma_table"][1, 63] == pytest.approx(21.0, rel=0.02)  # spec §5.6 calibration


def test_world_info_holds_the_theory_numbers(world):
    info = world[0].info
    assert (info["rho_1"], info["omega_all"], info["R"], info["rank_K_Z"]) == (24.0, 24.0, 5, 2)
    assert info["predicted_fc_speedup"] == 2.5 and info["R_peace"] == 5
    # rho*(xi) with 1/gap^2 weights lies between rho_1 / (4 Delta)^2 and rho_1 / Delta^2
    assert 24 / 1.6 ** 2 < info["rho_star"] < 24 / 0.4 ** 2


@pytest.fixture
def quick_world(monkeypatch):
    """make_problem("cope-kb", ...) that rebuilds its tables on every call from a small Gaussian-width
    sample (cached for this test only), without the theory numbers: the test reads how the tables depend
    on xi, not their accuracy, and nothing computed this way lands in the module's caches."""
    monkeypatch.setattr(cope, "GAMMA_DRAWS", 256)
    monkeypatch.setattr(cope, "GAMMA_STEPS", 4)
    monkeypatch.setattr(cope, "gamma_table", functools.lru_cache(maxsize=None)(cope.gamma_table.__wrapped__))
    monkeypatch.setattr(cope, "structure", cope.structure.__wrapped__)
    monkeypatch.setattr(cope, "theory", lambda case, gap, xi: {})

    def build(xi):
        arms = make_problem("cope-kb", case="rank1", gap=0.4, xi=xi)
        with jax.enable_x64(True):
            return {k: np.asarray(v) for k, v in arms.public(arms.init(jax.random.PRNGKey(0))).items()}

    return build


def test_world_tables_follow_the_worlds_xi(quick_world):
    """The omega and Gaussian-width halving tables are solved at the world's xi: two values of xi give
    two tables (omega(xi, S) grows as xi shrinks), while the features and the Gram matrix stay put."""
    small, large = quick_world(1e-2), quick_world(1.0)
    for key in ("gram", "features", "agent_of"):
        np.testing.assert_array_equal(small[key], large[key], err_msg=key)
    full = 2 ** N_ARMS - 1
    assert small["omega_all"] > large["omega_all"] * 1.5
    for key in ("omega_table", "omega_local", "gamma_table"):
        assert small[key][0, full] > large[key][0, full] * 1.5, key
        np.testing.assert_array_equal(small[key][:, :3], large[key][:, :3])  # subsets of < 2 arms: 0 in both


@pytest.mark.parametrize("name", ["cope/fc-rank2", "cope/fb-rank5"])
def test_experiment_passes_its_xi_to_the_world_and_to_every_algorithm(name):
    """One configuration value drives both the world's tables (problem option xi) and the algorithms'
    regulariser: the default 1e-10 and an override alike."""
    from bandits_jax.experiments.catalog import get_experiment
    from bandits_jax.experiments.registry import build_curves, resolve_config

    exp = get_experiment(name)
    for overrides, xi in (({}, 1e-10), ({"xi": "1e-6"}, 1e-6)):
        curves = build_curves(exp, resolve_config(exp, "smoke", overrides))
        assert curves and all(c.problem.options["xi"] == xi == c.algorithm.options["xi"] for c in curves)


def test_float32_is_refused_before_compiling():
    arms = make_problem("cope-kb", case="rank1", gap=0.4)
    with pytest.raises(ConfigError, match="float64"):
        run_trials(arms, make_algorithm("ind_uniform_fb"), [0], precision="float32")


def test_budget_grid_is_one_call(world):
    arms, _ = world
    trial = make_algorithm("ind_uniform_fb")
    grid = run_trials(arms, trial, [0, 1, 0, 1], {"budget": [7000, 7000, 20000, 20000]})
    alone = run_trials(arms, trial.with_defaults(budget=20000), [0, 1])
    np.testing.assert_array_equal(grid.outcomes["samples"][2:], alone.outcomes["samples"])
    np.testing.assert_array_equal(grid.outcomes["samples"], [7000, 7000, 20000, 20000])


@pytest.mark.slow
@pytest.mark.headline
def test_paper_size_rank1_speedup_is_v():
    """Rank 1, Delta = 0.1: CoKernelFC's per-agent samples equal IndRAGE's / V (spec §6.2(a))."""
    arms = make_problem("cope-kb", case="rank1", gap=0.1)
    co = run_trials(arms, make_algorithm("cokernel_fc"), list(range(10)))
    ind = run_trials(arms, make_algorithm("ind_rage"), list(range(10)))
    assert co.outcomes["correct"].all() and ind.outcomes["correct"].all()
    ratio = ind.outcomes["samples"].mean() / co.outcomes["samples"].mean()
    assert ratio == pytest.approx(5.0, rel=0.05)
