"""Asynchronous multi-client environments: one active client per global step.

N clients share one reward function f. At every global step t exactly one client i_t is active;
it sees the candidate set A_t of K arms and pulls one. The problem hands the SAME A_t to all N
clients (contexts [N, K, d] is A_t broadcast) and `active` [N] marks the one client that acts, so
the regret of inactive clients is zero and only i_t's pull counts.

Arrivals (`arrivals=`): "uniform" (default, i_t ~ Uniform({0..N-1}) from the problem's per-step
key), "round_robin" (i_t = t mod N), or a sequence of ints (i_t = seq[t mod len(seq)]).

Problems:
    async-f1, async-f2  d = 20, K = 20 fresh arms per step drawn uniformly from the unit l2 ball,
        theta* drawn once per run the same way; with u = <x, theta*>:
            f1(x) = cos(3u),    f2(x) = u^3 - 3u^2 - u + 3 = (3 - u)(1 - u^2),
        reward y = f(x) + eta, eta ~ N(0, noise_std^2), noise_std = 0.1 by default.
    async-magic, async-mushroom  a classification data set reduced to a fixed K-armed bandit:
        K = 20 k-means clusters of the features, each an arm whose context is its centroid scaled
        to unit norm and whose reward is Bernoulli(p_c), p_c the cluster's mean binarised label.

Common random numbers: the noise (or the uniform draw behind the Bernoulli reward) is drawn once
per arm per step (shape [K]) and shared by all clients.

Walk-through: docs/problems.md.
"""
from __future__ import annotations

import hashlib
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from ..core import ConfigError, EnvSpec, Problem, float_dtype
from .datasets import given_folder, load_dataset
from .synthetic import check_noise_std

ARRIVALS = ("uniform", "round_robin")
KMEANS_SEED = 0  # the clustering seed shared by every run of the k-means problems
REWARD_FUNCTIONS = {
    "f1": (lambda u: jnp.cos(3.0 * u), "cos(3u)"),
    "f2": (lambda u: u ** 3 - 3.0 * u ** 2 - u + 3.0, "u^3 - 3u^2 - u + 3"),
}
# class index (as loaded by datasets.load_dataset) that becomes reward 1
POSITIVE_CLASS = {"magic": 0, "mushroom": 0}  # magic: g -> 0 (gamma); mushroom: e -> 0 (edible)
POSITIVE_NAME = {"magic": "gamma (g)", "mushroom": "edible (e)"}
# loader options: Mushroom keeps its 2,480 rows with a missing stalk-root, '?' a category of its own (spec 5.3)
LOAD_OPTIONS = {"magic": {}, "mushroom": {"missing": "category"}}


# ----------------------------------------------------------------------------------- pieces
def uniform_ball(key, shape, dtype=None):
    """Points uniform (in volume) in the unit l2 ball: shape (..., d) -> array of that shape."""
    dtype = float_dtype() if dtype is None else dtype
    kg, kv = jax.random.split(key)
    g = core.flat_normal(kg, shape, dtype)
    v = core.flat_uniform(kv, shape[:-1] + (1,), dtype)
    return v ** (1.0 / shape[-1]) * g / jnp.linalg.norm(g, axis=-1, keepdims=True)


def arrival_rule(name: str, num_agents: int, arrivals: Union[str, Sequence[int], None]):
    """`Problem.active` for an arrival option (see the module docstring) -> fn(instance, t, key) -> [N] bool."""
    if arrivals is None:
        arrivals = "uniform"
    if isinstance(arrivals, str):
        if arrivals == "uniform":
            def active(instance, t, key):
                del instance, t
                return jnp.arange(num_agents) == jax.random.randint(key, (), 0, num_agents)
            return active
        if arrivals == "round_robin":
            def active(instance, t, key):
                del instance, key
                return jnp.arange(num_agents) == jnp.mod(t, num_agents)
            return active
        raise ConfigError(f"{name}: unknown arrivals {arrivals!r}; use {' or '.join(ARRIVALS)} or a sequence of "
                          f"client indices")
    seq = np.asarray(arrivals)
    integral = seq.size > 0 and (np.issubdtype(seq.dtype, np.integer) or (
        np.issubdtype(seq.dtype, np.floating) and np.all(np.isfinite(seq)) and np.all(np.mod(seq, 1) == 0)))
    if seq.ndim != 1 or not integral:
        raise ConfigError(f"{name}: arrivals must be 'uniform', 'round_robin' or a non-empty 1-D sequence of "
                          f"client indices, got {type(arrivals).__name__} of shape {seq.shape}")
    seq = seq.astype(np.int64)
    if seq.min() < 0 or seq.max() >= num_agents:
        raise ConfigError(f"{name}: arrival indices must lie in 0..{num_agents - 1}, got {seq.min()}..{seq.max()}")
    seq32 = seq.astype(np.int32)

    def active(instance, t, key):
        del instance, key
        return jnp.arange(num_agents) == jnp.asarray(seq32)[jnp.mod(t, seq32.shape[0])]

    return active


