"""Algorithms and algorithm wrappers by name: the one way experiments, the CLI, tests and users build them.

    make_algorithm("kernel_ucb", lam=0.1, beta=0.5)      KernelUCB with those defaults
    build_algorithm(Spec("n_kernel_ucb", {}, (("capped_history", {"rows": 256}),)))

Each family lives in a folder of its own (`LINEAGES`: single-agent baselines, FN-UCB, the distributed
kernel bandits, DUETS, CoPE-KB, Coop-KernelUCB) whose `__init__.py` holds `PAPER` and `NAMES = {name:
record.Record(...)}`: everything declared of a name, once (its "module:factory" in that folder, the paper
or role it is reproduced for, what a comparison may tune of it, the configuration it is timed at), and,
where the family's experiments give its names options of their own, `SETTING`. `ALGORITHMS` maps each
name to "lineage.module:factory" (or to a factory, for names added with `register_algorithm`) and
`TUNINGS` to its `tuning.Tuning`, both read from the records; a factory checks its options
(ConfigError before anything compiles) and returns a `core.Algorithm` (or a `core.Trial` for the
phase-level ones). `WRAPPERS` maps each wrapper name to a function `wrapper(algorithm, **options) ->
algorithm`. A name's description is the first line of its factory's docstring (`bandits-jax list
--algorithms`).
"""
from __future__ import annotations

import importlib
import inspect

from .._cpu import cpu_guard
from ..core import Algorithm, ConfigError, Trial, checked_options, describe, named_cause, repeated
from ..plugins import check_registration
from .record import BenchCase, Record
from .tuning import Knob, Tuning

LINEAGES = ("single", "fnucb", "distributed", "duets", "cope", "coop")


def _lineage_names() -> dict:
    """{name: "lineage.module:factory"} over the NAMES tables of the lineage folders, in LINEAGES order."""
    return {name: f"{lineage}.{record.target}" for lineage in LINEAGES for name, record in _names(lineage).items()}


def records() -> dict:
    """{name: Record} of every packaged name, in LINEAGES order."""
    return {name: record for lineage in LINEAGES for name, record in _names(lineage).items()}


def record_of(name: str) -> Record:
    """The record a packaged name is declared with (`record.Record`, in its lineage's NAMES table)."""
    return _names(lineage_of(name))[name]


def lineage_of(name: str) -> str:
    """The family folder of a packaged name ("" for a plugin's or an unknown name)."""
    target = ALGORITHMS.get(name)
    return target.split(".")[0] if isinstance(target, str) else ""


def paper_of(name: str) -> str:
    """The paper (or role) a packaged name is reproduced for, from its record."""
    return record_of(name).role


def setting_of(lineage: str) -> dict:
    """The options a family's own experiments give its names on its own problems (the folder's SETTING;
    {} where it declares none): each name takes those its factory accepts."""
    return dict(getattr(importlib.import_module(f"{__name__}.{lineage}"), "SETTING", {}))


def _names(lineage: str) -> dict:
    return importlib.import_module(f"{__name__}.{lineage}").NAMES


ALGORITHMS = _lineage_names()
TUNINGS = {name: record.tuning for name, record in records().items()}  # what a comparison may tune (`tuning.py`)

WRAPPERS = {
    "on_candidates": "base:on_candidates",
    "capped_history": "wrappers:capped_history",
    "serial_arrivals": "wrappers:serial_arrivals",
}


def register_algorithm(name: str, factory, *, exploration=(), knob=None, note: str = "") -> None:
    """Add a factory under a new name (a user's own algorithm, a test's toy), with what a comparison may
    tune of it (`tuning.Tuning`: the hyper-parameters that set its exploration, its communication
    `tuning.Knob`; checked against what it builds when the arena first builds it). A name a spec
    cannot write or a factory that is not callable is a ConfigError (`plugins.check_registration`); a
    name taken by another factory a ValueError."""
    check_registration("algorithm", name, factory)
    if name in ALGORITHMS and _load(ALGORITHMS[name]) is not factory:
        raise ValueError(f"algorithm {name!r} is registered already")
    if isinstance(exploration, str) or not all(isinstance(p, str) for p in exploration):
        raise ConfigError(f"cannot register the algorithm {name!r}: exploration must be a tuple of hyper-parameter "
                          f"names, got {exploration!r}")
    if knob is not None and not isinstance(knob, Knob):
        knob = Knob(*knob) if isinstance(knob, (tuple, list)) and len(knob) == 2 else knob
        if not isinstance(knob, Knob):
            raise ConfigError(f"cannot register the algorithm {name!r}: knob must be a tuning.Knob(param, values) "
                              f"or None, got {knob!r}")
    ALGORITHMS[name] = factory
    TUNINGS[name] = Tuning(tuple(exploration), knob, note)


def tuning_of(name: str) -> Tuning:
    """What a comparison may tune of algorithm `name` (`tuning.Tuning`); nothing for a name registered
    into ALGORITHMS without `register_algorithm`."""
    algorithm_factory(name)  # an unknown name fails here
    return TUNINGS.get(name, Tuning(note="not declared: it was not registered with register_algorithm"))


