"""Helpers shared by several test files."""
from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.core import EnvSpec, Sizes, Step
from bandits_jax.keys import algorithm_step_keys
from bandits_jax.runner import COMM_KEYS, replay
from bandits_jax.problems.datasets import DATA_DIR_ENV

# The offline copies of the real data sets live next to the repository; a user's clone has none.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL_DIR = Path(os.environ.get(DATA_DIR_ENV) or SHARED_DATA)


@contextlib.contextmanager
def data_dir_default():
    """${DATA_DIR_ENV} set to the shared data folder while inside, unless the user has set it."""
    if os.environ.get(DATA_DIR_ENV) or not SHARED_DATA.is_dir():
        yield
        return
    os.environ[DATA_DIR_ENV] = str(SHARED_DATA)
    try:
        yield
    finally:
        del os.environ[DATA_DIR_ENV]


def run_cli(capsys, argv) -> tuple:
    """(exit status, stderr lines) of `bandits-jax ARGV` run in this process."""
    from bandits_jax import cli

    try:
        status = cli.main([str(a) for a in argv])
    except SystemExit as stop:  # argparse's own refusals
        status = stop.code
    return status, capsys.readouterr().err.strip().splitlines()


# Every skip for want of the shared data says this; under CI=true such a skip is a failure (conftest.py)
NO_SHARED_DATA = "not found in the shared data folder"


def needs_data(*names: str):
    """Skip a test when any of the data files `names` is not in the shared data folder."""
    missing = [name for name in names if not (REAL_DIR / name).is_file()]
    return pytest.mark.skipif(bool(missing), reason=no_data_reason(", ".join(missing)))


def skip_without_data(what: str):
    """Skip the running test: `what` is missing from the shared data folder."""
    pytest.skip(no_data_reason(what))


def no_data_reason(what: str) -> str:
    return f"{what} {NO_SHARED_DATA} (../shared/data next to the repository) or in ${DATA_DIR_ENV}"


def data_skip_failure(report, env) -> str:
    """The failure message of a test report that skipped for want of the shared data where `env` has
    CI=true (CI always has the data, so such a skip hides a broken path); '' for any other report."""
    if env.get("CI") != "true" or not report.skipped:
        return ""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return f"CI=true but the shared data are missing: {reason}" if NO_SHARED_DATA in reason else ""


def async_arrays(N, K, d, T, seed):
    """contexts [T, N, K, d], noisy rewards [T, N, K], arrivals [T] and active masks [T, N] for tests."""
    rng = np.random.default_rng(seed)
    contexts = rng.normal(size=(T, N, K, d)) / np.sqrt(d)
    theta = rng.normal(size=d)
    rewards = np.cos(3 * contexts @ theta) + 0.1 * rng.normal(size=(T, N, K))
    arrivals = rng.integers(0, N, size=T)
    active = np.arange(N)[None, :] == arrivals[:, None]
    return contexts, rewards, arrivals, active


def default_params(algo, **given):
    """{name: float64 scalar} of an algorithm's hyper-parameters (defaults, then `given`); call
    inside jax.enable_x64."""
    return {k: jnp.asarray(given.get(k, v), jnp.float64) for k, v in algo.defaults.items()}


def drive_with_and_without_resize(algo, spec, contexts, rewards, active, split: int, demand_rows=None):
    """Run an algorithm step by step on given arrays twice: with rows for T from the start, and with
    rows for `split` resized to T at step `split` (demand-sized buffers to `demand_rows` when given).
    Float64 params; call inside jax.enable_x64.
    Returns (state_full, actions_full [T, N], state_resized, actions_resized [T, N])."""
    T, N = contexts.shape[0], contexts.shape[1]
    params = default_params(algo)
    key = jax.random.PRNGKey(0)
    sizing = algo.sizing

    def sizes(t_end, demand):
        rows = sizing.rows(spec, t_end)
        return Sizes(rows, None if sizing.demand is None else min(rows if demand is None else demand,
                                                                  sizing.demand_limit))

    select = jax.jit(algo.select)
    update = jax.jit(algo.update)

    def steps(state, t0, t1):
        acts = []
        for t in range(t0, t1):
            step = Step(jnp.int32(t), jnp.asarray(contexts[t]), jnp.asarray(active[t]), spec.one_active)
            a, aux = select(params, state, step, jax.random.fold_in(key, t))
            r = jnp.asarray(rewards[t])[jnp.arange(N), a]
            state, _ = update(params, state, step, a, r, aux, key)
            acts.append(np.asarray(a))
        return state, acts

    full, acts_full = steps(algo.init(key, spec, params, sizes(T, None), None), 0, T)
    small, acts_small = steps(algo.init(key, spec, params, sizes(split, None), None), 0, split)
    small = sizing.resize(params, small, sizes(T, demand_rows))
    small, acts_rest = steps(small, split, T)
    return full, np.array(acts_full), small, np.array(acts_small + acts_rest)



