"""Plain NumPy CoPE-KB trials (Du, Kuroki, Huang, ICLR 2023), round by round from the spec.

World: V agents with n arms each, pairs agent-major (i = v n + a), Gram K [nV, nV], true means [V, n],
unit Gaussian noise. Randomness comes only from callables: `noise(s) -> z [V, n]` for sampling step s
(sums = counts * means + sqrt(counts) * z) and, for the ALBA types, `draw_counts(s, total [V],
probs [V, n]) -> counts [V, n]` (idle agents ask for total 0 with uniform probs).
Co-algorithms: step s = communication round r. Ind* baselines never communicate: step s is round r
of every agent at once (finished agents pull nothing); ALBA steps run consecutively, in lockstep.
Outputs: "answer" [V], "samples" (total samples / V; FB: budget used per agent), "rounds", FB
"budget_used" (fraction of T V), plus diagnostics ("rounds_log": per round N, rho, alive masks).
- FC (spec 3 [P]): design over all nV pairs for within-agent alive pairs (`fw_design`),
  N_r = max(ceil(32 4^r (1+eps)^2 rho_r log(2 n^2 V / delta_r)), ceil(d(xi, lam)/eps^2)),
  delta_r = delta / (2 r^2) [I]; ROUND; kernel estimate of round r only; drop x when
  max_{x'} Fhat(x') - Fhat(x) >= 2^-r.
- FB (spec 4 [P]): R = ceil(log2 omega(xi, Xt)), N = floor(T V / R); sort each alive set by Fhat
  (ties: lowest index first); keep the longest prefix with omega <= (1 + 1e-3) omega(B) / 2 [D].
- Baselines (spec 5, [P] names, [D]/[R] details): CoKernel-IndAlloc, IndRAGE (matched constants and
  the RAGE code's rule), IndALBA and IndPolyALBA (reconstructions), CoKernelFB-IndAlloc,
  IndPeaceFB (Gaussian width or omega), IndUniformFB (ridge or per-arm means).
Defaults of spec 9: delta 0.005, xi 1e-10, eps 0.1; lowest index wins every tie.
"""
import math

import numpy as np

from .design_np import (all_pairs, design_dimension, fw_design, g_optimal_design, kernel_estimate,
                        min_gaussian_width, minmax_value, pukelsheim_round)

B4 = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1]], float)
GROUPS = {"rank1": (0, 0, 0, 0, 0), "rank2": (0, 0, 1, 1, 1), "rank5": (0, 1, 2, 3, 4)}
HALVING_TOL = 1e-3


def cope_instance(case, gap):
    """Spec 6.1 [P]: (features [5, 6, d], K [30, 30], means [5, 6]); theta*_j = 0.1 + j gap.

    Agent v holds B4 (two-hot vectors of R^4, lexicographic) in coordinate block GROUPS[case][v].
    """
    if case not in GROUPS:
        raise ValueError(f"case must be one of {sorted(GROUPS)}, got {case!r}")
    groups = GROUPS[case]
    d = 4 * (max(groups) + 1)
    features = np.zeros((len(groups), len(B4), d))
    for v, g in enumerate(groups):
        features[v, :, 4 * g:4 * g + 4] = B4
    theta = 0.1 + gap * np.arange(d)
    flat = features.reshape(-1, d)
    return features, flat @ flat.T, features @ theta


# ----------------------------------------------------------------------------- fixed confidence

def cokernel_fc(gram, means, noise, delta=0.005, xi=1e-10, eps=0.1, max_rounds=30):
    """CoKernelFC, Algorithm 1 (spec 3 [P]; delta_r [I]; tau, solver, rounding [D]).

    One central simulation of all agents: global design on all nV pairs, shared estimator,
    per-agent elimination at threshold 2^-r.
    """
    V, n = _check_world(gram, means, delta=delta, xi=xi, eps=eps)
    alive = np.ones(V * n, bool)
    log, total = [], 0
    everywhere = np.ones(V * n, bool)
    for r in range(1, max_rounds + 1):
        lam, rho = fw_design(gram, xi, within_pairs(alive, n), everywhere)
        size = fc_round_size(r, rho, gram, lam, xi, eps, n, V, delta)
        counts = pukelsheim_round(lam, size)
        fhat = kernel_estimate(gram, counts, round_means(means, counts, noise(r)), xi)
        log.append({"N": size, "rho": rho, "alive": alive.copy(), "counts": counts})
        alive = eliminate(fhat, alive, n, 2.0 ** -r)
        total += size
        if finished(alive, n):
            break
    return {"answer": answers(fhat, alive, n), "samples": total / V, "rounds": r, "rounds_log": log}


