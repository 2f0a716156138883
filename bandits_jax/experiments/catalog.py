"""The catalog of registered experiments: importing it registers every family's experiments.

`experiments()` lists them and `get_experiment(name)` finds one; the family modules import
`registry` (below this module), never this one, so the experiments have no import circle.
"""
from __future__ import annotations

from ..core import ConfigError
from . import async_exps, coop, cope, duets, fnucb, pure_exploration, quickstart  # noqa: F401  (each registers itself)
from .registry import _PAGES, _REGISTRY, Experiment, Page


def experiments() -> dict:
    """{name: Experiment} of every registered experiment, sorted by name."""
    return dict(sorted(_REGISTRY.items()))


def get_experiment(name: str) -> Experiment:
    known = experiments()
    if name not in known:
        raise ConfigError(f"unknown experiment {name!r}; `bandits-jax list` shows the {len(known)} known ones")
    return known[name]


def pages() -> dict:
    """{name: Page} of every paper's reproduction page, in the order the families were registered."""
    return dict(_PAGES)
