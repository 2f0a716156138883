"""Coop/Eager/Dist-KernelUCB, Naive Cooperation, OFUL and IGP-UCB against the NumPy reference loop, the
identities of spec coop-kernelucb 10, and the two storages against each other."""
import networkx as nx
import numpy as np
import jax
import jax.numpy as jnp
import pytest

from bandits_jax import runner
from bandits_jax.algorithms.coop import coop_kernel
from bandits_jax.algorithms import make_algorithm
from bandits_jax.core import ConfigError, EnvSpec, Problem, gaussian_rewards
from bandits_jax.problems import make_problem
from bandits_jax.problems.coop import coop_arrays
from bandits_jax.problems.graphs import graph_arrays
from helpers import clustered_linear_world, graph_public
from reference import coop_kernel_np as ref

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

T, V, K, D = 12, 6, 4, 3
KEY = jax.random.PRNGKey(3)
GRAPHS = {
    "bridge-g2": ([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 4)], 2, "hop"),
    "star-g1-plus": ([(0, 1), (0, 2), (0, 3), (3, 4), (4, 5)], 1, "hop_plus_one"),
    "edgeless": ([], 1, "hop"),
    "complete": (list(nx.complete_graph(V).edges()), 1, "hop"),
}
# (name, options) -> (reference function, its options)
CASES = {
    ("coop_kernel_ucb", ()): (ref.coop_kernel_ucb_np, {}),
    ("coop_kernel_ucb", (("storage", "feature"),)): (ref.coop_kernel_ucb_np, {}),
    ("coop_kernel_ucb", (("kernel", "rbf"),)): (ref.coop_kernel_ucb_np, {"kernel": "rbf"}),
    ("coop_kernel_ucb", (("mmd", "squared"),)): (ref.coop_kernel_ucb_np, {"mmd_squared": True}),
    ("coop_kernel_ucb", (("embedding", "frozen_at_send"),)): (ref.coop_kernel_ucb_np, {"embedding": "frozen_at_send"}),
    ("dist_kernel_ucb_coop", (("embedding", "frozen_at_send"), ("kernel", "rbf"))): (
        ref.dist_kernel_ucb_np, {"embedding": "frozen_at_send", "kernel": "rbf"}),
    ("eager_kernel_ucb", ()): (ref.eager_kernel_ucb_np, {}),
    ("eager_kernel_ucb", (("storage", "feature"),)): (ref.eager_kernel_ucb_np, {}),
    ("dist_kernel_ucb_coop", ()): (ref.dist_kernel_ucb_np, {}),
    ("dist_kernel_ucb_coop", (("storage", "feature"),)): (ref.dist_kernel_ucb_np, {}),
    ("dist_kernel_ucb_coop", (("kernel", "rbf"),)): (ref.dist_kernel_ucb_np, {"kernel": "rbf"}),
    ("dist_kernel_ucb_coop", (("dist_mimic", "arm_projection"),)): (ref.dist_kernel_ucb_np,
                                                                     {"dist_mimic": "arm_projection"}),
    ("dist_kernel_ucb_coop", (("dist_mimic", "arm_projection"), ("storage", "feature"))): (
        ref.dist_kernel_ucb_np, {"dist_mimic": "arm_projection"}),
    ("naive_linucb", ()): (ref.naive_linucb_np, {}),
    ("naive_igp_ucb", ()): (ref.naive_igp_ucb_np, {}),
    ("ind_kernel_ucb", ()): (ref.kernel_ucb_np, {}),
    ("ind_kernel_ucb", (("kernel", "linear"),)): (ref.linucb_np, {}),
    ("oful", ()): (ref.oful_np, {}),
    ("igp_ucb", ()): (ref.igp_ucb_np, {}),
}


def public(graph: str) -> dict:
    return graph_public(*GRAPHS[graph], V)


@pytest.fixture(scope="module")
def world():
    """Task-dependent contexts (two clusters), linear means, noisy rewards and the tie numbers U."""
    return clustered_linear_world(0, T, V, K, D, KEY)


@pytest.fixture(scope="module")
def runs(world):
    """run(name, options, graph) -> (actions, regret, scores, diagnostics, errors), compiled once per method."""
    X, Y, fbar, _ = world
    compiled, done = {}, {}

    def run(name, options, graph):
        if (name, options, graph) not in done:
            with jax.enable_x64(True):
                if (name, options) not in compiled:
                    algo = make_algorithm(name, **dict(options))
                    compiled[name, options] = jax.jit(lambda pub, algo=algo: runner.replay(
                        algo, EnvSpec(V, K, D, T), None, jnp.asarray(X), jnp.asarray(Y), jnp.ones((T, V), bool), KEY,
                        public=pub, means=jnp.asarray(fbar)))
                _, actions, aux, regret, reps = compiled[name, options](
                    {k: jnp.asarray(v) for k, v in public(graph).items()})
                done[name, options, graph] = jax.tree_util.tree_map(np.asarray, (
                    actions, regret, aux["scores"], reps.diagnostics, reps.errors))
        return done[name, options, graph]

    return run


