"""Plugins held to the built-ins' contract: a user's algorithm (`algorithms.register_algorithm`, loaded by
`--plugin` or an entry point) that is broken is refused in one line (exit status 2) before anything is
compiled or written, wherever it is named (`run`, `arena`, `list --algorithms`); a step that breaks the
contract only at run time carries the runner's own error bits, named by their own messages.

    registration       a name a spec cannot write, a factory that is not callable  (plugins.check_registration)
    building           a factory that raises or returns no Algorithm                (algorithms.make_algorithm)
    listing            a broken name is left out and named                          (cli._list)
    importing          a plugin that calls sys.exit                                 (plugins._import)
    tracing            actions, state and report of the wrong shape or dtype         (runner.check_actions/update)
    running            an arm outside [0, K), negative or non-finite communication   (runner.step_faults)

Broken variants of one toy (a greedy plugin with a fixed-size state) are registered for a test and
removed after it (`own_registry`).
"""
from __future__ import annotations

import sys
import textwrap
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import algorithms, problems, runner
from bandits_jax.algorithms import algorithm_descriptions, algorithm_factory, make_algorithm, register_algorithm
from bandits_jax.cli import main
from bandits_jax.core import Algorithm, ConfigError, Param, report
from bandits_jax.curves import Curve, Spec, resolve
from bandits_jax.problems import make_problem, register_problem
from bandits_jax.runner import (ERR_ARM, ERR_COMM, ERR_NAN_STATE, RUNNER_ERRORS, FailedRunsWarning, describe_errors,
                                run_batch)

PROBLEM = "cosine:num_agents=2,dim=4,num_arms=3,horizon=6"
MODULE = __name__  # the module a factory defined here comes from, as a refusal names it


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """ALGORITHMS and BUILDERS as copies, and the plugin modules a test imports forgotten after it, so
    no registered name or module leaks into another test."""
    monkeypatch.setattr(algorithms, "ALGORITHMS", dict(algorithms.ALGORITHMS))
    monkeypatch.setattr(algorithms, "TUNINGS", dict(algorithms.TUNINGS))
    monkeypatch.setattr(problems, "BUILDERS", dict(problems.BUILDERS))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("plugin_"):
            del sys.modules[name]


def cli_output(capsys, argv) -> tuple:
    """(exit status, stdout, stderr lines) of `bandits-jax ARGV` run in this process."""
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err.strip().splitlines()


def assert_refused(status, err, *parts) -> str:
    """Exit status 2 and one stderr line holding every one of `parts`; returns the line."""
    assert status == 2, err
    assert len(err) == 1 and err[0].startswith("bandits-jax: error: ") and "Traceback" not in err[0], err
    for part in parts:
        assert part in err[0], (part, err[0])
    return err[0]


def write_plugin(tmp_path, name: str, body: str):
    """A plugin file plugin_<name>.py holding `body`."""
    path = tmp_path / f"plugin_{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


# ------------------------------------------------------------------------------------ the toy plugin
def greedy(eps: float = 0.5) -> Algorithm:
    """Greedy: the arm of largest <x, w>, w the sum of r x over the agent's chosen contexts (a toy plugin).

    State {"w": [N, d], "n": int32 scalar}; each step reports one scalar up, one down and one round.
    """

    def init(key, spec, params, sizes, public):
        return {"w": jnp.zeros((spec.num_agents, spec.dim)), "n": jnp.zeros((), jnp.int32)}

    def select(params, state, step, key):
        explore = jax.random.uniform(key, step.contexts.shape[:2]) * params["eps"]
        scores = jnp.einsum("nkd,nd->nk", step.contexts, state["w"]) + explore
        return jnp.argmax(scores, axis=1).astype(jnp.int32), ()

    def update(params, state, step, actions, rewards, aux, key):
        x = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0]
        w = state["w"] + jnp.where(step.active[:, None], rewards[:, None] * x, 0.0)
        return {"w": w, "n": state["n"] + 1}, report(rewards.dtype, 1.0, 1.0, 1.0, n=state["n"])

    return Algorithm("Greedy", {"eps": Param(eps, "nonnegative")}, init, select, update, None, {}, "toy plugin")


def with_select(change) -> Algorithm:
    """The toy whose select's (actions, aux) become change(actions, aux, step)."""
    base = greedy()
    return base._replace(select=lambda params, state, step, key: change(*base.select(params, state, step, key), step))


def with_update(change) -> Algorithm:
    """The toy whose update's (state, report) become change(state, report, step)."""
    base = greedy()

    def update(params, state, step, actions, rewards, aux, key):
        return change(*base.update(params, state, step, actions, rewards, aux, key), step)

    return base._replace(update=update)


