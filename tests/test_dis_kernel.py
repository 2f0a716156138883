"""Synchronous and pooled baselines (DisKernelUCB, OneKernelUCB, NKernelUCB, DisLinUCB) against NumPy loops."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import runner
from bandits_jax.algorithms import make_algorithm
from bandits_jax.algorithms.distributed import dis_kernel as dk
from bandits_jax.algorithms.base import ERR_MULTI_ACTIVE
from bandits_jax.kernels import panels as panel_ops
from bandits_jax.core import ConfigError, EnvSpec, Sizes
from bandits_jax.problems import make_problem
from reference import dis_kernel_np as ref_np
from helpers import assert_one_active_matches, async_arrays, drive_with_and_without_resize

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

HP_KERNEL = dict(lam=1.0, alpha=1.0, lengthscale=0.7)


_env = async_arrays


@functools.lru_cache(maxsize=None)
def _runner(factory, N, K, d, T, rows, static):
    algo = factory(**dict(static))
    spec = EnvSpec(N, K, d, T)
    sizes = None if rows is None else Sizes(rows)

    @jax.jit
    def run(hp, contexts, rewards, active):
        return runner.replay(algo, spec, hp, contexts, rewards, active, jax.random.PRNGKey(7), sizes)

    return run


def _run(factory, contexts, rewards, active, rows=None, static=(), **hp):
    """runner.replay on given arrays: (final state, actions[T, N], select aux, {comm_up, comm_down, rounds,
    errors, diagnostics...: [T]})."""
    T, N, K, d = contexts.shape
    run = _runner(factory, N, K, d, T, rows, tuple(static))
    hp = {k: jnp.asarray(v, jnp.float64) for k, v in hp.items()}
    state, actions, aux, _, reps = jax.device_get(run(hp, jnp.asarray(contexts), jnp.asarray(rewards),
                                                      jnp.asarray(active)))
    u = {"comm_up": reps.comm_up, "comm_down": reps.comm_down, "rounds": reps.rounds, "errors": reps.errors,
         **reps.diagnostics}
    return state, actions, aux, u


def _algo(factory, static=()):
    return factory(**dict(static))


def _sticky(errors):
    """The error bits ORed up to each step (what a run carries from then on)."""
    return np.bitwise_or.accumulate(np.asarray(errors, np.int64))


def _active_rows(a, arrivals):
    return a[np.arange(len(arrivals)), arrivals]


def _check_against(ref, actions, sinfo, arrivals):
    np.testing.assert_array_equal(_active_rows(actions, arrivals), ref["actions"])
    np.testing.assert_allclose(_active_rows(sinfo["mean"], arrivals), ref["mean"], atol=1e-9)
    np.testing.assert_allclose(_active_rows(sinfo["var"], arrivals), ref["var"], atol=1e-9)


# ----------------------------------------------------------------------------------- DisKernelUCB
@pytest.mark.parametrize("threshold,trigger_count", [(2.0, "elapsed"), (0.5, "client")])
def test_dis_kernel_ucb_matches_numpy(threshold, trigger_count):
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 40, seed=1)
        state, actions, sinfo, uinfo = _run(dk.dis_kernel_ucb, contexts, rewards, active,
                                            static=(("trigger_count", trigger_count),),
                                            threshold=threshold, **HP_KERNEL)
        ref = ref_np.dis_kernel_ucb_np(arrivals, contexts, rewards, sinfo["tie_noise"], threshold=threshold,
                                       trigger_count=trigger_count, **HP_KERNEL)
        _check_against(ref, actions, sinfo, arrivals)
        np.testing.assert_allclose(uinfo["logdet_ratio"], ref["logdet_ratio"], atol=1e-9)
        for key, ref_key in (("comm_up", "up"), ("comm_down", "down"), ("rounds", "rounds"),
                             ("n_global", "n_global")):
            np.testing.assert_array_equal(uinfo[key], ref[ref_key], err_msg=key)
        # informative: several syncs, several quiet steps, and clients do use unsynchronised data
        assert 2 < ref["rounds"].sum() < 30
        assert not uinfo["errors"].any()
        # the incrementally grown pooled factor equals a fresh factorisation of K_G + lam I
        n = int(state.n)
        X = state.X[:n]
        K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / (2 * 0.7**2)) + np.eye(n)
        L_inv = np.linalg.inv(np.linalg.cholesky(K))
        np.testing.assert_allclose(state.chol_inv[:n, :n], L_inv, atol=1e-9)


def test_dis_kernel_ucb_threshold_zero_is_one_kernel_ucb():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 30, seed=2)
        _, a_dis, s_dis, u_dis = _run(dk.dis_kernel_ucb, contexts, rewards, active, threshold=0.0, **HP_KERNEL)
        _, a_one, s_one, u_one = _run(dk.one_kernel_ucb, contexts, rewards, active, **HP_KERNEL)
        np.testing.assert_array_equal(_active_rows(a_dis, arrivals), _active_rows(a_one, arrivals))
        np.testing.assert_allclose(s_dis["mean"], s_one["mean"], atol=1e-10)
        for key in ("comm_up", "comm_down", "rounds"):
            np.testing.assert_array_equal(u_dis[key], u_one[key], err_msg=key)


def test_dis_kernel_ucb_communication_hand_trace():
    with jax.enable_x64(True):
        # N = 3, d = 2, K = 1 (no choice); arrivals 0, 1, 0, 2 with a trigger on elapsed steps
        a, b, c, e = (np.array(v) for v in ([0.3, -0.2], [-0.5, 0.4], [0.1, 0.9], [0.7, 0.7]))
        pts = [a, b, c, e]
        who = [0, 1, 0, 2]
        contexts = np.zeros((4, 3, 1, 2))
        for t, p in enumerate(pts):
            contexts[t] = p
        rewards = np.ones((4, 3, 1))
        active = np.arange(3)[None, :] == np.array(who)[:, None]
        # ratio = log det(K_loc + I) - log det(K_G + I) (lam = 1), rbf exp(-|x - y|^2 / 2):
        # step 0 (client 0: {a}) log 2; step 1 (client 1: {b}) log 2;
        # step 2 (client 0: {a, c}) log(4 - k(a, c)^2) with |a - c|^2 = 1.25;
        # elapsed * ratio vs 2.5: 0.69 quiet, 1.39 quiet, 3 * 1.31 = 3.94 sync, step 3: <= 1 * log 2 quiet
        _, _, _, u = _run(dk.dis_kernel_ucb, contexts, rewards, active, threshold=2.5, lam=1.0, alpha=1.0,
                          lengthscale=1.0)
        np.testing.assert_allclose(u["logdet_ratio"][:3], [np.log(2), np.log(2), np.log(4 - np.exp(-1.25))],
                                   atol=1e-12)
        assert 0 < u["logdet_ratio"][3] < np.log(2)
        np.testing.assert_array_equal(u["trigger"], [False, False, True, False])
        # step 2 syncs client 0's two points (a, c) and client 1's one point (b): 3 raw points
        # up = (d + 1) * 3 = 9; down = (d + 1) * (N - 1) * 3 = 18
        np.testing.assert_array_equal(u["comm_up"], [0, 0, 9, 0])
        np.testing.assert_array_equal(u["comm_down"], [0, 0, 18, 0])
        np.testing.assert_array_equal(u["rounds"], [0, 0, 1, 0])
        np.testing.assert_array_equal(u["n_global"], [0, 0, 3, 3])


def test_dis_kernel_ucb_buffer_overflow_and_multi_active_are_errors():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(2, 3, 2, 12, seed=3)
        algo = _algo(dk.dis_kernel_ucb, (("buffer_capacity", 2),))
        state, _, _, u = _run(dk.dis_kernel_ucb, contexts, rewards, active,
                              static=(("buffer_capacity", 2),), threshold=1e9, **HP_KERNEL)
        bits = int(np.bitwise_or.reduce(u["errors"]))
        assert bits == dk.ERR_BUFFER
        assert "raise buffer_capacity" in runner.describe_errors(algo, bits)
        assert _sticky(u["errors"])[-1] and not _sticky(u["errors"])[0]
        assert np.isfinite(u["comm_up"]).all()  # errors are bits, never NaN communication
        both = np.ones_like(active)
        state, _, _, u = _run(dk.dis_kernel_ucb, contexts, rewards, both, static=(("buffer_capacity", 2),),
                              threshold=1.0, **HP_KERNEL)
        bits = int(np.bitwise_or.reduce(u["errors"]))
        assert bits & ERR_MULTI_ACTIVE
        assert "more than one client" in runner.describe_errors(algo, bits)


def test_dis_kernel_ucb_resize_changes_nothing():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 20, seed=4)
        algo = dk.dis_kernel_ucb(threshold=1.0, lengthscale=0.7)
        big, acts_big, small, acts_small = drive_with_and_without_resize(
            algo, EnvSpec(3, 4, 2, 20), contexts, rewards, active, split=8)
        np.testing.assert_array_equal(acts_big, acts_small)
        np.testing.assert_allclose(big.chol_inv, small.chol_inv, atol=1e-12)


# ----------------------------------------------------------------------------------- One / N KernelUCB
@pytest.mark.parametrize("static", [(("storage", "panels"), ("block", 16), ("pending", 4)), (("storage", "panels"),),
                                    (("storage", "dense"),)], ids=["panels-16-pending-4", "panels-1024", "dense"])
def test_one_kernel_ucb_matches_numpy_and_counts_messages(static):
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 40, seed=5)
        state, actions, sinfo, uinfo = _run(dk.one_kernel_ucb, contexts, rewards, active, static=static,
                                            **HP_KERNEL)
        ref = ref_np.one_kernel_ucb_np(arrivals, contexts, rewards, sinfo["tie_noise"], **HP_KERNEL)
        _check_against(ref, actions, sinfo, arrivals)
        # d = 2, N = 3: up = d + 1 = 3, down = (N - 1)(d + 1) = 6 at every active step
        np.testing.assert_array_equal(uinfo["comm_up"], 3.0)
        np.testing.assert_array_equal(uinfo["comm_down"], 6.0)
        np.testing.assert_array_equal(uinfo["rounds"], 1.0)
        assert int(state.n) == 40
        assert not uinfo["errors"].any()
        # the incrementally grown factor equals a fresh factorisation of K + lam I
        X = state.X[:40]
        K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / (2 * 0.7**2)) + np.eye(40)
        if dict(static)["storage"] == "dense":
            dense = state.chol_inv
        else:
            dense = panel_ops.factor_to_dense(state.factor, 40)
        np.testing.assert_allclose(dense[:40, :40], np.linalg.inv(np.linalg.cholesky(K)), atol=1e-9)
        if dict(static).get("block") == 16:  # 40 rows in panels of 16: three panels, the last one part padding
            assert [p.shape for p in state.factor.panels] == [(16, 16), (16, 32), (16, 48)]
            assert int(state.factor.n0) == 40  # ten blocks of 4 written
            np.testing.assert_array_equal(dense[40:, 40:], np.eye(8))


def test_one_kernel_ucb_distinct_points_is_exact_on_repeated_contexts():
    """storage="distinct" on a finite context set equals the NumPy loop of exact KRR on the whole history,
    and more distinct points than its capacity is reported as an overflow."""
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 40, seed=9)
        pool = contexts[0, 0]  # 4 contexts, shown to every client at every step
        contexts = np.broadcast_to(pool, contexts.shape).copy()
        state, actions, sinfo, uinfo = _run(dk.one_kernel_ucb, contexts, rewards, active,
                                            static=(("storage", "distinct"), ("distinct_capacity", 6)), **HP_KERNEL)
        ref = ref_np.one_kernel_ucb_np(arrivals, contexts, rewards, sinfo["tie_noise"], **HP_KERNEL)
        _check_against(ref, actions, sinfo, arrivals)
        np.testing.assert_allclose(_active_rows(sinfo["mean"], arrivals), ref["mean"], atol=1e-10)
        np.testing.assert_allclose(_active_rows(sinfo["var"], arrivals), ref["var"], atol=1e-10)
        assert 2 <= int(state.m) <= 4 and float(state.counts.sum()) == 40
        assert not uinfo["errors"].any() and np.isfinite(uinfo["comm_up"]).all()
        # fresh contexts every step: the 7th distinct point overflows a capacity of 6
        contexts, rewards, arrivals, active = _env(3, 4, 2, 40, seed=9)
        state, _, _, uinfo = _run(dk.one_kernel_ucb, contexts, rewards, active,
                                  static=(("storage", "distinct"), ("distinct_capacity", 6)), **HP_KERNEL)
        assert int(np.bitwise_or.reduce(uinfo["errors"])) == dk.ERR_CAPACITY
        assert not _sticky(uinfo["errors"])[:6].any() and _sticky(uinfo["errors"])[6:].all()
        assert "raise distinct_capacity" in runner.describe_errors(
            _algo(dk.one_kernel_ucb, (("storage", "distinct"),)), dk.ERR_CAPACITY)


def test_one_kernel_ucb_options_are_checked():
    with pytest.raises(ConfigError, match="storage must be one of"):
        dk.one_kernel_ucb(storage="sparse")
    with pytest.raises(ConfigError, match="block must be a positive integer"):
        dk.one_kernel_ucb(block=0)
    # the removed batching option is refused like any unknown name
    with pytest.raises(ConfigError, match="unknown option.*batching"):
        make_algorithm("one_kernel_ucb", batching="map")


@pytest.mark.parametrize("storage", ["panels", pytest.param("dense", marks=pytest.mark.slow), "distinct"])
def test_one_kernel_ucb_batch_of_runs_equals_each_run_alone(storage):
    """The panels' skipped panels and block flushes are conditionals on each run's fill: a batch of
    runs (one vmap) gives each run's numbers alone, on the asynchronous problem (one active client)."""
    problem = make_problem("async-f1", num_agents=3, num_arms=4, dim=2, horizon=40, noise_std=0.1)
    algo = dk.one_kernel_ucb(storage=storage, block=16, pending=4, distinct_capacity=64, **HP_KERNEL)
    both = runner.run_batch(problem, algo, [0, 1], precision="float64", first_segment=16)
    for j, seed in enumerate([0, 1]):
        alone = runner.run_batch(problem, algo, [seed], precision="float64", first_segment=16)
        for name in ("regret", "comm_up", "comm_down", "rounds"):
            np.testing.assert_array_equal(getattr(both, name)[j], getattr(alone, name)[0], err_msg=name)
    assert both.regret.sum() > 0 and not both.errors.any()


