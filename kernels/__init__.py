"""Accelerator math with no bandit words in it: kernel functions, NTK features, incremental linear algebra,
experimental design."""
