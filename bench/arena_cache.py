"""First and second run of an arena: what JAX's persistent compilation cache saves.

`python -m bench.arena_cache OUT.json [ARENA ARGS...]` runs `bandits-jax arena ARGS --quiet
--no-curve-cache` three times in fresh processes with one new compile-cache folder: "first" (empty
cache, new results folder), "second" (the cache the first filled, another new results folder: every
run computed again, nothing compiled again) and "resumed" (the second's folder again: every seed is
read back, nothing computed). It records each run's wall-clock seconds around the whole process
(imports and the fit checks included) and the arena's own timing (`arena.json`: compile and run
seconds of its chunks, programs compiled and loaded), with the load average before each run; the
resumed run computes no chunk, so its row shows no sweep seconds.
`table` renders the JSON as the table of bench/README.md ("Compile cache").
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
from pathlib import Path

from .harness import save_and_print

RUNS = (("first", "a"), ("second", "b"), ("resumed", "b"))


def measure(arena_args: list) -> dict:
    """{"arena": args, "runs": {name: {wall_seconds, load_before, timing}}, "machine": ...}."""
    runs = {}
    with tempfile.TemporaryDirectory(prefix="arena_cache_") as tmp:
        env = dict(os.environ, BANDITS_JAX_COMPILE_CACHE=str(Path(tmp) / "cache"))
        for name, folder in RUNS:
            out = Path(tmp) / folder
            load = os.getloadavg()[0]
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bandits_jax.cli", "arena", *arena_args, "--out", str(out),
                            "--quiet", "--no-curve-cache"], env=env, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            timing = json.loads((out / "arena.json").read_text())["timing"]
            runs[name] = {"wall_seconds": wall, "load_before": load, "timing": timing}
    return {"arena": arena_args, "runs": runs,
            "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()}}


def table(doc: dict) -> str:
    """Markdown: one row per run, process wall-clock and the arena's own timing."""
    lines = [f"`bandits-jax arena {' '.join(doc['arena'])}` on {doc['machine']['cpu_count']} CPU(s); one compile-cache "
             "folder for the three runs", "",
             "| run | process wall s | compiling s | running s | programs compiled | programs loaded | load before |",
             "|---|---|---|---|---|---|---|"]
    for name, run in doc["runs"].items():
        t = run["timing"]
        sweep = "- | -" if name == "resumed" else f"{t['compile_seconds']:.1f} | {t['run_seconds']:.1f}"
        lines.append(f"| {name} | {run['wall_seconds']:.1f} | {sweep} | {t['compiled']} | {t['loaded']} | "
                     f"{run['load_before']:.1f} |")
    first, second = doc["runs"]["first"]["wall_seconds"], doc["runs"]["second"]["wall_seconds"]
    return "\n".join(lines + ["", f"second run / first run, process wall-clock: {second / first:.2f}"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.arena_cache", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("arena", nargs=argparse.REMAINDER, help="arguments of `bandits-jax arena`")
    args = parser.parse_args(argv)
    doc = measure(args.arena or ["--size", "smoke"])
    return save_and_print(doc, args.out, table(doc))


if __name__ == "__main__":
    sys.exit(main())
