"""The compile cache's folder is checked before anything runs, and `--check` keeps and compiles nothing.

A folder that $BANDITS_JAX_COMPILE_CACHE names and that cannot be a writable folder is refused in one
line naming the variable (exit 2, nothing written); an unusable default folder is one warning and no
cache; `run --check` and `arena --check` compile no program and leave no cache folder behind.
"""
from __future__ import annotations

from pathlib import Path

import jax
import pytest

from bandits_jax import compile_cache
from bandits_jax.compile_cache import ENV, CompileCount

from helpers import run_cli


def refused(capsys, tmp_path, argv) -> str:
    """The one stderr line of a refused command (exit 2, no results folder)."""
    out = tmp_path / "out"
    status, err = run_cli(capsys, argv + ["--out", str(out), "--quiet"])
    assert (status, len(err)) == (2, 1), err
    assert not out.exists()
    return err[0]


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("place", ["a file", "under a file", "an unknown home"])
def test_a_cache_variable_that_cannot_be_a_folder_is_one_line_naming_it(capsys, tmp_path, monkeypatch, place,
                                                                        check):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    value = {"a file": a_file, "under a file": a_file / "cache", "an unknown home": "~no_such_user_5309/cache"}
    monkeypatch.setenv(ENV, str(value[place]))
    line = refused(capsys, tmp_path, ["run", "quickstart", "--size", "smoke", "--no-plot"] + ["--check"] * check)
    assert ENV in line and str(value[place]) in line


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a place no one can write")
def test_an_unwritable_cache_folder_is_refused_before_anything_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "/proc/bandits_jax_cache")
    line = refused(capsys, tmp_path, ["run", "quickstart", "--size", "smoke", "--no-plot"])
    assert "/proc/bandits_jax_cache" in line and ENV in line


def test_an_unusable_default_is_a_warning_and_no_cache(capsys, tmp_path, monkeypatch):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(a_file))
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        assert compile_cache.chosen_dir() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and "warning: no compile cache" in warning[0] and ENV in warning[0]


@pytest.mark.parametrize("argv", [["run", "quickstart", "--no-plot"],
                                  ["run", "--problem", "cosine:num_agents=2", "--algorithm", "kernel_ucb"],
                                  ["arena", "--size", "smoke", "--problem", "cosine", "--algorithm", "linucb"]])
def test_check_compiles_nothing_and_keeps_no_cache(capsys, tmp_path, monkeypatch, argv):
    cache = tmp_path / "compile_cache"
    monkeypatch.setenv(ENV, str(cache))
    count = CompileCount()
    status, err = run_cli(capsys, argv + ["--check", "--quiet", "--out", str(tmp_path / "out")])
    assert status == 0, err
    assert count.counts() == {"compiled": 0, "loaded": 0}
    assert not cache.exists() and not (tmp_path / "out").exists()
    assert jax.config.jax_compilation_cache_dir != str(cache)



_TRACED = '''
import jax.numpy as jnp


def f(x):
    y = jnp.sin(x) * 2.0
    return jnp.cumsum(y) + jnp.exp(-y)
'''
_COMPILE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
from bandits_jax.compile_cache import CompileCount, enable
enable(sys.argv[2])
import traced
count = CompileCount()
jax.jit(traced.f).lower(jnp.ones(7)).compile()
print(json.dumps(count.counts()))
'''


def test_the_cache_key_holds_across_processes_and_an_edit_that_moves_the_code(tmp_path):
    """A second process loads what the first compiled, and so does a third after an edit that moves the
    traced code down its file (source lines are not part of the key): editing a module never
    recompiles programs whose operations it does not change."""
    import json
    import subprocess
    import sys

    code, cache = tmp_path / "code", tmp_path / "cache"
    code.mkdir()
    (tmp_path / "compile.py").write_text(_COMPILE)

    def run(padding: int) -> dict:
        (code / "traced.py").write_text("\n" * padding + _TRACED)
        done = subprocess.run([sys.executable, str(tmp_path / "compile.py"), str(code), str(cache)],
                              capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run(0)
    assert first["compiled"] > 0 and first["loaded"] == 0
    assert run(0) == {"compiled": 0, "loaded": first["compiled"]}
    assert run(12) == {"compiled": 0, "loaded": first["compiled"]}


def test_cache_hits_count_the_loads_of_this_thread_only():
    """A program compiled in the worker thread (`programs.ahead`) is told loaded by the hits of its own
    thread: a load in another thread at the same moment does not make it "loaded"."""
    import threading

    from bandits_jax.compile_cache import CACHE_HIT, CompileCount, cache_hits

    before = cache_hits()
    seen = []

    def other():
        start = cache_hits()
        CompileCount._event(CACHE_HIT)
        seen.append(cache_hits() - start)

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert seen == [1] and cache_hits() == before
    CompileCount._event(CACHE_HIT)
    assert cache_hits() == before + 1
