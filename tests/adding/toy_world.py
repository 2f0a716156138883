"""A toy problem: the cosine reward on four-dimensional contexts."""
from __future__ import annotations

from ..core import Problem
from .synthetic import cosine


def toy_cosine(num_agents: int = 2, horizon: int = 10, num_arms: int = 3) -> Problem:
    """The cosine reward in d = 4 with three arms (a toy problem)."""
    return cosine(num_agents=num_agents, horizon=horizon, num_arms=num_arms, dim=4)
