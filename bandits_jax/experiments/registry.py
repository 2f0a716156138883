"""Named experiments: one per paper figure or table, each with a `smoke` and a `paper` size.

An experiment is a configuration dict with typed defaults, size overrides, and a `build`
function that turns a resolved configuration into (problem, [algorithms]), or into a list of
(problem, algorithm) pairs (an `Arms` world and a `Trial` for a phase-level experiment) when the algorithms run on different problems (e.g. different numbers
of agents; `build_runs` gives the pairs in both cases). Building validates
everything (names, signs, shapes, data files) and compiles nothing, so bad input fails fast.

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


def experiments() -> dict:
    from . import quickstart  # noqa: F401  (registers itself)
    from . import fnucb  # noqa: F401
    from . import async_exps  # noqa: F401
    from . import pure_exploration  # noqa: F401
    from . import duets  # noqa: F401

    return dict(sorted(_REGISTRY.items()))


def get_experiment(name: str) -> Experiment:
    known = experiments()
    if name not in known:
        raise ConfigError(f"unknown experiment {name!r}; `bandits-jax list` shows the {len(known)} known ones")
    return known[name]


def build_runs(exp: Experiment, config: dict) -> list:
    """The experiment's runs as (problem, algorithm, grid) triples, whichever form `build` returns.

    `build` returns (problem, [algorithms]), or a list of (problem, algorithm) pairs, or of
    (problem, algorithm, grid) triples, where grid is None or a list of (label, hparams) points:
    the algorithm then runs at every point, all points and seeds in ONE compiled call, and each
    point is stored as its own curve named "<algorithm> [<label>]" (see `grid_names`).
    """
    built = exp.build(config)
    if isinstance(built, tuple) and len(built) == 2 and not isinstance(built[1], tuple) and hasattr(built[0], "spec"):
        problem, algorithms = built
        return [(problem, alg, None) for alg in algorithms]
    return [(item[0], item[1], item[2] if len(item) > 2 else None) for item in built]


def grid_names(alg_name: str, grid) -> list:
    """The stored curve names of an algorithm run over grid points [(label, hparams)]."""
    return [f"{alg_name} [{label}]" for label, _ in grid]


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


def number_list(config: dict, key: str) -> list:
    """The floats of config[key], a comma-separated string ("0.2,0.5,1"; empty items skipped); a
    ConfigError names the key when an item is not a number. Bounds are the caller's to check."""
    raw = str(config[key]).strip()
    try:
        return [float(v) for v in raw.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{key} must be comma-separated numbers, got {raw!r}") from None


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
