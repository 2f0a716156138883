"""CoPE-KB (Du, Kuroki and Huang, ICLR 2023): CoKernelFC, CoKernelFB and their ablations and
elimination baselines, as phase-level trials (`core.Trial`) on the `cope-kb` world (spec cope-kb §3-5).

Fixed confidence (FC), round r = 1, 2, ...: a design lam over the alive within-agent pairs, N^(r) =
max(ceil(32 4^r (1+eps)^2 rho_r log(2 n^2 V / delta_r)), ceil(d(xi, lam)/eps^2)), delta_r = delta/(2r^2)
[P, I]; ROUND(lam, N^(r)) (Pukelsheim), one pull of all agents, a ridge estimate from this round only
(regulariser N^(r) xi) [P], and x leaves B_v when max_{B_v} Fhat - Fhat(x) >= 2^-r [P].
Fixed budget (FB): R = ceil(log2 omega(xi, Xt)), N = floor(T V / R); each round the design, ROUND(lam, N),
the estimate, then each agent keeps the longest prefix of its alive set sorted by Fhat whose omega is at
most (1 + 1e-3) omega(B_v) / 2 [P, D]; after R rounds a non-singleton answers argmax Fhat [D].
Each trial is composed from shared pieces: an allocation (the global design over all nV pairs, or a
local one per agent on its own arms), an estimator (shared over all pairs, or each agent's own data),
a sample-size rule (the paper's, or the RAGE code's [R]), an elimination rule (the fixed threshold
2^-r, or the RAGE code's default confidence width) and, for FB, a schedule and a halving table:

    cokernel_fc, cokernel_ind_alloc, ind_rage, ind_rage_code(_threshold)  FC  (spec §3, §5.1, §5.2)
    cokernel_fb, cokernel_fb_ind_alloc, ind_peace_fb(_omega)         FB  (spec §4, §5.5, §5.6)
    ind_uniform_fb(_means)                                           FB  (spec §5.7)
IndALBA and IndPolyALBA live in `cope_kb_alba`. Ind* baselines never communicate. The omega and
gamma halving tables are the world's (`problems.cope`, spec §6.5 cache).
Randomness: sampling step s (= round r here) pulls with `pull(counts, fold_in(key, s))`.
Outputs: answer [V], samples (all samples / V), rounds, scalars (2n per agent per communication
round), and for FB budget_used (the fraction of T V spent). float64 only.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ...core import ConfigError, Outcome, Trial
from ...kernels import design
from ..base import check_capacity, signed_params

FC_SIGNS = {"delta": "probability", "xi": "positive", "eps": "positive"}
FB_SIGNS = {"budget": "positive", "xi": "positive"}
FC_OUTCOMES = {
    "correct": Outcome("rate", "every agent named its best arm"),
    "samples": Outcome("mean", "per-agent sample complexity: all agents' samples / V"),
    "rounds": Outcome("mean", "sampling rounds until the last agent stopped (communication rounds of the "
                              "collaborative algorithms)"),
    "scalars": Outcome("mean", "scalars broadcast, all agents together (2n per agent and round)"),
}
FB_OUTCOMES = {**FC_OUTCOMES, "samples": Outcome("mean", "budget spent per agent: all agents' samples / V"),
               "budget_used": Outcome("mean", "fraction of the total budget T V spent")}
MAX_ROUNDS = 1       # error bit: some agent still held two arms after max_rounds rounds (FC)
HALVING_TOL = 1e-3   # keep a prefix whose omega is within (1 + tol) of half (the exact tie at 6 = 12/2)


class World(NamedTuple):
    """What a trial reads of the world: K [nV, nV], its agent blocks [V, n, n], and the public tables."""

    K: jax.Array
    blocks: jax.Array
    public: dict
    V: int
    n: int


def world(name: str, arms, public) -> World:
    """The trial's view of `cope-kb`, refused (ConfigError, while tracing) without float64 or the tables."""
    if public is None or "gram" not in public:
        raise ConfigError(f"{name} runs on the cope-kb world (its public Gram matrix and tables), not {arms.name}")
    if public["gram"].dtype != jnp.float64:
        raise ConfigError(f"{name} needs float64 (xi ~ 1e-10 puts condition numbers near 1e10): run with "
                          f"precision 'float64' (the default), not {public['gram'].dtype}")
    V, n = arms.num_agents, arms.num_arms
    idx = jnp.arange(V * n).reshape(V, n)
    return World(public["gram"], public["gram"][idx[:, :, None], idx[:, None, :]], public, V, n)


