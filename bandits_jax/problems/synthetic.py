"""Synthetic reward functions of a hidden unit vector, with fresh random contexts every step.

Each agent receives K fresh i.i.d. unit-norm contexts at every global step, and the mean reward
of a context x is h(<a, x>) for a hidden unit vector a drawn (or fixed) once per seed:

    cosine:  h = cos(3 <a, x>)        (FN-UCB, Sec. 5.1)
    square:  h = 10 <a, x>^2          (FN-UCB, Sec. 5.1)
    linear:  h = <a, x>               (a linear bandit; a plays the role of theta)

Observed rewards add N(0, noise_std^2) noise to every arm (common random numbers).

Context laws:
    "cube":   x = u / ||u||, u ~ Uniform([-0.5, 0.5]^d). This is what the FN-UCB authors' code
              draws; it is NOT exactly uniform on the sphere (it favours the cube's diagonals).
    "sphere": x = g / ||g||, g ~ N(0, I_d): exactly uniform on the unit sphere.

Hidden vector:
    "fixed":  the unit vector stored with the FN-UCB experiments (d = 10 only), identical in
              every run, as in the paper's figures.
    "random": drawn uniformly on the unit sphere from the instance key, one per seed.
    an array of shape [d]: used as given.
"""
from __future__ import annotations

import math
from typing import Callable, Union

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from ..core import ConfigError, EnvSpec, Problem, float_dtype

# The hidden vector a of the FN-UCB synthetic experiments (d = 10, ||a|| = 1, all entries
# positive), as stored in the official code of "Federated Neural Bandits" (Dai et al., ICLR
# 2023), file a_groundtruth_synth.pkl; it is the same in every run and for every method.
FNUCB_FIXED_A = (
    0.32325954, 0.2133327, 0.51375494, 0.20780836, 0.10867534,
    0.41889169, 0.37378859, 0.25781819, 0.1154268, 0.36887927,
)

CONTEXT_LAWS = ("cube", "sphere")
# The largest Gaussian noise std a world takes. The means of the package's worlds are of order 1 (at most about
# 40 at their default settings), so at 1e6 the rewards are already pure noise for any run one could compute,
# while they and their sums of squares stay far inside float32; at 1e308 the rewards overflow to inf and nan.
MAX_NOISE_STD = 1e6
REWARD_FUNCTIONS = {
    "cosine": (lambda u: jnp.cos(3.0 * u), "cos(3 <a, x>)"),
    "square": (lambda u: 10.0 * u * u, "10 <a, x>^2"),
    "linear": (lambda u: u, "<theta, x>"),
}


def unit_contexts(key, shape, law: str, dtype=None):
    """Unit-norm random vectors.

    shape: (..., d); law: "cube" (normalised Uniform([-0.5, 0.5]^d)) or "sphere" (uniform on
    the unit sphere). Returns an array of `shape` whose last axis has L2 norm 1.
    """
    dtype = float_dtype() if dtype is None else dtype
    if law == "cube":
        u = core.flat_uniform(key, shape, dtype, minval=-0.5, maxval=0.5)
    elif law == "sphere":
        u = core.flat_normal(key, shape, dtype)
    else:
        raise ConfigError(f"unknown context law {law!r}; known: {', '.join(CONTEXT_LAWS)}")
    return u / jnp.linalg.norm(u, axis=-1, keepdims=True)


def check_number(problem: str, name: str, value, minimum: float = 0.0) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{problem}: {name} must be a number, got {value!r}") from None
    if not (math.isfinite(out) and out >= minimum):
        raise ConfigError(f"{problem}: {name} must be a finite number >= {minimum:g}, got {value!r}")
    return out


def check_noise_std(problem: str, value) -> float:
    """A Gaussian noise level, refused (ConfigError naming noise_std) unless a finite number in
    [0, MAX_NOISE_STD]."""
    noise_std = check_number(problem, "noise_std", value)
    if noise_std > MAX_NOISE_STD:
        raise ConfigError(f"{problem}: noise_std={value!r} buries the rewards (the means are of order 1) and "
                          f"overflows them at its largest values; give noise_std <= {MAX_NOISE_STD:g}")
    return noise_std


