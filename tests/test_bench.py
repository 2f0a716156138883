"""The benchmark command end to end at its quick size: every row measured, the JSON consistent.

The default suite runs the quick size on a subset of the cases (one kernel, one linear, the
asynchronous section's OneKernelUCB); every case at the quick size runs under `-m slow`.

Speeds are never asserted (the machine is shared); only that every number is there, positive,
and that the ratio is the JAX rate over the NumPy rate.
"""
import json
import math
import os
import time

import pytest

from bench import configs
from bench.__main__ import main


FAST_SUBSET = ("KernelUCB", "LinUCB", "OneKernelUCB")
WAIT_SECONDS = 900


@pytest.fixture(scope="session", params=["subset", pytest.param("all", marks=pytest.mark.slow)])
def quick_result(request, tmp_path_factory):
    """The bench's JSON for one selection, run ONCE per pytest session: the first process to claim
    it runs the bench, every other pytest-xdist worker reads the file it leaves in the session's
    shared temporary folder (pytest-xdist may spread this file's tests over workers)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out, claim = shared / f"bench-{request.param}.json", shared / f"bench-{request.param}.claim"
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return _wait_for(out, request.param)
    only = ["--only", ",".join(FAST_SUBSET)] if request.param == "subset" else []
    staged = shared / f"bench-{request.param}-staged.json"
    try:
        assert main(["--quick", "--out", str(staged), *only]) == 0
        result = json.loads(staged.read_text())
        result["expected"] = list(FAST_SUBSET) if request.param == "subset" else None
    except BaseException:
        out.write_text("null")  # tell the waiting workers that the run failed
        raise
    out.write_text(json.dumps(result))
    return result


def _wait_for(out, selection):
    deadline = time.monotonic() + WAIT_SECONDS
    while not out.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the bench run of {selection!r} by another worker did not finish in {WAIT_SECONDS} s")
        time.sleep(0.5)
    time.sleep(0.1)  # the writer's last bytes
    result = json.loads(out.read_text())
    if result is None:
        pytest.fail(f"the bench run of {selection!r} failed in another worker (see its error)")
    return result


def _selected(names, result):
    return [n for n in names if result["expected"] is None or n in result["expected"]]


def test_every_row_is_measured(quick_result):
    names = [res["algorithm"] for res in quick_result["results"]]
    assert names == _selected([case.name for case in configs.cases()], quick_result)
    for res in quick_result["results"]:
        assert res["spec"]["horizon"] == configs.QUICK_HORIZON
        assert [row["seeds"] for row in res["rows"]] == list(configs.QUICK_SEEDS)
        assert res["numpy"]["agent_steps_per_second"] > 0
        for row in res["rows"]:
            assert row["skipped"] is False, row
            for key in ("compile_seconds", "run_seconds", "agent_steps_per_second",
                        "numpy_agent_steps_per_second", "ratio", "work_per_second", "ceiling_fraction"):
                assert math.isfinite(row[key]) and row[key] > 0, (res["algorithm"], row["seeds"], key, row[key])
            assert math.isfinite(row["peak_mb"]) and row["peak_mb"] >= 0
            assert math.isfinite(row["final_regret_mean"])


def test_ratio_is_jax_rate_over_numpy_rate(quick_result):
    for res in quick_result["results"]:
        numpy_rate = res["numpy"]["agent_steps_per_second"]
        assert numpy_rate == pytest.approx(res["numpy"]["agent_steps"] / res["numpy"]["seconds"])
        for row in res["rows"]:
            assert row["numpy_agent_steps_per_second"] == pytest.approx(numpy_rate)
            assert row["ratio"] == pytest.approx(row["agent_steps_per_second"] / numpy_rate)
            agent_steps = row["seeds"] * row["num_agents"] * row["horizon"]
            assert row["agent_steps_per_second"] == pytest.approx(agent_steps / row["run_seconds"])


def test_ceilings_and_capacity_comparison(quick_result):
    ceilings = quick_result["ceilings"]
    assert ceilings["memory_bandwidth_bytes_per_second"] > 0
    assert ceilings["matmul_float64_flops_per_second"] > 0
    kernel = next(res for res in quick_result["results"] if res["algorithm"] == "KernelUCB")
    assert len(kernel["segments"]) > 1  # the quick size still has doubling segments
    cap = kernel["capacity"]
    assert cap["skipped"] is False
    assert cap["ratio"] == pytest.approx(cap["fixed_run_seconds"] / cap["doubling_run_seconds"])
    assert cap["model_bytes_ratio"] > 1
    assert "KernelUCB" in quick_result["table"] and "ratio" in quick_result["table"]


def test_skip_rule():
    from bench.__main__ import skip_reason

    last = dict(seeds=10, run_seconds=40.0, peak_bytes=1e6)
    assert skip_reason(100, last, 1e3, budget=300, available=1e12).startswith("skipped: est. run 400 s")
    assert skip_reason(50, last, 1e3, budget=300, available=1e12) is None
    assert "memory" in skip_reason(1000, None, 1e9, budget=300, available=1e12)
    # the measured peak, scaled: from S = 100 (3.3 GB) to 1000 is 33 GB, over 70% of 24 GB; from S = 1
    # the peak is mostly the fixed cost of compiling, and only the state model counts
    big = dict(seeds=100, run_seconds=1.0, peak_bytes=3.3e9)
    assert "est. memory 31471 MB" in skip_reason(1000, big, 0.0, budget=300, available=24e9)
    assert skip_reason(1000, dict(big, seeds=1), 0.0, budget=3000, available=24e9) is None


def test_a_call_out_of_device_memory_skips_it_and_the_larger_ones():
    import types

    import jax
    from bench import harness
    from bench.__main__ import skip_reason

    def measure(seeds):
        if seeds >= 100:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 29.82GiB")
        return dict(algorithm="a", seeds=seeds, runs=seeds, run_seconds=0.1, peak_mb=1.0)

    args = types.SimpleNamespace(budget_seconds=100.0)
    rows = harness.seed_rows("t", "a", (1, 100, 1000), args, skip_reason, measure)
    assert [(r["seeds"], bool(r.get("skipped"))) for r in rows] == [(1, False), (100, True), (1000, True)]
    assert "out of device memory (RESOURCE_EXHAUSTED: Out of memory" in rows[1]["note"]
    assert rows[2]["note"] == "skipped: S = 100 ran out of device memory"

    def broken(seeds):
        raise jax.errors.JaxRuntimeError("INTERNAL: something else")

    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL"):
        harness.seed_rows("t", "a", (1,), args, skip_reason, broken)


# ------------------------------------------------------------------------------ asynchronous section
def test_async_rows_are_measured(quick_result):
    from bench import async_bench

    section = quick_result["async_section"]
    assert section["spec"]["horizon"] == async_bench.QUICK["horizon"]
    assert section["spec"]["num_agents"] == async_bench.QUICK["num_agents"]
    assert [res["algorithm"] for res in section["results"]] == _selected(async_bench.NAMES, quick_result)
    for res in section["results"]:
        assert "error" not in res["numpy"], res["numpy"]
        assert res["numpy"]["horizon"] == section["numpy_horizon"] == res["numpy_horizon"]
        assert res["numpy"]["seconds"] > 0 and math.isfinite(res["numpy"]["regret"])
        assert [row["seeds"] for row in res["rows"]] == list(async_bench.QUICK_SEEDS)
        for row in res["rows"]:
            assert row["skipped"] is False, row
            assert row["note"] == "", row  # no capacity overflow, finite regret
            assert row["horizon"] == section["spec"]["horizon"] and row["numpy_horizon"] == section["numpy_horizon"]
            for key in ("compile_seconds", "run_seconds", "run_seconds_per_run", "prefix_run_seconds_per_run",
                        "numpy_seconds_per_run", "ratio", "final_regret_mean", "prefix_regret_mean"):
                assert math.isfinite(row[key]) and row[key] > 0, (res["algorithm"], key, row[key])
            assert math.isfinite(row["peak_mb"]) and row["peak_mb"] >= 0
            # ratio = NumPy seconds per run on the prefix / JAX run seconds per run on the same prefix
            assert row["ratio"] == pytest.approx(row["numpy_seconds_per_run"] / row["prefix_run_seconds_per_run"])
            assert row["run_seconds_per_run"] == pytest.approx(row["run_seconds"] / row["seeds"])
            assert row["numpy_seconds_per_run"] == pytest.approx(res["numpy"]["seconds"])
    assert "NumPy/JAX" in quick_result["table"] and "OneKernelUCB" in quick_result["table"]


def test_async_one_kernel_storage_comparison(quick_result):
    one = next(res for res in quick_result["async_section"]["results"] if res["algorithm"] == "OneKernelUCB")
    assert len(one["segments"]) == 1  # panels: one capacity (the horizon) for the whole run
    cap = one["capacity"]
    assert cap["skipped"] is False and cap["extrapolated"] is False
    assert cap["ratio"] == pytest.approx(cap["fixed_run_seconds"] / cap["doubling_run_seconds"])
    assert cap["doubling_over_panels"] == pytest.approx(cap["dense_doubling_run_seconds"] / cap["panels_run_seconds"])
    assert cap["fixed_over_panels"] == pytest.approx(cap["fixed_run_seconds"] / cap["panels_run_seconds"])
    # models: T x T^2 (fixed) over the sum over the dense doubling segments of steps x C^2, and sum_t t^2 (panels)
    T = one["spec"]["horizon"]
    assert cap["panels_model_units"] == pytest.approx(sum(t * t for t in range(1, T + 1)))
    assert cap["model_ratio"] == pytest.approx(T * T * T / cap["dense_doubling_model_units"])
    assert cap["model_ratio"] > 1
    # the dense storage computes the same run as the panels (same regret to rounding)
    row = next(r for r in one["rows"] if r["seeds"] == cap["seeds"])
    assert cap["dense_doubling_regret_mean"] == pytest.approx(row["final_regret_mean"], rel=1e-9)
    assert "dense doubling segments" in quick_result["table"]


def test_async_only_selects_the_section():
    from bench.__main__ import parse_args

    args = parse_args(["--only", "async"])
    assert args.only_names == {"Async-KernelUCB", "Approx-DisKernelUCB", "OneKernelUCB"}
    assert parse_args(["--only", "onekernelucb,LinUCB"]).only_names == {"OneKernelUCB", "LinUCB"}
    with pytest.raises(SystemExit):
        parse_args(["--async-numpy-horizon", "0"])


def test_async_dictionary_sizing_comparison(quick_result):
    nystrom = [res for res in quick_result["async_section"]["results"]
               if res["algorithm"] in ("Async-KernelUCB", "Approx-DisKernelUCB")]
    if not nystrom:
        pytest.skip("the Nyström rows run under -m slow")
    for res in nystrom:
        siz = res["sizing"]
        assert siz["horizon"] == quick_result["async_section"]["spec"]["horizon"]
        assert siz["time_over_demand"] == pytest.approx(siz["time"]["run_seconds"] / siz["demand"]["run_seconds"])
        assert siz["max_regret_difference"] < 1e-9  # demand sizing changes no number
        assert siz["demand"]["final_regret"] == pytest.approx(siz["time"]["final_regret"], rel=1e-12)
        assert "dictionary sizing" in quick_result["table"]


def test_duets_only_selects_the_section():
    from bench.__main__ import parse_args
    assert parse_args(["--only", "duets"]).only_names == {"DUETS", "DisKernelUCB-duets"}
    assert parse_args(["--only", "duets,LinUCB"]).only_names == {"DUETS", "DisKernelUCB-duets", "LinUCB"}


def test_duets_section_rows(quick_result):
    section = quick_result.get("duets_section")
    if quick_result["expected"] is not None:
        assert section is None                   # the subset leaves the section out
        return
    for res in section["results"]:
        rate = res["numpy"]["agent_steps_per_second"]
        assert rate > 0 and [r["runs"] for r in res["rows"]] == [1, 4, 20]
        for row in res["rows"]:
            assert row["agent_steps_per_second"] > 0 and math.isfinite(row["final_regret_mean"])
            assert row["ratio"] == pytest.approx(row["agent_steps_per_second"] / rate)


def test_cope_only_selects_the_section():
    from bench.__main__ import parse_args
    assert parse_args(["--only", "cope"]).only_names == {"CoKernelFC", "CoKernelFB"}
    assert parse_args(["--only", "cokernelfb"]).only_names == {"CoKernelFB"}


def test_cope_section_rows(quick_result):
    section = quick_result.get("cope_section")
    if quick_result["expected"] is not None:
        assert section is None                   # the subset leaves the section out
        return
    for res in section["results"]:
        rate = res["numpy"]["trials_per_second"]
        assert rate > 0 and [r["runs"] for r in res["rows"]] == [1, 4]
        for row in res["rows"]:
            assert row["samples_mean"] > 0 and 0.0 <= row["correct"] <= 1.0
            if res["algorithm"] == "CoKernelFC":  # delta = 0.005 at Delta = 0.2: these seeds all succeed
                assert row["correct"] == 1.0
            assert row["ratio"] == pytest.approx(row["trials_per_second"] / rate)


def test_coop_only_selects_the_section():
    from bench.__main__ import parse_args
    assert parse_args(["--only", "coop"]).only_names == {"Coop-KernelUCB", "Eager-KernelUCB", "Dist-KernelUCB"}
    assert parse_args(["--only", "dist-kernelucb"]).only_names == {"Dist-KernelUCB"}
    assert parse_args(["--only", "coop,CoKernelFC"]).only_names == {"Coop-KernelUCB", "Eager-KernelUCB",
                                                                    "Dist-KernelUCB", "CoKernelFC"}


def test_coop_section_rows(quick_result):
    from bench import coop_bench

    section = quick_result.get("coop_section")
    if quick_result["expected"] is not None:
        assert section is None                   # the subset leaves the section out
        return
    assert [res["algorithm"] for res in section["results"]] == list(coop_bench.NAMES)
    for res in section["results"]:
        rate = res["numpy"]["runs_per_second"]
        assert rate > 0 and rate == pytest.approx(1.0 / res["numpy"]["seconds"])
        assert [r["runs"] for r in res["rows"]] == list(coop_bench.QUICK_SEEDS)
        for row in res["rows"]:
            assert row["skipped"] is False, row
            for key in ("compile_seconds", "run_seconds", "runs_per_second", "ratio", "final_regret_mean"):
                assert math.isfinite(row[key]) and row[key] > 0, (res["algorithm"], row["seeds"], key, row[key])
            assert row["runs_per_second"] == pytest.approx(row["seeds"] / row["run_seconds"])
            assert row["ratio"] == pytest.approx(row["runs_per_second"] / rate)
            assert row["max_regret_difference"] < 1e-9  # the same decisions as the NumPy loop
    scale = section["feature_scale"]
    assert scale["world"]["num_agents"] == coop_bench.SCALE_QUICK_AGENTS
    assert scale["seconds_per_round_per_trial"] == pytest.approx(
        scale["run_seconds"] / scale["seeds"] / scale["world"]["horizon"])
    assert scale["paper_seconds_per_trial"] == pytest.approx(500 * scale["seconds_per_round_per_trial"])
    assert "Coop-KernelUCB section" in quick_result["table"] and "Feature storage at scale" in quick_result["table"]


def test_step_cost_counts_the_step_and_its_roofline():
    """XLA's cost analysis of LinUCB's step grows with d as its d x d solve does (faster than linearly:
    the differences of the flops at d = 4, 16, 64 grow more than 4-fold, whatever the step's fixed
    cost, its random hashes included), and the roofline rate is the slower of the flop and byte limits."""
    from bandits_jax.algorithms import make_algorithm
    from bandits_jax.problems import make_problem
    from bench import step_cost

    costs = [step_cost.step_cost(make_problem("cosine", num_agents=2, num_arms=4, dim=d, horizon=20),
                                 make_algorithm("linucb")) for d in (4, 16, 64)]
    assert all(c["flops"] > 0 and c["bytes"] > 0 for c in costs)
    flops = [c["flops"] for c in costs]
    assert flops[2] - flops[1] > 4 * (flops[1] - flops[0]) > 0  # more than linear in d: the d x d update and solve
    assert step_cost.roofline_rate({"flops": 2e9, "bytes": 1e9}, 1e12, 1e11) == pytest.approx(100.0)  # bytes bound
    assert step_cost.roofline_rate({"flops": 2e9, "bytes": 1e9}, 1e12, 1e13) == pytest.approx(500.0)  # flops bound


def test_library_flops_counts_the_lapack_calls():
    """The LAPACK calls that XLA's cost analysis leaves out are counted from their operands: a Cholesky
    of [3, 8, 8] is 3 x 8^3 / 3 flops, a triangular solve of an 8 x 8 factor against [8, 4] 8 x 32."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    from bench import step_cost

    def f(a, b):
        return solve_triangular(jnp.linalg.cholesky(a)[0], b, lower=True)

    text = jax.jit(f).lower(jnp.zeros((3, 8, 8)), jnp.zeros((8, 4))).compile().as_text()
    assert step_cost.library_flops(text) == pytest.approx(3 * 8 ** 3 / 3 + 8 * 32)
    assert step_cost.library_flops(jax.jit(lambda a: a @ a).lower(jnp.zeros((8, 8))).compile().as_text()) == 0.0


