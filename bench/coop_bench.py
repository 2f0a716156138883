"""The Coop-KernelUCB section of `python -m bench`: Coop-, Eager- and Dist-KernelUCB runs per second.

Configuration: the `coop-linear` world (spec coop-kernelucb §5.3) on an Erdos-Renyi graph G(V, p)
with V = 12 agents and p = 0.5 (graph_seed 0, gamma the world's default), K = 8 contexts in d = 10
per agent and round, T = 30 rounds; the three methods at their defaults (linear kernel, lam = eta =
sigma_z = 1, embedding "current") in the dual storage, the exact mode that the NumPy loop implements.
Each row (algorithm, S) is one `run_batch` call over seeds 0..S-1 (compile and run seconds apart,
resident-memory peak growth) and its runs per second. The ratio is to the plain NumPy loop of
reference/coop_kernel_np.py (written from the spec) on NUMPY_SEEDS seeds of the SAME arrays
(`coop_arrays`: X [T, V, K, d], Y and fbar [T, V, K], the graph arrays) and the same tie-break
uniforms U [T, V, K] the runner draws, timed in the same process with --numpy-threads BLAS threads;
so each row also reports the largest difference between its per-round regret [T, V] and the loop's
on the seeds both ran (rounding only: they make the same decisions). A row whose run time or
memory, extrapolated from the last row measured, would exceed --budget-seconds or the available
memory is skipped with the reason in the table (bench.__main__.skip_reason).

A second, smaller table times the feature storage at the paper's scale, where no NumPy loop
exists: Eager-KernelUCB with storage "feature", embedding "common_lag", r_max = 16 and ring_rounds
= 16 (the paper size of the coop experiments) on `coop-linear` over G(V, 0.7) with V = 200 (quick:
50), T = 20 rounds, in one call over 2 seeds. It reports seconds per trial and per round of a
trial; a feature-storage round costs the same at every t (a ring of ring_rounds prefix sums and
one (r_max d) x (r_max d) system per agent), so T = 500 costs 500 times the round. It runs when
Eager-KernelUCB is selected.

SCALE_REFERENCES ({registered name: fn(run, params, cfg, seed) -> (T V, seconds)}) serves the scale
section (bench.scale): one run of the method's NumPy loop (exact, dual storage) on the seed's arrays
and tie uniforms, drawn before the clock starts; fn.note says where the JAX storage differs.
"""
from __future__ import annotations

import inspect
import time

import numpy as np

from bandits_jax import runner
from bandits_jax.algorithms.coop import coop_kernel
from bandits_jax.algorithms import algorithm_factory, make_algorithm
from bandits_jax.problems import make_problem
from bandits_jax.problems.coop import coop_arrays
from bandits_jax.runner import run_batch

from . import harness
from .harness import log
from reference import coop_kernel_np

NAMES = ("Coop-KernelUCB", "Eager-KernelUCB", "Dist-KernelUCB")
GROUP = "coop"
WORLD = dict(num_agents=12, num_arms=8, dim=10, horizon=30, p=0.5, graph="er")
CONFIG = {"Coop-KernelUCB": ("coop_kernel_ucb", coop_kernel_np.coop_kernel_ucb_np),
          "Eager-KernelUCB": ("eager_kernel_ucb", coop_kernel_np.eager_kernel_ucb_np),
          "Dist-KernelUCB": ("dist_kernel_ucb_coop", coop_kernel_np.dist_kernel_ucb_np)}
STORAGE = "dual"
FULL_SEEDS = (1, 100, 1000)
QUICK_SEEDS = (1, 4)
NUMPY_SEEDS = 2
SCALE_NAME, SCALE_ALGORITHM = "Eager-KernelUCB", "eager_kernel_ucb"
SCALE_OPTIONS = dict(storage="feature", embedding="common_lag", r_max=16, ring_rounds=16)
SCALE_WORLD = dict(num_agents=200, num_arms=8, dim=10, horizon=20, p=0.7, graph="er")
SCALE_QUICK_AGENTS = 50
SCALE_SEEDS = 2
PAPER_HORIZON = 500


def reference_inputs(problem, seed: int, stream: int = 0, base_key: int = 0) -> tuple:
    """(arrays, U) of one seed as the runner draws them: `coop_arrays` (X [T, V, K, d], Y and fbar
    [T, V, K], the graph arrays) and the tie-break uniforms U [T, V, K] of the algorithm key of `stream`."""
    V, K, T = problem.spec.num_agents, problem.spec.num_arms, problem.spec.horizon
    key = runner.problem_and_algorithm_keys(runner.seed_key(seed, base_key))[1]
    return coop_arrays(problem, seed, T, base_key), coop_kernel.tie_uniforms(runner.stream_key(key, stream), V, K, T)


