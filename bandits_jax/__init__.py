"""bandits_jax: federated, distributed and cooperative kernel and neural bandits in JAX."""
__version__ = "0.1.0"
