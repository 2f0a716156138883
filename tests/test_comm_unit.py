"""One unit of communication for every algorithm: scalars per receiver (`core.COMM_UNIT`; docs/design.md,
"The unit of communication"). Every registered regret algorithm either never communicates (checked on a
small run) or has here a small case (N = 2 or 3 agents, a few steps, d = 2) whose per-step comm_up and
comm_down are computed by hand from its protocol: from its rounds and diagnostics, d and N. Two names of
one protocol give the same counts; a sweep writes the unit into metadata.json."""
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from bandits_jax import runner, sweep
from bandits_jax.algorithms import ALGORITHMS, algorithm_options, make_algorithm, records
from bandits_jax.core import COMM_UNIT, EnvSpec, Trial
from bandits_jax.curves import Curve, Spec
from bandits_jax.experiments.registry import Experiment, _REGISTRY, register
from bandits_jax.problems import register_problem
from bandits_jax.problems.graphs import graph_arrays
from bandits_jax.reporting.results import load_checked, summary_markdown

sys.path.insert(0, str(Path(__file__).parent))
from toy import toy_problem  # noqa: E402

N, T, D = 3, 8, 2  # agents, steps, context dimension
KEY = jax.random.PRNGKey(5)


# ------------------------------------------------------------------------------ worlds and a run
def world(K=3, one_active=False, shared=False, seed=0):
    """(contexts [T, N, K, D], rewards [T, N, K], active [T, N]): fresh Gaussian contexts (the same for
    every agent when `shared`, as on a public candidate set), noisy cosine rewards, and every agent
    active or agents 0, 1, 2, 0, ... in turn."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 1 if shared else N, K, D)) / np.sqrt(D)
    X = np.broadcast_to(X, (T, N, K, D)).copy()
    rewards = np.cos(3 * X.sum(-1)) + 0.1 * rng.normal(size=(T, N, K))
    active = np.arange(N)[None, :] == (np.arange(T) % N)[:, None] if one_active else np.ones((T, N), bool)
    return X, rewards, active


def candidate_world(M=12, seed=1):
    """A public candidate set of M points for DUETS: (contexts [T, N, M, D], rewards, active, public)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(M, D))
    f = -((X - 0.5) ** 2).sum(-1)
    contexts = np.broadcast_to(X, (T, N, M, D)).copy()
    rewards = f + 0.1 * rng.normal(size=(T, N, M))
    return contexts, rewards, np.ones((T, N), bool), {"candidates": X, "best": np.int32(np.argmax(f))}


def graph_world(edges, V, gamma, seed=2):
    """V agents on a graph (edges, TTL gamma, "hop" delays): (contexts [T, V, 3, D], rewards, active,
    the graph arrays as `public`)."""
    G = nx.Graph()
    G.add_nodes_from(range(V))
    G.add_edges_from(edges)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, V, 3, D))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    return X, X @ rng.normal(size=D), np.ones((T, V), bool), graph_arrays(G, gamma, "hop")


def run(algo, contexts, rewards, active, public=None, one_active=False) -> dict:
    """One replayed run in float64: {"up", "down", "rounds", "errors", diagnostic: [T]}."""
    steps, agents, arms, d = contexts.shape
    with jax.enable_x64(True):
        pub = None if public is None else {k: jnp.asarray(v) for k, v in public.items()}
        *_, reps = runner.replay(algo, EnvSpec(agents, arms, d, steps, one_active), None, jnp.asarray(contexts),
                                 jnp.asarray(rewards), jnp.asarray(active), KEY, public=pub)
        reps = jax.device_get(reps)
    return {"up": np.asarray(reps.comm_up), "down": np.asarray(reps.comm_down), "rounds": np.asarray(reps.rounds),
            "errors": np.asarray(reps.errors), **{k: np.asarray(v) for k, v in reps.diagnostics.items()}}


def new_points(n_global):
    """Points pooled at each step, from the pooled count after it ([T])."""
    return np.diff(np.concatenate([[0], n_global]))


