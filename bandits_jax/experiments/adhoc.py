"""Experiments that are not registered: any algorithms on any problem, and experiments kept in TOML.

    bandits-jax run --problem cosine:num_agents=5,dim=10 --algorithm fn_ucb --algorithm kernel_ucb:beta=0.5
    bandits-jax show fnucb/fig1a --size smoke --toml > fig1a.toml
    bandits-jax run fig1a.toml

`adhoc_experiment` turns command-line specs into an `Experiment` whose build returns one curve per
algorithm (named by its spec as written); the results folder, summary and plot are those of a named
experiment. `experiment_toml` writes an experiment's resolved configuration and curves (the data
the sweep resolves) as TOML; `toml_experiment` reads one back (the standard library's `tomllib`),
so a sweep's full configuration can be versioned beside its results. A TOML file's `horizon` (a run
key) is written into its problems' and algorithms' `horizon` options at build.
"""
from __future__ import annotations

import hashlib
import inspect
import math
import tomllib
from pathlib import Path

from ..core import ConfigError, repeated
from ..curves import Curve, Spec, curve_from_dict, parse_spec
from .registry import COMMON_DEFAULTS, Experiment, build_curves, resolve_config

ADHOC_SIZE = "adhoc"


def adhoc_experiment(problem: str, algorithms: list) -> Experiment:
    """An Experiment of every algorithm spec ("NAME[:K=V,...]") on one problem spec; ConfigError (one
    line) for a malformed spec or an unknown name, before anything is built."""
    from ..algorithms import algorithm_factory
    from ..problems import problem_options

    if not algorithms:
        raise ConfigError("--problem needs at least one --algorithm NAME[:KEY=VALUE,...]")
    pspec = parse_spec(problem, "--problem")
    problem_options(pspec.name)  # an unknown problem fails here
    specs = [(text, parse_spec(text, "--algorithm")) for text in algorithms]
    for _, spec in specs:
        algorithm_factory(spec.name)
    names = [text for text, _ in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"--algorithm given twice: {', '.join(repeated(names))}")
    given = _given_horizon([pspec] + [spec for _, spec in specs])

    def build(config):
        if given is not None and config["horizon"] != given:
            raise ConfigError(f"the specs set horizon={given} and --horizon is {config['horizon']}: give the number "
                              f"of steps once")
        return [with_horizon(Curve(text, pspec, spec, tags={"method": spec.name, **spec.options}), config)
                for text, spec in specs]

    digest = hashlib.sha1(repr((problem, algorithms)).encode()).hexdigest()[:8]
    return Experiment(f"adhoc/{pspec.name}-{digest}", f"{', '.join(names)} on {problem}", {},
                      {ADHOC_SIZE: {} if given is None else {"horizon": given}}, build, agents="mean",
                      notes="An ad-hoc run (`bandits-jax run --problem ... --algorithm ...`): regret is the mean "
                            "over agents, mean +- standard error over seeds.")


def _given_horizon(specs) -> object:
    """The `horizon=` option that command-line specs give (None: none does), the run's number of steps
    unless --horizon says otherwise; ConfigError where two specs give different ones."""
    values = {repr(s.options["horizon"]): s.options["horizon"] for s in specs if "horizon" in s.options}
    if len(values) > 1:
        raise ConfigError(f"the specs give different horizons ({', '.join(values)}); give the number of steps once, "
                          f"with --horizon")
    return next(iter(values.values()), None)


def experiment_toml(exp: Experiment, size: str, overrides: dict) -> str:
    """The experiment at `size` (with `overrides`) as TOML: [experiment], [config] and [[curves]]."""
    config = resolve_config(exp, size, overrides)
    head = {"name": exp.name, "size": size, "description": exp.description, "agents": exp.agents,
            "se_ddof": exp.se_ddof, "band": exp.band, "x": exp.x, "notes": exp.notes}
    lines = ["[experiment]"] + [f"{k} = {_value(v)}" for k, v in head.items()]
    lines += ["", "[config]"] + [f"{k} = {_value(v)}" for k, v in config.items() if k in COMMON_DEFAULTS]
    own = [f"#   {k} = {_value(v)}" for k, v in config.items() if k not in COMMON_DEFAULTS and v is not None]
    if own:  # built into the curves' options: a note of where they came from, not settings
        lines += ["# the experiment's own keys, already built into the curves' options below:", *own]
    for curve in build_curves(exp, config):
        _check_nones(curve)
        lines += ["", "[[curves]]"] + [f"{k} = {_value(v)}" for k, v in curve.as_dict().items()]
    return "\n".join(lines) + "\n"