def check_run(tmp_path, name: str) -> list:
    """`run --check` of algorithm `name` on the small cosine problem."""
    return ["run", "--problem", PROBLEM, "--algorithm", name, "--seeds", "2", "--check", "--out",
            str(tmp_path / "out")]


# ------------------------------------------------------------------------------------ registration
@pytest.mark.parametrize("name", ["", "a:b", "a,b", "a=b", "a+b", "my ucb", "tab\tname", 3])
@pytest.mark.parametrize("register", [register_algorithm, register_problem])
def test_a_name_a_spec_cannot_write_is_refused(name, register):
    with pytest.raises(ConfigError, match="cannot register the (algorithm|problem) .*a name is a non-empty string"):
        register(name, greedy)
    assert name not in algorithms.ALGORITHMS and name not in problems.BUILDERS


@pytest.mark.parametrize("register, kind", [(register_algorithm, "algorithm"), (register_problem, "problem")])
def test_a_target_that_is_not_callable_is_refused_and_a_taken_name_stays_a_value_error(register, kind):
    with pytest.raises(ConfigError, match=rf"cannot register the {kind} 'mine': what is given \(int\) is not callable"):
        register("mine", 5)
    taken = "linucb" if kind == "algorithm" else "cosine"
    with pytest.raises(ValueError, match="registered already") as caught:
        register(taken, greedy)
    assert type(caught.value) is ValueError


def test_a_plugin_whose_registration_is_refused_is_one_line_naming_it(tmp_path, capsys):
    plugin = write_plugin(tmp_path, "bad_name", '''
        from bandits_jax.algorithms import register_algorithm, make_algorithm
        register_algorithm("my ucb", lambda: make_algorithm("linucb"))
    ''')
    status, _, err = cli_output(capsys, [*check_run(tmp_path, "linucb"), "--plugin", str(plugin)])
    assert_refused(status, err, f"--plugin {plugin}: cannot register the algorithm 'my ucb'", "choose another")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ building
def raises():
    """Raises."""
    raise RuntimeError("boom")


def returns_none():
    """Returns None."""


def returns_dict():
    """Returns a dict."""
    return {"select": None}


def refuses_its_option(lam: float = -1.0):
    """Refuses its own option."""
    raise ConfigError(f"lam must be positive, got {lam}")


def exits():
    """Exits."""
    sys.exit(1)


@pytest.mark.parametrize("factory, why", [
    (raises, "its factory raised RuntimeError: boom; fix the factory"),
    (returns_none, "its factory returned NoneType, not a core.Algorithm or core.Trial"),
    (returns_dict, "its factory returned dict, not a core.Algorithm or core.Trial"),
    (refuses_its_option, ": lam must be positive, got -1.0"),
    (exits, "its factory raised SystemExit: 1"),
])
def test_a_broken_factory_is_one_line_naming_the_plugin_and_its_module(factory, why, tmp_path, capsys):
    register_algorithm("broken_toy", factory)
    status, _, err = cli_output(capsys, check_run(tmp_path, "broken_toy"))
    assert_refused(status, err, f"algorithm broken_toy (from module {MODULE})", why)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError) as caught:
        make_algorithm("broken_toy")
    assert str(caught.value) == err[0].removeprefix("bandits-jax: error: ")


def test_a_broken_factory_is_one_line_in_the_arena(tmp_path, capsys):
    register_algorithm("broken_toy", returns_none)
    out = tmp_path / "arena"
    status, _, err = cli_output(capsys, ["arena", "--size", "smoke", "--problem", "cosine", "--algorithm", "all",
                                      "--check", "--quiet", "--out", str(out)])
    assert_refused(status, err, f"algorithm broken_toy (from module {MODULE}): its factory returned NoneType")
    assert not out.exists()


def test_a_packaged_factory_keeps_its_own_message():
    with pytest.raises(ConfigError) as direct:
        algorithm_factory("linucb")(lam=-1.0)
    with pytest.raises(ConfigError) as built:
        make_algorithm("linucb", lam=-1.0)
    assert str(built.value) == str(direct.value) and "(from module" not in str(built.value)


