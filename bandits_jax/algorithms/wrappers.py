"""Algorithm wrappers that change how a registered algorithm is sized or checked, not what it does.

`capped_history(algorithm, rows)`: an algorithm with per-agent histories (`state.n` [N], `state.y`
[N, C], e.g. N-KernelUCB) keeps at most `rows` history rows per agent; a step at which an active
agent's history is already full reports ERR_CAPPED_HISTORY (its point would be lost), so an
overflow is never silent. (`base.on_candidates` is the other registered wrapper.)
"""
from __future__ import annotations

import jax.numpy as jnp

from ..core import Algorithm, ConfigError

ERR_CAPPED_HISTORY = 1 << 16
CAPPED_HISTORY_MESSAGE = "a client's history outgrew nkernel_capacity; raise nkernel_capacity"


def capped_history(algorithm: Algorithm, rows: int = 256) -> Algorithm:
    """At most `rows` history rows per agent; an outgrown history is the error ERR_CAPPED_HISTORY."""
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
        raise ConfigError(f"capped_history: rows must be a positive integer, got {rows!r}")
    if ERR_CAPPED_HISTORY in algorithm.errors:
        raise ValueError(f"{algorithm.name} already uses error bit {ERR_CAPPED_HISTORY}")

    def capped_rows(spec, t_end):
        return max(1, min(int(t_end), rows))

    def update(params, state, step, actions, rewards, aux, key):
        full = jnp.any(step.active & (state.n >= state.y.shape[-1]))
        state, rep = algorithm.update(params, state, step, actions, rewards, aux, key)
        return state, rep._replace(errors=rep.errors | jnp.where(full, ERR_CAPPED_HISTORY, 0))

    return algorithm._replace(update=update, sizing=algorithm.sizing._replace(rows=capped_rows),
                              errors={**algorithm.errors, ERR_CAPPED_HISTORY: CAPPED_HISTORY_MESSAGE})
