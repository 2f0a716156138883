"""The arena: every registered regret algorithm against every benchmark problem it fits, on equal terms.

    bandits-jax arena --size small                        the benchmark set, every regret algorithm
    bandits-jax arena --plugin my_bandits --algorithm all --algorithm my_ucb:beta=2
    run_arena("small", problems=("cosine",), algorithms=("linucb", "fn_ucb"))

The benchmark set (`BENCH`) holds problems of every regret family at a common size (`SIZES`), each
instance (parameters, candidate sets) drawn from the run's seed, so tuning and reported seeds differ in
the problem as well as in the noise. `--problem` and `--algorithm` name what runs: a benchmark label or
any problem spec, a registered algorithm or spec; `all` stands for the whole set (the default), so
`--algorithm all --algorithm mine` adds an algorithm and `--algorithm mine` runs it alone. Which pairs
run is the misfit check's decision (`curves.check_fit`, traced); where a pair does not fit as it is, an
adapter that leaves the problem's rewards as they are may make it fit (`ADAPTERS`: one-arrival methods
serve simultaneous arrivals one after another; cooperative methods see a complete graph with no delay),
and the fit matrix says which. DUETS needs a fixed, public candidate set, which a problem that draws
fresh contexts every step does not have. A benchmark problem whose data a user has no copy of is
skipped with one line.

Equal terms:
- random numbers: on a problem every algorithm runs the same seeds with key stream 0, so the problem's
  draws (instance, contexts, the reward noise of every arm, arrivals) are the same numbers for each;
- settings: each algorithm at its registered defaults ("default") and at the best point of a grid of
  factors (`factors`, default `TUNING_FACTORS`) scaling the exploration parameters its registry entry
  declares (`algorithms.tuning_of`), chosen by mean final regret on the tuning seeds
  (`TUNING_FIRST_SEED`.., disjoint from the reported seeds 0..); a grid whose best point is an edge
  is extended by one step; on the benchmark problem of its own family an algorithm takes the static
  options and thresholds that family's experiment uses there (`Bench.setting`);
- communication: scalars per receiver (`core.COMM_UNIT`): each copy that reaches an agent or the
  server counts once; a communicating algorithm is run at every value of its declared knob
  (`tuning.Knob`, exploration tuned at the knob's default), a curve of operating points;
- a run with error bits never ranks; zero-communication plugins are audited (`audit`).

A grid, a knob and the reported seeds are vmapped calls of one compiled program per pair: every phase
runs in groups of one size (`shared_group`), and the process compiles a program once (`programs`).
Output (`OUT`, default results/arena/<size>): `OUT/tuning/`, `OUT/tuning-edge/` and `OUT/` are results
folders like any experiment's (chunked, resumable); `OUT/arena.json` holds the fit matrix, the
declarations, the tuning choices and the timing; `OUT/arena.md`, its figures and the per-seed table are
written from them (`arena_page`). `bandits-jax report --arena OUT` writes the committed record and
docs/arena.md.
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .algorithms import lineage_of, setting_of
from .compile_cache import CompileCount
from .core import ConfigError, Trial
from .curves import Curve, Spec, parse_spec, problem_of, resolve
from .reporting.results import (REPAIR, atomic_write_text, check_folder, check_keys, is_finite, is_int, is_text,
                                list_of, load_results, object_of, read_json, step_axis, summary_rows)

TUNING_FIRST_SEED = 1_000_000  # tuning seeds start here; reported seeds start at 0
TUNING_FACTORS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)  # times the default of each exploration parameter
ARENA_FILE = "arena.json"
KNOB_TAG = " @knob"  # the curve of a pair's operating points: "<problem>: <algorithm> @knob"


class Bench(NamedTuple):
    """A benchmark problem: its label, the family it comes from, its spec with the size's fields, and
    `setting(problem spec) -> ((name, {option: value}), ...)`, the options its family's own experiment
    gives each of the family's algorithms on a problem of that spec (None: no family setting there); an
    algorithm takes those its factory accepts, where its spec does not set them (`_in_setting`)."""

    label: str
    family: str
    spec: str
    setting: object = None


# the hyper-parameters an experiment's algorithm options carry into the arena: the regularizer, the kernel's
# lengthscale and the communication thresholds (the knob's default), not the exploration the arena tunes nor
# the storage and capacities, which change a program's sizes and not the method
CARRIED = ("lam", "lengthscale", "q", "threshold", "alpha_c", "c_mu", "p0", "p_log")


def experiment_setting(named_specs) -> tuple:
    """((name, {option: value}), ...) of an experiment's (label, algorithm Spec) list: each registered name's
    options among `CARRIED`, from its first spec where two share a name (DUETS' DisKernelUCB before its
    N-KernelUCB, the same name at threshold inf)."""
    setting = {}
    for _, spec in named_specs:
        setting.setdefault(spec.name, {k: v for k, v in spec.options.items() if k in CARRIED})
    return tuple((name, options) for name, options in setting.items() if options)


def coop_setting(spec=None, **extra) -> tuple:
    """The Coop family's setting (its SETTING, the coop/* experiments' small size, with `extra`) for each
    of its names, on any problem."""
    from .algorithms import ALGORITHMS

    return tuple((name, {**setting_of("coop"), **extra}) for name in ALGORITHMS if lineage_of(name) == "coop")


def async_setting(spec) -> tuple:
    """The options Async-KernelUCB's synthetic experiments give its seven algorithms on a problem of `spec`
    (the thresholds' default rule reads its N, d and T: experiments.async_exps.thresholds)."""
    from .experiments import async_exps

    return experiment_setting(async_exps.algorithms(async_exps.SYNTH, spec))


def duets_setting(spec) -> tuple:
    """The options DUETS' experiment gives its methods on Hartmann-4D at the problem's horizon (lam = 0.2,
    DisKernelUCB's D = 10, Approx-DisKernelUCB's D = 20 and q-bar = 4, DUETS' p0 and the authors' p_log)."""
    from .experiments import duets

    return experiment_setting(duets.algorithms({**duets.DEFAULTS, "horizon": spec.horizon}, "hartmann4"))


BENCH = (  # the instance of each drawn from the run's seed (theta, the candidate set, the data's order)
    Bench("cosine", "FN-UCB", "cosine:num_agents={agents},horizon={horizon},a=random"),
    Bench("async-f1", "Async-KernelUCB", "async-f1:num_agents={agents},horizon={horizon},num_arms=10,dim=10",
          async_setting),
    Bench("hartmann4", "DUETS", "duets-hartmann4:num_agents={agents},horizon={horizon},num_candidates={candidates},"
                                "instance=per_seed+candidates_as_contexts", duets_setting),
    # a sparser graph than the problem's default (p = 0.7, diameter 2): at V = 8 its diameter is 3, so the
    # message TTLs 0 to 3 of the Coop methods' curve are four distinct operating points; the Coop methods
    # take their own setting there and on any problem they join through the complete graph (their
    # registered dual storage grows with t^2)
    Bench("coop-rbf", "Coop-KernelUCB", "coop-rbf:num_agents={network},horizon={horizon},p=0.3", coop_setting),
    Bench("magic", "real data", "magic:num_agents={agents},horizon={horizon}"),
)
# agents of the cosine, async and DUETS problems, agents of the network, steps, seeds. small is sized for
# two CPU cores: the one-arrival kernel methods serve N T arrivals with histories that grow with them, so
# the field's cost grows faster than T and the candidate count (docs/sweeps.md splits it over processes)
SIZES = {
    "smoke": dict(agents=2, network=4, horizon=12, candidates=40, seeds=2, tuning_seeds=2),
    "small": dict(agents=4, network=8, horizon=100, candidates=100, seeds=10, tuning_seeds=10),
    "large": dict(agents=10, network=50, horizon=1000, candidates=2000, seeds=100, tuning_seeds=100),
}
class Adapter(NamedTuple):
    """A way for a pair that does not fit as it is to fit: the wrapper it adds (to the problem, or else to the
    algorithm), the setting it gives the algorithm, and which algorithms it is for (`applies(spec)`). Each
    leaves the problem's rewards, so its regret, as they are."""

    label: str
    to_problem: bool
    setting: tuple
    applies: object


def _one_arrival(spec: Spec) -> bool:
    """Whether an algorithm needs exactly one active agent a step (`Algorithm.one_active`)."""
    return getattr(_probe(spec), "one_active", None) is True


def _cooperative(spec: Spec) -> bool:
    """Whether an algorithm is a packaged cooperative method (it reads the graph arrays)."""
    return lineage_of(spec.name) == "coop"


ADAPTERS = (  # tried in order
    Adapter("serial_arrivals", False, (), _one_arrival),  # simultaneous arrivals served one after another
    # every agent a neighbour, no delay; as many landmarks as a small magic round has contexts (4 agents x 2)
    Adapter("complete_graph", True, coop_setting(landmarks=8), _cooperative),
)


class Entry(NamedTuple):
    """A problem or an algorithm of the arena: its label in tables, its spec, its family and, for a
    problem, the setting of its family's algorithms there (`Bench.setting`)."""

    label: str
    spec: Spec
    family: str = ""
    setting: tuple = ()


class Pair(NamedTuple):
    """A pair that runs: its problem and algorithm, the specs it runs with (an adapter's wrapper added),
    the adapter's label ("" for none) and the algorithm's declaration (`tuning.Tuning`)."""

    problem: Entry
    algorithm: Entry
    problem_spec: Spec
    algorithm_spec: Spec
    adapter: str
    tuning: object

    @property
    def name(self) -> str:
        return f"{self.problem.label}: {self.algorithm.label}"


# ------------------------------------------------------------------------------ the arena's parts
def arena_problems(size: str, names=("all",), skipped=None) -> list:
    """[Entry] of the problems named: a benchmark label, `all` (the whole set), or any problem spec. A
    benchmark problem whose data is missing is left out with a line in `skipped` (a list), where given."""
    from .problems.datasets import DataNotFoundError

    dims = size_of(size)
    bench = {b.label: _bench_entry(b, dims) for b in BENCH}
    entries = {}
    for name in names or ("all",):
        for entry in (bench.values() if name == "all" else [bench.get(name) or _user_problem(name, dims["horizon"])]):
            if entry.label in bench and skipped is not None:
                try:
                    problem_of(entry.spec)
                except DataNotFoundError as err:
                    skipped.append(f"{entry.label}: skipped, no copy of its data ({err})")
                    continue
            entries[entry.label] = entry
    return list(entries.values())


def _bench_entry(bench: Bench, dims: dict) -> Entry:
    """The Entry of a benchmark problem at a size, with its family's setting for the problem it builds."""
    spec = parse_spec(bench.spec.format(**dims), "--problem")
    setting = bench.setting(problem_of(spec).spec) if bench.setting else ()
    return Entry(bench.label, spec, bench.family, setting)


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


def fit_matrix(problems: list, algorithms: list, horizon: int) -> tuple:
    """(fits, pairs): fits {problem label: {algorithm label: "" where it fits (as it is or through an
    adapter), else why not}} by the traced misfit check, and [Pair] of those that fit."""
    fits, pairs = {}, []
    for problem in problems:
        fits[problem.label] = {}
        for algorithm in algorithms:
            pair, why = _fitting_pair(problem, algorithm, horizon)
            fits[problem.label][algorithm.label] = why
            if pair is not None:
                pairs.append(pair)
    return fits, pairs


def _fitting_pair(problem: Entry, algorithm: Entry, horizon: int) -> tuple:
    """(Pair, "") as it is or through the first adapter that makes it fit, else (None, the plain misfit)."""
    from .algorithms import tuning_of

    tuning = tuning_of(algorithm.spec.name)
    whys = []
    for adapter in (None,) + tuple(a for a in ADAPTERS if a.applies(algorithm.spec)):
        pspec, aspec = problem.spec, algorithm.spec
        if adapter is not None:
            target = pspec if adapter.to_problem else aspec
            target = target._replace(wrappers=target.wrappers + ((adapter.label, {}),))
            pspec, aspec = (target, aspec) if adapter.to_problem else (pspec, target)
            aspec = _in_setting(adapter.setting, aspec)
        pair = Pair(problem, algorithm, pspec, aspec, adapter.label if adapter else "", tuning)
        try:
            resolve([_curve(pair, horizon, pair.name)])
            return pair, ""
        except ConfigError as err:
            whys.append(str(err) if adapter is None else f"through {adapter.label}: {err.args[0].split(': ', 1)[-1]}")
    return None, "; ".join(whys)


def grid_points(defaults: dict, params: tuple, factors) -> tuple:
    """((label, {param: default x factor}), ...) over `factors`; labels "x0.3"."""
    return tuple((factor_label(f), {p: defaults[p] * f for p in params}) for f in factors)


def factor_label(factor: float) -> str:
    return f"x{factor:g}"


def knob_points(knob, hparams: dict) -> tuple:
    """((label, {knob: value, **hparams}), ...) over a knob's values (`tuning.Knob`); labels "D=10"."""
    return tuple((f"{knob.param}={v:g}", {**hparams, knob.param: float(v)}) for v in knob.values)


def extended(factors: tuple, edge: float) -> tuple:
    """The grid `factors` (ascending) moved one step past its edge `edge` and keeping its length: the
    new point is edge^2 / its neighbour (one more step of the grid's local ratio)."""
    if edge == factors[0]:
        return (factors[0] ** 2 / factors[1],) + factors[:-1]
    return factors[1:] + (factors[-1] ** 2 / factors[-2],)


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
              tuning_seeds=None, factors=TUNING_FACTORS, quiet: bool = False, check: bool = False,
              curves=None, report_compiles: bool = False) -> Path:
    """Run (or resume) the arena; returns its folder (module docstring). Bad input, an empty arena or
    a bad grid raise ConfigError before anything compiles. report_compiles: each phase's folder gets the
    compile report of its programs (`sweep.run_experiment`)."""
    from .core import COMM_UNIT

    started, count = time.perf_counter(), CompileCount()
    dims = size_of(size, seeds, tuning_seeds)
    factors, skipped = _checked_factors(factors), []
    probs, algs = arena_problems(size, problems, skipped), arena_algorithms(algorithms)
    fits, pairs = fit_matrix(probs, algs, dims["horizon"])
    defaults = {a.label: _defaults(a) for a in algs}
    for pair in pairs:
        _check_declaration(pair, defaults[pair.algorithm.label])
    out = Path(out) if out is not None else Path("results") / "arena" / size
    print("\n".join(skipped + [fit_text(fits, pairs)]), flush=True)
    if not pairs:
        raise ConfigError("no algorithm fits any problem of the arena; see the fit matrix above")
    audits = _audits(pairs, algs, check)
    common = dict(size=size, plot=False, quiet=quiet, curves=curves, check=check, summary=False,
                  raise_errors=False, step_progress=False, report_compiles=report_compiles)
    from .sweep import run_experiment, validated_runs

    tuned = [p for p in pairs if p.tuning.exploration]
    grids = {p.name: grid_points(defaults[p.algorithm.label], p.tuning.exploration, factors) for p in tuned}

    def phase(name, first_seed, count_, build, folder):
        experiment = _experiment(name, size, dims, first_seed, count_, lambda cfg: build())
        return run_experiment(experiment, out=folder, **common)

    untuned = {p.name: {"factor": 1.0, "window": [1.0]} for p in pairs}
    validated_runs(_experiment("arena", size, dims, 0, dims["seeds"],
                               lambda cfg: _reported_curves(pairs, defaults, untuned, dims["horizon"])),
                   size, {}, None, ())  # the reported run is checked before tuning computes
    check_folder(out, "the arena's folder (--out)")
    if tuned:
        phase("arena/tuning", TUNING_FIRST_SEED, dims["tuning_seeds"],
              lambda: [_curve(p, dims["horizon"], p.name, grids[p.name]) for p in tuned], out / "tuning")
    if check:
        return out
    chosen = _choices(out / "tuning", tuned, factors) if tuned else {}
    edges = [p for p in tuned if chosen[p.name]["edge"]]
    if edges:
        phase("arena/tuning-edge", TUNING_FIRST_SEED, dims["tuning_seeds"],
              lambda: [_curve(p, dims["horizon"], p.name, grid_points(
                  defaults[p.algorithm.label], p.tuning.exploration, extended(factors, chosen[p.name]["edge"])))
                  for p in edges], out / "tuning-edge")
        chosen.update(_edge_choices(out / "tuning-edge", edges, chosen, factors))
    for p in pairs:
        chosen.setdefault(p.name, _untuned(p))
    phase("arena", 0, dims["seeds"], lambda: _reported_curves(pairs, defaults, chosen, dims["horizon"]), out)
    arena = {"size": size, "dims": dims, "factors": list(factors), "tuning_first_seed": TUNING_FIRST_SEED,
             "comm_unit": COMM_UNIT, "skipped": skipped,
             "problems": [{"label": p.label, "family": p.family, "spec": _text(p.spec),
                           "setting": list(p.setting)} for p in probs],
             "algorithms": [_algorithm_record(a, defaults[a.label]) for a in algs],
             "fits": fits, "pairs": [_pair_record(p, chosen[p.name]) for p in pairs], "audits": audits,
             "timing": _timing(out, started, count)}
    atomic_write_text(out / ARENA_FILE, json.dumps(arena, indent=1) + "\n")
    from .arena_page import write_pages

    write_pages(out, out, "")
    if not quiet:
        print(f"the arena's page: {out / 'arena.md'}")
    return out


