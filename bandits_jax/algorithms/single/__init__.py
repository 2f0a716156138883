"""Single-agent baselines and best-arm identification: the learners every family is compared with."""

from ..tuning import Tuning

PAPER = ""  # no paper of its own: the baselines of the five

NAMES = {
    "uniform_random": ("uniform:uniform_random", "baseline of every experiment"),
    "linucb": ("linear:linucb", "baseline in Dai et al. 2023"),
    "lints": ("linear:lints", "baseline in Dai et al. 2023"),
    "kernel_ucb": ("kernel:kernel_ucb", "baseline in Dai et al. 2023"),
    "kernel_ts": ("kernel:kernel_ts", "baseline in Dai et al. 2023"),
    "neural_ucb": ("neural:neural_ucb", "baseline in Dai et al. 2023"),
    "neural_ts": ("neural:neural_ts", "baseline in Dai et al. 2023"),
    "uniform_allocation": ("elimination:uniform_allocation", "baseline of best-arm identification"),
    "successive_elimination": ("elimination:successive_elimination", "best-arm identification (Even-Dar et al. 2006)"),
}

TUNING = {
    "uniform_random": Tuning(note="nothing to tune: it ignores what it observes"),
    "linucb": Tuning(("beta",)),
    "lints": Tuning(("nu",)),
    "kernel_ucb": Tuning(("beta",)),
    "kernel_ts": Tuning(("nu",)),
    "neural_ucb": Tuning(("beta",)),
    "neural_ts": Tuning(("nu",)),
    "uniform_allocation": Tuning(note="a phase-level trial: no regret to tune"),
    "successive_elimination": Tuning(note="a phase-level trial: no regret to tune"),
}
