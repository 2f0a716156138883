"""A registered name's record: what the library declares of it, once, beside its factory in its family's
`NAMES` table (`bandits_jax/algorithms/<family>/__init__.py`):

    "dis_kernel_ucb": Record("dis_kernel:dis_kernel_ucb", "baseline in Li et al. 2023",
                             Tuning(("alpha",), THRESHOLD),
                             BenchCase("async/synthetic-f1", "paper", "DisKernelUCB", {"horizon": "300"}))

target: "module:factory" inside the family folder.
role: the paper it is reproduced for, or its role there ("baseline in ..."): the docs table's column.
tuning: what a comparison may tune of it (`tuning.Tuning`: its exploration parameters and its
    communication knob); the arena reads only this.
bench: the one configuration `bench/scale.py` times it at (`BenchCase`): an experiment's curve at a size,
    so a new name needs an experiment curve that runs it (or an existing one it can stand in).
silent: True for a regret algorithm that never sends a scalar (its agents learn from their own
    data alone): the information-flow audit holds it to no scalar and no round, and a name that does
    communicate has a hand-computed count instead (tests/test_info_flow.py, tests/test_comm_unit.py).

Whether a name is a regret algorithm or a phase-level trial is what its factory returns (`core.Trial`),
so it is not declared a second time here. The options a family's own experiment gives its names on its
own problems are the family's `SETTING` (one per family, beside `NAMES`).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from .tuning import Tuning


class BenchCase(NamedTuple):
    """The configuration a name is timed at: the curve `curve` of `experiment` at `size` with `overrides`
    ({key: value as --set takes it}), at its grid point `point` where the curve has a grid."""

    experiment: str
    size: str
    curve: str
    overrides: Optional[dict] = None
    point: Optional[str] = None


class Record(NamedTuple):
    """A registered name's declaration (module docstring)."""

    target: str
    role: str
    tuning: Tuning
    bench: BenchCase
    silent: bool = False