def cokernel_ind_alloc(gram, means, noise, delta=0.005, xi=1e-10, eps=0.1, max_rounds=30):
    """CoKernel-IndAlloc (spec 5.1 [P] name, [D] details): CoKernelFC with local designs.

    Each unfinished agent solves the design on its own arms for its own alive pairs and samples
    N_v (the FC size formula with its own rho); shared estimator with regulariser (sum_v N_v) xi.
    A design supported on one agent's arms sees only that agent's Gram block (push-through), so the
    local design is solved on the block.
    """
    V, n = _check_world(gram, means, delta=delta, xi=xi, eps=eps)
    alive = np.ones(V * n, bool)
    log, total = [], 0
    for r in range(1, max_rounds + 1):
        counts = np.zeros(V * n, dtype=np.int64)
        for v in range(V):
            own = alive[v * n:(v + 1) * n]
            if own.sum() > 1:
                local = _block(gram, v, n)
                lam, rho = fw_design(local, xi, all_pairs(np.flatnonzero(own)), np.ones(n, bool))
                size = fc_round_size(r, rho, local, lam, xi, eps, n, V, delta)
                counts[v * n:(v + 1) * n] = pukelsheim_round(lam, size)
        fhat = kernel_estimate(gram, counts, round_means(means, counts, noise(r)), xi)
        log.append({"N": int(counts.sum()), "alive": alive.copy(), "counts": counts})
        alive = eliminate(fhat, alive, n, 2.0 ** -r)
        total += int(counts.sum())
        if finished(alive, n):
            break
    return {"answer": answers(fhat, alive, n), "samples": total / V, "rounds": r, "rounds_log": log}


def ind_rage(gram, means, noise, delta=0.005, xi=1e-10, eps=0.1, max_rounds=30):
    """IndRAGE with matched constants (spec 5.2 default [D]): V copies of CoKernelFC with V = 1.

    Each agent uses only its own arms and data; its size keeps log(2 n^2 V / delta_r) (delta / V
    per copy). No communication: "rounds" counts sampling rounds until the last agent stopped.
    """
    V, n = _check_world(gram, means, delta=delta, xi=xi, eps=eps)
    agents = [_fc_agent(_block(gram, v, n), V, delta, xi, eps, max_rounds) for v in range(V)]
    return run_lockstep(agents, means, noise)


def ind_rage_code(features, means, noise, delta=0.005, xi=1e-10, eps=0.1, max_rounds=30, var=True):
    """IndRAGE as the RAGE authors' code runs it (spec 5.2 alternative [R]); var=True (the code's default)
    eliminates by a confidence width per pair, var=False at the fixed threshold 2^-k.

    Phase k: delta_k = (delta / V) / k^2; same design solver; N_k = max(ceil(8 (2^(k-1))^2 rho_k
    (1 + eps) log(2 n^2 / delta_k)), 2 |supp| / eps); ROUND; OLS with pinv on phase k's samples
    (in the agent's own coordinates); drop z when, for an alive z' and y = z' - z, y^T theta >=
    sqrt(2 y^T A_k^+ y log(2 n^2 / delta_k)) (var=True; A_k = sum_x c_x x x^T this phase) or y^T theta
    >= 2^-k (var=False).
    The design is solved on the Gram matrix of the agent's given features (the world's block K_v),
    not on X X^T of the own coordinates: the two are equal, but the SVD leaves ~1e-15 in X X^T that
    xi = 1e-10 amplifies to ~1e-6 in G, which decides exact ties of the Frank-Wolfe step (here
    phi_5 - phi_4 = phi_1 - phi_0, so arms {0, 1} and {4, 5} serve the pair (4, 5) equally well)
    differently from one BLAS kernel to another.
    """
    V, n = _check_features(features, means)
    agents = [_rage_code_agent(own_coordinates(features[v]), features[v] @ features[v].T, delta / V, xi, eps,
                               max_rounds, var) for v in range(V)]
    return run_lockstep(agents, means, noise)


