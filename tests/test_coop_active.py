"""The cooperative methods under arrivals (`Step.active`): an idle agent makes no observation, sends no
message and needs no model, and its action is never used.

On a small graph with one arrival a step (agent 5 first acts late, so an agent without samples queries
pooled data), each method equals the NumPy reference given the same mask (reference/coop_kernel_np.py,
`active`): the active agents' actions exactly, regret to 1e-10, their scores to 1e-8, and every
message count. An idle agent's rewards (and, where nothing reads them, its contexts) change nothing.
On async-f1 with a complete graph the counts are the closed form of one arrival a step.
"""
import networkx as nx
import numpy as np
import jax
import jax.numpy as jnp
import pytest

from bandits_jax import runner
from bandits_jax.algorithms import make_algorithm
from bandits_jax.algorithms.coop import coop_kernel
from bandits_jax.core import EnvSpec
from bandits_jax.curves import Curve, parse_spec, resolve
from helpers import clustered_linear_world, graph_public
from reference import coop_kernel_np as ref

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

T, V, K, D = 14, 6, 4, 3
KEY = jax.random.PRNGKey(5)
ARRIVALS = [0, 1, 0, 2, 3, 1, 0, 4, 2, 3, 5, 1, 4, 5]  # one agent a step; agent 5 first at t = 10
ONE = np.eye(V, dtype=bool)[ARRIVALS]  # [T, V]
GRAPHS = {
    "bridge-g2": ([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 4)], 2, "hop"),
    "star-g1-plus": ([(0, 1), (0, 2), (0, 3), (3, 4), (4, 5)], 1, "hop_plus_one"),
    "complete": (list(nx.complete_graph(V).edges()), 1, "hop"),
}
FEATURE = (("storage", "feature"),)
# (name, options, graph) -> (reference function, its options)
CASES = {
    ("coop_kernel_ucb", (), "bridge-g2"): (ref.coop_kernel_ucb_np, {}),
    ("coop_kernel_ucb", (), "star-g1-plus"): (ref.coop_kernel_ucb_np, {}),
    ("coop_kernel_ucb", FEATURE, "bridge-g2"): (ref.coop_kernel_ucb_np, {}),
    ("coop_kernel_ucb", (("kernel", "rbf"),), "bridge-g2"): (ref.coop_kernel_ucb_np, {"kernel": "rbf"}),
    ("coop_kernel_ucb", (("embedding", "frozen_at_send"),), "bridge-g2"): (ref.coop_kernel_ucb_np,
                                                                           {"embedding": "frozen_at_send"}),
    ("eager_kernel_ucb", FEATURE, "star-g1-plus"): (ref.eager_kernel_ucb_np, {}),
    ("dist_kernel_ucb_coop", (), "star-g1-plus"): (ref.dist_kernel_ucb_np, {}),
    ("dist_kernel_ucb_coop", FEATURE, "star-g1-plus"): (ref.dist_kernel_ucb_np, {}),
    ("dist_kernel_ucb_coop", (("dist_mimic", "arm_projection"),), "star-g1-plus"): (
        ref.dist_kernel_ucb_np, {"dist_mimic": "arm_projection"}),
    ("naive_linucb", (), "bridge-g2"): (ref.naive_linucb_np, {}),
    ("naive_linucb", FEATURE, "bridge-g2"): (ref.naive_linucb_np, {}),
    ("naive_igp_ucb", (), "bridge-g2"): (ref.naive_igp_ucb_np, {}),
    ("ind_kernel_ucb", (), "bridge-g2"): (ref.kernel_ucb_np, {}),
    ("ind_kernel_ucb", (("kernel", "linear"),) + FEATURE, "bridge-g2"): (ref.linucb_np, {}),
    ("oful", (), "bridge-g2"): (ref.oful_np, {}),
}
COUNTS = ("deliveries", "accepted", "originated", "model_transfers", "model_scalars")


def public(graph: str) -> dict:
    return graph_public(*GRAPHS[graph], V)


@pytest.fixture(scope="module")
def world():
    """Task-dependent contexts (two clusters), linear means, noisy rewards and the tie numbers U."""
    return clustered_linear_world(1, T, V, K, D, KEY)


@pytest.fixture(scope="module")
def runs():
    """run(name, options, graph, X, Y, fbar, active) -> (actions, regret, scores, diagnostics, comm_up,
    errors), compiled once per method (graph, data and mask are arguments)."""
    compiled = {}

    def run(name, options, graph, X, Y, fbar, active):
        with jax.enable_x64(True):
            if (name, options) not in compiled:
                algo = make_algorithm(name, **dict(options))
                compiled[name, options] = jax.jit(lambda pub, x, y, mu, act, algo=algo: runner.replay(
                    algo, EnvSpec(V, K, D, T, one_active=True), None, x, y, act, KEY, public=pub, means=mu))
            _, actions, aux, regret, reps = compiled[name, options](
                {k: jnp.asarray(v) for k, v in public(graph).items()}, jnp.asarray(X), jnp.asarray(Y),
                jnp.asarray(fbar), jnp.asarray(active))
            return jax.tree_util.tree_map(np.asarray, (actions, regret, aux["scores"], reps.diagnostics,
                                                       reps.comm_up, reps.errors))

    return run


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: "-".join([c[0], c[2]] + [str(v) for _, v in c[1]]))
def test_matches_numpy_reference_with_one_arrival_a_step(world, runs, case):
    X, Y, fbar, U = world
    fn, options = CASES[case]
    want = fn(X, Y, fbar, U, public(case[2]), active=ONE, **options)
    actions, regret, scores, diag, comm, errors = runs(*case, X, Y, fbar, ONE)
    np.testing.assert_array_equal(actions[ONE], want["actions"][ONE])
    np.testing.assert_allclose(regret, want["regret"], atol=1e-10, rtol=0)
    np.testing.assert_allclose(scores[ONE], want["scores"][ONE], atol=1e-8, rtol=0)
    assert np.all(regret[~ONE] == 0.0)
    for name in COUNTS:
        np.testing.assert_array_equal(diag[name], want.get(name, 0), err_msg=name)
    np.testing.assert_array_equal(comm, want["scalars"])
    assert errors.max() == 0


