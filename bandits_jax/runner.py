"""The regret-minimisation runner: one `lax.scan` over time, a batch of runs under `vmap`.

A *run* is one (seed, hyper-parameter point) pair. A batch of runs executes as ONE compiled
call per capacity segment: the scan body is `vmap(step)` over the batch, with the time index
unbatched (so progress can be reported from inside the compiled loop), and the batch axis is
sharded over every available device with `jax.sharding` (one device is a mesh of size one).

Keys. Seed s owns `fold_in(PRNGKey(base_key), s)`; from it a problem key and an algorithm key
are derived, and from those, per-step keys by `fold_in(., t)`. Nothing depends on the batch
size, the chunking, the segmenting or the device count, so seed s gives the same numbers
however the sweep is cut; and two algorithms on the same seed see the same contexts and noise.

Segments. When an algorithm declares a `capacity`, the horizon is split into segments
[0, s0), [s0, 2 s0), [2 s0, 4 s0), ... ; each segment runs with buffers of the capacity it
needs at its end, and the state is padded (`algorithm.resize`) between segments. A growing
kernel matrix or training history then costs in proportion to its current size. Buffers sized
by demand (`Algorithm.demand`, a Nyström dictionary) get, before each segment, room for about
1.5 times the batch's largest fill (`grown_rows`); a segment in which a run outgrows them is
run again from its start with twice the rows (the keys do not depend on sizes, so the numbers
are those of a run that had the room from the start).

Errors. The algorithms of this package mark a broken run (a capacity overflow, two active
clients in a one-client protocol) by NaN in its communication outputs. After each segment the
runner looks at them; when EVERY run of the batch is marked it stops with a ConfigError instead
of computing the rest of the horizon (with some runs still sound, e.g. other points of a
hyper-parameter grid, it goes on, and the marked runs are reported by the algorithm's check).

Precision. `precision="float64"` runs tracing and execution inside a scoped
`jax.enable_x64(True)`; the user's global setting is left alone.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .core import COMM_KEYS, Algorithm, ConfigError, Problem, call_select, call_update

OUTPUT_KEYS = ("regret",) + COMM_KEYS


class RunOutput(NamedTuple):
    """Per-step outputs of a batch of runs, as NumPy arrays.

    regret:    [B, T, N] instantaneous pseudo-regret (noiseless means), 0 for inactive agents.
    comm_up:   [B, T] scalars sent towards the server / peers at each step.
    comm_down: [B, T] scalars sent back.
    rounds:    [B, T] 1 where a communication round took place.
    compile_seconds, run_seconds: wall-clock split of the call.
    """

    regret: np.ndarray
    comm_up: np.ndarray
    comm_down: np.ndarray
    rounds: np.ndarray
    compile_seconds: float
    run_seconds: float


def precision_scope(precision: str):
    """A context in which JAX computes in the requested float precision."""
    if precision == "float64":
        return jax.enable_x64(True)
    if precision == "float32":
        return contextlib.nullcontext()
    raise ConfigError(f"precision must be 'float64' or 'float32', got {precision!r}")


# ----------------------------------------------------------------------------------- keys
def seed_key(seed, base_key: int = 0):
    """The root key of seed `seed` (identical whatever batch the seed runs in)."""
    return jax.random.fold_in(jax.random.PRNGKey(base_key), seed)


def problem_and_algorithm_keys(key):
    """Split a seed key into the problem's key and the algorithm's key."""
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


def problem_step_keys(problem_key, t):
    """(contexts, rewards, arrivals) keys of step t."""
    return jax.random.split(jax.random.fold_in(jax.random.fold_in(problem_key, 1), t), 3)


def algorithm_step_keys(algorithm_key, t):
    """(select, update) keys of step t."""
    return jax.random.split(jax.random.fold_in(jax.random.fold_in(algorithm_key, 1), t), 2)


def init_keys(problem_key, algorithm_key):
    return jax.random.fold_in(problem_key, 0), jax.random.fold_in(algorithm_key, 0)


# ----------------------------------------------------------------------------------- segments
def segments(algorithm: Algorithm, problem: Problem, first: int = 128):
    """[(t_start, t_end, capacity)] covering the horizon; capacity None for fixed-size state."""
    horizon = problem.spec.horizon
    if algorithm.capacity is None:
        return [(0, horizon, None)]
    out = []
    start, end = 0, min(first, horizon)
    while start < horizon:
        cap = int(algorithm.capacity(problem.spec, end))
        if out and out[-1][2] == cap and algorithm.demand is None:  # demand-sized buffers re-size at every doubling
            out[-1] = (out[-1][0], end, cap)
        else:
            out.append((start, end, cap))
        start, end = end, min(2 * end, horizon)
    return out


# ----------------------------------------------------------------------------------- one step
def make_step(problem: Problem, algorithm: Algorithm) -> Callable:
    """The pure step of ONE run: (state, instance, keys, t) -> (state, outputs)."""
    num_agents = problem.spec.num_agents

    def step(state, instance, problem_key, algorithm_key, t):
        k_ctx, k_rew, k_act = problem_step_keys(problem_key, t)
        contexts = problem.contexts(instance, t, k_ctx)
        means = problem.mean_reward(instance, t, contexts)
        all_rewards = problem.sample_rewards(instance, means, k_rew)
        if problem.active is None:
            active = jnp.ones((num_agents,), bool)
        else:
            active = problem.active(instance, t, k_act)
        k_sel, k_upd = algorithm_step_keys(algorithm_key, t)
        actions, sinfo = call_select(algorithm, state, contexts, k_sel, active)
        rewards = jnp.take_along_axis(all_rewards, actions[:, None], axis=1)[:, 0]
        chosen_means = jnp.take_along_axis(means, actions[:, None], axis=1)[:, 0]
        regret = jnp.where(active, jnp.max(means, axis=1) - chosen_means, 0.0)
        state, info = call_update(algorithm, state, contexts, actions, rewards, active, k_upd, sinfo)
        outs = {"regret": regret}
        for key in COMM_KEYS:
            outs[key] = jnp.asarray(info.get(key, 0.0), regret.dtype)
        return state, outs

    return step


def state_batch(state) -> int:
    """The (static) number of runs of a batched state: the leading size of its first leaf."""
    return int(jax.tree_util.tree_leaves(state)[0].shape[0])


def _progress_callback(report: Optional[Callable[[int], None]], every: int):
    if report is None:
        return lambda t: None

    def maybe_report(t):
        lax.cond((t + 1) % every == 0, lambda: jax.debug.callback(report, t + 1), lambda: None)

    return maybe_report


# ----------------------------------------------------------------------------------- batch runner
def error_marked(outs) -> np.ndarray:
    """[B] bool: runs whose comm_up or comm_down (arrays [T, B, ...]) hold a NaN in these steps."""
    def nan_rows(x):
        x = np.asarray(x)
        return np.isnan(x.reshape(x.shape[0], x.shape[1], -1)).any(axis=(0, 2))

    return nan_rows(outs["comm_up"]) | nan_rows(outs["comm_down"])


def _mesh():
    devices = np.array(jax.devices())
    return Mesh(devices, ("runs",))


def run_batch(
    problem: Problem,
    algorithm: Algorithm,
    seeds: Sequence[int],
    hparams: Optional[dict] = None,
    *,
    base_key: int = 0,
    precision: str = "float64",
    first_segment: int = 128,
    progress: Optional[Callable[[int], None]] = None,
    progress_every: int = 250,
    compiled_cache: Optional[dict] = None,
    stop_on_error: bool = True,
) -> RunOutput:
    """Run `algorithm` on `problem` for each seed in ONE compiled call per capacity segment.

    seeds:   B ints, one run each.
    hparams: None (the algorithm's defaults for every run) or a dict of arrays [B] (one
             hyper-parameter point per run; names must be the algorithm's).
    progress: called on the host with the global step reached, every `progress_every` steps.
    stop_on_error: raise ConfigError at the end of a segment in which every run carries the NaN
             error marker in its communication (see the module docstring); False runs to the end.
    Returns a RunOutput with arrays of leading size B.
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ConfigError("no seeds to run: --seeds must be at least 1")
    if algorithm.batching not in ("vmap", "map"):
        raise ConfigError(f"{algorithm.name}: batching must be 'vmap' or 'map', got {algorithm.batching!r}")
    hp = _batched_hparams(algorithm, hparams, len(seeds))
    with precision_scope(precision):
        return _run_batch(problem, algorithm, seeds, hp, base_key, first_segment, progress,
                          progress_every, compiled_cache if compiled_cache is not None else {}, stop_on_error)


def _batched_hparams(algorithm: Algorithm, hparams, batch: int) -> dict:
    given = {} if hparams is None else dict(hparams)
    unknown = sorted(set(given) - set(algorithm.hparams))
    if unknown:
        raise ConfigError(f"{algorithm.name}: unknown hyper-parameter(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(algorithm.hparams)) or 'none'}")
    out = {}
    for name, default in algorithm.hparams.items():
        value = np.asarray(given.get(name, default), dtype=np.float64)
        if value.ndim == 0:
            value = np.full((batch,), float(value))
        if value.shape != (batch,):
            raise ConfigError(f"{algorithm.name}: hyper-parameter {name} has shape {value.shape}, expected ({batch},)")
        out[name] = value
    return out


def _run_batch(problem, algorithm, seeds, hp, base_key, first_segment, progress, every, cache, stop_on_error):
    mesh = _mesh()
    n_dev = mesh.devices.size
    batch = len(seeds)
    padded = -(-batch // n_dev) * n_dev
    seed_arr = np.array(seeds + [seeds[-1]] * (padded - batch), dtype=np.uint32)
    hp = {k: np.concatenate([v, np.repeat(v[-1:], padded - batch)]) for k, v in hp.items()}
    sharding = NamedSharding(mesh, PartitionSpec("runs"))
    dtype = jnp.zeros(()).dtype
    seed_arr = jax.device_put(seed_arr, sharding)
    hp = {k: jax.device_put(jnp.asarray(v, dtype), sharding) for k, v in hp.items()}

    step = make_step(problem, algorithm)
    segs = segments(algorithm, problem, first_segment)
    report = _progress_callback(progress, every)
    compile_s = run_s = 0.0

    def start(seeds_, hp_):
        def one(seed):
            pk, ak = problem_and_algorithm_keys(seed_key(seed, base_key))
            pik, aik = init_keys(pk, ak)
            return pk, ak, problem.init(pik), aik

        pk, ak, inst, aik = jax.vmap(one)(seeds_)
        cap0 = segs[0][2]
        state = jax.vmap(lambda k, h: algorithm.init(k, problem.spec, h, cap0))(aik, hp_)
        return pk, ak, inst, state

    def compiled(name, fn, *args, static=()):
        key = (name, problem.name, algorithm.name, id(problem), id(algorithm), batch, padded, static,
               str(dtype))
        nonlocal compile_s
        if key not in cache:
            t_c = time.perf_counter()
            cache[key] = jax.jit(fn).lower(*args).compile()
            compile_s += time.perf_counter() - t_c
        return cache[key]

    f_start = compiled("start", start, seed_arr, hp)
    t_r = time.perf_counter()
    pk, ak, inst, state = f_start(seed_arr, hp)
    run_s += time.perf_counter() - t_r

    run_segment = _segment_runner(algorithm, step, report, compiled)
    outputs = []
    marked = np.zeros(padded, bool)
    grow = algorithm.demand is not None
    limit = int(algorithm.demand_limit)
    dict_rows = min(segs[0][2], limit) if grow else None  # what `init` built for the first segment
    for t0, t1, cap in segs:
        length = t1 - t0
        if grow and t0 > 0:
            f_demand = compiled("demand", lambda st: jnp.max(jax.vmap(algorithm.demand)(st)), state,
                                static=(_shape_sig(state),))
            dict_rows = grown_rows(int(f_demand(state)), dict_rows, limit)
        start_state = state
        while True:
            state, outs, seconds = run_segment(start_state, inst, pk, ak, t0, length, cap, dict_rows)
            run_s += seconds
            seg_marks = error_marked(outs)
            if not (grow and (seg_marks & ~marked).any() and dict_rows < limit):
                break
            dict_rows = min(2 * dict_rows, limit)  # a run outgrew the buffers: again, with room
        outputs.append(outs)
        marked |= seg_marks
        if stop_on_error and t1 < problem.spec.horizon and marked[:batch].all():
            raise ConfigError(
                f"{algorithm.name}: every run of this batch (seeds {seeds[0]}..{seeds[-1]}) carries the error "
                f"marker (NaN communication) by step {t1} of {problem.spec.horizon}, so the rest of the horizon "
                "was not computed. The marker means a capacity was outgrown (dict_capacity, buffer_capacity, the "
                "history capacity) or more than one client was active at a step; the algorithm's check_error "
                "on a rollout's state.error names which. Raise that capacity and run again.")

    def gather(key):
        arr = np.concatenate([o[key] for o in outputs], axis=0)  # [T, B, ...]
        return np.moveaxis(arr, 0, 1)[:batch]

    return RunOutput(gather("regret"), gather("comm_up"), gather("comm_down"), gather("rounds"),
                     compile_s, run_s)


def grown_rows(need: int, current: int, limit: int, quantum: int = 64) -> int:
    """Rows of a demand-sized buffer for the next segment: room for 1.5 times the fill `need` plus
    16, rounded up to a multiple of `quantum` (few distinct shapes, so few compilations), never
    fewer than `current` (buffers only grow) nor more than `limit`."""
    want = -(-(3 * need // 2 + 16) // quantum) * quantum
    return min(limit, max(current, want))


def _segment_runner(algorithm, step, report, compiled):
    """run_segment(state, inst, pk, ak, t0, length, cap, dict_rows) -> (state, outs [T, B, ...], seconds)."""

    def run_segment(state, inst, pk, ak, t0, length, cap, dict_rows):
        def seg_fn(state, inst, pk, ak, t0_):
            if cap is not None:
                if dict_rows is None:
                    state = jax.vmap(lambda s: algorithm.resize(s, cap))(state)
                else:
                    state = jax.vmap(lambda s: algorithm.resize(s, cap, dict_rows))(state)
            return segment_scan(state, inst, pk, ak, t0_)

        def segment_scan(state, inst, pk, ak, t0_):
            ts = t0_ + jnp.arange(length)
            if algorithm.batching == "map":
                # runs one after another, each a whole scan: no per-step slicing of the batch
                # (which would copy every run's state in and out at every step); progress is
                # reported by the last run, so it reaches the end when the segment is done
                last = state_batch(state) - 1

                def one_run(xs):
                    i, st, ins, p, a = xs

                    def body(s, t):
                        lax.cond(i == last, lambda: report(t), lambda: None)
                        return step(s, ins, p, a, t)

                    return lax.scan(body, st, ts)

                runs = jnp.arange(last + 1)
                state, outs = lax.map(one_run, (runs, state, inst, pk, ak))
                return state, jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), outs)  # [T, B, ...]

            def body(st, t):
                report(t)
                return jax.vmap(step, in_axes=(0, 0, 0, 0, None))(st, inst, pk, ak, t)

            return lax.scan(body, state, ts)

        t0_arr = jnp.asarray(t0, jnp.int32)
        f_seg = compiled("segment", seg_fn, state, inst, pk, ak, t0_arr,
                         static=(length, cap, dict_rows, _shape_sig(state)))
        t_r = time.perf_counter()
        state, outs = f_seg(state, inst, pk, ak, t0_arr)
        outs = jax.device_get(outs)
        return state, outs, time.perf_counter() - t_r

    return run_segment


def run_trials(trial: Callable, seeds: Sequence[int], *, base_key: int = 0, precision: str = "float64",
               compiled_cache: Optional[dict] = None):
    """Phase-level experiments (pure exploration): `trial(key) -> outcome pytree`, one per seed.

    The same key discipline and device sharding as `run_batch`: seed s gets
    `seed_key(s, base_key)` whatever the batch, and the batch axis is sharded over all devices.
    Returns the outcome pytree with a leading axis of len(seeds), as NumPy arrays.
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ConfigError("no seeds to run: --seeds must be at least 1")
    with precision_scope(precision):
        mesh = _mesh()
        padded = -(-len(seeds) // mesh.devices.size) * mesh.devices.size
        arr = np.array(seeds + [seeds[-1]] * (padded - len(seeds)), dtype=np.uint32)
        arr = jax.device_put(arr, NamedSharding(mesh, PartitionSpec("runs")))
        cache = compiled_cache if compiled_cache is not None else {}
        key = ("trials", id(trial), padded, str(jnp.zeros(()).dtype))
        if key not in cache:
            cache[key] = jax.jit(jax.vmap(lambda s: trial(seed_key(s, base_key)))).lower(arr).compile()
        out = jax.device_get(cache[key](arr))
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[: len(seeds)], out)


def _shape_sig(tree):
    return tuple((tuple(x.shape), str(x.dtype)) for x in jax.tree_util.tree_leaves(tree))


def cumulative_regret(regret: np.ndarray, agents: str = "mean") -> np.ndarray:
    """[..., T, N] instantaneous regret -> [..., T] cumulative regret, averaged or summed over agents."""
    if agents == "mean":
        per_step = regret.mean(axis=-1)
    elif agents == "sum":
        per_step = regret.sum(axis=-1)
    else:
        raise ValueError(f"agents must be 'mean' or 'sum', got {agents!r}")
    return np.cumsum(per_step.astype(np.float64), axis=-1)
