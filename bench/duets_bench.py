"""The DUETS section of `python -m bench`: DUETS and DisKernelUCB (dis_kernel_ucb_duets) at the paper size.

Configuration: the experiment `duets/h1` (bandits_jax.experiments.duets) at its "paper" size, built by
the experiment itself: N = 10 agents acting at every step, M = 2000 candidates on the unit sphere of
R^10, SE kernel (lengthscale 1), lam = 0.2, T = 50, beta = 1. Each row (algorithm, S) reports one
`run_batch` call over S seeds (compile seconds, run seconds, resident-memory peak growth), its
agent-steps per second (N T S / run seconds) and runs per second (S / run seconds), and the ratio of
its agent-steps per second to the plain NumPy loop's (reference/duets_np.py, written from the
spec) on one seed of the same configuration, timed in the same process with --numpy-threads BLAS
threads. The last row per algorithm runs the beta grid of the experiment ({0.2, 0.5, 1, 2, 5}) times
S seeds in the same single call. A row whose run time or memory, extrapolated linearly from the last
row measured, would exceed --budget-seconds or the available memory is skipped with the reason in
the table (bench.__main__.skip_reason).

SCALE_REFERENCES (the scale section, bench/numpy_loop.py) time the same loops, and those of
DUETS-authors (duets_authors_np) and Approx-DisKernelUCB, on one seed of a scale run's configuration.
"""
from __future__ import annotations

import time

import numpy as np

from bandits_jax import runner
from bandits_jax.curves import resolve
from bandits_jax.experiments import duets as duets_exp
from bandits_jax.experiments.registry import build_curves, resolve_config
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.runner import run_batch

from . import harness
from .harness import log
from .numpy_loop import Prepared, clocked, environment_arrays, static_options, timed_reference
from reference import duets_authors_np, duets_np

EXPERIMENT = "duets/h1"
NAMES = ("DUETS", "DisKernelUCB-duets")
GROUP = "duets"
FULL_SEEDS = (1, 1000)
QUICK = dict(horizon=14, num_agents=3, num_candidates=200)
QUICK_SEEDS = (1, 4)


CURVES = {"DUETS": "DUETS", "DisKernelUCB-duets": "DisKernelUCB"}  # section row: the experiment's curve


def build(args):
    """(problem, {row name: resolved Run}, config) of duets/h1 at the paper (or quick) size, beta = 1."""
    exp = get_experiment(EXPERIMENT)
    cfg = resolve_config(exp, "paper", QUICK if args.quick else {})
    runs = {r.curve.name: r for r in resolve(build_curves(exp, cfg))}
    return runs["DUETS"].problem, {row: runs[curve] for row, curve in CURVES.items()}, cfg


def candidates_of(problem, seed: int):
    """(X [M, d], f [M]) float64: the candidate set and its values of seed `seed`'s instance."""
    with runner.precision_scope("float64"):
        pk, ak = runner.problem_and_algorithm_keys(runner.seed_key(seed))
        inst = problem.init(runner.init_keys(pk, ak)[0])
    return np.asarray(inst["X"], np.float64), np.asarray(inst["f"], np.float64)


def authors_draws(rng, T: int, N: int, T1: int) -> dict:
    """duets_authors_np's uniforms: u_query per started epoch [N, T_j] (the ceil schedule, nominal T_j)
    and u_keep per completed epoch [N T_j]."""
    nominal, _ = duets_authors_np.epoch_lengths_ceil(T, T1)
    return {"u_query": [rng.random((N, Tj)) for Tj in nominal],
            "u_keep": [rng.random(N * Tj) for Tj in nominal[:-1]]}


def prepare_reference(run, params: dict, cfg: dict, seed: int) -> Prepared:
    """One seed of the NumPy loop of the run's algorithm (LOOP_NAMES) at its configuration: the candidates
    of seed `seed`, its noise eps [T, N, M] = (rewards - f) / noise_std as the runner draws the rewards,
    and the loop's uniforms from default_rng(seed)."""
    name, problem = run.curve.algorithm.name, run.problem
    o = static_options(run)
    X, f = candidates_of(problem, seed)
    _, means, rewards, _ = environment_arrays(problem, seed, every_agent=True)
    noise_std = float(run.curve.problem.options.get("noise_std", cfg["noise_std"]))
    eps = (rewards - means) / noise_std if noise_std > 0 else np.zeros_like(rewards)
    T, N, M = eps.shape
    rng = np.random.default_rng(seed)
    common = dict(lam=params["lam"], lengthscale=params["lengthscale"], noise_std=noise_std)
    if name == "duets":
        dr = duets_np.draws(rng, T, N, M, o["first_epoch"])
        call = lambda: duets_np.duets_np(X, f, eps, dr["u_query"], dr["u_keep"], dr["u_empty"], T1=o["first_epoch"],
                                         p0=params["p0"], beta=params["beta"], **common)
    elif name == "duets_authors":
        dr = authors_draws(rng, T, N, o["first_epoch"])
        call = lambda: duets_authors_np.duets_authors_np(X, f, eps, dr["u_query"], dr["u_keep"], T1=o["first_epoch"],
                                                         p_log=params["p_log"], beta=params["beta"], **common)
    elif name == "dis_kernel_ucb_duets":
        u_first = rng.random(N)
        call = lambda: duets_np.dis_kernel_ucb_np(X, f, eps, u_first, beta=params["alpha"], D=params["threshold"],
                                                  **common)
    elif name == "approx_dis_kernel_ucb_duets":
        per_candidate = o["storage"] == "candidates"
        u_uniform, u_incl = rng.random((T, N)), rng.random((T, N, M if per_candidate else T))
        forced = None if o["forced_sync"] is None or o["forced_sync"] < 0 else int(o["forced_sync"])
        call = lambda: duets_np.approx_dis_kernel_ucb_np(
            X, f, eps, u_uniform, u_incl, beta=params["alpha"], D=params["threshold"], q_bar=params["q"],
            forced_first_sync=forced, per_candidate=per_candidate, **common)
    else:
        raise ValueError(f"{run.curve.name}: no NumPy DUETS-family loop for {name!r}")
    return Prepared(call, lambda out: float(out["regret"].sum()))


