"""The asynchronous section of `python -m bench`: Async-KernelUCB, Approx-DisKernelUCB, OneKernelUCB.

Configuration: the experiment `async/synthetic-f1` (bandits_jax.experiments.async_exps) at its
"paper" size and default hyper-parameters, built by the experiment itself (its `build`): N = 100
clients, one active per step (uniform arrivals), K = 20 fresh arms in the d = 20 unit ball,
f1(x) = cos(3 <x, theta*>), Gaussian kernel, T = 10^4, the runner's first segment 256. The
communication thresholds follow the experiment's default rules for the FULL horizon T, and the
same algorithm objects (hence the same thresholds) are used for every horizon below.

Each row (algorithm, S) reports:
    - one `run_batch` call over S seeds at the full horizon T: compile seconds, run seconds per
      run (= run seconds / S), the resident-memory peak growth (harness.PeakMemory) and the final
      cumulative regret summed over clients (the paper's R_T), mean over seeds;
    - the plain NumPy reference loop (reference: async_kernel_np, approx_glb_np,
      dis_kernel_np) of the same configuration, which recomputes everything from lists at every
      step and would take hours at T = 10^4, so it runs on a PREFIX of the horizon,
      T_np = --async-numpy-horizon steps of seed 0, fed the environment arrays of that seed as
      the runner draws them (same keys; tie noise and RLS uniforms drawn by NumPy). Only the
      reference call is timed, with --numpy-threads BLAS threads;
    - the JAX runner on the same prefix (a problem of horizon T_np, same algorithm objects, same
      S; when T_np = T the full-horizon run itself): its run seconds per run, and ratio = (NumPy seconds per run on the prefix) / (JAX run
      seconds per run on the prefix). The ratio is for T_np only; the cost per step of all three
      algorithms grows with t, so it says nothing exact about T.

The same references serve the scale section (SCALE_REFERENCES, bench/numpy_loop.py): for every
registered algorithm of this family (LOOPS: the three above, DisKernelUCB, NKernelUCB, FedGLB-UCB,
DisLinUCB, FedLinUCB), one seed of the loop at the scale run's own configuration and hyper-parameters.

The prefix run comes first; a full-horizon run whose estimate (prefix run seconds x the ratio of
the rough model "sum over segments of steps x C^2") exceeds --budget-seconds is skipped, with the
prefix columns and the ratio still reported.

The two Nyström methods size their dictionaries by demand (bandits_jax.core, `Algorithm.demand`).
Their sizing comparison times, at S = 1 and T = --async-sizing-horizon, the default against
dictionaries sized by time (rows min(t_end, capacity), what the runner did before), and checks
that the regret curves agree.

OneKernelUCB's pooled inverse factor is, by default, stored as row panels whose dead part is
skipped (a step at time t costs ~t^2 / 2; model units sum_t t^2). Its storage comparison times,
at --async-capacity-seeds seeds and T, the dense storage grown by the runner's doubling capacity
segments (model sum over segments of steps x C^2), and the dense storage in one fixed buffer of
the final capacity (first_segment = T, model T x T^2; bench.__main__.capacity_comparison). When
the fixed run would exceed --budget-seconds at T, it is measured at the largest T' = T / 2^k
that fits, and its run time at T is extrapolated by the model ((T / T')^3); the table says so.
"""
from __future__ import annotations

import dataclasses
import inspect
import time

import numpy as np

from bandits_jax import runner
from bandits_jax.experiments.registry import build_runs, resolve_config
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.reporting.results import cumulative_regret
from bandits_jax.runner import run_batch

from . import harness
from .harness import log
from .numpy_loop import Prepared, agent_regret, clocked, environment_arrays, timed_reference
from reference import approx_glb_np, async_kernel_np, dis_kernel_np

EXPERIMENT = "async/synthetic-f1"
NAMES = ("Async-KernelUCB", "Approx-DisKernelUCB", "OneKernelUCB")
GROUP = "async"  # --only async selects the whole section

