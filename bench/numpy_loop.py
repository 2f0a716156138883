"""Whole-run drivers around the NumPy reference loops, written the way the papers' code runs.

For each seed, for each agent (plain Python loops), the contexts of the run are drawn with NumPy
(the synthetic problems' "cube" law: u ~ Uniform([-0.5, 0.5]^d), x = u / ||u||), the rewards are
h(<a, x>) plus Gaussian noise, and the reference loop of `reference` does the algorithm
math one step at a time with a fresh inverse per step. Nothing is shared between runs, so the
cost of a run does not depend on how many seeds are swept: seeds / time is the loop's rate.

The scale section (bench/scale.py) times every registered algorithm against its NumPy reference at
the JAX run's own configuration: each family module (this one, async_bench, duets_bench) has a dict
SCALE_REFERENCES {registered name: fn(run, params, cfg, seed) -> (units, seconds)}. Such an adapter
is `timed_reference(prepare)`: `prepare` draws every input of one seed before the clock (the
environment from the JAX problem itself with the runner's keys, `environment_arrays`; tie noise,
Thompson draws and uniforms with NumPy) and binds them to the reference call, which alone is timed.
This module holds the adapters of the single-agent and FN-UCB families, uniform random and the
best-arm trials.
"""
from __future__ import annotations

import inspect
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import runner
from bandits_jax.algorithms import algorithm_factory
from bandits_jax.algorithms.fnucb import fn_ucb as fn_ucb_alg
from bandits_jax.core import Trial, check_stream
from bandits_jax.problems.synthetic import FNUCB_FIXED_A

from reference import elimination_np, fn_ucb_np, kernel_np, linear_np, neural_np

REWARDS = {
    "cosine": lambda u: np.cos(3.0 * u),
    "linear": lambda u: u,
}


class LoopTiming(NamedTuple):
    seeds: int
    agent_steps: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.agent_steps / self.seconds


def hidden_vector(dim: int, rng: np.random.Generator) -> np.ndarray:
    """The problems' default hidden vector: FN-UCB's stored one at d = 10, else random unit."""
    if dim == len(FNUCB_FIXED_A):
        return np.asarray(FNUCB_FIXED_A, np.float64)
    a = rng.standard_normal(dim)
    return a / np.linalg.norm(a)


def draw_run(rng: np.random.Generator, problem: str, a: np.ndarray, horizon: int, num_arms: int,
             noise_std: float = 0.01):
    """contexts [T, K, d] (cube law, unit norm) and noisy rewards [T, K] of one agent's run."""
    u = rng.uniform(-0.5, 0.5, (horizon, num_arms, a.size))
    contexts = u / np.linalg.norm(u, axis=-1, keepdims=True)
    rewards = REWARDS[problem](contexts @ a) + noise_std * rng.standard_normal((horizon, num_arms))
    return contexts, rewards


def linucb_agent(lam: float, beta: float) -> Callable:
    def run(contexts, rewards, rng):
        del rng
        return linear_np.linucb(contexts, rewards, lam, beta)

    return run


def kernel_ucb_agent(kernel: str, lam: float, beta: float, lengthscale: float) -> Callable:
    def run(contexts, rewards, rng):
        del rng
        return kernel_np.kernel_ucb(contexts, rewards, kernel, lam, beta, lengthscale)

    return run


def neural_ucb_agent(width: int, lam: float, beta: float, lr: float, train_steps: int,
                     train_until: int, covariance: str = "full") -> Callable:
    """The authors' setting: two layers with biases, N(0, 1) init, raw gradients, their loss."""

    def run(contexts, rewards, rng):
        d = contexts.shape[-1]
        init = (rng.standard_normal((width, d)), rng.standard_normal(width),
                rng.standard_normal(width), float(rng.standard_normal()))
        return neural_np.run(contexts, rewards, init, "ucb", lam, beta, lr, train_steps, train_until,
                             covariance=covariance, loss="authors", feature_scale="raw")

    return run


