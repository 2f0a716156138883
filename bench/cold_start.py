"""Cold start: what a first run and a second one cost, program by program.

`python -m bench.cold_start OUT.json [--only NAME ...]` runs each command of COMMANDS twice in fresh
processes with one new compile-cache folder and no curve cache: "cold" (the cache empty) and "warm"
(the cache the cold run filled; every seed is computed again, no program need be compiled again).
Each run has `--compile-report`, so besides the process's wall-clock seconds it records, from the
compile reports of its output folder(s), the programs compiled, loaded from the cache and reused in
the process, the seconds each took, the distinct programs (by the fingerprint of their StableHLO) and
the most distinct programs one algorithm-and-problem pair asked for (an arena pair's tuning, reported
and knob curves together). The load average
before each run is kept: a busy machine's numbers are not comparable. `table` renders the JSON as
the "Cold start" table of bench/README.md; measure the code before and after a change in one session,
one after the other, with nothing else running.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bandits_jax.arena import KNOB_TAG

from .harness import save_and_print

COMMANDS = {  # name: the bandits-jax arguments (an output folder is added)
    "quickstart": ["run", "quickstart", "--no-plot"],
    "quickstart smoke": ["run", "quickstart", "--size", "smoke", "--no-plot"],
    "arena smoke, cosine": ["arena", "--size", "smoke", "--problem", "cosine"],
    # the small size's batches differ (tuning grid, reported window, knob points): what groups share
    "arena small, cosine, 3 algorithms": ["arena", "--size", "small", "--problem", "cosine", "--algorithm",
                                          "kernel_ucb", "--algorithm", "linucb", "--algorithm", "fed_lin_ucb"],
    "arena smoke": ["arena", "--size", "smoke"],
}
RUNS = ("cold", "warm")


def measure(names) -> dict:
    """{"commands": {name: {run: {wall_seconds, load_before, programs}}}, "machine": ...}."""
    commands = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="cold_start_") as tmp:
            env = dict(os.environ, BANDITS_JAX_COMPILE_CACHE=str(Path(tmp) / "cache"))
            runs = {}
            for run in RUNS:
                out = Path(tmp) / run
                load = os.getloadavg()[0]
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "bandits_jax.cli", *COMMANDS[name], "--out", str(out), "--quiet",
                                "--no-curve-cache", "--compile-report"], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                runs[run] = {"wall_seconds": time.perf_counter() - started, "load_before": load,
                             "programs": programs(out)}
            commands[name] = runs
    return {"commands": commands, "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()}}


def programs(out: Path) -> dict:
    """The compile reports under `out` summed: programs and seconds per way (compiled, loaded, reused),
    the distinct programs compiled or loaded, and the most distinct ones of one pair (`pair_of`)."""
    total = {how: {"programs": 0, "seconds": 0.0} for how in ("compiled", "loaded", "reused")}
    per_pair, fingerprints = defaultdict(set), False
    for path in sorted(out.rglob("compile_report.json")):
        report = json.loads(path.read_text())
        for how, t in report["summary"].items():
            total[how]["programs"] += t["programs"]
            total[how]["seconds"] += t["seconds"]
        for i, p in enumerate(report["programs"]):
            # a report without fingerprints (older code) counts what it compiled: in a cold run each
            # distinct program is compiled once, and loaded only when asked for again; a program
            # reused from the process's table has its fingerprint, one reused by its own call none
            fingerprints |= bool(p.get("fingerprint"))
            if p.get("fingerprint"):
                per_pair[pair_of(p["curve"])].add(p["fingerprint"])
            elif p["how"] == "compiled":
                per_pair[pair_of(p["curve"])].add((str(path), i))
    known = fingerprints or total["compiled"]["programs"] > 0  # a warm run of older code cannot tell
    return {**total, "distinct": len(set().union(*per_pair.values())) if known else None,
            "most_per_pair": max(map(len, per_pair.values()), default=0) if known else None}


def pair_of(curve: str) -> str:
    """'cosine: fn_ucb @knob' and 'cosine: fn_ucb [x0.3]' -> 'cosine: fn_ucb'; any other curve is its own."""
    return curve.split(KNOB_TAG)[0].split(" [")[0]


def table(doc: dict) -> str:
    """Markdown: one row per command and run."""
    lines = [f"On {doc['machine']['cpu_count']} CPU(s); each command cold (an empty compile cache) and warm (the "
             "cache the cold run filled), no curve cache, fresh processes.", "",
             "| command | run | process wall s | compiled: programs, s | loaded: programs, s | reused: programs, s | "
             "distinct | most per pair | load before |", "|---|---|---|---|---|---|---|---|---|"]
    for name, runs in doc["commands"].items():
        for run, r in runs.items():
            p = r["programs"]
            distinct, most = ("-" if p[k] is None else p[k] for k in ("distinct", "most_per_pair"))
            lines.append(f"| {name} | {run} | {r['wall_seconds']:.1f} | {p['compiled']['programs']}, "
                         f"{p['compiled']['seconds']:.1f} | {p['loaded']['programs']}, {p['loaded']['seconds']:.1f} | "
                         f"{p['reused']['programs']}, {p['reused']['seconds']:.1f} | {distinct} | {most} | {r['load_before']:.1f} |")
    return "\n".join(lines)


def comparison(docs: dict) -> str:
    """Markdown of several codes' measurements ({file name: doc with its "code"}, in the order of the
    number each file name starts with: 9_... before 10_...)."""
    order = lambda item: (int(item[0].split("_")[0]), item[0])  # noqa: E731
    return "\n\n".join(f"Code {doc['code']}:\n\n{table(doc)}" for _, doc in sorted(docs.items(), key=order))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", action="append", choices=list(COMMANDS), help="one command (repeatable)")
    parser.add_argument("--code", help="what the measured code is (a commit and a few words), for `comparison`")
    args = parser.parse_args(argv)
    doc = measure(args.only or list(COMMANDS))
    if args.code:
        doc["code"] = args.code
    return save_and_print(doc, args.out, table(doc))


if __name__ == "__main__":
    sys.exit(main())