def _hidden_vector(problem: str, a, dim: int):
    """Normalise the `a` argument into ("fixed", None), ("random", None) or ("given", array)."""
    if a is None:
        a = "fixed" if dim == len(FNUCB_FIXED_A) else "random"
    if isinstance(a, str):
        if a == "fixed":
            if dim != len(FNUCB_FIXED_A):
                raise ConfigError(
                    f"{problem}: a='fixed' is the FN-UCB stored vector of dimension 10, but dim={dim}; "
                    "use dim=10 or a='random'"
                )
            return "fixed", np.asarray(FNUCB_FIXED_A, np.float64)
        if a == "random":
            return "random", None
        raise ConfigError(f"{problem}: unknown hidden vector {a!r}; use 'fixed', 'random' or an array of shape [{dim}]")
    given = np.asarray(a, np.float64)
    if given.shape != (dim,) or not np.all(np.isfinite(given)):
        raise ConfigError(f"{problem}: hidden vector must be finite with shape ({dim},), got shape {given.shape}")
    return "given", given


def synthetic(
    reward_fn: Callable,
    *,
    name: str,
    num_agents: int = 1,
    num_arms: int = 4,
    dim: int = 10,
    horizon: int = 5000,
    noise_std: float = 0.01,
    context_law: str = "cube",
    a: Union[str, np.ndarray, None] = None,
    formula: str = "h(<a, x>)",
    description: str = "",
) -> Problem:
    """A problem with mean reward reward_fn(<a, x>) on fresh unit contexts; see the module docstring.

    reward_fn: maps u = <a, x> of shape [N, K] to the means [N, K] (elementwise, jnp).
    formula: how h reads, for the description.
    Instance: {"a": [d]}. contexts: [N, K, d] unit norm. means: [N, K].
    """
    spec = core.check_spec(EnvSpec(num_agents, num_arms, dim, horizon))
    noise_std = check_noise_std(name, noise_std)
    if context_law not in CONTEXT_LAWS:
        raise ConfigError(f"{name}: unknown context_law {context_law!r}; known: {', '.join(CONTEXT_LAWS)}")
    mode, vector = _hidden_vector(name, a, dim)
    law = context_law

    def init(key):
        dtype = float_dtype()
        if mode == "random":
            return {"a": unit_contexts(key, (dim,), "sphere", dtype)}
        return {"a": jnp.asarray(vector, dtype)}

    def contexts(instance, t, key):
        del t
        return unit_contexts(key, (spec.num_agents, spec.num_arms, dim), law, instance["a"].dtype)

    def mean_reward(instance, t, ctx):
        del t
        return reward_fn(ctx @ instance["a"].astype(ctx.dtype))

    if not description:
        description = (f"{name}: h(x) = {formula}, K={num_arms} fresh {law} contexts in d={dim}, "
                       f"a {mode}, noise std {noise_std:g}")
    return Problem(
        name=name,
        spec=spec,
        init=init,
        contexts=contexts,
        mean_reward=mean_reward,
        sample_rewards=core.gaussian_rewards(noise_std),
        active=None,
        description=description,
    )


def _named(kind: str):
    fn, formula = REWARD_FUNCTIONS[kind]

    def build(
        num_agents: int = 1,
        num_arms: int = 4,
        dim: int = 10,
        horizon: int = 5000,
        *,
        noise_std: float = 0.01,
        context_law: str = "cube",
        a: Union[str, np.ndarray, None] = None,
    ) -> Problem:
        return synthetic(fn, name=kind, num_agents=num_agents, num_arms=num_arms, dim=dim, horizon=horizon,
                         noise_std=noise_std, context_law=context_law, a=a, formula=formula)

    build.__name__ = kind
    build.__qualname__ = kind
    build.__doc__ = f"""Synthetic bandit with mean reward h(x) = {formula}.

    num_agents N, num_arms K, dim d, horizon T: static sizes (defaults: the FN-UCB setting
        N = 1, K = 4, d = 10, T = 5000).
    noise_std: std of the Gaussian noise added to every arm's reward (default 0.01).
    context_law: "cube" (the FN-UCB code's normalised cube sample; default) or "sphere".
    a: "fixed" (FN-UCB's stored vector; d = 10 only), "random" (per seed, uniform on the
        sphere) or an array [d]; default "fixed" when d = 10, else "random".
    Returns a core.Problem: instance {{"a": [d]}}, contexts [N, K, d], means [N, K].
    """
    return build


cosine = _named("cosine")
square = _named("square")
linear = _named("linear")
