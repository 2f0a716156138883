"""The regret-minimisation runner: one `lax.scan` over time, a batch of runs under `vmap`.

A *run* is one (seed, hyper-parameter point) pair. A group of runs (Groups, below) executes as ONE
compiled call per capacity segment: the scan body is `vmap(step)` over the group, with the time index
unbatched, and the batch axis is sharded over every device of the process with `jax.sharding`. Every
algorithm runs this way: rare expensive work is the algorithm's `batch_cond`, never a loop over runs.

Groups: each device's runs are cut into groups of c runs, one vmap each (on a CPU c is at most
`vmap_size`; a batch of fewer runs takes the power of two that holds them), and the groups run one
after another as calls of the SAME compiled programs: every batch of c or more runs of a curve, tuning
grid, reported seeds or a chunk's remainder alike, shares one start program and one program per capacity
segment (`chunk_layout`). The last group is padded with copies of its last run. The start is two
programs, the problem's draw (`problem_start`, one for every algorithm on that problem) and the
algorithm's `init` (`algorithm_start`): the draw of a Coop problem's GP function is most of a
start's program.

Memory: a segment consumes its input state (donated to the compiled call), so the state is updated in
place and a segment allocates no second copy of it; only a resize (new shapes) allocates.

Keys: seed s owns `fold_in(PRNGKey(base_key), s)`; from it a problem key and an algorithm key
are derived, and per-step keys by `fold_in(., t)`; an algorithm's `stream` picks its algorithm
key (`keys.stream_key`; the whole scheme is `keys`). Nothing depends on the batch size, the chunking,
the segmenting or the device count, so seed s gives the same numbers however the sweep is cut.

Segments: with a `Sizing`, the horizon runs in segments [0, s0), [s0, 2 s0), [2 s0, 4 s0), ...,
the state padded (`Sizing.resize`) between them; demand-sized buffers start with FIRST_DEMAND_ROWS
rows, and a segment whose demand-sized buffers overflow runs again from its start (kept as a copy,
since a segment consumes its state) with twice the rows.

Errors: a report's error bits, with the runner's own (RUNNER_ERRORS: a state that held NaN, an active
agent's arm outside [0, K), negative or non-finite communication), are ORed over time per run; a step
whose shapes break the contract is a ConfigError when it is traced (`check_actions`, `check_update`),
before anything compiles. When every run of a batch of one group carries one, the runner stops with
a ConfigError naming them (a batch of several groups runs each to its end); a batch that runs to its end with error bits in some runs warns (`FailedRunsWarning`, one line: how many runs, which seeds, the messages).
Phase-level trials (`core.Trial`) run in `trials.py`, a run's identity is `identity.py`. `precision="float64"` runs
inside a scoped `jax.enable_x64(True)`, `precision="float32"` inside `jax.enable_x64(False)`,
whatever the environment says.

Walk-through: docs/design.md.
"""
from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from . import compile_report, programs
from ._cpu import cpu_guard
from .core import (Algorithm, ConfigError, EnvSpec, Problem, Report, Sizes, Step, check_param,
                   check_stream, declared_param)
from .devices import device_mesh, precision_scope, sharded_runs
from .keys import (algorithm_step_keys, init_keys, problem_and_algorithm_keys, problem_step_keys, seed_key,
                   stream_key)

COMM_KEYS = ("comm_up", "comm_down", "rounds")
# Runs under one vmap on a CPU: a larger vmap makes every step touch the state of all its runs, which
# then no longer stays in the caches (docs/sweeps.md, "Seeds per vmap"); groups of this size call one program in turn.
CPU_VMAP_SIZE = 8
# rows the demand-sized buffers start a batch with (a Nystrom dictionary often stays far below its
# capacity; a segment that outgrows them runs again with twice the rows)
FIRST_DEMAND_ROWS = 64
# the runner's own error bits (algorithms use the others; no packaged algorithm declares these three):
# a run's state held NaN at the end of a segment; an active agent chose an arm outside [0, K); a step
# reported negative or non-finite communication (`step_faults`)
ERR_NAN_STATE = 1 << 29
NAN_STATE_MESSAGE = ("the algorithm's state held NaN at the end of a capacity segment (a diverged training or "
                     "factor); the run's decisions from then on are not to be trusted")
ERR_ARM = 1 << 28
ARM_MESSAGE = ("an active agent's action was outside [0, K), the arms it was offered (such an index reads a NaN "
               "reward, or another arm's, into the state); select must return arm indices 0..K-1")
ERR_COMM = 1 << 27
COMM_MESSAGE = ("a step reported negative or non-finite communication (comm_up, comm_down or rounds); update must "
                "report counts of scalars sent and rounds held, never below 0")
RUNNER_ERRORS = {ERR_ARM: ARM_MESSAGE, ERR_COMM: COMM_MESSAGE, ERR_NAN_STATE: NAN_STATE_MESSAGE}
OUTPUT_KEYS = ("regret",) + COMM_KEYS
SEEDS_NAMED = 10  # a failed-runs warning names at most this many seeds