def _reported_curves(pairs, defaults, chosen, horizon) -> list:
    """Every pair on the reported seeds: its exploration grid (the window of factors its tuning ended
    on: the default x1 and the tuned point are two of its points; the registered defaults where it
    declares no exploration) and, where it declares a knob, its operating points at the tuned point."""
    curves = []
    for p in pairs:
        pick = chosen[p.name]
        base = defaults[p.algorithm.label]
        grid = grid_points(base, p.tuning.exploration, pick["window"]) if p.tuning.exploration else None
        curves.append(_curve(p, horizon, p.name, grid, {"role": "explore"}))
        knob = pair_knob(p)
        hparams = {k: base[k] * pick["factor"] for k in p.tuning.exploration}
        if knob is not None and knob.on == "algorithm":
            curves.append(_curve(p, horizon, p.name + KNOB_TAG, knob_points(knob, hparams), {"role": "knob"}))
        elif knob is not None:  # a problem option: a curve (a program) per value
            for label, value in knob_points(knob, {}):
                point = p._replace(problem_spec=p.problem_spec.with_options(**{knob.param: int(value[knob.param])}),
                                   algorithm_spec=p.algorithm_spec.with_options(**hparams))
                curves.append(_curve(point, horizon, f"{p.name}{KNOB_TAG} [{label}]", None, {"role": "knob"}))
    return curves