@pytest.mark.parametrize("graph", ["bridge-g2", "star-g1-plus"])
@pytest.mark.parametrize("case", list(CASES), ids=lambda c: "-".join([c[0]] + [str(v) for _, v in c[1]]))
def test_matches_numpy_reference(world, runs, case, graph):
    X, Y, fbar, U = world
    fn, options = CASES[case]
    want = fn(X, Y, fbar, U, public(graph), **options)
    actions, regret, scores, diag, errors = runs(*case, graph)
    np.testing.assert_array_equal(actions, want["actions"])
    np.testing.assert_allclose(regret, want["regret"], atol=1e-9, rtol=0)
    np.testing.assert_allclose(scores, want["scores"], atol=1e-8, rtol=0)
    for name in ("deliveries", "accepted", "model_transfers", "model_scalars"):
        np.testing.assert_array_equal(diag[name], want.get(name, 0))
    assert errors.max() == 0 and regret.min() >= 0.0


def test_the_methods_differ_on_a_graph(runs):
    """The comparisons above are not vacuous: the admission rules give different plays."""
    acts = {n: runs(n, (), "bridge-g2")[0] for n in ("coop_kernel_ucb", "eager_kernel_ucb", "dist_kernel_ucb_coop",
                                                     "naive_linucb")}
    names = list(acts)
    assert all(not np.array_equal(acts[a], acts[b]) for i, a in enumerate(names) for b in names[i + 1:])
    frozen = runs("coop_kernel_ucb", (("embedding", "frozen_at_send"),), "bridge-g2")[2]
    assert np.abs(frozen - runs("coop_kernel_ucb", (), "bridge-g2")[2]).max() > 1e-3


@pytest.mark.parametrize("name", ["coop_kernel_ucb", "eager_kernel_ucb", "dist_kernel_ucb_coop"])
def test_dual_and_feature_storages_agree(runs, name):
    for graph in ("bridge-g2", "star-g1-plus"):
        dual, feature = runs(name, (), graph), runs(name, (("storage", "feature"),), graph)
        np.testing.assert_array_equal(dual[0], feature[0])
        np.testing.assert_allclose(dual[2], feature[2], atol=1e-8, rtol=0)


@pytest.mark.parametrize("name, options", [("ind_kernel_ucb", (("kernel", "linear"),)), ("oful", ())])
def test_independent_feature_storage_matches_dual(runs, name, options):
    """An independent learner's feature model reads only its own prefix sums; with a linear K_x it is
    the dual model to rounding, scores and plays."""
    for graph in ("bridge-g2", "star-g1-plus"):
        dual, feature = runs(name, options, graph), runs(name, options + (("storage", "feature"),), graph)
        np.testing.assert_array_equal(dual[0], feature[0])
        np.testing.assert_allclose(dual[2], feature[2], atol=1e-8, rtol=0)


def test_edgeless_graph_coop_eager_and_independent_coincide(runs):
    ind = runs("ind_kernel_ucb", (("kernel", "linear"),), "edgeless")
    for name in ("coop_kernel_ucb", "eager_kernel_ucb"):
        got = runs(name, (), "edgeless")
        np.testing.assert_array_equal(got[0], ind[0])
        np.testing.assert_allclose(got[2], ind[2], atol=1e-10, rtol=0)
        assert got[3]["deliveries"].sum() == 0


def test_complete_graph_coop_equals_eager(runs):
    coop, eager = runs("coop_kernel_ucb", (), "complete"), runs("eager_kernel_ucb", (), "complete")
    np.testing.assert_array_equal(coop[0], eager[0])
    np.testing.assert_allclose(coop[2], eager[2], atol=1e-12, rtol=0)
    assert coop[3]["deliveries"][-1] == V * (V - 1)


def test_message_counts_per_round(runs):
    """Star with hop_plus_one delays: deliveries once each pair's first message can have arrived."""
    diag = runs("eager_kernel_ucb", (), "star-g1-plus")[3]
    pairs = 2 * len(GRAPHS["star-g1-plus"][0])
    np.testing.assert_array_equal(diag["deliveries"], [0] + [pairs] * (T - 1))
    np.testing.assert_array_equal(diag["hops"], diag["deliveries"])
    np.testing.assert_array_equal(diag["originated"], np.full(T, V))