def test_several_arrivals_a_step_match_the_reference(world, runs):
    """Any mask, not only one arrival a step: about half the agents act at each step."""
    X, Y, fbar, U = world
    active = np.random.default_rng(7).random((T, V)) < 0.5
    for graph in ("bridge-g2", "star-g1-plus"):
        want = ref.coop_kernel_ucb_np(X, Y, fbar, U, public(graph), active=active)
        actions, regret, scores, diag, comm, errors = runs("coop_kernel_ucb", (), graph, X, Y, fbar, active)
        np.testing.assert_array_equal(actions[active], want["actions"][active])
        np.testing.assert_allclose(regret, want["regret"], atol=1e-10, rtol=0)
        for name in COUNTS:
            np.testing.assert_array_equal(diag[name], want.get(name, 0), err_msg=name)
        assert errors.max() == 0


def test_the_mask_matters(world, runs):
    """The comparisons above are not vacuous: learning from the idle agents' pulls would play otherwise,
    and an idle agent originates no message."""
    X, Y, fbar, _ = world
    masked = runs("coop_kernel_ucb", (), "bridge-g2", X, Y, fbar, ONE)
    every = runs("coop_kernel_ucb", (), "bridge-g2", X, Y, fbar, np.ones((T, V), bool))
    assert not np.array_equal(masked[0][ONE], every[0][ONE])
    np.testing.assert_array_equal(masked[3]["originated"], np.ones(T))
    assert masked[3]["deliveries"].sum() < every[3]["deliveries"].sum()


PERTURBED = [("coop_kernel_ucb", (), "bridge-g2", True), ("coop_kernel_ucb", FEATURE, "bridge-g2", True),
             ("coop_kernel_ucb", (("kernel", "rbf"), ("storage", "feature"), ("landmarks", 8)), "bridge-g2", False),
             ("dist_kernel_ucb_coop", (("dist_mimic", "arm_projection"),), "star-g1-plus", True),
             ("naive_linucb", FEATURE, "bridge-g2", True)]


@pytest.mark.parametrize("name, options, graph, contexts", PERTURBED, ids=lambda p: str(p))
def test_an_idle_agents_rewards_change_nothing(world, runs, name, options, graph, contexts):
    """Its observation is not stored: other rewards of the idle (t, v) give the same run, every action
    included. Its contexts change only its own (unused) action, except where the round-0 contexts of
    every agent draw the Nystrom landmarks (rbf features, `contexts` False)."""
    X, Y, fbar, _ = world
    noise = np.random.default_rng(3).normal(size=Y.shape) * 10.0
    Y2 = np.where(ONE[:, :, None], Y, Y + noise)
    base = runs(name, options, graph, X, Y, fbar, ONE)
    other = runs(name, options, graph, X, Y2, fbar, ONE)
    for a, b in zip(jax.tree_util.tree_leaves(base), jax.tree_util.tree_leaves(other)):
        np.testing.assert_array_equal(a, b)
    if contexts:
        X2 = np.where(ONE[:, :, None, None], X, X[:, ::-1])
        moved = runs(name, options, graph, X2, Y2, fbar, ONE)
        np.testing.assert_array_equal(moved[0][ONE], base[0][ONE])
        np.testing.assert_array_equal(moved[2][ONE], base[2][ONE])
        for key in COUNTS:
            np.testing.assert_array_equal(moved[3][key], base[3][key])


def test_common_lag_equals_per_agent_embeddings_under_arrivals(world, runs):
    """Every delay 1 (complete graph, gamma = 1): one K_hat_z a round is each agent's own also when
    agents are idle, an agent without samples included (it borrows nothing either way)."""
    X, Y, fbar, _ = world
    dual = runs("coop_kernel_ucb", (), "complete", X, Y, fbar, ONE)
    common = runs("coop_kernel_ucb", (("embedding", "common_lag"),) + FEATURE, "complete", X, Y, fbar, ONE)
    np.testing.assert_array_equal(common[0][ONE], dual[0][ONE])
    np.testing.assert_allclose(common[2][ONE], dual[2][ONE], atol=1e-8, rtol=0)


@pytest.mark.parametrize("algorithm", ["coop_kernel_ucb", "naive_linucb:storage=feature",
                                       "dist_kernel_ucb_coop:dist_mimic=arm_projection"])
def test_async_problem_with_a_complete_graph(algorithm):
    """async-f1 (one arrival a step) through complete_graph passes the misfit check and runs: one agent
    originates a message a step and every other receives it the next round (delay 1), (d + 2) scalars
    each (Dist adds its transfers)."""
    d = 4
    (run,) = resolve([Curve("c", parse_spec(f"async-f1:num_agents=4,horizon=30,num_arms=5,dim={d}+complete_graph"),
                            parse_spec(algorithm))])
    out = runner.run_batch(run.problem, run.algorithm, [0, 1])
    assert int(np.bitwise_or.reduce(out.errors.ravel())) == 0 and np.all(np.isfinite(out.regret))
    diag = out.diagnostics
    np.testing.assert_array_equal(diag["originated"], 1)
    np.testing.assert_array_equal(diag["deliveries"], 3)
    np.testing.assert_array_equal(out.comm_up, (d + 2) * 3 + diag["model_scalars"])