def pair_knob(pair: Pair):
    """The communication knob a pair runs over (`tuning.Knob`): its algorithm's, where the knob is a
    hyper-parameter or an option its problem has; None otherwise."""
    from .problems import problem_options

    knob = pair.tuning.knob
    if knob is None or knob.on == "algorithm" or knob.param in problem_options(pair.problem_spec.name):
        return knob
    return None


def _choices(folder: Path, tuned: list, factors) -> dict:
    """{pair name: choice} of the tuning grid: `_choice` over its points' scores."""
    scores = _scores(folder)
    return {p.name: _choice(p, {f: scores[f"{p.name} [{factor_label(f)}]"] for f in factors}, factors)
            for p in tuned}


def _edge_choices(folder: Path, edges: list, chosen: dict, factors) -> dict:
    """The choices of the pairs whose grid was extended past an edge: over the union of both grids."""
    scores, out = _scores(folder), {}
    for p in edges:
        window = extended(factors, chosen[p.name]["edge"])
        every = {**{float(k): tuple(v) for k, v in chosen[p.name]["scores"].items()},
                 **{f: scores[f"{p.name} [{factor_label(f)}]"] for f in window}}
        out[p.name] = _choice(p, every, window)
        out[p.name]["edge"], out[p.name]["extended"] = 0.0, True
        out[p.name]["window"] = sorted(set(window) | {1.0})  # the reported grid keeps the defaults' point
    return out


