"""How tests/golden/smoke_outputs.npz was made: every registered experiment at its smoke size, run by
the code of the commit that added it (the step contract before the change; this script uses that API).

    BANDITS_JAX_DATA_DIR=DIR python tests/golden/make_golden.py tests/golden/smoke_outputs.npz

Keys are "experiment|curve|output": regret summed over agents [S, T] and comm_up, comm_down, rounds
[S, T], float64.
"""
import sys, time, numpy as np
from bandits_jax.experiments.registry import build_runs, resolve_config, grid_names
from bandits_jax.experiments.catalog import experiments
from bandits_jax.runner import run_batch
out = {}
for name, exp in experiments().items():
    t = time.time()
    config = resolve_config(exp, "smoke", {})
    seeds = list(range(config["first_seed"], config["first_seed"] + config["seeds"]))
    cache = {}
    for problem, alg, grid in build_runs(exp, config):
        names = [alg.name] if grid is None else grid_names(alg.name, grid)
        hp = None if grid is None else {k: [h.get(k, v) for _, h in grid for _ in seeds] for k, v in alg.hparams.items()}
        G = len(names)
        res = run_batch(problem, alg, seeds * G, hparams=hp, base_key=config["base_key"], precision=config["precision"],
                        first_segment=config["first_segment"], compiled_cache=cache)
        n = len(seeds)
        for g, curve in enumerate(names):
            sl = slice(g * n, (g + 1) * n)
            out[f"{name}|{curve}|regret"] = res.regret[sl].sum(axis=-1)
            for k in ("comm_up", "comm_down", "rounds"):
                out[f"{name}|{curve}|{k}"] = res.__getattribute__(k)[sl]
    print(name, f"{time.time()-t:.1f}s", flush=True)
np.savez_compressed(sys.argv[1], **out)
