"""Records (`bandits_jax.reporting.records`) on hand-made results; the claims' rule is in test_claims.py."""
import json

import numpy as np
import pytest

from bandits_jax.cli import main
from bandits_jax.reporting.records import checkpoint_steps, write_record
from bandits_jax.reporting.results import load_results, round_rows, save_results, summary_markdown, step_axis

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
    assert "give one of --record DIR" in capsys.readouterr().err


def test_checkpoints_cover_short_runs_and_end_at_the_horizon():
    assert checkpoint_steps(7, 100).tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert checkpoint_steps(1000, 4, [np.array([3])]).tolist() == [3, 250, 500, 750, 1000]
