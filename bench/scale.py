"""The scale section of `python -m bench` (`--only scale`): every registered algorithm at S seeds.

For each registered algorithm, one configuration (CASES, read from the bench case of each name's record
in its family's NAMES: an experiment at a size, with overrides, and the curve that runs the algorithm;
every case is an experiment's own curve except dis_kernel_ucb, which no experiment runs and which is
built on async/synthetic-f1's problem with Approx-DisKernelUCB's kernel options). The regret algorithms run at T = 300 (FN-UCB and async
families), the DUETS paper size (T = 50) and Coop's small size at T = 100 (V = 50); the CoPE-KB and
best-arm trials at their paper size. These are smaller than the papers' horizons so that S = 1000
fits in the section's budget on a small CPU; `--scale-horizon` changes the regret horizons.

Each row (algorithm, S) is ONE `run_batch` (or `run_trials`) call over S seeds, compiled first:
compile and run seconds apart, the resident-memory peak growth around the call, agent-steps (or
trials) per second, the ratio to the algorithm's NumPy reference loop at the same configuration
timed in the same process (the modules' SCALE_REFERENCES; one seed, inputs drawn before the clock),
and the fraction of the machine's roofline the run reaches. That fraction is the measured rate
against XLA's own cost analysis of one step at its final capacity (bench.step_cost: flops and
bytes per agent-step) and the ceilings measured in the same process:
    fraction = rate x max(flops / matmul flop/s, bytes / copy bytes/s).
It is an estimate both ways: a state that grows is charged its final size at every step (an
overstatement), and XLA counts a loop inside the step once and a LAPACK call not at all (an
understatement). A phase-level trial has no step: its fraction is not estimated.

An S whose run would exceed --scale-budget-seconds (extrapolated from the last S measured) or the
available memory is skipped with the reason. Targets (reported, not asserted): ratio >= 10 at
S = 100, fraction >= 30%, and a per-run throughput that does not fall as S grows (every S within
10% of S = 1 or above).
"""
from __future__ import annotations

import time
import types
from typing import NamedTuple, Optional

import numpy as np

from bandits_jax.algorithms import records
from bandits_jax.algorithms.single.uniform import uniform_random
from bandits_jax.core import Trial
from bandits_jax.curves import resolve
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.experiments.registry import build_curves, resolve_config
from bandits_jax.runner import run_batch
from bandits_jax.trials import run_trials
from bandits_jax.sweep import run_bytes

from . import async_bench, coop_bench, cope_bench, duets_bench, harness, numpy_loop, step_cost
from .harness import log

GROUP = "scale"
NAMES = ("scale",)
FULL_SEEDS = (1, 10, 100, 1000)
QUICK_SEEDS = (1, 4)
QUICK_HORIZON = 20
BUDGET_SECONDS = 60.0
RATIO_TARGET, FRACTION_TARGET, FLAT_TOLERANCE = 10.0, 0.30, 0.9
FLOOR_SEEDS = 100
NUMPY_MIN_SECONDS, NUMPY_MAX_SEEDS = 1.0, 3
MB = float(1 << 20)


class Case(NamedTuple):
    """One registered algorithm's configuration: the curve `curve` of `experiment` at `size` with
    `overrides` (strings, as --set takes them), at its grid point `point` when the curve has a grid."""

    algorithm: str
    experiment: str
    size: str
    overrides: dict
    curve: str
    point: Optional[str] = None


def _cases() -> tuple:
    """One Case per packaged name, from its record's bench case (`algorithms.record.BenchCase`)."""
    return tuple(Case(name, r.bench.experiment, r.bench.size, dict(r.bench.overrides or {}), r.bench.curve,
                      r.bench.point) for name, r in records().items())


CASES = _cases()


def references() -> dict:
    """{registered name: NumPy reference driver} gathered from the family modules."""
    out = {}
    for module in (numpy_loop, async_bench, duets_bench, cope_bench, coop_bench):
        out.update(getattr(module, "SCALE_REFERENCES", {}))
    return out


