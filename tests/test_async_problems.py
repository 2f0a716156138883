"""Asynchronous environments: arrivals, synthetic f1/f2, k-means arms of UCI data, rating bandits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.core import ConfigError
from bandits_jax.problems import PROBLEMS, async_env, datasets, make_problem, ratings
from helpers import REAL_DIR, needs_data


def arrivals(problem, steps, key=0):
    """[steps, N] active masks over steps 0..steps-1 (one jitted vmap)."""
    keys = jax.random.split(jax.random.PRNGKey(key), steps)
    return np.asarray(jax.jit(jax.vmap(lambda t, k: problem.active({}, t, k)))(jnp.arange(steps), keys))


def test_uniform_arrivals_one_active_and_uniform_frequencies():
    p = make_problem("async-f1", num_agents=10, horizon=100)
    act = arrivals(p, 10000)
    assert act.shape == (10000, 10) and act.dtype == bool
    np.testing.assert_array_equal(act.sum(1), 1)
    freq = act.mean(0)
    # binomial std of each frequency: sqrt(0.1 * 0.9 / 10000) = 0.003; 5 sigma
    assert np.max(np.abs(freq - 0.1)) < 0.015, freq
    # same key -> same client (fixed per run), different keys -> different sequences
    np.testing.assert_array_equal(arrivals(p, 50, key=3), arrivals(p, 50, key=3))
    assert not np.array_equal(arrivals(p, 50, key=3), arrivals(p, 50, key=4))


def test_arrival_sequence_and_round_robin_options():
    p = make_problem("async-f2", num_agents=4, arrivals=[2, 0, 0, 3, 1])
    act = arrivals(p, 12)
    np.testing.assert_array_equal(act.argmax(1), [2, 0, 0, 3, 1] * 2 + [2, 0])
    np.testing.assert_array_equal(act.sum(1), 1)
    rr = arrivals(make_problem("async-f1", num_agents=3, arrivals="round_robin"), 7)
    np.testing.assert_array_equal(rr.argmax(1), [0, 1, 2, 0, 1, 2, 0])


@pytest.mark.parametrize("kwargs,words", [
    ({"arrivals": [0, 4]}, ["0..3"]),
    ({"arrivals": [0.5, 1]}, ["sequence"]),
    ({"arrivals": []}, ["sequence"]),
    ({"arrivals": "poisson"}, ["poisson", "uniform"]),
    ({"noise_std": -1.0}, ["noise_std"]),
    ({"dim": 0}, ["dim"]),
])
def test_async_synthetic_bad_input(kwargs, words):
    with pytest.raises(ConfigError) as err:
        make_problem("async-f1", num_agents=4, **kwargs)
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("name", ["async-f1", "async-f2"])
def test_synthetic_shapes_ball_and_formula(name):
    with jax.enable_x64(True):
        p = make_problem(name, num_agents=5, horizon=10)
        assert p.spec[:4] == (5, 20, 20, 10) and p.spec.one_active
        inst = p.init(jax.random.PRNGKey(1))
        ctx = p.contexts(inst, 0, jax.random.PRNGKey(2))
        means = p.mean_reward(inst, 0, ctx)
        assert ctx.shape == (5, 20, 20) and means.shape == (5, 20) and ctx.dtype == jnp.float64
        x, theta = np.asarray(ctx), np.asarray(inst["theta"])
        np.testing.assert_array_equal(x, np.broadcast_to(x[0], x.shape))  # same A_t for every client
        assert np.linalg.norm(theta) <= 1.0
        u = x @ theta
        ref = np.cos(3 * u) if name == "async-f1" else u ** 3 - 3 * u ** 2 - u + 3
        np.testing.assert_allclose(np.asarray(means), ref, rtol=1e-13, atol=1e-13)
        # common noise per arm, shared by clients, std 0.1
        draws = jax.vmap(lambda k: p.sample_rewards(inst, means, k))(jax.random.split(jax.random.PRNGKey(3), 4000))
        noise = np.asarray(draws) - np.asarray(means)[None]
        np.testing.assert_allclose(noise, np.broadcast_to(noise[:, :1], noise.shape), atol=1e-14)
        assert abs(noise[:, 0].std() - 0.1) < 0.006 and abs(noise[:, 0].mean()) < 0.006
        assert not np.allclose(np.asarray(p.contexts(inst, 0, jax.random.PRNGKey(5))), x)


def test_ball_points_are_uniform_in_volume():
    with jax.enable_x64(True):
        pts = np.asarray(async_env.uniform_ball(jax.random.PRNGKey(0), (20000, 20)))
    r = np.linalg.norm(pts, axis=1)
    assert r.max() <= 1.0
    # P(r <= s) = s^d for the uniform law in the ball: check at s = 0.9 (0.9^20 = 0.1216)
    assert abs(np.mean(r <= 0.9) - 0.9 ** 20) < 5 * np.sqrt(0.1216 * 0.8784 / 20000)
    assert abs(np.mean(r) - 20 / 21) < 2e-3  # E r = d / (d + 1); std error 0.0003
    # directions isotropic: mean of each coordinate ~ 0
    assert np.max(np.abs(pts.mean(0))) < 5 * np.sqrt(1 / 22 / 20000) + 1e-3


def test_shared_bernoulli_rewards_values_mean_and_crn():
    means = jnp.broadcast_to(jnp.asarray([0.0, 0.2, 0.7, 1.0]), (3, 4))
    draws = np.asarray(jax.vmap(lambda k: async_env.shared_bernoulli_rewards({}, means, k))(
        jax.random.split(jax.random.PRNGKey(0), 20000)))
    assert set(np.unique(draws).tolist()) <= {0.0, 1.0}
    np.testing.assert_array_equal(draws, np.broadcast_to(draws[:, :1], draws.shape))
    emp = draws[:, 0].mean(0)
    assert emp[0] == 0.0 and emp[3] == 1.0
    assert abs(emp[1] - 0.2) < 5 * np.sqrt(0.16 / 20000) and abs(emp[2] - 0.7) < 5 * np.sqrt(0.21 / 20000)


def test_kmeans_arms_on_toy_data_are_unit_centroids_with_cluster_means():
    rng = np.random.default_rng(0)
    centers = np.array([[5.0, 0.0], [0.0, 5.0], [-5.0, -5.0]])
    lab = np.repeat(np.arange(3), 40)
    x = centers[lab] + rng.normal(0, 0.3, (120, 2))
    r = np.concatenate([np.ones(40), np.zeros(30), np.ones(10), (np.arange(40) < 10).astype(float)])
    arms, p, sizes = async_env.kmeans_arms(x, r, 3, seed=0, n_init=2)
    np.testing.assert_allclose(np.linalg.norm(arms, axis=1), 1.0, atol=1e-12)
    order = [int(np.argmax(arms @ (c / np.linalg.norm(c)))) for c in centers]
    np.testing.assert_allclose(p[order], [1.0, 0.25, 0.25], atol=1e-12)
    np.testing.assert_array_equal(sizes[order], [40, 40, 40])
    for j, o in enumerate(order):
        m = x[lab == j].mean(0)
        np.testing.assert_allclose(arms[o], m / np.linalg.norm(m), atol=1e-10)


@needs_data("magic.dat")
def test_async_magic_fixed_kmeans_arms_and_bernoulli():
    with jax.enable_x64(True):
        p = make_problem("async-magic", num_agents=7, horizon=50, data_dir=str(REAL_DIR), download=False, n_init=1)
        assert p.spec[:4] == (7, 20, 10, 50)
        ctx = [np.asarray(p.contexts(p.init(jax.random.PRNGKey(s)), t, jax.random.PRNGKey(s + 10)))
               for s, t in ((0, 0), (1, 9))]
        np.testing.assert_array_equal(ctx[0], ctx[1])  # same arms in every run and at every step
        np.testing.assert_allclose(np.linalg.norm(ctx[0], axis=-1), 1.0, atol=1e-12)
        means = np.asarray(p.mean_reward({}, 0, jnp.asarray(ctx[0])))
        assert means.shape == (7, 20) and np.all((means >= 0) & (means <= 1))
        # cluster means average back to the share of gamma rows (12,332 of 19,020)
        feats, labels = datasets.load_magic(data_dir=str(REAL_DIR), download=False)
        arms, pm, sizes = async_env.kmeans_arms(async_env._zscore(feats), (labels == 0).astype(float), 20, 0, 1)
        np.testing.assert_allclose(means[0], pm, atol=1e-15)
        assert sizes.sum() == 19020 and abs((pm * sizes).sum() / 19020 - 12332 / 19020) < 1e-12
        draws = np.asarray(jax.vmap(lambda k: p.sample_rewards({}, jnp.asarray(means), k))(
            jax.random.split(jax.random.PRNGKey(0), 4000)))
        assert set(np.unique(draws).tolist()) <= {0.0, 1.0}
        assert np.max(np.abs(draws[:, 0].mean(0) - pm)) < 5 * 0.5 / np.sqrt(4000)
        act = arrivals(p, 200)
        np.testing.assert_array_equal(act.sum(1), 1)
    # rebuilding (from scratch) gives the same arms: the clustering seed is fixed
    async_env._ARMS_CACHE.clear()
    with jax.enable_x64(True):
        again = make_problem("async-magic", num_agents=7, horizon=50, data_dir=str(REAL_DIR), download=False,
                             n_init=1)
        np.testing.assert_array_equal(np.asarray(again.contexts({}, 0, None)), ctx[0])


@needs_data("mushroom.dat")
def test_async_mushroom_builds():
    p = make_problem("async-mushroom", num_agents=3, horizon=20, data_dir=str(REAL_DIR), download=False, n_init=1)
    assert p.spec[:4] == (3, 20, 98, 20)
    m = np.asarray(p.mean_reward({}, 0, jnp.zeros(())))[0]
    assert np.all((m >= 0) & (m <= 1)) and m.max() > 0.9  # some clusters are (nearly) all edible
    assert "edible" in p.description


def test_async_magic_missing_data_is_config_error(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "_fetch", lambda url: (_ for _ in ()).throw(OSError("offline")))
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="magic"):
        make_problem("async-magic", data_dir=str(tmp_path), download=False)
    with pytest.raises(ConfigError, match="n_init"):
        make_problem("async-magic", n_init=0)


# ----------------------------------------------------------------------------------- ratings
SMALL = dict(total_users=300, total_items=900, num_ratings=30000, num_users=150, num_items=600)


def check_rating_problem(p, feats):
    """1 positive + 19 negatives of the drawn user, unit contexts = concat(user, item) normalised."""
    inst = p.init(jax.random.PRNGKey(0))
    step = jax.jit(lambda t: (p.contexts(inst, t, None), p.mean_reward(inst, t, jnp.zeros((), jnp.float64))))
    uf, itf, pos = feats["user_features"], feats["item_features"], feats["positive"]
    slots = []
    for t in range(6):
        ctx, means = (np.asarray(a) for a in step(t))
        assert ctx.shape == (p.spec.num_agents, 20, 20) and means.shape == (p.spec.num_agents, 20)
        np.testing.assert_allclose(np.linalg.norm(ctx, axis=-1), 1.0, atol=1e-12)
        np.testing.assert_array_equal(means.sum(1), 1.0)
        slots.append(int(means[0].argmax()))
        x = ctx[0]
        # recover user and items: the user part is shared by all arms, up to each row's scale
        full_u = uf / np.linalg.norm(uf, axis=1, keepdims=True)
        user = int(np.argmax(full_u @ (x[0, :10] / np.linalg.norm(x[0, :10]))))
        item_ids = []
        for k in range(20):
            cand = np.concatenate([np.broadcast_to(uf[user], itf.shape), itf], axis=1)
            cand /= np.linalg.norm(cand, axis=1, keepdims=True)
            item_ids.append(int(np.argmin(np.abs(cand - x[k]).sum(1))))
            np.testing.assert_allclose(cand[item_ids[-1]], x[k], atol=1e-12)
        assert len(set(item_ids)) == 20
        labels = pos[user, item_ids]
        assert labels.sum() == 1 and labels[slots[-1]]
        assert user in set(feats["eligible"].tolist())
    assert len(set(slots)) > 1  # the positive arm is not always in the same slot
    return slots


def test_standin_construction_and_rewards():
    with jax.enable_x64(True):
        p = make_problem("movielens-standin", num_agents=4, horizon=30, **SMALL)
        assert p.name == "movielens-standin" and "synthetic stand-in for MovieLens" in p.description
        assert p.spec[:4] == (4, 20, 20, 30)
        u, i, r = ratings.synthetic_ratings(0, total_users=300, total_items=900, num_ratings=30000)
        assert set(np.unique(r).tolist()) == {1.0, 2.0, 3.0, 4.0, 5.0}
        feats = ratings.rating_features(u, i, r, num_users=150, num_items=600)
        check_rating_problem(p, feats)
        means = p.mean_reward(p.init(jax.random.PRNGKey(0)), 3, jnp.zeros(()))
        np.testing.assert_array_equal(np.asarray(p.sample_rewards({}, means, jax.random.PRNGKey(1))), means)
        np.testing.assert_array_equal(arrivals(p, 30).sum(1), 1)
    assert "synthetic stand-in for Yelp" in PROBLEMS["yelp-standin"]
    assert "synthetic stand-in for MovieLens" in PROBLEMS["movielens-standin"]


def test_rating_features_against_numpy_svd_and_top_selection():
    rng = np.random.default_rng(0)
    # user 7 and item 3 are the most active; keep 5 users x 8 items
    users = np.concatenate([rng.integers(0, 10, 300), np.full(40, 7)])
    items = np.concatenate([rng.integers(0, 12, 300), np.full(40, 3)])
    ratings_ = rng.integers(1, 6, 340).astype(float)
    feats = ratings.rating_features(users, items, ratings_, num_users=5, num_items=8, rank=3, num_arms=2)
    top_u = np.lexsort((np.arange(10), -np.bincount(users, minlength=10)))[:5]
    top_i = np.lexsort((np.arange(12), -np.bincount(items, minlength=12)))[:8]
    assert 7 in top_u and 3 in top_i
    m = np.zeros((5, 8))
    for a, b, c in zip(users, items, ratings_):  # the last rating of a pair wins
        if a in top_u and b in top_i:
            m[list(top_u).index(a), list(top_i).index(b)] = c
    np.testing.assert_array_equal(feats["positive"], m > 2)
    U, s, Vt = np.linalg.svd(m)
    np.testing.assert_allclose(feats["singular_values"], s[:3], rtol=1e-10)
    approx = feats["user_features"] @ feats["item_features"].T
    np.testing.assert_allclose(approx, (U[:, :3] * s[:3]) @ Vt[:3], atol=1e-9)
    np.testing.assert_allclose(np.abs(feats["user_features"]), np.abs(U[:, :3] * np.sqrt(s[:3])), atol=1e-9)


def test_movielens_file_loader(tmp_path):
    u, i, r = ratings.synthetic_ratings(3, total_users=200, total_items=500, num_ratings=15000)
    lines = ["userId,movieId,rating,timestamp"] + [f"{a + 1},{b + 10},{c:.1f},964982703" for a, b, c in zip(u, i, r)]
    (tmp_path / "ratings.csv").write_text("\n".join(lines) + "\n")
    with jax.enable_x64(True):
        p = make_problem("movielens", num_agents=2, horizon=10, data_dir=str(tmp_path), num_users=100,
                         num_items=400)
        assert p.name == "movielens" and p.spec[:4] == (2, 20, 20, 10)
        feats = ratings.rating_features(*ratings.load_ratings("movielens", path=tmp_path / "ratings.csv"),
                                        num_users=100, num_items=400)
        check_rating_problem(p, feats)
    # Yelp JSON lines
    rows = [f'{{"review_id": "r{k}", "user_id": "u{a}", "business_id": "b{b}", "stars": {c}}}'
            for k, (a, b, c) in enumerate(zip(u[:50], i[:50], r[:50]))]
    (tmp_path / "review.json").write_text("\n".join(rows) + "\n")
    uu, ii, rr = ratings.load_ratings("yelp", data_dir=tmp_path)
    assert uu.shape == (50,) and np.array_equal(rr, r[:50])


def test_missing_ratings_file_and_bad_input(tmp_path, monkeypatch):
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    with pytest.raises(ConfigError) as err:
        make_problem("movielens", data_dir=str(tmp_path))
    msg = str(err.value)
    for w in ["ratings.csv", "path=", datasets.DATA_DIR_ENV, str(tmp_path)]:
        assert w in msg
    with pytest.raises(ConfigError, match="does not exist"):
        make_problem("yelp", path=str(tmp_path / "nope.json"))
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating\n1,2,x\n")
    with pytest.raises(ConfigError, match="line 2"):
        ratings.load_ratings("movielens", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="rank"):
        make_problem("yelp-standin", rank=0)
    with pytest.raises(ConfigError, match="no user"):
        ratings.rating_features([0, 1], [0, 1], [5.0, 5.0], rank=1, num_arms=20)
    with pytest.raises(ConfigError, match="unknown option"):
        make_problem("movielens-standin", path="x")


def test_registry_has_async_problems():
    for name in ["async-f1", "async-f2", "async-magic", "async-mushroom", "movielens", "yelp",
                 "movielens-standin", "yelp-standin"]:
        assert name in PROBLEMS and "\n" not in PROBLEMS[name]
