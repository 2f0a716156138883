"""Distributed kernel bandits with epochs and sparse communication: DUETS."""

from ..tuning import Knob, Tuning

PAPER = "DUETS (Pavlovic, Salgia and Zhao 2024)"

NAMES = {
    "duets": ("duets:duets", PAPER),
    "duets_authors": ("duets_authors:duets_authors", PAPER),
}

TUNING = {  # p0 (p_log): how many of an epoch's points are kept, so sent (their trigger of communication)
    "duets": Tuning(("beta",), Knob("p0", (0.1, 0.3, 1.0, 3.0, 10.0, 30.0))),
    "duets_authors": Tuning(("beta",), Knob("p_log", (0.5, 1.0, 2.0, 4.0, 8.0, 16.0))),
}
