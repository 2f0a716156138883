"""Synthetic and classification problems, and the problem registry."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.core import ConfigError, EnvSpec, Problem
from bandits_jax.problems import PROBLEMS, make_problem, problem_options
from bandits_jax.problems.classification import authors_preprocess, block_one_hot, classification_bandit
from bandits_jax.problems.datasets import load_shuttle
from bandits_jax.problems.synthetic import FNUCB_FIXED_A, cosine, linear, square, unit_contexts
from helpers import REAL_DIR, needs_data

def _data_dir():
    return REAL_DIR


def _draw(problem, seed=0, t=0):
    """(instance, contexts [N, K, d], means [N, K]) of one seed and step, in one compiled call."""

    @jax.jit
    def draw(key, t):
        instance = problem.init(jax.random.fold_in(key, 0))
        contexts = problem.contexts(instance, t, jax.random.fold_in(key, 1))
        return instance, contexts, problem.mean_reward(instance, t, contexts)

    return draw(jax.random.PRNGKey(seed), jnp.int32(t))


# ----------------------------------------------------------------------------------- synthetic
FORMULAS = {"cosine": lambda u: np.cos(3 * u), "square": lambda u: 10 * u ** 2, "linear": lambda u: u}


@pytest.mark.parametrize("build", [cosine, square, linear])
def test_synthetic_shapes_dtypes_unit_norm_and_formula(build):
    problem = build(num_agents=3, num_arms=5, dim=10, horizon=7)
    assert isinstance(problem, Problem)
    assert problem.spec == EnvSpec(3, 5, 10, 7)
    instance, ctx, means = _draw(problem)
    assert ctx.shape == (3, 5, 10) and ctx.dtype == jnp.float32
    assert means.shape == (3, 5) and means.dtype == jnp.float32
    np.testing.assert_allclose(np.linalg.norm(np.asarray(ctx), axis=-1), 1.0, atol=1e-6)
    u = np.einsum("nkd,d->nk", np.asarray(ctx, np.float64), np.asarray(FNUCB_FIXED_A))
    np.testing.assert_allclose(np.asarray(means), FORMULAS[problem.name](u), rtol=1e-5, atol=2e-6)
    rewards = np.asarray(problem.sample_rewards(instance, means, jax.random.PRNGKey(3)))
    assert rewards.shape == (3, 5)
    noise = rewards - np.asarray(means)
    assert 0 < np.abs(noise).max() < 0.06  # std 0.01


def test_synthetic_follows_x64_and_matches_formula_exactly():
    with jax.enable_x64(True):
        problem = cosine(num_agents=4, num_arms=6, dim=10, horizon=3)
        instance, ctx, means = _draw(problem, seed=5)
        assert instance["a"].dtype == jnp.float64
        assert ctx.dtype == jnp.float64 and means.dtype == jnp.float64
        expected = np.cos(3 * np.einsum("nkd,d->nk", np.asarray(ctx), np.asarray(FNUCB_FIXED_A)))
        np.testing.assert_allclose(np.asarray(means), expected, rtol=1e-12, atol=1e-12)
    assert jnp.zeros(()).dtype == jnp.float32  # nothing switched on globally


def test_hand_checked_mean_rewards():
    """x = e_3 gives <a, x> = a_3 = 0.51375494."""
    x = np.zeros((1, 3, 10), np.float32)
    x[0, :, 2] = 1.0
    got = {}
    for build in (cosine, square, linear):
        problem = build(num_agents=1, num_arms=3, horizon=1)
        got[problem.name] = float(problem.mean_reward({"a": jnp.asarray(FNUCB_FIXED_A)}, 0, jnp.asarray(x))[0, 1])
    assert got["square"] == pytest.approx(10 * 0.51375494 ** 2, rel=1e-6)
    assert got["cosine"] == pytest.approx(np.cos(3 * 0.51375494), abs=1e-6)  # float32 near a zero of cos
    assert got["linear"] == pytest.approx(0.51375494, rel=1e-6)


def test_fixed_vector_is_unit_and_default_only_for_d10():
    a = np.asarray(FNUCB_FIXED_A)
    assert a.shape == (10,)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-7)
    assert np.all(a > 0)
    # d = 10: fixed by default, identical for every seed
    p = cosine(horizon=1)
    a0 = np.asarray(p.init(jax.random.PRNGKey(0))["a"])
    a1 = np.asarray(p.init(jax.random.PRNGKey(1))["a"])
    np.testing.assert_allclose(a0, a, rtol=1e-6)
    np.testing.assert_array_equal(a0, a1)
    # d != 10: random by default, unit norm, differs per seed
    p = cosine(dim=7, horizon=1)
    b0 = np.asarray(p.init(jax.random.PRNGKey(0))["a"])
    b1 = np.asarray(p.init(jax.random.PRNGKey(1))["a"])
    assert b0.shape == (7,)
    assert np.linalg.norm(b0) == pytest.approx(1.0, abs=1e-6)
    assert np.abs(b0 - b1).max() > 0.1
    # a random vector can be asked for at d = 10 too
    c0 = np.asarray(cosine(a="random", horizon=1).init(jax.random.PRNGKey(0))["a"])
    assert np.abs(c0 - a).max() > 0.05


def test_same_key_same_contexts_and_new_key_new_contexts():
    p = square(num_agents=2, horizon=4)

    @jax.jit
    def three(k, k_other):
        inst = p.init(jax.random.PRNGKey(0))
        return p.contexts(inst, 0, k), p.contexts(inst, 3, k), p.contexts(inst, 0, k_other)

    c1, c2, c3 = three(jax.random.PRNGKey(42), jax.random.PRNGKey(43))
    np.testing.assert_array_equal(np.asarray(c1), np.asarray(c2))  # only the key matters
    assert np.abs(np.asarray(c1) - np.asarray(c3)).max() > 0.1
    # every agent and arm gets its own context
    flat = np.asarray(c1).reshape(-1, 10)
    assert len(np.unique(flat.round(6), axis=0)) == flat.shape[0]


def test_cube_and_sphere_laws_differ_as_expected():
    """Mean of sum_i x_i^4: 3/(d+2) = 0.25 on the sphere (d = 10); about 0.18 for the normalised cube."""
    problems = {law: cosine(num_agents=2, num_arms=3, horizon=1, context_law=law) for law in ("cube", "sphere")}
    key = jax.random.PRNGKey(0)

    @jax.jit
    def draw(key):
        big = {law: unit_contexts(key, (4000, 10), law) for law in problems}
        inst = {"a": jnp.asarray(FNUCB_FIXED_A)}
        same = {law: jnp.all(p.contexts(inst, 0, key) == unit_contexts(key, (2, 3, 10), law))
                for law, p in problems.items()}
        return big, same

    big, same = draw(key)
    assert bool(same["cube"]) and bool(same["sphere"])  # the problems use the requested law
    stats = {}
    for law, x in big.items():
        x = np.asarray(x)
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-6)
        assert np.abs(x.mean(axis=0)).max() < 0.02  # both centred
        stats[law] = float((x ** 4).sum(axis=1).mean())
    assert stats["sphere"] == pytest.approx(0.25, abs=0.006)
    assert stats["cube"] == pytest.approx(0.18, abs=0.006)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(num_arms=0), ["num_arms", "positive"]),
        (dict(num_agents=2.5), ["num_agents"]),
        (dict(noise_std=-0.1), ["noise_std", ">= 0"]),
        (dict(noise_std=float("nan")), ["noise_std"]),
        (dict(context_law="ball"), ["context_law", "'ball'", "cube", "sphere"]),
        (dict(a="fixed", dim=5), ["dim=5", "dim=10", "random"]),
        (dict(a="other"), ["'other'", "fixed", "random"]),
        (dict(a=np.ones(3)), ["shape (10,)"]),
    ],
)
def test_synthetic_bad_input(kwargs, words):
    with pytest.raises(ConfigError) as err:
        cosine(**kwargs)
    message = str(err.value)
    assert "\n" not in message
    for w in words:
        assert w in message


# ----------------------------------------------------------------------------------- classification
def _perm(problem, seed):
    return np.asarray(jax.jit(problem.init)(jax.random.PRNGKey(seed))["perm"])


def _toy(n=12, d=3, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.arange(n) % k
    return x, y


def test_block_one_hot_layout():
    x = jnp.arange(1.0, 7.0).reshape(2, 3)  # two agents, d_raw = 3
    ctx = np.asarray(block_one_hot(x, 4))
    assert ctx.shape == (2, 4, 12)
    for i in range(2):
        for k in range(4):
            expected = np.zeros(12)
            expected[3 * k:3 * k + 3] = np.asarray(x[i])
            np.testing.assert_array_equal(ctx[i, k], expected)


def test_classification_contexts_and_rewards():
    x, y = _toy(n=12, d=3, k=3)
    p = classification_bandit(x, y, num_agents=4, horizon=30, preprocess="none")
    assert p.spec == EnvSpec(4, 3, 9, 30)
    inst = p.init(jax.random.PRNGKey(0))
    perm = np.asarray(inst["perm"])
    assert perm.shape == (4, 12) and inst["perm"].dtype == jnp.int32
    for i in range(4):
        np.testing.assert_array_equal(np.sort(perm[i]), np.arange(12))
    step = jax.jit(lambda inst, t: (lambda c: (c, p.mean_reward(inst, t, c)))(p.contexts(inst, t, jax.random.PRNGKey(9))))
    for t in [0, 1, 11, 12, 25]:  # t >= n wraps around
        ctx, means = step(inst, jnp.int32(t))
        ctx, means = np.asarray(ctx), np.asarray(means)
        rows = perm[:, t % 12]
        assert ctx.shape == (4, 3, 9) and means.shape == (4, 3)
        for i in range(4):
            blocks = ctx[i].reshape(3, 3, 3)  # [arm, block, d_raw]
            for k in range(3):
                np.testing.assert_allclose(blocks[k, k], x[rows[i]], rtol=1e-6)
                assert np.all(np.delete(blocks[k], k, axis=0) == 0)
            expected = np.zeros(3)
            expected[y[rows[i]]] = 1.0
            np.testing.assert_array_equal(means[i], expected)
        assert np.all(means.sum(axis=1) == 1)
        rewards = p.sample_rewards(inst, jnp.asarray(means), jax.random.PRNGKey(1))
        np.testing.assert_array_equal(np.asarray(rewards), means)


def test_classification_reads_rows_in_perm_order_under_x64():
    x, y = _toy(n=20, d=4, k=2, seed=3)
    with jax.enable_x64(True):
        p = classification_bandit(x, y, num_agents=2, horizon=20, preprocess="none")
        inst = p.init(jax.random.PRNGKey(5))
        perm = np.asarray(inst["perm"])
        all_steps = jax.jit(jax.vmap(lambda t: (lambda c: (c, p.mean_reward(inst, t, c)))(p.contexts(inst, t, None))))
        ctx, means = all_steps(jnp.arange(20))
        assert ctx.dtype == jnp.float64 and ctx.shape == (20, 2, 2, 8)
        for t in range(20):
            np.testing.assert_array_equal(np.asarray(ctx[t])[:, 0, :4], x[perm[:, t]])
            np.testing.assert_array_equal(np.asarray(means[t]).argmax(1), y[perm[:, t]])


def test_shuffles_per_agent_per_seed_and_authors():
    x, y = _toy(n=50, d=2, k=2)
    per_seed = classification_bandit(x, y, num_agents=3, horizon=5)
    a, b = _perm(per_seed, 0), _perm(per_seed, 1)
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[1], a[2])  # agents differ
    assert not np.array_equal(a, b)  # seeds differ
    authors = classification_bandit(x, y, num_agents=3, horizon=5, shuffle="authors")
    c, d = _perm(authors, 0), _perm(authors, 1)
    np.testing.assert_array_equal(c, d)  # identical in every run
    assert not np.array_equal(c[0], c[1])
    # agent i's order depends only on i, not on how many agents there are
    more = classification_bandit(x, y, num_agents=5, horizon=5, shuffle="authors")
    np.testing.assert_array_equal(_perm(more, 7)[:3], c)


def test_authors_shuffle_is_numpy_random_state_of_the_agent_index():
    """Agent i (0-based) reads RandomState(i).permutation(n) of the rows in the given order (what
    scikit-learn's shuffle(X, y, random_state=i) draws), in every seed; the contexts of step t are
    those rows after the authors' preprocessing."""
    x, y = _toy(n=40, d=3, k=4, seed=2)
    n, N = 40, 3
    expected = np.stack([np.random.RandomState(i).permutation(n) for i in range(N)])
    with jax.enable_x64(True):
        p = classification_bandit(x, y, num_agents=N, horizon=2 * n, shuffle="authors")
        for seed in (0, 5):
            perm = _perm(p, seed)
            assert perm.dtype == np.int32
            np.testing.assert_array_equal(perm, expected)
        inst = p.init(jax.random.PRNGKey(3))
        steps = jax.jit(jax.vmap(lambda t: (lambda c: (c, p.mean_reward(inst, t, c)))(p.contexts(inst, t, None))))
        ctx, means = (np.asarray(a) for a in steps(jnp.arange(2 * n)))
    xp = authors_preprocess(x)
    arms = np.arange(4)
    for t in range(2 * n):  # wraps around after n steps
        rows = expected[:, t % n]
        for i in range(N):
            blocks = ctx[t, i].reshape(4, 4, 3)  # [arm, block, d_raw]: arm k holds the row in block k
            np.testing.assert_array_equal(blocks[arms, arms], np.tile(xp[rows[i]], (4, 1)))
        np.testing.assert_array_equal(means[t].argmax(axis=1), y[rows])


def test_authors_preprocessing():
    raw = np.array([[3.0, 4.0, 0.0], [np.nan, 1.0, 1.0], [0.0, 0.0, 2.0], [1.0, 1.0, 1.0]])
    out = authors_preprocess(raw)
    # by hand: NaN -> -1, then rows / norm, then columns standardised
    rows = np.array([[3, 4, 0], [-1, 1, 1], [0, 0, 2], [1, 1, 1]], float)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(out, (rows - rows.mean(0)) / rows.std(0), atol=1e-12)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.std(axis=0), 1.0, atol=1e-12)
    assert out[0, 0] == pytest.approx((0.6 - np.mean([0.6, -1 / np.sqrt(3), 0, 1 / np.sqrt(3)]))
                                      / np.std([0.6, -1 / np.sqrt(3), 0, 1 / np.sqrt(3)]))
    np.testing.assert_array_equal(raw[1, 0], np.nan)  # input untouched
    # the bandit uses the preprocessed rows
    p = classification_bandit(raw, np.array([0, 1, 0, 1]), num_agents=1, horizon=4)
    inst = p.init(jax.random.PRNGKey(0))
    row = int(inst["perm"][0, 0])
    np.testing.assert_allclose(np.asarray(p.contexts(inst, 0, None))[0, 0, :3], out[row], rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(features=np.ones(5)), ["features", "2-D"]),
        (dict(labels=np.zeros(3, int)), ["labels", "shape (6,)"]),
        (dict(labels=np.array([0, 1, 2, 0, 1, -1])), ["labels", "0.."]),
        (dict(labels=np.array([0, 1, 5, 0, 1, 1]), num_classes=3), ["0..2"]),
        (dict(labels=np.array(list("abcabc"))), ["integers"]),
        (dict(preprocess="zscore"), ["preprocess", "authors", "none"]),
        (dict(shuffle="random"), ["shuffle", "per_seed", "authors"]),
        (dict(num_agents=0), ["num_agents"]),
        (dict(features=np.array([[np.nan, 1.0]] * 6), preprocess="none"), ["NaN", "preprocess='authors'"]),
    ],
)
def test_classification_bad_input(kwargs, words):
    args = dict(features=np.arange(12.0).reshape(6, 2), labels=np.array([0, 1, 2, 0, 1, 2]), num_agents=2, horizon=3)
    args.update(kwargs)
    with pytest.raises(ConfigError) as err:
        classification_bandit(**args)
    for w in words:
        assert w in str(err.value)


