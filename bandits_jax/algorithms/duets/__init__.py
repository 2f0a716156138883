"""Distributed kernel bandits with epochs and sparse communication: DUETS."""

PAPER = "DUETS (Pavlovic, Salgia and Zhao 2024)"

NAMES = {
    "duets": ("duets:duets", PAPER),
    "duets_authors": ("duets_authors:duets_authors", PAPER),
}