def numpy_reference(run, cfg: dict, threads) -> dict:
    """Seconds of one run of the NumPy loop of a section row (seed 0, the algorithm's defaults) and its regret."""
    params = {k: float(v) for k, v in run.algorithm.defaults.items()}
    ready = prepare_reference(run, params, cfg, 0)
    with harness.BlasThreads(threads):
        out = clocked(ready)
    N, T = run.problem.spec.num_agents, run.problem.spec.horizon
    return dict(seconds=out["seconds"], regret=out["loss"], agent_steps_per_second=N * T / out["seconds"])


SCALE_REFERENCES = {name: timed_reference(prepare_reference)
                    for name in ("duets", "duets_authors", "dis_kernel_ucb_duets", "approx_dis_kernel_ucb_duets")}


def jax_row(name, alg, problem, cfg, seeds: int, grid, numpy_rate) -> dict:
    """One run_batch call over `seeds` seeds (times the grid's points when grid)."""
    betas = duets_exp._betas(cfg) if grid else [None]
    key = "beta" if "beta" in alg.params else "alpha"
    params = None if not grid else {key: np.repeat(betas, seeds)}
    runs = seeds * len(betas)
    with harness.PeakMemory() as mem:
        out = run_batch(problem, alg, list(range(seeds)) * len(betas), params, precision="float64",
                        first_segment=cfg["first_segment"])
    N, T = problem.spec.num_agents, problem.spec.horizon
    rate = N * T * runs / max(out.run_seconds, 1e-12)
    return dict(algorithm=name, seeds=seeds, grid_points=len(betas), runs=runs, compile_seconds=out.compile_seconds,
                run_seconds=out.run_seconds, peak_mb=mem.peak_delta / float(1 << 20),
                agent_steps_per_second=rate, runs_per_second=runs / max(out.run_seconds, 1e-12),
                ratio=rate / numpy_rate, final_regret_mean=float(np.asarray(out.regret).sum(axis=(1, 2)).mean()))


def bench_algorithm(name, run, problem, cfg, args, seed_counts, skip_reason) -> dict:
    """The NumPy loop, then one row per S and the beta-grid row; `skip_reason` (bench.__main__'s rule:
    time over the budget, or memory over the available, both extrapolated from the last row measured,
    in runs) decides which rows are skipped."""
    log(f"[duets] {name}: NumPy reference loop ...")
    ref = numpy_reference(run, cfg, args.numpy_threads)
    rows, last = [], None
    for seeds, grid in [(s, False) for s in seed_counts] + [(seed_counts[-1], True)]:
        runs = seeds * (len(duets_exp._betas(cfg)) if grid else 1)
        row = dict(algorithm=name, seeds=seeds, grid_points=len(duets_exp._betas(cfg)) if grid else 1, runs=runs)
        if harness.skipped_by_budget(rows, row, f"[duets] {name} S={seeds}", runs, last, args.budget_seconds,
                                     skip_reason):
            continue
        log(f"[duets] {name}: {runs} runs in one call ...")
        last = jax_row(name, run.algorithm, problem, cfg, seeds, grid, ref["agent_steps_per_second"])
        rows.append(last)
    return dict(algorithm=name, numpy=ref, rows=rows)


def run_section(args, skip_reason) -> dict | None:
    names = harness.selected(args, NAMES)
    if not names:
        return None
    problem, runs, cfg = build(args)
    seed_counts = args.seed_counts if args.seeds else list(QUICK_SEEDS if args.quick else FULL_SEEDS)
    t0 = time.perf_counter()
    results = [bench_algorithm(n, runs[n], problem, cfg, args, seed_counts, skip_reason) for n in names]
    return dict(experiment=EXPERIMENT, spec=problem.spec._asdict(), seed_counts=seed_counts,
                results=results, total_seconds=time.perf_counter() - t0)


def table(section: dict) -> str:
    spec = section["spec"]
    head = ("algorithm", "runs", "compile s", "run s", "peak MB", "agent-steps/s", "runs/s", "x NumPy", "note")
    lines = harness.section_lines(
        section, lambda r: f"{r['seeds']}" + (f" x {r['grid_points']} beta" if r["grid_points"] > 1 else ""),
        lambda r: (f"{r['agent_steps_per_second']:.3g}", f"{r['runs_per_second']:.3g}", f"{r['ratio']:.3g}"))
    out = [f"DUETS section: {section['experiment']} (N={spec['num_agents']} agents every step, "
           f"M={spec['num_arms']} candidates, d={spec['dim']}, T={spec['horizon']}); x NumPy = JAX agent-steps/s "
           "over the NumPy loop's on one seed"] + harness.aligned(head, lines)
    for res in section["results"]:
        ref = res["numpy"]
        out.append(f"  {res['algorithm']}: NumPy loop {ref['seconds']:.2f} s a run, "
                   f"{ref['agent_steps_per_second']:.3g} agent-steps/s (regret {ref['regret']:.1f}, seed 0)")
    return "\n".join(out)
