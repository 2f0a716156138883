"""The DUETS section of `python -m bench`: DUETS and DisKernelUCB (dis_kernel_ucb_duets) at the paper size.

Configuration: the experiment `duets/h1` (bandits_jax.experiments.duets) at its "paper" size, built by
the experiment itself: N = 10 agents acting at every step, M = 2000 candidates on the unit sphere of
R^10, SE kernel (lengthscale 1), lam = 0.2, T = 50, beta = 1. Each row (algorithm, S) reports one
`run_batch` call over S seeds (compile seconds, run seconds, resident-memory peak growth), its
agent-steps per second (N T S / run seconds) and runs per second (S / run seconds), and the ratio of
its agent-steps per second to the plain NumPy loop's (bench/reference/duets_np.py, written from the
spec) on one seed of the same configuration, timed in the same process with --numpy-threads BLAS
threads. The last row per algorithm runs the beta grid of the experiment ({0.2, 0.5, 1, 2, 5}) times
S seeds in the same single call. A row whose run time or memory, extrapolated linearly from the last
row measured, would exceed --budget-seconds or the available memory is skipped with the reason in
the table (bench.__main__.skip_reason).
"""
from __future__ import annotations

import time

import jax
import numpy as np

from bandits_jax.experiments import duets as duets_exp
from bandits_jax.experiments.registry import build_runs, resolve_config
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.problems.candidates import FUNCTIONS
from bandits_jax.runner import run_batch

from . import harness
from .harness import log
from .reference import duets_np

EXPERIMENT = "duets/h1"
NAMES = ("DUETS", "DisKernelUCB-duets")
GROUP = "duets"
FULL_SEEDS = (1, 1000)
QUICK = dict(horizon=14, num_agents=3, num_candidates=200)
QUICK_SEEDS = (1, 4)


def build(args):
    """(problem, {row name: algorithm}, config) of duets/h1 at the paper (or quick) size, beta = 1."""
    exp = get_experiment(EXPERIMENT)
    cfg = resolve_config(exp, "paper", QUICK if args.quick else {})
    runs = build_runs(exp, cfg)
    problem = runs[0][0]
    algs = {a.name: a for _, a, _ in runs}
    return problem, {"DUETS": algs["DUETS"], "DisKernelUCB-duets": algs["DisKernelUCB"]}, cfg


def numpy_reference(name: str, problem, cfg, threads) -> dict:
    """Seconds of one run of the NumPy loop on the same candidates (its own draws) and its regret."""
    inst = problem.init(jax.random.PRNGKey(0))
    X, f = np.asarray(inst["X"], np.float64), np.asarray(inst["f"], np.float64)
    T, N, M = cfg["horizon"], cfg["num_agents"], X.shape[0]
    ls = FUNCTIONS["h1"][3]
    rng = np.random.default_rng(0)
    draws = duets_np.draws(rng, T, N, M, cfg["first_epoch"])
    common = dict(beta=1.0, lam=cfg["lam"], lengthscale=ls, noise_std=cfg["noise_std"])
    with harness.BlasThreads(threads):
        start = time.perf_counter()
        if name == "DUETS":
            out = duets_np.duets_np(X, f, draws["eps"], draws["u_query"], draws["u_keep"], draws["u_empty"],
                                    T1=cfg["first_epoch"], p0=cfg["p0"], **common)
        else:
            out = duets_np.dis_kernel_ucb_np(X, f, draws["eps"], draws["u_first"], D=cfg["dis_D"], **common)
        seconds = time.perf_counter() - start
    return dict(seconds=seconds, regret=float(out["regret"].sum()), agent_steps_per_second=N * T / seconds)


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


def bench_algorithm(name, alg, problem, cfg, args, seed_counts, skip_reason) -> dict:
    """The NumPy loop, then one row per S and the beta-grid row; `skip_reason` (bench.__main__'s rule:
    time over the budget, or memory over the available, both extrapolated from the last row measured,
    in runs) decides which rows are skipped."""
    log(f"[duets] {name}: NumPy reference loop ...")
    ref = numpy_reference(name, problem, cfg, args.numpy_threads)
    rows, last = [], None
    for seeds, grid in [(s, False) for s in seed_counts] + [(seed_counts[-1], True)]:
        runs = seeds * (len(duets_exp._betas(cfg)) if grid else 1)
        row = dict(algorithm=name, seeds=seeds, grid_points=len(duets_exp._betas(cfg)) if grid else 1, runs=runs)
        if harness.skipped_by_budget(rows, row, f"[duets] {name} S={seeds}", runs, last, args.budget_seconds,
                                     skip_reason):
            continue
        log(f"[duets] {name}: {runs} runs in one call ...")
        last = jax_row(name, alg, problem, cfg, seeds, grid, ref["agent_steps_per_second"])
        rows.append(last)
    return dict(algorithm=name, numpy=ref, rows=rows)


def run_section(args, skip_reason) -> dict | None:
    names = harness.selected(args, NAMES)
    if not names:
        return None
    problem, algs, cfg = build(args)
    seed_counts = args.seed_counts if args.seeds else list(QUICK_SEEDS if args.quick else FULL_SEEDS)
    t0 = time.perf_counter()
    results = [bench_algorithm(n, algs[n], problem, cfg, args, seed_counts, skip_reason) for n in names]
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
                   f"{ref['agent_steps_per_second']:.3g} agent-steps/s (regret {ref['regret']:.1f}, its own draws)")
    return "\n".join(out)
