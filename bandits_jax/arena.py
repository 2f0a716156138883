"""The arena: every registered regret algorithm against every benchmark problem it fits, on equal terms.

    bandits-jax arena --size small                        the benchmark set, every regret algorithm
    bandits-jax arena --plugin my_bandits --algorithm all --algorithm my_ucb:beta=2
    run_arena("small", problems=("cosine",), algorithms=("linucb", "fn_ucb"))

The benchmark set (`BENCH`) holds one problem of each regret family at a common size (`SIZES`): the
FN-UCB cosine function, an asynchronous synthetic function (one agent acts a step), a DUETS test
function on its candidate set (the candidates as every agent's contexts, so contextual algorithms run
on it too) and a Coop-KernelUCB network problem. `--problem` and `--algorithm` name what runs: a
benchmark label or any problem spec, a registered algorithm or spec; `all` stands for the whole set
(the default), so `--algorithm all --algorithm mine` adds an algorithm and `--algorithm mine` runs it
alone. Which pairs run is the misfit check's decision (`curves.check_fit`, traced): the fit matrix is
printed first and kept.

Equal terms:
- random numbers: on a problem every algorithm runs the same seeds with key stream 0, so the problem's
  draws (contexts, the reward noise of every arm, arrivals, graphs) are the same numbers for each;
- settings: each algorithm at its registered defaults ("default"; on the benchmark problem of its own
  family, with the static options that family's experiment uses there, `Bench.setting`: the Coop
  methods' RBF kernel and feature storage), and at the best point of a grid
  (`factors`, default `GRID_FACTORS`) scaling its exploration parameters (`exploration`) together;
  the grid runs as one vmapped call per pair (traced hyper-parameters, one compile) on the tuning
  seeds `TUNING_FIRST_SEED`.., disjoint from the reported seeds 0.., and its point of lowest mean
  final regret there (`results.grid_choices`) is run on the reported seeds ("tuned");
- communication: scalars sent up plus scalars sent down (`core.Report`), summed over agents and steps.

Output (`OUT`, default results/arena/<size>): `OUT/tuning/` and `OUT/` are results folders like any
experiment's (chunked, resumable, with the curve cache); `OUT/arena.json` holds the fit matrix, the
grids, the tuning choices and the timing; `OUT/arena.md` and `OUT/pareto.png` are the page and its
figure. `bandits-jax report --arena OUT` writes the committed record and docs/arena.md from it.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .compile_cache import CompileCount
from .core import ConfigError, Trial
from .curves import Curve, Spec, parse_spec, problem_of, resolve
from .results import (REPAIR, atomic_write_text, check_folder, check_keys, grid_choices, is_finite, is_int, is_text,
                      list_of, load_checked, load_results, object_of, read_json, step_axis, summary_rows)

TUNING_FIRST_SEED = 1_000_000  # tuning seeds start here; reported seeds start at 0
GRID_FACTORS = (0.1, 0.3, 1.0, 3.0)  # times the default of each exploration parameter
CONVENTIONAL = ("beta", "alpha", "nu", "eta")  # the first of these an algorithm has is its exploration
EXPLORATION = {  # algorithms whose confidence width is set by other parameters (scaled together)
    "fn_ucb": ("nu_tkn", "nu_tk"), "fn_ucb_authors": ("nu_tkn", "nu_tk"),
    "igp_ucb": ("B", "R"), "naive_igp_ucb": ("B", "R"), "oful": ("R", "S"),
}
ARENA_FILE = "arena.json"


class Bench(NamedTuple):
    """A benchmark problem: its label, the family it comes from, its spec with the size's fields, and the
    static options its family's own experiment gives the family's algorithms there ((lineage, {option:
    value}); each algorithm of that lineage takes those its factory accepts, where its spec does not set
    them)."""

    label: str
    family: str
    spec: str
    setting: tuple = ()


BENCH = (
    Bench("cosine", "FN-UCB", "cosine:num_agents={agents},horizon={horizon}"),
    Bench("async-f1", "Async-KernelUCB", "async-f1:num_agents={agents},horizon={horizon},num_arms=10,dim=10"),
    Bench("duets-h1", "DUETS",
          "duets-h1:num_agents={agents},horizon={horizon},num_candidates={candidates}+candidates_as_contexts"),
    Bench("coop-rbf", "Coop-KernelUCB", "coop-rbf:num_agents={network},horizon={horizon}",
          ("coop", {"kernel": "rbf", "storage": "feature", "ring_rounds": 16, "embedding": "common_lag",
                    "r_max": 8, "landmarks": 32})),  # the coop/* experiments' small size (experiments/coop.py)
)
SIZES = {  # agents of the cosine, async and DUETS problems, agents of the network, steps, seeds
    "smoke": dict(agents=2, network=4, horizon=12, candidates=40, seeds=2, tuning_seeds=2),
    "small": dict(agents=4, network=8, horizon=200, candidates=200, seeds=10, tuning_seeds=5),
    "large": dict(agents=10, network=50, horizon=1000, candidates=2000, seeds=100, tuning_seeds=20),
}


class Entry(NamedTuple):
    """A problem or an algorithm of the arena: its label in tables, its spec, its family and, for a
    problem, the setting of its family's algorithms there (`Bench.setting`)."""

    label: str
    spec: Spec
    family: str = ""
    setting: tuple = ()


