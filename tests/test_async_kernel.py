"""Async-KernelUCB against plain NumPy loops, its exact limit, hand-counted communication, errors."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.distributed.async_kernel import ERR_BUFFER, ERR_DICT, async_kernel_ucb
from bandits_jax.algorithms.base import ERR_MULTI_ACTIVE
from bandits_jax.core import ConfigError, EnvSpec
from bandits_jax.runner import describe_errors, replay
from reference.async_kernel_np import async_kernel_ucb_np, exact_kernel_ucb_np, sym_root_pinv
from reference.kernel_np import kernel_matrix
from bandits_jax.algorithms import make_algorithm
from helpers import async_arrays, drive_with_and_without_resize, tie_and_rls_draws

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

_env = async_arrays
SEED = 7
KEY = jax.random.PRNGKey(SEED)


@functools.lru_cache(maxsize=None)
def _runner(N, K, d, T, dict_capacity, buffer_capacity):
    algo = async_kernel_ucb(dict_capacity=dict_capacity, buffer_capacity=buffer_capacity)
    spec = EnvSpec(N, K, d, T)  # the all-client protocol: the algorithm still scores the active client only

    @jax.jit
    def run(params, contexts, rewards, active):
        state, actions, aux, _, reps = replay(algo, spec, params, contexts, rewards, active, KEY)
        return state, actions, aux, reps

    return algo, run


def _run(contexts, rewards, active, dict_capacity=None, buffer_capacity=None, **hp):
    """(state, actions [T, N], aux {client, mean, var}, reports, tie_noise [T, N, K], rls_uniform [T, B])."""
    T, N, K, d = contexts.shape
    algo, run = _runner(N, K, d, T, dict_capacity or T, buffer_capacity or T)
    params = {k: jnp.asarray(v, jnp.float64) for k, v in
              dict(dict(lam=1.0, alpha=1.0, q=1.0, threshold=1e-4, lengthscale=1.0), **hp).items()}
    state, actions, aux, reps = jax.device_get(run(params, jnp.asarray(contexts), jnp.asarray(rewards),
                                                   jnp.asarray(active)))
    noise, u = tie_and_rls_draws(SEED, N, K, T, state.buf_y.shape[1])
    return state, actions, aux, reps, noise, u


def _bits(algo_errors):
    return int(np.bitwise_or.reduce(np.asarray(algo_errors, np.int64)))


@pytest.mark.parametrize("threshold", [0.3, 1.5])
def test_matches_numpy_reference(threshold):
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 40, seed=1)
        hp = dict(lam=1.0, alpha=1.0, q=1.0, threshold=threshold, lengthscale=0.7)
        state, actions, aux, reps, noise, u = _run(contexts, rewards, active, **hp)
        ref = async_kernel_ucb_np(arrivals, contexts, rewards, noise, u, **hp)
        diag = reps.diagnostics
        T = len(arrivals)
        who = arrivals
        np.testing.assert_array_equal(actions[np.arange(T), who], ref["actions"])
        np.testing.assert_array_equal(aux["client"], who)
        np.testing.assert_allclose(aux["mean"], ref["mean"], atol=1e-9)
        np.testing.assert_allclose(aux["var"], ref["var"], atol=1e-9)
        for key, ref_key in (("comm_up", "up"), ("comm_down", "down"), ("rounds", "rounds")):
            np.testing.assert_array_equal(getattr(reps, key), ref[ref_key], err_msg=key)
        for key in ("dict_size", "trigger"):
            np.testing.assert_array_equal(diag[key], ref[key], err_msg=key)
        np.testing.assert_allclose(diag["acc"], ref["acc"], atol=1e-9)
        # the run is informative: some events, some quiet steps, a dictionary smaller than the data
        assert 0 < ref["rounds"].sum() < T and 0 < ref["dict_size"][-1] < T
        # per-client server statistics (NumPy) == the aggregate form (NumPy) == JAX
        # JAX embeds with the Cholesky factor, NumPy with the symmetric root: z_chol = Q z_sym with
        # Q = L^{-1} K^{1/2} orthogonal, so A_chol = Q A_sym Q^T and b_chol = Q b_sym
        m = int(state.dict_n)
        np.testing.assert_allclose(ref["A_agg"], ref["A_fast"], atol=1e-9)
        np.testing.assert_array_equal(state.dict_X[:m], ref["dictionary"])
        S = ref["dictionary"]
        Kss = kernel_matrix("rbf", S, S, hp["lengthscale"])
        L = np.linalg.cholesky(Kss)
        Q = np.linalg.solve(L, Kss @ sym_root_pinv(Kss))
        np.testing.assert_allclose(Q @ Q.T, np.eye(m), atol=1e-9)
        np.testing.assert_allclose(state.Linv[:m, :m] @ L, np.eye(m), atol=1e-9)
        np.testing.assert_allclose(state.A[:m, :m], Q @ ref["A_agg"] @ Q.T, atol=1e-8)
        np.testing.assert_allclose(state.b[:m], Q @ ref["b_agg"], atol=1e-8)
        assert np.all(state.A[m:] == 0) and np.all(state.Linv[m:] == 0)
        np.testing.assert_allclose(state.P, np.linalg.inv(state.A + hp["lam"] * np.eye(state.A.shape[0])),
                                   atol=1e-10)
        # trigger invariant: after a quiet step acc <= D; an event resets it to 0
        quiet = diag["trigger"] == 0
        assert np.all(diag["acc"][quiet] <= threshold) and np.all(diag["acc"][~quiet] == 0)


def test_one_client_tiny_threshold_full_sampling_is_exact_kernel_ucb():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(1, 4, 2, 30, seed=2)
        hp = dict(lam=0.5, alpha=0.8, q=1e8, threshold=0.0, lengthscale=0.8)
        state, actions, aux, reps, noise, _ = _run(contexts, rewards, active, **hp)
        ref = exact_kernel_ucb_np(arrivals, contexts, rewards, noise, lam=0.5, alpha=0.8, lengthscale=0.8)
        np.testing.assert_array_equal(actions[:, 0], ref["actions"])
        np.testing.assert_allclose(aux["mean"], ref["mean"], atol=1e-10)
        np.testing.assert_allclose(aux["var"], ref["var"], atol=1e-10)
        np.testing.assert_array_equal(reps.rounds, 1)
        np.testing.assert_array_equal(reps.diagnostics["dict_size"], np.arange(1, 31))


def test_communication_hand_trace():
    with jax.enable_x64(True):
        a, b = np.array([0.3, -0.2]), np.array([-0.5, 0.4])
        contexts = np.stack([a, b, a])[:, None, None, :].repeat(2, axis=1)  # [3, N=2, K=1, d=2]
        rewards = np.ones((3, 2, 1))
        active = np.array([[1, 0], [0, 1], [1, 0]], bool)
        _, _, _, reps, _, _ = _run(contexts, rewards, active, q=1e8, threshold=0.0)
        # step 0: |S| 0 -> 1; step 1: 1 -> 2; step 2: duplicate of a, |S| stays 2
        # up = d |dS| + |S_k|^2 + |S_k|; down = d |S_{k-1}| + |S_{k-1}|^2 + |S_{k-1}| + |S_k|^2 + |S_k|
        np.testing.assert_array_equal(reps.comm_up, [2 + 1 + 1, 2 + 4 + 2, 0 + 4 + 2])
        np.testing.assert_array_equal(reps.comm_down, [0 + 1 + 1, 2 + 1 + 1 + 4 + 2, 4 + 4 + 2 + 4 + 2])
        np.testing.assert_array_equal(reps.diagnostics["dict_size"], [1, 2, 2])
        # a threshold never reached: no message at all
        _, _, _, quiet, _, _ = _run(contexts, rewards, active, threshold=1e9)
        np.testing.assert_array_equal(quiet.comm_up, 0)
        np.testing.assert_array_equal(quiet.rounds, 0)


def test_capacity_overflow_raises_a_clear_error():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(2, 3, 2, 12, seed=3)
        algo = async_kernel_ucb(dict_capacity=4)
        _, _, _, reps, _, _ = _run(contexts, rewards, active, dict_capacity=4, q=1e8, threshold=0.0)
        bits = _bits(reps.errors)
        assert bits & ERR_DICT and "raise dict_capacity" in describe_errors(algo, bits)
        assert "dict_capacity" in describe_errors(algo, int(reps.errors[-1]))
        assert reps.errors[-1] & ERR_DICT and reps.errors[0] == 0
        _, _, _, reps, _, _ = _run(contexts, rewards, active, buffer_capacity=3, threshold=1e9)
        bits = _bits(reps.errors)
        assert bits & ERR_BUFFER and "raise buffer_capacity" in describe_errors(algo, bits)
        # more than one active client at a step (the all-client protocol): loud, at that step only
        two = np.asarray(active).copy()
        two[5, :] = True
        _, _, _, reps, _, _ = _run(contexts, rewards, two, q=1e8, threshold=0.0)
        assert reps.errors[5] & ERR_MULTI_ACTIVE and "more than one client" in describe_errors(algo, _bits(reps.errors))
        assert not np.delete(reps.errors, 5).any()
        # within capacity: no error
        _, _, _, reps, _, _ = _run(contexts, rewards, active, q=1e8, threshold=0.0)
        assert not reps.errors.any()


def test_long_run_keeps_p_equal_to_a_fresh_inverse():
    """300 steps, 5 clients, many events, some with several buffered points: the Sherman-Morrison P stays
    (A + lam I)^{-1}, each snapshot is the server's P at its last event, Linv inverts the Gram."""
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(5, 4, 3, 300, seed=8)
        hp = dict(lam=0.5, alpha=1.0, q=1.0, threshold=0.5, lengthscale=0.6)
        state, actions, aux, reps, _, _ = _run(contexts, rewards, active, dict_capacity=300, buffer_capacity=300,
                                               **hp)
        assert not reps.errors.any()
        m, M = int(state.dict_n), state.A.shape[0]
        assert reps.rounds.sum() > 50 and 30 < m < 300
        assert reps.rounds.sum() < 300  # some buffers hold several points at an event
        np.testing.assert_allclose(state.P, np.linalg.inv(state.A + 0.5 * np.eye(M)), atol=1e-8)
        S = state.dict_X[:m]
        L = np.linalg.cholesky(kernel_matrix("rbf", S, S, 0.6))
        np.testing.assert_allclose(state.Linv[:m, :m] @ L, np.eye(m), atol=1e-8)
        last = int(arrivals[np.nonzero(reps.diagnostics["trigger"])[0][-1]])
        np.testing.assert_allclose(state.snap_Pinv[last], state.P, atol=0)
        np.testing.assert_allclose(state.snap_coef[last], state.P @ state.b, atol=1e-12)


