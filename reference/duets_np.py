"""Plain NumPy DUETS and its three baselines (N-KernelUCB, DisKernelUCB, Approx-DisKernelUCB).

Setting. A finite candidate set Xc [M, d] with noiseless values f [M]; f* = max f over the candidates.
N agents act at EVERY step t = 0..T-1 (synchronous). Agent n choosing candidate a at step t observes
y = f[a] + noise_std * eps[t, n, a] and incurs the regret f* - f[a] (noiseless). Kernel: squared
exponential k(x, x') = exp(-||x - x'||^2 / (2 l^2)), so k(x, x) = 1. lam is the regulariser (0.2).

All randomness is an input (uniforms in [0, 1) and standard normals), so another implementation can be
fed the very same draws; `draws` makes a full set from a numpy Generator.

GP formulas, with data ids D (repeats allowed), rewards Y and K = K_DD:
    exact (Eq. 4):  mu(x) = k_D(x)^T (K + lam I)^{-1} Y,
                    sigma^2(x) = max(k(x, x) - k_D(x)^T (K + lam I)^{-1} k_D(x), 0)   (NOT divided by lam)
    Nystrom (Eqs. 5-6), inducing ids S (distinct):  z(x) = K_SS^{-1/2} k_S(x),  Z = [z(x_i)]_i [m, r],
                    mu~(x) = z^T (lam I + Z^T Z)^{-1} Z^T Y,
                    sigma~^2(x) = (k(x, x) - z^T Z^T Z (lam I + Z^T Z)^{-1} z) / lam     (divided by lam)
    K_SS^{-1/2} is taken by a symmetric eigendecomposition in which eigenvalues <= eig_floor * (largest
    eigenvalue) get inverse square root 0 (a pseudo-inverse square root); the algorithms use this Z-form.
    The equivalent K-form without K_SS^{-1/2} (B = lam K_SS + K_SD K_DS):
                    mu~(x) = k_S^T B^{-1} K_SD Y,
                    sigma~^2(x) = (k(x, x) - k_S^T K_SS^{-1} k_S) / lam + k_S^T B^{-1} k_S
    is provided for checks (`nystrom_mean_var_kform`). With S = D (distinct points): mu~ = mu and
    lam sigma~^2 = sigma^2.

Every kernel value the algorithms need is between two candidates, so each run builds the candidate Gram
matrix once and indexes it by candidate id.

DUETS (phased elimination with uniform exploration). Epoch lengths T_1 given, T_j = floor(sqrt(T T_{j-1}))
(`epoch_lengths`); the last epoch is cut at T and is followed by no communication and no trimming.
In epoch j (0-based), with active ids A = flatnonzero(active) (ascending), agent n's i-th query, made at
step start_j + i, is A[floor(u_query[j][n, i] |A|)]. After a completed epoch:
    D_j = the N T_j queries, agent-major (agent 0's T_j queries in time order, then agent 1's, ...),
    Y_j = their rewards (this epoch only);
    sigma^2_j = exact variance of D_j over the active candidates; sigma2_max = its max; p_j = min(1, p0 sigma2_max);
    S_j = the points i of D_j with u_keep[j][i] < p_j, deduplicated by candidate id keeping first occurrences
          in D_j order; if none is kept, S_j = {D_j[floor(u_empty[j] N T_j)]};
    mu~_j = Nystrom mean from (S_j, all of D_j, Y_j) on the active candidates;
    keep x iff mu~_j(x) >= max_{active} mu~_j - 2 beta sqrt(sigma2_max)   (Eq. 9).
Communication of a completed epoch, logged at the LAST step of the epoch (the round happens after it),
in scalars per receiver (every copy that reaches an agent or the server counts once): each of the N agents
uploads |S_j| and receives d |S_j| + |S_j| + 1; the paper's count (Eq. 2: the upload averaged over agents,
the broadcast once) is (d + 2) |S_j| + 1; the code convention is N times the number of kept draws before
de-duplication (1 when none is kept): the authors' code keeps duplicates.

All run functions return per-step arrays (increments, not cumulative sums): actions [T, N] (candidate ids),
regret [T, N], comm_up [T], comm_down [T] (scalars per receiver), comm_paper [T] (the paper's count),
comm_code [T] (the authors' code convention) and syncs [T] (1 at a communication step).
"""
import math
import time

