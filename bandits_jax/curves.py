"""Curves as data: what an experiment is made of, and how the registries turn it into runs.

A `Curve` is one line of a figure: a display name, a problem `Spec` and an algorithm `Spec`
(registered names with options, wrappers included), an optional hyper-parameter grid, a key stream
and tags (`{"N": 5}`, `{"D": 0.01}`, `{"Delta": 0.3}`, ...). Nothing in it is a built object, so a
curve can be printed, written to TOML and read back; `resolve` builds it through the registries
(`problems.make_problem`, `algorithms.make_algorithm` and their wrappers). Tags are what tables and
plots group by (a swept problem parameter is an x-axis); names are for people only and play no part
in a curve's identity (`runner.run_identity`).

    Curve("FN-UCB (N=5)", Spec("cosine", {"num_agents": 5}), Spec("fn_ucb", {"lam": 0.1}),
          stream=100005, tags={"method": "FN-UCB", "N": 5})

`parse_spec("kernel_ucb:beta=0.5,lengthscale=2")` reads the command line's form of a spec (wrappers
after a `+`: "n_kernel_ucb+capped_history:rows=32").
"""
from __future__ import annotations

import dataclasses
import json
from typing import NamedTuple, Optional

import numpy as np

from .core import Arms, ConfigError, Problem, Trial


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
    a regret problem always, an algorithm whose `init` refuses the problem's public part with `trace`
    (the sweep passes False: it traces every start and step for the curves' identities anyway)."""
    from .algorithms import build_algorithm

    algorithms, runs = {}, []
    names = [n for c in curves for n in c.point_names()]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError(f"curve names must be unique; repeated: {', '.join(duplicated)}")
    for curve in curves:
        akey = spec_key(curve.algorithm)
        if akey not in algorithms:
            algorithms[akey] = build_algorithm(curve.algorithm)
        algorithm = algorithms[akey]._replace(name=curve.name, stream=curve.stream)
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


def grid_names(name: str, grid) -> list:
    """The stored names of a curve run over grid points ((label, hparams), ...): "<name> [<label>]"."""
    return [f"{name} [{label}]" for label, _ in grid]


def check_fit(run: Run, trace: bool = True) -> None:
    """Refuse (ConfigError) an algorithm that cannot run on its problem: a Trial needs an Arms world, a
    regret algorithm a Problem, and, with `trace`, tracing its start (no compilation) lets `init`
    refuse the problem's public part (e.g. a candidate-set algorithm on a problem without candidates)."""
    import jax

    from .runner import horizon_sizes, precision_scope, run_start

    problem, algorithm = run.problem, run.algorithm
    trial = isinstance(algorithm, Trial)
    if trial != isinstance(problem, Arms):
        raise misfit(run, f"it needs {'a phase-level world (Arms)' if trial else 'a regret problem'}")
    if trial or not trace:
        return
    with precision_scope("float64"):
        start = run_start(problem, algorithm, 0, horizon_sizes(algorithm, problem.spec))
        try:
            jax.eval_shape(start, np.uint32(0), {name: 0.5 for name in algorithm.params})
        except ConfigError as err:
            raise misfit(run, str(err)) from None


def misfit(run: Run, why: str) -> ConfigError:
    """The one-line error of an algorithm that does not fit its problem, and why."""
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
    wrappers = tuple((w["name"], {k: v for k, v in w.items() if k != "name"}) for w in data.get("wrappers", ()))
    return Spec(data["name"], dict(data.get("options", {})), wrappers)


def curve_from_dict(data: dict) -> Curve:
    """The Curve of `Curve.as_dict`'s form."""
    if not isinstance(data, dict) or "name" not in data:
        raise ConfigError(f"a curve must be a table with a 'name', got {data!r}")
    unknown = set(data) - {"name", "problem", "algorithm", "grid", "stream", "tags"}
    if unknown:
        raise ConfigError(f"curve {data['name']}: unknown field(s) {', '.join(sorted(unknown))}")
    grid = data.get("grid")
    if grid is not None:
        grid = tuple((p["label"], {k: v for k, v in p.items() if k != "label"}) for p in grid)
    return Curve(data["name"], spec_from_dict(data.get("problem"), "problem"),
                 spec_from_dict(data.get("algorithm"), "algorithm"), grid, int(data.get("stream", 0)),
                 dict(data.get("tags", {})))


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
