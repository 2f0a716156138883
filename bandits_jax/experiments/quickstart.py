"""`quickstart`: the embedded default run, the federated story in one short run.

Synthetic cosine reward h(x) = cos(3 <a, x>) of the FN-UCB paper (d = 10, K = 4, the authors'
fixed unit vector a, contexts normalised from a cube, noise std 0.01): FN-UCB with N in
{1, 2, 5} agents against single-agent NeuralUCB, KernelUCB and uniform random, 4 seeds. FN-UCB
and NeuralUCB use the settings of `fnucb/fig1a` (mode=authors: the official code's option set;
lam = nu_TKN = nu_TK = 0.1, width 20, communication every round); T = 300 is short of the
alpha ramp (3 + 700 iterations), so FN-UCB's agents act mostly on UCB_a, the synchronised
statistics of all agents. As in `fnucb/*`, each FN-UCB curve and NeuralUCB start from their own
initial networks (key streams by method and N); KernelUCB and random keep the default stream.
Cumulative regret is shown as the FN-UCB paper plots it: mean over
agents, mean +- standard error over seeds.
"""
from __future__ import annotations

from ..curves import Curve, Spec
from .fnucb import BOUNDS, SYNTH_DEFAULTS, fn_family, neural_curves, problem_spec
from .registry import Experiment, parse_list, register

DEFAULTS = {
    **SYNTH_DEFAULTS,
    "n_values": "1,2,5",
    "kernel": "rbf",
    "kernel_lam": 0.1,
    "kernel_beta": 0.5,
    "lengthscale": 1.0,
}


def build(config):
    single = problem_spec(config, "cosine", 1)
    kernel = Spec("kernel_ucb", dict(kernel=config["kernel"], lam=config["kernel_lam"], beta=config["kernel_beta"],
                                     lengthscale=config["lengthscale"]))
    return (fn_family(config, "cosine", parse_list(config, "n_values", int, 1)) + neural_curves(config, "cosine")[:1]
            + [Curve("KernelUCB", single, kernel, tags={"method": "KernelUCB", "N": 1}),
               Curve("Random", single, Spec("uniform_random"), tags={"method": "Random", "N": 1})])


register(Experiment(
    name="quickstart",
    description="cosine reward, d=10, K=4: FN-UCB with N in {1, 2, 5} against NeuralUCB, KernelUCB and "
                "uniform random",
    defaults=DEFAULTS,
    sizes={"paper": {"horizon": 300, "seeds": 4, "first_segment": 512},
           "smoke": {"horizon": 40, "seeds": 2, "width": 8, "train_steps": 3, "n_values": "1,2",
                     "first_segment": 64}},
    build=build,
    agents="mean",
    se_ddof=0,
    bounds=BOUNDS,
))