def arrival_label(arrivals) -> str:
    if arrivals is None or isinstance(arrivals, str):
        return arrivals or "uniform"
    return f"a given sequence of {len(np.asarray(arrivals))}"


def shared_gaussian_rewards(noise_std: float):
    """`sample_rewards`: means [N, K] + noise [K] drawn once per arm and shared by all clients."""

    def sample(instance, means, key):
        del instance
        return means + noise_std * jax.random.normal(key, means.shape[-1:], means.dtype)

    return sample


def shared_bernoulli_rewards(instance, means, key):
    """`sample_rewards`: 1{U_k < clip(mean, 0, 1)} with U [K] uniform, shared by all clients -> [N, K]."""
    del instance
    u = jax.random.uniform(key, means.shape[-1:], means.dtype)
    return (u < jnp.clip(means, 0.0, 1.0)).astype(means.dtype)


# ----------------------------------------------------------------------------------- synthetic
def async_synthetic(
    kind: str,
    num_agents: int = 100,
    horizon: int = 10000,
    *,
    num_arms: int = 20,
    dim: int = 20,
    noise_std: float = 0.1,
    arrivals: Union[str, Sequence[int], None] = "uniform",
) -> Problem:
    """The asynchronous synthetic problem f1 or f2 (module docstring).

    Instance: {"theta": [d]} in the unit ball. contexts: [N, K, d], the same fresh ball points for
    every client. means: f(<x, theta>) [N, K]. active: [N] bool, exactly one True.
    """
    if kind not in REWARD_FUNCTIONS:
        raise ConfigError(f"unknown async synthetic function {kind!r}; known: {', '.join(REWARD_FUNCTIONS)}")
    name = f"async-{kind}"
    spec = core.check_spec(EnvSpec(num_agents, num_arms, dim, horizon, one_active=True))
    noise_std = check_noise_std(name, noise_std)
    fn, formula = REWARD_FUNCTIONS[kind]
    active = arrival_rule(name, num_agents, arrivals)

    def init(key):
        return {"theta": uniform_ball(key, (dim,))}

    def contexts(instance, t, key):
        del t
        arms = uniform_ball(key, (num_arms, dim), instance["theta"].dtype)
        return jnp.broadcast_to(arms, (num_agents, num_arms, dim))

    def mean_reward(instance, t, ctx):
        # every client is offered the same A_t (contexts broadcasts it): f once on [K, d], broadcast to
        # [N, K]; on the broadcast [N, K, d] XLA computed f for every client
        del t
        return jnp.broadcast_to(fn(ctx[0] @ instance["theta"].astype(ctx.dtype)), ctx.shape[:2])

    description = (f"{name}: f = {formula}, u = <x, theta*>, {num_arms} fresh arms uniform in the unit ball of "
                   f"d={dim}, theta* per run, noise N(0, {noise_std:g}^2), {num_agents} clients, one active per "
                   f"step ({arrival_label(arrivals)} arrivals)")
    return Problem(name=name, spec=spec, init=init, contexts=contexts, mean_reward=mean_reward,
                   sample_rewards=shared_gaussian_rewards(noise_std), active=active, description=description)


# ----------------------------------------------------------------------------------- k-means arms
_ARMS_CACHE: dict = {}
# The most k-means restarts a world runs: each is a full k-means++ seeding and Lloyd run over the data, one after
# another, before anything runs (the experiments take 10); the key array of a huge n_init alone exhausts memory.
MAX_RESTARTS = 1000


