"""LinUCB / LinTS / KernelUCB / KernelTS against plain NumPy loops with fresh inverses.

The JAX algorithm's init/select/update are driven directly, one step at a time (jitted), on
contexts and rewards drawn by NumPy. The test reproduces the standard-normal draws of the TS
variants from the select keys and hands them to the NumPy reference. Actions must agree
exactly; scores and states agree to 1e-8 in float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms import make_algorithm
from bandits_jax.algorithms.single import kernel as kalg
from bandits_jax.algorithms.single import linear as lalg
from bandits_jax.core import ConfigError, EnvSpec, Sizes, Step, float_dtype
from bandits_jax.kernels.functions import get_kernel

from reference import kernel_np, linear_np
from helpers import agent_slice, per_agent_normal_draws

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

N, K, D, T = 3, 4, 5, 40
TOL = dict(rtol=1e-8, atol=1e-8)


def make_data(seed, T=T, p_active=1.0):
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((T, N, K, D)) / np.sqrt(D)
    rewards = rng.standard_normal((T, N, K))
    active = rng.uniform(size=(T, N)) < p_active
    return contexts, rewards, active


def step_keys(t):
    return jax.random.split(jax.random.fold_in(jax.random.key(42), t))


def drive(alg, contexts, rewards, active, score_fn=None, schedule=None):
    """Run alg for len(contexts) steps. schedule: list of (t_start, rows) resize points.

    score_fn(params, state1, contexts1[K, d], select_key1) -> [K] per-agent scores recorded each step.
    Returns actions[T, N], scores[T, N, K] (or None) and the final state.
    """
    Tn = contexts.shape[0]
    spec = EnvSpec(N, K, D, Tn)
    schedule = dict(schedule or [])
    params = float_params(alg)
    rows = schedule.get(0, alg.sizing.rows(spec, Tn) if alg.sizing else None)
    state = alg.init(jax.random.key(0), spec, params, Sizes(rows), None)
    select, update = jax.jit(alg.select), jax.jit(alg.update)
    scores_of = None
    if score_fn is not None:
        per_agent = jax.vmap(score_fn, in_axes=(None, 0, 0, 0))
        scores_of = jax.jit(lambda p, s, c, k: per_agent(p, s, c, jax.random.split(k, N)))
    actions, scores = [], []
    for t in range(Tn):
        if t in schedule and t > 0:
            state = alg.sizing.resize(params, state, Sizes(schedule[t]))
        ks, ku = step_keys(t)
        c = jnp.asarray(contexts[t])
        step = Step(jnp.int32(t), c, jnp.asarray(active[t]))
        a, aux = select(params, state, step, ks)
        if scores_of is not None:
            scores.append(np.asarray(scores_of(params, state, c, ks)))
        a = np.asarray(a)
        assert a.dtype == np.int32
        r = rewards[t, np.arange(N), a]
        state, rep = update(params, state, step, jnp.asarray(a), jnp.asarray(r), aux, ku)
        assert float(rep.rounds) == 0.0
        actions.append(a)
    return np.stack(actions), (np.stack(scores) if scores else None), state


def float_params(alg):
    """{name: scalar of the current default float dtype} of the algorithm's hyper-parameters."""
    return {k: jnp.asarray(v, float_dtype()) for k, v in alg.defaults.items()}


def normal_draws(Tn, size):
    return per_agent_normal_draws(step_keys, Tn, N, size)


agent = agent_slice


# ---------------------------------------------------------------------------------------------
# linear