# ----------------------------------------------------------------------------------- fixed confidence
def fc_trial(name: str, description: str, *, allocate: Callable, estimate: Callable, communicates: bool,
             declared: dict, max_rounds: int, eliminate: Callable = None) -> Trial:
    """A fixed-confidence elimination trial from its pieces (module docstring); `eliminate(w, params,
    alive, fhat, counts, r) -> alive` is the round's elimination rule (`threshold_elimination` when None)."""
    eliminate = eliminate or threshold_elimination

    def run(key, params, arms, public, pull):
        w = world(name, arms, public)

        def going(s):
            return (s["r"] < max_rounds) & jnp.any(s["alive"].sum(1) > 1)

        def one_round(s):
            r = s["r"] + 1
            alive = s["alive"]
            counts = allocate(w, params, alive, alive.sum(1) > 1, r)
            sums = pull(counts, jax.random.fold_in(key, r))
            fhat = estimate(w, counts, sums, params["xi"])
            keep = eliminate(w, params, alive, fhat, counts, r)
            return {"r": r, "alive": keep, "fhat": fhat, "total": s["total"] + counts.sum()}

        start = {"r": jnp.asarray(0), "alive": jnp.ones((w.V, w.n), bool), "fhat": jnp.zeros((w.V, w.n)),
                 "total": jnp.asarray(0, jnp.int64)}
        end = lax.while_loop(going, one_round, start)
        errors = jnp.where(jnp.any(end["alive"].sum(1) > 1), MAX_ROUNDS, 0).astype(jnp.int32)
        return outputs(w, end, communicates, errors)

    return Trial(name, declared, run, FC_OUTCOMES, description=description,
                 errors={MAX_ROUNDS: f"some agent kept two or more arms after max_rounds = {max_rounds} rounds; "
                                     f"raise max_rounds"})


def threshold_elimination(w: World, params, alive, fhat, counts, r):
    """x leaves B_v when max_{B_v} Fhat - Fhat(x) >= 2^-r [P] (the RAGE code's var=False rule too)."""
    del w, params, counts
    best = jnp.max(jnp.where(alive, fhat, -jnp.inf), axis=1, keepdims=True)
    return alive & (best - fhat < 2.0 ** -r.astype(fhat.dtype))


def variance_elimination(w: World, params, alive, fhat, counts, r):
    """The RAGE code's var=True rule [R], the one its authors run: x leaves B_v when some alive x' has
    sqrt(2 ||phi_x' - phi_x||^2_{A^-1} log(2 n^2 / delta_k)) <= Fhat(x') - Fhat(x), with A = sum_x c_x
    phi_x phi_x^T + N xi I this round's design matrix (the ridge limit of the code's pinv, as the
    estimate) and delta_k = (delta / V) / k^2."""
    delta_k = params["delta"] / w.V / r.astype(fhat.dtype) ** 2
    width = 2.0 * jnp.log(2.0 * w.n ** 2 / delta_k)

    def agent(K_v, c, f, a):
        total = jnp.maximum(c.sum(), 1).astype(f.dtype)
        norms = design.pair_norms(design.design_gram(K_v, c.astype(f.dtype) / total, params["xi"])) / total
        others = a[:, None] & ~jnp.eye(w.n, dtype=bool)  # [x', x]: x' alive and not x itself
        beaten = others & (jnp.sqrt(width * norms) <= f[:, None] - f[None, :])
        return a & ~jnp.any(beaten, axis=0)

    return jax.vmap(agent)(w.blocks, counts, fhat, alive)