def _choice(pair: Pair, scores: dict, window) -> dict:
    """The tuning choice of a pair from {factor: (mean final regret, failed seeds)} on the tuning seeds:
    the lowest mean among points with no failed seed; an edge of the window when it wins (`edge`, its
    factor, for the extension; 0 otherwise); "untuned" with the reason when every point failed."""
    sound = {f: s[0] for f, s in scores.items() if s[1] == 0 and math.isfinite(s[0])}
    record = {"scores": {f"{f:g}": list(s) for f, s in sorted(scores.items())}, "window": list(window),
              "exploration": list(pair.tuning.exploration), "extended": False}
    if not sound:
        return {**record, "factor": 1.0, "edge": 0.0, "status": "untuned: every grid point failed (error bits) on "
                                                                 "the tuning seeds; run at its defaults"}
    best = min(sound, key=lambda f: (sound[f], abs(math.log(f))))
    edge = best if best in (window[0], window[-1]) and best != 1.0 else 0.0
    return {**record, "factor": best, "edge": edge, "status": "tuned"}


def _untuned(pair: Pair) -> dict:
    note = pair.tuning.note or "no exploration parameter declared"
    return {"factor": 1.0, "window": [1.0], "edge": 0.0, "extended": False, "scores": {}, "exploration": [],
            "status": f"not tuned: {note}"}


