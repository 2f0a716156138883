"""Bandit problems (and phase-level Arms worlds) by name: the one way to build them.

    make_problem("cosine", num_agents=5)                 synthetic, FN-UCB setting by default
    make_problem("shuttle", num_agents=2, data_dir=...)  classification bandit from a dataset
    build_problem(Spec("shuttle", {}, (("pad_to_even", {}),)))

`BUILDERS` maps each name to its builder, `WRAPPERS` each problem wrapper to a function
`wrapper(problem, **options) -> problem`; `register_problem` adds a user's own. A name's description
is the first line of its builder's docstring (`problem_descriptions`, `bandits-jax list --problems`).
"""
from __future__ import annotations

import inspect

import jax.numpy as jnp

from bandits_jax.kernels import ntk

from .._cpu import cpu_guard
from .. import core
from ..core import ConfigError, EnvSpec, Problem, checked_options, describe
from . import arms, async_env, coop, cope, datasets, graphs, ratings, synthetic
from . import candidates
from .classification import check_choices, classification_bandit
from .datasets import DataNotFoundError, load_dataset
from .synthetic import cosine, linear, square



def _dataset_problem(name: str, num_classes: int):
    def build(
        num_agents: int = 1,
        horizon: int = 5000,
        *,
        path=None,
        data_dir=None,
        download: bool = True,
        preprocess: str = "authors",
        shuffle: str = "per_seed",
    ) -> Problem:
        check_choices(name, preprocess, shuffle)  # options first: no data is read for a refused run
        core.check_spec(EnvSpec(num_agents, num_classes, 1, horizon))
        if data_dir is not None:
            datasets.given_folder(data_dir, f"{name} data")
        features, labels = load_dataset(name, path=path, data_dir=data_dir, download=download)
        return classification_bandit(features, labels, num_agents, horizon, num_classes=num_classes,
                                     preprocess=preprocess, shuffle=shuffle, name=name)

    build.__name__ = name
    build.__doc__ = (f"The {name} data set as a {num_classes}-armed classification bandit: block one-hot "
                     "contexts (see classification_bandit; data located as in datasets.load_dataset).")
    return build


BUILDERS = {
    "cosine": cosine,
    "square": square,
    "linear": linear,
    "shuttle": _dataset_problem("shuttle", 7),
    "magic": _dataset_problem("magic", 2),
    "mushroom": _dataset_problem("mushroom", 2),
    "async-f1": async_env.async_f1,
    "async-f2": async_env.async_f2,
    "async-magic": async_env.async_magic,
    "async-mushroom": async_env.async_mushroom,
    "movielens": ratings.movielens,
    "yelp": ratings.yelp,
    "movielens-standin": ratings.movielens_standin,
    "yelp-standin": ratings.yelp_standin,
    "gaussian-arms": arms.gaussian_arms,
    "cope-kb": cope.cope_kb,
    "coop-linear": coop.coop_linear,
    "coop-rbf": coop.coop_rbf,
}


def pad_to_even(problem: Problem) -> Problem:
    """The same problem with one zero column appended to every context where d is odd (the paper's
    FN-UCB network needs an even d); the means read the labels, not the context values."""
    if problem.spec.dim % 2 == 0:
        return problem
    base = problem.contexts
    return problem._replace(
        spec=problem.spec._replace(dim=problem.spec.dim + 1),
        contexts=lambda inst, t, key: ntk.pad_to_even(base(inst, t, key)),
        description=problem.description + " (contexts zero-padded to even d for the paper network)",
    )


def candidates_as_contexts(problem: Problem) -> Problem:
    """A problem with a public candidate set (`Problem.public` {"candidates": [K, d]}) whose candidates
    are also every agent's contexts at every step ([N, K, d]), so that contextual algorithms (LinUCB,
    KernelUCB, FN-UCB, ...) run on it; the means, rewards and public part are unchanged."""
    if problem.public is None:
        raise ConfigError(f"candidates_as_contexts: {problem.name} has no public candidate set")
    spec, public = problem.spec, problem.public

    def contexts(instance, t, key):
        X = public(instance)["candidates"]
        return jnp.broadcast_to(X, (spec.num_agents,) + X.shape)

    return problem._replace(contexts=contexts, description=problem.description + " (candidates as contexts)")


def one_arrival(problem: Problem, arrivals: str = "uniform") -> Problem:
    """The problem under the asynchronous protocol: one agent acts per step, chosen by the arrival rule
    of the asynchronous environments ("uniform" or "round_robin", async_env.arrival_rule), so that
    asynchronous algorithms (Async-KernelUCB, DisKernelUCB, ...) run on a synchronous problem."""
    if problem.active is not None:
        raise ConfigError(f"one_arrival: {problem.name} already has its own arrivals")
    return problem._replace(spec=problem.spec._replace(one_active=True),
                            active=async_env.arrival_rule(problem.name, problem.spec.num_agents, arrivals),
                            description=problem.description + f" (one agent per step, {arrivals} arrivals)")


BUILDERS.update({f"duets-{f}": candidates.named(f) for f in candidates.FUNCTIONS})
WRAPPERS = {"pad_to_even": pad_to_even, "candidates_as_contexts": candidates_as_contexts, "one_arrival": one_arrival,
            "complete_graph": graphs.complete_graph}


def register_problem(name: str, builder) -> None:
    """Add a problem builder under a new name (a user's own world, a test's toy). A name a spec cannot
    write or a builder that is not callable is a ConfigError (`plugins.check_registration`); a name
    taken by another builder a ValueError."""
    from ..plugins import check_registration

    check_registration("problem", name, builder)
    if name in BUILDERS and BUILDERS[name] is not builder:
        raise ValueError(f"problem {name!r} is registered already")
    BUILDERS[name] = builder


def problem_descriptions() -> dict:
    """{name: the first line of its builder's docstring}."""
    return {name: describe(b) for name, b in BUILDERS.items()}


PROBLEMS = problem_descriptions()  # {name: description}, for listings


def problem_options(name: str) -> list:
    """The keyword arguments accepted by `make_problem(name, ...)`."""
    if name not in BUILDERS:
        raise ConfigError(f"unknown problem {name!r}; known: {', '.join(BUILDERS)} (`bandits-jax list --problems`)")
    return list(inspect.signature(BUILDERS[name]).parameters)


def build_problem(spec):
    """The problem of a `curves.Spec`: the named builder with its options, then its wrappers in order."""
    problem = make_problem(spec.name, **spec.options)
    for name, options in spec.wrappers:
        if name not in WRAPPERS:
            raise ConfigError(f"unknown problem wrapper {name!r}; known: {', '.join(WRAPPERS)}")
        problem = WRAPPERS[name](problem, **checked_options(f"problem wrapper {name}", WRAPPERS[name], options, skip=1))
    return problem


def make_problem(name: str, **kwargs):
    """Build problem `name` (one of PROBLEMS) with keyword options; unknown ones raise ConfigError.
    A `core.Problem`, or a `core.Arms` world for the phase-level problems."""
    problem_options(name)  # an unknown name raises
    checked_options(f"problem {name}", BUILDERS[name], kwargs)
    cpu_guard()  # a builder may build arrays
    return BUILDERS[name](**kwargs)


__all__ = [
    "PROBLEMS", "BUILDERS", "WRAPPERS", "make_problem", "build_problem", "register_problem", "problem_descriptions",
    "problem_options", "classification_bandit", "cosine", "square",
    "linear", "load_dataset", "DataNotFoundError", "datasets", "synthetic", "async_env", "ratings", "coop", "graphs",
]
