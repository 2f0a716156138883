"""The float32 health section of `python -m bench` (`--only precision`): where float32 holds.

Every regret family keeps state that is updated a step at a time: Cholesky factors grown by
rank-one updates, inverse factors grown by Schur-complement appends, inverses kept by
Sherman-Morrison or Woodbury updates, Nystrom dictionaries and their inverse factors, running sums.
In float32 each update rounds at about 6e-8, and over 10^4 steps the rounding may pile up. This
section runs representative algorithms of each family for T steps (--precision-horizon, default
10^4) on FULL_SEEDS seeds in float32 and in float64, one vmap over the seeds as the runner batches
them, each step the runner's `act` with the runner's keys, the buffers grown between checkpoints as
the runner grows them between segments (`segment_sizes`), and reports per (algorithm, precision):

    - the non-finite values (NaN or inf) of the per-step regret [S, T, N] and of the final state's
      float leaves;
    - the error bits of each run, ORed over time as the runner ORs them (`RunOutput.errors`);
    - for every incremental factor of the state, its relative drift from the same factor computed
      afresh in float64 from the data the state holds, or from the run's recorded actions, contexts,
      rewards and tangent features where it holds none: ||F_inc - F_fresh||_F / ||F_fresh||_F, the
      largest over agents and seeds, at CHECKPOINTS evenly spaced times (the largest over them is
      the table's);
    - the final cumulative regret (mean over agents) of each seed, their mean and standard error,
      and the difference between the precisions.

Both precisions run on the same world (`run_case`): each seed's instance, contexts, means and
rewards, and the algorithm's initial state, are drawn in float64 with the runner's keys and
rounded to float32 for the float32 run (a float32 run of the runner draws other random numbers, so
its regret would differ from float64's by the spread over worlds, not by precision). What still
differs is the algorithms' own random draws (tie noise, ridge-leverage sampling, DUETS's queries).
Each case's fresh-factor function sits next to it and reads the state in float64.

Configuration (every algorithm at its defaults unless stated):
    fnucb  cosine (synthetic), N = 2, K = 4, d = 10, noise 0.01:
           LinUCB (chol = Cholesky factor of V by rank-one updates; b);
           KernelUCB, RBF lengthscale 1, lam = 1 (chol_inv = inverse Cholesky factor of K + lam I by
           Schur appends), at T = min(T, EXACT_KERNEL_HORIZON): its factor is T x T and every step
           touches it, so a run costs ~T^3, and 10^4 steps would cost 1000 times the 1000-step run;
           NeuralUCB, width 20, train_steps 10, train_until 500 (cov = Cholesky factor of
           Z = lam I + sum g g^T by rank-one updates; g recorded at every step);
           FN-UCB as the authors' code runs it (the experiments' default mode), width 20,
           train_steps 10, train_until 500, D = 0 (a round every iteration): local = (V^local_i)^{-1}
           by Sherman-Morrison, vinv_last = V_last^{-1} by rank-N Woodbury updates, logdet_last (its
           diagonal surrogate), b_sync; phi recorded at every step.
    async  async-f1, N = 4 clients, one active a step, K = 20, d = 20, gamma = 0.1 (lengthscale
           1/sqrt(0.2)), lam = alpha = q = 1, the experiment's threshold rules (`async_exps.thresholds`):
           DisLinUCB and FedGLB-UCB (A = the global plus the clients' sums of x x^T; DisLinUCB's b);
           Async-KernelUCB, dictionary capacity ASYNC_CAPACITY (Linv = inverse Cholesky factor of the
           dictionary's Gram matrix by appends; P = (A + lam I)^{-1} by Sherman-Morrison);
           Approx-DisKernelUCB, capacity APPROX_CAPACITY (Linv; g_Pinv; loc_Pinv = each client's
           (A_i + lam I)^{-1} by Sherman-Morrison since the last synchronisation). The capacities hold
           the largest dictionary the runs reach, which the table reports.
    duets  duets-h1, N = 4, M = 500 candidates, T_1 = 2, lam = 0.2: DUETS keeps no factor (every
           epoch's kernel algebra is computed afresh); its running state is the open epoch's counts
           and reward sums.
    coop   coop-linear, V = 6 agents on G(6, 0.7), K = 8, d = 5, feature storage (exact for the linear
           kernel): Coop-KernelUCB and OFUL (G, h, f = prefix sums of phi phi^T, y phi, phi).
CoPE-KB is left out: its trials refuse float32 by design.

Verdict per family: float32 HOLDS where, for every case of the family, float32 shows no non-finite
value and no error bit that float64 does not show, every factor's drift stays below DRIFT_TOL, and
the mean final regret is within REGRET_TOL (relative) of float64's or the paired differences
(seed by seed) are within REGRET_Z standard errors of zero; otherwise it DOES NOT HOLD. A run that
flips one argmax on rounding (or on its own random draws) follows other data from there on, so the
regret test allows for that spread; the drift is the sharper test. float64 stays the default
everywhere (`precision` in every experiment configuration).

--quick (tests): T = QUICK_HORIZON on QUICK_SEEDS seeds, the same configurations.
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from bandits_jax.algorithms.single import neural

from bandits_jax.algorithms import make_algorithm
from bandits_jax.algorithms.fnucb import fn_ucb as fn_ucb_module
from bandits_jax.algorithms.duets.duets import epoch_schedule
from bandits_jax.core import Sizes, Step
from bandits_jax.experiments import async_exps
from bandits_jax.problems import make_problem
from bandits_jax.devices import precision_scope
from bandits_jax.keys import problem_step_keys
from bandits_jax.runner import act, describe_errors, first_sizes, run_start

from . import harness
from .harness import log

GROUP = "precision"
NAMES = ("float32-health",)
PRECISIONS = ("float32", "float64")
FULL_HORIZON = 10_000
QUICK_HORIZON = 40
EXACT_KERNEL_HORIZON = 1000
CHECKPOINTS = 4
WORLD_CHUNK = 500
FULL_SEEDS = 4
QUICK_SEEDS = 2
SEED = 0
DRIFT_TOL = 1e-3
REGRET_TOL = 0.05
REGRET_Z = 3.0
FAMILIES = ("fnucb", "async", "duets", "coop")


class History(NamedTuple):
    """What a run did up to a time t, as NumPy arrays (float arrays in the run's precision).

    actions [t, N] int32, chosen [t, N, d] the chosen contexts, rewards [t, N] the observed rewards,
    active [t, N] bool, probe [t, ...] what the case's probe recorded (None without one).
    """

    actions: np.ndarray
    chosen: np.ndarray
    rewards: np.ndarray
    active: np.ndarray
    probe: Optional[np.ndarray]


@dataclasses.dataclass(frozen=True)
class Case:
    """One algorithm of the section: its family, how it is built for a horizon, and its factors.

    build(T) -> (problem, algorithm). factors(state, history, params) -> {factor name: drift}, the
    state's float leaves as float64 NumPy arrays. probe(params, state, step, actions) -> an array
    recorded every step from the state BEFORE the update (None: nothing recorded). horizon_cap:
    the largest horizon run (exact kernel methods). extras(outputs) -> {name: number} from the
    per-step outputs (diagnostics) of the whole run.
    """

    name: str
    family: str
    build: Callable
    factors: Callable
    probe: Optional[Callable] = None
    horizon_cap: Optional[int] = None
    extras: Optional[Callable] = None


# ------------------------------------------------------------------------------------ drift
def drift(inc, fresh) -> float:
    """||inc - fresh||_F / ||fresh||_F in float64 (0 when both are zero)."""
    inc, fresh = np.asarray(inc, np.float64), np.asarray(fresh, np.float64)
    ref = np.linalg.norm(fresh)
    diff = np.linalg.norm(inc - fresh)
    return float(diff / ref) if ref > 0 else (0.0 if diff == 0 else math.inf)


def worst(values) -> float:
    """The largest of drifts over agents (0 for none)."""
    return max([float(v) for v in values], default=0.0)


def gram(lengthscale, A, B):
    """RBF k(A[n, d], B[m, d]) = exp(-|a - b|^2 / (2 l^2)) [n, m] in float64."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    sq = np.sum(A * A, 1)[:, None] + np.sum(B * B, 1)[None, :] - 2.0 * A @ B.T
    return np.exp(-np.maximum(sq, 0.0) / (2.0 * lengthscale ** 2))


def inverse_factor(A):
    """L^{-1} [n, n] for A = L L^T, in float64."""
    L = np.linalg.cholesky(A)
    return scipy.linalg.solve_triangular(L, np.eye(A.shape[0]), lower=True)


def ridge(rows, lam, dim: int):
    """lam I + rows^T rows [dim, dim] for rows [n, dim] (float64)."""
    rows = np.asarray(rows, np.float64).reshape(-1, dim)
    return lam * np.eye(dim) + rows.T @ rows


def per_run(values) -> float:
    """The mean over runs of a per-step output [S, T] summed over time."""
    return float(np.mean(np.sum(np.asarray(values, np.float64), axis=1)))


def per_agent(h: History, values):
    """values [t, N, ...] -> [N, t, ...] with the inactive rows zeroed (they changed nothing)."""
    v = np.asarray(values, np.float64) * h.active.reshape(h.active.shape + (1,) * (values.ndim - 2))
    return np.moveaxis(v, 1, 0)


# ------------------------------------------------------------------------------------ FN-UCB family
FN_PROBLEM = dict(num_agents=2, num_arms=4, dim=10, noise_std=0.01)
NEURAL_OPTIONS = dict(width=20, depth=2, train_steps=10, train_until=500)
KERNEL_LENGTHSCALE = 1.0


def linucb_factors(state, h: History, params):
    """chol[i] against the Cholesky factor of lam I + sum x x^T over agent i's rows; b[i] = sum r x."""
    d = h.chosen.shape[-1]
    X, r = per_agent(h, h.chosen), per_agent(h, h.rewards[..., None])[..., 0]
    fresh = [np.linalg.cholesky(ridge(X[i], params["lam"], d)) for i in range(X.shape[0])]
    return {"chol": worst(drift(state.chol[i], fresh[i]) for i in range(X.shape[0])),
            "b": worst(drift(state.b[i], r[i] @ X[i]) for i in range(X.shape[0]))}


def kernel_ucb_factors(state, h: History, params):
    """chol_inv[i] (live n x n block) against L^{-1} of K(X_n, X_n) + lam I from the state's X."""
    del h
    out = []
    for i in range(state.n.shape[0]):
        n = int(state.n[i])
        X = state.X[i][:n]
        fresh = inverse_factor(gram(params["lengthscale"], X, X) + params["lam"] * np.eye(n))
        out.append(drift(state.chol_inv[i][:n, :n], fresh))
    return {"chol_inv": worst(out)}


def neural_probe(config):
    """The tangent features g [N, p] that NeuralUCB's update absorbs (at the pre-update network)."""

    def probe(params, state, step: Step, actions):
        del params
        x = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0, :]
        return jax.vmap(lambda st, xi: neural.mean_and_features(config, st, xi[None])[1][0])(state, x)

    return probe