# ------------------------------------------------------------------------------------ set-up
def build(case: Case, horizon: Optional[int] = None):
    """(run, params {name: float}, cfg) of a case: the experiment's curve, resolved; `horizon` replaces
    the horizon of the cases that set one (the regret cases other than DUETS)."""
    overrides = dict(case.overrides)
    if horizon is not None and "horizon" in overrides:
        overrides["horizon"] = str(horizon)
    exp = get_experiment(case.experiment)
    cfg = resolve_config(exp, case.size, overrides)
    curves = build_curves(exp, cfg)
    curve = step_cost.dis_kernel_curve(curves) if case.algorithm == "dis_kernel_ucb" else \
        next(c for c in curves if c.name == case.curve)
    if curve.algorithm.name != case.algorithm:
        raise ValueError(f"{case.experiment}: curve {case.curve!r} runs {curve.algorithm.name}, not {case.algorithm}")
    run = resolve([curve], trace=False)[0]
    params = {k: float(v) for k, v in run.algorithm.defaults.items()}
    if curve.grid is not None:
        params.update({k: float(v) for k, v in dict(curve.grid)[case.point].items()})
    return run, params, cfg


def units_per_seed(run) -> int:
    """Agent-steps of one run (an agent-step: one acting agent at one step), or 1 for a trial."""
    if isinstance(run.algorithm, Trial):
        return 1
    spec = run.problem.spec
    return spec.horizon * (1 if spec.one_active else spec.num_agents)


# ------------------------------------------------------------------------------------ measuring
def numpy_rate(fn, run, params, cfg, threads) -> dict:
    """Units per second of the NumPy reference on seeds 0, 1, ... until NUMPY_MIN_SECONDS have passed
    (at most NUMPY_MAX_SEEDS seeds)."""
    units = seconds = 0.0
    seeds = 0
    with harness.BlasThreads(threads):
        while seeds < NUMPY_MAX_SEEDS and (seeds == 0 or seconds < NUMPY_MIN_SECONDS):
            u, s = fn(run, params, cfg, seeds)
            units, seconds, seeds = units + u, seconds + s, seeds + 1
    return dict(seeds=seeds, seconds=seconds, units_per_second=units / seconds, note=getattr(fn, "note", ""))


def jax_row(run, params, cfg, seeds: int) -> dict:
    """One compiled call over `seeds` seeds: compile and run seconds, peak MB, units per second."""
    waited = harness.turn_wait()
    with harness.PeakMemory() as mem:
        out = batch_call(run, params, cfg, seeds)
    run_seconds = out.run_seconds - (harness.turn_wait() - waited)  # another process's turns are not ours
    return dict(runs=seeds, seeds=seeds, compile_seconds=out.compile_seconds, run_seconds=run_seconds,
                peak_mb=mem.peak_delta / MB, units_per_second=seeds * units_per_seed(run) / run_seconds,
                errors=int(np.count_nonzero(out.errors)))


def batch_call(run, params, cfg, seeds: int, vmap_size: Optional[int] = None):
    """The runner's result of one call over seeds 0..seeds-1 at `params` (each a float, the same for
    every seed), compiled afresh: `run_trials` for a trial, else `run_batch` with the case's first
    segment and `vmap_size` (None: the runner's default layout)."""
    batched = {k: np.full(seeds, v) for k, v in params.items()}
    if isinstance(run.algorithm, Trial):
        return run_trials(run.problem, run.algorithm, range(seeds), batched, compiled_cache={})
    return run_batch(run.problem, run.algorithm, range(seeds), batched, first_segment=cfg["first_segment"],
                     compiled_cache={}, vmap_size=vmap_size)


def step_roofline(run, ceilings: dict) -> Optional[dict]:
    """XLA's flops and bytes per agent-step of the run's step at final capacity (None for a trial)."""
    if isinstance(run.algorithm, Trial):
        return None
    cost = step_cost.step_cost(run.problem, run.algorithm)
    spec = run.problem.spec
    per_unit = spec.num_agents / (1 if spec.one_active else spec.num_agents)  # step_cost divides by N
    return roofline_of({k: v * per_unit for k, v in cost.items()}, ceilings)


def roofline_of(cost: dict, ceilings: dict) -> dict:
    """The cost {"flops", "library_flops", "bytes"} per unit with its roofline seconds against
    `ceilings` and what bounds it."""
    cost = {k: cost[k] for k in ("flops", "library_flops", "bytes") if k in cost}
    seconds = 1.0 / step_cost.roofline_rate(cost, ceilings["matmul_flops"], ceilings["memory_bandwidth"])
    bytes_bound = cost["bytes"] / ceilings["memory_bandwidth"] >= seconds
    return dict(cost, roofline_seconds=seconds, bound="bytes" if bytes_bound else "flops")


def apply_ceilings(section: Optional[list], ceilings: dict) -> None:
    """Set every case's roofline seconds, its rows' fractions and its targets against `ceilings` (the
    bench's final ones: a ceiling measured again at the end of a run counts where it is larger)."""
    for res in section or ():
        if res["roofline"] is None:
            continue
        res["roofline"] = roofline_of(res["roofline"], ceilings)
        for row in res["rows"]:
            if not row.get("skipped"):
                row["fraction"] = row["units_per_second"] * res["roofline"]["roofline_seconds"]
        res["targets"] = targets(res["rows"], res["numpy"], res["roofline"], res["floor"])


