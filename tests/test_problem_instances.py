"""Where a problem's instance (hidden vector, candidate set, data order) comes from: a fixed draw, the
same for every seed, or the run's instance key, so that tuning seeds and reported seeds see different
instances. Instances are read as the runner draws them (`runner.run_start`, base key 0)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import runner
from bandits_jax.algorithms.single.uniform import uniform_random
from bandits_jax.core import ConfigError, Sizes
from bandits_jax.curves import parse_spec
from bandits_jax.problems import DataNotFoundError, build_problem, make_problem
from bandits_jax.problems.candidates import FUNCTIONS, candidate_set
from bandits_jax.problems.datasets import CACHE_ENV, DATA_DIR_ENV
from bandits_jax.problems.synthetic import FNUCB_FIXED_A
from helpers import REAL_DIR, needs_data

TUNING_SEED = 1_000_000  # the arena's first tuning seed (arena.TUNING_FIRST_SEED); reported seeds start at 0
# today's fixed DUETS sets at M = 200 (seed 0): X[0, :2], f[:3] and the best candidate's index
FIXED = {
    "h1": ([0.05329269, -0.05599468], [0.95906274, 0.23123856, 0.94058644], 136),
    "h2": ([0.02427081, -0.23112286], [1.73352853, 2.9359366, 3.71550328], 170),
    "branin": ([0.08082404, 0.40243779], [-0.17452068, 0.97609223, -0.09014565], 145),
    "hartmann4": ([0.89497274, 0.86041444], [0.16337378, 1.73378168, 1.48744797], 86),
}


def instance(problem, seed: int):
    """The instance the runner draws for `seed` (the problem key is the same for every algorithm stream)."""
    return runner.run_start(problem, uniform_random(), 0, Sizes())(jnp.uint32(seed), {})[2]


def same(a, b) -> bool:
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def duets(name: str, **options):
    return make_problem(f"duets-{name}", num_agents=4, horizon=200, num_candidates=200, **options)


# ----------------------------------------------------------------------------------- DUETS candidate sets
@pytest.mark.parametrize("name", sorted(FIXED))
def test_duets_default_is_todays_fixed_set_for_every_seed(name):
    problem = duets(name)
    got = [instance(problem, s) for s in (0, 1, TUNING_SEED)]
    X, f = candidate_set(name, 200)
    for inst in got:
        assert same(inst["X"], X.astype(np.float32)) and same(inst["f"], f.astype(np.float32))
    first, values, best = FIXED[name]
    np.testing.assert_allclose(got[0]["X"][0, :2], first, rtol=1e-6)
    np.testing.assert_allclose(got[0]["f"][:3], values, rtol=1e-6)
    assert int(problem.public(got[0])["best"]) == best
    assert "max_value" in problem.info and "(seed 0)" in problem.description


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_duets_per_seed_draws_its_own_set_for_each_seed(name):
    problem = duets(name, instance="per_seed")
    a, again, b, tuning = (instance(problem, s) for s in (0, 0, 1, TUNING_SEED))
    assert same(a["X"], again["X"]) and same(a["f"], again["f"])
    assert not same(a["X"], b["X"]) and not same(a["X"], tuning["X"]) and not same(a["f"], b["f"])
    dim, domain = FUNCTIONS[name][:2]
    X = np.asarray(a["X"], np.float64)
    assert X.shape == (200, dim) and a["f"].shape == (200,)
    if domain == "sphere":
        np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-6)
    else:  # a function of X alone: the drawn values are the host function's
        assert X.min() >= 0.0 and X.max() <= 1.0
        np.testing.assert_allclose(a["f"], FUNCTIONS[name][2](X, None), rtol=1e-5, atol=1e-6)
    assert int(problem.public(a)["best"]) == int(np.argmax(a["f"]))
    assert problem.info["instance"] == "per_seed" and "drawn per run" in problem.description


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_each_function_gives_the_same_numbers_in_numpy_and_jax(name):
    dim, _, fn, _ = FUNCTIONS[name]
    rng = np.random.default_rng(5)
    X, theta = rng.uniform(size=(30, dim)), rng.standard_normal(dim)
    with jax.enable_x64(True):
        got = np.asarray(fn(jnp.asarray(X), jnp.asarray(theta), jnp))
    np.testing.assert_allclose(got, fn(X, theta), rtol=1e-12, atol=1e-12)


def test_a_per_seed_spec_runs_with_the_candidates_as_contexts():
    spec = "duets-h1:num_agents=4,horizon=200,num_candidates=200,instance=per_seed+candidates_as_contexts"
    problem = build_problem(parse_spec(spec))
    a, b = instance(problem, 0), instance(problem, TUNING_SEED)
    ctx = problem.contexts(a, 0, None)
    assert ctx.shape == (4, 200, 10) and same(ctx[3], a["X"])
    assert not same(problem.contexts(b, 0, None), ctx)


def test_duets_refuses_an_unknown_instance_and_a_seed_it_would_ignore():
    with pytest.raises(ConfigError, match="instance"):
        duets("h1", instance="random")
    with pytest.raises(ConfigError, match="seed=2"):
        duets("h1", instance="per_seed", seed=2)


# ----------------------------------------------------------------------------------- the other benchmark problems
def test_cosine_keeps_the_stored_vector_and_draws_one_per_seed_with_a_random():
    fixed = make_problem("cosine", num_agents=4, horizon=200)
    for seed in (0, 1, TUNING_SEED):
        np.testing.assert_allclose(instance(fixed, seed)["a"], FNUCB_FIXED_A, rtol=1e-6)
    drawn = make_problem("cosine", num_agents=4, horizon=200, a="random")
    a, again, b = (instance(drawn, s)["a"] for s in (0, 0, TUNING_SEED))
    assert same(a, again) and not same(a, b)
    np.testing.assert_allclose(np.linalg.norm(a), 1.0, rtol=1e-6)


def test_async_f1_draws_theta_per_seed():
    problem = make_problem("async-f1", num_agents=4, horizon=200, num_arms=10, dim=10)
    a, again, b = (instance(problem, s)["theta"] for s in (0, 0, TUNING_SEED))
    assert same(a, again) and not same(a, b) and float(jnp.linalg.norm(a)) <= 1.0


def test_coop_rbf_keeps_its_graph_and_draws_the_function_per_seed():
    problem = make_problem("coop-rbf", num_agents=8, horizon=200)
    a, b = instance(problem, 0), instance(problem, TUNING_SEED)
    assert same(problem.public(a)["dist"], problem.public(b)["dist"]) and same(a["cluster"], b["cluster"])
    assert not same(a["z"], b["z"]) and not same(a["alpha"], b["alpha"])


@needs_data("magic.dat")
def test_magic_reads_each_seed_its_own_row_order_unless_shuffle_authors():
    per_seed = make_problem("magic", num_agents=4, horizon=200, data_dir=str(REAL_DIR), download=False)
    a, again, b = (instance(per_seed, s)["perm"] for s in (0, 0, TUNING_SEED))
    assert a.shape == (4, 19020) and same(a, again) and not same(a, b)
    authors = make_problem("magic", num_agents=4, horizon=200, data_dir=str(REAL_DIR), download=False,
                           shuffle="authors")
    first, tuning = (instance(authors, s)["perm"] for s in (0, TUNING_SEED))
    assert same(first, tuning)
    assert first[0, :3].tolist() == [18152, 2571, 12202] and first[3, :3].tolist() == [7204, 18125, 1102]


def test_missing_data_is_a_data_not_found_error(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(DataNotFoundError, match="magic data not found"):
        build_problem(parse_spec("magic:num_agents=4,horizon=200,download=false"))
    assert issubclass(DataNotFoundError, ConfigError)  # catch it before any ConfigError