def fn_ucb_agents(width: int, lam: float, nu_tkn: float, nu_tk: float, D: float, lr: float,
                  **options) -> Callable:
    """FN-UCB over all N agents at once (a JOINT loop: contexts [T, N, K, d], rewards [T, N, K]),
    with the authors' network (biases, N(0, 1) init) and the given `fn_ucb_np.run` options."""

    def run(contexts, rewards, rng):
        d = contexts.shape[-1]
        init = (rng.standard_normal((width, d)), rng.standard_normal(width),
                rng.standard_normal(width), float(rng.standard_normal()))
        return fn_ucb_np.run(contexts, rewards, init, lam, nu_tkn, nu_tk, D, lr, **options)

    run.joint = True
    return run


def time_loop(agent: Callable, problem: str, seeds, num_agents: int, num_arms: int, dim: int,
              horizon: int) -> LoopTiming:
    """Wall-clock of the full loop over seeds and agents (context drawing included).

    An agent function with `joint = True` runs all agents together on stacked arrays
    (contexts [T, N, K, d]); otherwise it is called once per agent.
    """
    seeds = list(seeds)
    joint = getattr(agent, "joint", False)
    t0 = time.perf_counter()
    for seed in seeds:
        rng = np.random.default_rng(seed)
        a = hidden_vector(dim, rng)
        runs = []
        for _agent in range(num_agents):
            contexts, rewards = draw_run(rng, problem, a, horizon, num_arms)
            if joint:
                runs.append((contexts, rewards))
            else:
                agent(contexts, rewards, rng)
        if joint:
            agent(np.stack([c for c, _ in runs], axis=1), np.stack([r for _, r in runs], axis=1), rng)
    seconds = time.perf_counter() - t0
    return LoopTiming(len(seeds), len(seeds) * num_agents * horizon, seconds)


# ------------------------------------------------------------------------------------ scale references
class Prepared(NamedTuple):
    """One seed of a reference loop, ready to run: `call()` runs it on inputs drawn already, and
    `loss(out)` is what it achieved: the regret summed over agents and steps, or for a best-arm
    trial 1.0 when some agent answered wrong (else 0.0)."""

    call: Callable[[], object]
    loss: Callable[[object], float]


def units_of(run) -> int:
    """Agent-steps of one seed of `run`: T x (1 if one agent acts a step else N); 1 for a trial."""
    if isinstance(run.algorithm, Trial):
        return 1
    spec = run.problem.spec
    return spec.horizon * (1 if spec.one_active else spec.num_agents)


def clocked(ready: Prepared) -> dict:
    """seconds of one call of a prepared reference (perf_counter around the call only) and its loss."""
    start = time.perf_counter()
    out = ready.call()
    seconds = time.perf_counter() - start
    return dict(seconds=seconds, loss=float(ready.loss(out)))


def timed_reference(prepare: Callable, note: str = "") -> Callable:
    """The scale adapter fn(run, params, cfg, seed) -> (units, seconds) of `prepare(run, params, cfg,
    seed) -> Prepared`. fn.note says how the reference differs from the JAX configuration ("" if in
    nothing); fn.prepare is `prepare` (for hand checks of the loss)."""

    def fn(run, params, cfg, seed):
        ready = prepare(run, params, cfg, seed)
        start = time.perf_counter()
        ready.call()
        return units_of(run), time.perf_counter() - start

    fn.note, fn.prepare = note, prepare
    return fn


_STEP_DRAWS = {}  # (id(problem), every_agent) -> (problem, jitted draw of a run's steps)


def _step_draws(problem, every_agent: bool) -> Callable:
    """draw(problem_key, instance, ts [T]) -> the per-step arrays of `environment_arrays`, jitted once
    per problem (the problem is held with its function, so an id is never reused while cached)."""
    hit = _STEP_DRAWS.get((id(problem), every_agent))
    if hit is not None and hit[0] is problem:
        return hit[1]
    N = problem.spec.num_agents

    def one(pk, inst, t):
        k_ctx, k_rew, k_act = runner.problem_step_keys(pk, t)
        ctx = problem.contexts(inst, t, k_ctx)
        means = problem.mean_reward(inst, t, ctx)
        rew = problem.sample_rewards(inst, means, k_rew)
        act = jnp.ones((N,), bool) if problem.active is None else problem.active(inst, t, k_act)
        if every_agent:
            return ctx, means, rew, act
        i = jnp.argmax(act)
        return ctx[i], means[i], rew[i], i

    draw = jax.jit(jax.vmap(one, in_axes=(None, None, 0)))
    _STEP_DRAWS[(id(problem), every_agent)] = (problem, draw)
    return draw