def paper_size(w: World, params, rho, lam, K, r):
    """N^(r) of CoKernelFC line 5 [P]: max(ceil(32 4^r (1+eps)^2 rho log(2 n^2 V / delta_r)), tau),
    delta_r = delta / (2 r^2), tau = ceil(d(xi, lam) / eps^2)."""
    rf = r.astype(rho.dtype)
    delta_r = params["delta"] / (2.0 * rf ** 2)
    main = 32.0 * 4.0 ** rf * (1.0 + params["eps"]) ** 2 * rho * jnp.log(2.0 * w.n ** 2 * w.V / delta_r)
    tau = jnp.ceil(design.effective_count(K, lam, params["xi"]) / params["eps"] ** 2)
    return jnp.maximum(jnp.ceil(main), tau).astype(jnp.int64)


def rage_code_size(w: World, params, rho, lam, K, r):
    """N_k of the RAGE authors' code [R]: max(ceil(8 4^(k-1) rho (1+eps) log(2 n^2 / delta_k)),
    ceil(2 |supp lam| / eps)), delta_k = (delta / V) / k^2."""
    del K
    kf = r.astype(rho.dtype)
    delta_k = params["delta"] / w.V / kf ** 2
    main = 8.0 * 4.0 ** (kf - 1.0) * rho * (1.0 + params["eps"]) * jnp.log(2.0 * w.n ** 2 / delta_k)
    support = jnp.sum(lam > design.SUPPORT_TOL)
    return jnp.maximum(jnp.ceil(main), jnp.ceil(2.0 * support / params["eps"])).astype(jnp.int64)


def global_allocation(size: Callable, iters: int) -> Callable:
    """The collaborative allocation [P]: one design over all nV pairs for every alive within-agent pair,
    N^(r) from `size`, rounded over all pairs."""

    def allocate(w, params, alive, busy, r):
        del busy
        lam, rho = design.xy_design(w.K, params["xi"], global_pairs(w, alive), jnp.ones(w.V * w.n, bool), iters=iters)
        total = size(w, params, rho, lam, w.K, r)
        return design.round_counts(lam, total).reshape(w.V, w.n)

    return allocate


def local_allocation(size: Callable, iters: int) -> Callable:
    """Each agent with two or more alive arms designs over its own arms for its own pairs and samples
    N_v^(r) from `size`; finished agents sample nothing (spec §5.1, §5.2)."""

    def allocate(w, params, alive, busy, r):
        def one(K_v, alive_v):
            lam, rho = design.xy_design(K_v, params["xi"], local_pairs(alive_v), jnp.ones(w.n, bool), iters=iters)
            return design.round_counts(lam, size(w, params, rho, lam, K_v, r))

        return jnp.where(busy[:, None], jax.vmap(one)(w.blocks, alive), 0)

    return allocate


def shared_estimate(w: World, counts, sums, xi):
    """Fhat [V, n] from every pair's count and mean of this round, over all nV pairs [P, Eq. 12]."""
    means = sums / jnp.maximum(counts, 1)
    return design.ridge_estimate(w.K, counts.reshape(-1), means.reshape(-1), xi).reshape(w.V, w.n)


def own_estimate(w: World, counts, sums, xi):
    """Fhat [V, n], each agent's from its own data only (an agent without data gets zeros)."""
    sampled = counts.sum(1) > 0
    safe = jnp.where(sampled[:, None], counts, 1)
    means = jnp.where(sampled[:, None], sums / jnp.maximum(counts, 1), 0.0)
    fhat = jax.vmap(lambda K_v, c, m: design.ridge_estimate(K_v, c, m, xi))(w.blocks, safe, means)
    return jnp.where(sampled[:, None], fhat, 0.0)


