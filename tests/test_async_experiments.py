"""The async/* experiments: every one resolves and builds at both sizes (nothing compiles), and the
synthetic-f1 smoke size runs end to end through the sweep with the seven algorithms and the random
policy.

The UCI experiments need the offline copies of magic.dat / mushroom.dat and are skipped without them;
the paper-size builds of the data and stand-in experiments (k-means, rating SVDs) run with `-m slow`.
"""

import math

import numpy as np
import pytest

from bandits_jax import sweep
from bandits_jax.core import ConfigError
from bandits_jax.experiments import async_exps
from bandits_jax.experiments.registry import build_runs, resolve_config
from bandits_jax.experiments.catalog import experiments, get_experiment
from bandits_jax.reporting.results import load_results
from helpers import REAL_DIR, needs_data

ALGS = ["Async-KernelUCB", "Approx-DisKernelUCB", "OneKernelUCB", "NKernelUCB", "FedGLB-UCB", "DisLinUCB",
        "FedLinUCB", "Random"]
SYNTHETIC = ["async/synthetic-f1", "async/synthetic-f2", "async/movielens-standin", "async/yelp-standin"]
DATA = {"async/magic": "magic.dat", "async/mushroom": "mushroom.dat"}
NAMES = SYNTHETIC + list(DATA)
DIMS = {"async/magic": 10}


def test_registered():
    assert sorted(n for n in experiments() if n.startswith("async/")) == sorted(NAMES)
    for name in NAMES:
        exp = get_experiment(name)
        assert set(exp.sizes) == {"smoke", "paper"} and exp.agents == "sum"
    for name in ("async/movielens-standin", "async/yelp-standin"):
        assert "SYNTHETIC STAND-IN, NOT" in get_experiment(name).notes


def _check_build(name, size, overrides=None):
    exp = get_experiment(name)
    config = resolve_config(exp, size, overrides or {})
    runs = build_runs(exp, config)
    assert [a.name for _, a, _ in runs] == ALGS
    assert len({id(p) for p, _, _ in runs}) == 1  # one problem: common random numbers
    spec = runs[0][0].spec
    if size == "smoke":
        assert (spec.num_agents, spec.horizon, config["seeds"]) == (4, 40, 2)
    else:
        assert (spec.num_agents, spec.num_arms, spec.horizon, config["seeds"]) == (100, 20, 10000, 10)
        hp = {a.name: a.defaults for _, a, _ in runs}
        assert hp["Async-KernelUCB"]["threshold"] == pytest.approx(1e-4)
        assert hp["FedLinUCB"]["alpha_c"] == pytest.approx(1e-4)
        sync = 10000 / (100 * spec.dim * math.log(1e6))
        for alg in ("Approx-DisKernelUCB", "DisLinUCB", "FedGLB-UCB"):
            assert hp[alg]["threshold"] == pytest.approx(sync)
        # Gaussian kernel exp(-gamma |x - y|^2), gamma = 0.1: lengthscale 1 / sqrt(2 gamma)
        assert hp["OneKernelUCB"]["lengthscale"] == pytest.approx(1 / math.sqrt(0.2))
        if name in DIMS:
            assert spec.dim == DIMS[name]
    return runs


def _overrides(name):
    return {"data_dir": str(REAL_DIR)} if name in DATA else {}


def _param(name, size):
    marks = [needs_data(DATA[name])] if name in DATA else []
    if size == "paper" and name not in ("async/synthetic-f1", "async/synthetic-f2"):
        marks.append(pytest.mark.slow)  # builds the full rating matrices / k-means (seconds each)
    return pytest.param(name, size, marks=marks, id=f"{name}-{size}")


@pytest.mark.parametrize("name,size", [_param(n, s) for n in NAMES for s in ("smoke", "paper")])
def test_builds_without_compiling(name, size):
    _check_build(name, size, _overrides(name))


def test_config_keys():
    exp = get_experiment("async/synthetic-f1")
    runs = build_runs(exp, resolve_config(exp, "smoke", {"async_D": "0.5", "gamma": "4", "alpha": "0.1"}))
    hp = {a.name: a.defaults for _, a, _ in runs}
    assert hp["Async-KernelUCB"]["threshold"] == 0.5
    # one client per step: the problem declares it, so the six baselines score the active client only
    assert runs[0][0].spec.one_active
    assert hp["NKernelUCB"]["lengthscale"] == pytest.approx(1 / math.sqrt(8))
    assert all(h["alpha"] == pytest.approx(0.1) for n, h in hp.items() if n != "Random")
    for bad in ({"async_D": "x"}, {"approx_D": "-1"}, {"gamma": "0"}, {"async_D_values": "1,x"},
                {"approx_D_values": "-2"}, {"grid": "true", "grid_values": "0,1"}):
        with pytest.raises(ConfigError):
            build_runs(exp, resolve_config(exp, "smoke", bad))


