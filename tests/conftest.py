# Tests compile many small programs and run each briefly, so XLA's backend optimisation is set to
# its lowest level, which halves compile time; the numbers do not change (the golden outputs agree to
# 1e-10 either way; floating-point semantics are the same at every level, only the machine code's
# speed differs). BANDITS_JAX_TEST_XLA_OPT=default leaves XLA's own level.
import os

if os.environ.get("BANDITS_JAX_TEST_XLA_OPT", "0") != "default" and "xla_backend_optimization_level" not in \
        os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

# The CPU guard (bandits_jax/_cpu.py) first thing in every test process, before any jax computation:
# importing bandits_jax no longer applies it.
import bandits_jax  # noqa: E402

bandits_jax.cpu_guard()

import shutil  # noqa: E402
import tempfile  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

# One compilation cache for the whole test run, shared by the worker processes: many tests compile
# the same program (a smoke experiment's curve, a reference configuration) at the same shapes, and
# the second compilation becomes a read. The folder is new for every run (the first process to
# import this file creates it and its workers inherit the variable), so nothing is reused from an
# earlier run and the suite's time on a clean machine does not depend on it.
# BANDITS_JAX_TEST_COMPILE_CACHE=off turns it off.
_OWN_CACHE = "BANDITS_JAX_TEST_COMPILE_CACHE" not in os.environ  # True in the first process only
if _OWN_CACHE:
    os.environ["BANDITS_JAX_TEST_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="bandits_jax_xla_")
_CACHE = os.environ["BANDITS_JAX_TEST_COMPILE_CACHE"]
if _CACHE != "off":
    jax.config.update("jax_compilation_cache_dir", _CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture(autouse=True)
def _own_curve_cache(tmp_path, monkeypatch):
    """Each test gets an empty curve cache of its own: nothing lands in the working tree, and no test
    finds curves another test computed (tests that count computed chunks rely on it)."""
    monkeypatch.setenv("BANDITS_JAX_CURVES", str(tmp_path / "curve_cache"))


def pytest_unconfigure(config):
    """The process that created the compilation cache removes it when the run ends."""
    if _OWN_CACHE and _CACHE != "off":
        shutil.rmtree(_CACHE, ignore_errors=True)
