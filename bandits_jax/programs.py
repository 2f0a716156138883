"""Compiled programs shared within one process, found again by their StableHLO text.

    started = time.perf_counter()
    program = programs.compiled(jax.jit(fn).lower(*args), "segment", started, batch=8, padded=8, agents=2)

Calls that lower to one program text are one program: the curves of an arena pair's tuning grid and
its reported curve, two curves that differ only in their names, the phases of an arena, the chunks of
two sweeps in one process. XLA compiles such a program once per process; every later call takes the
executable from this table instead of loading it from the persistent cache (a few tenths of a second
each) or, with that cache off, compiling it again.

The text fixes the executable within a process, together with every argument's shape, dtype and
donation (jax leaves unused arguments out of the text) and the pytree structures of the arguments and
results: the text holds the shapes, dtypes, constants (the data sets a step closes over), donated
buffers and shardings, and XLA's flags and devices are the process's own.
A program with a host callback (a progress report from inside a segment) is never shared: its text
names the callback by its position in the program, not by the Python function it calls.

On CPU every program compiles with XLA's loop fusion emitter in place of its newer MLIR one
(`compiler_options`): a profile of the quickstart's compile found more of it in MLIR passes than in
XLA's own, the loop emitter compiles faster, and its code runs level (bench/README, "XLA's CPU
options"). A user who names the flag in XLA_FLAGS (`--xla_cpu_use_fusion_emitters=true` is XLA's own
default) keeps their choice.
LLVM's loop strength reduction is off on CPU too (`cpu_llvm_flags`, set through XLA_FLAGS before jax
creates its clients): over the straight-line threefry rounds of a draw inside a loop it builds ever
longer sums in its scalar evolution, most of the compile of a problem's start. Without it the scale
cases compile faster, run level and give the same numbers (bench/README, "XLA's CPU options").

The table keeps the programs used last: up to MOST_KEPT while the process holds less than MEMORY_SHARE
of the machine's memory, and never fewer than KEPT (an executable holds its code and constants, some
megabytes each). An arena asks for each pair's programs again in each of its phases, long after
the other pairs' programs: a table of KEPT would load them from the persistent cache again, or
compile them again with that cache off. `clear()` empties the table.
Each program asked for is noted in the compile report (`compile_report.note`): compiled, loaded from
the persistent cache, or reused from this table, with the seconds spent on it in this call (tracing
and lowering included).

Tracing and lowering a step costs about as much as compiling a small one, and an arena asks for each
pair's programs again in every phase. A caller that names what makes a program (`maker_of`: the problem
and algorithm objects, compared by identity, and the plain values of its shape) finds it again with
`made`, without tracing, for as long as the table keeps it. The key holds jax's trace context too
(the configuration jax's own jit cache keys on), so a change of a jax setting is a miss, never a
stale program.

XLA compiles a program largely on one core, and tracing is Python's. `ahead` hands a lowered program to
a worker thread that compiles it while this thread goes on (tracing the next curve's programs, running
this one's); the table holds it as in flight, and the `made` or `compiled` call that asks for it waits
for it then notes it in the report as compiled or loaded, with the seconds its lowering and compiling
took (spent beside other work, so a report's seconds can add up to more than the wall time).
"""
from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, NamedTuple, Optional

from . import compile_report
from .compile_cache import cache_hits
from .core import keep_last

KEPT = 64  # kept whatever the memory
MOST_KEPT = 1024
MEMORY_SHARE = 1 / 4  # beyond KEPT, programs are kept while the process's resident memory is below this share
CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
CPU_LLVM_FLAGS = "-disable-lsr"  # LLVM's own options on CPU (`cpu_llvm_flags`)
_HOST_CALLBACK = re.compile(r"custom_call @\w*callback")
_table: "OrderedDict[tuple, object]" = OrderedDict()  # (fingerprint, arguments, out_tree): executable
_made: "OrderedDict[tuple, tuple]" = OrderedDict()  # Maker key: (table key, lines, fingerprint, held objects)
_worker: Optional[ThreadPoolExecutor] = None  # compiles the programs handed to `ahead`


class Maker(NamedTuple):
    """What makes a program (`maker_of`): `key`, hashable (None where it cannot be had: nothing is then
    found without tracing), and `held`, the objects the key names by identity."""

    key: Optional[tuple]
    held: tuple


