"""Every registered algorithm on every registered problem: a pair either passes the traced check or is
refused with a one-line ConfigError before anything is written.

The check is `curves.check_fit` with `trace` (through `curves.resolve`, the way the registries build a
curve): a Trial needs an Arms world and a regret algorithm a Problem, an algorithm's declared arrivals
(`Algorithm.one_active`) must be the problem's, and its start and one step are traced on the problem's
real shapes. A refused pair is also given to the sweep (`sweep.run_experiment`), which must refuse it
the same way without creating its output folder; a sample of the passing pairs, across families, runs
to the end for a few steps.

The whole matrix (every packaged algorithm against every packaged problem, at the smallest sizes) is
marked slow, with the runs to the end: on a 2-core CPU the matrix takes about a minute (a third of it
building the CoPE-KB world), the runs to the end (every regret algorithm where it fits the two kinds of
arrivals, and a sample across families) about two minutes more, mostly compiling. The default suite
(about 10 s) keeps the pairs that once failed with a traceback, one pair per family, two runs to the end
and the command line's answer to the known-bad pairs.

Problems that read the shared data sets (../shared/data) skip with the reason where the data is
absent, except under CI=true, where a missing data set fails. MovieLens and Yelp have no shipped copy:
they read a small ratings file written here.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from bandits_jax.algorithms import ALGORITHMS, algorithm_options, build_algorithm
from bandits_jax.cli import main
from bandits_jax.core import ConfigError, Trial
from bandits_jax.curves import (WHERE, Curve, Run, Spec, arrivals_of, check_fit, parse_spec, problem_of,
                                resolve)
from bandits_jax.experiments.registry import Experiment
from bandits_jax.problems import BUILDERS
from bandits_jax.problems.datasets import DataNotFoundError
from bandits_jax.runner import describe_errors, run_batch
from bandits_jax.trials import run_trials
from bandits_jax.sweep import run_experiment

from helpers import REAL_DIR

pytestmark = pytest.mark.xdist_group("misfit_matrix")  # one worker: the problems it builds are reused

T = 4  # steps of every problem and of the runs to the end
SYNTHETIC = dict(num_agents=2, horizon=T, num_arms=3, dim=4)
DATA = dict(num_agents=2, horizon=T, download=False)
RATINGS = dict(num_agents=2, horizon=T, num_users=8, num_items=12, rank=2, num_arms=3)
SMALL = {  # packaged problem -> its smallest options; "{data}" and "{ratings}" are filled in by problem_spec
    "cosine": SYNTHETIC, "square": SYNTHETIC, "linear": SYNTHETIC,
    "shuttle": dict(DATA, data_dir="{data}"), "magic": dict(DATA, data_dir="{data}"),
    "mushroom": dict(DATA, data_dir="{data}"),
    "async-f1": SYNTHETIC, "async-f2": SYNTHETIC,
    "async-magic": dict(DATA, data_dir="{data}", num_arms=3, n_init=1),
    "async-mushroom": dict(DATA, data_dir="{data}", num_arms=3, n_init=1),
    "movielens": dict(RATINGS, path="{ratings}"), "yelp": dict(RATINGS, path="{ratings}"),
    "movielens-standin": dict(RATINGS, total_users=20, total_items=30, num_ratings=400),
    "yelp-standin": dict(RATINGS, total_users=20, total_items=30, num_ratings=400),
    "gaussian-arms": dict(num_agents=2, num_arms=3), "cope-kb": {},
    "coop-linear": SYNTHETIC, "coop-rbf": SYNTHETIC,
    **{f"duets-{f}": dict(num_agents=2, horizon=T, num_candidates=12) for f in ("h1", "h2", "branin", "hartmann4")},
}

# the packaged registries (a test elsewhere may register toys of its own in the same process)
PACKAGED_ALGORITHMS = [name for name, target in ALGORITHMS.items() if isinstance(target, str)]
PACKAGED_PROBLEMS = [name for name, builder in BUILDERS.items() if builder.__module__.startswith("bandits_jax.")]
ARRIVAL_PROBLEMS = ["cosine", "async-f1"]  # every agent acts; one agent a step
FAMILY_PROBLEMS = ["coop-linear", "duets-h1"]  # where the algorithms that need a graph or candidates run
SYNTHETIC_SPEC = Spec("cosine", SYNTHETIC)

# pairs that once passed the check and then failed inside JAX, or ran to the end with error bits
KNOWN_BAD = [
    ("coop-linear:num_agents=4", "duets"),
    ("coop-rbf:num_agents=4", "duets_authors"),
    ("duets-h1:num_agents=2,num_candidates=50", "fn_ucb"),
    ("cosine:num_agents=2,dim=4", "dis_kernel_ucb"),
    ("cosine:num_agents=2,dim=4", "async_kernel_ucb"),
    ("cosine:num_agents=2,dim=4", "n_kernel_ucb+capped_history:rows=8+capped_history:rows=4"),
]

# one pair per family, with whether it fits: (problem, algorithm, fits)
PER_FAMILY = [
    ("cosine", "kernel_ucb", True),             # single-agent baselines on a synthetic problem
    ("cosine", "fn_ucb", True),                 # FN-UCB
    ("duets-h1", "fn_ucb", False),              # ... not on a candidate set without contexts
    ("async-f1", "dis_kernel_ucb", True),       # asynchronous distributed methods
    ("cosine", "one_kernel_ucb", False),        # ... not where every agent acts
    ("async-f1", "n_kernel_ucb", True),         # independent agents, on any arrivals
    ("duets-h1", "duets", True),                # DUETS
    ("coop-linear", "duets", False),            # ... not without a candidate set
    ("coop-linear", "coop_kernel_ucb", True),   # cooperative methods
    ("cosine", "coop_kernel_ucb", False),       # ... not without a graph
    ("gaussian-arms", "uniform_allocation", True),  # phase-level trials
    ("cosine", "successive_elimination", False),    # ... not on a regret problem
    ("gaussian-arms", "linucb", False),             # a regret algorithm not on an Arms world
]

# passing pairs that run to the end, one per family (the first two also in the default suite)
RUN_TO_END = [
    ("cosine", "kernel_ucb"),
    ("async-f1", "dis_kernel_ucb"),
    ("duets-h1", "duets"),
    ("coop-linear", "naive_linucb"),
    ("async-f1", "fed_glb_ucb"),
    ("movielens-standin", "async_kernel_ucb"),
    ("square", "fn_ucb"),
    ("gaussian-arms", "successive_elimination"),
]


@pytest.fixture(scope="module")
def ratings_file(tmp_path_factory) -> Path:
    """A small user,item,rating file, read by the MovieLens and Yelp problems (neither data set ships)."""
    rng = np.random.default_rng(0)
    rows = [f"{u},{i},{rng.integers(1, 6)}" for u in range(12) for i in range(16) if rng.random() < 0.8]
    path = tmp_path_factory.mktemp("ratings") / "ratings.csv"
    path.write_text("user,item,rating\n" + "\n".join(rows) + "\n")
    return path


def problem_spec(name: str, ratings: Path) -> Spec:
    """The Spec of packaged problem `name` at its smallest size, built once (`curves.problem_of`, which
    the sweep reuses); a missing shared data set skips, unless CI=true."""
    fill = {"{data}": str(REAL_DIR), "{ratings}": str(ratings)}
    spec = Spec(name, {k: fill.get(v, v) if isinstance(v, str) else v for k, v in SMALL[name].items()})
    try:
        problem_of(spec)
    except DataNotFoundError as err:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"{name} needs a data set that is absent here: {err}")
    return spec


def algorithm_spec(text: str) -> Spec:
    """The Spec of an algorithm as the command line writes it, with the run's horizon where its factory
    takes one (as the command line fills it in)."""
    spec = parse_spec(text, "--algorithm")
    return spec.with_options(horizon=T) if "horizon" in algorithm_options(spec.name) else spec


def verdict(pspec: Spec, aspec: Spec):
    """None where the pair passes the traced check, else its ConfigError's message. Any other exception
    propagates: that is the failure this file guards against."""
    try:
        resolve([Curve(aspec.name, pspec, aspec)], trace=True)
    except ConfigError as err:
        return str(err)
    return None


def assert_one_line(message: str, pspec: Spec, aspec: Spec) -> None:
    assert "\n" not in message and message.strip() == message, message
    assert "Traceback" not in message, message
    assert aspec.name in message, message
    if not message.startswith(f"algorithm {aspec.name}:"):  # a bad algorithm spec names the algorithm alone
        assert pspec.name in message, message


def assert_sweep_refuses(pspec: Spec, aspec: Spec, out: Path) -> None:
    """The sweep refuses the pair with one line before its output folder exists."""
    curve = Curve(aspec.name, pspec, aspec)
    exp = Experiment("misfit/pair", "one pair of the misfit matrix", {}, {"check": {}}, lambda config: [curve])
    with pytest.raises(ConfigError) as caught:
        run_experiment(exp, "check", {"seeds": 1, "horizon": T}, out=out, quiet=True, plot=False, curves=False)
    assert_one_line(str(caught.value), pspec, aspec)
    assert not out.exists(), f"{out} was created for a refused pair"


def matrix_row(problem: str, ratings: Path, out: Path) -> dict:
    """{algorithm: None (passes) or its one-line refusal} for every packaged algorithm on `problem`; a
    pair that raises anything but a one-line ConfigError, or that the sweep does not refuse before
    writing, fails the test (all such pairs of the row are listed together)."""
    pspec = problem_spec(problem, ratings)
    row, broken = {}, []
    for name in PACKAGED_ALGORITHMS:
        aspec = algorithm_spec(name)
        try:
            row[name] = verdict(pspec, aspec)
            if row[name] is not None:
                assert_one_line(row[name], pspec, aspec)
                assert_sweep_refuses(pspec, aspec, out / name)
        except Exception as err:  # noqa: BLE001 - every bad pair of the row is reported at once
            first = (str(err).strip().splitlines() or [""])[0]
            broken.append(f"{problem} x {name}: {type(err).__name__}: {first}")
    assert not broken, "pairs that neither pass nor are refused in one line:\n" + "\n".join(broken)
    return row


# ------------------------------------------------------------------------------------ the full matrix
def test_matrix_covers_every_packaged_problem():
    assert sorted(SMALL) == sorted(PACKAGED_PROBLEMS), "give every packaged problem its smallest size in SMALL"


@pytest.mark.slow
@pytest.mark.parametrize("problem", PACKAGED_PROBLEMS)
def test_every_algorithm_passes_or_is_refused_in_one_line(problem, ratings_file, tmp_path):
    row = matrix_row(problem, ratings_file, tmp_path)
    refused = sum(v is not None for v in row.values())
    print(f"{problem}: {len(row)} pairs, {len(row) - refused} pass, {refused} refused")


@pytest.mark.slow
@pytest.mark.parametrize("problem, algorithm", RUN_TO_END)
def test_sample_of_passing_pairs_runs_to_the_end(problem, algorithm, ratings_file):
    run_to_end(problem, algorithm, ratings_file)


# ------------------------------------------------------------------------------------ default suite
@pytest.mark.parametrize("problem, algorithm", KNOWN_BAD)
def test_known_bad_pairs_are_refused_in_one_line(problem, algorithm, tmp_path):
    pspec, aspec = parse_spec(problem, "--problem").with_options(horizon=T), algorithm_spec(algorithm)
    message = verdict(pspec, aspec)
    assert message is not None, f"{algorithm} on {problem} passed the check"
    assert_one_line(message, pspec, aspec)
    assert_sweep_refuses(pspec, aspec, tmp_path / "out")


@pytest.mark.parametrize("problem, algorithm", KNOWN_BAD)
def test_command_line_refuses_known_bad_pairs_with_one_line(problem, algorithm, tmp_path, capsys):
    out = tmp_path / "x"
    code = main(["run", "--problem", problem, "--algorithm", algorithm, "--horizon", str(T), "--seeds", "1",
                 "--out", str(out), "--no-plot", "--quiet", "--no-curve-cache"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("bandits-jax: error: "), err
    assert not out.exists() and list(tmp_path.iterdir()) == [], "a refused pair left files behind"


@pytest.mark.parametrize("problem, algorithm, fits", PER_FAMILY)
def test_one_pair_per_family(problem, algorithm, fits, ratings_file):
    pspec, aspec = problem_spec(problem, ratings_file), algorithm_spec(algorithm)
    message = verdict(pspec, aspec)
    assert (message is None) == fits, message or f"{algorithm} on {problem} passed the check"
    if message is not None:
        assert_one_line(message, pspec, aspec)


@pytest.mark.parametrize("problem, algorithm", RUN_TO_END[:2])
def test_passing_pairs_run_to_the_end(problem, algorithm, ratings_file):
    run_to_end(problem, algorithm, ratings_file)


def test_arrival_refusal_names_the_arrivals_and_where_to_find_them(ratings_file):
    message = verdict(problem_spec("cosine", ratings_file), algorithm_spec("dis_kernel_ucb"))
    assert "exactly one active agent a step" in message and "every agent acting at every step" in message
    assert "one_arrival" in message


def test_problems_the_arrival_message_names_have_those_arrivals(ratings_file):
    """The problems `curves.WHERE` names as examples have the arrivals it names them for."""
    assert "async-*" in WHERE[True] and "movielens, yelp and their stand-ins" in WHERE[True]
    for name in ("async-f1", "async-f2", "movielens", "yelp", "movielens-standin", "yelp-standin"):
        assert arrivals_of(problem_of(problem_spec(name, ratings_file))) is True, name
    for name in ("cosine", "coop-linear", "duets-h1"):
        assert arrivals_of(problem_of(problem_spec(name, ratings_file))) is False, name
        assert name in WHERE[False]


def test_one_arrival_wrapper_makes_a_one_active_algorithm_fit(ratings_file):
    pspec = problem_spec("cosine", ratings_file)
    assert verdict(pspec._replace(wrappers=(("one_arrival", {}),)), algorithm_spec("dis_kernel_ucb")) is None


def test_an_algorithm_that_needs_every_agent_is_refused_where_one_acts(ratings_file):
    """The reverse arrivals (`Algorithm.one_active=False`, which no packaged algorithm needs yet)."""
    pspec, aspec = problem_spec("async-f1", ratings_file), algorithm_spec("kernel_ucb")
    algorithm = build_algorithm(aspec)._replace(one_active=False)
    with pytest.raises(ConfigError) as caught:
        check_fit(Run(Curve(aspec.name, pspec, aspec), problem_of(pspec), algorithm))
    message = str(caught.value)
    assert_one_line(message, pspec, aspec)
    assert "it needs every agent acting at every step" in message and "exactly one active agent" in message
    check_fit(Run(Curve(aspec.name, SYNTHETIC_SPEC, aspec), problem_of(SYNTHETIC_SPEC), algorithm))


def regret_algorithms() -> list:
    """The packaged algorithms that run steps (a phase-level trial has no arrivals)."""
    return [a for a in PACKAGED_ALGORITHMS if not isinstance(build_algorithm(algorithm_spec(a)), Trial)]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", regret_algorithms())
def test_declared_arrivals_are_the_ones_it_runs_on(algorithm, ratings_file):
    """Wherever a regret algorithm passes the check on a problem where every agent acts (cosine) or one
    agent a step (async-f1), it runs T steps there without error bits: an algorithm built for one active
    agent that does not declare it (`Algorithm.one_active`) fails here, not on a user's machine. An
    algorithm that fits neither runs on its own family's problem (coop-linear, duets-h1) instead."""
    fits = [p for p in ARRIVAL_PROBLEMS if verdict(problem_spec(p, ratings_file), algorithm_spec(algorithm)) is None]
    if not fits:
        fits = [p for p in FAMILY_PROBLEMS if verdict(problem_spec(p, ratings_file), algorithm_spec(algorithm)) is None]
    assert fits, f"{algorithm} fits none of {', '.join(ARRIVAL_PROBLEMS + FAMILY_PROBLEMS)}"
    for problem in fits:
        run_to_end(problem, algorithm, ratings_file)


