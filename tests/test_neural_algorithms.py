"""Neural UCB / Neural TS against a plain NumPy loop (hand-written backprop, fresh inverses).

The JAX algorithm's init/select/update are driven one step at a time (jitted) in float64 on
contexts and rewards drawn by NumPy. The NumPy reference starts from the same initial
parameters (read from the JAX state) and, for TS, uses the standard-normal draws reproduced from
the select keys. Actions must agree exactly; predictions, widths, parameters and Z to 1e-7. The
predictions and widths are `neural.mean_and_width` of each agent's state before its select.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bandits_jax.algorithms.single import neural
from bandits_jax.core import ConfigError, EnvSpec, Sizes, Step

from reference import neural_np
from helpers import agent_slice, assert_one_active_matches, default_params, per_agent_normal_draws

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

N, K, T = 2, 4, 25
TOL = dict(rtol=1e-7, atol=1e-9)


def make_data(seed, d, T=T):
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((T, N, K, d))
    contexts /= np.linalg.norm(contexts, axis=-1, keepdims=True)
    direction = rng.standard_normal(d)
    rewards = np.cos(2.0 * contexts @ direction) + 0.1 * rng.standard_normal((T, N, K))
    return contexts, rewards


def step_keys(t):
    return jax.random.split(jax.random.fold_in(jax.random.key(11), t))


def config_for(kind, width, train_steps, train_until, options):
    """The NeuralConfig the factory builds from these options (depth 2, the factory's defaults)."""
    o = dict(dict(parameterization="authors", feature_scale="raw", loss="authors"), **options)
    return neural.neural_config("test", kind, width, 2, train_steps, train_until, o["covariance"],
                                o["parameterization"], o["feature_scale"], o["loss"])


def step_at(t, contexts, active=None):
    n = contexts.shape[0]
    return Step(jnp.int32(t), jnp.asarray(contexts), jnp.asarray(np.ones(n, bool) if active is None else active))


def drive(alg, config, contexts, rewards, schedule=((0, None),)):
    """Run alg over the steps of contexts [T, N, K, d]; schedule: (t, rows) resize points.

    Returns actions [T, N], mean [T, N, K], width [T, N, K] (each agent's before its select),
    the initial and the final state. Float64 params; call inside jax.enable_x64.
    """
    Tn, _, _, d = contexts.shape
    spec = EnvSpec(N, K, d, Tn)
    schedule = dict(schedule)
    params = default_params(alg)
    rows0 = alg.sizing.rows(spec, Tn) if schedule[0] is None else schedule[0]
    state = jax.jit(alg.init, static_argnums=(1, 3))(jax.random.key(0), spec, params, Sizes(rows0))
    init_state = state
    select, update = jax.jit(alg.select), jax.jit(alg.update)
    mean_width = jax.jit(jax.vmap(partial(neural.mean_and_width, config)))
    actions, means, widths = [], [], []
    for t in range(Tn):
        if t in schedule and t > 0:
            state = alg.sizing.resize(params, state, Sizes(schedule[t]))
        ks, ku = step_keys(t)
        step = step_at(t, contexts[t])
        mean, width = mean_width(state, step.contexts)
        a, aux = select(params, state, step, ks)
        a = np.asarray(a)
        assert a.dtype == np.int32
        r = rewards[t, np.arange(N), a]
        state, rep = update(params, state, step, jnp.asarray(a), jnp.asarray(r), aux, ku)
        assert float(rep.rounds) == 0.0
        actions.append(a)
        means.append(np.asarray(mean))
        widths.append(np.asarray(width))
    return np.stack(actions), np.stack(means), np.stack(widths), init_state, state


def normal_draws(Tn):
    return per_agent_normal_draws(step_keys, Tn, N, K)


agent = agent_slice


def jax_to_numpy_order(params, d, width, options):
    """perm with theta_numpy = theta_jax[perm] (the two flattenings order parameters differently)."""
    flat, unravel = ravel_pytree(params)
    coded = unravel(jnp.arange(flat.size, dtype=flat.dtype))
    net = neural_np.TwoLayerNet(d, width, biases=options.get("parameterization", "authors") == "authors")
    return net.flatten(*neural_np.from_flax(coded)).astype(np.int64)


CASES = {
    # name: (kind, d, width, train_until, options)
    "ucb-full": ("ucb", 5, 8, 1000, dict(covariance="full")),
    "ucb-diag-stop": ("ucb", 5, 8, 15, dict(covariance="diag")),
    "ts-full": ("ts", 5, 10, 1000, dict(covariance="full")),
    "ts-diag-stop": ("ts", 10, 12, 15, dict(covariance="diag")),
    "ucb-full-paper": ("ucb", 10, 8, 1000,
                       dict(covariance="full", parameterization="paper", feature_scale="sqrt_m", loss="paper")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_numpy_reference(case):
    kind, d, width, train_until, options = CASES[case]
    lam, coef, lr, steps = 0.5, 0.3, 0.01, 5
    contexts, rewards = make_data(len(case), d)
    with jax.enable_x64(True):
        make = neural.neural_ucb if kind == "ucb" else neural.neural_ts
        alg = make(lam, coef, lr, width=width, depth=2, train_steps=steps, train_until=train_until, **options)
        config = config_for(kind, width, steps, train_until, options)
        actions, means, widths, init_state, state = drive(alg, config, contexts, rewards)
        z = normal_draws(T) if kind == "ts" else np.zeros((T, N, K))
        flat0 = np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(init_state.theta))
        flat = np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(state.theta))
        perms = [jax_to_numpy_order(agent(init_state.theta, i), d, width, options) for i in range(N)]
    assert state.cov.dtype == jnp.float64
    for i in range(N):
        init_params = agent(init_state.theta, i)
        ref = neural_np.run(
            contexts[:, i], rewards[:, i], neural_np.from_flax(init_params), kind, lam, coef, lr, steps, train_until,
            covariance=options["covariance"], loss=options.get("loss", "authors"),
            feature_scale=options.get("feature_scale", "raw"), z=z[:, i],
        )
        np.testing.assert_array_equal(actions[:, i], ref["actions"])
        np.testing.assert_allclose(means[:, i], ref["mean"], **TOL)
        np.testing.assert_allclose(widths[:, i], ref["width"], **TOL)
        s = agent(state, i)
        perm = perms[i]
        np.testing.assert_allclose(flat[i][perm], ref["theta"], **TOL)
        Z = s.cov @ s.cov.T if options["covariance"] == "full" else s.cov
        Z = Z[np.ix_(perm, perm)] if Z.ndim == 2 else Z[perm]
        np.testing.assert_allclose(Z, ref["Z"], **TOL)
        assert int(s.n) == ref["n"] == min(T, train_until)
        assert int(s.t) == T
    # a real run: the networks moved and several arms were chosen
    assert len(np.unique(actions)) > 1
    assert np.abs(flat - flat0).max() > 1e-3
    if kind == "ts":
        assert np.any(np.abs(z).max(axis=-1) > 0.5)


def test_resize_mid_run_changes_nothing():
    d = 5
    contexts, rewards = make_data(3, d, T=14)
    with jax.enable_x64(True):
        alg = neural.neural_ts(0.5, 0.3, 0.01, width=8, train_steps=3, train_until=1000, covariance="diag")
        config = config_for("ts", 8, 3, 1000, dict(covariance="diag"))
        spec = EnvSpec(N, K, d, 14)
        assert alg.sizing.rows(spec, 14) == 14 and alg.sizing.rows(spec, 5) == 5
        fixed = drive(alg, config, contexts, rewards, schedule=((0, 14),))
        grown = drive(alg, config, contexts, rewards, schedule=((0, 5), (5, 14)))
    np.testing.assert_array_equal(fixed[0], grown[0])
    np.testing.assert_allclose(fixed[1], grown[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fixed[2], grown[2], rtol=1e-12, atol=1e-12)
    for a, b in zip(jax.tree_util.tree_leaves(fixed[4].theta), jax.tree_util.tree_leaves(grown[4].theta)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert grown[4].X.shape == (N, 14, d)


def test_training_stops_at_train_until_and_inactive_agents_wait():
    d, Tn, stop, idle = 4, 9, 5, 2  # agent 1 is inactive at step `idle`
    contexts, rewards = make_data(4, d, T=Tn)
    with jax.enable_x64(True):
        alg = neural.neural_ucb(0.5, 0.3, 0.05, width=6, train_steps=2, train_until=stop, covariance="diag")
        spec = EnvSpec(N, K, d, Tn)
        assert alg.sizing.rows(spec, Tn) == stop and alg.sizing.rows(spec, 3) == 3
        params = default_params(alg)
        state = jax.jit(alg.init, static_argnums=(1, 3))(jax.random.key(1), spec, params, Sizes(stop))
        select, update = jax.jit(alg.select), jax.jit(alg.update)
        flat = jax.jit(jax.vmap(lambda p: ravel_pytree(p)[0]))
        for t in range(Tn):
            active = np.array([True, t != idle])
            step = step_at(t, contexts[t], active)
            a, aux = select(params, state, step, step_keys(t)[0])
            r = rewards[t, np.arange(N), np.asarray(a)]
            new, _ = update(params, state, step, a, jnp.asarray(r), aux, step_keys(t)[1])
            change = np.abs(np.asarray(flat(new.theta) - flat(state.theta))).max(axis=1)
            own_step = np.array([t, t - (t > idle)])
            np.testing.assert_array_equal(change > 1e-8, active & (own_step < stop), err_msg=f"step {t}")
            cov_change = np.abs(np.asarray(new.cov - state.cov)).max(axis=1)
            np.testing.assert_array_equal(cov_change > 0, active)  # Z keeps updating after the stop
            assert np.all(np.asarray(new.cov) >= np.asarray(state.cov))
            state = new
    np.testing.assert_array_equal(np.asarray(state.n), [stop, stop])
    np.testing.assert_array_equal(np.asarray(state.t), [Tn, Tn - 1])


@pytest.mark.slow  # base.independent's one-active path is checked in the fast suite by NKernelUCB (test_dis_kernel)
def test_one_active_protocol_matches_the_all_agent_path():
    # base.independent under spec.one_active: the active agent's numbers bit for bit, ERR_MULTI_ACTIVE loud
    assert_one_active_matches(neural.neural_ts(0.5, 0.3, 0.05, width=4, train_steps=2, covariance="diag"), d=4)


@pytest.mark.parametrize(
    "make,kwargs,match",
    [
        (neural.neural_ucb, dict(lam=-0.1), "lam"),
        (neural.neural_ucb, dict(lam=0.0), "lam"),
        (neural.neural_ts, dict(nu=-1.0), "nu"),
        (neural.neural_ucb, dict(lr=-0.01), "lr"),
        (neural.neural_ucb, dict(gamma=1.0), "unknown"),
        (neural.neural_ts, dict(beta=1.0), "unknown"),
        (neural.neural_ucb, dict(covariance="dense"), "covariance"),
        (neural.neural_ts, dict(parameterization="torch"), "parameterization"),
        (neural.neural_ucb, dict(feature_scale="m"), "feature_scale"),
        (neural.neural_ucb, dict(loss="mse"), "loss"),
        (neural.neural_ucb, dict(depth=1), "depth"),
        (neural.neural_ucb, dict(width=0), "width"),
        (neural.neural_ucb, dict(train_steps=-1), "train_steps"),
        (neural.neural_ts, dict(train_until=2.5), "train_until"),
        (neural.neural_ucb, dict(width=7, parameterization="paper"), "even width"),
    ],
)
def test_bad_configuration_raises(make, kwargs, match):
    from bandits_jax.algorithms import make_algorithm

    with pytest.raises(ConfigError, match=match):
        make_algorithm(make.__name__, **kwargs)


def test_paper_parameterization_needs_even_dimension():
    alg = neural.neural_ucb(width=8, parameterization="paper")
    params = {k: jnp.asarray(v) for k, v in alg.defaults.items()}
    with pytest.raises(ConfigError, match="pad_to_even"):
        alg.init(jax.random.key(0), EnvSpec(2, 3, 7, 10), params, Sizes(4))
    state = alg.init(jax.random.key(0), EnvSpec(2, 3, 8, 10), params, Sizes(4))
    assert state.X.shape == (2, 4, 8) and state.cov.shape == (2, 8 * 8 + 8, 8 * 8 + 8)
    assert alg.defaults == {"lam": 0.1, "beta": pytest.approx(np.sqrt(0.1 * 0.01)), "lr": 0.01}
