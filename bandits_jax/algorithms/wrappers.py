"""Algorithm wrappers that change how a registered algorithm is sized or checked, not what it does.

`capped_history(algorithm, rows)`: an algorithm with per-agent histories (`state.n` [N], `state.y`
[N, C], e.g. N-KernelUCB) keeps at most `rows` history rows per agent; a step at which an active
agent's history is already full reports ERR_CAPPED_HISTORY (its point would be lost), so an
overflow is never silent. The histories are sized by demand (`Sizing.demand`: the fullest agent's
count): a batch starts them small and the runner re-runs a segment with twice the rows when one
overflows, up to `rows`, where the error stands. Under a one-active protocol an agent holds about
t / N points, so N-KernelUCB's histories stay at a fraction of `rows`; on an all-active problem they
grow with t and the re-runs cost time, not numbers (padding changes no number).
(`base.on_candidates` is the other registered wrapper.)
"""
from __future__ import annotations

import jax.numpy as jnp

from ..core import Algorithm, ConfigError, Sizes

ERR_CAPPED_HISTORY = 1 << 16
CAPPED_HISTORY_MESSAGE = "a client's history outgrew nkernel_capacity; raise nkernel_capacity"


def capped_history(algorithm: Algorithm, rows: int = 256) -> Algorithm:
    """At most `rows` history rows per agent; an outgrown history is the error ERR_CAPPED_HISTORY."""
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
        raise ConfigError(f"capped_history: rows must be a positive integer, got {rows!r}")
    if ERR_CAPPED_HISTORY in algorithm.errors:
        raise ValueError(f"{algorithm.name} already uses error bit {ERR_CAPPED_HISTORY}")
    if algorithm.sizing is None or algorithm.sizing.demand is not None:
        raise ConfigError(f"capped_history: {algorithm.name} has no time-sized per-agent histories to cap")

    def capped_rows(spec, t_end):
        return max(1, min(int(t_end), rows))

    def init(key, spec, params, sizes, public=None):
        return algorithm.init(key, spec, params, held(sizes), public)

    def resize(state, sizes):
        return algorithm.sizing.resize(state, held(sizes))

    def update(params, state, step, actions, rewards, aux, key):
        full = jnp.any(step.active & (state.n >= state.y.shape[-1]))
        state, rep = algorithm.update(params, state, step, actions, rewards, aux, key)
        return state, rep._replace(errors=rep.errors | jnp.where(full, ERR_CAPPED_HISTORY, 0))

    sizing = algorithm.sizing._replace(rows=capped_rows, resize=resize, demand=lambda state: jnp.max(state.n),
                                       demand_limit=rows, overflow=ERR_CAPPED_HISTORY)
    return algorithm._replace(init=init, update=update, sizing=sizing,
                              errors={**algorithm.errors, ERR_CAPPED_HISTORY: CAPPED_HISTORY_MESSAGE})


def held(sizes: Sizes) -> Sizes:
    """The Sizes the wrapped algorithm sizes its histories by: the demand rows, where there are any."""
    return sizes if sizes.demand_rows is None else sizes._replace(rows=sizes.demand_rows)