def timed_reference(fn, arrays: dict, U, **options) -> tuple:
    """(the loop's outputs, seconds) of one call fn(X, Y, fbar, U, graph arrays, **options)."""
    start = time.perf_counter()
    out = fn(arrays["X"], arrays["Y"], arrays["fbar"], U, arrays, **options)
    return out, time.perf_counter() - start


def numpy_reference(name: str, problem, threads: int) -> tuple:
    """(summary, regret [NUMPY_SEEDS, T, V]) of the NumPy loop on seeds 0..NUMPY_SEEDS-1.

    The arrays and uniforms are drawn before the clock starts: only the loop itself is timed.
    """
    fn = CONFIG[name][1]
    inputs = [reference_inputs(problem, seed) for seed in range(NUMPY_SEEDS)]
    regrets, seconds = [], 0.0
    with harness.BlasThreads(threads) as blas:
        for arrays, U in inputs:
            out, spent = timed_reference(fn, arrays, U)
            regrets.append(out["regret"])
            seconds += spent
    seconds /= NUMPY_SEEDS
    regret = np.stack(regrets)
    summary = dict(seeds=NUMPY_SEEDS, seconds=seconds, runs_per_second=1.0 / seconds, blas_threads=blas.threads,
                   final_regret_mean=float(regret.sum(axis=1).mean()))
    return summary, regret


# ----------------------------------------------------------------------------- scale section
# registered name -> (its NumPy loop, the hyper-parameters it takes); ind_kernel_ucb picks its loop by kernel
SCALE_LOOPS = {
    "oful": (coop_kernel_np.oful_np, ("lam", "R", "S", "delta")),
    "naive_linucb": (coop_kernel_np.naive_linucb_np, ("lam", "eta")),
    "coop_kernel_ucb": (coop_kernel_np.coop_kernel_ucb_np, ("lam", "eta", "sigma_z")),
    "eager_kernel_ucb": (coop_kernel_np.eager_kernel_ucb_np, ("lam", "eta", "sigma_z")),
    "dist_kernel_ucb_coop": (coop_kernel_np.dist_kernel_ucb_np, ("lam", "eta", "sigma_z")),
    "igp_ucb": (coop_kernel_np.igp_ucb_np, ("lam", "B", "R", "delta")),
    "naive_igp_ucb": (coop_kernel_np.naive_igp_ucb_np, ("lam", "B", "R", "delta")),
}
COOPERATIVE = ("coop_kernel_ucb", "eager_kernel_ucb", "dist_kernel_ucb_coop")


def _factory_option(name: str, option: str):
    """The default of a registered name's static option, read from its factory (None: it has no such option)."""
    parameter = inspect.signature(algorithm_factory(name)).parameters.get(option)
    return None if parameter is None else parameter.default


def scale_call(name: str, options: dict, params: dict) -> tuple:
    """(loop, its keyword options, note) of registered `name` at the algorithm's static `options`
    and hyper-parameter values `params`: the loop closest to that configuration, and what differs
    ("" when nothing does)."""
    default_kernel = _factory_option(name, "kernel")
    primal = default_kernel is None  # a linear primal loop: no kernel option
    kernel = options.get("kernel", default_kernel or "linear")
    if name == "ind_kernel_ucb":
        fn = coop_kernel_np.linucb_np if kernel == "linear" else coop_kernel_np.kernel_ucb_np
        names = ("lam", "eta")
    else:
        fn, names = SCALE_LOOPS[name]
    kwargs = {k: float(params[k]) for k in names}
    if not primal and not (name == "ind_kernel_ucb" and kernel == "linear"):
        kwargs.update(kernel=kernel, sigma_x=float(params.get("lengthscale", 1.0)))
    if name in COOPERATIVE:
        embedding = options.get("embedding", "current")
        kwargs.update(mmd_squared=options.get("mmd", "unsquared") == "squared",
                      embedding="current" if embedding == "common_lag" else embedding)
        if name == "dist_kernel_ucb_coop":
            kwargs["dist_mimic"] = options.get("dist_mimic", "centre_model")
    return fn, kwargs, scale_note(name, kernel, options)


