"""Phase-level trials: best-arm identification against its NumPy reference, the trial runner's key
scheme and grids, and the textbook guarantee of successive elimination."""
import jax
import numpy as np
import pytest

from bandits_jax import runner
from bandits_jax.algorithms import make_algorithm
from bandits_jax.core import ConfigError
from bandits_jax.problems import make_problem
from bandits_jax.trials import run_trials
from reference import elimination_np

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)


def _reference(arms, trial_name, seed, **options):
    """The NumPy reference on seed `seed`, fed the rewards the JAX trial drew (same keys)."""
    with jax.enable_x64(True):
        problem_key, algorithm_key = runner.problem_and_algorithm_keys(runner.seed_key(seed))
        instance = arms.init(runner.init_keys(problem_key, algorithm_key)[0])

        def draw(counts, r):
            key = algorithm_key if trial_name == "uniform_allocation" else jax.random.fold_in(algorithm_key, r)
            return np.asarray(arms.pull(instance, np.asarray(counts, np.int32), key))

        means = np.asarray(instance["means"])
        return getattr(elimination_np, trial_name)(means, draw=draw, **options)


@pytest.mark.parametrize("agents,arms_,gap", [(1, 4, 0.5), (3, 6, 0.3)])
def test_successive_elimination_matches_numpy(agents, arms_, gap):
    arms = make_problem("gaussian-arms", num_agents=agents, num_arms=arms_, gap=gap)
    trial = make_algorithm("successive_elimination", delta=0.2, sigma=1.0, max_rounds=5000)
    seeds = list(range(6))
    out = run_trials(arms, trial, seeds)
    for i, seed in enumerate(seeds):
        ref = _reference(arms, "successive_elimination", seed, delta=0.2, sigma=1.0, max_rounds=5000)
        got = {k: out.outcomes[k][i].item() for k in ("correct", "samples", "rounds")}
        assert got == {k: ref[k] for k in got}, seed
        assert out.errors[i] == ref["errors"] == 0
    assert out.outcomes["samples"].min() > arms_ * agents  # nobody stops in the first round at these gaps


def test_uniform_allocation_matches_numpy():
    arms = make_problem("gaussian-arms", num_agents=2, num_arms=5, gap=0.1)
    out = run_trials(arms, make_algorithm("uniform_allocation", budget=52), list(range(20)))
    for seed in range(20):
        ref = _reference(arms, "uniform_allocation", seed, budget=52)
        assert bool(out.outcomes["correct"][seed]) == ref["correct"]
        assert out.outcomes["samples"][seed] == ref["samples"] == 2 * 5 * 10
    # at gap 0.1 and 10 pulls an arm some trials fail: the outcome is not a constant
    assert 0 < out.outcomes["correct"].mean() < 1


def test_trials_do_not_depend_on_the_batch_and_a_grid_is_one_call():
    arms = make_problem("gaussian-arms", num_agents=2, num_arms=4, gap=0.4)
    trial = make_algorithm("successive_elimination")
    full = run_trials(arms, trial, [0, 1, 2, 3, 4, 5])
    part = run_trials(arms, trial, [4, 2])
    for k in ("samples", "rounds", "correct"):
        np.testing.assert_array_equal(full.outcomes[k][[4, 2]], part.outcomes[k])
    # a grid over delta: one call with a value per run equals separate calls at each value
    grid = run_trials(arms, trial, [0, 1, 0, 1], {"delta": [0.01, 0.01, 0.5, 0.5]})
    for j, delta in enumerate((0.01, 0.5)):
        alone = run_trials(arms, trial.with_defaults(delta=delta), [0, 1])
        np.testing.assert_array_equal(grid.outcomes["samples"][2 * j:2 * j + 2], alone.outcomes["samples"])
    # a smaller delta asks for more evidence: more pulls on the same rewards
    assert np.all(grid.outcomes["samples"][:2] > grid.outcomes["samples"][2:])


def test_successive_elimination_keeps_its_confidence():
    """P(wrong) <= delta per agent (Even-Dar et al. 2006, Thm. 8): 400 trials at delta = 0.1 on a
    close instance (gap 0.2, sigma 1) err at most 10% + 3 binomial SE, and pulls stay within the
    theorem's order: every arm is dropped once 4 c_r < its gap."""
    arms = make_problem("gaussian-arms", num_agents=1, num_arms=4, gap=0.2)
    out = run_trials(arms, make_algorithm("successive_elimination", delta=0.1), list(range(400)))
    wrong = 1.0 - out.outcomes["correct"].mean()
    assert wrong <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / 400)
    assert not out.errors.any()
    r_max = next(r for r in range(1, 10**6) if 4 * np.sqrt(2 * np.log(4 * 4 * r * r / 0.1) / r) < 0.2)
    assert out.outcomes["rounds"].max() <= r_max
    assert out.outcomes["samples"].max() <= 4 * r_max


def test_max_rounds_sets_the_error_bit_and_bad_options_fail_before_compiling():
    arms = make_problem("gaussian-arms", num_arms=8, gap=0.05)
    out = run_trials(arms, make_algorithm("successive_elimination", max_rounds=3), [0, 1])
    assert out.errors.tolist() == [1, 1] and out.outcomes["rounds"].tolist() == [3, 3]
    with pytest.raises(ConfigError, match="budget 5 is below the 8 arms"):
        run_trials(arms, make_algorithm("uniform_allocation", budget=5), [0])
    with pytest.raises(ConfigError, match=r"delta must be a finite number in \(0, 1\)"):
        make_algorithm("successive_elimination", delta=0.0)
    with pytest.raises(ConfigError, match="unknown hyper-parameter gamma"):
        run_trials(arms, make_algorithm("successive_elimination"), [0], {"gamma": 1.0})
    with pytest.raises(ConfigError, match="num_arms must be at least 2"):
        make_problem("gaussian-arms", num_arms=1)
