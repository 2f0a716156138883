"""Approx-DisKernelUCB against a plain NumPy loop, and its communication on a hand trace."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.distributed import approx_dis_kernel as adk
from bandits_jax.algorithms.base import ERR_MULTI_ACTIVE
from bandits_jax.core import ConfigError, EnvSpec
from bandits_jax.keys import algorithm_step_keys
from bandits_jax.runner import describe_errors, replay
from reference import approx_glb_np as ref_np
from bandits_jax.algorithms import make_algorithm
from helpers import assert_one_active_matches, async_arrays, drive_with_and_without_resize

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

HP = dict(lam=1.0, alpha=1.0, q=1.0, lengthscale=0.7)


@functools.lru_cache(maxsize=None)
def _algo(which):
    """("approx", static options) or ("glb",) -> the Algorithm (one per configuration)."""
    from bandits_jax.algorithms.distributed.fed_glb import fed_glb_ucb

    return adk.approx_dis_kernel_ucb(**dict(which[1])) if which[0] == "approx" else fed_glb_ucb()


@functools.lru_cache(maxsize=None)
def _runner(which, N, K, d, T, key):
    algo = _algo(which)
    spec = EnvSpec(N, K, d, T)  # the all-client protocol (select scores every client)

    @jax.jit
    def run(params, contexts, rewards, active):
        state, actions, aux, _, reps = replay(algo, spec, params, contexts, rewards, active, jax.random.PRNGKey(key))
        return state, actions, aux, reps

    return run


@functools.lru_cache(maxsize=None)
def _draws(N, K, T, key, rls):
    """The tie noise [T, N, K] the JAX side used (uniform(select key of step t, (N, K)), keys from
    runner.algorithm_step_keys) and, with rls, the RLS draws [T, T] of a sync at step t
    (adk.rls_uniforms(update key of step t, T): one per history position)."""

    @jax.jit
    def draws():
        def one(t):
            k_sel, k_upd = algorithm_step_keys(jax.random.PRNGKey(key), t)
            u = adk.rls_uniforms(k_upd, T, jnp.float64) if rls else jnp.zeros((0,))
            return jax.random.uniform(k_sel, (N, K), jnp.float64), u

        return jax.vmap(one)(jnp.arange(T, dtype=jnp.int32))

    return jax.device_get(draws())


def _replay(which, key, contexts, rewards, active, rls, **hp):
    """(state, actions [T, N], aux, reports, tie_noise [T, N, K], rls_uniform [T, T] or empty)."""
    T, N, K, d = contexts.shape
    run = _runner(which, N, K, d, T, key)
    params = {k: jnp.asarray(v, jnp.float64) for k, v in hp.items()}
    out = jax.device_get(run(params, jnp.asarray(contexts), jnp.asarray(rewards), jnp.asarray(active)))
    return (*out, *_draws(N, K, T, key, rls))


def _approx(static):
    return _algo(("approx", tuple(static)))


def _run(contexts, rewards, active, static=(), **hp):
    return _replay(("approx", tuple(static)), 3, contexts, rewards, active, True, **hp)


def _bits(errors):
    return int(np.bitwise_or.reduce(np.asarray(errors, np.int64)))


def _assert_steps_match(actions, aux, reps, arrivals, ref):
    """Actions, UCB mean and variance of the active agents, and the communication, against `ref`."""
    np.testing.assert_array_equal(_active_rows(actions, arrivals), ref["actions"])
    np.testing.assert_allclose(_active_rows(aux["mean"], arrivals), ref["mean"], atol=1e-8)
    np.testing.assert_allclose(_active_rows(aux["var"], arrivals), ref["var"], atol=1e-8)
    for key, ref_key in (("comm_up", "up"), ("comm_down", "down"), ("rounds", "rounds")):
        np.testing.assert_array_equal(getattr(reps, key), ref[ref_key], err_msg=key)


def _active_rows(a, arrivals):
    return a[np.arange(len(arrivals)), arrivals]


@pytest.mark.parametrize("threshold,trigger_count", [(3.0, "client"), (6.0, "elapsed")])
def test_approx_dis_kernel_ucb_matches_numpy(threshold, trigger_count):
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = async_arrays(3, 4, 2, 40, seed=11)
        state, actions, aux, reps, noise, u = _run(contexts, rewards, active,
                                                   static=(("trigger_count", trigger_count),),
                                                   threshold=threshold, **HP)
        ref = ref_np.approx_dis_kernel_ucb_np(arrivals, contexts, rewards, noise, u, threshold=threshold,
                                              trigger_count=trigger_count, **HP)
        diag = reps.diagnostics
        _assert_steps_match(actions, aux, reps, arrivals, ref)
        np.testing.assert_allclose(diag["var_sum"], ref["var_sum"], atol=1e-8)
        np.testing.assert_array_equal(diag["dict_size"], ref["dict_size"])
        # informative: several syncs, quiet steps between them, and the re-sampling drops points
        assert 2 < ref["rounds"].sum() < 25
        assert 0 < ref["dict_size"][-1] < int(state.hist_n)
        assert not reps.errors.any()


def test_approx_dis_kernel_ucb_communication_hand_trace():
    with jax.enable_x64(True):
        # N = 3, d = 2, K = 1; arrivals 0, 1, 0, 2 on points a, a, c, e (client 1 repeats a)
        a, c, e = (np.array(v) for v in ([0.3, -0.2], [0.1, 0.9], [0.7, 0.7]))
        who = [0, 1, 0, 2]
        contexts = np.zeros((4, 3, 1, 2))
        for t, p in enumerate([a, a, c, e]):
            contexts[t] = p
        rewards = np.ones((4, 3, 1))
        active = np.arange(3)[None, :] == np.array(who)[:, None]
        # empty dictionary: every global variance is k(x, x)/lam = 1, so n_i * V_i is
        # step 0: 1 * 1; step 1: 1 * 1; step 2 (client 0's second point): 2 * 2 = 4 > 3.5 -> sync.
        # q = 1e6 keeps all three history points (kept = 3), the server drops the repeat of a: m = 2.
        # up = d * 3 + N (m^2 + m) = 6 + 18 = 24; down = N d m + N (m^2 + m) = 12 + 18 = 30.
        # step 3 (client 2, e): 1 * var_g(e) < 1 < 3.5, quiet.
        state, _, _, reps, _, _ = _run(contexts, rewards, active, threshold=3.5, lam=1.0, alpha=1.0, q=1e6,
                                       lengthscale=1.0)
        u = reps.diagnostics
        np.testing.assert_allclose(u["var_sum"][:3], [1.0, 1.0, 2.0], atol=1e-12)
        assert 0 < u["var_sum"][3] < 1.0
        np.testing.assert_array_equal(u["trigger"], [False, False, True, False])
        # kept per client [2, 1, 0]: all 3 points kept, and the history holds 2 of client 0, 1 of client 1
        np.testing.assert_array_equal(u["kept"], [0, 0, 3, 0])
        np.testing.assert_array_equal(np.bincount(state.hist_owner[:3], minlength=3), [2, 1, 0])
        np.testing.assert_array_equal(reps.comm_up, [0, 0, 24, 0])
        np.testing.assert_array_equal(reps.comm_down, [0, 0, 30, 0])
        np.testing.assert_array_equal(reps.rounds, [0, 0, 1, 0])
        np.testing.assert_array_equal(u["dict_size"], [0, 0, 2, 2])


def test_approx_dis_kernel_ucb_errors_are_loud():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = async_arrays(2, 3, 2, 12, seed=12)
        small = (("dict_capacity", 2),)
        _, _, _, reps, _, _ = _run(contexts, rewards, active, static=small, threshold=0.5, lam=1.0, alpha=1.0,
                                   q=1e6, lengthscale=0.7)
        bits = _bits(reps.errors)
        assert bits & adk.ERR_DICT and "raise dict_capacity" in describe_errors(_approx(small), bits)
        assert reps.errors[0] == 0 and not bits & ERR_MULTI_ACTIVE
        both = np.ones_like(active)
        _, _, _, reps, _, _ = _run(contexts, rewards, both, static=small, threshold=0.5, lam=1.0, alpha=1.0,
                                   q=1e6, lengthscale=0.7)
        bits = _bits(reps.errors)
        assert (reps.errors & ERR_MULTI_ACTIVE).all()
        assert "more than one client" in describe_errors(_approx(small), bits)
    with pytest.raises(ConfigError, match="trigger_count"):
        adk.approx_dis_kernel_ucb(trigger_count="sometimes")


@pytest.mark.parametrize("dict_rows", [None, 12])
def test_approx_dis_kernel_ucb_resize_changes_nothing(dict_rows):
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = async_arrays(3, 4, 2, 16, seed=13)
        algo = adk.approx_dis_kernel_ucb(threshold=2.0, lengthscale=0.7)
        big, acts_big, small, acts_small = drive_with_and_without_resize(
            algo, EnvSpec(3, 4, 2, 16), contexts, rewards, active, split=8, demand_rows=dict_rows)
        np.testing.assert_array_equal(acts_big, acts_small)
        assert int(big.num_syncs) == int(small.num_syncs) > 0
        # no overflow (the state keeps no error bits any more): the dictionary never filled its rows
        assert int(small.dict_n) < small.Linv.shape[0]
        assert int(algo.sizing.demand(small)) == int(small.dict_n) > 0
        np.testing.assert_allclose(small.g_b[:int(small.dict_n)], big.g_b[:int(big.dict_n)], atol=1e-10)
        if dict_rows is not None:  # demand-sized: the dictionary has dict_rows rows, the history T
            assert small.Linv.shape == (12, 12) and small.hist_X.shape == (16, 2)


# ----------------------------------------------------------------------------------- FedGLB-UCB
HP_GLB = dict(lam=1.0, alpha=0.5, c_mu=0.25)


def _glb():
    return _algo(("glb",))


def _run_glb(contexts, rewards, active, **hp):
    return _replay(("glb",), 5, contexts, rewards, active, False, **hp)


def test_fed_glb_ucb_matches_numpy():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = async_arrays(3, 4, 3, 40, seed=14)
        rewards = (rewards > 0).astype(float)
        state, actions, aux, reps, noise, _ = _run_glb(contexts, rewards, active, threshold=0.5, **HP_GLB)
        ref = ref_np.fed_glb_ucb_np(arrivals, contexts, rewards, noise, threshold=0.5, **HP_GLB)
        diag = reps.diagnostics
        _assert_steps_match(actions, aux, reps, arrivals, ref)
        np.testing.assert_allclose(diag["logdet_ratio"], ref["logdet_ratio"], atol=1e-9)
        np.testing.assert_array_equal(diag["agd_iters"], ref["agd_iters"])
        assert ref["agd_iters"].max() > 1  # the momentum iterations are compared, not only a first gradient
        assert 2 < ref["rounds"].sum() < 25
        assert np.all(diag["agd_converged"])
        assert not reps.errors.any()


def test_fed_glb_ucb_hand_trace_and_mle():
    with jax.enable_x64(True):
        # N = 3, d = 2, K = 1; arrivals 0, 1, 0, 2 on points a, b, c, e; lam = 1, c_mu = 0.5: V-reg 2
        a, b, c, e = (np.array(v) for v in ([0.3, -0.2], [-0.5, 0.4], [0.1, 0.9], [0.7, 0.7]))
        who = [0, 1, 0, 2]
        contexts = np.zeros((4, 3, 1, 2))
        for t, p in enumerate([a, b, c, e]):
            contexts[t] = p
        rewards = np.array([1.0, 0.0, 1.0, 1.0])[:, None, None] * np.ones((4, 3, 1))
        active = np.arange(3)[None, :] == np.array(who)[:, None]
        # log det ratio: step 0: log(1 + |a|^2/2) = 0.063; step 1: log(1 + |b|^2/2) = 0.186;
        # step 2 (client 0: a, c): log((1 + |a|^2/2)(1 + |c|^2/2) - (a.c)^2/4) = 0.403, n_0 = 2:
        # 0.806 >= 0.5 -> sync;
        # step 3 (client 2, e): log(1 + e^T (A_g + 2I)^{-1} e) < log(1 + |e|^2/2) = 0.40, quiet
        state, _, _, reps, _, _ = _run_glb(contexts, rewards, active, lam=1.0, alpha=1.0, c_mu=0.5, threshold=0.5)
        u = reps.diagnostics
        expect = [np.log(1.065), np.log(1.205), np.log(1.065 * 1.41 - 0.15**2 / 4)]
        np.testing.assert_allclose(u["logdet_ratio"][:3], expect, atol=1e-12)
        np.testing.assert_array_equal(u["trigger"], [False, False, True, False])
        # the stopping rule is on the MEAN loss F / n: |grad F / n| <= sqrt(2 lam / n^3) = sqrt(2 / 27),
        # i.e. |grad F| <= 3 sqrt(2 / 27) = sqrt(2 / 3) = 0.816. The first gradient, at theta_g = 0, is
        # X^T (1/2 - Y) = (-a + b - c) / 2 = (-0.45, -0.15), |.| = 0.474: it meets the rule, so the
        # sync takes k = 1 gradient and keeps theta_g = 0 (the rule on the summed gradient, sqrt(2 / 27)
        # = 0.272, would have iterated on)
        assert int(u["agd_iters"][2]) == 1 and u["agd_converged"][2]
        np.testing.assert_array_equal(state.theta_g, [0.0, 0.0])
        # up = N (d^2 + 1) + k N d = 15 + 6; down = k N d + N (d^2 + d + 1) = 6 + 21
        np.testing.assert_array_equal(reps.comm_up, [0, 0, 21, 0])
        np.testing.assert_array_equal(reps.comm_down, [0, 0, 27, 0])
        # so (F is lam-strongly convex) theta_g lies within |grad F| / lam of the regularised MLE
        # (Newton in NumPy)
        X, Y = np.array([a, b, c]), np.array([1.0, 0.0, 1.0])
        tol = np.sqrt(2.0 / 3.0)
        grad = X.T @ (1 / (1 + np.exp(-X @ state.theta_g)) - Y) + state.theta_g
        np.testing.assert_allclose(np.linalg.norm(grad), np.sqrt(0.225), rtol=1e-12)
        th = np.zeros(2)
        for _ in range(50):
            p = 1 / (1 + np.exp(-X @ th))
            H = X.T @ (X * (p * (1 - p))[:, None]) + np.eye(2)
            th -= np.linalg.solve(H, X.T @ (p - Y) + th)
        assert 0 < np.linalg.norm(state.theta_g - th) <= tol
        np.testing.assert_allclose(state.A_g, X.T @ X, atol=1e-12)
        assert not reps.errors.any()
        _, _, _, reps, _, _ = _run_glb(contexts, rewards, np.ones_like(active), lam=1.0, alpha=1.0, c_mu=0.5,
                                       threshold=0.5)
        bits = _bits(reps.errors)
        assert bits & ERR_MULTI_ACTIVE and "more than one client" in describe_errors(_glb(), bits)
        assert (reps.errors & ERR_MULTI_ACTIVE).all()


# ----------------------------------------------------------------------------------- one_active
@pytest.mark.slow  # its one-active step is pinned in the fast suite by the async/synthetic-f1 golden outputs
def test_approx_dis_kernel_ucb_one_active_matches_all_clients():
    comm = assert_one_active_matches(adk.approx_dis_kernel_ucb(dict_capacity=48), dict(threshold=3.0, **HP))
    assert 1 < comm["rounds"].sum() < 40


@pytest.mark.slow  # the shared one_active machinery is checked in the fast suite by the other baselines
def test_fed_glb_ucb_one_active_matches_all_clients():
    from bandits_jax.algorithms.distributed.fed_glb import fed_glb_ucb

    comm = assert_one_active_matches(fed_glb_ucb(), hp=dict(threshold=0.5, **HP_GLB))
    assert 1 < comm["rounds"].sum() < 40


@pytest.mark.parametrize("which", [pytest.param("Approx-DisKernelUCB", marks=pytest.mark.slow), "FedGLB-UCB"])
def test_batched_sync_equals_the_runs_one_by_one(which, monkeypatch):
    """The synchronisation is a base.batch_cond: through the runner, a batch of runs whose syncs fall
    on different steps gives each run's numbers of a batch of one, with the syncing runs gathered
    (gather=1, the modules' choice) and with the whole batch taking the sync when any run needs it
    (gather=None)."""
    from bandits_jax.algorithms.distributed import fed_glb
    from bandits_jax.problems import make_problem
    from bandits_jax.runner import run_batch

    module, kw = {"Approx-DisKernelUCB": (adk, dict(dict_capacity=24, **HP)),
                  "FedGLB-UCB": (fed_glb, HP_GLB)}[which]
    factory = adk.approx_dis_kernel_ucb if module is adk else fed_glb.fed_glb_ucb
    problem = make_problem("async-f1", num_agents=4, num_arms=5, dim=3, horizon=30, noise_std=0.1)
    assert module.SYNC_GATHER == 1
    alg = factory(threshold=0.5, **kw)
    cache = {}
    gathered = run_batch(problem, alg, [0, 1], first_segment=30, compiled_cache=cache)
    ones = [run_batch(problem, alg, [s], first_segment=30, compiled_cache=cache) for s in (0, 1)]
    monkeypatch.setattr(module, "SYNC_GATHER", None)
    alg_any = factory(threshold=0.5, **kw)  # a new Algorithm: traced again with gather=None
    anyrun = run_batch(problem, alg_any, [0, 1], first_segment=30)
    for key in ("regret", "comm_up", "comm_down", "rounds"):
        one = np.concatenate([getattr(o, key) for o in ones])
        np.testing.assert_allclose(getattr(gathered, key), one, rtol=1e-12, atol=1e-12, err_msg=key)
        np.testing.assert_allclose(getattr(anyrun, key), one, rtol=1e-12, atol=1e-12, err_msg=key)
    assert 1 < gathered.rounds[0].sum() < 30
    assert (gathered.rounds[0] != gathered.rounds[1]).any()  # the runs sync at different steps
    assert not gathered.errors.any()
    if which == "Approx-DisKernelUCB":
        assert gathered.regret.sum() > 0
    with pytest.raises(ConfigError, match="unknown option.*batching"):  # removed: the problem declares the
        make_algorithm(factory.__name__, batching="map")  # protocol, batch_cond the batching
