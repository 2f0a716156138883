import os
import shutil
import tempfile

# One compilation cache for the whole test run, shared by the worker processes and the command-line
# processes that tests start: many tests compile the same program (a smoke experiment's curve, a
# reference configuration) at the same shapes, and the second compilation becomes a read. The folder
# is new for every run (the first process to import this file creates it; its workers and
# subprocesses inherit the variables), so nothing is reused from an earlier run and the suite's time
# on a clean machine does not depend on it. BANDITS_JAX_TEST_COMPILE_CACHE=off turns it off.
_OWN_CACHE = "BANDITS_JAX_TEST_COMPILE_CACHE" not in os.environ  # True in the first process only
if _OWN_CACHE:
    os.environ["BANDITS_JAX_TEST_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="bandits_jax_xla_")
_CACHE = os.environ["BANDITS_JAX_TEST_COMPILE_CACHE"]
if _CACHE != "off":
    os.environ.update(JAX_COMPILATION_CACHE_DIR=_CACHE, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.2",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
# the command line's own cache (bandits_jax/compile_cache.py) is this one, or off with it: the
# command-line tests write nothing into the user's cache folder
os.environ["BANDITS_JAX_COMPILE_CACHE"] = _CACHE

# The suite compiles hundreds of small programs and runs each for a few steps, so much of its time
# is LLVM optimising the generated CPU code. LLVM at level 1 without its expensive passes takes about
# 15% less CPU time over the suite; XLA's own HLO passes are unchanged. (Level 0 saves more but
# rounds differently enough to flip the exact ties of the CoPE-KB design tests, so it is not used.)
# Set in the first process, before any backend exists; workers and subprocesses inherit it.
# BANDITS_JAX_TEST_XLA=default keeps XLA's defaults (and any XLA_FLAGS of the user's).
if os.environ.get("BANDITS_JAX_TEST_XLA", "fast") != "default" and "xla_backend_optimization_level" not in \
        os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=1"
                               " --xla_llvm_disable_expensive_passes=true").strip()

# The CPU guard (bandits_jax/_cpu.py) first thing in every test process, before any jax computation:
# importing bandits_jax no longer applies it.
import bandits_jax  # noqa: E402

bandits_jax.cpu_guard()

import pytest  # noqa: E402

from helpers import data_skip_failure  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a test that skips for want of the shared data fails instead (helpers.data_skip_failure)."""
    outcome = yield
    report = outcome.get_result()
    message = data_skip_failure(report, os.environ)
    if message:
        report.outcome, report.longrepr = "failed", message


@pytest.fixture(autouse=True)
def _offline(tmp_path, monkeypatch):
    """No test reaches the network or reads the user's download cache: a loader that finds no file fails
    at once, as on a machine without the data (tests of downloads put their own `_fetch` in place)."""
    from bandits_jax.problems import datasets

    def no_network(url):
        raise OSError(f"the tests never download ({url})")

    monkeypatch.setattr(datasets, "_fetch", no_network)
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "download_cache"))


@pytest.fixture(autouse=True)
def _own_curve_cache(tmp_path, monkeypatch):
    """Each test gets an empty curve cache of its own: nothing lands in the working tree, and no test
    finds curves another test computed (tests that count computed chunks rely on it)."""
    monkeypatch.setenv("BANDITS_JAX_CURVES", str(tmp_path / "curve_cache"))


def pytest_unconfigure(config):
    """The process that created the compilation cache removes it when the run ends."""
    if _OWN_CACHE and _CACHE != "off":
        shutil.rmtree(_CACHE, ignore_errors=True)
