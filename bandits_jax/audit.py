"""An audit of information flow: does an algorithm that reports no communication keep its agents apart?

Communication is self-reported (`core.Report`: comm_up, comm_down, rounds), so a plugin that pooled
every agent's data and reported zero would look free. The audit checks the claim by its consequence:
where nothing is communicated, agent i's actions are a function of agent i's own observations (and the
public part of the instance), so changing what agent j observes must leave every other agent's actions
exactly as they were, at every step of every seed.

    audit = audit_algorithm("kernel_ucb")                              on the first small problem it fits
    audit = audit_algorithm("ind_kernel_ucb", "coop-linear:num_agents=4,num_arms=5,dim=4", seeds=2, horizon=20)
    audit.verdict                     "isolated", "leaks" or "not audited"
    audit.leaks                       ((j, i), ...): agent i's actions changed when agent j's rewards did
    audit.text                        one line, e.g. "my_ucb on cosine:...: leaks: agent 1's actions change when
                                      agent 0's rewards change, yet it reports no communication (...)"

How: the algorithm runs through the runner's own path (`runner.run_batch`: the same keys, segments,
chunks and step as a sweep), wrapped by `audited`, once as it is and once for each perturbed agent j,
on the same seeds with the same base key, so the problem's instance, contexts, reward noise and
arrivals and the algorithm's keys are the same numbers in every run. The wrapper changes one input
only: the rewards `update` is handed for agent j (what j OBSERVES) get extra Gaussian noise of standard
deviation `SHIFT`, drawn from a key folded out of the step's update key (the algorithm's own key is
passed on untouched). The noiseless means that regret is measured on, the contexts and the arrivals
never see it, and every other agent's rewards are selected bit for bit (`jnp.where`, not an addition of
0). The perturbed agent is a traced hyper-parameter of the wrapper (`AUDIT_AGENT`, -1: none; taken out
of `params` before the algorithm's own functions see them), so every run of an audit shares one
compiled program; the wrapper also records each agent's action and arrival as diagnostics, which is
how the actions [seeds, T, N] come back through the runner. The perturbation goes in at `update` rather
than into the problem's `sample_rewards`: the two hand `update` the same rewards, but a changed problem
is another program per perturbed agent.

Verdicts: an algorithm that reports any communication (scalars up or down, or rounds, in any run) is
"not audited": the audit is for zero-communication claims, and a communicating algorithm's count has a
hand-computed test of its own. Otherwise "leaks" where some agent i != j acted differently at a step at
which i was active (an inactive agent's action is never used: it gets no reward and no regret), else
"isolated". A pass is evidence, not proof: a flow that never moves an action within the audited steps
is not seen; `Audit.moved` says for which j agent j's own actions changed (an algorithm whose actions
ignore rewards, uniform_random, moves none and passes trivially).

Problems: `fitting_problem` picks the first of `PROBLEMS` that the algorithm fits (`curves.check_fit`,
traced): every agent acting at each step, one arrival a step, agents on a graph, a DUETS candidate set.
Bad input (an unknown name, a phase-level trial, a problem the algorithm does not fit) is a
`core.ConfigError` of one line, raised before anything compiles.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from .core import Algorithm, ConfigError, Param, Trial
from .curves import Curve, Run, Spec, check_fit, parse_spec, problem_of

PROBLEMS = (  # small problems tried in this order by `fitting_problem`, one of each kind of arrivals and world
    "cosine:num_agents=3,num_arms=5,dim=4",
    "async-f1:num_agents=3,num_arms=5,dim=4",
    "coop-linear:num_agents=4,num_arms=5,dim=4",
    "duets-h1:num_agents=3,num_candidates=20",
)
DEFAULT_HORIZON = 30  # steps of an audit whose problem spec names none
ALL_AGENTS_UP_TO = 4  # every agent is perturbed in turn up to this many agents; beyond, the first and the last
SHIFT = 1.0  # standard deviation of the noise added to the perturbed agent's observed rewards
AUDIT_AGENT = "audit_agent"  # the wrapper's traced hyper-parameter: the perturbed agent (-1: none)
SALT = 0x41554449  # folded into the update key for the perturbation's noise ("AUDI")
VERDICTS = ("isolated", "leaks", "not audited")


class Audit(NamedTuple):
    """What an audit found (module docstring).

    algorithm, problem: the specs as text; seeds, horizon: the runs' size (seeds 0..seeds-1).
    comm_scalars: scalars sent up plus down, summed over every run's steps; comm_rounds likewise.
    perturbed: the agents j whose observed rewards were perturbed, each in a run of its own (none where
               the unperturbed run communicates).
    leaks:     ((j, i), ...) where agent i's actions changed at a step it was active when j's rewards did.
    first:     {(j, i): (seed, step)} of the first such change of each pair.
    moved:     the agents j of `perturbed` whose own actions changed (where none did, the audit saw no
               reward reach any action).
    errors:    the error bits of every run ORed (0: none; `runner.describe_errors` names them).
    actions:   [1 + len(perturbed), seeds, T, N] int32, every agent's actions, the unperturbed runs first.
    """

    algorithm: str
    problem: str
    seeds: int
    horizon: int
    comm_scalars: float
    comm_rounds: float
    perturbed: tuple
    leaks: tuple
    first: dict
    moved: tuple
    errors: int
    actions: np.ndarray

    @property
    def communicates(self) -> bool:
        return self.comm_scalars > 0 or self.comm_rounds > 0

    @property
    def verdict(self) -> str:
        """One of VERDICTS."""
        return "not audited" if self.communicates else "leaks" if self.leaks else "isolated"

    @property
    def text(self) -> str:
        """The verdict as one line, naming the first leaking pair (and where it first showed)."""
        head = f"{self.algorithm} on {self.problem}: "
        if self.communicates:
            return head + (f"not audited: it reports communication ({self.comm_scalars:g} scalars, "
                           f"{self.comm_rounds:g} rounds over {self.seeds} seeds x {self.horizon} steps)")
        tail = f" (its runs carry error bits {self.errors:#x})" if self.errors else ""
        if self.leaks:
            (j, i), pairs = self.leaks[0], ", ".join(f"{a}->{b}" for a, b in self.leaks)
            seed, step = self.first[(j, i)]
            return head + (f"leaks: agent {i}'s actions change when agent {j}'s rewards change, yet it reports no "
                           f"communication (first at step {step} of seed {seed}; pairs j->i: {pairs}){tail}")
        agents = ", ".join(map(str, self.perturbed))
        return head + (f"isolated: perturbing agent j's rewards leaves the others' actions unchanged (j = {agents}; "
                       f"{self.seeds} seeds x {self.horizon} steps; agent j's own actions moved for "
                       f"{len(self.moved)} of {len(self.perturbed)}){tail}")


# ------------------------------------------------------------------------------ the audit
def audit_algorithm(algorithm: Union[str, Spec], problem: Union[str, Spec, None] = None, seeds: int = 2,
                    horizon: Optional[int] = None, agents=None) -> Audit:
    """Audit `algorithm` (a registered name or spec, as text or a `curves.Spec`) on `problem` (a spec; None:
    the first of PROBLEMS it fits, `fitting_problem`), for seeds 0..seeds-1 over `horizon` steps (None:
    the problem spec's own horizon, else DEFAULT_HORIZON; given, it replaces the spec's). agents: the
    agents j to perturb (None: every agent up to ALL_AGENTS_UP_TO agents, else the first and the last).
    The unperturbed runs come first; where they report communication, nothing else runs. ConfigError
    (one line) on bad input, before anything compiles."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"audit: seeds must be a positive integer, got {seeds!r}")
    spec = _spec(algorithm, "algorithm")
    if problem is None:
        run = _first_fit(spec, horizon, PROBLEMS)[1]
    else:
        run = _resolved(spec, _spec(problem, "problem"), horizon)
    perturb = _agents(agents, run.problem.spec.num_agents)
    batch = _batches(run, seeds)
    outputs = [batch(-1)]
    if outputs[0].communicates:
        perturb = ()
    outputs += [batch(j) for j in perturb]
    return _verdict(run, seeds, perturb, outputs)