def test_n_kernel_ucb_matches_numpy():
    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 2, 40, seed=6)
        T, N, K, _ = contexts.shape
        _, actions, _, uinfo = _run(dk.n_kernel_ucb, contexts, rewards, active, **HP_KERNEL)
        # rebuild the per-client tie noise exactly as select does (keys split per client)
        key = jax.random.PRNGKey(7)
        noise = np.stack([
            np.stack([np.asarray(jax.random.uniform(k, (K,), jnp.float64))
                      for k in jax.random.split(runner.algorithm_step_keys(key, t)[0], N)])
            for t in range(T)])
        ref = ref_np.n_kernel_ucb_np(arrivals, contexts, rewards, noise, **HP_KERNEL)
        np.testing.assert_array_equal(_active_rows(actions, arrivals), ref["actions"])
        np.testing.assert_array_equal(uinfo["comm_up"], 0.0)
        # clients learn only from their own data: differs from the pooled model on this run
        one = ref_np.one_kernel_ucb_np(arrivals, contexts, rewards, noise, **HP_KERNEL)
        assert np.any(one["actions"] != ref["actions"])


# ----------------------------------------------------------------------------------- linear
HP_LIN = dict(lam=1.0, alpha=0.5)


def test_dis_lin_ucb_matches_numpy():
    from bandits_jax.algorithms.distributed.dis_linear import dis_lin_ucb

    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 3, 40, seed=7)
        _, actions, sinfo, uinfo = _run(dis_lin_ucb, contexts, rewards, active, threshold=0.3, **HP_LIN)
        ref = ref_np.dis_lin_ucb_np(arrivals, contexts, rewards, sinfo["tie_noise"], threshold=0.3, **HP_LIN)
        _check_against(ref, actions, sinfo, arrivals)
        # the diagnostic is the active client's ratio
        np.testing.assert_allclose(uinfo["logdet_ratio"], ref["logdet_ratio"], atol=1e-9)
        # each sync: N (d^2 + d + 1) = 3 * 13 = 39 scalars each way
        np.testing.assert_array_equal(uinfo["comm_up"], ref["up"])
        np.testing.assert_array_equal(uinfo["comm_down"], ref["down"])
        assert set(np.unique(uinfo["comm_up"])) == {0.0, 39.0}
        assert 2 < ref["rounds"].sum() < 30


