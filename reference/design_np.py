"""Plain NumPy experimental design for kernel pure exploration, written from the CoPE-KB spec.

Everything goes through a Gram matrix K [m, m] (m pairs), a design lam [m] on the simplex and the
regulariser xi:
    G(lam) = Phi A(xi, lam)^{-1} Phi^T = K (xi I + diag(lam) K)^{-1}            (spec 2.1, stable form [I])
    q_ab(lam) = G_aa + G_bb - 2 G_ab = ||phi_a - phi_b||^2_{A^{-1}};  dq_ab/dlam_x = -(G_ax - G_bx)^2  [P]
    h(lam) = max over pairs (a, b) of q_ab(lam);  min over the simplex of the support S.
- `fw_design`: Frank-Wolfe with the min-max subgradient, 2000 iterations, best iterate, weights
  below 1e-5 zeroed and renormalised, rho = h(final lam); lowest index wins every tie (2.2 [D][R]).
- `minmax_value`: entropic mirror descent on the soft-max-smoothed h with a decreasing temperature
  and a backtracking step, accurate to about 1e-5 relative here; used for omega (1.4 [P], 2.2 [D]).
- `pukelsheim_round`: efficient apportionment, sum of counts = N exactly (2.3 [D][R]).
- `kernel_estimate`: Fhat = K diag(s) (diag(s) K diag(s) + N xi I)^{-1} (s * ybar), s = sqrt(counts),
  N = sum(counts), Cholesky solve, current round only (2.4 [P]).
- `g_optimal_design`: Frank-Wolfe for min_lam max_x ||x||^2_{M(lam)^+}, M = sum lam_x x x^T (5.3 [R]).
- `gaussian_width` / `min_gaussian_width`: gamma(S; lam) = (E[max_S g - min_S g])^2, g ~ N(0, G(lam)),
  a sample average over fixed draws with g = G^{1/2} zeta (the symmetric square root from eigh,
  negative eigenvalues clipped), minimised over lam by a pattern search (5.6 [R]).
"""
import itertools
import math

import numpy as np

PRUNE = 1e-5


def design_gram(gram, lam, xi):
    """G = K (xi I + diag(lam) K)^{-1} [m, m], as solve(xi I + K diag(lam), K)^T, symmetrised."""
    m = len(gram)
    G = np.linalg.solve(xi * np.eye(m) + gram * lam[None, :], gram).T
    return 0.5 * (G + G.T)


def pair_norms(G, pairs):
    """q [P] = G_aa + G_bb - 2 G_ab for pairs [P, 2]."""
    a, b = pairs[:, 0], pairs[:, 1]
    return G[a, a] + G[b, b] - 2.0 * G[a, b]


def all_pairs(indices):
    """[P, 2] int: every pair i < j of the given indices, in lexicographic order."""
    out = list(itertools.combinations(sorted(int(i) for i in indices), 2))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def fw_design(gram, xi, pairs, support, iters=2000):
    """Frank-Wolfe min-max design (spec 2.2 [D][R]): returns (lam [m], rho = h(lam)).

    Starts uniform on `support` [m] bool; h is evaluated at the iterates before each update and the
    best one is kept; weights below 1e-5 are zeroed and the rest renormalised before rho is taken.
    """
    lam = support / support.sum()
    best_h, best_lam = np.inf, lam
    for t in range(1, iters + 1):
        G = design_gram(gram, lam, xi)
        q = pair_norms(G, pairs)
        p = int(np.argmax(q))
        if q[p] < best_h:
            best_h, best_lam = q[p], lam
        a, b = pairs[p]
        j = int(np.argmax(np.where(support, (G[a] - G[b]) ** 2, -np.inf)))
        gamma = 2.0 / (t + 2.0)
        lam = (1.0 - gamma) * lam
        lam[j] += gamma
    lam = np.where(best_lam < PRUNE, 0.0, best_lam)
    lam = lam / lam.sum()
    return lam, float(pair_norms(design_gram(gram, lam, xi), pairs).max())


def minmax_value(gram, xi, pairs, support, iters=400, temp_start=1e-1, temp_end=1e-5):
    """min over the simplex of `support` of h(lam) by entropic mirror descent: returns (value, lam).

    Step k minimises h_tau = tau log sum exp(q / tau) with tau = value * temp (temp geometric from
    temp_start to temp_end); lam <- lam * exp(eta r) normalised, r = -grad h_tau / h_tau, with eta
    halved until h_tau does not increase and grown by 1.5 after a success. Returns the best h seen.
    """
    if len(pairs) == 0:
        return 0.0, support / support.sum()
    lam = support / support.sum()
    G = design_gram(gram, lam, xi)
    q = pair_norms(G, pairs)
    best_h, best_lam, eta = q.max(), lam, 1.0
    for k in range(iters):
        tau = best_h * temp_start * (temp_end / temp_start) ** (k / max(iters - 1, 1))
        f, w = _soft_max(q, tau)
        r = (w @ (G[pairs[:, 0]] - G[pairs[:, 1]]) ** 2) / f
        while eta > 1e-9:
            u = np.where(support, np.log(np.where(support, lam, 1.0)) + eta * r, -np.inf)
            trial = np.exp(u - u.max())
            trial /= trial.sum()
            G_t = design_gram(gram, trial, xi)
            q_t = pair_norms(G_t, pairs)
            if np.all(np.isfinite(q_t)) and _soft_max(q_t, tau)[0] <= f:
                break
            eta *= 0.1
        if eta <= 1e-9:  # no descent at this temperature: wait for a colder one
            eta = 1e-3
            continue
        lam, G, q, eta = trial, G_t, q_t, min(eta * 1.5, 1e3)
        if q.max() < best_h:
            best_h, best_lam = q.max(), lam
    return float(best_h), best_lam


