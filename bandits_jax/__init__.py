"""bandits_jax: federated, distributed and cooperative kernel and neural bandits in JAX.

Importing the package creates no XLA client and changes no CPU affinity: the guard against jaxlib's
batched-LAPACK deadlock (`cpu_guard`, see `bandits_jax/_cpu.py`) runs when something first computes
(the command line, the benchmarks, `make_problem`, `make_algorithm`, `run_batch`, `run_trials`), so a
multi-process user may call `jax.distributed.initialize` after importing the library.
"""
from bandits_jax._cpu import cpu_guard

__version__ = "0.1.0"
__all__ = ["cpu_guard", "__version__"]
