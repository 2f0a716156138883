"""Curves as data: what an experiment is made of, and how the registries turn it into runs.

A `Curve` is one line of a figure: a display name, a problem `Spec` and an algorithm `Spec`
(registered names with options, wrappers included), an optional hyper-parameter grid, a key stream
and tags (`{"N": 5}`, `{"D": 0.01}`, `{"Delta": 0.3}`, ...). Nothing in it is a built object, so a
curve can be printed, written to TOML and read back; `resolve` builds it through the registries
(`problems.make_problem`, `algorithms.make_algorithm` and their wrappers). Tags are what tables and
plots group by (a swept problem parameter is an x-axis); names are for people only and play no part
in a curve's identity (`identity.run_identity`).

    Curve("FN-UCB (N=5)", Spec("cosine", {"num_agents": 5}), Spec("fn_ucb", {"lam": 0.1}),
          stream=100005, tags={"method": "FN-UCB", "N": 5})

`parse_spec("kernel_ucb:beta=0.5,lengthscale=2")` reads the command line's form of a spec (wrappers
after a `+`: "n_kernel_ucb+capped_history:rows=32").
"""
from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from typing import NamedTuple, Optional

import jax
import numpy as np

from .core import Arms, ConfigError, Trial, check_stream, keep_last, named_cause, repeated


class Spec(NamedTuple):
    """A registered name with keyword options, and wrappers applied in order ((name, options), ...)."""

    name: str
    options: dict = {}
    wrappers: tuple = ()

    def with_options(self, **options) -> "Spec":
        return self._replace(options={**self.options, **options})


@dataclasses.dataclass(frozen=True)
class Curve:
    """One curve of an experiment (module docstring). grid: None or ((label, {hyper-parameter:
    value}), ...), every point run in one compiled call and stored as "<name> [<label>]"."""

    name: str
    problem: Spec
    algorithm: Spec
    grid: Optional[tuple] = None
    stream: int = 0
    tags: dict = dataclasses.field(default_factory=dict)

    def point_names(self) -> list:
        """The stored names of this curve: itself, or one per grid point."""
        return [self.name] if self.grid is None else grid_names(self.name, self.grid)

    def point_tags(self) -> dict:
        """{stored name: tags}; a grid point adds its hyper-parameters to the curve's tags."""
        if self.grid is None:
            return {self.name: dict(self.tags)}
        return {n: {**self.tags, **hp} for n, (_, hp) in zip(self.point_names(), self.grid)}

    def as_dict(self) -> dict:
        """Plain data (for metadata.json and TOML)."""
        out = {"name": self.name, "problem": spec_dict(self.problem), "algorithm": spec_dict(self.algorithm)}
        if self.grid is not None:
            out["grid"] = [{"label": label, **hp} for label, hp in self.grid]
        if self.stream:
            out["stream"] = self.stream
        if self.tags:
            out["tags"] = dict(self.tags)
        return out


class Run(NamedTuple):
    """A resolved curve: its built problem (or Arms world) and algorithm (or Trial), the algorithm
    carrying the curve's name and stream."""

    curve: Curve
    problem: object
    algorithm: object


def resolve(curves, trace: bool = True) -> list:
    """[Run] of `curves`, each problem and algorithm built once per distinct spec. A pair that does not
    fit raises ConfigError naming both, before anything compiles (`check_fit`): a phase-level trial on
    a regret problem or arrivals the algorithm cannot work with always, an algorithm whose start or
    step fails to trace on the problem's shapes with `trace` (the sweep passes False: it traces every
    start and step for the curves' identities anyway)."""
    runs = []
    names = [n for c in curves for n in c.point_names()]
    duplicated = repeated(names)
    if duplicated:
        raise ConfigError(f"curve names must be unique; repeated: {', '.join(duplicated)}")
    algorithms = [algorithm_of(c.algorithm) for c in curves]  # every algorithm's options are checked first
    for curve, built in zip(curves, algorithms):
        algorithm = built._replace(name=curve.name, stream=curve.stream)
        run = Run(curve, problem_of(curve.problem), algorithm)
        check_fit(run, trace)
        runs.append(run)
    return runs


_BUILT: dict = {}  # spec key -> built problem, the most recent few
_BUILT_KEEP = 16


def problem_of(spec: Spec):
    """The problem (or Arms world) of a spec, built once per process for the last few specs asked (an
    experiment's build may read a problem's sizes, and its resolution then reuses the same object,
    with the data it read)."""
    from .problems import build_problem

    key = spec_key(spec)
    if key not in _BUILT:
        problem = build_problem(spec)
        while len(_BUILT) >= _BUILT_KEEP:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = problem
    return _BUILT[key]


_ALGORITHMS: "OrderedDict[tuple, tuple]" = OrderedDict()  # (spec key, float dtype) -> (algorithm, its builders)
_ALGORITHMS_KEEP = 256


