"""The benchmarked configurations and the work models that relate them to the machine ceilings.

Each case is one algorithm on one synthetic problem (N = 1 agent, K = 4 arms, d = 10) with the
hyper-parameters its constructor defaults to, and the matching NumPy reference loop.

Work models (per agent-step, float64, 8 bytes a number). The runner splits the horizon into
segments [t0, t1) of capacity C (`bandits_jax.runner.segments`); a step of a segment works on
buffers of C rows, so the models charge C, not the live history size n (n is C/2 .. C).

KernelUCB, against memory bandwidth. The step's data is dominated by the padded C x C inverse
Cholesky factor M = L^{-1} of K_n + lam I (8 C^2 bytes; the C x d history is d / C of it). The
step streams it KERNEL_FACTOR_PASSES = 3 times:
    select: one pass, M [k(X, x_1..x_K), y] (one product with K + 1 columns) for the K means and
            variances;
    update: l = M k(X, x_a) (one pass), then the new row -(l^T M) / d (a second pass, which needs
            l first); only that row is written. (Select's column for the chosen arm is the same
            l, but the algorithm contract does not pass it on, so the update recomputes it.)
    bytes per agent-step = KERNEL_FACTOR_PASSES * 8 * C^2.
The bandwidth ceiling is a large array copy with read + write bytes counted, so the fraction is
"model bytes per second / copy bytes per second". It can exceed 100%: the passes are reads
(a read stream outruns a copy), and the factors of the first segments (C = 128, 256: 128 KB,
512 KB) sit in cache.

NeuralUCB, against float64 matmul flop/s. Training dominates: each step runs `train_steps`
full-batch gradient-descent steps on the C (masked) history rows of its segment, forward +
backward ~ 3 x the forward's 2 x rows x params multiply-adds:
    flops per agent-step = train_steps * 3 * 2 * C * p   (while t < train_until, else 0),
    p = d m + m + m + 1 for the authors' two-layer network (241 at d = 10, m = 20).
The full-covariance bookkeeping (a p x p rank-one Cholesky update and a solve with K right-hand
sides, ~ (K + 7) p^2 ~ 0.6 Mflop) is left out; at C >= 128 it is under 10% of the training.

FN-UCB (the fnucb/fig1a configuration: N = 10 agents, the official code's option set, D = 0
so a round at every iteration), against float64 matmul flop/s. Under the code's shared network
(Q1) each agent trains the one network in turn on its own history in every round (while t <
train_until): train_steps x 3 x 2 x C x p per agent-step as NeuralUCB; plus the covariance
bookkeeping of O((K + 6) p^2) per agent-step (Sherman-Morrison on V_i^{-1} and (V^local_i)^{-1},
UCB_a and the Less Comm. bonus with K right-hand sides):
    flops per agent-step = train_steps * 6 * C * p + (K + 6) p^2.

LinUCB, against float64 matmul flop/s. Its state (a d x d factor and a d-vector, under 1 KB a
run) stays in cache even at S = 1000, so bandwidth is not the limit; the step is a chain of
tiny dependent triangular solves, i.e. latency- and dispatch-bound, and the flop fraction says
how far from compute-bound it is:
    flops per agent-step = (9 + K) d^2 + 4 K d
(mu = V^{-1} b by two triangular solves 2 d^2; widths by one solve with K right-hand sides
K d^2; scores 4 K d; the rank-one Cholesky update: one solve d^2 and ~6 elementwise d x d passes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from bandits_jax.algorithms.fnucb.fn_ucb import fn_ucb_authors
from bandits_jax.algorithms.single.kernel import kernel_ucb
from bandits_jax.algorithms.single.linear import linucb
from bandits_jax.algorithms.single.neural import neural_ucb
from bandits_jax.core import Algorithm, Problem
from bandits_jax.problems import make_problem
from bandits_jax.runner import segments

from . import numpy_loop

KERNEL_FACTOR_PASSES = 3
BYTES = 8  # float64

FULL_HORIZON = 1000
QUICK_HORIZON = 50
FULL_SEEDS = (1, 10, 100, 1000)
QUICK_SEEDS = (1, 4)
DEFAULT_FIRST_SEGMENT = 128  # the runner's default
QUICK_FIRST_SEGMENT = 25     # so that the quick run still has (two) doubling segments

NEURAL = dict(width=20, depth=2, train_steps=30, train_until=2000, covariance="full")
FN_HORIZON, FN_AGENTS = 5000, 10
FN_HP = dict(lam=0.1, nu_tkn=0.1, nu_tk=0.1, D=0.0, lr=0.01)
FN_OPTIONS = dict(covariance="full", train_steps=30, train_until=2000, alpha_warmup=3, alpha_ramp=700)
# what fn_ucb_authors fixes, as the NumPy loop's options (its network is the code's in any case)
FN_AUTHORS_CODE = dict(feature_scale="raw", loss="authors", trigger="diag", authors_code=True)


@dataclass(frozen=True)
class Case:
    """One benchmarked configuration."""

    name: str
    problem_name: str
    build: Callable[[], Algorithm]
    numpy_agent: Callable[[], Callable]
    numpy_seeds: int
    ceiling: str  # "bandwidth" (bytes/s) or "flops" (flop/s)
    model: str    # one line: the work model
    work: Callable[[Algorithm, Problem, int], float]  # (alg, problem, first_segment) -> units per agent-run
    horizon: int = FULL_HORIZON
    num_agents: int = 1
    num_arms: int = 4
    dim: int = 10
    first_segment: int = DEFAULT_FIRST_SEGMENT
    settings: dict = field(default_factory=dict)
    quick: dict = field(default_factory=dict)  # further field overrides of the --quick size

    def problem(self, horizon=None) -> Problem:
        return make_problem(self.problem_name, num_agents=self.num_agents, num_arms=self.num_arms,
                            dim=self.dim, horizon=self.horizon if horizon is None else horizon)

    def segments(self, alg: Algorithm, problem: Problem, first=None):
        return segments(alg, problem.spec, self.first_segment if first is None else first)


# ------------------------------------------------------------------------------------ work models
def kernel_bytes(alg: Algorithm, problem: Problem, first: int) -> float:
    """Model bytes per agent-run: sum over segments of steps * passes * 8 C^2."""
    return sum((t1 - t0) * KERNEL_FACTOR_PASSES * BYTES * cap * cap
               for t0, t1, cap in segments(alg, problem.spec, first))


def neural_flops(alg: Algorithm, problem: Problem, first: int) -> float:
    """Model training flops per agent-run: sum over training steps of steps * 6 * C * p."""
    d, m = problem.spec.dim, NEURAL["width"]
    p = d * m + m + m + 1
    total = 0.0
    for t0, t1, cap in segments(alg, problem.spec, first):
        trained = max(0, min(t1, NEURAL["train_until"]) - t0)
        total += trained * NEURAL["train_steps"] * 3 * 2 * cap * p
    return total


def fn_ucb_flops(alg: Algorithm, problem: Problem, first: int) -> float:
    """Model flops per agent-run: training (as NeuralUCB's model) plus (K + 6) p^2 a step."""
    d, m, K = problem.spec.dim, NEURAL["width"], problem.spec.num_arms
    p = d * m + m + m + 1
    return neural_flops(alg, problem, first) + problem.spec.horizon * (K + 6) * p * p


def linear_flops(alg: Algorithm, problem: Problem, first: int) -> float:
    del alg, first
    K, d = problem.spec.num_arms, problem.spec.dim
    return problem.spec.horizon * ((9 + K) * d * d + 4 * K * d)


# ------------------------------------------------------------------------------------ the cases
def cases() -> list:
    lin = dict(lam=1.0, beta=1.0)
    ker = dict(kernel="rbf", lam=1.0, beta=1.0, lengthscale=1.0)
    neu_hp = dict(lam=0.1, beta=math.sqrt(0.1 * 0.01), lr=0.01)
    return [
        Case(
            name="LinUCB", problem_name="linear",
            build=lambda: linucb(**lin),
            numpy_agent=lambda: numpy_loop.linucb_agent(**lin),
            numpy_seeds=2, ceiling="flops",
            model="flops/agent-step = (9 + K) d^2 + 4 K d (latency-bound; state fits in cache)",
            work=linear_flops, settings=lin,
        ),
        Case(
            name="KernelUCB", problem_name="cosine",
            build=lambda: kernel_ucb(**ker),
            numpy_agent=lambda: numpy_loop.kernel_ucb_agent(**ker),
            numpy_seeds=1, ceiling="bandwidth",
            model=f"bytes/agent-step = {KERNEL_FACTOR_PASSES} passes x 8 C^2 (padded C x C inverse factor, C = segment capacity)",
            work=kernel_bytes, settings=ker,
        ),
        Case(
            name="NeuralUCB", problem_name="cosine",
            build=lambda: neural_ucb(**neu_hp, **NEURAL),
            numpy_agent=lambda: numpy_loop.neural_ucb_agent(
                NEURAL["width"], neu_hp["lam"], neu_hp["beta"], neu_hp["lr"], NEURAL["train_steps"],
                NEURAL["train_until"], NEURAL["covariance"]),
            numpy_seeds=1, ceiling="flops",
            model="flops/agent-step = train_steps x 3 x 2 x C x p (GD on the C buffer rows; p = 241)",
            work=neural_flops, settings={**neu_hp, **NEURAL},
        ),
        Case(
            name="FN-UCB", problem_name="cosine",
            build=lambda: fn_ucb_authors(**FN_HP, width=NEURAL["width"], **FN_OPTIONS),
            numpy_agent=lambda: numpy_loop.fn_ucb_agents(NEURAL["width"], **FN_HP, **FN_OPTIONS, **FN_AUTHORS_CODE),
            numpy_seeds=1, ceiling="flops",
            model="flops/agent-step = train_steps x 6 x C x p + (K + 6) p^2 (fnucb/fig1a, N = 10, D = 0)",
            work=fn_ucb_flops, horizon=FN_HORIZON, num_agents=FN_AGENTS,
            settings={**FN_HP, "width": NEURAL["width"], "parameterization": "authors", **FN_OPTIONS,
                      **FN_AUTHORS_CODE},
            quick=dict(num_agents=2),
        ),
    ]


def state_bytes(case: Case, alg: Algorithm, problem: Problem) -> float:
    """Model bytes of one run's state at the largest capacity (for the memory check)."""
    d, N, T = problem.spec.dim, problem.spec.num_agents, problem.spec.horizon
    cap = max((c or 0) for _, _, c in case.segments(alg, problem))
    if case.name == "KernelUCB":
        per_agent = cap * cap + cap * (d + 1)
    elif case.name == "FN-UCB":
        m = NEURAL["width"]
        p = d * m + 2 * m + 1
        per_agent = 2 * p * p + cap * (d + 1) + 3 * p + (5 * p * p + 2 * N * p) / N
    elif case.name == "NeuralUCB":
        m = NEURAL["width"]
        p = d * m + 2 * m + 1
        per_agent = p * p + cap * (d + 1) + 2 * p
    else:
        per_agent = d * d + d
    outputs = T * (N + 3)
    return BYTES * (N * per_agent + outputs)
