"""The CPU guard of bandits_jax/_cpu.py: a one-thread intra-op pool, affinity given back, the
two-LAPACK-kernel reproducer of the jaxlib 0.10 deadlock finishing under a time limit, and no side
effect of importing the package (no client, no affinity change, jax.distributed after the import)."""
import os
import subprocess
import sys
import textwrap

import pytest

import bandits_jax
from bandits_jax import _cpu

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux-only guard")

# One jitted call holding a batched Cholesky and a batched inverse, which XLA runs concurrently.
# Without the guard, on a 2-core machine, 7 of 8 processes hung within 300 calls; with it, 0 of 14
# (8 x 300 and 6 x 3000 calls).
REPRODUCER = textwrap.dedent("""
    import sys
    import bandits_jax
    import jax, jax.numpy as jnp
    assert bandits_jax.cpu_guard()
    jax.config.update("jax_enable_x64", True)
    f = jax.jit(lambda a, b: (jnp.linalg.cholesky(a), jnp.linalg.inv(b)))
    x = jax.random.normal(jax.random.PRNGKey(0), (10, 64, 64))
    a = x @ jnp.swapaxes(x, 1, 2) + 64 * jnp.eye(64)
    for i in range(int(sys.argv[1])):
        a = a + 1e-9
        jax.block_until_ready(f(a, a + 1.0))
    print("finished")
""")


def _python(code, *args, env=None, timeout=120):
    env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _intra_op_threads() -> int:
    """Live XLA intra-op pool threads of this process (their names hold "XLAEigen")."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += "XLAEigen" in f.read()
        except OSError:  # a thread that has exited since the listing
            pass
    return count


def test_guard_is_on_in_this_process_with_one_pool_thread():
    assert bandits_jax.cpu_guard()
    assert _intra_op_threads() == 1


def test_affinity_restored_for_every_thread():
    code = textwrap.dedent("""
        import os
        before = os.sched_getaffinity(0)
        import bandits_jax
        assert bandits_jax.cpu_guard()
        tids = os.listdir("/proc/self/task")
        assert len(tids) > 1, tids
        bad = [t for t in tids if os.sched_getaffinity(int(t)) != before]
        print(len(before), bad)
        assert not bad
    """)
    out = _python(code)
    assert out.returncode == 0, out.stderr


def test_late_guard_warns_and_reports_off():
    code = textwrap.dedent("""
        import warnings
        import bandits_jax
        import jax.numpy as jnp
        jnp.ones(2).block_until_ready()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert not bandits_jax.cpu_guard()
        assert any("call bandits_jax.cpu_guard() before" in str(w.message) for w in caught), caught
    """)
    out = _python(code)
    assert out.returncode == 0, out.stderr


def test_a_jax_without_the_private_probe_warns_and_reports_off():
    code = textwrap.dedent("""
        import warnings
        from jax._src import xla_bridge
        del xla_bridge.backends_are_initialized
        import bandits_jax
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert not bandits_jax.cpu_guard()
        assert any("has no xla_bridge.backends_are_initialized" in str(w.message) for w in caught), caught
        import jax.numpy as jnp
        print(float(jnp.ones(2).sum()))
    """)
    out = _python(code)
    assert out.returncode == 0 and out.stdout.strip() == "2.0", out.stderr


def test_opt_out_keeps_the_default_pool():
    code = "import bandits_jax, jax; print(bandits_jax.cpu_guard()); jax.devices()"
    out = _python(code, env={_cpu.GUARD_ENV: "0"})
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("calls", [500, pytest.param(1500, marks=pytest.mark.slow)])
def test_reproducer_finishes_under_a_time_limit(calls):
    try:
        out = _python(REPRODUCER, calls, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the two-LAPACK reproducer hung ({calls} calls did not finish in 180 s)")
    assert out.returncode == 0 and out.stdout.strip() == "finished", out.stderr


def test_import_creates_no_client_and_keeps_the_affinity():
    code = textwrap.dedent("""
        import os
        before = os.sched_getaffinity(0)
        import bandits_jax, bandits_jax.runner, bandits_jax.sweep, bandits_jax.experiments.registry
        from jax._src import xla_bridge
        assert not xla_bridge.backends_are_initialized()
        assert os.sched_getaffinity(0) == before
        print("clean")
    """)
    out = _python(code)
    assert out.returncode == 0 and out.stdout.strip() == "clean", out.stderr


def test_distributed_initialize_after_the_import():
    # one process on localhost: the runtime starts after the import, the guard then creates its clients
    code = textwrap.dedent("""
        import socket
        import bandits_jax
        import jax
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=1, process_id=0)
        assert bandits_jax.cpu_guard()
        from bandits_jax.problems import make_problem
        from bandits_jax.algorithms import make_algorithm
        from bandits_jax.runner import run_batch
        out = run_batch(make_problem("linear", num_agents=1, horizon=5), make_algorithm("linucb"), [0])
        print(jax.process_count(), out.regret.shape)
        jax.distributed.shutdown()
    """)
    out = _python(code, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "1 (1, 5, 1)", out.stderr


LLVM_FLAGS = textwrap.dedent("""
    import os
    import bandits_jax
    from bandits_jax import programs
    print(programs._accelerator_possible())
    bandits_jax.cpu_guard()
    print(os.environ.get("XLA_FLAGS", ""))
""")


def test_llvm_flags_go_into_xla_flags_before_the_clients_of_a_cpu_only_process():
    env = {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_enable_fast_min_max=false"}
    out = _python(LLVM_FLAGS, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [
        "False", "--xla_cpu_enable_fast_min_max=false --xla_backend_extra_options=-disable-lsr"]


def test_llvm_flags_leave_a_users_own_setting_and_an_accelerator_alone():
    mine = "--xla_backend_extra_options=-unroll-threshold=10"
    out = _python(LLVM_FLAGS, env={"JAX_PLATFORMS": "cpu", "XLA_FLAGS": mine})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["False", mine]
    # where another platform may be used, XLA would hand LLVM the flag for its programs too: only asked,
    # no client is made (there is no such device here)
    code = "from bandits_jax import programs; print(programs._accelerator_possible(), programs.cpu_llvm_flags())"
    out = _python(code, env={"JAX_PLATFORMS": "cuda,cpu", "XLA_FLAGS": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True False"


def test_llvm_flags_are_not_added_once_the_clients_exist(monkeypatch):
    from bandits_jax import programs

    bandits_jax.cpu_guard()  # the clients exist from here on
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_min_max=false")
    monkeypatch.setattr(programs, "_accelerator_possible", lambda: False)
    assert programs.cpu_llvm_flags() is False
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_enable_fast_min_max=false"
