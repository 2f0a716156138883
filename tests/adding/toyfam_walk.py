"""The toy family's one algorithm: the toy baseline with a smaller bonus, under its own name."""
from __future__ import annotations

from ...core import Algorithm
from ..single.toy_greedy import toy_greedy


def toy_walk(bonus: float = 0.5) -> Algorithm:
    """The toy greedy learner with a smaller bonus (a toy family's algorithm)."""
    return toy_greedy(bonus)._replace(name="ToyWalk")