@pytest.mark.parametrize("mode, first", [("hop", 2), ("hop_plus_one", 3)])
def test_path_delay(mode, first):
    """On the path 0-1-2 with gamma = 2, agent 0 first uses agent 2's round-s observation at s + 2
    ("hop") or s + 3 ("hop_plus_one")."""
    arrays = graph_arrays(nx.path_graph(3), 2, mode)
    with jax.enable_x64(True):
        net = coop_kernel.network(coop_kernel.Pieces(coop_kernel.within, coop_kernel.MMD, coop_kernel.eta_width),
                                  arrays, 3)
        s = 4
        usable = [bool(m[0, 2] & (s <= t - lg[0, 2])) for t in range(s, s + 5)
                  for m, lg in [coop_kernel.sources_at(net, t)]]
    assert usable.index(True) == first


def test_khat_is_a_similarity(world):
    """K_hat_z over sources and query: symmetric, unit diagonal where used, PSD to 1e-8."""
    X, Y, _, _ = world
    with jax.enable_x64(True):
        from bandits_jax.algorithms.coop import coop_storage as ops
        store = ops.dual_init(T, V, D, jnp.float64)
        for t in range(T):
            store = ops.dual_update(store, t, jnp.asarray(X[t, :, t % K]), jnp.asarray(Y[t, :, 0]), jnp.ones(V, bool))
        flat = store.X.reshape(-1, D)
        for kern in ("linear", "rbf"):
            algo = make_algorithm("eager_kernel_ucb", kernel=kern)
            kfn = coop_kernel.resolve_kernel("t", kern)
            gram4 = kfn.fn(flat, flat, {"lengthscale": 1.0}).reshape(T, V, T, V)
            inner = lambda src, lg: ops.dual_embedding_inner(store, gram4, T - 1, src, lg)  # noqa: E731
            lags = jnp.asarray([1, 2, 2, 3, 1, 4])
            opts = coop_kernel.Options(kfn, coop_kernel.MODELS[("dual", "current")], coop_kernel.unsquared)
            khat = np.asarray(coop_kernel.mmd_similarity(opts, algo.defaults, inner, jnp.asarray(2),
                                                         jnp.ones((V,), bool), lags, jnp.asarray(1)))
            np.testing.assert_allclose(khat, khat.T, atol=0)
            np.testing.assert_array_equal(np.diag(khat), 1.0)
            assert np.linalg.eigvalsh(khat).min() >= -1e-8
            assert 0.0 < khat[2, V] < 1.0  # agent 2 as a source seen 2 rounds late, and as the query


COMMON = (("embedding", "common_lag"), ("storage", "feature"))


@pytest.mark.parametrize("name", ["coop_kernel_ucb", "eager_kernel_ucb"])
def test_common_lag_equals_per_agent_embeddings_when_every_delay_is_one(runs, name):
    """Its exact limit: on a complete graph with gamma = 1 every delay is 1, so one K_hat_z a round
    (feature storage, embedding common_lag) is every agent's own, and the plays are the dual's."""
    dual, common = runs(name, (), "complete"), runs(name, COMMON, "complete")
    np.testing.assert_array_equal(common[0], dual[0])
    np.testing.assert_allclose(common[2], dual[2], atol=1e-8, rtol=0)


@pytest.mark.parametrize("name, graph", [("eager_kernel_ucb", "bridge-g2"), ("dist_kernel_ucb_coop", "complete")])
def test_common_lag_is_an_estimate_when_lags_differ(runs, name, graph):
    """With gamma = 2 the common lag (2) is staler than a neighbour's delay (1), and Dist's peripheral
    agents see their centre's sources one round later than the centre: the scores move."""
    current, common = runs(name, (("storage", "feature"),), graph), runs(name, COMMON, graph)
    assert np.abs(common[2] - current[2]).max() > 1e-3
    assert np.isfinite(common[2]).all() and common[4].max() == 0 and common[1].min() >= 0
    with pytest.raises(ConfigError, match="common_lag"):
        make_algorithm("eager_kernel_ucb", embedding="common_lag")


