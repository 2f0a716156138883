"""Sweeps (chunks, resume, outputs) and the command line (errors before compiling)."""
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bandits_jax import sweep
from bandits_jax.algorithms import register_algorithm
from bandits_jax.cli import main
from bandits_jax.core import ConfigError
from bandits_jax.curves import Curve, Spec
from bandits_jax.experiments.registry import Experiment, _REGISTRY, register
from bandits_jax.problems import register_problem
from bandits_jax.reporting.results import load_results, summary_rows

sys.path.insert(0, str(Path(__file__).parent))
from toy import breaks_at_eps, history_greedy, toy_problem  # noqa: E402


def toy_greedy(eps: float = 0.5, comm_per_step: float = 0.0):
    """HistoryGreedy (tests/toy.py) with its eps."""
    return history_greedy(comm_per_step).with_defaults(eps=eps)


def toy_breaks(eps: float = 0.5):
    """BreaksAtEps (tests/toy.py) with its eps."""
    return breaks_at_eps().with_defaults(eps=eps)


register_problem("test-toy", toy_problem)
register_algorithm("test_greedy", toy_greedy)
register_algorithm("test_breaks", toy_breaks)


def _toy_problem(config):
    return Spec("test-toy", {"horizon": config["horizon"], "num_agents": config["num_agents"]})


def _toy_build(config):
    if config["eps"] < 0:
        raise ConfigError(f"eps must be >= 0, got {config['eps']}")
    return [Curve("HistoryGreedy", _toy_problem(config), Spec("test_greedy", {"eps": config["eps"]})),
            Curve("Random", _toy_problem(config), Spec("uniform_random"))]


def _data_build(config):
    problem = Spec("magic", dict(num_agents=1, horizon=config["horizon"], data_dir=config["data_dir"], download=False))
    return [Curve("Random", problem, Spec("uniform_random"))]


if "test/magic" not in _REGISTRY:
    register(Experiment("test/magic", "data-backed toy experiment", {"data_dir": "."},
                        {"smoke": {"horizon": 10, "seeds": 1}}, _data_build))

if "test/toy" not in _REGISTRY:
    register(Experiment("test/toy", "toy experiment for tests", {"eps": 0.5, "num_agents": 2},
                        {"smoke": {"horizon": 60, "seeds": 3}, "paper": {"horizon": 100, "seeds": 5}}, _toy_build))

GRID = [("eps=0", {"eps": 0.0}), ("eps=0.5", {"eps": 0.5}), ("eps=3", {"eps": 3.0})]


def _toy_grid_build(config):
    alg, rand = _toy_build(config)
    return [Curve(alg.name, alg.problem, alg.algorithm, tuple(GRID)),
            Curve(rand.name, rand.problem, rand.algorithm, config["bad_grid"] and (("x=1", {"x": 1.0}),) or None)]


if "test/toy-grid" not in _REGISTRY:
    register(Experiment("test/toy-grid", "toy hyper-parameter grid", {"eps": 0.5, "num_agents": 2, "bad_grid": False},
                        {"smoke": {"horizon": 50, "seeds": 3}}, _toy_grid_build))


def test_a_grid_computes_only_the_points_that_lack_seeds(tmp_path, monkeypatch):
    """A grid whose points are partly stored (here: one point's folder removed after a full run) runs
    the missing point alone, on the seeds it lacks, and gives the numbers of the full run."""
    out = sweep.run_experiment("test/toy-grid", "smoke", out=tmp_path / "g", quiet=True, plot=False, curves=False)
    before = load_results(out)
    shutil.rmtree(sweep._chunk_folder(out, "HistoryGreedy [eps=3]"))
    calls = []
    real = sweep.run_batch
    monkeypatch.setattr(sweep, "run_batch", lambda *a, **k: calls.append((len(a[2]), a[3])) or real(*a, **k))
    sweep.run_experiment("test/toy-grid", "smoke", out=out, quiet=True, plot=False, curves=False)
    assert calls == [(3, {"eps": [3.0] * 3})]  # the one point, three seeds; Random had every seed
    after = load_results(out)
    for name in before.algorithms:
        np.testing.assert_allclose(after.arrays[name]["regret"], before.arrays[name]["regret"], rtol=1e-6, atol=1e-7)