def environment_arrays(problem, seed: int, horizon: int = None, *, every_agent: bool = False):
    """The first `horizon` steps (default: all) of seed `seed` as run_batch draws them (the runner's
    keys), float64. every_agent False (a problem with one acting agent a step): contexts [T, K, d],
    means [T, K], rewards [T, K] of the acting agent and arrivals [T] (its index). every_agent True:
    every agent's contexts [T, N, K, d], means [T, N, K], rewards [T, N, K] and active [T, N] bool
    (all True where the problem has no `active`)."""
    T = problem.spec.horizon if horizon is None else int(horizon)
    with runner.precision_scope("float64"):
        pk, ak = runner.problem_and_algorithm_keys(runner.seed_key(seed))
        inst = problem.init(runner.init_keys(pk, ak)[0])
        ctx, means, rew, last = jax.device_get(
            _step_draws(problem, every_agent)(pk, inst, jnp.arange(T, dtype=jnp.int32)))
    last = np.asarray(last, bool) if every_agent else np.asarray(last, np.int64)
    return np.asarray(ctx, np.float64), np.asarray(means, np.float64), np.asarray(rew, np.float64), last


def static_options(run) -> dict:
    """The options the curve's algorithm is built with: its factory's keyword defaults, then the
    curve's own options (float hyper-parameters come from `params` instead)."""
    sig = inspect.signature(algorithm_factory(run.curve.algorithm.name)).parameters
    defaults = {k: p.default for k, p in sig.items() if p.default is not inspect.Parameter.empty}
    return {**defaults, **run.curve.algorithm.options}


def initial_state(run, params: dict, seed: int):
    """The JAX algorithm's state at the start of seed `seed` (runner.run_start, float64, buffers of
    the whole horizon) as NumPy arrays: the networks a neural reference starts from."""
    alg = run.algorithm
    with runner.precision_scope("float64"):
        start = runner.run_start(run.problem, alg, 0, runner.horizon_sizes(alg, run.problem.spec))
        state = start(seed, {k: jnp.asarray(v) for k, v in params.items()})[3]
    return jax.tree_util.tree_map(np.asarray, state)


def agent_regret(means, actions, acting=None) -> float:
    """sum_t (max_k means[t, k] - means[t, a_t]) over the steps where `acting` [T] (default all);
    means [T, K], actions [T]."""
    gaps = means.max(-1) - means[np.arange(len(actions)), actions]
    return float(np.sum(gaps if acting is None else gaps[acting]))


def independent_agents(run, seed: int, loop: Callable) -> Prepared:
    """N independent agents, one reference call each on seed `seed`'s environment.

    loop(i, contexts [T, K, d], rewards [T, K], active [T] bool, rng) -> agent i's zero-argument call,
    returning a dict with actions [T]; loop runs (and draws from rng = default_rng(seed)) before the
    clock."""
    contexts, means, rewards, active = environment_arrays(run.problem, seed, every_agent=True)
    rng = np.random.default_rng(seed)
    calls = [loop(i, contexts[:, i], rewards[:, i], active[:, i], rng) for i in range(contexts.shape[1])]

    def loss(outs):
        return sum(agent_regret(means[:, i], o["actions"], active[:, i]) for i, o in enumerate(outs))

    return Prepared(lambda: [c() for c in calls], loss)


def _linucb(run, params, cfg, seed):
    o = static_options(run)
    return independent_agents(run, seed, lambda i, X, R, act, rng: lambda: linear_np.linucb(
        X, R, params["lam"], params["beta"], o["bonus"], active=act, max_history=o["max_history"]))


def _lints(run, params, cfg, seed):
    o = static_options(run)

    def loop(i, X, R, act, rng):
        z = rng.standard_normal((X.shape[0], X.shape[2]))  # [T, d]
        return lambda: linear_np.lints(X, R, z, params["lam"], params["nu"], active=act,
                                       max_history=o["max_history"])

    return independent_agents(run, seed, loop)