def ind_alba(features, means, noise, draw_counts, delta=0.005, max_steps=400):
    """IndALBA: a reconstruction (spec 5.3 [R]) of ALBA (Tao, Blanco, Zhou 2018) from the constants
    of the public reference implementation used by Fiez et al.; V copies with delta / V each.

    G-optimal design on the arms in span(S), i.i.d. draws, theta = (n_s M)^+ sum x_t y_t, the
    ElimTil_p loops with p = floor(d / 2^r) and the min(err, ERR) confidence width (see `_alba_agent`).
    Each agent works in its own coordinates (d = rank of its arms, 4 here; spec 5, pitfall 11), and
    L = ||theta_v|| is oracle knowledge taken from its true means, as the reference code does.
    """
    return _alba_family(features, means, noise, draw_counts, delta, max_steps, fixed_basis=False)


def ind_poly_alba(features, means, noise, draw_counts, delta=0.005, max_steps=400):
    """IndPolyALBA: a low-confidence reconstruction (spec 5.4 [D]) of PolyALBA (Du, Kuroki, Chen
    2021): IndALBA with one design fixed for the whole run, uniform on a basis of the agent's arms
    (the lowest-index linearly independent ones), reused in every phase."""
    return _alba_family(features, means, noise, draw_counts, delta, max_steps, fixed_basis=True)


# ----------------------------------------------------------------------------- fixed budget

def cokernel_fb(gram, means, noise, budget, xi=1e-10, eps=0.1, tol=HALVING_TOL):
    """CoKernelFB, Algorithm 2 (spec 4 [P]; ceil/floor [I]; tolerance, non-singleton output [D]).

    R = ceil(log2 omega(xi, Xt)) over all pairs; each round ROUND(global design, floor(T V / R)),
    shared estimator, omega halving per agent. Leftover budget is not redistributed.
    `eps` only enters ROUND's guarantee; Pukelsheim rounding does not use it.
    """
    V, n = _check_world(gram, means, budget=budget, xi=xi)
    everywhere = np.ones(V * n, bool)
    R = math.ceil(math.log2(cached_omega(gram, xi, range(V * n), everywhere)))
    size = (budget * V) // R
    alive = np.ones(V * n, bool)
    log, used, r = [], 0, 0
    while r < R and not finished(alive, n):
        r += 1
        lam, rho = fw_design(gram, xi, within_pairs(alive, n), everywhere)
        counts = pukelsheim_round(lam, size)
        fhat = kernel_estimate(gram, counts, round_means(means, counts, noise(r)), xi)
        log.append({"N": size, "rho": rho, "alive": alive.copy(), "counts": counts})
        alive = halve_all(fhat, alive, n, lambda s: cached_omega(gram, xi, s, everywhere), tol)
        used += size
    return _fb_outputs(fhat, alive, n, used, budget, V, r, R, log)


