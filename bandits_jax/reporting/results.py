"""Results on disk: `results.npz`, `metadata.json`, `summary.md`, and a loader.

results.npz keys, per algorithm name A:
    A/regret    [S, T, N]  instantaneous pseudo-regret
    A/comm_up   [S, T]     scalars sent up per step, in metadata.json's "comm_unit" (core.COMM_UNIT;
                           a folder written before the key existed counted as its algorithm did then)
    A/comm_down [S, T]     scalars sent down per step, likewise
    A/rounds    [S, T]     communication rounds per step (0/1)
    A/errors    [S]        the error bits of each run (0: none; metadata.json "errors" names them)
    A/diag/NAME [S, T]     the per-step diagnostics the algorithm reports
    seeds       [S]
Phase-level experiments (metadata "outcomes") store instead, per algorithm, one [S] array per
declared outcome (e.g. A/correct, A/samples) beside A/errors.
Algorithm order is kept in metadata.json ("algorithms").

`load_results` reads a folder back; `load_checked` also checks that what it read is whole and
consistent (`check_results`: types and ranges of the metadata, shapes of the arrays against the seeds
and steps), as `bandits-jax report` does before it writes anything.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import threading
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..core import ConfigError


def cumulative_regret(regret: np.ndarray, agents: str = "mean") -> np.ndarray:
    """[..., T, N] instantaneous regret -> [..., T] cumulative regret, averaged or summed over agents."""
    if agents == "mean":
        per_step = regret.mean(axis=-1)
    elif agents == "sum":
        per_step = regret.sum(axis=-1)
    else:
        raise ValueError(f"agents must be 'mean' or 'sum', got {agents!r}")
    return np.cumsum(per_step.astype(np.float64), axis=-1)



class Results(NamedTuple):
    """Loaded results: arrays[algorithm][key] -> np.ndarray, plus the metadata dict."""

    arrays: dict
    seeds: np.ndarray
    metadata: dict

    @property
    def algorithms(self):
        return list(self.metadata.get("algorithms", self.arrays))

    def cumulative(self, algorithm: str) -> np.ndarray:
        """[S, T] cumulative regret, reduced over agents as the experiment's paper plots it."""
        return cumulative_regret(self.arrays[algorithm]["regret"], self.metadata.get("agents", "mean"))


def save_results(out_dir: Path, arrays: dict, seeds, metadata: dict) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_savez(out_dir / "results.npz", flat_arrays(arrays, seeds))
    atomic_write_text(out_dir / "metadata.json", json.dumps(metadata, indent=2, default=str))
    results = Results(arrays, np.asarray(seeds), metadata)
    atomic_write_text(out_dir / "summary.md", summary_markdown(results))


def flat_arrays(arrays: dict, seeds) -> dict:
    """The results.npz keys of {algorithm: {key: array}} (the module docstring), seeds included."""
    flat = {"seeds": np.asarray(seeds)}
    for alg, per in arrays.items():
        flat.update({f"{alg}/{key}": value for key, value in per.items()})
    return flat


# How to repair a damaged results file, said after what is wrong with it.
REPAIR = "restore it from version control, or write it again (`bandits-jax run`, `arena` or `report --record`)"
# What np.load and reading an array raise on a file that is not a whole results.npz.
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError)


def check_folder(path: Path, what: str) -> None:
    """Refuse (ConfigError) a folder path that is an existing file, or lies under one, before anything
    is computed (the results would otherwise be lost at the end of the run)."""
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                raise ConfigError(f"{what} {path} cannot be a folder: {part} is a file; choose another path")
            return