import numpy as np

from bandits_jax.problems import candidates

# --------------------------------------------------------------------------------------------------
# Kernel and GP posteriors
# --------------------------------------------------------------------------------------------------


def se_kernel(A, B, lengthscale):
    """Squared exponential kernel matrix [m, n] of points A [m, d] and B [n, d]."""
    sq = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.exp(-np.maximum(sq, 0.0) / (2.0 * lengthscale ** 2))


def exact_mean_var(K_DD, K_DQ, kqq, y, lam):
    """Exact posterior (Eqs. 3-4) at q query points: mean [q] (None when y is None) and variance [q],
    unscaled and clipped at 0. K_DD [m, m], K_DQ [m, q], kqq [q] = k(x, x), y [m] or None.
    With K_DD + lam I = L L^T (Cholesky) and V = L^{-1} K_DQ: var = kqq - colsum(V^2), mean = V^T L^{-1} y."""
    Linv = np.linalg.inv(np.linalg.cholesky(K_DD + lam * np.eye(len(K_DD))))
    V = Linv @ K_DQ
    var = np.maximum(kqq - (V * V).sum(0), 0.0)
    mean = None if y is None else V.T @ (Linv @ y)
    return mean, var


def psd_inv_sqrt(K, eig_floor=1e-10):
    """Symmetric pseudo-inverse square root [r, r] of a PSD matrix K [r, r]: eigen-directions with
    eigenvalue <= eig_floor * (largest eigenvalue) are dropped (their inverse square root is 0)."""
    w, U = np.linalg.eigh(K)
    keep = w > eig_floor * max(w.max(), 0.0)
    inv = np.where(keep, 1.0 / np.sqrt(np.where(keep, w, 1.0)), 0.0)
    return (U * inv) @ U.T


def nystrom_mean_var(K_SS, K_SD, K_SQ, kqq, y, lam, eig_floor=1e-10):
    """Nystrom posterior in the Z-form (Eqs. 5-6): mean [q] and sigma~^2 [q] (divided by lam, clipped
    at 0). K_SS [r, r] inducing Gram, K_SD [r, m] inducing-vs-data, K_SQ [r, q] inducing-vs-query,
    kqq [q], y [m]."""
    E = psd_inv_sqrt(K_SS, eig_floor)
    Z, Zq = (E @ K_SD).T, (E @ K_SQ).T
    G = Z.T @ Z
    A = lam * np.eye(len(G)) + G
    mean = Zq @ np.linalg.solve(A, Z.T @ y)
    quad = (Zq * (G @ np.linalg.solve(A, Zq.T)).T).sum(1)
    return mean, np.maximum(kqq - quad, 0.0) / lam


def nystrom_mean_var_kform(K_SS, K_SD, K_SQ, kqq, y, lam):
    """The same Nystrom mean [q] and sigma~^2 [q] (divided by lam, not clipped) in the K-form, by plain
    solves with B = lam K_SS + K_SD K_DS; arguments as in `nystrom_mean_var`."""
    B = lam * K_SS + K_SD @ K_SD.T
    mean = K_SQ.T @ np.linalg.solve(B, K_SD @ y)
    proj = (K_SQ * np.linalg.solve(K_SS, K_SQ)).sum(0)
    return mean, (kqq - proj) / lam + (K_SQ * np.linalg.solve(B, K_SQ)).sum(0)


def dedupe_first(ids):
    """The distinct values of the int array ids [m], in the order of their first occurrence."""
    ids = np.asarray(ids, dtype=np.int64)
    _, first = np.unique(ids, return_index=True)
    return ids[np.sort(first)]


