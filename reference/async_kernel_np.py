"""Plain NumPy Async-KernelUCB (and exact KernelUCB as its limit), step by step from the spec.

Async-KernelUCB (Algorithm 1 of Li et al., ICLR 2023, with the corrected basis change):
    - dictionary S: a Python list of points, only appended; every client's dictionary is a prefix;
      a sampled point equal to a dictionary point, or with residual k(x,x) - k_S^T K_SS^{-1} k_S
      <= tol * k(x,x) (no new direction), is not appended;
    - embedding z(x; S) = W_S k_S(x), W_S the symmetric pseudo-inverse root of K_SS (eigenvalues
      <= tol * max dropped);
    - mean = z^T (A + lam I)^{-1} b, var = max(k - |z|^2, 0)/lam + max(z^T (A + lam I)^{-1} z, 0);
    - the server keeps EACH client's statistics (A_j, b_j) and re-expresses every one of them in the
      new basis at every event (T = W_old K_{S_old, S_new} W_new), then sums them.

Inputs: arrivals[T] (the active client), contexts[T, N, K, d] (client arrivals[t] uses
contexts[t, arrivals[t]]), rewards[T, N, K], tie_noise[T, N, K] (ties of the score, within
1e-10 (1 + |max|), go to the largest noise), rls_uniform[T, B] (the RLS draw of the j-th
buffered point at an event of step t is rls_uniform[t, j]). Kernel: rbf with a lengthscale.
Returns a dict of per-step arrays: actions, up, down, rounds, dict_size, acc, trigger, and
mean/var [T, K] of the active client, plus the final server aggregate in both forms.
"""
import numpy as np

from .kernel_np import kernel_matrix

TIE_RTOL = 1e-10


def sym_root_pinv(K, tol=1e-10):
    """W = K^{-1/2} on the eigenvalues > tol * max (pseudo-inverse), symmetric."""
    if K.shape[0] == 0:
        return np.zeros((0, 0))
    ev, U = np.linalg.eigh(0.5 * (K + K.T))
    w = np.where(ev > tol * max(ev.max(), 1e-300), 1.0 / np.sqrt(np.maximum(ev, 1e-300)), 0.0)
    return (U * w) @ U.T


def new_direction(k, S, x, tol):
    """True when x is not (numerically) in the span of the dictionary S in the feature space:
    its residual k(x,x) - k_S(x)^T K_SS^{-1} k_S(x) exceeds tol * k(x,x)."""
    kxx = k(x[None], x[None])[0, 0]
    if not S:
        return kxx > 0
    Sa = np.array(S)
    ks = k(Sa, x[None])[:, 0]
    return kxx - ks @ np.linalg.solve(k(Sa, Sa), ks) > tol * abs(kxx)


def argmax_ties(scores, noise):
    best = scores.max()
    tied = scores >= best - TIE_RTOL * (1.0 + abs(best))
    return int(np.argmax(np.where(tied, noise, -1.0)))


class _Model:
    """Nyström ridge regression of a dictionary S (list) and statistics A, b in its basis."""

    def __init__(self, S, A, b, lam, k, tol):
        self.S = [s.copy() for s in S]
        self.lam, self.k = lam, k
        m = len(S)
        self.W = sym_root_pinv(k(np.array(S), np.array(S)), tol) if m else np.zeros((0, 0))
        self.Pinv = np.linalg.inv(A + lam * np.eye(m))
        self.b = b

    def embed(self, X):
        if not self.S:
            return np.zeros((X.shape[0], 0))
        return self.k(X, np.array(self.S)) @ self.W

    def mean_var(self, X):
        Z = self.embed(X)
        prior = np.diag(self.k(X, X))
        mean = Z @ (self.Pinv @ self.b)
        var = np.maximum(prior - np.sum(Z * Z, 1), 0.0) / self.lam + np.maximum(
            np.einsum("mi,ij,mj->m", Z, self.Pinv, Z), 0.0)
        return mean, var