def test_grid_is_one_call_per_algorithm_and_equals_separate_runs(tmp_path, monkeypatch):
    calls = []
    real = sweep.run_batch
    monkeypatch.setattr(sweep, "run_batch", lambda *a, **k: calls.append(len(a[2])) or real(*a, **k))
    out = sweep.run_experiment("test/toy-grid", "smoke", out=tmp_path / "g", quiet=True, plot=True)
    assert calls == [9, 3]  # 3 grid points x 3 seeds in one call, then Random
    res = load_results(out)
    names = [f"HistoryGreedy [{label}]" for label, _ in GRID]
    assert res.algorithms == names + ["Random"]
    assert res.metadata["grids"] == {"HistoryGreedy": names}
    assert res.metadata["algorithm_hparams"][names[2]] == {"eps": 3.0}
    for name, (_, hp) in zip(names, GRID):  # each point equals its own run with those hyper-parameters
        alone = real(toy_problem(horizon=50, num_agents=2), history_greedy(), [0, 1, 2], {"eps": [hp["eps"]] * 3})
        np.testing.assert_allclose(res.arrays[name]["regret"], alone.regret, rtol=1e-6, atol=1e-7)
    final = {r["algorithm"]: r["final_regret_mean"] for r in summary_rows(res)}
    best = min(names, key=final.get)
    summary = (out / "summary.md").read_text()
    assert f"| HistoryGreedy | {best.split('[')[1].rstrip(']')} |" in summary
    with pytest.raises(ConfigError, match="unknown hyper-parameter x"):
        sweep.run_experiment("test/toy-grid", "smoke", overrides={"bad_grid": "true"}, out=tmp_path / "bad", quiet=True)


def _broken_build(config):
    problem = Spec("test-toy", {"horizon": config["horizon"], "num_agents": 2})
    grid = (("eps=1e6", {"eps": 1e6}), ("eps=10", {"eps": 10.0}))
    plain = [Curve("HistoryGreedy", problem, Spec("test_breaks", {"eps": 10.0}))] if config["plain"] else []
    return [Curve("HistoryGreedy", problem, Spec("test_breaks"), grid)] + plain


if "test/toy-broken" not in _REGISTRY:
    register(Experiment("test/toy-broken", "toy runs that report errors", {"plain": False},
                        {"smoke": {"horizon": 30, "seeds": 2}}, _broken_build))


def test_diagnostics_and_errors_are_stored_and_broken_curves_are_reported(tmp_path):
    res = load_results(sweep.run_experiment("test/toy", "smoke", out=tmp_path / "r", quiet=True, plot=False))
    count = res.arrays["HistoryGreedy"]["diag/count"]  # agent 0's buffer fill; every agent acts every step
    np.testing.assert_array_equal(count, np.tile(np.arange(1, 61), (3, 1)))
    np.testing.assert_array_equal(res.arrays["Random"]["errors"], [0, 0, 0])
    # a broken grid point is stored, marked in the summary and never chosen
    out = sweep.run_experiment("test/toy-broken", "smoke", out=tmp_path / "b", quiet=True, plot=False)
    res = load_results(out)
    np.testing.assert_array_equal(res.arrays["HistoryGreedy [eps=10]"]["errors"], [2, 2])
    assert res.metadata["errors"] == {"HistoryGreedy [eps=10]": "seeds 0, 1: HistoryGreedy: the buffer holds eps "
                                                                "points; raise eps"}
    summary = (out / "summary.md").read_text()
    assert "| HistoryGreedy | eps=1e6 |" in summary and "- HistoryGreedy [eps=10]: 2 of 2 runs failed; seeds 0, 1" in summary
    # a broken plain curve ends the run with its message, after everything is stored
    with pytest.raises(ConfigError, match=r"runs failed .*seeds 0, 1: HistoryGreedy: the buffer holds eps"):
        sweep.run_experiment("test/toy-broken", "smoke", overrides={"plain": "true"}, out=tmp_path / "p",
                             quiet=True, plot=False)
    assert (tmp_path / "p" / "results.npz").exists()