def maker_of(*parts) -> Maker:
    """The Maker of a program made from `parts`: each plain value (None, a bool, number or string, or a
    tuple of plain values) compared by value, every other object (a problem, an algorithm's functions)
    by identity, and jax's trace context (None where this jax does not expose it). Two calls whose
    parts are the same objects and equal values, under one jax configuration, trace to one program."""
    held = tuple(p for p in parts if not _plain(p))
    key = tuple(("id", id(p)) if not _plain(p) else (type(p).__name__, p) for p in parts)
    try:
        from jax._src.config import trace_context

        key = key, trace_context()
        hash(key)
    except (ImportError, TypeError):
        key = None
    return Maker(key, held)


def remembered(table: "OrderedDict[tuple, tuple]", maker: Maker, most: int, compute: Callable):
    """compute(), kept in `table` under the maker's key beside the objects the key names (so their ids
    stay theirs), for the `most` makers asked last; computed every time for a maker without a key."""
    kept = table.get(maker.key) if maker.key is not None else None
    if kept is None:
        kept = (compute(), maker.held)
    if maker.key is not None:
        keep_last(table, maker.key, kept, most)
    return kept[0]


def made(maker: Maker, kind: str, **shape):
    """The executable `maker` made before in this process, while the table keeps it (noted in the report
    as reused, at no cost: nothing is traced; one still compiling after `ahead` is waited for, and noted
    as compiled or loaded); None where it made none or its program was let go."""
    entry = _entry(maker)
    if entry is None:
        return None
    _made.move_to_end(maker.key)
    _table.move_to_end(entry[0])
    if isinstance(_table[entry[0]], _InFlight):
        return _landed(entry[0], kind, entry[1], entry[2], shape)
    compile_report.note(kind, compile_report.REUSED, 0.0, lines=entry[1], fingerprint=entry[2], **shape)
    return _table[entry[0]]


def known(maker: Maker) -> bool:
    """Whether `made` would find a program of `maker` (compiled, or in flight after `ahead`); notes
    nothing and waits for nothing."""
    return _entry(maker) is not None


def _entry(maker: Maker) -> Optional[tuple]:
    """The `_made` entry of `maker` while the table holds its program, else None."""
    entry = _made.get(maker.key) if maker.key is not None else None
    return entry if entry is not None and entry[0] in _table else None


def compiled(lowered, kind: str, started: float, maker: Maker = None, **shape):
    """The executable of `lowered` (a `jax.stages.Lowered`): this process's own where it compiled the
    same text before, else compiled (or loaded from the persistent cache) and kept. `started` is the
    `time.perf_counter()` at which this program's tracing began; `maker` (`maker_of`), what made it, lets
    `made` find it again; `shape` describes it for the report."""
    text = lowered.as_text()
    key = _key(lowered, text)
    shared = not _HOST_CALLBACK.search(text)
    if shared and isinstance(_table.get(key), _InFlight):
        _table.move_to_end(key)
        program = _landed(key, kind, len(text.splitlines()), key[0], shape)
    elif shared and key in _table:
        _table.move_to_end(key)
        compile_report.note(kind, compile_report.REUSED, time.perf_counter() - started, text, **shape)
        program = _table[key]
    else:
        program, _, loaded = _compile(lowered)
        compile_report.note(kind, _how(loaded), time.perf_counter() - started, text, **shape)
        if shared:
            _keep(key, program)
    if shared:
        _remember(maker, key, len(text.splitlines()))
    return program


def ahead(lowered, started: float, maker: Maker = None) -> None:
    """Start compiling `lowered` in the worker thread and keep it in the table as in flight, found by its
    text (`compiled`) and by `maker` (`made`), which wait for it; nothing where the table holds that text
    already or where it holds a host callback (such a program is never shared). `started`: the
    `time.perf_counter()` at which its tracing began."""
    global _worker
    text = lowered.as_text()
    if _HOST_CALLBACK.search(text):
        return
    key = _key(lowered, text)
    if key not in _table:
        if _worker is None:
            _worker = ThreadPoolExecutor(1, thread_name_prefix="bandits_jax-compile")
        _keep(key, _InFlight(_worker.submit(_compile, lowered), time.perf_counter() - started))
    _remember(maker, key, len(text.splitlines()))


class _InFlight(NamedTuple):
    """A program the worker compiles (`ahead`): its future ((executable, seconds, loaded)) and the
    seconds its tracing and lowering took."""

    future: Future
    lowering: float


def _compile(lowered) -> tuple:
    """(executable, seconds, whether it came from the persistent cache): the worker's task, and
    `compiled`'s for a text the table lacks."""
    hits, started = cache_hits(), time.perf_counter()
    program = lowered.compile(compiler_options=compiler_options())
    return program, time.perf_counter() - started, cache_hits() > hits