def test_scale_rows_take_the_final_ceilings():
    """The scale section's fractions and targets follow the ceilings the bench ends with; LAPACK flops
    count with XLA's: 1e6 + 1e6 flops at 1e10 flop/s is 2e-4 s a unit, over 1e5 bytes at 1e10 B/s."""
    from bench import scale

    section = [dict(roofline=dict(flops=1e6, library_flops=1e6, bytes=1e5, roofline_seconds=1.0, bound="bytes"),
                    numpy=None, floor=None, targets={},
                    rows=[dict(seeds=1, units_per_second=1000.0), dict(seeds=10, skipped=True)])]
    scale.apply_ceilings(section, dict(matmul_flops=1e10, memory_bandwidth=1e10))
    assert section[0]["roofline"]["roofline_seconds"] == pytest.approx(2e-4)
    assert section[0]["roofline"]["bound"] == "flops"
    assert section[0]["rows"][0]["fraction"] == pytest.approx(0.2)
    assert "fraction" not in section[0]["rows"][1]
    assert section[0]["targets"]["fraction"] == "MISSED 20.0%"
    scale.apply_ceilings(section, dict(matmul_flops=1e12, memory_bandwidth=1e8))  # now bytes-bound: 1e-3 s
    assert section[0]["roofline"]["bound"] == "bytes" and section[0]["rows"][0]["fraction"] == pytest.approx(1.0)