def scale_note(name: str, kernel: str, options: dict) -> str:
    """What the exact dual NumPy loop does differently from the JAX storage `options` names ("" if nothing)."""
    if options.get("storage", "dual") != "feature":
        return ""
    notes = []
    if name in COOPERATIVE:
        lag = ", common lag" if options.get("embedding") == "common_lag" else ""
        notes.append(f"exact K_hat_z per source (JAX: rank {options.get('r_max', 16)}{lag})")
    if kernel == "rbf":
        notes.append(f"exact RBF (JAX: {options.get('landmarks', 64)} Nystrom landmarks)")
    return "dual loop, " + "; ".join(notes) if notes else ""


# The exact dual loops' round t costs about t^2.8 (V = 50: Eager's 100th round about two minutes, a
# whole run about an hour): they are timed on the first SCALE_PREFIX rounds, which are exactly the
# first rounds of the whole run (a round reads only earlier rounds). Their rounds are the cheap ones,
# so the ratio to the JAX run of the whole horizon understates the JAX advantage.
SCALE_PREFIX = 20
SCALE_PREFIXED = COOPERATIVE + ("naive_igp_ucb",)


def _scale_adapter(name: str):
    """The scale section's reference of `name`: fn(run, params, cfg, seed) -> (T V, seconds) of ONE
    run of its NumPy loop on the seed's arrays and tie uniforms, drawn before the clock starts.
    Each call sets fn.note to what differs at that run's configuration."""
    def fn(run, params, cfg, seed):
        loop, kwargs, fn.note = scale_call(name, dict(run.curve.algorithm.options), params)
        arrays, U = reference_inputs(run.problem, seed, run.algorithm.stream, int(cfg.get("base_key", 0)))
        rounds = run.problem.spec.horizon
        if name in SCALE_PREFIXED and rounds > SCALE_PREFIX:
            rounds = SCALE_PREFIX
            arrays = {**arrays, **{k: arrays[k][:rounds] for k in ("X", "Y", "fbar")}}
            U = U[:rounds]
            fn.note = "; ".join(filter(None, (fn.note, f"NumPy on the first {rounds} of {run.problem.spec.horizon} "
                                                       "rounds (a lower bound on the ratio)")))
        _, seconds = timed_reference(loop, arrays, U, **kwargs)
        return rounds * run.problem.spec.num_agents, seconds

    fn.__name__ = f"scale_{name}"
    fn.note = ""
    return fn


SCALE_REFERENCES = {name: _scale_adapter(name) for name in ("ind_kernel_ucb",) + tuple(SCALE_LOOPS)}


def jax_row(name: str, problem, alg, seeds: int, numpy_rate: float, numpy_regret) -> dict:
    """One run_batch call over seeds 0..seeds-1; its regret checked against the NumPy loop's."""
    with harness.PeakMemory() as mem:
        out = run_batch(problem, alg, list(range(seeds)), precision="float64")
    rate = seeds / max(out.run_seconds, 1e-12)
    shared = min(seeds, len(numpy_regret))
    difference = float(np.max(np.abs(np.asarray(out.regret[:shared]) - numpy_regret[:shared])))
    return dict(algorithm=name, seeds=seeds, runs=seeds, skipped=False, compile_seconds=out.compile_seconds,
                run_seconds=out.run_seconds, peak_mb=mem.peak_delta / float(1 << 20), runs_per_second=rate,
                ratio=rate / numpy_rate, final_regret_mean=float(np.asarray(out.regret).sum(axis=1).mean()),
                max_regret_difference=difference)


def bench_algorithm(name: str, problem, args, seed_counts, skip_reason) -> dict:
    """The NumPy loop, then one row per S (skipped where `skip_reason` says so)."""
    alg = make_algorithm(CONFIG[name][0], storage=STORAGE)
    log(f"[coop] {name}: NumPy reference loop on {NUMPY_SEEDS} seeds ...")
    ref, numpy_regret = numpy_reference(name, problem, args.numpy_threads)
    log(f"[coop] {name}: NumPy {ref['seconds']:.2f} s a run ({ref['blas_threads'] or 'default'} BLAS thread(s))")
    rows = harness.seed_rows("coop", name, seed_counts, args, skip_reason, lambda seeds: jax_row(
        name, problem, alg, seeds, ref["runs_per_second"], numpy_regret))
    return dict(algorithm=name, numpy=ref, rows=rows)