def environment_floor(run, cfg, floors: dict) -> Optional[dict]:
    """The rate of uniform random arms (`Random`: no state, no learning) on the run's problem at
    FLOOR_SEEDS seeds: what the problem's own step (contexts, means, rewards, keys) and the runner's scan
    cost, an upper bound on any learner's rate there. Cached per problem (None for a trial)."""
    if isinstance(run.algorithm, Trial):
        return None
    if run.problem.name not in floors:
        row = jax_row(floor_run(run), {}, cfg, FLOOR_SEEDS)
        floors[run.problem.name] = dict(seeds=FLOOR_SEEDS, units_per_second=row["units_per_second"])
        log(f"[scale] environment floor of {run.problem.name}: {row['units_per_second']:.4g} agent-steps/s "
            f"(Random, S = {FLOOR_SEEDS})")
    return floors[run.problem.name]


def floor_run(run):
    """The run's problem under uniform random arms (`Random`), the environment floor's run."""
    return types.SimpleNamespace(algorithm=uniform_random(), problem=run.problem)


def bench_case(case: Case, args, ceilings: dict, skip_reason, reference, floors: dict) -> dict:
    run, params, cfg = build(case, args.scale_horizon)
    unit = "trials" if isinstance(run.algorithm, Trial) else "agent-steps"
    numpy = numpy_rate(reference, run, params, cfg, args.numpy_threads) if reference else None
    if numpy:
        log(f"[scale] {case.algorithm}: NumPy {numpy['units_per_second']:.4g} {unit}/s ({numpy['seeds']} seed(s))")
    roof = step_roofline(run, ceilings)
    floor = environment_floor(run, cfg, floors)
    budget = types.SimpleNamespace(budget_seconds=args.scale_budget_seconds)

    def measure(seeds):
        row = jax_row(run, params, cfg, seeds)
        row["ratio"] = row["units_per_second"] / numpy["units_per_second"] if numpy else None
        row["fraction"] = row["units_per_second"] * roof["roofline_seconds"] if roof else None
        log(f"[scale] {case.algorithm} S = {seeds}: compile {row['compile_seconds']:.1f} s, run "
            f"{row['run_seconds']:.2f} s, {row['units_per_second']:.4g} {unit}/s"
            + (f", x{row['ratio']:.1f} NumPy" if numpy else ""))
        return row

    rows = harness.seed_rows("scale", case.algorithm, args.seed_counts, budget, skip_reason, measure)
    spec = None if isinstance(run.algorithm, Trial) else run.problem.spec._asdict()
    state_mb = None if spec is None else run_bytes(run.problem, run.algorithm, cfg) / MB
    return dict(algorithm=case.algorithm, experiment=case.experiment, size=case.size, overrides=case.overrides,
                curve=case.curve, point=case.point, unit=unit, spec=spec, run_state_mb=state_mb,
                numpy=numpy, roofline=roof, floor=floor, rows=rows, targets=targets(rows, numpy, roof, floor))


def targets(rows: list, numpy, roof, floor=None) -> dict:
    """{target: "met ..." / "MISSED ..." / "n/a ..."} of one algorithm's measured rows; a missed ratio
    names the ratio the environment floor allows (`environment_floor`)."""
    measured = {r["seeds"]: r for r in rows if not r.get("skipped")}
    out = {}
    r100 = measured.get(100)
    if numpy is None:
        out["ratio"] = "n/a: no NumPy reference"
    elif r100 is None:
        out["ratio"] = "n/a: S = 100 not measured"
    else:
        out["ratio"] = f"{'met' if r100['ratio'] >= RATIO_TARGET else 'MISSED'} x{r100['ratio']:.1f}"
        if floor is not None and r100["ratio"] < RATIO_TARGET:
            out["ratio"] += f" (the environment floor allows x{floor['units_per_second'] / numpy['units_per_second']:.1f})"
    fractions = [r["fraction"] for r in measured.values() if r.get("fraction") is not None]
    out["fraction"] = (f"{'met' if max(fractions) >= FRACTION_TARGET else 'MISSED'} {max(fractions):.1%}"
                       if fractions else "n/a: a trial (no step)" if roof is None else "n/a: nothing measured")
    if 1 in measured and len(measured) > 1:
        worst = min(r["units_per_second"] for s, r in measured.items() if s > 1) / measured[1]["units_per_second"]
        out["flat"] = f"{'met' if worst >= FLAT_TOLERANCE else 'MISSED'} worst S>1 / S=1 = {worst:.2f}"
    else:
        out["flat"] = "n/a: one S measured"
    return out