def neural_factors(state, h: History, params):
    """cov[i] against the Cholesky factor of lam I + sum g g^T over agent i's recorded features."""
    G = per_agent(h, h.probe)
    p = G.shape[-1]
    return {"cov": worst(drift(state.cov[i], np.linalg.cholesky(ridge(G[i], params["lam"], p)))
                         for i in range(G.shape[0]))}


def fn_ucb_probe(config):
    """The features phi [N, p] that FN-UCB's update absorbs (at the pre-update feature parameters)."""

    def probe(params, state, step: Step, actions):
        del params
        x = jnp.take_along_axis(step.contexts.astype(state.b_sync.dtype), actions[:, None, None], axis=1)[:, 0, :]
        return fn_ucb_module.features(config, config.networks.feature_params(state.nets), x)[1]

    return probe


def fn_ucb_factors(trigger: str):
    """From the recorded phi [t, N, p] (zero for inactive agents) and rewards, with s_last = t_last
    (W_sync holds iterations 0..s_last, none when no round took place): vinv_last =
    (lam I + W_sync)^{-1}, logdet_last (log det V_last, or with trigger "diag" its diagonal surrogate
    sum log diag V_last), b_sync = sum y phi up to s_last, local[i] = (lam I + all of agent i's
    phi phi^T)^{-1}, and cov[i] = (V_last + W_new_i)^{-1} when the agents are not synchronised."""

    def factors(state, h: History, params):
        covs, lam = state.covs, params["lam"]
        phi = np.asarray(h.probe, np.float64) * h.active[..., None]
        y = np.asarray(h.rewards, np.float64) * h.active
        N, p = phi.shape[1], phi.shape[2]
        s_last = int(state.t_last)
        synced = s_last + 1 if s_last > 0 else 0
        V_last = ridge(phi[:synced], lam, p)
        logdet = np.linalg.slogdet(V_last)[1] if trigger == "exact" else np.sum(np.log(np.diag(V_last)))
        out = {"vinv_last": drift(covs.vinv_last, np.linalg.inv(V_last)),
               "logdet_last": drift(covs.logdet_last, logdet),
               "b_sync": drift(state.b_sync, np.einsum("tn,tnp->p", y[:synced], phi[:synced])),
               "local": worst(drift(covs.local[i], np.linalg.inv(ridge(phi[:, i], lam, p))) for i in range(N))}
        if not bool(covs.synced):
            own = [V_last + phi[synced:, i].T @ phi[synced:, i] for i in range(N)]
            out["cov"] = worst(drift(covs.cov[i], np.linalg.inv(own[i])) for i in range(N))
        return out

    return factors


