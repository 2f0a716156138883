"""bandits_jax: federated, distributed and cooperative kernel and neural bandits in JAX."""
from bandits_jax._cpu import one_thread_cpu_client

__version__ = "0.1.0"
CPU_GUARD = one_thread_cpu_client()  # before any jax computation; see bandits_jax/_cpu.py