class FailedRunsWarning(UserWarning):
    """Some runs of a batch that ran to its end carry error bits (`warn_failed_runs`)."""


class RunOutput(NamedTuple):
    """Per-step outputs of a batch of runs, as NumPy arrays.

    regret:    [B, T, N] instantaneous pseudo-regret (noiseless means), 0 for inactive agents.
    comm_up:   [B, T] scalars sent towards the server / peers at each step.
    comm_down: [B, T] scalars sent back.
    rounds:    [B, T] 1 where a communication round took place.
    errors:    [B] int64, the error bits of each run ORed over time (0: none).
    diagnostics: {name: [B, T]} the per-step values the algorithm reports.
    compile_seconds, run_seconds: wall-clock split of the call.
    """

    regret: np.ndarray
    comm_up: np.ndarray
    comm_down: np.ndarray
    rounds: np.ndarray
    errors: np.ndarray
    diagnostics: dict
    compile_seconds: float
    run_seconds: float


# ----------------------------------------------------------------------------------- one step
def act(algorithm: Algorithm, params, state, step: Step, means, all_rewards, algorithm_key):
    """select -> reward -> update of one run at one step.

    means, all_rewards: [N, K] noiseless and noisy rewards of every arm. Returns
    (state, actions[N], aux, regret[N], report). Tracing it checks the step contract on the traced
    shapes (`check_actions`, `check_update`), so a step that breaks it is one ConfigError before
    anything compiles, not a crash inside the scan.
    """
    k_sel, k_upd = algorithm_step_keys(algorithm_key, step.t)
    actions, aux = algorithm.select(params, state, step, k_sel)
    check_actions(algorithm, actions, step)
    rewards = jnp.take_along_axis(all_rewards, actions[:, None], axis=1)[:, 0]
    chosen_means = jnp.take_along_axis(means, actions[:, None], axis=1)[:, 0]
    regret = jnp.where(step.active, jnp.max(means, axis=1) - chosen_means, 0.0)
    new_state, rep = algorithm.update(params, state, step, actions, rewards, aux, k_upd)
    check_update(algorithm, state, new_state, rep)
    return new_state, actions, aux, regret, rep


def check_actions(algorithm: Algorithm, actions, step: Step) -> None:
    """Refuse (ConfigError, one line) `select`'s actions unless they are an integer array of shape [N],
    one arm index per agent. Only shapes and dtypes are read, so it runs while the step is traced."""
    n = step.contexts.shape[0]
    shape, dtype = jnp.shape(actions), jnp.result_type(actions)
    if shape != (n,) or not jnp.issubdtype(dtype, jnp.integer):
        raise ConfigError(f"{algorithm.name}: select returns actions of shape {shape} and dtype {dtype}; it must "
                          f"return an integer array of shape [N] = ({n},), one arm index per agent (docs/design.md, "
                          f"the step contract)")


def check_update(algorithm: Algorithm, state, new_state, rep) -> None:
    """Refuse (ConfigError, one line) an `update` that breaks the step contract: the state it returns must
    have the tree structure, shapes and dtypes of the one it was given (the scan carries it from step
    to step; a buffer that grows declares a `Sizing`), and its report must be a `Report` of scalars
    (one run's step: shape ()). Only shapes and dtypes are read, so it runs while the step is traced."""
    fault = state_change(state, new_state) or report_fault(rep)
    if fault:
        raise ConfigError(f"{algorithm.name}: update {fault} (docs/design.md, the step contract)")


def state_change(before, after) -> str:
    """What differs between the tree structure, shapes and dtypes of two states, in words ('' where
    nothing does). A weakly typed leaf (a Python number) may change its dtype: the scan promotes it."""
    tree = jax.tree_util
    if tree.tree_structure(before) != tree.tree_structure(after):
        return (f"returns a state of another tree structure ({tree.tree_structure(after).num_leaves} leaves) than "
                f"the one it is given ({tree.tree_structure(before).num_leaves} leaves); return the same keys, "
                f"fields and nesting")
    for (path, old), new in zip(tree.tree_flatten_with_path(before)[0], tree.tree_leaves(after)):
        a, b = jax.typeof(old), jax.typeof(new)
        if a.shape != b.shape or (a.dtype != b.dtype and not (a.weak_type or b.weak_type)):
            return (f"changes the state's leaf {tree.keystr(path) or '(the state)'} from {_typed(a)} to {_typed(b)}; "
                    f"return a state of the same shapes and dtypes")
    return ""