def _scores(folder: Path) -> dict:
    """{stored curve: (mean final regret, seeds with error bits)} of a results folder."""
    res = load_results(folder)
    return {r["algorithm"]: (r["final_regret_mean"], int(np.count_nonzero(res.arrays[r["algorithm"]]["errors"])))
            for r in summary_rows(res)}


def _audits(pairs: list, algs: list, check: bool) -> dict:
    """{algorithm label: the information-flow audit's verdict} for every plugin (a user's algorithm), on
    the first problem it fits (`audit.audit_algorithm`); packaged algorithms are audited by the tests."""
    from .audit import audit_algorithm

    out = {}
    for a in algs:
        mine = [p for p in pairs if p.algorithm.label == a.label]
        if a.family == "user" and mine and not check:
            out[a.label] = audit_algorithm(mine[0].algorithm_spec, mine[0].problem_spec).text
    return out


def _defaults(algorithm: Entry) -> dict:
    """The algorithm's hyper-parameter defaults {name: value} as its spec builds it."""
    return dict(_probe(algorithm.spec).defaults)


def _check_declaration(pair: Pair, defaults: dict) -> None:
    from .algorithms.tuning import check_tuning

    check_tuning(pair.algorithm.label, pair.tuning, defaults)


def _algorithm_record(a: Entry, defaults: dict) -> dict:
    from .algorithms import tuning_of

    t = tuning_of(a.spec.name)
    knob = None if t.knob is None else {"param": t.knob.param, "values": [float(v) for v in t.knob.values],
                                        "on": t.knob.on}
    return {"label": a.label, "family": a.family, "exploration": list(t.exploration),
            "defaults": {k: float(defaults[k]) for k in t.exploration}, "knob": knob, "note": t.note}


