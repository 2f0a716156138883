"""Best-arm identification on fixed arms, as phase-level trials (`core.Trial`).

Each of the N agents of an `Arms` world identifies its own best arm, with no communication: the
plain baselines of pure exploration, and the smallest algorithms that exercise the sweep's trials.

- `uniform_allocation(budget)`: fixed budget. Every agent pulls each of its K arms budget // K
  times and answers the arm of highest empirical mean.
- `successive_elimination(delta, sigma, max_rounds)`: fixed confidence (Even-Dar, Mannor and
  Mansour, JMLR 2006, Algorithm 3). In round r every agent pulls each of its surviving arms once and
  drops each arm a whose empirical mean trails the best surviving one by at least 2 c_r, with
  c_r = sigma sqrt(2 log(4 K r^2 / delta) / r), the sigma-sub-Gaussian form of the paper's
  Hoeffding radius; an agent stops when one arm survives. With probability at least 1 - delta
  per agent the best arm is never dropped.

Outcomes of both: "correct" (every agent's answer is its best arm), "samples" (pulls over all
agents) and "rounds" (pulling rounds until the last agent stopped).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ...core import ConfigError, Outcome, Trial, float_dtype
from ..base import check_capacity, signed_params

OUTCOMES = {
    "correct": Outcome("rate", "every agent named its best arm"),
    "samples": Outcome("mean", "arm pulls, all agents together"),
    "rounds": Outcome("mean", "pulling rounds until the last agent stopped"),
}
SIGNS = {"delta": "probability", "sigma": "positive"}  # successive elimination
MAX_ROUNDS = 1  # error bit: some agent still had two arms after max_rounds


def uniform_allocation(budget: int = 1000) -> Trial:
    """Fixed budget: each agent pulls every arm budget // K times (budget: pulls per agent, >= K)."""
    check_capacity("Uniform allocation", "budget", budget)

    def run(key, params, arms, public, pull):
        del params, public
        if budget < arms.num_arms:  # raised while tracing, before anything compiles
            raise ConfigError(f"Uniform allocation: budget {budget} is below the {arms.num_arms} arms of "
                              f"{arms.name}; give every arm at least one pull")
        per_arm = budget // arms.num_arms
        counts = jnp.full((arms.num_agents, arms.num_arms), per_arm, jnp.int32)
        sums = pull(counts, key)
        return _outcome(sums, jnp.asarray(per_arm * arms.num_agents * arms.num_arms),
                        jnp.asarray(1), jnp.asarray(0, jnp.int32))

    return Trial("Uniform allocation", {}, run, OUTCOMES,
                 description=f"fixed budget of {budget} pulls per agent, spread evenly over its arms")


def successive_elimination(delta: float = 0.05, sigma: float = 1.0, max_rounds: int = 100_000) -> Trial:
    """Fixed confidence delta for sigma-sub-Gaussian rewards; at most max_rounds pulling rounds."""
    check_capacity("Successive elimination", "max_rounds", max_rounds)
    declared = signed_params("Successive elimination", SIGNS, {"delta": delta, "sigma": sigma})

    def run(key, params, arms, public, pull):
        del public
        n, k = arms.num_agents, arms.num_arms
        dtype = float_dtype()

        def going(s):
            return (s["r"] < max_rounds) & jnp.any(s["alive"].sum(1) > 1)

        def one_round(s):
            r = s["r"] + 1
            pulling = s["alive"] & (s["alive"].sum(1, keepdims=True) > 1)
            sums = s["sums"] + pull(pulling.astype(jnp.int32), jax.random.fold_in(key, r))
            counts = s["counts"] + pulling
            mean = sums / jnp.maximum(counts, 1)
            radius = params["sigma"] * jnp.sqrt(2.0 * jnp.log(4.0 * k * r.astype(dtype) ** 2 / params["delta"]) / r)
            best = jnp.max(jnp.where(s["alive"], mean, -jnp.inf), axis=1, keepdims=True)
            dropped = pulling & (best - mean >= 2.0 * radius)
            return {"r": r, "sums": sums, "counts": counts, "alive": s["alive"] & ~dropped}

        start = {"r": jnp.asarray(0), "sums": jnp.zeros((n, k), dtype), "counts": jnp.zeros((n, k), jnp.int32),
                 "alive": jnp.ones((n, k), bool)}
        end = lax.while_loop(going, one_round, start)
        mean = jnp.where(end["alive"], end["sums"] / jnp.maximum(end["counts"], 1), -jnp.inf)
        errors = jnp.where(jnp.any(end["alive"].sum(1) > 1), MAX_ROUNDS, 0).astype(jnp.int32)
        return _outcome(mean, end["counts"].sum(), end["r"], errors)

    return Trial("Successive elimination", declared, run, OUTCOMES,
                 errors={MAX_ROUNDS: f"some agent kept two or more arms after max_rounds = {max_rounds} rounds; "
                                     f"raise max_rounds"},
                 description="fixed-confidence successive elimination (Even-Dar et al. 2006)")


def _outcome(scores, samples, rounds, errors) -> dict:
    """The trial's output: every agent's answer argmax(scores[n]) (the runner judges it into "correct")."""
    return {"answer": jnp.argmax(scores, axis=1), "samples": samples, "rounds": rounds, "errors": errors}
