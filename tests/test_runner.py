"""The runner: seed invariance, common random numbers, segments, grids, devices, precision."""
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.base import batch_cond, sized_switch
from bandits_jax.algorithms.single.uniform import uniform_random
from bandits_jax.core import ConfigError, EnvSpec, Outcome, Sizes, Step, Trial, report
from bandits_jax import identity, runner, trials
from bandits_jax.problems import make_problem
from bandits_jax.reporting.results import cumulative_regret
from bandits_jax.runner import run_batch, segments

sys.path.insert(0, str(Path(__file__).parent))
from toy import breaks_at_eps, history_greedy, toy_problem  # noqa: E402

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
            step = Step(jnp.int32(t), x, jnp.ones(3, bool))
            actions = np.asarray(alg.select({}, None, step, ks)[0])
            expect = means.max(1) - means[np.arange(3), actions]
            np.testing.assert_allclose(out.regret[0, t], expect, rtol=1e-12, atol=1e-12)


def test_common_random_numbers_across_algorithms():
    """Two different algorithms that happen to pick the same arms get the same regret: they saw the
    same contexts, however differently they consumed their own keys and grew their state."""
    prob = toy_problem(horizon=150)
    first_arm = lambda params, state, step, key: (jnp.zeros(step.contexts.shape[0], jnp.int32), ())
    stateless = uniform_random()._replace(name="Arm0", select=first_arm)
    growing = history_greedy()._replace(name="Arm0-growing", select=first_arm)
    a = run_batch(prob, stateless, [3, 4])
    b = run_batch(prob, growing, [3, 4], first_segment=16)
    np.testing.assert_array_equal(a.regret, b.regret)
    assert a.regret.sum() > 0  # arm 0 is often not the best: the comparison has content


def test_segments_double_and_cover_horizon():
    prob, alg = toy_problem(horizon=1000), history_greedy()
    segs = segments(alg, prob.spec, first=100)
    assert segs == [(0, 100, 100), (100, 200, 200), (200, 400, 400), (400, 800, 800), (800, 1000, 1000)]
    assert segments(uniform_random(), prob.spec) == [(0, 1000, None)]


def test_segmenting_does_not_change_results():
    prob, alg = toy_problem(horizon=300), history_greedy()
    seg = run_batch(prob, alg, [0, 1], first_segment=32)
    one = run_batch(prob, alg, [0, 1], first_segment=300)
    np.testing.assert_allclose(seg.regret, one.regret, rtol=0, atol=1e-12)


def test_hyperparameter_grid_and_unknown_names():
    prob, alg = toy_problem(horizon=60), history_greedy()
    grid = run_batch(prob, alg, [0, 0, 0], {"eps": np.array([0.0, 0.5, 5.0])})
    base = run_batch(prob, alg, [0], {"eps": 0.5})
    np.testing.assert_array_equal(grid.regret[1], base.regret[0])
    assert not np.array_equal(grid.regret[0], grid.regret[2])
    with pytest.raises(ConfigError, match="unknown hyper-parameter epsilon"):
        run_batch(prob, alg, [0], {"epsilon": 0.1})
    with pytest.raises(ConfigError, match="eps must be a finite number >= 0"):  # every grid value is checked
        run_batch(prob, alg, [0, 0], {"eps": [0.1, -1.0]})
    with pytest.raises(ConfigError, match=r"shape \(3,\), expected \(2,\)"):
        run_batch(prob, alg, [0, 0], {"eps": [0.1, 0.2, 0.3]})


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


def test_diagnostics_are_recorded_per_step():
    out = run_batch(toy_problem(horizon=40, with_arrivals=True), history_greedy(), [0, 1], first_segment=16)
    count = out.diagnostics["count"]  # agent 0's buffer fill after each step
    assert count.shape == (2, 40)
    assert set(np.diff(count, axis=1).ravel().tolist()) == {0, 1}  # one arrival a step, among 3 agents
    assert 5 < count[0, -1] < 25 and count[0, -1] != count[1, -1]


