"""FN-UCB in mode=authors against a recorded run of the authors' own code (an external oracle).

../shared/data/fnucb_authors_replay/ (see its README) holds, for the synthetic cosine experiment
with N = 1 and N = 2 agents, the authors' initial network (torch layout, out x in), the contexts
and the rewards of every arm at each of 2,000 iterations, the noiseless means, and the arms the
authors' code chose. Run from that network on that stream, the algorithm that the registered
experiment fnucb/fig1a builds for mode=authors must choose the same arms (every agent) at 99% of
the iterations or more and reach the recorded pseudo-regret to 1e-3 (relative) (`pytest -m slow`);
the default suite replays the first 500 iterations, where every arm must be the same.

Measured (float64): N = 1, the same arms at 1986 of 2000 iterations, regret 64.7178 against
64.7233 (8.6e-5 relative); N = 2, 1999 of 2000, 21.3702 against 21.3667 (1.6e-4). The first
disagreement of each run is a near-tie: the two best scores differ by 1e-4 (N = 1, t = 580) and
4e-6 (N = 2, t = 1114) of the largest, where the code's float32 arithmetic (a fresh
torch.inverse of V every step) decides; after it the two histories differ by one observation and
the later disagreements are near-ties of slightly different states. Run in float32, the same
algorithm chooses the recorded arm at all 2000 iterations for N = 2 (and at the same 1986 for
N = 1).
"""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.fnucb import fn_ucb as fn
from bandits_jax.core import ConfigError, EnvSpec, Sizes
from bandits_jax.experiments.registry import build_runs, resolve_config
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.runner import replay
from helpers import REAL_DIR, skip_without_data

REPLAY_DIR = REAL_DIR / "fnucb_authors_replay"
RECORDED_REGRET = {1: 64.723, 2: 21.367}  # the data README's pseudo-regret of the authors' choices


def recorded(num_agents):
    path = REPLAY_DIR / f"cosine_N{num_agents}.npz"
    if not path.is_file():
        skip_without_data(f"fnucb_authors_replay/{path.name}")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def network(data):
    """The recorded torch layers (W [out, in], b [out]) as the flax dict of `init_mlp` (kernel = W^T)."""
    return {f"layer_{i}": {"kernel": jnp.asarray(data[f"W{i + 1}"]).T, "bias": jnp.asarray(data[f"b{i + 1}"])}
            for i in range(2)}


def authors_fn_ucb(num_agents):
    """FN-UCB as the registered fig1a (cosine) experiment builds it in mode=authors."""
    exp = get_experiment("fnucb/fig1a")
    config = resolve_config(exp, "paper", {"mode": "authors", "n_values": str(num_agents), "baselines": False})
    ((problem, alg, _),) = build_runs(exp, config)
    assert problem.spec[:3] == (num_agents, 4, 10)
    return alg


# the default suite replays the first 500 iterations (before the first near-tie of either run);
# the whole 2,000 run with `pytest -m slow`
PREFIX = 500
HEADLINE = [pytest.mark.slow, pytest.mark.headline]  # the whole replay: CI runs it after the suite


@pytest.mark.parametrize("num_agents, prefix", [pytest.param(1, PREFIX, marks=pytest.mark.slow), (2, PREFIX),
                                                pytest.param(1, None, marks=HEADLINE),
                                                pytest.param(2, None, marks=HEADLINE)])
def test_authors_mode_chooses_the_authors_arms(num_agents, prefix):
    data = recorded(num_agents)
    if prefix is not None:
        data = {k: v[:prefix] if k in ("contexts", "rewards", "means", "actions") else v for k, v in data.items()}
    T = data["actions"].shape[0]
    alg = authors_fn_ucb(num_agents)
    config = alg.init.args[0]
    # the recording's configuration (data README): Less Comm., full covariance, width 20, D = 0, ...
    assert (config.variant, config.covariance, config.width, config.train_steps, config.train_until) == \
        ("less", "full", 20, 30, 2000)
    assert (config.alpha_warmup, config.alpha_ramp, config.trigger) == (3, 700, "diag")
    assert (config.networks, config.training) == (fn.SHARED, fn.ROUND_DATA)  # the authors' code: Q1 and Q2
    assert alg.defaults == dict(lam=0.1, nu_tkn=0.1, nu_tk=0.1, D=0.0, lr=0.01)
    with jax.enable_x64(True):
        _, actions, _, regret, _ = replay(
            alg, EnvSpec(num_agents, 4, 10, T), {}, jnp.asarray(data["contexts"]), jnp.asarray(data["rewards"]),
            jnp.ones((T, num_agents), bool), jax.random.PRNGKey(0), means=jnp.asarray(data["means"]),
            start=partial(fn.with_network, theta0=network(data)))
    actions, regret = np.asarray(actions), np.asarray(regret)
    means, theirs = data["means"], data["actions"]
    their_regret = (means.max(-1) - np.take_along_axis(means, theirs[..., None], -1)[..., 0]).sum(0).mean()
    if prefix is None:
        assert their_regret == pytest.approx(RECORDED_REGRET[num_agents], abs=5e-4)
    same = np.all(actions == theirs, axis=1)
    assert same.mean() >= (0.99 if prefix is None else 1.0), f"the same arms at {same.sum()} of {T} iterations; first differences at " \
                                f"{np.flatnonzero(~same)[:10].tolist()}"
    assert regret.sum(0).mean() == pytest.approx(their_regret, rel=1e-3)


def test_with_network_writes_every_copy_and_checks_the_layout():
    alg = fn.fn_ucb(width=4, parameterization="authors", feature_scale="raw", loss="authors")
    with jax.enable_x64(True):
        params = {k: jnp.asarray(v) for k, v in alg.defaults.items()}
        state = alg.init(jax.random.PRNGKey(0), EnvSpec(3, 2, 5, 10), params, Sizes(10))
        given = jax.tree_util.tree_map(lambda a: np.full(a.shape, 0.5, np.float32), state.nets.theta0)
        new = fn.with_network(state, given)
        for tree, lead in ((new.nets.theta0, ()), (new.nets.theta_sync, ()), (new.nets.theta, (3,))):
            for leaf in jax.tree_util.tree_leaves(tree):
                assert leaf.dtype == jnp.float64 and leaf.shape[:len(lead)] == lead
                np.testing.assert_array_equal(leaf, 0.5)
        wrong = dict(given, layer_0={"kernel": np.zeros((4, 5)), "bias": np.zeros(4)})  # kernel is [in, out] = [5, 4]
        with pytest.raises(ConfigError, match="layout"):
            fn.with_network(state, wrong)