def report_fault(rep) -> str:
    """What is wrong with an `update`'s report, in words ('' where nothing is): it must be a `Report`
    whose comm_up, comm_down, rounds, errors (integer bits) and diagnostics ({name: value}) are scalars."""
    if not isinstance(rep, Report):
        return f"returns a {type(rep).__name__} as its report; return (state, core.Report), e.g. core.report(...)"
    if not isinstance(rep.diagnostics, dict):
        return f"reports diagnostics as a {type(rep.diagnostics).__name__}; give a dict {{name: scalar}}"
    fields = {**{key: getattr(rep, key) for key in COMM_KEYS + ("errors",)},
              **{f"diagnostic {name}": value for name, value in rep.diagnostics.items()}}
    for name, value in fields.items():
        if jnp.shape(value) != ():
            return (f"reports {name} of shape {jnp.shape(value)}; every Report field is a scalar of one run's step "
                    f"(shape ()), e.g. a sum over agents")
    errors = jnp.result_type(rep.errors)
    if not (jnp.issubdtype(errors, jnp.integer) or errors == jnp.bool_):
        return f"reports errors of dtype {errors}; error bits are integers (core.report casts them)"
    return ""


def _typed(aval) -> str:
    return f"{aval.dtype}[{', '.join(map(str, aval.shape))}]"


def problem_start(problem: Problem, base_key: int) -> Callable:
    """The problem's part of ONE run's start: seed -> (problem key, algorithm key of stream 0, instance,
    public part). It reads nothing of the algorithm, so every algorithm on one problem calls one
    compiled program of it (the draw of a Coop problem's GP function is most of a start's program)."""

    def start(seed):
        problem_key, algorithm_key = problem_and_algorithm_keys(seed_key(seed, base_key))
        instance = problem.init(init_keys(problem_key, algorithm_key)[0])
        public = None if problem.public is None else problem.public(instance)
        return problem_key, algorithm_key, instance, public

    return start


def algorithm_start(problem: Problem, algorithm: Algorithm, sizes: Sizes) -> Callable:
    """The algorithm's part of ONE run's start: (algorithm key of stream 0, params, public part) ->
    (algorithm key of the algorithm's stream, state)."""
    stream = check_stream(algorithm.name, algorithm.stream)

    def start(algorithm_key, params, public):
        algorithm_key = stream_key(algorithm_key, stream)
        state = algorithm.init(init_keys(algorithm_key, algorithm_key)[1], problem.spec, params, sizes, public)
        return algorithm_key, state

    return start


def run_start(problem: Problem, algorithm: Algorithm, base_key: int, sizes: Sizes) -> Callable:
    """The start of ONE run: (seed, params) -> (problem key, algorithm key of the algorithm's stream,
    instance, state): `problem_start`, then `algorithm_start` (the runner compiles the two apart)."""
    first, second = problem_start(problem, base_key), algorithm_start(problem, algorithm, sizes)

    def start(seed, params):
        problem_key, algorithm_key, instance, public = first(seed)
        algorithm_key, state = second(algorithm_key, params, public)
        return problem_key, algorithm_key, instance, state

    return start


# what a segment reads of its problem: the step's functions (`make_step`) and `init`, which makes the instance it takes
STEP_READS = ("spec", "init", "contexts", "mean_reward", "sample_rewards", "active")


def program_makers(problem: Problem, algorithm: Algorithm, reads: Optional[tuple] = None) -> tuple:
    """What a run's traced programs are made of (`programs.maker_of`): the problem and every field of
    the algorithm but its name, which nothing traced reads (two curves of one algorithm under two names
    trace to one program). reads: the problem's fields the program reads, where it reads only those
    (the algorithm's start reads the spec and takes the public part as an argument, a segment reads
    STEP_READS); two problems that share them, such as one Coop world at two message TTLs, then share
    the program without tracing it again."""
    head = (problem,) if reads is None else tuple(getattr(problem, field) for field in reads)
    return head + tuple(v for f, v in zip(algorithm._fields, algorithm) if f != "name")


def make_step(problem: Problem, algorithm: Algorithm) -> Callable:
    """The pure step of ONE run: (params, state, instance, keys, t) -> (state, outputs). Its outputs' error
    bits include the runner's own of a step that breaks the contract at run time (`step_faults`)."""
    spec = problem.spec

    def step(params, state, instance, problem_key, algorithm_key, t):
        k_ctx, k_rew, k_act = problem_step_keys(problem_key, t)
        contexts = problem.contexts(instance, t, k_ctx)
        means = problem.mean_reward(instance, t, contexts)
        all_rewards = problem.sample_rewards(instance, means, k_rew)
        if problem.active is None:
            active = jnp.ones((spec.num_agents,), bool)
        else:
            active = problem.active(instance, t, k_act)
        here = Step(t, contexts, active, spec.one_active)
        state, actions, _, regret, rep = act(algorithm, params, state, here, means, all_rewards, algorithm_key)
        return state, step_outputs(regret, rep, here, actions)

    return step


