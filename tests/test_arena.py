"""The arena (bandits_jax/arena.py): its parts against hand-worked cases, a user's plugin run in it on
equal terms, its refusals before anything compiles, and docs/arena.md regenerated from its record."""
from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from bandits_jax import algorithms, arena, arena_page, arena_stats
from bandits_jax.cli import main
from bandits_jax.reporting.results import load_results
from helpers import arena_record

ROOT = Path(__file__).resolve().parents[1]
RECORD = arena_record()

TOY = textwrap.dedent('''
    """A user's own algorithm: LinUCB under another name, so its numbers must equal LinUCB's."""
    from bandits_jax.algorithms import make_algorithm, register_algorithm


    def toy_ucb(lam=1.0, beta=1.0):
        """Toy: LinUCB renamed."""
        return make_algorithm("linucb", lam=lam, beta=beta)._replace(name="Toy")


    register_algorithm("toy_ucb", toy_ucb, exploration=("beta",))
''')


@pytest.fixture
def own_registry(monkeypatch):
    """ALGORITHMS as a copy, so a plugin's names leave with the test."""
    monkeypatch.setattr(algorithms, "ALGORITHMS", dict(algorithms.ALGORITHMS))
    monkeypatch.setattr(algorithms, "TUNINGS", dict(algorithms.TUNINGS))


def test_ranks_share_ties_and_put_nan_last():
    assert arena_stats.ranks([3.0, 1.0, 3.0, float("nan"), 2.0]) == [3.5, 1.0, 3.5, 5.0, 2.0]


def test_pareto_front_keeps_the_undominated_points():
    points = [(0, 5.0), (10, 2.0), (10, 3.0), (100, 2.0), (5, 5.0), (1000, 1.0)]
    assert arena_stats.pareto_front(points) == [True, True, False, False, False, True]


def test_grids_scale_the_declared_parameters_and_extend_past_an_edge():
    assert arena.grid_points({"beta": 2.0, "lam": 1.0}, ("beta",), (0.5, 1.0)) == (
        ("x0.5", {"beta": 1.0}), ("x1", {"beta": 2.0}))
    factors = arena.TUNING_FACTORS
    assert arena.extended(factors, 10.0) == pytest.approx((0.1, 0.3, 1.0, 3.0, 10.0, 100 / 3))
    assert arena.extended(factors, 0.03) == pytest.approx((0.009, 0.03, 0.1, 0.3, 1.0, 3.0))


def test_every_name_declares_what_may_be_tuned():
    """Every packaged name has a declaration that fits what it builds; the knobs of the communicating
    families are traced hyper-parameters with at least four operating points."""
    from bandits_jax.algorithms.tuning import MIN_KNOB_POINTS, check_tuning

    packaged = {n for n, target in algorithms.ALGORITHMS.items() if isinstance(target, str)}
    assert packaged <= set(algorithms.TUNINGS)
    for entry in arena.arena_algorithms(("all",)):
        tuning = algorithms.tuning_of(entry.spec.name)
        check_tuning(entry.label, tuning, arena._defaults(entry))
    knobs = {n: algorithms.tuning_of(n).knob for n in ("fn_ucb", "async_kernel_ucb", "dis_kernel_ucb", "duets")}
    assert {n: k.param for n, k in knobs.items()} == {"fn_ucb": "D", "async_kernel_ucb": "threshold",
                                                       "dis_kernel_ucb": "threshold", "duets": "p0"}
    assert all(len(k.values) >= MIN_KNOB_POINTS for k in knobs.values())