def test_d_sweep_and_grid_build():
    exp = get_experiment("async/synthetic-f1")
    runs = build_runs(exp, resolve_config(exp, "smoke", {"async_D_values": "0.001,1", "approx_D_values": "10",
                                                         "grid": "true", "grid_values": "0.5,2"}))
    names = [a.name for _, a, _ in runs]
    assert names == ALGS + ["Async-KernelUCB (D=0.001)", "Async-KernelUCB (D=1)", "Approx-DisKernelUCB (D=10)"]
    hp = {a.name: a.defaults for _, a, _ in runs}
    assert hp["Async-KernelUCB (D=1)"]["threshold"] == 1.0 and hp["Approx-DisKernelUCB (D=10)"]["threshold"] == 10.0
    grids = {a.name: g for _, a, g in runs}
    assert [label for label, _ in grids["OneKernelUCB"]] == [
        "gamma=0.5, alpha=0.5", "gamma=0.5, alpha=2", "gamma=2, alpha=0.5", "gamma=2, alpha=2"]
    assert grids["OneKernelUCB"][2][1] == {"lengthscale": pytest.approx(0.5), "alpha": 0.5}
    assert list(grids["DisLinUCB"]) == [("alpha=0.5", {"alpha": 0.5}), ("alpha=2", {"alpha": 2.0})]
    assert grids["Random"] is None  # no hyper-parameter: one curve


def test_sync_convention():
    """The synchronous rule T / (N d ln(N T)) with T the steps (paper) or the rounds T / N (authors'
    code): at T = 10^4, N = 100, d = 20 these are 0.3619 and 0.005429."""
    from bandits_jax.core import EnvSpec

    spec = EnvSpec(100, 20, 20, 10000, one_active=True)
    exp = get_experiment("async/synthetic-f1")
    steps = async_exps.thresholds(resolve_config(exp, "paper", {}), spec)
    rounds = async_exps.thresholds(resolve_config(exp, "paper", {"sync_convention": "rounds"}), spec)
    for key in ("approx_D", "dislin_D", "glb_D"):
        assert steps[key] == pytest.approx(0.36191, abs=1e-5)
        assert rounds[key] == pytest.approx(100 / (100 * 20 * math.log(100 * 100)))
        assert rounds[key] == pytest.approx(0.0054287, abs=1e-7)
    for key in ("async_D", "fedlin_alpha_c"):  # the 1/N^2 rules do not depend on it
        assert steps[key] == rounds[key] == pytest.approx(1e-4)
    with pytest.raises(ConfigError, match="sync_convention must be one of steps, rounds"):
        async_exps.thresholds(resolve_config(exp, "paper", {"sync_convention": "users"}), spec)


def test_overflow_is_an_error():
    """Every algorithm names its error bits; NKernelUCB's capped history reports its overflow (the
    sweep turns stored error bits into a ConfigError with these messages)."""
    import jax
    import jax.numpy as jnp

    from bandits_jax.core import EnvSpec
    from bandits_jax.runner import describe_errors, replay
    from helpers import async_arrays

    exp = get_experiment("async/synthetic-f1")
    algs = {a.name: a for _, a, _ in build_runs(exp, resolve_config(exp, "smoke", {}))}
    for name in ALGS:
        for bit, message in algs[name].errors.items():
            assert describe_errors(algs[name], bit) == f"{name}: {message}"
        if algs[name].errors:
            assert "more than one client" in describe_errors(algs[name], sum(algs[name].errors))
    for name, capacity in (("Async-KernelUCB", "dict_capacity"), ("Async-KernelUCB", "buffer_capacity"),
                           ("Approx-DisKernelUCB", "dict_capacity"), ("NKernelUCB", "nkernel_capacity")):
        assert f"raise {capacity}" in describe_errors(algs[name], sum(algs[name].errors))
    from bandits_jax.algorithms import make_algorithm, wrap_algorithm
    from bandits_jax.algorithms.wrappers import ERR_CAPPED_HISTORY

    capped = wrap_algorithm(make_algorithm("n_kernel_ucb"), "capped_history", rows=3)
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = async_arrays(2, 3, 2, 10, seed=0)
        _, _, _, _, reps = replay(capped, EnvSpec(2, 3, 2, 10, one_active=True), None, jnp.asarray(contexts),
                                  jnp.asarray(rewards), jnp.asarray(active), jax.random.PRNGKey(0))
    full = np.array([np.sum(arrivals[:t] == arrivals[t]) >= 3 for t in range(10)])  # the client's 4th point on
    assert full.any()
    np.testing.assert_array_equal(np.asarray(reps.errors) == ERR_CAPPED_HISTORY, full)