# ------------------------------------------------------------------------------ the hand-computed cases
# each: () -> (the run, expected up [T], expected down [T]); one per registered communicating name (a name may
# have several)
def fn_ucb_case():
    # paper network, width m = 4, no biases: p = m d + m = 12 parameters; full matrices, Less Comm.: every
    # agent uploads 2 p^2 + 2 p + 1 = 313 and the broadcast of the same size reaches all N = 3 agents
    out = run(make_algorithm("fn_ucb", width=4, D=0.0, train_steps=1), *world())
    assert out["rounds"].tolist() == [0] + [1] * (T - 1)  # D = 0: every iteration but the first (s - t_last = 0)
    np.testing.assert_array_equal(out["comm_paper"], out["rounds"] * (3 * 313 + 313))  # one broadcast
    return out, out["rounds"] * 3 * 313, out["rounds"] * 3 * 313


def fn_ucb_authors_case():
    # the authors' network has biases: p = m d + m + m + 1 = 17; diagonal, full variant: upload 4 p + 1 = 69,
    # broadcast 3 p + 1 + N p = 52 + 51 = 103 to each of the N = 3 agents
    out = run(make_algorithm("fn_ucb_authors", width=4, D=0.0, train_steps=1, variant="full", covariance="diag"),
              *world())
    np.testing.assert_array_equal(out["comm_paper"], out["rounds"] * (3 * 69 + 103))
    return out, out["rounds"] * 3 * 69, out["rounds"] * 3 * 103


def async_kernel_case():
    # an event of the active client: it downloads S_{k-1}, A, b (d |S_{k-1}| + |S_{k-1}|^2 + |S_{k-1}|),
    # uploads its new dictionary points and the statistics (d |dS| + |S_k|^2 + |S_k|), downloads the new
    # statistics (|S_k|^2 + |S_k|); one receiver each way. |S| is the dictionary size after each step.
    out = run(make_algorithm("async_kernel_ucb", threshold=0.8, q=2.0), *world(one_active=True), one_active=True)
    after = out["dict_size"]
    before = np.concatenate([[0], after[:-1]])
    stats = lambda m: m * m + m  # noqa: E731
    up = out["rounds"] * (D * (after - before) + stats(after))
    down = out["rounds"] * (D * before + stats(before) + stats(after))
    return out, up, down


def dis_kernel_case():
    # a sync: every point since the last one (d + 1 scalars) is uploaded once and sent on to the N - 1
    # clients that lack it
    out = run(make_algorithm("dis_kernel_ucb", threshold=1.5), *world(one_active=True), one_active=True)
    moved = new_points(out["n_global"])
    return out, (D + 1) * moved, (N - 1) * (D + 1) * moved


def dis_kernel_duets_case():
    # every client acts each step on the same (public) contexts: N new points a step between syncs
    out = run(make_algorithm("dis_kernel_ucb_duets", threshold=3.0), *world(shared=True))
    moved = new_points(out["n_global"])
    np.testing.assert_allclose(out["comm_paper"], (D + 1) * moved * (1 / N + 1), rtol=1e-12)  # paper's Eq. 2
    return out, (D + 1) * moved, (N - 1) * (D + 1) * moved


def one_kernel_case():
    # every step the active client's point goes up once and on to the N - 1 others
    out = run(make_algorithm("one_kernel_ucb"), *world(one_active=True), one_active=True)
    return out, np.full(T, D + 1.0), np.full(T, (N - 1) * (D + 1.0))


def approx_counts(out):
    """A sync of Approx-DisKernelUCB: every client's kept points (d each; the contexts are fresh, so
    every kept point is distinct per client) and its statistics (m^2 + m) up; the dictionary (d m) and
    the summed statistics to all N clients, m the new dictionary's size."""
    m, stats = out["dict_size"], out["dict_size"] ** 2 + out["dict_size"]
    return out["rounds"] * (D * out["kept"] + N * stats), out["rounds"] * N * (D * m + stats)


def approx_case():
    out = run(make_algorithm("approx_dis_kernel_ucb", threshold=1.0), *world(one_active=True), one_active=True)
    return (out, *approx_counts(out))