# ------------------------------------------------------------------------------ the arena's parts
def arena_problems(size: str, names=("all",)) -> list:
    """[Entry] of the problems named: a benchmark label, `all` (the whole set), or any problem spec."""
    dims = size_of(size)
    bench = {b.label: Entry(b.label, parse_spec(b.spec.format(**dims), "--problem"), b.family, b.setting)
             for b in BENCH}
    entries = {}
    for name in names or ("all",):
        for entry in (bench.values() if name == "all" else [bench.get(name) or _user_problem(name, dims["horizon"])]):
            entries[entry.label] = entry
    return list(entries.values())


def _user_problem(text: str, horizon: int) -> Entry:
    """The Entry of a problem spec given on the command line, its options checked as `run` checks them
    (the problem is built once, at the arena's horizon, which a spec may name but not change)."""
    from .problems import problem_options

    spec = parse_spec(text, "--problem")
    if "horizon" in problem_options(spec.name):  # an unknown name fails here
        if spec.options.get("horizon", horizon) != horizon:
            raise ConfigError(f"--problem {text}: the arena runs every problem for its size's horizon ({horizon} "
                              f"steps); leave horizon out of the spec, or choose another --size")
        problem_of(spec.with_options(horizon=horizon))
    else:
        problem_of(spec)
    return Entry(text, spec, "user")


def arena_algorithms(names=("all",)) -> list:
    """[Entry] of the algorithms named: a registered name or spec, or `all` (every registered regret
    algorithm, a plugin's included; phase-level trials are left out)."""
    from .algorithms import ALGORITHMS, algorithm_factory, paper_of

    entries = {}
    for name in names or ("all",):
        for text in (list(ALGORITHMS) if name == "all" else [name]):
            spec = parse_spec(text, "--algorithm")
            algorithm_factory(spec.name)  # an unknown name fails here
            if _is_trial(spec):  # built once: a bad option or a broken factory is one line naming it
                if name != "all":
                    raise ConfigError(f"--algorithm {text} is a phase-level trial (no regret); the arena compares "
                                      f"regret algorithms")
                continue
            family = paper_of(spec.name) if isinstance(ALGORITHMS[spec.name], str) else "user"
            entries[text] = Entry(text, spec, family)
    return list(entries.values())


def fit_matrix(problems: list, algorithms: list, horizon: int) -> dict:
    """{problem label: {algorithm label: "" where it fits, else why not}}, by the traced misfit check."""
    fits = {}
    for problem in problems:
        fits[problem.label] = {}
        for algorithm in algorithms:
            try:
                resolve([_curve(problem, algorithm, horizon, algorithm.label)])
                fits[problem.label][algorithm.label] = ""
            except ConfigError as err:
                fits[problem.label][algorithm.label] = str(err)
    return fits


def exploration(name: str, defaults: dict) -> tuple:
    """The hyper-parameters the arena's grid scales for algorithm `name`: `EXPLORATION`'s where it
    lists the name, else the first of `CONVENTIONAL` among its `defaults`, else none (no grid)."""
    if name in EXPLORATION:
        return EXPLORATION[name]
    return next(((p,) for p in CONVENTIONAL if p in defaults), ())


def grid_points(defaults: dict, params: tuple, factors) -> tuple:
    """((label, {param: default x factor}), ...) over `factors`; labels "x0.3"."""
    return tuple((f"x{f:g}", {p: defaults[p] * f for p in params}) for f in factors)


