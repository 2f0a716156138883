"""Plain NumPy best-arm identification, agent by agent and arm by arm, from the textbook rules.

Uniform allocation: every arm of every agent is pulled budget // K times; the answer is the arm of
highest empirical mean.

Successive elimination (Even-Dar, Mannor and Mansour 2006, Algorithm 3, sigma-sub-Gaussian radius):
    round r = 1, 2, ...: each agent with two or more surviving arms pulls each of them once;
    c_r = sigma * sqrt(2 * log(4 K r^2 / delta) / r); an arm is dropped when
    (best empirical mean among that agent's survivors) - (its empirical mean) >= 2 c_r.
    Stop when every agent has one survivor or after max_rounds rounds.

Inputs: the arm means [N, K] and `draw(counts, r) -> [N, K]`, the summed rewards of `counts[n, k]`
pulls in round r (round 0 for uniform allocation), so a test can feed the random numbers the JAX
code used. Returns {"correct", "samples", "rounds", "errors"} as Python numbers.
"""
import math

import numpy as np


def uniform_allocation(means, budget, draw):
    n_agents, n_arms = means.shape
    per_arm = budget // n_arms
    sums = draw(np.full((n_agents, n_arms), per_arm), 0)
    correct = all(int(np.argmax(sums[n])) == int(np.argmax(means[n])) for n in range(n_agents))
    return {"correct": correct, "samples": per_arm * n_agents * n_arms, "rounds": 1, "errors": 0}


def successive_elimination(means, delta, sigma, max_rounds, draw):
    n_agents, n_arms = means.shape
    alive = [set(range(n_arms)) for _ in range(n_agents)]
    sums = np.zeros((n_agents, n_arms))
    counts = np.zeros((n_agents, n_arms), dtype=int)
    r = 0
    while r < max_rounds and any(len(a) > 1 for a in alive):
        r += 1
        pulls = np.zeros((n_agents, n_arms), dtype=int)
        for n in range(n_agents):
            if len(alive[n]) > 1:
                for k in alive[n]:
                    pulls[n, k] = 1
        drawn = draw(pulls, r)
        radius = sigma * math.sqrt(2.0 * math.log(4.0 * n_arms * r * r / delta) / r)
        for n in range(n_agents):
            if len(alive[n]) < 2:
                continue
            for k in alive[n]:
                sums[n, k] += drawn[n, k]
                counts[n, k] += 1
            best = max(sums[n, k] / counts[n, k] for k in alive[n])
            alive[n] = {k for k in alive[n] if best - sums[n, k] / counts[n, k] < 2.0 * radius}
    answers = [max(alive[n], key=lambda k: (sums[n, k] / max(counts[n, k], 1), -k)) for n in range(n_agents)]
    correct = all(answers[n] == int(np.argmax(means[n])) for n in range(n_agents))
    errors = int(any(len(a) > 1 for a in alive))
    return {"correct": correct, "samples": int(counts.sum()), "rounds": r, "errors": errors}