def approx_duets_case():
    out = run(make_algorithm("approx_dis_kernel_ucb_duets", threshold=1.0, forced_sync=2), *world(shared=True))
    m, stats = out["dict_size"], out["dict_size"] ** 2 + out["dict_size"]
    paper = out["rounds"] * (D * out["kept"] / N + stats + D * m + stats)  # the average upload, one broadcast
    np.testing.assert_allclose(out["comm_paper"], paper, rtol=1e-12)
    return (out, *approx_counts(out))


def dis_lin_case():
    # a sync: every client uploads (dA, db, n), the server sends (A_g, b_g, n) to every client
    out = run(make_algorithm("dis_lin_ucb", threshold=0.3), *world())
    each = out["rounds"] * N * (D * D + D + 1)
    return out, each, each


def fed_lin_case():
    # the active client uploads (dPhi, db) and downloads (Phi, b): d^2 + d each way
    out = run(make_algorithm("fed_lin_ucb", alpha_c=0.3), *world(one_active=True), one_active=True)
    return out, out["rounds"] * (D * D + D), out["rounds"] * (D * D + D)


def fed_glb_case():
    # a sync of k gradient rounds: every client's dA and n (d^2 + 1) up, then per round the iterate to and
    # a gradient from every client (d each way), then (A_g, theta_g, n) to every client
    out = run(make_algorithm("fed_glb_ucb", threshold=0.5), *world(one_active=True), one_active=True)
    k = out["agd_iters"]
    return (out, out["rounds"] * (N * (D * D + 1) + k * N * D),
            out["rounds"] * (k * N * D + N * (D * D + D + 1)))


def duets_case():
    # T = 8, T_1 = 2: epochs of 2, floor(sqrt(8 * 2)) = 4, then the cut 2 steps: rounds after steps 1 and 5.
    # Every agent uploads |S_j| and receives S_j, vbar, sigma_max: d |S_j| + |S_j| + 1
    out = run(make_algorithm("duets", horizon=T, first_epoch=2), *candidate_world()[:3],
              public=candidate_world()[3])
    assert np.flatnonzero(out["rounds"]).tolist() == [1, 5]
    S = out["inducing"]
    np.testing.assert_array_equal(out["comm_paper"], out["rounds"] * ((D + 2) * S + 1))
    return out, N * S, out["rounds"] * N * (D * S + S + 1)


def duets_authors_case():
    # ceil epochs: 2, ceil(sqrt(16)) = 4, the cut 2 steps. Every agent uploads |S_j| (kept draws) and
    # receives S_j and vbar: (d + 1) |S_j|
    out = run(make_algorithm("duets_authors", horizon=T, first_epoch=2), *candidate_world()[:3],
              public=candidate_world()[3])
    assert np.flatnonzero(out["rounds"]).tolist() == [1, 5]
    S = out["inducing"]
    np.testing.assert_array_equal(out["comm_paper"], (D + 2) * S)
    return out, N * S, N * (D + 1) * S


PATH4 = ([(0, 1), (1, 2), (2, 3)], 4, 2)  # a path of 4 agents, TTL gamma = 2
PATH3 = ([(0, 1), (1, 2)], 3, 1)          # a path of 3 agents, gamma = 1: agent 1 central, 0 and 2 peripheral


def message_case(name, **options):
    """Every agent's message (id, context, reward: d + 2 scalars) reaches each agent within gamma = 2 hops
    once, d(v, u) rounds after it was sent: on the path 0-1-2-3 the 6 one-hop pairs from round 0, the 4
    two-hop pairs (0-2, 1-3 both ways) from round 1. No server: nothing down."""
    def case():
        out = run(make_algorithm(name, **options), *graph_world(*PATH4))
        deliveries = np.array([6] + [10] * (T - 1))
        return out, (D + 2) * deliveries, np.zeros(T)
    case.__name__ = "messages_case"
    return case


def dist_case():
    # path 0-1-2, gamma = 1: 4 one-hop deliveries a round; from round 1 the peripheral agents 0 and 2 each
    # receive agent 1's data set of round t - 1: 3 sources' observations of rounds s <= t - 2, 3 (t - 1)
    # observations of d + 2 scalars
    out = run(make_algorithm("dist_kernel_ucb_coop"), *graph_world(*PATH3))
    t = np.arange(T)
    model = 2 * (D + 2) * 3 * np.maximum(t - 1, 0)
    np.testing.assert_array_equal(out["model_scalars"], model)
    return out, (D + 2) * 4 + model, np.zeros(T)