def means_estimate(w: World, counts, sums, xi):
    """Fhat [V, n]: per-arm empirical means (0 for an arm without samples)."""
    del w, xi
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1), 0.0)


def global_pairs(w: World, alive):
    """[nV, nV] pairs mask: same agent & alive_i & alive_j & i < j."""
    flat = alive.reshape(-1)
    agent = jnp.repeat(jnp.arange(w.V), w.n)
    i = jnp.arange(w.V * w.n)
    return (agent[:, None] == agent[None, :]) & flat[:, None] & flat[None, :] & (i[:, None] < i[None, :])


def local_pairs(alive_v):
    """[n, n] pairs mask of one agent: alive_i & alive_j & i < j."""
    i = jnp.arange(alive_v.shape[0])
    return alive_v[:, None] & alive_v[None, :] & (i[:, None] < i[None, :])


def outputs(w: World, end: dict, communicates: bool, errors, budget=None) -> dict:
    """The trial's output dict (module docstring); the answer is argmax Fhat over the alive set."""
    total = end["total"].astype(jnp.float64)
    out = {"answer": jnp.argmax(jnp.where(end["alive"], end["fhat"], -jnp.inf), axis=1),
           "samples": total / w.V, "rounds": end["r"],
           "scalars": (2 * w.n * w.V * end["r"] if communicates else 0 * end["r"]).astype(jnp.float64),
           "errors": errors}
    if budget is not None:
        out["budget_used"] = total / (budget * w.V)
    return out


# ----------------------------------------------------------------------------------- FC factories
def _fc(name, description, *, allocation, size, estimate, communicates, delta, xi, eps, iters, max_rounds,
        eliminate=None):
    check_capacity(name, "iters", iters)
    check_capacity(name, "max_rounds", max_rounds)
    declared = signed_params(name, FC_SIGNS, {"delta": delta, "xi": xi, "eps": eps})
    return fc_trial(name, description, allocate=allocation(size, iters), estimate=estimate,
                    communicates=communicates, declared=declared, max_rounds=max_rounds, eliminate=eliminate)


def cokernel_fc(delta: float = 0.005, xi: float = 1e-10, eps: float = 0.1, iters: int = 2000,
                max_rounds: int = 40) -> Trial:
    """CoKernelFC (Algorithm 1), fixed-confidence elimination on one global design and shared data."""
    return _fc("CoKernelFC", "CoKernelFC: collaborative fixed-confidence elimination, global design (Alg. 1)",
               allocation=global_allocation, size=paper_size, estimate=shared_estimate, communicates=True,
               delta=delta, xi=xi, eps=eps, iters=iters, max_rounds=max_rounds)


def cokernel_ind_alloc(delta: float = 0.005, xi: float = 1e-10, eps: float = 0.1, iters: int = 2000,
                       max_rounds: int = 40) -> Trial:
    """CoKernel-IndAlloc: CoKernelFC with each agent's locally optimal allocation and N_v (spec §5.1)."""
    return _fc("CoKernel-IndAlloc", "CoKernelFC with local per-agent designs and sample sizes, shared estimate",
               allocation=local_allocation, size=paper_size, estimate=shared_estimate, communicates=True,
               delta=delta, xi=xi, eps=eps, iters=iters, max_rounds=max_rounds)


def ind_rage(delta: float = 0.005, xi: float = 1e-10, eps: float = 0.1, iters: int = 2000,
             max_rounds: int = 40) -> Trial:
    """IndRAGE: V independent RAGE copies with CoKernelFC's constants (delta/V each), no communication."""
    return _fc("IndRAGE", "V independent RAGE copies, CoKernelFC's constants (spec §5.2 default); no communication",
               allocation=local_allocation, size=paper_size, estimate=own_estimate, communicates=False,
               delta=delta, xi=xi, eps=eps, iters=iters, max_rounds=max_rounds)