def test_a_batch_whose_every_run_is_broken_stops_after_the_segment():
    prob, alg, cache = toy_problem(horizon=100), breaks_at_eps(), {}

    def run(eps, **kw):
        return run_batch(prob, alg, [0, 1], {"eps": np.array(eps)}, first_segment=16, compiled_cache=cache, **kw)

    # segments [0, 16), [16, 32), [32, 64), [64, 100): both runs are marked in the second one
    with pytest.raises(ConfigError, match=r"every run .*by step 32 of 100.*HistoryGreedy: the buffer holds eps"):
        run([20.0, 25.0])
    # one sound run (a grid point, say) keeps the batch going; the broken one is reported
    with pytest.warns(runner.FailedRunsWarning, match="1 of 2 runs"):
        out = run([1e6, 20.0])
    np.testing.assert_array_equal(out.errors, [0, 2])
    assert np.isfinite(out.comm_up).all()
    # stop_on_error=False runs to the end, and a break in the last segment is never an early stop
    with pytest.warns(runner.FailedRunsWarning, match="2 of 2 runs"):
        np.testing.assert_array_equal(run([20.0, 25.0], stop_on_error=False).errors, [2, 2])
        np.testing.assert_array_equal(run([70.0, 80.0]).errors, [2, 2])


def test_a_batch_with_some_broken_runs_warns_with_their_count_and_messages():
    """A batch that runs to its end with error bits in some runs says so in one warning line: how many
    runs of the batch, which seeds, and the algorithm's messages for the bits; a clean batch is silent."""
    import warnings

    prob, alg, cache = toy_problem(horizon=100), breaks_at_eps(), {}

    def run(seeds, eps, **kw):
        return run_batch(prob, alg, seeds, {"eps": np.array(eps)}, first_segment=16, compiled_cache=cache, **kw)

    with pytest.warns(UserWarning, match=r"^1 of 3 runs of this batch carry error bits \(seeds 5\).*"
                                         r"HistoryGreedy: the buffer holds eps points; raise eps$") as seen:
        out = run([4, 5, 6], [1e6, 20.0, 1e6])
    np.testing.assert_array_equal(out.errors, [0, 2, 0])
    assert len(seen) == 1 and issubclass(seen[0].category, runner.FailedRunsWarning)
    assert "\n" not in str(seen[0].message)
    with pytest.warns(runner.FailedRunsWarning, match=r"^2 of 2 runs"):  # broken in the last segment: no stop
        run([4, 5], [70.0, 80.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run([4, 5, 6], [1e6, 1e6, 1e6])


def test_a_segment_updates_its_state_in_place_unless_it_resizes_it():
    """The segment's compiled call aliases the state it consumes to the state it returns (no second copy
    of a large state; a chunked batch too), except where a resize gives the state new shapes."""
    cache = {}
    run_batch(toy_problem(horizon=60), uniform_random(), range(5), first_segment=30, vmap_size=2, compiled_cache=cache)
    run_batch(toy_problem(horizon=60), history_greedy(), range(2), first_segment=30, compiled_cache=cache)
    aliased = {(k[2], k[-2][1].rows): "input_output_alias" in c.as_text().splitlines()[0]
               for k, c in cache.items() if k[0] == "segment"}
    assert aliased == {("Random", None): True, ("HistoryGreedy", 30): True,
                       ("HistoryGreedy", 60): False}


def test_whether_a_resize_keeps_the_state_shapes_is_traced_once_per_sizes_and_shapes(monkeypatch):
    """Every segment call asks whether its resize keeps the state's shapes (`runner._resize_keeps_shapes`):
    traced once per function, sizes and shapes in a process; the answer is that of the trace."""
    prob, alg = toy_problem(horizon=60), history_greedy()
    runner._KEEPS_SHAPES.clear()
    traced, eval_shape = [], jax.eval_shape
    monkeypatch.setattr(jax, "eval_shape", lambda *a, **k: traced.append(a) or eval_shape(*a, **k))
    first = run_batch(prob, alg, range(2), first_segment=30, compiled_cache={})
    assert len(traced) == 2  # rows 30 (kept), then 60 (grown)
    assert sorted(kept for kept, _ in runner._KEEPS_SHAPES.values()) == [False, True]
    again = run_batch(prob, alg, range(2), first_segment=30, compiled_cache={})
    assert len(traced) == 2
    np.testing.assert_array_equal(again.regret, first.regret)


def test_progress_reports_steps():
    seen = []
    run_batch(toy_problem(horizon=100), uniform_random(), [0, 1], progress=seen.append, progress_every=25)
    assert seen == [25, 50, 75, 100]


def test_groups_give_the_numbers_of_one_vmap_and_report_progress_in_order():
    prob, alg = toy_problem(horizon=90), history_greedy()
    whole = run_batch(prob, alg, range(7), first_segment=30, vmap_size=7)
    seen = []
    grouped = run_batch(prob, alg, range(7), first_segment=30, vmap_size=3, progress=seen.append, progress_every=25)
    for name in ("regret", "comm_up", "rounds"):
        np.testing.assert_allclose(getattr(grouped, name), getattr(whole, name), rtol=1e-12, atol=1e-12)
    assert grouped.regret.shape == (7, 90, prob.spec.num_agents)
    # three groups of 3 one after another, each reporting steps 25, 50, 75 as a third of the batch's
    assert seen == [8, 16, 25, 38, 46, 55, 68, 76, 85]
    assert runner.chunk_layout(7, 1, 3) == (3, 3)  # groups of the full size: the last one pads two runs
    assert runner.chunk_layout(100, 1, 8) == (13, 8)
    assert runner.chunk_layout(3, 1, 8) == (1, 4)  # a small batch: the power of two that holds it
    assert runner.chunk_layout(2, 1, 8) == (1, 2)
    assert runner.chunk_layout(6, 4, 1) == (2, 1)  # per device: 2 runs, groups of 1
    assert runner.chunk_layout(10, 1, None) == (2, 8)  # the CPU default: groups of 8
    assert runner.chunk_layout(10, 1, None, cpu_vmap=1) == (10, 1)  # an algorithm's own CPU size
    assert runner.chunk_layout(10, 1, 5, cpu_vmap=1) == (2, 5)  # the caller's vmap_size wins
    with pytest.raises(ConfigError, match="vmap_size"):
        run_batch(prob, alg, [0], vmap_size=0)


def test_batches_of_any_size_from_the_group_size_up_share_their_programs():
    """Reported seeds, a tuning grid and a chunk's remainder call the same start and segment programs."""
    cache, prob, alg = {}, toy_problem(horizon=60), history_greedy()
    for runs in (8, 20, 13, 64):
        run_batch(prob, alg, range(runs), first_segment=30, compiled_cache=cache)
    assert sorted(k[0] for k in cache) == ["problem start", "segment", "segment", "start"]


def test_precision_scope_does_not_leak():
    before = jnp.zeros(()).dtype
    out = run_batch(toy_problem(horizon=10), uniform_random(), [0], precision="float64")
    assert out.regret.dtype == np.float64
    assert jnp.zeros(()).dtype == before
    out32 = run_batch(toy_problem(horizon=10), uniform_random(), [0], precision="float32")
    assert out32.regret.dtype == np.float32
    with pytest.raises(ConfigError):
        run_batch(toy_problem(horizon=10), uniform_random(), [0], precision="float16")


_FLOAT32_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import jax, jax.numpy as jnp
from toy import toy_problem, history_greedy
from bandits_jax import runner

alg = history_greedy()

def update(params, state, step, actions, rewards, aux, key):  # reports the dtype its state holds
    new, rep = alg.update(params, state, step, actions, rewards, aux, key)
    return new, rep._replace(diagnostics={{**rep.diagnostics, "state_sum": jnp.sum(new["X"]) + jnp.sum(new["y"])}})

out = runner.run_batch(toy_problem(horizon=6), alg._replace(update=update), [0, 1], precision="float32")
print(json.dumps({{"x64_outside": bool(jax.config.jax_enable_x64), "regret": str(out.regret.dtype),
                  "comm_up": str(out.comm_up.dtype), "state_sum": str(out.diagnostics["state_sum"].dtype)}}))
"""


def test_float32_computes_in_float32_under_an_x64_environment(tmp_path):
    """JAX_ENABLE_X64=1 in the environment does not turn a precision="float32" run into float64: the
    outputs and the state a step leaves (reported as a diagnostic) are float32."""
    script = tmp_path / "float32.py"
    script.write_text(_FLOAT32_SCRIPT.format(tests=str(Path(__file__).parent)))
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json

    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"x64_outside": True, "regret": "float32", "comm_up": "float32", "state_sum": "float32"}


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
vmap_size = int(sys.argv[2]) if len(sys.argv) > 2 else None
out = run_batch(toy_problem(horizon=120), history_greedy(), list(range(6)), first_segment=40, vmap_size=vmap_size)
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
        chunks = ["1"] if n > 1 else []  # several devices, each with its runs in chunks of one
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / f"r{n}.npy"), *chunks], env=env,
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == str(n)
        results[n] = np.load(tmp_path / f"r{n}.npy")
    np.testing.assert_array_equal(results[1], results[devices])


def _inverse_step(x):
    return jnp.linalg.inv(x @ x.T + jnp.eye(x.shape[0])) @ x


@pytest.mark.parametrize("gather", [None, 1, 3])
def test_batch_cond_under_vmap_equals_a_cond_per_run(gather):
    """batch_cond under one and two vmaps gives, run by run, what a plain cond gives for that run."""
    with jax.enable_x64(True):
        xs = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 4, 4))
        pred = jnp.array([[True, False, True, False, False, False, True, False],
                          [False, False, False, False, False, False, False, False]])
        f = lambda p, x: batch_cond(p, _inverse_step, lambda y: -y, x, gather=gather)
        out = jax.jit(jax.vmap(jax.vmap(f)))(pred, xs)
        for g in range(2):
            for b in range(8):
                expect = _inverse_step(xs[g, b]) if pred[g, b] else -xs[g, b]
                np.testing.assert_allclose(out[g, b], expect, rtol=0, atol=1e-15)
        # an unbatched predicate inside a vmap, and no vmap at all
        np.testing.assert_allclose(jax.vmap(lambda x: f(jnp.array(True), x))(xs[0]),
                                   jax.vmap(_inverse_step)(xs[0]), rtol=0, atol=1e-15)
        np.testing.assert_allclose(f(jnp.array(False), xs[0, 0]), -xs[0, 0])
        # a vmap of one run is that run's own cond, inside a vmap of two
        one = jax.jit(jax.vmap(jax.vmap(f)))(pred[:, :1], xs[:, :1])
        np.testing.assert_allclose(one[0, 0], _inverse_step(xs[0, 0]), rtol=0, atol=1e-15)
        np.testing.assert_allclose(one[1, 0], -xs[1, 0], rtol=0, atol=1e-15)


def _conditionals(fn, *args) -> int:
    """Number of conditional instructions in the compiled program of fn(*args)."""
    return jax.jit(fn).lower(*args).compile().as_text().count(" conditional(")


def test_batch_cond_is_one_conditional_under_vmap_where_a_plain_cond_is_a_select():
    xs = jax.random.normal(jax.random.PRNGKey(0), (8, 4, 4))
    pred = jnp.arange(8) == 3
    plain = jax.vmap(lambda p, x: jax.lax.cond(p, _inverse_step, lambda y: -y, x))
    batched = jax.vmap(lambda p, x: batch_cond(p, _inverse_step, lambda y: -y, x))
    assert _conditionals(plain, pred, xs) == 0  # both branches for every run, then a select
    assert _conditionals(batched, pred, xs) == 1


def test_sized_switch_takes_the_smallest_capacity_that_holds_the_batch():
    """Unbatched: the smallest capacity >= size (the last past them all); under one and two vmaps the
    whole batch takes the one that holds its largest size, and stays one conditional."""
    def fn(capacity, x):  # which capacity ran, and work whose result does not depend on it
        return jnp.full((), capacity), jnp.sum(jnp.pad(x, (0, capacity - x.shape[0])))
    f = lambda size, x: sized_switch(size, (4, 8, 16), fn, x)  # noqa: E731
    x = jnp.arange(3.0)
    assert [int(f(jnp.int32(s), x)[0]) for s in (0, 4, 5, 8, 9, 16, 40)] == [4, 4, 8, 8, 16, 16, 16]
    cap, total = jax.jit(jax.vmap(f, in_axes=(0, None)))(jnp.array([1, 6, 2]), x)
    assert cap.tolist() == [8, 8, 8] and total.tolist() == [3.0] * 3
    grid = jax.jit(jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, None)))(jnp.array([[1, 2], [3, 12]]), x)
    assert grid[0].tolist() == [[16, 16], [16, 16]]
    assert _conditionals(jax.vmap(f, in_axes=(0, None)), jnp.array([1, 6, 2]), x) == 1


def test_an_unbatched_step_index_keeps_an_epoch_end_cond_a_real_cond():
    """The runner's t is unbatched: an epoch-end lax.cond on it stays a cond under the seed vmap
    (a cond on a batched copy of t does not)."""
    xs = jax.random.normal(jax.random.PRNGKey(0), (8, 4, 4))

    def epoch_step(t, x):
        return jax.lax.cond(t % 16 == 0, _inverse_step, lambda y: -y, x)

    unbatched = jax.vmap(epoch_step, in_axes=(None, 0))
    batched = jax.vmap(epoch_step, in_axes=(0, 0))
    assert _conditionals(unbatched, jnp.int32(5), xs) == 1
    assert _conditionals(batched, jnp.full(8, 5, jnp.int32), xs) == 0


@pytest.mark.parametrize("stream", [0, 5])
def test_update_gets_what_select_computed_and_replay_matches_the_runner(stream):
    """aux goes from select to update (here the first coordinates, reported as comm_up); the runner
    and `replay` (given arrays and the seed's stream-0 algorithm key) give the same numbers, for the
    default stream and another one."""
    base = uniform_random()._replace(stream=stream)

    def select(params, state, step, key):
        actions, _ = base.select(params, state, step, key)
        return actions, step.contexts[:, 0, 0]

    def update(params, state, step, actions, rewards, aux, key):
        return state, report(rewards.dtype, comm_up=jnp.sum(aux))

    alg = base._replace(select=select, update=update)
    prob = toy_problem(horizon=20, num_agents=2)
    out = run_batch(prob, alg, [0], precision="float32")
    pk, ak = runner.problem_and_algorithm_keys(runner.seed_key(0))
    inst = prob.init(runner.init_keys(pk, ak)[0])
    contexts = jnp.stack([prob.contexts(inst, t, runner.problem_step_keys(pk, t)[0]) for t in range(20)])
    means = jnp.stack([prob.mean_reward(inst, t, contexts[t]) for t in range(20)])
    _, actions, aux, regret, reps = runner.replay(alg, EnvSpec(2, 4, 5, 20), {}, contexts, means,
                                                  jnp.ones((20, 2), bool), ak)
    np.testing.assert_allclose(reps.comm_up, contexts[:, :, 0, 0].sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(out.comm_up[0], reps.comm_up, rtol=1e-6)
    np.testing.assert_allclose(out.regret[0], regret, rtol=1e-6)
    assert out.regret.sum() > 0
    if stream:  # the random arms of another stream are other arms
        other = run_batch(prob, alg._replace(stream=0), [0], precision="float32")
        assert np.abs(other.regret - out.regret).max() > 0


# seed 3's stream-0 algorithm key, as fold_in(fold_in(PRNGKey(0), 3), 1) gave it before streams existed
SEED3_ALGORITHM_KEY = [2060067018, 3241019684]


def test_stream_zero_keeps_the_old_algorithm_key_and_other_streams_get_their_own():
    seed = runner.seed_key(3)
    pk, ak = runner.problem_and_algorithm_keys(seed)
    assert jax.random.key_data(ak).tolist() == SEED3_ALGORITHM_KEY
    old = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(0), 3), 1)
    np.testing.assert_array_equal(jax.random.key_data(ak), jax.random.key_data(old))
    assert runner.stream_key(ak, 0) is ak
    prob, alg = toy_problem(horizon=10), uniform_random()
    keys = {}
    for stream in (0, 1, 2, 100002):
        start = runner.run_start(prob, alg._replace(stream=stream), 0, Sizes())
        problem_key, algorithm_key, _, _ = start(jnp.uint32(3), {})
        np.testing.assert_array_equal(problem_key, pk)  # the problem's key is every stream's
        keys[stream] = tuple(jax.random.key_data(algorithm_key).tolist())
    assert list(keys[0]) == SEED3_ALGORITHM_KEY
    assert len(set(keys.values())) == 4
    # a stream's key is not one the runner derives from the stream-0 key for init or for a step
    derived = {tuple(jax.random.key_data(k).tolist()) for k in
               [runner.init_keys(pk, ak)[1], *runner.algorithm_step_keys(ak, 0), *runner.algorithm_step_keys(ak, 1)]}
    assert not derived & set(keys.values())


def test_a_stream_is_part_of_the_curve_identity_and_of_the_trial_key():
    prob, alg = toy_problem(horizon=10), uniform_random()
    same = identity.run_identity(prob, alg._replace(stream=0), {})
    assert identity.run_identity(prob, alg, {}) == same
    others = {identity.run_identity(prob, alg._replace(stream=s), {}) for s in (1, 2, 100002)}
    assert len(others) == 3 and same not in others
    # a trial gets the algorithm key of its stream
    arms = make_problem("gaussian-arms", num_agents=1, num_arms=3)
    draw = Trial("Draw", {}, lambda key, params, arms, public, pull: {"u": jax.random.uniform(key), "errors": jnp.int32(0)},
                 {"u": Outcome("mean")})
    for stream in (0, 7):
        out = trials.run_trials(arms, draw._replace(stream=stream), [3, 4], precision="float32")
        for i, s in enumerate((3, 4)):
            ak = runner.problem_and_algorithm_keys(runner.seed_key(s))[1]
            assert out.outcomes["u"][i] == jax.random.uniform(runner.stream_key(ak, stream)), (stream, s)


def test_a_grids_identities_trace_its_programs_once(monkeypatch):
    from bandits_jax.algorithms.single.linear import linucb

    prob, alg = toy_problem(horizon=10), linucb()
    points = [dict(alg.defaults, beta=b) for b in (0.5, 1.0, 2.0)]
    traced = []
    digest = identity._traced_digest
    monkeypatch.setattr(identity, "_traced_digest", lambda *a: traced.append(a) or digest(*a))
    found = identity.run_identities(prob, alg, points)
    assert len(traced) == 1
    assert found == [identity.run_identity(prob, alg, p) for p in points] and len(set(found)) == 3
    # the same objects (an arena's next phase, the curve under another name) are not traced again
    assert identity.run_identities(prob, alg._replace(name="other"), points) == found and len(traced) == 1
    assert identity.run_identities(prob, alg, points, base_key=1) != found and len(traced) == 2


def test_a_coop_world_at_another_ttl_traces_its_start_not_its_step_for_its_identity(monkeypatch):
    """The problems of one Coop world at two message TTLs share the step's functions (`coop._world`):
    the second identity traces its start (the graph arrays differ) and takes the step's jaxpr from the
    first; the identities differ, and each is the one a fresh process finds."""
    from bandits_jax.curves import Curve, Spec, resolve

    def run(ttl):
        world = Spec("coop-rbf", dict(num_agents=4, num_arms=3, dim=2, horizon=3, p=0.5, gamma=2, ttl=ttl))
        return resolve([Curve("a", world, Spec("coop_kernel_ucb"))], trace=False)[0]

    one, two = run(1), run(2)
    identity._DIGESTS.clear()
    identity._STEPS.clear()
    steps, make_step = [], identity.make_step
    monkeypatch.setattr(identity, "make_step", lambda *a: steps.append(a) or make_step(*a))
    params = dict(one.algorithm.defaults)
    first = identity.run_identity(one.problem, one.algorithm, params)
    second = identity.run_identity(two.problem, two.algorithm, params)
    assert first != second and len(steps) == 1
    identity._DIGESTS.clear()
    identity._STEPS.clear()
    assert identity.run_identity(two.problem, two.algorithm, params) == second and len(steps) == 2


@pytest.mark.parametrize("stream", [-1, 2 ** 32, 1.5, True, "1"])
def test_a_bad_stream_is_refused_before_compiling(stream):
    prob, alg = toy_problem(horizon=10), uniform_random()._replace(stream=stream)
    with pytest.raises(ConfigError, match="stream must be an integer"):
        run_batch(prob, alg, [0])
    with pytest.raises(ConfigError, match="stream must be an integer"):
        identity.run_identity(prob, alg, {})


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
    # every point kept: the first segment outgrows its FIRST_DEMAND_ROWS = 64 rows and runs again with
    # 128; at t = 256 the dictionary holds 256 rows and gets 400 -> 448; the segment [256, 460)
    # outgrows them at t = 448 and is run again with 896
    out = run_batch(prob, demand, [0, 1], first_segment=128, compiled_cache=cache)
    timed_sizing = demand.sizing._replace(demand=None)
    timed = run_batch(prob, demand._replace(sizing=timed_sizing), [0, 1], first_segment=460)  # one segment
    np.testing.assert_array_equal(out.regret, timed.regret)
    np.testing.assert_array_equal(out.comm_up, timed.comm_up)
    np.testing.assert_array_equal(out.comm_up[:, -1], [460.0, 460.0])
    rows = sorted((k[-2][0],) + tuple(k[-2][1]) for k in cache if k[0] == "segment")  # (length, rows, demand rows)
    assert rows == [(128, 128, 64), (128, 128, 128), (128, 256, 256), (204, 460, 448), (204, 460, 896)]
    # a tenth of the points kept: room enough at every doubling, no segment runs twice (the first
    # segment is the one compiled above; the others are new, with 64 dictionary rows)
    tenth = run_batch(prob, demand, [0, 1], {"keep": 0.1}, first_segment=128, compiled_cache=cache)
    rows_now = sorted((k[-2][0],) + tuple(k[-2][1]) for k in cache if k[0] == "segment")
    assert rows_now == sorted(rows + [(128, 256, 64), (204, 460, 64)])
    assert 20 < tenth.comm_up[0, -1] < 80
    # past the algorithm's limit an overflow stays an error, marked from the step it happens
    capped = run_batch(prob, growing_dictionary(limit=300), [0, 1], first_segment=256, stop_on_error=False)
    np.testing.assert_array_equal(capped.errors, [1, 1])
    np.testing.assert_array_equal(capped.comm_up[:, -1], [300.0, 300.0])


def _diverges_for_odd_seeds():
    """A toy learner whose state turns NaN at step 5 in the runs whose init key draws an odd number (a
    diverged training, say): its actions stay finite, so nothing but the state shows it."""
    from bandits_jax.core import Algorithm

    def init(key, spec, params, sizes, public=None):
        return {"w": jnp.zeros(()), "odd": jax.random.bits(key, ()) % 2 == 1}

    def select(params, state, step, key):
        return jnp.zeros(step.contexts.shape[0], jnp.int32), ()

    def update(params, state, step, actions, rewards, aux, key):
        w = jnp.where(state["odd"] & (step.t >= 5), jnp.nan, state["w"] + 1.0)
        return {**state, "w": w}, report(rewards.dtype)

    return Algorithm("diverges", {}, init, select, update)


def test_a_state_that_turns_nan_sets_the_runners_error_bit():
    """A run whose state holds NaN at a segment's end carries ERR_NAN_STATE, named by describe_errors;
    the other runs carry nothing."""
    prob, alg = toy_problem(horizon=40), _diverges_for_odd_seeds()
    with pytest.warns(runner.FailedRunsWarning, match="held NaN"):
        out = run_batch(prob, alg, range(8), first_segment=16, stop_on_error=False)
    odd = (out.errors & runner.ERR_NAN_STATE) != 0
    assert 0 < odd.sum() < 8 and np.all(out.errors[~odd] == 0)
    assert "held NaN" in runner.describe_errors(alg, runner.ERR_NAN_STATE)
    with pytest.warns(runner.FailedRunsWarning, match="held NaN"):  # a seed's bit does not depend on the batch
        alone = run_batch(prob, alg, [int(s) for s in np.flatnonzero(odd)])
    assert np.all(alone.errors == runner.ERR_NAN_STATE)