# ------------------------------------------------------------------------------------ listing
def test_list_shows_the_others_and_names_the_broken_one(capsys):
    register_algorithm("good_toy", greedy)
    algorithms.ALGORITHMS["raw_toy"] = None  # put in around register_algorithm
    status, out, err = cli_output(capsys, ["list", "--algorithms"])
    assert_refused(status, err, "1 registered algorithm(s) left out of the list above",
                   "algorithm 'raw_toy' is registered as a NoneType, which is not callable")
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == [n for n in algorithms.ALGORITHMS if n != "raw_toy"] and "good_toy" in listed
    assert "Greedy: the arm of largest <x, w>" in out
    broken = {}
    assert "raw_toy" not in algorithm_descriptions(broken) and list(broken) == ["raw_toy"]
    with pytest.raises(ConfigError, match="raw_toy"):
        algorithm_descriptions()


# ------------------------------------------------------------------------------------ importing
@pytest.mark.parametrize("code", [0, 3])
def test_a_plugin_that_exits_at_import_is_one_line_naming_it(code, tmp_path, capsys):
    plugin = write_plugin(tmp_path, f"exits{code}", f'''
        import sys
        sys.exit({code})
    ''')
    for argv in (["list", "--algorithms"], check_run(tmp_path, "linucb")):
        status, out, err = cli_output(capsys, [*argv, "--plugin", str(plugin)])
        assert_refused(status, err, f"--plugin {plugin}: it called sys.exit({code}) while being imported")
        assert out == ""
    assert f"plugin_exits{code}" not in sys.modules and not (tmp_path / "out").exists()


def test_an_entry_point_that_exits_at_import_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    write_plugin(tmp_path, "exits_entry", "import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    point = metadata.EntryPoint("exits_ucb", "plugin_exits_entry:ucb", "bandits_jax.algorithms")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [point] if group == "bandits_jax.algorithms" else [])
    status, _, err = cli_output(capsys, ["list", "--algorithms"])
    assert_refused(status, err, "entry point exits_ucb = plugin_exits_entry:ucb of bandits_jax.algorithms",
                   "called sys.exit(0) while being imported")


# ------------------------------------------------------------------------------------ tracing
@pytest.mark.parametrize("variant, why", [
    (lambda: with_update(lambda s, r, step: ({**s, "w": jnp.concatenate([s["w"], s["w"]])}, r)),
     "update changes the state's leaf ['w'] from float64[2, 4] to float64[4, 4]"),
    (lambda: with_update(lambda s, r, step: ({**s, "w": s["w"].astype(jnp.float32)}, r)),
     "update changes the state's leaf ['w'] from float64[2, 4] to float32[2, 4]"),
    (lambda: with_update(lambda s, r, step: ({**s, "extra": jnp.zeros(())}, r)),
     "update returns a state of another tree structure (3 leaves) than the one it is given (2 leaves)"),
    (lambda: with_select(lambda a, aux, step: (a.astype(jnp.float32), aux)),
     "select returns actions of shape (2,) and dtype float32; it must return an integer array of shape [N] = (2,)"),
    (lambda: with_select(lambda a, aux, step: (a[:1], aux)),
     "select returns actions of shape (1,) and dtype int32"),
    (lambda: with_update(lambda s, r, step: (s, r._replace(comm_up=jnp.ones(step.active.shape)))),
     "update reports comm_up of shape (2,); every Report field is a scalar of one run's step (shape ())"),
    (lambda: with_update(lambda s, r, step: (s, r._replace(rounds=jnp.ones((1, 1))))),
     "update reports rounds of shape (1, 1)"),
    (lambda: with_update(lambda s, r, step: (s, r._replace(errors=jnp.zeros(step.active.shape, jnp.int32)))),
     "update reports errors of shape (2,)"),
    (lambda: with_update(lambda s, r, step: (s, r._replace(errors=jnp.zeros(())))),
     "update reports errors of dtype float64; error bits are integers"),
    (lambda: with_update(lambda s, r, step: (s, r._replace(diagnostics={"size": jnp.ones(step.active.shape)}))),
     "update reports diagnostic size of shape (2,)"),
    (lambda: with_update(lambda s, r, step: (s, tuple(r))),
     "update returns a tuple as its report; return (state, core.Report)"),
])
def test_a_step_that_breaks_the_contract_is_a_misfit_before_anything_is_written(variant, why, tmp_path, capsys):
    register_algorithm("broken_toy", variant)
    status, _, err = cli_output(capsys, check_run(tmp_path, "broken_toy"))
    assert_refused(status, err, "broken_toy does not fit cosine: broken_toy: " + why, "the step contract")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError) as caught:  # the traced fit check (`curves.trace_fit`) says the same
        resolve([Curve("broken_toy", Spec("cosine", {"num_agents": 2, "dim": 4, "num_arms": 3, "horizon": 6}),
                       Spec("broken_toy"))], trace=True)
    assert str(caught.value) == err[0].removeprefix("bandits-jax: error: ")