def kmeans_arms(features, rewards, num_clusters: int = 20, seed: int = KMEANS_SEED, n_init: int = 10,
                max_iter: int = 300, tol: float = 1e-4):
    """Cluster features [n, d] (float64, already preprocessed) into K arms.

    rewards: [n] binarised labels in {0, 1}. Returns (arms [K, d] float64 centroids scaled to unit
    l2 norm, means [K] float64 = average reward per cluster, sizes [K] int64). The clustering is
    done in float64 with k-means++ seeding and `n_init` restarts from PRNGKey(seed); results are
    cached per (data, settings). Raises ConfigError if a cluster ends up empty or a centroid is 0.
    """
    from bandits_jax.kernels.kmeans import kmeans

    x = np.ascontiguousarray(features, np.float64)
    r = np.asarray(rewards, np.float64)
    if x.ndim != 2 or r.shape != (x.shape[0],) or x.shape[0] < num_clusters:
        raise ConfigError(f"k-means arms: need features [n, d] with n >= {num_clusters} and rewards [n], "
                          f"got {x.shape} and {r.shape}")
    digest = hashlib.sha256(x.tobytes() + r.tobytes() + repr(x.shape).encode()).hexdigest()
    cache_key = (digest, num_clusters, seed, n_init, max_iter, tol)
    if cache_key not in _ARMS_CACHE:
        with jax.enable_x64(True):
            res = jax.jit(kmeans, static_argnums=(2, 3, 4))(
                jax.random.PRNGKey(seed), jnp.asarray(x), num_clusters, n_init, max_iter, tol)
            centers = np.asarray(res.centers, np.float64)
            labels = np.asarray(res.assignments)
        sizes = np.bincount(labels, minlength=num_clusters)
        if np.any(sizes == 0):
            raise ConfigError(f"k-means arms: {int(np.sum(sizes == 0))} empty cluster(s); use another seed or "
                              f"fewer clusters")
        means = np.bincount(labels, weights=r, minlength=num_clusters) / sizes
        norms = np.linalg.norm(centers, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise ConfigError("k-means arms: a centroid is the zero vector and cannot be normalised")
        _ARMS_CACHE[cache_key] = (centers / norms, means, sizes)
    arms, means, sizes = _ARMS_CACHE[cache_key]
    return arms.copy(), means.copy(), sizes.copy()


def _zscore(x):
    mean, std = x.mean(axis=0), x.std(axis=0)
    return (x - mean) / np.where(std > 0, std, 1.0)


def fixed_arm_bandit(arms, means, num_agents: int, horizon: int, *, name: str, arrivals="uniform",
                     description: str = "") -> Problem:
    """A bandit whose candidate set is the same K arms [K, d] every step, with Bernoulli(means [K]).

    contexts: [N, K, d] (arms broadcast); means: [N, K]; instance: {} (nothing is drawn per run
    except arrivals and rewards, which come from the per-step keys). The arms are public
    ({"candidates": [K, d], "best": the best arm's index}, as `candidates.candidate_problem` gives
    them), so that candidate-set algorithms (DUETS) run on it too.
    """
    arms = np.asarray(arms, np.float64)
    p = np.asarray(means, np.float64)
    num_arms, dim = arms.shape
    spec = core.check_spec(EnvSpec(num_agents, num_arms, dim, horizon, one_active=True))
    active = arrival_rule(name, num_agents, arrivals)

    def init(key):
        del key
        return {}

    def contexts(instance, t, key):
        del instance, t, key
        return jnp.broadcast_to(jnp.asarray(arms, float_dtype()), (num_agents, num_arms, dim))

    def mean_reward(instance, t, ctx):
        del instance, t
        return jnp.broadcast_to(jnp.asarray(p, ctx.dtype), (num_agents, num_arms))

    def public(instance):
        del instance
        return {"candidates": jnp.asarray(arms, float_dtype()), "best": jnp.asarray(int(np.argmax(p)), jnp.int32)}

    return Problem(name=name, spec=spec, init=init, contexts=contexts, mean_reward=mean_reward,
                   sample_rewards=shared_bernoulli_rewards, active=active, description=description, public=public)


def async_classification(
    dataset: str,
    num_agents: int = 100,
    horizon: int = 10000,
    *,
    path=None,
    data_dir=None,
    download: bool = True,
    num_arms: int = 20,
    kmeans_seed: int = KMEANS_SEED,
    n_init: int = 10,
    arrivals: Union[str, Sequence[int], None] = "uniform",
) -> Problem:
    """MAGIC or Mushroom reduced to `num_arms` k-means arms (module docstring); data as in load_dataset."""
    if dataset not in POSITIVE_CLASS:
        raise ConfigError(f"unknown async dataset {dataset!r}; known: {', '.join(POSITIVE_CLASS)}")
    name = f"async-{dataset}"
    for field, value in (("num_arms", num_arms), ("n_init", n_init)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}: {field} must be a positive integer, got {value!r}")
    if n_init > MAX_RESTARTS:
        raise ConfigError(f"{name}: n_init={n_init} k-means restarts would each run Lloyd's iterations over the whole "
                          f"data set before anything runs; give n_init <= {MAX_RESTARTS}")
    if not isinstance(kmeans_seed, int) or isinstance(kmeans_seed, bool) or kmeans_seed < 0:
        raise ConfigError(f"{name}: kmeans_seed must be a non-negative integer, got {kmeans_seed!r}")
    core.check_spec(EnvSpec(num_agents, num_arms, 1, horizon))
    arrival_rule(name, num_agents, arrivals)  # validate before the (slow) clustering
    if data_dir is not None:
        given_folder(data_dir, f"{dataset} data")  # before any data is looked for
    features, labels = load_dataset(dataset, path=path, data_dir=data_dir, download=download,
                                    **LOAD_OPTIONS[dataset])
    x = _zscore(features) if dataset == "magic" else np.asarray(features, np.float64)
    rewards = (labels == POSITIVE_CLASS[dataset]).astype(np.float64)
    arms, means, _ = kmeans_arms(x, rewards, num_arms, kmeans_seed, n_init)
    description = (f"{name}: {x.shape[0]} rows, d={x.shape[1]}, reduced by k-means (seed {kmeans_seed}, "
                   f"n_init {n_init}) to {num_arms} fixed unit-norm centroid arms with Bernoulli rewards "
                   f"(1 = {POSITIVE_NAME[dataset]}; best p = {means.max():.3f}), {num_agents} clients, one active "
                   f"per step ({arrival_label(arrivals)} arrivals)")
    return fixed_arm_bandit(arms, means, num_agents, horizon, name=name, arrivals=arrivals,
                            description=description)


# ----------------------------------------------------------------------------------- registry builders
FORMULAS = {"f1": "f = cos(3 <x, theta*>)", "f2": "f = u^3 - 3u^2 - u + 3 with u = <x, theta*>"}


def _synthetic_builder(kind: str):
    def build(num_agents: int = 100, horizon: int = 10000, *, num_arms: int = 20, dim: int = 20,
              noise_std: float = 0.1, arrivals: Union[str, Sequence[int], None] = "uniform") -> Problem:
        return async_synthetic(kind, num_agents, horizon, num_arms=num_arms, dim=dim, noise_std=noise_std,
                               arrivals=arrivals)

    build.__name__ = build.__qualname__ = f"async_{kind}"
    build.__doc__ = (f"asynchronous {kind}: {FORMULAS[kind]}, 20 fresh arms in the d = 20 unit ball, one active "
                     f"client per step (see async_synthetic).")
    return build


def _classification_builder(dataset: str):
    def build(num_agents: int = 100, horizon: int = 10000, *, path=None, data_dir=None, download: bool = True,
              num_arms: int = 20, kmeans_seed: int = KMEANS_SEED, n_init: int = 10,
              arrivals: Optional[Union[str, Sequence[int]]] = "uniform") -> Problem:
        return async_classification(dataset, num_agents, horizon, path=path, data_dir=data_dir, download=download,
                                    num_arms=num_arms, kmeans_seed=kmeans_seed, n_init=n_init, arrivals=arrivals)

    build.__name__ = build.__qualname__ = f"async_{dataset}"
    build.__doc__ = (f"asynchronous {dataset}: 20 fixed k-means centroid arms, Bernoulli rewards of the cluster's "
                     f"class share (see async_classification).")
    return build


async_f1 = _synthetic_builder("f1")
async_f2 = _synthetic_builder("f2")
async_magic = _classification_builder("magic")
async_mushroom = _classification_builder("mushroom")
