"""Results on disk: `results.npz`, `metadata.json`, `summary.md`, and a loader.

results.npz keys, per algorithm name A:
    A/regret    [S, T, N]  instantaneous pseudo-regret
    A/comm_up   [S, T]     scalars sent up per step
    A/comm_down [S, T]     scalars sent down per step
    A/rounds    [S, T]     communication rounds per step (0/1)
    A/errors    [S]        the error bits of each run (0: none; metadata.json "errors" names them)
    A/diag/NAME [S, T]     the per-step diagnostics the algorithm reports
    seeds       [S]
Phase-level experiments (metadata "outcomes") store instead, per algorithm, one [S] array per
declared outcome (e.g. A/correct, A/samples) beside A/errors.
Algorithm order is kept in metadata.json ("algorithms").
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .runner import cumulative_regret


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


def load_results(out_dir) -> Results:
    """Read back what `bandits-jax run` wrote into `out_dir`."""
    out_dir = Path(out_dir)
    path = out_dir / "results.npz"
    if not path.exists():
        raise FileNotFoundError(f"no results.npz in {out_dir}: run `bandits-jax run NAME --out {out_dir}` first")
    metadata = json.loads((out_dir / "metadata.json").read_text()) if (out_dir / "metadata.json").exists() else {}
    arrays: dict = {}
    with np.load(path) as data:
        seeds = data["seeds"]
        for name in data.files:
            if "/" not in name:
                continue
            alg, key = name.split("/diag/", 1) if "/diag/" in name else name.rsplit("/", 1)
            key = f"diag/{key}" if "/diag/" in name else key
            arrays.setdefault(alg, {})[key] = data[name]
    return Results(arrays, seeds, metadata)


def summary_rows(results: Results):
    """One dict per algorithm: final cumulative regret mean and standard error, communication totals."""
    ddof = int(results.metadata.get("se_ddof", 0))
    rows = []
    for alg in results.algorithms:
        per = results.arrays[alg]
        final = results.cumulative(alg)[:, -1]
        n = final.shape[0]
        se = float(np.std(final, ddof=ddof) / np.sqrt(n)) if n > ddof else float("nan")
        total = per["comm_up"].sum(axis=1) + per["comm_down"].sum(axis=1)
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
        "communication totals are per run, averaged over seeds" + (" (+- their std)." if std else "."),
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
