"""Recommendation bandits from a user x item rating table (MovieLens, Yelp) and a synthetic stand-in.

Construction (from (user, item, rating) triplets):
  1. keep the `num_users` users and the `num_items` items with the most ratings (ties: lower id);
  2. build the dense [num_users, num_items] rating matrix R (missing = 0, raw star values);
  3. truncated SVD R ~ U_r diag(s_r) V_r^T (via the eigenvectors of R R^T; V_r = R^T U_r / s_r) with r = `rank` (10): user features U_r diag(sqrt(s_r)),
     item features V_r diag(sqrt(s_r));
  4. an entry is positive when its rating is > 2 (unrated counts as negative);
  5. at every step, draw a user uniformly from those with >= 1 positive and >= K-1 negative items,
     one of its positive items and K-1 (= 19) distinct negative items, uniformly; the K arms are
     put in a random order;
  6. an arm's context is concat(user feature, item feature) scaled to unit l2 norm (d = 2 r = 20);
     reward 1 for the positive arm and 0 for the others, without noise (so regret = 1 - reward).
The user drawn at a step is independent of the active client (f is shared by all clients); all
clients are offered the same A_t and one client is active per step (see async_env).

Real files are never downloaded (their licences forbid redistribution). Pass `path=`, or place
the file in `data_dir=` or $BANDITS_JAX_DATA_DIR under one of the names in RATING_FILES:
  MovieLens: ratings.csv of ml-25m (userId,movieId,rating,timestamp with a header line), or
             ratings.dat of ml-1m/ml-10m (user::item::rating::time).
  Yelp:      the review file of the dataset challenge (JSON lines with user_id, business_id,
             stars), or a CSV user,item,rating extracted from it.
Any text file whose lines are "user<sep>item<sep>rating[...]" with <sep> one of , \\t :: is
accepted; a first line that does not parse is taken as a header.

The stand-in (`synthetic_ratings`) draws triplets from a low-rank model with skewed user activity
and item popularity and goes through the same construction; its problems are named
"movielens-standin" / "yelp-standin" and described as synthetic stand-ins.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from .. import core
from ..core import ConfigError, EnvSpec, Problem, float_dtype
from .async_env import arrival_rule, arrival_label
from .datasets import DATA_DIR_ENV, DataNotFoundError, given_folder


RATING_FILES = {
    "movielens": ("ratings.csv", "ml-25m/ratings.csv", "ratings.dat"),
    "yelp": ("yelp_ratings.csv", "yelp_academic_dataset_review.json", "review.json"),
}
POSITIVE_THRESHOLD = 2.0


# ----------------------------------------------------------------------------------- reading
def _parse_text(lines, source: str):
    users, items, ratings = [], [], []
    sep = None
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                rec = json.loads(line)
                user, item, stars = str(rec["user_id"]), str(rec["business_id"]), float(rec["stars"])
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"{source}: line {number} is not a JSON review with user_id, business_id, stars")
            users.append(user)
            items.append(item)
            ratings.append(finite_rating(stars, source, number, "stars"))
            continue
        if sep is None:
            sep = next((s for s in ("::", "\t", ",") if s in line), None)
            if sep is None:
                raise ConfigError(f"{source}: line {number} is not 'user,item,rating' (separator , or tab or ::)")
        fields = line.split(sep)
        try:
            if len(fields) < 3:
                raise ValueError
            rating = float(fields[2])
        except ValueError:
            if not users and number == 1:
                continue  # a header line
            raise ConfigError(f"{source}: line {number} is not 'user{sep}item{sep}rating': {line[:80]!r}") from None
        users.append(fields[0].strip())
        items.append(fields[1].strip())
        ratings.append(finite_rating(rating, source, number, "3"))
    if not users:
        raise ConfigError(f"{source}: no rating rows")
    r = np.asarray(ratings, np.float64)
    _, u = np.unique(np.asarray(users), return_inverse=True)
    _, i = np.unique(np.asarray(items), return_inverse=True)
    return u.astype(np.int64), i.astype(np.int64), r


def finite_rating(rating: float, source: str, line: int, column: str) -> float:
    """`rating`, refused (ConfigError naming the file, line and column) where it is inf, -inf or NaN: a rating
    file has no missing-value marker, so every rating must be a number."""
    if not math.isfinite(rating):
        raise ConfigError(f"{source}: line {line}, column {column}: the rating {rating!r} is not a finite number; "
                          "fix or remove that line")
    return rating


def load_ratings(dataset: str, path=None, data_dir=None):
    """Read a ratings file: (users int64 [m], items int64 [m], ratings float64 [m]); ids renumbered 0.. .

    Looked for at `path=`, else in `data_dir=`, else in $BANDITS_JAX_DATA_DIR (names RATING_FILES[dataset],
    also inside a sub-folder named after the dataset). A missing file raises DataNotFoundError
    (a ConfigError) saying where to put it.
    """
    if dataset not in RATING_FILES:
        raise ConfigError(f"unknown ratings dataset {dataset!r}; known: {', '.join(RATING_FILES)}")
    names = RATING_FILES[dataset]
    where = (f"pass path= to the file, or put it (named {' or '.join(names)}) in data_dir= or in the "
             f"directory named by ${DATA_DIR_ENV} (optionally in a '{dataset}' sub-folder); it is not downloaded")
    if path is not None:
        file = Path(path).expanduser()
        if not file.is_file():
            raise DataNotFoundError(f"{dataset} ratings file {file} does not exist; {where}")
    else:
        given = [given_folder(data_dir, f"{dataset} ratings")] if data_dir else []
        dirs = given + [Path(d).expanduser() for d in (os.environ.get(DATA_DIR_ENV),) if d]
        candidates = [d / sub / n for d in dirs for sub in ("", dataset) for n in names]
        file = next((c for c in candidates if c.is_file()), None)
        if file is None:
            searched = ", ".join(str(d) for d in dirs) or "no directory given"
            raise DataNotFoundError(f"{dataset} ratings not found (searched: {searched}); {where}")
    try:
        with open(file, "r", encoding="utf-8", errors="replace") as f:
            return _parse_text(f, str(file))
    except OSError as err:
        raise DataNotFoundError(f"cannot read {file}: {err.strerror or err}; {where}") from None


# ----------------------------------------------------------------------------------- features
def _top_left_singular(matrix, rank: int):
    """Top-`rank` left singular vectors [U, r] and singular values [r] (descending) of matrix [U, I].

    From the eigendecomposition of the Gram matrix M M^T [U, U] (exact, and much cheaper than a
    full SVD when U << I); only the top eigenpairs are computed when SciPy is available.
    """
    gram = matrix @ matrix.T
    n = gram.shape[0]
    try:
        from scipy.linalg import eigh
        w, vecs = eigh(gram, subset_by_index=[n - rank, n - 1])
    except ImportError:
        w, vecs = np.linalg.eigh(gram)
        w, vecs = w[n - rank:], vecs[:, n - rank:]
    order = np.argsort(w)[::-1]
    return vecs[:, order], np.sqrt(np.maximum(w[order], 0.0))


class RatingFeatures(dict):
    """Result of `rating_features` (a dict): user_features [U, r], item_features [I, r],
    positive [U, I] bool, eligible [E] int64 (users usable at a step), singular_values [r]."""


def rating_features(users, items, ratings, *, num_users: int = 2000, num_items: int = 10000, rank: int = 10,
                    num_arms: int = 20, name: str = "ratings") -> RatingFeatures:
    """Steps 1-4 of the construction (module docstring) on triplets users/items/ratings [m].

    Duplicate (user, item) pairs keep the last rating. Fewer users/items than requested keeps all.
    """
    users = np.asarray(users, np.int64)
    items = np.asarray(items, np.int64)
    ratings = np.asarray(ratings, np.float64)
    if not (users.shape == items.shape == ratings.shape and users.ndim == 1 and users.size > 0):
        raise ConfigError(f"{name}: users, items and ratings must be 1-D of one non-zero length")
    for field, value in (("num_users", num_users), ("num_items", num_items), ("rank", rank), ("num_arms", num_arms)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}: {field} must be a positive integer, got {value!r}")

    def top(ids, count):
        counts = np.bincount(ids)
        order = np.lexsort((np.arange(counts.size), -counts))  # most ratings first, ties: lower id
        return order[: min(count, int(np.sum(counts > 0)))]

    keep_u, keep_i = top(users, num_users), top(items, num_items)
    u_map = np.full(users.max() + 1, -1)
    u_map[keep_u] = np.arange(keep_u.size)
    i_map = np.full(items.max() + 1, -1)
    i_map[keep_i] = np.arange(keep_i.size)
    rows, cols = u_map[users], i_map[items]
    ok = (rows >= 0) & (cols >= 0)
    matrix = np.zeros((keep_u.size, keep_i.size), np.float64)
    matrix[rows[ok], cols[ok]] = ratings[ok]
    if rank > min(matrix.shape):
        raise ConfigError(f"{name}: rank {rank} exceeds the kept matrix size {matrix.shape}")
    u_r, s = _top_left_singular(matrix, rank)
    v_r = (matrix.T @ u_r) / np.where(s > 0, s, 1.0)  # [I, r]; columns for s = 0 are 0
    root = np.sqrt(s)
    positive = matrix > POSITIVE_THRESHOLD
    npos = positive.sum(1)
    eligible = np.flatnonzero((npos >= 1) & (keep_i.size - npos >= num_arms - 1))
    if eligible.size == 0:
        raise ConfigError(f"{name}: no user has >= 1 positive (rating > 2) and >= {num_arms - 1} negative items")
    return RatingFeatures(user_features=u_r * root, item_features=v_r * root,
                          positive=positive, eligible=eligible, singular_values=s)


# ----------------------------------------------------------------------------------- bandit
def ratings_bandit(features: RatingFeatures, num_agents: int, horizon: int, *, num_arms: int = 20,
                   name: str = "ratings", arrivals: Union[str, Sequence[int], None] = "uniform",
                   description: str = "") -> Problem:
    """Steps 5-6 of the construction as an asynchronous Problem.

    Instance: {"key": PRNG key} (per run). Step t draws (user, items [K], positive slot) from
    fold_in(instance key, t), so contexts and means agree without passing the draw around.
    contexts [N, K, 2r] (the same for every client, unit rows); means [N, K] one-hot (the positive
    arm); rewards equal the means; active [N] bool with one True.
    """
    user_f = np.asarray(features["user_features"], np.float64)
    item_f = np.asarray(features["item_features"], np.float64)
    num_items, rank = item_f.shape
    bits = np.packbits(np.asarray(features["positive"], bool), axis=1)  # [U, ceil(I / 8)] uint8
    eligible = np.asarray(features["eligible"], np.int32)
    dim = 2 * rank
    spec = core.check_spec(EnvSpec(num_agents, num_arms, dim, horizon, one_active=True))
    active = arrival_rule(name, num_agents, arrivals)

    def draw(instance, t):
        k_user, k_pos, k_neg, k_perm = jax.random.split(jax.random.fold_in(instance["key"], t), 4)
        user = jnp.asarray(eligible)[jax.random.randint(k_user, (), 0, eligible.shape[0])]
        pos = jnp.unpackbits(jnp.asarray(bits)[user])[:num_items].astype(bool)  # [I]
        score = jax.random.uniform(k_pos, (num_items,))
        positive_item = jnp.argmax(jnp.where(pos, score, -1.0))
        neg_score = jax.random.uniform(k_neg, (num_items,))
        _, negatives = jax.lax.top_k(jnp.where(pos, -1.0, neg_score), num_arms - 1)
        arms = jnp.concatenate([positive_item[None], negatives]).astype(jnp.int32)  # [K], slot 0 positive
        order = jax.random.permutation(k_perm, num_arms)
        return user, arms[order], jnp.argmin(order)  # the slot holding the positive item

    def init(key):
        return {"key": key}

    def contexts(instance, t, key):
        del key
        dtype = float_dtype()
        user, arms, _ = draw(instance, t)
        u = jnp.broadcast_to(jnp.asarray(user_f, dtype)[user], (num_arms, rank))
        x = jnp.concatenate([u, jnp.asarray(item_f, dtype)[arms]], axis=1)
        x = x / jnp.linalg.norm(x, axis=1, keepdims=True)
        return jnp.broadcast_to(x, (num_agents, num_arms, dim))

    def mean_reward(instance, t, ctx):
        _, _, slot = draw(instance, t)
        return jnp.broadcast_to(jax.nn.one_hot(slot, num_arms, dtype=ctx.dtype), (num_agents, num_arms))

    def sample_rewards(instance, means, key):
        del instance, key
        return means

    if not description:
        description = (f"{name}: {user_f.shape[0]} users x {num_items} items, rank-{rank} SVD features, d={dim}, "
                       f"1 positive (rating > 2) + {num_arms - 1} negative arms per step, {num_agents} clients "
                       f"({arrival_label(arrivals)} arrivals)")
    return Problem(name=name, spec=spec, init=init, contexts=contexts, mean_reward=mean_reward,
                   sample_rewards=sample_rewards, active=active, description=description)


# ----------------------------------------------------------------------------------- stand-in
def synthetic_ratings(seed: int = 0, *, total_users: int = 2500, total_items: int = 12000,
                      num_ratings: int = 600000, rank: int = 10, noise: float = 0.5):
    """Synthetic (users, items, ratings) triplets [m] (m <= num_ratings after removing duplicates).

    Users and items get latent N(0, I_rank / sqrt(rank)) vectors; a user's activity and an item's
    popularity are log-normal (a few heavy users and blockbuster items); the pairs are drawn with
    probability proportional to activity x popularity; the rating is 1..5 stars from the
    standardised score <user, item> + N(0, noise^2), cut at its 10/30/55/80 % quantiles.
    """
    rng = np.random.default_rng(seed)
    lu = rng.normal(0, 1, (total_users, rank)) / rank ** 0.25
    li = rng.normal(0, 1, (total_items, rank)) / rank ** 0.25
    activity = rng.lognormal(0, 1.0, total_users)
    popularity = rng.lognormal(0, 1.2, total_items)
    users = rng.choice(total_users, num_ratings, p=activity / activity.sum())
    items = rng.choice(total_items, num_ratings, p=popularity / popularity.sum())
    pair = np.unique(users * total_items + items)
    users, items = pair // total_items, pair % total_items
    score = np.einsum("mr,mr->m", lu[users], li[items]) + noise * rng.normal(0, 1, pair.size)
    cuts = np.quantile(score, [0.1, 0.3, 0.55, 0.8])
    ratings = 1.0 + np.searchsorted(cuts, score).astype(np.float64)
    return users, items, ratings


STANDIN_SEEDS = {"movielens": 0, "yelp": 1}


def ratings_problem(dataset: str, num_agents: int = 100, horizon: int = 10000, *, path=None, data_dir=None,
                    num_users: int = 2000, num_items: int = 10000, rank: int = 10, num_arms: int = 20,
                    arrivals="uniform") -> Problem:
    """MovieLens or Yelp from a user-supplied ratings file (see load_ratings)."""
    check_counts(dataset, num_agents=num_agents, horizon=horizon, num_users=num_users, num_items=num_items,
                 rank=rank, num_arms=num_arms)
    arrival_rule(dataset, num_agents, arrivals)  # an unknown rule fails before the file is read
    users, items, ratings = load_ratings(dataset, path=path, data_dir=data_dir)
    feats = rating_features(users, items, ratings, num_users=num_users, num_items=num_items, rank=rank,
                            num_arms=num_arms, name=dataset)
    return ratings_bandit(feats, num_agents, horizon, num_arms=num_arms, name=dataset, arrivals=arrivals)


def check_counts(name: str, **counts) -> None:
    """Refuse (ConfigError naming the option) any of `counts` that is not a positive integer."""
    for field, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}: {field} must be a positive integer, got {value!r}")


def standin_problem(dataset: str, num_agents: int = 100, horizon: int = 10000, *, seed=None,
                    total_users: int = 2500, total_items: int = 12000, num_ratings: int = 600000,
                    num_users: int = 2000, num_items: int = 10000, rank: int = 10, num_arms: int = 20,
                    arrivals="uniform") -> Problem:
    """The synthetic stand-in for `dataset` (same construction on synthetic_ratings triplets)."""
    name = f"{dataset}-standin"
    seed = STANDIN_SEEDS[dataset] if seed is None else seed
    check_counts(name, total_users=total_users, total_items=total_items, num_ratings=num_ratings, rank=rank)
    label = {"movielens": "MovieLens", "yelp": "Yelp"}[dataset]
    users, items, ratings = synthetic_ratings(seed, total_users=total_users, total_items=total_items,
                                              num_ratings=num_ratings, rank=rank)
    feats = rating_features(users, items, ratings, num_users=num_users, num_items=num_items, rank=rank,
                            num_arms=num_arms, name=name)
    nu, ni = feats["positive"].shape
    description = (f"{name}: synthetic stand-in for {label} (low-rank rating generator, seed {seed}): {nu} users x "
                   f"{ni} items, rank-{rank} SVD features, d={2 * rank}, 1 positive (rating > 2) + "
                   f"{num_arms - 1} negative arms per step, {num_agents} clients "
                   f"({arrival_label(arrivals)} arrivals)")
    return ratings_bandit(feats, num_agents, horizon, num_arms=num_arms, name=name, arrivals=arrivals,
                          description=description)


TITLES = {"movielens": "MovieLens", "yelp": "Yelp"}


def _builder(dataset: str, standin: bool):
    if standin:
        def build(num_agents: int = 100, horizon: int = 10000, *, seed=None, total_users: int = 2500,
                  total_items: int = 12000, num_ratings: int = 600000, num_users: int = 2000,
                  num_items: int = 10000, rank: int = 10, num_arms: int = 20, arrivals="uniform") -> Problem:
            return standin_problem(dataset, num_agents, horizon, seed=seed, total_users=total_users,
                                   total_items=total_items, num_ratings=num_ratings, num_users=num_users,
                                   num_items=num_items, rank=rank, num_arms=num_arms, arrivals=arrivals)
        build.__doc__ = (f"synthetic stand-in for {TITLES[dataset]}: low-rank generated ratings, the same construction "
                         f"(see standin_problem).")
    else:
        def build(num_agents: int = 100, horizon: int = 10000, *, path=None, data_dir=None,
                  num_users: int = 2000, num_items: int = 10000, rank: int = 10, num_arms: int = 20,
                  arrivals="uniform") -> Problem:
            return ratings_problem(dataset, num_agents, horizon, path=path, data_dir=data_dir, num_users=num_users,
                                   num_items=num_items, rank=rank, num_arms=num_arms, arrivals=arrivals)
        build.__doc__ = (f"asynchronous {TITLES[dataset]} from a local ratings file: SVD user+item contexts, 1 positive + "
                         f"19 negatives (see ratings_problem).")
    build.__name__ = build.__qualname__ = dataset + ("_standin" if standin else "")
    return build


movielens = _builder("movielens", False)
yelp = _builder("yelp", False)
movielens_standin = _builder("movielens", True)
yelp_standin = _builder("yelp", True)