def algorithm_of(spec: Spec):
    """The algorithm (or Trial) of a spec, built once per process and precision for the last
    _ALGORITHMS_KEEP specs asked, while the functions registered to build it stay the same (a factory
    registered or reloaded anew builds anew). One object per spec is what lets every curve of it, in
    every phase of an arena, find its compiled programs again without tracing them
    (`runner.program_makers`)."""
    from .algorithms import build_algorithm, builders_of

    key = spec_key(spec), str(jax.dtypes.canonicalize_dtype(np.float64))  # arrays it builds take the precision
    builders = builders_of(spec)
    kept = _ALGORITHMS.get(key)
    if kept is None or any(a is not b for a, b in zip(kept[1], builders)):  # the key fixes their count
        kept = (build_algorithm(spec), builders)
    return keep_last(_ALGORITHMS, key, kept, _ALGORITHMS_KEEP)[0]


def grid_names(name: str, grid) -> list:
    """The stored names of a curve run over grid points ((label, hparams), ...): "<name> [<label>]"."""
    return [f"{name} [{label}]" for label, _ in grid]


def check_fit(run: Run, trace: bool = True) -> None:
    """Refuse (ConfigError, one line) an algorithm that cannot run on its problem, before anything
    compiles or is written: a Trial needs an Arms world and a regret algorithm a Problem; a regret
    algorithm that declares the arrivals it needs (`Algorithm.one_active`) needs a problem that has
    them (`check_arrivals`); and, with `trace`, its start and one step are traced on the problem's
    shapes (`trace_fit`), so that any failure there is a misfit rather than a traceback. The sweep
    passes trace=False: it traces every start and step for the curves' identities anyway."""
    problem, algorithm = run.problem, run.algorithm
    trial = isinstance(algorithm, Trial)
    if trial != isinstance(problem, Arms):
        raise misfit(run, f"it needs {'a phase-level world (Arms)' if trial else 'a regret problem'}")
    if not trial:
        check_arrivals(run)
    if trace:
        trace_fit(run)


ARRIVALS = {  # a problem's arrivals (`arrivals_of`) in words
    True: "exactly one active agent a step",
    False: "every agent acting at every step",
    None: "its own arrival rule, with several agents acting at some steps",
}
WHERE = {  # where an algorithm that needs those arrivals (`Algorithm.one_active`) finds them
    True: "a problem that declares one arrival a step (the async-* ones, movielens, yelp and their stand-ins) or "
          "any problem through the one_arrival wrapper (e.g. --problem cosine:num_agents=4+one_arrival), or run the "
          "algorithm through the serial_arrivals wrapper, which serves several arrivals a step in agent order "
          "(e.g. --algorithm dis_kernel_ucb+serial_arrivals)",
    False: "a problem without arrivals (e.g. cosine, coop-linear, duets-h1)",
}


def arrivals_of(problem) -> Optional[bool]:
    """A problem's arrivals in the terms of `Algorithm.one_active`: True where it declares one active
    agent a step (`EnvSpec.one_active`), False where every agent acts at every step (no `active`),
    None for an arrival rule of its own that may make several agents act at once."""
    if problem.spec.one_active:
        return True
    return False if problem.active is None else None


def check_arrivals(run: Run) -> None:
    """Refuse a regret algorithm whose declared arrivals (`Algorithm.one_active`: True, one active agent a
    step; False, every agent every step; None, any) its problem does not have (`arrivals_of`). Such a
    pair would otherwise compute to the end and only then report error bits. A one-arrival algorithm
    through the serial_arrivals wrapper declares None: it serves any arrivals one at a time."""
    need = getattr(run.algorithm, "one_active", None)
    if need is None:
        return
    have = arrivals_of(run.problem)
    if have is bool(need):
        return
    raise misfit(run, f"it needs {ARRIVALS[bool(need)]}, and {run.curve.problem.name} has {ARRIVALS[have]}; "
                      f"run it on {WHERE[bool(need)]}")


def trace_fit(run: Run, precision: str = "float64") -> None:
    """Trace the run on its problem's real shapes without compiling or computing (the jaxprs of
    `identity.programs_digest`, which a sweep's identities then find again without tracing): a regret
    algorithm's start (the problem's draw and `init`) and one step (`select`, the rewards and
    `update`), a Trial's whole trial. Tracing the step checks its outputs against the step contract
    (`runner.check_actions`, `runner.check_update`: integer actions of shape [N], a state that keeps
    its tree structure, shapes and dtypes, a Report of scalars), as every trace of the runner's step
    does (the sweep's too). Any exception raised there, whatever its type (a ConfigError of
    `init`, a shape error, a missing key of the public part, one of jax's own), is the ConfigError of
    `misfit` with the first line of what went wrong; the original stays chained as its cause."""
    from .identity import programs_digest

    problem, algorithm = run.problem, run.algorithm
    check_stream(algorithm.name, algorithm.stream)  # a bad stream is the algorithm's error, not a misfit
    try:
        programs_digest(problem, algorithm, tuple(sorted(algorithm.params)), 0, precision)
    except Exception as err:  # noqa: BLE001 - any failure of a trace means the pair cannot run
        raise misfit(run, failure(err)) from err


