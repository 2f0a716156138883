"""Render the tables of bench/README.md from the JSON in bench/measured/.

Every table on that page is what a bench module prints from a measurement's JSON, never a copy
typed by hand, so the tables cannot drift from their JSON. Each table sits between the
lines `<!-- table: NAME -->` and `<!-- /table: NAME -->`; TABLES maps NAME to its JSON (a path under
bench/measured/; a folder gives {file name: JSON} of its files) and to the function that makes the
text. A Markdown table is written as it is, a plain-text table (the sections' reports) in a code
fence. The prose outside the markers is hand-written and left alone.

    python -m bench.render            # rewrite bench/README.md in place
    python -m bench.render --check    # exit 1 and print a unified diff when the page differs
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Callable

from . import (arena_cache, cold_start, compiles, cope_bench, coop_bench, duets_bench, harness, precision, scale,
               seed_batching, step_cost, xla_options)

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
MEASURED = HERE / "measured"
OPEN = re.compile(r"<!-- table: (\S+) -->")
CLOSE = re.compile(r"<!-- /table: (\S+) -->")


def fenced(*parts: str) -> str:
    """Plain-text report parts, a blank line apart, in a code fence."""
    return "\n".join(["```text", "\n\n".join(parts), "```"])


def report(key: str, table: Callable) -> Callable:
    """A section of `python -m bench` as it prints it: the machine line, then table(doc[key])."""
    return lambda doc: fenced(harness.machine_of(doc), table(doc[key]))


def compiles_with_runs(doc: dict) -> str:
    """A comparison of compile tables (`compiles.table`) with the floor's compile and the run seconds."""
    return compiles.table(doc, ("compile", "floor_compile", "run"))


TABLES = {
    "seed_batching": ("seed_batching_pairs", seed_batching.pairs_table),
    "duets": ("duets_bench.json", report("duets_section", duets_bench.table)),
    "cope": ("cope_bench.json", report("cope_section", cope_bench.table)),
    "coop": ("coop_bench_quick.json", report("coop_section", coop_bench.table)),
    "scale": ("scale.json", lambda doc: scale.markdown(doc["scale_section"])),
    "gpu_scale": ("gpu_h100/run3_scale.json", lambda doc: scale.markdown(doc["scale_section"])),
    "compiles": ("compile_flat_draws.json", compiles.table),
    "compiles_threefry": ("compile_threefry.json", compiles_with_runs),
    "compiles_issue": ("compile_issue.json", compiles_with_runs),
    "compiles_session": ("compile_session.json", compiles_with_runs),
    "compiles_lsr": ("compile_lsr.json", compiles_with_runs),
    "compiles_duets": ("compile_duets.json", compiles_with_runs),
    "arena_cache": ("arena_cache.json", arena_cache.table),
    "cold_start": ("cold_start", cold_start.comparison),
    "xla_options": ("xla_options.json", xla_options.table),
    "xla_emitters": ("xla_emitters.json", xla_options.table),
    "xla_lsr": ("xla_lsr.json", xla_options.table),
    "xla_lsr_again": ("xla_lsr_again.json", xla_options.table),
    "step_cost": ("step_cost.json", lambda doc: step_cost.table(step_cost.costliest(doc["step_cost"]))),
    "precision": ("precision.json", lambda doc: precision.table(doc["precision_section"])),
    "precision_notes": ("precision.json", lambda doc: precision.standard_error_notes(doc["precision_section"])),
}


def load(path: Path):
    """The JSON at `path`, or {file name: JSON} of the JSON files in a folder."""
    if path.is_dir():
        return {p.name: json.loads(p.read_text()) for p in sorted(path.glob("*.json"))}
    return json.loads(path.read_text())


def markers(text: str) -> list:
    """The NAMEs of the page's marker pairs, in order; ValueError for a pair that is not closed, a
    close without its open, a pair inside another, or a NAME used twice or not in TABLES."""
    names, inside = [], None
    for number, line in enumerate(text.splitlines(), 1):
        opened, closed = OPEN.fullmatch(line), CLOSE.fullmatch(line)
        if opened:
            name = opened.group(1)
            if inside is not None:
                raise ValueError(f"line {number}: table {name} opens inside table {inside}")
            if name not in TABLES:
                raise ValueError(f"line {number}: table {name} is not registered in bench.render.TABLES")
            if name in names:
                raise ValueError(f"line {number}: table {name} appears twice")
            names.append(inside := name)
        elif closed:
            if closed.group(1) != inside:
                raise ValueError(f"line {number}: {line} closes no open table (open: {inside})")
            inside = None
    if inside is not None:
        raise ValueError(f"table {inside} is not closed")
    return names


def table_text(name: str, measured: Path = MEASURED) -> str:
    """NAME's table rendered from its JSON."""
    path, make = TABLES[name]
    return make(load(measured / path))


def render(text: str, measured: Path = MEASURED) -> str:
    """`text` with what lies between each marker pair replaced by its table, a blank line either side."""
    markers(text)
    out, inside = [], False
    for line in text.splitlines():
        opened = OPEN.fullmatch(line)
        if opened:
            out += [line, "", *table_text(opened.group(1), measured).splitlines(), ""]
            inside = True
        elif CLOSE.fullmatch(line):
            inside = False
        if not inside:
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.render", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 and print a unified diff when bench/README.md differs")
    args = parser.parse_args(argv)
    committed = README.read_text()
    rendered = render(committed)
    if not args.check:
        README.write_text(rendered)
        return 0
    if rendered == committed:
        return 0
    sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), rendered.splitlines(True),
                                               "bench/README.md", "bench/README.md (rendered)"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
