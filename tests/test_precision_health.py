"""The float32 health section (bench/precision.py): its fresh factors, its driver, its verdicts, and the
precision that every results folder states."""
import types

import numpy as np
import pytest

from bandits_jax.algorithms import make_algorithm
from bandits_jax.algorithms.single.kernel import KernelState
from bandits_jax.algorithms.single.linear import LinearState
from bandits_jax.problems import make_problem
from bandits_jax.reporting.results import Results, summary_markdown
from bandits_jax.reporting.results import cumulative_regret
from bandits_jax.runner import run_batch
from bench import precision


def _history(T=30, N=2, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, N, d))
    return precision.History(np.zeros((T, N), np.int32), X, rng.normal(size=(T, N)), np.ones((T, N), bool), None)


def test_linucb_fresh_factor_is_zero_on_an_exact_state_and_sees_a_perturbation():
    h, lam = _history(), 0.5
    chol = np.stack([np.linalg.cholesky(lam * np.eye(3) + h.chosen[:, i].T @ h.chosen[:, i]) for i in range(2)])
    b = np.einsum("ti,tid->id", h.rewards, h.chosen)
    exact = precision.linucb_factors(LinearState(chol, b, np.full(2, 30)), h, {"lam": lam})
    assert exact["chol"] < 1e-14 and exact["b"] < 1e-14
    bad = chol.copy()
    bad[1, 2, 0] += 1e-3 * np.linalg.norm(chol[1])  # agent 1 only: the worst agent is reported
    assert precision.linucb_factors(LinearState(bad, b, np.full(2, 30)), h, {"lam": lam})["chol"] == \
        pytest.approx(1e-3, rel=1e-9)
    inactive = h._replace(active=h.active.copy())
    inactive.active[5, 0] = False  # a row an agent did not observe must not count
    assert precision.linucb_factors(LinearState(chol, b, np.full(2, 30)), inactive, {"lam": lam})["chol"] > 1e-4


def test_kernel_fresh_inverse_factor_reads_only_the_live_rows():
    rng = np.random.default_rng(1)
    C, n, lam, ls = 12, 7, 0.3, 0.8
    X = np.zeros((1, C, 2))
    X[0, :n] = rng.normal(size=(n, 2))
    M = np.eye(C)[None].copy()
    M[0, :n, :n] = precision.inverse_factor(precision.gram(ls, X[0, :n], X[0, :n]) + lam * np.eye(n))
    params = {"lam": lam, "lengthscale": ls}
    state = KernelState(X, np.zeros((1, C)), M, np.array([n]))
    assert precision.kernel_ucb_factors(state, None, params)["chol_inv"] < 1e-13
    M[0, n - 1, 0] *= 1.01
    assert precision.kernel_ucb_factors(state._replace(chol_inv=M), None, params)["chol_inv"] > 1e-4


def test_drift_of_zero_against_zero_and_of_anything_against_zero():
    assert precision.drift(np.zeros(3), np.zeros(3)) == 0.0
    assert precision.drift(np.ones(3), np.zeros(3)) == np.inf
    assert precision.drift([3.0, 4.0], [3.0, 4.0 + 5e-3]) == pytest.approx(5e-3 / np.hypot(3, 4.005), rel=1e-12)


@pytest.mark.parametrize("name", ["LinUCB", pytest.param("KernelUCB", marks=pytest.mark.slow)])  # fixed-size state;
# buffers grown at checkpoints (KernelUCB under -m slow: the default suite's time)
def test_recording_driver_gives_the_runners_regret_and_error_bits(name):
    case = next(c for c in precision.cases(32) if c.name == name)
    row = precision.run_case(case, 32, "float64", seeds=(0, 1))
    problem, alg = case.build(32)
    out = run_batch(problem, alg, [0, 1])
    np.testing.assert_allclose(row["final_regret"], cumulative_regret(out.regret, "mean")[:, -1], rtol=1e-9)
    assert row["errors_per_seed"] == [int(e) for e in out.errors] == [0, 0]
    assert [c["t"] for c in row["checkpoints"]] == [8, 16, 24, 32]


