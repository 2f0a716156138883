"""The contracts every part of the simulator speaks: a problem (`Problem`, `EnvSpec`), an algorithm
(`Algorithm` of pure `init`, `select`, `update`), one step (`Step`, `Report`) and a phase-level trial
(`Trial` on an `Arms` world), with the checks they share (hyper-parameters, options, sizes).

What each function receives and returns, with shapes, and the rules a step keeps are written once, in
docs/design.md ("The contracts"); each class's docstring gives its fields.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import operator
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from .kernels.draws import flat_normal, flat_uniform  # noqa: F401  (the problems and algorithms draw with them)

Array = jax.Array
PyTree = Any


class ConfigError(ValueError):
    """Bad user input (shape, name, value). Raised before anything is compiled.

    The message is one line that says what is wrong and how to fix it; the CLI prints it and
    exits with status 2.
    """


class EnvSpec(NamedTuple):
    """Static sizes of a multi-agent contextual bandit run, and its protocol.

    num_agents: N, agents (inactive ones are masked by `Step.active`).
    num_arms:   K, contexts offered to each agent per step.
    dim:        d, context dimension.
    horizon:    T, number of global steps.
    one_active: exactly one agent acts at each step (the asynchronous protocol); algorithms may
                then work on that agent alone.
    """

    num_agents: int
    num_arms: int
    dim: int
    horizon: int
    one_active: bool = False


class Problem(NamedTuple):
    """A bandit environment, as pure functions of an instance pytree.

    init(key) -> instance:                 the per-seed draw (hidden vector, data shuffles, ...).
    contexts(instance, t, key) -> [N, K, d]
    mean_reward(instance, t, contexts) -> [N, K]   the noiseless means; regret is measured on them.
    sample_rewards(instance, means, key) -> [N, K]  a noisy reward for every arm (CRN).
    active(instance, t, key) -> [N] bool     which agents act at step t (None: all of them).
    public(instance) -> pytree               what agents may know of the instance (None: nothing).
    description: one line, shown in outputs (e.g. "synthetic stand-in for MovieLens").
    info: {name: number or string}, structural numbers of the instance family (a graph's diameter, a
          candidate set's size), copied into metadata.json and the summary. "stand_in" (a line) marks a
          data set that stands in for the one an experiment names; plots add it to their title.
    """

    name: str
    spec: EnvSpec
    init: Callable[[Array], PyTree]
    contexts: Callable[[PyTree, Array, Array], Array]
    mean_reward: Callable[[PyTree, Array, Array], Array]
    sample_rewards: Callable[[PyTree, Array, Array], Array]
    active: Optional[Callable[[PyTree, Array, Array], Array]] = None
    description: str = ""
    public: Optional[Callable[[PyTree], PyTree]] = None
    info: dict = {}

    @property
    def num_agents(self) -> int:
        """N, as an `Arms` world names it too."""
        return self.spec.num_agents


@dataclasses.dataclass(frozen=True)
class Step:
    """One global step as an algorithm sees it.

    t:          int32 scalar time index, unbatched under the runner's vmap.
    contexts:   [N, K, d] the arms offered to each agent.
    active:     [N] bool, which agents act (their regret counts; the others' actions are unused).
    one_active: static; True when the problem declares one active agent per step.
    """

    t: Array
    contexts: Array
    active: Array
    one_active: bool = False


jax.tree_util.register_dataclass(Step, data_fields=["t", "contexts", "active"], meta_fields=["one_active"])


# The one unit of every Report's communication (docs/design.md, "The unit of communication"): every copy of
# a scalar that reaches an agent or the server counts once, so an upload counts once, a broadcast of s scalars
# to N agents N s, and a relayed or peer-to-peer message once per receiver.
COMM_UNIT = "scalars per receiver"


class Report(NamedTuple):
    """What `update` tells the runner about one step (scalars of one run).

    comm_up, comm_down: communication in `COMM_UNIT`: comm_up the scalars that reach the server (or, in a
                 protocol without one, the peers), comm_down those that reach the agents from the server.
                 A paper that counts in its own unit keeps that count as a diagnostic (e.g. comm_paper).
    rounds:      1 where a communication round took place.
    errors:      int32 bits of `Algorithm.errors` (0: nothing wrong); the runner ORs them over time.
    diagnostics: {name: scalar} recorded per step (a dictionary size, a trigger value, ...).

    Every field is a scalar (shape ()), checked when the step is traced (`runner.check_update`).
    Communication is never negative nor NaN nor infinite, and every active agent's action lies in
    [0, K): a step that breaks either carries the runner's own error bit (`runner.RUNNER_ERRORS`, bits
    27 to 29; an algorithm declares its own `errors` on other bits).
    """

    comm_up: Array
    comm_down: Array
    rounds: Array
    errors: Array
    diagnostics: dict


def report(dtype, comm_up=0.0, comm_down=0.0, rounds=0.0, errors=0, **diagnostics) -> Report:
    """A `Report` with the communication cast to `dtype` (zeros by default)."""
    cast = lambda v: jnp.asarray(v).astype(dtype)  # noqa: E731
    return Report(cast(comm_up), cast(comm_down), cast(rounds), jnp.asarray(errors).astype(jnp.int32),
                  dict(diagnostics))


class Param(NamedTuple):
    """A float hyper-parameter: its default and the range it must lie in: "positive" (> 0),
    "nonnegative" (>= 0), "probability" (a confidence level, in the open interval (0, 1)), "trigger"
    (a synchronisation threshold >= 0, where +inf means never) or "" (any finite number). No other
    hyper-parameter may be infinite, and none NaN."""

    default: float
    sign: str = ""


class Sizes(NamedTuple):
    """Static buffer sizes handed to `init` and `Sizing.resize`: rows of the time-grown buffers
    (None when the algorithm has none) and rows of the demand-sized ones (None likewise)."""

    rows: Optional[int] = None
    demand_rows: Optional[int] = None


class Sizing(NamedTuple):
    """How an algorithm's buffers are sized (module docstring).

    rows(spec, t_end) -> int: rows of the time-grown buffers that steps [0, t_end) need.
    resize(params, state, sizes) -> state: pad one run's state to larger Sizes, changing no number
        (params: that run's hyper-parameters {name: scalar}, for a pad that depends on one, such as
        the I / lam block of a ridge inverse; so no state keeps a copy of a hyper-parameter).
    demand(state) -> int32: rows in use of the demand-sized buffers (None: there are none).
    demand_limit: the most rows the demand-sized buffers may get.
    overflow: the error bit that means a demand-sized buffer was outgrown.
    """

    rows: Callable[[EnvSpec, int], int]
    resize: Callable[[dict, PyTree, Sizes], PyTree]
    demand: Optional[Callable[[PyTree], Array]] = None
    demand_limit: int = 0
    overflow: int = 0


class Table(NamedTuple):
    """A per-round table that an algorithm declares for its summaries: one row per step at which a
    communication round took place (in any run), one column per diagnostic it reports, each the mean
    over seeds. columns: {diagnostic name: column header}."""

    title: str
    columns: dict


class Algorithm(NamedTuple):
    """A (multi-agent) bandit algorithm as pure functions; see the module docstring.

    params: {name: Param}, the float hyper-parameters with this algorithm's defaults.
    sizing: None for fixed-size state.
    errors: {bit: message} of the error bits its reports may carry.
    stream: which of a seed's algorithm keys the runner hands this algorithm (an int in
            [0, 2^32); `keys.stream_key`). 0, the default, is the one key every algorithm had
            before streams existed. Two curves of one figure that should draw their own
            initialisation and sampling (FN-UCB with N = 1 and N = 5) get different streams; two
            that should share them (one method at two thresholds) keep the same one.
    tables: the `Table`s its summaries show (e.g. DUETS's per-epoch diagnostics).
    cpu_vmap: runs under one vmap on a CPU where the runner's default is slower for this algorithm
            (None: the default, `runner.CPU_VMAP_SIZE`). 1 suits a step whose cost is per-run LAPACK
            factorisations or conditionals that a vmap runs in lock step: batching gains nothing
            there, and a chunk's operands leave the caches. A caller's vmap_size wins.
    one_active: the arrivals it needs, checked against the problem's `EnvSpec.one_active` before
            anything computes (`curves.check_fit`). None: any; True: exactly one active agent a step
            (a protocol built on the active agent alone, which reports an error where several act);
            False: every agent at every step.
    """

    name: str
    params: dict
    init: Callable[..., PyTree]
    select: Callable[..., tuple]
    update: Callable[..., tuple]
    sizing: Optional[Sizing] = None
    errors: dict = {}
    description: str = ""
    stream: int = 0
    tables: tuple = ()
    cpu_vmap: Optional[int] = None
    one_active: Optional[bool] = None

    @property
    def defaults(self) -> dict:
        """{name: default value} of the float hyper-parameters."""
        return {name: p.default for name, p in self.params.items()}

    def with_defaults(self, **values) -> "Algorithm":
        """This algorithm with other default hyper-parameters, checked as the factory checks them."""
        return self._replace(params=declare_params(self.name, self.params, values))


class Arms(NamedTuple):
    """The world of a phase-level experiment: N agents, each with K fixed arms.

    init(key) -> instance:   the per-seed draw (arm means, features, ...).
    pull(instance, counts[N, K] int, key) -> [N, K]: for every arm, the SUM of `counts` independent
                             noisy rewards (0 where the count is 0). One call serves any allocation,
                             so an algorithm that pulls arms in rounds calls it once a round.
    answer(instance) -> [N] int32: each agent's correct answer (its best arm); the runner's, never
                             the trial's, to read.
    public(instance) -> pytree: what a trial may know (arm features, task structure; never the means);
                             None: nothing.
    info: as `Problem.info`.
    """

    name: str
    num_agents: int
    num_arms: int
    init: Callable[[Array], PyTree]
    pull: Callable[[PyTree, Array, Array], Array]
    answer: Callable[[PyTree], Array]
    description: str = ""
    public: Optional[Callable[[PyTree], PyTree]] = None
    info: dict = {}


class Outcome(NamedTuple):
    """How a trial's output is reported. kind "rate": 0/1 per trial, shown as a proportion with its
    Wilson 95% interval; kind "mean": any number, shown as a mean with mean +- 1.96 SE."""

    kind: str
    description: str = ""


class Trial(NamedTuple):
    """A phase-level algorithm: `run(key, params, arms, public, pull) -> {name: scalar}` is one whole
    trial on the `Arms` world `arms` (static), knowing `public` (`Arms.public` of the instance) and
    drawing rewards with `pull(counts[N, K], key) -> [N, K]` sums. It returns its agents' answers [N]
    under "answer" (judged by the runner into the outcome "correct") beside its other outcomes.

    params:   {name: Param}, as for `Algorithm` (traced, so a grid is a vmap).
    outcomes: {name: Outcome}, one per output of `run` besides "errors".
    errors:   {bit: message}; `run` returns its int32 error bits under "errors".
    stream:   as for `Algorithm`: which of the seed's algorithm keys `run` gets (0: the default one).
    """

    name: str
    params: dict
    run: Callable[..., dict]
    outcomes: dict
    errors: dict = {}
    description: str = ""
    stream: int = 0

    defaults = Algorithm.defaults
    with_defaults = Algorithm.with_defaults


def declare_params(algorithm_name: str, declared: dict, given: dict) -> dict:
    """{name: Param} with the `given` values as defaults, each checked against its declaration.

    declared: {name: Param} of the algorithm; given: {name: number}. Unknown names, non-numbers and
    wrong signs raise ConfigError (before anything compiles).
    """
    out = dict(declared)
    for name, value in given.items():
        out[name] = declared_param(algorithm_name, declared, name)._replace(
            default=check_param(algorithm_name, declared, name, value))
    return out


def declared_param(algorithm_name: str, declared: dict, name: str) -> Param:
    """The declaration of `name`, or a ConfigError that lists the known names."""
    if name not in declared:
        raise ConfigError(f"{algorithm_name}: unknown hyper-parameter {name}; "
                          f"known: {', '.join(sorted(declared)) or 'none'}")
    return declared[name]


SIGNS = {"positive": ("> 0", lambda v: v > 0), "nonnegative": (">= 0", lambda v: v >= 0),
         "probability": ("in (0, 1)", lambda v: 0 < v < 1), "": ("finite", lambda v: True),
         "trigger": (">= 0 (inf: never)", lambda v: v >= 0)}
UNBOUNDED_SIGNS = ("trigger",)  # the signs that admit +inf


def check_param(algorithm_name: str, declared: dict, name: str, value) -> float:
    """`value` as a float, refused when it is not a finite number or lies outside its declared range
    (`Param`)."""
    sign = declared_param(algorithm_name, declared, name).sign
    allowed, holds = SIGNS[sign]
    number = as_real(value)
    finite = number is not None and (math.isfinite(number) or (number == math.inf and sign in UNBOUNDED_SIGNS))
    if not finite or not holds(number):
        raise ConfigError(f"{algorithm_name}: hyper-parameter {name} must be a finite number"
                          f"{' ' + allowed if sign else ''}, got {value!r}")
    return number


def as_real(value) -> Optional[float]:
    """`value` as a float where it is a real number (an int, a float, a NumPy or JAX scalar), else None
    (strings and booleans are not numbers here)."""
    if isinstance(value, (bool, str)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def checked_options(what: str, function, options: dict, skip: int = 0, finite: bool = True) -> dict:
    """`options` of a factory, builder or wrapper `function` (less its first `skip` parameters), refused
    (ConfigError, one line) where `function` has no parameter of that name, where a parameter without
    a default is not given, or where a value does not have its default's type: an integer option takes
    an integer, a float option a finite number, a flag True or False, a text option anything but a
    number (a name, or the object it names) (an option whose default is None takes anything; the
    function checks it). Ranges are the function's to check. finite=False lets a float option be
    +-inf (an algorithm's float options are its hyper-parameters, whose declared signs say where inf
    means something: `Param`)."""
    params = list(inspect.signature(function).parameters.values())[skip:]
    named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if len(named) == len(params):
        unknown = sorted(set(options) - {p.name for p in named})
        if unknown:
            raise ConfigError(f"{what}: unknown option(s) {', '.join(unknown)}; "
                              f"known: {', '.join(p.name for p in named) or 'none'}")
    missing = [p.name for p in named if p.default is p.empty and p.name not in options]
    if missing:
        raise ConfigError(f"{what}: option(s) {', '.join(missing)} must be given (e.g. {missing[0]}=...)")
    for p in named:
        if p.name in options and p.default is not p.empty:
            check_option_type(what, p.name, options[p.name], p.default, finite)
    return options


def check_option_type(what: str, name: str, value, default, finite: bool = True) -> None:
    """Refuse (ConfigError) a static option whose value does not have the type of its default
    (`checked_options`)."""
    if default is None or isinstance(default, (tuple, list, dict)) or callable(default):
        return
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "True or False"
    elif isinstance(default, int):
        ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        number = as_real(value)
        ok = number is not None and (math.isfinite(number) or (not finite and not math.isnan(number)))
        kind = "a finite number" if finite else "a number"
    elif isinstance(default, str):  # a name; some options also take the object it names (a graph, a kernel)
        ok, kind = not isinstance(value, (bool, int, float)), "a string"
    else:
        return
    if not ok:
        raise ConfigError(f"{what}: option {name} must be {kind}, got {value!r}")


def repeated(names) -> list:
    """The names that occur more than once in `names`, sorted (for a one-line refusal)."""
    names = list(names)
    return sorted({n for n in names if names.count(n) > 1})


def keep_last(table, key, value, most: int):
    """Put `value` at `key` of `table` (an OrderedDict) as the entry used last, and drop the entries
    used longest ago beyond `most`; returns `value`. The process's memo tables (built algorithms,
    traced digests, the makers of programs) keep their last `most` this way."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > most:
        table.popitem(last=False)
    return value


