"""Algorithms and algorithm wrappers by name: the one way experiments, the CLI, tests and users build them.

    make_algorithm("kernel_ucb", lam=0.1, beta=0.5)      KernelUCB with those defaults
    build_algorithm(Spec("n_kernel_ucb", {}, (("capped_history", {"rows": 256}),)))

`ALGORITHMS` maps each name to "module:factory" (or to a factory, for names added with
`register_algorithm`); a factory checks its options (ConfigError before anything compiles) and
returns a `core.Algorithm` (or a `core.Trial` for the phase-level ones). `WRAPPERS` maps each
wrapper name to a function `wrapper(algorithm, **options) -> algorithm`. A name's description is
the first line of its factory's docstring (`bandits-jax list --algorithms`).
"""
from __future__ import annotations

import importlib
import inspect

from .._cpu import cpu_guard
from ..core import Algorithm, ConfigError, Trial, checked_options, describe, repeated

ALGORITHMS = {
    "uniform_random": "uniform:uniform_random",
    "linucb": "linear:linucb",
    "lints": "linear:lints",
    "kernel_ucb": "kernel:kernel_ucb",
    "kernel_ts": "kernel:kernel_ts",
    "neural_ucb": "neural:neural_ucb",
    "neural_ts": "neural:neural_ts",
    "fn_ucb": "fn_ucb:fn_ucb",
    "fn_ucb_authors": "fn_ucb:fn_ucb_authors",
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
    "duets": "duets:duets",
    "duets_authors": "duets_authors:duets_authors",
    "uniform_allocation": "elimination:uniform_allocation",
    "successive_elimination": "elimination:successive_elimination",
    "cokernel_fc": "cope_kb:cokernel_fc",
    "cokernel_ind_alloc": "cope_kb:cokernel_ind_alloc",
    "ind_rage": "cope_kb:ind_rage",
    "ind_rage_code": "cope_kb:ind_rage_code",
    "ind_rage_code_threshold": "cope_kb:ind_rage_code_threshold",
    "cokernel_fb": "cope_kb:cokernel_fb",
    "cokernel_fb_ind_alloc": "cope_kb:cokernel_fb_ind_alloc",
    "ind_peace_fb": "cope_kb:ind_peace_fb",
    "ind_peace_fb_omega": "cope_kb:ind_peace_fb_omega",
    "ind_uniform_fb": "cope_kb:ind_uniform_fb",
    "ind_uniform_fb_means": "cope_kb:ind_uniform_fb_means",
    "ind_alba": "cope_kb_alba:ind_alba",
    "ind_poly_alba": "cope_kb_alba:ind_poly_alba",
    "coop_kernel_ucb": "coop_kernel:coop_kernel_ucb",
    "eager_kernel_ucb": "coop_kernel:eager_kernel_ucb",
    "dist_kernel_ucb_coop": "coop_kernel:dist_kernel_ucb_coop",
    "naive_linucb": "coop_kernel:naive_linucb",
    "naive_igp_ucb": "coop_kernel:naive_igp_ucb",
    "ind_kernel_ucb": "coop_kernel:ind_kernel_ucb",
    "oful": "coop_kernel:oful",
    "igp_ucb": "coop_kernel:igp_ucb",
}

WRAPPERS = {
    "on_candidates": "base:on_candidates",
    "capped_history": "wrappers:capped_history",
}


def register_algorithm(name: str, factory) -> None:
    """Add a factory under a new name (a user's own algorithm, a test's toy)."""
    if name in ALGORITHMS and _load(ALGORITHMS[name]) is not factory:
        raise ValueError(f"algorithm {name!r} is registered already")
    ALGORITHMS[name] = factory


def register_wrapper(name: str, wrapper) -> None:
    """Add an algorithm wrapper `wrapper(algorithm, **options) -> algorithm` under a new name."""
    if name in WRAPPERS and _load(WRAPPERS[name]) is not wrapper:
        raise ValueError(f"wrapper {name!r} is registered already")
    WRAPPERS[name] = wrapper


def algorithm_factory(name: str):
    """The factory function registered under `name`."""
    if name not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)} (`bandits-jax list --algorithms`)")
    return _load(ALGORITHMS[name])


def algorithm_options(name: str) -> list:
    """The keyword arguments accepted by `make_algorithm(name, ...)`."""
    return list(inspect.signature(algorithm_factory(name)).parameters)


def algorithm_descriptions() -> dict:
    """{name: the first line of its factory's docstring}."""
    return {name: describe(algorithm_factory(name)) for name in ALGORITHMS}


def make_algorithm(name: str, **options) -> Algorithm | Trial:
    """Build algorithm `name` (one of ALGORITHMS) with keyword options (float hyper-parameters set its
    defaults; the rest are static options); unknown options raise ConfigError."""
    factory = algorithm_factory(name)
    cpu_guard()  # a factory may build arrays
    return factory(**checked_options(f"algorithm {name}", factory, options, finite=False))  # Params: check_param


def wrap_algorithm(algorithm, name: str, **options):
    """`algorithm` through the wrapper registered under `name`."""
    if name not in WRAPPERS:
        raise ConfigError(f"unknown algorithm wrapper {name!r}; known: {', '.join(WRAPPERS)}")
    wrapper = _load(WRAPPERS[name])
    return wrapper(algorithm, **checked_options(f"wrapper {name}", wrapper, options, skip=1))


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
    if callable(target):
        return target
    module, function = target.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


__all__ = ["ALGORITHMS", "WRAPPERS", "make_algorithm", "build_algorithm", "wrap_algorithm", "register_algorithm",
           "register_wrapper", "algorithm_factory", "algorithm_options", "algorithm_descriptions"]