def ind_rage_code(delta: float = 0.005, xi: float = 1e-10, eps: float = 0.1, iters: int = 2000,
                  max_rounds: int = 40) -> Trial:
    """IndRAGE-code, V independent RAGE copies as the RAGE authors' code runs them, its default var=True
    elimination included (spec §5.2 [R]; `variance_elimination`)."""
    return _fc("IndRAGE-code", "V independent RAGE copies as the RAGE code runs them: its sample sizes (8 4^(k-1) "
                               "rho (1+eps) log(2n^2/delta_k), 2|supp|/eps), a ridge limit of its OLS, and its "
                               "default var=True elimination (a confidence width per pair); no communication",
               allocation=local_allocation, size=rage_code_size, estimate=own_estimate, communicates=False,
               delta=delta, xi=xi, eps=eps, iters=iters, max_rounds=max_rounds,
               eliminate=variance_elimination)


def ind_rage_code_threshold(delta: float = 0.005, xi: float = 1e-10, eps: float = 0.1, iters: int = 2000,
                            max_rounds: int = 40) -> Trial:
    """IndRAGE-code-threshold, the RAGE code with its var=False rule, elimination at the fixed threshold
    2^-k (spec §5.2's alternative as the spec writes it out)."""
    return _fc("IndRAGE-code-threshold", "V independent RAGE copies, the RAGE code's sample sizes and its var=False "
                                         "elimination at 2^-k; no communication",
               allocation=local_allocation, size=rage_code_size, estimate=own_estimate, communicates=False,
               delta=delta, xi=xi, eps=eps, iters=iters, max_rounds=max_rounds)


# ----------------------------------------------------------------------------------- fixed budget
class Schedule(NamedTuple):
    """rounds [V] int (R, or R_v) and samples per round [V] int64 of each agent's allocation."""

    rounds: jax.Array
    per_round: jax.Array


def fb_trial(name: str, description: str, *, schedule: Callable, allocate: Callable, estimate: Callable,
             table: str, communicates: bool, declared: dict) -> Trial:
    """A fixed-budget halving trial from its pieces (module docstring); `table` names the world's
    halving table (omega_table, omega_local or gamma_table)."""

    def run(key, params, arms, public, pull):
        w = world(name, arms, public)
        plan = schedule(w, params["budget"])

        def busy(s):
            return (s["r"] < plan.rounds) & (s["alive"].sum(1) > 1)

        def one_round(s):
            r = s["r"] + 1
            going = busy(s)
            counts = allocate(w, params, s["alive"], going, plan)
            sums = pull(counts, jax.random.fold_in(key, r))
            fhat = estimate(w, counts, sums, params["xi"])
            halved = jax.vmap(halve)(w.public[table], s["alive"], fhat)
            return {"r": r, "alive": jnp.where(going[:, None], halved, s["alive"]),
                    "fhat": jnp.where(going[:, None], fhat, s["fhat"]), "total": s["total"] + counts.sum()}

        start = {"r": jnp.asarray(0), "alive": jnp.ones((w.V, w.n), bool), "fhat": jnp.zeros((w.V, w.n)),
                 "total": jnp.asarray(0, jnp.int64)}
        end = lax.while_loop(lambda s: jnp.any(busy(s)), one_round, start)
        return outputs(w, end, communicates, jnp.asarray(0, jnp.int32), params["budget"])

    return Trial(name, declared, run, FB_OUTCOMES, description=description)