def fnucb_cases() -> list:
    """The FN-UCB family's cases (module docstring)."""

    def problem(T):
        return make_problem("cosine", horizon=T, **FN_PROBLEM)

    def neural_case(T):
        return problem(T), make_algorithm("neural_ucb", **NEURAL_OPTIONS)

    def fn_case(T):
        return problem(T), make_algorithm("fn_ucb_authors", **NEURAL_OPTIONS)

    neural_config = neural.neural_config("NeuralUCB", "ucb", covariance="full", parameterization="authors",
                                         feature_scale="raw", loss="authors", **NEURAL_OPTIONS)
    fn_config = make_algorithm("fn_ucb_authors", **NEURAL_OPTIONS).update.args[0]  # the factory's FNUCBConfig
    return [
        Case("LinUCB", "fnucb", lambda T: (problem(T), make_algorithm("linucb")), linucb_factors),
        Case("KernelUCB", "fnucb",
             lambda T: (problem(T), make_algorithm("kernel_ucb", lengthscale=KERNEL_LENGTHSCALE)),
             kernel_ucb_factors, horizon_cap=EXACT_KERNEL_HORIZON),
        Case("NeuralUCB", "fnucb", neural_case, neural_factors, probe=neural_probe(neural_config)),
        Case("FN-UCB (authors' code)", "fnucb", fn_case, fn_ucb_factors(fn_config.trigger),
             probe=fn_ucb_probe(fn_config),
             extras=lambda outs: {"rounds": per_run(outs["rounds"])}),
    ]


# ------------------------------------------------------------------------------------ async family
ASYNC_PROBLEM = dict(num_agents=4, num_arms=20, dim=20, noise_std=0.1)
ASYNC_GAMMA = 0.1
ASYNC_CAPACITY = 384
APPROX_CAPACITY = 224