def common_lag_case():
    # path 0-1-2, gamma = 1, feature storage, linear K_x (m = d features): the common lag is 1, and agents
    # 0 and 2 get no message from each other, so from round 1 (when a sample that old exists) each receives
    # the other's mean-embedding summary, m + 1 scalars: 2 (d + 1) beside the 4 (d + 2) of the messages
    out = run(make_algorithm("coop_kernel_ucb", storage="feature", embedding="common_lag"), *graph_world(*PATH3))
    exchange = 2 * (D + 1) * (np.arange(T) >= 1)
    np.testing.assert_array_equal(out["embedding_scalars"], exchange)
    return out, (D + 2) * 4 + exchange, np.zeros(T)


HAND = {
    "fn_ucb": [fn_ucb_case], "fn_ucb_authors": [fn_ucb_authors_case], "async_kernel_ucb": [async_kernel_case],
    "dis_kernel_ucb": [dis_kernel_case], "dis_kernel_ucb_duets": [dis_kernel_duets_case],
    "one_kernel_ucb": [one_kernel_case], "approx_dis_kernel_ucb": [approx_case],
    "approx_dis_kernel_ucb_duets": [approx_duets_case], "dis_lin_ucb": [dis_lin_case],
    "fed_lin_ucb": [fed_lin_case], "fed_glb_ucb": [fed_glb_case], "duets": [duets_case],
    "duets_authors": [duets_authors_case],
    "coop_kernel_ucb": [message_case("coop_kernel_ucb"), common_lag_case],
    "eager_kernel_ucb": [message_case("eager_kernel_ucb")], "naive_linucb": [message_case("naive_linucb")],
    "naive_igp_ucb": [message_case("naive_igp_ucb")], "dist_kernel_ucb_coop": [dist_case],
}
# the registered regret algorithms whose records declare them silent (`Record.silent`): test_info_flow's
# audit holds each to no scalar and no round, and to isolation
SILENT = {name for name, record in records().items() if record.silent}


def test_every_registered_regret_algorithm_is_counted_or_silent():
    """A loop over the registry: each packaged regret algorithm has a hand-computed count here or its
    record declares it silent, not both (a name another test registers for itself is its own)."""
    for name in (n for n, target in ALGORITHMS.items() if isinstance(target, str)):
        horizon = {"horizon": T} if "horizon" in algorithm_options(name) else {}  # a factory that plans ahead
        if isinstance(make_algorithm(name, **horizon), Trial):
            continue
        assert (name in HAND) != (name in SILENT), (f"{name}: give it a hand-computed case in HAND, or declare it "
                                                    "silent=True in its record")


@pytest.mark.parametrize("name,case", [(n, c) for n, cases in HAND.items() for c in cases],
                         ids=[f"{n}-{c.__name__}" for n, cases in HAND.items() for c in cases])
def test_hand_computed_counts(name, case):
    out, up, down = case()
    assert not out["errors"].any()
    np.testing.assert_allclose(out["up"], up, rtol=1e-12, atol=0, err_msg=f"{name}: comm_up")
    np.testing.assert_allclose(out["down"], down, rtol=1e-12, atol=0, err_msg=f"{name}: comm_down")
    assert out["up"].sum() + out["down"].sum() > 0  # informative: it did communicate
    if "trigger" in out and out["rounds"].sum() < T:
        assert (out["up"][out["rounds"] == 0] == 0).all()  # a quiet step sends nothing


# ------------------------------------------------------------------------------ one protocol, two names
def test_dis_kernel_ucb_and_its_duets_name_count_the_same():
    """The raw-point protocol of DisKernelUCB under its two names, on a one-arrival problem with one arm
    (so both pool the same points and fire on the same steps): equal comm_up and comm_down at every step;
    every point up once, down to the N - 1 others."""
    data = world(K=1, one_active=True)
    plain = run(make_algorithm("dis_kernel_ucb", threshold=1.0), *data, one_active=True)
    duets = run(make_algorithm("dis_kernel_ucb_duets", threshold=1.0), *data, one_active=True)
    np.testing.assert_array_equal(plain["rounds"], duets["rounds"])
    assert 1 < plain["rounds"].sum() < T  # syncs and quiet steps
    np.testing.assert_array_equal(plain["up"], duets["up"])
    np.testing.assert_array_equal(plain["down"], duets["down"])
    moved = new_points(plain["n_global"])
    np.testing.assert_array_equal(plain["up"], (D + 1) * moved)
    np.testing.assert_array_equal(plain["down"], (N - 1) * plain["up"])


