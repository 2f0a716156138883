"""The runner: seed invariance, common random numbers, segments, grids, devices, precision."""
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.uniform import uniform_random
from bandits_jax.core import ConfigError
from bandits_jax import runner
from bandits_jax.runner import cumulative_regret, run_batch, run_trials, segments

sys.path.insert(0, str(Path(__file__).parent))
from toy import history_greedy, toy_problem  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_seed_results_do_not_depend_on_batch():
    prob, alg = toy_problem(horizon=150), history_greedy()
    full = run_batch(prob, alg, [0, 1, 2, 3, 4])
    part = run_batch(prob, alg, [3, 1])
    np.testing.assert_array_equal(full.regret[[3, 1]], part.regret)
    single = run_batch(prob, alg, [4])
    np.testing.assert_array_equal(full.regret[4], single.regret[0])
    # different seeds really differ
    assert not np.allclose(full.regret[0], full.regret[1])


def test_regret_is_pseudo_regret_against_noiseless_means():
    prob, alg = toy_problem(horizon=50, noise_std=5.0), uniform_random()
    out = run_batch(prob, alg, [7])
    assert out.regret.shape == (1, 50, 3)
    assert np.all(out.regret >= 0)
    # recompute by hand from the same keys: the chosen arm's mean vs the best mean
    with jax.enable_x64(True):
        pk, ak = runner.problem_and_algorithm_keys(runner.seed_key(7))
        pik, _ = runner.init_keys(pk, ak)
        inst = prob.init(pik)
        for t in (0, 13, 49):
            kc, _, _ = runner.problem_step_keys(pk, t)
            x = prob.contexts(inst, t, kc)
            means = np.asarray(prob.mean_reward(inst, t, x))
            ks, _ = runner.algorithm_step_keys(ak, t)
            actions = np.asarray(alg.select(None, x, ks)[0])
            expect = means.max(1) - means[np.arange(3), actions]
            np.testing.assert_allclose(out.regret[0, t], expect, rtol=1e-12, atol=1e-12)


def test_common_random_numbers_across_algorithms():
    """Two different algorithms that happen to pick the same arms get the same regret: they saw the
    same contexts, however differently they consumed their own keys and grew their state."""
    prob = toy_problem(horizon=150)
    first_arm = lambda state, contexts, key: (jnp.zeros(contexts.shape[0], jnp.int32), {})
    stateless = uniform_random()._replace(name="Arm0", select=first_arm)
    growing = history_greedy()._replace(name="Arm0-growing", select=first_arm)
    a = run_batch(prob, stateless, [3, 4])
    b = run_batch(prob, growing, [3, 4], first_segment=16)
    np.testing.assert_array_equal(a.regret, b.regret)
    assert a.regret.sum() > 0  # arm 0 is often not the best: the comparison has content


def test_segments_double_and_cover_horizon():
    prob, alg = toy_problem(horizon=1000), history_greedy()
    segs = segments(alg, prob, first=100)
    assert segs == [(0, 100, 100), (100, 200, 200), (200, 400, 400), (400, 800, 800), (800, 1000, 1000)]
    assert segments(uniform_random(), prob) == [(0, 1000, None)]


def test_segmenting_does_not_change_results():
    prob, alg = toy_problem(horizon=300), history_greedy()
    seg = run_batch(prob, alg, [0, 1], first_segment=32)
    one = run_batch(prob, alg, [0, 1], first_segment=300)
    np.testing.assert_allclose(seg.regret, one.regret, rtol=0, atol=1e-12)


def test_hyperparameter_grid_and_unknown_names():
    prob, alg = toy_problem(horizon=60), history_greedy()
    grid = run_batch(prob, alg, [0, 0, 0], hparams={"eps": np.array([0.0, 0.5, 5.0])})
    base = run_batch(prob, alg, [0], hparams={"eps": 0.5})
    np.testing.assert_array_equal(grid.regret[1], base.regret[0])
    assert not np.array_equal(grid.regret[0], grid.regret[2])
    with pytest.raises(ConfigError, match="unknown hyper-parameter"):
        run_batch(prob, alg, [0], hparams={"epsilon": 0.1})


def test_arrivals_mask_regret_and_updates():
    prob, alg = toy_problem(horizon=80, with_arrivals=True), history_greedy()
    out = run_batch(prob, alg, [2])
    # exactly one agent is active per step: the others have zero regret
    nonzero_agents = (out.regret[0] > 0).sum(axis=1)
    assert nonzero_agents.max() <= 1


def test_communication_is_recorded_per_step():
    prob, alg = toy_problem(horizon=30), history_greedy(comm_per_step=3.0)
    out = run_batch(prob, alg, [0, 1])
    np.testing.assert_array_equal(out.comm_up, np.full((2, 30), 3.0))
    np.testing.assert_array_equal(out.comm_down, np.full((2, 30), 6.0))
    np.testing.assert_array_equal(out.rounds, np.ones((2, 30)))