def fitting_problem(algorithm: Union[str, Spec], horizon: Optional[int] = None, problems=PROBLEMS) -> Spec:
    """The first problem spec of `problems` that `algorithm` fits at the audit's horizon (the traced
    `curves.check_fit`); a ConfigError (one line) naming why each was refused where none fits, or where
    the algorithm is a phase-level trial."""
    return _first_fit(_spec(algorithm, "algorithm"), horizon, problems)[0]


def audited(algorithm: Algorithm) -> Algorithm:
    """`algorithm` with the audit's perturbation and record (module docstring): a declared hyper-parameter
    AUDIT_AGENT (the perturbed agent, -1: none), stripped before the algorithm's own functions see their
    params; `update` hands them agent AUDIT_AGENT's rewards plus SHIFT x N(0, 1) noise and reports each
    agent i's action and arrival as diagnostics "audit/action/i" and "audit/active/i" (int32)."""
    if AUDIT_AGENT in algorithm.params:
        raise ConfigError(f"audit: {algorithm.name} declares a hyper-parameter {AUDIT_AGENT}, the audit's own name")

    def init(key, spec, params, sizes, public):
        return algorithm.init(key, spec, _own(params), sizes, public)

    def select(params, state, step, key):
        return algorithm.select(_own(params), state, step, key)

    def update(params, state, step, actions, rewards, aux, key):
        observed = perturbed_rewards(rewards, params[AUDIT_AGENT], key)
        state, rep = algorithm.update(_own(params), state, step, actions, observed, aux, key)
        return state, rep._replace(diagnostics={**rep.diagnostics, **_record(actions, step.active)})

    params = {**algorithm.params, AUDIT_AGENT: Param(-1.0)}
    return algorithm._replace(params=params, init=init, select=select, update=update)