def dis_lin_factors(state, h: History, params):
    """A_g + sum_i dA_i and b_g + sum_i db_i against sum x x^T and sum r x over every observation."""
    del params
    X = h.chosen[h.active].astype(np.float64)
    r = h.rewards[h.active].astype(np.float64)
    return {"A": drift(state.A_g + state.dA.sum(0), X.T @ X), "b": drift(state.b_g + state.db.sum(0), r @ X)}


def fed_glb_factors(state, h: History, params):
    """A_g + sum_i dA_i against hist_X^T hist_X of the history the state holds."""
    del h, params
    X = state.hist_X[:int(state.hist_n)]
    return {"A": drift(state.A_g + state.dA.sum(0), X.T @ X)}


def dictionary_factor(dict_X, dict_n, Linv, lengthscale):
    """(drift of the live block of Linv against L^{-1} of the dictionary's Gram matrix, that fresh
    L^{-1} [m, m], m)."""
    m = int(dict_n)
    if m == 0:
        return 0.0, np.zeros((0, 0)), 0
    S = dict_X[:m]
    fresh = inverse_factor(gram(lengthscale, S, S))
    return drift(Linv[:m, :m], fresh), fresh, m


def async_kernel_factors(state, h: History, params):
    """Linv against the dictionary's fresh inverse factor; P's live block against (A + lam I)^{-1}
    of the state's A."""
    del h
    linv, _, m = dictionary_factor(state.dict_X, state.dict_n, state.Linv, params["lengthscale"])
    P = np.linalg.inv(state.A[:m, :m] + params["lam"] * np.eye(m))
    return {"Linv": linv, "P": drift(state.P[:m, :m], P) if m else 0.0}


def approx_dis_factors(state, h: History, params):
    """Linv as Async-KernelUCB's; the history embedded with the fresh factor, Z = k(hist, S) L^{-T};
    g_Pinv against (Z_pre^T Z_pre + lam I)^{-1} over the rows before the last synchronisation
    (hist_n - sum(loc_n) of them), loc_Pinv[i] (clients with new points) against that plus client
    i's later rows."""
    del h
    lam, ls = params["lam"], params["lengthscale"]
    linv, fresh, m = dictionary_factor(state.dict_X, state.dict_n, state.Linv, ls)
    if m == 0:
        return {"Linv": 0.0, "g_Pinv": 0.0, "loc_Pinv": 0.0}
    n = int(state.hist_n)
    pre = n - int(state.loc_n.sum())
    Z = gram(ls, state.hist_X[:n], state.dict_X[:m]) @ fresh.T
    A_g = Z[:pre].T @ Z[:pre] + lam * np.eye(m)
    owner = state.hist_owner[:n]
    loc = []
    for i in np.flatnonzero(state.loc_n > 0):
        Zi = Z[pre:][owner[pre:] == i]
        loc.append(drift(state.loc_Pinv[i][:m, :m], np.linalg.inv(A_g + Zi.T @ Zi)))
    return {"Linv": linv, "g_Pinv": drift(state.g_Pinv[:m, :m], np.linalg.inv(A_g)), "loc_Pinv": worst(loc)}


def async_cases() -> list:
    """The asynchronous family's cases, thresholds by the experiment's rules for the built horizon."""
    lengthscale = 1.0 / math.sqrt(2.0 * ASYNC_GAMMA)
    kern = dict(kernel="rbf", lam=1.0, alpha=1.0, lengthscale=lengthscale)

    def built(name, **options):
        def build(T):
            problem = make_problem("async-f1", horizon=T, **ASYNC_PROBLEM)
            th = async_exps.thresholds(dict(async_exps.COMMON), problem.spec)
            rules = {"dis_lin_ucb": dict(threshold=th["dislin_D"]), "fed_glb_ucb": dict(threshold=th["glb_D"]),
                     "async_kernel_ucb": dict(threshold=th["async_D"]),
                     "approx_dis_kernel_ucb": dict(threshold=th["approx_D"])}
            return problem, make_algorithm(name, **options, **rules[name])

        return build

    converged = lambda outs: {"syncs": per_run(outs["rounds"]),  # noqa: E731
                              "agd_not_converged": per_run(outs["rounds"] * (1 - outs["diag/agd_converged"]))}
    dictionary = lambda outs: {"syncs": per_run(outs["rounds"]),  # noqa: E731
                               "largest dictionary": float(np.max(outs["diag/dict_size"]))}
    return [
        Case("DisLinUCB", "async", built("dis_lin_ucb", lam=1.0, alpha=1.0), dis_lin_factors),
        Case("FedGLB-UCB", "async", built("fed_glb_ucb", lam=1.0, alpha=1.0), fed_glb_factors, extras=converged),
        Case("Async-KernelUCB", "async", built("async_kernel_ucb", q=1.0, dict_capacity=ASYNC_CAPACITY, **kern),
             async_kernel_factors, extras=dictionary),
        Case("Approx-DisKernelUCB", "async",
             built("approx_dis_kernel_ucb", q=1.0, dict_capacity=APPROX_CAPACITY, **kern), approx_dis_factors,
             extras=dictionary),
    ]


