"""`quickstart`: the embedded default run.

Synthetic cosine reward h(x) = cos(3 <a, x>) of the FN-UCB paper (d = 10, K = 4, the authors'
fixed unit vector a, contexts normalised from a cube, noise std 0.01), single-agent baselines:
LinUCB, LinTS, KernelUCB, KernelTS, NeuralUCB, NeuralTS and uniform random. Cumulative regret
is shown as the FN-UCB paper plots it: mean over agents, mean +- standard error over seeds.
"""
from __future__ import annotations

from ..algorithms.kernel import kernel_ts, kernel_ucb
from ..algorithms.linear import lints, linucb
from ..algorithms.neural import neural_ts, neural_ucb
from ..algorithms.uniform import uniform_random
from ..problems import make_problem
from .registry import Experiment, register

DEFAULTS = {
    "num_agents": 1,
    "num_arms": 4,
    "dim": 10,
    "noise_std": 0.01,
    "lin_lam": 1.0,
    "lin_beta": 0.1,
    "kernel": "rbf",
    "kernel_lam": 0.1,
    "kernel_beta": 0.5,
    "lengthscale": 1.0,
    "neural_lam": 0.1,
    "neural_beta": 0.0316,  # = sqrt(lam * nu) with the FN-UCB authors' nu = 0.01, lam = 0.1
    "width": 20,
    "train_steps": 30,
    "lr": 0.01,
}


def build(config):
    problem = make_problem("cosine", num_agents=config["num_agents"], num_arms=config["num_arms"],
                           dim=config["dim"], horizon=config["horizon"], noise_std=config["noise_std"])
    neural = dict(width=config["width"], train_steps=config["train_steps"], lr=config["lr"],
                  lam=config["neural_lam"])
    kernel = dict(kernel=config["kernel"], lam=config["kernel_lam"], lengthscale=config["lengthscale"])
    algorithms = [
        linucb(lam=config["lin_lam"], beta=config["lin_beta"]),
        lints(lam=config["lin_lam"], nu=config["lin_beta"]),
        kernel_ucb(beta=config["kernel_beta"], **kernel),
        kernel_ts(nu=config["kernel_beta"], **kernel),
        neural_ucb(beta=config["neural_beta"], **neural),
        neural_ts(nu=config["neural_beta"], **neural),
        uniform_random(),
    ]
    return problem, algorithms


register(Experiment(
    name="quickstart",
    description="cosine reward, d=10, K=4: linear, kernel and neural UCB/TS against uniform random",
    defaults=DEFAULTS,
    sizes={"paper": {"horizon": 500, "seeds": 8, "first_segment": 256},
           "smoke": {"horizon": 40, "seeds": 2, "width": 8, "train_steps": 3}},
    build=build,
    agents="mean",
    se_ddof=0,
))
