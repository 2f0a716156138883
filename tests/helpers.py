"""Helpers shared by several test files."""
from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.core import call_select
from bandits_jax.problems.datasets import DATA_DIR_ENV

# The offline copies of the real data sets live next to the repository; a user's clone has none.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL_DIR = Path(os.environ.get(DATA_DIR_ENV) or SHARED_DATA)


def needs_data(name: str):
    """Skip a test when the data file `name` is not in the shared data folder."""
    return pytest.mark.skipif(not (REAL_DIR / name).is_file(),
                              reason=f"{name} not found in the shared data folder (../shared/data next to the "
                                     f"repository) or in ${DATA_DIR_ENV}")


def async_arrays(N, K, d, T, seed):
    """contexts [T, N, K, d], noisy rewards [T, N, K], arrivals [T] and active masks [T, N] for tests."""
    rng = np.random.default_rng(seed)
    contexts = rng.normal(size=(T, N, K, d)) / np.sqrt(d)
    theta = rng.normal(size=d)
    rewards = np.cos(3 * contexts @ theta) + 0.1 * rng.normal(size=(T, N, K))
    arrivals = rng.integers(0, N, size=T)
    active = np.arange(N)[None, :] == arrivals[:, None]
    return contexts, rewards, arrivals, active


def drive_with_and_without_resize(algo, spec, contexts, rewards, active, split: int, dict_rows=None):
    """Run an algorithm step by step on given arrays twice: with capacity T from the start, and with
    capacity `split` resized to T at step `split` (demand-sized buffers to `dict_rows` when given).
    Float64 hparams; call inside jax.enable_x64.
    Returns (state_full, actions_full [T, N], state_resized, actions_resized [T, N])."""
    T, N = contexts.shape[0], contexts.shape[1]
    hp = {k: jnp.asarray(v, jnp.float64) for k, v in algo.hparams.items()}
    key = jax.random.PRNGKey(0)
    select = jax.jit(lambda s, c, k, act: call_select(algo, s, c, k, act))
    update = jax.jit(algo.update)

    def steps(state, t0, t1):
        acts = []
        for t in range(t0, t1):
            a, _ = select(state, jnp.asarray(contexts[t]), jax.random.fold_in(key, t), jnp.asarray(active[t]))
            r = jnp.asarray(rewards[t])[jnp.arange(N), a]
            state, _ = update(state, jnp.asarray(contexts[t]), a, r, jnp.asarray(active[t]), key)
            acts.append(np.asarray(a))
        return state, acts

    full, acts_full = steps(algo.init(key, spec, hp, T), 0, T)
    small, acts_small = steps(algo.init(key, spec, hp, split), 0, split)
    small = algo.resize(small, T) if dict_rows is None else algo.resize(small, T, dict_rows)
    small, acts_rest = steps(small, split, T)
    return full, np.array(acts_full), small, np.array(acts_small + acts_rest)


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


def rollout_seeing_active(algo, spec, hp, contexts, rewards, active, key, capacity=None):
    """`async_kernel.rollout` with the chosen rewards, regret and communication pulled out.

    contexts[T, N, K, d], rewards[T, N, K] (every arm), active[T, N]. Returns (final state,
    (actions[T, N], chosen rewards[T, N], regret[T, N] = max_k rewards - chosen on active clients
    (0 elsewhere), {comm_up, comm_down, rounds: [T]})).
    """
    from bandits_jax.algorithms.async_kernel import rollout
    from bandits_jax.core import COMM_KEYS

    state, actions, _, uinfo = rollout(algo, spec, hp, contexts, rewards, active, key, capacity)
    r = jnp.take_along_axis(jnp.asarray(rewards), actions[..., None], axis=-1)[..., 0]
    regret = jnp.where(active, jnp.max(rewards, axis=-1) - r, 0.0)
    return state, (actions, r, regret, {k: jnp.asarray(uinfo[k], r.dtype) for k in COMM_KEYS})


def assert_one_active_matches(factory, static=None, hp=None, N=4, K=5, d=3, T=40, seed=0):
    """one_active=True gives the active clients' actions, rewards, regret and communication of
    one_active=False, bit for bit: on given arrays (float64, one arrival per step), and through
    the runner on a small async-f1 problem with two capacity segments. Also: the one_active
    algorithm sees the mask, and two active clients at a step make its communication NaN.
    Returns the communication of the array run (for informativeness checks)."""
    from bandits_jax import runner
    from bandits_jax.core import EnvSpec
    from bandits_jax.problems import make_problem

    static = dict(static or {})
    hp_raw = {k: float(v) for k, v in (hp or {}).items()}
    base, one = factory(**static), factory(**static, one_active=True)
    assert not base.sees_active and one.sees_active
    spec = EnvSpec(N, K, d, T)
    key = jax.random.PRNGKey(3)
    with jax.enable_x64(True):
        hp = {k: jnp.asarray(v, jnp.float64) for k, v in hp_raw.items()}
        contexts, rewards, arrivals, active = (jnp.asarray(a) for a in async_arrays(N, K, d, T, seed))

        def compiled(algo):  # one compilation per algorithm (the two-active run reuses one's)
            f = jax.jit(lambda h, c, r, a: rollout_seeing_active(algo, spec, h, c, r, a, key))
            return lambda act: jax.device_get(f(hp, contexts, rewards, act))

        run_base, run_one = compiled(base), compiled(one)
        _, (a0, r0, g0, c0) = run_base(active)
        _, (a1, r1, g1, c1) = run_one(active)
        rows = np.arange(T), np.asarray(arrivals)
        np.testing.assert_array_equal(a1[rows], a0[rows])
        np.testing.assert_array_equal(r1[rows], r0[rows])
        np.testing.assert_array_equal(g1, g0)
        for name in c0:
            np.testing.assert_array_equal(c1[name], c0[name], err_msg=name)
        assert not np.isnan(c0["comm_up"]).any()
        # the inactive clients' actions are 0 under one_active
        assert np.all(np.where(np.asarray(active), 0, a1) == 0)
        # informative: the active clients do not always pick the same arm
        assert len(np.unique(a0[rows])) > 1
        # two clients active at a step: loud, not silent
        two = np.asarray(active).copy()
        two[T // 2, :2] = True
        _, (_, _, _, c2) = run_one(jnp.asarray(two))
        assert np.isnan(c2["comm_up"][T // 2]) and np.isnan(c2["comm_down"][T // 2])
        assert not np.isnan(c2["comm_up"][: T // 2]).any()

    problem = make_problem("async-f1", num_agents=N, num_arms=K, dim=d, horizon=T, noise_std=0.1)
    outs = [runner.run_batch(problem, algo, [0, 1], {k: np.full(2, v) for k, v in hp_raw.items()},
                             precision="float64", first_segment=T // 2)
            for algo in (base, one)]
    for name in ("regret", "comm_up", "comm_down", "rounds"):
        np.testing.assert_array_equal(getattr(outs[1], name), getattr(outs[0], name), err_msg=name)
    assert outs[0].regret.sum() > 0
    return c0
