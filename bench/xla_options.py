"""XLA's CPU compile options: what each costs in compile seconds and buys in run seconds.

`python -m bench.xla_options OUT.json [--cases NAME:S,...]` runs `python -m bench.compiles` on the same
scale cases once per option set of OPTIONS, each in a fresh process with that XLA_FLAGS (the rest of the
environment as it is), and keeps per case the compile and run seconds and the summed regret, so that a
set that changes the numbers shows it. Run it with nothing else running: the sets run one after another,
and a load that changes between them is what the table would show. `table` renders the JSON as the
"XLA's CPU options" table of bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from .harness import save_and_print

OPTIONS = {  # name: XLA_FLAGS
    # the library's own: XLA's loop fusion emitter on CPU (bandits_jax.programs.CPU_OPTIONS) and LLVM's loop
    # strength reduction off (bandits_jax.programs.cpu_llvm_flags)
    "default": "",
    "MLIR fusion emitters": "--xla_cpu_use_fusion_emitters=true",  # XLA's own default
    "LLVM O1, no expensive passes": "--xla_backend_optimization_level=1 --xla_llvm_disable_expensive_passes=true",
    "LLVM O0": "--xla_backend_optimization_level=0",
    # LLVM fully unrolls a loop of a small constant trip count: an elementwise chain over an array
    # whose last axis is short (a threefry draw of K values under vmap) is copied K times
    "no full unroll": "--xla_backend_extra_options=-unroll-full-max-count=1",
    "no unroll": "--xla_backend_extra_options=-unroll-threshold=0",
    # LLVM's loop strength reduction, in its code generation, builds ever longer sums of scalar evolution
    # over the straight-line threefry rounds of a draw inside a loop (a perf profile: most of such a
    # program's compile in ScalarEvolution::getAddExpr)
    "no LSR": "--xla_backend_extra_options=-disable-lsr",
    "LSR on": "--xla_backend_extra_options=-disable-lsr=false",  # the library's default before it was off
}
CASES = "fn_ucb:10,duets:10,dis_kernel_ucb_duets:10,async_kernel_ucb:10,approx_dis_kernel_ucb:10,kernel_ucb:10"


def measure(cases: str, sets=tuple(OPTIONS)) -> dict:
    """{"options": {name: {"flags": XLA_FLAGS, "cases": {NAME:S: bench.compiles.measure()}}}, "machine"}
    for the option sets named `sets` (keys of OPTIONS)."""
    out = {}
    for name in sets:
        flags = OPTIONS[name]
        with tempfile.TemporaryDirectory(prefix="xla_options_") as tmp:
            path = Path(tmp) / "cases.json"
            env, load = {**os.environ, "XLA_FLAGS": flags}, os.getloadavg()[0]
            subprocess.run([sys.executable, "-m", "bench.compiles", cases, str(path)], env=env, check=True,
                           cwd=Path(__file__).resolve().parent.parent)
            out[name] = {"flags": flags, "load_before": load, "cases": json.loads(path.read_text())}
    return {"options": out, "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()}}


def table(doc: dict) -> str:
    """Markdown: per case, each option set's compile and run seconds; the regret where it differs from the
    first set's; then the sums."""
    names = list(doc["options"])
    first = doc["options"][names[0]]["cases"]
    head = " | ".join(f"{n}: compile s, run s" for n in names)
    lines = [f"| case | {head} | regret |", "|---" * (len(names) + 2) + "|"]
    for case, base in first.items():
        cells, moved = [], []
        for n in names:
            row = doc["options"][n]["cases"][case]
            cells.append(f"{row['compile']:.1f}, {row['run']:.2f}")
            if row["regret"] is not None and row["regret"] != base["regret"]:
                moved.append(f"{n}: {row['regret']:.16g}")
        regret = "equal" if not moved else f"{base['regret']:.16g}; " + "; ".join(moved)
        lines.append(f"| {case} | " + " | ".join(cells) + f" | {regret} |")
    sums = [f"{sum(r['compile'] for r in doc['options'][n]['cases'].values()):.0f}, "
            f"{sum(r['run'] for r in doc['options'][n]['cases'].values()):.1f}" for n in names]
    loads = ", ".join(f"{n} {o['load_before']:.1f}" for n, o in doc["options"].items())
    return "\n".join(lines + ["| sum | " + " | ".join(sums) + " | |", "", f"Load average before each set: {loads}."])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.xla_options", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cases", default=CASES, help=f"NAME:S pairs of bench.scale cases (default {CASES})")
    parser.add_argument("--sets", default=",".join(OPTIONS),
                        help=f"comma-separated option sets, of: {', '.join(OPTIONS)} (default all)")
    args = parser.parse_args(argv)
    sets = args.sets.split(",")
    unknown = [s for s in sets if s not in OPTIONS]
    if unknown:
        parser.error(f"unknown option set(s) {', '.join(map(repr, unknown))}; the sets are {', '.join(OPTIONS)}")
    doc = measure(args.cases, sets)
    return save_and_print(doc, args.out, table(doc))


if __name__ == "__main__":
    sys.exit(main())