FULL_HORIZON = 10000
FULL_AGENTS = 100
FULL_NUMPY_HORIZON = 500  # NumPy loops at N = 100: T_np = 300 took 16 + 5 + 2 s; T_np = 1000: 86 s (One), 128 s (Approx), > 210 s (Async)
FULL_SEEDS = (1,)
FULL_CAPACITY_SEEDS = 1
FULL_SIZING_HORIZON = 1000  # time-sized dictionaries reach 512 rows from t = 512 on; at N = 100, T = 1000 ~90 points are in use
QUICK = dict(horizon=50, num_agents=4, numpy_horizon=50, first_segment=25)  # two doubling segments
QUICK_SEEDS = (1,)
MB = float(1 << 20)

LOOPS = {  # registered name: its NumPy reference loop (also the scale section's, SCALE_REFERENCES)
    "async_kernel_ucb": async_kernel_np.async_kernel_ucb_np,
    "approx_dis_kernel_ucb": approx_glb_np.approx_dis_kernel_ucb_np,
    "dis_kernel_ucb": dis_kernel_np.dis_kernel_ucb_np,
    "one_kernel_ucb": dis_kernel_np.one_kernel_ucb_np,
    "n_kernel_ucb": dis_kernel_np.n_kernel_ucb_np,
    "fed_glb_ucb": approx_glb_np.fed_glb_ucb_np,
    "dis_lin_ucb": dis_kernel_np.dis_lin_ucb_np,
    "fed_lin_ucb": dis_kernel_np.fed_lin_ucb_np,
}
REFERENCES = {"Async-KernelUCB": "async_kernel_ucb", "Approx-DisKernelUCB": "approx_dis_kernel_ucb",
              "OneKernelUCB": "one_kernel_ucb"}  # section row: registered name


# ------------------------------------------------------------------------------------ configuration
def config(args) -> dict:
    """The experiment's configuration at the section's size (quick: the experiment's smoke capacities)."""
    exp = get_experiment(EXPERIMENT)
    if args.quick:
        cfg = resolve_config(exp, "smoke", {})
        cfg.update(horizon=QUICK["horizon"], num_agents=QUICK["num_agents"], first_segment=QUICK["first_segment"])
    else:
        cfg = resolve_config(exp, "paper", {})
        cfg.update(num_agents=FULL_AGENTS, horizon=FULL_HORIZON)
    if args.async_horizon is not None:
        cfg["horizon"] = args.async_horizon
    if args.async_agents is not None:
        cfg["num_agents"] = args.async_agents
    return cfg


def numpy_horizon(args, horizon: int) -> int:
    raw = args.async_numpy_horizon
    if raw is None:
        raw = QUICK["numpy_horizon"] if args.quick else FULL_NUMPY_HORIZON
    return max(1, min(int(raw), horizon))


def build(cfg: dict):
    """(problem, {name: algorithm}) exactly as the experiment builds them (its resolved curves)."""
    runs = build_runs(get_experiment(EXPERIMENT), cfg)
    return runs[0][0], {alg.name: alg for _, alg, _ in runs}


@dataclasses.dataclass(frozen=True)
class CapacityCase:
    """What bench.__main__.capacity_comparison needs of a case."""

    name: str
    first_segment: int

    def work(self, alg, problem, first) -> float:
        """Model units per run: sum over the runner's segments of steps x C^2 (the C x C pooled factor)."""
        return float(sum((t1 - t0) * float(cap) ** 2 for t0, t1, cap in runner.segments(alg, problem.spec, first)))


# ------------------------------------------------------------------------------------ NumPy prefix
def prepare_reference(name: str, problem, params: dict, options: dict, seed: int, horizon: int = None) -> Prepared:
    """Registered algorithm `name`'s NumPy reference (LOOPS) on the first `horizon` steps (default:
    all) of seed `seed`, fed that seed's environment as the runner draws it (`environment_arrays`:
    the acting client's A_t, shared by every client as a view [T, N, K, d]) with tie noise [T, N, K]
    and RLS uniforms [T, T] from default_rng(seed). The reference gets the entries of `params` and
    `options` that its signature names (e.g. trigger_count, max_iters)."""
    ctx, means, rew, arrivals = environment_arrays(problem, seed, horizon)
    N = problem.spec.num_agents
    T, K, d = ctx.shape
    rng = np.random.default_rng(seed)
    contexts = np.broadcast_to(ctx[:, None], (T, N, K, d))  # the same A_t for every client (a view)
    rewards = np.broadcast_to(rew[:, None], (T, N, K))
    tie_noise = np.broadcast_to(rng.uniform(size=(T, 1, K)), (T, N, K))
    ref = LOOPS[name]
    accepted = inspect.signature(ref).parameters
    kw = {k: v for k, v in options.items() if k in accepted}
    kw.update({k: float(v) for k, v in params.items() if k in accepted})
    call = (arrivals, contexts, rewards, tie_noise)
    if "rls_uniform" in accepted:  # the loops that sample a dictionary (RLS)
        call += (rng.uniform(size=(T, T)),)  # RLS draws of up to T buffered / pooled points a step
    return Prepared(lambda: ref(*call, **kw), lambda out: agent_regret(means, np.asarray(out["actions"])))


