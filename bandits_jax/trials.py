"""Phase-level trials (pure exploration, `core.Trial`): a batch of whole trials in ONE compiled call.

A trial has no step loop: `trial.run(key, params, arms, public, pull)` runs it to its end and returns its
declared outcomes. Seed s draws its instance from its problem key and runs with its algorithm key, the
key scheme of `runner.run_batch`, so a seed's numbers do not depend on the batch; the batch axis is
sharded over every device as the runner shards runs.
"""
from __future__ import annotations

import functools
import time
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import compile_report, programs
from ._cpu import cpu_guard
from .core import Arms, ConfigError, Trial, check_stream
from .devices import device_mesh, precision_scope, sharded_runs
from .keys import init_keys, problem_and_algorithm_keys, seed_key, stream_key
from .runner import batched_params, warn_failed_runs


class TrialOutput(NamedTuple):
    """Outcomes of a batch of phase-level trials, as NumPy arrays.

    outcomes: {name: [B]} the trial's declared outcomes.
    errors:   [B] int32 error bits of each trial (0: none).
    compile_seconds, run_seconds: wall-clock split of the call.
    """

    outcomes: dict
    errors: np.ndarray
    compile_seconds: float
    run_seconds: float


def trial_run(arms: Arms, trial: Trial, base_key: int) -> Callable:
    """ONE trial: (seed, params) -> {outcome: scalar, "errors": int32}, the instance drawn with the
    seed's problem key and the trial run with its algorithm key of the trial's stream.

    The trial never holds the instance: it gets `arms.public(instance)` (None where the world has
    none) and `pull(counts, key)`, and returns its agents' answers [N] under "answer", which the runner
    judges against `arms.answer(instance)` into the outcome "correct" (every agent right)."""
    stream = check_stream(trial.name, trial.stream)

    def one(seed, params):
        problem_key, algorithm_key = problem_and_algorithm_keys(seed_key(seed, base_key))
        instance = arms.init(init_keys(problem_key, algorithm_key)[0])
        public = None if arms.public is None else arms.public(instance)
        out = dict(trial.run(stream_key(algorithm_key, stream), params, arms, public,
                             functools.partial(arms.pull, instance)))
        if "answer" in out:
            out["correct"] = jnp.all(out.pop("answer") == arms.answer(instance))
        if set(out) != set(trial.outcomes) | {"errors"}:
            raise ValueError(f"{trial.name}: run returned {sorted(out)}, expected its declared outcomes "
                             f"{sorted(trial.outcomes)} and 'errors' (an 'answer' becomes 'correct')")
        return out

    return one


def run_trials(arms: Arms, trial: Trial, seeds: Sequence[int], params: Optional[dict] = None, *,
               base_key: int = 0, precision: str = "float64", compiled_cache: Optional[dict] = None) -> TrialOutput:
    """Phase-level trials (pure exploration), one per seed, in ONE compiled call.

    Seed s draws its instance with `arms.init` from its problem key and runs `trial.run` with its
    algorithm key: the key scheme of `run_batch`, so a seed's numbers do not depend on the batch.
    params: as for `run_batch` (None, or {name: scalar or [B]}), so a grid is one vmap. The batch
    axis is sharded over every device. Trials with error bits warn (`warn_failed_runs`).
    """
    cpu_guard()
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ConfigError("no seeds to run: --seeds must be at least 1")
    batched = batched_params(trial, params, len(seeds))
    with precision_scope(precision):
        mesh = device_mesh()
        padded = -(-len(seeds) // mesh.devices.size) * mesh.devices.size
        dtype = jnp.zeros(()).dtype
        args = (sharded_runs(seeds, padded, mesh, np.uint32),
                {k: sharded_runs(v, padded, mesh, dtype) for k, v in batched.items()})

        one = trial_run(arms, trial, base_key)
        cache = compiled_cache if compiled_cache is not None else {}
        key = ("trials", id(arms), id(trial), padded, str(dtype))
        shape = dict(batch=len(seeds), padded=padded, agents=arms.num_agents)
        t_c = time.perf_counter()
        if key in cache:
            compile_report.note("trials", compile_report.REUSED, 0.0, **shape)
        else:
            cache[key] = programs.compiled(jax.jit(jax.vmap(one)).lower(*args), "trials", t_c, **shape)
        t_r = time.perf_counter()
        out = jax.device_get(cache[key](*args))
        t_end = time.perf_counter()
    out = {k: np.asarray(v)[: len(seeds)] for k, v in out.items()}
    errors = out.pop("errors").astype(np.int32)
    warn_failed_runs(trial, seeds, errors)
    return TrialOutput(out, errors, t_r - t_c, t_end - t_r)