def omega(gram, xi, subset, support=None):
    """omega(xi, S) = min_lam max_{i, j in S} q_ij (spec 1.4 [P]); 0 for a singleton."""
    support = np.ones(len(gram), bool) if support is None else support
    return minmax_value(gram, xi, all_pairs(subset), support)[0]


def design_dimension(gram, lam, xi):
    """d(xi, lam): eigenvalues of diag(sqrt lam) K diag(sqrt lam) above xi (spec 1.4 [P])."""
    s = np.sqrt(lam)
    return int(np.sum(np.linalg.eigvalsh(s[:, None] * gram * s[None, :]) > xi))


def pukelsheim_round(lam, total):
    """ROUND(lam, N) (spec 2.3 [D][R]): integer counts [m] on lam > 1e-5 with sum exactly N."""
    sup = np.flatnonzero(lam > PRUNE)
    w = lam[sup] / lam[sup].sum()
    n = np.ceil((total - 0.5 * len(sup)) * w)
    while n.sum() < total:
        n[int(np.argmin(n / w))] += 1
    while n.sum() > total:
        n[int(np.argmax((n - 1) / w))] -= 1
    counts = np.zeros(len(lam), dtype=np.int64)
    counts[sup] = n.astype(np.int64)
    return counts


def kernel_estimate(gram, counts, ybar, xi):
    """Fhat [m] from one round's counts [m] and means ybar [m] (0 where unsampled), spec 2.4 [P]."""
    s = np.sqrt(counts.astype(float))
    total = float(counts.sum())
    chol = np.linalg.cholesky(s[:, None] * gram * s[None, :] + total * xi * np.eye(len(gram)))
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, s * ybar))
    return gram @ (s * alpha)


def g_optimal_design(X, iters=2000):
    """argmin_lam max_x ||x||^2_{M(lam)^+} over the rows of X [k, d] by Frank-Wolfe (spec 5.3 [R]).

    Subgradient step toward argmax_y (x*^T M^+ y)^2 with x* the arm of largest norm; best iterate;
    weights below 1e-5 are moved onto the largest weight. Returns (lam [k], value).
    """
    lam = np.full(len(X), 1.0 / len(X))
    best_v, best_lam = np.inf, lam
    for t in range(1, iters + 1):
        Minv = np.linalg.pinv(X.T @ (lam[:, None] * X))
        norms = np.einsum("kd,de,ke->k", X, Minv, X)
        i = int(np.argmax(norms))
        if norms[i] < best_v:
            best_v, best_lam = norms[i], lam
        j = int(np.argmax((X @ Minv @ X[i]) ** 2))
        gamma = 2.0 / (t + 2.0)
        lam = (1.0 - gamma) * lam
        lam[j] += gamma
    lam = best_lam.copy()
    small = lam < PRUNE
    moved = lam[small].sum()
    lam[small] = 0.0
    lam[int(np.argmax(lam))] += moved
    return lam, float(best_v)


def gaussian_width(G, subset, draws):
    """gamma(S; lam) = (mean over draws of max_S g - min_S g)^2, g = G^{1/2} zeta, draws [M, m]."""
    w, U = np.linalg.eigh(G)
    root = (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T
    g = draws @ root[:, subset]
    return float(np.mean(g.max(axis=1) - g.min(axis=1)) ** 2)


def min_gaussian_width(gram, xi, subset, draws, step=0.25, min_step=1e-3):
    """min over the simplex of gamma(S; lam) by pattern search: returns (value, lam [m]).

    From uniform lam, repeatedly make the best move of `step` mass from one arm to another (less if
    the donor has less); halve the step when no move improves, until it is below min_step.
    """
    m = len(gram)
    if len(subset) < 2:
        return 0.0, np.full(m, 1.0 / m)
    lam = np.full(m, 1.0 / m)
    value = gaussian_width(design_gram(gram, lam, xi), subset, draws)
    while step >= min_step:
        moves = [(i, j) for i in range(m) for j in range(m) if i != j and lam[i] > 0.0]
        best = (value, None)
        for i, j in moves:
            trial = lam.copy()
            amount = min(step, trial[i])
            trial[i] -= amount
            trial[j] += amount
            v = gaussian_width(design_gram(gram, trial, xi), subset, draws)
            if v < best[0]:
                best = (v, trial)
        if best[1] is None:
            step *= 0.5
        else:
            value, lam = best
    return value, lam


def _soft_max(q, tau):
    """(tau log sum exp(q / tau), softmax weights) computed stably."""
    h = q.max()
    e = np.exp((q - h) / tau)
    return h + tau * math.log(e.sum()), e / e.sum()