def numpy_prefix(name: str, alg, problem, horizon: int, threads) -> dict:
    """The NumPy reference of section row `name` on the first `horizon` steps of seed 0: seconds, regret."""
    ready = prepare_reference(REFERENCES[name], problem, alg.defaults, {}, 0, horizon)
    accepted = inspect.signature(LOOPS[REFERENCES[name]]).parameters
    hp = {k: float(v) for k, v in alg.defaults.items() if k in accepted}
    with harness.BlasThreads(threads) as blas:
        out = clocked(ready)
    return dict(horizon=horizon, seconds=out["seconds"], regret=out["loss"], blas_threads=blas.threads, hparams=hp)


def _scale_prepare(name: str):
    """The scale adapter's prepare of registered `name` (the kernel references use the rbf kernel)."""

    def prepare(run, params, cfg, seed):
        kernel = run.curve.algorithm.options.get("kernel", "rbf")
        if kernel != "rbf":
            raise ValueError(f"{run.curve.name}: the NumPy reference of {name} has the rbf kernel only, not {kernel!r}")
        return prepare_reference(name, run.problem, params, run.curve.algorithm.options, seed)

    return prepare


SCALE_REFERENCES = {name: timed_reference(_scale_prepare(name)) for name in LOOPS}


# ------------------------------------------------------------------------------------ JAX runs
def jax_batch(problem, alg, seeds: int, first_segment: int, cache=None):
    with harness.PeakMemory() as mem:
        out = run_batch(problem, alg, range(seeds), first_segment=first_segment, compiled_cache=cache)
    final = cumulative_regret(out.regret, agents="sum")[:, -1]
    return out, mem.peak_delta, float(np.mean(final))


def overflow_note(alg, out) -> str:
    """'' when no run of `out` carries error bits, else "OVERFLOW: " and the algorithm's messages."""
    bits = int(np.bitwise_or.reduce(out.errors))
    return f"OVERFLOW: {runner.describe_errors(alg, bits)}" if bits else ""


