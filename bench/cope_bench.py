"""The CoPE-KB section of `python -m bench`: CoKernelFC and CoKernelFB trials per second.

Configuration: the `cope-kb` world of spec cope-kb §6.1 in its rank-2 case (V = 5 agents, 6 arms
each, d = 8), CoKernelFC at Delta_min = 0.2 (three elimination rounds) and CoKernelFB at Delta_min =
0.02 with a budget of T = 10^5 per agent, the defaults of spec §9 (xi = 1e-10, eps = 0.1, 2000
Frank-Wolfe iterations). Each row (algorithm, S) is one `run_trials` call over S seeds (compile and
run seconds apart, resident-memory peak growth) and its trials per second; the ratio is to the plain
NumPy loop of the same trial (reference/cope_kb_np.py, written from the spec) on a few seeds
of its own draws, timed in the same process with --numpy-threads BLAS threads. A row whose run time
or memory, extrapolated from the last row measured, would exceed --budget-seconds or the available
memory is skipped with the reason in the table (bench.__main__.skip_reason).

SCALE_REFERENCES ({registered name: fn(run, params, cfg, seed) -> (1, seconds)}) serves the scale
section (bench.scale): one trial of the algorithm's NumPy loop at the JAX run's world and
hyper-parameters, on the JAX trial's own noise for that seed, drawn before the clock starts.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import runner
from bandits_jax.algorithms import make_algorithm
from bandits_jax.problems import cope, make_problem
from bandits_jax.trials import run_trials

from . import harness
from .harness import log
from reference import cope_kb_np

NAMES = ("CoKernelFC", "CoKernelFB")
GROUP = "cope"
CASE = "rank2"
CONFIG = {"CoKernelFC": dict(algorithm="cokernel_fc", gap=0.2, params={}),
          "CoKernelFB": dict(algorithm="cokernel_fb", gap=0.02, params={"budget": 1e5})}
FULL_SEEDS = (1, 100, 1000)
QUICK_SEEDS = (1, 4)
NUMPY_SEEDS = 3


# registered name -> (the world array the loop takes first, the loop, its hyper-parameters)
REFERENCES = {
    "cokernel_fc": ("gram", cope_kb_np.cokernel_fc, ("delta", "xi", "eps")),
    "cokernel_ind_alloc": ("gram", cope_kb_np.cokernel_ind_alloc, ("delta", "xi", "eps")),
    "ind_rage": ("gram", cope_kb_np.ind_rage, ("delta", "xi", "eps")),
    "ind_rage_code": ("features", cope_kb_np.ind_rage_code, ("delta", "xi", "eps")),
    "ind_rage_code_threshold": ("features", functools.partial(cope_kb_np.ind_rage_code, var=False),
                                ("delta", "xi", "eps")),
    "ind_alba": ("features", cope_kb_np.ind_alba, ("delta",)),
    "ind_poly_alba": ("features", cope_kb_np.ind_poly_alba, ("delta",)),
    "cokernel_fb": ("gram", cope_kb_np.cokernel_fb, ("budget", "xi")),
    "cokernel_fb_ind_alloc": ("gram", cope_kb_np.cokernel_fb_ind_alloc, ("budget", "xi")),
    "ind_peace_fb": ("gram", cope_kb_np.ind_peace_fb_gamma, ("budget", "xi")),
    "ind_peace_fb_omega": ("gram", cope_kb_np.ind_peace_fb_omega, ("budget", "xi")),
    "ind_uniform_fb": ("gram", cope_kb_np.ind_uniform_fb, ("budget", "xi")),
    "ind_uniform_fb_means": ("gram", functools.partial(cope_kb_np.ind_uniform_fb, estimator="means"),
                             ("budget", "xi")),
}
ALBA = ("ind_alba", "ind_poly_alba")
TABLED = ("cokernel_fb", "cokernel_fb_ind_alloc", "ind_peace_fb", "ind_peace_fb_omega")  # cached omega / gamma
MAX_STEPS = 400  # sampling steps a trial may take: the ALBA loops' cap (the others stop within 40 rounds)
GAMMA_KEY = 20230501  # the key of the world's Gaussian-width draws (problems.cope.gamma_table)


def reference_trial(name: str, world: dict, noise, params: dict, draws=None) -> dict:
    """One trial of registered algorithm `name` by its NumPy loop.

    world: {"features" [V, n, d], "gram" [nV, nV], "means" [V, n]}; noise(s) -> z [V, n] of sampling
    step s; params: the algorithm's hyper-parameters (others ignored); draws: the ALBA loops'
    draw_counts(s, totals [V], probs [V, n]) -> counts [V, n], and the Gaussian-width draws
    [M, n] for ind_peace_fb (None: the loop's own).
    """
    first, loop, names = REFERENCES[name]
    kwargs = {k: params[k] for k in names if k in params}
    if name in ALBA:
        return loop(world[first], world["means"], noise, draws, **kwargs)
    if name == "ind_peace_fb" and draws is not None:
        kwargs["draws"] = draws
    if "budget" in kwargs:
        return loop(world[first], world["means"], noise, _whole(kwargs.pop("budget")), **kwargs)
    return loop(world[first], world["means"], noise, **kwargs)


def _whole(budget):
    """A budget given as a float (the grid's 1e5) as the int the loops count in, when it is whole."""
    return int(budget) if float(budget).is_integer() else budget


def numpy_world(case: str, gap: float) -> dict:
    """{"features", "gram", "means"} of the cope-kb world (cope_kb_np.cope_instance)."""
    features, gram, means = cope_kb_np.cope_instance(case, gap)
    return dict(features=features, gram=gram, means=means)


def numpy_reference(name: str, threads: int) -> dict:
    """Seconds per trial of the NumPy loop (mean over NUMPY_SEEDS trials of its own draws, drawn
    before the clock starts)."""
    cfg = CONFIG[name]
    world = numpy_world(CASE, cfg["gap"])
    tables = [np.random.default_rng(seed).standard_normal((MAX_STEPS + 1,) + world["means"].shape)
              for seed in range(NUMPY_SEEDS)]
    correct, seconds = 0, 0.0
    with harness.BlasThreads(threads):
        for z in tables:
            start = time.perf_counter()
            out = reference_trial(cfg["algorithm"], world, z.__getitem__, cfg["params"])
            seconds += time.perf_counter() - start
            correct += int(np.all(out["answer"] == world["means"].shape[1] - 1))
    seconds /= NUMPY_SEEDS
    return dict(seconds=seconds, trials_per_second=1.0 / seconds, correct=correct / NUMPY_SEEDS)


# ----------------------------------------------------------------------------- scale section
def scale_inputs(run, seed: int, base_key: int = 0) -> tuple:
    """(world, noise table z [MAX_STEPS + 1, V, n], Gaussian-width draws or None) of one seed.

    The noise is the JAX trial's own: z[s] = noise_std normal(fold_in(key, s), (V, n)), key the
    seed's algorithm key of the trial's stream, as trials.trial_run hands it to the trial.
    """
    options = run.curve.problem.options
    world = numpy_world(options["case"], options["gap"])
    seed_key = runner.seed_key(seed, base_key)
    key = runner.stream_key(runner.problem_and_algorithm_keys(seed_key)[1], run.algorithm.stream)
    shape = world["means"].shape
    with jax.enable_x64(True):
        z = jax.vmap(lambda s: jax.random.normal(jax.random.fold_in(key, s), shape, jnp.float64))(
            jnp.arange(MAX_STEPS + 1))
        z = np.asarray(z) * float(options.get("noise_std", 1.0))
        widths = None
        if run.curve.algorithm.name == "ind_peace_fb":
            widths = np.asarray(jax.random.normal(jax.random.PRNGKey(GAMMA_KEY),
                                                  (cope.GAMMA_DRAWS, shape[1]), jnp.float64))
    return world, z, widths


def scale_reference(run, params: dict, cfg: dict, seed: int) -> tuple:
    """(1, seconds) of ONE NumPy trial of the run's algorithm on seed `seed`'s noise (scale section).

    Everything is drawn before the clock (`scale_inputs`). The loops that cache their omega / gamma
    tables (TABLED) first run once untimed on the same inputs: the JAX world holds those tables
    precomputed, so neither side's timed trial computes them. The ALBA loops draw their arm counts
    from NumPy's generator (seeded by `seed`) inside the loop: same law, other numbers than JAX's.
    """
    name = run.curve.algorithm.name
    world, z, widths = scale_inputs(run, seed, int(cfg.get("base_key", 0)))
    draws = widths
    if name in ALBA:
        rng = np.random.default_rng(seed)
        draws = lambda s, totals, probs: rng.multinomial(totals, probs)  # noqa: E731
    if name in TABLED:
        reference_trial(name, world, z.__getitem__, params, draws)
    start = time.perf_counter()
    reference_trial(name, world, z.__getitem__, params, draws)
    return 1, time.perf_counter() - start


def _scale_adapter(name: str):
    """scale_reference under its own name per algorithm, with the note scale.py prints."""
    def fn(run, params, cfg, seed):
        return scale_reference(run, params, cfg, seed)

    fn.__name__ = f"scale_{name}"
    if name in ALBA:
        fn.note = "arm draws by NumPy's multinomial (JAX: jax.random.multinomial)"
    return fn


SCALE_REFERENCES = {name: _scale_adapter(name) for name in REFERENCES}


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
