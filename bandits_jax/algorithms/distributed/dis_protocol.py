"""What the storages of one distributed kernel protocol share: error bits, the rows a step adds, the
DUETS baseline's trigger, and the communication counts of both variants of each protocol.

Communication is in `core.COMM_UNIT` (docs/design.md, "The unit of communication"), the same count for
the asynchronous variant and the DUETS one of a protocol (`raw_point_comm`, `sync_comm`); the DUETS
paper's own count (Eq. 2: the uplink averaged over agents, a broadcast counted once) is the diagnostic
comm_paper of the DUETS variants, the authors' code's count the diagnostic comm_code.

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
    """DisKernelUCB in the DUETS setting: the step's Report when `moved` raw points (d + 1 scalars each)
    were pooled, counted as the asynchronous variant counts them (`raw_point_comm`). Diagnostics:
    comm_paper, the DUETS paper's count (spec duets §4.2: one client's share of the uploads, the mean
    over clients, plus one broadcast of all the points, (d + 1) moved (1 / N + 1)); comm_code, the
    authors' code's count, (d + 1) moved (the uploads)."""
    moved = jnp.asarray(moved, dtype)
    up, down = raw_point_comm(moved, d, N, dtype)
    return report(dtype, up, down, trigger, errors=errors, trigger=trigger, logdet_ratio=jnp.max(logdets),
                  n_global=n, num_syncs=num_syncs, comm_paper=(d + 1) * moved * (1.0 / N + 1.0),
                  comm_code=(d + 1) * moved)


def raw_point_comm(moved, d: int, N: int, dtype):
    """(up, down) scalars when `moved` raw points (d + 1 scalars each) are uploaded once and the server
    forwards each to the N - 1 clients that lack it."""
    moved = jnp.asarray(moved, dtype)
    return (d + 1) * moved, (d + 1) * (N - 1) * moved


# Approx-DisKernelUCB
def sync_comm(d: int, N: int, uploaded, m, trigger):
    """(up, down) scalars of a synchronisation (spec B3 (a)-(d), duets §4.3), zero without `trigger`: the
    clients upload their kept points, d scalars each (`uploaded` in all, `distinct_kept`), and their
    statistics Z^T Z, Z^T y (m^2 + m each); the server broadcasts the new dictionary (d m) and the summed
    statistics (m^2 + m) to all N clients. m: the new dictionary's size (a float)."""
    stats = m * m + m
    up = d * uploaded.astype(m.dtype) + N * stats
    down = N * (d * m + stats)
    return jnp.where(trigger, up, 0.0), jnp.where(trigger, down, 0.0)


def paper_sync_comm(d: int, N: int, uploaded, m, trigger):
    """The DUETS paper's count of the same synchronisation (spec duets §4.3, Eq. 2): the mean over clients
    of the uploads, d uploaded / N + m^2 + m, plus one broadcast, d m + m^2 + m; zero without `trigger`."""
    stats = m * m + m
    return jnp.where(trigger, d * uploaded.astype(m.dtype) / N + stats + d * m + stats, 0.0)


def distinct_kept(X, owner, keep):
    """The number of distinct (owner, point) pairs among the kept rows (keep [C]) of X [C, d] with owners
    owner [C]: a client uploads each of its kept points once, however often it saw it. One lexicographic
    sort (kept rows first, then by owner and coordinates), O(C log C) comparisons of rows."""
    order = jnp.lexsort((*X.T[::-1], owner, (~keep).astype(jnp.int32)))
    Xs, os, ks = X[order], owner[order], keep[order]
    first = jnp.concatenate([jnp.ones((1,), bool), jnp.any(Xs[1:] != Xs[:-1], axis=1) | (os[1:] != os[:-1])])
    return jnp.sum(ks & first)
