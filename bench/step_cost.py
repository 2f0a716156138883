"""XLA's own cost analysis of every regret algorithm's compiled step, and the roofline rates it implies.

For each curve of the experiments in EXPERIMENTS (paper size; one row per registered algorithm and
problem, from the first experiment that runs it), one step of ONE run is compiled at the state's
final capacity (the largest, most expensive step of a run) and `Compiled.cost_analysis()` gives its flops and
bytes accessed; divided by the number of agents they are per agent-step. The roofline time of an
agent-step on a device is max(flops / peak flop/s, bytes / peak bandwidth). These are estimates, and
low ones: XLA counts a loop inside the step (a `fori_loop` of training steps, a `while` of a solver)
once, not once per trip, both branches of a `cond`, and nothing for a library call (the LAPACK
Cholesky, triangular solve and eigendecomposition on CPU), which `library_flops` adds from the
calls' operand shapes (on a GPU cuSOLVER runs the same factorisations); the measured rows of the
main bench are the truth.

H100 peaks used (NVIDIA H100 SXM5 datasheet): 34 Tflop/s float64 without tensor cores (the steps'
factorisations and triangular solves do not run on them), 67 Tflop/s float32, 3.35 TB/s HBM3.
The CPU's are the bench's measured ceilings (float64 matmul, copy bandwidth).
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.core import ConfigError, Trial

from . import harness
from bandits_jax.curves import Curve, Spec, resolve
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.experiments.registry import build_curves, resolve_config
from bandits_jax.devices import precision_scope
from bandits_jax.runner import horizon_sizes, make_step, run_start

EXPERIMENTS = ("quickstart", "fnucb/fig1c", "fnucb/fig4", "async/synthetic-f1", "duets/h1", "bai/elimination",
               "coop/linear-er", "coop/rbf-er")
GROUP = "cost"
NAMES = ("step-cost",)
H100 = dict(name="NVIDIA H100 SXM5 (datasheet peaks)", float64_flops=34e12, float32_flops=67e12, bandwidth=3.35e12)


def step_cost(problem, algorithm, precision: str = "float64") -> dict:
    """{"flops", "bytes", "library_flops"} per agent-step of one compiled step of one run at its final
    capacity: XLA's count, and the LAPACK calls' that XLA leaves out."""
    with precision_scope(precision):
        sizes = horizon_sizes(algorithm, problem.spec)
        dtype = jnp.zeros(()).dtype
        params = {name: jax.ShapeDtypeStruct((), dtype) for name in algorithm.params}
        start = run_start(problem, algorithm, 0, sizes)
        pk, ak, inst, state = jax.eval_shape(start, jax.ShapeDtypeStruct((), np.uint32), params)
        compiled = jax.jit(make_step(problem, algorithm)).lower(
            params, state, inst, pk, ak, jax.ShapeDtypeStruct((), jnp.int32)).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    agents = problem.spec.num_agents
    return dict(flops=float(cost.get("flops", 0.0)) / agents, bytes=float(cost.get("bytes accessed", 0.0)) / agents,
                library_flops=library_flops(compiled.as_text()) / agents)


# flops of one LAPACK call by its name (LAPACK Working Note 41's counts), from its operands' shapes:
# a factorisation of n x n matrices (the eigendecomposition as its tridiagonal reduction and the
# forming of Q, 8/3 n^3, a lower bound), or a triangular solve of an m x m factor against B (m^2 per
# column of B, m x B's size in all).
FACTOR_FLOPS = {"potrf": lambda n: n ** 3 / 3.0, "getrf": lambda n: 2.0 * n ** 3 / 3.0,
                "syevd": lambda n: 8.0 * n ** 3 / 3.0, "geqrf": lambda n: 4.0 * n ** 3 / 3.0}
TARGET = re.compile(r'custom_call_target="lapack_[sdcz](?P<kind>[a-z]+)_ffi"')
OPERANDS = re.compile(r"operand_layout_constraints=\{(?P<shapes>(?:[a-z0-9]+\[[0-9,]*\]\{[0-9,]*\}(?:, )?)*)\}")
SHAPE = re.compile(r"[a-z0-9]+\[([0-9,]*)\]")


def library_flops(hlo_text: str) -> float:
    """Flops of the LAPACK calls of a compiled step (custom calls, which XLA's cost analysis counts
    as none): batch x FACTOR_FLOPS[kind](n) for a factorisation, m x size(B) for a triangular solve;
    a call inside a loop counted once, as XLA counts the rest."""
    total = 0.0
    for line in hlo_text.splitlines():
        target, operands = TARGET.search(line), OPERANDS.search(line)
        if target is None or operands is None:
            continue
        shapes = [[int(x) for x in dims.split(",") if x] for dims in SHAPE.findall(operands["shapes"])]
        kind = target["kind"]
        if kind == "trsm" and len(shapes) >= 2:
            total += shapes[0][-1] * float(np.prod(shapes[1]))
        elif kind in FACTOR_FLOPS and shapes and len(shapes[0]) >= 2:
            total += float(np.prod(shapes[0][:-2])) * FACTOR_FLOPS[kind](shapes[0][-1])
    return total


def roofline_rate(cost: dict, flops_peak: float, bandwidth: float) -> float:
    """Agent-steps per second at the roofline: 1 / max((flops + library flops) / peak, bytes / bandwidth)."""
    flops = cost["flops"] + cost.get("library_flops", 0.0)
    return 1.0 / max(flops / flops_peak, cost["bytes"] / bandwidth, 1e-30)


def run_section(args, ceilings: dict, log=print, experiments=EXPERIMENTS) -> list | None:
    """One row per registered algorithm and problem: its cost and the CPU and H100 roofline rates."""
    if not harness.selected(args, NAMES):
        return None
    rows, seen = [], set()
    for name in experiments:
        exp = get_experiment(name)
        try:
            config = resolve_config(exp, "paper", {})
            curves = build_curves(exp, config)
            runs = resolve(curves + extra_curves(name, curves), trace=False)
        except (ConfigError, FileNotFoundError) as err:
            log(f"[step cost] {name}: skipped ({err})")
            continue
        for run in runs:
            alg = run.algorithm
            key = run.curve.algorithm.name
            if isinstance(alg, Trial) or (key, run.problem.name) in seen:
                continue
            seen.add((key, run.problem.name))
            cost = step_cost(run.problem, alg, config["precision"])
            cpu = roofline_rate(cost, ceilings["matmul_flops"], ceilings["memory_bandwidth"])
            rows.append(dict(algorithm=key, curve=alg.name, experiment=name, problem=run.problem.name,
                             num_agents=run.problem.spec.num_agents,
                             horizon=run.problem.spec.horizon, flops_per_agent_step=cost["flops"],
                             library_flops_per_agent_step=cost["library_flops"],
                             bytes_per_agent_step=cost["bytes"], cpu_roofline_agent_steps_per_second=cpu,
                             h100_roofline_agent_steps_per_second=roofline_rate(cost, H100["float64_flops"],
                                                                                H100["bandwidth"])))
            log(f"[step cost] {key} ({name}): {cost['flops']:.3g} flop (+ {cost['library_flops']:.3g} in LAPACK), "
                f"{cost['bytes']:.3g} B per agent-step")
    return rows


def extra_curves(experiment: str, curves: list) -> list:
    """Curves of registered algorithms that no experiment runs, on an experiment's problem: DisKernelUCB
    (no experiment of the async paper runs it) on async/synthetic-f1 (`dis_kernel_curve`)."""
    if experiment != "async/synthetic-f1":
        return []
    return [dis_kernel_curve(curves)]


def dis_kernel_curve(curves) -> Curve:
    """DisKernelUCB on the problem of Approx-DisKernelUCB's curve, with its kernel and threshold."""
    approx = next(c for c in curves if c.algorithm.name == "approx_dis_kernel_ucb")
    options = {k: v for k, v in approx.algorithm.options.items() if k not in ("q", "dict_capacity")}
    return Curve("DisKernelUCB", approx.problem, Spec("dis_kernel_ucb", options))


