"""Plain NumPy reference loops, written straight from the formulas (a fresh inverse per step)."""