@functools.lru_cache(maxsize=None)
def tie_and_rls_draws(seed: int, N: int, K: int, T: int, B: int):
    """The tie noise [T, N, K] and RLS uniforms [T, B] (float64) the Nystrom methods draw at step t
    with algorithm key PRNGKey(seed): uniform(select key, (N, K)) and uniform(update key, (B,)) of
    `runner.algorithm_step_keys`, for NumPy references fed the same random numbers."""
    key = jax.random.PRNGKey(seed)

    @jax.jit
    def draws():
        def one(t):
            k_sel, k_upd = algorithm_step_keys(key, t)
            return jax.random.uniform(k_sel, (N, K), jnp.float64), jax.random.uniform(k_upd, (B,), jnp.float64)

        return jax.vmap(one)(jnp.arange(T, dtype=jnp.int32))

    return jax.device_get(draws())

def agent_slice(tree, i):
    """Agent i's part of a pytree with a leading agent axis, as NumPy arrays."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a[i]), tree)


def per_agent_normal_draws(step_keys, steps: int, num_agents: int, size: int):
    """[steps, N, size] standard normals as `independent` hands them out: agent i of step t draws
    normal(split(select_key_t, N)[i], (size,), float64), select_key_t = step_keys(t)[0]."""
    out = np.zeros((steps, num_agents, size))
    for t in range(steps):
        keys = jax.random.split(step_keys(t)[0], num_agents)
        for i in range(num_agents):
            out[t, i] = np.asarray(jax.random.normal(keys[i], (size,), jnp.float64))
    return out


def replay_outputs(algo, spec, params, contexts, rewards, active, key, sizes=None):
    """`runner.replay` with the chosen rewards and the communication pulled out.

    contexts[T, N, K, d], rewards[T, N, K] (every arm), active[T, N]. Returns (final state,
    (actions[T, N], chosen rewards[T, N], regret[T, N] = max_k rewards - chosen on active clients
    (0 elsewhere), {comm_up, comm_down, rounds: [T]}, errors[T])).
    """
    state, actions, _, regret, reps = replay(algo, spec, params, contexts, rewards, active, key, sizes)
    r = jnp.take_along_axis(jnp.asarray(rewards), actions[..., None], axis=-1)[..., 0]
    comm = {k: jnp.asarray(getattr(reps, k), r.dtype) for k in COMM_KEYS}
    return state, (actions, r, regret, comm, reps.errors)


def assert_one_active_matches(algo, hp=None, N=4, K=5, d=3, T=40, seed=0):
    """Under a one-active protocol (spec.one_active) the algorithm gives the active clients' actions,
    rewards, regret and communication of the all-client path, bit for bit: on given arrays (float64,
    one arrival per step), and through the runner on a small async-f1 problem with two capacity
    segments. Two active clients at a step set ERR_MULTI_ACTIVE at that step only.
    Returns the communication of the array run (for informativeness checks)."""
    from bandits_jax import runner
    from bandits_jax.algorithms.base import ERR_MULTI_ACTIVE
    from bandits_jax.problems import make_problem

    hp_raw = {k: float(v) for k, v in (hp or {}).items()}
    spec_all, spec_one = EnvSpec(N, K, d, T), EnvSpec(N, K, d, T, one_active=True)
    key = jax.random.PRNGKey(3)
    with jax.enable_x64(True):
        params = default_params(algo, **hp_raw)
        contexts, rewards, arrivals, active = (jnp.asarray(a) for a in async_arrays(N, K, d, T, seed))

        def compiled(spec):  # one compilation per protocol (the two-active run reuses one's)
            f = jax.jit(lambda p, c, r, a: replay_outputs(algo, spec, p, c, r, a, key))
            return lambda act: jax.device_get(f(params, contexts, rewards, act))

        run_all, run_one = compiled(spec_all), compiled(spec_one)
        _, (a0, r0, g0, c0, e0) = run_all(active)
        _, (a1, r1, g1, c1, e1) = run_one(active)
        rows = np.arange(T), np.asarray(arrivals)
        np.testing.assert_array_equal(a1[rows], a0[rows])
        np.testing.assert_array_equal(r1[rows], r0[rows])
        np.testing.assert_array_equal(g1, g0)
        for name in c0:
            np.testing.assert_array_equal(c1[name], c0[name], err_msg=name)
        assert not e0.any() and not e1.any()
        # the inactive clients' actions are 0 under one_active
        assert np.all(np.where(np.asarray(active), 0, a1) == 0)
        # informative: the active clients do not always pick the same arm
        assert len(np.unique(a0[rows])) > 1
        # two clients active at a step: loud, not silent
        two = np.asarray(active).copy()
        two[T // 2, :2] = True
        _, (_, _, _, _, e2) = run_one(jnp.asarray(two))
        assert e2[T // 2] & ERR_MULTI_ACTIVE and not e2[: T // 2].any()

    problem = make_problem("async-f1", num_agents=N, num_arms=K, dim=d, horizon=T, noise_std=0.1)
    assert problem.spec.one_active
    problem_all = problem._replace(spec=problem.spec._replace(one_active=False))
    outs = [runner.run_batch(p, algo, [0, 1], {k: np.full(2, v) for k, v in hp_raw.items()},
                             precision="float64", first_segment=T // 2)
            for p in (problem_all, problem)]
    for name in ("regret", "comm_up", "comm_down", "rounds"):
        np.testing.assert_array_equal(getattr(outs[1], name), getattr(outs[0], name), err_msg=name)
    assert outs[0].regret.sum() > 0
    return c0


def graph_public(edges, gamma: int, mode: str, V: int) -> dict:
    """The graph arrays of the graph on agents 0..V-1 with `edges`, at TTL gamma and delay mode `mode`."""
    import networkx as nx

    from bandits_jax.problems.graphs import graph_arrays

    G = nx.Graph()
    G.add_nodes_from(range(V))
    G.add_edges_from(edges)
    return graph_arrays(G, gamma, mode)


def clustered_linear_world(seed: int, T: int, V: int, K: int, D: int, key):
    """A cooperative test world: task-dependent contexts X [T, V, K, D] of two clusters, linear means fbar
    [T, V, K], noisy rewards Y (noise 0.1) and the tie numbers U that `select` draws from `key`."""
    from bandits_jax.algorithms.coop import coop_kernel

    rng = np.random.default_rng(seed)
    cl = rng.integers(0, 2, V)
    theta = rng.normal(size=(2, D))
    theta /= np.linalg.norm(theta, axis=1, keepdims=True)
    X = rng.normal(size=(2, D))[cl][None, :, None, :] + rng.normal(size=(T, V, K, D)) / np.sqrt(D)
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    fbar = np.einsum("tvkd,vd->tvk", X, theta[cl])
    Y = fbar + 0.1 * rng.normal(size=fbar.shape)
    return X, Y, fbar, coop_kernel.tie_uniforms(key, V, K, T)


def arena_record() -> Path:
    """The committed arena record: docs/arena/data/arena-small, else arena-smoke (the one docs/arena.md is
    written from)."""
    data = Path(__file__).resolve().parents[1] / "docs" / "arena" / "data"
    return next((data / f"arena-{size}" for size in ("small", "smoke") if (data / f"arena-{size}").is_dir()),
                data / "arena-small")
