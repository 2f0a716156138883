"""Run a named experiment as a resumable sweep of seed chunks.

Seeds are processed in chunks that fit in memory (estimated from the algorithm's state at its
final capacity, or set with `chunk=`; a run or chunk that would not fit is refused before anything
compiles). Each finished chunk is written at once to
`OUT/chunks/<algorithm>/seeds_<first>-<last>.npz`; running the same command again with the
same output folder loads what is stored and computes only the missing seeds, so killing a
run loses at most the chunk in flight (a curve whose key stream, `Algorithm.stream`, is not the
one its stored seeds were drawn on is refused; a chunk file that cannot be read whole is set aside
with a warning and its seeds are computed again, `_stored_chunks`). The assembled results,
metadata, summary and plot are written at the end. Besides the regret and communication, each chunk keeps every run's error bits
and the per-step diagnostics its algorithm reports. A curve whose runs carry error bits is stored (so
nothing is recomputed on resume) and then reported: a grid point is marked in the summary and never
chosen; any other curve makes the run end with a ConfigError that names the algorithm's messages.

Curve cache. Every finished chunk is also kept under CACHE/<identity>/, where the identity
(`identity.run_identity`) hashes everything that fixes a curve's numbers: the traced programs of its
start and step with the data they hold, its hyper-parameters, key stream (`Algorithm.stream`),
horizon, base key, precision and the package versions. Before computing, the sweep takes from the
cache every seed it holds for a curve's identity, whatever experiment or curve name stored it, so
figures that repeat runs of other figures reuse them without any declaration. CACHE is
`results/curves` unless `$BANDITS_JAX_CURVES` or `curves=` says otherwise; `curves=False` turns it
off. Curves with seeds taken from the cache are listed under "cached" in the metadata; their chunks keep
the seconds of the computation that made them (`_seconds_of`).

Several processes (`multihost`): each stores the seeds of its own share, and process 0 assembles
the results once every process has passed a barrier.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import re
import shutil
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Optional

import jax
import numpy as np

from . import compile_report, multihost
from ._cpu import cpu_guard
from .core import COMM_UNIT, ConfigError, Trial, first_line
from .curves import failure, misfit, resolve
from .experiments.registry import RUN_KEYS, Experiment, build_curves, resolve_config
from .experiments.catalog import get_experiment
from .progress import SweepProgress
from .reporting.results import Results, atomic_savez, atomic_write_text, check_folder, save_results, summary_markdown
from .identity import package_version, run_identities
from .devices import precision_scope
from .runner import OUTPUT_KEYS, compile_ahead, describe_errors, horizon_sizes, run_batch, run_start
from .trials import TrialOutput, run_trials

CHUNKS = "chunks"
CHUNK_BOOKKEEPING = ("seeds", "compile_seconds", "run_seconds", "errors")  # chunk entries that are not outputs
CURVES_ENV = "BANDITS_JAX_CURVES"
STREAM_FILE = "stream.txt"  # a chunk folder's record of its curve's key stream
COMPILE_REPORT_FILE = "compile_report.json"  # `run --compile-report`
CACHED_FILE = "cached.txt"  # in a chunk folder: some of its seeds were taken from the curve cache


def default_out_dir(name: str, size: str) -> Path:
    return Path("results") / name.replace("/", "_") / size


def default_curves_dir() -> Path:
    """The curve cache: `$BANDITS_JAX_CURVES`, else results/curves."""
    return Path(os.environ.get(CURVES_ENV) or Path("results") / "curves")


def run_experiment(
    name,
    size: str = "paper",
    overrides: Optional[dict] = None,
    out: Optional[Path] = None,
    chunk: Optional[int] = None,
    quiet: bool = False,
    plot: bool = True,
    curves=None,
    only: tuple = (),
    check: bool = False,
    summary: bool = True,
    raise_errors: bool = True,
    step_progress: bool = True,
    report_compiles: bool = False,
) -> Path:
    """Run (or resume) experiment `name` (a registered name, or an `Experiment`); returns the output folder.

    only: curve names; when given, only those algorithms are run (or resumed) and the results
    file holds only them. Their chunks are stored as usual, so a later run without `only` reuses
    them: a long experiment can be filled in algorithm by algorithm.
    curves: the curve cache folder (None: `default_curves_dir()`; False: no cache).
    check: validate everything a run validates (configuration, curves, every curve's traced start
    and step, memory, the folders), print the plan, and stop: no program of the run is compiled and
    nothing is written (a world computed with jax, such as CoPE-KB's designs, is computed to be checked).
    summary: print the summary table at the end (unless quiet).
    raise_errors: end with a ConfigError when a curve (not a grid point) carries error bits, and stop a
    chunk whose every run has failed (`run_batch`'s stop_on_error); False computes such runs to the
    end and leaves their error bits in the metadata's "errors" (the arena reports them in its tables).
    step_progress: report the steps a chunk has reached (`SweepProgress`); False reports chunks only,
    and the compiled programs, free of host callbacks, can be kept by the persistent compilation cache.
    report_compiles: write the compile report of the programs this run asked for (`compile_report`) to
    OUT/compile_report.json and print its table (unless quiet).
    """
    exp = name if isinstance(name, Experiment) else get_experiment(name)
    name = exp.name
    config, resolved = validated_runs(exp, size, overrides, chunk, only)
    code_commit()  # read now, before a long run, so that later edits of the checkout do not count
    out = Path(out) if out is not None else default_out_dir(name, size)
    cache_dir = None if curves is False else Path(curves) if curves is not None else default_curves_dir()
    check_folder(out, "the output folder (--out)")
    if cache_dir is not None:
        check_folder(cache_dir, "the curve cache (--curves)")
    runs = [(r.problem, r.algorithm, r.curve.grid) for r in resolved]
    named = _named_curves(exp.name, runs)
    identities = _identities(resolved, {n: hp for n, _, hp in named}, config)  # traces every start and step
    seed_bytes = check_memory(resolved, config, chunk, available_memory())
    if check:
        print(plan_text(exp, size, config, named, out))
        return out
    _claim_out_dir(out, exp.name, size, config)
    seeds = list(range(config["first_seed"], config["first_seed"] + config["seeds"]))
    progress = SweepProgress(quiet, steps=step_progress)
    for run in resolved:  # before anything is computed
        for point in run.curve.point_names():
            _claim_stream(out, point, run.algorithm.stream)
    with compile_report.collect() if report_compiles else contextlib.nullcontext() as programs:
        timing = _compute(out, resolved, seeds, config, chunk, seed_bytes, cache_dir, identities, progress,
                          stop_on_error=raise_errors)
    if report_compiles:
        compile_report.write(programs, out / COMPILE_REPORT_FILE)
        if not quiet:
            print("\n".join([f"programs of {exp.name} ({size}), also in {out / COMPILE_REPORT_FILE}:", "",
                             *compile_report.table(programs)]))
    multihost.barrier("bandits_jax sweep: chunks stored")  # every process has stored its share
    if multihost.process()[0] != 0:
        return out  # process 0 assembles
    arrays, outcome = _gather(exp.name, out, resolved, seeds, cache_dir, identities)
    metadata = _metadata(exp, size, config, seeds, resolved, named,
                         {"identities": identities, "timing": timing, **outcome})
    save_results(out, arrays, seeds, metadata)
    if plot:
        from .reporting.plotting import plot_results

        plot_results(out)
    if not quiet:
        if summary:
            print(summary_markdown(Results(arrays, np.asarray(seeds), metadata)))
        print(f"results written to {out}")
    grid_points = {p for points in metadata["grids"].values() for p in points}
    broken = [message for curve, message in metadata["errors"].items() if curve not in grid_points]
    if broken and raise_errors:
        raise ConfigError(f"{name}: runs failed (their outputs are stored in {out}, listed under 'errors' in "
                          f"metadata.json): " + " | ".join(broken))
    return out


def validated_runs(exp: Experiment, size: str, overrides: Optional[dict], chunk: Optional[int], only: tuple) -> tuple:
    """(configuration, [curves.Run]) of a run, after every check short of tracing the curves: the
    configuration, --chunk, the curves built and resolved through the registries, --only. What each
    process of a multi-process run checks before joining the others (`cli`), and where
    `run_experiment` starts."""
    config = resolve_config(exp, size, overrides or {})
    if chunk is not None and chunk < 1:
        raise ConfigError(f"--chunk must be at least 1, got {chunk}")
    return config, _selected_runs(exp, config, only)


def plan_text(exp, size: str, config: dict, named, out: Path) -> str:
    """What a run would do (`run_experiment(check=True)`): the experiment, its seeds and horizon, and
    one line per stored curve with its problem."""
    first, count = config["first_seed"], config["seeds"]
    lines = [f"{exp.name} ({size}): {len(named)} curve(s), seeds {first}..{first + count - 1}, "
             f"horizon {config['horizon']}, {config['precision']}; results would go to {out}"]
    lines += [f"  {curve}  on {problem.name}" for curve, problem, _ in named]
    return "\n".join(lines + ["checked: no program of the run was compiled, and nothing was written"])


def _compute(out, resolved, seeds, config, chunk, seed_bytes, cache_dir, identities, progress,
             stop_on_error: bool = True) -> dict:
    """Store every curve's seeds of this process's share (`multihost.share`; all seeds in a
    one-process run): taken from the cache where it holds them, computed chunk by chunk otherwise;
    `progress` (a `SweepProgress`) shows it. Returns {curve: timing of this process's share}."""
    timing = {}
    mine = multihost.share(seeds)
    ahead = progress.callback is None and bool(mine)  # a program with a progress callback is never shared
    cached = (lambda point: set(_stored_chunks(cache_dir / identities[point]))) if cache_dir is not None else None
    if ahead and resolved:
        _compile_ahead(out, resolved[0], mine, chunk, seed_bytes, config, cached)
    for i, run in enumerate(resolved):
        compiled = {}  # a curve's programs serve its own chunks only: freed before the next curve compiles
        problem, alg, grid = run.problem, run.algorithm, run.curve.grid
        point_names = run.curve.point_names()
        for point in point_names:
            if cache_dir is not None:
                _take_cached(out, point, cache_dir / identities[point], mine, progress.log)
        if ahead and i + 1 < len(resolved):  # traced here while the worker compiles this curve's programs
            _compile_ahead(out, resolved[i + 1], mine, chunk, seed_bytes, config, cached)
        with compile_report.curve(run.curve.name):
            compile_s, run_s, computed = _run_missing(out, problem, alg, grid, point_names, mine, chunk,
                                                      seed_bytes.get(run.curve.name), config, compiled,
                                                      progress, stop_on_error) if mine else (0.0, 0.0, 0)
        for point in point_names:
            timing[point] = {"compile_seconds": compile_s, "run_seconds": run_s, "seeds_computed": computed,
                             **({"shared_grid_call": alg.name} if grid is not None else {})}
    return timing


def _compile_ahead(out, run, seeds, chunk, seed_bytes, config, cached) -> None:
    """Hand the programs of `run`'s first missing chunk to `runner.compile_ahead` (nothing for a trial,
    or where every seed is stored or in the curve cache: `cached`, point -> the seeds it holds, None
    without one). A failure to trace is left to the chunk's own call, which raises it where it belongs;
    here it only means nothing is compiled ahead."""
    if isinstance(run.algorithm, Trial):
        return
    grid, _, missing, blocks = _missing_blocks(out, run.curve.grid, run.curve.point_names(), seeds, chunk,
                                               seed_bytes.get(run.curve.name), False, cached)
    if not missing:
        return
    try:
        compile_ahead(run.problem, run.algorithm, list(blocks[0]) * (1 if grid is None else len(grid)),
                      _grid_params(run.algorithm, grid, blocks[0]), base_key=config["base_key"],
                      precision=config["precision"], first_segment=config["first_segment"],
                      vmap_size=config["vmap_size"] or None)
    except Exception:  # noqa: BLE001 - see the docstring
        return


def _gather(name, out, resolved, seeds, cache_dir, identities) -> tuple:
    """Every curve's outputs read back from `out` (and put into the cache). Returns ({curve: outputs},
    {"cached", "errors", "processes"} for the metadata)."""
    cached, arrays, errors = {}, {}, {}
    for run in resolved:
        for point in run.curve.point_names():
            if cache_dir is not None:
                if (_chunk_folder(out, point) / CACHED_FILE).exists():
                    cached[point] = identities[point]
                _keep_cached(out, point, cache_dir / identities[point], {"experiment": name, "curve": point})
            arrays[point] = _assemble(_chunk_folder(out, point), seeds)
            message = _error_message(run.algorithm, arrays[point]["errors"], seeds)
            if message:
                errors[point] = message
    return arrays, {"cached": cached, "errors": errors, "processes": multihost.process()[1]}


def _identities(resolved, hparams: dict, config: dict) -> dict:
    """{stored curve name: `identity.run_identity`}. Tracing every curve's start and step before anything
    is computed or written is also the check that each algorithm fits its problem: any failure there,
    whatever its type (jax's own errors included), is a ConfigError naming the pair, with the first line
    of what went wrong (`curves.failure`)."""
    identities = {}
    for run in resolved:
        points = run.curve.point_names()
        try:  # a grid's points differ in traced values only: its programs are traced once
            found = run_identities(run.problem, run.algorithm, [hparams[p] for p in points],
                                   base_key=config["base_key"], precision=config["precision"])
        except Exception as err:  # noqa: BLE001 - a pair whose trace fails cannot run
            raise misfit(run, failure(err)) from err
        identities.update(zip(points, found))
    return identities


def _selected_runs(exp, config, only) -> list:
    """The experiment's resolved curves (`curves.Run`), those named in `only` when it is given."""
    curves = build_curves(exp, config)
    if only:
        known = [c.name for c in curves]
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ConfigError(f"{exp.name}: unknown curve(s) {', '.join(map(repr, unknown))} in --only; "
                              f"this experiment has: {', '.join(known)}")
        curves = [c for c in curves if c.name in only]
    runs = resolve(curves, trace=False)  # _identities traces every start and step
    if len({isinstance(r.algorithm, Trial) for r in runs}) > 1:
        raise ConfigError(f"{exp.name}: an experiment runs regret curves or phase-level trials, not both")
    return runs


def _named_curves(name: str, runs) -> list:
    """(stored name, problem, hyper-parameters) of every curve; a grid point's values are checked as the
    factory checks them (names, signs)."""
    named = []
    for problem, alg, grid in runs:
        if grid is None:
            named.append((alg.name, problem, alg.defaults))
        else:
            points = [alg.with_defaults(**hp).defaults for _, hp in grid]
            named += [(f"{alg.name} [{label}]", problem, hp) for (label, _), hp in zip(grid, points)]
    names = [c[0] for c in named]
    if len(set(names)) != len(names):
        raise ValueError(f"{name}: algorithm names must be unique, got {names}")
    return named


def _metadata(exp, size: str, config: dict, seeds, resolved, named, outcome_of_run: dict) -> dict:
    """metadata.json: the experiment, its configuration and curves (as data: specs, grids, streams and
    tags), the problems' structural numbers, the tables its algorithms declare, the unit of comm_up and
    comm_down (`core.COMM_UNIT`), and `outcome_of_run` (identities, cached curves, timing, errors), with
    the versions and devices."""
    runs = [(r.problem, r.algorithm, r.curve.grid) for r in resolved]
    problems = list({id(p): p for p, _, _ in runs}.values())
    outcomes = {k: o._asdict() for _, alg, _ in runs if isinstance(alg, Trial) for k, o in alg.outcomes.items()}
    points = {n: r for r in resolved for n in r.curve.point_names()}
    return {
        "experiment": exp.name,
        "size": size,
        "description": exp.description,
        "problem": ", ".join(dict.fromkeys(p.name for p in problems)),
        "problem_description": "; ".join(dict.fromkeys(p.description for p in problems)),
        "config": config,
        "seeds": seeds,
        "algorithms": [n for n, _, _ in named],
        "algorithm_problems": {n: {"problem": p.name, "num_agents": p.num_agents} for n, p, _ in named},
        "algorithm_hparams": {n: hp for n, _, hp in named},
        "algorithm_streams": {n: r.algorithm.stream for n, r in points.items()},
        "grids": {r.curve.name: r.curve.point_names() for r in resolved if r.curve.grid is not None},
        "curves": [r.curve.as_dict() for r in resolved],
        "tags": {n: t for r in resolved for n, t in r.curve.point_tags().items()},
        "x": exp.x,
        **({"panels": [list(p) for p in exp.panels]} if exp.panels else {}),
        **({"derived": [list(d) for d in exp.derived]} if exp.derived else {}),
        "problem_info": {p.name: dict(p.info) for p in problems if p.info},
        "tables": {n: [t._asdict() for t in r.algorithm.tables] for n, r in points.items()
                   if getattr(r.algorithm, "tables", ())},
        **({"outcomes": outcomes} if outcomes else {}),
        "comm_unit": COMM_UNIT,
        **outcome_of_run,
        "agents": exp.agents,
        "se_ddof": exp.se_ddof,
        "band": exp.band,
        "notes": exp.notes,
        "versions": package_versions(),
        "commit": code_commit(),
        "devices": [str(d) for d in jax.devices()],
        "python": platform.python_version(),
    }


def _run_missing(out: Path, problem, alg, grid, point_names, seeds, chunk, seed_bytes, config, compiled,
                 progress, stop_on_error: bool = True) -> tuple:
    """Compute and store, chunk by chunk, the seeds not yet stored for any point of one algorithm (all
    grid points and seeds of a chunk in one call), shown by `progress` as one curve; (compile seconds,
    run seconds, seeds computed). Without `chunk`, a regret curve's chunk is estimated from
    `seed_bytes`, the memory one seed needs (`check_memory`). Only the grid points that lack a seed run:
    a grid that gains a point, or whose other points came from the curve cache, computes that point
    alone."""
    trials = isinstance(alg, Trial)
    grid, point_names, missing, blocks = _missing_blocks(out, grid, point_names, seeds, chunk, seed_bytes, trials)
    G = len(point_names)
    compile_s = run_s = 0.0
    if not missing:
        progress.log(f"[{alg.name}] all {len(seeds)} seeds already stored in {out}")
        return compile_s, run_s, 0
    horizon = None if trials else problem.spec.horizon
    with progress.curve(alg.name, len(missing) * G, len(blocks), horizon):
        for b, block in enumerate(blocks):
            grid_note = "" if grid is None else f", {G} grid points in one call"
            where = f"[{alg.name}] seeds {block[0]}..{block[-1]} (chunk {b + 1}/{len(blocks)}{grid_note})"
            progress.start_chunk(where, f"running {len(block) * G} trials" if trials else f"running T = {horizon}")
            params = _grid_params(alg, grid, block)
            common = dict(base_key=config["base_key"], precision=config["precision"], compiled_cache=compiled)
            if trials:
                res = run_trials(problem, alg, list(block) * G, params, **common)
            else:
                res = run_batch(problem, alg, list(block) * G, params, first_segment=config["first_segment"],
                                progress=progress.callback, progress_every=progress.every(horizon),
                                vmap_size=config["vmap_size"] or None, stop_on_error=stop_on_error, **common)
            compile_s += res.compile_seconds
            run_s += res.run_seconds
            n = len(block)
            for g, point in enumerate(point_names):  # rows g n .. (g + 1) n are this point's seeds
                _write_chunk(_chunk_folder(out, point), block, _rows(res, slice(g * n, (g + 1) * n)),
                             res.compile_seconds, res.run_seconds)
            progress.end_chunk(f"done (compile {res.compile_seconds:.1f} s, run {res.run_seconds:.1f} s)")
    return compile_s, run_s, len(missing)


def _missing_blocks(out: Path, grid, point_names, seeds, chunk, seed_bytes, trials: bool, elsewhere=None) -> tuple:
    """(grid, point_names, missing seeds, chunks of them) of one algorithm: the grid points that lack a
    seed and their names, the seeds any of them lacks, and those seeds cut into the chunks computed in
    one call each (`chunk`, else estimated from `seed_bytes`; a trial's missing seeds in one chunk).
    elsewhere: point -> seeds held elsewhere that count as stored (the curve cache's), or None."""
    stored = [set(_stored_chunks(_chunk_folder(out, n))) | (elsewhere(n) if elsewhere else set())
              for n in point_names]
    lacking = [g for g, st in enumerate(stored) if any(s not in st for s in seeds)]
    if grid is not None:
        grid, point_names, stored = ([x[g] for g in lacking] for x in (grid, point_names, stored))
    missing = [s for s in seeds if any(s not in st for st in stored)]
    if trials:  # a trial's state is a few arrays per arm: every missing seed in one call
        size_chunk = chunk or max(1, len(missing))
    else:
        size_chunk = chunk or estimate_chunk(seed_bytes, len(missing))
    return grid, point_names, missing, [missing[i:i + size_chunk] for i in range(0, len(missing), size_chunk)]


def _grid_params(alg, grid, block) -> Optional[dict]:
    """The hyper-parameters of a chunk of `block` seeds of every grid point, grid point by grid point
    ({name: [G * len(block)]}); None without a grid (the defaults)."""
    if grid is None:
        return None
    return {k: [hp.get(k, v) for _, hp in grid for _ in block] for k, v in alg.defaults.items()}


def _rows(res, rows) -> dict:
    """The runs `rows` (a slice) of a batch's outputs, flat as a chunk file stores them: for a
    RunOutput {output: [n, ...], "errors": [n], "diag/NAME": [n, T]}, for a TrialOutput
    {outcome: [n], "errors": [n]}."""
    if isinstance(res, TrialOutput):
        return {**{k: v[rows] for k, v in res.outcomes.items()}, "errors": res.errors[rows]}
    return {**{k: getattr(res, k)[rows] for k in OUTPUT_KEYS + ("errors",)},
            **{f"diag/{k}": v[rows] for k, v in res.diagnostics.items()}}


def _error_message(alg, errors, seeds) -> str:
    """'' when no run of a curve has error bits, else one line naming the seeds and the messages."""
    bad = [s for s, e in zip(seeds, errors.tolist()) if e]
    if not bad:
        return ""
    return f"seeds {', '.join(map(str, bad))}: {describe_errors(alg, int(np.bitwise_or.reduce(errors)))}"


def _take_cached(out: Path, curve: str, folder: Path, seeds, log) -> list:
    """Copy into `out` the seeds of `curve` that it lacks and the cache folder holds; the seeds taken."""
    have = _stored_chunks(_chunk_folder(out, curve))
    found = _stored_chunks(folder)
    take = [s for s in seeds if s not in have and s in found]
    if take:
        _write_chunk(_chunk_folder(out, curve), take, _assemble(folder, take), *_seconds_of(found, take))
        atomic_write_text(_chunk_folder(out, curve) / CACHED_FILE, folder.name)
        log(f"[{curve}] seeds {', '.join(map(str, take))} taken from the curve cache ({folder})")
    return take


def _seconds_of(stored: dict, seeds) -> tuple:
    """(compile, run) seconds that computed `seeds` of a chunk folder (`stored`: `_stored_chunks`): each
    chunk file's seconds shared out by the seeds taken of it, so a curve taken from the cache keeps the
    time its computation took, wherever that ran."""
    compile_s = run_s = 0.0
    for path, items in _by_file(stored, seeds).items():
        with np.load(path) as data:
            share = len(items) / len(data["seeds"])
            compile_s += share * float(data["compile_seconds"]) if "compile_seconds" in data.files else 0.0
            run_s += share * float(data["run_seconds"]) if "run_seconds" in data.files else 0.0
    return compile_s, run_s


def _keep_cached(out: Path, curve: str, folder: Path, about: dict) -> None:
    """Put every chunk file of `curve` that the cache folder lacks into it (a hard link where the file
    system allows one, else a copy), with a note of the first experiment and curve that stored it."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "curve.json").exists():
        atomic_write_text(folder / "curve.json", json.dumps(about, indent=2))
    for path in sorted(_chunk_folder(out, curve).glob("seeds_*.npz")):
        target = folder / path.name
        if target.exists():
            continue
        try:
            os.link(path, target)
        except OSError:  # another file system, or one without hard links
            shutil.copyfile(path, target)


def _claim_out_dir(out: Path, name: str, size: str, config: dict) -> None:
    """Refuse to mix results of different configurations in one folder."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "config.json"
    record = {"experiment": name, "size": size, "config": _fixed(config)}
    if path.exists():
        previous = json.loads(path.read_text())
        if isinstance(previous.get("config"), dict):  # a folder written when RUN_KEYS held fewer keys
            previous["config"] = _fixed(previous["config"])
        if previous != json.loads(json.dumps(record)):
            raise ConfigError(
                f"{out} holds results of another configuration ({previous.get('experiment')}, "
                f"{previous.get('size')}); choose another --out or delete that folder")
    else:
        atomic_write_text(path, json.dumps(record, indent=2))


def _fixed(config: dict) -> dict:
    """The keys of a configuration that a results folder holds to: all but RUN_KEYS."""
    return {k: v for k, v in config.items() if k not in RUN_KEYS}


def _claim_stream(out: Path, curve: str, stream: int) -> None:
    """Refuse to resume a curve whose stored seeds were drawn on another key stream (they would be
    mixed with seeds of this one); record the stream otherwise. A chunk folder with no record was
    written before streams existed: its seeds are stream 0."""
    folder = _chunk_folder(out, curve)
    path = folder / STREAM_FILE
    recorded = int(path.read_text()) if path.exists() else 0
    if recorded != stream and _stored_chunks(folder):
        raise ConfigError(f"{folder} holds seeds of {curve!r} drawn on key stream {recorded}, and this curve now "
                          f"runs on stream {stream}; delete that folder to recompute them, or choose another --out")
    if not path.exists() or recorded != stream:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, str(stream))


def _slug(alg_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", alg_name)


def _chunk_folder(out: Path, curve: str) -> Path:
    return out / CHUNKS / _slug(curve)


def _stored_chunks(folder: Path) -> dict:
    """seed -> (file, row) for every seed stored in a chunk folder. A chunk file that cannot be read
    whole (emptied or cut short by a crash of the machine, corrupted) holds no seeds: it is set aside
    (`_set_aside`) and its seeds are computed again."""
    found = {}
    if folder.exists():
        for path in sorted(folder.glob("seeds_*.npz")):
            for row, seed in enumerate(_chunk_seeds(path)):
                found[int(seed)] = (path, row)
    return found


UNREADABLE_SUFFIX = ".unreadable"  # a chunk file that cannot be read is renamed NAME.npz.unreadable
_READ_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)
_READ_WHOLE: dict = {}  # (path, inode, size, mtime) of a chunk file read whole by this process -> its seeds


def _chunk_seeds(path: Path) -> list:
    """The seeds a chunk file stores, after reading every array of it once in this process (again
    when the file changes), so that `_assemble` never meets a file that only partly loads; [] when
    the file cannot be read (it is set aside) or is gone (another process set it aside)."""
    try:
        stat = path.stat()
        key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key not in _READ_WHOLE:
            with np.load(path) as data:
                arrays = {k: data[k] for k in data.files}  # a torn or corrupted array fails here
            _READ_WHOLE[key] = arrays["seeds"].tolist()
        return _READ_WHOLE[key]
    except FileNotFoundError:
        return []
    except _READ_ERRORS as err:
        _set_aside(path, err)
        return []


def _set_aside(path: Path, err: BaseException) -> None:
    """Rename an unreadable chunk file to NAME.npz.unreadable (kept for a look, no longer read, so the
    warning comes once), with a RuntimeWarning that names it."""
    aside = path.with_name(path.name + UNREADABLE_SUFFIX)
    with contextlib.suppress(OSError):  # another process may have set it aside first
        os.replace(path, aside)
    first = first_line(err) or "empty"
    warnings.warn(f"{path} cannot be read ({type(err).__name__}: {first}): its seeds are computed again, and the "
                  f"file is kept as {aside.name} (delete it when done)", RuntimeWarning, stacklevel=2)


def _write_chunk(folder: Path, block, outputs: dict, compile_seconds=0.0, run_seconds=0.0) -> None:
    """Store one chunk: `outputs` flat as `_rows` gives them (regret, when there is one, as float32)."""
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"seeds": np.asarray(block), "compile_seconds": compile_seconds, "run_seconds": run_seconds, **outputs}
    if "regret" in arrays:
        arrays["regret"] = np.asarray(arrays["regret"]).astype(np.float32)
    atomic_savez(folder / f"seeds_{block[0]}-{block[-1]}.npz", arrays)


def _assemble(folder: Path, seeds) -> dict:
    """{output: [len(seeds), ...]} of the given seeds, read from a chunk folder."""
    rows = {}
    for path, items in _by_file(_stored_chunks(folder), seeds).items():
        with np.load(path) as data:  # each array read once, not once a seed
            arrays = {k: data[k] for k in data.files if k not in CHUNK_BOOKKEEPING}
            errors = data["errors"] if "errors" in data.files else np.zeros(len(data["seeds"]), np.int64)
        for seed, row in items:
            rows[seed] = {**{k: v[row] for k, v in arrays.items()}, "errors": errors[row]}
    return {k: np.stack([rows[s][k] for s in seeds]) for k in rows[seeds[0]]}


def _by_file(stored: dict, seeds) -> dict:
    """{chunk file: [(seed, row), ...]} of the given seeds (`stored`: `_stored_chunks`)."""
    per_file: dict = {}
    for seed in seeds:
        path, row = stored[seed]
        per_file.setdefault(path, []).append((seed, row))
    return per_file


def estimate_chunk(seed_bytes: int, n_missing: int, budget_fraction: float = 0.25) -> int:
    """Seeds per chunk so that the batch's state and outputs (`seed_bytes` a seed) fit in a fraction of
    free memory."""
    if n_missing <= 0:
        return 1
    return int(max(1, min(n_missing, (budget_fraction * available_memory()) // seed_bytes)))


def run_bytes(problem, algorithm, config) -> int:
    """Memory one run of a batch needs: four copies of its state at its final capacity (the state, its
    update, the scan's carry and the segment's result) and two of its per-step outputs."""
    spec = problem.spec
    with precision_scope(config["precision"]):
        sizes = horizon_sizes(algorithm, spec)
        start = run_start(problem, algorithm, config["base_key"], sizes)
        shapes = jax.eval_shape(start, np.uint32(0), {name: 0.0 for name in algorithm.params})[3]
    state_bytes = sum(np.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(shapes))
    out_bytes = spec.horizon * (spec.num_agents + 3) * 8
    return int(4 * state_bytes + 2 * out_bytes + 1)


def check_memory(resolved, config, chunk, available: int) -> dict:
    """Before anything compiles: a ConfigError when one run of a curve, or a `--chunk` of them, needs
    more than the `available` bytes, with what to change. Returns {curve name: bytes one seed needs,
    all its grid points} of the regret curves."""
    gib = 1 << 30
    seed_bytes = {}
    for run in resolved:
        if isinstance(run.algorithm, Trial):
            continue
        per_run = run_bytes(run.problem, run.algorithm, config) * len(run.curve.point_names())
        name = run.algorithm.name
        if per_run > available:
            raise ConfigError(f"{name}: one run needs about {per_run / gib:.1f} GiB at its final capacity "
                              f"and {available / gib:.1f} GiB are free: lower the horizon or the number of agents, "
                              f"or run on a machine (or device) with more memory")
        if chunk is not None and chunk * per_run > available:
            raise ConfigError(f"{name}: --chunk {chunk} needs about {chunk * per_run / gib:.1f} GiB "
                              f"({per_run / (1 << 20):.0f} MiB a run) and {available / gib:.1f} GiB are free: use "
                              f"--chunk {max(1, available // (2 * per_run))} or less, or spread the seeds over more "
                              f"processes (--num-processes)")
        seed_bytes[run.curve.name] = per_run
    return seed_bytes


def proc_kilobytes(path: str, field: str) -> int:
    """The `field:` line of a /proc status file in bytes (0 where the file or field is missing)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def available_memory() -> int:
    """Memory the default device can still give, in bytes: an accelerator's free memory (its
    allocator's limit less what is in use), the machine's MemAvailable on the CPU (4 GiB where
    neither can be read)."""
    stats = device_memory_stats()
    if stats is not None and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    return proc_kilobytes("/proc/meminfo", "MemAvailable") or (4 << 30)


def device_memory_stats() -> Optional[dict]:
    """The allocator statistics of the first accelerator (bytes_in_use, peak_bytes_in_use,
    bytes_limit, ...), or None on the CPU, whose runs live in the process's own memory."""
    cpu_guard()  # asking for the backend creates jax's clients
    if jax.default_backend() == "cpu":
        return None
    return jax.local_devices()[0].memory_stats()


def package_versions() -> dict:
    return {pkg: package_version(pkg) for pkg in ("bandits_jax", "jax", "jaxlib", "flax", "optax", "numpy", "chex")}


@functools.lru_cache(maxsize=None)
def code_commit() -> str:
    """The git commit of the package's source, with "+changes" where its tracked files differ from
    it (bandits_jax/ and kernels/, which installs as bandits_jax.kernels), or "" outside a git
    checkout (an installed wheel): the code a record was computed with."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "bandits_jax", "kernels"],
                               cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    if head.returncode != 0:
        return ""
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
