"""`python -m bench.merge OUT.json IN.json ...`: one bench JSON from the scale sections of several
`python -m bench --only scale` processes (bench/gpu.sh runs one process per algorithm, several at
once on one device): the cases in the bench's own order (scale.CASES), each machine ceiling the
largest any process measured, the rows' roofline fractions and targets taken again against it, and
the environment of the first input."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import scale

KEYS = {"memory_bandwidth": "memory_bandwidth_bytes_per_second", "matmul_flops": "matmul_float64_flops_per_second"}


def merge(docs: list) -> dict:
    """The merged bench JSON of `docs` (parsed bench JSONs with a scale section)."""
    if not docs:
        raise ValueError("nothing to merge: give at least one bench JSON")
    ceilings = {k: max(d["ceilings"][v] for d in docs) for k, v in KEYS.items()}
    order = {c.algorithm: i for i, c in enumerate(scale.CASES)}
    section = sorted((res for d in docs for res in d.get("scale_section") or ()),
                     key=lambda res: order.get(res["algorithm"], len(order)))
    scale.apply_ceilings(section, ceilings)
    return dict(docs[0], ceilings={v: ceilings[k] for k, v in KEYS.items()}, scale_section=section,
                total_seconds=max(d["total_seconds"] for d in docs), processes=len(docs),
                table=scale.table(section))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m bench.merge OUT.json IN.json [IN.json ...]", file=sys.stderr)
        return 2
    out = merge([json.loads(Path(p).read_text()) for p in argv[1:]])
    Path(argv[0]).write_text(json.dumps(out, indent=2) + "\n")
    print(out["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
