"""One sweep as several processes, on one host or many, over JAX's own multi-process runtime.

Every process runs the same command (`bandits-jax run NAME ... --coordinator HOST:PORT
--num-processes P --process-id I`; with no flags under SLURM with more than one task or on a GKE TPU
slice of several hosts, and with BANDITS_JAX_DISTRIBUTED=auto on any other cluster that
`jax.distributed.initialize()` detects, such as a TPU VM pod slice). `initialize` starts the runtime before the first computation, then the CPU guard
(`_cpu.py`) creates the clients of that runtime.

The sweep (`sweep.run_experiment`) then cuts its seed list into P contiguous shares, the same in
every process because they depend on nothing but the list (not on what is stored, on timing, or
on a host's memory); process I computes the missing seeds of share I on its own devices, in chunks
sized by its own memory, and writes its chunk files into the shared output folder. After a barrier
(a collective over all processes) process 0 assembles the results, metadata, summary and plot from
the chunk files. Each seed's numbers depend only on its seed, so the results equal one process's bit
for bit. A process that dies takes its chunk in flight with it; the runtime's heartbeat then stops
the others (those still computing finish nothing more), and re-running the same command, with any
number of processes, computes only what is missing.
"""
from __future__ import annotations

import os
import re
from typing import Optional, Sequence

from .core import ConfigError

AUTO_ENV = "BANDITS_JAX_DISTRIBUTED"


def initialize(coordinator: Optional[str] = None, num_processes: Optional[int] = None,
               process_id: Optional[int] = None) -> bool:
    """Start JAX's multi-process runtime when asked to (all three arguments, or none under SLURM with
    more than one task or with $BANDITS_JAX_DISTRIBUTED=auto); False when this is a one-process run.
    Bad arguments raise ConfigError before anything starts. Call before the first computation."""
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given) and not all(given):
        raise ConfigError("a multi-process run takes --coordinator HOST:PORT, --num-processes P and --process-id I "
                          "together (the same coordinator and P in every process, I = 0..P-1)")
    import jax

    if all(given):
        check_arguments(coordinator, num_processes, process_id)
        if num_processes == 1:
            return False
        jax.distributed.initialize(coordinator, num_processes, process_id)
        return True
    if auto_requested(os.environ):
        jax.distributed.initialize()
        return True
    return False


def check_arguments(coordinator: str, num_processes: int, process_id: int) -> None:
    if not re.fullmatch(r"[^\s:]+:\d{1,5}", coordinator or ""):
        raise ConfigError(f"--coordinator takes HOST:PORT (process 0's address and a free port), got {coordinator!r}")
    if num_processes < 1:
        raise ConfigError(f"--num-processes must be at least 1, got {num_processes}")
    if not 0 <= process_id < num_processes:
        raise ConfigError(f"--process-id must be in 0..{num_processes - 1} for --num-processes {num_processes}, "
                          f"got {process_id}")


def auto_requested(env) -> bool:
    """True under SLURM with more than one task, on a TPU slice whose $TPU_WORKER_HOSTNAMES names
    several hosts (GKE), or with $BANDITS_JAX_DISTRIBUTED=auto; never with
    $BANDITS_JAX_DISTRIBUTED=off (one process inside a many-task allocation)."""
    choice = env.get(AUTO_ENV, "").lower()
    if choice in ("auto", "off"):
        return choice == "auto"
    if "," in env.get("TPU_WORKER_HOSTNAMES", ""):
        return True
    try:
        return int(env.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in env
    except ValueError:
        return False


def process() -> tuple:
    """(I, P): this process's index and the number of processes (0, 1 without the runtime)."""
    import jax

    return jax.process_index(), jax.process_count()


def share(seeds: Sequence[int]) -> list:
    """This process's contiguous share of `seeds` (the whole list in a one-process run)."""
    i, p = process()
    n = len(seeds)
    return list(seeds[i * n // p:(i + 1) * n // p])


def barrier(name: str) -> None:
    """Wait until every process reaches the barrier `name` (nothing in a one-process run)."""
    if process()[1] > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