def halve(table_v, alive_v, fhat_v):
    """The longest prefix of the alive arms sorted by Fhat (decreasing; ties to the lower index) whose
    table value is at most (1 + HALVING_TOL) table(alive) / 2; table_v [2^n] is indexed by bit masks."""
    n = alive_v.shape[0]
    order = jnp.argsort(jnp.where(alive_v, -fhat_v, jnp.inf), stable=True)
    prefix = jnp.cumsum(jnp.left_shift(1, order))  # bit mask of the first i + 1 arms in that order
    limit = (1.0 + HALVING_TOL) * table_v[bit_mask(alive_v)] / 2.0
    ok = (table_v[prefix] <= limit) & (jnp.arange(n) < alive_v.sum())
    last = jnp.max(jnp.where(ok, jnp.arange(n), 0))
    rank = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    return alive_v & (rank <= last)


def bit_mask(alive_v):
    """The int bit mask of a boolean set (bit a = arm a)."""
    return jnp.sum(jnp.where(alive_v, jnp.left_shift(1, jnp.arange(alive_v.shape[0])), 0))


def collaborative_schedule(w: World, budget) -> Schedule:
    """R = ceil(log2 omega(xi, Xt)) for every agent; N = floor(T V / R) a round, floor(T / R) per agent [P]."""
    R = jnp.ceil(jnp.log2(w.public["omega_all"]) - 1e-9).astype(jnp.int32)
    per_agent = jnp.floor(budget / R).astype(jnp.int64)
    return Schedule(jnp.full(w.V, R), jnp.full(w.V, per_agent))


def agent_schedule(table: str) -> Callable:
    """Each agent alone: R_v = ceil(log2 table_v(Xt_v)), floor(T / R_v) a round (spec §5.6)."""

    def schedule(w: World, budget) -> Schedule:
        full = w.public[table][:, 2 ** w.n - 1]
        R = jnp.ceil(jnp.log2(full) - 1e-9).astype(jnp.int32)
        return Schedule(R, jnp.floor(budget / R).astype(jnp.int64))

    return schedule


def fb_global_allocation(iters: int) -> Callable:
    """CoKernelFB lines 4-5: one design over all nV pairs, ROUND(lam, N) with N = floor(T V / R)."""

    def allocate(w, params, alive, busy, plan):
        del busy
        lam, _ = design.xy_design(w.K, params["xi"], global_pairs(w, alive), jnp.ones(w.V * w.n, bool), iters=iters)
        total = jnp.floor(params["budget"] * w.V / plan.rounds[0]).astype(jnp.int64)
        return design.round_counts(lam, total).reshape(w.V, w.n)

    return allocate


def fb_local_allocation(iters: int) -> Callable:
    """Each busy agent: an XY design over its own arms for its own alive pairs, its per-round samples."""

    def allocate(w, params, alive, busy, plan):
        def one(K_v, alive_v, total):
            lam, _ = design.xy_design(K_v, params["xi"], local_pairs(alive_v), jnp.ones(w.n, bool), iters=iters)
            return design.round_counts(lam, total)

        return jnp.where(busy[:, None], jax.vmap(one)(w.blocks, alive, plan.per_round), 0)

    return allocate


def fb_width_allocation(w, params, alive, busy, plan):
    """Peace's design: the Gaussian-width minimiser of each busy agent's alive set (the world's table)."""
    del params
    lam = w.public["gamma_design"][jnp.arange(w.V), jax.vmap(bit_mask)(alive)]
    counts = jax.vmap(design.round_counts)(lam, plan.per_round)
    return jnp.where(busy[:, None], counts, 0)


def _fb(name, description, *, schedule, allocate, estimate, table, communicates, budget, xi):
    declared = signed_params(name, FB_SIGNS, {"budget": budget, "xi": xi})
    return fb_trial(name, description, schedule=schedule, allocate=allocate, estimate=estimate, table=table,
                    communicates=communicates, declared=declared)


def cokernel_fb(budget: float = 20000.0, xi: float = 1e-10, iters: int = 2000) -> Trial:
    """CoKernelFB (Algorithm 2), R rounds of one global design and omega halving per agent."""
    check_capacity("CoKernelFB", "iters", iters)
    return _fb("CoKernelFB", "CoKernelFB: collaborative fixed-budget halving, global design (Alg. 2)",
               schedule=collaborative_schedule, allocate=fb_global_allocation(iters), estimate=shared_estimate,
               table="omega_table", communicates=True, budget=budget, xi=xi)