KERNELS_NP = ("rbf", "laplacian", "matern32", "matern52", "linear")  # kernel_np's, at default shape options


def _kernel_name(run) -> str:
    name = static_options(run)["kernel"]
    if name not in KERNELS_NP:
        raise ValueError(f"{run.curve.name}: kernel {name!r} has no NumPy reference here (have {KERNELS_NP})")
    return name


def _kernel_ucb(run, params, cfg, seed):
    o, kernel = static_options(run), _kernel_name(run)
    return independent_agents(run, seed, lambda i, X, R, act, rng: lambda: kernel_np.kernel_ucb(
        X, R, kernel, params["lam"], params["beta"], params["lengthscale"], active=act,
        max_history=o["max_history"]))


def _kernel_ts(run, params, cfg, seed):
    o, kernel = static_options(run), _kernel_name(run)

    def loop(i, X, R, act, rng):
        z = rng.standard_normal(R.shape)  # [T, K]
        return lambda: kernel_np.kernel_ts(X, R, z, kernel, params["lam"], params["nu"], params["lengthscale"],
                                           var_floor=params.get("var_floor", 0.0), active=act,
                                           max_history=o["max_history"])

    return independent_agents(run, seed, loop)


def _neural(kind: str, coef: str) -> Callable:
    """prepare of Neural UCB (kind "ucb", width coefficient `coef` = "beta") or TS ("ts", "nu"): each
    agent's loop starts from the JAX run's initial network of that agent."""

    def prepare(run, params, cfg, seed):
        o = static_options(run)
        if o["depth"] != 2:
            raise ValueError(f"{run.curve.name}: neural_np has two layers, the curve asks for depth {o['depth']}")
        theta = initial_state(run, params, seed).theta  # flax dict, leading [N] axis

        def loop(i, X, R, act, rng):
            if not act.all():
                raise ValueError(f"{run.curve.name}: neural_np has no inactive steps")
            init = neural_np.from_flax(jax.tree_util.tree_map(lambda a: a[i], theta))
            z = rng.standard_normal(R.shape) if kind == "ts" else None  # [T, K]
            return lambda: neural_np.run(X, R, init, kind, params["lam"], params[coef], params["lr"],
                                         o["train_steps"], o["train_until"], covariance=o["covariance"],
                                         loss=o["loss"], feature_scale=o["feature_scale"], z=z)

        return independent_agents(run, seed, loop)

    return prepare


FN_UCB_NP_OPTIONS = ("variant", "covariance", "feature_scale", "loss", "trigger", "alpha_mode", "alpha_warmup",
                     "alpha_ramp", "alpha_contexts", "aggregate_params", "train_steps", "train_until")


def fn_ucb_options(run) -> dict:
    """fn_ucb_np.run's options of the curve's FN-UCB (fn_ucb or fn_ucb_authors), read from the static
    FNUCBConfig the algorithm runs with (the first argument of its `init`); authors_code for the
    authors' shared network. Options the reference lacks raise ValueError."""
    config = run.algorithm.init.args[0]
    missing = [k for k in ("minmax_mean", "alpha_epoch_start") if getattr(config, k)]
    if config.depth != 2 or config.alpha_sampler is not None or missing:
        raise ValueError(f"{run.curve.name}: fn_ucb_np lacks depth {config.depth}, an alpha sampler or {missing}")
    out = {k: getattr(config, k) for k in FN_UCB_NP_OPTIONS}
    out["authors_code"] = config.networks is fn_ucb_alg.SHARED
    return out


def _fn_ucb(run, params, cfg, seed):
    contexts, means, rewards, active = environment_arrays(run.problem, seed, every_agent=True)
    if not active.all():
        raise ValueError(f"{run.curve.name}: fn_ucb_np has every agent act at every step")
    init = neural_np.from_flax(initial_state(run, params, seed).nets.theta0)
    hp = {k: params[k] for k in ("lam", "nu_tkn", "nu_tk", "D", "lr")}
    options = fn_ucb_options(run)

    def loss(out):
        return sum(agent_regret(means[:, i], out["actions"][:, i]) for i in range(means.shape[1]))

    return Prepared(lambda: fn_ucb_np.run(contexts, rewards, init, **hp, **options), loss)