@pytest.mark.parametrize("bonus", ["norm", "quadratic"])
def test_linucb_matches_numpy(bonus):
    contexts, rewards, active = make_data(0, p_active=0.7)
    with jax.enable_x64(True):
        alg = lalg.linucb(lam=0.5, beta=1.3, bonus=bonus)
        score = lambda p, s, c, k: lalg.ucb_scores(p, s, c, bonus)
        actions, scores, state = drive(alg, contexts, rewards, active, score)
    assert state.chol.dtype == jnp.float64
    for i in range(N):
        ref = linear_np.linucb(contexts[:, i], rewards[:, i], 0.5, 1.3, bonus, active=active[:, i])
        np.testing.assert_array_equal(actions[:, i], ref["actions"])
        np.testing.assert_allclose(scores[:, i], ref["scores"], **TOL)
        s = agent(state, i)
        np.testing.assert_allclose(s.chol @ s.chol.T, ref["V"], **TOL)
        np.testing.assert_allclose(s.b, ref["b"], **TOL)
        assert int(s.n) == active[:, i].sum()
    # not a degenerate run: several arms get chosen
    assert len(np.unique(actions)) > 1


def test_lints_matches_numpy_with_the_same_draws():
    contexts, rewards, active = make_data(1, p_active=0.8)
    with jax.enable_x64(True):
        alg = lalg.lints(lam=2.0, nu=0.7, max_history=25)
        z_of = lambda s, k: jax.random.normal(k, (D,), jnp.float64)
        score = lambda p, s, c, k: lalg.ts_scores(p, s, c, z_of(s, k))
        actions, scores, state = drive(alg, contexts, rewards, active, score)
        z = normal_draws(T, D)
        mu = np.asarray(jax.vmap(lalg.posterior)(state))
    for i in range(N):
        ref = linear_np.lints(contexts[:, i], rewards[:, i], z[:, i], 2.0, 0.7, active=active[:, i], max_history=25)
        np.testing.assert_array_equal(actions[:, i], ref["actions"])
        np.testing.assert_allclose(scores[:, i], ref["scores"], **TOL)
        s = agent(state, i)
        np.testing.assert_allclose(s.chol @ s.chol.T, ref["V"], **TOL)
        np.testing.assert_allclose(mu[i], ref["mu"], **TOL)
        assert int(s.n) == ref["n"] == min(25, active[:, i].sum())


# ---------------------------------------------------------------------------------------------
# kernel


@pytest.mark.parametrize("name", ["rbf", "laplacian", "polynomial"])
def test_kernel_ucb_matches_numpy(name):
    contexts, rewards, active = make_data(2, p_active=0.8)
    kern = get_kernel(name)
    with jax.enable_x64(True):
        alg = kalg.kernel_ucb(kernel=name, lam=0.3, beta=1.5, lengthscale=0.8)
        post = lambda p, s, c, k: jnp.stack(kalg.posterior(kern, p, s, c))
        actions, mv, state = drive(alg, contexts, rewards, active, post)
    assert state.X.shape == (N, T, D)  # rows1 = T by default
    for i in range(N):
        ref = kernel_np.kernel_ucb(contexts[:, i], rewards[:, i], name, 0.3, 1.5, 0.8, active=active[:, i])
        np.testing.assert_array_equal(actions[:, i], ref["actions"])
        np.testing.assert_allclose(mv[:, i, 0], ref["mean"], **TOL)
        np.testing.assert_allclose(mv[:, i, 1], ref["var"], **TOL)
        s = agent(state, i)
        n = int(s.n)
        assert n == len(ref["y"])
        np.testing.assert_array_equal(s.X[:n], ref["X"])
        np.testing.assert_array_equal(s.y[:n], ref["y"])
        A = kernel_np.kernel_matrix(name, ref["X"], ref["X"], 0.8) + 0.3 * np.eye(n)
        np.testing.assert_allclose(s.chol_inv[:n, :n], np.linalg.inv(np.linalg.cholesky(A)), **TOL)
        np.testing.assert_array_equal(s.chol_inv[n:, n:], np.eye(T - n))
    assert len(np.unique(actions)) > 1