def size_of(size: str, seeds=None, tuning_seeds=None) -> dict:
    """The size's dimensions, with seeds and tuning seeds as given."""
    if size not in SIZES:
        raise ConfigError(f"the arena has no size {size!r}; choose one of {', '.join(SIZES)}")
    dims = dict(SIZES[size])
    for key, value in (("seeds", seeds), ("tuning_seeds", tuning_seeds)):
        if value is not None:
            if value < 2:
                raise ConfigError(f"the arena needs at least 2 {key.replace('_', ' ')} (a standard error), got {value}")
            if value > SEED_ROOM[key]:
                raise ConfigError(f"--{key.replace('_', '-')} {value} is more than the arena has room for "
                                  f"({SEED_ROOM[key]}: {SEED_RANGES[key]}); give fewer")
            dims[key] = value
    return dims


# how many seeds each run may have: the reported seeds 0..S-1 stay below the tuning seeds, which stay
# within the 32-bit seed numbers the key derivation folds in
SEED_ROOM = {"seeds": TUNING_FIRST_SEED, "tuning_seeds": 2 ** 32 - TUNING_FIRST_SEED}
SEED_RANGES = {"seeds": f"reported seeds 0..S-1 stay below the tuning seeds, which start at {TUNING_FIRST_SEED}",
               "tuning_seeds": f"tuning seeds run from {TUNING_FIRST_SEED} to at most 2^32 - 1"}


# ------------------------------------------------------------------------------ running it
def run_arena(size: str = "small", problems=("all",), algorithms=("all",), out=None, seeds=None,
              tuning_seeds=None, factors=GRID_FACTORS, quiet: bool = False, check: bool = False,
              curves=None) -> Path:
    """Run (or resume) the arena; returns its folder (module docstring). Bad input, an empty arena or
    a bad grid raise ConfigError before anything compiles."""
    started, count = time.perf_counter(), CompileCount()
    dims = size_of(size, seeds, tuning_seeds)
    factors = _checked_factors(factors)
    probs, algs = arena_problems(size, problems), arena_algorithms(algorithms)
    fits = fit_matrix(probs, algs, dims["horizon"])
    pairs = [(p, a) for p in probs for a in algs if not fits[p.label][a.label]]
    out = Path(out) if out is not None else Path("results") / "arena" / size
    print(fit_text(fits), flush=True)
    if not pairs:
        raise ConfigError("no algorithm fits any problem of the arena; see the fit matrix above")
    grids = {a.label: _grid(a, factors) for a in algs if any(pp[1] is a for pp in pairs)}
    common = dict(size=size, plot=False, quiet=quiet, curves=curves, check=check, summary=False,
                  raise_errors=False, step_progress=False)
    from .sweep import run_experiment, validated_runs

    tuning = [(p, a) for p, a in pairs if grids[a.label] is not None]

    def reported(chosen):
        return _experiment("arena", size, dims, 0, dims["seeds"],
                           lambda cfg: _reported_curves(pairs, grids, chosen, dims["horizon"]))

    validated_runs(reported({}), size, {}, None, ())  # the reported run is checked before tuning computes
    check_folder(out, "the arena's folder (--out)")
    if tuning:
        run_experiment(_experiment("arena/tuning", size, dims, TUNING_FIRST_SEED, dims["tuning_seeds"],
                                   lambda cfg: [_curve(p, a, dims["horizon"], _name(p, a), grids[a.label][0])
                                                for p, a in tuning]), out=out / "tuning", **common)
    if check:
        return out
    chosen = _choices(out / "tuning", tuning, factors) if tuning else {}
    run_experiment(reported(chosen), out=out, **common)
    arena = {"size": size, "dims": dims, "factors": list(factors), "tuning_first_seed": TUNING_FIRST_SEED,
             "problems": [{"label": p.label, "family": p.family, "spec": _text(p.spec),
                           "setting": list(p.setting)} for p in probs],
             "algorithms": [{"label": a.label, "family": a.family} for a in algs],
             "fits": fits, "exploration": {a: list(g[1]) if g else [] for a, g in grids.items()},
             "chosen": chosen, "timing": _timing(out, started, count)}
    atomic_write_text(out / ARENA_FILE, json.dumps(arena, indent=1) + "\n")
    atomic_write_text(out / "arena.md", arena_page(out))
    plot_pareto(out, out / "pareto.png")
    if not quiet:
        print(f"the arena's page: {out / 'arena.md'}; its figure: {out / 'pareto.png'}")
    return out


def _reported_curves(pairs, grids, chosen, horizon) -> list:
    """The default curve of every pair, and its tuned curve where the grid chose another point."""
    curves = []
    for p, a in pairs:
        curves.append(_curve(p, a, horizon, _name(p, a), tags={"setting": "default"}))
        pick = chosen.get(p.label, {}).get(a.label)
        if pick and pick["factor"] != 1.0:
            tuned = Entry(a.label, a.spec.with_options(**pick["hparams"]), a.family)
            curves.append(_curve(p, tuned, horizon, _name(p, a) + " (tuned)",
                                 tags={"setting": "tuned", "factor": pick["factor"]}))
    return curves