def test_a_wrapper_given_twice_is_refused_in_one_line(ratings_file):
    pspec = problem_spec("cosine", ratings_file)
    aspec = algorithm_spec("n_kernel_ucb+capped_history:rows=8+capped_history:rows=4")
    message = verdict(pspec, aspec)
    assert message is not None and "capped_history" in message and "more than once" in message
    assert_one_line(message, pspec, aspec)


def run_to_end(problem: str, algorithm: str, ratings: Path) -> None:
    """The pair passes the check, then runs T steps (a trial: one whole trial) without error bits."""
    pspec, aspec = problem_spec(problem, ratings), algorithm_spec(algorithm)
    assert verdict(pspec, aspec) is None
    (run,) = resolve([Curve(aspec.name, pspec, aspec)], trace=False)
    if isinstance(run.algorithm, Trial):
        out = run_trials(run.problem, run.algorithm, [0])
        assert set(run.algorithm.outcomes) <= set(out.outcomes)
    else:
        out = run_batch(run.problem, run.algorithm, [0], stop_on_error=False)
        assert out.regret.shape == (1, T, run.problem.num_agents)
        assert np.all(np.isfinite(out.regret))
    bits = int(np.bitwise_or.reduce(np.asarray(out.errors).ravel()))
    assert bits == 0, describe_errors(run.algorithm, bits)