def test_fed_lin_ucb_matches_numpy():
    from bandits_jax.algorithms.distributed.dis_linear import fed_lin_ucb

    with jax.enable_x64(True):
        contexts, rewards, arrivals, active = _env(3, 4, 3, 40, seed=8)
        _, actions, sinfo, uinfo = _run(fed_lin_ucb, contexts, rewards, active, alpha_c=0.3, **HP_LIN)
        ref = ref_np.fed_lin_ucb_np(arrivals, contexts, rewards, sinfo["tie_noise"], alpha_c=0.3, **HP_LIN)
        _check_against(ref, actions, sinfo, arrivals)
        # each communication of the active client: d^2 + d = 12 scalars each way
        np.testing.assert_array_equal(uinfo["comm_up"], ref["up"])
        np.testing.assert_array_equal(uinfo["comm_down"], ref["down"])
        assert set(np.unique(uinfo["comm_up"])) == {0.0, 12.0}
        assert 2 < ref["rounds"].sum() < 35


# ----------------------------------------------------------------------------------- one_active
# DisKernelUCB is not one of the asynchronous experiments' algorithms: its checks run under -m slow, and so
# do the others' (the golden smoke outputs and the capped-history test run NKernelUCB one-active by default)
@pytest.mark.parametrize("factory,static,hp", [
    pytest.param(dk.dis_kernel_ucb, {}, dict(threshold=1.0, **HP_KERNEL), marks=pytest.mark.slow),
    pytest.param(dk.dis_kernel_ucb, {"trigger_count": "client", "buffer_capacity": 16},
                 dict(threshold=0.5, **HP_KERNEL), marks=pytest.mark.slow),
    pytest.param(dk.one_kernel_ucb, {}, HP_KERNEL, marks=pytest.mark.slow),
    pytest.param(dk.n_kernel_ucb, {}, HP_KERNEL, marks=pytest.mark.slow),
], ids=["DisKernelUCB", "DisKernelUCB-client", "OneKernelUCB", "NKernelUCB"])
def test_kernel_baselines_one_active_match_all_clients(factory, static, hp):
    comm = assert_one_active_matches(factory(**static), hp)
    if factory is dk.dis_kernel_ucb:
        assert 1 < comm["rounds"].sum() < 40  # informative: quiet steps and syncs


@pytest.mark.parametrize("name,hp", [("dis_lin_ucb", dict(threshold=0.3, **HP_LIN)),
                                     pytest.param("fed_lin_ucb", dict(alpha_c=0.3, **HP_LIN), marks=pytest.mark.slow)])
def test_linear_baselines_one_active_match_all_clients(name, hp):
    from bandits_jax.algorithms.distributed import dis_linear

    comm = assert_one_active_matches(getattr(dis_linear, name)(), hp=hp)
    assert 1 < comm["rounds"].sum() < 40


def test_one_active_is_the_problems_not_an_option():
    """The protocol is declared by the problem (EnvSpec.one_active): the removed option is refused."""
    for name in ("dis_kernel_ucb", "one_kernel_ucb", "n_kernel_ucb", "dis_lin_ucb", "fed_lin_ucb"):
        with pytest.raises(ConfigError, match="unknown option.*one_active"):
            make_algorithm(name, one_active=True)
