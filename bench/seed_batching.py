"""Throughput against the number of seeds S for the algorithms whose seeds once ran one after another.

FN-UCB, Approx-DisKernelUCB, FedGLB-UCB and OneKernelUCB (panel storage) ran their batch of seeds
with `lax.map` (a serial sweep) until the step contract moved their rare work into `batch_cond`.
This measures, for each of them and S in --seeds, ONE `run_batch` call over S seeds (compiled once,
then timed: the median of 3 calls; the first call's compile time is reported apart) and reports agent-steps per second
(S * T * N / run seconds) and the final regret. The script builds its runs through the experiment
registry and calls `run_batch(problem, algorithm, seeds)` only, so the same file runs on the code
before the change (a worktree of that commit on PYTHONPATH) and after it, back to back:

    python -m bench.seed_batching --out new.json
    PYTHONPATH=OLD_WORKTREE python bench/seed_batching.py --out old.json
    python -m bench.seed_batching --compare old.json new.json      # the table, new / old per run
    python -m bench.seed_batching --compare old1.json,old2.json new1.json,new2.json  # medians of pairs
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

# (label, experiment, curve, overrides): the runs, built through the registry as `bandits-jax run` does
CASES = (
    ("FN-UCB", "fnucb/fig1a", "FN-UCB (N=2)", {"horizon": 200}),
    ("Approx-DisKernelUCB", "async/synthetic-f1", "Approx-DisKernelUCB", {"horizon": 300, "num_agents": 10}),
    ("FedGLB-UCB", "async/synthetic-f1", "FedGLB-UCB", {"horizon": 300, "num_agents": 10}),
    ("OneKernelUCB (panels)", "async/synthetic-f1", "OneKernelUCB",
     {"horizon": 300, "num_agents": 10, "one_storage": "panels"}),
)


def build(experiment: str, curve: str, overrides: dict):
    """(problem, algorithm, config) of one curve of a registered experiment at its smoke size."""
    from bandits_jax.experiments.registry import build_runs, resolve_config
    from bandits_jax.experiments.catalog import get_experiment

    exp = get_experiment(experiment)
    config = resolve_config(exp, "smoke", {k: str(v) for k, v in overrides.items()})
    for problem, alg, _ in build_runs(exp, config):
        if alg.name == curve:
            return problem, alg, config
    raise SystemExit(f"{experiment} has no curve {curve!r}")


def measure(label: str, experiment: str, curve: str, overrides: dict, seeds: list, log, vmap_size=None,
            repeats: int = 3) -> list:
    from bandits_jax.runner import run_batch

    problem, alg, config = build(experiment, curve, overrides)
    spec = problem.spec
    rows = []
    for S in seeds:
        cache: dict = {}
        kw = dict(precision=config["precision"], first_segment=config["first_segment"], compiled_cache=cache)
        if vmap_size:  # None or 0: the runner's default (the code before the step contract has no such argument)
            kw["vmap_size"] = vmap_size
        first = run_batch(problem, alg, list(range(S)), **kw)  # compiles
        timed = []
        for _ in range(repeats):  # the median of `repeats` calls: a short call is noisy on a shared machine
            t0 = time.perf_counter()
            out = run_batch(problem, alg, list(range(S)), **kw)
            timed.append((out.run_seconds, time.perf_counter() - t0))
        run_seconds, wall = sorted(timed)[len(timed) // 2]
        agent_steps = S * spec.horizon * spec.num_agents
        rows.append(dict(algorithm=label, seeds=S, vmap_size=vmap_size, horizon=spec.horizon, num_agents=spec.num_agents,
                         compile_seconds=first.compile_seconds, run_seconds=run_seconds, wall_seconds=wall,
                         repeats=repeats, agent_steps_per_second=agent_steps / run_seconds,
                         final_regret=float(out.regret.sum(axis=(1, 2)).mean())))
        log(f"[{label}] S = {S}, vmap_size {vmap_size}: run {run_seconds:.2f} s, {rows[-1]['agent_steps_per_second']:.0f} agent-steps/s")
    return rows


def compare(old_paths: list, new_paths: list) -> str:
    """`compare_docs` of the JSON files at `old_paths` and `new_paths`."""
    load = lambda paths: [json.load(open(p)) for p in paths]  # noqa: E731
    return compare_docs(load(old_paths), load(new_paths))


def pairs_table(files: dict) -> str:
    """`compare_docs` of a folder of alternate runs ({file name: JSON}, as in measured/seed_batching_pairs):
    the files named *_old* against those named *_new*, each side ordered by its smallest S."""
    def side(tag):
        docs = [doc for name, doc in files.items() if f"_{tag}" in name]
        return sorted(docs, key=lambda doc: min(r["seeds"] for r in doc["rows"]))

    return compare_docs(side("old"), side("new"))


def compare_docs(old_docs: list, new_docs: list) -> str:
    """A markdown table per (algorithm, S): old agent-steps per second, then for each vmap_size measured
    in the new files its agent-steps per second and its ratio to the old. With several files a side
    (old and new run alternately, one file a pair) each cell is the median over the files."""
    def rates(docs, with_size):
        table = {}
        for r in (r for d in docs for r in d["rows"]):
            key = (r["algorithm"], r["seeds"]) + ((r.get("vmap_size") or 0,) if with_size else ())
            table.setdefault(key, []).append(r)
        return {k: (float(np.median([r["agent_steps_per_second"] for r in rs])), rs[0]["final_regret"])
                for k, rs in table.items()}

    old, new = rates(old_docs, False), rates(new_docs, True)
    sizes = list(dict.fromkeys(k[2] for k in new))
    names = ["default" if v == 0 else f"vmap_size {v}" for v in sizes]
    lines = ["| algorithm | S | old | " + " | ".join(f"new, {n} | / old" for n in names) + " | final regret old, new |",
             "|---|---|---|" + "---|---|" * len(sizes) + "---|"]
    for (alg, S), (o, o_regret) in old.items():
        cells, regret = [], None
        for v in sizes:
            if (alg, S, v) not in new:
                cells.append("- | -")
                continue
            rate, regret = new[(alg, S, v)][0], regret or new[(alg, S, v)][1]
            cells.append(f"{rate:.0f} | {rate / o:.2f}")
        lines.append(f"| {alg} | {S} | {o:.0f} | " + " | ".join(cells) + f" | {o_regret:.3f}, {regret:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 10, 100])
    p.add_argument("--only", nargs="+", default=None, help="labels of CASES to run")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per row (the median is kept)")
    p.add_argument("--out", default=None, help="JSON file for the rows")
    p.add_argument("--vmap-size", type=int, nargs="+", default=[0],
                   help="run_batch's vmap_size values to measure (0: the runner's default, the default)")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                   help="print the table of two JSON files (or two comma-separated lists of them: medians)")
    args = p.parse_args(argv)
    if args.compare:
        print(compare(*(paths.split(",") for paths in args.compare)))
        return 0
    import os

    import bandits_jax
    import jax

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for label, experiment, curve, overrides in CASES:
        if args.only is None or label in args.only:
            for vmap_size in args.vmap_size:
                rows += measure(label, experiment, curve, overrides, args.seeds, log, vmap_size, args.repeats)
    doc = dict(rows=rows, devices=[str(d) for d in jax.devices()], python=platform.python_version(),
               jax=jax.__version__, cpu_guard=bandits_jax.cpu_guard(),
               openblas_num_threads=os.environ.get("OPENBLAS_NUM_THREADS"))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=2)
    print(json.dumps(doc["rows"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