def run_section(args, ceilings: dict, skip_reason) -> list | None:
    if not harness.selected(args, NAMES):
        return None
    refs = references()
    wanted = args.scale_algorithms
    cases = [c for c in CASES if not wanted or c.algorithm in wanted]
    results, floors = [], {}
    for case in cases:
        log(f"[scale] {case.algorithm}: {case.experiment} ({case.size}) {case.curve}"
            + (f" [{case.point}]" if case.point else ""))
        start = time.perf_counter()
        results.append(bench_case(case, args, ceilings, skip_reason, refs.get(case.algorithm), floors))
        log(f"[scale] {case.algorithm}: {time.perf_counter() - start:.0f} s")
    return results


# ------------------------------------------------------------------------------------ report
def table(results: list) -> str:
    head = ("algorithm", "S", "compile s", "run s", "peak MB", "units/s", "NumPy units/s", "ratio", "roofline",
            "note")
    lines = []
    for res in results:
        numpy = res["numpy"]
        for r in res["rows"]:
            unit = "trial" if res["unit"] == "trials" else "a-s"
            if r.get("skipped"):
                lines.append([res["algorithm"], str(r["seeds"])] + ["-"] * 7 + [r["note"]])
                continue
            lines.append([res["algorithm"], str(r["seeds"]), f"{r['compile_seconds']:.1f}", f"{r['run_seconds']:.2f}",
                          f"{r['peak_mb']:.0f}", f"{r['units_per_second']:.4g} {unit}",
                          "-" if numpy is None else f"{numpy['units_per_second']:.4g}",
                          "-" if r["ratio"] is None else f"{r['ratio']:.1f}",
                          "-" if r["fraction"] is None else f"{r['fraction']:.1%}",
                          (numpy or {}).get("note", "") + (f" errors in {r['errors']} runs" if r["errors"] else "")])
    out = harness.aligned(head, lines)
    out.append("")
    out.append("targets (measured, not asserted): ratio >= 10 at S = 100 | roofline >= 30% | throughput flat in S")
    for res in results:
        t = res["targets"]
        out.append(f"  {res['algorithm']}: {t['ratio']} | {t['fraction']} | {t['flat']}")
    return "\n".join(out)


def markdown(results: list) -> str:
    """One Markdown row per algorithm: units/s at each S (skipped: "-"), the NumPy rate, the ratio at
    S = 100 (else at the largest S measured, in brackets), the best roofline fraction and the targets."""
    seeds = sorted({r["seeds"] for res in results for r in res["rows"]})
    head = (["algorithm", "configuration"] + [f"S = {s}" for s in seeds]
            + ["NumPy", "x NumPy", "floor x NumPy", "roofline", "compile s", "peak MB",
               "targets: ratio / roofline / flat"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in results:
        measured = {r["seeds"]: r for r in res["rows"] if not r.get("skipped")}
        rates = [f"{measured[s]['units_per_second']:.3g}" if s in measured else "-" for s in seeds]
        top = measured.get(100) or (measured[max(measured)] if measured else None)
        ratio = "-" if top is None or top["ratio"] is None else (
            f"{top['ratio']:.1f}" if top["seeds"] == 100 else f"({top['ratio']:.1f} at S = {top['seeds']})")
        fractions = [r["fraction"] for r in measured.values() if r["fraction"] is not None]
        where = res["curve"] + (f" [{res['point']}]" if res["point"] else "")
        unit = "trials/s" if res["unit"] == "trials" else ""
        t = res["targets"]
        marks = " / ".join(t[k].split(":")[0].split(" ")[0] for k in ("ratio", "fraction", "flat"))
        lines.append("| " + " | ".join([
            res["algorithm"], f"{res['experiment']}: {where}", *rates,
            "-" if res["numpy"] is None else f"{res['numpy']['units_per_second']:.3g} {unit}".strip(), ratio,
            "-" if not (res.get("floor") and res["numpy"]) else
            f"{res['floor']['units_per_second'] / res['numpy']['units_per_second']:.1f}",
            f"{max(fractions):.0%}" if fractions else "-",
            f"{max(r['compile_seconds'] for r in measured.values()):.0f}" if measured else "-",
            f"{max(r['peak_mb'] for r in measured.values()):.0f}" if measured else "-", marks]) + " |")
    return "\n".join(lines)