def _pair_record(p: Pair, choice: dict) -> dict:
    knob = pair_knob(p)
    return {"problem": p.problem.label, "algorithm": p.algorithm.label, "adapter": p.adapter,
            "problem_spec": _text(p.problem_spec), "algorithm_spec": _text(p.algorithm_spec),
            "knob": knob is not None,
            "knob_labels": [label for label, _ in knob_points(knob, {})] if knob else [], **choice}


def _timing(out: Path, started: float, count: CompileCount) -> dict:
    """Wall-clock seconds of this call; the compile and run seconds of every stored chunk of every phase,
    whichever call computed it (a resumed arena counts its earlier calls' work, a chunk from the curve
    cache the seconds of the call that made it: `cached_seconds`, absent from records written before
    cached chunks kept them; a grid's call once); the programs this call compiled or loaded from the
    persistent compilation cache."""
    import jax

    from .sweep import CHUNKS, _slug

    compile_s = run_s = 0.0
    for folder in (out / "tuning", out / "tuning-edge", out):
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
            "compile_cache": jax.config.jax_compilation_cache_dir is not None, **count.counts(),
            "cached_seconds": True}


def _experiment(name, size, dims, first_seed, seeds, build):
    from .core import COMM_UNIT
    from .experiments.registry import Experiment

    return Experiment(name, "every regret algorithm on the benchmark problems it fits", {},
                      {size: {"seeds": seeds, "first_seed": first_seed, "horizon": dims["horizon"],
                              "vmap_size": shared_group(dims["seeds"])}}, build,
                      agents="mean", se_ddof=1,
                      notes=f"The arena (`bandits-jax arena`): regret is the mean over agents; communication in "
                            f"{COMM_UNIT}.")


