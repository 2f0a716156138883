"""Resuming a sweep over damaged chunk files, and the atomic writers under concurrent writers
(bandits_jax/sweep.py's chunk reading, bandits_jax/reporting/results.py's `replacing`)."""
import multiprocessing
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from bandits_jax import sweep
from bandits_jax.algorithms import register_algorithm
from bandits_jax.curves import Curve, Spec
from bandits_jax.experiments.registry import Experiment, _REGISTRY, register
from bandits_jax.problems import register_problem
from bandits_jax.reporting.results import atomic_savez, atomic_write_text

sys.path.insert(0, str(Path(__file__).parent))
from toy import greedy_with_eps, toy_problem  # noqa: E402


register_problem("test-resume-toy", toy_problem)
register_algorithm("test_resume_greedy", greedy_with_eps)


def _build(config):
    problem = Spec("test-resume-toy", {"horizon": config["horizon"], "num_agents": 2})
    return [Curve("HistoryGreedy", problem, Spec("test_resume_greedy")),
            Curve("Random", problem, Spec("uniform_random"))]


if "test/resume-toy" not in _REGISTRY:
    register(Experiment("test/resume-toy", "toy experiment for resume tests", {},
                        {"smoke": {"horizon": 30, "seeds": 4}}, _build))


def _run(out):
    return sweep.run_experiment("test/resume-toy", "smoke", out=out, chunk=2, quiet=True, plot=False, curves=False)


def _arrays(out) -> dict:
    with np.load(out / "results.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("damage", ["half", "empty"])
def test_an_unreadable_chunk_file_is_set_aside_and_its_seeds_recomputed(damage, tmp_path):
    out = tmp_path / "out"
    first = _arrays(_run(out))
    torn = out / "chunks" / "HistoryGreedy" / "seeds_2-3.npz"
    whole = torn.read_bytes()
    damaged = whole[:len(whole) // 2] if damage == "half" else b""
    torn.write_bytes(damaged)
    (out / "results.npz").unlink()
    with pytest.warns(RuntimeWarning, match=r"seeds_2-3\.npz cannot be read") as caught:
        _run(out)
    assert len([w for w in caught if "cannot be read" in str(w.message)]) == 1
    again = _arrays(out)
    assert sorted(again) == sorted(first)
    for key in first:
        np.testing.assert_array_equal(again[key], first[key], err_msg=key)
    assert (torn.parent / "seeds_2-3.npz.unreadable").read_bytes() == damaged  # kept aside, for a look
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # set aside: a later run neither warns nor recomputes
        _run(out)


def _write_many(path: str, tag: int, rounds: int) -> None:
    """Write `path` `rounds` times, each time `tag`'s own text."""
    for _ in range(rounds):
        atomic_write_text(Path(path), f"writer {tag} " * 2000)


def test_writers_of_one_path_at_once_never_collide(tmp_path):
    path = tmp_path / "config.json"
    failures = []

    def write(tag):
        try:
            _write_many(str(path), tag, 40)
        except Exception as err:  # noqa: BLE001 - any failure of a writer is what this test looks for
            failures.append(err)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    processes = [multiprocessing.get_context("spawn").Process(target=_write_many, args=(str(path), 10 + p, 40))
                 for p in range(2)]
    for p in processes:
        p.start()
    for t in threads:
        t.join()
    for p in processes:
        p.join(timeout=120)
    assert failures == [] and [p.exitcode for p in processes] == [0, 0]
    text = path.read_text()
    assert any(text == f"writer {tag} " * 2000 for tag in (*range(6), 10, 11))  # one writer's whole text
    assert list(tmp_path.glob("*.tmp")) == []


class _Unconvertible:
    def __array__(self, *args, **kwargs):
        raise ValueError("cannot be an array")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "results.npz"
    atomic_savez(path, {"a": np.arange(3)})
    with pytest.raises(ValueError, match="cannot be an array"):
        atomic_savez(path, {"a": np.arange(2), "b": _Unconvertible()})
    with np.load(path) as data:
        np.testing.assert_array_equal(data["a"], np.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.npz"]