def test_a_sound_plugin_passes_the_check_even_with_weakly_typed_leaves(tmp_path, capsys):
    """A leaf that starts as a Python number may come back with a dtype of its own (the scan promotes it)."""
    base = greedy()

    def init(key, spec, params, sizes, public):
        return {**base.init(key, spec, params, sizes, public), "n": 0}

    def update(params, state, step, actions, rewards, aux, key):
        new, rep = base.update(params, {**state, "n": jnp.asarray(state["n"], jnp.int32)}, step, actions, rewards,
                               aux, key)
        return new, rep._replace(comm_down=-0.0 * rep.comm_down)  # -0.0 is no negative count

    register_algorithm("good_toy", lambda: base._replace(init=init, update=update))
    status, out, err = cli_output(capsys, check_run(tmp_path, "good_toy"))
    assert status == 0 and err == [], err
    run = run_batch(make_problem("cosine", num_agents=2, dim=4, num_arms=3, horizon=6), make_algorithm("good_toy"),
                    [0, 1])
    assert run.errors.tolist() == [0, 0] and run.comm_up.sum() == 12.0 and np.all(run.comm_down == 0.0)


# ------------------------------------------------------------------------------------ running
def small_run(algorithm):
    """The toy variant run for 6 steps on 2 seeds of a 2-agent, 3-arm cosine problem; the failed-runs
    warning is expected, and its message returned with the output."""
    problem = make_problem("cosine", num_agents=2, dim=4, num_arms=3, horizon=6)
    with pytest.warns(FailedRunsWarning) as warned:
        out = run_batch(problem, algorithm, [0, 1], stop_on_error=False)
    return out, str(warned[0].message)


@pytest.mark.parametrize("change", [
    lambda a, aux, step: (a + step.contexts.shape[1], aux),  # K: one past the last arm, reads a NaN reward
    lambda a, aux, step: (a * 0 - 1, aux),  # -1 would read arm K-1 silently
])
def test_an_arm_outside_the_offered_ones_sets_its_own_bit(change):
    out, warning = small_run(with_select(change))
    assert np.all(out.errors & ERR_ARM) and not np.any(out.errors & ERR_COMM)
    assert "an active agent's action was outside [0, K)" in warning and "diverged training" not in warning


def test_an_inactive_agents_action_is_never_checked():
    """With one agent a step, the idle agent's action K + 5 is never used: no bit, the same regret."""
    def idle_far(a, aux, step):
        return jnp.where(step.active, a, step.contexts.shape[1] + 5), aux

    problem = problems.build_problem(Spec("cosine", {"num_agents": 2, "dim": 4, "num_arms": 3, "horizon": 6},
                                          (("one_arrival", {}),)))
    far, sound = (run_batch(problem, alg, [0, 1]) for alg in (with_select(idle_far), greedy()))
    assert far.errors.tolist() == [0, 0]
    np.testing.assert_array_equal(far.regret, sound.regret)


@pytest.mark.parametrize("field, value", [("comm_up", -1.0), ("comm_down", np.nan), ("rounds", np.inf)])
def test_negative_or_non_finite_communication_sets_its_own_bit(field, value):
    out, warning = small_run(with_update(lambda s, r, step: (s, r._replace(**{field: value + 0 * r.comm_up}))))
    assert out.errors.tolist() == [ERR_COMM, ERR_COMM]
    assert "a step reported negative or non-finite communication (comm_up, comm_down or rounds)" in warning


def test_the_runner_messages_name_each_bit_and_no_packaged_algorithm_uses_them():
    toy = greedy()
    assert set(RUNNER_ERRORS) == {ERR_ARM, ERR_COMM, ERR_NAN_STATE} and len({ERR_ARM, ERR_COMM, ERR_NAN_STATE}) == 3
    both = describe_errors(toy, ERR_ARM | ERR_NAN_STATE)
    assert both == f"Greedy: {runner.ARM_MESSAGE}" and "diverged" not in both
    assert describe_errors(toy, ERR_COMM | ERR_NAN_STATE) == (f"Greedy: {runner.COMM_MESSAGE}; "
                                                              f"{runner.NAN_STATE_MESSAGE}")
    for name, target in algorithms.ALGORITHMS.items():
        if isinstance(target, str):
            options = {"horizon": 2} if "horizon" in algorithms.algorithm_options(name) else {}
            assert not set(make_algorithm(name, **options).errors) & set(RUNNER_ERRORS), name