def test_capped_histories_are_sized_by_demand_with_the_numbers_of_time_sized_ones():
    """NKernelUCB's capped histories start at 64 rows and grow with the fullest client (about t / N
    points under one-active arrivals), not with t; the numbers are those of the uncapped algorithm."""
    from bandits_jax.algorithms import make_algorithm, wrap_algorithm
    from bandits_jax.problems import make_problem
    from bandits_jax.runner import run_batch

    problem = make_problem("async-f1", num_agents=4, num_arms=5, dim=3, horizon=300)
    capped, cache = wrap_algorithm(make_algorithm("n_kernel_ucb"), "capped_history", rows=256), {}
    out = run_batch(problem, capped, [0, 1], first_segment=64, compiled_cache=cache)
    plain = run_batch(problem, make_algorithm("n_kernel_ucb"), [0, 1], first_segment=300)  # one segment
    np.testing.assert_array_equal(out.regret, plain.regret)
    assert not out.errors.any()
    rows = sorted((k[-2][0],) + tuple(k[-2][1]) for k in cache if k[0] == "segment")  # (length, rows, demand rows)
    # four clients share 300 steps, so the fullest holds about 75 points: 64 rows, then the grown
    # 1.5 x fill + 16 (rounded up to 64) from t = 128 on, where time sizing gives 128 and 256 rows
    assert rows == [(44, 256, 128), (64, 64, 64), (64, 128, 64), (128, 256, 128)]


# four of the eight methods through the sweep (the golden test runs all eight on this experiment)
SWEPT = ["Async-KernelUCB", "OneKernelUCB", "NKernelUCB", "Random"]


def test_smoke_end_to_end(tmp_path):
    out = sweep.run_experiment("async/synthetic-f1", "smoke", out=tmp_path / "r", quiet=True, plot=False,
                               only=tuple(SWEPT))
    res = load_results(out)
    assert res.metadata["errors"] == {}
    assert res.algorithms == SWEPT
    for alg in SWEPT:
        arrays = res.arrays[alg]
        assert arrays["regret"].shape == (2, 40, 4)
        for key in ("comm_up", "comm_down", "rounds"):
            assert arrays[key].shape == (2, 40)
            assert not np.isnan(arrays[key]).any() and (arrays[key] >= 0).all()
        np.testing.assert_array_equal(arrays["errors"], 0)  # no run outgrew a capacity
        assert np.all(np.isfinite(arrays["regret"])) and (arrays["regret"] >= -1e-12).all()
        # one client acts per step: at most one agent has non-zero regret
        assert ((arrays["regret"] != 0).sum(axis=-1) <= 1).all()
    assert res.arrays["NKernelUCB"]["comm_up"].sum() == 0
    assert (res.arrays["OneKernelUCB"]["rounds"] == 1).all()  # communicates at every step
    assert res.arrays["Async-KernelUCB"]["rounds"].sum() > 0
    assert res.metadata["agents"] == "sum"
    # a D sweep takes its seven base curves from the curve cache this run filled and computes the sweep
    swept = sweep.run_experiment("async/synthetic-f1", "smoke", out=tmp_path / "d", quiet=True, plot=False,
                                 overrides={"async_D_values": "0.5"}, only=(*SWEPT, "Async-KernelUCB (D=0.5)"))
    res_d = load_results(swept)
    assert res_d.algorithms == SWEPT + ["Async-KernelUCB (D=0.5)"]
    assert sorted(res_d.metadata["cached"]) == sorted(SWEPT)
    for alg in SWEPT:
        np.testing.assert_array_equal(res_d.arrays[alg]["regret"], res.arrays[alg]["regret"])
    assert res_d.arrays["Async-KernelUCB (D=0.5)"]["rounds"].sum() < res.arrays["Async-KernelUCB"]["rounds"].sum()

