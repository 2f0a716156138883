"""Distributed kernel bandits with epochs and sparse communication: DUETS.

NAMES maps each registered name of this lineage to ("module:factory" in this folder, the paper or
role it is reproduced for); `bandits_jax.algorithms` gathers the tables of all lineages.
"""

PAPER = "DUETS (Pavlovic, Salgia and Zhao 2024)"

NAMES = {
    "duets": ("duets:duets", PAPER),
    "duets_authors": ("duets_authors:duets_authors", PAPER),
}
