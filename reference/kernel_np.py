"""Plain NumPy KernelUCB / GP-UCB and kernel Thompson sampling for one agent, step by step.

Written straight from the formulas, with a fresh inverse of (K + lam I) every step:
    K = k(X_hist, X_hist),  k_x = k(X_hist, x)
    mean(x) = k_x^T (K + lam I)^{-1} y,  var(x) = max(k(x, x) - k_x^T (K + lam I)^{-1} k_x, 0)
    (no history: mean = 0, var = k(x, x))
    UCB: mean + beta * sqrt(var);   TS: mean + sqrt(max(nu^2 var, var_floor)) * z_k
Action = np.argmax(scores) (first index on ties).

Inputs: contexts[T, K, d], rewards[T, K] (the reward of the chosen arm is used), optional
active[T] bool (an inactive step selects but does not learn) and max_history (the history stops
growing at that size). Returns actions[T], mean[T, K], var[T, K], scores[T, K], X[n, d], y[n].
"""
import numpy as np


def kernel_matrix(name, A, B, lengthscale=1.0, degree=2.0, c=1.0):
    """k(A[n, d], B[m, d]) -> [n, m], from the textbook formulas."""
    sq = np.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1)
    r = np.sqrt(sq)
    if name == "rbf":
        return np.exp(-sq / (2.0 * lengthscale**2))
    if name == "laplacian":
        return np.exp(-r / lengthscale)
    if name == "matern32":
        s = np.sqrt(3.0) * r / lengthscale
        return (1.0 + s) * np.exp(-s)
    if name == "matern52":
        s = np.sqrt(5.0) * r / lengthscale
        return (1.0 + s + s**2 / 3.0) * np.exp(-s)
    if name == "linear":
        return A @ B.T
    if name == "polynomial":
        return (A @ B.T + c) ** degree
    raise KeyError(name)


def _run(contexts, rewards, kernel, lam, lengthscale, score_fn, active=None, max_history=None):
    T, K, d = contexts.shape
    k = lambda A, B: kernel_matrix(kernel, A, B, lengthscale)
    X = np.zeros((0, d))
    y = np.zeros(0)
    out = {name: np.zeros((T, K)) for name in ("mean", "var", "scores")}
    actions = np.zeros(T, dtype=np.int64)
    for t in range(T):
        C = contexts[t]
        prior = np.diag(k(C, C))
        if len(y) == 0:
            mean, var = np.zeros(K), prior
        else:
            Ainv = np.linalg.inv(k(X, X) + lam * np.eye(len(y)))
            kx = k(X, C)  # [n, K]
            mean = kx.T @ Ainv @ y
            var = np.maximum(prior - np.einsum("ik,ij,jk->k", kx, Ainv, kx), 0.0)
        s = score_fn(t, mean, var)
        a = int(np.argmax(s))
        actions[t] = a
        out["mean"][t], out["var"][t], out["scores"][t] = mean, var, s
        if active is not None and not active[t]:
            continue
        if max_history is not None and len(y) >= max_history:
            continue
        X = np.vstack([X, C[a]])
        y = np.append(y, rewards[t, a])
    out.update(actions=actions, X=X, y=y)
    return out


def kernel_ucb(contexts, rewards, kernel, lam, beta, lengthscale=1.0, active=None, max_history=None):
    return _run(
        contexts, rewards, kernel, lam, lengthscale,
        lambda t, mean, var: mean + beta * np.sqrt(var), active, max_history,
    )


def kernel_ts(contexts, rewards, z, kernel, lam, nu, lengthscale=1.0, var_floor=0.0, active=None, max_history=None):
    """z[T, K]: the standard-normal draws of each step."""
    return _run(
        contexts, rewards, kernel, lam, lengthscale,
        lambda t, mean, var: mean + np.sqrt(np.maximum(nu**2 * var, var_floor)) * z[t], active, max_history,
    )
