"""Bad input is refused everywhere: one line on stderr, exit status 2, nothing written, before anything
compiles.

The probes drive the command line in-process (`cli.main`) with `run --check`, which validates what a
run validates and stops before compiling or writing: every key of every registered experiment with
values just outside what it allows (and values of the wrong type), every option of every registered
algorithm and problem likewise, and experiment files (TOML) with wrong-typed values.
"""
from __future__ import annotations

import inspect
import math

import pytest

from bandits_jax import cli
from bandits_jax.algorithms import ALGORITHMS, algorithm_factory, make_algorithm
from bandits_jax.core import UNBOUNDED_SIGNS, ConfigError
from bandits_jax.experiments.catalog import experiments
from bandits_jax.experiments.registry import ANY, COMMON_BOUNDS, resolve_config
from bandits_jax.problems import BUILDERS, make_problem

from helpers import run_cli


def invalid_values(value, bound) -> list:
    """Values a configuration key with default `value` and its Bound must refuse, as --set strings."""
    if isinstance(value, bool):
        return ["maybe"]
    if isinstance(value, int):
        outside = [str(int(bound.low) - 1)] if bound.low is not None else []
        outside += [str(int(bound.high) + 1)] if bound.high is not None else []
        return outside + ["2.5", "abc"]
    if isinstance(value, float):
        outside = [repr(float(bound.low))] if bound.low is not None and bound.open_low else []
        outside += [repr(bound.low - 1.0)] if bound.low is not None and not bound.open_low else []
        outside += [repr(float(bound.high))] if bound.high is not None and bound.open_high else []
        outside += [repr(bound.high + 1.0)] if bound.high is not None and not bound.open_high else []
        return outside + ["nan", "inf", "abc"]
    if isinstance(value, str):
        return ["no-such-value"]
    return []


def experiment_probes() -> list:
    """(experiment, key, value) of every invalid value of every key of every registered experiment."""
    probes = []
    for name, exp in experiments().items():
        size = "smoke" if "smoke" in exp.sizes else next(iter(exp.sizes))
        bounds = {**COMMON_BOUNDS, **exp.bounds}
        for key, value in resolve_config(exp, size, {}).items():
            probes += [(name, size, key, bad) for bad in invalid_values(value, bounds.get(key, ANY))]
    return probes


class DataRead(Exception):
    """A data set, ratings file or graph was read: a refusal came too late."""


@pytest.fixture
def no_data_read(monkeypatch):
    """Every loader of real data raises DataRead: a bad key or option must be refused before any data is
    looked for, so these tests pass alike with and without the shared data (and never reach the network)."""
    from bandits_jax.problems import datasets, graphs, ratings

    def read(*args, **kwargs):
        raise DataRead(f"data read for {args[:1]}")

    for module, name in ((datasets, "_load"), (ratings, "load_ratings"), (graphs, "find_graph_file")):
        monkeypatch.setattr(module, name, read)


def test_every_experiment_key_refuses_invalid_values(capsys, tmp_path, no_data_read):
    probes, accepted, wrong = experiment_probes(), [], []
    for name, size, key, bad in probes:
        out = tmp_path / "out"
        try:
            status, err = run_cli(capsys, ["run", name, "--size", size, "--set", f"{key}={bad}", "--out", str(out),
                                           "--check", "--quiet", "--no-plot"])
        except DataRead:
            status, err = "data read first", []
        if status == 0:
            accepted.append(f"{name} {key}={bad}")
        elif status != 2 or len(err) != 1 or (key not in err[0] and bad not in err[0]) or out.exists():
            wrong.append(f"{name} {key}={bad}: status {status}, {err[-3:]}, written: {out.exists()}")
    assert len(probes) > 1000
    assert not accepted, f"{len(accepted)} invalid values accepted: {accepted[:20]}"
    assert not wrong, f"{len(wrong)} refusals that are not one line naming the key: {wrong[:10]}"


def option_values(default) -> list:
    """Invalid values of a factory, builder or wrapper option whose default is `default`."""
    if isinstance(default, bool):
        return ["abc", 2]
    if isinstance(default, int):
        return [2.5, "abc"]
    if isinstance(default, float):
        return [math.nan, math.inf, "abc"]
    if isinstance(default, str):
        return ["no-such-value"]
    return []


