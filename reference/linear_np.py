"""Plain NumPy LinUCB and linear Thompson sampling for one agent, one step at a time.

Written straight from the formulas, with a fresh inverse of V every step:
    V = lam I + sum x x^T,  b = sum r x,  mu = V^{-1} b
    LinUCB:  score_k = x_k . mu + beta * ||x_k||_{V^{-1}}   (bonus="quadratic": beta * x_k^T V^{-1} x_k)
    LinTS:   theta = mu + nu * L^{-T} z with L = chol(V), z the given standard-normal draw; score = x_k . theta
Action = np.argmax(scores) (first index on ties).

Inputs: contexts[T, K, d], rewards[T, K] (the reward of the chosen arm is used), optional
active[T] bool (an inactive step selects but does not learn) and max_history (stop learning after
that many observations). Returns a dict with actions[T], scores[T, K], V[d, d], b[d], mu[d].
"""
import numpy as np


def _run(contexts, rewards, lam, score_fn, active=None, max_history=None):
    T, K, d = contexts.shape
    V = lam * np.eye(d)
    b = np.zeros(d)
    n = 0
    actions = np.zeros(T, dtype=np.int64)
    scores = np.zeros((T, K))
    for t in range(T):
        Vinv = np.linalg.inv(V)
        mu = Vinv @ b
        s = score_fn(t, contexts[t], V, Vinv, mu)
        a = int(np.argmax(s))
        actions[t], scores[t] = a, s
        if active is not None and not active[t]:
            continue
        if max_history is not None and n >= max_history:
            continue
        x = contexts[t, a]
        V = V + np.outer(x, x)
        b = b + rewards[t, a] * x
        n += 1
    return {"actions": actions, "scores": scores, "V": V, "b": b, "mu": np.linalg.inv(V) @ b, "n": n}


def linucb(contexts, rewards, lam, beta, bonus="norm", active=None, max_history=None):
    def score(t, X, V, Vinv, mu):
        quad = np.array([x @ Vinv @ x for x in X])
        width = np.sqrt(quad) if bonus == "norm" else quad
        return X @ mu + beta * width

    return _run(contexts, rewards, lam, score, active, max_history)


def lints(contexts, rewards, z, lam, nu, active=None, max_history=None):
    """z[T, d]: the standard-normal draw of each step."""

    def score(t, X, V, Vinv, mu):
        L = np.linalg.cholesky(V)
        theta = mu + nu * np.linalg.inv(L).T @ z[t]
        return X @ theta

    return _run(contexts, rewards, lam, score, active, max_history)
