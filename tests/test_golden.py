"""Every registered experiment's smoke run against its stored golden outputs.

tests/golden/smoke_outputs.npz holds, for every curve of every experiment at its smoke size, the
per-step regret summed over agents [S, T] and the communication (comm_up, comm_down, rounds [S, T]),
computed in float64 by the commit that PROVENANCE.md beside it names for each curve. A refactor of
the runner or of an algorithm must leave them equal to 1e-10. A change meant to alter an algorithm's
numbers recomputes that algorithm's curves with tests/golden/update_golden.py, in the same commit,
and regenerates the table with tests/golden/provenance.py.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bandits_jax.experiments.registry import build_runs, grid_names, resolve_config
from bandits_jax.experiments.catalog import experiments
from bandits_jax.problems.datasets import DataNotFoundError
from bandits_jax.runner import COMM_KEYS, run_batch
from helpers import data_dir_default, skip_without_data

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

GOLDEN = Path(__file__).parent / "golden" / "smoke_outputs.npz"
PROVENANCE = GOLDEN.with_name("PROVENANCE.md")
# phase-level experiments came after the change and have no regret curves; tests/test_elimination.py
# checks them against their NumPy reference
PHASE_LEVEL = {"bai/elimination", *(f"cope/{m}-{c}" for m in ("fc", "fb") for c in ("rank1", "rank2", "rank5"))}
# the default suite runs one experiment, which reaches all seven asynchronous methods; quickstart
# (FN-UCB, KernelUCB, NeuralUCB, the random policy) and every other experiment run with `pytest -m
# headline` (CI runs them after the suite, .ci/run), and test_sweep_cli runs quickstart's smoke end
# to end in the default suite. Which curves have an independent check (a NumPy loop written from the
# spec) and which only this file guards: tests/golden/PROVENANCE.md.
DEFAULT = {"async/synthetic-f1"}


def _stored():
    with np.load(GOLDEN) as data:
        out = {}
        for key in data.files:
            name, curve, output = key.split("|")
            out.setdefault(name, {}).setdefault(curve, {})[output] = data[key]
    return out


STORED = _stored()


def smoke_outputs(name: str) -> dict:
    """{curve: {output: [S, T]}} of experiment `name` at its smoke size, as the sweep computes them."""
    exp = experiments()[name]
    config = resolve_config(exp, "smoke", {})
    seeds = list(range(config["first_seed"], config["first_seed"] + config["seeds"]))
    try:
        runs = build_runs(exp, config)
    except DataNotFoundError as err:
        skip_without_data(f"{name}: {err};")
    out, cache = {}, {}
    for problem, alg, grid in runs:
        curves = [alg.name] if grid is None else grid_names(alg.name, grid)
        params = None if grid is None else {
            k: [point.get(k, v) for _, point in grid for _ in seeds] for k, v in alg.defaults.items()}
        res = run_batch(problem, alg, seeds * len(curves), params, base_key=config["base_key"],
                        precision=config["precision"], first_segment=config["first_segment"], compiled_cache=cache,
                        vmap_size=config["vmap_size"] or None)
        n = len(seeds)
        for g, curve in enumerate(curves):
            rows = slice(g * n, (g + 1) * n)
            out[curve] = {"regret": res.regret[rows].sum(axis=-1), **{k: getattr(res, k)[rows] for k in COMM_KEYS}}
    return out


def golden_experiments() -> list:
    """The experiments the golden file holds: every registered one with regret curves ("test/..."
    experiments are the ones that test modules register in the same process)."""
    return sorted(n for n in experiments() if not n.startswith("test/") and n not in PHASE_LEVEL)


def test_every_registered_experiment_has_stored_outputs():
    assert sorted(STORED) == golden_experiments()
    assert DEFAULT <= set(STORED)


def test_the_provenance_table_names_every_stored_curve():
    """tests/golden/PROVENANCE.md (written by tests/golden/provenance.py) has one row per stored curve,
    with an independent check or "regression guard"."""
    spec = importlib.util.spec_from_file_location("provenance", GOLDEN.with_name("provenance.py"))
    provenance = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(provenance)
    rows = [line.split(" | ") for line in PROVENANCE.read_text().splitlines() if line.startswith("| ")][1:]
    listed = {(r[0][2:], r[1]): r[3].rstrip(" |") for r in rows}
    assert sorted(listed) == sorted((e, c) for e, curves in STORED.items() for c in curves)
    assert all(check == provenance.check_of(curve) for (_, curve), check in listed.items())


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=[pytest.mark.slow,
                                                                                 pytest.mark.headline])
                                  for n in sorted(STORED)])
def test_smoke_outputs_equal_the_stored_ones(name):
    with data_dir_default():  # the real-data experiments read the shared data folder where it exists
        got = smoke_outputs(name)
    assert sorted(got) == sorted(STORED[name])
    for curve, outputs in STORED[name].items():
        for output, expect in outputs.items():
            np.testing.assert_allclose(got[curve][output], expect, rtol=1e-10, atol=1e-10,
                                       err_msg=f"{name}: {curve}: {output}")
