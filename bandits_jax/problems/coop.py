"""`coop-linear` and `coop-rbf`: the networked worlds of Coop-KernelUCB's experiments (spec §5.3, §5.4).

V agents on a fixed graph G (`graphs`: "er" = G(V, p), a SNAP name, a stand-in, a file path or a
networkx graph; fixed per problem by graph_seed), TTL gamma (default max(1, floor(diam / 2))).
Clusters (fixed per problem) [D]: the Voronoi cells, in hop distance, of a maximal independent set
S of G_gamma drawn greedily over a uniformly random node order; ties between centres uniform.
Per seed (trial), with C clusters, K contexts in d dimensions per agent per step, noise N(0, R^2):
  linear (§5.3): theta_c, mu_c ~ Uniform(S^{d-1}); x_{v,t,k} = normalize(mu_cl(v) + xi / sqrt(d)),
      xi ~ N(0, I_d); f_v(x) = theta_cl(v)^T x in [-1, 1]; K_z = same-cluster indicator, Upsilon_z = C.
  rbf (§5.4): mu_c as above, z_v = normalize(mu_cl(v) + rho xi_v / sqrt(d)) (rho = inf: i.i.d. on the
      sphere); F(x, z) = sum_{j<50} alpha_j K_x(x, a_j) K_z(z, b_j), a_j ~ Uniform(S^{d-1}), b_j the z of
      a uniform agent, alpha ~ N(0, I) rescaled to ||F||_K = sqrt(alpha^T G alpha) = 1 (so |F| <= 1);
      K_x, K_z RBF of bandwidths sigma_x, sigma_z; x_{v,t,k} = normalize(z_v + xi / sqrt(d)).
Instance: linear {"theta" [C, d], "mu" [C, d], "cluster" [V]}; rbf {"z" [V, d], "anchor_x" [J, d],
"anchor_z" [J, d], "alpha" [J], "cluster" [V]}. contexts [V, K, d] (unit norm), means [V, K].
public(instance) = `graphs.graph_arrays` as jnp arrays: the agents' only knowledge of the network.
`coop_arrays(problem, seed, T)` gives one seed's arrays as the runner draws them (for references);
`world_numbers(problem, seed)` a trial's gap and Upsilon_z (§5.7).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from .. import core
from ..core import ConfigError, EnvSpec, Problem, float_dtype, keep_last
from ..keys import init_keys, problem_and_algorithm_keys, problem_step_keys, seed_key
from . import graphs
from .synthetic import check_noise_std

ANCHORS = 50
# Contexts and agent vectors are unit vectors, at most 2 apart: at an RBF bandwidth of 1e8 the kernel
# exp(-r^2 / (2 sigma^2)) is 1 to float64's precision for every pair, so a larger one changes nothing (and
# sigma^2 overflows near 1e154). Likewise a spread rho of 1e16 leaves the cluster centre below float64's
# precision in z = normalize(mu + rho xi / sqrt(d)): rho = inf says the same exactly.
MAX_BANDWIDTH = 1e8
MAX_RHO = 1e16


# ----------------------------------------------------------------------------------- builders
def coop_linear(num_agents: int = 200, num_arms: int = 8, dim: int = 10, horizon: int = 500, *, graph="er",
                p: float = 0.7, gamma=None, delay_mode: str = "hop", noise_std: float = 0.1, graph_seed: int = 0,
                data_dir=None, ttl=None) -> Problem:
    """Coop-KernelUCB setup 1: linear rewards theta_cluster^T x of agents on a graph (spec §5.3)."""
    return coop_world("linear", num_agents, num_arms, dim, horizon, graph=graph, p=p, gamma=gamma,
                      delay_mode=delay_mode, noise_std=noise_std, graph_seed=graph_seed, data_dir=data_dir, ttl=ttl)


def coop_rbf(num_agents: int = 200, num_arms: int = 8, dim: int = 10, horizon: int = 500, *, graph="er",
             p: float = 0.7, gamma=None, delay_mode: str = "hop", noise_std: float = 0.1, graph_seed: int = 0,
             data_dir=None, rho: float = 0.3, sigma_x: float = 1.0, sigma_z: float = 1.0, ttl=None) -> Problem:
    """Coop-KernelUCB setup 2: F(x, z_v) in the RKHS of RBF K_x * RBF K_z, agents on a graph (spec §5.4)."""
    return coop_world("rbf", num_agents, num_arms, dim, horizon, graph=graph, p=p, gamma=gamma,
                      delay_mode=delay_mode, noise_std=noise_std, graph_seed=graph_seed, data_dir=data_dir,
                      rho=rho, sigma_x=sigma_x, sigma_z=sigma_z, ttl=ttl)


def coop_world(setup: str, num_agents: int, num_arms: int, dim: int, horizon: int, *, graph, p, gamma, delay_mode,
               noise_std, graph_seed, data_dir, rho=0.3, sigma_x=1.0, sigma_z=1.0, ttl=None) -> Problem:
    """The problem of `setup` ("linear" or "rbf"); every check runs here, before anything compiles. `ttl`
    (default gamma) is the agents' message TTL alone: the graph arrays the methods see are those of TTL
    ttl, while the clusters of the rewards stay those of gamma, so the same world can be played with more
    or less communication (ttl = 0: no messages)."""
    name = f"coop-{setup}"
    spec = core.check_spec(EnvSpec(num_agents, num_arms, dim, horizon))
    if num_agents < 2:
        raise ConfigError(f"{name}: num_agents must be at least 2 (agents that cooperate on a graph), got {num_agents}")
    if not (isinstance(graph_seed, int) and graph_seed >= 0):
        raise ConfigError(f"{name}: graph_seed must be an integer >= 0, got {graph_seed!r}")
    for label, value in (("noise_std", noise_std), ("sigma_x", sigma_x), ("sigma_z", sigma_z), ("rho", rho)):
        if not (isinstance(value, (int, float)) and value >= 0 and not math.isnan(value)):
            raise ConfigError(f"{name}: {label} must be a number >= 0, got {value!r}")
    if not (sigma_x > 0 and sigma_z > 0):
        raise ConfigError(f"{name}: sigma_x and sigma_z must be > 0, got {sigma_x}, {sigma_z}")
    check_scales(name, noise_std, sigma_x, sigma_z, rho)
    if delay_mode not in graphs.DELAY_MODES:  # before the graph is read
        raise ConfigError(f"{name}: delay_mode must be one of {', '.join(graphs.DELAY_MODES)}, got {delay_mode!r}")
    G, source, kind, stands_in = network(graph, num_agents, p, graph_seed, data_dir)
    gamma = graphs.default_gamma(G) if gamma is None else gamma
    ttl = gamma if ttl is None else ttl
    arrays = graphs.graph_arrays(G, ttl, delay_mode)
    cluster = voronoi_clusters(arrays["dist"], gamma, graph_seed)
    clusters = int(cluster.max()) + 1
    init, contexts, mean_reward, sample_rewards = _world(setup, spec, cluster, rho, sigma_x, sigma_z, noise_std)
    stand_in = {"stand_in": source} if stands_in else {}
    info = {"setup": setup, "graph_source": source, "network_source": kind, **stand_in, "graph_seed": graph_seed,
            **graphs.graph_info(G, gamma, horizon), "ttl": int(ttl), "delay_mode": delay_mode, "clusters": clusters,
            "cluster_sizes": ",".join(str(n) for n in np.bincount(cluster)), "noise_std": float(noise_std)}
    problem = Problem(name=name, spec=spec, init=init, contexts=contexts, mean_reward=mean_reward,
                      sample_rewards=sample_rewards,
                      public=lambda instance: {k: jnp.asarray(v) for k, v in arrays.items()})
    if setup == "linear":
        info["upsilon_z"] = clusters
    else:
        info.update(rho=float(rho), sigma_x=float(sigma_x), sigma_z=float(sigma_z))  # Upsilon_z: world_numbers
    description = (f"{name}: {source}, V={num_agents}, gamma={gamma} ({delay_mode} delays), {clusters} clusters, "
                   f"K={num_arms} contexts in d={dim}, noise N(0, {noise_std:g}^2)")
    return problem._replace(description=description, info=info)


def check_scales(name: str, noise_std, sigma_x, sigma_z, rho) -> None:
    """Refuse (ConfigError naming the option) a noise level above MAX_NOISE_STD, an RBF bandwidth above
    MAX_BANDWIDTH or a finite rho above MAX_RHO (module constants: where they stop meaning anything)."""
    check_noise_std(name, noise_std)
    for label, value in (("sigma_x", sigma_x), ("sigma_z", sigma_z)):
        if value > MAX_BANDWIDTH:
            raise ConfigError(f"{name}: {label}={value!r} makes the RBF kernel 1 between any two unit vectors (and "
                              f"{label}^2 overflows at the largest values); give {label} <= {MAX_BANDWIDTH:g}")
    if MAX_RHO < rho < math.inf:
        raise ConfigError(f"{name}: rho={rho!r} leaves no trace of the cluster centres in the agents' z; give "
                          f"rho <= {MAX_RHO:g}, or rho=inf for agents i.i.d. on the sphere")


def network(graph, V: int, p: float, seed: int, data_dir=None):
    """(G labelled 0..V-1, its source in words, "synthetic" | "real" | "substitute" | "given", whether it
    stands in for another data set) of the graph option.
    A data_dir given is checked whatever the graph (a folder that does not exist is refused, never
    passed over)."""
    if data_dir:
        graphs.given_folder(data_dir, f"graph {graph!r}")
    if isinstance(graph, nx.Graph):
        if graph.number_of_nodes() == 0 or not nx.is_connected(graph):
            raise ConfigError("the graph given is disconnected; pass a connected graph (or one component of it)")
        if graph.number_of_nodes() < V:
            raise ConfigError(f"graph too small: {graph.number_of_nodes()} nodes, fewer than V = {V}")
        if graph.number_of_nodes() > V:
            source = f"a given graph, random-walk subsample of {V} nodes"
            return graphs.subsample(graph, V, seed), source, "given", False
        return nx.convert_node_labels_to_integers(graph, ordering="sorted"), "a given graph", "given", False
    if graph == "er":
        return graphs.erdos_renyi(V, p, seed), f"erdos-renyi({V}, {p:g})", "synthetic", False
    if graph in graphs.STANDINS:
        return graphs.standin(graph, V, seed), f"substitute: {graphs.STANDINS[graph]}", "substitute", True
    if graph in graphs.SNAP_GRAPHS:
        file = graphs.find_graph_file(graph, data_dir)
        _, what, replaced = graphs.SNAP_GRAPHS[graph]
        source = f"{what} ({file.name})" + (f", a real graph standing in for {replaced}" if replaced else "")
        source += f", random-walk subsample of {V} nodes"
        return graphs.subsample(graphs.load_edge_list(file), V, seed), source, "real", replaced is not None
    known = ["er", *graphs.SNAP_GRAPHS, *graphs.STANDINS]
    if not isinstance(graph, (str, Path)) or not Path(graph).expanduser().is_file():
        raise ConfigError(f"graph {graph!r} is neither a known name ({', '.join(known)}) nor an existing edge list "
                          "file; pass one of those names or the path of a SNAP edge list")
    source = f"edge list {Path(graph).name}, random-walk subsample of {V} nodes"
    return graphs.subsample(graphs.load_edge_list(graph), V, seed), source, "real", False


def voronoi_clusters(dist: np.ndarray, gamma: int, seed: int) -> np.ndarray:
    """[V] int32 cluster of each node: Voronoi cells of a random maximal independent set of G_gamma
    (module docstring); clusters numbered by increasing centre id."""
    rng = np.random.default_rng([seed, 1])
    adjacency = graphs.power_adjacency(dist, gamma)
    centre = np.zeros(len(dist), bool)
    for v in rng.permutation(len(dist)):
        if not (adjacency[v] & centre).any():
            centre[v] = True
    centres = np.flatnonzero(centre)
    nearest = dist[:, centres]
    cluster = np.empty(len(dist), np.int32)
    for v in range(len(dist)):
        ties = np.flatnonzero(nearest[v] == nearest[v].min())
        cluster[v] = ties[rng.integers(len(ties))] if len(ties) > 1 else ties[0]
    return cluster


# ----------------------------------------------------------------------------------- worlds
_WORLDS: "OrderedDict[tuple, tuple]" = OrderedDict()  # what fixes a world's draw -> its functions
_WORLDS_KEEP = 16


def _world(setup, spec: EnvSpec, cluster: np.ndarray, rho, sigma_x, sigma_z, noise_std) -> tuple:
    """(init, contexts, mean_reward, sample_rewards) of a world, one set of function objects per world in
    this process (the last _WORLDS_KEEP): the problems of one world at several message TTLs differ in
    their graph arrays alone (`public`), so they share these, and with them every compiled program that
    reads nothing else of the problem (`runner.STEP_READS`)."""
    key = (setup, tuple(spec), cluster.tobytes(), float(rho), float(sigma_x), float(sigma_z), float(noise_std))
    kept = _WORLDS.get(key)
    if kept is None:
        draw = _linear_world(spec, cluster) if setup == "linear" else _rbf_world(spec, cluster, rho, sigma_x, sigma_z)
        kept = (*draw, core.gaussian_rewards(noise_std))
    return keep_last(_WORLDS, key, kept, _WORLDS_KEEP)


def _linear_world(spec: EnvSpec, cluster: np.ndarray):
    V, K, d = spec.num_agents, spec.num_arms, spec.dim
    C = int(cluster.max()) + 1

    def init(key):
        k_theta, k_mu = jax.random.split(key)
        dtype = float_dtype()
        return {"theta": _unit(k_theta, (C, d), dtype), "mu": _unit(k_mu, (C, d), dtype),
                "cluster": jnp.asarray(cluster)}

    def contexts(instance, t, key):
        del t
        mu = instance["mu"][instance["cluster"]]
        xi = core.flat_normal(key, (V, K, d), mu.dtype)
        return _normalize(mu[:, None, :] + xi / math.sqrt(d))

    def mean_reward(instance, t, ctx):
        del t
        return jnp.einsum("vkd,vd->vk", ctx, instance["theta"][instance["cluster"]].astype(ctx.dtype))

    return init, contexts, mean_reward


def _rbf_world(spec: EnvSpec, cluster: np.ndarray, rho: float, sigma_x: float, sigma_z: float):
    V, K, d = spec.num_agents, spec.num_arms, spec.dim
    C = int(cluster.max()) + 1

    def init(key):
        k_mu, k_z, k_a, k_b, k_alpha = jax.random.split(key, 5)
        dtype = float_dtype()
        xi = core.flat_normal(k_z, (V, d), dtype)
        if math.isinf(rho):
            z = _normalize(xi)
        else:
            z = _normalize(_unit(k_mu, (C, d), dtype)[cluster] + rho * xi / math.sqrt(d))
        anchor_x = _unit(k_a, (ANCHORS, d), dtype)
        anchor_z = z[jax.random.randint(k_b, (ANCHORS,), 0, V)]
        alpha = jax.random.normal(k_alpha, (ANCHORS,), dtype)
        gram = rbf(anchor_x, anchor_x, sigma_x) * rbf(anchor_z, anchor_z, sigma_z)
        alpha = alpha / jnp.sqrt(alpha @ gram @ alpha)
        return {"z": z, "anchor_x": anchor_x, "anchor_z": anchor_z, "alpha": alpha, "cluster": jnp.asarray(cluster)}

    def contexts(instance, t, key):
        del t
        z = instance["z"]
        xi = core.flat_normal(key, (V, K, d), z.dtype)
        return _normalize(z[:, None, :] + xi / math.sqrt(d))

    def mean_reward(instance, t, ctx):
        del t
        kx = rbf(ctx, instance["anchor_x"].astype(ctx.dtype), sigma_x)  # [V, K, J]
        kz = rbf(instance["z"], instance["anchor_z"], sigma_z).astype(ctx.dtype)  # [V, J]
        return jnp.einsum("vkj,vj,j->vk", kx, kz, instance["alpha"].astype(ctx.dtype))

    return init, contexts, mean_reward


def rbf(a, b, sigma: float):
    """exp(-||a_i - b_j||^2 / (2 sigma^2)) for a [..., n, d] and b [m, d] -> [..., n, m]."""
    sq = jnp.sum(a * a, -1)[..., None] + jnp.sum(b * b, -1) - 2.0 * a @ b.T
    return jnp.exp(-jnp.maximum(sq, 0.0) / (2.0 * sigma ** 2))


# ----------------------------------------------------------------------------------- arrays
def coop_arrays(problem: Problem, seed: int, T: int = None, base_key: int = 0) -> dict:
    """One seed's arrays as the runner draws them (float64): X [T, V, K, d] contexts, fbar [T, V, K]
    noiseless means, Y [T, V, K] the noisy reward of every arm, the graph arrays of `public`, and
    "hidden": the instance (theta / mu or z / anchors / alpha, and the clusters). T: the horizon."""

    T = problem.spec.horizon if T is None else int(T)
    with jax.enable_x64(True):
        problem_key, _ = problem_and_algorithm_keys(seed_key(seed, base_key))
        X, fbar, Y, instance = jax.device_get(_drawer(problem, T)(problem_key))
        out = {"X": X, "fbar": fbar, "Y": Y, "hidden": instance}
        out.update(jax.device_get(problem.public(instance)))
    return out


_DRAWERS: dict = {}  # (id(problem.init), T) -> (problem.init, compiled draw): one compile per problem and T


def _drawer(problem: Problem, T: int):
    """The jitted draw(problem_key) -> (X, fbar, Y, instance) of `coop_arrays`, compiled once for all seeds."""

    cached = _DRAWERS.get((id(problem.init), T))
    if cached is not None and cached[0] is problem.init:
        return cached[1]

    def draw(problem_key):
        instance = problem.init(init_keys(problem_key, problem_key)[0])

        def step(t):
            k_ctx, k_rew, _ = problem_step_keys(problem_key, t)
            X = problem.contexts(instance, t, k_ctx)
            fbar = problem.mean_reward(instance, t, X)
            return X, fbar, problem.sample_rewards(instance, fbar, k_rew)

        return (*jax.vmap(step)(jnp.arange(T, dtype=jnp.int32)), instance)

    _DRAWERS[id(problem.init), T] = (problem.init, jax.jit(draw))
    return _DRAWERS[id(problem.init), T][1]


def world_numbers(problem: Problem, seed: int = 0) -> dict:
    """A trial's numbers (spec §5.3-5.4, §5.7): "gap", the mean over agents of best-arm-minus-mean at
    step 0, and "upsilon_z", the numerical rank of the true [V, V] K_z (tolerance 1e-6 of its largest
    eigenvalue): the cluster count for coop-linear, rank of RBF K_z(z_v, z_u) for coop-rbf. Compiles once,
    so the builders leave it out of `info`."""
    arrays = coop_arrays(problem, seed, 1)
    fbar, hidden = arrays["fbar"][0], arrays["hidden"]
    if "z" in hidden:
        with jax.enable_x64(True):
            K_z = np.asarray(rbf(jnp.asarray(hidden["z"]), jnp.asarray(hidden["z"]), problem.info["sigma_z"]))
    else:
        K_z = (hidden["cluster"][:, None] == hidden["cluster"][None, :]).astype(np.float64)
    eig = np.linalg.eigvalsh(K_z)
    return {"gap": float(np.mean(fbar.max(1) - fbar.mean(1))), "upsilon_z": int((eig > 1e-6 * eig.max()).sum())}


# ----------------------------------------------------------------------------------- helpers
def _unit(key, shape, dtype):
    return _normalize(core.flat_normal(key, shape, dtype))


def _normalize(x):
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)
