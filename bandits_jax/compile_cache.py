"""JAX's persistent compilation cache for the command line, and a count of what a process compiles.

The command line (`bandits-jax run`, `bandits-jax arena`) keeps every program XLA compiles in a
folder, so a second run of the same experiment or arena, a resumed sweep, or a rerun with more
seeds in the same chunk size loads each program it compiled before instead of compiling it again:

    $BANDITS_JAX_COMPILE_CACHE          the folder; "off" (or "0", "none", "") turns the cache off
    $JAX_COMPILATION_CACHE_DIR          else JAX's own setting, where it is set
    ~/.cache/bandits_jax/jax            else this default ($XDG_CACHE_HOME/bandits_jax/jax where that is set)
    --no-compile-cache                  off for one command

A folder that a variable names and that cannot be a writable folder (a file, a path under a file, an
unwritable place, an unknown "~user") is refused in one line naming the variable, before anything
else; where the default cannot be used (no home folder), the command warns once and runs without the
cache. `--check` reads the setting, checks it the same way and keeps nothing: it compiles no program.

Every program is kept, however quickly it compiled (JAX's own default keeps only those that took a
second or more): the sweep's programs are many small ones. A program's cache key is its HLO with
the compile options, device kind and versions, so a changed algorithm, shape or package version
compiles again and is never confused with another. The library itself (`import bandits_jax`) never
turns the cache on: only the command line does, before it compiles anything.

`CompileCount` counts, from JAX's monitoring events, the programs a block compiled and the ones it
loaded from the cache (the arena reports both).
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

import jax
from jax import monitoring

from .core import ConfigError

ENV = "BANDITS_JAX_COMPILE_CACHE"
OFF = ("off", "0", "none", "false", "")
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # a compile, or a load from the cache
CACHE_HIT = "/jax/compilation_cache/cache_hits"


def default_dir() -> Path:
    """~/.cache/bandits_jax/jax, or $XDG_CACHE_HOME/bandits_jax/jax (RuntimeError where no home is known)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bandits_jax" / "jax"


def chosen_dir(enabled: bool = True) -> Optional[Path]:
    """The cache folder the command line uses, checked (`usable`) but not created: None when `enabled` is
    False or $BANDITS_JAX_COMPILE_CACHE says off; that variable's folder where it names one; else JAX's
    configured folder; else `default_dir()`. A folder a variable names that cannot be a writable folder
    is a ConfigError naming the variable; an unusable default is a one-line warning and no cache."""
    if not enabled:
        return None
    value = os.environ.get(ENV)
    if value is not None:
        return None if value.strip().lower() in OFF else usable(value, f"${ENV}")
    if jax.config.jax_compilation_cache_dir:
        return usable(jax.config.jax_compilation_cache_dir, "JAX's jax_compilation_cache_dir")
    try:
        return usable(default_dir(), "the default compile cache")
    except (ConfigError, RuntimeError) as err:
        print(f"bandits-jax: warning: no compile cache this time: {err}; set ${ENV} to a writable folder, "
              f"or to off", file=sys.stderr)
        return None


def usable(value, named: str) -> Path:
    """`value` as a folder path whose nearest existing part is a folder this process may write into
    (it need not exist yet); ConfigError naming `named` otherwise. Creates nothing."""
    fix = f"name a folder this user can write, or set ${ENV}=off"
    try:
        folder = Path(value).expanduser()
    except RuntimeError as err:  # "~someone" with no such user, or no home at all
        raise ConfigError(f"{named} = {str(value)!r}: {err}; {fix}") from None
    for part in (folder, *folder.parents):
        if not part.exists():
            continue
        if not part.is_dir():
            raise ConfigError(f"{named} = {str(value)!r} cannot be a folder: {part} is a file; {fix}")
        if not os.access(part, os.W_OK | os.X_OK):
            raise ConfigError(f"{named} = {str(value)!r}: {part} is not writable; {fix}")
        return folder
    return folder


def enable(folder: Optional[Path]) -> Optional[Path]:
    """Keep every compiled program in `folder` (None: leave JAX's settings as they are); returns it.
    A folder that cannot be made or written into is a ConfigError naming it."""
    if folder is None:
        return None
    folder = Path(folder).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()  # writable, not only creatable
    except OSError as err:
        raise ConfigError(f"the compile cache {folder} cannot be used ({err.strerror or err}); name a folder this "
                          f"user can write in ${ENV}, or set it to off") from None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return folder


_thread = threading.local()


class CompileCount:
    """Programs compiled and programs loaded from the persistent cache since `start()` (JAX's monitoring
    events, process-wide: count one block of work at a time)."""

    _events = {BACKEND_COMPILE: 0, CACHE_HIT: 0}
    _listening = False

    def __init__(self):
        if not CompileCount._listening:
            monitoring.register_event_duration_secs_listener(self._duration)
            monitoring.register_event_listener(self._event)
            CompileCount._listening = True
        self.start()

    @classmethod
    def _duration(cls, event, duration, **kwargs):
        del duration, kwargs
        if event == BACKEND_COMPILE:
            cls._events[event] += 1

    @classmethod
    def _event(cls, event, **kwargs):
        del kwargs
        if event == CACHE_HIT:
            cls._events[event] += 1
            _thread.hits = getattr(_thread, "hits", 0) + 1  # jax notes a hit in the thread that loads

    def start(self) -> None:
        self._base = dict(self._events)

    def counts(self) -> dict:
        """{"compiled": programs XLA compiled, "loaded": programs taken from the persistent cache}."""
        requests = self._events[BACKEND_COMPILE] - self._base[BACKEND_COMPILE]
        loaded = self._events[CACHE_HIT] - self._base[CACHE_HIT]
        return {"compiled": requests - loaded, "loaded": loaded}


def cache_hits() -> int:
    """Programs this thread has loaded from the persistent cache so far (JAX's monitoring events, listened
    to from the first `CompileCount`, which this makes): a program compiled in a worker thread
    (`programs.ahead`) is told loaded or compiled whatever the other thread loads meanwhile."""
    CompileCount()
    return getattr(_thread, "hits", 0)
