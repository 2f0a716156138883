"""Federated neural bandits: FN-UCB.

NAMES maps each registered name of this lineage to ("module:factory" in this folder, the paper or
role it is reproduced for); `bandits_jax.algorithms` gathers the tables of all lineages.
"""

PAPER = "Federated Neural Bandits (Dai et al. 2023)"

NAMES = {
    "fn_ucb": ("fn_ucb:fn_ucb", PAPER),
    "fn_ucb_authors": ("fn_ucb:fn_ucb_authors", PAPER),
}
