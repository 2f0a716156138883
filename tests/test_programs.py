"""The process's table of compiled programs (bandits_jax/programs.py): one text, one executable; a host
callback, another argument shape or another result structure, another program."""
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import compile_report, programs


def _have(fn, *args):
    """(executable, how the report saw it) of `fn` lowered at `args`."""
    with compile_report.collect() as seen:
        exe = programs.compiled(jax.jit(fn).lower(*args), "start", time.perf_counter(), batch=1, padded=1, agents=1)
    return exe, seen[0].how


def test_two_closures_with_one_text_share_one_executable():
    programs.clear()
    scale = np.float64(3.0)
    first, how1 = _have(lambda x: jnp.cumsum(x) * scale, jnp.arange(4.0))
    second, how2 = _have(lambda x: jnp.cumsum(x) * scale, jnp.arange(4.0))  # another function object
    assert (how1, how2) == ("compiled", "reused") or (how1, how2) == ("loaded", "reused")
    assert second is first
    np.testing.assert_allclose(second(jnp.arange(4.0)), [0.0, 3.0, 9.0, 18.0])
    other, how3 = _have(lambda x: jnp.cumsum(x) * np.float64(4.0), jnp.arange(4.0))  # another constant
    assert how3 != "reused" and other is not first
    np.testing.assert_allclose(other(jnp.arange(4.0)), [0.0, 4.0, 12.0, 24.0])


def test_an_unused_argument_of_another_shape_is_another_program():
    programs.clear()
    small, _ = _have(lambda x, unused: x + 1.0, jnp.ones(3), jnp.ones(2))
    large, how = _have(lambda x, unused: x + 1.0, jnp.ones(3), jnp.ones(5))  # the same text: jax drops `unused`
    assert how != "reused" and large is not small
    np.testing.assert_allclose(large(jnp.ones(3), jnp.ones(5)), 2.0)


class _A(NamedTuple):
    x: jax.Array


class _B(NamedTuple):
    x: jax.Array


def test_another_result_structure_is_another_program():
    programs.clear()
    a, _ = _have(lambda v: _A(v * 2.0), jnp.ones(3))
    b, how = _have(lambda v: _B(v * 2.0), jnp.ones(3))
    assert how != "reused" and isinstance(b(jnp.ones(3)), _B)


def test_a_program_with_a_host_callback_is_never_shared():
    programs.clear()

    def with_callback(sink):
        def fn(x):
            jax.debug.callback(lambda v: sink.append(float(v)), x.sum())
            return x * 2.0
        return fn

    first_sink, second_sink = [], []
    first, _ = _have(with_callback(first_sink), jnp.ones(3))
    second, how = _have(with_callback(second_sink), jnp.ones(3))
    assert how != "reused" and second is not first
    second(jnp.ones(3)).block_until_ready()
    jax.effects_barrier()
    assert second_sink == [3.0] and first_sink == []


def test_the_table_keeps_the_programs_used_last(monkeypatch):
    programs.clear()
    monkeypatch.setattr(programs, "KEPT", 1)
    monkeypatch.setattr(programs, "MOST_KEPT", 2)
    monkeypatch.setattr(programs, "_over_share", lambda: False)
    for c in (1.0, 2.0, 3.0):
        _have(lambda x, c=c: x + c, jnp.ones(2))
    assert _have(lambda x: x + 3.0, jnp.ones(2))[1] == "reused"
    assert _have(lambda x: x + 1.0, jnp.ones(2))[1] != "reused"  # the oldest was let go


def test_beyond_its_floor_the_table_keeps_programs_only_within_its_memory_share(monkeypatch):
    monkeypatch.setattr(programs, "KEPT", 2)
    monkeypatch.setattr(programs, "MOST_KEPT", 10)
    for over, kept in ((False, (1.0, 2.0, 3.0)), (True, (2.0, 3.0))):
        programs.clear()
        monkeypatch.setattr(programs, "_over_share", lambda over=over: over)
        for c in (1.0, 2.0, 3.0):
            _have(lambda x, c=c: x + c, jnp.ones(2))
        monkeypatch.setattr(programs, "_over_share", lambda: False)  # asking again adds nothing to evict
        reused = [c for c in (1.0, 2.0, 3.0) if _have(lambda x, c=c: x + c, jnp.ones(2))[1] == "reused"]
        assert tuple(reused) == kept, over