def test_run_writes_results_metadata_summary_plot(tmp_path):
    out = sweep.run_experiment("test/toy", "smoke", out=tmp_path / "r", quiet=True)
    res = load_results(out)
    assert res.algorithms == ["HistoryGreedy", "Random"]
    assert res.arrays["Random"]["regret"].shape == (3, 60, 2)
    assert res.arrays["Random"]["comm_up"].shape == (3, 60)
    np.testing.assert_array_equal(res.seeds, [0, 1, 2])
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["config"]["horizon"] == 60 and "jax" in meta["versions"] and meta["devices"]
    assert "compile_seconds" in meta["timing"]["Random"]
    summary = (out / "summary.md").read_text()
    rows = summary_rows(res)
    final = res.cumulative("Random")[:, -1]
    assert rows[1]["final_regret_mean"] == pytest.approx(final.mean())
    assert rows[1]["final_regret_se"] == pytest.approx(final.std() / np.sqrt(3))
    assert f"{final.mean():.3f}" in summary
    assert (out / "plot.png").stat().st_size > 1000


def _counting(real, calls, stop_at=None):
    """`real` (run_batch or run_trials) that records (algorithm name, seeds) of every call and raises
    KeyboardInterrupt in call number `stop_at`, as a killed sweep would."""

    def counted(problem, alg, seeds, *args, **kw):
        calls.append((alg.name, list(seeds)))
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return real(problem, alg, seeds, *args, **kw)

    return counted


def test_resume_after_interruption_recomputes_nothing_stored(tmp_path, monkeypatch):
    out = tmp_path / "r"
    calls = []
    real = sweep.run_batch
    monkeypatch.setattr(sweep, "run_batch", _counting(real, calls, stop_at=3))  # killed in the third chunk
    with pytest.raises(KeyboardInterrupt):
        sweep.run_experiment("test/toy", "paper", out=out, chunk=2, quiet=True, plot=False)
    assert calls == [("HistoryGreedy", [0, 1]), ("HistoryGreedy", [2, 3]), ("HistoryGreedy", [4])]
    calls.clear()
    monkeypatch.setattr(sweep, "run_batch", _counting(real, calls))
    sweep.run_experiment("test/toy", "paper", out=out, chunk=2, quiet=True, plot=False)
    assert calls == [("HistoryGreedy", [4]), ("Random", [0, 1]), ("Random", [2, 3]), ("Random", [4])]
    resumed = load_results(out)
    fresh = load_results(sweep.run_experiment("test/toy", "paper", out=tmp_path / "fresh", chunk=5, quiet=True,
                                              plot=False))
    for alg in ("HistoryGreedy", "Random"):
        np.testing.assert_array_equal(resumed.arrays[alg]["regret"], fresh.arrays[alg]["regret"])
    # more seeds later: only the new ones are computed
    calls.clear()
    sweep.run_experiment("test/toy", "paper", overrides={"seeds": 6}, out=out, chunk=2, quiet=True, plot=False)
    assert calls == [("HistoryGreedy", [5]), ("Random", [5])]


TOY_STREAM = {"Random": 0}  # the key stream test/toy-stream gives its Random curve (a code change, not a key)


def _toy_stream_build(config):
    alg, rand = _toy_build(config)
    return [alg, Curve(rand.name, rand.problem, rand.algorithm, stream=TOY_STREAM["Random"])]


if "test/toy-stream" not in _REGISTRY:
    register(Experiment("test/toy-stream", "toy experiment whose key stream tests change", {"eps": 0.5, "num_agents": 2},
                        {"smoke": {"horizon": 20, "seeds": 2}}, _toy_stream_build))


