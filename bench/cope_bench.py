"""The CoPE-KB section of `python -m bench`: CoKernelFC and CoKernelFB trials per second.

Configuration: the `cope-kb` world of spec cope-kb §6.1 in its rank-2 case (V = 5 agents, 6 arms
each, d = 8), CoKernelFC at Delta_min = 0.2 (three elimination rounds) and CoKernelFB at Delta_min =
0.02 with a budget of T = 10^5 per agent, the defaults of spec §9 (xi = 1e-10, eps = 0.1, 2000
Frank-Wolfe iterations). Each row (algorithm, S) is one `run_trials` call over S seeds (compile and
run seconds apart, resident-memory peak growth) and its trials per second; the ratio is to the plain
NumPy loop of the same trial (bench/reference/cope_kb_np.py, written from the spec) on a few seeds
of its own draws, timed in the same process with --numpy-threads BLAS threads. A row whose run time
or memory, extrapolated from the last row measured, would exceed --budget-seconds or the available
memory is skipped with the reason in the table (bench.__main__.skip_reason).
"""
from __future__ import annotations

import time

import jax
import numpy as np

from bandits_jax.algorithms import make_algorithm
from bandits_jax.problems import make_problem
from bandits_jax.runner import run_trials

from . import harness
from .harness import log
from .reference import cope_kb_np

NAMES = ("CoKernelFC", "CoKernelFB")
GROUP = "cope"
CASE = "rank2"
CONFIG = {"CoKernelFC": dict(algorithm="cokernel_fc", gap=0.2, params={}),
          "CoKernelFB": dict(algorithm="cokernel_fb", gap=0.02, params={"budget": 1e5})}
FULL_SEEDS = (1, 100, 1000)
QUICK_SEEDS = (1, 4)
NUMPY_SEEDS = 3


def numpy_reference(name: str, threads: int) -> dict:
    """Seconds per trial of the NumPy loop (mean over NUMPY_SEEDS trials of its own draws)."""
    cfg = CONFIG[name]
    _, gram, means = cope_kb_np.cope_instance(CASE, cfg["gap"])
    correct = 0
    with harness.BlasThreads(threads):
        start = time.perf_counter()
        for seed in range(NUMPY_SEEDS):
            rng = np.random.default_rng(seed)
            noise = lambda s: rng.standard_normal(means.shape)  # noqa: E731
            if name == "CoKernelFC":
                out = cope_kb_np.cokernel_fc(gram, means, noise)
            else:
                out = cope_kb_np.cokernel_fb(gram, means, noise, cfg["params"]["budget"])
            correct += int(np.all(out["answer"] == means.shape[1] - 1))
        seconds = (time.perf_counter() - start) / NUMPY_SEEDS
    return dict(seconds=seconds, trials_per_second=1.0 / seconds, correct=correct / NUMPY_SEEDS)


def jax_row(name: str, arms, trial, seeds: int, numpy_rate: float) -> dict:
    """One run_trials call over `seeds` seeds."""
    params = {k: np.full(seeds, v) for k, v in CONFIG[name]["params"].items()} or None
    with harness.PeakMemory() as mem:
        out = run_trials(arms, trial, list(range(seeds)), params, precision="float64")
    rate = seeds / max(out.run_seconds, 1e-12)
    return dict(algorithm=name, seeds=seeds, runs=seeds, compile_seconds=out.compile_seconds,
                run_seconds=out.run_seconds, peak_mb=mem.peak_delta / float(1 << 20), trials_per_second=rate,
                ratio=rate / numpy_rate, correct=float(np.mean(out.outcomes["correct"])),
                samples_mean=float(np.mean(out.outcomes["samples"])))


def bench_algorithm(name: str, args, seed_counts, skip_reason) -> dict:
    """The NumPy loop, then one row per S (skipped where `skip_reason` says so)."""
    cfg = CONFIG[name]
    arms = make_problem("cope-kb", case=CASE, gap=cfg["gap"])
    trial = make_algorithm(cfg["algorithm"])
    log(f"[cope] {name}: NumPy reference loop ...")
    ref = numpy_reference(name, args.numpy_threads)
    rows = harness.seed_rows("cope", name, seed_counts, args, skip_reason,
                             lambda seeds: jax_row(name, arms, trial, seeds, ref["trials_per_second"]))
    return dict(algorithm=name, numpy=ref, rows=rows)


def run_section(args, skip_reason) -> dict | None:
    names = harness.selected(args, NAMES)
    if not names:
        return None
    seed_counts = args.seed_counts if args.seeds else list(QUICK_SEEDS if args.quick else FULL_SEEDS)
    t0 = time.perf_counter()
    results = [bench_algorithm(n, args, seed_counts, skip_reason) for n in names]
    return dict(case=CASE, config={n: {k: v for k, v in c.items()} for n, c in CONFIG.items() if n in names},
                seed_counts=seed_counts, results=results, total_seconds=time.perf_counter() - t0)


def table(section: dict) -> str:
    head = ("algorithm", "S", "compile s", "run s", "peak MB", "trials/s", "x NumPy", "correct", "note")
    lines = harness.section_lines(section, lambda r: str(r["seeds"]), lambda r: (
        f"{r['trials_per_second']:.3g}", f"{r['ratio']:.3g}", f"{r['correct']:.2f}"))
    out = [f"CoPE-KB section: cope-kb {section['case']} (V=5, n=6, d=8); CoKernelFC at Delta=0.2, CoKernelFB at "
           "Delta=0.02, T=1e5; x NumPy = JAX trials/s over the NumPy loop's"] + harness.aligned(head, lines)
    for res in section["results"]:
        ref = res["numpy"]
        out.append(f"  {res['algorithm']}: NumPy loop {ref['seconds']:.3f} s a trial "
                   f"({ref['trials_per_second']:.3g} trials/s, its own draws)")
    return "\n".join(out)
