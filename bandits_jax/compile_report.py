"""The compile report: every program a block of work asked for, whether XLA compiled it, loaded it from
the persistent cache or found it already compiled in this process, its seconds, its size, and why it
exists.

    with compile_report.collect() as programs:       # `run --compile-report`, `arena --compile-report`
        with compile_report.curve("FN-UCB (N=2)"):
            run_batch(...)
    compile_report.table(programs)                   # Markdown lines, one per program

The runner names each program by what made it (`note`): its kind ("problem start", "start" (the
algorithm's), "segment", "demand" for the runner, "trials" for a phase-level experiment), its batch
(runs, and the padded runs of its group), the agents of its problem, and for a segment the capacity
it was compiled for (`Sizes`) and its length. Within one curve, a program of a kind that was already
compiled exists because one of those differs, and the report says which ("why"): a capacity segment,
a batch shape, a segment length, an agent count. A program is "reused" when the process had it
already: asked for again by the same call (no cost), found by the objects that made it
(`programs.made`; no cost, nothing traced), or traced again to the text of a program compiled
earlier in the process (`programs.compiled`; the tracing is its cost). Across curves, reuse is what
sharing one program buys.

Size: the lines of the program's StableHLO text (`Lowered.as_text`), and its fingerprint (a hash of that
text: two programs with one fingerprint are one program, compiled once per process). Nothing is
recorded outside `collect()`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import NamedTuple, Optional

COMPILED, LOADED, REUSED = "compiled", "loaded", "reused"
_SHAPE = ("padded",)  # a program's batch shape: the runs of its group, padded
_WHY = (("agents", "agent count"), ("capacity", "capacity segment"), ("length", "segment length"))

_programs: Optional[list] = None
_curve = ""


class Program(NamedTuple):
    """One program asked for: the curve it served, its kind, how it was had (compiled, loaded, reused),
    the seconds that took, its size in StableHLO lines, its batch shape, agents, and a segment's capacity
    and length ("" and 0 for other kinds), and the fingerprint of its StableHLO text (size 0 and
    fingerprint "" for a program its caller reused without tracing it again)."""

    curve: str
    kind: str
    how: str
    seconds: float
    hlo_lines: int
    batch: int
    padded: int
    agents: int
    capacity: str = ""
    length: int = 0
    fingerprint: str = ""


@contextlib.contextmanager
def collect():
    """Record every program asked for inside the block into the list it yields."""
    global _programs
    outer, _programs = _programs, []
    try:
        yield _programs
    finally:
        _programs = outer


@contextlib.contextmanager
def curve(label: str):
    """Name the curve the programs asked for inside the block serve."""
    global _curve
    outer, _curve = _curve, label
    try:
        yield
    finally:
        _curve = outer


def active() -> bool:
    return _programs is not None


def note(kind: str, how: str, seconds: float, text: str = "", lines: int = 0, fingerprint: str = "",
         **shape) -> None:
    """Record one program (nothing outside `collect()`); `text`, its StableHLO (`Lowered.as_text`), gives its
    size and fingerprint; a program had without tracing gives them as `lines` and `fingerprint` where
    they are known (0 and "" where its caller reused it without asking the table)."""
    if _programs is None:
        return
    if text:
        lines, fingerprint = len(text.splitlines()), text_fingerprint(text)
    _programs.append(Program(_curve, kind, how, float(seconds), lines, **shape, fingerprint=fingerprint))


def text_fingerprint(text: str) -> str:
    """16 hex digits of the sha256 of a program's StableHLO text: one fingerprint, one program."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def why(programs: list) -> list:
    """Per program, why it exists: "first <kind>" for a curve's first program of a kind, else the fields in
    which it differs from that curve's programs of its kind compiled or loaded before it ("reused" for
    one had again at no cost)."""
    reasons, seen = [], {}
    for p in programs:
        if p.how == REUSED:
            reasons.append("reused")
            continue
        before = seen.setdefault((p.curve, p.kind), [])
        if not before:
            reasons.append(f"first {p.kind}")
        else:
            last = before[-1]
            diff = [text for field, text in _WHY if getattr(p, field) != getattr(last, field)]
            if any(getattr(p, f) != getattr(last, f) for f in _SHAPE):
                diff.append("batch shape")
            reasons.append(", ".join(diff) or "same shape, another trace (a static option)")
        before.append(p)
    return reasons


def table(programs: list) -> list:
    """Markdown lines: one row per program with its curve, kind, how, seconds, size and why; then the
    totals per way of having it."""
    lines = ["| curve | program | how | seconds | StableHLO lines | batch (padded) | agents | capacity, "
             "length | why |", "|---|---|---|---|---|---|---|---|---|"]
    for p, reason in zip(programs, why(programs)):
        seg = f"{p.capacity}, {p.length}" if p.kind == "segment" else "-"
        lines.append(f"| {p.curve} | {p.kind} | {p.how} | {p.seconds:.2f} | {p.hlo_lines or '-'} | "
                     f"{p.batch} ({p.padded}) | {p.agents} | {seg} | {reason} |")
    totals = summary(programs)
    lines += ["", "; ".join(f"{how}: {t['programs']} programs, {t['seconds']:.1f} s" for how, t in totals.items())]
    return lines


def summary(programs: list) -> dict:
    """{how: {"programs": count, "seconds": sum}} for compiled, loaded and reused."""
    return {how: {"programs": sum(p.how == how for p in programs),
                  "seconds": sum(p.seconds for p in programs if p.how == how)} for how in (COMPILED, LOADED, REUSED)}


def write(programs: list, path: Path) -> Path:
    """The report as JSON: {"programs": [Program as a dict with its "why"], "summary": `summary`}."""
    rows = [{**p._asdict(), "why": reason} for p, reason in zip(programs, why(programs))]
    Path(path).write_text(json.dumps({"programs": rows, "summary": summary(programs)}, indent=1) + "\n")
    return Path(path)