def failure(err: BaseException) -> str:
    """Why a traced start or step failed, on one line: a ConfigError's own message, else the exception's
    type and the first line of its message (cut at 300 characters), with where to look instead."""
    if isinstance(err, ConfigError):
        return str(err)
    return (f"its start or step fails on that problem ({named_cause(err)}); "
            f"run it on a problem of its own family (`bandits-jax list --problems`)")


def misfit(run: Run, why: str) -> ConfigError:
    """The one-line error of an algorithm that does not fit its problem, and why."""
    why = " ".join(str(why).split())  # one line, whatever the cause's message holds
    return ConfigError(f"{run.curve.algorithm.name} does not fit {run.curve.problem.name}: {why}")


def spec_dict(spec: Spec) -> dict:
    out = {"name": spec.name, **({"options": dict(spec.options)} if spec.options else {})}
    if spec.wrappers:
        out["wrappers"] = [{"name": n, **dict(o)} for n, o in spec.wrappers]
    return out


def spec_from_dict(data: dict, what: str) -> Spec:
    """The Spec of `spec_dict`'s form ({"name", "options", "wrappers"}); ConfigError on another shape."""
    if isinstance(data, str):
        return Spec(data)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ConfigError(f"{what} must be a table with a string 'name', got {data!r}")
    unknown = set(data) - {"name", "options", "wrappers"}
    if unknown:
        raise ConfigError(f"{what} {data['name']}: unknown field(s) {', '.join(sorted(unknown))}")
    raw = data.get("wrappers", ())
    if not isinstance(data.get("options", {}), dict) or not isinstance(raw, (list, tuple)) or not all(
            isinstance(w, dict) and isinstance(w.get("name"), str) for w in raw):
        raise ConfigError(f"{what} {data['name']}: options must be a table and wrappers a list of tables with a "
                          f"string 'name'")
    wrappers = tuple((w["name"], {k: v for k, v in w.items() if k != "name"}) for w in raw)
    return Spec(data["name"], dict(data.get("options", {})), wrappers)


def curve_from_dict(data: dict) -> Curve:
    """The Curve of `Curve.as_dict`'s form."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"].strip():
        raise ConfigError(f"a curve must be a table with a 'name' that is a non-empty string, got {data!r}")
    unknown = set(data) - {"name", "problem", "algorithm", "grid", "stream", "tags"}
    if unknown:
        raise ConfigError(f"curve {data['name']}: unknown field(s) {', '.join(sorted(unknown))}")
    grid, name = data.get("grid"), data["name"]
    if grid is not None:
        if not isinstance(grid, list) or not all(isinstance(p, dict) and isinstance(p.get("label"), str) for p in grid):
            raise ConfigError(f"curve {name}: grid must be a list of tables, each with a string 'label', got {grid!r}")
        grid = tuple((p["label"], {k: v for k, v in p.items() if k != "label"}) for p in grid)
    stream = data.get("stream", 0)
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise ConfigError(f"curve {name}: stream must be an integer in [0, 2^32), got {stream!r}")
    tags = data.get("tags", {})
    if not isinstance(tags, dict):
        raise ConfigError(f"curve {name}: tags must be a table, got {tags!r}")
    return Curve(name, spec_from_dict(data.get("problem"), "problem"),
                 spec_from_dict(data.get("algorithm"), "algorithm"), grid, stream, dict(tags))


def spec_key(spec: Spec) -> str:
    """A string that identifies a spec (its name, options and wrappers)."""
    return json.dumps(spec_dict(spec), sort_keys=True, default=repr)


def parse_spec(text: str, what: str = "spec") -> Spec:
    """`NAME` or `NAME:KEY=VALUE,KEY=VALUE` (the command line's form) as a Spec, each wrapper after a
    `+` in the same form (`n_kernel_ucb+capped_history:rows=32`); values are read as int, float,
    true/false, none, or else kept as strings. ConfigError (one line) when malformed."""
    head, *wrappers = str(text).split("+")
    spec = _parse_one(head, text, what)
    return spec._replace(wrappers=tuple((w.name, w.options) for w in (_parse_one(w, text, what) for w in wrappers)))


def _parse_one(part: str, text: str, what: str) -> Spec:
    name, colon, rest = part.partition(":")
    name = name.strip()
    if not name or any(c in name for c in "=, "):
        raise ConfigError(f"malformed {what} {text!r}: write NAME or NAME:KEY=VALUE,KEY=VALUE")
    options = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"malformed {what} {text!r}: {item!r} is not KEY=VALUE")
        options[key.strip()] = parse_scalar(value.strip())
    if colon and not options:
        raise ConfigError(f"malformed {what} {text!r}: nothing after ':'")
    return Spec(name, options)


def parse_scalar(text: str):
    """int, float, bool or None where the text reads as one, else the text itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