def perturbed_rewards(rewards, agent, key):
    """rewards [N] with agent `agent`'s (a traced float; -1: none) plus SHIFT x N(0, 1), the noise drawn
    from `key` folded with SALT; every other agent's reward is the given one, bit for bit."""
    noise = jax.random.normal(jax.random.fold_in(key, SALT), rewards.shape, rewards.dtype)
    return jnp.where(jnp.arange(rewards.shape[0]) == agent, rewards + SHIFT * noise, rewards)


# ------------------------------------------------------------------------------ helpers
def _spec(spec, what: str) -> Spec:
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, str):
        return parse_spec(spec, what)
    raise ConfigError(f"audit: the {what} must be a spec (text such as 'linucb:beta=2' or a curves.Spec), "
                      f"got {type(spec).__name__}")


def _text(spec: Spec) -> str:
    """A spec as the command line writes it."""
    def one(name, options):
        return name + (":" + ",".join(f"{k}={v}" for k, v in options.items()) if options else "")

    return "+".join([one(spec.name, spec.options)] + [one(n, o) for n, o in spec.wrappers])


def _steps(horizon: Optional[int], pspec: Optional[Spec] = None) -> int:
    """The audit's horizon: `horizon`, else the problem spec's own, else DEFAULT_HORIZON."""
    given = {} if pspec is None else pspec.options
    steps = horizon if horizon is not None else given.get("horizon", DEFAULT_HORIZON)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"audit: horizon must be a positive integer, got {steps!r}")
    return steps


def _regret_algorithm(spec: Spec, steps: int) -> Algorithm:
    """The algorithm of `spec` (with horizon=steps where its factory takes one, as the arena sets it);
    ConfigError for a bad name or option, or a phase-level trial."""
    from .algorithms import algorithm_options, build_algorithm

    if "horizon" in algorithm_options(spec.name):
        spec = spec.with_options(horizon=steps)
    built = build_algorithm(spec)
    if isinstance(built, Trial):
        raise ConfigError(f"audit: {spec.name} is a phase-level trial (no steps, no actions per step); the audit "
                          f"runs regret algorithms")
    return built


def _resolved(spec: Spec, pspec: Spec, horizon: Optional[int]) -> Run:
    """The checked run of the algorithm on the problem at the audit's horizon (`_steps`); ConfigError for a
    trial, a bad name or option, or a misfit (`curves.check_fit`, traced)."""
    from .experiments.adhoc import with_horizon

    steps = _steps(horizon, pspec)
    curve = with_horizon(Curve(_text(spec), pspec, spec), {"horizon": steps})
    built = _regret_algorithm(spec, steps)
    run = Run(curve, problem_of(curve.problem), built._replace(name=curve.name, stream=0))
    check_fit(run)
    return run


