"""The device shell of a run: the float precision it computes in, the devices of this process, and a batch
of runs laid out over them."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .core import PRECISIONS, ConfigError


def precision_scope(precision: str):
    """A context in which JAX computes in the requested float precision, whatever the session's own
    setting: float64 switches 64-bit types on, float32 switches them off (so JAX_ENABLE_X64=1 in the
    environment, or an enclosing `jax.enable_x64(True)`, never turns a run labelled float32 into a
    float64 one). Both restore the session's setting on exit."""
    if precision in PRECISIONS:
        return jax.enable_x64(precision == "float64")
    raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")


def device_mesh():
    """This process's devices (all of them in a one-process run; `distributed` gives each process of a
    multi-process run seeds of its own, so no compiled call spans processes)."""
    return Mesh(np.array(jax.local_devices()), ("runs",))


def sharded_runs(values, padded: int, mesh, dtype):
    """values[B] padded to `padded` with copies of the last, as an array sharded over the runs axis."""
    values = np.asarray(values)
    values = np.concatenate([values, np.repeat(values[-1:], padded - len(values))])
    return jax.device_put(jnp.asarray(values, dtype), NamedSharding(mesh, PartitionSpec("runs")))