def test_resume_refuses_seeds_of_another_key_stream(tmp_path, monkeypatch):
    out = tmp_path / "r"
    monkeypatch.setitem(TOY_STREAM, "Random", 0)
    first = load_results(sweep.run_experiment("test/toy-stream", "smoke", out=out, quiet=True, plot=False))
    assert first.metadata["algorithm_streams"] == {"HistoryGreedy": 0, "Random": 0}
    folder = out / "chunks" / "Random"
    assert (folder / sweep.STREAM_FILE).read_text() == "0"
    (folder / sweep.STREAM_FILE).unlink()  # as a folder written before streams existed
    monkeypatch.setitem(TOY_STREAM, "Random", 7)
    with pytest.raises(ConfigError, match=r"holds seeds of 'Random' drawn on key stream 0, and this curve now runs on "
                                          r"stream 7; delete that folder"):
        sweep.run_experiment("test/toy-stream", "smoke", overrides={"seeds": "3"}, out=out, quiet=True, plot=False)
    assert not (out / "chunks" / "Random" / "seeds_2-2.npz").exists()  # refused before computing anything
    # on its own stream again the stored seeds are taken; deleted, the folder is recomputed on stream 7
    monkeypatch.setitem(TOY_STREAM, "Random", 0)
    again = load_results(sweep.run_experiment("test/toy-stream", "smoke", out=out, quiet=True, plot=False))
    np.testing.assert_array_equal(again.arrays["Random"]["regret"], first.arrays["Random"]["regret"])
    monkeypatch.setitem(TOY_STREAM, "Random", 7)
    shutil.rmtree(folder)
    other = load_results(sweep.run_experiment("test/toy-stream", "smoke", out=out, quiet=True, plot=False))
    assert (folder / sweep.STREAM_FILE).read_text() == "7" and other.metadata["algorithm_streams"]["Random"] == 7
    assert np.abs(other.arrays["Random"]["regret"] - first.arrays["Random"]["regret"]).max() > 0
    np.testing.assert_array_equal(other.arrays["HistoryGreedy"]["regret"], first.arrays["HistoryGreedy"]["regret"])


def test_only_runs_a_subset_and_a_full_run_reuses_it(tmp_path, monkeypatch):
    out = tmp_path / "r"
    calls = []
    real = sweep.run_batch
    monkeypatch.setattr(sweep, "run_batch", lambda *a, **k: (calls.append(a[1].name), real(*a, **k))[1])
    sweep.run_experiment("test/toy", "smoke", out=out, quiet=True, plot=False, only=("Random",))
    assert calls == ["Random"] and load_results(out).algorithms == ["Random"]
    calls.clear()
    full = load_results(sweep.run_experiment("test/toy", "smoke", out=out, quiet=True, plot=False))
    assert calls == ["HistoryGreedy"] and full.algorithms == ["HistoryGreedy", "Random"]
    with pytest.raises(ConfigError, match="unknown curve.*'random'.*has: HistoryGreedy, Random"):
        sweep.run_experiment("test/toy", "smoke", out=out, quiet=True, plot=False, only=("random",))


def test_out_dir_of_another_configuration_is_refused(tmp_path):
    out = tmp_path / "r"
    sweep.run_experiment("test/toy", "smoke", out=out, quiet=True, plot=False)
    with pytest.raises(ConfigError, match="another configuration"):
        sweep.run_experiment("test/toy", "smoke", overrides={"eps": "0.1"}, out=out, quiet=True, plot=False)


def test_a_run_cut_into_other_segments_resumes_its_folder(tmp_path):
    """first_segment and vmap_size cut the runs into compiled calls and change no number: a folder
    continues under other values, one written when its config.json still held them too."""
    out = tmp_path / "r"
    sweep.run_experiment("test/toy", "smoke", out=out, quiet=True, plot=False)
    path = out / "config.json"
    record = json.loads(path.read_text())
    assert "first_segment" not in record["config"] and "vmap_size" not in record["config"]
    record["config"]["first_segment"] = 128  # as such folders were written before
    path.write_text(json.dumps(record))
    cut = {"first_segment": "16", "vmap_size": "2"}
    sweep.run_experiment("test/toy", "smoke", overrides=cut, out=out, quiet=True, plot=False)
    apart = sweep.run_experiment("test/toy", "smoke", overrides=cut, out=tmp_path / "apart", quiet=True, plot=False)
    a, b = np.load(out / "results.npz"), np.load(apart / "results.npz")
    assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)


