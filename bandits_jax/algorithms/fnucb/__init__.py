"""Federated neural bandits: FN-UCB."""

from ..tuning import Knob, Tuning

PAPER = "Federated Neural Bandits (Dai et al. 2023)"

NAMES = {
    "fn_ucb": ("fn_ucb:fn_ucb", PAPER),
    "fn_ucb_authors": ("fn_ucb:fn_ucb_authors", PAPER),
}

# D: a communication round when any agent's (s - t_last)(log det V - log det V_last) exceeds it (0: every step)
_D = Knob("D", (0.0, 1.0, 10.0, 100.0, 1e3, 1e4))
TUNING = {
    "fn_ucb": Tuning(("nu_tkn", "nu_tk"), _D),
    "fn_ucb_authors": Tuning(("nu_tkn", "nu_tk"), _D),
}
