"""Gaussian and uniform draws of any shape that XLA compiles quickly.

`jax.random.normal(key, shape)` numbers the elements of `shape` in row-major order and hashes each
index with threefry, so a flat draw of prod(shape) values reshaped gives the same numbers bit for
bit. XLA's CPU backend compiles the flat draw much faster: the threefry rounds form one long
elementwise chain, and over an array whose last axis is short (a [d, m] weight, a [V, K, d] of
contexts, any draw under a vmap over runs) LLVM unrolls that chain once per element of the axis.
"""
from __future__ import annotations

import math

import jax


def flat_normal(key, shape, dtype):
    """`jax.random.normal(key, shape, dtype)`, the same numbers, drawn flat and reshaped."""
    return jax.random.normal(key, (math.prod(shape),), dtype).reshape(shape)


def flat_uniform(key, shape, dtype, minval=0.0, maxval=1.0):
    """`jax.random.uniform(key, shape, dtype, minval, maxval)`, the same numbers, drawn flat and reshaped."""
    return jax.random.uniform(key, (math.prod(shape),), dtype, minval=minval, maxval=maxval).reshape(shape)