def _choices(tuning_dir: Path, tuning: list, factors) -> dict:
    """{problem: {algorithm: {"factor", "hparams", "tuning": {label: mean final regret}}}} of the grid run."""
    res = load_results(tuning_dir)
    picks = grid_choices(res)
    final = {r["algorithm"]: r["final_regret_mean"] for r in summary_rows(res)}
    chosen = {}
    for p, a in tuning:
        name = _name(p, a)
        points = res.metadata["grids"][name]
        best = points.index(picks[name])
        hparams = {k: v for k, v in res.metadata["algorithm_hparams"][picks[name]].items()
                   if k in exploration(a.spec.name, res.metadata["algorithm_hparams"][picks[name]])}
        chosen.setdefault(p.label, {})[a.label] = {
            "factor": factors[best], "hparams": hparams,
            "tuning": {f"x{f:g}": final[n] for f, n in zip(factors, points)}}
    return chosen


def _timing(out: Path, started: float, count: CompileCount) -> dict:
    """Wall-clock seconds of this call; the compile and run seconds of every stored chunk of both sweeps,
    whichever call computed it (a resumed arena counts its earlier calls' work; a grid's call once);
    the programs this call compiled or loaded from the persistent compilation cache."""
    import jax

    from .sweep import CHUNKS, _slug

    compile_s = run_s = 0.0
    for folder in (out / "tuning", out):
        if not (folder / "metadata.json").exists():
            continue
        md = json.loads((folder / "metadata.json").read_text())
        repeats = {p for points in md.get("grids", {}).values() for p in points[1:]}  # the same call's seconds
        for curve in md["algorithms"]:
            if curve in repeats:
                continue
            for chunk in sorted((folder / CHUNKS / _slug(curve)).glob("seeds_*.npz")):
                with np.load(chunk) as data:
                    compile_s += float(data["compile_seconds"])
                    run_s += float(data["run_seconds"])
    return {"wall_seconds": time.perf_counter() - started, "compile_seconds": compile_s, "run_seconds": run_s,
            "compile_cache": jax.config.jax_compilation_cache_dir is not None, **count.counts()}


def _experiment(name, size, dims, first_seed, seeds, build):
    from .experiments.registry import Experiment

    return Experiment(name, "every regret algorithm on the benchmark problems it fits", {},
                      {size: {"seeds": seeds, "first_seed": first_seed, "horizon": dims["horizon"]}}, build,
                      agents="mean", se_ddof=1,
                      notes="The arena (`bandits-jax arena`): regret is the mean over agents, mean +- standard "
                            "error (ddof 1) over seeds; communication is scalars sent up plus down.")


def _curve(problem: Entry, algorithm: Entry, horizon: int, name: str, grid=None, tags=None) -> Curve:
    from .experiments.adhoc import with_horizon

    curve = Curve(name, problem.spec, _in_setting(problem, algorithm.spec), grid, 0,
                  {"problem": problem.label, "method": algorithm.label, **(tags or {})})
    return with_horizon(curve, {"horizon": horizon})


def _in_setting(problem: Entry, spec: Spec) -> Spec:
    """The algorithm spec with the problem's family setting (`Bench.setting`) where it applies."""
    from .algorithms import ALGORITHMS, algorithm_options

    if not problem.setting or not str(ALGORITHMS.get(spec.name, "")).startswith(problem.setting[0] + "."):
        return spec
    accepted = algorithm_options(spec.name)
    extra = {k: v for k, v in problem.setting[1].items() if k in accepted and k not in spec.options}
    return spec.with_options(**extra)


def _grid(algorithm: Entry, factors):
    """(grid points, exploration parameters) of an algorithm, or None where it has none to scale."""
    from .algorithms import build_algorithm

    built = build_algorithm(_curve(Entry("", Spec("cosine")), algorithm, 2, "").algorithm)
    params = exploration(algorithm.spec.name, built.defaults)
    return (grid_points(built.defaults, params, factors), params) if params else None


def _name(problem: Entry, algorithm: Entry) -> str:
    return f"{problem.label}: {algorithm.label}"


def _is_trial(spec: Spec) -> bool:
    from .algorithms import algorithm_options, build_algorithm

    if "horizon" in algorithm_options(spec.name):
        spec = spec.with_options(horizon=2)
    return isinstance(build_algorithm(spec), Trial)