def table(rows: list) -> str:
    head = "| algorithm | experiment (paper size): problem | flop / agent-step | LAPACK flop / agent-step | " \
           "bytes / agent-step | CPU roofline agent-steps/s | H100 roofline agent-steps/s |"
    lines = ["XLA cost analysis of one step at final capacity, LAPACK calls counted apart; roofline rates are "
             "estimates", "", head, "|" + "---|" * 7]
    for r in rows:
        lines.append(f"| {r['algorithm']} | {r['experiment']}: {r['problem']} (N = {r['num_agents']}, "
                     f"T = {r['horizon']}) | "
                     f"{r['flops_per_agent_step']:.3g} | {r.get('library_flops_per_agent_step', 0.0):.3g} | "
                     f"{r['bytes_per_agent_step']:.3g} | "
                     f"{r['cpu_roofline_agent_steps_per_second']:.3g} | "
                     f"{r['h100_roofline_agent_steps_per_second']:.3g} |")
    return "\n".join(lines)


def costliest(rows: list) -> list:
    """One row per algorithm, in the order of first appearance: its lowest CPU roofline rate (the
    problem where its step costs most; the first such row on a tie)."""
    best: dict = {}
    for r in rows:
        kept = best.get(r["algorithm"])
        if kept is None or r["cpu_roofline_agent_steps_per_second"] < kept["cpu_roofline_agent_steps_per_second"]:
            best[r["algorithm"]] = r
    return list(best.values())
