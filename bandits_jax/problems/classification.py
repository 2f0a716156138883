"""K-class classification turned into a K-armed contextual bandit (FN-UCB, Sec. 5.2).

At every step each agent reads the next row x (d_raw features) of its own shuffle of the data.
Arm k is offered the block one-hot context

    x_k = [0, ..., 0, x, 0, ..., 0]   (x in block k; dimension K * d_raw),

and pays 1 if k is the row's true class, else 0 (no noise: `sample_rewards` returns the means).

Agent i reads row perm[i, t mod n] at global step t; the permutations [N, n] are the instance.
  shuffle="per_seed": drawn from the instance key, so every seed sees new orders.
  shuffle="authors":  exactly the FN-UCB authors' streams, the same in every run: agent i
                      reads numpy.random.RandomState(i).permutation(n) of the rows in the order
                      the features are given (the file's order), the order scikit-learn's
                      `shuffle(X, y, random_state=i)` draws. Agents count from 0, as in the
                      code, which shuffles agent i's copy with random_state = i for i in
                      range(N) (its single-agent baselines read agent 0's stream). Computed once
                      on the host (`authors_permutations`) and handed to every seed as its
                      instance.

The dataset is a constant of the closure, not part of the (per-seed) instance.

The mean reward of step t reads the true class of the row each agent reads at t.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from ..core import ConfigError, EnvSpec, Problem

PREPROCESS = ("authors", "none")
SHUFFLES = ("per_seed", "authors")


def authors_preprocess(features: np.ndarray) -> np.ndarray:
    """The FN-UCB code's preprocessing of raw features [n, d_raw] -> float64 [n, d_raw].

    1. NaN -> -1;  2. each row scaled to unit L2 norm (all-zero rows stay zero);
    3. each column standardised to mean 0 and (population) std 1 (constant columns: centred only).
    """
    x = np.array(features, dtype=np.float64, copy=True)
    x[np.isnan(x)] = -1.0
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    return (x - mean) / np.where(std > 0, std, 1.0)


def authors_permutations(num_agents: int, n: int) -> np.ndarray:
    """The FN-UCB authors' row orders: int32 [N, n], row i = RandomState(i).permutation(n).

    scikit-learn's `shuffle(X, y, random_state=i)` shuffles arange(n) with RandomState(i), as
    `permutation` does, so agent i (0-based, as in the authors' code) reads these rows.
    """
    return np.stack([np.random.RandomState(i).permutation(n) for i in range(num_agents)]).astype(np.int32)


def block_one_hot(x, num_arms: int):
    """Block one-hot contexts: x [..., d_raw] -> [..., K, K * d_raw], arm k holding x in block k."""
    eye = jnp.eye(num_arms, dtype=x.dtype)
    blocks = eye[:, :, None] * x[..., None, None, :]  # [..., K, K, d_raw]
    return blocks.reshape(x.shape[:-1] + (num_arms, num_arms * x.shape[-1]))


def classification_bandit(
    features,
    labels,
    num_agents: int,
    horizon: int,
    *,
    num_classes: Optional[int] = None,
    preprocess: str = "authors",
    shuffle: str = "per_seed",
    name: str = "classification",
    description: str = "",
) -> Problem:
    """Build the bandit of a classification dataset; see the module docstring.

    features: [n, d_raw] real (NaN allowed only with preprocess="authors").
    labels:   [n] integers in 0..K-1.
    num_agents N, horizon T: static sizes (T > n wraps around each agent's shuffle).
    num_classes: K (default: max label + 1).
    preprocess: "authors" (NaN -> -1, rows to unit L2 norm, columns standardised; done once
        in NumPy) or "none".
    shuffle: "per_seed" (JAX permutations from the instance key) or "authors" (agent i reads
        RandomState(i).permutation(n), 0-based, identical in every run; module docstring).
    Returns a core.Problem with spec (N, K, K * d_raw, T): instance {"perm": int32 [N, n]},
    contexts [N, K, K * d_raw], means [N, K] in {0, 1}; rewards equal the means.
    """
    x = np.asarray(features)
    y = np.asarray(labels)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ConfigError(f"{name}: features must be a non-empty 2-D array [n, d_raw], got shape {x.shape}")
    if y.shape != (x.shape[0],):
        raise ConfigError(f"{name}: labels must have shape ({x.shape[0]},) to match the features, got {y.shape}")
    integral = np.issubdtype(y.dtype, np.integer) or (
        np.issubdtype(y.dtype, np.floating) and bool(np.all(np.isfinite(y))) and bool(np.all(np.mod(y, 1) == 0)))
    if not integral:
        raise ConfigError(f"{name}: labels must be integers 0..K-1, got dtype {y.dtype}")
    y = y.astype(np.int64)
    k_data = int(y.max()) + 1
    num_arms = k_data if num_classes is None else num_classes
    if y.min() < 0 or (isinstance(num_arms, int) and y.max() >= num_arms):
        raise ConfigError(f"{name}: labels must lie in 0..{num_arms - 1}, got range {y.min()}..{y.max()}")
    check_choices(name, preprocess, shuffle)
    try:
        x = x.astype(np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: features must be numbers, got dtype {x.dtype}") from None
    if preprocess == "authors":
        x = authors_preprocess(x)
    elif not np.all(np.isfinite(x)):
        raise ConfigError(f"{name}: features contain NaN or inf; clean them or use preprocess='authors'")
    n, d_raw = x.shape
    spec = core.check_spec(EnvSpec(num_agents, num_arms, num_arms * d_raw, horizon))
    labels_onehot = np.eye(num_arms)[y]  # [n, K]
    fixed = authors_permutations(num_agents, n) if shuffle == "authors" else None

    def init(key):
        if fixed is not None:
            return {"perm": jnp.asarray(fixed)}
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(num_agents))
        perm = jax.vmap(lambda k: jax.random.permutation(k, n))(keys)
        return {"perm": perm.astype(jnp.int32)}

    def contexts(instance, t, key):
        del key
        dtype = jnp.zeros(()).dtype
        rows = instance["perm"][:, jnp.mod(t, n)]  # [N]
        return block_one_hot(jnp.asarray(x, dtype)[rows], num_arms)

    def mean_reward(instance, t, ctx):
        rows = instance["perm"][:, jnp.mod(t, n)]  # [N]
        return jnp.asarray(labels_onehot, ctx.dtype)[rows]

    def sample_rewards(instance, means, key):
        del instance, key
        return means

    if not description:
        description = (f"{name}: {n} rows, {num_arms} classes as arms, block one-hot contexts of dimension "
                       f"{num_arms}x{d_raw}={num_arms * d_raw}, preprocess {preprocess}, shuffle {shuffle}")
    return Problem(
        name=name,
        spec=spec,
        init=init,
        contexts=contexts,
        mean_reward=mean_reward,
        sample_rewards=sample_rewards,
        active=None,
        description=description,
    )


def check_choices(name: str, preprocess: str, shuffle: str) -> None:
    """Refuse (ConfigError naming the option) a preprocess or shuffle that classification_bandit does not
    know; the dataset builders call it before any data is read."""
    if preprocess not in PREPROCESS:
        raise ConfigError(f"{name}: unknown preprocess {preprocess!r}; known: {', '.join(PREPROCESS)}")
    if shuffle not in SHUFFLES:
        raise ConfigError(f"{name}: unknown shuffle {shuffle!r}; known: {', '.join(SHUFFLES)}")
