"""Agent networks for cooperative bandits: sources, subsampling and the arrays algorithms read.

Sources (spec coop-kernelucb §5.2), every graph relabelled 0..V-1:
  find_graph_file(name)        the SNAP file of a name (SNAP_GRAPHS): facebook, twitch (the DE graph
                               the spec names), skitter, or a real graph asked for by name in place of
                               one of them (twitch-engb, skitter-oregon); a missing file is refused,
                               never replaced by another one.
  erdos_renyi(V, p, seed)      G(V, p), redrawn with seed+1, seed+2, ... until connected [P/D].
  load_edge_list(path)         a SNAP edge list: `u v` (space), `u<TAB>v` or `u,v` (CSV, one header
                               line allowed); '#' lines and blank lines skipped, self-loops dropped.
  subsample(G, V, seed)        random walk with restart 0.15 from a uniform node of the largest
                               component; after 100 V steps without a new node, a jump to a uniform
                               unvisited neighbour of the visited set; the first V distinct nodes,
                               induced (connected), labelled by increasing original id [D].
  standin(name, V, seed)       the networkx substitutes of §5.2 (connected, exactly V nodes) [D].
Graph arrays (`graph_arrays`, host-side NumPy; §1.3, §3.0): hop distances by BFS (pairs in
different components get V, and are never neighbours whatever gamma), G_gamma: 1 <= dist <= gamma,
N_gamma(v) = {u: dist <= gamma} with v, both among reachable pairs only; delay = max(1, dist)
("hop"), plus 1 for u != v ("hop_plus_one"); a greedy clique cover of
G_gamma (seed: the most G_gamma-neighbours among the uncovered, then repeatedly the candidate with
the most neighbours among the candidates; ties: lowest id) and a greedy maximal weighted
independent set (weights |N_gamma(v)|, visited by decreasing weight, ties lowest id; cent(p) = the
central G_gamma-neighbour of largest G_gamma degree, ties smaller distance, then lowest id) and
cent_delay(p) = delay[p, cent(p)], the round lag of Dist's mimicking in the same delay mode as the
messages (spec §3.4; 0 for a central agent).
gamma defaults to max(1, floor(diameter / 2)) (§7 #5). `graph_info` gives the §5.7 numbers.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from ..core import ConfigError, Problem
from .datasets import DATA_DIR_ENV, DataNotFoundError, given_folder

DELAY_MODES = ("hop", "hop_plus_one")
RESTART = 0.15
STALL_STEPS_PER_NODE = 100
# name -> (file names tried in order (glob patterns allowed), what the file is, the data set it stands in
# for or None). A name reads its own file or nothing: a stand-in file is read only under its own name.
SNAP_GRAPHS = {
    "facebook": (("facebook_combined.txt",), "SNAP ego-Facebook", None),
    "twitch": (("musae_DE_edges.csv",), "SNAP musae-Twitch DE", None),
    "skitter": (("as-skitter.txt",), "SNAP as-Skitter", None),
    "twitch-engb": (("musae_ENGB_edges.csv",), "SNAP musae-Twitch ENGB", "SNAP musae-Twitch DE"),
    "skitter-oregon": (("oregon1_*.txt",), "SNAP Oregon-1 AS graph", "SNAP as-Skitter"),
}
STANDINS = {
    "facebook-standin": "relaxed caveman graph (caves of about 20, rewiring 0.1), stand-in for ego-Facebook",
    "twitch-standin": "Barabasi-Albert graph (m = 3), stand-in for musae-Twitch",
    "skitter-standin": "random internet AS graph, stand-in for as-Skitter",
}
MAX_REDRAWS = 100


# ----------------------------------------------------------------------------------- sources
def erdos_renyi(V: int, p: float, seed: int = 0) -> nx.Graph:
    """A connected G(V, p): drawn with `seed`, redrawn with seed+1, ... while disconnected."""
    _check_size(V, "V")
    if not 0 < p <= 1:
        raise ConfigError(f"erdos-renyi: p must be in (0, 1], got {p!r}")
    for s in range(seed, seed + MAX_REDRAWS):
        G = nx.erdos_renyi_graph(V, p, seed=s)
        if nx.is_connected(G):
            return G
    raise ConfigError(f"erdos-renyi({V}, {p}) stayed disconnected over {MAX_REDRAWS} seeds; raise p above ln(V)/V")


def standin(name: str, V: int, seed: int = 0) -> nx.Graph:
    """The networkx substitute `name` (STANDINS) with exactly V nodes, redrawn with seed+1, ... until
    connected."""
    if name not in STANDINS:
        raise ConfigError(f"unknown stand-in graph {name!r}; known: {', '.join(STANDINS)}")
    _check_size(V, "V")
    for s in range(seed, seed + MAX_REDRAWS):
        G = _standin_draw(name, V, s)
        if G.number_of_nodes() == V and nx.is_connected(G):
            return nx.convert_node_labels_to_integers(G, ordering="sorted")
    raise ConfigError(f"stand-in {name} gave no connected graph with {V} nodes over {MAX_REDRAWS} seeds; "
                      "use another V")


def _standin_draw(name: str, V: int, seed: int) -> nx.Graph:
    if name == "facebook-standin":
        caves = min((c for c in range(1, V + 1) if V % c == 0), key=lambda c: (abs(c - V / 20), c))
        return nx.relaxed_caveman_graph(caves, V // caves, 0.1, seed=seed)
    if name == "twitch-standin":
        return nx.barabasi_albert_graph(V, min(3, V - 1), seed=seed)
    return nx.Graph(nx.random_internet_as_graph(V, seed=seed))


def find_graph_file(name: str, data_dir=None) -> Path:
    """The file of SNAP graph `name` (SNAP_GRAPHS) in data_dir= or $BANDITS_JAX_DATA_DIR (or their
    `graphs` sub-folder). Never another graph's file: where it is missing, a one-line DataNotFoundError
    names the file looked for, where to put it and the stand-ins to ask for instead (`standin_choices`)."""
    patterns = SNAP_GRAPHS[name][0]
    given = [given_folder(data_dir, f"graph {name!r}")] if data_dir else []
    dirs = given + [Path(d).expanduser() for d in (os.environ.get(DATA_DIR_ENV),) if d]
    for folder in [d / sub for d in dirs for sub in ("", "graphs")]:
        for pattern in patterns:
            found = sorted(folder.glob(pattern)) if folder.is_dir() else []
            if found:
                return found[0]
    searched = ", ".join(str(d) for d in dirs) or "no directory given"
    raise DataNotFoundError(f"graph {name!r}: {' or '.join(patterns)} not found (searched: {searched}); download "
                            f"it from https://snap.stanford.edu/data/ and put it in data_dir= or ${DATA_DIR_ENV}, "
                            f"pass its path as the graph, or use a stand-in: {standin_choices(name)}")


def standin_choices(name: str) -> str:
    """The stand-ins of SNAP graph `name` in words: another real graph's file registered for it (e.g.
    skitter-oregon for skitter), then the synthetic <base>-standin."""
    what = SNAP_GRAPHS[name][1]
    files = [f"{other} ({SNAP_GRAPHS[other][0][0]}, a real graph)" for other, (_, _, replaced) in SNAP_GRAPHS.items()
             if replaced == what]
    base = name.split("-")[0]
    return " or ".join(files + [f"{base}-standin (a synthetic one)"])


def load_edge_list(path) -> nx.Graph:
    """An undirected graph from a SNAP edge list (module docstring); one-line ConfigErrors for a missing
    file or a malformed line (with its number)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataNotFoundError(f"edge list {file} does not exist; pass the path of a SNAP edge list file")
    edges, first = [], True
    with open(file, "r", encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            fields = text.split(",") if "," in text else text.split()
            try:
                if len(fields) < 2:
                    raise ValueError
                u, v = int(fields[0]), int(fields[1])
            except ValueError:
                if first and not any(_is_int(x) for x in fields):
                    first = False  # a header line ("id_1,id_2")
                    continue
                raise ConfigError(f"{file}, line {number}: malformed edge {text[:60]!r}; each line must hold two "
                                  "integer node ids separated by a space, a tab or a comma") from None
            first = False
            if u != v:
                edges.append((u, v))
    if not edges:
        raise ConfigError(f"{file} holds no edges; pass a SNAP edge list (one 'u v' pair per line)")
    return nx.Graph(edges)


def subsample(G: nx.Graph, V: int, seed: int = 0) -> nx.Graph:
    """V nodes of G by a random walk with restart (module docstring), relabelled 0..V-1."""
    _check_size(V, "V")
    component = max(nx.connected_components(G), key=len) if G.number_of_nodes() else set()
    if len(component) < V:
        split = "" if len(component) == G.number_of_nodes() else f"disconnected ({G.number_of_nodes()} nodes); "
        raise ConfigError(f"graph too small: {split}its largest connected component has {len(component)} nodes, "
                          f"fewer than V = {V}; use a smaller V or a larger graph")
    nodes = sorted(component)
    neighbours = {u: sorted(G.adj[u]) for u in nodes}
    rng = np.random.default_rng(seed)
    start = nodes[rng.integers(len(nodes))]
    seen, current, stall = {start}, start, 0
    while len(seen) < V:
        if rng.random() < RESTART:
            current = start
        else:
            options = neighbours[current]
            current = options[rng.integers(len(options))]
        stall = 0 if current not in seen else stall + 1
        if stall >= STALL_STEPS_PER_NODE * V:
            frontier = sorted({w for u in seen for w in neighbours[u]} - seen)
            current, stall = frontier[rng.integers(len(frontier))], 0
        seen.add(current)
    return nx.convert_node_labels_to_integers(G.subgraph(sorted(seen)), ordering="sorted")


def default_gamma(G: nx.Graph) -> int:
    """max(1, floor(diameter / 2)) of a connected graph."""
    return max(1, nx.diameter(G) // 2)


# ----------------------------------------------------------------------------------- arrays
def graph_arrays(G: nx.Graph, gamma: int, delay_mode: str = "hop") -> dict:
    """{dist, delay, within, clique, clique_id, central, cent, cent_delay} of G (nodes 0..V-1) for TTL
    gamma: dist, delay [V, V] int32; within, clique [V, V] bool; clique_id, cent, cent_delay [V] int32;
    central [V] bool (module docstring; contract keys). Unreachable pairs are never within TTL, and
    cent_delay is the message delay from cent(p), so Dist's mimic lag follows `delay_mode`."""
    if delay_mode not in DELAY_MODES:
        raise ConfigError(f"delay_mode must be one of {', '.join(DELAY_MODES)}, got {delay_mode!r}")
    return distance_arrays(distances(G), gamma, delay_mode)


def distance_arrays(dist: np.ndarray, gamma: int, delay_mode: str = "hop") -> dict:
    """`graph_arrays` of the graph whose hop distances are dist [V, V] (int, V where no path), without
    networkx: the complete graph's are 1 - I (`complete_arrays`)."""
    if delay_mode not in DELAY_MODES:
        raise ConfigError(f"delay_mode must be one of {', '.join(DELAY_MODES)}, got {delay_mode!r}")
    dist = np.asarray(dist, np.int32)
    _check_gamma(gamma)
    V = len(dist)
    adjacency = power_adjacency(dist, gamma)
    delay = np.maximum(1, dist)
    if delay_mode == "hop_plus_one":
        delay = delay + (1 - np.eye(V, dtype=np.int32))
    block = clique_cover(adjacency)
    central, cent = central_agents(adjacency, dist)
    cent_delay = np.where(central, 0, delay[np.arange(V), cent])
    return {"dist": dist, "delay": delay.astype(np.int32), "within": reachable(dist) & (dist <= gamma),
            "clique": block[:, None] == block[None, :], "clique_id": block, "central": central,
            "cent": cent, "cent_delay": cent_delay.astype(np.int32)}


def distances(G: nx.Graph) -> np.ndarray:
    """[V, V] int32 hop distances by BFS; V where no path exists. Nodes must be 0..V-1."""
    V = G.number_of_nodes()
    if sorted(G.nodes) != list(range(V)):
        raise ConfigError("graph nodes must be labelled 0..V-1; relabel with nx.convert_node_labels_to_integers")
    dist = np.full((V, V), V, np.int32)
    for u, lengths in nx.all_pairs_shortest_path_length(G):
        dist[u, list(lengths)] = list(lengths.values())
    return dist


def reachable(dist: np.ndarray) -> np.ndarray:
    """[V, V] bool: the pairs joined by a path (`distances` gives the others V, which a gamma >= V
    would otherwise take for a distance within TTL)."""
    return dist < len(dist)


def power_adjacency(dist: np.ndarray, gamma: int) -> np.ndarray:
    """[V, V] bool adjacency of G_gamma: 1 <= dist <= gamma, between reachable pairs only."""
    return reachable(dist) & (dist >= 1) & (dist <= gamma)


def clique_cover(adjacency: np.ndarray) -> np.ndarray:
    """[V] int32 block index of the greedy clique cover of the graph `adjacency` (spec §3.0), blocks
    numbered in the order they are formed."""
    A = adjacency.astype(np.int64)
    V = len(A)
    block = np.full(V, -1, np.int32)
    uncovered = np.ones(V, bool)
    count = 0
    while uncovered.any():
        degree = np.where(uncovered, A @ uncovered, -1)
        v = int(np.argmax(degree))  # argmax takes the lowest index among ties
        members = [v]
        candidates = adjacency[v] & uncovered
        while candidates.any():
            inside = np.where(candidates, A @ candidates, -1)
            u = int(np.argmax(inside))
            members.append(u)
            candidates = candidates & adjacency[u]
        block[members] = count
        uncovered[members] = False
        count += 1
    return block


def central_agents(adjacency: np.ndarray, dist: np.ndarray):
    """(central [V] bool, cent [V] int32): the greedy maximal weighted independent set of the graph
    `adjacency` (weights: degree + 1 = |N_gamma(v)|) and each node's central agent (spec §3.0)."""
    V = len(adjacency)
    degree = adjacency.sum(1)
    central = np.zeros(V, bool)
    for v in sorted(range(V), key=lambda u: (-degree[u], u)):
        if not (adjacency[v] & central).any():
            central[v] = True
    cent = np.arange(V, dtype=np.int32)
    for p in np.flatnonzero(~central):
        options = np.flatnonzero(adjacency[p] & central)
        cent[p] = min(options, key=lambda c: (-degree[c], dist[p, c], c))
    return central, cent


def complete_arrays(V: int, delay_mode: str = "hop") -> dict:
    """`graph_arrays` of the complete graph on V agents (gamma = 1): every pair one hop apart, one clique,
    agent 0 the only central agent and everyone's centre."""
    _check_size(V, "V")
    return distance_arrays(1 - np.eye(V, dtype=np.int32), 1, delay_mode)


# ----------------------------------------------------------------------------------- problem wrapper
def complete_graph(problem: Problem, delay_mode: str = "hop") -> Problem:
    """The problem with its agents on a complete graph: `public(instance)` also holds the cooperative
    methods' graph arrays (`complete_arrays`: gamma = 1, one clique of all agents, dist = delay = 1
    between distinct agents), so Coop-KernelUCB and its baselines run on it; nothing else changes.

    Delays: with "hop" (default) every observation reaches every agent one round later, as its own
    do (a cooperative method uses round s's data from round s + 1), so the clique is the pooled data
    without delay: Coop-, Eager- and Naive- pool every agent's data, Dist- makes agent 0 the centre
    whose model the others mimic one round late; "hop_plus_one" delays other agents' data by one
    more round. A problem with arrivals of its own (some agents idle at a step, e.g. async-*) keeps
    them: the cooperative methods honour `Step.active` (an idle agent makes no observation and sends
    no message; `coop_kernel`). A problem whose public part already holds graph arrays (coop-linear,
    coop-rbf) is refused."""
    V = problem.spec.num_agents
    arrays = complete_arrays(V, delay_mode)
    base = problem.public
    known = {} if base is None else jax.eval_shape(lambda key: base(problem.init(key)),
                                                   jax.ShapeDtypeStruct((2,), jnp.uint32))
    if not isinstance(known, dict):
        raise ConfigError(f"complete_graph: {problem.name}'s public part is a {type(known).__name__}, not a dict to "
                          f"add the graph arrays to")
    if any(key in known for key in arrays):
        raise ConfigError(f"complete_graph: {problem.name} has a graph of its own already (public "
                          f"{', '.join(sorted(set(known) & set(arrays)))})")

    def public(instance):
        return {**({} if base is None else base(instance)), **{k: jnp.asarray(v) for k, v in arrays.items()}}

    return problem._replace(public=public, info={**problem.info, "graph": f"complete on {V} agents",
                                                 "delay_mode": delay_mode},
                            description=problem.description + f" (complete graph of its {V} agents, {delay_mode} "
                                                              f"delays)")


# ----------------------------------------------------------------------------------- numbers
def graph_info(G: nx.Graph, gamma: int, horizon: int = 500) -> dict:
    """Spec §5.7's structural numbers of G at TTL gamma, and the predicted regret factors at T = horizon:
    sqrt(cliques T / V), sqrt(mis T / V), sqrt((gamma + mis) T / V) and sqrt(T) (independent)."""
    arrays = graph_arrays(G, gamma)
    V = len(arrays["dist"])
    sizes = np.bincount(arrays["clique_id"])
    cliques, mis = len(sizes), int(arrays["central"].sum())
    connected = V > 0 and nx.is_connected(G)
    return {
        "nodes": V, "edges": G.number_of_edges(), "diameter": int(arrays["dist"].max()) if connected else -1,
        "gamma": int(gamma), "mean_neighbourhood": _round(arrays["within"].sum(1).mean()),
        "cliques": cliques, "clique_size_max": int(sizes.max()), "clique_size_mean": _round(sizes.mean()),
        "mis": mis, "predicted_coop": _round(math.sqrt(cliques * horizon / V)),
        "predicted_dist": _round(math.sqrt(mis * horizon / V)),
        "predicted_eager": _round(math.sqrt((gamma + mis) * horizon / V)),
        "predicted_independent": _round(math.sqrt(horizon)),
    }


# ----------------------------------------------------------------------------------- helpers
def _check_size(V, name: str) -> None:
    if not isinstance(V, int) or isinstance(V, bool) or V < 1:
        raise ConfigError(f"{name} must be a positive integer, got {V!r}")


def _check_gamma(gamma) -> None:
    if not isinstance(gamma, (int, np.integer)) or isinstance(gamma, bool) or gamma < 0:
        raise ConfigError(f"gamma must be an integer >= 0, got {gamma!r}")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _round(x: float) -> float:
    return float(f"{x:.5g}")
