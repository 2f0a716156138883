"""Plain NumPy DisKernelUCB, OneKernelUCB, NKernelUCB and DisLinUCB, step by step from the spec.

Asynchronous environment: at step t only client arrivals[t] acts, on contexts[t, i] ([K, d]),
and gets rewards[t, i, a]. Ties of the score (within 1e-10 (1 + |max|)) go to the largest
tie_noise[t, i] ([T, N, K]). Kernel: rbf with a lengthscale. Exact quantities with a fresh
inverse every step (no incremental algebra):

    mean(x) = k_x^T (K + lam I)^{-1} y,  var(x) = max(k(x, x) - k_x^T (K + lam I)^{-1} k_x, 0) / lam
    (no data: mean 0, var k(x, x) / lam);  score = mean + alpha sqrt(var).

DisKernelUCB: client i uses the pooled data G of the last sync followed by its new points; after
its step it syncs all clients if count * (logdet(K_loc + lam I) - logdet(K_G + lam I) - m log lam)
> threshold (count = global steps since the last sync, or the client's number of new points).
A sync appends client 0's new points, then client 1's, ...; up = (d+1) P, down = (d+1)(N-1) P.

DisLinUCB: client i has A_i = A_g + dA_i, b_i = b_g + db_i; score x.theta + alpha ||x||_{V^-1},
V = A_i + lam I, theta = V^{-1} b_i; sync when n_i log(det V / det(A_g + lam I)) >= threshold;
up = down = N (d^2 + d + 1).
Each function returns a dict of per-step arrays (actions [T], mean/var [T, K], comm arrays [T]).
"""
import numpy as np

from .async_kernel_np import argmax_ties
from .kernel_np import kernel_matrix


def exact_mean_var(X, Y, C, lam, lengthscale):
    """Exact KRR mean[K], var[K] (with the 1/lam factor) of data X[n, d], Y[n] at C[K, d]."""
    k = lambda A, B: kernel_matrix("rbf", A, B, lengthscale)
    prior = np.diag(k(C, C))
    if len(Y) == 0:
        return np.zeros(len(C)), prior / lam
    Ainv = np.linalg.inv(k(X, X) + lam * np.eye(len(Y)))
    kx = k(X, C)
    mean = kx.T @ Ainv @ Y
    var = np.maximum(prior - np.einsum("ik,ij,jk->k", kx, Ainv, kx), 0.0) / lam
    return mean, var


def _logdet(X, lam, lengthscale):
    if len(X) == 0:
        return 0.0
    return np.linalg.slogdet(kernel_matrix("rbf", X, X, lengthscale) + lam * np.eye(len(X)))[1]


def step_outputs(T, K, *per_step):
    """The per-step output arrays of a reference loop: actions [T], mean/var [T, K], up/down/rounds
    [T], and one float [T] array for each name in `per_step`."""
    out = {"actions": np.zeros(T, dtype=np.int64), "mean": np.zeros((T, K)), "var": np.zeros((T, K))}
    out.update({name: np.zeros(T) for name in ("up", "down", "rounds") + per_step})
    return out


def _out(T, K):
    return {**step_outputs(T, K, "logdet_ratio"), "n_global": np.zeros(T, dtype=np.int64)}


def dis_kernel_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, threshold, lengthscale,
                      trigger_count="elapsed"):
    T, N, K, d = contexts.shape
    out = _out(T, K)
    GX, GY = [], []
    loc = [[] for _ in range(N)]
    elapsed = 0
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        X = np.array(GX + [p for p, _ in loc[i]]).reshape(-1, d)
        Y = np.array(GY + [r for _, r in loc[i]])
        mean, var = exact_mean_var(X, Y, C, lam, lengthscale)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        loc[i].append((C[a].copy(), rewards[t, i, a]))
        elapsed += 1
        Xl = np.array(GX + [p for p, _ in loc[i]]).reshape(-1, d)
        ratio = _logdet(Xl, lam, lengthscale) - _logdet(np.array(GX).reshape(-1, d), lam, lengthscale) \
            - len(loc[i]) * np.log(lam)
        count = elapsed if trigger_count == "elapsed" else len(loc[i])
        out["logdet_ratio"][t] = ratio
        if count * ratio > threshold:
            P = 0
            for j in range(N):
                for p, r in loc[j]:
                    GX.append(p)
                    GY.append(r)
                    P += 1
                loc[j] = []
            elapsed = 0
            out["up"][t], out["down"][t], out["rounds"][t] = (d + 1) * P, (d + 1) * (N - 1) * P, 1
        out["n_global"][t] = len(GY)
    return out