def cokernel_fb_ind_alloc(gram, means, noise, budget, xi=1e-10, eps=0.1, tol=HALVING_TOL):
    """CoKernelFB-IndAlloc (spec 5.5 [P] name, [D] details): CoKernelFB where each unfinished agent
    spends floor(T / R) samples by its local design over its own alive pairs; R, the shared
    estimator (regulariser = the round's total count times xi) and the global-omega halving are kept."""
    V, n = _check_world(gram, means, budget=budget, xi=xi)
    everywhere = np.ones(V * n, bool)
    R = math.ceil(math.log2(cached_omega(gram, xi, range(V * n), everywhere)))
    alive = np.ones(V * n, bool)
    log, used, r = [], 0, 0
    while r < R and not finished(alive, n):
        r += 1
        counts = np.zeros(V * n, dtype=np.int64)
        for v in range(V):
            own = alive[v * n:(v + 1) * n]
            if own.sum() > 1:
                lam, _ = fw_design(_block(gram, v, n), xi, all_pairs(np.flatnonzero(own)), np.ones(n, bool))
                counts[v * n:(v + 1) * n] = pukelsheim_round(lam, budget // R)
        fhat = kernel_estimate(gram, counts, round_means(means, counts, noise(r)), xi)
        log.append({"N": int(counts.sum()), "alive": alive.copy(), "counts": counts})
        alive = halve_all(fhat, alive, n, lambda s: cached_omega(gram, xi, s, everywhere), tol)
        used += int(counts.sum())
    return _fb_outputs(fhat, alive, n, used, budget, V, r, R, log)


def ind_peace_fb_gamma(gram, means, noise, budget, xi=1e-10, eps=0.1, tol=HALVING_TOL, draws=None):
    """IndPeaceFB, Gaussian-width version (spec 5.6 [P] name, [R] rule, headline [D]).

    Per agent, own arms and data, budget T: R_v = ceil(log2 gamma(Xt_v)), floor(T / R_v) samples a
    round by the design minimising gamma(S_k; lam); keep the longest prefix by Fhat with
    gamma <= (1 + tol) gamma(S_k) / 2. `draws` [M, n] (M >= 1e4) are fixed standard normals for the
    sample average (default: 10^4 draws of a fixed-seed generator). No communication.
    """
    V, n = _check_world(gram, means, budget=budget, xi=xi)
    draws = np.random.default_rng(0).standard_normal((10_000, n)) if draws is None else draws
    draws_key = hash(draws.tobytes())
    agents = []
    for v in range(V):
        local = _block(gram, v, n)
        width = lambda s, local=local: cached_gamma(local, xi, s, draws, draws_key)
        agents.append(_peace_agent(local, budget, xi, tol, lambda s, w=width: w(s)[0], lambda s, w=width: w(s)[1]))
    return _ind_fb_outputs(run_lockstep(agents, means, noise), budget)


def ind_peace_fb_omega(gram, means, noise, budget, xi=1e-10, eps=0.1, tol=HALVING_TOL):
    """IndPeaceFB, omega version (spec 5.6 [D]): CoKernelFB with V = 1 on each agent's own arms
    and data (R_v = ceil(log2 omega_v(Xt_v)), floor(T / R_v) a round, FW designs, local omega halving)."""
    V, n = _check_world(gram, means, budget=budget, xi=xi)
    own = np.ones(n, bool)
    agents = []
    for v in range(V):
        local = _block(gram, v, n)
        value = lambda s, local=local: cached_omega(local, xi, s, own)
        design = lambda s, local=local: fw_design(local, xi, all_pairs(s), own)[0]
        agents.append(_peace_agent(local, budget, xi, tol, value, design))
    return _ind_fb_outputs(run_lockstep(agents, means, noise), budget)


def ind_uniform_fb(gram, means, noise, budget, xi=1e-10, estimator="ridge"):
    """IndUniformFB (spec 5.7 [P] name, [D] details): floor(T / n) pulls per arm, the remainder to
    the first arms, one step; answer argmax of the ridge estimate on the agent's own data
    (estimator="ridge", spec 2.4 with regulariser T xi) or of the per-arm means ("means")."""
    if estimator not in ("ridge", "means"):
        raise ValueError(f"estimator must be 'ridge' or 'means', got {estimator!r}")
    V, n = _check_world(gram, means, budget=budget, xi=xi)
    per_arm = np.array([budget // n + (a < budget % n) for a in range(n)], dtype=np.int64)
    counts = np.tile(per_arm, (V, 1))
    ybar = round_means(means.ravel(), counts.ravel(), noise(1)).reshape(V, n)
    if estimator == "ridge":
        ybar = np.stack([kernel_estimate(_block(gram, v, n), per_arm, ybar[v], xi) for v in range(V)])
    return {"answer": np.argmax(ybar, axis=1), "samples": float(budget), "rounds": 1,
            "budget_used": 1.0, "counts": counts}


# ----------------------------------------------------------------------------- per-agent loops

def run_lockstep(agents, means, noise, draw_counts=None):
    """Drive independent per-agent generators in lockstep: step s collects every unfinished agent's
    request (counts [n], or (total, probs [n]) when draw_counts is given), draws once for all agents,
    and sends agent v (counts[v], sums[v]). Returns the combined outputs."""
    V, n = means.shape
    requests, results = [None] * V, [None] * V
    for v, agent in enumerate(agents):
        try:
            requests[v] = next(agent)
        except StopIteration as stop:
            results[v] = dict(stop.value, rounds=0)
    s = 0
    while any(res is None for res in results):
        s += 1
        counts = _step_counts(requests, results, s, n, draw_counts)
        z = noise(s)
        sums = counts * means + np.sqrt(counts) * z
        for v, agent in enumerate(agents):
            if results[v] is None:
                try:
                    requests[v] = agent.send((counts[v], sums[v]))
                except StopIteration as stop:
                    results[v] = dict(stop.value, rounds=s)
    return {"answer": np.array([res["answer"] for res in results]),
            "samples": sum(res["samples"] for res in results) / V,
            "rounds": max(res["rounds"] for res in results), "agents": results}


def _fc_agent(local, V, delta, xi, eps, max_rounds):
    """One IndRAGE copy: CoKernelFC with V = 1 on its own n arms, union term with the full V."""
    n = len(local)
    alive = np.ones(n, bool)
    total, own = 0, np.ones(n, bool)
    for r in range(1, max_rounds + 1):
        lam, rho = fw_design(local, xi, all_pairs(np.flatnonzero(alive)), own)
        counts = pukelsheim_round(lam, fc_round_size(r, rho, local, lam, xi, eps, n, V, delta))
        got, sums = yield counts
        fhat = kernel_estimate(local, got, _safe_mean(sums, got), xi)
        alive = eliminate(fhat, alive, n, 2.0 ** -r)
        total += int(got.sum())
        if alive.sum() == 1:
            break
    return {"answer": int(answers(fhat, alive, n)[0]), "samples": total}


def _rage_code_agent(X, local, delta_agent, xi, eps, max_rounds, var):
    """One copy of the RAGE code's loop on arm features X [n, d_v], designs on their Gram matrix
    `local` [n, n] (see `ind_rage_code`)."""
    n = len(X)
    own = np.ones(n, bool)
    alive, total = np.ones(n, bool), 0
    for k in range(1, max_rounds + 1):
        lam, rho = fw_design(local, xi, all_pairs(np.flatnonzero(alive)), own)
        delta_k = delta_agent / k**2
        size = max(math.ceil(8.0 * (2.0 ** (k - 1)) ** 2 * rho * (1.0 + eps) * math.log(2.0 * n * n / delta_k)),
                   math.ceil(round(2 * np.sum(lam > 0) / eps, 9)))
        got, sums = yield pukelsheim_round(lam, size)
        A_pinv = np.linalg.pinv(X.T @ (got[:, None] * X))
        theta = A_pinv @ (X.T @ sums)
        if var:
            alive = _width_eliminate(X, theta, A_pinv, alive, 2.0 * math.log(2.0 * n * n / delta_k))
        else:
            alive = eliminate(X @ theta, alive, n, 2.0 ** -k)
        total += int(got.sum())
        if alive.sum() == 1:
            break
    return {"answer": int(answers(X @ theta, alive, n)[0]), "samples": total}


def _width_eliminate(X, theta, A_pinv, alive, width):
    """The RAGE code's var=True step: keep z unless some alive z' has sqrt(width y^T A^+ y) <= y^T theta,
    y = x_z' - x_z."""
    keep = alive.copy()
    for z in np.flatnonzero(alive):
        for other in np.flatnonzero(alive):
            y = X[other] - X[z]
            if other != z and math.sqrt(width * (y @ A_pinv @ y)) <= y @ theta:
                keep[z] = False
                break
    return keep


def _alba_family(features, means, noise, draw_counts, delta, max_steps, fixed_basis):
    V, n = _check_features(features, means)
    agents = []
    for v in range(V):
        X = own_coordinates(features[v])
        theta_norm = float(np.linalg.norm(np.linalg.pinv(X) @ means[v]))  # oracle L = ||theta*||
        agents.append(_alba_agent(X, theta_norm, delta / V, max_steps, fixed_basis))
    return run_lockstep(agents, means, noise, draw_counts)


def _alba_agent(X, L, delta_agent, max_steps, fixed_basis):
    """One ALBA copy (spec 5.3 [R]) on arm features X [n, d]; yields (n_s, design), gets (counts, sums).

    Outer round r: delta_r = 6 delta' / (pi^2 (r+1)^2), p = floor(d / 2^r), K_r = |S|; inner step s
    while |S| > p: delta_s = 6 delta_r / (pi^2 s^2), eps_s = 2^-s, c0 = max(4 L^2, 3),
    l_s = 4 c0 (2 + (6 + 4 / 1.1^s) d) (1.1^s / 4)^2, n_s = ceil(l_s log(5 K_r^2 / (2 delta_s)));
    xhat = argmax_S x^T theta, drop x when conf_s(xhat - x) < (xhat - x)^T theta.
    """
    n, d = X.shape
    S = list(range(n))
    fixed = _basis_design(X) if fixed_basis else None
    designs, steps, total, r = {}, 0, 0, 0
    theta = np.zeros(d)
    while len(S) > 1 and steps < max_steps:
        delta_r = 6.0 * delta_agent / (math.pi**2 * (r + 1) ** 2)
        p, s, K_r = math.floor(d / 2**r), 1, len(S)
        while len(S) > p and steps < max_steps:
            delta_s = 6.0 * delta_r / (math.pi**2 * s**2)
            c0 = max(4.0 * L * L, 3.0)
            l_s = 4.0 * c0 * (2.0 + (6.0 + 4.0 / 1.1**s) * d) * (1.1**s / 4.0) ** 2
            n_s = math.ceil(l_s * math.log(5.0 * K_r**2 / (2.0 * delta_s)))
            lam = fixed if fixed_basis else _span_design(X, S, designs)
            got, sums = yield n_s, lam
            M = X.T @ (lam[:, None] * X)
            theta = np.linalg.pinv(n_s * M) @ (X.T @ sums)
            S = _alba_drop(X, S, theta, np.linalg.pinv(M), lam, l_s, 2.0**-s, L)
            s, steps, total = s + 1, steps + 1, total + int(got.sum())
        r += 1
    best = max(S, key=lambda a: (X[a] @ theta, -a))
    return {"answer": int(best), "samples": total, "capped": len(S) > 1}


def _alba_drop(X, S, theta, Minv, lam, l_s, eps_s, L):
    """ALBA's elimination: keep x unless conf(xhat - x) < (xhat - x)^T theta (spec 5.3 [R])."""
    d = X.shape[1]
    scores = X[S] @ theta
    top = S[int(np.argmax(scores))]
    keep = []
    for a in S:
        y = X[top] - X[a]
        if a == top:
            keep.append(a)
            continue
        sig2 = max(float(y @ Minv @ y), 0.0)
        tail = math.sqrt(2.0 * ((sig2 / l_s) * math.sqrt(3.0 * d / l_s) + sig2 / l_s))
        err = (math.sqrt(2.0) * L * math.sqrt(sig2) / math.sqrt(l_s)
               + 2.0 * L * (np.linalg.norm(y) + math.sqrt(sig2 * d)) / (3.0 * l_s) + tail)
        E = float(np.sum(lam * ((X @ Minv @ y) * (np.abs(X @ theta) + eps_s / 2.0)) ** 2))
        ERR = (math.sqrt(2.0 * E / l_s)
               + (2.0 * (abs(y @ theta) + eps_s / 2.0) + L * math.sqrt(sig2 * d)) / (3.0 * l_s) + tail)
        if not min(err, ERR) < y @ theta:
            keep.append(a)
    return keep


def _span_design(X, S, cache):
    """G-optimal design on the arms lying in span(X[S]) (zero elsewhere), cached per span set."""
    rank = np.linalg.matrix_rank(X[S])
    span = [a for a in range(len(X)) if a in S or np.linalg.matrix_rank(X[S + [a]]) == rank]
    key = tuple(span)
    if key not in cache:
        lam = np.zeros(len(X))
        lam[span] = g_optimal_design(X[span])[0]
        cache[key] = lam
    return cache[key]


def _basis_design(X):
    """Uniform design on the lowest-index linearly independent arms spanning X's rows."""
    basis = []
    for a in range(len(X)):
        if np.linalg.matrix_rank(X[basis + [a]]) > len(basis):
            basis.append(a)
    lam = np.zeros(len(X))
    lam[basis] = 1.0 / len(basis)
    return lam


def _peace_agent(local, budget, xi, tol, width, design):
    """One fixed-budget Peace copy on its own Gram `local` [n, n]: width(S) -> the set's complexity,
    design(S) -> the sampling design for alive set S (tuples of local indices)."""
    n = len(local)
    R = math.ceil(math.log2(width(tuple(range(n)))))
    size = budget // R
    alive, used, r = np.ones(n, bool), 0, 0
    while r < R and alive.sum() > 1:
        r += 1
        got, sums = yield pukelsheim_round(design(tuple(np.flatnonzero(alive))), size)
        fhat = kernel_estimate(local, got, _safe_mean(sums, got), xi)
        alive = halve(fhat, alive, width, tol)
        used += int(got.sum())
    return {"answer": int(answers(fhat, alive, n)[0]), "samples": used, "R": R}


# ----------------------------------------------------------------------------- shared rules

def fc_round_size(r, rho, gram, lam, xi, eps, n, V, delta):
    """N_r = max(ceil(32 4^r (1+eps)^2 rho log(2 n^2 V / delta_r)), tau), delta_r = delta/(2 r^2),
    tau = ceil(d(xi, lam) / eps^2) (spec 3 line 5 [P], tau [D])."""
    delta_r = delta / (2.0 * r * r)
    main = math.ceil(32.0 * 4.0**r * (1.0 + eps) ** 2 * rho * math.log(2.0 * n * n * V / delta_r))
    tau = math.ceil(round(design_dimension(gram, lam, xi) / eps**2, 9))
    return max(main, tau)


def eliminate(fhat, alive, n, threshold):
    """Per agent: keep alive x with max_{alive x'} Fhat(x') - Fhat(x) < threshold (spec 3 line 14)."""
    out = alive.copy()
    for start in range(0, len(alive), n):
        block = slice(start, start + n)
        best = fhat[block][alive[block]].max()
        out[block] &= best - fhat[block] < threshold
    return out


def halve(fhat, alive, width, tol):
    """Sort alive arms by Fhat (decreasing, lowest index first on ties); keep the longest prefix
    with width(prefix) <= (1 + tol) width(alive) / 2 (spec 4 lines 11-13, tolerance [D])."""
    idx = np.flatnonzero(alive)
    order = sorted(idx, key=lambda i: (-fhat[i], i))
    limit = (1.0 + tol) * width(tuple(idx)) / 2.0
    keep = 1
    for size in range(2, len(order) + 1):
        if width(tuple(sorted(order[:size]))) > limit:
            break
        keep = size
    out = np.zeros_like(alive)
    out[order[:keep]] = True
    return out


def halve_all(fhat, alive, n, width, tol):
    """`halve` for every agent (agent-major blocks of n) with more than one alive arm."""
    out = alive.copy()
    for start in range(0, len(alive), n):
        mask = np.zeros_like(alive)
        mask[start:start + n] = alive[start:start + n]
        if mask.sum() > 1:
            out[start:start + n] = halve(fhat, mask, width, tol)[start:start + n]
    return out


_OMEGA_CACHE = {}


def cached_omega(gram, xi, subset, support):
    """omega(xi, subset) with lam on `support`, cached by the subset's feature vectors (rows of K)."""
    subset = sorted(int(i) for i in subset)
    if len(subset) < 2:
        return 0.0
    key = (gram.tobytes(), float(xi), support.tobytes(), tuple(sorted(gram[i].tobytes() for i in subset)))
    if key not in _OMEGA_CACHE:
        _OMEGA_CACHE[key] = minmax_value(gram, xi, all_pairs(subset), support)[0]
    return _OMEGA_CACHE[key]


_GAMMA_CACHE = {}


def cached_gamma(local, xi, subset, draws, draws_key):
    """(min_lam gamma(subset; lam), argmin lam) on one agent's Gram `local`, cached per subset."""
    subset = tuple(sorted(int(i) for i in subset))
    key = (local.tobytes(), float(xi), draws_key, subset)
    if key not in _GAMMA_CACHE:
        _GAMMA_CACHE[key] = min_gaussian_width(local, xi, list(subset), draws)
    return _GAMMA_CACHE[key]


def within_pairs(alive, n):
    """[P, 2]: pairs i < j of alive pairs belonging to the same agent (agent-major blocks of n)."""
    blocks = [all_pairs(np.flatnonzero(alive[s:s + n]) + s) for s in range(0, len(alive), n)]
    return np.concatenate(blocks).reshape(-1, 2)


def round_means(means, counts, z):
    """ybar [nV] of one round: (counts * mean + sqrt(counts) * z) / counts, 0 where unsampled."""
    counts = counts.reshape(-1)
    sums = counts * means.reshape(-1) + np.sqrt(counts) * np.asarray(z).reshape(-1)
    return _safe_mean(sums, counts)


def answers(fhat, alive, n):
    """Each agent's answer (0..n-1): the alive arm of largest Fhat, lowest index on ties."""
    out = []
    for start in range(0, len(alive), n):
        idx = np.flatnonzero(alive[start:start + n])
        out.append(int(idx[np.argmax(fhat[start:start + n][idx])]))
    return np.array(out)


def finished(alive, n):
    return bool(np.all(alive.reshape(-1, n).sum(axis=1) == 1))


def own_coordinates(X, tol=1e-10):
    """X [n, d] in an orthonormal basis of its row span [n, rank] (spec 5, pitfall 11)."""
    _, sv, Wt = np.linalg.svd(X, full_matrices=False)
    rank = int(np.sum(sv > tol * sv[0]))
    return X @ Wt[:rank].T


def _check_world(gram, means, **positive):
    """(V, n) after one-line checks of the world's shapes and of positive hyper-parameters."""
    means = np.asarray(means)
    if means.ndim != 2:
        raise ValueError(f"means must be [V, n] (agents x arms), got shape {means.shape}")
    V, n = means.shape
    if np.shape(gram) != (V * n, V * n):
        raise ValueError(f"gram must be [V n, V n] = [{V * n}, {V * n}] for means {means.shape}, got {np.shape(gram)}")
    for name, value in positive.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")
    return V, n


def _check_features(features, means):
    """(V, n) after checking features [V, n, d] against means [V, n]."""
    if np.ndim(features) != 3 or np.shape(features)[:2] != np.shape(means):
        raise ValueError(f"features must be [V, n, d] matching means {np.shape(means)}, got {np.shape(features)}")
    return np.shape(means)


def _block(gram, v, n):
    return gram[v * n:(v + 1) * n, v * n:(v + 1) * n]


def _safe_mean(sums, counts):
    return np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)


def _step_counts(requests, results, s, n, draw_counts):
    V = len(requests)
    if draw_counts is None:
        return np.stack([requests[v] if results[v] is None else np.zeros(n, np.int64) for v in range(V)])
    totals = np.array([requests[v][0] if results[v] is None else 0 for v in range(V)], dtype=np.int64)
    probs = np.stack([requests[v][1] if results[v] is None else np.full(n, 1.0 / n) for v in range(V)])
    return np.asarray(draw_counts(s, totals, probs))


def _fb_outputs(fhat, alive, n, used, budget, V, r, R, log):
    return {"answer": answers(fhat, alive, n), "samples": used / V, "rounds": r,
            "budget_used": used / (budget * V), "R": R, "rounds_log": log}


def _ind_fb_outputs(out, budget):
    out["budget_used"] = out["samples"] / budget
    return out