def register_wrapper(name: str, wrapper) -> None:
    """Add an algorithm wrapper `wrapper(algorithm, **options) -> algorithm` under a new name."""
    if name in WRAPPERS and _load(WRAPPERS[name]) is not wrapper:
        raise ValueError(f"wrapper {name!r} is registered already")
    WRAPPERS[name] = wrapper


def algorithm_factory(name: str):
    """The factory function registered under `name`; ConfigError where the name is unknown, or where what
    is registered under it is not callable (put into ALGORITHMS around `register_algorithm`)."""
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)} (`bandits-jax list --algorithms`)")
    factory = _load(ALGORITHMS[name])
    if not callable(factory):
        raise ConfigError(f"algorithm {name!r} is registered as a {type(factory).__name__}, which is not callable; "
                          f"register its factory with register_algorithm")
    return factory


def algorithm_options(name: str) -> list:
    """The keyword arguments accepted by `make_algorithm(name, ...)`."""
    return list(inspect.signature(algorithm_factory(name)).parameters)


def algorithm_descriptions(broken: dict | None = None) -> dict:
    """{name: the first line of its factory's docstring}. A name without a usable factory raises its
    ConfigError; given a dict `broken`, it is left out and put there instead ({name: the error's
    message}), so that a listing can show the others."""
    descriptions = {}
    for name in ALGORITHMS:
        try:
            descriptions[name] = describe(algorithm_factory(name))
        except ConfigError as err:
            if broken is None:
                raise
            broken[name] = str(err)
    return descriptions


def make_algorithm(name: str, **options) -> Algorithm | Trial:
    """Build algorithm `name` (one of ALGORITHMS) with keyword options (float hyper-parameters set its
    defaults; the rest are static options); unknown options raise ConfigError. A factory added with
    `register_algorithm` is held to what a packaged one does (`_registered_build`)."""
    factory = algorithm_factory(name)
    cpu_guard()  # a factory may build arrays
    options = checked_options(f"algorithm {name}", factory, options, finite=False)  # Params: check_param
    if isinstance(ALGORITHMS[name], str):  # packaged: its ConfigErrors are one line that names it
        return factory(**options)
    return _registered_build(name, factory, options)


def _registered_build(name: str, factory, options: dict) -> Algorithm | Trial:
    """What a registered (a user's) factory builds from `options`, where it fails refused in one line
    (ConfigError) that names the algorithm and the module of its factory: its own ConfigError, any
    other exception it raises (a SystemExit too), or a result that is not a core.Algorithm or
    core.Trial; the original stays chained as the cause."""
    where = f"algorithm {name} (from module {getattr(factory, '__module__', None) or 'unknown'})"
    try:
        built = factory(**options)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err
    except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure of a user's factory is one line
        raise ConfigError(f"{where}: its factory raised {named_cause(err)}; fix the "
                          f"factory so that it returns a core.Algorithm (or a core.Trial)") from err
    if not isinstance(built, (Algorithm, Trial)):
        raise ConfigError(f"{where}: its factory returned {type(built).__name__}, not a core.Algorithm or "
                          f"core.Trial; return one, e.g. make_algorithm('linucb')._replace(name=...)")
    return built


def wrap_algorithm(algorithm, name: str, **options):
    """`algorithm` through the wrapper registered under `name`."""
    if name not in WRAPPERS:
        raise ConfigError(f"unknown algorithm wrapper {name!r}; known: {', '.join(WRAPPERS)}")
    wrapper = _load(WRAPPERS[name])
    return wrapper(algorithm, **checked_options(f"wrapper {name}", wrapper, options, skip=1))


def builders_of(spec) -> tuple:
    """The functions that build `spec` (`build_algorithm`): its algorithm's factory, then each wrapper's
    function (None for a wrapper name not registered: building refuses it)."""
    wrappers = tuple(_load(WRAPPERS[name]) if name in WRAPPERS else None for name, _ in spec.wrappers)
    return (algorithm_factory(spec.name),) + wrappers


def build_algorithm(spec):
    """The algorithm of a `curves.Spec`: the named factory with its options, then its wrappers in order.
    A wrapper named twice is refused (ConfigError) before anything is built: the registered wrappers
    do not compose with themselves (a second capped_history would cap the cap, a second on_candidates
    would keep the candidates twice), so the spec must name each once."""
    twice = repeated(name for name, _ in spec.wrappers)
    if twice:
        raise ConfigError(f"algorithm {spec.name}: wrapper {', '.join(twice)} is given more than once; "
                          f"give each wrapper once, with the options it should have")
    algorithm = make_algorithm(spec.name, **spec.options)
    for name, options in spec.wrappers:
        algorithm = wrap_algorithm(algorithm, name, **options)
    return algorithm


def _load(target):
    if not isinstance(target, str):  # registered as an object: a factory, or something `algorithm_factory` refuses
        return target
    module, function = target.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


__all__ = ["ALGORITHMS", "LINEAGES", "paper_of", "record_of", "records", "setting_of", "Record", "BenchCase", "WRAPPERS", "make_algorithm", "build_algorithm", "builders_of", "wrap_algorithm",
           "register_algorithm", "TUNINGS", "tuning_of", "Knob", "Tuning", "register_wrapper", "algorithm_factory", "algorithm_options", "algorithm_descriptions"]
