"""The adapters that let an algorithm play on a problem of another family: `serial_arrivals` (a one-arrival
algorithm where several agents act at a step) and `complete_graph` (the cooperative methods' graph arrays
for any problem, its arrivals kept).

serial_arrivals is the inner algorithm unchanged on a problem with one arrival a step, and on any other
step the inner selections from the step's start state followed by the inner updates in agent order,
written out here by hand. complete_graph's arrays are those of a complete graph written by hand (and
networkx's), its Coop-KernelUCB admits every agent's data with no delay beyond one round, and pooled
LinUCB on it gives every agent the same model (so the same arm on a shared candidate set).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from bandits_jax.algorithms import build_algorithm, wrap_algorithm
from bandits_jax.algorithms.base import STATE_CACHE
from bandits_jax.algorithms.coop.coop_kernel import sources_at
from bandits_jax.core import ConfigError, EnvSpec, Step
from bandits_jax.curves import Curve, parse_spec, resolve
from bandits_jax.problems import graphs
from bandits_jax.keys import algorithm_step_keys, init_keys
from bandits_jax.runner import describe_errors, horizon_sizes, replay, run_batch

from helpers import default_params

N, K, D, T = 3, 4, 3, 3


def fits(problem: str, algorithm: str):
    """None where the pair passes the traced misfit check, else its one-line refusal."""
    try:
        resolve([Curve(algorithm, parse_spec(problem), parse_spec(algorithm))])
    except ConfigError as err:
        return str(err)
    return None


def batch(problem: str, algorithm: str, seeds=(0,)):
    (run,) = resolve([Curve(algorithm, parse_spec(problem), parse_spec(algorithm))], trace=False)
    return run, run_batch(run.problem, run.algorithm, list(seeds), stop_on_error=False)


# ------------------------------------------------------------------------------ serial_arrivals
def test_serial_arrivals_makes_one_arrival_algorithms_fit_where_every_agent_acts():
    assert "exactly one active agent" in fits("cosine:num_agents=2,horizon=4", "dis_kernel_ucb")
    assert "serial_arrivals" in fits("cosine:num_agents=2,horizon=4", "dis_kernel_ucb")
    for name in ("async_kernel_ucb", "dis_kernel_ucb", "one_kernel_ucb", "fed_lin_ucb", "fed_glb_ucb",
                 "approx_dis_kernel_ucb"):
        assert fits("cosine:num_agents=2,horizon=4", f"{name}+serial_arrivals") is None, name
    with pytest.raises(ConfigError, match="does not declare one arrival a step"):
        build_algorithm(parse_spec("kernel_ucb+serial_arrivals"))


def test_serial_arrivals_is_the_algorithm_itself_on_one_arrival_a_step():
    problem = "async-f1:num_agents=3,horizon=6,num_arms=4,dim=3"
    _, inner = batch(problem, "fed_lin_ucb:alpha_c=0.01", (0, 1))
    _, wrapped = batch(problem, "fed_lin_ucb:alpha_c=0.01+serial_arrivals", (0, 1))
    assert inner.rounds.sum() > 0
    for field in ("regret", "comm_up", "comm_down", "rounds", "errors"):
        np.testing.assert_array_equal(getattr(wrapped, field), getattr(inner, field), err_msg=field)


def by_hand(inner, params, state, step: Step, rewards, key):
    """One step of `inner` as serial_arrivals plays it, written out: every agent selects from the start
    state as the only arrival (keys split(select key, N)), then the active agents update in agent order
    (keys split(update key, N)), each update without select's caches of the start state (`STATE_CACHE`).
    Returns (state, actions[N], comm_up summed)."""
    k_sel, k_upd = algorithm_step_keys(key, step.t)
    alone = [dataclasses.replace(step, active=jnp.arange(N) == i, one_active=True) for i in range(N)]
    chosen = [inner.select(params, state, alone[i], k) for i, k in enumerate(jax.random.split(k_sel, N))]
    actions = jnp.stack([a[i] for i, (a, _) in enumerate(chosen)])
    got = rewards[jnp.arange(N), actions]
    up = jnp.zeros(())
    for i, k in enumerate(jax.random.split(k_upd, N)):
        aux = {name: value for name, value in chosen[i][1].items() if name not in STATE_CACHE}
        new, rep = inner.update(params, state, alone[i], actions, got, aux, k)
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(step.active[i], a, b), new, state)
        up = up + jnp.where(step.active[i], rep.comm_up, 0.0)
    return state, actions, up


def test_serial_arrivals_serves_the_arrivals_of_a_step_in_agent_order():
    """Where several agents act (all of them, then agents 0 and 2), the wrapper's actions, state and
    communication are the hand-written sequence of one-arrival selections and updates (Async-KernelUCB,
    whose low threshold makes it communicate and draw with its update keys)."""
    rng = np.random.default_rng(0)
    contexts = rng.normal(size=(T, N, K, D)) / np.sqrt(D)
    rewards = rng.normal(size=(T, N, K))
    active = np.ones((T, N), bool)
    active[1, 1] = False
    spec = EnvSpec(N, K, D, T)
    with jax.enable_x64(True):
        inner = build_algorithm(parse_spec("async_kernel_ucb:threshold=0.01"))
        wrapped = wrap_algorithm(inner, "serial_arrivals")
        params, key = default_params(inner), jax.random.PRNGKey(3)
        state, actions, _, _, reps = replay(wrapped, spec, params, jnp.asarray(contexts), jnp.asarray(rewards),
                                            jnp.asarray(active), key)
        hand = inner.init(init_keys(key, key)[1], spec._replace(horizon=N * T, one_active=True), params,
                          horizon_sizes(wrapped, spec))
        step = jax.jit(lambda s, t, c, a, r: by_hand(inner, params, s, Step(t, c, a), r, key))
        ups = []
        for t in range(T):
            hand, acts, up = step(hand, jnp.int32(t), jnp.asarray(contexts[t]), jnp.asarray(active[t]),
                                  jnp.asarray(rewards[t]))
            np.testing.assert_array_equal(np.asarray(actions[t]), np.asarray(acts), err_msg=f"actions at step {t}")
            ups.append(float(up))
        np.testing.assert_allclose(np.asarray(reps.comm_up), ups, rtol=1e-12)
        assert sum(ups) > 0, "the check should cover a communication"
        for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(hand)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_serial_arrivals_does_not_reuse_what_select_cached_of_the_start_state():
    """OneKernelUCB's panels reuse select's column L^{-1} k(X, x) in the update; served serially, agent i's
    update meets a state that agents before it have grown, so the column must be recomputed. Its runs
    equal those of the dense storage (which never reuses it) and of DisKernelUCB at threshold 0 (the same
    protocol); with the start state's column they drifted away (cumulative regret 36.9 against 32.2 on
    seed 0 here) and went NaN on longer runs."""
    problem = "cosine:num_agents=4,horizon=40"
    with jax.enable_x64(True):
        runs = {name: batch(problem, f"{name}+serial_arrivals", (0, 1))[1]
                for name in ("one_kernel_ucb", "one_kernel_ucb:storage=dense", "dis_kernel_ucb:threshold=0")}
    panels = runs.pop("one_kernel_ucb")
    assert not np.any(panels.errors)
    for name, other in runs.items():
        for field in ("regret", "comm_up", "comm_down"):
            np.testing.assert_allclose(getattr(panels, field), getattr(other, field), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{field} against {name}")


# ------------------------------------------------------------------------------ complete_graph
def test_complete_arrays_of_three_agents_by_hand():
    got = graphs.complete_arrays(3)
    ones = np.ones((3, 3), bool)
    want = {"dist": 1 - np.eye(3, dtype=int), "delay": np.ones((3, 3), int), "within": ones, "clique": ones,
            "clique_id": np.zeros(3, int), "central": np.array([True, False, False]), "cent": np.zeros(3, int),
            "cent_delay": np.array([0, 1, 1])}
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    np.testing.assert_array_equal(graphs.complete_arrays(3, "hop_plus_one")["delay"], 2 - np.eye(3, dtype=int))
    for mode in graphs.DELAY_MODES:  # networkx's complete graph through graph_arrays: the same arrays
        nx_arrays = graphs.graph_arrays(nx.complete_graph(5), 1, mode)
        for key, value in graphs.complete_arrays(5, mode).items():
            np.testing.assert_array_equal(value, nx_arrays[key], err_msg=f"{key} ({mode})")


def test_complete_graph_keeps_arrivals_and_refuses_a_graph():
    """A problem with one arrival a step keeps it (the cooperative methods honour `Step.active`, and the
    misfit check takes them there); one with a graph of its own is refused."""
    (run,) = resolve([Curve("c", parse_spec("async-f1:num_agents=3,horizon=4+complete_graph"),
                            parse_spec("coop_kernel_ucb"))])
    assert run.problem.spec.one_active and run.problem.active is not None
    with pytest.raises(ConfigError, match="graph of its own"):
        resolve([Curve("c", parse_spec("coop-linear:num_agents=3,horizon=4+complete_graph"), parse_spec("oful"))])


def test_coop_kernel_ucb_pools_every_agent_on_a_complete_graph():
    """Every agent admits every source (one clique), with delay 1: from round 1 on it uses all data of the
    rounds before, as it uses its own; the run carries no error bits."""
    run, out = batch("cosine:num_agents=3,horizon=4+complete_graph", "coop_kernel_ucb")
    bits = int(np.bitwise_or.reduce(out.errors))
    assert bits == 0, describe_errors(run.algorithm, bits)
    with jax.enable_x64(True):
        public = run.problem.public(run.problem.init(jax.random.PRNGKey(0)))
        state = run.algorithm.init(jax.random.PRNGKey(0), run.problem.spec, default_params(run.algorithm),
                                   horizon_sizes(run.algorithm, run.problem.spec), public)
        mask, lags = sources_at(state.net, jnp.int32(1))
    assert np.all(np.asarray(state.net.admit)) and np.all(np.asarray(mask)) and np.all(np.asarray(lags) == 1)
    assert float(out.comm_up.sum()) > 0


def test_pooled_linucb_on_a_complete_graph_gives_every_agent_the_same_arm():
    """Naive-LinUCB (W = 1) on a shared candidate set: every agent has the pooled data from round 1, so the
    same posterior, the same arm and the same regret."""
    run, out = batch("duets-h1:num_agents=3,horizon=5,num_candidates=20+candidates_as_contexts+complete_graph",
                     "naive_linucb")
    assert int(np.bitwise_or.reduce(out.errors)) == 0
    regret = out.regret[0, 1:]
    np.testing.assert_array_equal(regret, np.repeat(regret[:, :1], 3, axis=1))
