"""Recompute some curves of tests/golden/smoke_outputs.npz with the current code, after a change
that is MEANT to change their numbers (say which and why in the commit):

    BANDITS_JAX_DATA_DIR=DIR python tests/golden/update_golden.py CURVE [CURVE ...]

CURVE is a curve name as the file stores it (e.g. "FedGLB-UCB"); every experiment that has it gets
it recomputed at its smoke size, and every other entry stays as it was.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for test_golden and helpers
from test_golden import GOLDEN, STORED, smoke_outputs  # noqa: E402


def main(curves):
    with np.load(GOLDEN) as data:
        out = {key: data[key] for key in data.files}
    for name, stored in STORED.items():
        wanted = [c for c in curves if c in stored]
        if not wanted:
            continue
        got = smoke_outputs(name)
        for curve in wanted:
            for output, value in got[curve].items():
                old = out[f"{name}|{curve}|{output}"]
                print(f"{name} | {curve} | {output}: total {old.sum():.6g} -> {value.sum():.6g}", flush=True)
                out[f"{name}|{curve}|{output}"] = value
    np.savez_compressed(GOLDEN, **out)


if __name__ == "__main__":
    main(sys.argv[1:])
