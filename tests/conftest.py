# The CPU guard (bandits_jax/_cpu.py) first thing in every test process, before any jax computation:
# importing bandits_jax no longer applies it.
import bandits_jax

bandits_jax.cpu_guard()

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _own_curve_cache(tmp_path, monkeypatch):
    """Each test gets an empty curve cache of its own: nothing lands in the working tree, and no test
    finds curves another test computed (tests that count computed chunks rely on it)."""
    monkeypatch.setenv("BANDITS_JAX_CURVES", str(tmp_path / "curve_cache"))