def test_the_memory_share_reads_this_process_against_the_machine(monkeypatch):
    from bandits_jax import sweep

    sizes = {"MemTotal": 8 << 30, "VmRSS": 3 << 30}
    monkeypatch.setattr(sweep, "proc_kilobytes", lambda path, field: sizes[field])
    assert programs._over_share()  # 3 GiB of 8 is above a quarter
    sizes["VmRSS"] = 512 << 20
    assert not programs._over_share()
    sizes["MemTotal"] = 0  # the system does not say
    assert not programs._over_share()


class _Recording:
    """A lowered program that records the options it is compiled with."""

    def __init__(self, lowered):
        self.lowered, self.options = lowered, "not compiled"
        self.as_text, self.args_info, self.out_tree = lowered.as_text, lowered.args_info, lowered.out_tree

    def compile(self, compiler_options=None):
        self.options = compiler_options
        return self.lowered.compile(compiler_options=compiler_options)


def test_cpu_programs_compile_with_the_loop_fusion_emitter_unless_xla_flags_name_it(monkeypatch):
    programs.clear()
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert programs.compiler_options() == {"xla_cpu_use_fusion_emitters": False}
    seen = _Recording(jax.jit(lambda x: jnp.sin(x) * 5.0).lower(jnp.ones(3)))
    program = programs.compiled(seen, "start", time.perf_counter(), batch=1, padded=1, agents=1)
    assert seen.options == {"xla_cpu_use_fusion_emitters": False}
    np.testing.assert_allclose(program(jnp.zeros(3)), 0.0)
    # the user's flag stands: the option is left to XLA_FLAGS, other options are kept
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1 --xla_cpu_use_fusion_emitters=true")
    assert programs.compiler_options() == {}
    monkeypatch.setattr(programs, "CPU_OPTIONS", {**programs.CPU_OPTIONS, "xla_embed_ir_in_executable": False})
    assert programs.compiler_options() == {"xla_embed_ir_in_executable": False}


def test_a_maker_finds_its_program_again_without_tracing():
    programs.clear()
    offset, other = np.ones(2), np.ones(2)
    first = programs.maker_of(offset, "segment", 4, (8, None))
    lowered = jax.jit(lambda x: x + 1.0).lower(jnp.ones(2))
    exe = programs.compiled(lowered, "segment", time.perf_counter(), first, batch=1, padded=1, agents=1)
    with compile_report.collect() as seen:
        again = programs.made(programs.maker_of(offset, "segment", 4, (8, None)), "segment", batch=1, padded=1,
                              agents=1)
    assert again is exe and seen[0].how == "reused" and seen[0].seconds == 0.0
    assert seen[0].fingerprint == compile_report.text_fingerprint(lowered.as_text()) and seen[0].hlo_lines > 0
    # another object with equal contents, another value, another kind of value: not found
    assert programs.made(programs.maker_of(other, "segment", 4, (8, None)), "segment") is None
    assert programs.made(programs.maker_of(offset, "segment", 4, (16, None)), "segment") is None
    assert programs.made(programs.maker_of(offset, "segment", 4.0, (8, None)), "segment") is None
    programs.clear()  # a program let go is traced again
    assert programs.made(first, "segment") is None


def test_a_maker_keys_on_jax_configuration():
    programs.clear()
    first = programs.maker_of("start", 2)
    programs.compiled(jax.jit(lambda x: x * 2.0).lower(jnp.ones(2)), "start", time.perf_counter(), first)
    with jax.numpy_dtype_promotion("strict"):  # a setting jax's own jit cache keys on
        assert programs.made(programs.maker_of("start", 2), "start") is None
    assert programs.made(programs.maker_of("start", 2), "start") is not None


def test_a_program_with_a_host_callback_is_never_found_by_its_maker():
    programs.clear()
    maker = programs.maker_of("segment", 3)

    def fn(x):
        jax.debug.callback(lambda v: None, x.sum())
        return x * 2.0

    programs.compiled(jax.jit(fn).lower(jnp.ones(3)), "segment", time.perf_counter(), maker)
    assert programs.made(maker, "segment") is None