# ------------------------------------------------------------------------------------ DUETS
DUETS_PROBLEM = dict(num_agents=4, num_candidates=500)
DUETS_OPTIONS = dict(first_epoch=2, lam=0.2, lengthscale=1.0)


def duets_factors(horizon: int):
    """counts and sums against the recorded queries and rewards of the open epoch (the steps since
    the last epoch end; none right after one)."""
    sched = epoch_schedule(horizon, DUETS_OPTIONS["first_epoch"])
    ends = [s + n for s, n in zip(sched.starts[:-1], sched.steps[:-1])]

    def factors(state, h: History, params):
        del params
        t = h.actions.shape[0]
        start = max([0] + [e for e in ends if e <= t])
        M = state.counts.shape[0]
        ids, r = h.actions[start:][h.active[start:]], h.rewards[start:][h.active[start:]].astype(np.float64)
        return {"counts": drift(state.counts, np.bincount(ids, minlength=M)),
                "sums": drift(state.sums, np.bincount(ids, weights=r, minlength=M))}

    return factors


def duets_extras(outs) -> dict:
    """Per run, means: the candidates still active after the last trim, whether the best candidate
    survived every trim, and the epoch counts that the server's regeneration did not reproduce."""
    ends = outs["rounds"] > 0  # [S, T]
    active = [a[e][-1] if e.any() else DUETS_PROBLEM["num_candidates"]
              for a, e in zip(outs["diag/active_after"], ends)]
    kept = [np.all(b[e] > 0) for b, e in zip(outs["diag/best_survived"], ends)]
    return {"active at the end": float(np.mean(active)), "best kept": float(np.mean(kept)),
            "regen_mismatch": per_run(outs["diag/regen_mismatch"])}


def duets_cases(horizon: int) -> list:
    """DUETS, built for `horizon` steps (its epoch plan depends on it)."""

    def build(T):
        return make_problem("duets-h1", horizon=T, **DUETS_PROBLEM), make_algorithm("duets", horizon=T, **DUETS_OPTIONS)

    return [Case("DUETS", "duets", build, duets_factors(horizon), extras=duets_extras)]


# ------------------------------------------------------------------------------------ Coop
COOP_PROBLEM = dict(num_agents=6, num_arms=8, dim=5, p=0.7, graph="er")


def coop_factors(state, h: History, params):
    """The prefix sums after t rounds (ring slot t mod R) against the recorded contexts and rewards:
    G_u = sum x x^T, h_u = sum y x, f_u = sum x over agent u's t rounds."""
    del params
    store = state.store
    t = h.actions.shape[0]
    slot = t % store.G.shape[0]
    X, y = np.asarray(h.chosen, np.float64), np.asarray(h.rewards, np.float64)
    V = X.shape[1]
    return {"G": worst(drift(store.G[slot, u], X[:, u].T @ X[:, u]) for u in range(V)),
            "h": worst(drift(store.h[slot, u], y[:, u] @ X[:, u]) for u in range(V)),
            "f": worst(drift(store.f[slot, u], X[:, u].sum(0)) for u in range(V))}


def coop_cases() -> list:
    """Coop-KernelUCB and OFUL in the feature storage."""

    def built(name):
        return lambda T: (make_problem("coop-linear", horizon=T, **COOP_PROBLEM),
                          make_algorithm(name, storage="feature"))

    return [Case("Coop-KernelUCB", "coop", built("coop_kernel_ucb"), coop_factors),
            Case("OFUL", "coop", built("oful"), coop_factors)]


def cases(horizon: int) -> list:
    """Every case of the section, family by family (module docstring)."""
    return fnucb_cases() + async_cases() + duets_cases(horizon) + coop_cases()


# ------------------------------------------------------------------------------------ one run
def world_steps(problem, length: int):
    """The world of `length` steps from t0 for a batch of runs, drawn as the runner draws it
    (`runner.make_step`): (instance, problem_key [S], t0) -> (contexts [L, S, N, K, d], means and
    rewards [L, S, N, K], active [L, S, N])."""
    spec = problem.spec

    def one(instance, problem_key, t):
        k_ctx, k_rew, k_act = problem_step_keys(problem_key, t)
        contexts = problem.contexts(instance, t, k_ctx)
        means = problem.mean_reward(instance, t, contexts)
        rewards = problem.sample_rewards(instance, means, k_rew)
        active = jnp.ones((spec.num_agents,), bool) if problem.active is None else problem.active(instance, t, k_act)
        return contexts, means, rewards, active

    def world(instance, problem_key, t0):
        steps = t0 + jnp.arange(length, dtype=jnp.int32)
        return jax.vmap(lambda t: jax.vmap(one, in_axes=(0, 0, None))(instance, problem_key, t))(steps)

    return jax.jit(world)


