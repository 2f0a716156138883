# Imported first by pytest: bandits_jax before any jax computation, so that its CPU guard
# (bandits_jax/_cpu.py) is on in every test process.
import bandits_jax  # noqa: F401

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _own_curve_cache(tmp_path, monkeypatch):
    """Each test gets an empty curve cache of its own: nothing lands in the working tree, and no test
    finds curves another test computed (tests that count computed chunks rely on it)."""
    monkeypatch.setenv("BANDITS_JAX_CURVES", str(tmp_path / "curve_cache"))