def toml_experiment(path) -> tuple:
    """(Experiment, size) of a TOML file written by `experiment_toml`; ConfigError when it cannot be read."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read experiment file {path}: {err}") from None
    head, config, raw = data.get("experiment"), data.get("config"), data.get("curves")
    if not isinstance(head, dict) or not isinstance(config, dict) or not raw:
        raise ConfigError(f"{path}: an experiment file has [experiment], [config] and [[curves]] tables")
    unread = sorted(set(config) - set(COMMON_DEFAULTS))
    if unread:
        raise ConfigError(f"{path}: [config] key(s) {', '.join(unread)} are read by no curve of an experiment file "
                          f"(the curves hold their own options); set them in the curves' options, or remove them. "
                          f"[config] takes {', '.join(COMMON_DEFAULTS)}")
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: curves must be an array of tables ([[curves]]), got {raw!r}")
    curves = [curve_from_dict(c) for c in raw]
    size = head.get("size", "file")

    def build(cfg):
        return [with_horizon(c, cfg) for c in curves]

    _check_head(path, head)
    exp = Experiment(head.get("name", Path(path).stem), head.get("description", ""), {}, {size: dict(config)},
                     build, agents=head.get("agents", "mean"), se_ddof=head.get("se_ddof", 0),
                     band=head.get("band", "se"), notes=head.get("notes", ""), x=head.get("x", ""))
    return exp, size


HEAD_CHOICES = {"agents": ("mean", "sum"), "band": ("se", "std")}
HEAD_TEXTS = ("name", "size", "description", "notes", "x")


def _check_head(path, head: dict) -> None:
    """Refuse (ConfigError naming the file and field) an [experiment] table with a field of the wrong
    type or value: se_ddof a non-negative integer, agents and band one of their choices, the rest text."""
    for key, choices in HEAD_CHOICES.items():
        if head.get(key, choices[0]) not in choices:
            raise ConfigError(f"{path}: [experiment] {key} must be one of {', '.join(choices)}, got {head[key]!r}")
    ddof = head.get("se_ddof", 0)
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise ConfigError(f"{path}: [experiment] se_ddof must be an integer >= 0, got {ddof!r}")
    for key in HEAD_TEXTS:
        if not isinstance(head.get(key, ""), str):
            raise ConfigError(f"{path}: [experiment] {key} must be a string, got {head[key]!r}")


def with_horizon(curve: Curve, config: dict) -> Curve:
    """The curve with config["horizon"] as its problem's and algorithm's `horizon` option wherever their
    builder takes one (the number of steps is a run key, set with --horizon)."""
    from ..algorithms import algorithm_options
    from ..problems import problem_options

    def put(spec: Spec, options) -> Spec:
        return spec.with_options(horizon=config["horizon"]) if "horizon" in options else spec

    return Curve(curve.name, put(curve.problem, problem_options(curve.problem.name)),
                 put(curve.algorithm, algorithm_options(curve.algorithm.name)), curve.grid, curve.stream,
                 curve.tags)


def _check_nones(curve: Curve) -> None:
    """TOML has no null: a None option is left out, which is right only where None is its default."""
    from ..algorithms import algorithm_factory
    from ..problems import BUILDERS

    for spec, function in ((curve.problem, BUILDERS.get(curve.problem.name)),
                           (curve.algorithm, algorithm_factory(curve.algorithm.name))):
        params = inspect.signature(function).parameters
        for key, value in spec.options.items():
            if value is None and key in params and params[key].default is not None:
                raise ConfigError(f"{curve.name}: option {key}=None of {spec.name} cannot be written to TOML "
                                  f"(its default is {params[key].default!r})")


def _value(v) -> str:
    """A TOML value: strings, booleans, numbers (inf and nan included), arrays and inline tables;
    None-valued table entries are left out (see `_check_nones`)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else "nan" if math.isnan(v) else repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise ConfigError(f"cannot write {v!r} ({type(v).__name__}) to TOML")


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _value(str(k))
