"""A toy family: one name, built from the toy baseline."""

from ..record import BenchCase, Record
from ..tuning import Tuning

PAPER = "Toy paper (2026)"

NAMES = {
    "toy_walk": Record("walk:toy_walk", PAPER, Tuning(("bonus",)), BenchCase("toy/added", "smoke", "ToyWalk"),
                       silent=True),
}