def bench_algorithm(name, alg, problem, prefix_problem, cfg, args, seed_counts, skip_reason,
                    capacity_comparison) -> dict:
    """skip_reason, capacity_comparison: those of bench.__main__ (passed in: `python -m bench` runs
    that module as __main__, so importing it here would load it a second time)."""
    spec, fs = problem.spec, cfg["first_segment"]
    T, Tp = spec.horizon, prefix_problem.spec.horizon
    log(f"[{name}] NumPy reference loop: 1 seed x T_np = {Tp} (N = {spec.num_agents}) ...")
    try:
        ref = numpy_prefix(name, alg, prefix_problem, Tp, args.numpy_threads)
    except Exception as err:  # noqa: BLE001 (report, do not lose the other rows)
        ref = dict(horizon=Tp, error=f"{type(err).__name__}: {err}")
        log(f"[{name}] NumPy reference FAILED: {ref['error']}")
    else:
        log(f"[{name}] NumPy: {ref['seconds']:.2f} s on T_np = {Tp}, regret {ref['regret']:.2f}")

    rows, last, compiled = [], None, {}
    for S in seed_counts:
        row = dict(algorithm=name, seeds=S, horizon=T, num_agents=spec.num_agents, numpy_horizon=Tp,
                   numpy_seconds_per_run=ref.get("seconds"), numpy_regret=ref.get("regret"))
        reason = skip_reason(S, last, 0.0, args.budget_seconds, harness.available_memory())
        if reason:
            harness.skip_row(rows, row, f"[{name}] S = {S}", reason)
            continue
        try:
            if Tp < T:
                log(f"[{name}] S = {S}: run_batch on the prefix T_np = {Tp} ...")
                pout, _, pfinal = jax_batch(prefix_problem, alg, S, fs)
                est = pout.run_seconds * step_model(alg, problem, fs) / step_model(alg, prefix_problem, fs)
                row.update(prefix_compile_seconds=pout.compile_seconds, prefix_run_seconds=pout.run_seconds,
                           prefix_run_seconds_per_run=pout.run_seconds / S, prefix_regret_mean=pfinal,
                           estimated_run_seconds=est)
                if ref.get("seconds") is not None:
                    row["ratio"] = ref["seconds"] / row["prefix_run_seconds_per_run"]
                if est > args.budget_seconds:
                    note = (f"full T={T} run skipped: est. {est:.0f} s > budget {args.budget_seconds:.0f} s "
                            f"(prefix run x model sum steps x C^2)")
                    harness.skip_row(rows, row, f"[{name}] S = {S}", note)
                    continue
            log(f"[{name}] S = {S}: run_batch at T = {T} ...")
            compiled[S] = {}
            out, peak, final = jax_batch(problem, alg, S, fs, compiled[S])
            log(f"[{name}] S = {S}: compile {out.compile_seconds:.1f} s, run {out.run_seconds:.2f} s")
            if Tp == T:  # the prefix is the whole horizon: the full run is the prefix run
                pout, pfinal = out, final
        except Exception as err:  # noqa: BLE001 (a failing algorithm is reported in its row; the others still run)
            note = f"FAILED: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            harness.skip_row(rows, row, f"[{name}] S = {S}", note)
            continue
        notes = [n for n in (overflow_note(alg, out), "" if np.isfinite(final) else "NON-FINITE REGRET") if n]
        row.update(
            skipped=False,
            compile_seconds=out.compile_seconds,
            run_seconds=out.run_seconds,
            run_seconds_per_run=out.run_seconds / S,
            peak_mb=peak / MB,
            final_regret_mean=final,
            prefix_compile_seconds=pout.compile_seconds,
            prefix_run_seconds=pout.run_seconds,
            prefix_run_seconds_per_run=pout.run_seconds / S,
            prefix_regret_mean=pfinal,
        )
        if ref.get("seconds") is not None:
            row["ratio"] = ref["seconds"] / row["prefix_run_seconds_per_run"]
        else:
            notes.append(f"NumPy reference failed: {ref['error']}")
        row["note"] = "; ".join(notes)
        log(f"[{name}] S = {S}: prefix run {pout.run_seconds:.3f} s"
            + (f", NumPy / JAX on T_np = {Tp}: x{row['ratio']:.1f}" if "ratio" in row else ""))
        rows.append(row)
        last = dict(seeds=S, run_seconds=out.run_seconds, peak_bytes=float(peak))

    result = dict(algorithm=name, problem=problem.name, spec=spec._asdict(), first_segment=fs,
                  numpy_horizon=Tp, segments=[list(s) for s in runner.segments(alg, problem.spec, fs)],
                  hparams={k: float(v) for k, v in alg.defaults.items()}, numpy=ref, rows=rows)
    if name == "OneKernelUCB":
        result["capacity"] = storage_section(alg, cfg, problem, args, last, capacity_comparison)
    if alg.sizing is not None and alg.sizing.demand is not None:
        result["sizing"] = sizing_section(alg, cfg, args)
    return result


# ------------------------------------------------------------------------------------ Nyström dictionary sizing
def sizing_section(alg, cfg: dict, args) -> dict:
    """Demand-sized dictionaries (the default) against time-sized ones (rows = min(t_end, capacity),
    `demand=None`), S = 1, on a problem of horizon --async-sizing-horizon: run seconds of each, the
    ratio, and the largest difference of their cumulative regret (the numbers must agree)."""
    Ts = sizing_horizon(args, cfg["horizon"])
    problem, _ = build({**cfg, "horizon": Ts})
    fs = min(cfg["first_segment"], Ts)
    log(f"[{alg.name}] dictionary sizing at T = {Ts}: by demand, then by time ...")
    out = {}
    by_time = alg._replace(sizing=alg.sizing._replace(demand=None))
    for label, variant in (("demand", alg), ("time", by_time)):
        o, _, final = jax_batch(problem, variant, 1, fs)
        out[label] = dict(run_seconds=o.run_seconds, compile_seconds=o.compile_seconds, final_regret=final,
                          curve=cumulative_regret(o.regret, agents="sum")[0])
    diff = float(np.max(np.abs(out["demand"].pop("curve") - out["time"].pop("curve"))))
    ratio = out["time"]["run_seconds"] / out["demand"]["run_seconds"]
    log(f"[{alg.name}] sizing: demand {out['demand']['run_seconds']:.2f} s, time {out['time']['run_seconds']:.2f} s "
        f"(x{ratio:.2f}), max regret difference {diff:.2e}")
    return dict(horizon=Ts, seeds=1, demand=out["demand"], time=out["time"], time_over_demand=ratio,
                max_regret_difference=diff)