def test_compiled_calls_take_turns_on_a_shared_device(tmp_path, monkeypatch):
    """With the lock file set, a compiled call waits while another holder has the device, and the wait
    is counted (so a row's run seconds can drop it); a turn is re-entrant, and without the variable
    nothing is patched."""
    import fcntl
    import threading

    import jax
    import jax.numpy as jnp
    from bench import harness

    monkeypatch.setattr(jax.stages.Compiled, "__call__", jax.stages.Compiled.__call__)  # undone after the test
    monkeypatch.delenv(harness.LOCK_ENV, raising=False)
    assert harness.share_device() is False
    monkeypatch.setenv(harness.LOCK_ENV, str(tmp_path / "lock"))
    assert harness.share_device() is True and harness.share_device() is True  # patched once
    f = jax.jit(lambda x: x + 1.0).lower(jnp.zeros(3)).compile()
    held, release = threading.Event(), threading.Event()

    def other_process():  # another open file description conflicts like another process
        with open(tmp_path / "lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            held.set()
            release.wait()
            fcntl.flock(fh, fcntl.LOCK_UN)

    thread = threading.Thread(target=other_process)
    thread.start()
    held.wait()
    threading.Timer(0.3, release.set).start()
    before = harness.turn_wait()
    t = time.perf_counter()
    assert float(f(jnp.ones(3))[0]) == 2.0
    assert time.perf_counter() - t >= 0.25 and harness.turn_wait() - before >= 0.25
    thread.join()
    before = harness.turn_wait()
    with harness.device_turn():
        with harness.device_turn():  # re-entrant: the inner turn and the call do not wait on the outer
            assert float(f(jnp.ones(3))[0]) == 2.0
    assert harness.turn_wait() - before < 0.25


def test_merged_scale_json_takes_the_largest_ceilings():
    """bench.merge: the cases in the bench's order, each ceiling the largest measured, and every
    row's fraction taken again against it (1e6 bytes a unit at 1e10 B/s = 1e-4 s: 500 units/s is 5%)."""
    from bench import merge

    def doc(algorithm, bandwidth, flops):
        res = dict(algorithm=algorithm, roofline=dict(flops=1.0, bytes=1e6, roofline_seconds=1.0, bound="bytes"),
                   numpy=None, floor=None, targets={}, unit="agent-steps", curve="c", point=None,
                   rows=[dict(seeds=1, units_per_second=500.0, run_seconds=1.0, compile_seconds=1.0, peak_mb=1.0,
                              ratio=None, fraction=1.0, errors=0)])
        return dict(ceilings=dict(memory_bandwidth_bytes_per_second=bandwidth, matmul_float64_flops_per_second=flops),
                    scale_section=[res], total_seconds=3.0, environment={})

    out = merge.merge([doc("kernel_ucb", 1e10, 1e9), doc("linucb", 5e9, 2e9)])
    assert [r["algorithm"] for r in out["scale_section"]] == ["linucb", "kernel_ucb"]
    assert out["ceilings"] == dict(memory_bandwidth_bytes_per_second=1e10, matmul_float64_flops_per_second=2e9)
    assert [r["rows"][0]["fraction"] for r in out["scale_section"]] == pytest.approx([0.05, 0.05])
    assert out["processes"] == 2 and "MISSED 5.0%" in out["table"]
    with pytest.raises(ValueError, match="nothing to merge"):
        merge.merge([])


@pytest.mark.slow  # about 18 s; the default suite keeps the case-coverage test below
def test_scale_section_rows(tmp_path):
    """The scale section on one regret algorithm and one trial: every row measured, the ratio the JAX
    rate over the NumPy rate, the roofline fraction the rate times the step's roofline seconds, and
    one target line per algorithm."""
    from bench import scale

    out = tmp_path / "scale.json"
    assert main(["--quick", "--only", "scale", "--scale-algorithms", "linucb,uniform_allocation",
                 "--seeds", "1,3", "--out", str(out)]) == 0
    results = {r["algorithm"]: r for r in json.loads(out.read_text())["scale_section"]}
    assert set(results) == {"linucb", "uniform_allocation"}
    lin, trial = results["linucb"], results["uniform_allocation"]
    assert lin["spec"]["horizon"] == scale.QUICK_HORIZON and lin["unit"] == "agent-steps"
    assert trial["unit"] == "trials" and trial["roofline"] is None
    for res in (lin, trial):
        rows = res["rows"]
        assert [r["seeds"] for r in rows] == [1, 3] and not any(r.get("skipped") for r in rows)
        rate = res["numpy"]["units_per_second"]
        assert rate > 0
        for r in rows:
            assert r["units_per_second"] == pytest.approx(r["seeds"] * (scale.QUICK_HORIZON if res is lin else 1)
                                                          / r["run_seconds"])
            assert r["ratio"] == pytest.approx(r["units_per_second"] / rate)
    roof = lin["roofline"]
    assert roof["flops"] > 0 and roof["bytes"] > 0
    # the environment floor: uniform random arms on linucb's problem, at least as fast as linucb
    assert trial["floor"] is None and lin["floor"]["seeds"] == scale.FLOOR_SEEDS
    assert lin["floor"]["units_per_second"] > max(r["units_per_second"] for r in lin["rows"])
    assert lin["rows"][1]["fraction"] == pytest.approx(lin["rows"][1]["units_per_second"] * roof["roofline_seconds"])
    assert lin["targets"]["ratio"] == "n/a: S = 100 not measured"
    assert trial["targets"]["fraction"] == "n/a: a trial (no step)"
    assert lin["targets"]["flat"].startswith(("met", "MISSED"))


def test_scale_cases_cover_every_registered_algorithm():
    """One scale case per packaged algorithm, read from its record, each built as its experiment builds it."""
    from bandits_jax.algorithms import ALGORITHMS
    from bench import scale

    packaged = [n for n, target in ALGORITHMS.items() if isinstance(target, str)]  # other tests register toys
    assert [c.algorithm for c in scale.CASES] == packaged
    run, params, cfg = scale.build(next(c for c in scale.CASES if c.algorithm == "dis_kernel_ucb"))
    assert run.problem.spec.one_active and params["threshold"] > 0 and cfg["horizon"] == 300
    assert scale.units_per_seed(run) == 300


def test_cope_and_coop_scale_references_time_one_seed():
    """The CoPE-KB and Coop NumPy references of the scale section (tiny configurations built by
    hand, so that no world table compiles): every name registered, one seed timed, and the note
    saying where the JAX storage differs."""
    from bandits_jax.algorithms import ALGORITHMS, make_algorithm
    from bandits_jax.curves import Curve, Run, Spec, resolve
    from bench import coop_bench, cope_bench

    assert set(cope_bench.SCALE_REFERENCES) | set(coop_bench.SCALE_REFERENCES) <= set(ALGORITHMS)
    fb = Spec("ind_uniform_fb", {"xi": 1e-10})
    trial = Run(Curve("IndUniformFB", Spec("cope-kb", {"case": "rank2", "gap": 0.02}), fb), None,
                make_algorithm(fb.name, **fb.options))
    assert cope_bench.SCALE_REFERENCES[fb.name](trial, {"budget": 7000.0, "xi": 1e-10}, {}, 0)[1] > 0
    world = Spec("coop-linear", dict(num_agents=4, num_arms=3, dim=2, horizon=3, p=0.5))
    eager = Spec("eager_kernel_ucb", dict(storage="feature", embedding="common_lag", r_max=4, ring_rounds=4))
    run = resolve([Curve("Eager-KernelUCB", world, eager)], trace=False)[0]
    fn = coop_bench.SCALE_REFERENCES[eager.name]
    units, seconds = fn(run, {k: float(v) for k, v in run.algorithm.defaults.items()}, {}, 0)
    assert units == 3 * 4 and seconds > 0 and "common lag" in fn.note


def test_family_scale_references_time_one_seed():
    """The NumPy references of the scale section's single-agent, asynchronous, DUETS and best-arm
    families: each names a registered case, and one seed of three of them (a tiny horizon where the case has
    one) gives the case's units and a positive time."""
    from bench import async_bench, duets_bench, numpy_loop, scale

    refs = {**numpy_loop.SCALE_REFERENCES, **async_bench.SCALE_REFERENCES, **duets_bench.SCALE_REFERENCES}
    # each reference times a scale case (a case without one has no ratio in the table), and the families'
    # names they were written for still have theirs
    assert set(refs) <= {c.algorithm for c in scale.CASES}
    assert {"linucb", "neural_ts", "async_kernel_ucb", "dis_lin_ucb", "duets", "successive_elimination"} <= set(refs)
    for name in ("linucb", "dis_lin_ucb", "uniform_allocation"):
        run, params, cfg = scale.build(next(c for c in scale.CASES if c.algorithm == name), horizon=12)
        units, seconds = refs[name](run, params, cfg, 0)
        assert units == scale.units_per_seed(run) and seconds > 0
        assert refs[name].note == ""


def test_compile_profile_times_both_layouts_on_the_same_numbers(tmp_path):
    from bench import compiles

    # 9 seeds: chunks of CPU_VMAP_SIZE = 8 in the CPU layout, one vmap of 9 in the whole batch
    for flag in ([], ["--whole-batch"]):
        compiles.main(["linucb:9", str(tmp_path / f"c{len(flag)}.json"), *flag])
    rows = [json.loads((tmp_path / f"c{k}.json").read_text())["linucb:9"] for k in (0, 1)]
    assert all(r["compile"] > 0 and r["floor_compile"] > 0 for r in rows)
    assert rows[0]["regret"] == pytest.approx(rows[1]["regret"], rel=1e-12) and rows[0]["regret"] > 0
    with pytest.raises(SystemExit, match="NAME:S"):
        compiles.main(["linucb", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit, match="no scale case named 'nope'"):
        compiles.main(["nope:2", str(tmp_path / "x.json")])


def test_cold_start_sums_the_compile_reports_of_a_run(tmp_path):
    from bench import cold_start

    def report(folder, rows):
        folder.mkdir(parents=True)
        programs = [{"curve": c, "how": how, "seconds": s, "fingerprint": f} for c, how, s, f in rows]
        summary = {how: {"programs": sum(r[1] == how for r in rows), "seconds": sum(r[2] for r in rows if r[1] == how)}
                   for how in ("compiled", "loaded", "reused")}
        (folder / "compile_report.json").write_text(json.dumps({"programs": programs, "summary": summary}))

    # pair "p: a": two programs in tuning, the first loaded again by its knob curve in another folder
    report(tmp_path / "tuning", [("p: a", "compiled", 2.0, "f1"), ("p: a", "compiled", 3.0, "f2"),
                                 ("p: a", "reused", 0.0, "")])
    report(tmp_path / "reported", [("p: a @knob", "loaded", 0.5, "f1"), ("p: b", "compiled", 1.0, "f3"),
                                   ("p: c", "reused", 0.25, "f3")])  # p: b's program, from the process's table
    got = cold_start.programs(tmp_path)
    assert got["compiled"] == {"programs": 3, "seconds": 6.0} and got["loaded"]["programs"] == 1
    assert got["reused"] == {"programs": 2, "seconds": 0.25} and got["distinct"] == 3 and got["most_per_pair"] == 2
    doc = {"machine": {"cpu_count": 2}, "commands": {"arena smoke": {"cold": {"wall_seconds": 10.0, "load_before": 0.1,
                                                                             "programs": got}}}}
    assert "| arena smoke | cold | 10.0 | 3, 6.0 | 1, 0.5 | 2, 0.2 | 3 | 2 | 0.1 |" in cold_start.table(doc)
    assert cold_start.pair_of("p: a [x0.3]") == cold_start.pair_of("p: a @knob [ttl=2]") == "p: a"
    codes = {name: {**doc, "code": name} for name in ("10_later.json", "9_earlier.json", "2_first.json")}
    text = cold_start.comparison(codes)  # in the order of the files' numbers, not of their names as text
    assert text.index("Code 2_first") < text.index("Code 9_earlier") < text.index("Code 10_later")


def test_xla_options_table_names_a_set_that_moves_the_numbers():
    from bench import xla_options

    row = lambda c, r, g: {"compile": c, "run": r, "regret": g, "floor_compile": 1.0}  # noqa: E731
    doc = {"machine": {"cpu_count": 2}, "options": {
        "default": {"flags": "", "load_before": 1.0, "cases": {"a:10": row(2.0, 0.5, 3.0), "b:10": row(1.0, 1.0, 5.0)}},
        "O0": {"flags": "x", "load_before": 1.5, "cases": {"a:10": row(1.0, 0.7, 3.5), "b:10": row(0.5, 2.0, 5.0)}}}}
    lines = xla_options.table(doc).splitlines()
    assert lines[2] == "| a:10 | 2.0, 0.50 | 1.0, 0.70 | 3; O0: 3.5 |"
    assert lines[3] == "| b:10 | 1.0, 1.00 | 0.5, 2.00 | equal |"
    assert lines[4] == "| sum | 3, 1.5 | 2, 2.7 | |"
