"""What the storages of one distributed kernel protocol share: error bits, the rows a step adds, and
the DUETS baseline's trigger and communication count.

DisKernelUCB keeps its data as rows (`dis_kernel`) or over a public candidate set
(`candidate_kernel`), Approx-DisKernelUCB likewise (`approx_dis_kernel`, `candidate_approx`). The
pieces both storages of one algorithm need live here, below both, so that the factory of a variant
imports its storages and no storage imports the factory's module. Nothing here imports another
module of `algorithms/`.

Error bits are per algorithm (bits of different algorithms may coincide):
    DisKernelUCB:        ERR_CAPACITY (pooled rows outgrown), ERR_BUFFER (a client's new data outgrew
                         buffer_capacity: rows, or distinct candidates with the candidate storage);
    Approx-DisKernelUCB: ERR_DICT (re-sampled dictionary outgrew dict_capacity), ERR_HISTORY (history
                         rows outgrown), ERR_SLOTS (a client held more than buffer_capacity distinct
                         candidates, candidate storage).
"""
from __future__ import annotations

import jax.numpy as jnp

from ...core import report

# DisKernelUCB
# runs under one vmap on a CPU (`Algorithm.cpu_vmap`): a synchronisation is a `batch_cond` that a vmapped
# chunk computes when any of its runs syncs, so one run a chunk syncs only when it must (bench/README)
LOCK_STEP_VMAP = 1
ERR_CAPACITY = 1
ERR_BUFFER = 2
CAPACITY_MESSAGE = "the pooled data outgrew its capacity; give init a capacity of at least the horizon"
BUFFER_MESSAGE = ("a client's unsynchronised data outgrew buffer_capacity; raise buffer_capacity "
                  "(or lower the threshold)")

# Approx-DisKernelUCB
ERR_DICT = 1
ERR_HISTORY = 2
ERR_SLOTS = 4
DICT_MESSAGE = "the re-sampled dictionary outgrew dict_capacity; raise dict_capacity"
HISTORY_MESSAGE = "the history outgrew its rows; give init rows for the whole horizon"
SLOTS_MESSAGE = ("a client held more than buffer_capacity distinct candidates since the last synchronisation; "
                 "raise buffer_capacity")


def async_rows(spec, t_end: int) -> int:
    """Pooled rows that steps [0, t_end) need with one active client a step: t_end (at least 1)."""
    del spec
    return max(1, int(t_end))


def duets_rows(spec, t_end: int) -> int:
    """Pooled rows that steps [0, t_end) need when every client acts at every step: N t_end (at least 1)."""
    return max(1, spec.num_agents * int(t_end))


def duets_trigger(config, params, active, elapsed, loc_n, logdets):
    """DisKernelUCB in the DUETS setting: whether ANY active client ([N] bool) has count * log-det
    ratio (logdets [N]) > threshold, count the steps since the last sync (elapsed, this one included)
    or its own new points (loc_n [N]) with config.trigger_count "client"."""
    count = elapsed if config.trigger_count == "elapsed" else loc_n
    return jnp.any(active & (count.astype(logdets.dtype) * logdets > params["threshold"]))


def duets_report(dtype, d: int, N: int, moved, trigger, errors, logdets, n, num_syncs):
    """DisKernelUCB in the DUETS setting: the step's Report when `moved` raw points (d + 1 scalars
    each) were pooled, in the DUETS paper's units: up = one client's share (the mean over clients),
    down = one broadcast of them all; the diagnostic comm_code is the authors' code's count,
    (d + 1) * moved."""
    moved = jnp.asarray(moved, dtype)
    return report(dtype, (d + 1) * moved / N, (d + 1) * moved, trigger, errors=errors, trigger=trigger,
                  logdet_ratio=jnp.max(logdets), n_global=n, num_syncs=num_syncs, comm_code=(d + 1) * moved)
