"""`python -m bench` (= `bandits-jax bench`): throughput of the JAX runner against NumPy loops.

For each algorithm and each seed count S, ONE `run_batch` call over S seeds is timed (compile
and run seconds apart) with the peak resident-memory growth around it. The same configuration
through the plain NumPy reference loop (Python loops over seeds and agents, a fresh inverse per
step) is timed in the same process on a seed or two: its cost per run does not depend on S, so
its agent-steps per second is the baseline of every row, ratio = JAX rate / NumPy rate.

Machine ceilings (array-copy bytes/s, float64 matmul flop/s) are measured in the same process,
and each row reports the fraction of its ceiling that the work model of `bench.configs`
reaches. An S whose run time, extrapolated linearly from the largest S measured, would exceed
--budget-seconds, or whose memory (extrapolated, or modelled from the state size) would not fit
in the available memory, is skipped with the reason in the table. For KernelUCB the doubling
capacity segments are also timed against one fixed T x T buffer (first_segment = T).

A second section (bench/async_bench.py; names Async-KernelUCB, Approx-DisKernelUCB, OneKernelUCB,
or `--only async` for all three) times the asynchronous family of async_exps at its paper size
(N = 100, T = 10^4, S = 1 by default), with the NumPy reference loops on a prefix of the horizon
(--async-numpy-horizon) and OneKernelUCB's doubling-versus-fixed capacity comparison.

A third section (bench/duets_bench.py; names DUETS, DisKernelUCB-duets, or `--only duets`) times
DUETS and the DUETS paper's DisKernelUCB at duets/h1's paper size (N = 10, T = 50, 2000 candidates)
against the NumPy loops written from the spec, at S = 1 and 1000 and over the beta grid.

A fourth section (bench/cope_bench.py; names CoKernelFC, CoKernelFB, or `--only cope`) times the
CoPE-KB trials in the rank-2 world at S = 1, 100 and 1000 against their NumPy loops, in trials/s.

A fifth section (bench/coop_bench.py; names Coop-KernelUCB, Eager-KernelUCB, Dist-KernelUCB, or
`--only coop`) times the cooperative kernel UCB methods in the dual storage on a small `coop-linear`
network (V = 12, T = 30) at S = 1, 100 and 1000 against their NumPy loop on the same arrays, in runs/s,
and the feature storage at V = 200 in seconds per round of a trial.

Prints a table and writes JSON (default bench/results/bench.json).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

from bandits_jax import cpu_guard
from bandits_jax.reporting.results import cumulative_regret
from bandits_jax.runner import run_batch

from . import async_bench, configs, coop_bench, cope_bench, duets_bench, harness, numpy_loop, precision, scale, step_cost
from .harness import log

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "bench.json"
MEMORY_SAFETY = 0.7  # use at most this fraction of MemAvailable
MIN_MEMORY_SEEDS = 10  # the smallest measured S whose peak memory is extrapolated to a larger S
MB = float(1 << 20)


# ------------------------------------------------------------------------------------------ args
def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"tiny run: T = {configs.QUICK_HORIZON}, S in {{{', '.join(map(str, configs.QUICK_SEEDS))}}}")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="benchmark only this algorithm (repeatable or comma-separated; case-insensitive)")
    p.add_argument("--seeds", default=None, help="comma-separated seed counts S (default 1,10,100,1000)")
    p.add_argument("--horizon", type=int, default=None, help="T for every algorithm")
    p.add_argument("--budget-seconds", type=float, default=300.0,
                   help="skip an S whose extrapolated run time exceeds this (default 300)")
    p.add_argument("--capacity-seeds", type=int, default=None,
                   help="S of the KernelUCB fixed-buffer versus doubling-segments comparison (default 10; quick 4)")
    p.add_argument("--numpy-threads", type=int, default=1,
                   help="BLAS threads of the NumPy loop (default 1: on a shared 2-core machine a threaded "
                        "OpenBLAS spins against the other processes; 0 = the library's default)")
    p.add_argument("--async-horizon", type=int, default=None,
                   help=f"T of the asynchronous section (default {async_bench.FULL_HORIZON}; quick {async_bench.QUICK['horizon']})")
    p.add_argument("--async-agents", type=int, default=None,
                   help=f"N of the asynchronous section (default {async_bench.FULL_AGENTS}; quick {async_bench.QUICK['num_agents']})")
    p.add_argument("--async-numpy-horizon", type=int, default=None,
                   help="prefix of the horizon on which the asynchronous NumPy loops (and, for the ratio, the JAX "
                        f"runner) are timed (default {async_bench.FULL_NUMPY_HORIZON}; quick {async_bench.QUICK['numpy_horizon']})")
    p.add_argument("--async-capacity-seeds", type=int, default=None,
                   help=f"S of OneKernelUCB's fixed-buffer versus doubling comparison (default {async_bench.FULL_CAPACITY_SEEDS})")
    p.add_argument("--async-sizing-horizon", type=int, default=None,
                   help="T of the Nyström methods' demand- versus time-sized dictionary comparison (default "
                        f"{async_bench.FULL_SIZING_HORIZON}; quick: the section's T)")
    p.add_argument("--scale-budget-seconds", type=float, default=scale.BUDGET_SECONDS,
                   help=f"the scale section's budget per call (default {scale.BUDGET_SECONDS:g})")
    p.add_argument("--scale-horizon", type=int, default=None,
                   help=f"T of the scale section's regret cases (default theirs; quick {scale.QUICK_HORIZON})")
    p.add_argument("--scale-algorithms", default="",
                   help="comma-separated registered names: the scale section runs only these")
    p.add_argument("--precision-horizon", type=int, default=None,
                   help=f"T of the float32 health section (default {precision.FULL_HORIZON}; quick {precision.QUICK_HORIZON})")
    p.add_argument("--out", default=None, help="JSON path, or a directory for bench.json (default bench/results/bench.json)")
    args = p.parse_args(argv)
    try:
        seeds = args.seeds or ",".join(map(str, configs.QUICK_SEEDS if args.quick else configs.FULL_SEEDS))
        args.seed_counts = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        p.error(f"--seeds takes comma-separated positive integers, got {args.seeds!r}")
    if not args.seed_counts or min(args.seed_counts) < 1:
        p.error(f"--seeds takes comma-separated positive integers, got {args.seeds!r}")
    if args.horizon is not None and args.horizon < 1:
        p.error("--horizon must be a positive integer")
    if args.budget_seconds <= 0:
        p.error("--budget-seconds must be positive")
    if args.scale_budget_seconds <= 0:
        p.error("--scale-budget-seconds must be positive")
    if args.scale_horizon is None and args.quick:
        args.scale_horizon = scale.QUICK_HORIZON
    if args.scale_horizon is not None and args.scale_horizon < 1:
        p.error("--scale-horizon must be a positive integer")
    args.scale_algorithms = [n.strip() for n in args.scale_algorithms.split(",") if n.strip()]
    cased = {c.algorithm for c in scale.CASES}
    if set(args.scale_algorithms) - cased:
        p.error(f"--scale-algorithms: unknown {', '.join(sorted(set(args.scale_algorithms) - cased))}; "
                f"known: {', '.join(sorted(cased))}")
    if args.capacity_seeds is None:
        args.capacity_seeds = configs.QUICK_SEEDS[-1] if args.quick else 10
    if args.capacity_seeds < 1:
        p.error("--capacity-seeds must be a positive integer")
    if args.async_capacity_seeds is None:
        args.async_capacity_seeds = async_bench.FULL_CAPACITY_SEEDS
    for flag in ("async_horizon", "async_agents", "async_numpy_horizon", "async_capacity_seeds", "async_sizing_horizon",
                 "precision_horizon"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be a positive integer")
    known = {c.name.lower(): c.name for c in configs.cases()}
    known.update({n.lower(): n for n in async_bench.NAMES + duets_bench.NAMES + cope_bench.NAMES + coop_bench.NAMES
                  + step_cost.NAMES + scale.NAMES + precision.NAMES})
    groups = {async_bench.GROUP: async_bench.NAMES, duets_bench.GROUP: duets_bench.NAMES,
              cope_bench.GROUP: cope_bench.NAMES, coop_bench.GROUP: coop_bench.NAMES,
              step_cost.GROUP: step_cost.NAMES, scale.GROUP: scale.NAMES, precision.GROUP: precision.NAMES}
    only = [n.strip().lower() for item in args.only for n in item.split(",") if n.strip()]
    unknown = [n for n in only if n not in known and n not in groups]
    if unknown:
        p.error(f"unknown algorithm(s) {', '.join(unknown)}; known: {', '.join(known.values())} "
                f"(or {' / '.join(groups)} for a whole section)")
    args.only_names = {known[n] for n in only if n not in groups}
    for group, names in groups.items():
        if group in only:
            args.only_names |= set(names)
    return args


def selected_cases(args) -> list:
    out = []
    for case in configs.cases():
        if args.only_names and case.name not in args.only_names:
            continue
        if args.quick:
            case = dataclasses.replace(case, horizon=configs.QUICK_HORIZON, first_segment=configs.QUICK_FIRST_SEGMENT,
                                       **case.quick)
        if args.horizon is not None:
            case = dataclasses.replace(case, horizon=args.horizon)
        out.append(case)
    return out


# ------------------------------------------------------------------------------------------ runs
def jax_run(case, problem, alg, seeds: int, first_segment: int, cache=None):
    """One run_batch call over `seeds` seeds with the resident-memory peak around it.

    `cache`: compiled executables to reuse (a dict kept by the caller), or None to compile afresh.
    """
    with harness.PeakMemory() as mem:
        out = run_batch(problem, alg, range(seeds), first_segment=first_segment, compiled_cache=cache)
    final = cumulative_regret(out.regret, agents="mean")[:, -1]
    return out, mem.peak_delta, float(np.mean(final))


def skip_reason(seeds: int, last: dict | None, model_state: float, budget: float, available: float):
    """Why S = `seeds` is not run (None: run it). `last`: the largest S measured so far."""
    need_model = 2.0 * model_state * seeds  # the scan's carry in and out
    need = need_model
    if last is not None:
        factor = seeds / last["seeds"]
        est = last["run_seconds"] * factor
        if est > budget:
            return (f"skipped: est. run {est:.0f} s > budget {budget:.0f} s "
                    f"(x{factor:g} of S={last['seeds']})")
        if last["seeds"] >= MIN_MEMORY_SEEDS:  # below, the fixed cost (compiling, buffers) dominates its peak
            need = max(need, last["peak_bytes"] * factor)
    if available and need > MEMORY_SAFETY * available:
        return (f"skipped: est. memory {need / MB:.0f} MB > {MEMORY_SAFETY:.0%} of "
                f"{available / MB:.0f} MB available")
    return None


def bench_case(case, args, ceilings: dict) -> dict:
    problem = case.problem()
    alg = case.build()
    spec = problem.spec
    segs = case.segments(alg, problem)
    work_per_run = case.work(alg, problem, case.first_segment)  # per agent-run
    ceiling = ceilings["memory_bandwidth" if case.ceiling == "bandwidth" else "matmul_flops"]
    unit = "B/s" if case.ceiling == "bandwidth" else "flop/s"

    log(f"[{case.name}] NumPy loop: {case.numpy_seeds} seed(s) x T = {spec.horizon} ...")
    with harness.BlasThreads(args.numpy_threads) as blas:
        loop = numpy_loop.time_loop(case.numpy_agent(), case.problem_name, range(case.numpy_seeds),
                                    spec.num_agents, spec.num_arms, spec.dim, spec.horizon)
    log(f"[{case.name}] NumPy: {loop.seconds:.2f} s, {loop.rate:.1f} agent-steps/s "
        f"({blas.threads or 'default'} BLAS thread(s))")

    model_state = configs.state_bytes(case, alg, problem)
    compiled = {}  # per S; the capacity comparison reuses the doubling executables of its S
    rows, last = [], None
    for S in args.seed_counts:
        row = dict(algorithm=case.name, seeds=S, horizon=spec.horizon, num_agents=spec.num_agents,
                   numpy_agent_steps_per_second=loop.rate, ceiling=case.ceiling)
        reason = skip_reason(S, last, model_state, args.budget_seconds, harness.available_memory())
        if reason:
            harness.skip_row(rows, row, f"[{case.name}] S = {S}", reason)
            continue
        log(f"[{case.name}] S = {S}: run_batch ...")
        compiled[S] = {}
        out, peak, final = jax_run(case, problem, alg, S, case.first_segment, compiled[S])
        agent_steps = S * spec.num_agents * spec.horizon
        rate = agent_steps / out.run_seconds
        work_rate = work_per_run * S * spec.num_agents / out.run_seconds
        row.update(
            skipped=False,
            compile_seconds=out.compile_seconds,
            run_seconds=out.run_seconds,
            agent_steps_per_second=rate,
            ratio=rate / loop.rate,
            peak_mb=peak / MB,
            work_per_second=work_rate,
            ceiling_fraction=work_rate / ceiling,
            final_regret_mean=final,
            note=f"{harness.si(work_rate)}{unit}" + ("" if np.isfinite(final) else "; NON-FINITE REGRET"),
        )
        log(f"[{case.name}] S = {S}: compile {out.compile_seconds:.1f} s, run {out.run_seconds:.2f} s, "
            f"{rate:.0f} agent-steps/s, x{row['ratio']:.1f} NumPy, {row['ceiling_fraction']:.1%} of ceiling")
        rows.append(row)
        last = dict(seeds=S, run_seconds=out.run_seconds, peak_bytes=float(peak))

    result = dict(
        algorithm=case.name, problem=case.problem_name, settings=case.settings,
        spec=spec._asdict(), first_segment=case.first_segment,
        segments=[list(s) for s in segs], ceiling=case.ceiling, model=case.model,
        work_per_agent_run=work_per_run,
        numpy=dict(seeds=loop.seeds, agent_steps=loop.agent_steps, seconds=loop.seconds,
                   agent_steps_per_second=loop.rate, blas_threads=blas.threads),
        rows=rows,
    )
    if case.name == "KernelUCB":
        result["capacity"] = capacity_comparison(case, problem, alg, args, last, compiled, rows)
    return result


def capacity_comparison(case, problem, alg, args, last, compiled, rows, seeds=None, doubling=None) -> dict:
    """Fixed T x T buffer (first_segment = T) against the default doubling segments, same S.

    Both are timed back to back here (the doubling executables are reused when a row of the same
    S compiled them, so its compile seconds are then those of that row), unless the caller has
    already measured the doubling run at this S and passes its RunOutput as `doubling`. S =
    `seeds`, default --capacity-seeds. model_ratio = case.work at first_segment T / at the
    doubling first segment.
    """
    S, T = (args.capacity_seeds if seeds is None else seeds), problem.spec.horizon
    model_ratio = case.work(alg, problem, T) / case.work(alg, problem, case.first_segment)
    info = dict(seeds=S, first_segment_doubling=case.first_segment, first_segment_fixed=T,
                model_bytes_ratio=model_ratio, model_ratio=model_ratio)
    if last is not None:
        est = last["run_seconds"] * S / last["seeds"] * (1 + model_ratio)
        if est > args.budget_seconds:
            info.update(skipped=True, note=f"skipped: est. {est:.0f} s > budget {args.budget_seconds:.0f} s")
            log(f"[{case.name}] capacity comparison {info['note']}")
            return info
    log(f"[{case.name}] capacity comparison at S = {S}: doubling, then fixed {T} x {T} ...")
    reuse = compiled.get(S)
    if doubling is None:
        doubling, _, _ = jax_run(case, problem, alg, S, case.first_segment, reuse)
    fixed, _, _ = jax_run(case, problem, alg, S, T)
    if reuse:
        row = next((r for r in rows if r["seeds"] == S and not r["skipped"]), None)
        doubling = doubling._replace(compile_seconds=row["compile_seconds"]) if row else doubling
    info.update(
        skipped=False,
        doubling_compile_seconds=doubling.compile_seconds, doubling_run_seconds=doubling.run_seconds,
        fixed_compile_seconds=fixed.compile_seconds, fixed_run_seconds=fixed.run_seconds,
        ratio=fixed.run_seconds / doubling.run_seconds,
    )
    log(f"[{case.name}] fixed / doubling run time = {info['ratio']:.2f} (model {model_ratio:.2f})")
    return info


# ------------------------------------------------------------------------------------------ report
def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def table(results: list) -> str:
    head = ("algorithm", "S", "compile s", "run s", "agent-steps/s", "NumPy a-s/s", "ratio", "peak MB",
            "ceiling frac", "note")
    lines = []
    for res in results:
        for r in res["rows"]:
            lines.append((
                r["algorithm"], str(r["seeds"]), _fmt(r.get("compile_seconds"), ".1f"),
                _fmt(r.get("run_seconds"), ".2f"), _fmt(r.get("agent_steps_per_second"), ".4g"),
                _fmt(r["numpy_agent_steps_per_second"], ".4g"), _fmt(r.get("ratio"), ".1f"),
                _fmt(r.get("peak_mb"), ".0f"),
                "-" if r.get("ceiling_fraction") is None else f"{r['ceiling_fraction']:.2%}",
                r.get("note", ""),
            ))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt_line = lambda cells: "  ".join(c.rjust(w) if 0 < i < len(head) - 1 else c.ljust(w)
                                       for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    out = [fmt_line(head), fmt_line(["-" * w for w in widths])]
    out += [fmt_line(line) for line in lines]
    return "\n".join(out)


def targets(results: list) -> list:
    """The project's throughput targets, evaluated on the measured rows (reported, not asserted)."""
    by_name = {res["algorithm"]: res for res in results}
    measured = lambda name: [r for r in by_name[name]["rows"] if not r["skipped"]] if name in by_name else []
    at = lambda name, S: next((r for r in measured(name) if r["seeds"] == S), None)
    best = lambda name, key: max(measured(name), key=lambda r: r[key], default=None)
    out = []

    r = at("LinUCB", 100)
    out.append(dict(target="LinUCB at S = 100 >= 50x NumPy", value=r and r["ratio"], met=bool(r and r["ratio"] >= 50),
                    detail=f"x{r['ratio']:.1f}" if r else "not measured"))
    r1, r1000 = at("LinUCB", 1), at("LinUCB", 1000)
    growth = r1000["agent_steps_per_second"] / r1["agent_steps_per_second"] if r1 and r1000 else None
    out.append(dict(target="LinUCB S = 1000 >= 10x agent-steps/s of S = 1", value=growth,
                    met=bool(growth and growth >= 10), detail=f"x{growth:.1f}" if growth else "not measured"))
    r = best("NeuralUCB", "ratio")
    out.append(dict(target="NeuralUCB >= 10x NumPy (best S)", value=r and r["ratio"], met=bool(r and r["ratio"] >= 10),
                    detail=f"x{r['ratio']:.1f} at S = {r['seeds']}" if r else "not measured"))
    r = best("KernelUCB", "ratio")
    horizon = by_name["KernelUCB"]["spec"]["horizon"] if "KernelUCB" in by_name else None
    out.append(dict(target=f"KernelUCB (T = {horizon}) >= 30x NumPy (best S)", value=r and r["ratio"],
                    met=bool(r and r["ratio"] >= 30), detail=f"x{r['ratio']:.1f} at S = {r['seeds']}" if r else "not measured"))
    r = best("KernelUCB", "ceiling_fraction")
    out.append(dict(target=f"KernelUCB (T = {horizon}) >= 50% of memory bandwidth (best S)",
                    value=r and r["ceiling_fraction"], met=bool(r and r["ceiling_fraction"] >= 0.5),
                    detail=f"{r['ceiling_fraction']:.1%} at S = {r['seeds']}" if r else "not measured"))
    r = at("FN-UCB", 100)
    spec = by_name["FN-UCB"]["spec"] if "FN-UCB" in by_name else {}
    out.append(dict(target=f"FN-UCB (T = {spec.get('horizon')}, N = {spec.get('num_agents')}) at S = 100 >= 20x NumPy",
                    value=r and r["ratio"], met=bool(r and r["ratio"] >= 20),
                    detail=f"x{r['ratio']:.1f}" if r else "not measured"))
    return [g for g in out if g["target"].split()[0] in by_name]