def algorithm_steps(problem, algorithm, probe, length: int):
    """`length` steps of a batch of runs on a given world: (params [S], state [S], algorithm keys [S],
    t0, contexts, means, rewards, active as `world_steps` gives them) -> (state, outputs [L, S, ...]):
    actions, chosen contexts, observed rewards, error bits, rounds, diagnostics and the probe's
    record. Each step is the runner's `act`."""
    spec = problem.spec

    def one(params, state, algorithm_key, t, contexts, means, rewards, active):
        here = Step(t, contexts, active, spec.one_active)
        new, actions, _, _, rep = act(algorithm, params, state, here, means, rewards, algorithm_key)
        outs = {"actions": actions, "errors": rep.errors, "rounds": jnp.asarray(rep.rounds, means.dtype),
                "chosen": jnp.take_along_axis(contexts, actions[:, None, None], axis=1)[:, 0, :],
                "rewards": jnp.take_along_axis(rewards, actions[:, None], axis=1)[:, 0]}
        outs.update({f"diag/{k}": v for k, v in rep.diagnostics.items()})
        if probe is not None:
            outs["probe"] = probe(params, state, here, actions)
        return new, outs

    def run(params, state, algorithm_key, t0, contexts, means, rewards, active):
        def body(st, x):
            t, ctx, mu, rew, act_ = x
            return jax.vmap(one, in_axes=(0, 0, 0, None, 0, 0, 0, 0))(params, st, algorithm_key, t, ctx, mu, rew, act_)

        steps = t0 + jnp.arange(length, dtype=jnp.int32)
        return jax.lax.scan(body, state, (steps, contexts, means, rewards, active))

    return jax.jit(run)


def checkpoint_times(horizon: int, count: int = CHECKPOINTS) -> list:
    """count evenly spaced times in (0, horizon], the last one the horizon (fewer when T is small)."""
    return sorted({max(1, round(horizon * (k + 1) / count)) for k in range(count)})


def segment_sizes(algorithm, spec, t_end: int) -> Sizes:
    """The buffers of the steps up to t_end, as the runner sizes a segment ending there
    (`runner.first_sizes`): time-grown rows for t_end, demand-sized rows min(those rows, their limit),
    which the demand of these cases (at most one row a step) never passes."""
    if algorithm.sizing is None:
        return Sizes()
    return first_sizes(algorithm, algorithm.sizing.rows(spec, t_end))


def chunks(start: int, stop: int, most: int = WORLD_CHUNK) -> list:
    """[start, stop) cut into near-equal (first, length) pieces of at most `most` steps."""
    pieces = -(-(stop - start) // most)
    bounds = [start + round(k * (stop - start) / pieces) for k in range(pieces + 1)]
    return [(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]


def run_case(case: Case, horizon: int, precision: str, seeds=(SEED,)) -> dict:
    """The runs of `case` over `horizon` steps in `precision`, one per seed, as ONE vmap over the seeds
    (the runner's batching): its health row (module docstring).

    Both precisions run on the SAME world: each seed's instance, contexts, means and rewards, and the
    algorithm's initial state (its prior, its initial network), are drawn in float64 with the runner's
    keys and handed to a float32 run rounded to float32, so the two precisions differ only by the
    algorithm's arithmetic and its own draws (tie noise, sampling). In float64 these are the runner's
    numbers. Regret is measured on the float64 means. Drifts are the largest over the seeds and the
    checkpoints; non-finite counts and error bits are summed and ORed over the seeds."""
    problem, algorithm = case.build(horizon)
    spec = problem.spec
    S = len(seeds)
    times = checkpoint_times(spec.horizon)
    t_start = time.perf_counter()
    with precision_scope("float64"):
        params64 = {k: jnp.full((S,), v) for k, v in algorithm.defaults.items()}
        start = jax.vmap(run_start(problem, algorithm, 0, segment_sizes(algorithm, spec, times[0])))
        pk, ak, instance, state = jax.device_get(jax.jit(start)(jnp.asarray(seeds, jnp.uint32), params64))
    with precision_scope(precision):
        dtype = np.dtype(jnp.zeros(()).dtype)
        params = {k: jnp.asarray(np.asarray(v, dtype)) for k, v in params64.items()}
        state = jax.tree_util.tree_map(lambda x: jnp.asarray(_cast(x, dtype)), state)
        parts, checks, done, compiled = [], [], 0, {}
        for t in times:
            if done and algorithm.sizing is not None:
                sizes = segment_sizes(algorithm, spec, t)
                state = jax.jit(jax.vmap(lambda p, st: algorithm.sizing.resize(p, st, sizes)))(params, state)
            for first, length in chunks(done, t):
                if length not in compiled:
                    compiled[length] = (world_steps(problem, length),
                                        algorithm_steps(problem, algorithm, case.probe, length))
                world, steps = compiled[length]
                with precision_scope("float64"):
                    ctx, means, rewards, active = jax.device_get(world(instance, pk, first))
                state, outs = steps(
                    params, state, ak, jnp.int32(first), *(jnp.asarray(_cast(x, dtype)) for x in (ctx, means, rewards)),
                    jnp.asarray(active))
                outs = jax.device_get(outs)
                outs["regret"] = _regret(means, outs["actions"], active)
                outs["active"] = active
                parts.append({k: np.moveaxis(v, 0, 1) for k, v in outs.items()})  # [S, L, ...]
            done = t
            host = jax.tree_util.tree_map(_host, jax.device_get(state))
            per_seed = [case.factors(jax.tree_util.tree_map(lambda x: x[s], host), _history(parts, s),
                                     {k: float(v[s]) for k, v in params64.items()}) for s in range(S)]
            checks.append({"t": t, **{k: max(f[k] for f in per_seed) for k in per_seed[0]}})
    seconds = time.perf_counter() - t_start
    outs = {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]}
    regret = outs["regret"]  # [S, T, N]
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.device_get(state))]
    errors = [int(e) for e in np.bitwise_or.reduce(outs["errors"].astype(np.int64), axis=1)]
    finals = np.sum(regret.mean(axis=2), axis=1)
    names = [k for k in checks[0] if k != "t"]
    return dict(
        algorithm=case.name, family=case.family, precision=precision, horizon=spec.horizon,
        num_agents=spec.num_agents, seeds=list(seeds), seconds=seconds,
        nonfinite_regret=int(np.sum(~np.isfinite(regret))),
        nonfinite_state=int(sum(np.sum(~np.isfinite(x)) for x in leaves if np.issubdtype(x.dtype, np.floating))),
        errors=int(np.bitwise_or.reduce(errors)), errors_per_seed=errors,
        error_text=describe_errors(algorithm, int(np.bitwise_or.reduce(errors))) if any(errors) else "",
        drift={k: max(c[k] for c in checks) for k in names}, checkpoints=checks,
        final_regret=[float(x) for x in finals], final_regret_mean=float(np.mean(finals)),
        final_regret_se=float(np.std(finals, ddof=1) / np.sqrt(S)) if S > 1 else 0.0,
        extras=case.extras(outs) if case.extras else {},
    )


