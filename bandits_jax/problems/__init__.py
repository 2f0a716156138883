"""Bandit problems by name.

    make_problem("cosine", num_agents=5)                 synthetic, FN-UCB setting by default
    make_problem("shuttle", num_agents=2, data_dir=...)  classification bandit from a dataset

`PROBLEMS` maps each name to a one-line description.
"""
from __future__ import annotations

import inspect
from .._cpu import cpu_guard
from ..core import ConfigError, Problem
from . import arms, async_env, datasets, ratings, synthetic
from .classification import classification_bandit
from .datasets import DataNotFoundError, load_dataset
from .synthetic import cosine, linear, square

PROBLEMS = {
    "cosine": "synthetic, h(x) = cos(3 <a, x>), fresh unit contexts (FN-UCB Sec. 5.1; K=4, d=10)",
    "square": "synthetic, h(x) = 10 <a, x>^2, fresh unit contexts (FN-UCB Sec. 5.1; K=4, d=10)",
    "linear": "synthetic, h(x) = <theta, x>, fresh unit contexts (K=4, d=10 by default)",
    "shuttle": "Statlog Shuttle classification as a bandit: K=7 arms, block one-hot contexts d=63",
    "magic": "MAGIC Gamma Telescope classification as a bandit: K=2 arms, block one-hot contexts d=20",
    "mushroom": "Mushroom (one-hot) classification as a bandit: K=2 arms, block one-hot contexts d=196",
    "async-f1": "asynchronous, f = cos(3 <x, theta*>), 20 fresh arms in the unit ball of d=20, one active client per step",
    "async-f2": "asynchronous, f = u^3 - 3u^2 - u + 3 with u = <x, theta*>, 20 fresh arms in the d=20 unit ball",
    "async-magic": "asynchronous MAGIC Telescope: 20 fixed k-means centroid arms (d=10), Bernoulli(P(gamma | cluster))",
    "async-mushroom": "asynchronous Mushroom: 20 fixed k-means centroid arms (one-hot d), Bernoulli(P(edible | cluster))",
    "movielens": "asynchronous MovieLens from a local ratings file: SVD user+item contexts d=20, 1 positive + 19 negatives",
    "yelp": "asynchronous Yelp from a local ratings file: SVD user+item contexts d=20, 1 positive + 19 negatives",
    "movielens-standin": "synthetic stand-in for MovieLens: low-rank generated ratings, same construction (d=20, K=20)",
    "yelp-standin": "synthetic stand-in for Yelp: low-rank generated ratings, same construction (d=20, K=20)",
    "gaussian-arms": "pure exploration: N agents x K fixed Gaussian arms, best arm ahead by a set gap",
}


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
        features, labels = load_dataset(name, path=path, data_dir=data_dir, download=download)
        return classification_bandit(features, labels, num_agents, horizon, num_classes=num_classes,
                                     preprocess=preprocess, shuffle=shuffle, name=name)

    build.__name__ = name
    build.__doc__ = (f"The {name} dataset as a {num_classes}-armed classification bandit "
                     "(see classification_bandit; data located as in datasets.load_dataset).")
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
}


def problem_options(name: str) -> list:
    """The keyword arguments accepted by `make_problem(name, ...)`."""
    if name not in BUILDERS:
        raise ConfigError(f"unknown problem {name!r}; known: {', '.join(PROBLEMS)}")
    return list(inspect.signature(BUILDERS[name]).parameters)


def make_problem(name: str, **kwargs):
    """Build problem `name` (one of PROBLEMS) with keyword options; unknown ones raise ConfigError.
    A `core.Problem`, or a `core.Arms` world for the phase-level problems."""
    allowed = problem_options(name)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ConfigError(f"problem {name}: unknown option(s) {', '.join(unknown)}; known: {', '.join(allowed)}")
    cpu_guard()  # a builder may build arrays
    return BUILDERS[name](**kwargs)


__all__ = [
    "PROBLEMS", "BUILDERS", "make_problem", "problem_options", "classification_bandit", "cosine", "square",
    "linear", "load_dataset", "DataNotFoundError", "datasets", "synthetic", "async_env", "ratings",
]