def test_kernel_ts_matches_numpy_with_the_same_draws():
    contexts, rewards, active = make_data(3)
    kern = get_kernel("matern52")
    with jax.enable_x64(True):
        alg = kalg.kernel_ts(kernel="matern52", lam=0.5, nu=0.4, lengthscale=1.2, var_floor=1e-3)
        score = lambda p, s, c, k: kalg.ts_scores(kern, p, s, c, jax.random.normal(k, (K,), jnp.float64))
        actions, scores, _ = drive(alg, contexts, rewards, active, score)
        z = normal_draws(T, K)
    for i in range(N):
        ref = kernel_np.kernel_ts(contexts[:, i], rewards[:, i], z[:, i], "matern52", 0.5, 0.4, 1.2, var_floor=1e-3)
        np.testing.assert_array_equal(actions[:, i], ref["actions"])
        np.testing.assert_allclose(scores[:, i], ref["scores"], **TOL)


def test_kernel_ucb_resize_mid_run_changes_nothing():
    contexts, rewards, active = make_data(4, p_active=0.9)
    with jax.enable_x64(True):
        alg = kalg.kernel_ucb(kernel="rbf", lam=0.3, beta=1.0)
        spec = EnvSpec(N, K, D, T)
        # doubling segments as the runner builds them: capacities 5, 10, 20, 40
        schedule = [(0, alg.sizing.rows(spec, 5)), (5, alg.sizing.rows(spec, 10)), (10, 20), (20, 40)]
        a_seg, _, s_seg = drive(alg, contexts, rewards, active, schedule=schedule)
        a_full, _, s_full = drive(alg, contexts, rewards, active)
    np.testing.assert_array_equal(a_seg, a_full)
    assert s_seg.chol_inv.shape == s_full.chol_inv.shape == (N, T, T)
    np.testing.assert_array_equal(np.asarray(s_seg.n), np.asarray(s_full.n))
    np.testing.assert_allclose(np.asarray(s_seg.chol_inv), np.asarray(s_full.chol_inv), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(s_seg.X), np.asarray(s_full.X))
    for i in range(N):
        ref = kernel_np.kernel_ucb(contexts[:, i], rewards[:, i], "rbf", 0.3, 1.0, active=active[:, i])
        np.testing.assert_array_equal(a_seg[:, i], ref["actions"])


def test_kernel_ucb_max_history_stops_growth():
    contexts, rewards, active = make_data(5)
    with jax.enable_x64(True):
        alg = kalg.kernel_ucb(kernel="laplacian", lam=1.0, beta=0.5, max_history=12)
        spec = EnvSpec(N, K, D, T)
        assert alg.sizing.rows(spec, T) == 12 and alg.sizing.rows(spec, 7) == 7
        # segments of 7 and then the capped 12 rows
        actions, _, state = drive(alg, contexts, rewards, active, schedule=[(0, 7), (7, 12)])
    assert state.X.shape == (N, 12, D)
    np.testing.assert_array_equal(np.asarray(state.n), 12)
    for i in range(N):
        ref = kernel_np.kernel_ucb(contexts[:, i], rewards[:, i], "laplacian", 1.0, 0.5, max_history=12)
        np.testing.assert_array_equal(actions[:, i], ref["actions"])
        np.testing.assert_array_equal(np.asarray(state.y[i]), ref["y"])


def test_inactive_agents_keep_their_state():
    contexts, rewards, _ = make_data(6, T=6)
    active = np.array([True, False, True])
    with jax.enable_x64(True):
        for alg in (lalg.linucb(), lalg.lints(), kalg.kernel_ucb(), kalg.kernel_ts()):
            update = jax.jit(alg.update)
            spec = EnvSpec(N, K, D, 6)
            params = float_params(alg)
            state = alg.init(jax.random.key(0), spec, params, Sizes(alg.sizing.rows(spec, 6) if alg.sizing else None))
            for t in range(3):  # some data first, so the state is not the initial one
                step = Step(jnp.int32(t), jnp.asarray(contexts[t]), jnp.ones(N, bool))
                state, _ = update(params, state, step, jnp.zeros(N, jnp.int32), jnp.asarray(rewards[t, :, 0]), (),
                                  step_keys(t)[1])
            step = Step(jnp.int32(3), jnp.asarray(contexts[3]), jnp.asarray(active))
            a, aux = jax.jit(alg.select)(params, state, step, step_keys(3)[0])
            new, _ = update(params, state, step, a, jnp.asarray(rewards[3, :, 0]), aux, step_keys(3)[1])
            for old_leaf, new_leaf in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(new)):
                np.testing.assert_array_equal(np.asarray(new_leaf[1]), np.asarray(old_leaf[1]))
            # the active agents did learn
            changed = [not np.array_equal(np.asarray(o[0]), np.asarray(nw[0]))
                       for o, nw in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(new))]
            assert any(changed), alg.name