def _regret(means, actions, active):
    """[L, S, N] pseudo-regret in float64 of actions [L, S, N] on means [L, S, N, K], 0 where inactive."""
    chosen = np.take_along_axis(means, actions[..., None], axis=-1)[..., 0]
    return np.where(active, means.max(axis=-1) - chosen, 0.0)


def _cast(x, dtype):
    """A float array as `dtype` (rounded); any other array as it is."""
    x = np.asarray(x)
    return x.astype(dtype) if np.issubdtype(x.dtype, np.floating) else x


def _history(parts, s: int) -> History:
    """Seed s's History over the parts [S, t, ...] run so far."""
    def cat(k):
        return np.concatenate([p[k][s] for p in parts]) if k in parts[0] else None

    return History(cat("actions"), cat("chosen"), cat("rewards"), cat("active").astype(bool), cat("probe"))


def _host(x):
    """A state leaf on the host: floats as float64, the rest as they are."""
    x = np.asarray(x)
    return x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x


# ------------------------------------------------------------------------------------ verdicts
def verdicts(rows: list) -> list:
    """Per family: whether float32 holds (module docstring), with the reasons where it does not."""
    out = []
    for family in FAMILIES:
        pairs = {}
        for r in rows:
            if r["family"] == family:
                pairs.setdefault(r["algorithm"], {})[r["precision"]] = r
        if not pairs:
            continue
        reasons = []
        for name, by in pairs.items():
            if set(by) != set(PRECISIONS):
                reasons.append(f"{name}: not run in both precisions")
                continue
            f32, f64 = by["float32"], by["float64"]
            if f32["nonfinite_regret"] or f32["nonfinite_state"] > f64["nonfinite_state"]:
                reasons.append(f"{name}: non-finite values")
            if f32["errors"] & ~f64["errors"]:
                reasons.append(f"{name}: error bits {f32['errors'] & ~f64['errors']:#x} ({f32['error_text']})")
            for factor, value in f32["drift"].items():
                if not value < DRIFT_TOL:
                    reasons.append(f"{name}: {factor} drift {value:.2g} >= {DRIFT_TOL:g}")
            if not regret_holds(f32, f64):
                reasons.append(f"{name}: final regret {regret_gap(f32, f64):+.1%} from float64's, "
                               f"{regret_z(f32, f64):.1f} standard errors")
        out.append(dict(family=family, holds=not reasons, algorithms=list(pairs), reasons=reasons))
    return out


def regret_gap(f32: dict, f64: dict) -> float:
    """(R_32 - R_64) / |R_64| of the mean final cumulative regrets over the seeds."""
    a, b = f32["final_regret_mean"], f64["final_regret_mean"]
    return (a - b) / max(abs(b), 1e-12)


def regret_z(f32: dict, f64: dict) -> float:
    """The mean over seeds of the paired differences R_32 - R_64 (same seed, same world) over its
    standard error, in absolute value (inf where it has none, or a regret is not finite)."""
    d = np.asarray(f32["final_regret"]) - np.asarray(f64["final_regret"])
    if not np.all(np.isfinite(d)):
        return math.inf
    se = float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0
    mean = abs(float(np.mean(d)))
    return mean / se if se > 0 else (0.0 if mean == 0 else math.inf)


def regret_holds(f32: dict, f64: dict) -> bool:
    """Whether float32's mean final regret is within REGRET_TOL (relative) of float64's, or its paired
    difference within REGRET_Z standard errors of zero."""
    return abs(regret_gap(f32, f64)) <= REGRET_TOL or regret_z(f32, f64) <= REGRET_Z


