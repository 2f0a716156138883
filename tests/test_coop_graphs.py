"""Agent graphs (problems.graphs) and the Coop-KernelUCB worlds (problems.coop): spec coop-kernelucb
§1.3, §3.0, §5.2-5.4, §10."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from bandits_jax import runner
from bandits_jax.algorithms.single.uniform import uniform_random
from bandits_jax.core import ConfigError
from bandits_jax.problems import coop, graphs, make_problem
from bandits_jax.problems.datasets import DATA_DIR_ENV, DataNotFoundError

from helpers import REAL_DIR, needs_data

FILES = {"facebook": ("facebook_combined.txt", 4039, 88234), "twitch-engb": ("musae_ENGB_edges.csv", 7126, 35324),
         "skitter-oregon": ("oregon1_010331.txt", 10670, 22002)}
GRAPH_DIR = REAL_DIR / "graphs"


def check_cover_and_mis(G, gamma):
    """The clique cover partitions the nodes into cliques of G_gamma; the MIS is independent and
    dominating in G_gamma; cent(p) is a central G_gamma-neighbour."""
    a = graphs.graph_arrays(G, gamma)
    adjacency = graphs.power_adjacency(a["dist"], gamma)
    V = len(adjacency)
    block = a["clique_id"]
    assert block.min() == 0 and set(block) == set(range(block.max() + 1))  # every node in exactly one block
    for b in range(block.max() + 1):
        members = np.flatnonzero(block == b)
        sub = adjacency[np.ix_(members, members)]
        assert (sub | np.eye(len(members), dtype=bool)).all()  # a clique of G_gamma
    np.testing.assert_array_equal(a["clique"], block[:, None] == block[None, :])
    central = a["central"]
    assert not (adjacency & central[:, None] & central[None, :]).any()  # independent
    assert (central | (adjacency & central[None, :]).any(1)).all()  # maximal = dominating
    peripheral = np.flatnonzero(~central)
    assert central[a["cent"]].all() and adjacency[peripheral, a["cent"][peripheral]].all()
    np.testing.assert_array_equal(a["cent"][central], np.flatnonzero(central))
    np.testing.assert_array_equal(a["cent_delay"], np.where(central, 0, a["dist"][np.arange(V), a["cent"]]))
    return a


# ----------------------------------------------------------------------------------- graph arrays
def test_path_distances_and_delays_in_both_modes():
    G = nx.path_graph(3)
    hop = graphs.graph_arrays(G, 2, "hop")
    plus = graphs.graph_arrays(G, 2, "hop_plus_one")
    np.testing.assert_array_equal(hop["dist"], [[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    np.testing.assert_array_equal(hop["delay"], [[1, 1, 2], [1, 1, 1], [2, 1, 1]])
    np.testing.assert_array_equal(plus["delay"], [[1, 2, 3], [2, 1, 2], [3, 2, 1]])
    assert hop["within"].all() and hop["dist"].dtype == np.int32 and hop["delay"].dtype == np.int32
    # the contract's admission rule: v uses (u, s) at decision round t iff within[v, u] and s <= t - delay[v, u]
    for arrays, first in ((hop, 2), (plus, 3)):
        s = 5
        usable = [t for t in range(s, s + 6) if arrays["within"][0, 2] and s <= t - arrays["delay"][0, 2]]
        assert usable[0] == s + first
    # own observation: next round in both modes
    assert hop["delay"][0, 0] == plus["delay"][0, 0] == 1
    # G_2 of the path is complete: one clique, node 0 central (weights tie at 3, lowest id)
    assert hop["clique"].all()
    np.testing.assert_array_equal(hop["central"], [True, False, False])
    np.testing.assert_array_equal(hop["cent"], [0, 0, 0])
    np.testing.assert_array_equal(hop["cent_delay"], [0, 1, 2])
    np.testing.assert_array_equal(plus["cent_delay"], [0, 2, 3])  # the mimic lag is the message delay


def test_cent_delay_is_the_delay_to_the_central_agent_in_both_modes():
    """Path 0-1-2-3, gamma 1: centrals 1 and 3 (weights 3, 3, then 2 for node 3 once 0 and 2 are
    covered), cent = [1, 1, 1, 3]; the mimic lag of a peripheral agent is its message delay from
    cent(p): max(1, d) under "hop", one round more under "hop_plus_one" (spec §3.4: the Dist mimic lag
    uses the messages' delay mode)."""
    G = nx.path_graph(4)
    hop = graphs.graph_arrays(G, 1, "hop")
    plus = graphs.graph_arrays(G, 1, "hop_plus_one")
    for a in (hop, plus):
        np.testing.assert_array_equal(a["central"], [False, True, False, True])
        np.testing.assert_array_equal(a["cent"], [1, 1, 1, 3])
    np.testing.assert_array_equal(hop["cent_delay"], [1, 0, 1, 0])
    np.testing.assert_array_equal(plus["cent_delay"], [2, 0, 2, 0])
    for a in (hop, plus):
        peripheral = ~a["central"]
        np.testing.assert_array_equal(a["cent_delay"][peripheral],
                                      a["delay"][np.flatnonzero(peripheral), a["cent"][peripheral]])


def test_unreachable_pairs_are_never_neighbours_whatever_gamma():
    """Two components {0, 1} and {2, 3}: at gamma >= V (the distance given to unreachable pairs) no
    pair across the components is within TTL, in G_gamma, in one clique or a central agent's."""
    G = nx.Graph([(0, 1), (2, 3)])
    block = np.kron(np.eye(2, dtype=bool), np.ones((2, 2), bool))
    for gamma in (1, 4, 9):
        a = graphs.graph_arrays(G, gamma)
        np.testing.assert_array_equal(a["dist"], [[0, 1, 4, 4], [1, 0, 4, 4], [4, 4, 0, 1], [4, 4, 1, 0]])
        np.testing.assert_array_equal(a["within"], block)
        np.testing.assert_array_equal(graphs.power_adjacency(a["dist"], gamma), block & ~np.eye(4, dtype=bool))
        np.testing.assert_array_equal(a["clique_id"], [0, 0, 1, 1])
        np.testing.assert_array_equal(a["clique"], block)
        np.testing.assert_array_equal(a["central"], [True, False, True, False])
        np.testing.assert_array_equal(a["cent"], [0, 0, 2, 2])
        np.testing.assert_array_equal(a["cent_delay"], [0, 1, 0, 1])


def test_path_gamma_one_and_cover_number():
    a = graphs.graph_arrays(nx.path_graph(3), 1)
    np.testing.assert_array_equal(a["clique_id"], [0, 0, 1])  # seed 1 (degree 2), then 0 (lowest id)
    np.testing.assert_array_equal(a["within"], [[1, 1, 0], [1, 1, 1], [0, 1, 1]])
    np.testing.assert_array_equal(a["central"], [False, True, False])
    for V, gamma in ((10, 2), (12, 3), (7, 1)):  # spec §1.5: chi-bar(G_gamma) of a path = ceil(V / (gamma + 1))
        a = check_cover_and_mis(nx.path_graph(V), gamma)
        assert a["clique_id"].max() + 1 == math.ceil(V / (gamma + 1))


@pytest.mark.parametrize("name,gamma", [("facebook-standin", 1), ("twitch-standin", 2), ("skitter-standin", 3)])
def test_cover_is_a_partition_into_cliques_and_mis_dominates(name, gamma):
    check_cover_and_mis(graphs.standin(name, 60, seed=1), gamma)


def test_complete_edgeless_and_gamma_zero():
    full = check_cover_and_mis(nx.complete_graph(6), 1)
    assert full["clique"].all() and full["central"].sum() == 1 and (full["cent"] == 0).all()
    for G, gamma in ((nx.empty_graph(4), 1), (nx.path_graph(4), 0)):
        a = check_cover_and_mis(G, gamma)
        eye = np.eye(4, dtype=bool)
        np.testing.assert_array_equal(a["within"], eye)
        np.testing.assert_array_equal(a["clique"], eye)
        assert a["central"].all()
        np.testing.assert_array_equal(a["cent"], np.arange(4))
        np.testing.assert_array_equal(a["cent_delay"], np.zeros(4))
    edgeless = graphs.graph_arrays(nx.empty_graph(4), 1)
    np.testing.assert_array_equal(edgeless["dist"], np.where(np.eye(4, dtype=bool), 0, 4))  # no path: V


def test_erdos_renyi_200_numbers():
    G = graphs.erdos_renyi(200, 0.7, seed=0)
    gamma = graphs.default_gamma(G)
    info = graphs.graph_info(G, gamma, horizon=500)
    assert (info["diameter"], gamma, info["nodes"]) == (2, 1, 200)
    assert 20 <= info["cliques"] <= 22 and 4 <= info["mis"] <= 5  # spec §5.2 / §9.18
    assert 13_700 <= info["edges"] <= 14_150 and 137 <= info["mean_neighbourhood"] <= 143
    assert info["clique_size_max"] <= 18 and info["clique_size_mean"] == pytest.approx(200 / info["cliques"])
    assert info["predicted_coop"] == pytest.approx(math.sqrt(info["cliques"] * 500 / 200), rel=1e-4)
    assert info["predicted_eager"] == pytest.approx(math.sqrt((1 + info["mis"]) * 500 / 200), rel=1e-4)
    check_cover_and_mis(G, gamma)
    # a sparse G(V, p) is redrawn with seed+1, ... until connected
    # (seeds 1, 2, 3 of G(40, 0.09) are disconnected, seed 4 is connected)
    assert not any(nx.is_connected(nx.erdos_renyi_graph(40, 0.09, seed=s)) for s in (1, 2, 3))
    assert nx.utils.graphs_equal(graphs.erdos_renyi(40, 0.09, seed=1), nx.erdos_renyi_graph(40, 0.09, seed=4))


def test_standins_match_the_spec():
    expected = {"facebook-standin": (4, 2, 19, 20), "twitch-standin": (5, 2, 27, 30), "skitter-standin": (6, 3, 15, 17)}
    for name, (diam, gamma, lo, hi) in expected.items():
        G = graphs.standin(name, 200, seed=0)
        info = graphs.graph_info(G, graphs.default_gamma(G))
        assert (info["nodes"], info["diameter"], info["gamma"]) == (200, diam, gamma), name
        assert lo <= info["cliques"] <= hi, (name, info["cliques"])


@needs_data("graphs/facebook_combined.txt", "graphs/musae_ENGB_edges.csv", "graphs/oregon1_010331.txt")
@pytest.mark.parametrize("name", sorted(FILES))
def test_real_graphs_load_and_subsample(name):
    file, nodes, edges = FILES[name]
    full = graphs.load_edge_list(GRAPH_DIR / file)
    assert (full.number_of_nodes(), full.number_of_edges()) == (nodes, edges)
    assert graphs.find_graph_file(name, REAL_DIR).name == file
    for V in (200, 50):
        G = graphs.subsample(full, V, seed=0)
        assert sorted(G.nodes) == list(range(V)) and nx.is_connected(G)
        assert nx.utils.graphs_equal(G, graphs.subsample(full, V, seed=0))
        check_cover_and_mis(G, graphs.default_gamma(G))
    assert not nx.utils.graphs_equal(graphs.subsample(full, 50, seed=1), graphs.subsample(full, 50, seed=0))


@needs_data("graphs/facebook_combined.txt", "graphs/oregon1_010331.txt")
def test_real_graph_problems_say_their_source(monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(REAL_DIR))
    facebook = make_problem("coop-linear", num_agents=50, graph="facebook")
    assert "facebook_combined.txt" in facebook.info["graph_source"] and facebook.info["network_source"] == "real"
    skitter = make_problem("coop-rbf", num_agents=50, graph="skitter-oregon")
    assert "(oregon1_010331.txt), a real graph standing in for SNAP as-Skitter" in skitter.info["graph_source"]
    assert "standing in for SNAP as-Skitter" in skitter.description
    if not (REAL_DIR / "graphs" / "as-skitter.txt").is_file():  # the real name never reads the stand-in's file
        with pytest.raises(DataNotFoundError, match="as-skitter.txt not found"):
            make_problem("coop-rbf", num_agents=50, graph="skitter")
    by_path = make_problem("coop-linear", num_agents=50, graph=str(GRAPH_DIR / "facebook_combined.txt"))
    assert by_path.info["edges"] == facebook.info["edges"]  # same file, same seed: the same subsample


# ----------------------------------------------------------------------------------- stand-ins
@pytest.fixture
def standin_files(tmp_path, monkeypatch):
    """A data folder holding only the stand-in files (a 5-cycle each): Oregon-1 for as-Skitter and
    Twitch ENGB for Twitch DE."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    (tmp_path / "oregon1_010331.txt").write_text("0\t1\n1\t2\n2\t3\n3\t4\n4\t0\n")
    (tmp_path / "musae_ENGB_edges.csv").write_text("id_1,id_2\n0,1\n1,2\n2,3\n3,4\n4,0\n")
    return tmp_path


@pytest.mark.parametrize("name, wanted, standin", [("skitter", "as-skitter.txt", "skitter-oregon"),
                                                   ("twitch", "musae_DE_edges.csv", "twitch-engb")])
def test_a_missing_snap_file_is_refused_even_where_a_standin_file_lies(standin_files, name, wanted, standin):
    """The real name never falls back to another file: a one-line DataNotFoundError names the file looked
    for and the stand-in to ask for; the stand-in name finds its file."""
    with pytest.raises(DataNotFoundError, match=rf"graph {name!r}: {wanted} not found .*use a stand-in: "
                                                rf"{standin} .*or {name}-standin") as refused:
        make_problem("coop-linear", num_agents=4, graph=name, data_dir=str(standin_files))
    assert "\n" not in str(refused.value)
    file = graphs.find_graph_file(standin, standin_files)
    assert file.parent == standin_files and file.name != wanted


@pytest.mark.parametrize("standin, file, replaced", [
    ("skitter-oregon", "oregon1_010331.txt", "SNAP as-Skitter"),
    ("twitch-engb", "musae_ENGB_edges.csv", "SNAP musae-Twitch DE")])
def test_a_standin_asked_for_is_named_in_the_description(standin_files, standin, file, replaced):
    problem = make_problem("coop-linear", num_agents=4, graph=standin, data_dir=str(standin_files))
    for text in (problem.description, problem.info["graph_source"]):
        assert f"({file}), a real graph standing in for {replaced}" in text
    assert problem.info["network_source"] == "real"


# ----------------------------------------------------------------------------------- errors
def test_error_messages(tmp_path, monkeypatch):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        graphs.load_edge_list(tmp_path / "nothing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("# a comment\n0 1\n1 2\n\n2 x\n")
    with pytest.raises(ConfigError, match=r"line 5: malformed edge '2 x'"):
        graphs.load_edge_list(bad)
    late_header = tmp_path / "late.csv"
    late_header.write_text("0,1\nid_1,id_2\n")
    with pytest.raises(ConfigError, match="line 2"):
        graphs.load_edge_list(late_header)
    csv, tabs = tmp_path / "g.csv", tmp_path / "g.txt"
    csv.write_text("id_1,id_2\n0,1\n1,2\n2,2\n")
    tabs.write_text("# SNAP\n# Nodes: 3\n0\t1\n1\t2\n")
    for f in (csv, tabs):
        G = graphs.load_edge_list(f)
        assert sorted(G.edges) == [(0, 1), (1, 2)]
    with pytest.raises(ConfigError, match="graph too small: .* 3 nodes, fewer than V = 5"):
        graphs.subsample(graphs.load_edge_list(csv), 5)
    with pytest.raises(ConfigError, match="graph too small"):
        make_problem("coop-linear", num_agents=5, graph=str(csv))
    with pytest.raises(ConfigError, match="disconnected"):
        make_problem("coop-linear", num_agents=4, graph=nx.disjoint_union(nx.path_graph(2), nx.path_graph(2)))
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(DataNotFoundError, match="facebook_combined.txt not found .*facebook-standin"):
        make_problem("coop-linear", num_agents=10, graph="facebook", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="neither a known name"):
        make_problem("coop-linear", num_agents=10, graph="fb")
    with pytest.raises(ConfigError, match="delay_mode"):
        make_problem("coop-linear", num_agents=10, delay_mode="hops")
    with pytest.raises(ConfigError, match="gamma must be an integer"):
        make_problem("coop-linear", num_agents=10, gamma=-1)


# ----------------------------------------------------------------------------------- worlds
SMALL = dict(num_agents=12, num_arms=8, dim=10, horizon=6, graph="er", p=0.3, graph_seed=2)


@pytest.fixture(scope="module")
def worlds():
    problems = {name: make_problem(name, **SMALL) for name in ("coop-linear", "coop-rbf")}
    arrays = {(name, seed): coop.coop_arrays(p, seed) for name, p in problems.items() for seed in (0, 1)}
    return problems, arrays


def test_world_contexts_means_and_oracle(worlds):
    problems, arrays = worlds
    for (name, seed), a in arrays.items():
        X, fbar, Y = a["X"], a["fbar"], a["Y"]
        assert X.shape == (6, 12, 8, 10) and fbar.shape == Y.shape == (6, 12, 8)
        np.testing.assert_allclose(np.linalg.norm(X, axis=-1), 1.0, atol=1e-12)
        assert np.abs(fbar).max() <= 1.0
        oracle = np.argmax(fbar, axis=-1)
        regret = fbar.max(-1)[..., None] - fbar
        assert np.take_along_axis(regret, oracle[..., None], -1).max() == 0.0 and regret.min() >= 0.0
        assert regret.max() > 0.01
        noise = Y - fbar
        assert 0.07 < noise.std() < 0.13 and abs(noise.mean()) < 0.03
    hidden = arrays["coop-linear", 0]["hidden"]
    X, fbar = arrays["coop-linear", 0]["X"], arrays["coop-linear", 0]["fbar"]
    np.testing.assert_allclose(fbar, np.einsum("tvkd,vd->tvk", X, hidden["theta"][hidden["cluster"]]), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(hidden["theta"], axis=1), 1.0)
    # contexts centre on the cluster direction: mean cosine with mu_cl(v) about 1/sqrt(2)
    cos = np.einsum("tvkd,vd->tvk", X, hidden["mu"][hidden["cluster"]])
    assert 0.6 < cos.mean() < 0.8


def test_rbf_world_norm_and_means(worlds):
    _, arrays = worlds
    a = arrays["coop-rbf", 0]
    h = a["hidden"]

    def k(x, y):
        return np.exp(-((x[..., :, None, :] - y) ** 2).sum(-1) / 2)

    gram = k(h["anchor_x"], h["anchor_x"]) * k(h["anchor_z"], h["anchor_z"])
    assert h["alpha"] @ gram @ h["alpha"] == pytest.approx(1.0, rel=1e-10)  # ||F||_K = 1
    expected = np.einsum("tvkj,vj,j->tvk", k(a["X"], h["anchor_x"]), k(h["z"], h["anchor_z"]), h["alpha"])
    np.testing.assert_allclose(a["fbar"], expected, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(h["z"], axis=1), 1.0)
    # every anchor's z is some agent's z
    assert all(np.isclose(np.abs(h["z"] - b).sum(1), 0).any() for b in h["anchor_z"])


def test_common_random_numbers_and_fixed_clusters(worlds):
    problems, arrays = worlds
    again = coop.coop_arrays(problems["coop-linear"], 0)
    for key in ("X", "fbar", "Y"):
        np.testing.assert_array_equal(again[key], arrays["coop-linear", 0][key])
    # the noise of a seed is one draw per (t, v, arm), the same in both worlds
    np.testing.assert_allclose(arrays["coop-linear", 1]["Y"] - arrays["coop-linear", 1]["fbar"],
                               arrays["coop-rbf", 1]["Y"] - arrays["coop-rbf", 1]["fbar"], atol=1e-12)
    assert not np.allclose(arrays["coop-linear", 0]["X"], arrays["coop-linear", 1]["X"])
    h0, h1 = arrays["coop-linear", 0]["hidden"], arrays["coop-linear", 1]["hidden"]
    np.testing.assert_array_equal(h0["cluster"], h1["cluster"])  # clusters fixed per problem
    assert not np.allclose(h0["theta"], h1["theta"])  # theta redrawn per trial
    np.testing.assert_array_equal(arrays["coop-rbf", 0]["hidden"]["cluster"], h0["cluster"])
    # the public arrays are the graph arrays
    problem = problems["coop-linear"]
    G = graphs.erdos_renyi(12, 0.3, seed=2)
    expected = graphs.graph_arrays(G, graphs.default_gamma(G))
    for key, value in expected.items():
        np.testing.assert_array_equal(arrays["coop-linear", 0][key], value, err_msg=key)
    assert problem.info["gamma"] == graphs.default_gamma(G) and problem.info["graph_source"] == "erdos-renyi(12, 0.3)"


def test_clusters_are_voronoi_cells_of_a_maximal_independent_set(worlds):
    problems, arrays = worlds
    a = arrays["coop-linear", 0]
    gamma = problems["coop-linear"].info["gamma"]
    cluster = a["hidden"]["cluster"]
    assert problems["coop-linear"].info["clusters"] == cluster.max() + 1 == len(set(cluster))
    for dist, g, seed in ((a["dist"], gamma, 2), (graphs.distances(graphs.standin("twitch-standin", 80, 0)), 2, 5)):
        labels = coop.voronoi_clusters(dist, g, seed)
        adjacency = graphs.power_adjacency(dist, g)
        # the centres: a greedy pass over the same random order (module docstring of coop)
        rng = np.random.default_rng([seed, 1])
        order = rng.permutation(len(dist))
        S = []
        for v in order:
            if not adjacency[v, S].any():
                S.append(v)
        S = np.sort(S)
        assert not adjacency[np.ix_(S, S)].any() and (adjacency[:, S].any(1) | np.isin(np.arange(len(dist)), S)).all()
        np.testing.assert_array_equal(labels[S], np.arange(len(S)))
        nearest = dist[:, S].min(1)
        assert (dist[np.arange(len(dist)), S[labels]] == nearest).all() and nearest.max() <= g
    linear = problems["coop-linear"]
    assert coop.world_numbers(linear, 0)["upsilon_z"] == linear.info["clusters"]


def test_runner_draws_the_coop_arrays(worlds):
    problems, arrays = worlds
    out = runner.run_batch(problems["coop-linear"], uniform_random(), [1], precision="float64")
    fbar = arrays["coop-linear", 1]["fbar"]
    gaps = fbar.max(-1)[..., None] - fbar  # [T, V, K]: the runner's regret is one of these per (t, v)
    match = np.isclose(out.regret[0][..., None], gaps, atol=1e-12).any(-1)
    assert match.all() and out.regret[0].sum() > 0