def sizing_horizon(args, horizon: int) -> int:
    raw = getattr(args, "async_sizing_horizon", None)
    if raw is None:
        raw = QUICK["horizon"] if args.quick else FULL_SIZING_HORIZON
    return max(1, min(int(raw), horizon))


# ------------------------------------------------------------------------------------ OneKernelUCB storage
def dense_variant(cfg: dict, problem):
    """OneKernelUCB as the experiment builds it, with the dense segment-grown storage."""
    del problem
    return build({**cfg, "one_storage": "dense"})[1]["OneKernelUCB"]


def panel_work(problem) -> float:
    """Model units of the default (panel) storage: sum over steps of t^2 (the live triangle, twice)."""
    T = problem.spec.horizon
    return float(sum(float(t) ** 2 for t in range(1, T + 1)))


def storage_section(alg, cfg, problem, args, last, capacity_comparison) -> dict:
    """The default panel storage (the rows above) against the dense storage at S = --async-capacity-seeds:
    dense with the runner's doubling segments, measured at T, and dense in one fixed T x T buffer
    (capacity_section: measured at T, or at T' and extrapolated)."""
    S, T, fs = args.async_capacity_seeds, problem.spec.horizon, cfg["first_segment"]
    if last is None:
        return dict(seeds=S, skipped=True, note="skipped: no full-horizon panel run was measured")
    panels_T = last["run_seconds"] * S / last["seeds"]
    dense = dense_variant(cfg, problem)
    case = CapacityCase("OneKernelUCB (dense)", fs)
    est = panels_T * case.work(dense, problem, fs) / panel_work(problem)
    if est > args.budget_seconds:
        return dict(seeds=S, skipped=True, panels_run_seconds=panels_T,
                    note=f"skipped: dense doubling run est. {est:.0f} s > budget {args.budget_seconds:.0f} s")
    log(f"[OneKernelUCB] dense storage, doubling segments, S = {S} at T = {T} ...")
    out, peak, final = jax_batch(problem, dense, S, fs)
    log(f"[OneKernelUCB] dense doubling: run {out.run_seconds:.1f} s (panels {panels_T:.1f} s)")
    dense_last = dict(seeds=S, run_seconds=out.run_seconds, peak_bytes=float(peak))
    info = capacity_section(case, dense, cfg, problem, args, dense_last, {}, [], capacity_comparison, doubling=out)
    info.update(panels_run_seconds=panels_T, dense_doubling_run_seconds=out.run_seconds,
                dense_doubling_peak_mb=peak / MB, dense_doubling_regret_mean=final,
                panels_model_units=panel_work(problem), dense_doubling_model_units=case.work(dense, problem, fs),
                doubling_over_panels=out.run_seconds / panels_T)
    fixed = info.get("fixed_run_seconds_at_horizon_extrapolated")
    if fixed is None and not info.get("skipped"):
        fixed = info.get("fixed_run_seconds")
    if fixed is not None:
        info["fixed_over_panels"] = fixed / panels_T
    return info


def step_model(alg, problem, first: int) -> float:
    """Rough cost of a run for the skip estimate only. OneKernelUCB: sum of t^2 with its panels (a
    state of fixed capacity whose cost grows with the live rows), sum over segments of steps x C^2
    with the dense storage. The Nystrom methods: the number of steps (their per-step cost is set by
    the dictionary, not by the history; the segment model overestimated a paper-size
    Approx-DisKernelUCB run ~1000-fold and skipped it)."""
    if alg.name != "OneKernelUCB":
        return float(problem.spec.horizon)
    if alg.sizing is None:  # the panel storage: fixed capacity, cost grows with the live rows
        return panel_work(problem)
    return float(sum((t1 - t0) * float(cap or 1) ** 2 for t0, t1, cap in runner.segments(alg, problem.spec, first)))