def test_two_resolves_of_one_spec_run_one_program_traced_once():
    """Every phase of an arena resolves its curves anew: one object per problem and algorithm spec
    (`curves.problem_of`, `curves.algorithm_of`) is what lets the later phases skip the trace."""
    import dataclasses

    from bandits_jax.curves import Curve, Spec, resolve
    from bandits_jax.runner import run_batch

    programs.clear()
    curve = Curve("a", Spec("cosine", {"num_agents": 2, "horizon": 6}), Spec("linucb"))
    first = resolve([curve])[0]
    renamed = resolve([dataclasses.replace(curve, name="b", stream=0)])[0]
    assert renamed.problem is first.problem and renamed.algorithm.select is first.algorithm.select
    with compile_report.collect() as seen:
        a = run_batch(first.problem, first.algorithm, [0, 1])
        b = run_batch(renamed.problem, renamed.algorithm, [0, 1])
    half = len(seen) // 2
    assert [p.kind for p in seen[:half]] == [p.kind for p in seen[half:]] == ["problem start", "start", "segment"]
    assert all(p.how == "reused" and p.seconds == 0.0 and p.fingerprint for p in seen[half:])
    assert [p.fingerprint for p in seen[half:]] == [p.fingerprint for p in seen[:half]]
    np.testing.assert_array_equal(a.regret, b.regret)
    with compile_report.collect() as seen:  # another stream draws other numbers: another start
        run_batch(first.problem, first.algorithm._replace(stream=7), [0, 1])
    assert [p.how != "reused" for p in seen] == [False, True, False]  # the problem's start is the same


def test_a_coop_world_at_another_ttl_traces_only_its_problem_start(monkeypatch):
    """Two problems of one Coop world at two message TTLs differ in their graph arrays alone, which the
    problem's start reads (`public`): they share the world's functions (`coop._world`), so the second
    finds the algorithm's start and the segment by their makers (`runner.STEP_READS`), untraced, and
    computes what a fresh process computes. A world of another noise has another `sample_rewards`: its
    segment is traced again."""
    from bandits_jax.curves import Curve, Spec, resolve
    from bandits_jax.runner import run_batch

    def run(**options):
        world = Spec("coop-rbf", dict(num_agents=4, num_arms=3, dim=2, horizon=3, p=0.5, gamma=2, **options))
        return resolve([Curve("a", world, Spec("coop_kernel_ucb"))])[0]

    one, two, noisier = run(ttl=1), run(ttl=2), run(ttl=2, noise_std=0.5)
    assert one.problem is not two.problem and one.problem.contexts is two.problem.contexts
    assert noisier.problem.sample_rewards is not two.problem.sample_rewards
    programs.clear()
    want = run_batch(two.problem, two.algorithm, [0, 1])  # ttl=2 alone
    programs.clear()
    compiled, traced = programs.compiled, []
    monkeypatch.setattr(programs, "compiled", lambda *a, **k: traced.append(a[1]) or compiled(*a, **k))
    run_batch(one.problem, one.algorithm, [0, 1])
    assert traced == ["problem start", "start", "segment"]
    got = run_batch(two.problem, two.algorithm, [0, 1])
    assert traced[3:] == ["problem start"]
    np.testing.assert_array_equal(got.regret, want.regret)
    np.testing.assert_array_equal(got.comm_up, want.comm_up)
    run_batch(noisier.problem, noisier.algorithm, [0, 1])
    assert traced[4:] == ["problem start", "segment"]


def test_an_algorithm_spec_is_built_again_when_its_factory_changes(monkeypatch):
    from bandits_jax import algorithms
    from bandits_jax.curves import Spec, algorithm_of
    from bandits_jax.devices import precision_scope

    spec = Spec("linucb", {"lam": 2.0})
    with precision_scope("float64"):
        built = algorithm_of(spec)
        assert algorithm_of(spec) is built and algorithm_of(spec.with_options(lam=3.0)) is not built
    with precision_scope("float32"):  # arrays a factory builds take the precision
        assert algorithm_of(spec) is not built
    with precision_scope("float64"):
        assert algorithm_of(spec) is built
    factory = algorithms.algorithm_factory("linucb")
    monkeypatch.setitem(algorithms.ALGORITHMS, "linucb", lambda **options: factory(**options))
    with precision_scope("float64"):
        assert algorithm_of(spec) is not built


