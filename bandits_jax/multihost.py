"""One sweep as several processes, on one host or many, over JAX's own multi-process runtime.

Every process runs the same command (`bandits-jax run NAME ... --coordinator HOST:PORT
--num-processes P --process-id I`; with no flags under SLURM with more than one task or on a GKE TPU
slice of several hosts, and with BANDITS_JAX_DISTRIBUTED=auto on any other cluster that
`jax.distributed.initialize()` detects, such as a TPU VM pod slice).

Joining. The runtime must start before jax creates any backend, and a process that stops on bad
input after joining leaves the others waiting. So each process first checks its own input
(`check_before_joining`: the flags, the configuration, the curves; in a forked child where that
would create a backend), and a bad flag stops that process alone, with one line and status 2,
before it joins. Then `initialize` starts the runtime and creates jax's clients (their first
exchange) within $BANDITS_JAX_JOIN_TIMEOUT seconds (60 by default): a process that is still waiting
then prints one line saying that not every process joined and exits with status 1. (Left to
itself, jax 0.10 waits 300 s and then aborts the process with a C++ stack trace.)

The sweep (`sweep.run_experiment`) then cuts its seed list into P contiguous shares, the same in
every process because they depend on nothing but the list (not on what is stored, on timing, or
on a host's memory); process I computes the missing seeds of share I on its own devices, in chunks
sized by its own memory, and writes its chunk files into the shared output folder. After a barrier
process 0 assembles the results, metadata, summary and plot from the chunk files. Each seed's
numbers depend only on its seed, so the results equal one process's bit for bit.

Barriers and leaving. A `barrier` is kept in the runtime's key-value store and waits as long as the
slowest share takes (jax's collective barrier on the CPU gives up after 30 s, so shares that end
more than 30 s apart failed). A process whose run raises records why there (`leave_together`), so
the others stop at their next barrier with one line naming it; every process then waits for all at
a last barrier, so that they leave together (jax's shutdown otherwise waits about 100 s for the
missing ones and aborts). A process that dies outright (killed, out of memory) is found by the
runtime's heartbeat, which ends the others after about 100 s with its own C++ message. In every
case re-running the same command, with any number of processes, computes only what is missing.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
import traceback
from typing import Callable, Optional, Sequence

from ._cpu import cpu_guard
from .core import ConfigError, first_line

AUTO_ENV = "BANDITS_JAX_DISTRIBUTED"
JOIN_TIMEOUT_ENV = "BANDITS_JAX_JOIN_TIMEOUT"
JOIN_TIMEOUT_S = 60  # how long a process waits for the others to join, unless $BANDITS_JAX_JOIN_TIMEOUT says
JAX_SLACK_S = 30  # jax's own join deadline comes this much later, so the one-line message comes first
EXIT_STOPPED = 1  # the exit status of a process stopped by another one (bad input is 2)
POLL_S = 0.5  # how often a barrier looks at the key-value store
_KEYS = "bandits_jax/"  # the runtime key-value store's keys of this package
_ENTERED: dict = {}  # barrier name -> times this process entered it (the same in every process that goes on)


class Stopped(RuntimeError):
    """This process cannot go on with the sweep: not every process joined, another one stopped, or
    the runtime failed. The command line prints the message as one line and exits with status 1."""


def requested(coordinator: Optional[str] = None, num_processes: Optional[int] = None,
              process_id: Optional[int] = None, env=None) -> bool:
    """True when the run asks for several processes: all three flags with P > 1, or none of them
    under SLURM with more than one task or with $BANDITS_JAX_DISTRIBUTED=auto (`auto_requested`).
    Bad flags raise ConfigError."""
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given) and not all(given):
        raise ConfigError("a multi-process run takes --coordinator HOST:PORT, --num-processes P and --process-id I "
                          "together (the same coordinator and P in every process, I = 0..P-1)")
    if all(given):
        check_arguments(coordinator, num_processes, process_id)
        return num_processes > 1
    return auto_requested(os.environ if env is None else env)


def initialize(coordinator: Optional[str] = None, num_processes: Optional[int] = None,
               process_id: Optional[int] = None) -> bool:
    """Start JAX's multi-process runtime when asked to (`requested`) and create jax's clients (the
    CPU guard's, `_cpu.py`), all within the join timeout (`join_timeout`); False when this is a
    one-process run. Bad arguments raise ConfigError before anything starts. Call before the first
    computation, after `check_before_joining`."""
    if not requested(coordinator, num_processes, process_id):
        return False
    timeout = join_timeout(os.environ)
    if coordinator is None:
        _join({}, "the cluster's coordinator", "this process", timeout)
    else:
        _join({"coordinator_address": coordinator, "num_processes": num_processes, "process_id": process_id},
              coordinator, f"process {process_id} of {num_processes}", timeout)
    return True


def check_arguments(coordinator: str, num_processes: int, process_id: int) -> None:
    """ConfigError, naming the flag, for a coordinator that is not HOST:PORT with a port in 1..65535,
    fewer than one process, or a process index outside 0..P-1."""
    match = re.fullmatch(r"[^\s:]+:(\d{1,5})", coordinator or "")
    if not match:
        raise ConfigError(f"--coordinator takes HOST:PORT (process 0's address and a free port), got {coordinator!r}")
    if not 1 <= int(match.group(1)) <= 65535:
        raise ConfigError(f"--coordinator's port must be in 1..65535 (a free port on process 0's host), "
                          f"got {coordinator!r}")
    if num_processes < 1:
        raise ConfigError(f"--num-processes must be at least 1, got {num_processes}")
    if not 0 <= process_id < num_processes:
        raise ConfigError(f"--process-id must be in 0..{num_processes - 1} for --num-processes {num_processes}, "
                          f"got {process_id}")


def join_timeout(env) -> int:
    """Seconds a process waits for all to join: $BANDITS_JAX_JOIN_TIMEOUT (a whole number, at least 1)
    or 60. Raise it when the processes are started by hand, or far apart."""
    raw = env.get(JOIN_TIMEOUT_ENV, "").strip()
    if not raw:
        return JOIN_TIMEOUT_S
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"${JOIN_TIMEOUT_ENV} takes the seconds a process waits for the others to join "
                          f"(a whole number, at least 1), got {raw!r}")
    return int(raw)


def check_before_joining(check: Callable[[], None]) -> None:
    """Run `check` (what the run refuses before computing) before this process joins the others, so
    bad input stops it alone. Building an experiment's curves may create a jax backend (a problem
    that reads its data), and the runtime must start before any exists, so the check runs in a
    forked child on the CPU (in this process where a backend exists already, or there is no fork).
    The check's ConfigError or FileNotFoundError comes back as a ConfigError with its message; any
    other failure is printed with its traceback and raises Stopped."""
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", lambda: False)()
    if started or not hasattr(os, "fork"):
        check()
        return
    sys.stdout.flush()  # what is buffered now would be written twice, once by the child
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os._exit(_checked_child(check, write))  # never the parent's exit handlers
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode("utf-8", "replace")
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status == 2:
        raise ConfigError(message)
    if status != 0:
        raise Stopped(f"checking the run before joining the others failed (status {status}, see above)")


def _checked_child(check, write: int) -> int:
    """In the forked child: run `check` on the CPU; 0 when it passes, 2 with the message written to
    `write` for bad input, 1 (after printing the traceback) for anything else."""
    try:
        import jax

        jax.config.update("jax_platforms", "cpu")
        cpu_guard()
        check()
        return 0
    except (ConfigError, FileNotFoundError) as err:
        os.write(write, str(err).encode("utf-8"))
        return 2
    except BaseException:  # noqa: BLE001 - the child reports every failure and leaves
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


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


def barrier(name: str, heed_stops: bool = True) -> None:
    """Wait, as long as it takes, until every process reaches the barrier `name` (nothing in a
    one-process run). With `heed_stops`, Stopped as soon as another process has recorded that it
    stopped (`leave_together`)."""
    i, p = process()
    if p == 1:
        return
    client = _client()
    if client is None:  # a jax that keeps its client elsewhere: its collective barrier
        from jax.experimental import multihost_utils

        _runtime(lambda: multihost_utils.sync_global_devices(name))
        return
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    _ENTERED[slug] = _ENTERED.get(slug, 0) + 1
    here = f"{_KEYS}barrier/{slug}/{_ENTERED[slug]}/"
    _runtime(lambda: client.key_value_set(here + str(i), name))
    while True:
        if heed_stops:
            _raise_if_stopped(client)
        if len(_runtime(lambda: client.key_value_dir_get(here))) >= p:
            return
        time.sleep(POLL_S)


@contextlib.contextmanager
def leave_together():
    """Around a multi-process run, so that every process leaves it at the same time. A process whose
    run raises an Exception records its first line for the others (whose next barrier raises Stopped
    naming it); each then waits for all at a last barrier, and re-raises. A process whose own run
    went through while another stopped raises Stopped after the last barrier. Ctrl-C leaves at once."""
    if process()[1] == 1:
        yield
        return
    client = _client()
    try:
        yield
    except Stopped:
        barrier("bandits_jax: leave", heed_stops=False)
        raise
    except Exception as err:
        why = _first_line(err)
        with contextlib.suppress(Stopped):  # where the runtime itself failed, this process's error is the news
            if client is not None:
                _runtime(lambda: client.key_value_set(f"{_KEYS}stopped/{process()[0]}", why))
            barrier("bandits_jax: leave", heed_stops=False)
        raise
    barrier("bandits_jax: leave", heed_stops=False)
    if client is not None:
        _raise_if_stopped(client)


def _join(kwargs: dict, where: str, who: str, timeout: int) -> None:
    """jax.distributed.initialize(**kwargs), then jax's clients, under a watchdog: past `timeout`
    seconds it prints one line and ends the process (jax's own deadline comes JAX_SLACK_S later and is
    a C++ abort). A failure of the runtime raises Stopped."""
    import jax

    message = (f"{who}: not every process of the sweep joined at {where} within {timeout} s (one stopped before "
               f"joining, see its output, or was not started, or the address is not process 0's): start all of "
               f"them again with the same flags (${JOIN_TIMEOUT_ENV} sets the wait)")
    watchdog = threading.Timer(timeout, _leave_now, (message,))
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(**kwargs, initialization_timeout=timeout + JAX_SLACK_S)
        cpu_guard()  # creating the clients is the processes' first exchange
    except RuntimeError as err:
        raise Stopped(f"{who}: the multi-process runtime did not start ({_first_line(err)})") from None
    finally:
        watchdog.cancel()


def _leave_now(message: str) -> None:
    """From the watchdog's thread: the one line, then end the process (the main thread is blocked in
    the runtime, which nothing in Python can interrupt)."""
    sys.stderr.write(f"bandits-jax: error: {message}\n")
    sys.stderr.flush()
    os._exit(EXIT_STOPPED)


def _client():
    """The runtime's client (its key-value store), or None where jax keeps it elsewhere."""
    from jax._src import distributed as state

    return getattr(getattr(state, "global_state", None), "client", None)


def _raise_if_stopped(client) -> None:
    """Stopped naming the first other process that recorded that it stopped, if any did."""
    me, p = process()
    for key, why in sorted(_runtime(lambda: client.key_value_dir_get(f"{_KEYS}stopped/"))):
        other = key.rsplit("/", 1)[-1]
        if other != str(me):
            raise Stopped(f"process {me} of {p}: process {other} of the sweep stopped ({why}); fix that and run the "
                          f"same command again on every process (stored seeds are kept, the missing ones computed)")


def _runtime(call):
    """call(), a failure of the runtime (a process gone, the coordinator unreachable) raised as Stopped."""
    try:
        return call()
    except RuntimeError as err:
        me, p = process()
        raise Stopped(f"process {me} of {p}: the multi-process runtime failed ({_first_line(err)}); see the other "
                      f"processes' output, then run the same command again on every process") from None


def _first_line(err: BaseException) -> str:
    return first_line(err) or type(err).__name__
