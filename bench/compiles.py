"""Compile seconds of scale cases: the algorithm's batch and its environment floor, nothing cached.

`python -m bench.compiles NAME:S[,NAME:S...] OUT.json [--whole-batch]` builds each named scale case
(`bench.scale.CASES`) at S seeds and runs it once through `run_batch` (or `run_trials`) with an empty
compiled-call cache, then the same problem under the uniform-random policy (the floor), and records
both calls' compile and run seconds and the summed regret (so two codes can be checked for the same
numbers). `--whole-batch` puts all S runs in one vmap, the layout on an accelerator; without it the
runner picks the CPU layout (the algorithm's `cpu_vmap`). Run the two codes to compare in fresh
processes, one after another. A profile, not a section of `python -m bench` (bench/README,
"Compiling"); `table` renders a comparison file such as measured/compile_flat_draws.json.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from bandits_jax.core import Trial

from . import scale


def measure(name: str, seeds: int, whole_batch: bool) -> dict:
    """{compile, run, floor_compile, regret} of one case at `seeds` seeds (floor and regret None for a trial)."""
    case = next((c for c in scale.CASES if c.algorithm == name), None)
    if case is None:
        raise SystemExit(f"no scale case named {name!r}; the names are those of `bench.scale.CASES`")
    run, params, cfg = scale.build(case)
    vmap_size = seeds if whole_batch else None
    out = scale.batch_call(run, params, cfg, seeds, vmap_size)
    if isinstance(run.algorithm, Trial):
        return dict(compile=out.compile_seconds, run=out.run_seconds, floor_compile=None, regret=None)
    floor = scale.batch_call(scale.floor_run(run), {}, cfg, seeds, vmap_size)
    return dict(compile=out.compile_seconds, run=out.run_seconds, floor_compile=floor.compile_seconds,
                regret=float(np.asarray(out.regret).sum()))


def table(doc: dict, keys=("compile", "floor_compile")) -> str:
    """Markdown of a comparison of two codes ({"seconds": {"CODE, LAYOUT": {NAME:S: measure()}}}, as in
    measured/compile_flat_draws.json): per case and layout, the seconds of `keys` (compile, floor
    compile, run) of the first code named / the second, then their sums."""
    by_layout: dict = {}
    for label, run in doc["seconds"].items():
        by_layout.setdefault(label.rsplit(", ", 1)[1], []).append(run)
    layouts = list(by_layout.values())
    cell = lambda a, b: "-" if a is None else f"{a:.1f} / {b:.1f}"  # noqa: E731
    names = {"compile": "compile", "floor_compile": "floor", "run": "run"}
    head = [f"{names[k]}, {layout.replace('cpu', 'CPU')}" for layout in by_layout for k in keys]
    lines = ["| algorithm | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for case in layouts[0][0]:
        cells = [cell(first[case][k], second[case][k]) for first, second in layouts for k in keys]
        lines.append(f"| {case.split(':')[0]} | " + " | ".join(cells) + " |")
    total = lambda run, k: sum(v[k] for v in run.values() if v[k] is not None)  # noqa: E731
    sums = [f"{total(first, k):.0f} / {total(second, k):.0f}" for first, second in layouts for k in keys]
    return "\n".join(lines + ["| sum | " + " | ".join(sums) + " |"])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compiles", description=__doc__.splitlines()[0])
    parser.add_argument("cases", help="NAME:S pairs, comma-separated, e.g. coop_kernel_ucb:10,igp_ucb:10")
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--whole-batch", action="store_true", help="all S runs in one vmap (the GPU layout)")
    args = parser.parse_args(argv)
    pairs = [spec.rsplit(":", 1) for spec in args.cases.split(",")]
    if any(len(p) != 2 or not p[1].isdigit() for p in pairs):
        raise SystemExit(f"cases must be NAME:S pairs, e.g. igp_ucb:10 (got {args.cases!r})")
    results = {}
    for name, seeds in pairs:
        results[f"{name}:{seeds}"] = row = measure(name, int(seeds), args.whole_batch)
        print(name, seeds, {k: v if not isinstance(v, float) else round(v, 2) for k, v in row.items()}, flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