def _uniform_random(run, params, cfg, seed):
    """Each acting agent draws its arm with rng.integers at every step (that draw is the algorithm)."""
    del params, cfg
    if run.problem.spec.one_active:
        _, means, _, _ = environment_arrays(run.problem, seed)
        means, acting = means[:, None], [np.zeros(1, np.int64)] * len(means)  # the acting agent's row
    else:
        _, means, _, active = environment_arrays(run.problem, seed, every_agent=True)
        acting = [np.flatnonzero(a) for a in active]
    K = means.shape[-1]
    rng = np.random.default_rng(seed)

    def call():
        return [[(int(i), int(rng.integers(K))) for i in acting[t]] for t in range(len(acting))]

    def loss(picks):
        return sum(means[t, i].max() - means[t, i, a] for t, step in enumerate(picks) for i, a in step)

    return Prepared(call, loss)


PULL_TABLE_LIMIT = 1 << 22  # floats of pre-drawn rewards a successive-elimination seed may hold


def _trial_pulls(run, seed: int, rounds: int, counts):
    """(means [N, K], pulls [rounds, N, K]): arms.pull(counts, key_r) of the JAX trial for seed `seed`,
    key_r = fold_in(its key, r) for r = 1..rounds, or its key itself when rounds = 0 ([1, N, K])."""
    arms, trial = run.problem, run.algorithm
    with runner.precision_scope("float64"):
        pk, ak = runner.problem_and_algorithm_keys(runner.seed_key(seed))
        instance = arms.init(runner.init_keys(pk, ak)[0])
        key = runner.stream_key(ak, check_stream(trial.name, trial.stream))
        counts = jnp.asarray(counts, jnp.int32)
        if rounds == 0:
            pulls = arms.pull(instance, counts, key)[None]
        else:
            pull = jax.jit(jax.vmap(lambda r: arms.pull(instance, counts, jax.random.fold_in(key, r))))
            pulls = pull(jnp.arange(1, rounds + 1))
        return np.asarray(instance["means"], np.float64), np.asarray(pulls, np.float64)


def _successive_elimination(run, params, cfg, seed):
    """The trial's own rewards: round r pulls each surviving arm once, so its sums are counts (0 or 1)
    times one pull of every arm with the round's key, drawn for all rounds the table holds."""
    arms, o = run.problem, static_options(run)
    rounds = min(int(o["max_rounds"]), PULL_TABLE_LIMIT // (arms.num_agents * arms.num_arms))
    means, table = _trial_pulls(run, seed, rounds, np.ones((arms.num_agents, arms.num_arms)))

    def draw(counts, r):
        if r > rounds:
            raise ValueError(f"{run.curve.name}: round {r} is past the {rounds} pre-drawn rounds")
        return counts * table[r - 1]

    return Prepared(lambda: elimination_np.successive_elimination(means, params["delta"], params["sigma"],
                                                                  int(o["max_rounds"]), draw),
                    lambda out: 0.0 if out["correct"] else 1.0)


def _uniform_allocation(run, params, cfg, seed):
    arms, budget = run.problem, int(static_options(run)["budget"])
    means, sums = _trial_pulls(run, seed, 0, np.full((arms.num_agents, arms.num_arms), budget // arms.num_arms))
    return Prepared(lambda: elimination_np.uniform_allocation(means, budget, lambda counts, r: sums[0]),
                    lambda out: 0.0 if out["correct"] else 1.0)


SCALE_REFERENCES = {
    "linucb": timed_reference(_linucb),
    "lints": timed_reference(_lints),
    "kernel_ucb": timed_reference(_kernel_ucb),
    "kernel_ts": timed_reference(_kernel_ts),
    "neural_ucb": timed_reference(_neural("ucb", "beta")),
    "neural_ts": timed_reference(_neural("ts", "nu")),
    "fn_ucb": timed_reference(_fn_ucb),
    "fn_ucb_authors": timed_reference(_fn_ucb),
    "uniform_random": timed_reference(_uniform_random),
    "successive_elimination": timed_reference(_successive_elimination),
    "uniform_allocation": timed_reference(_uniform_allocation),
}
