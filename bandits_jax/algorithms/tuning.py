"""What a comparison may tune of an algorithm, declared beside its name (the `tuning` of its record in
its lineage's `NAMES`, `record.py`, or `register_algorithm(..., exploration=..., knob=...)` for a plugin):

    Tuning(exploration=("alpha",), knob=Knob("threshold", (0.1, 1.0, 10.0, 100.0, 1e3, 1e4)))

exploration: the hyper-parameters that set the width of the confidence bound (or the posterior
    sample's scale); a grid scales them together by one factor, so each must have a positive default.
    An algorithm that declares none is run at its defaults only ("not tuned: no exploration parameter
    declared").
knob: the traced hyper-parameter that sets how often the algorithm communicates, and the operating
    points of its regret-communication curve (`values`, distinct, non-negative, ascending, its default
    among them); or, `on="problem"`, a problem option that sets it (the Coop methods' message TTL, an
    option of the network problems: a problem without it gives one operating point); None for an
    algorithm that never communicates (`note` may say why).

The arena reads only this: no table of names and no guess from a parameter's name.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

from ..core import ConfigError

MIN_KNOB_POINTS = 4  # a curve needs at least this many operating points


class Knob(NamedTuple):
    """The communication knob: a traced hyper-parameter and its operating points (module docstring)."""

    param: str
    values: tuple
    on: str = "algorithm"


class Tuning(NamedTuple):
    """An algorithm's declaration: its exploration parameters, its communication knob, and a note."""

    exploration: tuple = ()
    knob: Optional[Knob] = None
    note: str = ""


def check_tuning(name: str, tuning: Tuning, defaults: dict) -> None:
    """Refuse (ConfigError, one line) a declaration that does not fit the algorithm built under `name`
    with hyper-parameter defaults `defaults` {param: default}: a parameter it does not declare, an
    exploration parameter with no positive default, a knob with fewer than MIN_KNOB_POINTS points,
    unsorted, negative or non-finite values, or values that leave out its default."""
    if not isinstance(tuning, Tuning):
        raise ConfigError(f"{name}: its declaration must be a Tuning, got {type(tuning).__name__}")
    for param in tuning.exploration:
        if param not in defaults:
            raise ConfigError(f"{name}: exploration parameter {param!r} is not one of its hyper-parameters "
                              f"({', '.join(defaults) or 'none'})")
        if not defaults[param] > 0:
            raise ConfigError(f"{name}: exploration parameter {param} has default {defaults[param]}; a grid scales "
                              f"it by factors, so declare only parameters with a positive default")
    knob = tuning.knob
    if knob is None:
        return
    if knob.on not in ("algorithm", "problem"):
        raise ConfigError(f"{name}: its knob is on 'algorithm' (a hyper-parameter) or 'problem' (a problem option), "
                          f"got {knob.on!r}")
    if knob.on == "algorithm" and knob.param not in defaults:
        raise ConfigError(f"{name}: its communication knob {knob.param!r} is not one of its hyper-parameters "
                          f"({', '.join(defaults) or 'none'})")
    values = [float(v) for v in knob.values]
    if (len(values) < MIN_KNOB_POINTS or any(not math.isfinite(v) or v < 0 for v in values)
            or values != sorted(set(values))):
        raise ConfigError(f"{name}: the values of its knob {knob.param} must be at least {MIN_KNOB_POINTS} distinct, "
                          f"non-negative, finite numbers in ascending order, got {list(knob.values)}")
    if knob.on == "algorithm" and float(defaults[knob.param]) not in values:
        raise ConfigError(f"{name}: the values of its knob {knob.param} must include its default "
                          f"{defaults[knob.param]:g}, got {list(knob.values)}")
