"""Federated neural bandits: FN-UCB."""

PAPER = "Federated Neural Bandits (Dai et al. 2023)"

NAMES = {
    "fn_ucb": ("fn_ucb:fn_ucb", PAPER),
    "fn_ucb_authors": ("fn_ucb:fn_ucb_authors", PAPER),
}