def test_approx_dis_kernel_ucb_and_its_duets_name_count_the_same():
    """Approx-DisKernelUCB under its two names, threshold 0 (a sync after every step) and q huge (every
    history point kept), one arm, one client a step: the same dictionaries and equal counts. After step t
    the t + 1 distinct points are all uploaded (d each) and all in the dictionary (m = t + 1)."""
    data = world(K=1, one_active=True)
    options = dict(threshold=0.0, q=1e6)
    plain = run(make_algorithm("approx_dis_kernel_ucb", **options), *data, one_active=True)
    duets = run(make_algorithm("approx_dis_kernel_ucb_duets", **options), *data, one_active=True)
    m = np.arange(1, T + 1)
    np.testing.assert_array_equal(plain["dict_size"], m)
    np.testing.assert_array_equal(duets["dict_size"], m)
    for out in (plain, duets):
        np.testing.assert_array_equal(out["up"], D * m + N * (m * m + m))
        np.testing.assert_array_equal(out["down"], N * (D * m + m * m + m))


def test_a_point_seen_twice_is_uploaded_once():
    """Approx-DisKernelUCB: a client that holds the same point twice uploads it once (the rows storage
    counts distinct (client, point) pairs, as the candidate storage does by construction). Client 0 sees
    point a at steps 0 and 3, client 1 point b, client 2 point c; all kept at the sync after step 3:
    uploaded 3 distinct pairs, not 4 rows; m = 3."""
    a, b, c = [0.3, -0.2], [-0.5, 0.4], [0.1, 0.9]
    contexts = np.zeros((4, N, 1, D))
    for t, p in enumerate([a, b, c, a]):
        contexts[t] = p
    active = np.arange(N)[None, :] == np.array([0, 1, 2, 0])[:, None]
    with jax.enable_x64(True):
        algo = make_algorithm("approx_dis_kernel_ucb", threshold=3.5, q=1e6, lam=1.0)
        *_, reps = runner.replay(algo, EnvSpec(N, 1, D, 4, True), None, jnp.asarray(contexts), jnp.ones((4, N, 1)),
                                 jnp.asarray(active), KEY)
    assert np.flatnonzero(reps.rounds).tolist() == [3] and int(reps.diagnostics["kept"][3]) == 4
    assert int(reps.diagnostics["dict_size"][3]) == 3
    np.testing.assert_array_equal(reps.comm_up, [0, 0, 0, D * 3 + N * (9 + 3)])


# ------------------------------------------------------------------------------ the unit in the results
register_problem("test-toy-comm", toy_problem)  # the same builder again is no conflict

if "test/comm-unit" not in _REGISTRY:
    register(Experiment("test/comm-unit", "one curve, for the unit in metadata.json", {},
                        {"smoke": {"horizon": 5, "seeds": 2}},
                        lambda c: [Curve("Random", Spec("test-toy-comm", {"horizon": c["horizon"]}),
                                         Spec("uniform_random"))]))


def test_the_sweep_writes_the_unit_and_older_folders_still_load(tmp_path):
    out = sweep.run_experiment("test/comm-unit", "smoke", out=tmp_path / "r", quiet=True, plot=False, curves=False)
    md = json.loads((out / "metadata.json").read_text())
    assert md["comm_unit"] == COMM_UNIT == "scalars per receiver"
    assert f"in {COMM_UNIT}." in summary_markdown(load_checked(out))
    del md["comm_unit"]  # a folder written before the key existed
    (out / "metadata.json").write_text(json.dumps(md))
    assert "comm_unit" not in load_checked(out).metadata
    md["comm_unit"] = 3
    (out / "metadata.json").write_text(json.dumps(md))
    with pytest.raises(Exception, match="comm_unit"):
        load_checked(out)