def _checked_factors(factors) -> tuple:
    factors = tuple(float(f) for f in factors)
    if not factors or any(not np.isfinite(f) or f <= 0 for f in factors) or len(set(factors)) != len(factors):
        raise ConfigError(f"the grid's factors must be distinct positive numbers, got {list(factors)}")
    return factors


def _text(spec: Spec) -> str:
    opts = ",".join(f"{k}={v}" for k, v in spec.options.items())
    head = spec.name + (f":{opts}" if opts else "")
    return "+".join([head] + [n + (":" + ",".join(f"{k}={v}" for k, v in o.items()) if o else "")
                              for n, o in spec.wrappers])


# ------------------------------------------------------------------------------ tables and figure
def fit_text(fits: dict) -> str:
    """The fit matrix as text: a row per algorithm, a column per problem, "fits" or "-"."""
    problems = list(fits)
    algorithms = list(next(iter(fits.values()))) if fits else []
    width = max([len(a) for a in algorithms] + [9])
    lines = ["fit matrix (traced misfit check):", " " * width + "  " + "  ".join(f"{p:>10s}" for p in problems)]
    for a in algorithms:
        lines.append(f"{a:{width}s}  " + "  ".join(f"{'fits' if not fits[p][a] else '-':>10s}" for p in problems))
    n = sum(not r for row in fits.values() for r in row.values())
    return "\n".join(lines + [f"{n} of {len(problems) * len(algorithms)} pairs fit"])


def problem_rows(res, arena: dict, problem: str) -> list:
    """One row per algorithm that fits `problem`: default and tuned final regret (mean, SE), the tuned
    communication, its rank by tuned regret (1 = lowest; ties share the mean rank) and whether it is
    on the Pareto front of tuned regret against communication; "errors" where a run of it carries
    error bits (`metadata.json` names them)."""
    summary = {r["algorithm"]: r for r in summary_rows(res)}
    broken = res.metadata.get("errors", {})
    rows = []
    for a in arena["algorithms"]:
        name = f"{problem}: {a['label']}"
        if name not in summary:
            continue
        pick = arena["chosen"].get(problem, {}).get(a["label"])
        tuned = summary.get(name + " (tuned)", summary[name])
        rows.append({"algorithm": a["label"], "family": a["family"], "default": _stat(summary[name]),
                     "tuned": _stat(tuned), "factor": pick["factor"] if pick else None,
                     "comm": tuned["comm_up"] + tuned["comm_down"],
                     "comm_default": summary[name]["comm_up"] + summary[name]["comm_down"],
                     "errors": name in broken or name + " (tuned)" in broken})
    for key, values in (("rank", [r["tuned"][0] for r in rows]), ("rank_default", [r["default"][0] for r in rows])):
        for r, rank in zip(rows, ranks(values)):
            r[key] = rank
    front = pareto_front([(r["comm"], r["tuned"][0]) for r in rows])
    for r, on in zip(rows, front):
        r["pareto"], r["field"] = on, len(rows)
    return sorted(rows, key=lambda r: (r["rank"], r["algorithm"]))


def overall_rows(res, arena: dict) -> list:
    """One row per algorithm: problems it fits, mean rank (tuned and default) over them, the mean of its
    relative tuned rank (rank - 1) / (algorithms on the problem - 1), 0 best and 1 worst, which the
    table sorts by (problems have fields of different sizes), and the fronts it is on."""
    per = {p["label"]: problem_rows(res, arena, p["label"]) for p in arena["problems"]}
    rows = []
    for a in arena["algorithms"]:
        mine = [r for rows_ in per.values() for r in rows_ if r["algorithm"] == a["label"]]
        if not mine:
            continue
        rows.append({"algorithm": a["label"], "family": a["family"], "fits": len(mine),
                     "mean_rank": float(np.mean([r["rank"] for r in mine])),
                     "mean_rank_default": float(np.mean([r["rank_default"] for r in mine])),
                     "relative": float(np.mean([(r["rank"] - 1) / max(r["field"] - 1, 1) for r in mine])),
                     "fronts": [p for p, rows_ in per.items() for r in rows_ if r["algorithm"] == a["label"]
                                and r["pareto"]]})
    return sorted(rows, key=lambda r: (r["relative"], r["algorithm"]))


