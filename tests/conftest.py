# Imported first by pytest: bandits_jax before any jax computation, so that its CPU guard
# (bandits_jax/_cpu.py) is on in every test process.
import bandits_jax  # noqa: F401
