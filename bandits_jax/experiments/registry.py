"""Named experiments: one per paper figure or table, each with a `smoke` and a `paper` size.

An experiment is data: a configuration dict with typed defaults, size overrides, and a `build`
function that turns a resolved configuration into a list of `curves.Curve` (display name, problem
spec, algorithm spec, optional grid, key stream, tags). The sweep resolves every spec through the
registries (`curves.resolve`); `build_runs` gives the built (problem, algorithm, grid) triples.
Building validates everything (names, signs, shapes, data files) and compiles nothing, so bad input
fails fast. `Experiment.x` names a tag (e.g. "N") that the plot puts on an x-axis.

Every configuration has the keys `seeds`, `first_seed`, `horizon`, `precision`, `base_key`
`first_segment` (the length of the first capacity segment: fewer, longer segments compile
less and compute more) and `vmap_size` (at most this many runs under one vmap, see
`runner.run_batch`; 0: the backend's default); the CLI maps `--seeds`, `--first-seed` and `--horizon` onto them and `--set
KEY=VALUE` onto any key.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..core import ConfigError
from ..curves import Curve, grid_names, resolve  # noqa: F401  (grid_names: re-exported)

COMMON_DEFAULTS = {"seeds": 8, "first_seed": 0, "horizon": 1000, "precision": "float64", "base_key": 0,
                   "first_segment": 128, "vmap_size": 0}
# keys that may change between resumed runs (one_storage: how exact OneKernelUCB stores its model, the same
# numbers to rounding)
RUN_KEYS = ("seeds", "first_seed", "precision", "one_storage", "vmap_size")


@dataclasses.dataclass(frozen=True)
class Experiment:
    """name: `family/figure`; build(config) -> (problem, [algorithms]) or [(problem, algorithm), ...].

    agents:  how per-agent regret is reduced in plots and summaries ("mean" or "sum"),
             following the paper the experiment reproduces.
    se_ddof: the degrees of freedom of the standard error's std (the FN-UCB plots use 0).
    band:    what +- means in summaries and plot bands: "se" (the standard error) or "std" (the
             spread over runs, as the DUETS paper's Figure 1 draws).
    notes:   a paragraph copied into every summary (stand-ins, deviations from the paper).
    x:       a tag whose values the plot puts on an x-axis (final regret against it), "" for none.
    panels:  phase-level outcomes drawn against x, ((outcome, how, y scale), ...): how "mean" or
             "rate" draws the outcome, "error" draws 1 - a rate (an error probability); y scale
             "log" or "linear". Empty: one panel per outcome, one point per curve.
    derived: curves computed from others, never run: ((method, source method, outcome, factor), ...),
             the source's outcome (and interval) times factor (e.g. IndRAGE/V); shown in the plot and
             the summary beside the run curves.
    """

    name: str
    description: str
    defaults: dict
    sizes: dict
    build: Callable
    agents: str = "mean"
    se_ddof: int = 0
    band: str = "se"
    notes: str = ""
    x: str = ""
    panels: tuple = ()
    derived: tuple = ()


_REGISTRY: dict = {}


def register(exp: Experiment) -> Experiment:
    if exp.name in _REGISTRY:
        raise ValueError(f"experiment {exp.name} registered twice")
    for size, overrides in exp.sizes.items():
        unknown = set(overrides) - set(COMMON_DEFAULTS) - set(exp.defaults)
        if unknown:
            raise ValueError(f"{exp.name}: size {size} sets unknown keys {sorted(unknown)}")
    _REGISTRY[exp.name] = exp
    return exp


def build_curves(exp: Experiment, config: dict) -> list:
    """The experiment's curves for a resolved configuration (a ConfigError when build returns anything
    but Curves)."""
    built = list(exp.build(config))
    bad = [type(c).__name__ for c in built if not isinstance(c, Curve)]
    if bad:
        raise ConfigError(f"{exp.name}: build must return Curves (experiments are data), got {', '.join(bad)}")
    return built


def build_runs(exp: Experiment, config: dict) -> list:
    """The experiment's runs as (problem, algorithm, grid) triples, each algorithm carrying its curve's
    name and stream; grid is None or ((label, hparams), ...), every point stored as "<name> [<label>]"."""
    return [(run.problem, run.algorithm, run.curve.grid) for run in resolve(build_curves(exp, config))]


def resolve_config(exp: Experiment, size: str, overrides: dict) -> dict:
    """Defaults, then the size's overrides, then the user's; each user value parsed to the default's type."""
    if size not in exp.sizes:
        raise ConfigError(f"{exp.name} has no size {size!r}; choose one of {', '.join(exp.sizes)}")
    config = {**COMMON_DEFAULTS, **exp.defaults, **exp.sizes[size]}
    for key, raw in overrides.items():
        if key not in config:
            raise ConfigError(f"{exp.name}: unknown key {key!r}; settable keys: {', '.join(sorted(config))}")
        config[key] = parse_value(key, raw, config[key])
    for key in ("seeds", "horizon", "first_segment"):
        if config[key] < 1:
            raise ConfigError(f"{key} must be at least 1, got {config[key]}")
    if config["vmap_size"] < 0:
        raise ConfigError(f"vmap_size must be >= 0 (0: the backend's default), got {config['vmap_size']}")
    if config["first_seed"] < 0:
        raise ConfigError(f"first_seed must be >= 0, got {config['first_seed']}")
    return config


def parse_list(config: dict, key: str, kind=float, minimum=None, allow_empty: bool = False) -> list:
    """The values of config[key], a comma-separated string ("0.2,0.5,1"; empty items skipped), each of
    type `kind`; a ConfigError names the key when an item does not parse, when the list is empty
    (unless allow_empty), when a value is below `minimum`, or when a value is repeated."""
    raw = config[key]
    try:
        values = [kind(p.strip()) for p in str(raw).split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"{key} must be a comma-separated list of {kind.__name__}, got {raw!r}") from None
    if not values and not allow_empty:
        raise ConfigError(f"{key} must list at least one value, got {raw!r}")
    if minimum is not None and any(v < minimum for v in values):
        raise ConfigError(f"{key}: every value must be >= {minimum}, got {raw!r}")
    if len(set(values)) != len(values):
        raise ConfigError(f"{key} lists a value twice: {raw!r}")
    return values


def parse_value(key: str, raw, default):
    """Parse a command-line string into the type of the default value."""
    if not isinstance(raw, str):
        return raw
    kind = type(default)
    try:
        if kind is bool:
            low = raw.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return low in ("true", "1", "yes")
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if default is None:
            return None if raw.lower() == "none" else raw
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{key} must be of type {kind.__name__}, got {raw!r}") from None