def async_kernel_ucb_np(arrivals, contexts, rewards, tie_noise, rls_uniform, *, lam, alpha, q, threshold,
                        lengthscale, tol=1e-10):
    T, N, K, d = contexts.shape
    k = lambda A, B: kernel_matrix("rbf", A, B, lengthscale)
    S = []  # dictionary, append order
    A_cl = [np.zeros((0, 0)) for _ in range(N)]  # server: each client's stats in the current basis
    b_cl = [np.zeros(0) for _ in range(N)]
    snapshot = [_Model([], np.zeros((0, 0)), np.zeros(0), lam, k, tol) for _ in range(N)]
    buf = [[] for _ in range(N)]
    acc = np.zeros(N)
    out = {name: np.zeros(T) for name in ("up", "down", "rounds", "dict_size", "acc", "trigger")}
    out["actions"] = np.zeros(T, dtype=np.int64)
    out["mean"], out["var"] = np.zeros((T, K)), np.zeros((T, K))
    A_fast, b_fast = np.zeros((0, 0)), np.zeros(0)  # the cheaper aggregate form, for comparison
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        mean, var = snapshot[i].mean_var(C)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        x, y = C[a], rewards[t, i, a]
        buf[i].append((x, y))
        acc[i] += snapshot[i].mean_var(x[None])[1][0]
        if acc[i] > threshold:
            # message 1: the server's current dictionary and aggregate
            m_old = len(S)
            server = _Model(S, sum(A_cl), sum(b_cl) if m_old else np.zeros(0), lam, k, tol)
            Xb = np.array([p for p, _ in buf[i]])
            yb = np.array([r for _, r in buf[i]])
            _, fresh = server.mean_var(Xb)
            for j, xs in enumerate(Xb):
                if rls_uniform[t, j] < min(1.0, q * fresh[j]):
                    if not any(np.array_equal(xs, s) for s in S) and new_direction(k, S, xs, tol):
                        S.append(xs.copy())
            m_new = len(S)
            # message 2: the buffer embedded with the NEW dictionary
            new = _Model(S, np.zeros((m_new, m_new)), np.zeros(m_new), lam, k, tol)
            Z = new.embed(Xb)
            dA, db = Z.T @ Z, Z.T @ yb
            # server: basis change of every client's stats, then aggregate
            Tm = server.W @ k(np.array(S[:m_old]).reshape(m_old, d), np.array(S)) @ new.W if m_old else \
                np.zeros((0, m_new))
            A_fast = Tm.T @ A_fast @ Tm + dA
            b_fast = Tm.T @ b_fast + db
            for j in range(N):
                if m_old:
                    A_cl[j], b_cl[j] = Tm.T @ A_cl[j] @ Tm, Tm.T @ b_cl[j]
                else:
                    A_cl[j], b_cl[j] = np.zeros((m_new, m_new)), np.zeros(m_new)
            A_cl[i], b_cl[i] = A_cl[i] + dA, b_cl[i] + db
            # message 3: the new aggregate becomes client i's snapshot
            snapshot[i] = _Model(S, sum(A_cl), sum(b_cl), lam, k, tol)
            out["up"][t] = d * (m_new - m_old) + m_new**2 + m_new
            out["down"][t] = d * m_old + m_old**2 + m_old + m_new**2 + m_new
            out["rounds"][t] = out["trigger"][t] = 1
            buf[i], acc[i] = [], 0.0
        out["acc"][t], out["dict_size"][t] = acc[i], len(S)
    out["A_agg"], out["b_agg"] = sum(A_cl), sum(b_cl)
    out["A_fast"], out["b_fast"] = A_fast, b_fast
    out["dictionary"] = np.array(S).reshape(len(S), d)
    return out


def exact_kernel_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, lengthscale):
    """Pooled exact KernelUCB with the same scale: var = (k - k_x^T (K + lam I)^{-1} k_x) / lam."""
    T, N, K, d = contexts.shape
    k = lambda A, B: kernel_matrix("rbf", A, B, lengthscale)
    X, Y = np.zeros((0, d)), np.zeros(0)
    out = {"actions": np.zeros(T, dtype=np.int64), "mean": np.zeros((T, K)), "var": np.zeros((T, K))}
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        prior = np.diag(k(C, C))
        if len(Y):
            Ainv = np.linalg.inv(k(X, X) + lam * np.eye(len(Y)))
            kx = k(X, C)
            mean = kx.T @ Ainv @ Y
            var = np.maximum(prior - np.einsum("ik,ij,jk->k", kx, Ainv, kx), 0.0) / lam
        else:
            mean, var = np.zeros(K), prior / lam
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        X, Y = np.vstack([X, C[a]]), np.append(Y, rewards[t, i, a])
    return out