def load_results(out_dir) -> Results:
    """Read back what `bandits-jax run` wrote into `out_dir`. A results.npz or metadata.json that cannot
    be read as one (cut, emptied, not a zip of arrays, pickled objects, not JSON) is a ConfigError naming
    the file; whether what was read is whole and consistent is `check_results`'s question."""
    out_dir = Path(out_dir)
    path = out_dir / "results.npz"
    if not path.exists():
        raise FileNotFoundError(f"no results.npz in {out_dir}: run `bandits-jax run NAME --out {out_dir}` first")
    metadata = read_json(out_dir / "metadata.json") if (out_dir / "metadata.json").exists() else {}
    seeds, arrays = _read_npz(path)
    return Results(arrays, seeds, metadata)


def load_checked(out_dir) -> Results:
    """`load_results` of a folder that must hold metadata.json, passed through `check_results`: what
    `bandits-jax report` reads before it writes anything."""
    out_dir = Path(out_dir)
    res = load_results(out_dir)
    if not (out_dir / "metadata.json").is_file():
        raise ConfigError(f"{out_dir / 'metadata.json'} is missing; {REPAIR}")
    return check_results(res, out_dir)


def read_json(path) -> dict:
    """The JSON object in the file `path`; a ConfigError naming the file when it cannot be read as JSON
    or holds something other than an object."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ConfigError(f"{path} is not readable JSON ({_one_line(err)}); {REPAIR}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} holds a JSON {_JSON_KINDS.get(type(value), 'value')}, not an object; {REPAIR}")
    return value


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _read_npz(path: Path) -> tuple:
    """(seeds, {curve: {key: array}}) of a results.npz (the module docstring)."""
    try:
        flat = _npz_arrays(path)
    except _UNREADABLE as err:
        raise ConfigError(f"{path} cannot be read as results ({_one_line(err)}); {REPAIR}") from None
    if "seeds" not in flat:
        raise ConfigError(f"{path} holds no 'seeds' array; {REPAIR}")
    arrays: dict = {}
    for name, value in flat.items():
        if "/" not in name:
            continue
        alg, key = name.split("/diag/", 1) if "/diag/" in name else name.rsplit("/", 1)
        key = f"diag/{key}" if "/diag/" in name else key
        arrays.setdefault(alg, {})[key] = value
    return flat["seeds"], arrays


def _npz_arrays(path: Path) -> dict:
    """{name: array} of an .npz file, every array read whole (so that a cut or corrupted one fails here)
    and none unpickled (a results file holds numbers only)."""
    data = np.load(path, allow_pickle=False)
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError("it is one bare array, not a zip of named arrays")
    with data:
        return {name: data[name] for name in data.files}


def _one_line(err: BaseException) -> str:
    """An exception as one short line: its type and its message with the line breaks folded (an OSError's
    reason without the path, which the message names already; numpy's advice to unpickle left out)."""
    text = err.strerror if isinstance(err, OSError) and err.strerror else " ".join(str(err).split())
    if "pickle" in text.lower():
        text = "it holds pickled Python objects, which a results file never does (reading them could run code)"
    return f"{type(err).__name__}: {text[:160]}" if text else type(err).__name__


# ------------------------------------------------------------------------ checking what was read
def check_results(res: Results, out_dir) -> Results:
    """`res`, read from `out_dir`, when it is whole and consistent: the metadata's types and ranges
    (`check_metadata`), the arrays' shapes against the seeds and steps (`_check_arrays`) and the curves
    and diagnostics the metadata names (`_check_names`). Else a ConfigError naming the file and what is
    wrong, so that nothing is written from a damaged folder."""
    out_dir = Path(out_dir)
    check_metadata(res.metadata, out_dir / "metadata.json")
    _check_arrays(res, out_dir / "results.npz")
    _check_names(res, out_dir / "metadata.json")
    return res


def check_metadata(md: dict, path) -> None:
    """The metadata of a results folder or record (`path`, its metadata.json): the experiment and the
    seeds present, every known key of the type and range the summaries and pages read it as
    (`_METADATA`), a record's steps within its horizon, the standard errors defined, the x tag a number."""
    check_keys(md, _METADATA, path, required=("experiment", "seeds"))
    _check_steps(md, path)
    if md.get("se_ddof", 0) >= len(md["seeds"]):
        raise _bad(path, "se_ddof", md["se_ddof"], f"below the number of seeds ({len(md['seeds'])}), or no standard "
                                                  "error is defined")
    x = md.get("x")
    untagged = [c for c, tags in md.get("tags", {}).items()
                if x in tags and not (tags[x] is None or is_finite(tags[x]))]
    if untagged:
        raise _bad(path, f"tags[{untagged[0]!r}][{x!r}]", md["tags"][untagged[0]][x],
                   "a finite number or null (the curve's place along the x axis)")


def _check_steps(md: dict, path) -> None:
    """A record's "steps" (`records`): increasing integers from 1 on, ending at its "horizon"."""
    if "steps" not in md:
        return
    steps, horizon = md["steps"], md.get("horizon")
    if horizon is None:
        raise ConfigError(f"{path} has 'steps' but no 'horizon' (a record has both); {REPAIR}")
    ok = (isinstance(steps, list) and steps != [] and all(is_int(s) for s in steps) and steps[0] >= 1
          and all(a < b for a, b in zip(steps, steps[1:])) and steps[-1] == horizon)
    if not ok:
        raise _bad(path, "steps", steps, f"increasing integers from 1 on, ending at the horizon ({horizon})")


def _check_arrays(res: Results, path) -> None:
    """The seeds array equal to metadata.json's seeds; at least one curve; each curve's arrays
    (`_check_curve`) with the seeds along their first axis and the same steps along the second."""
    seeds = np.asarray(res.seeds)
    listed = res.metadata["seeds"]
    if seeds.ndim != 1 or seeds.dtype.kind not in "iu" or seeds.tolist() != listed:
        raise ConfigError(f"{path}: its 'seeds' array {_shown(seeds.tolist())} is not the list of seeds in "
                          f"metadata.json {_shown(listed)}; {REPAIR}")
    if not res.arrays:
        raise ConfigError(f"{path} holds no curve (no ALGORITHM/KEY array); {REPAIR}")
    phased = "outcomes" in res.metadata
    steps = None if phased else _steps_of(res)
    for curve, per in res.arrays.items():
        _check_curve(curve, per, len(listed), steps, path)
    horizon, configured = res.metadata.get("horizon", steps), res.metadata.get("config", {}).get("horizon")
    if not phased and configured is not None and horizon != configured:
        where = path.with_name("metadata.json") if "horizon" in res.metadata else path
        raise ConfigError(f"{where}: the curves run {horizon} steps, but the configuration in metadata.json gives "
                          f"horizon {configured}; {REPAIR}")


def _steps_of(res: Results) -> int:
    """The length of the time axis every per-step array must have: a record's steps, else the horizon,
    else that of the first curve's regret."""
    md = res.metadata
    if "steps" in md:
        return len(md["steps"])
    if "horizon" in md:
        return md["horizon"]
    regret = next(iter(res.arrays.values())).get("regret")
    return regret.shape[1] if regret is not None and regret.ndim == 3 else 0


_PER_STEP = ("regret", "comm_up", "comm_down", "rounds")  # besides "errors", what a per-step curve holds


def _check_curve(curve: str, per: dict, seeds: int, steps, path) -> None:
    """One curve's arrays: numbers; "errors" [S] of integers; a per-step curve's regret [S, T, N] and
    its other arrays [S, T] (a phase-level curve's (steps None) outcomes [S]); finite in every run whose
    error bits are clear (a run with error bits may hold anything; the pages say it failed)."""
    required = ("errors",) if steps is None else ("errors", *_PER_STEP)
    missing = [key for key in required if key not in per]
    if missing:
        raise ConfigError(f"{path}: curve {curve!r} has no {', '.join(missing)} array; {REPAIR}")
    for key, value in per.items():
        want = ((seeds,) if steps is None or key == "errors" else
                (seeds, steps, "N") if key == "regret" else (seeds, steps))
        shape_ok = (value.ndim == len(want) and 0 not in value.shape
                    and all(w == "N" or n == w for n, w in zip(value.shape, want)))
        if value.dtype.kind not in ("iub" if key == "errors" else "iubf"):
            raise ConfigError(f"{path}: {curve}/{key} holds {value.dtype} values, not numbers; {REPAIR}")
        if not shape_ok:
            raise ConfigError(f"{path}: {curve}/{key} has shape {list(value.shape)}, but {seeds} seeds"
                              f"{'' if len(want) == 1 else f' and {steps} steps'} make it "
                              f"[{', '.join(map(str, want))}]; {REPAIR}")
    clear = per["errors"] == 0
    for key, value in per.items():
        if value.dtype.kind == "f" and not np.isfinite(value[clear]).all():
            raise ConfigError(f"{path}: {curve}/{key} holds NaN or infinite values in runs without error bits; "
                              f"{REPAIR}")


def _check_names(res: Results, path) -> None:
    """What the metadata names among the arrays: every listed algorithm and grid point a curve, every
    declared table's diagnostics stored, every panel's outcome declared (and an x tag to draw it on)."""
    md = res.metadata
    named = [*md.get("algorithms", []), *[p for points in md.get("grids", {}).values() for p in points]]
    absent = [c for c in named if c not in res.arrays]
    if absent:
        raise ConfigError(f"{path} names the curve {absent[0]!r}, which results.npz does not hold; {REPAIR}")
    for curve, tables in md.get("tables", {}).items():
        lost = [c for t in tables for c in t["columns"] if curve in res.arrays and f"diag/{c}" not in res.arrays[curve]]
        if lost:
            raise ConfigError(f"{path} declares a table of {curve!r} with the diagnostic {lost[0]!r}, which "
                              f"results.npz does not hold for it; {REPAIR}")
    for outcome, _, _ in md.get("panels", []):
        if outcome not in md.get("outcomes", {}) or "x" not in md:
            raise ConfigError(f"{path} declares a panel of {outcome!r}, but not that outcome or the x tag "
                              f"(\"outcomes\", \"x\"); {REPAIR}")


def check_keys(obj: dict, kinds: dict, path, required=()) -> None:
    """The `required` keys in `obj`, and each key of `kinds` ({key: (test, what its value must be)}) that
    it holds passing its test; else a ConfigError naming the file `path`, the key and what it must be."""
    for key in required:
        if key not in obj:
            raise ConfigError(f"{path} has no {key!r}; {REPAIR}")
    for key, (ok, should) in kinds.items():
        if key in obj and not ok(obj[key]):
            raise _bad(path, key, obj[key], should)


def _bad(path, key: str, value, should: str) -> ConfigError:
    return ConfigError(f"{path}: {key!r} is {_shown(value)}, but it must be {should}; {REPAIR}")


def _shown(value) -> str:
    """A value as JSON, cut to a readable length."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# Tests of JSON values, for the tables of `check_keys` (JSON true and false are not integers).
def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_text(v) -> bool:
    return isinstance(v, str)


def list_of(test):
    """A test of a JSON array whose items all pass `test`."""
    return lambda v: isinstance(v, list) and all(test(x) for x in v)


def object_of(test):
    """A test of a JSON object whose values all pass `test`."""
    return lambda v: isinstance(v, dict) and all(test(x) for x in v.values())


def _seeds(v) -> bool:
    return list_of(lambda s: is_int(s) and s >= 0)(v) and v != [] and len(set(v)) == len(v)


def _config(v) -> bool:
    return isinstance(v, dict) and all(is_int(v[k]) and v[k] > 0 for k in ("seeds", "horizon") if k in v)


def _timing(v) -> bool:
    return (isinstance(v, dict) and all(is_finite(v[k]) and v[k] >= 0 for k in ("compile_seconds", "run_seconds")
                                        if k in v)
            and all(is_int(v[k]) and v[k] >= 0 for k in ("seeds_computed",) if k in v))


def _table(v) -> bool:
    return isinstance(v, dict) and is_text(v.get("title")) and object_of(is_text)(v.get("columns"))


def _outcome(v) -> bool:
    return isinstance(v, dict) and v.get("kind") in ("rate", "mean") and is_text(v.get("description"))


def _derived(v) -> bool:
    return isinstance(v, list) and len(v) == 4 and all(is_text(s) for s in v[:3]) and is_finite(v[3])


_METADATA = {  # key: (test, what its value must be), for the keys summaries and pages read
    "experiment": (lambda v: is_text(v) and v.strip() != "", "a non-empty string, the experiment's name"),
    "size": (lambda v: is_text(v) and "/" not in v and "\\" not in v, "a string without slashes, the size's name"),
    "description": (is_text, "a string"),
    "notes": (is_text, "a string"),
    "comm_unit": (is_text, "a string, the unit of comm_up and comm_down (core.COMM_UNIT)"),
    "commit": (is_text, "a string, the commit's hash"),
    "x": (is_text, "a string, the tag along the x axis"),
    "agents": (lambda v: v in ("mean", "sum"), '"mean" or "sum"'),
    "band": (lambda v: v in ("se", "std"), '"se" or "std"'),
    "se_ddof": (lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    "seeds": (_seeds, "a non-empty list of distinct non-negative integers"),
    "horizon": (lambda v: is_int(v) and v > 0, "a positive integer, the number of steps"),
    "algorithms": (lambda v: list_of(is_text)(v) and len(set(v)) == len(v), "a list of distinct curve names"),
    "devices": (list_of(is_text), "a list of device names"),
    "versions": (object_of(is_text), "an object of package versions (strings)"),
    "config": (_config, "an object whose seeds and horizon, where given, are positive integers"),
    "record": (object_of(is_text), 'an object such as {"from": FOLDER}'),
    "tags": (object_of(lambda t: isinstance(t, dict)), "an object of each curve's tags (objects)"),
    "errors": (object_of(is_text), "an object of each failed curve's message"),
    "problem_info": (object_of(lambda t: isinstance(t, dict)), "an object of each problem's numbers (objects)"),
    "grids": (object_of(lambda p: list_of(is_text)(p) and p != []),
              "an object of each grid's curves (non-empty lists)"),
    "timing": (object_of(_timing), "an object of each curve's timing: finite non-negative seconds, a non-negative "
                                    "seeds_computed"),
    "tables": (object_of(list_of(_table)), 'an object of each curve\'s tables [{"title": TEXT, "columns": '
                                             '{DIAGNOSTIC: LABEL}}]'),
    "outcomes": (object_of(_outcome), 'an object of outcomes {"kind": "rate" or "mean", "description": TEXT}'),
    "derived": (list_of(_derived), "a list of [method, source, outcome, finite factor]"),
    "panels": (list_of(lambda p: isinstance(p, list) and len(p) == 3 and all(map(is_text, p))),
               "a list of [outcome, how, scale] strings"),
}


def total_communication(results: Results, curve: str) -> np.ndarray:
    """[S] scalars sent up plus down over every step of each run of a curve."""
    per = results.arrays[curve]
    return per["comm_up"].sum(axis=1) + per["comm_down"].sum(axis=1)


def with_ddof(results: Results, ddof: int | None) -> Results:
    """The results with every standard error and std taken with `ddof` (None: the experiment's own)."""
    return results if ddof is None else results._replace(metadata={**results.metadata, "se_ddof": int(ddof)})


def summary_rows(results: Results):
    """One dict per algorithm: final cumulative regret mean and standard error, communication totals."""
    ddof = int(results.metadata.get("se_ddof", 0))
    rows = []
    for alg in results.algorithms:
        per = results.arrays[alg]
        final = results.cumulative(alg)[:, -1]
        n = final.shape[0]
        se = float(np.std(final, ddof=ddof) / np.sqrt(n)) if n > ddof else float("nan")
        total = total_communication(results, alg)
        rows.append({
            "algorithm": alg,
            "final_regret_mean": float(final.mean()),
            "final_regret_se": se,
            "final_regret_std": float(np.std(final, ddof=ddof)),
            "comm_total_std": float(np.std(total, ddof=ddof)),
            "comm_up": float(per["comm_up"].sum(axis=1).mean()),
            "comm_down": float(per["comm_down"].sum(axis=1).mean()),
            "rounds": float(per["rounds"].sum(axis=1).mean()),
            "seeds": int(n),
        })
    return rows


def grid_choices(results: Results) -> dict:
    """For each algorithm run over a hyper-parameter grid: the curve name of its point of lowest
    mean final cumulative regret. A point whose regret is non-finite, or one of whose runs carries
    error bits (a run that outgrew a capacity: its regret is finite but its model was broken), never
    wins. Phase-level experiments choose nothing ({})."""
    broken = results.metadata.get("errors", {})

    def score(r):
        sound = np.isfinite(r["final_regret_mean"]) and r["algorithm"] not in broken
        return r["final_regret_mean"] if sound else np.inf

    if "outcomes" in results.metadata:
        return {}  # phase-level outcomes: every point is shown, none is chosen
    final = {r["algorithm"]: score(r) for r in summary_rows(results)}
    return {base: min(points, key=lambda n: final[n]) for base, points in results.metadata.get("grids", {}).items()}


def shown_curves(results: Results) -> list:
    """The curves that plots and per-curve tables show: every algorithm, a grid at its chosen point only."""
    hidden = {n for points in results.metadata.get("grids", {}).values() for n in points}
    shown = set(grid_choices(results).values())
    return [a for a in results.algorithms if a not in hidden or a in shown]


def curve_family(results: Results, curve: str) -> str:
    """The algorithm a curve belongs to: its grid's name for a grid point ("DUETS" for
    "DUETS [beta=0.2]"), else the curve itself."""
    return next((base for base, points in results.metadata.get("grids", {}).items() if curve in points), curve)


def interval95(values, kind: str) -> tuple:
    """(estimate, low, high) of a 95% interval over trials: for kind "rate" (0/1 values) the Wilson
    score interval of the proportion, for kind "mean" mean +- 1.96 standard errors (std with ddof=1;
    NaN bounds from a single trial)."""
    values = np.asarray(values, dtype=np.float64)
    n, z = values.shape[0], 1.959963984540054
    mean = float(values.mean())
    if kind == "rate":
        centre = (mean + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return mean, float(centre - half), float(centre + half)
    half = z * values.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")
    return mean, float(mean - half), float(mean + half)


def outcome_rows(results: Results) -> list:
    """One dict per curve of a phase-level experiment: {"algorithm", "seeds", outcome: (estimate, low,
    high)} for every declared outcome (see `interval95`)."""
    outcomes = results.metadata.get("outcomes", {})
    rows = []
    for alg in results.algorithms:
        per = results.arrays[alg]
        row = {"algorithm": alg, "seeds": int(per["errors"].shape[0])}
        row.update({k: interval95(per[k], o["kind"]) for k, o in outcomes.items() if k in per})
        rows.append(row)
    return rows


def derived_rows(results: Results) -> list:
    """Rows of the curves an experiment derives from others (metadata "derived": (method, source, outcome,
    factor)): the source curve's row with that outcome (estimate and interval) times factor, named and
    tagged with the derived method. [(row, tags)]."""
    out = []
    tags = results.metadata.get("tags", {})
    rows = {row["algorithm"]: row for row in outcome_rows(results)}
    for method, source, outcome, factor in results.metadata.get("derived", []):
        for curve, own in tags.items():
            if own.get("method") != source or curve not in rows or outcome not in rows[curve]:
                continue
            row = {"algorithm": curve.replace(source, method, 1), "seeds": rows[curve]["seeds"],
                   outcome: tuple(factor * v for v in rows[curve][outcome])}
            out.append((row, {**own, "method": method}))
    return out


def _outcome_table(results: Results) -> list:
    """Markdown lines of the phase-level summary: every outcome with its 95% interval."""
    outcomes = results.metadata["outcomes"]
    lines = ["Outcomes over trials (seeds): estimate [95% interval]; a rate's interval is Wilson's, a mean's is "
             "mean +- 1.96 standard errors.", "",
             "| algorithm | " + " | ".join(outcomes) + " | seeds |", "|---" * (len(outcomes) + 2) + "|"]
    derived = derived_rows(results)
    for row in outcome_rows(results) + [row for row, _ in derived]:
        cells = [f"{row[k][0]:.4g} [{row[k][1]:.4g}, {row[k][2]:.4g}]" if k in row else "-" for k in outcomes]
        lines.append(f"| {row['algorithm']} | " + " | ".join(cells) + f" | {row['seeds']} |")
    lines += ["", "Outcomes: " + "; ".join(f"{k}: {o['description']} ({o['kind']})" for k, o in outcomes.items())
              + "."]
    for method, source, outcome, factor in results.metadata.get("derived", []):
        lines += ["", f"{method} is not run: it is {source}'s {outcome} times {factor:g} (its interval likewise)."]
    return lines


def summary_markdown(results: Results) -> str:
    md = results.metadata
    if "outcomes" in md:
        return _summary_lines(results, _outcome_table(results))
    agents = md.get("agents", "mean")
    what = "mean over agents" if agents == "mean" else "sum over agents"
    horizon = md.get("horizon") or (next(iter(results.arrays.values()))["regret"].shape[1] if results.arrays else 0)
    std = md.get("band", "se") == "std"
    lines = [
        f"Final cumulative regret at T = {horizon} ({what}), mean +- "
        f"{'standard deviation' if std else 'standard error'} over seeds (std with ddof={md.get('se_ddof', 0)}); "
        "communication totals are per run, averaged over seeds" + (" (+- their std)" if std else "")
        + (f", in {md['comm_unit']}." if md.get("comm_unit") else "."),
        "",
        "| algorithm | final cumulative regret | comm. rounds | scalars up | scalars down | seeds |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary_rows(results):
        spread = r["final_regret_std"] if std else r["final_regret_se"]
        comm = f" (total {r['comm_up'] + r['comm_down']:.4g} +- {r['comm_total_std']:.3g})" if std else ""
        lines.append(
            f"| {r['algorithm']} | {r['final_regret_mean']:.3f} +- {spread:.3f} | "
            f"{r['rounds']:.1f} | {r['comm_up']:.4g} | {r['comm_down']:.4g}{comm} | {r['seeds']} |"
        )
    if md.get("grids"):
        final = {r["algorithm"]: r for r in summary_rows(results)}
        lines += ["", "Hyper-parameter grid: the point of lowest mean final regret per algorithm.", "",
                  "| algorithm | chosen point | final cumulative regret | points |", "|---|---|---|---|"]
        for base, best in grid_choices(results).items():
            label = best[len(base):].strip().strip("[]")
            spread = final[best]["final_regret_std" if std else "final_regret_se"]
            lines.append(f"| {base} | {label} | {final[best]['final_regret_mean']:.3f} +- {spread:.3f} | "
                         f"{len(md['grids'][base])} |")
    lines += _declared_tables(results)
    return _summary_lines(results, lines)


def step_axis(results: Results) -> np.ndarray:
    """The 1-based steps t of the arrays' time axis: 1..T for a results folder; a record's checkpoints
    (metadata "steps", `records`), where each array holds the sum over the steps since the previous one."""
    if "steps" in results.metadata:
        return np.asarray(results.metadata["steps"], dtype=np.int64)
    return np.arange(1, next(iter(results.arrays.values()))["rounds"].shape[1] + 1)


def round_rows(results: Results, curve: str, columns) -> list:
    """Per communication round of a curve: {"step": t, column: mean over seeds} for each diagnostic in
    `columns`, at the steps where any run had a round (a phased algorithm's schedule is fixed); t is
    counted from 0."""
    per = results.arrays[curve]
    index = np.flatnonzero(per["rounds"].max(axis=0) > 0)
    steps = step_axis(results)[index] - 1
    return [{"step": int(t), **{c: float(per[f"diag/{c}"][:, k].mean()) for c in columns}}
            for k, t in zip(index, steps)]


def _declared_tables(results: Results) -> list:
    """Markdown lines: the per-round tables that the shown curves' algorithms declare (`core.Table`)."""
    lines = []
    declared = results.metadata.get("tables", {})
    for curve in shown_curves(results):
        for table in declared.get(curve, []):
            columns = table["columns"]
            lines += ["", f"{curve}, {table['title']} (means over seeds; the round follows step t, counted from 1):",
                      "", "| t | " + " | ".join(columns.values()) + " |", "|---" * (len(columns) + 1) + "|"]
            for r in round_rows(results, curve, columns):
                lines.append(f"| {r['step'] + 1} | " + " | ".join(f"{r[c]:.4g}" for c in columns) + " |")
    return lines


def _info_lines(md: dict) -> list:
    """Markdown lines: each problem's structural numbers (`Problem.info`)."""
    lines = []
    for problem, info in md.get("problem_info", {}).items():
        lines += ["", f"{problem}: " + ", ".join(f"{k} = {v}" for k, v in info.items())]
    return lines


def _error_lines(results: Results) -> list:
    """Markdown lines: each curve with failed runs (metadata "errors", {curve: the sweep's message}),
    with the count of its runs that carry error bits ("2 of 20 runs failed"), so a curve that failed in
    a few seeds only is as visible as one that failed in all."""
    recorded = results.metadata.get("errors") or {}
    if not recorded:
        return []
    lines = ["", "Runs with errors (their numbers are not to be trusted):", ""]
    for curve, message in recorded.items():
        errors = results.arrays.get(curve, {}).get("errors")
        count = "" if errors is None else f"{np.count_nonzero(errors)} of {len(errors)} runs failed; "
        lines.append(f"- {curve}: {count}{message}")
    return lines


def _summary_lines(results: Results, body: list) -> str:
    """The summary: title, description, the float precision the runs used (configuration `precision`,
    where the metadata records it), `body`, then the runs with errors and the notes."""
    md = results.metadata
    lines = [f"# {md.get('experiment', 'results')} ({md.get('size', '')})", "", md.get("description", ""), ""]
    precision = md.get("config", {}).get("precision")
    if precision:
        lines += [f"Precision: {precision}.", ""]
    lines += body + _info_lines(md) + _error_lines(results)
    if md.get("notes"):
        lines += ["", md["notes"]]
    return "\n".join(lines) + "\n"


def atomic_savez(path: Path, arrays: dict, compressed: bool = False) -> None:
    """np.savez (np.savez_compressed when `compressed`) into `path` through `replacing`: a reader never
    sees a torn file, and writers of the same path at the same time (several processes of a sweep)
    never collide."""
    with replacing(path) as fh:
        (np.savez_compressed if compressed else np.savez)(fh, **arrays)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) into `path` through `replacing`, as `atomic_savez` does."""
    with replacing(path) as fh:
        fh.write(text.encode("utf-8"))


@contextlib.contextmanager
def replacing(path: Path):
    """A binary file to write, under a temporary name of this writer's own beside `path`
    (PATH.<pid>.<thread>.<random>.tmp, created exclusively, so two writers never share one); when the
    block ends it is flushed to disk and renamed over `path` in one step (the last writer wins, whole),
    and when the block fails it is removed. Flushing first means a crash of the machine leaves the
    old file or the new one, not an empty file under the new name."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
