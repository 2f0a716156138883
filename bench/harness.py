"""Measurement helpers: machine ceilings, peak memory of a call, timing of a JAX batch.

Ceilings are measured in the same run as the algorithms, because absolute numbers on shared
machines drift: a large array copy gives bytes per second (read + write counted), a large
matrix product gives floating-point operations per second.
"""
from __future__ import annotations

import contextlib
import json
import fcntl
import os
import threading
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.sweep import available_memory, device_memory_stats, proc_kilobytes


def memory_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second of a large array copy (read + write), best of `repeats`: a NumPy copy on the
    CPU, a compiled `x + 1` on an accelerator (where the runs' state lives)."""
    if jax.default_backend() == "cpu":
        src = np.ones(megabytes * (1 << 20) // 8)
        dst = np.empty_like(src)
        copy = lambda: np.copyto(dst, src)  # noqa: E731
    else:
        src = jnp.ones(megabytes * (1 << 20) // 4, jnp.float32)
        add = jax.jit(lambda x: x + 1.0)
        copy = lambda: add(src).block_until_ready()  # noqa: E731
        copy()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        copy()
        best = min(best, time.perf_counter() - t)
    return 2 * src.nbytes / best


def matmul_flops(n: int = 2048, dtype=jnp.float64, repeats: int = 5) -> float:
    """Floating-point operations per second of an n x n matrix product in XLA, best of `repeats`."""
    with jax.enable_x64(dtype == jnp.float64):
        a = jnp.ones((n, n), dtype)
        f = jax.jit(lambda x: x @ x)
        f(a).block_until_ready()
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            f(a).block_until_ready()
            best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


def in_use_reader():
    """A function giving the bytes the runs occupy now, chosen once: the default accelerator's
    allocated bytes, else the process's resident set."""
    if device_memory_stats() is None:
        return lambda: proc_kilobytes("/proc/self/status", "VmRSS")
    return lambda: int(device_memory_stats().get("bytes_in_use", 0))


class PeakMemory:
    """Context manager sampling the memory in use (`in_use_reader`: the accelerator's, else the
    resident set); `.peak_delta` is the peak growth in bytes. On an accelerator the allocator's own
    peak counts too, where the call raised it."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.peak_delta = 0

    def __enter__(self):
        self._in_use = in_use_reader()
        self._base = self._in_use()
        self._peak = self._base
        self._device_peak = (device_memory_stats() or {}).get("peak_bytes_in_use")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self._peak = max(self._peak, self._in_use())
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._in_use())
        device_peak = (device_memory_stats() or {}).get("peak_bytes_in_use")
        if device_peak is not None and self._device_peak is not None and device_peak > self._device_peak:
            self._peak = max(self._peak, int(device_peak))
        self.peak_delta = self._peak - self._base
        return False


# ------------------------------------------------------------------------------ one device, several processes
LOCK_ENV = "BANDITS_JAX_BENCH_LOCK"
_TURN = {"held": False, "waited": 0.0}


@contextlib.contextmanager
def device_turn():
    """Hold the accelerator alone for the block where several bench processes share it
    (BANDITS_JAX_BENCH_LOCK names a lock file, as bench/gpu.sh's parallel scale step sets): an
    exclusive lock on that file, re-entrant within the process. The seconds spent waiting for it add
    up in `turn_wait()`. Without the variable the block just runs."""
    path = os.environ.get(LOCK_ENV)
    if not path or _TURN["held"]:
        yield
        return
    with open(path, "a") as fh:
        t = time.perf_counter()
        fcntl.flock(fh, fcntl.LOCK_EX)
        _TURN["waited"] += time.perf_counter() - t
        _TURN["held"] = True
        try:
            yield
        finally:
            _TURN["held"] = False
            fcntl.flock(fh, fcntl.LOCK_UN)


def turn_wait() -> float:
    """Seconds this process has waited for device turns so far."""
    return _TURN["waited"]


def share_device() -> bool:
    """Where BANDITS_JAX_BENCH_LOCK is set, run every compiled call (`jax.stages.Compiled`, what the
    runner calls) in a device turn to the end of its computation, so that timed runs of different
    processes never overlap while their compiles (outside the calls) still do. A row's run seconds
    then hold its waits, which the caller subtracts (`turn_wait`). Returns whether calls take turns."""
    call = jax.stages.Compiled.__call__
    if not os.environ.get(LOCK_ENV) or getattr(call, "takes_turns", False):
        return bool(os.environ.get(LOCK_ENV))

    def in_turn(self, *args, **kwargs):
        with device_turn():
            return jax.block_until_ready(call(self, *args, **kwargs))

    in_turn.takes_turns = True
    jax.stages.Compiled.__call__ = in_turn
    return True


# ------------------------------------------------------------------------------ BLAS threads
_SET = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GET = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


def _openblas():
    """(get, set) of the OpenBLAS that NumPy loaded, or None (another BLAS, or not found)."""
    import ctypes

    np.linalg.inv(np.eye(2))  # make sure the library is loaded
    try:
        paths = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                 if "openblas" in line.lower() and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        get = next((getattr(lib, n) for n in _GET if hasattr(lib, n)), None)
        set_ = next((getattr(lib, n) for n in _SET if hasattr(lib, n)), None)
        if get is not None and set_ is not None:
            get.restype = ctypes.c_int
            set_.argtypes = [ctypes.c_int]
            return get, set_
    return None


class BlasThreads:
    """Context manager: NumPy's OpenBLAS runs with `threads` threads inside (None or 0: unchanged).

    `.threads` is the count in effect inside (None if it could not be read).
    """

    def __init__(self, threads=None):
        self.requested = threads or None
        self.threads = None

    def __enter__(self):
        self._lib = _openblas()
        self._before = None
        if self._lib is not None:
            get, set_ = self._lib
            self._before = get()
            if self.requested:
                set_(int(self.requested))
            self.threads = get()
        return self

    def __exit__(self, *exc):
        if self._lib is not None and self.requested and self._before:
            self._lib[1](int(self._before))
        return False


def si(x: float) -> str:
    """x with an SI prefix and three significant digits: "81.8 G" (the unit follows)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}"
    return f"{x:.3g} "


def machine_line(cpu_count: int, devices: list, bandwidth: float, flops: float) -> str:
    """The report's first line: the machine and the ceilings the run measured."""
    return (f"machine: {cpu_count} CPU(s), {', '.join(devices)}; copy bandwidth {si(bandwidth)}B/s (read + write), "
            f"float64 matmul {si(flops)}flop/s")


def machine_of(doc: dict) -> str:
    """`machine_line` of a `python -m bench` JSON file."""
    env, ceilings = doc["environment"], doc["ceilings"]
    return machine_line(env["cpu_count"], env["devices"], ceilings["memory_bandwidth_bytes_per_second"],
                        ceilings["matmul_float64_flops_per_second"])


def save_and_print(doc: dict, out, text: str) -> int:
    """Write a measurement `doc` as JSON to `out` (its folder made) and print its rendered `text`; 0."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(text)
    return 0


def log(msg: str) -> None:
    """A progress line on stderr (the table goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def selected(args, names) -> list:
    """The section's names the --only selection keeps (all of them without --only)."""
    return [n for n in names if not args.only_names or n in args.only_names]


def skipped_by_budget(rows: list, row: dict, where: str, runs: int, last, budget_seconds, skip_reason) -> bool:
    """Whether `row` (runs runs in one call) is skipped: `skip_reason` extrapolates from the last row
    measured (None: the first row) against the budget and the available memory; a skipped row is
    recorded with its reason."""
    measured = None if last is None else dict(seeds=last["runs"], run_seconds=last["run_seconds"],
                                               peak_bytes=last["peak_mb"] * float(1 << 20))
    reason = skip_reason(runs, measured, 0.0, budget_seconds, available_memory())
    if reason:
        skip_row(rows, row, where, reason)
    return bool(reason)


def seed_rows(tag: str, name: str, seed_counts, args, skip_reason, measure) -> list:
    """One row per S in seed_counts: measure(S) -> the row of one call over S seeds, unless the budget
    rule skips it (`skipped_by_budget`, extrapolated from the last row measured). A call that runs out
    of device memory is recorded as a skipped row, and so are the larger S after it."""
    rows, last = [], None
    for i, seeds in enumerate(seed_counts):
        row = dict(algorithm=name, seeds=seeds, runs=seeds)
        where = f"[{tag}] {name} S={seeds}"
        if skipped_by_budget(rows, row, where, seeds, last, args.budget_seconds, skip_reason):
            continue
        log(f"[{tag}] {name}: {seeds} seeds in one call ...")
        try:
            last = measure(seeds)
        except jax.errors.JaxRuntimeError as err:
            if "RESOURCE_EXHAUSTED" not in str(err):
                raise
            skip_row(rows, row, where, f"skipped: out of device memory ({str(err).splitlines()[0][:160]})")
            for larger in seed_counts[i + 1:]:
                skip_row(rows, dict(algorithm=name, seeds=larger, runs=larger), f"[{tag}] {name} S={larger}",
                         f"skipped: S = {seeds} ran out of device memory")
            break
        rows.append(last)
    return rows


def section_lines(section: dict, label, last_columns) -> list:
    """The table lines of a section's measured rows: label(row), compile s, run s, peak MB, then the
    strings last_columns(row) and an empty note; a skipped row gets dashes and its note."""
    lines = []
    for res in section["results"]:
        for r in res["rows"]:
            if r.get("skipped"):
                lines.append([r["algorithm"], label(r)] + ["-"] * 6 + [r["note"]])
            else:
                lines.append([r["algorithm"], label(r), f"{r['compile_seconds']:.1f}", f"{r['run_seconds']:.2f}",
                              f"{r['peak_mb']:.0f}", *last_columns(r), ""])
    return lines


def skip_row(rows: list, row: dict, where: str, note: str) -> None:
    """Record a row that was not measured: the reason is logged and kept in the row's note."""
    log(f"{where}: {note}")
    row.update(skipped=True, note=note)
    rows.append(row)


def aligned(head: tuple, rows: list) -> list:
    """A plain-text table: the header, a rule and the rows (lists of strings), columns padded."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]
