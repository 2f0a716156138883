"""Distributed kernel bandits with epochs and sparse communication: DUETS."""

from ..record import BenchCase, Record
from ..tuning import Knob, Tuning

PAPER = "DUETS (Pavlovic, Salgia and Zhao 2024)"

# p0 (p_log): how many of an epoch's points are kept, so sent (their trigger of communication)
NAMES = {
    "duets": Record("duets:duets", PAPER, Tuning(("beta",), Knob("p0", (0.1, 0.3, 1.0, 3.0, 10.0, 30.0))),
                    BenchCase("duets/h1", "paper", "DUETS", point="beta=1")),
    "duets_authors": Record("duets_authors:duets_authors", PAPER,
                            Tuning(("beta",), Knob("p_log", (0.5, 1.0, 2.0, 4.0, 8.0, 16.0))),
                            BenchCase("duets/h1", "paper", "DUETS-authors", point="beta=1")),
}