def shared_group(seeds: int) -> int:
    """The vmap size of every phase (0: the runner's default): with fewer reported seeds than a CPU group
    (`runner.CPU_VMAP_SIZE`), the power of two that holds them, so that the tuning grid, its edge, the
    reported window and the knob (batches of at least that many runs where the tuning seeds are no
    fewer) all run in groups of one size and call one program per pair; with more, every batch fills
    the default groups anyway."""
    from .runner import CPU_VMAP_SIZE

    return 1 << (seeds - 1).bit_length() if seeds < CPU_VMAP_SIZE else 0


def _curve(pair: Pair, horizon: int, name: str, grid=None, tags=None) -> Curve:
    from .experiments.adhoc import with_horizon

    curve = Curve(name, pair.problem_spec, _in_setting(pair.problem.setting, pair.algorithm_spec), grid, 0,
                  {"problem": pair.problem.label, "method": pair.algorithm.label, **(tags or {})})
    return with_horizon(curve, {"horizon": horizon})


def _in_setting(setting: tuple, spec: Spec) -> Spec:
    """The algorithm spec with a family setting (((name, {option: value}), ...), `Bench.setting`) where it
    names the algorithm: the options its factory accepts that its spec leaves out."""
    from .algorithms import algorithm_options

    options = dict(setting).get(spec.name)
    if not options:
        return spec
    accepted = algorithm_options(spec.name)
    return spec.with_options(**{k: v for k, v in options.items() if k in accepted and k not in spec.options})


def _with_horizon(spec: Spec, horizon: int) -> Spec:
    from .algorithms import algorithm_options

    return spec.with_options(horizon=horizon) if "horizon" in algorithm_options(spec.name) else spec


def _is_trial(spec: Spec) -> bool:
    return isinstance(_probe(spec), Trial)


def _probe(spec: Spec):
    """The algorithm (or Trial) a spec builds, for what it declares (a horizon given where it takes one)."""
    from .algorithms import build_algorithm

    return build_algorithm(_with_horizon(spec, 2))


def _checked_factors(factors) -> tuple:
    factors = tuple(sorted(float(f) for f in factors))
    if (len(factors) < 2 or any(not np.isfinite(f) or f <= 0 for f in factors) or len(set(factors)) != len(factors)
            or 1.0 not in factors):
        raise ConfigError(f"the grid's factors must be at least two distinct positive numbers, 1 (the defaults) "
                          f"among them, got {list(factors)}")
    return factors


def _text(spec: Spec) -> str:
    opts = ",".join(f"{k}={v}" for k, v in spec.options.items())
    head = spec.name + (f":{opts}" if opts else "")
    return "+".join([head] + [n + (":" + ",".join(f"{k}={v}" for k, v in o.items()) if o else "")
                              for n, o in spec.wrappers])


def fit_text(fits: dict, pairs=()) -> str:
    """The fit matrix as text: a row per algorithm, a column per problem, "fits", the adapter it fits
    through, or "-"."""
    adapted = {(p.problem.label, p.algorithm.label): p.adapter for p in pairs}
    problems = list(fits)
    algorithms = list(next(iter(fits.values()))) if fits else []
    width = max([len(a) for a in algorithms] + [9])
    cell = max([len(p) for p in problems] + [len(a) for a in adapted.values()] + [4])
    lines = ["fit matrix (traced misfit check; a name: the adapter it fits through):",
             " " * width + "  " + "  ".join(f"{p:>{cell}s}" for p in problems)]
    for a in algorithms:
        lines.append(f"{a:{width}s}  " + "  ".join(
            f"{(adapted.get((p, a)) or 'fits') if not fits[p][a] else '-':>{cell}s}" for p in problems))
    n = sum(not r for row in fits.values() for r in row.values())
    return "\n".join(lines + [f"{n} of {len(problems) * len(algorithms)} pairs fit"])


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
    stray = [p for p in arena["pairs"] if p["problem"] not in problems or p["algorithm"] not in algorithms]
    if stray:
        raise ConfigError(f"{path}: its pairs name {stray[0]['algorithm']} on {stray[0]['problem']}, which its "
                          f"problems and algorithms do not hold; {REPAIR}")


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


