"""Records: the compact form of a finished results folder that the repository commits.

    bandits-jax report --record results/fnucb_fig1a/paper --to docs/reproduction/data

A record is itself a results folder (`results.npz` + `metadata.json`), so everything that reads one
(`load_results`, the summary, the plots, `bandits-jax report`) reads a record unchanged. It keeps,
per curve and seed, everything a page reports and nothing it does not:

- time is cut into blocks that end at `CHECKPOINTS` evenly spaced steps (and at every step where a
  curve with a declared per-round table communicates); each per-step array becomes its sums over
  the blocks, so the cumulative regret, the communication totals and the rounds are exact at every
  checkpoint and at T, and a figure is redrawn from the checkpoints;
- the regret is reduced over agents first (mean or sum, as the experiment plots it), [S, C, 1];
- a per-step diagnostic is kept only where a declared table reads it, at its checkpoints;
- a phase-level experiment's outcomes (one number per trial) are kept whole.

metadata.json gains "horizon" (T), "steps" (the 1-based step that ends each block) and "record"
(the folder it came from). Its configuration, seeds, commit, versions, devices and timings are the
run's own.

Every results folder is checked before any record is written (`results.load_checked`): a damaged
one is a ConfigError naming its file, and no record changes.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core import ConfigError
from .results import Results, atomic_savez, atomic_write_text, check_folder, flat_arrays, load_checked

CHECKPOINTS = 100


def write_records(results_dirs, to_dir, checkpoints: int = CHECKPOINTS) -> list:
    """Write the record of each results folder into `to_dir/<experiment slug>-<size>/`; returns those
    folders. Every folder is read and checked first (`make_record`), and where each record goes, so a
    damaged folder (or a `to_dir` that is a file) leaves every record as it was."""
    check_folder(Path(to_dir), "the records' folder (--data)")
    records = [make_record(d, checkpoints) for d in results_dirs]
    outs = [_record_folder(r, to_dir) for r in records]
    twice = sorted({out.name for out in outs if outs.count(out) > 1})
    if twice:
        raise ConfigError(f"two of the folders given hold the record {twice[0]} (the same experiment and size); "
                          f"give one of them")
    return [_write(record, out) for record, out in zip(records, outs)]


def write_record(results_dir, to_dir, checkpoints: int = CHECKPOINTS) -> Path:
    """Write the record of `results_dir` into `to_dir/<experiment slug>-<size>/`; returns that folder.
    Nothing is written when the folder is damaged (`results.check_results`)."""
    return write_records([results_dir], to_dir, checkpoints)[0]


def make_record(results_dir, checkpoints: int = CHECKPOINTS) -> Results:
    """The record of a results folder, in memory, once the folder is checked (`results.load_checked`:
    a damaged one is a ConfigError naming its file)."""
    res = load_checked(results_dir)
    return reduce_results(res, checkpoints, source=Path(results_dir).as_posix())


def _record_folder(record: Results, to_dir) -> Path:
    """The folder a record goes to under `to_dir`; refused when a file is in its place."""
    md = record.metadata
    out = Path(to_dir) / record_name(md["experiment"], md.get("size", ""))
    check_folder(out, f"the record of {md['record']['from']}")
    return out


def _write(record: Results, out: Path) -> Path:
    """Write a record into the folder `out` (each file replaced whole)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_savez(out / "results.npz", flat_arrays(record.arrays, record.seeds), compressed=True)
    atomic_write_text(out / "metadata.json", json.dumps(record.metadata, indent=1, default=str) + "\n")
    return out


def record_name(experiment: str, size: str) -> str:
    """The folder name of a record: "fnucb/fig1a", "paper" -> "fnucb-fig1a-paper"."""
    return "-".join(part for part in (experiment.replace("/", "-"), size) if part)


def reduce_results(res: Results, checkpoints: int = CHECKPOINTS, source: str = "") -> Results:
    """The record of loaded results (see the module docstring)."""
    md = dict(res.metadata)
    md["record"] = {"from": source}
    if "outcomes" in md or "steps" in md:  # phase-level outcomes, or already a record
        return Results(res.arrays, res.seeds, md)
    horizon = next(iter(res.arrays.values()))["regret"].shape[1]
    tabled = [c for c in md.get("tables", {}) if c in res.arrays]
    steps = checkpoint_steps(horizon, checkpoints, [np.flatnonzero(res.arrays[c]["rounds"].max(axis=0)) + 1
                                                    for c in tabled])
    arrays = {curve: _reduce_curve(per, steps, md.get("agents", "mean"), keep_diag=curve in tabled)
              for curve, per in res.arrays.items()}
    md.update(horizon=int(horizon), steps=[int(s) for s in steps])
    return Results(arrays, res.seeds, md)


def checkpoint_steps(horizon: int, checkpoints: int, extra=()) -> np.ndarray:
    """Sorted 1-based steps that end the blocks: `checkpoints` evenly spaced ones up to T (T itself
    always), and every step in `extra` (arrays of 1-based steps)."""
    even = np.ceil(np.linspace(horizon / min(checkpoints, horizon), horizon, min(checkpoints, horizon)))
    return np.unique(np.concatenate([even.astype(np.int64), *[np.asarray(e, np.int64) for e in extra]]))


def _reduce_curve(per: dict, steps: np.ndarray, agents: str, keep_diag: bool) -> dict:
    """One curve's arrays as block sums over `steps` (diagnostics: values at the steps, or dropped)."""
    starts = np.concatenate([[0], steps[:-1]])
    regret = per["regret"].astype(np.float64)
    per_step = regret.mean(axis=-1) if agents == "mean" else regret.sum(axis=-1)
    out = {"regret": np.add.reduceat(per_step, starts, axis=1)[..., None], "errors": per["errors"]}
    for key in ("comm_up", "comm_down", "rounds"):
        out[key] = np.add.reduceat(per[key].astype(np.float64), starts, axis=1)
    if keep_diag:
        out.update({key: value[:, steps - 1] for key, value in per.items() if key.startswith("diag/")})
    return out
