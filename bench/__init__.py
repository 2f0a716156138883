"""Benchmarks: throughput of the JAX algorithms against plain NumPy reference loops."""
