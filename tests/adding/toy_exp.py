"""A toy experiment: the toy baseline and the toy family's algorithm on the toy problem."""
from __future__ import annotations

from ..curves import Curve, Spec
from .registry import COUNT, Experiment, register


def build(config: dict) -> list:
    world = Spec("toy-cosine", {"num_agents": config["num_agents"], "horizon": config["horizon"]})
    return [Curve("ToyGreedy", world, Spec("toy_greedy")), Curve("ToyWalk", world, Spec("toy_walk"))]


register(Experiment(name="toy/added", description="the toy learners on the toy problem",
                    defaults={"num_agents": 2}, bounds={"num_agents": COUNT},
                    sizes={"smoke": {"horizon": 6, "seeds": 2}, "paper": {"horizon": 20, "seeds": 4}}, build=build))