def measure_ceilings(quick: bool) -> dict:
    with harness.device_turn():
        if quick:
            return dict(memory_bandwidth=harness.memory_bandwidth(64, 3),
                        matmul_flops=harness.matmul_flops(512, repeats=3))
        return dict(memory_bandwidth=harness.memory_bandwidth(), matmul_flops=harness.matmul_flops())


def _rescale(results: list, key: str, factor: float) -> None:
    kind = "bandwidth" if key == "memory_bandwidth" else "flops"
    for res in results:
        if res["ceiling"] == kind:
            for row in res["rows"]:
                if row.get("ceiling_fraction") is not None:
                    row["ceiling_fraction"] *= factor


def environment() -> dict:
    return dict(
        python=platform.python_version(), jax=jax.__version__, numpy=np.__version__,
        platform=platform.platform(), cpu_count=os.cpu_count(),
        devices=[str(d) for d in jax.devices()], time=time.strftime("%Y-%m-%d %H:%M:%S"),
    )


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cpu_guard()
    if argv[:1] == ["--"]:  # `bandits-jax bench -- --quick ...` passes the separator along
        argv = argv[1:]
    args = parse_args(argv)
    cases = selected_cases(args)
    out_path = Path(args.out) if args.out else DEFAULT_OUT
    if out_path.suffix != ".json":
        out_path = out_path / "bench.json"

    if harness.share_device():
        log(f"taking turns on the device with other bench processes ({harness.LOCK_ENV}={os.environ[harness.LOCK_ENV]})")
    log("measuring machine ceilings ...")
    ceilings = measure_ceilings(args.quick)
    log(f"copy bandwidth {harness.si(ceilings['memory_bandwidth'])}B/s, "
        f"float64 matmul {harness.si(ceilings['matmul_flops'])}flop/s")

    t_start = time.perf_counter()
    results = [bench_case(case, args, ceilings) for case in cases]
    async_section = async_bench.run_section(args, skip_reason, capacity_comparison)
    duets_section = duets_bench.run_section(args, skip_reason)
    cope_section = cope_bench.run_section(args, skip_reason)
    coop_section = coop_bench.run_section(args, skip_reason)
    scale_section = scale.run_section(args, ceilings, skip_reason)
    precision_section = precision.run_section(args)
    total = time.perf_counter() - t_start
    # a ceiling is the best the machine did: measured again at the end, the larger value counts
    # (the fractions of the rows are rescaled to it)
    again = measure_ceilings(args.quick)
    for key in ceilings:
        if again[key] > ceilings[key]:
            _rescale(results, key, ceilings[key] / again[key])
            ceilings[key] = again[key]
    scale.apply_ceilings(scale_section, ceilings)
    goals = targets(results)
    cost_rows = step_cost.run_section(args, ceilings, log)  # estimates against the final ceilings

    lines = [harness.machine_line(os.cpu_count(), [str(d) for d in jax.devices()], ceilings["memory_bandwidth"],
                                  ceilings["matmul_flops"])]
    if results:
        lines.append("work models (ceiling fraction = model work per second / ceiling; see bench/configs.py):")
    for res in results:
        spec = res["spec"]
        lines.append(f"  {res['algorithm']:<10} N={spec['num_agents']} K={spec['num_arms']} d={spec['dim']} "
                     f"T={spec['horizon']}, segments {[tuple(s) for s in res['segments']]}; vs "
                     f"{'memory bandwidth' if res['ceiling'] == 'bandwidth' else 'float64 matmul flop/s'}: {res['model']}")
        lines.append(f"  {'':<10} NumPy loop: {res['numpy']['seeds']} seed(s) in {res['numpy']['seconds']:.2f} s")
    lines += ["", table(results), ""] if results else [""]
    for res in results:
        cap = res.get("capacity")
        if cap:
            if cap.get("skipped"):
                lines.append(f"{res['algorithm']} fixed T x T buffer vs doubling segments at S = {cap['seeds']}: {cap['note']}")
            else:
                lines.append(
                    f"{res['algorithm']} fixed T x T buffer vs doubling segments at S = {cap['seeds']}: run "
                    f"{cap['fixed_run_seconds']:.2f} s vs {cap['doubling_run_seconds']:.2f} s = x{cap['ratio']:.2f} "
                    f"(byte model x{cap['model_bytes_ratio']:.2f}); compile {cap['fixed_compile_seconds']:.1f} s vs "
                    f"{cap['doubling_compile_seconds']:.1f} s")
    if async_section:
        lines += ["", async_bench.table(async_section), ""]
    if duets_section:
        lines += ["", duets_bench.table(duets_section), ""]
    if cope_section:
        lines += ["", cope_bench.table(cope_section), ""]
    if coop_section:
        lines += ["", coop_bench.table(coop_section), ""]
    if cost_rows:
        lines += ["", step_cost.table(cost_rows), ""]
    if scale_section:
        lines += ["", scale.table(scale_section), ""]
    if precision_section:
        lines += ["", precision.table(precision_section), ""]
    lines.append("targets (measured, not asserted):")
    for g in goals:
        status = "n/a" if g["value"] is None else ("met" if g["met"] else "NOT met")
        lines.append(f"  [{status}] {g['target']}: {g['detail']}")
    lines.append(f"total {total:.0f} s")
    report = "\n".join(lines)
    print(report, flush=True)

    out_path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(quick=args.quick, seed_counts=args.seed_counts, budget_seconds=args.budget_seconds,
                   ceilings=dict(memory_bandwidth_bytes_per_second=ceilings["memory_bandwidth"],
                                 matmul_float64_flops_per_second=ceilings["matmul_flops"]),
                   environment=environment(), results=results, targets=goals, total_seconds=total,
                   async_section=async_section, duets_section=duets_section, cope_section=cope_section,
                   coop_section=coop_section, scale_section=scale_section, precision_section=precision_section,
                   step_cost=cost_rows, h100_peaks=step_cost.H100,
                   table=report)
    out_path.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    log(f"wrote {out_path}")
    return 0


def _json_default(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


if __name__ == "__main__":
    sys.exit(main())
