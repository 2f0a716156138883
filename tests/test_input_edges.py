"""The smaller refusals of the command line: flags that would be ignored, the arena's own limits and
specs, a cooperative world of one agent, the meaning of forced_sync = 0, and Ctrl-C.

Each refusal is one stderr line, exit status 2, nothing written, before anything computes.
"""
from __future__ import annotations

import numpy as np
import pytest

from bandits_jax import arena, cli
from bandits_jax.algorithms import build_algorithm
from bandits_jax.core import ConfigError
from bandits_jax.curves import parse_spec
from bandits_jax.problems import build_problem, make_problem
from bandits_jax.runner import run_batch

from helpers import run_cli

ADHOC = ["run", "--problem", "cosine:num_agents=2", "--algorithm", "linucb"]
ARENA = ["arena", "--size", "smoke", "--problem", "cosine", "--algorithm", "linucb"]


@pytest.mark.parametrize("argv, says", [
    (ADHOC + ["--size", "smoke"], "--size smoke names a size of a registered experiment"),
    (ADHOC + ["--curves", "somewhere", "--no-curve-cache"], "--no-curve-cache"),
    (ARENA + ["--curves", "somewhere", "--no-curve-cache"], "--no-curve-cache"),
    (ARENA + ["--seeds", "1000000000"], "--seeds 1000000000 is more than the arena has room for (1000000"),
    (ARENA + ["--tuning-seeds", str(2 ** 32)], "--tuning-seeds"),
    (["arena", "--size", "smoke", "--problem", "cosine:horizon=-3", "--algorithm", "linucb"],
     "leave horizon out of the spec"),
    (["arena", "--size", "smoke", "--problem", "cosine:num_agents=0", "--algorithm", "linucb"], "num_agents"),
    (["run", "--problem", "coop-rbf:num_agents=1", "--algorithm", "linucb"], "num_agents must be at least 2"),
    (["arena", "--size", "smoke", "--problem", "cosine", "--algorithm", "cokernel_fc"], "phase-level trial"),
    (["arena", "--size", "smoke", "--problem", "cosine", "--algorithm", "kernel_ucb:beta=-1"], "beta must be"),
])
@pytest.mark.parametrize("check", [True, False])
def test_ignored_flags_and_out_of_range_arena_input_are_refused(capsys, tmp_path, argv, says, check):
    out = tmp_path / "out"
    status, err = run_cli(capsys, argv + ["--out", out, "--quiet"] + ["--check"] * check)
    assert (status, len(err)) == (2, 1), err
    assert says in err[0] and not out.exists()


def test_the_arena_checks_its_reported_run_before_tuning_computes(capsys, tmp_path, monkeypatch):
    def refused(*args):
        raise ConfigError("the reported run is refused")

    monkeypatch.setattr(arena, "_reported_curves", refused)
    out = tmp_path / "out"
    status, err = run_cli(capsys, ARENA + ["--out", out, "--quiet"])
    assert (status, err) == (2, ["bandits-jax: error: the reported run is refused"])
    assert not out.exists()  # the tuning run did not start


def test_a_cooperative_world_needs_two_agents():
    with pytest.raises(ConfigError, match="num_agents must be at least 2"):
        make_problem("coop-linear", num_agents=1)


def test_forced_sync_zero_forces_the_first_synchronisation_at_the_first_step():
    """forced_sync is a 0-based step: 0 forces a round at the very first step, -1 none (the threshold is
    out of reach, so no other round happens)."""
    problem = build_problem(parse_spec("duets-h1:num_agents=2,horizon=6,num_candidates=16"))
    rounds = {}
    for forced in (-1, 0, 3):
        spec = parse_spec(f"approx_dis_kernel_ucb_duets:forced_sync={forced},threshold=1e9,storage=candidates"
                          "+on_candidates")
        rounds[forced] = np.flatnonzero(run_batch(problem, build_algorithm(spec), [0]).rounds[0]).tolist()
    assert rounds == {-1: [], 0: [0], 3: [3]}


def test_ctrl_c_is_one_line_that_says_the_chunks_are_kept(capsys, tmp_path, monkeypatch):
    from bandits_jax import sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "_compute", interrupted)
    status, err = run_cli(capsys, ADHOC + ["--out", tmp_path / "out", "--quiet", "--no-plot"])
    assert status == cli.EXIT_INTERRUPTED == 130
    assert err == ["bandits-jax: interrupted; every chunk finished so far is kept, and the same command resumes "
                   "from them"]
