"""Algorithms by name, beside the problem registry.

    make_algorithm("kernel_ucb", lam=0.1, beta=0.5)      KernelUCB with those defaults
    make_algorithm("async_kernel_ucb", dict_capacity=512)

`ALGORITHMS` maps each name to "module:factory"; a factory validates its options (ConfigError before
anything compiles) and returns a `core.Algorithm` (or a `core.Trial` for the phase-level ones). A new algorithm is one module plus one line here.
"""
from __future__ import annotations

import importlib
import inspect

from ..core import Algorithm, ConfigError, Trial

ALGORITHMS = {
    "uniform_random": "uniform:uniform_random",
    "linucb": "linear:linucb",
    "lints": "linear:lints",
    "kernel_ucb": "kernel:kernel_ucb",
    "kernel_ts": "kernel:kernel_ts",
    "neural_ucb": "neural:neural_ucb",
    "neural_ts": "neural:neural_ts",
    "fn_ucb": "fn_ucb:fn_ucb",
    "dis_kernel_ucb": "dis_kernel:dis_kernel_ucb",
    "dis_kernel_ucb_duets": "dis_kernel:dis_kernel_ucb_duets",
    "one_kernel_ucb": "dis_kernel:one_kernel_ucb",
    "n_kernel_ucb": "dis_kernel:n_kernel_ucb",
    "dis_lin_ucb": "dis_linear:dis_lin_ucb",
    "fed_lin_ucb": "dis_linear:fed_lin_ucb",
    "fed_glb_ucb": "fed_glb:fed_glb_ucb",
    "async_kernel_ucb": "async_kernel:async_kernel_ucb",
    "approx_dis_kernel_ucb": "approx_dis_kernel:approx_dis_kernel_ucb",
    "approx_dis_kernel_ucb_duets": "approx_dis_kernel:approx_dis_kernel_ucb_duets",
    "uniform_allocation": "elimination:uniform_allocation",
    "successive_elimination": "elimination:successive_elimination",
}


def algorithm_factory(name: str):
    """The factory function registered under `name`."""
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")
    module, function = ALGORITHMS[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def algorithm_options(name: str) -> list:
    """The keyword arguments accepted by `make_algorithm(name, ...)`."""
    return list(inspect.signature(algorithm_factory(name)).parameters)


def make_algorithm(name: str, **options) -> Algorithm | Trial:
    """Build algorithm `name` (one of ALGORITHMS) with keyword options (float hyper-parameters set its
    defaults; the rest are static options); unknown options raise ConfigError."""
    factory = algorithm_factory(name)
    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - set(params))
        if unknown:
            raise ConfigError(f"algorithm {name}: unknown option(s) {', '.join(unknown)}; "
                              f"known: {', '.join(params) or 'none'}")
    return factory(**options)


__all__ = ["ALGORITHMS", "make_algorithm", "algorithm_factory", "algorithm_options"]
