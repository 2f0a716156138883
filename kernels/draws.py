"""Random draws that XLA compiles quickly: flat Gaussian and uniform draws of any shape, and the
threefry hash lowered on CPU as straight-line code.

`jax.random.normal(key, shape)` numbers the elements of `shape` in row-major order and hashes each
index with threefry, so a flat draw of prod(shape) values reshaped gives the same numbers bit for
bit. XLA's CPU backend compiles the flat draw much faster: the threefry rounds form one long
elementwise chain, and over an array whose last axis is short (a [d, m] weight, a [V, K, d] of
contexts, any draw under a vmap over runs) LLVM unrolls that chain once per element of the axis.
"""
from __future__ import annotations

import math
import os

import jax
import numpy as np
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir


def flat_normal(key, shape, dtype):
    """`jax.random.normal(key, shape, dtype)`, the same numbers, drawn flat and reshaped."""
    return jax.random.normal(key, (math.prod(shape),), dtype).reshape(shape)


def flat_uniform(key, shape, dtype, minval=0.0, maxval=1.0):
    """`jax.random.uniform(key, shape, dtype, minval, maxval)`, the same numbers, drawn flat and reshaped."""
    return jax.random.uniform(key, (math.prod(shape),), dtype, minval=minval, maxval=maxval).reshape(shape)


# Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
# the rotation distances of its eight rounds, and the key-schedule parity constant.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = 0x1BD11BDA
_REGISTERED: list = []


def threefry2x32_unrolled(key1, key2, x1, x2):
    """Threefry-2x32 (20 rounds) of the counter words (x1, x2) under the key (key1, key2), all uint32
    arrays that broadcast together, as straight-line code: five blocks of four rounds, each block
    followed by a key injection. Returns the two output words."""
    ks = (key1, key2, key1 ^ key2 ^ np.uint32(PARITY))
    x = [x1 + ks[0], x2 + ks[1]]
    for block in range(5):
        for r in ROTATIONS[block % 2]:
            x[0] = x[0] + x[1]
            x[1] = x[0] ^ ((x[1] << np.uint32(r)) | (x[1] >> np.uint32(32 - r)))
        x[0] = x[0] + ks[(block + 1) % 3]
        x[1] = x[1] + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x


def unrolled_threefry_on_cpu() -> bool:
    """Lower jax's threefry primitive on CPU as `threefry2x32_unrolled` (once per process): the same
    numbers, compiled faster. jax lowers it on CPU as a loop over the five blocks, which XLA's CPU
    backend is slow to compile when the hash runs over an array (a [20, 10] normal draw under a vmap
    over runs), and every draw, split and fold_in of a step is one such hash (bench/README,
    "Compiling"). False when the environment opts out (BANDITS_JAX_UNROLLED_THREEFRY=0)."""
    if not _REGISTERED:
        on = os.environ.get("BANDITS_JAX_UNROLLED_THREEFRY", "1") != "0"
        if on:
            mlir.register_lowering(threefry2x32_p, mlir.lower_fun(threefry2x32_unrolled, multiple_results=True),
                                   platform="cpu")
        _REGISTERED.append(on)
    return _REGISTERED[0]