def first_line(err: BaseException) -> str:
    """The first line of an exception's message, stripped ('' where it has none): what a one-line
    error quotes of its cause."""
    text = str(err).strip()
    return text.splitlines()[0].strip() if text else ""


def named_cause(err: BaseException, limit: int = 300) -> str:
    """An exception as a one-line error quotes it: its type and the first line of its message, cut at
    `limit` characters ("TypeError: ...", or the type alone where the message is empty)."""
    first = first_line(err)
    first = first if len(first) <= limit else first[:limit - 3] + "..."
    return f"{type(err).__name__}{': ' + first if first else ''}"


def describe(function) -> str:
    """The docstring's first lines up to the first that ends a sentence, on one line ('' where there is
    no docstring): a registered name's description."""
    lines = []
    for line in (inspect.getdoc(function) or "").strip().splitlines():
        if not line.strip():
            break
        lines.append(line.strip())
        if line.rstrip().endswith("."):
            break
    return " ".join(lines)


def gaussian_rewards(noise_std: float) -> Callable[[PyTree, Array, Array], Array]:
    """`sample_rewards` for additive Gaussian noise of a fixed standard deviation."""

    def sample(instance, means, key):
        del instance
        return means + noise_std * flat_normal(key, means.shape, means.dtype)

    return sample


def float_dtype():
    """The default float dtype of the current precision scope: float64 under x64, else float32."""
    return jnp.result_type(float)


PRECISIONS = ("float64", "float32")  # the float precisions a run may compute in (`devices.precision_scope`)
STREAMS = 2 ** 32  # streams are folded into a key as uint32


def check_stream(name: str, stream) -> int:
    """`stream` as an int, refused (ConfigError) unless it is an integer in [0, 2^32)."""
    try:
        value = None if isinstance(stream, bool) else operator.index(stream)
    except TypeError:
        value = None
    if value is None or not 0 <= value < STREAMS:
        raise ConfigError(f"{name}: stream must be an integer in [0, 2^32), got {stream!r}")
    return value


def check_spec(spec: EnvSpec) -> EnvSpec:
    """Refuse impossible sizes with a message that names the field."""
    for field in EnvSpec._fields[:4]:
        value = getattr(spec, field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{field} must be a positive integer, got {value!r}")
    if not isinstance(spec.one_active, bool):
        raise ConfigError(f"one_active must be True or False, got {spec.one_active!r}")
    return spec