def test_linucb_drift_is_rounding_in_float64_and_small_but_visible_in_float32():
    args = types.SimpleNamespace(quick=True, only_names=set(), precision_horizon=60)
    section = precision.run_section(args, only=("LinUCB",))
    rows = {r["precision"]: r for r in section["rows"]}
    assert rows["float64"]["drift"]["chol"] < 1e-12 and rows["float64"]["drift"]["b"] < 1e-12
    assert 1e-9 < rows["float32"]["drift"]["chol"] < 1e-4  # float32 rounding, far below the threshold
    for r in rows.values():
        assert r["nonfinite_regret"] == r["nonfinite_state"] == r["errors"] == 0
        assert r["seeds"] == [0, 1] and len(r["final_regret"]) == 2 and np.all(np.isfinite(r["final_regret"]))
    assert section["verdicts"][0]["family"] == "fnucb" and section["verdicts"][0]["algorithms"] == ["LinUCB"]
    assert "| fnucb | LinUCB | float32 | 60 | 0, 0 | 0x0 | chol " in precision.table(section)


def _row(precision_, drift=1e-7, regret=(10.0, 11.0), nonfinite=0, errors=0):
    return dict(algorithm="A", family="async", precision=precision_, drift={"P": drift}, nonfinite_regret=nonfinite,
                nonfinite_state=0, errors=errors, error_text="A: overflow" if errors else "", final_regret=list(regret),
                final_regret_mean=float(np.mean(regret)), final_regret_se=float(np.std(regret, ddof=1) / np.sqrt(2)))


@pytest.mark.parametrize("bad, reason", [
    (dict(drift=2e-3), "P drift 0.002 >= 0.001"),
    (dict(nonfinite=1), "non-finite values"),
    (dict(errors=1), "error bits 0x1"),
    (dict(regret=(30.0, 31.0)), "final regret +190.5% from float64's, inf standard errors"),
    (dict(regret=(11.5, 12.6)), "final regret +14.8% from float64's, 31.0 standard errors"),
])
def test_verdict_holds_only_when_every_check_passes(bad, reason):
    assert precision.verdicts([_row("float32"), _row("float64")]) == [
        dict(family="async", holds=True, algorithms=["A"], reasons=[])]
    (verdict,) = precision.verdicts([_row("float32", **bad), _row("float64")])
    assert verdict["holds"] is False and reason in verdict["reasons"][0]


def test_regret_holds_within_the_tolerance_or_within_the_noise_of_the_paired_differences():
    base = _row("float64", regret=(10.0, 11.0))
    assert precision.regret_holds(_row("float32", regret=(10.4, 11.5)), base)  # +4.3%
    assert not precision.regret_holds(_row("float32", regret=(10.6, 11.7)), base)  # +6.2%, the same gap twice
    assert precision.regret_holds(_row("float32", regret=(9.0, 30.0)), base)  # paired differences -1 and +19


def test_summary_states_the_precision_of_the_runs():
    arrays = {"A": {"regret": np.ones((2, 5, 1)), "comm_up": np.zeros((2, 5)), "comm_down": np.zeros((2, 5)),
                    "rounds": np.zeros((2, 5))}}
    meta = {"experiment": "x", "size": "smoke", "algorithms": ["A"], "config": {"precision": "float32"}}
    assert "Precision: float32." in summary_markdown(Results(arrays, np.arange(2), meta)).splitlines()
    meta["config"]["precision"] = "float64"
    assert "Precision: float64." in summary_markdown(Results(arrays, np.arange(2), meta)).splitlines()


def test_a_float32_run_says_so_in_its_metadata_and_summary(tmp_path):
    from bandits_jax.sweep import run_experiment
    import json

    out = run_experiment("quickstart", "smoke", overrides={"precision": "float32"}, out=tmp_path / "q", quiet=True,
                         plot=False, curves=False, only=("Random",))
    assert json.loads((out / "metadata.json").read_text())["config"]["precision"] == "float32"
    assert "Precision: float32." in (out / "summary.md").read_text().splitlines()


@pytest.mark.slow
def test_section_at_quick_size_through_the_bench_command(tmp_path):
    import json

    from bench.__main__ import main

    out = tmp_path / "bench.json"
    assert main(["--quick", "--only", "precision", "--out", str(out)]) == 0
    section = json.loads(out.read_text())["precision_section"]
    names = [c.name for c in precision.cases(section["horizon"])]
    assert [(r["algorithm"], r["precision"]) for r in section["rows"]] == [(n, p) for n in names
                                                                          for p in precision.PRECISIONS]
    assert [v["family"] for v in section["verdicts"]] == list(precision.FAMILIES)
    for r in section["rows"]:
        assert r["horizon"] == precision.QUICK_HORIZON and r["nonfinite_regret"] == 0, r
        limit = 1e-10 if r["precision"] == "float64" else precision.DRIFT_TOL
        assert r["drift"] and all(v < limit for v in r["drift"].values()), r