def feature_scale(args) -> dict:
    """The feature-storage row: one run_batch call of SCALE_SEEDS trials at V = 200 (quick: 50)."""
    world = dict(SCALE_WORLD, num_agents=SCALE_QUICK_AGENTS) if args.quick else dict(SCALE_WORLD)
    problem = make_problem("coop-linear", **world)
    alg = make_algorithm(SCALE_ALGORITHM, **SCALE_OPTIONS)
    T = world["horizon"]
    log(f"[coop] feature storage: {alg.name} at V = {world['num_agents']}, T = {T}, {SCALE_SEEDS} seeds ...")
    with harness.PeakMemory() as mem:
        out = run_batch(problem, alg, list(range(SCALE_SEEDS)), precision="float64")
    per_trial = out.run_seconds / SCALE_SEEDS
    per_round = per_trial / T
    log(f"[coop] feature storage: compile {out.compile_seconds:.1f} s, {per_round:.3g} s a round of a trial")
    return dict(algorithm=alg.name, options=dict(SCALE_OPTIONS), world=world, graph=problem.info["graph_source"],
                seeds=SCALE_SEEDS, compile_seconds=out.compile_seconds, run_seconds=out.run_seconds,
                peak_mb=mem.peak_delta / float(1 << 20), seconds_per_trial=per_trial,
                seconds_per_round_per_trial=per_round, paper_horizon=PAPER_HORIZON,
                paper_seconds_per_trial=per_round * PAPER_HORIZON,
                final_regret_mean=float(np.asarray(out.regret).sum(axis=1).mean()))


def run_section(args, skip_reason) -> dict | None:
    names = harness.selected(args, NAMES)
    if not names:
        return None
    seed_counts = args.seed_counts if args.seeds else list(QUICK_SEEDS if args.quick else FULL_SEEDS)
    t0 = time.perf_counter()
    problem = make_problem("coop-linear", **WORLD)
    results = [bench_algorithm(n, problem, args, seed_counts, skip_reason) for n in names]
    scale = feature_scale(args) if SCALE_NAME in names else None
    return dict(world=dict(WORLD), graph=problem.info["graph_source"], gamma=problem.info["gamma"],
                storage=STORAGE, numpy_seeds=NUMPY_SEEDS, seed_counts=seed_counts, results=results,
                feature_scale=scale, total_seconds=time.perf_counter() - t0)


def table(section: dict) -> str:
    world = section["world"]
    head = ("algorithm", "S", "compile s", "run s", "peak MB", "runs/s", "x NumPy", "regret diff", "note")
    lines = harness.section_lines(section, lambda r: str(r["seeds"]), lambda r: (
        f"{r['runs_per_second']:.3g}", f"{r['ratio']:.3g}", f"{r['max_regret_difference']:.1e}"))
    out = [f"Coop-KernelUCB section: coop-linear on {section['graph']} (V={world['num_agents']}, "
           f"gamma={section['gamma']}, K={world['num_arms']}, d={world['dim']}, T={world['horizon']}), linear "
           f"kernel, {section['storage']} storage; x NumPy = JAX runs/s over the NumPy loop's on the same arrays; "
           "regret diff = largest |JAX - NumPy| per-round regret on their common seeds"] + harness.aligned(head, lines)
    for res in section["results"]:
        ref = res["numpy"]
        out.append(f"  {res['algorithm']}: NumPy loop {ref['seconds']:.3f} s a run "
                   f"({ref['runs_per_second']:.3g} runs/s, seeds 0-{ref['seeds'] - 1})")
    scale = section.get("feature_scale")
    if scale:
        w = scale["world"]
        opts = ", ".join(f"{k}={v}" for k, v in scale["options"].items())
        head = ("algorithm", "V", "T", "S", "compile s", "run s", "peak MB", "s/trial", "s/round/trial",
                f"s/trial at T={scale['paper_horizon']}")
        row = [scale["algorithm"], str(w["num_agents"]), str(w["horizon"]), str(scale["seeds"]),
               f"{scale['compile_seconds']:.1f}", f"{scale['run_seconds']:.2f}", f"{scale['peak_mb']:.0f}",
               f"{scale['seconds_per_trial']:.3g}", f"{scale['seconds_per_round_per_trial']:.3g}",
               f"{scale['paper_seconds_per_trial']:.3g}"]
        out += ["", f"Feature storage at scale ({opts}) on coop-linear over {scale['graph']}; no NumPy "
                "counterpart, T=500 extrapolated from the cost of a round"] + harness.aligned(head, [row])
    return "\n".join(out)
