"""Plain NumPy DUETS as the authors' early code runs it (spec §3.8), a loop over epochs and steps.

Setting as in duets_np: candidates Xc [M, d] with noiseless values f [M], f* = max f; N agents act at
every step t = 0..T-1; agent n choosing candidate a at step t observes f[a] + noise_std * eps[t, n, a];
SE kernel k(x, x') = exp(-||x - x'||^2 / (2 l^2)). All randomness is an input.

The rules, from the spec's description of the code:
    epochs: T_1 given, T_{j+1} = ceil(sqrt(T T_j)); the last epoch is cut at T, and after it nothing
        is sent and nothing trimmed;
    queries: agent n's i-th query of epoch j is A[floor(u_query[j][n, i] |A|)], A the active ids
        in increasing order (uniform over the active set, with replacement);
    after a completed epoch: D = the N T_j queries, agent-major, Y their rewards (this epoch only);
        p = p_log log(N T_j) / (N T_j); point i of D is kept iff u_keep[j][i] < p, and S = the kept
        points IN D ORDER, DUPLICATES INCLUDED (possibly none);
        with B = lam K_SS + K_SD K_DS and pinv the Moore-Penrose pseudo-inverse,
            mu~(x)      = k_S(x)^T pinv(B) K_SD Y,
            sigma~^2(x) = (k(x, x) - k_S(x)^T pinv(K_SS) k_S(x)) / lam + k_S(x)^T pinv(B) k_S(x)
        over the active candidates (an empty S gives mu~ = 0, sigma~^2 = k(x, x) / lam);
        keep x iff mu~(x) + beta sigma~(x) >= max_active (mu~ - beta sigma~).
Communication of a completed epoch, logged at its last step, in scalars per receiver: each of the N agents
uploads |S| (kept draws) and receives (d + 1)|S| (S and the vector pinv(B) K_SD Y): up = N |S|,
down = N (d + 1)|S|; the DUETS paper's count (one agent's upload, one broadcast) (d + 2)|S|; code
convention N |S| (the code logs it one step later).

The returned dict holds per-step arrays actions [T, N], regret [T, N], comm_up, comm_down, comm_paper, comm_code,
syncs [T], and per completed epoch the lists T_j, p, S_ids, mu_tilde, sigma_tilde (over the active ids,
ascending), active_before, active_after, best_survived, plus active_masks ([M] at every epoch start).
"""
import math

import numpy as np

from .duets_np import se_kernel


def epoch_lengths_ceil(T, T1):
    """(nominal, steps) of the epochs started: T_1 = T1, T_{j+1} = ceil(sqrt(T T_j)); steps cut at T."""
    nominal, steps, done, Tj = [], [], 0, int(T1)
    while done < T:
        nominal.append(Tj)
        steps.append(min(Tj, T - done))
        done += steps[-1]
        Tj = int(np.ceil(np.sqrt(T * Tj)))
    return nominal, steps


def code_model(K_SS, K_SD, K_SQ, kqq, y, lam):
    """mu~ [q] and sigma~ [q] at q query points by the pseudo-inverse formulas of the module docstring;
    K_SS [r, r], K_SD [r, m], K_SQ [r, q], kqq [q] = k(x, x), y [m]; r = 0 is allowed."""
    B_pinv = np.linalg.pinv(lam * K_SS + K_SD @ K_SD.T) if len(K_SS) else np.zeros((0, 0))
    Kss_pinv = np.linalg.pinv(K_SS) if len(K_SS) else np.zeros((0, 0))
    mu = K_SQ.T @ (B_pinv @ (K_SD @ y))
    var = (kqq - (K_SQ * (Kss_pinv @ K_SQ)).sum(0)) / lam + (K_SQ * (B_pinv @ K_SQ)).sum(0)
    return mu, np.sqrt(np.maximum(var, 0.0))


def duets_authors_np(Xc, f, eps, u_query, u_keep, *, T1, p_log, beta, lam, lengthscale, noise_std):
    """The loop of the module docstring. eps [T, N, M]; u_query: per started epoch [N, T_j] (nominal
    T_j); u_keep: per completed epoch [N T_j] (agent-major)."""
    T, N, M = eps.shape
    d = Xc.shape[1]
    fstar, best = f.max(), int(np.argmax(f))
    out = {"actions": np.zeros((T, N), dtype=np.int64), "regret": np.zeros((T, N))}
    out.update({k: np.zeros(T) for k in ("comm_up", "comm_down", "comm_paper", "comm_code", "syncs")})
    lists = ("T_j", "p", "S_ids", "mu_tilde", "sigma_tilde", "active_before", "active_after", "best_survived",
             "active_masks")
    out.update({k: [] for k in lists})
    active = np.ones(M, dtype=bool)
    start = 0
    for j, (Tj, steps) in enumerate(zip(*epoch_lengths_ceil(T, T1))):
        out["active_masks"].append(active.copy())
        A = np.flatnonzero(active)
        q = A[np.floor(u_query[j] * len(A)).astype(np.int64)]            # [N, T_j]
        y = np.zeros((N, Tj))
        for i in range(steps):
            t = start + i
            for n in range(N):
                a = q[n, i]
                out["actions"][t, n] = a
                out["regret"][t, n] = fstar - f[a]
                y[n, i] = f[a] + noise_std * eps[t, n, a]
        if start + steps >= T:
            break
        D, Y = q.reshape(-1), y.reshape(-1)                               # agent-major
        p = p_log * math.log(N * Tj) / (N * Tj)
        S = D[np.asarray(u_keep[j]) < p]                                  # duplicates kept
        XS, XD, XA = Xc[S], Xc[D], Xc[A]
        mu, sig = code_model(se_kernel(XS, XS, lengthscale), se_kernel(XS, XD, lengthscale),
                             se_kernel(XS, XA, lengthscale), np.ones(len(A)), Y, lam)
        keep = mu + beta * sig >= np.max(mu - beta * sig)
        active = np.zeros(M, dtype=bool)
        active[A[keep]] = True
        t_end = start + Tj - 1
        out["comm_up"][t_end] = N * len(S)
        out["comm_down"][t_end] = N * (d + 1) * len(S)
        out["comm_paper"][t_end] = (d + 2) * len(S)
        out["comm_code"][t_end] = N * len(S)
        out["syncs"][t_end] = 1
        for k, v in zip(lists[:-1], (Tj, min(p, 1.0), S, mu, sig, len(A), int(keep.sum()), bool(active[best]))):
            out[k].append(v)
        start += Tj
    return out
