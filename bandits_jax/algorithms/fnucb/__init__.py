"""Federated neural bandits: FN-UCB."""

from ..record import BenchCase, Record
from ..tuning import Knob, Tuning

PAPER = "Federated Neural Bandits (Dai et al. 2023)"

# D: a communication round when any agent's (s - t_last)(log det V - log det V_last) exceeds it (0: every step)
_TUNING = Tuning(("nu_tkn", "nu_tk"), Knob("D", (0.0, 1.0, 10.0, 100.0, 1e3, 1e4)))
_T300 = {"horizon": "300"}

NAMES = {
    "fn_ucb": Record("fn_ucb:fn_ucb", PAPER, _TUNING,
                     BenchCase("fnucb/fig1c", "paper", "FN-UCB (no NN aggregation)", _T300)),
    "fn_ucb_authors": Record("fn_ucb:fn_ucb_authors", PAPER, _TUNING,
                             BenchCase("fnucb/fig1a", "paper", "FN-UCB (N=10)", _T300)),
}