def one_kernel_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, lengthscale):
    T, N, K, d = contexts.shape
    out = _out(T, K)
    X, Y = np.zeros((0, d)), np.zeros(0)
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        mean, var = exact_mean_var(X, Y, C, lam, lengthscale)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        X, Y = np.vstack([X, C[a]]), np.append(Y, rewards[t, i, a])
        out["up"][t], out["down"][t], out["rounds"][t] = d + 1, (N - 1) * (d + 1), 1
    return out


def n_kernel_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, lengthscale):
    T, N, K, d = contexts.shape
    out = _out(T, K)
    X = [np.zeros((0, d)) for _ in range(N)]
    Y = [np.zeros(0) for _ in range(N)]
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        mean, var = exact_mean_var(X[i], Y[i], C, lam, lengthscale)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        X[i], Y[i] = np.vstack([X[i], C[a]]), np.append(Y[i], rewards[t, i, a])
    return out


def dis_lin_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, threshold):
    T, N, K, d = contexts.shape
    out = _out(T, K)
    Ag, bg = np.zeros((d, d)), np.zeros(d)
    dA, db, n = np.zeros((N, d, d)), np.zeros((N, d)), np.zeros(N, dtype=np.int64)
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        V = Ag + dA[i] + lam * np.eye(d)
        Vinv = np.linalg.inv(V)
        mean = C @ (Vinv @ (bg + db[i]))
        var = np.einsum("kd,de,ke->k", C, Vinv, C)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        x = C[a]
        dA[i] += np.outer(x, x)
        db[i] += rewards[t, i, a] * x
        n[i] += 1
        ratio = np.linalg.slogdet(Ag + dA[i] + lam * np.eye(d))[1] - np.linalg.slogdet(Ag + lam * np.eye(d))[1]
        out["logdet_ratio"][t] = ratio
        if n[i] * ratio >= threshold:
            Ag, bg = Ag + dA.sum(0), bg + db.sum(0)
            dA[:], db[:], n[:] = 0.0, 0.0, 0
            out["up"][t] = out["down"][t] = N * (d * d + d + 1)
            out["rounds"][t] = 1
    return out


def fed_lin_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, alpha_c):
    """FedLinUCB: score with the downloaded (Phi_i, b_i); buffer; upload/download when
    det(lam I + Phi_i + dPhi_i) > (1 + alpha_c) det(lam I + Phi_i); up = down = d^2 + d."""
    T, N, K, d = contexts.shape
    out = _out(T, K)
    Ag, bg = np.zeros((d, d)), np.zeros(d)
    Adl, bdl = np.zeros((N, d, d)), np.zeros((N, d))
    dA, db = np.zeros((N, d, d)), np.zeros((N, d))
    I = np.eye(d)
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        Vinv = np.linalg.inv(Adl[i] + lam * I)
        mean = C @ (Vinv @ bdl[i])
        var = np.einsum("kd,de,ke->k", C, Vinv, C)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        x = C[a]
        dA[i] += np.outer(x, x)
        db[i] += rewards[t, i, a] * x
        if np.linalg.det(lam * I + Adl[i] + dA[i]) > (1 + alpha_c) * np.linalg.det(lam * I + Adl[i]):
            Ag, bg = Ag + dA[i], bg + db[i]
            Adl[i], bdl[i] = Ag.copy(), bg.copy()
            dA[i], db[i] = 0.0, 0.0
            out["up"][t] = out["down"][t] = d * d + d
            out["rounds"][t] = 1
    return out
