"""The test oracle: plain NumPy loops written straight from each paper's spec (a fresh inverse per
step, no JAX), one module per algorithm. The tests run them beside the JAX algorithms on the same
random numbers (tests/test_*_np.py and the algorithm tests), and `bench` times them as the baseline
of its speed-ups. They are not part of the installed package: import them from a clone."""