def test_feature_rbf_runs_and_ring_limits(world):
    """Nystrom features on RBF: finite, nonnegative regret; a ring shorter than a delay sets the error bit;
    a ring of exactly the largest delay changes nothing."""
    X, Y, fbar, _ = world
    arrays = {k: jnp.asarray(v) for k, v in public("bridge-g2").items()}
    out = {}
    with jax.enable_x64(True):
        for ring in (None, 2, 1):
            algo = make_algorithm("eager_kernel_ucb", kernel="rbf", storage="feature", landmarks=8, r_max=4,
                                  ring_rounds=ring)
            _, acts, aux, reg, reps = runner.replay(algo, EnvSpec(V, K, D, T), None, jnp.asarray(X), jnp.asarray(Y),
                                                    jnp.ones((T, V), bool), KEY, public=arrays, means=jnp.asarray(fbar))
            out[ring] = (np.asarray(acts), np.asarray(aux["scores"]), int(np.asarray(reps.errors).max()),
                         np.asarray(reg))
    assert np.isfinite(out[None][1]).all() and out[None][3].min() >= 0
    np.testing.assert_array_equal(out[2][0], out[None][0])
    np.testing.assert_allclose(out[2][1], out[None][1], atol=1e-12)
    assert (out[None][2], out[2][2], out[1][2]) == (0, 0, coop_kernel.ERR_RING)


def test_bad_options_and_missing_graph():
    with pytest.raises(ConfigError, match="storage"):
        make_algorithm("coop_kernel_ucb", storage="sparse")
    with pytest.raises(ConfigError, match="embedding"):
        make_algorithm("coop_kernel_ucb", embedding="frozen_at_send", storage="feature")
    with pytest.raises(ConfigError, match="lam"):
        make_algorithm("eager_kernel_ucb", lam=0.0)
    algo = make_algorithm("coop_kernel_ucb")
    with pytest.raises(ConfigError, match="graph arrays"):
        algo.init(KEY, EnvSpec(V, K, D, T), algo.defaults, None, None)


def test_runner_batches_seeds_on_a_graph_problem():
    """A Problem whose public(instance) is the graph arrays: seeds batched by the runner, messages reported."""
    arrays = public("bridge-g2")

    def contexts(instance, t, key):
        x = jax.random.normal(key, (V, K, D)) + instance["centre"][:, None, :]
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True)

    problem = Problem(
        "toy-graph", EnvSpec(V, K, D, T),
        init=lambda key: {"centre": jax.random.normal(key, (V, D)), "theta": jax.random.normal(key, (D,))},
        contexts=contexts, mean_reward=lambda inst, t, x: x @ inst["theta"],
        sample_rewards=gaussian_rewards(0.1), public=lambda inst: {k: jnp.asarray(v) for k, v in arrays.items()})
    out = runner.run_batch(problem, make_algorithm("eager_kernel_ucb", storage="feature"), [0, 1])
    assert out.regret.shape == (2, T, V) and out.regret.min() >= 0 and out.errors.max() == 0
    assert not np.array_equal(out.regret[0], out.regret[1])
    deliveries = public("bridge-g2")["within"].sum() - V
    np.testing.assert_array_equal(out.comm_up[:, -1], (D + 2) * deliveries)


@pytest.mark.parametrize("world_name, name, options, fn, ref_options", [
    ("coop-linear", "coop_kernel_ucb", {}, ref.coop_kernel_ucb_np, {}),
    ("coop-rbf", "dist_kernel_ucb_coop", {"kernel": "rbf"}, ref.dist_kernel_ucb_np, {"kernel": "rbf"}),
])
def test_runner_on_the_coop_worlds_matches_the_reference(world_name, name, options, fn, ref_options):
    """The runner on coop-linear / coop-rbf against the NumPy loop fed `coop_arrays` and the same U."""
    problem = make_problem(world_name, num_agents=8, num_arms=4, dim=3, horizon=10, p=0.4)
    out = runner.run_batch(problem, make_algorithm(name, **options), [1])
    arrays = coop_arrays(problem, 1)
    U = coop_kernel.tie_uniforms(runner.problem_and_algorithm_keys(runner.seed_key(1))[1], 8, 4, 10)
    want = fn(arrays["X"], arrays["Y"], arrays["fbar"], U, arrays, **ref_options)
    np.testing.assert_allclose(out.regret[0], want["regret"], atol=1e-9, rtol=0)
    np.testing.assert_array_equal(out.diagnostics["accepted"][0], want["accepted"])


def test_kron_sum_over_triangles_equals_the_full_kronecker_sum():
    """sum_u (l_u l_u^T) (x) G_u from the upper triangles equals NumPy's kron, summed, for symmetric G."""
    from bandits_jax.algorithms.coop.coop_storage import kron_sum

    rng = np.random.default_rng(4)
    for V, r, m in ((5, 3, 4), (6, 16, 10), (2, 1, 1)):
        Ls, X = rng.normal(size=(V, r)), rng.normal(size=(V, m, m))
        G = X + X.transpose(0, 2, 1)
        expect = sum(np.kron(np.outer(Ls[u], Ls[u]), G[u]) for u in range(V))
        with jax.enable_x64(True):
            np.testing.assert_allclose(np.asarray(kron_sum(jnp.asarray(Ls), jnp.asarray(G))), expect, atol=1e-12)