def step_outputs(regret, rep, step: Step, actions) -> dict:
    """The per-step record of one run: regret, communication, error bits (the report's, and the runner's
    `step_faults`) and diagnostics."""
    outs = {"regret": regret}
    for key in COMM_KEYS:
        outs[key] = jnp.asarray(getattr(rep, key), regret.dtype)
    outs["errors"] = rep.errors | step_faults(step, actions, [outs[key] for key in COMM_KEYS])
    outs.update({f"diag/{name}": value for name, value in rep.diagnostics.items()})
    return outs


def step_faults(step: Step, actions, comm) -> jax.Array:
    """The runner's error bits of one run's step (int32 scalar): ERR_ARM where an ACTIVE agent's action
    (actions [N]) is outside [0, K), K = step.contexts.shape[1] (an inactive agent's action is never
    used: `act` gives it no regret); ERR_COMM where a value of `comm` (comm_up, comm_down, rounds as
    floats) is negative or not finite (-0.0 is neither)."""
    outside = jnp.any(step.active & ((actions < 0) | (actions >= step.contexts.shape[1])))
    comm = jnp.stack(comm)
    broken = jnp.any(~jnp.isfinite(comm) | (comm < 0))
    return jnp.where(outside, ERR_ARM, 0).astype(jnp.int32) | jnp.where(broken, ERR_COMM, 0).astype(jnp.int32)


# ----------------------------------------------------------------------------------- segments
def segments(algorithm: Algorithm, spec: EnvSpec, first: int = 128):
    """[(t_start, t_end, rows)] covering the horizon; rows None for fixed-size state."""
    horizon = spec.horizon
    sizing = algorithm.sizing
    if sizing is None:
        return [(0, horizon, None)]
    out = []
    start, end = 0, min(first, horizon)
    while start < horizon:
        rows = int(sizing.rows(spec, end))
        if out and out[-1][2] == rows and sizing.demand is None:  # demand-sized buffers re-size at every doubling
            out[-1] = (out[-1][0], end, rows)
        else:
            out.append((start, end, rows))
        start, end = end, min(2 * end, horizon)
    return out


def first_sizes(algorithm: Algorithm, rows) -> Sizes:
    """The Sizes `init` builds for a first segment of `rows` rows."""
    sizing = algorithm.sizing
    if sizing is None:
        return Sizes()
    return Sizes(rows, min(rows, sizing.demand_limit) if sizing.demand is not None else None)


def horizon_sizes(algorithm: Algorithm, spec: EnvSpec) -> Sizes:
    """The Sizes `init` builds when its buffers hold the whole horizon (no segments)."""
    return first_sizes(algorithm, algorithm.sizing.rows(spec, spec.horizon) if algorithm.sizing else None)