# options set beside the probed one: small sizes, and for the DUETS factories their required horizon
SMALL = {"num_agents": 2, "horizon": 10, "n_init": 1, "total_users": 50, "total_items": 60, "num_ratings": 500,
         "num_users": 40, "num_items": 50}


def option_probes(registry: dict, function_of) -> list:
    """(name, base options, option, invalid value) of every option with a default of every name the
    package registers (not the toys other test files add)."""
    probes = []
    for name in registry:
        if not function_of(name).__module__.startswith("bandits_jax."):
            continue
        params = inspect.signature(function_of(name)).parameters
        base = {k: v for k, v in SMALL.items() if k in params}
        probes += [(name, base, p.name, bad) for p in params.values() if p.default is not p.empty
                   for bad in option_values(p.default)]
    return probes


# options whose range the factory checks (the type check covers the rest of each option)
RANGE_PROBES = [("kernel_ucb", "beta", -1.0), ("kernel_ucb", "lam", 0.0), ("oful", "delta", 2.0),
                ("cokernel_fc", "delta", 1.5), ("successive_elimination", "delta", 2.0), ("igp_ucb", "delta", 0.0),
                ("async_kernel_ucb", "eig_tol", -1.0), ("duets", "eig_tol", 1.0), ("duets", "first_epoch", 0),
                ("approx_dis_kernel_ucb_duets", "forced_sync", -2), ("n_kernel_ucb", "max_history", 0)]


def assert_refused(build, what: str, option: str) -> None:
    with pytest.raises(ConfigError) as err:
        build()
    message = str(err.value)
    assert "\n" not in message and option in message, f"{what}: {message!r}"


def admits_inf(name: str, option: str) -> bool:
    """True where `option` of algorithm `name` is a hyper-parameter whose sign admits +inf (a trigger)."""
    params = make_algorithm(name, **({"horizon": 10} if name.startswith("duets") else {})).params
    return option in params and params[option].sign in UNBOUNDED_SIGNS


def test_every_algorithm_option_refuses_invalid_values():
    probes = [(name, base, option, bad) for name, base, option, bad in option_probes(ALGORITHMS, algorithm_factory)
              if not (bad == math.inf and admits_inf(name, option))]
    for name, base, option, bad in probes:
        assert_refused(lambda: make_algorithm(name, **{**base, option: bad}), f"{name}:{option}={bad!r}", option)
    for name, option, bad in RANGE_PROBES:
        base = {"horizon": 10} if name.startswith("duets") else {}
        assert_refused(lambda: make_algorithm(name, **{**base, option: bad}), f"{name}:{option}={bad!r}", option)
    assert len(probes) > 500


def test_every_problem_option_refuses_invalid_values(no_data_read):
    probes = option_probes(BUILDERS, BUILDERS.get)
    probes += [(name, {"num_agents": 2}, option, bad) for name in ("cosine", "duets-h1", "coop-linear")
               for option, bad in (("num_agents", 0), ("horizon", -3), ("num_arms", 0), ("seed", -1),
                                   ("noise_std", -1.0), ("p", 1.5)) if option in inspect.signature(BUILDERS[name]).parameters]
    for name, base, option, bad in probes:  # no data is read (no_data_read)
        assert_refused(lambda: make_problem(name, **{**base, option: bad}), f"{name}:{option}={bad!r}", option)
    assert len(probes) > 250


def test_missing_required_option_is_one_line():
    assert_refused(lambda: make_algorithm("duets"), "duets without horizon", "horizon")


@pytest.mark.parametrize("argv, says", [
    (["run", "quickstart", "--set", "lam=-1"], "lam must be a number > 0"),
    (["run", "quickstart", "--seeds", "2.5"], "--seeds"),
    (["run", "cope/fc-rank1", "--set", "delta=1.5"], "delta must be a number in (0, 1)"),
    (["run", "duets/h1", "--size", "smoke", "--set", "candidate_seed=-1"], "candidate_seed"),
    (["run", "--problem", "cosine", "--algorithm", "kernel_ucb:beta=inf"], "beta must be a finite number"),
    (["run", "--problem", "cosine", "--algorithm", "oful:delta=2"], "delta"),
    (["run", "--problem", "gaussian-arms", "--algorithm", "successive_elimination:delta=2"], "delta"),
    (["run", "--problem", "cosine+pad_to_even:x=1", "--algorithm", "linucb"], "unknown option(s) x"),
    (["run", "--problem", "cosine:horizon=5", "--horizon", "7", "--algorithm", "linucb"], "horizon"),
    (["run", "--problem", "cosine:horizon=-3", "--algorithm", "linucb"], "horizon"),
])
def test_command_line_refusals_are_one_line(capsys, tmp_path, argv, says):
    out = tmp_path / "out"
    status, err = run_cli(capsys, argv + ["--out", str(out), "--quiet", "--no-plot", "--check"])
    assert (status, len(err)) == (2, 1), err
    assert says in err[0] and not out.exists()