def ranks(values) -> list:
    """1-based ranks of `values` (lowest first), ties sharing their mean rank; NaN ranks last."""
    v = np.asarray(values, float)
    v = np.where(np.isfinite(v), v, np.inf)
    out = np.empty(len(v))
    order = np.argsort(v, kind="stable")
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        out[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out.tolist()


def pareto_front(points) -> list:
    """[bool] per (cost, value) point: True where no other point is at most as high in both and lower
    in one (lower is better in both)."""
    pts = np.asarray(points, float).reshape(-1, 2)
    return [not any((q <= p).all() and (q < p).any() for q in pts) for p in pts]


def _stat(row: dict) -> tuple:
    return row["final_regret_mean"], row["final_regret_se"]


def arena_page(folder) -> str:
    """docs/arena.md of an arena folder or its record: the terms, the fit matrix, a table per problem,
    the overall table and the timing, every number computed from the folder."""
    folder = Path(folder)
    res, arena = load_results(folder), read_arena(folder)
    md, dims = res.metadata, arena["dims"]
    lines = [f"# The arena ({arena['size']})", "",
             "Every registered regret algorithm on every benchmark problem it fits, on equal terms: the same "
             f"seeds (0 to {dims['seeds'] - 1}) and random numbers for every algorithm on a problem; each at its "
             "registered defaults and at the best point of a grid that scales its exploration parameters by "
             f"{', '.join(f'{f:g}' for f in arena['factors'])}, chosen on {dims['tuning_seeds']} tuning seeds "
             f"from {arena['tuning_first_seed']} (disjoint from the reported ones); communication in scalars "
             "sent up plus down, summed over agents and steps. Regret is the final cumulative regret, the "
             f"mean over agents, after T = {dims['horizon']} steps, mean +- standard error over seeds. "
             "Generated by `bandits-jax report --arena` from the record in `docs/arena/data`.", "",
             _provenance(md), "", "![Regret against communication](arena/pareto-" + arena["size"] + ".png)", "",
             "## Problems", "", "| problem | family | spec | its family's algorithms there |", "|---|---|---|---|"]
    lines += [f"| {p['label']} | {p['family']} | `{p['spec']}` | {_setting_text(p.get('setting'))} |"
              for p in arena["problems"]]
    lines += ["", *_fit_lines(arena), "", "## Overall", "",
              "| algorithm | paper | problems fit | relative rank (tuned) | mean rank (tuned) | mean rank (default) "
              "| Pareto front of |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['algorithm']} | {r['family']} | {r['fits']} | {r['relative']:.2f} | {r['mean_rank']:.2f} | "
              f"{r['mean_rank_default']:.2f} | {', '.join(r['fronts']) or '-'} |" for r in overall_rows(res, arena)]
    for p in arena["problems"]:
        lines += ["", f"## {p['label']}", "",
                  "| rank | algorithm | default regret | tuned regret | factor | communication (tuned) | front |",
                  "|---|---|---|---|---|---|---|"]
        for r in problem_rows(res, arena, p["label"]):
            lines.append(f"| {r['rank']:g} | {r['algorithm']} | {_pm(r['default'])} | {_pm(r['tuned'])} | "
                         f"{'-' if r['factor'] is None else format(r['factor'], 'g')} | {r['comm']:.4g} | "
                         f"{'yes' if r['pareto'] else ''}{' (error bits)' if r['errors'] else ''} |")
    return "\n".join(lines + ["", *_timing_lines(arena["timing"])]) + "\n"


def _provenance(md: dict) -> str:
    versions = md.get("versions", {})
    return (f"_Computed at commit {str(md.get('commit', ''))[:12] or 'not recorded'} with bandits_jax "
            f"{versions.get('bandits_jax', '?')} and jax {versions.get('jax', '?')} on "
            f"{', '.join(md.get('devices', [])) or '?'}._")


def _setting_text(setting) -> str:
    """'coop/*: kernel=rbf, ...' for a problem's family setting, '-' for none."""
    if not setting:
        return "-"
    return f"{setting[0]}/*: " + ", ".join(f"`{k}={v}`" for k, v in setting[1].items())


def _pm(stat) -> str:
    return f"{stat[0]:.3f} +- {stat[1]:.3f}"


def _fit_lines(arena: dict) -> list:
    """The fit matrix as markdown, each reason for a misfit given once and cited by number."""
    problems = [p["label"] for p in arena["problems"]]
    reasons: list = []
    lines = ["## Fit matrix", "", "| algorithm | " + " | ".join(problems) + " |", "|---|" + "---|" * len(problems)]
    for a in arena["algorithms"]:
        cells = []
        for p in problems:
            why = arena["fits"][p][a["label"]]
            if not why:
                cells.append("fits")
                continue
            why = why.split(": ", 1)[-1].replace(f" {p} has ", " the problem has ")
            if why not in reasons:
                reasons.append(why)
            cells.append(f"- ({reasons.index(why) + 1})")
        lines.append(f"| {a['label']} | " + " | ".join(cells) + " |")
    return lines + [""] + [f"{i}. {why}" for i, why in enumerate(reasons, 1)]


def _timing_lines(t: dict) -> list:
    return ["## Time", "",
            f"The stored results took {t['compile_seconds']:.0f} s compiling and {t['run_seconds']:.0f} s running "
            f"(every chunk of both sweeps, whichever call computed it). The last call took {t['wall_seconds']:.0f} "
            f"s of wall-clock time, the fit checks, tracing, building problems and writing included; it compiled "
            f"{t['compiled']} programs and loaded {t['loaded']} from the persistent compilation cache "
            f"({'on' if t['compile_cache'] else 'off'})."]


def plot_pareto(folder, path) -> Path:
    """One panel per problem (two to a row): tuned final regret against communication, one point per
    algorithm, the Pareto front drawn as the staircase it bounds and its points named."""
    from .plotting import panel_grid, save_figure

    folder = Path(folder)
    res, arena = load_results(folder), read_arena(folder)

    def draw():
        problems = arena["problems"]
        cols = min(2, len(problems))
        fig, axes = panel_grid(len(problems), -(-len(problems) // cols), cols, (6, 4.2))
        for ax, p in zip(axes, problems):
            rows = problem_rows(res, arena, p["label"])
            x = np.array([r["comm"] for r in rows]) + 1.0
            y = np.array([r["tuned"][0] for r in rows])
            front = np.array([r["pareto"] for r in rows])
            ax.scatter(x[~front], y[~front], color="0.6", s=18, label="dominated")
            order = np.flatnonzero(front)[np.argsort(x[front])]
            ax.plot(x[order], y[order], "o-", color="C3", drawstyle="steps-post", label="Pareto front")
            for k, i in enumerate(order):  # alternate above and below so that close neighbours stay legible
                ax.annotate(rows[i]["algorithm"], (x[i], y[i]), fontsize=7, textcoords="offset points",
                            xytext=(4, 4 if k % 2 == 0 else -11))
            ax.set_xscale("log")
            ax.margins(x=0.15)  # room for the names of the points at the edges
            ax.set_xlabel("scalars communicated + 1 (tuned)")
            ax.set_ylabel("final cumulative regret (tuned)")
            ax.set_title(p["label"])
            ax.legend(fontsize=7)
        fig.tight_layout()
        return fig

    return save_figure(draw, Path(path))


def write_arena_page(folder, docs=Path("docs")) -> list:
    """Record an arena folder into docs/arena/data/arena-<size>/ (a record folder is taken as it is), and
    write docs/arena.md and docs/arena/pareto-<size>.png from the record; returns the paths written.
    All of them change, or none: the folder is checked first (`read_arena`, `results.load_checked`,
    `_check_agreement`), and the record, page and figure are made in a staging folder under docs/arena
    before one rename each puts them in place."""
    from .records import record_name
    from .report import put, staging

    folder, docs = Path(folder), Path(docs)
    arena, res = read_arena(folder), load_checked(folder)
    _check_agreement(arena, res, folder / ARENA_FILE)
    is_record = "record" in res.metadata
    target = docs / "arena" / "data" / record_name(res.metadata["experiment"], res.metadata.get("size", ""))
    check_folder(target, "report --arena: the arena's record")
    (docs / "arena").mkdir(parents=True, exist_ok=True)
    figure = f"pareto-{arena['size']}.png"
    with staging(docs / "arena") as stage:
        record = folder if is_record else _stage_record(folder, stage)
        atomic_write_text(stage / "arena.md", arena_page(record))
        plot_pareto(record, stage / figure)
        placed = folder if is_record else target
        if not is_record:
            for name in ("results.npz", "metadata.json", ARENA_FILE):
                put(record / name, target / name)
        return [placed, put(stage / "arena.md", docs / "arena.md"), put(stage / figure, docs / "arena" / figure)]


def _stage_record(folder: Path, stage: Path) -> Path:
    """Write the record of an arena folder (20 checkpoints) with its arena.json into `stage`."""
    import shutil

    from .records import write_record

    record = write_record(folder, stage, checkpoints=20)
    shutil.copyfile(folder / ARENA_FILE, record / ARENA_FILE)
    return record


def read_arena(folder) -> dict:
    """The arena.json of an arena folder or its record, checked for what the page and the figure read
    (`_ARENA`, `_check_labels`): a missing, non-JSON or wrongly shaped one is a ConfigError naming it."""
    path = Path(folder) / ARENA_FILE
    if not path.is_file():
        raise ConfigError(f"{folder} holds no {ARENA_FILE}: give `report --arena` a folder `bandits-jax arena` wrote, "
                          f"or its record")
    arena = read_json(path)
    check_keys(arena, _ARENA, path, required=tuple(_ARENA))
    _check_labels(arena, path)
    return arena


def _check_labels(arena: dict, path: Path) -> None:
    """Problem and algorithm labels distinct, and the fit matrix holding every pair of them."""
    problems, algorithms = [p["label"] for p in arena["problems"]], [a["label"] for a in arena["algorithms"]]
    for what, labels in (("problems", problems), ("algorithms", algorithms)):
        if len(set(labels)) != len(labels):
            raise ConfigError(f"{path}: two of its {what} have the same label; {REPAIR}")
    lost = [(p, a) for p in problems for a in algorithms if a not in arena["fits"].get(p, {})]
    if lost:
        raise ConfigError(f"{path}: 'fits' has no entry for {lost[0][1]} on {lost[0][0]}; {REPAIR}")


def _check_agreement(arena: dict, res, path: Path) -> None:
    """arena.json and the results beside it of the same arena: its size, seeds and horizon."""
    md = res.metadata
    found = {"size": md.get("size"), "seeds": len(res.seeds), "horizon": int(step_axis(res)[-1])}
    given = {"size": arena["size"], "seeds": arena["dims"]["seeds"], "horizon": arena["dims"]["horizon"]}
    for key in found:
        if found[key] != given[key]:
            raise ConfigError(f"{path} gives the arena's {key} as {given[key]}, but the results beside it hold "
                              f"{found[key]}; {REPAIR}")


def _is_positive_int(v) -> bool:
    return is_int(v) and v > 0


def _is_seconds(v) -> bool:
    return is_finite(v) and v >= 0


def _is_entry(v, keys=("label", "family")) -> bool:
    return isinstance(v, dict) and all(is_text(v.get(k)) for k in keys)


def _is_problem(v) -> bool:
    setting = v.get("setting", []) if isinstance(v, dict) else None
    return (_is_entry(v, ("label", "family", "spec")) and isinstance(setting, list)
            and (setting == [] or (len(setting) == 2 and is_text(setting[0]) and isinstance(setting[1], dict))))


def _is_dims(v) -> bool:
    return isinstance(v, dict) and all(_is_positive_int(v.get(k)) for k in ("seeds", "tuning_seeds", "horizon"))


def _is_choice(v) -> bool:
    return isinstance(v, dict) and is_finite(v.get("factor")) and v["factor"] > 0


def _is_timing(v) -> bool:
    seconds = ("wall_seconds", "compile_seconds", "run_seconds")
    return (isinstance(v, dict) and all(_is_seconds(v.get(k)) for k in seconds)
            and all(is_int(v.get(k)) and v[k] >= 0 for k in ("compiled", "loaded"))
            and isinstance(v.get("compile_cache"), bool))


def _non_empty(test):
    return lambda v: test(v) and v != []


_ARENA = {  # key: (test, what its value must be), for what arena_page and plot_pareto read
    "size": (lambda v: is_text(v) and re.fullmatch(r"[\w.-]+", v) is not None,
             "a size's name (letters, digits, . _ -)"),
    "dims": (_is_dims, "an object with positive integers seeds, tuning_seeds and horizon"),
    "factors": (_non_empty(list_of(lambda f: is_finite(f) and f > 0)), "a non-empty list of positive numbers"),
    "tuning_first_seed": (lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    "problems": (_non_empty(list_of(_is_problem)),
                 'a non-empty list of {"label", "family", "spec"} (strings) with a "setting" [] or [LINEAGE, {...}]'),
    "algorithms": (_non_empty(list_of(_is_entry)), 'a non-empty list of {"label", "family"} (strings)'),
    "fits": (object_of(object_of(is_text)), "an object of each problem's fits ({algorithm: why not, or \"\"})"),
    "chosen": (object_of(object_of(_is_choice)),
               'an object of each problem\'s choices ({algorithm: {"factor": F > 0}})'),
    "timing": (_is_timing, "an object of non-negative seconds (wall, compile, run), counts compiled and loaded, and "
                           "compile_cache (true or false)"),
}
