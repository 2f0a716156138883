"""Whole-run drivers around the NumPy reference loops, written the way the papers' code runs.

For each seed, for each agent (plain Python loops), the contexts of the run are drawn with NumPy
(the synthetic problems' "cube" law: u ~ Uniform([-0.5, 0.5]^d), x = u / ||u||), the rewards are
h(<a, x>) plus Gaussian noise, and the reference loop of `bench.reference` does the algorithm
math one step at a time with a fresh inverse per step. Nothing is shared between runs, so the
cost of a run does not depend on how many seeds are swept: seeds / time is the loop's rate.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from bandits_jax.problems.synthetic import FNUCB_FIXED_A

from .reference import fn_ucb_np, kernel_np, linear_np, neural_np

REWARDS = {
    "cosine": lambda u: np.cos(3.0 * u),
    "linear": lambda u: u,
}


class LoopTiming(NamedTuple):
    seeds: int
    agent_steps: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.agent_steps / self.seconds


def hidden_vector(dim: int, rng: np.random.Generator) -> np.ndarray:
    """The problems' default hidden vector: FN-UCB's stored one at d = 10, else random unit."""
    if dim == len(FNUCB_FIXED_A):
        return np.asarray(FNUCB_FIXED_A, np.float64)
    a = rng.standard_normal(dim)
    return a / np.linalg.norm(a)


def draw_run(rng: np.random.Generator, problem: str, a: np.ndarray, horizon: int, num_arms: int,
             noise_std: float = 0.01):
    """contexts [T, K, d] (cube law, unit norm) and noisy rewards [T, K] of one agent's run."""
    u = rng.uniform(-0.5, 0.5, (horizon, num_arms, a.size))
    contexts = u / np.linalg.norm(u, axis=-1, keepdims=True)
    rewards = REWARDS[problem](contexts @ a) + noise_std * rng.standard_normal((horizon, num_arms))
    return contexts, rewards


def linucb_agent(lam: float, beta: float) -> Callable:
    def run(contexts, rewards, rng):
        del rng
        return linear_np.linucb(contexts, rewards, lam, beta)

    return run


def kernel_ucb_agent(kernel: str, lam: float, beta: float, lengthscale: float) -> Callable:
    def run(contexts, rewards, rng):
        del rng
        return kernel_np.kernel_ucb(contexts, rewards, kernel, lam, beta, lengthscale)

    return run


def neural_ucb_agent(width: int, lam: float, beta: float, lr: float, train_steps: int,
                     train_until: int, covariance: str = "full") -> Callable:
    """The authors' setting: two layers with biases, N(0, 1) init, raw gradients, their loss."""

    def run(contexts, rewards, rng):
        d = contexts.shape[-1]
        init = (rng.standard_normal((width, d)), rng.standard_normal(width),
                rng.standard_normal(width), float(rng.standard_normal()))
        return neural_np.run(contexts, rewards, init, "ucb", lam, beta, lr, train_steps, train_until,
                             covariance=covariance, loss="authors", feature_scale="raw")

    return run


def fn_ucb_agents(width: int, lam: float, nu_tkn: float, nu_tk: float, D: float, lr: float,
                  **options) -> Callable:
    """FN-UCB over all N agents at once (a JOINT loop: contexts [T, N, K, d], rewards [T, N, K]),
    with the authors' network (biases, N(0, 1) init) and the given `fn_ucb_np.run` options."""

    def run(contexts, rewards, rng):
        d = contexts.shape[-1]
        init = (rng.standard_normal((width, d)), rng.standard_normal(width),
                rng.standard_normal(width), float(rng.standard_normal()))
        return fn_ucb_np.run(contexts, rewards, init, lam, nu_tkn, nu_tk, D, lr, **options)

    run.joint = True
    return run


def time_loop(agent: Callable, problem: str, seeds, num_agents: int, num_arms: int, dim: int,
              horizon: int) -> LoopTiming:
    """Wall-clock of the full loop over seeds and agents (context drawing included).

    An agent function with `joint = True` runs all agents together on stacked arrays
    (contexts [T, N, K, d]); otherwise it is called once per agent.
    """
    seeds = list(seeds)
    joint = getattr(agent, "joint", False)
    t0 = time.perf_counter()
    for seed in seeds:
        rng = np.random.default_rng(seed)
        a = hidden_vector(dim, rng)
        runs = []
        for _agent in range(num_agents):
            contexts, rewards = draw_run(rng, problem, a, horizon, num_arms)
            if joint:
                runs.append((contexts, rewards))
            else:
                agent(contexts, rewards, rng)
        if joint:
            agent(np.stack([c for c, _ in runs], axis=1), np.stack([r for _, r in runs], axis=1), rng)
    seconds = time.perf_counter() - t0
    return LoopTiming(len(seeds), len(seeds) * num_agents * horizon, seconds)