def test_folders_that_are_files_are_refused_before_computing(capsys, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for flag in ("--out", "--curves"):
        target = a_file if flag == "--out" else a_file / "cache"
        status, err = run_cli(capsys, ["run", "quickstart", "--size", "smoke", flag, str(target), "--quiet"])
        assert (status, len(err)) == (2, 1) and "is a file" in err[0], err


def test_check_writes_nothing_and_says_the_plan(capsys, tmp_path):
    out = tmp_path / "out"
    status = cli.main(["run", "bai/elimination", "--size", "smoke", "--out", str(out), "--check"])
    printed = capsys.readouterr().out
    assert status == 0 and not out.exists()
    assert "Successive elimination [delta=0.01]" in printed and "nothing was written" in printed


TOML_EDITS = [  # (what the file says, what replaces it, a word the refusal names)
    ("horizon = 1000", 'horizon = "abc"', "horizon"),
    ("seeds = 16", "seeds = 2.5", "seeds"),
    ("seeds = 16", "seeds = 0", "seeds"),
    ("gap = 0.5, ", "gap = nan, ", "gap"),
    ('name = "Successive elimination"', "name = 7", "name"),  # a curve's name is text
    ("vmap_size = 0\n", "vmap_size = 0\nlam = 3\n", "lam"),  # a [config] key that no curve reads
    ('tags = {method = "successive elimination"}', 'stream = "abc"', "stream"),
    ('{label = "delta=0.01", delta = 0.01}', "{delta = 0.01}", "label"),
    ("se_ddof = 0", 'se_ddof = "x"', "se_ddof"),
    ('agents = "mean"', 'agents = "median"', "agents"),
    ('band = "se"', "band = 3", "band"),
    ("options = {budget = 2000}", 'options = {budget = "many"}', "budget"),
    ('"uniform_allocation", options', '"uniform_allocation", wrappers = [{rows = 2}], options', "wrappers"),
]


def test_experiment_files_with_wrong_types_are_one_line(capsys, tmp_path):
    assert cli.main(["show", "bai/elimination", "--size", "smoke", "--toml"]) == 0
    text = capsys.readouterr().out
    for old, new, names in TOML_EDITS:
        assert old in text, old
        path, out = tmp_path / "exp.toml", tmp_path / "out"
        path.write_text(text.replace(old, new, 1))
        status, err = run_cli(capsys, ["run", str(path), "--out", str(out), "--quiet", "--no-plot"])
        assert (status, len(err)) == (2, 1) and names in err[0], (new, err)
        assert not out.exists(), f"{new}: {out} was written"


class _Report:
    def __init__(self, skipped, reason):
        self.skipped, self.longrepr = skipped, ("test_x.py", 3, f"Skipped: {reason}")


def test_a_skip_for_want_of_the_shared_data_fails_under_ci():
    from helpers import data_skip_failure, no_data_reason

    missing = _Report(True, no_data_reason("magic.dat"))
    assert "CI=true" in data_skip_failure(missing, {"CI": "true"})
    assert data_skip_failure(missing, {}) == ""  # a user's clone without the data skips
    assert data_skip_failure(_Report(True, "Linux-only guard"), {"CI": "true"}) == ""
    assert data_skip_failure(_Report(False, ""), {"CI": "true"}) == ""


def test_every_numeric_key_of_the_package_declares_its_range():
    from bandits_jax.experiments.registry import unbounded_keys

    package = {name: exp for name, exp in experiments().items() if exp.build.__module__.startswith("bandits_jax.")}
    missing = {name: unbounded_keys(exp) for name, exp in package.items() if unbounded_keys(exp)}
    assert len(package) >= 30
    assert not missing