# --------------------------------------------------------------------------------------------------
# DUETS
# --------------------------------------------------------------------------------------------------


def epoch_lengths(T, T1):
    """(nominal, steps): the nominal lengths T_j of the epochs that are started, T_1 = T1 and
    T_j = floor(sqrt(T T_{j-1})), and the steps each one actually runs (the last is cut at T).
    epoch_lengths(50, 2) == ([2, 10, 22, 33], [2, 10, 22, 16])."""
    if T1 < 1:
        raise ValueError("T1 must be >= 1")
    nominal, steps, done, Tj = [], [], 0, int(T1)
    while done < T:
        nominal.append(Tj)
        steps.append(min(Tj, T - done))
        done += steps[-1]
        Tj = math.isqrt(T * Tj)
    return nominal, steps


def duets_comm(S_size, d, N, kept=None):
    """Communication of one DUETS round with |S_j| = S_size in dimension d: a dict with up = N |S_j|
    (every agent's v_n), down = N (d |S_j| + |S_j| + 1) (S_j, vbar_j, sigma_max to every agent), paper
    = |S_j| + d |S_j| + |S_j| + 1 = (d + 2) |S_j| + 1 (one agent's upload, one broadcast), and code
    = N * kept, kept the draws before de-duplication (default |S_j|)."""
    message = d * S_size + S_size + 1
    return {"up": N * S_size, "down": N * message, "paper": S_size + message,
            "code": N * (S_size if kept is None else kept)}


def uniform_queries(u, active):
    """Candidate ids (shape of u) drawn uniformly from the active set: A[floor(u |A|)] with
    A = flatnonzero(active) ascending; u uniforms in [0, 1), active [M] bool."""
    A = np.flatnonzero(active)
    return A[np.floor(np.asarray(u) * len(A)).astype(np.int64)]


def select_inducing(D, u_keep, p, u_empty):
    """S_j [r] from D_j [m] (agent-major candidate ids): point i is kept iff u_keep[i] < p, then
    duplicates are dropped keeping first occurrences in D_j order; if nothing is kept, the single
    point D_j[floor(u_empty m)]."""
    S = dedupe_first(D[np.asarray(u_keep) < p])
    if len(S) == 0:
        S = D[[int(np.floor(u_empty * len(D)))]]
    return S


def eliminate(mu, sigma_max, beta):
    """Keep mask [a] of Eq. 9 over the active candidates: mu [a] >= max(mu) - 2 beta sigma_max."""
    return mu >= mu.max() - 2.0 * beta * sigma_max


def _setup(Xc, f, eps, lengthscale):
    """(T, N, M, d, K = the candidates' Gram matrix, its diagonal, f*, the zeroed outputs) of a run."""
    T, N, M = eps.shape
    K = se_kernel(Xc, Xc, lengthscale)
    return T, N, M, Xc.shape[1], K, np.diag(K).copy(), f.max(), _outputs(T, N)


def _outputs(T, N):
    out = {"actions": np.zeros((T, N), dtype=np.int64), "regret": np.zeros((T, N))}
    out.update({k: np.zeros(T) for k in ("comm_up", "comm_down", "comm_paper", "comm_code", "syncs")})
    return out


def _log_comm(out, t, up, down, paper, code):
    out["comm_up"][t] += up
    out["comm_down"][t] += down
    out["comm_paper"][t] += paper
    out["comm_code"][t] += code
    out["syncs"][t] = 1


