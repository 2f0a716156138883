"""Experiments as data: registries, curves with tags, figures drawn from tags, ad-hoc runs and TOML files."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from bandits_jax import sweep
from bandits_jax.algorithms import ALGORITHMS, algorithm_descriptions, build_algorithm, register_algorithm
from bandits_jax.cli import main
from bandits_jax.core import ConfigError
from bandits_jax.curves import Curve, Spec, curve_from_dict, parse_spec, resolve
from bandits_jax.experiments.registry import Experiment, _REGISTRY, register
from bandits_jax.experiments.catalog import experiments
from bandits_jax.problems import BUILDERS, problem_descriptions, register_problem
from bandits_jax.reporting.results import load_results

sys.path.insert(0, str(Path(__file__).parent))
from toy import greedy_with_eps, toy_problem  # noqa: E402


register_problem("test-toy-n", toy_problem)
register_algorithm("test_greedy_n", greedy_with_eps)


def _by_n_build(config):
    curves = []
    for n in (1, 2, 4):
        problem = Spec("test-toy-n", {"num_agents": n, "horizon": config["horizon"]})
        curves += [Curve(f"greedy N{n}", problem, Spec("test_greedy_n"), tags={"method": "greedy", "N": n}),
                   Curve(f"random N{n}", problem, Spec("uniform_random"), tags={"method": "random", "N": n})]
    return curves


if "test/by-n" not in _REGISTRY:
    register(Experiment("test/by-n", "toy: final regret against N from tags", {}, {"smoke": {"horizon": 15, "seeds": 3}},
                        _by_n_build, x="N"))


def test_every_name_has_a_one_line_description():
    algorithms, problems = algorithm_descriptions(), problem_descriptions()
    assert set(algorithms) == set(ALGORITHMS) and set(problems) == set(BUILDERS)
    for name, text in list(algorithms.items()) + list(problems.items()):
        assert "\n" not in text and (text or name.startswith("test")), name
    assert "duets" in algorithms
    assert {"duets-h1", "duets-branin"} <= set(problems)


def test_parse_spec_reads_types_and_refuses_malformed_text():
    assert parse_spec("kernel_ucb:beta=0.5,kernel=rbf,max_history=none,first=3,flag=true") == Spec(
        "kernel_ucb", {"beta": 0.5, "kernel": "rbf", "max_history": None, "first": 3, "flag": True})
    assert parse_spec("linucb") == Spec("linucb", {})
    assert parse_spec("n_kernel_ucb:alpha=2+capped_history:rows=32") == Spec(
        "n_kernel_ucb", {"alpha": 2}, (("capped_history", {"rows": 32}),))
    for bad in ("kernel_ucb:beta", "kernel_ucb:=1", "a b", ":x=1", "linucb:", "linucb+", "linucb+:rows=1"):
        with pytest.raises(ConfigError, match="malformed"):
            parse_spec(bad)


def test_resolve_builds_each_spec_once_and_names_the_curve():
    problem = Spec("linear", {"num_agents": 2, "horizon": 5})
    a = Curve("A", problem, Spec("linucb", {"beta": 0.5}), stream=3)
    b = Curve("B", problem, Spec("linucb", {"beta": 0.5}))
    (ra, rb) = resolve([a, b])
    assert ra.problem is rb.problem
    assert (ra.algorithm.name, ra.algorithm.stream, rb.algorithm.name, rb.algorithm.stream) == ("A", 3, "B", 0)
    assert ra.algorithm.defaults["beta"] == 0.5
    with pytest.raises(ConfigError, match="unique"):
        resolve([a, a])
    with pytest.raises(ConfigError, match="does not fit.*candidate"):
        resolve([Curve("D", problem, Spec("duets", {"horizon": 5}))])
    with pytest.raises(ConfigError, match="bogus"):
        resolve([Curve("E", problem, Spec("linucb", {"bogus": 1}))])


def test_wrappers_are_specs():
    spec = Spec("n_kernel_ucb", {}, (("capped_history", {"rows": 3}),))
    alg = build_algorithm(spec)
    assert alg.sizing.rows(None, 100) == 3 and any("nkernel_capacity" in m for m in alg.errors.values())
    with pytest.raises(ConfigError, match="unknown algorithm wrapper"):
        build_algorithm(Spec("n_kernel_ucb", {}, (("nope", {}),)))
    assert curve_from_dict(Curve("x", Spec("linear"), spec, ((("b=1"), {"beta": 1.0}),), 2, {"N": 1}).as_dict()) == \
        Curve("x", Spec("linear"), spec, (("b=1", {"beta": 1.0}),), 2, {"N": 1})


def test_figure_against_a_tag_plots_the_results_file(tmp_path):
    import matplotlib.pyplot as plt

    from bandits_jax.reporting.plotting import draw_results

    out = sweep.run_experiment("test/by-n", "smoke", out=tmp_path / "n", quiet=True, plot=False)
    res = load_results(out)
    assert res.metadata["tags"]["greedy N4"] == {"method": "greedy", "N": 4} and res.metadata["x"] == "N"
    fig = draw_results(res)
    panel = fig.axes[-1]
    assert panel.get_xlabel() == "N"
    plotted = {c.get_label(): (list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata())) for c in panel.containers}
    with np.load(out / "results.npz") as data:  # the numbers straight from the file: mean over agents
        for method in ("greedy", "random"):
            finals = [data[f"{method} N{n}/regret"].sum(axis=1).mean(axis=-1).mean() for n in (1, 2, 4)]
            xs, ys = plotted[method]
            assert xs == [1, 2, 4]
            np.testing.assert_allclose(ys, finals, rtol=1e-6)
    plt.close(fig)


def test_adhoc_run_writes_results_and_refuses_misfits(tmp_path, capsys):
    out = tmp_path / "a"
    assert main(["run", "--problem", "linear:num_agents=2,dim=3", "--algorithm", "linucb", "--algorithm",
                 "kernel_ucb:beta=0.5", "--horizon", "12", "--seeds", "2", "--out", str(out), "--quiet",
                 "--no-plot"]) == 0
    res = load_results(out)
    assert res.algorithms == ["linucb", "kernel_ucb:beta=0.5"]
    assert res.arrays["linucb"]["regret"].shape == (2, 12, 2)
    assert res.metadata["curves"][1]["algorithm"] == {"name": "kernel_ucb", "options": {"beta": 0.5}}
    assert "| kernel_ucb:beta=0.5 |" in (out / "summary.md").read_text()
    capsys.readouterr()
    for argv, needle in (
        (["--problem", "linear:horizon=5", "--algorithm", "duets"], "duets does not fit linear"),
        (["--problem", "duets-h1:num_candidates=50,horizon=5", "--algorithm", "linucb"], "linucb does not fit"),
        (["--problem", "linear", "--algorithm", "kernel_ucb:beta"], "malformed --algorithm"),
        (["--problem", "linear", "--algorithm", "nope"], "unknown algorithm 'nope'"),
        (["--problem", "linear"], "at least one --algorithm"),
        (["--algorithm", "linucb"], "--problem"),
    ):
        assert main(["run", *argv, "--out", str(tmp_path / "bad"), "--quiet"]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, (argv, err)
    assert not (tmp_path / "bad").exists()  # refused before anything was written


def test_toml_round_trip_gives_the_same_results(tmp_path, capsys):
    named = sweep.run_experiment("test/by-n", "smoke", out=tmp_path / "named", quiet=True, plot=False)
    assert main(["show", "test/by-n", "--size", "smoke", "--toml"]) == 0
    path = tmp_path / "exp.toml"
    path.write_text(capsys.readouterr().out)
    assert main(["run", str(path), "--out", str(tmp_path / "file"), "--quiet", "--no-plot"]) == 0
    a, b = load_results(named), load_results(tmp_path / "file")
    assert a.algorithms == b.algorithms and a.metadata["tags"] == b.metadata["tags"]
    for curve in a.algorithms:
        np.testing.assert_array_equal(a.arrays[curve]["regret"], b.arrays[curve]["regret"])
    assert b.metadata["identities"] == a.metadata["identities"]


def test_every_registered_experiment_writes_to_toml(capsys):
    from bandits_jax.experiments.adhoc import experiment_toml
    import tomllib

    for name, exp in experiments().items():
        if name.startswith(("async/magic", "async/mushroom", "fnucb/fig2", "fnucb/fig4")):
            continue  # these read data files at build
        text = experiment_toml(exp, "smoke", {})
        data = tomllib.loads(text)
        assert data["experiment"]["name"] == name and data["curves"], name


def test_list_algorithms_and_problems(capsys):
    assert main(["list", "--algorithms"]) == 0
    listing = capsys.readouterr().out
    assert "dis_kernel_ucb" in listing and "duets" in listing
    assert main(["list", "--problems"]) == 0
    assert "duets-h1" in capsys.readouterr().out


def test_a_trial_never_sees_the_instance():
    """The runner hands a trial the public part and a pull function, and judges its answers itself."""
    import jax.numpy as jnp

    from bandits_jax.core import Outcome, Trial
    from bandits_jax.problems.arms import gaussian_arms
    from bandits_jax.trials import run_trials

    seen = []

    def run(key, params, arms, public, pull):
        seen.append((public, pull))
        sums = pull(jnp.full((arms.num_agents, arms.num_arms), 50, jnp.int32), key)
        return {"answer": jnp.argmax(sums, axis=1), "errors": jnp.asarray(0, jnp.int32)}

    trial = Trial("peek", {}, run, {"correct": Outcome("rate")})
    out = run_trials(gaussian_arms(2, 3, gap=3.0), trial, [0, 1, 2])
    assert seen[0][0] is None and callable(seen[0][1])
    np.testing.assert_array_equal(out.outcomes["correct"], [1, 1, 1])


def test_problem_wrappers_adapt_protocols():
    import jax

    from bandits_jax.curves import problem_of

    asynchronous = problem_of(Spec("cosine", {"num_agents": 3, "horizon": 5}, (("one_arrival", {}),)))
    assert asynchronous.spec.one_active
    assert [int(asynchronous.active(None, t, jax.random.PRNGKey(t)).sum()) for t in range(5)] == [1] * 5
    with pytest.raises(ConfigError, match="already has its own arrivals"):
        problem_of(Spec("async-f1", {"num_agents": 3, "horizon": 5}, (("one_arrival", {}),)))
    spec = Spec("duets-h1", {"num_agents": 2, "horizon": 5, "num_candidates": 30})
    plain, seen = problem_of(spec), problem_of(spec._replace(wrappers=(("candidates_as_contexts", {}),)))
    instance = seen.init(jax.random.PRNGKey(0))
    X = np.asarray(seen.public(instance)["candidates"])
    assert plain.contexts(instance, 0, None).shape == (2, 30, 0)
    np.testing.assert_array_equal(np.asarray(seen.contexts(instance, 0, None)), np.broadcast_to(X, (2, 30, 10)))
    with pytest.raises(ConfigError, match="no public candidate set"):
        problem_of(Spec("cosine", {}, (("candidates_as_contexts", {}),)))
