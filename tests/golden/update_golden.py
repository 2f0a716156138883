"""Recompute curves of tests/golden/smoke_outputs.npz with the current code, after a change that is
MEANT to change their numbers (say which and why in the commit), or rebuild the whole file:

    BANDITS_JAX_DATA_DIR=DIR python tests/golden/update_golden.py CURVE [CURVE ...]
    BANDITS_JAX_DATA_DIR=DIR python tests/golden/update_golden.py --in EXPERIMENT [--in ...] [CURVE ...]
    BANDITS_JAX_DATA_DIR=DIR python tests/golden/update_golden.py --all

Then `python tests/golden/provenance.py` writes the provenance table beside the file.

CURVE is a curve name as the file stores it (e.g. "FedGLB-UCB"); every experiment that has it gets
it recomputed at its smoke size, and every other entry stays as it was. With --in, only the named
experiments are recomputed, and the listed curves they produce are written even where the file
does not hold them yet (a new curve); without CURVE, every curve of those experiments is. With
--all, every registered experiment with regret curves is recomputed and the file holds exactly them.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for test_golden and helpers
from test_golden import GOLDEN, STORED, golden_experiments, smoke_outputs  # noqa: E402


def main(curves, experiments=(), rebuild=False):
    out = {}
    if rebuild:
        experiments = golden_experiments()
    else:
        with np.load(GOLDEN) as data:
            out = {key: data[key] for key in data.files}
    names = list(experiments) or [n for n, stored in STORED.items() if any(c in stored for c in curves)]
    for name in names:
        got = smoke_outputs(name)
        for curve in [c for c in got if c in curves or not curves]:
            for output, value in got[curve].items():
                old = out.get(f"{name}|{curve}|{output}")
                was = "new" if old is None else f"{old.sum():.6g}"
                print(f"{name} | {curve} | {output}: total {was} -> {value.sum():.6g}", flush=True)
                out[f"{name}|{curve}|{output}"] = value
    np.savez_compressed(GOLDEN, **out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="*")
    parser.add_argument("--in", dest="experiments", action="append", default=[], metavar="EXPERIMENT")
    parser.add_argument("--all", action="store_true", help="rebuild the whole file from every experiment")
    args = parser.parse_args()
    if args.all == bool(args.curves or args.experiments):
        parser.error("name at least one CURVE or one --in EXPERIMENT, or give --all alone")
    main(args.curves, args.experiments, rebuild=args.all)