def duets_np(Xc, f, eps, u_query, u_keep, u_empty, *, T1, p0, beta, lam, lengthscale, noise_std,
             eig_floor=1e-10):
    """DUETS on candidates Xc [M, d] with values f [M]; eps [T, N, M]; u_query: per epoch j an array
    [N, T_j] (nominal T_j); u_keep: per completed epoch an array [N T_j]; u_empty: per completed epoch a
    float. Returns the per-step arrays of the module docstring plus, per completed epoch, lists T_j,
    steps, n_points (N T_j), sigma2_max, p, S_size, S_ids (S_j, in selection order), mu_tilde (over the
    active ids, ascending), active_before, active_after (sizes), best_survived (argmax f still active),
    and active_masks ([M] bool at the start of EVERY epoch, the last included)."""
    T, N, M = eps.shape
    d = Xc.shape[1]
    K = se_kernel(Xc, Xc, lengthscale)
    kdiag = np.diag(K).copy()
    fstar, best = f.max(), int(np.argmax(f))
    out = _outputs(T, N)
    keys = ("T_j", "steps", "n_points", "sigma2_max", "p", "S_size", "S_ids", "mu_tilde",
            "active_before", "active_after", "best_survived", "active_masks")
    out.update({k: [] for k in keys})
    active = np.ones(M, dtype=bool)
    start = 0
    for j, (Tj, steps) in enumerate(zip(*epoch_lengths(T, T1))):
        out["active_masks"].append(active.copy())
        q = uniform_queries(u_query[j], active)                       # [N, T_j]
        for i in range(steps):
            out["actions"][start + i] = q[:, i]
            out["regret"][start + i] = fstar - f[q[:, i]]
        if start + steps >= T:                                        # final epoch: no round
            break
        t_idx = start + np.arange(Tj)
        y = f[q] + noise_std * eps[t_idx[None, :], np.arange(N)[:, None], q]   # [N, T_j]
        D, Y = q.reshape(-1), y.reshape(-1)                           # agent-major
        A = np.flatnonzero(active)
        _, var = exact_mean_var(K[np.ix_(D, D)], K[np.ix_(D, A)], kdiag[A], None, lam)
        s2max = float(var.max())
        p = min(1.0, p0 * s2max)
        S = select_inducing(D, u_keep[j], p, u_empty[j])
        mu, _ = nystrom_mean_var(K[np.ix_(S, S)], K[np.ix_(S, D)], K[np.ix_(S, A)], kdiag[A], Y, lam,
                                 eig_floor)
        keep = eliminate(mu, np.sqrt(s2max), beta)
        active = np.zeros(M, dtype=bool)
        active[A[keep]] = True
        c = duets_comm(len(S), d, N, kept=max(int(np.sum(np.asarray(u_keep[j]) < p)), 1))
        _log_comm(out, start + Tj - 1, c["up"], c["down"], c["paper"], c["code"])
        for k, v in zip(keys[:-1], (Tj, steps, N * Tj, s2max, p, len(S), S, mu, len(A), int(keep.sum()),
                                    bool(active[best]))):
            out[k].append(v)
        start += Tj
    return out


# --------------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------------


def _exact_ucb(K, kdiag, ids, y, lam, beta):
    """Exact posterior over all candidates from data (ids [m], y [m]): (ucb [M], var [M]),
    ucb = mu + beta sqrt(var)."""
    ids = np.asarray(ids, dtype=np.int64)
    mean, var = exact_mean_var(K[np.ix_(ids, ids)], K[ids], kdiag, np.asarray(y, dtype=float), lam)
    return mean + beta * np.sqrt(var), var


def n_kernel_ucb_np(Xc, f, eps, u_first, *, beta, lam, lengthscale, noise_std):
    """N-KernelUCB (spec 4.1): each agent runs exact GP-UCB on its own data only, no communication.
    Step 0 (no data): candidate floor(u_first[n] M), u_first [N]. Later: argmax over all M candidates of
    mu + beta sigma with the unscaled exact sigma (Eq. 4), ties to the first index."""
    T, N, M = eps.shape
    K = se_kernel(Xc, Xc, lengthscale)
    kdiag = np.diag(K).copy()
    fstar = f.max()
    out = _outputs(T, N)
    ids, ys = [[] for _ in range(N)], [[] for _ in range(N)]
    for t in range(T):
        for n in range(N):
            if t == 0:
                a = int(np.floor(u_first[n] * M))
            else:
                a = int(np.argmax(_exact_ucb(K, kdiag, ids[n], ys[n], lam, beta)[0]))
            out["actions"][t, n], out["regret"][t, n] = a, fstar - f[a]
            ids[n].append(a)
            ys[n].append(f[a] + noise_std * eps[t, n, a])
    return out