def test_a_declaration_that_does_not_fit_is_refused(own_registry):
    from bandits_jax.algorithms.tuning import Knob, Tuning, check_tuning
    from bandits_jax.core import ConfigError

    defaults = {"beta": 1.0, "lam": 1.0, "threshold": 1.0, "zero": 0.0}
    for bad, message in [(Tuning(("nu",)), "not one of its hyper-parameters"),
                         (Tuning(("zero",)), "positive default"),
                         (Tuning((), Knob("threshold", (1.0, 2.0, 3.0))), "at least 4"),
                         (Tuning((), Knob("threshold", (4.0, 3.0, 2.0, 1.0))), "ascending"),
                         (Tuning((), Knob("threshold", (2.0, 3.0, 4.0, 5.0))), "include its default")]:
        with pytest.raises(ConfigError, match=message):
            check_tuning("mine", bad, defaults)
    with pytest.raises(ConfigError, match="exploration must be a tuple"):
        algorithms.register_algorithm("mine_ucb", lambda: None, exploration="beta")


def test_all_means_every_regret_algorithm_and_the_whole_benchmark():
    names = [e.label for e in arena.arena_algorithms(("all",))]
    assert "fn_ucb" in names and "duets" in names and "coop_kernel_ucb" in names
    assert "cokernel_fc" not in names  # a phase-level trial has no regret
    assert [p.label for p in arena.arena_problems("smoke")] == [b.label for b in arena.BENCH]
    mine = arena.arena_problems("smoke", ("cosine", "linear:num_agents=2,horizon=12"))
    assert [p.label for p in mine] == ["cosine", "linear:num_agents=2,horizon=12"]


