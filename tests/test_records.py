"""Records (`bandits_jax.records`) and claims (`bandits_jax.claims`) on hand-made results."""
import json

import numpy as np
import pytest

from bandits_jax import claims
from bandits_jax.cli import main
from bandits_jax.records import checkpoint_steps, write_record
from bandits_jax.results import Results, load_results, round_rows, save_results, summary_markdown, step_axis

S, T, N = 5, 250, 3


def _metadata(**extra):
    return {"experiment": "fam/toy", "size": "smoke", "algorithms": ["A", "B"], "agents": "mean", "se_ddof": 0,
            "config": {"precision": "float64"}, "seeds": list(range(S)), "commit": "abc", **extra}


def _arrays(rng):
    out = {}
    for k, curve in enumerate(("A", "B")):
        rounds = np.zeros((S, T))
        rounds[:, [6, 40, 199]] = 1  # phased rounds, common to every seed
        out[curve] = {"regret": rng.uniform(0, 1 + k, (S, T, N)), "comm_up": rounds * 7.0,
                      "comm_down": rng.integers(0, 3, (S, T)).astype(float), "rounds": rounds,
                      "errors": np.zeros(S, np.int32), "diag/width": rng.normal(size=(S, T))}
    return out


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    md = _metadata(tables={"A": [{"title": "per round", "columns": {"width": "w"}}]})
    save_results(tmp_path / "run", _arrays(rng), list(range(S)), md)
    return tmp_path / "run"


def test_a_record_gives_the_same_summary_and_exact_checkpoints(folder, tmp_path):
    path = write_record(folder, tmp_path / "data", checkpoints=10)
    assert path.name == "fam-toy-smoke"
    full, record = load_results(folder), load_results(path)
    assert summary_markdown(record) == summary_markdown(full)  # finals, communication, rounds, round table
    steps = step_axis(record)
    # ten even blocks ending at 25, 50, ..., 250, plus the rounds of the tabled curve (steps 7, 41, 200)
    assert steps.tolist() == [7, 25, 41, 50, 75, 100, 125, 150, 175, 200, 225, 250]
    for curve in ("A", "B"):
        np.testing.assert_allclose(record.cumulative(curve), full.cumulative(curve)[:, steps - 1], rtol=1e-12)
        assert record.arrays[curve]["regret"].shape == (S, len(steps), 1)
    assert "diag/width" not in record.arrays["B"]  # kept only where a table reads it
    assert [r["step"] for r in round_rows(record, "A", ["width"])] == [6, 40, 199]
    assert json.loads((path / "metadata.json").read_text())["record"] == {"from": folder.as_posix()}


def test_the_cli_writes_records_and_refuses_mixed_requests(folder, tmp_path, capsys):
    assert main(["report", "--record", str(folder), "--data", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "fam-toy-smoke" / "results.npz").is_file()
    assert main(["report", "--record", "--pages", str(folder)]) == 2
    assert "give one of them" in capsys.readouterr().err


def test_checkpoints_cover_short_runs_and_end_at_the_horizon():
    assert checkpoint_steps(7, 100).tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert checkpoint_steps(1000, 4, [np.array([3])]).tolist() == [3, 250, 500, 750, 1000]


def _res(finals: dict, outcomes=None, tags=None, x=""):
    """Results whose curves end at the given per-seed final regrets (one step)."""
    arrays = {c: {"regret": np.asarray(v, float)[:, None, None], "comm_up": np.ones((len(v), 1)),
                  "comm_down": np.zeros((len(v), 1)), "rounds": np.zeros((len(v), 1)),
                  "errors": np.zeros(len(v), np.int32), **(outcomes or {}).get(c, {})} for c, v in finals.items()}
    md = {"algorithms": list(finals), "agents": "mean", "tags": tags or {}, "x": x}
    if outcomes:
        md["outcomes"] = {"samples": {"kind": "mean"}, "correct": {"kind": "rate"}}
    return Results(arrays, np.arange(len(next(iter(finals.values())))), md)


def test_two_standard_errors_of_the_difference_make_level():
    # se = std(ddof=1)/sqrt(n): [0, 2] -> 1.0, so the difference's se is sqrt(2) and level is |gap| <= 2.83
    a = claims.final_regret(_res({"a": [0.0, 2.0]}), "a")
    assert a == claims.Number(1.0, 1.0)
    assert claims.compare(a, claims.Number(3.8, 1.0)) == "level"
    assert claims.compare(a, claims.Number(3.9, 1.0)) == "below"
    assert claims.compare(claims.Number(3.9, 1.0), a) == "above"


def test_claims_combine_to_the_worst_part():
    res = {"r": _res({"N=1": [9, 10, 11], "N=2": [5, 6, 7], "N=5": [5, 6, 6]})}
    verdict = claims.decreasing("p", "more, lower", ["r"], ["N=1", "N=2", "N=5"]).check(res)
    assert verdict.status == claims.LEVEL  # N=1 -> N=2 falls, N=2 -> N=5 is within noise
    assert verdict.numbers.startswith("1 of 2 comparisons level: r: N=5 5.667")
    wrong = claims.all_below("p", "N=5 lowest", ["r"], ["N=1"], ["N=2", "N=5"]).check(res)
    assert wrong.status == claims.NOT_REPRODUCED and wrong.numbers.startswith("2 of 2 comparisons not reproduced")
    pending = claims.all_below("p", "x", ["r", "gone"], ["N=5"], ["N=1"])
    assert claims.verdict(pending, res) == claims.Verdict(
        claims.NOT_RECORDED, "no record gone; the others so far reproduced: r: N=5 5.667 +- 0.33 against N=1 10 +- 0.58")
    failed = claims.all_below("p", "x", ["r", "gone"], ["N=1"], ["N=5"])
    assert claims.verdict(failed, res).status == claims.NOT_REPRODUCED  # a present record already refutes it
    assert claims.verdict(failed, {}) == claims.Verdict(claims.NOT_RECORDED, "no record r, gone")


def test_ratio_claims_read_curves_by_their_x_tag():
    tags = {f"{m}, Delta={d}": {"method": m, "Delta": d} for m in ("Co", "Ind") for d in (0.1, 0.5)}
    samples = {"Co, Delta=0.1": 10.0, "Ind, Delta=0.1": 50.0, "Co, Delta=0.5": 10.0, "Ind, Delta=0.5": 48.0}
    outcomes = {curve: {"samples": np.array([value, value])} for curve, value in samples.items()}
    res = {"r": _res({c: [0.0, 0.0] for c in tags}, outcomes, tags, x="Delta")}
    strict = claims.per_x("p", "ratio 5", ["r"], "Co", ["Ind"], "samples", relation="ratio", target=5.0, tolerance=0.01)
    loose = claims.per_x("p", "ratio 5", ["r"], "Co", ["Ind"], "samples", relation="ratio", target=5.0, tolerance=0.05)
    assert strict.check(res) == claims.Verdict(
        claims.NOT_REPRODUCED, "samples Ind / Co from 4.8 (Delta=0.5) to 5 (Delta=0.1); outside 1% of 5: "
                               "Delta=0.5: samples Ind / Co = 4.8")
    assert loose.check(res) == claims.Verdict(claims.REPRODUCED,
                                              "samples Ind / Co from 4.8 (Delta=0.5) to 5 (Delta=0.1)")
