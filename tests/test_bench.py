"""The benchmark command end to end at its quick size: every row measured, the JSON consistent.

Speeds are never asserted (the machine is shared); only that every number is there, positive,
and that the ratio is the JAX rate over the NumPy rate.
"""
import json
import math

import pytest

from bench import configs
from bench.__main__ import main


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    assert main(["--quick", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_every_row_is_measured(quick_result):
    names = [res["algorithm"] for res in quick_result["results"]]
    assert names == [case.name for case in configs.cases()]
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
