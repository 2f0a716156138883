"""Fixed-arm Gaussian worlds for phase-level (pure exploration) experiments.

`gaussian_arms`: each of N agents has K arms whose means are a per-seed random permutation of the
staircase gap * (K - 1, K - 2, ..., 0), so every agent's best arm leads the second by exactly
`gap`, and rewards carry Gaussian noise of a known standard deviation. A textbook instance: the
sample complexity of best-arm identification on it scales with K / gap^2 (Even-Dar, Mannor and
Mansour, JMLR 2006), which makes it a check that a pure-exploration algorithm stops when it should.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..core import Arms, ConfigError, flat_normal, float_dtype


def gaussian_arms(num_agents: int = 1, num_arms: int = 10, gap: float = 0.5, noise_std: float = 1.0) -> Arms:
    """N agents with K Gaussian arms each, best arm ahead of the second by `gap`."""
    for name, value in (("num_agents", num_agents), ("num_arms", num_arms)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"gaussian-arms: {name} must be a positive integer, got {value!r}")
    if num_arms < 2:
        raise ConfigError(f"gaussian-arms: num_arms must be at least 2 (one arm leaves nothing to identify), "
                          f"got {num_arms}")
    if not gap > 0 or not noise_std > 0:
        raise ConfigError(f"gaussian-arms: gap and noise_std must be > 0, got gap={gap}, noise_std={noise_std}")
    staircase = gap * jnp.arange(num_arms - 1, -1, -1)

    def init(key):
        """{"means": [N, K]}: each agent's row a random permutation of the staircase."""
        keys = jax.random.split(key, num_agents)
        means = jax.vmap(lambda k: jax.random.permutation(k, staircase))(keys)
        return {"means": means.astype(float_dtype())}

    def pull(instance, counts, key):
        """Sum of counts[n, k] rewards of arm k of agent n: counts * mean + noise_std * sqrt(counts) * z,
        exact in law for Gaussian noise."""
        means = instance["means"]
        counts = counts.astype(means.dtype)
        return counts * means + noise_std * jnp.sqrt(counts) * flat_normal(key, means.shape, means.dtype)

    def answer(instance):
        return jnp.argmax(instance["means"], axis=1).astype(jnp.int32)

    return Arms("gaussian-arms", num_agents, num_arms, init, pull, answer,
                description=f"{num_agents} agent(s) x {num_arms} Gaussian arms, staircase gap {gap}, "
                            f"noise std {noise_std}")
