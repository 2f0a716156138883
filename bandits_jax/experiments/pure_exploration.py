"""`bai/elimination`: best-arm identification on fixed Gaussian arms, a phase-level experiment.

Successive elimination (fixed confidence, Even-Dar, Mannor and Mansour 2006) at several confidence
levels delta, all in one compiled call, beside uniform allocation at a fixed budget, on N agents
with K arms whose best arm leads by `gap` (problems.arms.gaussian_arms). Each seed is one trial;
the outcomes are the probability that every agent names its best arm, the pulls used (the sample
complexity) and the pulling rounds, each with its 95% interval. The smallest experiment of its
kind: it shows what the sweep does with outputs that are not regret curves.
"""
from __future__ import annotations

from ..curves import Curve, Spec
from ..problems.cope import MAX_GAP
from ..problems.synthetic import MAX_NOISE_STD
from .registry import COUNT, Bound, Experiment, parse_list, register

DEFAULTS = {
    "num_agents": 1,
    "num_arms": 10,
    "gap": 0.5,
    "noise_std": 1.0,
    "delta_values": "0.01,0.05,0.2",
    "budget": 2000,
    "max_rounds": 100_000,
}
# registry.Bound: sizes and counts are int32; gap ends where the CoPE-KB world's does (problems.cope: far past
# any gap an identification needs, while the staircase gap (K - 1) times a pull count stays finite in float32),
# noise_std where every world's does (problems.synthetic: rewards that are pure noise)
BOUNDS = {"num_agents": COUNT, "num_arms": COUNT, "gap": Bound(0, MAX_GAP),
          "noise_std": Bound(0, MAX_NOISE_STD, open_low=True), "budget": COUNT, "max_rounds": COUNT}


def build(config):
    arms = Spec("gaussian-arms", {k: config[k] for k in ("num_agents", "num_arms", "gap", "noise_std")})
    grid = tuple((f"delta={d:g}", {"delta": d}) for d in parse_list(config, "delta_values", float))
    elimination = Spec("successive_elimination", {"sigma": config["noise_std"], "max_rounds": config["max_rounds"]})
    return [Curve("Successive elimination", arms, elimination, grid, tags={"method": "successive elimination"}),
            Curve("Uniform allocation", arms, Spec("uniform_allocation", {"budget": config["budget"]}),
                  tags={"method": "uniform allocation", "budget": config["budget"]})]


register(Experiment(
    name="bai/elimination",
    description="best-arm identification on Gaussian arms: successive elimination over a delta grid "
                "against uniform allocation at a fixed budget",
    defaults=DEFAULTS,
    sizes={"paper": {"seeds": 1000}, "smoke": {"seeds": 16, "num_arms": 4}},
    build=build,
    notes="Phase-level trials: one trial per seed; `horizon` and `first_segment` are not used. Successive "
          "elimination is told the noise level (sigma = noise_std).",
    bounds=BOUNDS,
))