def _breaks_at_eps():
    """history_greedy whose run marks itself broken (NaN comm) once it holds eps points."""
    alg = history_greedy()

    def update(state, contexts, actions, rewards, active, key):
        new, info = alg.update(state, contexts, actions, rewards, active, key)
        bad = jnp.where(state["count"][0] >= state["hp"]["eps"], jnp.nan, 0.0)
        return new, {**info, "comm_up": info["comm_up"] + bad, "comm_down": info["comm_down"] + bad}

    return alg._replace(update=update)


def test_a_batch_whose_every_run_is_broken_stops_after_the_segment():
    prob, alg, cache = toy_problem(horizon=100), _breaks_at_eps(), {}

    def run(eps, **kw):
        return run_batch(prob, alg, [0, 1], hparams={"eps": np.array(eps)}, first_segment=16,
                         compiled_cache=cache, **kw)

    # segments [0, 16), [16, 32), [32, 64), [64, 100): both runs are marked in the second one
    with pytest.raises(ConfigError, match=r"HistoryGreedy: every run .*by step 32 of 100.*capacity"):
        run([20.0, 25.0])
    # one sound run (a grid point, say) keeps the batch going; the broken one is reported as NaN
    out = run([1e6, 20.0])
    assert not np.isnan(out.comm_up[0]).any()
    assert np.isnan(out.comm_up[1, 20:]).all() and not np.isnan(out.comm_up[1, :20]).any()
    # stop_on_error=False runs to the end, and a break in the last segment is never an early stop
    assert np.isnan(run([20.0, 25.0], stop_on_error=False).comm_up[:, 99]).all()
    late = run([70.0, 80.0])
    assert np.isnan(late.comm_up[0, 70:]).all() and not np.isnan(late.comm_up[1, :80]).any()


def test_progress_reports_steps():
    seen = []
    run_batch(toy_problem(horizon=100), uniform_random(), [0, 1], progress=seen.append, progress_every=25)
    assert seen == [25, 50, 75, 100]


def test_precision_scope_does_not_leak():
    before = jnp.zeros(()).dtype
    out = run_batch(toy_problem(horizon=10), uniform_random(), [0], precision="float64")
    assert out.regret.dtype == np.float64
    assert jnp.zeros(()).dtype == before
    out32 = run_batch(toy_problem(horizon=10), uniform_random(), [0], precision="float32")
    assert out32.regret.dtype == np.float32
    with pytest.raises(ConfigError):
        run_batch(toy_problem(horizon=10), uniform_random(), [0], precision="float16")


def test_cumulative_regret_conventions():
    r = np.arange(12, dtype=float).reshape(1, 3, 4)  # [S, T, N]
    np.testing.assert_allclose(cumulative_regret(r, "mean")[0], np.cumsum(r[0].mean(1)))
    np.testing.assert_allclose(cumulative_regret(r, "sum")[0], np.cumsum(r[0].sum(1)))


_DEVICE_SCRIPT = """
import sys, json, numpy as np
sys.path.insert(0, {tests!r})
import jax
from toy import toy_problem, history_greedy
from bandits_jax.runner import run_batch
out = run_batch(toy_problem(horizon=120), history_greedy(), list(range(6)), first_segment=40)
np.save(sys.argv[1], out.regret)
print(len(jax.devices()))
"""


@pytest.mark.parametrize("devices", [4])
def test_sharded_over_devices_is_bit_identical(tmp_path, devices):
    script = tmp_path / "run.py"
    script.write_text(_DEVICE_SCRIPT.format(tests=str(Path(__file__).parent)))
    results = {}
    for n in (1, devices):
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu")
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / f"r{n}.npy")], env=env,
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == str(n)
        results[n] = np.load(tmp_path / f"r{n}.npy")
    np.testing.assert_array_equal(results[1], results[devices])


def test_phase_level_trials_are_seed_invariant():
    def trial(key):
        """A stand-in pure-exploration trial: pick the best of 5 noisy arms after 20 pulls each."""
        means = jnp.linspace(0.0, 0.4, 5)
        pulls = means[:, None] + jax.random.normal(key, (5, 20))
        return {"choice": jnp.argmax(pulls.mean(1)), "samples": jnp.asarray(100)}

    out = run_trials(trial, [0, 1, 2, 3, 4, 5])
    part = run_trials(trial, [4, 2])
    np.testing.assert_array_equal(out["choice"][[4, 2]], part["choice"])
    assert out["choice"].shape == (6,) and set(out["choice"].tolist()) <= set(range(5))
    with jax.enable_x64(True):
        expect = int(jnp.argmax((jnp.linspace(0.0, 0.4, 5)[:, None]
                                 + jax.random.normal(runner.seed_key(3), (5, 20))).mean(1)))
    assert out["choice"][3] == expect


