"""The key scheme of every run: which random key each draw of a seed uses, whatever batch, device or process
the seed runs in, so that a seed's numbers depend on the seed alone.

    seed_key(seed, base_key)            the seed's root key
      problem_and_algorithm_keys(.)     the problem's key, and the algorithm key of stream 0
        init_keys(problem, algorithm)   the keys of the two `init`s
        problem_step_keys(problem, t)   step t's (contexts, rewards, arrivals) keys
        stream_key(algorithm, s)        the algorithm key of stream s (`Algorithm.stream`)
          algorithm_step_keys(., t)     step t's (select, update) keys

The runner, the trials and the problems that draw outside a run (the Coop problems' flat draws) all
take their keys from here.
"""
from __future__ import annotations

import jax


def seed_key(seed, base_key: int = 0):
    """The root key of seed `seed` (identical whatever batch the seed runs in)."""
    return jax.random.fold_in(jax.random.PRNGKey(base_key), seed)


def problem_and_algorithm_keys(key):
    """Split a seed key into the problem's key and the algorithm key of stream 0."""
    return jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)


def stream_key(algorithm_key, stream: int):
    """The algorithm key of `stream` (an int in [0, 2^32)) from the seed's stream-0 key.

    Stream 0 is the key itself, the key every algorithm had before streams existed. Stream s > 0
    is fold_in(fold_in(key, 2), s): the runner gives branch 0 of an algorithm key to `init` and
    branch 1 to the steps, and keeps branch 2 for the streams, so the keys it derives for one
    stream are none of those it derives for another.
    """
    if stream == 0:
        return algorithm_key
    return jax.random.fold_in(jax.random.fold_in(algorithm_key, 2), stream)


def problem_step_keys(problem_key, t):
    """(contexts, rewards, arrivals) keys of step t."""
    return jax.random.split(jax.random.fold_in(jax.random.fold_in(problem_key, 1), t), 3)


def algorithm_step_keys(algorithm_key, t):
    """(select, update) keys of step t."""
    return jax.random.split(jax.random.fold_in(jax.random.fold_in(algorithm_key, 1), t), 2)


def init_keys(problem_key, algorithm_key):
    """The keys of the problem's and the algorithm's `init`."""
    return jax.random.fold_in(problem_key, 0), jax.random.fold_in(algorithm_key, 0)