def dis_kernel_ucb_np(Xc, f, eps, u_first, *, beta, lam, lengthscale, noise_std, D=10.0):
    """DisKernelUCB (spec 4.2). Agent n uses the exact posterior of G + L_n (G: the synchronised data,
    L_n: its own points since the last sync) and picks argmax mu + beta sigma (unscaled sigma, first
    index on ties); step 0 is uniform, candidate floor(u_first[n] M). After its observation,
    ld_n += log(1 + sigma^2(x)/lam) with sigma^2 taken before adding x. After all agents have acted at
    step t, a sync happens iff some agent has (t - t_last) ld_n > D, where t - t_last counts the steps
    since the last sync including this one (t_last = -1 at the start). A sync appends agent 0's new pairs
    in time order, then agent 1's, ... to G, and resets L_n and ld_n.
    Communication per sync, n_new = t - t_last points per agent, N n_new in all, d + 1 scalars each: up
    = N n_new (d + 1) (every point once), down = (N - 1) N n_new (d + 1) (every point to the N - 1 agents
    that lack it); paper (spec 4.2) n_new (d + 1) + N n_new (d + 1) (the average upload, one broadcast);
    code convention N n_new (d + 1) (uploads summed over agents).
    D = inf never syncs (N-KernelUCB); D = 0 syncs at every step."""
    T, N, M, d, K, kdiag, fstar, out = _setup(Xc, f, eps, lengthscale)
    G_ids, G_y = [], []
    L_ids, L_y = [[] for _ in range(N)], [[] for _ in range(N)]
    ld = np.zeros(N)
    t_last = -1
    for t in range(T):
        for n in range(N):
            if t == 0:
                a = int(np.floor(u_first[n] * M))
                var_a = kdiag[a]
            else:
                ucb, var = _exact_ucb(K, kdiag, G_ids + L_ids[n], G_y + L_y[n], lam, beta)
                a = int(np.argmax(ucb))
                var_a = var[a]
            out["actions"][t, n], out["regret"][t, n] = a, fstar - f[a]
            ld[n] += np.log(1.0 + var_a / lam)
            L_ids[n].append(a)
            L_y[n].append(f[a] + noise_std * eps[t, n, a])
        if np.any((t - t_last) * ld > D):
            n_new = t - t_last
            for n in range(N):
                G_ids += L_ids[n]
                G_y += L_y[n]
            L_ids, L_y = [[] for _ in range(N)], [[] for _ in range(N)]
            ld[:] = 0.0
            t_last = t
            moved = N * n_new * (d + 1)
            _log_comm(out, t, moved, (N - 1) * moved, n_new * (d + 1) + moved, moved)
    return out


def _embed(K, S, eig_floor):
    """Embedded candidates [M, r]: row x is z(x) = K_SS^{-1/2} k_S(x) for the dictionary S [r]."""
    if len(S) == 0:
        return np.zeros((K.shape[0], 0))
    return (psd_inv_sqrt(K[np.ix_(S, S)], eig_floor) @ K[S]).T


def approx_model(Zc, kdiag, G, b, lam):
    """Approximate model on all candidates: mean [M] = z^T A^{-1} b and sigma~^2 [M]
    = (k(x,x) - z^T G A^{-1} z) / lam clipped at 0, with A = lam I + G; Zc [M, r], G [r, r], b [r]."""
    A = lam * np.eye(len(G)) + G
    mean = Zc @ np.linalg.solve(A, b)
    quad = (Zc * (G @ np.linalg.solve(A, Zc.T)).T).sum(1)
    return mean, np.maximum(kdiag - quad, 0.0) / lam