def test_map_batching_gives_the_same_numbers_as_vmap():
    prob, alg = toy_problem(horizon=100), history_greedy(comm_per_step=1.0)
    vm = run_batch(prob, alg, [0, 1, 2], first_segment=50)
    mp = run_batch(prob, alg._replace(batching="map"), [0, 1, 2], first_segment=50)
    np.testing.assert_allclose(mp.regret, vm.regret, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(mp.comm_up, vm.comm_up)
    with pytest.raises(ConfigError, match="batching"):
        run_batch(prob, alg._replace(batching="loop"), [0])


def test_update_sees_select_gets_the_select_info_and_caches_are_not_stored():
    """An algorithm with update_sees_select=True receives select's info (here its scores' maximum, a "_"
    cache) in update; run_batch and rollout give the same numbers, and rollout drops the cache."""
    from bandits_jax.algorithms.async_kernel import rollout
    from bandits_jax.core import EnvSpec

    base = uniform_random()

    def select(state, contexts, key):
        actions, info = base.select(state, contexts, key)
        return actions, {**info, "norm": jnp.sum(contexts ** 2, axis=(1, 2)), "_first": contexts[:, 0, 0]}

    def update(state, contexts, actions, rewards, active, key, select_info=None):
        state, info = base.update(state, contexts, actions, rewards, active, key)
        return state, {**info, "comm_up": jnp.sum(select_info["_first"]) + 0.0 * rewards.sum()}

    alg = base._replace(select=select, update=update, update_sees_select=True)
    prob = toy_problem(horizon=20, num_agents=2)
    out = run_batch(prob, alg, [0])
    with jax.enable_x64(False):
        key = jax.random.PRNGKey(0)
        contexts = jax.random.normal(key, (20, 2, 3, 4))
        _, _, sinfo, uinfo = rollout(alg, EnvSpec(2, 3, 4, 20), {}, contexts, jnp.zeros((20, 2, 3)),
                                     jnp.ones((20, 2), bool), key)
    np.testing.assert_allclose(uinfo["comm_up"], contexts[:, :, 0, 0].sum(axis=1), rtol=1e-6)
    assert "_first" not in sinfo and "norm" in sinfo
    assert np.all(out.comm_up != 0)  # the runner passed the info: comm_up is the sum of first coordinates


def test_grown_rows_leaves_room_in_multiples_of_64_and_never_shrinks():
    assert runner.grown_rows(90, 128, 512) == 192  # 1.5 * 90 + 16 = 151 -> 192
    assert runner.grown_rows(0, 128, 512) == 128
    assert runner.grown_rows(300, 128, 512) == 512  # 466 -> 512, the limit
    assert runner.grown_rows(300, 128, 400) == 400
    assert runner.grown_rows(20, 256, 512) == 256


def test_demand_sized_buffers_give_the_numbers_of_time_sized_ones_and_rerun_an_overflowing_segment():
    from toy import growing_dictionary
    prob = toy_problem(num_agents=1, horizon=460)
    demand, cache = growing_dictionary(limit=1024), {}
    # every point kept: at t = 256 the dictionary holds 256 rows and gets 400 -> 448; the segment
    # [256, 460) outgrows them at t = 448 and is run again with 896
    out = run_batch(prob, demand, [0, 1], first_segment=128, compiled_cache=cache)
    timed = run_batch(prob, demand._replace(demand=None), [0, 1], first_segment=460)  # one segment, 460 rows
    np.testing.assert_array_equal(out.regret, timed.regret)
    np.testing.assert_array_equal(out.comm_up, timed.comm_up)
    np.testing.assert_array_equal(out.comm_up[:, -1], [460.0, 460.0])
    rows = sorted(k[7][:3] for k in cache if k[0] == "segment")  # (length, history rows, dict_rows)
    assert rows == [(128, 128, 128), (128, 256, 256), (204, 460, 448), (204, 460, 896)]
    # a tenth of the points kept: room enough at every doubling, no segment runs twice (the first
    # segment is the one compiled above; the others are new, with 128 dictionary rows)
    tenth = run_batch(prob, demand, [0, 1], hparams={"keep": 0.1}, first_segment=128, compiled_cache=cache)
    rows_now = sorted(k[7][:3] for k in cache if k[0] == "segment")
    assert rows_now == sorted(rows + [(128, 256, 128), (204, 460, 128)])
    assert 20 < tenth.comm_up[0, -1] < 80
    # past the algorithm's limit an overflow stays an error, marked from the step it happens
    capped = run_batch(prob, growing_dictionary(limit=300), [0, 1], first_segment=256)
    assert np.isnan(capped.comm_up[:, 300:]).all() and not np.isnan(capped.comm_up[:, :300]).any()