@pytest.mark.parametrize("argv, needle", [
    (["run", "no/such"], "unknown experiment"),
    (["run", "test/toy", "--set", "nokey=1"], "unknown key 'nokey'"),
    (["run", "test/toy", "--set", "eps=abc"], "eps must be of type float"),
    (["run", "test/toy", "--set", "eps=-1"], "eps must be >= 0"),
    (["run", "test/toy", "--set", "eps"], "KEY=VALUE"),
    (["run", "test/toy", "--seeds", "0"], "seeds must be an integer >= 1"),
    (["run", "test/toy", "--size", "huge"], "no size 'huge'"),
    (["run", "test/toy", "--chunk", "0"], "--chunk must be at least 1"),
    (["run", "quickstart", "--set", "kernel_lam=-1"], "lam"),
    (["run", "quickstart", "--set", "num_arms=0"], "num_arms"),
    (["run", "test/magic", "--size", "smoke", "--set", "data_dir=/nonexistent-folder"], "magic"),
])
def test_bad_input_is_one_line_and_exit_2_before_compiling(argv, needle, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sweep, "run_batch", lambda *a, **k: pytest.fail("compiled despite bad input"))
    monkeypatch.setenv("BANDITS_JAX_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("BANDITS_JAX_DATA_DIR", raising=False)
    code = main(argv + ["--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and needle in err


def test_a_sweep_that_would_not_fit_memory_says_so_before_compiling(capsys, monkeypatch, tmp_path):
    from bandits_jax.problems import make_problem
    from bandits_jax.algorithms import make_algorithm

    monkeypatch.setattr(sweep, "run_batch", lambda *a, **k: pytest.fail("compiled despite no memory"))
    problem = make_problem("cosine", num_agents=2, num_arms=4, dim=3, horizon=50)
    config = {"precision": "float64", "base_key": 0}
    per_run = sweep.run_bytes(problem, make_algorithm("kernel_ucb"), config)
    # KernelUCB's state at its final capacity holds the 50 x 50 Gram's factor of each of 2 agents
    assert 4 * 2 * 50 * 50 * 8 < per_run < 4 * 2 * 4 * 50 * 50 * 8
    argv = ["run", "--problem", "cosine:num_agents=2,num_arms=4,dim=3", "--algorithm", "kernel_ucb",
            "--horizon", "50", "--out", str(tmp_path / "o"), "--quiet"]
    monkeypatch.setattr(sweep, "available_memory", lambda: per_run * 10)
    assert main(argv + ["--chunk", "16"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--chunk 16 needs" in err and "use --chunk 5 or less" in err
    monkeypatch.setattr(sweep, "available_memory", lambda: per_run // 2)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "one run needs about" in err and "lower the horizon" in err
    assert not (tmp_path / "o").exists()


def test_free_memory_is_the_accelerators_where_runs_live_on_one(monkeypatch):
    """On an accelerator a sweep's chunks are sized by its allocator's free bytes, not the host's."""
    assert sweep.device_memory_stats() is None  # the suite runs on the CPU
    assert sweep.proc_kilobytes("/proc/meminfo", "MemAvailable") > 0
    # the host's figure is MemAvailable: read through a fixed reading, since the real one moves between
    # two reads while the other test worker allocates
    reads = []
    monkeypatch.setattr(sweep, "proc_kilobytes", lambda path, key: reads.append((path, key)) or 7 << 30)
    assert sweep.available_memory() == 7 << 30 and reads == [("/proc/meminfo", "MemAvailable")]
    monkeypatch.setattr(sweep, "device_memory_stats", lambda: {"bytes_limit": 60 << 30, "bytes_in_use": 8 << 30})
    assert sweep.available_memory() == 52 << 30
    assert sweep.estimate_chunk(1 << 30, 1000) == 13  # a quarter of 52 GiB at 1 GiB a seed


def _toy_comm_build(c):
    problem = Spec("test-toy", {"horizon": c["horizon"], "num_agents": c["num_agents"]})
    return [Curve("Random", problem, Spec("uniform_random")),
            Curve("HistoryGreedy", problem, Spec("test_greedy", {"comm_per_step": 3.0}))]


def test_a_curve_has_one_color_in_every_panel(tmp_path):
    """A curve that does not communicate is left out of the communication panels; the others keep their colors."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from bandits_jax.reporting.plotting import draw_results

    if "test/toy-comm" not in _REGISTRY:
        register(Experiment("test/toy-comm", "toy: a silent and a communicating algorithm", {"num_agents": 2},
                            {"smoke": {"horizon": 20, "seeds": 2}},
                            _toy_comm_build))
    fig = draw_results(load_results(sweep.run_experiment("test/toy-comm", "smoke", out=tmp_path / "c", quiet=True,
                                                         plot=False)))
    regret_ax, comm_ax, tradeoff_ax = fig.axes
    colors = {line.get_label(): line.get_color() for line in regret_ax.get_lines()}
    assert set(colors) == {"Random", "HistoryGreedy"} and colors["Random"] != colors["HistoryGreedy"]
    assert [(line.get_label(), line.get_color()) for line in comm_ax.get_lines()] == [
        ("HistoryGreedy", colors["HistoryGreedy"])]
    (points,) = tradeoff_ax.collections
    assert tuple(points.get_facecolor()[0][:3]) == pytest.approx(to_rgb(colors["HistoryGreedy"]))
    plt.close(fig)


def test_list_and_plot_commands(tmp_path, capsys):
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    assert "quickstart" in listing and "test/toy" in listing
    out = sweep.run_experiment("test/toy", "smoke", out=tmp_path / "r", quiet=True, plot=False)
    (out / "plot.png").unlink(missing_ok=True)
    assert main(["plot", str(out)]) == 0
    assert (out / "plot.png").exists()
    assert main(["plot", str(tmp_path / "empty")]) == 2


def test_plot_figure_of_several_folders(tmp_path, capsys):
    import matplotlib.pyplot as plt

    from bandits_jax.reporting.plotting import draw_figure

    if "test/toy-comm" not in _REGISTRY:
        register(Experiment("test/toy-comm", "toy: a silent and a communicating algorithm", {"num_agents": 2},
                            {"smoke": {"horizon": 20, "seeds": 2}},
                            _toy_comm_build))
    a = sweep.run_experiment("test/toy-comm", "smoke", out=tmp_path / "a", quiet=True, plot=False)
    b = sweep.run_experiment("test/toy-comm", "smoke", out=tmp_path / "b", quiet=True, plot=False,
                             overrides={"horizon": 12})
    assert main(["plot", str(a), str(b)]) == 2  # several folders need --figure
    assert "--figure" in capsys.readouterr().err
    assert main(["plot", str(a), str(b), "--figure", str(tmp_path / "fig.png")]) == 0
    assert (tmp_path / "fig.png").exists()
    fig = draw_figure([load_results(a), load_results(b)])
    (top_a, top_b), (low_a, low_b) = np.reshape(fig.axes, (2, 2))
    assert [len(line.get_xdata()) for line in top_a.get_lines()] == [20, 20]  # regret of both, per folder
    assert [len(line.get_xdata()) for line in top_b.get_lines()] == [12, 12]
    assert [line.get_label() for line in low_b.get_lines()] == ["HistoryGreedy"]  # only who communicates
    assert low_b.get_lines()[0].get_ydata()[-1] == pytest.approx((3.0 + 6.0) * 12)  # up 3 + down 6 a step
    colors = {line.get_label(): line.get_color() for ax in (top_a, top_b, low_a, low_b) for line in ax.get_lines()}
    assert len(colors) == 2 and len(set(colors.values())) == 2  # one colour per algorithm in every panel
    plt.close(fig)


def test_console_script_runs_quickstart_smoke(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bandits_jax.cli", "run", "quickstart", "--size", "smoke",
                           "--out", str(tmp_path / "q")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| NeuralUCB |" in proc.stdout and "| Random |" in proc.stdout and "| FN-UCB (N=2) |" in proc.stdout
    assert "running T = 40" in proc.stderr and "done (compile" in proc.stderr  # chunk progress without --quiet
    res = load_results(tmp_path / "q")
    assert res.arrays["KernelUCB"]["regret"].shape == (2, 40, 1)


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


def test_progress_in_a_log_on_a_terminal_and_quiet(tmp_path, monkeypatch, capsys):
    """Plain lines at each fifth of the horizon for every chunk (also one that reuses the compiled call of
    the chunk before, which calls back the function it was compiled with); on a terminal one bar per
    curve over all its chunks, messages above it; nothing with quiet. stdout keeps the summary."""
    out = sweep.run_experiment("test/toy", "paper", out=tmp_path / "log", chunk=2, plot=False, only=("Random",))
    std = capsys.readouterr()
    chunks = ["seeds 0..1 (chunk 1/3)", "seeds 2..3 (chunk 2/3)", "seeds 4..4 (chunk 3/3)"]
    assert [line for line in std.err.splitlines() if "t = " in line] == [
        f"[Random] {c}: t = {t}/100" for c in chunks for t in (20, 40, 60, 80, 100)]
    assert "| Random |" in std.out and std.out.endswith(f"results written to {out}\n")

    monkeypatch.setattr(sys, "stderr", _Terminal())  # Random comes from the curve cache this time
    out = sweep.run_experiment("test/toy", "paper", out=tmp_path / "tty", chunk=2, plot=False)
    text = sys.stderr.getvalue()
    shown = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]  # what stays on the screen
    assert [line.split(":")[0] for line in shown[:3]] == [f"[HistoryGreedy] {c}" for c in chunks]
    assert all(": done (compile " in line for line in shown[:3])
    assert shown[3].startswith("[HistoryGreedy] 5 runs: 100%|") and "| 300/300 [" in shown[3], shown[3]
    assert shown[3].endswith("step/s, chunk 3/3]")
    assert shown[4].startswith("[Random] seeds 0, 1, 2, 3, 4 taken from the curve cache (")
    assert shown[5:] == [f"[Random] all 5 seeds already stored in {out}", ""] and "t = " not in text
    assert capsys.readouterr().out.endswith(f"results written to {out}\n")

    monkeypatch.setattr(sys, "stderr", _Terminal())
    sweep.run_experiment("test/toy", "smoke", out=tmp_path / "quiet", quiet=True, plot=False, curves=False,
                         only=("Random",))
    assert sys.stderr.getvalue() == "" and capsys.readouterr().out == ""


def test_bench_subcommand_passes_its_options_through(monkeypatch):
    import bench.__main__ as bench_main

    seen = []
    monkeypatch.setattr(bench_main, "main", lambda argv: seen.append(list(argv)) or 0)
    assert main(["bench", "--quick", "--only", "linucb"]) == 0
    assert seen == [["--quick", "--only", "linucb"]]


def test_grid_choice_skips_points_marked_broken():
    from bandits_jax.reporting.results import Results, grid_choices

    def run(regret_per_step):
        return {"regret": np.full((2, 10, 1), regret_per_step), "comm_up": np.ones((2, 10)),
                "comm_down": np.zeros((2, 10)), "rounds": np.zeros((2, 10))}

    names = ["A [gamma=0.1]", "A [gamma=1]", "A [gamma=4]"]
    # gamma=4 has the lowest regret but its runs carry error bits (a capacity outgrown): gamma=1 is chosen
    arrays = dict(zip(names, (run(0.5), run(0.2), run(0.1))))
    meta = {"algorithms": names, "grids": {"A": names}, "errors": {"A [gamma=4]": "seeds 0: A: overflow"}}
    res = Results(arrays, np.arange(2), meta)
    assert grid_choices(res) == {"A": "A [gamma=1]"}
    arrays["A [gamma=1]"] = run(np.nan)
    assert grid_choices(res) == {"A": "A [gamma=0.1]"}


def test_phase_level_trials_go_through_the_sweep(tmp_path, monkeypatch):
    """bai/elimination: a delta grid in one call, chunks, resume after an interruption, more seeds
    later, results with outcomes, a summary with 95% intervals, and the plot."""
    from bandits_jax.reporting.results import outcome_rows

    out = tmp_path / "bai"
    calls = []
    real = sweep.run_trials
    monkeypatch.setattr(sweep, "run_trials", _counting(real, calls, stop_at=2))
    with pytest.raises(KeyboardInterrupt):
        sweep.run_experiment("bai/elimination", "smoke", overrides={"seeds": 6}, out=out, chunk=4, quiet=True,
                             plot=False)
    grid_seeds = [0, 1, 2, 3] * 3  # the three delta points of a chunk share one call
    assert calls == [("Successive elimination", grid_seeds), ("Successive elimination", [4, 5] * 3)]
    calls.clear()
    monkeypatch.setattr(sweep, "run_trials", _counting(real, calls))
    sweep.run_experiment("bai/elimination", "smoke", overrides={"seeds": 6}, out=out, chunk=4, quiet=True)
    assert calls == [("Successive elimination", [4, 5] * 3), ("Uniform allocation", [0, 1, 2, 3]),
                     ("Uniform allocation", [4, 5])]
    res = load_results(out)
    curve = "Successive elimination [delta=0.05]"
    assert res.algorithms == ["Successive elimination [delta=0.01]", curve, "Successive elimination [delta=0.2]",
                              "Uniform allocation"]
    assert set(res.arrays[curve]) == {"correct", "samples", "rounds", "errors"}
    assert res.arrays[curve]["samples"].shape == (6,)
    # the stored numbers are those of one direct call
    from bandits_jax.algorithms.single.elimination import successive_elimination
    from bandits_jax.problems.arms import gaussian_arms

    direct = real(gaussian_arms(1, 4, 0.5, 1.0), successive_elimination(delta=0.05), range(6))
    np.testing.assert_array_equal(res.arrays[curve]["samples"], direct.outcomes["samples"])
    row = {r["algorithm"]: r for r in outcome_rows(res)}[curve]
    samples = direct.outcomes["samples"].astype(float)
    half = 1.959963984540054 * samples.std(ddof=1) / np.sqrt(6)
    np.testing.assert_allclose(row["samples"], (samples.mean(), samples.mean() - half, samples.mean() + half))
    summary = (out / "summary.md").read_text()
    assert "| correct | samples | rounds | seeds |" in summary and "95% interval" in summary
    assert f"| {curve} | " in summary and (out / "plot.png").stat().st_size > 10_000
    # more seeds later: only the new ones
    calls.clear()
    sweep.run_experiment("bai/elimination", "smoke", overrides={"seeds": 7}, out=out, quiet=True, plot=False)
    assert calls == [("Successive elimination", [6] * 3), ("Uniform allocation", [6])]


def test_interval95_wilson_and_normal():
    from bandits_jax.reporting.results import interval95

    est, low, high = interval95(np.r_[np.ones(50), np.zeros(50)], "rate")
    assert est == 0.5 and np.allclose((low, high), (0.40383, 0.59617), atol=1e-5)  # Wilson, n = 100
    est, low, high = interval95(np.ones(16), "rate")
    assert est == 1.0 and np.isclose(low, 16 / (16 + 1.959963984540054 ** 2)) and np.isclose(high, 1.0)
    est, low, high = interval95([1.0, 2.0, 3.0, 4.0], "mean")
    assert est == 2.5 and np.isclose(high - est, 1.959963984540054 * np.std([1, 2, 3, 4], ddof=1) / 2)
    assert np.isnan(interval95([3.0], "mean")[1])


def test_curve_cache_serves_another_folder_and_can_be_turned_off(tmp_path, monkeypatch):
    first = load_results(sweep.run_experiment("test/toy", "paper", out=tmp_path / "a", quiet=True, plot=False))
    calls = []
    real = sweep.run_batch
    monkeypatch.setattr(sweep, "run_batch", lambda *a, **k: (calls.append(a[1].name), real(*a, **k))[1])
    again = load_results(sweep.run_experiment("test/toy", "paper", out=tmp_path / "b", quiet=True, plot=False))
    assert calls == [] and set(again.metadata["cached"]) == {"HistoryGreedy", "Random"}
    for alg in ("HistoryGreedy", "Random"):
        np.testing.assert_array_equal(again.arrays[alg]["regret"], first.arrays[alg]["regret"])
        # a chunk taken from the cache keeps the seconds of the call that computed it
        made, taken = (np.load(next((tmp_path / f / sweep.CHUNKS / sweep._slug(alg)).glob("seeds_*.npz")))
                       for f in ("a", "b"))
        assert float(made["run_seconds"]) > 0, alg
        for key in ("compile_seconds", "run_seconds"):
            assert np.isclose(float(taken[key]), float(made[key])), (alg, key)
    assert main(["run", "test/toy", "--size", "paper", "--out", str(tmp_path / "c"), "--quiet", "--no-plot",
                 "--no-curve-cache"]) == 0
    assert calls == ["HistoryGreedy", "Random"] and load_results(tmp_path / "c").metadata["cached"] == {}
    # another eps is another curve: HistoryGreedy is computed, Random (no eps) is taken
    calls.clear()
    sweep.run_experiment("test/toy", "paper", overrides={"eps": "0.3"}, out=tmp_path / "d", quiet=True, plot=False)
    assert calls == ["HistoryGreedy"]
