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
import math
from typing import Callable, NamedTuple, Optional

from ..core import PRECISIONS, ConfigError
from ..curves import Curve, grid_names, resolve  # noqa: F401  (grid_names: re-exported)
from ..problems.synthetic import MAX_NOISE_STD


class Bound(NamedTuple):
    """The values a numeric configuration key allows: at least `low` (above it when `open_low`) and at
    most `high` (below it when `open_high`); None: no limit on that side. Every value is finite."""

    low: Optional[float] = None
    high: Optional[float] = None
    open_low: bool = False
    open_high: bool = False

    def allows(self, value) -> bool:
        above = self.low is None or (value > self.low if self.open_low else value >= self.low)
        below = self.high is None or (value < self.high if self.open_high else value <= self.high)
        return math.isfinite(value) and above and below

    def __str__(self) -> str:
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.open_low else '['}{low}, {high}{')' if self.open_high else ']'}"
        if self.low is not None:
            return f"{'>' if self.open_low else '>='} {low}"
        if self.high is not None:
            return f"{'<' if self.open_high else '<='} {high}"
        return "finite"


def _number(x) -> str:
    """A bound's end as the message shows it: an integer exactly (2147483647), a float in %g (1e+06)."""
    return str(x) if isinstance(x, int) else f"{x:g}" if x is not None else ""


POSITIVE = Bound(0, open_low=True)
NONNEGATIVE = Bound(0)
AT_LEAST_ONE = Bound(1)
CONFIDENCE = Bound(0, 1, open_low=True, open_high=True)  # a confidence level delta
ANY = Bound()
# Integer ends. Steps, sizes, capacities and indices are int32 in the compiled runs (jax's default integer): a
# count above INT32_MAX cannot even be represented there. Seeds and key data are uint32 (`keys.seed_key`
# folds the seed into a threefry key): a larger base_key would alias a smaller one under float32.
INT32_MAX = 2 ** 31 - 1
UINT32_MAX = 2 ** 32 - 1
COUNT = Bound(1, INT32_MAX)  # a size, a capacity or a number of steps
COUNT_OR_ZERO = Bound(0, INT32_MAX)  # the same where 0 means "none" or "the default"
KEY = Bound(0, UINT32_MAX)  # a seed or key number
NOISE_STD = Bound(0, MAX_NOISE_STD)  # a reward noise level, up to where every world's rewards are pure noise

COMMON_DEFAULTS = {"seeds": 8, "first_seed": 0, "horizon": 1000, "precision": "float64", "base_key": 0,
                   "first_segment": 128, "vmap_size": 0}
COMMON_BOUNDS = {"seeds": AT_LEAST_ONE, "first_seed": KEY, "horizon": COUNT, "base_key": KEY, "first_segment": COUNT,
                 "vmap_size": COUNT_OR_ZERO}
# keys that cut the runs into compiled calls (capacity segments, runs per vmap): no number depends on them
# but rounding where a buffer's padding changes, so a record made with other values is still of its size
LAYOUT_KEYS = ("first_segment", "vmap_size")
# keys that may change between resumed runs (one_storage: how exact OneKernelUCB stores its model, the same
# numbers to rounding)
RUN_KEYS = ("seeds", "first_seed", "precision", "one_storage") + LAYOUT_KEYS


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
    bounds:  {key: Bound} of the numeric keys of `defaults` (the package's experiments declare them
             all); `resolve_config` refuses a value outside its bound before anything is built.
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
    bounds: dict = dataclasses.field(default_factory=dict)


class Figure(NamedTuple):
    """A figure of a reproduction page: `file` (PNG beside the page), the `records` it draws, and
    `rows` (0: a column per record, regret above communication, or the declared outcome panels; N: the
    records' regret panels filling N rows), as `bandits-jax plot --figure` draws them."""

    file: str
    caption: str
    records: tuple
    rows: int = 0


class Page(NamedTuple):
    """A paper's reproduction page, `docs/reproduction/<name>.md`: its records in the page's order
    (names as `records.record_name` writes them), figures and claims (`claims.Claim`). The hand-written
    explanation is `<name>.notes.md` beside it: text before its first `## ` heading opens the page, a
    section `## RECORD` goes above that record's tables."""

    name: str
    title: str
    records: tuple
    figures: tuple = ()
    claims: tuple = ()


_REGISTRY: dict = {}
_PAGES: dict = {}


def register_page(page: Page) -> Page:
    if page.name in _PAGES:
        raise ValueError(f"page {page.name} registered twice")
    stray = sorted({r for c in page.claims for r in c.records} - set(page.records))
    if stray:
        raise ValueError(f"page {page.name}: claims read records {stray} that the page does not list")
    _PAGES[page.name] = page
    return page


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
    defaults = {**COMMON_DEFAULTS, **exp.defaults}
    config = {**defaults, **exp.sizes[size]}
    for key, raw in overrides.items():
        if key not in config:
            raise ConfigError(f"{exp.name}: unknown key {key!r}; settable keys: {', '.join(sorted(config))}")
        config[key] = parse_value(key, raw, config[key])
    bounds = {**COMMON_BOUNDS, **exp.bounds}
    for key, value in config.items():
        check_value(key, value, defaults[key], bounds.get(key, ANY))
    if config["precision"] not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {config['precision']!r}")
    if config["first_seed"] + config["seeds"] > UINT32_MAX + 1:
        raise ConfigError(f"seeds = {config['seeds']} from first_seed = {config['first_seed']} run past the last "
                          f"32-bit seed number ({UINT32_MAX}); give fewer seeds or an earlier first seed")
    return config


def check_value(key: str, value, default, bound: Bound) -> None:
    """Refuse (ConfigError, one line naming the key and what it allows) a configuration value whose
    type is not its default's (an integer key takes an integer, a float key a number, a flag true or
    false, a text key a string) or, for a number, that is not finite or lies outside `bound`."""
    if default is None:
        return
    kind, given = _kind(default), _kind(value)
    typed = given == kind or (kind == "a number" and given == "an integer")
    if not typed or (kind in ("a number", "an integer") and not bound.allows(value)):
        raise ConfigError(f"{key} must be {kind}{_range(bound, kind)}, got {value!r}")


def _kind(value) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return "a string" if isinstance(value, str) else type(value).__name__


def _range(bound: Bound, kind: str) -> str:
    if kind not in ("a number", "an integer"):
        return ""
    return " (finite)" if bound == ANY else f" {bound}"


def unbounded_keys(exp: Experiment) -> list:
    """The numeric keys of `exp` without a declared Bound (they are still checked for type and
    finiteness; every experiment of the package declares them all, a user's may not)."""
    numeric = [k for k, v in exp.defaults.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sorted(k for k in numeric if k not in COMMON_BOUNDS and k not in exp.bounds)


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
            return float(raw)  # "nan" and "inf" parse; check_value refuses them
        if default is None:
            return None if raw.lower() == "none" else raw
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{key} must be of type {kind.__name__}, got {raw!r}") from None