def _landed(key: tuple, kind: str, lines: int, fingerprint: str, shape: dict):
    """The executable of the in-flight program at `key`, once the worker has it (its error raised
    here, in the caller's thread), noted as compiled or loaded; the table holds it from now on."""
    flight = _table[key]
    try:
        program, seconds, loaded = flight.future.result()
    except BaseException:
        del _table[key]
        raise
    compile_report.note(kind, _how(loaded), flight.lowering + seconds, lines=lines, fingerprint=fingerprint,
                        **shape)
    _table[key] = program
    return program


def _how(loaded: bool) -> str:
    """The report's word for a program had from XLA: loaded from the persistent cache, or compiled."""
    return compile_report.LOADED if loaded else compile_report.COMPILED


def _key(lowered, text: str) -> tuple:
    """The table's key of a lowered program: its text's fingerprint, arguments and result structure."""
    return compile_report.text_fingerprint(text), str(lowered.args_info), str(lowered.out_tree)


def _remember(maker: Optional[Maker], key: tuple, lines: int) -> None:
    """Let `made` find the program at `key` by `maker` (nothing where it has no key)."""
    if maker is not None and maker.key is not None:  # one program may have many makers (its problem objects)
        keep_last(_made, maker.key, (key, lines, key[0], maker.held), MOST_KEPT)


def _keep(key: tuple, program) -> None:
    """Put `program` into the table, letting go of those used longest ago beyond what it keeps (and the
    makers that name them)."""
    _table[key] = program
    while len(_table) > MOST_KEPT or (len(_table) > KEPT and _over_share()):
        gone, _ = _table.popitem(last=False)
        for k in [k for k, entry in _made.items() if entry[0] == gone]:
            del _made[k]


def _plain(value) -> bool:
    """Whether `value` is compared by value in a Maker: None, a bool, number or string, or a tuple of them."""
    return value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, tuple) and all(_plain(v) for v in value))


def cpu_llvm_flags() -> bool:
    """Add CPU_LLVM_FLAGS to the XLA_FLAGS environment variable, before jax creates its clients, in a
    process that computes on CPU alone; True where they were added (module docstring).

    XLA reads XLA_FLAGS once, when jax creates its first client (a per-program compile option cannot
    carry LLVM's own options), and hands these to LLVM for every program of every backend. So nothing is
    added where jax's clients already exist, where an accelerator may be used (JAX_PLATFORMS names
    another platform, or a jax plugin or libtpu is installed), or where XLA_FLAGS already names
    `--xla_backend_extra_options` (the user's setting stands)."""
    from jax._src import xla_bridge

    if _named("xla_backend_extra_options") or _accelerator_possible() or getattr(
            xla_bridge, "backends_are_initialized", lambda: True)():
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_extra_options={CPU_LLVM_FLAGS}".strip()
    return True


def _accelerator_possible() -> bool:
    """Whether jax may create a client other than the CPU's: JAX_PLATFORMS (or jax's setting of it) names
    another platform, or, where it is unset, a jax plugin (CUDA, ROCm, ...) or libtpu is installed."""
    import importlib.metadata
    import importlib.util
    import pkgutil

    import jax

    platforms = jax.config.jax_platforms or ""
    if platforms:
        return any(p.strip() != "cpu" for p in platforms.split(","))
    if importlib.util.find_spec("libtpu") is not None or importlib.metadata.entry_points(group="jax_plugins"):
        return True
    spec = importlib.util.find_spec("jax_plugins")
    return spec is not None and any(True for _ in pkgutil.iter_modules(spec.submodule_search_locations or []))


def compiler_options() -> dict:
    """The XLA options of this process's programs: CPU_OPTIONS on a CPU backend, less any option the
    XLA_FLAGS environment variable names (the user's setting stands); none on other backends."""
    import jax

    if jax.default_backend() != "cpu":
        return {}
    return {k: v for k, v in CPU_OPTIONS.items() if not _named(k)}


def _named(flag: str) -> bool:
    """Whether the XLA_FLAGS environment variable names `--flag`: the user's setting, which stands."""
    return f"--{flag}" in os.environ.get("XLA_FLAGS", "")


def _over_share() -> bool:
    """Whether the process's resident memory is above MEMORY_SHARE of the machine's (False where the
    system does not say: the table then keeps MOST_KEPT)."""
    from .sweep import proc_kilobytes

    total = proc_kilobytes("/proc/meminfo", "MemTotal")
    return total > 0 and proc_kilobytes("/proc/self/status", "VmRSS") > MEMORY_SHARE * total


def clear() -> None:
    """Forget every program of the table (each is compiled or loaded again when next asked for)."""
    _table.clear()
    _made.clear()
