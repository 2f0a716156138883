"""The process's table of compiled programs (bandits_jax/programs.py): one text, one executable; a host
callback, another argument shape or another result structure, another program."""
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

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

    sizes = {"MemTotal": 8 << 30, "VmRSS": 2 << 30}
    monkeypatch.setattr(sweep, "proc_kilobytes", lambda path, field: sizes[field])
    assert programs._over_share()  # 2 GiB of 8 is above an eighth
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