def grown_rows(need: int, current: int, limit: int, quantum: int = 64) -> int:
    """Rows of a demand-sized buffer for the next segment: room for 1.5 times the fill `need` plus
    16, rounded up to a multiple of `quantum` (few distinct shapes, so few compilations), never
    fewer than `current` (buffers only grow) nor more than `limit`."""
    want = -(-(3 * need // 2 + 16) // quantum) * quantum
    return min(limit, max(current, want))


# ----------------------------------------------------------------------------------- batch runner
def run_batch(
    problem: Problem,
    algorithm: Algorithm,
    seeds: Sequence[int],
    params: Optional[dict] = None,
    *,
    base_key: int = 0,
    precision: str = "float64",
    first_segment: int = 128,
    progress: Optional[Callable[[int], None]] = None,
    progress_every: int = 250,
    compiled_cache: Optional[dict] = None,
    stop_on_error: bool = True,
    vmap_size: Optional[int] = None,
) -> RunOutput:
    """Run `algorithm` on `problem` for each seed: per group of runs (module docstring) a start call
    and one call per capacity segment, every group calling the same compiled programs.

    seeds:  B ints, one run each.
    params: None (the algorithm's defaults for every run) or {name: scalar or [B] values} (one
            hyper-parameter point per run; names and signs as the algorithm declares them).
    progress: called on the host with the global step reached, every `progress_every` steps.
    stop_on_error: in a batch of one group, raise ConfigError at the end of a segment after which
            every run carries an error bit (see the module docstring); False, or a batch of several
            groups, runs to the end. A batch that ends with error bits in any run warns
            (`warn_failed_runs`).
    vmap_size: at most this many runs of a device under one vmap; a larger batch runs as groups of
            that many, one after another (module docstring). None: the algorithm's `cpu_vmap`, else
            CPU_VMAP_SIZE, on a CPU backend; the whole batch on an accelerator.
    Returns a RunOutput with arrays of leading size B.
    """
    cpu_guard()
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ConfigError("no seeds to run: --seeds must be at least 1")
    if vmap_size is not None and int(vmap_size) < 1:
        raise ConfigError(f"vmap_size must be at least 1 (None: the backend's default), got {vmap_size}")
    batched = batched_params(algorithm, params, len(seeds))
    with precision_scope(precision):
        out = _run_batch(problem, algorithm, seeds, batched, base_key, first_segment, progress,
                         progress_every, compiled_cache if compiled_cache is not None else {}, stop_on_error,
                         vmap_size)
    warn_failed_runs(algorithm, seeds, out.errors)
    return out


def compile_ahead(problem: Problem, algorithm: Algorithm, seeds: Sequence[int], params: Optional[dict] = None, *,
                  base_key: int = 0, precision: str = "float64", first_segment: int = 128,
                  vmap_size: Optional[int] = None) -> None:
    """Start compiling, in `programs`' worker thread, the programs that `run_batch` with these arguments
    (and no progress callback) asks for first: its first group's problem start, algorithm start and first
    segment. Nothing runs; the `run_batch` call that follows finds them (waiting for them where they
    are still compiling), so a caller traces the next batch's programs while this one's compile."""
    seeds = [int(s) for s in seeds]
    batched = batched_params(algorithm, params, len(seeds))
    with precision_scope(precision):
        devices = device_mesh().devices.size
        size = devices * chunk_layout(len(seeds), devices, vmap_size, algorithm.cpu_vmap)[1]
        _run_group(problem, algorithm, seeds[:size], {k: v[:size] for k, v in batched.items()}, size, base_key,
                   first_segment, None, 1, {}, False, ahead=True)


def chunk_layout(batch: int, devices: int, vmap_size: Optional[int], cpu_vmap: Optional[int] = None) -> tuple:
    """(groups, c): each device's share of `batch` runs as `groups` groups of c runs, one vmap each, the
    batch padded (with copies of a group's last run) to groups * devices * c.

    top = vmap_size (None: on a CPU the algorithm's `cpu_vmap`, else CPU_VMAP_SIZE; on an accelerator
    the whole batch). A device share of top runs or more takes c = top, so every such batch, whatever
    its size, calls the same programs; a smaller one the power of two that holds it (at most top), so
    small batches share a few programs and pad less than half.
    """
    if vmap_size is None:
        vmap_size = (cpu_vmap or CPU_VMAP_SIZE) if jax.default_backend() == "cpu" else batch
    per = -(-batch // devices)
    top = int(vmap_size)
    c = top if per >= top else min(top, 1 << (per - 1).bit_length())
    return -(-per // c), c


def batched_params(algorithm, params, batch: int) -> dict:
    """{name: float64 [batch]} for every hyper-parameter an `Algorithm` or `Trial` declares, each value
    checked once."""
    given = {} if params is None else dict(params)
    for name in given:
        declared_param(algorithm.name, algorithm.params, name)  # an unknown name raises
    out = {}
    for name, declared in algorithm.params.items():
        value = np.asarray(given.get(name, declared.default), dtype=object)
        value = np.full((batch,), value.item(), dtype=object) if value.ndim == 0 else value
        if value.shape != (batch,):
            raise ConfigError(f"{algorithm.name}: hyper-parameter {name} has shape {value.shape}, expected ({batch},)")
        out[name] = np.array([check_param(algorithm.name, algorithm.params, name, v) for v in value], np.float64)
    return out


def describe_errors(algorithm: Algorithm, bits: int) -> str:
    """One line naming every set error bit of `bits` by the algorithm's message, the runner's own bits
    (RUNNER_ERRORS) by theirs; with ERR_ARM set, the NaN state is its consequence, not named apart."""
    if bits & ERR_ARM:
        bits &= ~ERR_NAN_STATE
    known = {**algorithm.errors, **RUNNER_ERRORS}
    parts = [text for bit, text in known.items() if bits & bit]
    unknown = bits & ~sum(known)
    if unknown:
        parts.append(f"error bits {unknown:#x}")
    return f"{algorithm.name}: " + "; ".join(parts)


def warn_failed_runs(algorithm, seeds: Sequence[int], errors: np.ndarray) -> None:
    """Warn (FailedRunsWarning, one line) when any of the runs `seeds` [B] carries error bits
    (`errors` [B]): the count of such runs, their seeds (the first SEEDS_NAMED) and the messages of
    the bits (`describe_errors`). Nothing when every run is clean."""
    bad = [s for s, e in zip(seeds, np.asarray(errors).tolist()) if e]
    if not bad:
        return
    named = ", ".join(map(str, bad[:SEEDS_NAMED])) + (", ..." if len(bad) > SEEDS_NAMED else "")
    warnings.warn(f"{len(bad)} of {len(seeds)} runs of this batch carry error bits (seeds {named}); their numbers "
                  f"are not to be trusted: {describe_errors(algorithm, int(np.bitwise_or.reduce(errors)))}",
                  FailedRunsWarning, stacklevel=3)


def _run_batch(problem, algorithm, seeds, params, base_key, first_segment, progress, every, cache, stop_on_error,
               vmap_size):
    """The groups of `chunk_layout` one after another, their outputs joined in the batch's order."""
    D = device_mesh().devices.size
    groups, c = chunk_layout(len(seeds), D, vmap_size, algorithm.cpu_vmap)
    size, horizon = D * c, problem.spec.horizon
    outs, group = [], [0]

    def report(t):  # one function for every group: their programs are one, compiled with the first's callback
        progress((group[0] * horizon + int(t)) // groups)

    for g in range(groups):
        part, group[0] = slice(g * size, (g + 1) * size), g
        outs.append(_run_group(problem, algorithm, seeds[part], {k: v[part] for k, v in params.items()}, size,
                               base_key, first_segment, report if progress else None, every, cache,
                               stop_on_error and groups == 1))
    if groups == 1:
        return outs[0]
    join = lambda arrays: np.concatenate(arrays, axis=0)  # noqa: E731
    return RunOutput(*(join([getattr(o, k) for o in outs]) for k in OUTPUT_KEYS + ("errors",)),
                     {k: join([o.diagnostics[k] for o in outs]) for k in outs[0].diagnostics},
                     sum(o.compile_seconds for o in outs), sum(o.run_seconds for o in outs))


def _run_group(problem, algorithm, seeds, params, padded, base_key, first_segment, progress, every, cache,
               stop_on_error, ahead=False):
    """One group: `seeds` [b <= padded] padded to `padded` runs, sharded over the devices, from the
    start call through every capacity segment; the compiled programs are keyed by `padded`, so every
    group of a batch (and of any batch with the same group size) calls the same ones.

    ahead: run nothing, and hand the group's first programs (the problem's start, the algorithm's start,
    the first segment) to `programs.ahead`, each lowered on the shapes of the one before; returns None."""
    mesh = device_mesh()
    devices = tuple(d.id for d in mesh.devices.flat)
    runs = NamedSharding(mesh, PartitionSpec("runs"))
    batch = len(seeds)
    dtype = jnp.zeros(()).dtype
    seed_arr = sharded_runs(seeds, padded, mesh, np.uint32)
    params = {k: sharded_runs(v, padded, mesh, dtype) for k, v in params.items()}
    spec = problem.spec
    step = make_step(problem, algorithm)
    segs = segments(algorithm, spec, first_segment)
    report = _progress_callback(progress, every)
    timer = {"compile": 0.0, "run": 0.0}

    def compiled(name, fn, *args, static=(), donate=(), makers=None, out_shardings=None):
        """The program of `fn` on `args` (ahead: a function of the same arguments that gives the shapes of
        its results, sharded as `out_shardings`)."""
        key = (name, problem.name, algorithm.name, id(problem), id(algorithm), padded, static, str(dtype))
        shape = dict(batch=batch, padded=padded, agents=spec.num_agents,
                     **({"capacity": str(tuple(static[1])), "length": static[0]} if name == "segment" else {}))
        if key in cache:  # (never ahead: `compile_ahead` gives an empty cache)
            compile_report.note(name, compile_report.REUSED, 0.0, **shape)
            return cache[key]
        makers = program_makers(problem, algorithm) if makers is None else makers
        maker = programs.maker_of(*makers, name, base_key, padded, static, str(dtype), devices, progress is not None)
        jitted = jax.jit(fn, donate_argnums=donate, out_shardings=out_shardings)
        if ahead:
            if not programs.known(maker):
                programs.ahead(jitted.lower(*args), time.perf_counter(), maker)
            return lambda *a: jax.tree_util.tree_map(  # the trace `lower` made, where it made one
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=out_shardings), jitted.eval_shape(*a))
        t_c = time.perf_counter()
        cache[key] = programs.made(maker, name, **shape)  # waits where the program is compiling ahead
        if cache[key] is None:
            cache[key] = programs.compiled(jitted.lower(*args), name, t_c, maker, **shape)
        timer["compile"] += time.perf_counter() - t_c
        return cache[key]

    sizes = first_sizes(algorithm, segs[0][2])
    if sizes.demand_rows is not None:  # demand-sized buffers start small and grow with their fill
        sizes = sizes._replace(demand_rows=min(sizes.demand_rows, FIRST_DEMAND_ROWS))

    def problem_part(seeds_):
        return jax.vmap(problem_start(problem, base_key))(seeds_)

    def algorithm_part(keys_, params_, public):
        return jax.vmap(algorithm_start(problem, algorithm, sizes))(keys_, params_, public)

    step_makers = program_makers(problem, algorithm, STEP_READS)
    run_segment = _segment_runner(algorithm, step, report, compiled, timer, step_makers, ahead)
    f_problem = compiled("problem start", problem_part, seed_arr, makers=(problem,), out_shardings=runs)
    t_r = time.perf_counter()
    pk, ak, inst, public = f_problem(seed_arr)
    timer["run"] += time.perf_counter() - t_r
    f_start = compiled("start", algorithm_part, ak, params, public, static=(sizes, shape_sig(public)),
                       out_shardings=runs, makers=program_makers(problem, algorithm, ("spec",)))
    t_r = time.perf_counter()
    ak, state = f_start(ak, params, public)
    timer["run"] += time.perf_counter() - t_r
    if ahead:
        t0, t1, rows = segs[0]
        return run_segment(params, state, inst, pk, ak, t0, t1 - t0, sizes._replace(rows=rows))
    outputs, errors = _run_segments(algorithm, spec, segs, sizes, run_segment, compiled,
                                    (params, state, inst, pk, ak), padded, seeds if stop_on_error else None)

    def gather(key):
        arr = np.concatenate([o[key] for o in outputs], axis=0)  # [T, B, ...]
        return np.moveaxis(arr, 0, 1)[:batch]

    diagnostics = {k[len("diag/"):]: gather(k) for k in outputs[0] if k.startswith("diag/")}
    return RunOutput(gather("regret"), gather("comm_up"), gather("comm_down"), gather("rounds"), errors[:batch],
                     diagnostics, timer["compile"], timer["run"])


def _run_segments(algorithm, spec, segs, sizes, run_segment, compiled, start, padded, seeds):
    """Run the capacity segments from the start (params, state, inst, pk, ak); returns (outputs [per
    segment {key: [T_seg, B, ...]}], errors [B]).

    A segment in which a demand-sized buffer overflowed (and may still grow) runs again from its
    start with twice the rows: each segment consumes its input state (donated), so for an algorithm
    with demand-sized buffers the segment's start is copied first (a state sized by its demand, so
    small). seeds: raise ConfigError when every run carries an error bit before the horizon (None:
    run on)."""
    params, state, inst, pk, ak = start
    sizing = algorithm.sizing
    grow = sizing is not None and sizing.demand is not None
    outputs = []
    errors = np.zeros(padded, np.int64)
    for t0, t1, rows in segs:
        if grow and t0 > 0:
            f_demand = compiled("demand", lambda st: jnp.max(jax.vmap(sizing.demand)(st)), state,
                                static=(shape_sig(state),))
            sizes = Sizes(rows, grown_rows(int(f_demand(state)), sizes.demand_rows, sizing.demand_limit))
        else:
            sizes = sizes._replace(rows=rows)
        while True:
            kept = jax.tree_util.tree_map(jnp.copy, state) if grow else None  # the segment's start, for a re-run
            state, outs, nan = run_segment(params, state, inst, pk, ak, t0, t1 - t0, sizes)
            seg_errors = np.bitwise_or.reduce(np.asarray(outs["errors"], np.int64), axis=0)
            overflow = grow and ((seg_errors & ~errors & sizing.overflow) != 0).any()
            if not (overflow and sizes.demand_rows < sizing.demand_limit):
                break
            state, sizes = kept, sizes._replace(demand_rows=min(2 * sizes.demand_rows, sizing.demand_limit))
        outputs.append(outs)
        errors |= seg_errors | np.where(nan, ERR_NAN_STATE, 0)
        if seeds is not None and t1 < spec.horizon and (errors[:len(seeds)] != 0).all():
            raise ConfigError(
                f"every run of this batch (seeds {seeds[0]}..{seeds[-1]}) failed by step {t1} of {spec.horizon}, so "
                f"the rest of the horizon was not computed: "
                f"{describe_errors(algorithm, int(np.bitwise_or.reduce(errors)))}")
    return outputs, errors


def _has_nan(state) -> jax.Array:
    """Whether any float leaf of ONE run's state holds a NaN (inf is left alone: some states use it as
    a sentinel; a NaN is never meant)."""
    leaves = [jnp.any(jnp.isnan(x)) for x in jax.tree_util.tree_leaves(state) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.any(jnp.stack(leaves)) if leaves else jnp.zeros((), bool)


def _segment_runner(algorithm, step, report, compiled, timer, makers, ahead=False):
    """run_segment(params, state, inst, pk, ak, t0, length, sizes) -> (state, outs {key: [T, B, ...]},
    nan [B]: whether each run's state holds a NaN at the segment's end); ahead (`_run_group`): None,
    the segment's program handed to `programs.ahead`. makers: what the segment's program is made of
    (`program_makers` of the step's problem fields).

    The input state is consumed: the compiled call updates it in place (donated) when resizing leaves
    its shapes alone, so a segment allocates no second copy of a large state.
    The group's runs are one vmap (a group of one run scans the step without a vmap)."""
    resize = None if algorithm.sizing is None else algorithm.sizing.resize

    def run_segment(params, state, inst, pk, ak, t0, length, sizes):
        def scan_runs(params, state, inst, pk, ak, t0_):
            one = pk.shape[0] == 1  # a group of one run scans the unbatched step: a vmap of one is slower
            run_step = step if one else jax.vmap(step, in_axes=(0, 0, 0, 0, 0, None))
            if one:
                params, state, inst, pk, ak = jax.tree_util.tree_map(lambda x: x[0], (params, state, inst, pk, ak))

            def body(st, t):
                report(t)
                return run_step(params, st, inst, pk, ak, t)

            state, outs = lax.scan(body, state, t0_ + jnp.arange(length))
            if one:  # back to [1, ...] and [T, 1, ...]
                state, outs = (jax.tree_util.tree_map(lambda x: jnp.expand_dims(x, axis), tree)
                               for tree, axis in ((state, 0), (outs, 1)))
            return state, outs

        def seg_fn(params, state, inst, pk, ak, t0_):
            if resize is not None:
                state = jax.vmap(lambda p, s: resize(p, s, sizes))(params, state)
            state, outs = scan_runs(params, state, inst, pk, ak, t0_)
            return state, outs, jax.vmap(_has_nan)(state)

        t0_arr = jnp.asarray(t0, jnp.int32)
        same = resize is None or _resize_keeps_shapes(resize, params, state, sizes)
        f_seg = compiled("segment", seg_fn, params, state, inst, pk, ak, t0_arr, makers=makers,
                         static=(length, sizes, shape_sig(state)), donate=(1,) if same else ())
        if ahead:
            return None
        t_r = time.perf_counter()
        state, outs, nan = f_seg(params, state, inst, pk, ak, t0_arr)
        outs, nan = jax.device_get((outs, nan))
        timer["run"] += time.perf_counter() - t_r
        return state, outs, np.asarray(nan)

    return run_segment


def _progress_callback(report: Optional[Callable[[int], None]], every: int):
    if report is None:
        return lambda t: None

    def maybe_report(t):
        """t: the step just computed; reports the steps done every `every` steps."""
        lax.cond((t + 1) % every == 0, lambda: jax.debug.callback(report, t + 1), lambda: None)

    return maybe_report


_KEEPS_SHAPES: "OrderedDict[tuple, tuple]" = OrderedDict()  # Maker key: (whether resize keeps the shapes, held)
_KEEPS_SHAPES_KEEP = 256


def _resize_keeps_shapes(resize, params, state, sizes: Sizes) -> bool:
    """Whether `resize` (`Sizing.resize`) to `sizes` leaves a group's state [B, ...] of its shapes (its
    segment may then update the state in place), traced once per process for the same function, sizes
    and shapes: every segment of every chunk asks."""
    def keeps() -> bool:
        return shape_sig(jax.eval_shape(jax.vmap(lambda p, s: resize(p, s, sizes)), params, state)) == shape_sig(state)

    maker = programs.maker_of(resize, sizes, shape_sig(params), shape_sig(state))
    return programs.remembered(_KEEPS_SHAPES, maker, _KEEPS_SHAPES_KEEP, keeps)


def shape_sig(tree):
    """The structure, shapes and dtypes of a pytree's leaves (a maker's static part: what a program's
    argument fixes of its trace)."""
    leaves, structure = jax.tree_util.tree_flatten(tree)
    return str(structure), tuple((tuple(x.shape), str(x.dtype)) for x in leaves)


# ----------------------------------------------------------------------------------- given arrays
def replay(algorithm: Algorithm, spec: EnvSpec, params, contexts, rewards, active, key, sizes: Sizes = None,
           public=None, means=None, start: Optional[Callable] = None):
    """Run one algorithm on given arrays with the runner's step and keys (tests, recorded streams).

    contexts[T, N, K, d], rewards[T, N, K] (the reward of every arm), active[T, N] bool, key: the
    algorithm key of stream 0 (for seed s the runner's `problem_and_algorithm_keys(seed_key(s))[1]`);
    like the runner, replay takes the algorithm's stream of it (`stream_key`), whose `init_keys`
    half goes to `init` and whose `algorithm_step_keys(., t)` to step t.
    means[T, N, K]: the noiseless means regret is measured on (default: the rewards).
    params: {name: scalar} over the declared defaults. sizes: default, rows for the whole horizon.
    start: state -> state, applied to `init`'s state before the first step (e.g. to start from
    another implementation's initial network: `fn_ucb.with_network`).
    Returns (final state, actions[T, N], aux [T, ...], regret[T, N], reports [T, ...]).
    """
    cpu_guard()
    params = {name: jnp.asarray(dict(algorithm.defaults, **(params or {}))[name], jnp.zeros(()).dtype)
              for name in algorithm.params}
    if sizes is None:
        sizes = horizon_sizes(algorithm, spec)
    key = stream_key(key, check_stream(algorithm.name, algorithm.stream))
    state = algorithm.init(init_keys(key, key)[1], spec, params, sizes, public)
    if start is not None:
        state = start(state)
    means = rewards if means is None else means

    def body(st, inp):
        t, ctx, rew, mu, act_ = inp
        st, actions, aux, regret, rep = act(algorithm, params, st, Step(t, ctx, act_, spec.one_active), mu, rew, key)
        return st, (actions, aux, regret, rep)

    T = contexts.shape[0]
    state, (actions, aux, regret, reps) = lax.scan(
        body, state, (jnp.arange(T, dtype=jnp.int32), contexts, rewards, means, active))
    return state, actions, aux, regret, reps
