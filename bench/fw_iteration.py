"""Where a CoKernelFC / CoKernelFB round spends its time: one Frank-Wolfe design iteration.

`python -m bench.fw_iteration` times the library's `kernels.design.xy_design` (2000 Frank-Wolfe
iterations, each one LU solve of an m x m system and the pair norms) under `vmap` at S = 1, 10 and
100 designs, and the NumPy reference's `fw_design` on one, on the CoPE-KB world's size (m = n V = 30
arm-agent pairs, within-agent pairs only). It prints microseconds per design-iteration, and the same
with the solve taken out of the JAX loop (`design_gram` replaced by a product of the same shapes), so
that the solve's share shows. The section is a profile, not part of `python -m bench`.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import cpu_guard
from bandits_jax.kernels import design

from reference import design_np

AGENTS, ARMS, RANK, XI, ITERS = 5, 6, 8, 1e-10, 2000


def instance(seed: int = 0):
    """(K [m, m] of rank RANK, within-agent pair mask [m, m], support [m]) with m = AGENTS * ARMS."""
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(AGENTS * ARMS, RANK))
    agent = np.repeat(np.arange(AGENTS), ARMS)
    pairs = (agent[:, None] == agent[None, :]) & np.triu(np.ones((AGENTS * ARMS,) * 2, bool), 1)
    return phi @ phi.T / RANK, pairs, np.ones(AGENTS * ARMS, bool)


def jax_seconds(K, pairs, support, S: int, solve: bool = True) -> float:
    """Seconds of one compiled, vmapped xy_design over S copies of the instance (compiled first)."""
    gram = design.design_gram if solve else (lambda K_, lam, xi: K_ * lam[None, :] + xi * K_)
    args = tuple(jnp.asarray(np.broadcast_to(a, (S,) + a.shape).copy()) for a in (K, pairs, support))
    original = design.design_gram
    design.design_gram = gram
    try:
        fn = jax.jit(jax.vmap(lambda k, p, s: design.xy_design(k, XI, p, s, iters=ITERS)[0])).lower(*args).compile()
    finally:
        design.design_gram = original
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def numpy_seconds(K, pairs, support) -> float:
    start = time.perf_counter()
    design_np.fw_design(K, XI, np.argwhere(pairs), support.astype(float), iters=ITERS)
    return time.perf_counter() - start


def main() -> None:
    cpu_guard()
    with jax.enable_x64(True):
        K, pairs, support = instance()
        print(f"m = {K.shape[0]}, {ITERS} Frank-Wolfe iterations a design; microseconds per design-iteration")
        print(f"  NumPy fw_design, one design: {numpy_seconds(K, pairs, support) / ITERS * 1e6:.1f}")
        for S in (1, 10, 100):
            full = jax_seconds(K, pairs, support, S) / ITERS / S * 1e6
            bare = jax_seconds(K, pairs, support, S, solve=False) / ITERS / S * 1e6
            print(f"  JAX xy_design, S = {S:3d}: {full:.1f} (without the solve: {bare:.1f})")


if __name__ == "__main__":
    main()