def approx_dis_kernel_ucb_np(Xc, f, eps, u_uniform, u_incl, *, beta, lam, lengthscale, noise_std, D=20.0,
                             q_bar=4.0, forced_first_sync=10, eig_floor=1e-10, per_candidate=False):
    """Approx-DisKernelUCB (spec 4.3). u_uniform [T, N], u_incl [T, N, T] (per_candidate: [T, N, M]).

    Model at agent n: dictionary S (shared), z(x) = K_SS^{-1/2} k_S(x), global statistics Gm = sum z z^T,
    b = sum z y of the last sync, local increments dG_n, db_n since then; A_n = lam I + Gm + dG_n,
    mu~_n = z^T A_n^{-1} (b + db_n), sigma~^2_n = (k(x,x) - z^T (Gm + dG_n) A_n^{-1} z) / lam (Eq. 6
    scaling), pick argmax mu~_n + beta sigma~_n over all M candidates (first index on ties). While S is
    empty the agent picks candidate floor(u_uniform[t, n] M). Everything is recomputed from the
    statistics at each step (no rank-one updates).
    Trigger: after its observation, tr_n += lam sigma~^2_n(x_t) (model before adding x_t; this is 1 while
    S is empty). After all agents have acted at step t, a sync happens iff some tr_n > D, or if
    t == forced_first_sync and there has been no sync yet (the authors' forced first sync; None disables it).
    Sync at step t, phase 1: agent n keeps its point s = 0..t iff u_incl[t, n, s] < min(1, q_bar
    sigma2_last(x_s)), sigma2_last = the unscaled approximate variance lam sigma~^2 of the global model
    of the previous sync (1 before any sync); S^(n) = its kept candidates, deduplicated (first
    occurrence); S = the union, deduplicated by candidate id keeping first occurrences in the order
    agent 0's kept points in time order, then agent 1's, ... With per_candidate, agent n keeps
    candidate c, where it has c_n >= 1 points, iff u_incl[t, n, c] < 1 - (1 - p)^c_n (at least one of
    its points there kept, the same law as a draw per point), and S is the union in candidate order.
    If S is empty the agents go back to
    uniform picks. Phase 2: Gm, b are recomputed over ALL data of all agents with the new embedding;
    dG_n, db_n, tr_n are reset; sigma2_last is recomputed from (S, Gm, b) on the candidates after EVERY
    sync (spec pitfall 13; the authors' code never updated it).
    Communication per sync (full r x r matrices, not symmetric packing), in scalars per receiver: up
    = sum_n d |S^(n)| + N (|S|^2 + |S|), down = N (d |S| + |S|^2 + |S|); paper (spec 4.3) mean_n(d |S^(n)|)
    + |S|^2 + |S| + d |S| + |S|^2 + |S| (the average upload, one broadcast); code convention |S| (|S| + 1),
    the value the authors' code ends up logging at a sync (its dictionary upload entry is overwritten,
    spec 4.3), taken as stated there (no factor N)."""
    T, N, M, d, K, kdiag, fstar, out = _setup(Xc, f, eps, lengthscale)
    S = np.zeros(0, dtype=np.int64)
    Zc = _embed(K, S, eig_floor)
    Gm, b = np.zeros((0, 0)), np.zeros(0)
    dG, db = np.zeros((N, 0, 0)), np.zeros((N, 0))
    tr = np.zeros(N)
    s2_last = np.ones(M)
    H_ids, H_y = [[] for _ in range(N)], [[] for _ in range(N)]
    synced = False
    for t in range(T):
        for n in range(N):
            mean, s2 = approx_model(Zc, kdiag, Gm + dG[n], b + db[n], lam)
            if len(S) == 0:
                a = int(np.floor(u_uniform[t, n] * M))
            else:
                a = int(np.argmax(mean + beta * np.sqrt(s2)))
            y = f[a] + noise_std * eps[t, n, a]
            out["actions"][t, n], out["regret"][t, n] = a, fstar - f[a]
            tr[n] += lam * s2[a]
            dG[n] += np.outer(Zc[a], Zc[a])
            db[n] += Zc[a] * y
            H_ids[n].append(a)
            H_y[n].append(y)
        forced = forced_first_sync is not None and t == forced_first_sync and not synced
        if not (np.any(tr > D) or forced):
            continue
        kept = []
        for n in range(N):
            h = np.asarray(H_ids[n])
            if per_candidate:
                c = np.bincount(h, minlength=M)
                p_any = 1.0 - (1.0 - np.minimum(1.0, q_bar * s2_last)) ** c
                kept.append(np.flatnonzero((c > 0) & (u_incl[t, n] < p_any)))
                continue
            incl = u_incl[t, n, :t + 1] < np.minimum(1.0, q_bar * s2_last[h])
            kept.append(dedupe_first(h[incl]))
        S = np.unique(np.concatenate(kept)) if per_candidate else dedupe_first(np.concatenate(kept))
        Zc = _embed(K, S, eig_floor)
        r = len(S)
        Zh = [Zc[np.asarray(H_ids[n])] for n in range(N)]
        Gm = sum(Z.T @ Z for Z in Zh)
        b = sum(Z.T @ np.asarray(H_y[n]) for n, Z in enumerate(Zh))
        dG, db, tr[:] = np.zeros((N, r, r)), np.zeros((N, r)), 0.0
        s2_last = lam * approx_model(Zc, kdiag, Gm, b, lam)[1]
        synced = True
        uploaded, stats = sum(len(k) for k in kept), r * r + r
        _log_comm(out, t, d * uploaded + N * stats, N * (d * r + stats), d * uploaded / N + stats + d * r + stats,
                  r * (r + 1))
    return out