@pytest.mark.parametrize("argv, message", [
    (["--size", "huge"], "no size 'huge'"),
    (["--factors", "0.1,-1"], "distinct positive"),
    (["--factors", "a,b"], "--factors takes numbers"),
    (["--seeds", "1"], "at least 2 seeds"),
    (["--algorithm", "no_such"], "unknown algorithm 'no_such'"),
    (["--problem", "no_such"], "unknown problem 'no_such'"),
    (["--plugin", "no_such_module_anywhere"], "--plugin no_such_module_anywhere: cannot import it"),
    (["--algorithm", "duets", "--problem", "async-f1"], "no algorithm fits any problem"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, capsys, argv, message):
    out = tmp_path / "arena"
    assert main(["arena", "--size", "smoke", "--out", str(out), "--quiet", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_plugin_joins_the_arena_on_equal_terms(tmp_path, own_registry, capsys):
    """A toy algorithm from a temporary module: it fits where LinUCB fits, draws the same random numbers
    (its regret equals LinUCB's seed for seed, at every grid point), its tuned point is the grid's best
    on the tuning seeds, which are not the reported ones, and the audit finds it isolated."""
    plugin = tmp_path / "toy_plugin.py"
    plugin.write_text(TOY)
    out = tmp_path / "arena"
    argv = ["arena", "--size", "smoke", "--plugin", str(plugin), "--problem", "cosine", "--problem", "async-f1",
            "--algorithm", "toy_ucb", "--algorithm", "linucb", "--algorithm", "duets", "--out", str(out), "--quiet",
            "--no-curve-cache", "--factors", "0.3,1,3"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "toy_ucb" in printed and "fit matrix" in printed
    doc = json.loads((out / "arena.json").read_text())
    assert doc["fits"]["cosine"]["toy_ucb"] == "" and "candidate" in doc["fits"]["cosine"]["duets"]
    assert doc["comm_unit"] == "scalars per receiver" and "isolated" in doc["audits"]["toy_ucb"]
    res, tuning = load_results(out), load_results(out / "tuning")
    assert set(res.seeds.tolist()).isdisjoint(tuning.seeds.tolist())
    pairs = {(p["problem"], p["algorithm"]): p for p in doc["pairs"]}
    for problem in ("cosine", "async-f1"):
        pick, lin = pairs[(problem, "toy_ucb")], pairs[(problem, "linucb")]
        assert {k: pick[k] for k in ("factor", "scores", "window")} == {k: lin[k] for k in ("factor", "scores",
                                                                                            "window")}
        assert 1.0 in pick["window"] and pick["factor"] in pick["window"]
        for f in pick["window"]:
            np.testing.assert_array_equal(res.arrays[f"{problem}: toy_ucb [x{f:g}]"]["regret"],
                                          res.arrays[f"{problem}: linucb [x{f:g}]"]["regret"])
        assert pick["scores"][f"{pick['factor']:g}"][0] == min(v[0] for v in pick["scores"].values())
    page = (out / "arena.md").read_text()
    assert "| toy_ucb | beta = 1 |" in page and (out / "pareto.png").stat().st_size > 0
    rows = arena_page.problem_rows(res, doc, "cosine")
    assert {r["algorithm"] for r in rows} == {"toy_ucb", "linucb"} and all(r["rank"] == 1.5 for r in rows)
    table = (out / "arena.csv").read_text().splitlines()
    assert table[0].startswith("problem,algorithm,adapter,point") and len(table) == 1 + 2 * 2 * 2 * 2
    assert main(argv) == 0  # a second run resumes: everything is read back, no chunk is computed again
    again = json.loads((out / "arena.json").read_text())["timing"]
    assert (again["compile_seconds"], again["run_seconds"]) == (doc["timing"]["compile_seconds"],
                                                                doc["timing"]["run_seconds"])


UNSTABLE = textwrap.dedent('''
    """A user's algorithm that breaks at large exploration: LinUCB whose reports carry an error bit when
    beta is above 2 (the grid's point x3 of beta = 1)."""
    import jax.numpy as jnp

    from bandits_jax.algorithms import make_algorithm, register_algorithm


    def unstable_ucb(lam=1.0, beta=1.0):
        """Unstable: LinUCB with an error bit above beta = 2."""
        base = make_algorithm("linucb", lam=lam, beta=beta)

        def update(params, state, step, actions, rewards, aux, key):
            state, rep = base.update(params, state, step, actions, rewards, aux, key)
            return state, rep._replace(errors=rep.errors | (params["beta"] > 2.0).astype(jnp.int32))

        return base._replace(name="Unstable", update=update, errors={1: "beta above 2"})


    register_algorithm("unstable_ucb", unstable_ucb, exploration=("beta",))
''')


def test_a_grid_point_with_error_bits_never_wins_and_a_failed_row_never_ranks(tmp_path, own_registry):
    """A plugin whose point x3 sets an error bit, though its regret there is LinUCB's at x3, the lower
    of the grid: the arena ends, tunes LinUCB to x3 but the plugin to x1; its reported x3 point, failed
    on every seed, is the one a row would rank if it were chosen: such a row is not ranked, not on the
    front, and says so."""
    plugin = tmp_path / "unstable_plugin.py"
    plugin.write_text(UNSTABLE)
    out = tmp_path / "arena"
    argv = ["arena", "--size", "smoke", "--plugin", str(plugin), "--problem", "cosine", "--algorithm",
            "unstable_ucb", "--algorithm", "linucb", "--out", str(out), "--quiet", "--no-curve-cache",
            "--factors", "1,3"]
    with pytest.warns(UserWarning, match="beta above 2"):
        assert main(argv) == 0
    tuning = load_results(out / "tuning")
    assert list(tuning.metadata["errors"]) == ["cosine: unstable_ucb [x3]"]
    res, doc = load_results(out), json.loads((out / "arena.json").read_text())
    pairs = {p["algorithm"]: p for p in doc["pairs"]}
    lin, own = pairs["linucb"], pairs["unstable_ucb"]
    assert own["scores"]["3"][1] == 2 and lin["scores"]["3"][0] < lin["scores"]["1"][0]
    assert lin["factor"] >= 3.0 and own["factor"] == 1.0  # LinUCB's x3 wins, an edge: its grid goes on to x9
    rows = {r["algorithm"]: r for r in arena_page.problem_rows(res, doc, "cosine")}
    assert rows["unstable_ucb"]["failed"] == 0 and rows["unstable_ucb"]["rank"] in (1.0, 2.0)
    own["factor"] = 3.0  # as if the grid had chosen its failed point
    rows = {r["algorithm"]: r for r in arena_page.problem_rows(res, doc, "cosine")}
    assert rows["unstable_ucb"]["failed"] == 2 and "rank" not in rows["unstable_ucb"]
    assert rows["unstable_ucb"]["front"] == [] and rows["linucb"]["rank"] == 1.0
    assert "| not ranked | unstable_ucb |" in arena_page.page_text(res, doc)


def test_a_grid_where_every_point_fails_is_reported_untuned():
    pair = arena.Pair(None, None, None, None, "", algorithms.Tuning(("beta",)))
    choice = arena._choice(pair, {0.3: (1.0, 2), 1.0: (2.0, 1), 3.0: (float("nan"), 0)}, (0.3, 1.0, 3.0))
    assert (choice["factor"], choice["edge"]) == (1.0, 0.0) and choice["status"].startswith("untuned: every grid")
    choice = arena._choice(pair, {0.3: (1.0, 0), 1.0: (2.0, 0), 3.0: (0.5, 1)}, (0.3, 1.0, 3.0))
    assert (choice["factor"], choice["edge"], choice["status"]) == (0.3, 0.3, "tuned")


def test_the_statistics_against_hand_worked_cases():
    x = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    assert arena_stats.iqm(x) == pytest.approx(3.0)  # the middle three of five (floor(5 / 4) = 1 cut each end)
    mean, low, high = arena_stats.mean_interval(np.full(7, 2.5))
    assert (mean, low, high) == (2.5, 2.5, 2.5)
    mean, low, high = arena_stats.mean_interval(x)
    assert mean == 22.0 and 1.0 <= low < 22.0 < high <= 100.0
    assert arena_stats.paired_interval([3.0, 4.0, 5.0], [1.0, 2.0, 3.0]) == (2.0, 2.0, 2.0)
    rate = arena_stats.win_rate([[1.0, 2.0], [5.0]], [[2.0, 2.0], [4.0]])
    assert rate[0] == pytest.approx((1 + 0.5 + 0) / 3) and rate[1] <= rate[0] <= rate[2]


def test_an_entry_point_registers_a_factory(tmp_path, own_registry, monkeypatch):
    (tmp_path / "toy_entry.py").write_text(TOY.replace('register_algorithm("toy_ucb", toy_ucb)', ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    point = metadata.EntryPoint("toy_entry_ucb", "toy_entry:toy_ucb", "bandits_jax.algorithms")
    monkeypatch.setattr(metadata, "entry_points",
                        lambda group: [point] if group == "bandits_jax.algorithms" else [])
    from bandits_jax.plugins import load_plugins

    assert load_plugins() == ["bandits_jax.algorithms:toy_entry_ucb"]
    assert algorithms.make_algorithm("toy_entry_ucb", beta=0.5).name == "Toy"


def test_the_compile_cache_folder_follows_the_variable(monkeypatch, tmp_path):
    from bandits_jax import compile_cache

    monkeypatch.setenv(compile_cache.ENV, "off")
    assert compile_cache.chosen_dir() is None
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path))
    assert compile_cache.chosen_dir() == tmp_path and compile_cache.chosen_dir(False) is None


RERUN = textwrap.dedent('''
    import json, sys
    from bandits_jax import cpu_guard
    cpu_guard()
    from bandits_jax.compile_cache import CompileCount, enable
    from bandits_jax.experiments.adhoc import adhoc_experiment, ADHOC_SIZE
    from bandits_jax.sweep import run_experiment
    enable(sys.argv[1])
    count = CompileCount()
    exp = adhoc_experiment("cosine:num_agents=2,horizon=8", ["linucb"])
    run_experiment(exp, ADHOC_SIZE, {"seeds": 2}, out=sys.argv[2], quiet=True, plot=False, curves=False,
                   step_progress=sys.argv[3] == "steps")
    print(json.dumps(count.counts()))
''')


def test_a_second_run_compiles_nothing_it_compiled_before(tmp_path):
    """Two processes, one cache folder: the second loads every program the first compiled."""
    script = tmp_path / "rerun.py"
    script.write_text(RERUN)

    def counts(out):
        done = subprocess.run([sys.executable, str(script), str(tmp_path / "cache"), str(tmp_path / out), "chunks"],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = counts("a"), counts("b")
    assert first["compiled"] > 0 and first["loaded"] == 0
    assert second == {"compiled": 0, "loaded": first["compiled"]}


def test_the_arena_page_is_generated_from_its_record():
    size = RECORD.name.split("-", 1)[1]
    assert arena_page.arena_page(RECORD, f"-{size}") == (ROOT / "docs" / "arena.md").read_text(), \
        f"docs/arena.md differs from its record: run `bandits-jax report --arena docs/arena/data/{RECORD.name}`"
    res, doc = load_results(RECORD), arena.read_arena(RECORD)
    assert arena_page.seed_table(res, doc) == (ROOT / "docs" / "arena" / f"arena-{size}.csv").read_text()
    for figure in ("pareto", "winrate", "learning"):
        assert (ROOT / "docs" / "arena" / f"{figure}-{size}.png").exists()


def test_a_family_setting_reaches_only_its_own_algorithms():
    """On the Coop problem the Coop methods take their experiment's static options, each those its
    factory accepts; other algorithms and a user's own options are left alone."""
    coop = next(p for p in arena.arena_problems("smoke") if p.label == "coop-rbf")
    spec = arena._in_setting(coop.setting, arena.parse_spec("naive_linucb"))
    assert spec.options == {"storage": "feature", "ring_rounds": 16}
    assert arena._in_setting(coop.setting, arena.parse_spec("coop_kernel_ucb:kernel=linear")).options["kernel"] == \
        "linear"
    assert arena._in_setting(coop.setting, arena.parse_spec("kernel_ucb")).options == {}


@pytest.mark.parametrize("size", ["smoke", "small"])
def test_the_async_and_duets_problems_give_their_experiments_thresholds_and_lam(size):
    """On async-f1 the Async-KernelUCB experiment's thresholds at the size's N, d, T (D = 1/N^2 for
    Async-KernelUCB, T / (N d log(N T)) for the synchronised baselines) and its RBF lengthscale
    1/sqrt(2 gamma) at gamma = 0.1; on hartmann4 DUETS' lam = 0.2 and D = 10 and 20 (its DisKernelUCB,
    not the N-KernelUCB curve of the same name at D = inf); exploration stays the arena's to tune."""
    dims = arena.size_of(size)
    problems = {p.label: p for p in arena.arena_problems(size)}
    on_f1 = functools.partial(arena._in_setting, problems["async-f1"].setting)
    N, T, d = dims["agents"], dims["horizon"], 10
    sync = T / (N * d * math.log(N * T))
    assert on_f1(arena.parse_spec("async_kernel_ucb")).options == {
        "lam": 1.0, "lengthscale": pytest.approx(1 / math.sqrt(0.2)), "q": 1.0, "threshold": 1 / N ** 2}
    assert on_f1(arena.parse_spec("approx_dis_kernel_ucb")).options["threshold"] == pytest.approx(sync)
    assert on_f1(arena.parse_spec("fed_lin_ucb")).options == {"lam": 1.0, "alpha_c": 1 / N ** 2}
    assert on_f1(arena.parse_spec("approx_dis_kernel_ucb:threshold=3")).options["threshold"] == 3
    assert on_f1(arena.parse_spec("kernel_ucb")).options == {}
    on_h4 = functools.partial(arena._in_setting, problems["hartmann4"].setting)
    assert on_h4(arena.parse_spec("dis_kernel_ucb_duets")).options == {"lam": 0.2, "lengthscale": 1.0,
                                                                       "threshold": 10.0}
    assert on_h4(arena.parse_spec("approx_dis_kernel_ucb_duets")).options["threshold"] == 20.0
    assert on_h4(arena.parse_spec("duets")).options == {"lam": 0.2, "lengthscale": 1.0, "p0": 10.0}
    assert on_h4(arena.parse_spec("dis_kernel_ucb")).options == {}
    assert problems["cosine"].setting == () and problems["magic"].setting == ()