# ------------------------------------------------------------------------------------ section
def horizon_of(args) -> int:
    """T of the section: --precision-horizon, else QUICK_HORIZON with --quick, else FULL_HORIZON."""
    given = getattr(args, "precision_horizon", None)
    if given is not None:
        return int(given)
    return QUICK_HORIZON if args.quick else FULL_HORIZON


def run_section(args, only=None) -> dict | None:
    """{"horizon", "seeds", "rows", "verdicts", ...} of every case (or those named in `only`); None when
    the section is not selected."""
    if not harness.selected(args, NAMES):
        return None
    T = horizon_of(args)
    seeds = tuple(range(QUICK_SEEDS if args.quick else FULL_SEEDS))
    rows = []
    for case in cases(T):
        if only is not None and case.name not in only:
            continue
        horizon = min(T, case.horizon_cap) if case.horizon_cap else T
        for precision in PRECISIONS:
            log(f"[precision] {case.name} {precision}, T = {horizon}, {len(seeds)} seeds ...")
            row = run_case(case, horizon, precision, seeds)
            log(f"[precision] {case.name} {precision}: {row['seconds']:.1f} s, drift "
                + ", ".join(f"{k} {v:.2g}" for k, v in row["drift"].items())
                + f", regret {row['final_regret_mean']:.4g} +- {row['final_regret_se']:.2g}")
            rows.append(row)
    return dict(horizon=T, exact_kernel_horizon=EXACT_KERNEL_HORIZON, seeds=list(seeds), checkpoints=CHECKPOINTS,
                thresholds=dict(drift=DRIFT_TOL, regret=REGRET_TOL, regret_z=REGRET_Z), rows=rows,
                verdicts=verdicts(rows))


def table(section: dict) -> str:
    """Markdown: one row per (algorithm, precision), then the verdict per family."""
    T, S = section["horizon"], len(section["seeds"])
    lines = [f"float32 health: T = {T} (KernelUCB: T = {min(T, section['exact_kernel_horizon'])}), seeds "
             f"0..{S - 1}; drift = the factor's largest relative drift from a fresh float64 one (over seeds and "
             f"{section['checkpoints']} checkpoints); final regret = mean over seeds +- standard error",
             "", "| family | algorithm | precision | T | non-finite (regret, state) | error bits | drift per factor | "
             "final regret | vs float64 |", "|---|---|---|---|---|---|---|---|---|"]
    by = {(r["algorithm"], r["precision"]): r for r in section["rows"]}
    for r in section["rows"]:
        other = by.get((r["algorithm"], "float64"))
        gap = "-" if r["precision"] == "float64" or other is None else \
            f"{regret_gap(r, other):+.1%} ({regret_z(r, other):.1f} SE)"
        factors = ", ".join(f"{k} {v:.1e}" for k, v in r["drift"].items())
        extras = "; ".join(f"{k} {v:.4g}" for k, v in r["extras"].items())
        lines.append(f"| {r['family']} | {r['algorithm']} | {r['precision']} | {r['horizon']} | "
                     f"{r['nonfinite_regret']}, {r['nonfinite_state']} | {r['errors']:#x} | {factors}"
                     f"{' (' + extras + ')' if extras else ''} | {r['final_regret_mean']:.4g} +- "
                     f"{r['final_regret_se']:.2g} | {gap} |")
    th = section["thresholds"]
    lines += ["", f"Verdicts (float32 holds: no non-finite value or error bit that float64 does not have, every "
              f"drift < {th['drift']:g}, mean final regret within {th['regret']:.0%} of float64's or its paired "
              f"difference within {th['regret_z']:g} standard errors of zero):", ""]
    for v in section["verdicts"]:
        word = "holds" if v["holds"] else "does not hold"
        lines.append(f"- {v['family']}: float32 {word}" + (f" ({'; '.join(v['reasons'])})" if v["reasons"] else ""))
    return "\n".join(lines)


def standard_error_notes(section: dict) -> str:
    """Markdown: each case whose final regret passes the verdict's regret rule by its paired-standard-error
    clause alone (float32's mean more than the relative tolerance from float64's), with the gap and z."""
    th = section["thresholds"]
    by = {(r["algorithm"], r["precision"]): r for r in section["rows"]}
    lines = []
    for r in section["rows"]:
        f64 = by.get((r["algorithm"], "float64"))
        if r["precision"] == "float64" or f64 is None or abs(regret_gap(r, f64)) <= th["regret"]:
            continue
        gap, z, holds = regret_gap(r, f64), regret_z(r, f64), regret_holds(r, f64)
        lines.append(f"- {r['algorithm']}: float32's mean final regret is {abs(gap):.1%} "
                     f"{'below' if gap < 0 else 'above'} float64's, about {z:.1f} paired standard errors from "
                     f"zero: {'inside' if holds else 'outside'} the {th['regret_z']:g}-standard-error rule, so the "
                     f"rule's verdict is \"{'holds' if holds else 'does not hold'}\".")
    if not lines:
        return f"Every float32 mean final regret is within {th['regret']:.0%} of float64's."
    return "\n".join([f"Beyond {th['regret']:.0%} of float64's mean final regret, and so judged by the paired "
                      "differences alone:", ""] + lines)
