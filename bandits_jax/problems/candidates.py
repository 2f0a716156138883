"""Black-box functions on a public candidate set, fixed or per run (DUETS, Pavlovic, Salgia and Zhao 2024, Sec. 5).

Every agent may query any of M fixed candidate points at every step and observes the function
value plus N(0, noise_std^2) noise. Where the candidate set (and theta*) comes from, `instance=`:

    "fixed" (default): generated once per function from a fixed seed (`seed=`, as the authors' code
        does, spec §5.3), the same in every run; only the noise changes from seed to seed.
    "per_seed": drawn from the run's instance key (`Problem.init(key)`, same laws as the fixed set),
        so every seed has its own candidates and theta*: a tuning seed and a reported seed never
        share an instance. The function itself (Branin, Hartmann) stays the same where it has no theta*.

The functions, all maximised:

    h1(x) = cos(3 <x, theta*>)                                 unit sphere of R^10
    h2(x) = u^3 - 3u^2 + 3u + 3 = (u - 1)^3 + 4, u = <x, theta*>  unit sphere of R^10
    branin(x) = -[(v - 5.1 u^2 / (4 pi^2) + 5u / pi - 6)^2 + (10 - 10 / (8 pi)) cos(u) - 44.81] / 51.95,
                u = 15 x1 - 5, v = 15 x2                       [0, 1]^2 (Picheny et al. 2013, rescaled)
    hartmann4(x) = sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2)  [0, 1]^4 (the first four columns of
                the 6-D Hartmann matrices; the coded form, not Picheny's normalised one)

theta* = g / ||g||, g ~ N(0, I_10), drawn with the candidates (once per function, or once per run). The paper says
"unit ball" for h1 and h2; the authors' code draws the candidates on the unit sphere
(g / ||g||), and so does this module (spec §5.3, §7 item 10). Regret is measured against the
best CANDIDATE, not the continuous maximum (spec §7 item 11).

The candidates reach the agents once, through `Problem.public`, not as contexts at every step:
`contexts` returns a zero-width [N, M, 0] array (N and M are its first two axes, which is all
an algorithm that ignores contexts, such as uniform random choice, needs). `public(instance)` is
{"candidates": [M, d], "best": int32 index of the best candidate}; "best" exists for the
diagnostics that say whether the best candidate survived an elimination, and no algorithm
decision may read it.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from ..core import ConfigError, EnvSpec, Problem, float_dtype
from .synthetic import check_noise_std


HARTMANN_ALPHA = (1.0, 1.2, 3.0, 3.2)
HARTMANN_A = ((10.0, 3.0, 17.0, 3.5), (0.05, 10.0, 17.0, 0.1), (3.0, 3.5, 1.7, 10.0), (17.0, 8.0, 0.05, 10.0))
HARTMANN_P = tuple(tuple(1e-4 * v for v in row) for row in
                   ((1312, 1696, 5569, 124), (2329, 4135, 8307, 3736), (2348, 1451, 3522, 2883),
                    (4047, 8828, 8732, 5743)))


INSTANCES = ("fixed", "per_seed")  # where the candidate set comes from (module docstring)


# Each function takes xp, the array module: numpy (the fixed set, on the host) or jax.numpy (a set
# drawn per run inside `Problem.init`); numpy is the default, so the fixed sets stay as they were.
def h1(X, theta, xp=np):
    """cos(3 <x, theta>) of X[M, d] -> [M]."""
    return xp.cos(3.0 * (X @ theta))


def h2(X, theta, xp=np):
    """(u - 1)^3 + 4 with u = <x, theta>, of X[M, d] -> [M] (maximum 4 at x = theta)."""
    del xp  # arithmetic only
    u = X @ theta
    return u ** 3 - 3.0 * u ** 2 + 3.0 * u + 3.0


def branin(X, xp=np):
    """Rescaled Branin on [0, 1]^2 (maximised; maximum 1.047394 at three points), X[M, 2] -> [M]."""
    u, v = 15.0 * X[:, 0] - 5.0, 15.0 * X[:, 1]
    inner = (v - 5.1 * u ** 2 / (4.0 * math.pi ** 2) + 5.0 * u / math.pi - 6.0) ** 2
    return -(inner + (10.0 - 10.0 / (8.0 * math.pi)) * xp.cos(u) - 44.81) / 51.95


def hartmann4(X, xp=np):
    """Hartmann-4D, sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2), of X[M, 4] -> [M] (maximum about 3.7298)."""
    A, P = xp.asarray(HARTMANN_A), xp.asarray(HARTMANN_P)
    sq = xp.einsum("ij,mij->mi", A, (X[:, None, :] - P[None]) ** 2)
    return xp.exp(-sq) @ xp.asarray(HARTMANN_ALPHA)


# name -> (dimension, domain, function of (X, theta[, xp]), default lengthscale of the paper's SE kernel)
FUNCTIONS = {
    "h1": (10, "sphere", h1, 1.0),
    "h2": (10, "sphere", h2, 1.0),
    "branin": (2, "cube", lambda X, theta, xp=np: branin(X, xp), 0.2),
    "hartmann4": (4, "cube", lambda X, theta, xp=np: hartmann4(X, xp), 1.0),
}


def candidate_set(name: str, num_candidates: int = 2000, seed: int = 0):
    """(X[M, d], values[M]) of function `name`, float64 on the host, fixed by (name, seed).

    Sphere domains draw X = g / ||g|| and theta* = g' / ||g'||; cube domains draw X uniform in
    [0, 1]^d. Each function has its own stream, so h1 and h2 get different theta*.
    """
    if name not in FUNCTIONS:
        raise ConfigError(f"unknown candidate function {name!r}; known: {', '.join(FUNCTIONS)}")
    if int(num_candidates) < 1:
        raise ConfigError(f"{name}: num_candidates must be at least 1, got {num_candidates}")
    if int(seed) < 0:
        raise ConfigError(f"{name}: the candidate set's seed must be an integer >= 0, got {seed}")
    dim, domain, fn, _ = FUNCTIONS[name]
    rng = np.random.default_rng([int(seed), list(FUNCTIONS).index(name)])
    if domain == "sphere":
        g = rng.standard_normal((int(num_candidates), dim))
        X = g / np.linalg.norm(g, axis=1, keepdims=True)
        theta = rng.standard_normal(dim)
        theta = theta / np.linalg.norm(theta)
    else:
        X, theta = rng.uniform(size=(int(num_candidates), dim)), None
    return X, fn(X, theta)


def drawn_candidate_set(name: str, key, num_candidates: int, dtype):
    """(X[M, d], values[M]) of function `name` drawn from a JAX key in `dtype` (instance="per_seed"):
    the laws of `candidate_set` (sphere: X and theta* normalised Gaussians; cube: X uniform in [0, 1]^d)."""
    dim, domain, fn, _ = FUNCTIONS[name]
    k_x, k_theta = jax.random.split(key)
    if domain == "sphere":
        g = core.flat_normal(k_x, (num_candidates, dim), dtype)
        X = g / jnp.linalg.norm(g, axis=1, keepdims=True)
        theta = jax.random.normal(k_theta, (dim,), dtype)
        theta = theta / jnp.linalg.norm(theta)
    else:
        X, theta = core.flat_uniform(k_x, (num_candidates, dim), dtype), None
    return X, fn(X, theta, jnp)


def candidate_problem(name: str, num_agents: int = 10, horizon: int = 50, *, noise_std: float = 0.2,
                      num_candidates: int = 2000, seed: int = 0, instance: str = "fixed") -> Problem:
    """Function `name` (FUNCTIONS) on a candidate set, N agents querying at every step.

    instance: "fixed" (the set of `seed`, the same for every run) or "per_seed" (drawn from the
    run's instance key; module docstring).
    Instance {"X": [M, d], "f": [M]}; contexts [N, M, 0]; means [N, M] (f broadcast); rewards add
    N(0, noise_std^2) to every candidate (common random numbers).
    """
    noise_std = check_noise_std(name, noise_std)
    check_instance(name, instance, seed)
    if instance == "per_seed":
        return _drawn_problem(name, num_agents, horizon, noise_std, num_candidates)
    X, values = candidate_set(name, num_candidates, seed)
    spec = core.check_spec(EnvSpec(num_agents, X.shape[0], X.shape[1], horizon))
    best = int(np.argmax(values))

    def init(key):
        del key
        dtype = float_dtype()
        return {"X": jnp.asarray(X, dtype), "f": jnp.asarray(values, dtype)}

    dim, domain, _, _ = FUNCTIONS[name]
    return _on_candidates(name, spec, init, noise_std, lambda f: jnp.asarray(best, jnp.int32),
                          f"fixed candidates in the {_where(domain)} of R^{dim} (seed {seed})",
                          {"candidates": int(spec.num_arms), "dim": int(dim), "max_value": round(float(values[best]), 6),
                           "runner_up_gap": round(float(values[best] - np.partition(values, -2)[-2]), 6)})


def check_instance(name: str, instance: str, seed) -> None:
    """Refuse (ConfigError naming the option) an unknown `instance`, and a `seed` other than 0 with
    instance="per_seed", where no fixed set is generated and the seed would be ignored."""
    if instance not in INSTANCES:
        raise ConfigError(f"{name}: unknown instance {instance!r}; known: {', '.join(INSTANCES)}")
    if instance == "per_seed" and seed != 0:
        raise ConfigError(f"{name}: seed={seed!r} picks the fixed candidate set, but instance='per_seed' draws the "
                          f"candidates from each run's key; leave seed out or use instance='fixed'")


def _drawn_problem(name: str, num_agents: int, horizon: int, noise_std: float, num_candidates: int) -> Problem:
    """`candidate_problem` with instance="per_seed": the same problem, its {"X": [M, d], "f": [M]} drawn by
    `init` from the instance key (`drawn_candidate_set`), "best" read from the drawn f."""
    if int(num_candidates) < 1:
        raise ConfigError(f"{name}: num_candidates must be at least 1, got {num_candidates}")
    dim, domain, _, _ = FUNCTIONS[name]
    spec = core.check_spec(EnvSpec(num_agents, int(num_candidates), dim, horizon))

    def init(key):
        X, values = drawn_candidate_set(name, key, spec.num_arms, float_dtype())
        return {"X": X, "f": values}

    return _on_candidates(name, spec, init, noise_std, lambda f: jnp.argmax(f).astype(jnp.int32),
                          f"candidates in the {_where(domain)} of R^{dim} drawn per run",
                          {"candidates": int(spec.num_arms), "dim": int(dim), "instance": "per_seed"})


def _on_candidates(name: str, spec: EnvSpec, init, noise_std: float, best, where: str, info: dict) -> Problem:
    """A problem whose arms are its instance's candidates {"X": [M, d], "f": [M]} (no per-step contexts:
    [N, M, 0]), every agent's means f; public {"candidates": X, "best": best(f)}."""

    def contexts(instance, t, key):
        del t, key
        return jnp.zeros((spec.num_agents, spec.num_arms, 0), instance["X"].dtype)

    def mean_reward(instance, t, ctx):
        del t, ctx
        return jnp.broadcast_to(instance["f"], (spec.num_agents, spec.num_arms))

    def public(instance):
        return {"candidates": instance["X"], "best": best(instance["f"])}

    return Problem(
        name=name, spec=spec, init=init, contexts=contexts, mean_reward=mean_reward,
        sample_rewards=core.gaussian_rewards(noise_std), public=public,
        description=(f"{name} on {spec.num_arms} {where}, {spec.num_agents} agents querying every step, noise std "
                     f"{noise_std:g}"), info=info)


def _where(domain: str) -> str:
    return "unit sphere" if domain == "sphere" else "unit cube"


def named(name: str):
    """The builder make_problem uses for function `name`."""

    def build(num_agents: int = 10, horizon: int = 50, *, noise_std: float = 0.2, num_candidates: int = 2000,
              seed: int = 0, instance: str = "fixed") -> Problem:
        return candidate_problem(name, num_agents, horizon, noise_std=noise_std, num_candidates=num_candidates,
                                 seed=seed, instance=instance)

    build.__name__ = name
    build.__doc__ = (f"{name} on a public candidate set (DUETS, Sec. 5), fixed or per seed (instance=): every agent "
                     f"picks among the same candidates (see candidate_problem).")
    return build