def _is_algorithm(v) -> bool:
    knob = v.get("knob") if isinstance(v, dict) else None
    return (_is_entry(v) and list_of(is_text)(v.get("exploration")) and object_of(is_finite)(v.get("defaults"))
            and (knob is None or (isinstance(knob, dict) and list_of(is_finite)(knob.get("values"))
                                  and is_text(knob.get("param")))))


def _is_problem(v) -> bool:
    setting = v.get("setting", []) if isinstance(v, dict) else None
    return (_is_entry(v, ("label", "family", "spec")) and isinstance(setting, list)
            and all(isinstance(s, list) and len(s) == 2 and is_text(s[0]) and isinstance(s[1], dict) for s in setting))


def _is_dims(v) -> bool:
    return isinstance(v, dict) and all(_is_positive_int(v.get(k)) for k in ("seeds", "tuning_seeds", "horizon"))


def _is_pair(v) -> bool:
    return (isinstance(v, dict) and all(is_text(v.get(k)) for k in ("problem", "algorithm", "adapter", "status"))
            and is_finite(v.get("factor")) and v["factor"] > 0 and isinstance(v.get("knob"), bool)
            and list_of(lambda f: is_finite(f) and f > 0)(v.get("window")) and v["window"] != []
            and object_of(list_of(is_finite))(v.get("scores")) and list_of(is_text)(v.get("knob_labels"))
            and list_of(is_text)(v.get("exploration")))


def _is_timing(v) -> bool:
    seconds = ("wall_seconds", "compile_seconds", "run_seconds")
    return (isinstance(v, dict) and all(_is_seconds(v.get(k)) for k in seconds)
            and all(is_int(v.get(k)) and v[k] >= 0 for k in ("compiled", "loaded"))
            and isinstance(v.get("compile_cache"), bool) and isinstance(v.get("cached_seconds", False), bool))


def _non_empty(test):
    return lambda v: test(v) and v != []


_ARENA = {  # key: (test, what its value must be), for what the page and its figures read
    "size": (lambda v: is_text(v) and re.fullmatch(r"[\w.-]+", v) is not None,
             "a size's name (letters, digits, . _ -)"),
    "dims": (_is_dims, "an object with positive integers seeds, tuning_seeds and horizon"),
    "factors": (_non_empty(list_of(lambda f: is_finite(f) and f > 0)), "a non-empty list of positive numbers"),
    "tuning_first_seed": (lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    "problems": (_non_empty(list_of(_is_problem)),
                 'a non-empty list of {"label", "family", "spec"} (strings) with a "setting" [[NAME, {...}], ...]'),
    "algorithms": (_non_empty(list_of(_is_algorithm)),
                   'a non-empty list of {"label", "family", "exploration" [names], "defaults" {name: number}, '
                   '"knob" null or {"param", "values"}}'),
    "fits": (object_of(object_of(is_text)), "an object of each problem's fits ({algorithm: why not, or \"\"})"),
    "pairs": (_non_empty(list_of(_is_pair)),
              'a non-empty list of the pairs that run ({"problem", "algorithm", "adapter", "status", "factor" > 0, '
              '"knob" (true or false), "window" [factors], "scores" {factor: [mean, failed]}})'),
    "comm_unit": (is_text, "the unit of communication (a string)"),
    "skipped": (list_of(is_text), "a list of lines (the problems left out)"),
    "audits": (object_of(is_text), "an object of each audited algorithm's verdict"),
    "timing": (_is_timing, "an object of non-negative seconds (wall, compile, run), counts compiled and loaded, and "
                           "compile_cache (true or false), and optionally cached_seconds (true or false)"),
}
