"""The compile report (`bandits_jax.compile_report`): what it records for a run, and why it says each
program exists."""
import json

import numpy as np
import pytest

from bandits_jax import cli, compile_report, programs
from bandits_jax.compile_report import COMPILED, LOADED, REUSED, Program
from bandits_jax.sweep import COMPILE_REPORT_FILE, run_experiment


def _program(curve="c", kind="segment", how=COMPILED, batch=4, agents=2, capacity="(8, None)", length=8):
    return Program(curve, kind, how, 1.0, 10, batch, batch, agents, capacity, length)


def test_why_names_what_differs_from_the_curves_earlier_programs():
    programs = [_program(kind="start", capacity="", length=0), _program(), _program(capacity="(16, None)"),
                _program(how=REUSED), _program(batch=6, capacity="(16, None)"), _program(agents=3, batch=6,
                                                                                          capacity="(16, None)"),
                _program(curve="d"), _program(how=LOADED, batch=6, agents=3, capacity="(16, None)", length=4)]
    assert compile_report.why(programs) == [
        "first start", "first segment", "capacity segment", "reused", "batch shape", "agent count",
        "first segment", "segment length"]
    totals = compile_report.summary(programs)
    assert totals[COMPILED] == {"programs": 6, "seconds": 6.0} and totals[REUSED]["programs"] == 1
    assert totals[LOADED]["programs"] == 1


def test_nothing_is_recorded_outside_collect():
    compile_report.note("start", COMPILED, 1.0, batch=1, padded=1, agents=1)  # no list: ignored
    with compile_report.collect() as programs, compile_report.curve("x"):
        compile_report.note("start", COMPILED, 1.0, batch=1, padded=1, agents=1)
    assert [(p.curve, p.kind) for p in programs] == [("x", "start")]
    assert not compile_report.active()


def test_a_run_writes_its_report_with_every_program_it_asked_for(tmp_path, capsys):
    programs.clear()  # another test of this process may have compiled these programs
    out = run_experiment("quickstart", size="smoke", out=tmp_path / "run", only=("Random",), plot=False,
                         curves=False, report_compiles=True)
    report = json.loads((out / COMPILE_REPORT_FILE).read_text())
    kinds = [(p["curve"], p["kind"], p["why"]) for p in report["programs"]]
    assert kinds[:3] == [("Random", "problem start", "first problem start"), ("Random", "start", "first start"),
                         ("Random", "segment", "first segment")]
    assert all(p["how"] in (COMPILED, LOADED) and p["hlo_lines"] > 0 and p["agents"] == 1 for p in report["programs"])
    assert sum(t["programs"] for t in report["summary"].values()) == len(report["programs"])
    assert "| Random | start |" in capsys.readouterr().out


def test_the_flag_is_on_run_and_arena(capsys):
    for command in ("run", "arena"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        assert "--compile-report" in capsys.readouterr().out


def test_the_arena_compiles_one_start_and_one_segment_per_pair_and_one_start_per_problem(tmp_path):
    """Tuning grid, its edge, reported window and knob run in groups of one size (`arena.shared_group`),
    and the process keeps what it compiled (`programs`): every program after the pair's first two is
    one of those two, reused."""
    from bandits_jax import arena

    programs.clear()
    out = arena.run_arena("smoke", problems=("cosine",), algorithms=("linucb",), out=tmp_path / "arena",
                          quiet=True, curves=False, report_compiles=True)
    rows = [p for path in sorted(out.rglob(COMPILE_REPORT_FILE)) for p in json.loads(path.read_text())["programs"]]
    had = [p for p in rows if p["how"] != REUSED]
    assert [p["kind"] for p in had] == ["problem start", "start", "segment"] and len(rows) > 3
    assert {p["fingerprint"] for p in rows if p["fingerprint"]} == {p["fingerprint"] for p in had}
    assert {p["padded"] for p in rows} == {arena.shared_group(arena.SIZES["smoke"]["seeds"])} == {2}
    reported = json.loads((out / COMPILE_REPORT_FILE).read_text())["programs"]  # the last phase traces nothing
    assert reported and all(p["how"] == REUSED and p["seconds"] == 0.0 and p["hlo_lines"] > 0
                            for p in reported if p["fingerprint"])
    assert any(p["fingerprint"] for p in reported)


def test_a_sweep_compiles_the_next_curve_ahead_and_nothing_for_a_cached_curve(tmp_path, monkeypatch):
    """Before a curve's chunks run, the sweep hands the next curve's first programs to the worker
    (`runner.compile_ahead`): the report still names each program once, where it is used, and the
    numbers are those of a sweep without it. Curves taken from the curve cache compile nothing ahead;
    nor does a run whose programs report progress from inside (their text holds a callback)."""
    from bandits_jax import sweep

    calls = []
    monkeypatch.setattr(sweep, "compile_ahead", lambda problem, algorithm, *a, **k: calls.append(algorithm.name))
    programs.clear()
    plain = run_experiment("quickstart", size="smoke", out=tmp_path / "plain", only=("Random", "KernelUCB"),
                           plot=False, quiet=True, curves=tmp_path / "curves")
    assert calls == ["KernelUCB", "Random"]  # the first curve, then the next while the first runs
    monkeypatch.undo()
    programs.clear()
    out = run_experiment("quickstart", size="smoke", out=tmp_path / "run", only=("Random", "KernelUCB"),
                         plot=False, quiet=True, curves=False, report_compiles=True)
    report = json.loads((out / COMPILE_REPORT_FILE).read_text())["programs"]
    had = [(p["curve"], p["kind"]) for p in report if p["how"] != REUSED]
    assert had == [("KernelUCB", "problem start"), ("KernelUCB", "start"), ("KernelUCB", "segment"),
                   ("Random", "start"), ("Random", "segment")]
    assert not any(isinstance(p, programs._InFlight) for p in programs._table.values())
    a, b = np.load(plain / "results.npz"), np.load(out / "results.npz")
    assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    monkeypatch.setattr(sweep, "compile_ahead", lambda problem, algorithm, *a, **k: calls.append(algorithm.name))
    calls.clear()
    run_experiment("quickstart", size="smoke", out=tmp_path / "again", only=("Random", "KernelUCB"), plot=False,
                   quiet=True, curves=tmp_path / "curves")
    run_experiment("quickstart", size="smoke", out=tmp_path / "steps", only=("Random",), plot=False,
                   curves=False, step_progress=True)
    assert calls == []