def cokernel_fb_ind_alloc(budget: float = 20000.0, xi: float = 1e-10, iters: int = 2000) -> Trial:
    """CoKernelFB-IndAlloc, CoKernelFB with each busy agent's local design of T / R samples (spec §5.5)."""
    check_capacity("CoKernelFB-IndAlloc", "iters", iters)
    return _fb("CoKernelFB-IndAlloc", "CoKernelFB with local per-agent designs, shared estimate, global omega",
               schedule=collaborative_schedule, allocate=fb_local_allocation(iters), estimate=shared_estimate,
               table="omega_table", communicates=True, budget=budget, xi=xi)


def ind_peace_fb(budget: float = 20000.0, xi: float = 1e-10) -> Trial:
    """IndPeaceFB: V independent fixed-budget Peace copies, Gaussian-width designs and halving (spec §5.6)."""
    return _fb("IndPeaceFB", "V independent Peace (fixed budget) copies with the Gaussian width gamma "
                             "(Katz-Samuels et al. 2020); no communication",
               schedule=agent_schedule("gamma_table"), allocate=fb_width_allocation, estimate=own_estimate,
               table="gamma_table", communicates=False, budget=budget, xi=xi)


def ind_peace_fb_omega(budget: float = 20000.0, xi: float = 1e-10, iters: int = 2000) -> Trial:
    """IndPeaceFB-omega: V independent copies of CoKernelFB with V = 1 on each agent's own arms (spec §5.6)."""
    check_capacity("IndPeaceFB-omega", "iters", iters)
    return _fb("IndPeaceFB-omega", "V independent omega-Peace copies (CoKernelFB with V = 1 on own arms); "
                                   "no communication",
               schedule=agent_schedule("omega_local"), allocate=fb_local_allocation(iters), estimate=own_estimate,
               table="omega_local", communicates=False, budget=budget, xi=xi)


def uniform_fb(name: str, description: str, estimate: Callable, budget: float, xi: float) -> Trial:
    """Round-robin: floor(T / n) samples per arm, the remainder to the first arms; one pull, argmax Fhat."""
    declared = signed_params(name, FB_SIGNS, {"budget": budget, "xi": xi})

    def run(key, params, arms, public, pull):
        w = world(name, arms, public)
        T = jnp.floor(params["budget"]).astype(jnp.int64)
        counts = jnp.broadcast_to(T // w.n + (jnp.arange(w.n) < T % w.n), (w.V, w.n))
        fhat = estimate(w, counts, pull(counts, jax.random.fold_in(key, 1)), params["xi"])
        end = {"r": jnp.asarray(1), "alive": jnp.ones((w.V, w.n), bool), "fhat": fhat, "total": counts.sum()}
        return outputs(w, end, False, jnp.asarray(0, jnp.int32), params["budget"])

    return Trial(name, declared, run, FB_OUTCOMES, description=description)


def ind_uniform_fb(budget: float = 20000.0, xi: float = 1e-10) -> Trial:
    """IndUniformFB, T round-robin pulls per agent and a ridge estimate on its own data (spec §5.7)."""
    return uniform_fb("IndUniformFB", "uniform round-robin sampling per agent, kernel ridge estimate on own data",
                      own_estimate, budget, xi)


def ind_uniform_fb_means(budget: float = 20000.0, xi: float = 1e-10) -> Trial:
    """IndUniformFB-means, T round-robin pulls per agent and per-arm empirical means (spec §5.7)."""
    return uniform_fb("IndUniformFB-means", "uniform round-robin sampling per agent, per-arm empirical means",
                      means_estimate, budget, xi)