def capacity_section(case, alg, cfg, problem, args, last, compiled, rows, capacity_comparison,
                     doubling=None) -> dict:
    """Doubling segments vs one fixed final-capacity buffer at T; at a shorter T' (extrapolated) if
    the fixed run would not fit in --budget-seconds. doubling: the doubling run at T if already
    measured (it is then not run again)."""
    S, T = args.async_capacity_seeds, problem.spec.horizon
    info = capacity_comparison(case, problem, alg, args, last, compiled, rows, seeds=S, doubling=doubling)
    info.update(horizon=T, measured_horizon=T, extrapolated=False)
    if not info.get("skipped"):
        return info
    # the fixed run at T does not fit: the largest T' = T / 2^k (>= 2 first segments) whose estimate does
    doubling_T = last["run_seconds"] * S / last["seeds"]  # measured doubling run at T, scaled to S
    work_T = case.work(alg, problem, case.first_segment)
    Tp = T // 2
    while Tp >= 2 * case.first_segment:
        short, _ = build({**cfg, "horizon": Tp})
        est_doubling = doubling_T * case.work(alg, short, case.first_segment) / work_T
        est = est_doubling * (1 + case.work(alg, short, Tp) / case.work(alg, short, case.first_segment))
        if est <= args.budget_seconds:
            break
        Tp //= 2
    else:
        info["note"] += f"; no horizon >= {2 * case.first_segment} fits either"
        return info
    log(f"[{case.name}] capacity comparison: fixed {T} x {T} would not fit ({info['note']}); "
        f"measuring at T' = {Tp} and extrapolating")
    at_T = dict(info)
    short_info = capacity_comparison(case, short, alg, args, None, {}, [], seeds=S)
    fixed_T = short_info["fixed_run_seconds"] * case.work(alg, problem, T) / case.work(alg, short, Tp)
    info = dict(short_info)
    info.update(
        horizon=T, measured_horizon=Tp, extrapolated=True, skipped=False,
        model_ratio_at_horizon=at_T["model_ratio"],
        doubling_run_seconds_at_horizon=doubling_T,
        fixed_run_seconds_at_horizon_extrapolated=fixed_T,
        ratio_at_horizon_extrapolated=fixed_T / doubling_T,
        note=(f"fixed {T} x {T} run skipped ({at_T['note'].removeprefix('skipped: ')}); ratio measured at "
              f"T' = {Tp}; fixed run time at T extrapolated from T' by the model x(T/T')^3 = "
              f"x{(T / Tp) ** 3:.0f}"),
    )
    return info


