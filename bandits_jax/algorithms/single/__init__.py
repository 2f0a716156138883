"""Single-agent baselines and best-arm identification: the learners every family is compared with."""

from ..record import BenchCase, Record
from ..tuning import Tuning

PAPER = ""  # no paper of its own: the baselines of the five

_DAI = "baseline in Dai et al. 2023"
_T300 = {"horizon": "300"}
_TRIAL = Tuning(note="a phase-level trial: no regret to tune")


def _fig4(method: str) -> BenchCase:
    return BenchCase("fnucb/fig4", "paper", f"cosine: {method} (nu=1)", _T300)


NAMES = {
    "uniform_random": Record("uniform:uniform_random", "baseline of every experiment",
                             Tuning(note="nothing to tune: it ignores what it observes"),
                             BenchCase("async/synthetic-f1", "paper", "Random", _T300), silent=True),
    "linucb": Record("linear:linucb", _DAI, Tuning(("beta",)), _fig4("LinUCB"), silent=True),
    "lints": Record("linear:lints", _DAI, Tuning(("nu",)), _fig4("LinTS"), silent=True),
    "kernel_ucb": Record("kernel:kernel_ucb", _DAI, Tuning(("beta",)), _fig4("KernelUCB"), silent=True),
    "kernel_ts": Record("kernel:kernel_ts", _DAI, Tuning(("nu",)), _fig4("KernelTS"), silent=True),
    "neural_ucb": Record("neural:neural_ucb", _DAI, Tuning(("beta",)),
                         BenchCase("fnucb/fig1a", "paper", "NeuralUCB", _T300), silent=True),
    "neural_ts": Record("neural:neural_ts", _DAI, Tuning(("nu",)),
                        BenchCase("fnucb/fig1a", "paper", "NeuralTS", _T300), silent=True),
    "uniform_allocation": Record("elimination:uniform_allocation", "baseline of best-arm identification", _TRIAL,
                                 BenchCase("bai/elimination", "paper", "Uniform allocation")),
    "successive_elimination": Record("elimination:successive_elimination",
                                     "best-arm identification (Even-Dar et al. 2006)", _TRIAL,
                                     BenchCase("bai/elimination", "paper", "Successive elimination",
                                               point="delta=0.05")),
}