# ----------------------------------------------------------------------------------- registry
def test_registry_names_and_descriptions():
    from bandits_jax.problems import BUILDERS

    # every described problem has a builder, and the papers' problems are among them (other tests register
    # toy builders of their own, so the two need not be equal here)
    assert set(PROBLEMS) <= set(BUILDERS)
    assert {"cosine", "square", "shuttle", "magic", "mushroom", "async-f1", "async-f2", "async-magic",
            "async-mushroom", "movielens", "yelp", "duets-h1", "duets-h2", "duets-branin", "duets-hartmann4",
            "cope-kb", "coop-linear", "coop-rbf"} <= set(PROBLEMS)
    assert all(isinstance(v, str) and v and "\n" not in v for v in PROBLEMS.values())
    p = make_problem("cosine", num_agents=2, horizon=10)
    assert p.name == "cosine" and p.spec == EnvSpec(2, 4, 10, 10)
    assert "cos(3" in p.description
    assert "data_dir" in problem_options("magic")


def test_registry_errors():
    with pytest.raises(ConfigError) as err:
        make_problem("cosinus")
    assert "cosinus" in str(err.value) and "cosine" in str(err.value) and "shuttle" in str(err.value)
    with pytest.raises(ConfigError) as err:
        make_problem("square", num_agent=3)
    assert "num_agent" in str(err.value) and "num_agents" in str(err.value)
    with pytest.raises(ConfigError) as err:
        make_problem("magic", dim=3)
    assert "dim" in str(err.value) and "data_dir" in str(err.value)


@needs_data("shuttle.trn", "shuttle.tst")
def test_registry_shuttle_from_data_dir():
    """The full Shuttle (58,000 rows in the file's order), preprocessed once, read in the authors' streams."""
    p = make_problem("shuttle", num_agents=2, horizon=50, data_dir=str(_data_dir()), shuffle="authors", download=False)
    assert p.spec == EnvSpec(2, 7, 63, 50)
    inst, ctx, means = _draw(p, t=49)
    assert ctx.shape == (2, 7, 63) and means.shape == (2, 7)
    np.testing.assert_array_equal(np.asarray(means).sum(axis=1), [1.0, 1.0])
    rows = [np.random.RandomState(i).permutation(58000)[49] for i in range(2)]
    np.testing.assert_array_equal(np.asarray(inst["perm"])[:, 49], rows)
    x, y = load_shuttle(data_dir=_data_dir(), download=False)
    np.testing.assert_allclose(np.asarray(ctx)[:, 0, :9], authors_preprocess(x)[rows], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(means).argmax(axis=1), y[rows])