def test_a_batch_compiled_ahead_runs_its_programs_without_tracing_and_numbers_unchanged(monkeypatch):
    """`runner.compile_ahead` hands the first group's three programs to the worker; the `run_batch` that
    follows finds each by its maker, waits for it, and notes it as compiled (once), with numbers equal
    to a batch run without it. dis_kernel_ucb_duets grows its buffers: its second segment is traced then."""
    from bandits_jax.curves import Curve, Spec, resolve
    from bandits_jax.runner import compile_ahead, run_batch

    compiled = programs.compiled
    for algorithm in ("linucb", "dis_kernel_ucb_duets"):
        run = resolve([Curve("a", Spec("cosine", {"num_agents": 2, "horizon": 6}), Spec(algorithm))])[0]
        programs.clear()
        with compile_report.collect() as plain:
            want = run_batch(run.problem, run.algorithm, [0, 1, 2], first_segment=4)
        programs.clear()
        with compile_report.collect() as early:  # compiling ahead notes nothing: the run that uses it does
            compile_ahead(run.problem, run.algorithm, [0, 1, 2], first_segment=4)
        assert early == []
        assert sum(isinstance(p, programs._InFlight) for p in programs._table.values()) == 3
        traced = []
        monkeypatch.setattr(programs, "compiled", lambda *a, **k: traced.append(a[1]) or compiled(*a, **k))
        with compile_report.collect() as seen:
            got = run_batch(run.problem, run.algorithm, [0, 1, 2], first_segment=4)
        monkeypatch.setattr(programs, "compiled", compiled)
        assert len(traced) == sum(p.how != "reused" for p in seen) - 3  # only programs after the first segment
        assert not any(isinstance(p, programs._InFlight) for p in programs._table.values())
        assert [p.kind for p in seen] == [p.kind for p in plain], algorithm
        assert [p.fingerprint for p in seen] == [p.fingerprint for p in plain]  # the same texts
        assert all(p.how in ("compiled", "loaded") and p.seconds > 0.0 for p in seen[:3])  # (the persistent cache)
        np.testing.assert_array_equal(got.regret, want.regret)


def test_a_program_in_flight_is_found_by_its_text_and_a_failed_compile_raises_in_the_caller(monkeypatch):
    programs.clear()
    lowered = jax.jit(lambda x: jnp.cumsum(x) * 2.0).lower(jnp.arange(3.0))
    programs.ahead(lowered, time.perf_counter(), programs.maker_of("in flight", 1))
    with compile_report.collect() as seen:
        exe = programs.compiled(jax.jit(lambda x: jnp.cumsum(x) * 2.0).lower(jnp.arange(3.0)), "start",
                                time.perf_counter(), batch=1, padded=1, agents=1)
        again = programs.made(programs.maker_of("in flight", 1), "start", batch=1, padded=1, agents=1)
    assert again is exe and [p.how for p in seen][1] == "reused" and seen[0].how in ("compiled", "loaded")
    np.testing.assert_allclose(exe(jnp.arange(3.0)), [0.0, 2.0, 6.0])

    def broken(lowered_):
        raise RuntimeError("no compiler today")

    monkeypatch.setattr(programs, "_compile", broken)
    programs.ahead(jax.jit(lambda x: x - 1.0).lower(jnp.ones(2)), time.perf_counter(), programs.maker_of("x", 2))
    with pytest.raises(RuntimeError, match="no compiler today"):
        programs.made(programs.maker_of("x", 2), "start")
    assert not programs.known(programs.maker_of("x", 2))  # asked again, it is compiled again


def test_a_program_with_a_host_callback_is_never_compiled_ahead():
    programs.clear()

    def fn(x):
        jax.debug.callback(lambda v: None, x.sum())
        return x * 2.0

    programs.ahead(jax.jit(fn).lower(jnp.ones(3)), time.perf_counter(), programs.maker_of("cb", 1))
    assert not programs.known(programs.maker_of("cb", 1)) and len(programs._table) == 0
