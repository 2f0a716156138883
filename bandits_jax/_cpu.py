"""A one-thread CPU client, so that jaxlib's batched LAPACK kernels cannot deadlock.

jaxlib 0.10's CPU LAPACK kernels (Cholesky, LU, QR, triangular solve, eigh, ...) split a batch
into tasks on XLA's intra-op thread pool and then block until the tasks finish. When the compiled
program runs two such kernels at once, and the pool has as many threads as there are kernels
running, every pool thread is blocked waiting for tasks that no thread is left to run: the
process hangs forever. On a 2-core machine (a 2-thread pool) a jitted function holding one
batched Cholesky and one batched inverse hung in a fraction of runs (``tests/test_cpu_guard.py``
has the reproducer).

The pool sizes itself from the process's CPU affinity when the CPU client is created; the jax
maintainers name the affinity as the way to limit it (jax-ml/jax#1539). With one thread the
kernels run their batch inline and nothing waits on the pool. So, before the first jax computation
(`cpu_guard`, called by every entry point that computes, never at import): pin the process to one
CPU, create the clients, restore every thread's affinity.
The OpenBLAS library that the kernels call is loaded in that window too and also starts with one
thread, which for this library's small matrices is faster than two.

The cost is XLA's intra-op parallelism on CPU (large matmuls split over cores): split long CPU
sweeps over processes instead. Set ``BANDITS_JAX_CPU_GUARD=0`` to keep jax's default pool. A
multi-process user calls ``jax.distributed.initialize`` before the first computation (importing
this package computes nothing), and the guard then creates the clients of that runtime.
"""
import os
import warnings

GUARD_ENV = "BANDITS_JAX_CPU_GUARD"
_GUARD: list = []  # the outcome of the first call of cpu_guard in this process


def cpu_guard() -> bool:
    """Apply the guard once per process (later calls return the first call's outcome): True when
    jax's clients were created with a one-thread intra-op pool, False where that could not be done
    (opted out, not Linux, or jax had already created its clients: a warning then says so). It also
    has jax lower its threefry hash on CPU as straight-line code, the same numbers compiled faster
    (`kernels.draws.unrolled_threefry_on_cpu`; BANDITS_JAX_UNROLLED_THREEFRY=0 keeps jax's loop), and
    turns LLVM's loop strength reduction off in a CPU-only process (`programs.cpu_llvm_flags`)."""
    if not _GUARD:
        from .kernels.draws import unrolled_threefry_on_cpu
        from .programs import cpu_llvm_flags

        unrolled_threefry_on_cpu()
        cpu_llvm_flags()
        _GUARD.append(one_thread_cpu_client())
    return _GUARD[0]


def one_thread_cpu_client():
    """Create jax's clients with a one-thread intra-op pool; False where that cannot be done."""
    if os.environ.get(GUARD_ENV, "1") == "0" or not hasattr(os, "sched_setaffinity"):
        return False
    import jax
    from jax._src import xla_bridge

    if not hasattr(xla_bridge, "backends_are_initialized"):  # a private function: jax may move it
        warnings.warn(
            f"jax {jax.__version__} has no xla_bridge.backends_are_initialized, so bandits_jax cannot create "
            "jax's CPU client with a one-thread pool and the guard against jaxlib's batched-LAPACK deadlock "
            f"is off (set {GUARD_ENV}=0 to silence this)", RuntimeWarning, stacklevel=4)
        return False
    if xla_bridge.backends_are_initialized():
        warnings.warn(
            "jax started its CPU client before bandits_jax could, so the guard against jaxlib's "
            "batched-LAPACK deadlock is off: call bandits_jax.cpu_guard() before running any jax "
            f"computation (or set {GUARD_ENV}=0 to silence this)", RuntimeWarning, stacklevel=4)
        return False
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        xla_bridge.backends()
    finally:
        _restore_affinity(cpus)
    return True


def _restore_affinity(cpus):
    """Give every thread of the process (those started while pinned included) its CPUs back."""
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ["0"]:
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that has exited since the listing
            pass