@pytest.mark.parametrize("dict_rows", [None, 18])
def test_resize_changes_nothing(dict_rows):
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 20, seed=4)
        algo = async_kernel_ucb(threshold=0.3, lengthscale=0.7, dict_capacity=20, buffer_capacity=20)
        big, acts_big, small, acts_small = drive_with_and_without_resize(
            algo, EnvSpec(3, 4, 2, 20), contexts, rewards, active, split=8, demand_rows=dict_rows)
        np.testing.assert_array_equal(acts_big, acts_small)
        assert int(big.dict_n) == int(small.dict_n) > 8 and int(big.num_comms) > 0
        # no overflow (the state keeps no error bits any more): the dictionary never filled its rows
        assert int(small.dict_n) < small.A.shape[0] and int(algo.sizing.demand(small)) == int(small.dict_n)
        if dict_rows is not None:  # demand-sized: the dictionary and the buffers have dict_rows rows
            assert small.A.shape == (18, 18) and small.buf_X.shape == (3, 18, 2)
        for name in ("Linv", "A", "b", "P", "snap_Pinv", "snap_coef", "dict_X", "buf_X", "acc"):
            lead = tuple(slice(0, n) for n in getattr(small, name).shape)  # demand-sized: the leading block
            np.testing.assert_allclose(getattr(big, name)[lead], getattr(small, name), atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(big.snap_n, small.snap_n)


def test_factory_refuses_bad_options():
    with pytest.raises(ConfigError, match="dict_capacity"):
        async_kernel_ucb(dict_capacity=0)
    with pytest.raises(ConfigError, match="unknown option.*batching"):
        make_algorithm("async_kernel_ucb", batching="vmap")  # removed: the event is never a branch


@pytest.mark.slow  # about 25 s of compilation (three segment programs) on a shared 2-core CPU
def test_runner_segments_do_not_change_results():
    import os
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    from bandits_jax.runner import run_batch
    from toy import toy_problem

    problem = toy_problem(num_agents=3, num_arms=4, dim=3, horizon=16, with_arrivals=True)
    algo = async_kernel_ucb(threshold=0.5, dict_capacity=32, buffer_capacity=32)
    grown = run_batch(problem, algo, [0], first_segment=8)
    whole = run_batch(problem, algo, [0], first_segment=16)
    assert not grown.errors.any()
    assert grown.rounds.sum() > 0
    np.testing.assert_allclose(grown.regret, whole.regret, atol=1e-12)
    np.testing.assert_array_equal(grown.comm_up, whole.comm_up)
    np.testing.assert_array_equal(grown.comm_down, whole.comm_down)