def _first_fit(spec: Spec, horizon: Optional[int], problems) -> tuple:
    """(problem spec, checked Run) of the first of `problems` that the algorithm of `spec` fits."""
    _regret_algorithm(spec, _steps(horizon))  # a bad name, a bad option or a trial fits nothing
    refusals = []
    for text in problems:
        pspec = _spec(text, "problem")
        try:
            return pspec, _resolved(spec, pspec, horizon)
        except ConfigError as err:
            refusals.append(str(err))
    raise ConfigError(f"audit: {spec.name} fits none of the audit's problems ({'; '.join(refusals)}); give a "
                      f"problem it fits")


def _agents(agents, n: int) -> tuple:
    if agents is None:
        return tuple(range(n)) if n <= ALL_AGENTS_UP_TO else (0, n - 1)
    picked = tuple(agents)
    if not picked or any(isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n for j in picked):
        raise ConfigError(f"audit: agents must be agent indices in [0, {n}), got {agents!r}")
    return tuple(sorted(set(picked)))


def _own(params: dict) -> dict:
    return {name: value for name, value in params.items() if name != AUDIT_AGENT}


def _record(actions, active) -> dict:
    """{"audit/action/i", "audit/active/i": int32 scalar} of every agent i."""
    out = {}
    for i in range(actions.shape[0]):
        out[f"audit/action/{i}"] = actions[i].astype(jnp.int32)
        out[f"audit/active/{i}"] = active[i].astype(jnp.int32)
    return out


class _Output(NamedTuple):
    """One batch of runs (seeds 0..S-1, one perturbation): actions and arrivals [S, T, N], the scalars and
    rounds communicated (summed), the error bits (ORed)."""

    actions: np.ndarray
    active: np.ndarray
    comm_scalars: float
    comm_rounds: float
    errors: int

    @property
    def communicates(self) -> bool:
        return self.comm_scalars > 0 or self.comm_rounds > 0


def _batches(run: Run, seeds: int):
    """batch(agent) -> _Output: the runs of seeds 0..S-1 through `runner.run_batch`, agent `agent`'s observed
    rewards perturbed (-1: none). Every batch shares one audited algorithm and one cache of compiled
    programs, so each perturbation reuses the program of the first (the agent is a traced hyper-parameter)."""
    from .runner import run_batch

    algorithm, cache, agents = audited(run.algorithm), {}, range(run.problem.spec.num_agents)

    def batch(agent: int) -> _Output:
        out = run_batch(run.problem, algorithm, list(range(seeds)), {AUDIT_AGENT: float(agent)},
                        compiled_cache=cache, stop_on_error=False)
        actions = np.stack([out.diagnostics[f"audit/action/{i}"] for i in agents], axis=-1)
        active = np.stack([out.diagnostics[f"audit/active/{i}"] for i in agents], axis=-1).astype(bool)
        return _Output(actions, active, float(out.comm_up.sum() + out.comm_down.sum()), float(out.rounds.sum()),
                       int(np.bitwise_or.reduce(out.errors)))

    return batch


def _verdict(run: Run, seeds: int, perturb: tuple, outputs: list) -> Audit:
    """The Audit of the unperturbed output and one output per agent of `perturb`."""
    base = outputs[0]
    leaks, first, moved = [], {}, []
    for j, out in zip(perturb, outputs[1:]):
        changed = (out.actions != base.actions) & base.active  # [S, T, N]; arrivals are the same in every run
        if changed[..., j].any():
            moved.append(j)
        for i in range(changed.shape[-1]):
            if i != j and changed[..., i].any():
                seed, step = min(np.argwhere(changed[..., i]).tolist(), key=lambda st: (st[1], st[0]))
                leaks.append((j, i))
                first[(j, i)] = (int(seed), int(step))
    return Audit(_text(run.curve.algorithm), _text(run.curve.problem), seeds, run.problem.spec.horizon,
                 sum(o.comm_scalars for o in outputs), sum(o.comm_rounds for o in outputs), perturb, tuple(leaks),
                 first, tuple(moved), int(np.bitwise_or.reduce([o.errors for o in outputs])),
                 np.stack([o.actions for o in outputs]))