# ------------------------------------------------------------------------------------ section
def run_section(args, skip_reason, capacity_comparison) -> dict | None:
    names = harness.selected(args, NAMES)
    if not names:
        return None
    cfg = config(args)
    problem, algs = build(cfg)
    Tp = numpy_horizon(args, problem.spec.horizon)
    prefix_problem, _ = build({**cfg, "horizon": Tp})  # same environment, shorter; the algorithms of T
    seed_counts = args.seed_counts if args.seeds else list(QUICK_SEEDS if args.quick else FULL_SEEDS)
    t0 = time.perf_counter()
    results = [bench_algorithm(n, algs[n], problem, prefix_problem, cfg, args, seed_counts, skip_reason,
                               capacity_comparison) for n in names]
    return dict(experiment=EXPERIMENT, problem=problem.name, description=problem.description,
                spec=problem.spec._asdict(), first_segment=cfg["first_segment"], numpy_horizon=Tp,
                seed_counts=seed_counts, capacity_seeds=args.async_capacity_seeds,
                config={k: v for k, v in cfg.items() if isinstance(v, (int, float, str))},
                results=results, total_seconds=time.perf_counter() - t0)


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def table(section: dict) -> str:
    spec, Tp = section["spec"], section["numpy_horizon"]
    T = spec["horizon"]
    head = ("algorithm", "S", "compile s", f"run s/run T={T}", "peak MB", f"regret T={T}",
            f"JAX s/run T={Tp}", f"NumPy s/run T={Tp}", f"NumPy/JAX T={Tp}", "note")
    lines = []
    for res in section["results"]:
        for r in res["rows"]:
            lines.append((r["algorithm"], str(r["seeds"]), _fmt(r.get("compile_seconds"), ".1f"),
                          _fmt(r.get("run_seconds_per_run"), ".2f"), _fmt(r.get("peak_mb"), ".0f"),
                          _fmt(r.get("final_regret_mean"), ".1f"), _fmt(r.get("prefix_run_seconds_per_run"), ".3f"),
                          _fmt(r.get("numpy_seconds_per_run"), ".2f"), _fmt(r.get("ratio"), ".3g"),
                          r.get("note", "")))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt_line = lambda cells: "  ".join(c.rjust(w) if 0 < i < len(head) - 1 else c.ljust(w)
                                       for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    out = [
        f"asynchronous section: {section['experiment']} (N={spec['num_agents']} clients, one active a step, "
        f"K={spec['num_arms']}, d={spec['dim']}, T={T}, first segment {section['first_segment']}); "
        f"the NumPy reference loop and the ratio are on the PREFIX T_np={Tp} (seed 0), "
        f"ratio = NumPy s/run / JAX s/run on that prefix",
        fmt_line(head), fmt_line(["-" * w for w in widths]),
    ]
    out += [fmt_line(line) for line in lines]
    for res in section["results"]:
        ref = res["numpy"]
        if "error" not in ref:
            out.append(f"  {res['algorithm']}: NumPy regret on T_np={Tp} {ref['regret']:.1f} (seed 0; JAX prefix "
                       f"regret {_fmt(next((r['prefix_regret_mean'] for r in res['rows'] if 'prefix_regret_mean' in r), None), '.1f')}"
                       f"), segments {[tuple(s) for s in res['segments']]}")
        siz = res.get("sizing")
        if siz:
            out.append(
                f"{res['algorithm']} dictionary sizing, T={siz['horizon']}, S=1: by demand (default) "
                f"{siz['demand']['run_seconds']:.2f} s, by time (rows min(t_end, capacity)) {siz['time']['run_seconds']:.2f} s "
                f"= x{siz['time_over_demand']:.2f}; largest regret difference {siz['max_regret_difference']:.1e}")
        cap = res.get("capacity")
        if not cap:
            continue
        head = f"{res['algorithm']} storage at S = {cap['seeds']}"
        if cap.get("skipped"):
            out.append(f"{head}: {cap['note']}")
            continue
        out.append(
            f"{head}, T={cap['horizon']}: panels (default, ~t^2/2 a step) {cap['panels_run_seconds']:.1f} s; dense "
            f"doubling segments {cap['dense_doubling_run_seconds']:.1f} s = x{cap['doubling_over_panels']:.2f} of "
            f"panels (model x{cap['dense_doubling_model_units'] / cap['panels_model_units']:.2f})"
            + (f"; dense fixed T x T buffer x{cap['fixed_over_panels']:.1f} of panels" if "fixed_over_panels" in cap
               else ""))
        if cap.get("extrapolated"):
            out.append(
                f"  dense fixed vs doubling: at T'={cap['measured_horizon']}: run {cap['fixed_run_seconds']:.2f} s vs "
                f"{cap['doubling_run_seconds']:.2f} s = x{cap['ratio']:.2f} measured (model x{cap['model_ratio']:.2f}); "
                f"at T={cap['horizon']}: fixed {cap['fixed_run_seconds_at_horizon_extrapolated']:.3g} s EXTRAPOLATED vs "
                f"doubling {cap['doubling_run_seconds_at_horizon']:.2f} s measured = "
                f"x{cap['ratio_at_horizon_extrapolated']:.1f} (model x{cap['model_ratio_at_horizon']:.2f}). "
                f"{cap['note']}")
        else:
            out.append(
                f"  dense fixed vs doubling, T={cap['horizon']}: run {cap['fixed_run_seconds']:.2f} s vs "
                f"{cap['doubling_run_seconds']:.2f} s = x{cap['ratio']:.2f} measured (model sum steps x C^2: "
                f"x{cap['model_ratio']:.2f}); compile {cap['fixed_compile_seconds']:.1f} s vs "
                f"{cap['doubling_compile_seconds']:.1f} s")
    return "\n".join(out)