def test_hparams_are_traced_a_grid_is_a_vmap():
    contexts, _, _ = make_data(7, T=1)
    with jax.enable_x64(True):
        alg = kalg.kernel_ucb(kernel="rbf")
        kern = get_kernel("rbf")
        spec = EnvSpec(N, K, D, 4)
        grid = {"lam": jnp.array([0.5, 1.0]), "beta": jnp.array([0.0, 2.0]), "lengthscale": jnp.array([0.5, 2.0])}
        states = jax.vmap(lambda p: alg.init(jax.random.key(0), spec, p, Sizes(4)))(grid)
        np.testing.assert_array_equal(np.asarray(states.chol_inv[1, 0]), np.eye(4))
        step = Step(jnp.int32(0), jnp.asarray(contexts[0]), jnp.ones(N, bool))
        acts = jax.vmap(lambda p, s: alg.select(p, s, step, jax.random.key(1))[0])(grid, states)
        assert acts.shape == (2, N)
        # the traced hyper-parameters reach update and posterior: the vmapped grid equals each point alone
        rewards = jnp.ones((N,), jnp.float64)
        learn = lambda p, s, a: alg.update(p, s, step, a, rewards, (), jax.random.key(2))[0]  # noqa: E731
        states = jax.vmap(learn)(grid, states, acts)
        agent0 = jax.tree_util.tree_map(lambda a: a[:, 0], states)
        c = jnp.asarray(contexts[0, 0])
        var = jax.vmap(lambda p, s: kalg.posterior(kern, p, s, c)[1])(grid, agent0)
        for j in range(2):
            point = {k: v[j] for k, v in grid.items()}
            alone = kalg.posterior(kern, point, jax.tree_util.tree_map(lambda a: a[j], agent0), c)[1]
            np.testing.assert_allclose(np.asarray(var[j]), np.asarray(alone), rtol=1e-12, atol=1e-14)
        assert not np.allclose(var[0], var[1])


def test_float32_mode_keeps_float32_state():
    contexts, rewards, active = make_data(8, T=3)
    alg = kalg.kernel_ucb()
    _, _, state = drive(alg, contexts.astype(np.float32), rewards.astype(np.float32), active)
    assert state.chol_inv.dtype == state.y.dtype == jnp.float32
    alg = lalg.linucb()
    _, _, state = drive(alg, contexts, rewards, active)  # float64 inputs are cast to the state dtype
    assert state.chol.dtype == jnp.float32


def test_config_errors_before_compiling():
    with pytest.raises(ConfigError, match="lam must be a finite number > 0"):
        lalg.linucb(lam=-1.0)
    with pytest.raises(ConfigError, match="lam must be a finite number > 0"):
        kalg.kernel_ucb(lam=-0.1)
    with pytest.raises(ConfigError, match="nu must be a finite number >= 0"):
        lalg.lints(nu=-1.0)
    with pytest.raises(ConfigError, match="beta must be a finite number >= 0"):
        kalg.kernel_ucb(beta=-1.0)
    with pytest.raises(ConfigError, match="lengthscale must be a finite number > 0"):
        kalg.kernel_ts(lengthscale=0.0)
    with pytest.raises(ConfigError, match="unknown option.*gamma"):
        make_algorithm("linucb", gamma=1.0)
    with pytest.raises(ConfigError, match="known kernels"):
        kalg.kernel_ucb(kernel="nope")
    with pytest.raises(ConfigError, match="max_history"):
        kalg.kernel_ucb(max_history=0)
    with pytest.raises(ConfigError, match="bonus"):
        lalg.linucb(bonus="sqrt")