# --------------------------------------------------------------------------------------------------
# Test functions and candidate sets (spec 5.2-5.3); all are maximised
# --------------------------------------------------------------------------------------------------

# the four functions are the problem module's (NumPy, host side); tests/test_duets_reference.py checks
# their maxima against the published values
h1, h2, branin, hartmann4 = candidates.h1, candidates.h2, candidates.branin, candidates.hartmann4


def sphere_points(rng, M, d):
    """M points g/||g|| on the unit sphere of R^d, g ~ N(0, I)."""
    g = rng.standard_normal((M, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def cube_points(rng, M, d):
    """M points uniform in [0, 1]^d."""
    return rng.random((M, d))


PROBLEMS = ("h1", "h2", "branin", "hartmann4")


def make_problem(name, rng, M=2000):
    """A problem dict (X [M, d], f [M], lengthscale, theta or None) from the Generator rng. h1, h2:
    d = 10, theta = g/||g|| drawn first, then M sphere points, lengthscale 1; branin: M points in
    [0,1]^2, lengthscale 0.2; hartmann4: M points in [0,1]^4, lengthscale 1."""
    theta = None
    if name in ("h1", "h2"):
        theta = sphere_points(rng, 1, 10)[0]
        X = sphere_points(rng, M, 10)
        f = (h1 if name == "h1" else h2)(X, theta)
    elif name == "branin":
        X = cube_points(rng, M, 2)
        f = branin(X)
    elif name == "hartmann4":
        X = cube_points(rng, M, 4)
        f = hartmann4(X)
    else:
        raise ValueError(f"unknown problem {name!r}")
    return {"name": name, "X": X, "f": f, "lengthscale": 0.2 if name == "branin" else 1.0, "theta": theta}


# --------------------------------------------------------------------------------------------------
# Random inputs and the paper experiment
# --------------------------------------------------------------------------------------------------


def draws(rng, T, N, M, T1):
    """All random inputs of one run, from the Generator rng, in this order: eps [T, N, M]; u_query
    (per started epoch [N, T_j]); u_keep (per completed epoch [N T_j]); u_empty (per completed epoch);
    u_first [N]; u_uniform [T, N]; u_incl [T, N, T]."""
    nominal, steps = epoch_lengths(T, T1)
    n_done = len(nominal) - 1        # the last started epoch never communicates
    eps = rng.standard_normal((T, N, M))
    u_query = [rng.random((N, Tj)) for Tj in nominal]
    u_keep = [rng.random(N * Tj) for Tj in nominal[:n_done]]
    u_empty = list(rng.random(n_done))
    return {"eps": eps, "u_query": u_query, "u_keep": u_keep, "u_empty": u_empty,
            "u_first": rng.random(N), "u_uniform": rng.random((T, N)), "u_incl": rng.random((T, N, T))}


def run_algorithm(name, prob, dr, *, beta, lam=0.2, noise_std=0.2, T1=2, p0=10.0, D_dis=10.0, D_approx=20.0):
    """Run one algorithm ('DUETS', 'DisKernelUCB', 'ApproxDisKernelUCB', 'N-KernelUCB') on a problem
    dict with the draws dict dr."""
    common = dict(beta=beta, lam=lam, lengthscale=prob["lengthscale"], noise_std=noise_std)
    X, f, eps = prob["X"], prob["f"], dr["eps"]
    if name == "DUETS":
        return duets_np(X, f, eps, dr["u_query"], dr["u_keep"], dr["u_empty"], T1=T1, p0=p0, **common)
    if name == "DisKernelUCB":
        return dis_kernel_ucb_np(X, f, eps, dr["u_first"], D=D_dis, **common)
    if name == "ApproxDisKernelUCB":
        return approx_dis_kernel_ucb_np(X, f, eps, dr["u_uniform"], dr["u_incl"], D=D_approx, **common)
    if name == "N-KernelUCB":
        return n_kernel_ucb_np(X, f, eps, dr["u_first"], **common)
    raise ValueError(f"unknown algorithm {name!r}")


ALGORITHMS = ("DUETS", "DisKernelUCB", "ApproxDisKernelUCB", "N-KernelUCB")
BETAS = (0.2, 0.5, 1.0, 2.0, 5.0)


def main(n_seeds=5, N=10, T=50, M=2000):
    """Paper configuration: per function and algorithm, the beta with the smallest mean R(T) over
    n_seeds runs, with R(T) and C(T) (paper convention) mean +- std (ddof 0) and the mean of C_code(T).
    `python -m reference.duets_np [n_seeds]`; the matrices are small, so a single-threaded BLAS
    (e.g. OPENBLAS_NUM_THREADS=1) is usually the fastest. One Generator
    default_rng(0) makes the four problems in the order h1, h2, branin, hartmann4; run s uses the draws of
    default_rng(1000 + s), shared by every algorithm and beta."""
    t_start = time.perf_counter()
    rng = np.random.default_rng(0)
    problems = [make_problem(name, rng, M) for name in PROBLEMS]
    print(f"N={N} T={T} M={M} seeds={n_seeds} betas={BETAS}")
    print(f"{'function':<10} {'algorithm':<19} {'beta':>5} {'R(T) mean':>10} {'std':>8} "
          f"{'C(T) mean':>11} {'std':>10} {'C_code(T)':>10}")
    for prob in problems:
        seeds = [draws(np.random.default_rng(1000 + s), T, N, M, 2) for s in range(n_seeds)]
        for alg in ALGORITHMS:
            res = {}
            for beta in BETAS:
                outs = [run_algorithm(alg, prob, dr, beta=beta) for dr in seeds]
                res[beta] = (np.array([o["regret"].sum() for o in outs]),
                             np.array([o["comm_paper"].sum() for o in outs]),
                             np.array([o["comm_code"].sum() for o in outs]))
            beta = min(BETAS, key=lambda b: res[b][0].mean())
            R, C, Cc = res[beta]
            print(f"{prob['name']:<10} {alg:<19} {beta:>5} {R.mean():>10.2f} {R.std():>8.2f} "
                  f"{C.mean():>11.1f} {C.std():>10.1f} {Cc.mean():>10.1f}", flush=True)
    print(f"total time {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    import sys

    main(n_seeds=int(sys.argv[1]) if len(sys.argv) > 1 else 5)
