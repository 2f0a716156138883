"""The fnucb/* experiments: every one resolves and builds at both sizes (nothing compiles), and
its smoke size runs end to end through the sweep with the expected algorithms and shapes.

The end-to-end runs compile one program per curve; one mixed-N experiment runs in the fast
suite and all of them with `pytest -m slow`. Experiments on real data use the offline copies in
`<repo>/../shared/data` and are skipped when that folder is absent.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bandits_jax import sweep
from bandits_jax.core import ConfigError
from bandits_jax.experiments.registry import build_runs, resolve_config
from bandits_jax.experiments.catalog import experiments, get_experiment
from bandits_jax.reporting.results import load_results
from bandits_jax.devices import precision_scope
from bandits_jax.runner import horizon_sizes, run_start
from bandits_jax.identity import run_identity
from helpers import REAL_DIR, skip_without_data

DATA_DIR = REAL_DIR
DATA_FILES = ("shuttle.trn", "shuttle.tst", "magic.dat")
HAVE_DATA = all((DATA_DIR / f).exists() for f in DATA_FILES)

NAMES = ["fnucb/fig1a", "fnucb/fig1b", "fnucb/fig1c", "fnucb/fig1d", "fnucb/fig2a", "fnucb/fig2b",
         "fnucb/fig2c", "fnucb/fig2d", "fnucb/fig3", "fnucb/fig4", "fnucb/fig5", "fnucb/fig6", "fnucb/timing"]
FAST_RUN = "fnucb/fig6"  # two curves with different N: the pair form of the sweep

# smoke size: the algorithm names and the number of agents of each curve
SMOKE_EXPECTED = {
    "fnucb/fig1a": {"FN-UCB (N=1)": 1, "FN-UCB (N=2)": 2, "NeuralUCB": 1, "NeuralTS": 1},
    "fnucb/fig1b": {"FN-UCB (N=1)": 1, "FN-UCB (N=2)": 2, "NeuralUCB": 1, "NeuralTS": 1},
    "fnucb/fig1c": {"FN-UCB": 2, "FN-UCB (UCB_a only)": 2, "FN-UCB (UCB_b only)": 2, "FN-UCB (no NN aggregation)": 2},
    "fnucb/fig1d": {"FN-UCB (D=5)": 2, "FN-UCB (every round)": 2},
    "fnucb/fig2a": {"FN-UCB (N=1)": 1, "FN-UCB (N=2)": 2, "NeuralUCB": 1, "NeuralTS": 1},
    "fnucb/fig2b": {"FN-UCB (N=1)": 1, "FN-UCB (N=2)": 2, "NeuralUCB": 1, "NeuralTS": 1},
    "fnucb/fig2c": {"FN-UCB (N=1)": 1, "FN-UCB (N=2)": 2, "NeuralUCB": 1, "NeuralTS": 1},
    "fnucb/fig2d": {"FN-UCB (D=0.05)": 2, "FN-UCB (every round)": 2},
    "fnucb/fig3": {"cosine: FN-UCB (N=2)": 2, "cosine: FN-UCB Less Comm. (N=2)": 2},
    "fnucb/fig4": {curve: n for p in ("cosine", "magic") for curve, n in (  # build order: problem by problem
        *((f"{p}: {a} (nu=0.1)", 1) for a in ("LinUCB", "LinTS", "KernelUCB", "KernelTS")),
        *((f"{p}: {a}", 1) for a in ("NeuralUCB", "NeuralTS")), (f"{p}: FN-UCB (N=2)", 2))},
    "fnucb/fig5": {"FN-UCB (full covariance)": 2, "FN-UCB (diagonal)": 2},
    "fnucb/fig6": {"cosine: FN-UCB (N=1)": 1, "cosine: FN-UCB (N=2)": 2},
    "fnucb/timing": {"FN-UCB full (m=8)": 2, "FN-UCB diagonal (m=12)": 2, "FN-UCB full (m=12)": 2},
}

# paper size: number of curves
PAPER_COUNTS = {"fnucb/fig1a": 6, "fnucb/fig1b": 6, "fnucb/fig1c": 6, "fnucb/fig1d": 4, "fnucb/fig2a": 5,
                "fnucb/fig2b": 5, "fnucb/fig2c": 5, "fnucb/fig2d": 4, "fnucb/fig3": 8, "fnucb/fig4": 68,
                "fnucb/fig5": 2, "fnucb/fig6": 8, "fnucb/timing": 3}

# paper size: seeds (10 for the synthetic figures; the real-data ones and fig4, which mixes both, keep 3)
PAPER_SEEDS = {name: 3 if name in ("fnucb/fig2a", "fnucb/fig2b", "fnucb/fig2c", "fnucb/fig2d", "fnucb/fig4",
                                     "fnucb/fig5", "fnucb/timing") else 10
               for name in NAMES}


def _overrides(name):
    if "data_dir" not in get_experiment(name).defaults:
        return {}
    if not HAVE_DATA:
        skip_without_data(', '.join(DATA_FILES))
    return {"data_dir": str(DATA_DIR)}


def test_all_figures_registered():
    assert sorted(n for n in experiments() if n.startswith("fnucb/")) == sorted(NAMES)
    for name in NAMES:
        exp = get_experiment(name)
        assert set(exp.sizes) == {"smoke", "paper"}
        assert exp.agents == "mean" and exp.se_ddof == 0 and "mode=authors" in exp.notes


@pytest.mark.parametrize("mode", ["authors", "paper"])
@pytest.mark.parametrize("size", ["smoke", "paper"])
@pytest.mark.parametrize("name", NAMES)
def test_builds_without_compiling(name, size, mode):
    exp = get_experiment(name)
    config = resolve_config(exp, size, {**_overrides(name), "mode": mode})
    runs = build_runs(exp, config)
    names = [alg.name for _, alg, _ in runs]
    assert len(set(names)) == len(names)
    horizons = {p.spec.horizon for p, _, _ in runs}
    if size == "smoke":
        assert horizons == {30} and config["seeds"] == 2 and config["width"] == 8
        assert {a.name: p.spec.num_agents for p, a, _ in runs} == SMOKE_EXPECTED[name]
    else:
        # fig1c's "separate networks" reference exists only with the code's shared network
        count = PAPER_COUNTS[name] - (name == "fnucb/fig1c" and mode == "paper")
        assert horizons == {5000} and config["seeds"] == PAPER_SEEDS[name] and len(runs) == count
    if mode == "paper":
        assert all(p.spec.dim % 2 == 0 for p, _, _ in runs)  # the paper network needs an even d


def test_paper_hyperparameters():
    fig1a = build_runs(get_experiment("fnucb/fig1a"), resolve_config(get_experiment("fnucb/fig1a"), "paper", {}))
    fn = dict((a.name, (p, a)) for p, a, _ in fig1a)
    p10, a10 = fn["FN-UCB (N=10)"]
    assert p10.spec.num_agents == 10 and p10.spec.num_arms == 4 and p10.spec.dim == 10
    assert a10.defaults == pytest.approx({"lam": 0.1, "nu_tkn": 0.1, "nu_tk": 0.1, "D": 0.0, "lr": 0.01})
    assert fn["NeuralUCB"][1].defaults["beta"] == pytest.approx(np.sqrt(0.1 * 0.01))
    fig1d = resolve_config(get_experiment("fnucb/fig1d"), "paper", {})
    ds = sorted(a.defaults["D"] for _, a, _ in build_runs(get_experiment("fnucb/fig1d"), fig1d))
    assert ds == pytest.approx([0.0, 2.5, 4.0, 5.0])


def _starts(name, overrides=None, seed=0):
    """{curve: (problem key data, initial network parameters flat)} of seed `seed` at smoke size, as
    the runner starts each run (nothing beyond `init` runs)."""
    exp = get_experiment(name)
    out = {}
    with precision_scope("float64"):
        for problem, alg, _ in build_runs(exp, resolve_config(exp, "smoke", overrides or {})):
            start = run_start(problem, alg, 0, horizon_sizes(alg, problem.spec))
            params = {k: jnp.asarray(v) for k, v in alg.defaults.items()}
            problem_key, _, _, state = start(jnp.uint32(seed), params)
            if hasattr(state, "nets"):  # FN-UCB: theta0, shared by its agents
                theta0 = state.nets.theta0
            else:  # Neural UCB / TS: one agent's state with a leading agent axis
                theta0 = jax.tree_util.tree_map(lambda a: a[0], state.theta)
            out[alg.name] = (np.asarray(jax.random.key_data(problem_key)), np.asarray(ravel_pytree(theta0)[0]))
    return out


def test_curves_draw_initial_networks_by_family_and_agents_and_share_the_problem_keys():
    fig1a = _starts("fnucb/fig1a")  # FN-UCB N = 1, 2; Neural UCB, Neural TS (all d = 10, width 8)
    fig1d = _starts("fnucb/fig1d")  # FN-UCB N = 2 at D = 5 and D = 0
    fig1c = _starts("fnucb/fig1c")  # FN-UCB N = 2 and its ablations
    fig3 = _starts("fnucb/fig3")  # FN-UCB N = 2, full and Less Comm.
    n1, n2 = fig1a["FN-UCB (N=1)"][1], fig1a["FN-UCB (N=2)"][1]
    assert n1.shape == n2.shape == (8 * 10 + 8 + 8 + 1,)  # the code's network: weights and biases
    # different N: different initial networks (N(0, 1) entries, so they differ by order one)
    assert np.abs(n1 - n2).max() > 0.5
    ucb, ts = fig1a["NeuralUCB"][1], fig1a["NeuralTS"][1]
    assert np.abs(ucb - ts).max() > 0.5 and np.abs(ucb - n1).max() > 0.5 and np.abs(ts - n1).max() > 0.5
    # one N, another knob: the same network, number for number, also across figures
    for other in (fig1d["FN-UCB (D=5)"], fig1d["FN-UCB (every round)"], fig3["cosine: FN-UCB (N=2)"],
                  fig3["cosine: FN-UCB Less Comm. (N=2)"], *fig1c.values()):
        np.testing.assert_array_equal(other[1], n2)
    # every curve of a seed shares the problem's key (common random numbers)
    keys = {tuple(k.tolist()) for fig in (fig1a, fig1d, fig1c, fig3) for k, _ in fig.values()}
    assert len(keys) == 1
    # and another seed draws other networks
    assert np.abs(_starts("fnucb/fig1d", {"D_values": "0"}, seed=1)["FN-UCB (every round)"][1] - n2).max() > 0.5
    # the streams: family id * 100000 + N, fixed numbers
    exp = get_experiment("fnucb/fig1a")
    streams = {a.name: a.stream for _, a, _ in build_runs(exp, resolve_config(exp, "paper", {}))}
    assert streams == {"FN-UCB (N=1)": 100001, "FN-UCB (N=2)": 100002, "FN-UCB (N=5)": 100005,
                       "FN-UCB (N=10)": 100010, "NeuralUCB": 200001, "NeuralTS": 300001}


def test_the_paper_mode_of_the_diagonal_figures_rescales_the_mean_by_min_max():
    """fnucb/fig2c and fig2d in mode=paper switch on footnote 4's min-max rescaling of FN-UCB's
    mean term (diagonal covariance); mode=authors (the released code) leaves it off, and so do the
    full-covariance figures in either mode."""
    from bandits_jax.experiments import fnucb

    def minmax(config):
        from bandits_jax.algorithms import build_algorithm

        return build_algorithm(fnucb._fn(config, "FN-UCB", "cosine", 2).algorithm).init.args[0].minmax_mean

    for name in ("fnucb/fig2c", "fnucb/fig2d", "fnucb/fig2a", "fnucb/fig1a"):
        exp = get_experiment(name)
        diag = exp.defaults["covariance"] == "diag"
        assert diag == (name in ("fnucb/fig2c", "fnucb/fig2d"))
        assert minmax(resolve_config(exp, "paper", {"mode": "paper"})) == diag
        assert not minmax(resolve_config(exp, "paper", {"mode": "authors"}))
        if diag:
            assert "footnote 4" in exp.notes and "294, 750, 255" in exp.notes


def test_bad_values_fail_before_compiling():
    exp = get_experiment("fnucb/fig1a")
    with pytest.raises(ConfigError):
        build_runs(exp, resolve_config(exp, "smoke", {"mode": "neither"}))
    with pytest.raises(ConfigError):
        build_runs(exp, resolve_config(exp, "smoke", {"n_values": "1,zero"}))
    with pytest.raises(ConfigError):
        build_runs(exp, resolve_config(exp, "smoke", {"n_values": "0"}))


def _run_and_check(name, tmp_path):
    overrides = _overrides(name)
    out = sweep.run_experiment(name, "smoke", overrides=overrides, out=tmp_path / "r", quiet=True, plot=False)
    res = load_results(out)
    expected = SMOKE_EXPECTED[name]
    assert res.algorithms == list(expected)
    for alg, n in expected.items():
        arrays = res.arrays[alg]
        assert arrays["regret"].shape == (2, 30, n)
        assert arrays["rounds"].shape == (2, 30)
        assert np.all(np.isfinite(arrays["regret"]))
    return res


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if n != FAST_RUN])
def test_smoke_end_to_end(name, tmp_path):
    _run_and_check(name, tmp_path)


def test_smoke_mixed_agents_end_to_end_and_the_curve_cache(tmp_path):
    fig6 = _run_and_check(FAST_RUN, tmp_path / "fig6")
    # D = 0: every iteration but the first is a communication round
    assert fig6.arrays["cosine: FN-UCB (N=2)"]["rounds"].sum(axis=1).tolist() == [29, 29]
    assert fig6.metadata["algorithm_problems"]["cosine: FN-UCB (N=2)"] == {"problem": "cosine", "num_agents": 2}

    # fig6's curves are, by construction, fig1a's FN-UCB runs, number for number (computed apart)
    cache = tmp_path / "curves"
    fig1a = sweep.run_experiment("fnucb/fig1a", "smoke", overrides={"baselines": "false"}, out=tmp_path / "fig1a",
                                 quiet=True, plot=False, curves=cache)
    stored = load_results(fig1a)
    assert stored.metadata["cached"] == {}
    for n in (1, 2):
        assert stored.metadata["identities"][f"FN-UCB (N={n})"] == fig6.metadata["identities"][f"cosine: FN-UCB (N={n})"]
        for key, value in fig6.arrays[f"cosine: FN-UCB (N={n})"].items():
            np.testing.assert_array_equal(value, stored.arrays[f"FN-UCB (N={n})"][key], err_msg=key)

    # so the cache that fig1a filled gives fig6 both curves, with no declaration and nothing computed
    copied = load_results(sweep.run_experiment(FAST_RUN, "smoke", out=tmp_path / "copied", quiet=True, plot=False,
                                               curves=cache))
    assert set(copied.metadata["cached"]) == {"cosine: FN-UCB (N=1)", "cosine: FN-UCB (N=2)"}
    for curve in copied.algorithms:
        assert copied.metadata["timing"][curve]["seeds_computed"] == 0
        for key, value in fig6.arrays[curve].items():
            np.testing.assert_array_equal(value, copied.arrays[curve][key], err_msg=key)

    # fig1d's every-round curve (D = 0, N = 2 at smoke size) is fig1a's FN-UCB (N=2): computed, it is
    # equal number for number; with the cache it is taken
    d0 = {"D_values": "0"}
    computed = load_results(sweep.run_experiment("fnucb/fig1d", "smoke", overrides=d0, out=tmp_path / "d",
                                                 quiet=True, plot=False, curves=False))
    taken = load_results(sweep.run_experiment("fnucb/fig1d", "smoke", overrides=d0, out=tmp_path / "d2",
                                              quiet=True, plot=False, curves=cache))
    assert set(taken.metadata["cached"]) == {"FN-UCB (every round)"}
    for key, value in stored.arrays["FN-UCB (N=2)"].items():
        np.testing.assert_array_equal(computed.arrays["FN-UCB (every round)"][key], value, err_msg=key)
        np.testing.assert_array_equal(taken.arrays["FN-UCB (every round)"][key], value, err_msg=key)

    # a key that determines the curve (lam, the data, the horizon, the precision) gives another identity
    exp = get_experiment(FAST_RUN)
    base = resolve_config(exp, "smoke", {})
    for change in ({"lam": "0.2"}, {"horizon": "31"}, {"precision": "float32"}, {"base_key": "1"}):
        config = resolve_config(exp, "smoke", change)
        problem, alg, _ = build_runs(exp, config)[0]
        assert run_identity(problem, alg, alg.defaults, base_key=config["base_key"],
                            precision=config["precision"]) != fig6.metadata["identities"][alg.name], change
    problem, alg, _ = build_runs(exp, base)[0]
    assert run_identity(problem, alg, alg.defaults) == fig6.metadata["identities"][alg.name]
    # so does the key stream: a curve stored before streams existed (stream 0) is not taken for it
    assert fig6.metadata["algorithm_streams"] == {"cosine: FN-UCB (N=1)": 100001, "cosine: FN-UCB (N=2)": 100002}
    assert run_identity(problem, alg._replace(stream=0), alg.defaults) != fig6.metadata["identities"][alg.name]


