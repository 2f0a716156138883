"""Plain NumPy Approx-DisKernelUCB (baseline B3) and FedGLB-UCB (B6), step by step from the spec.

Asynchronous environment: at step t only client arrivals[t] acts, on contexts[t, i] ([K, d]), and
gets rewards[t, i, a]. Ties of the score (within 1e-10 (1 + |max|)) go to the largest
tie_noise[t, i] ([T, N, K]). Kernel: rbf with a lengthscale. Everything is recomputed from
lists at every step (fresh inverses, no rank-one updates):

    - dictionary S (list), its root W = K_SS^{-1/2} (pseudo-inverse, eigenvalues <= tol * max
      dropped), z(x) = W k_S(x);
    - global statistics A_g = sum z z^T, b_g = sum z y over all data up to the last sync;
      client i scores with A_i = A_g + sum over its new points of z z^T (b_i likewise):
      mean = z^T (A_i + lam I)^{-1} b_i, var = max(k - |z|^2, 0)/lam + z^T (A_i + lam I)^{-1} z;
    - V_i = sum over i's new points of the global-model variance; sync when count * V_i > threshold
      (count = i's number of new points, or the steps since the last sync);
    - sync: each client j keeps its history point at pooled position s when
      rls_uniform[t, s] < min(1, q var_g(x_s)); S_new = kept points in arrival order without
      duplicates (exact, or residual k(x,x) - k_S^T K_SS^{-1} k_S <= tol k(x,x) against S_new so far); A_g, b_g = statistics of all history in S_new;
      up = d sum_j |S_j| + N (m^2 + m), down = N d m + N (m^2 + m), m = |S_new|, |S_j| the distinct
      points client j keeps (it uploads a point it saw twice once).
Returns a dict of per-step arrays: actions, mean/var [T, K] of the active client, up, down,
rounds, var_sum, dict_size.

FedGLB-UCB (the reading of bandits_jax.algorithms.distributed.fed_glb): V_i = A_g + dA_i + (lam/c_mu) I, centre
V_i^{-1} (A_g theta_g + sum_new x z), z = x^T theta_i before the step; online Newton step
theta_i -= V_i^{-1} (mu(x^T theta_i) - y) x / c_mu; sync when n_i (log det V_i - log det V_g) >= threshold;
the sync runs Nesterov's method on the summed regularised logistic loss with a plain loop.
Returns actions, mean/var [T, K], up, down, rounds, logdet_ratio, agd_iters.
"""
import numpy as np

from .async_kernel_np import new_direction, argmax_ties, sym_root_pinv
from .dis_kernel_np import step_outputs
from .kernel_np import kernel_matrix


def approx_dis_kernel_ucb_np(arrivals, contexts, rewards, tie_noise, rls_uniform, *, lam, alpha, q, threshold,
                             lengthscale, trigger_count="client", tol=1e-10):
    T, N, K, d = contexts.shape
    k = lambda A, B: kernel_matrix("rbf", A, B, lengthscale)
    S = np.zeros((0, d))
    W = np.zeros((0, 0))
    hist = []  # (x, y, owner) in arrival order
    n_sync = 0  # history length at the last sync

    def embed(X):
        if len(S) == 0:
            return np.zeros((len(X), 0))
        return k(X, S) @ W

    def stats(rows):
        Z = embed(np.array([h[0] for h in rows]).reshape(-1, d))
        y = np.array([h[1] for h in rows])
        return Z.T @ Z, Z.T @ y

    def mean_var(A, b, X):
        Z = embed(X)
        P = np.linalg.inv(A + lam * np.eye(len(S)))
        prior = np.diag(k(X, X))
        var = np.maximum(prior - np.sum(Z * Z, 1), 0.0) / lam + np.maximum(np.einsum("mi,ij,mj->m", Z, P, Z), 0.0)
        return Z @ (P @ b), var

    Ag, bg = np.zeros((0, 0)), np.zeros(0)
    var_sum = np.zeros(N)
    elapsed = 0
    out = step_outputs(T, K, "var_sum", "dict_size")
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        new_i = [h for h in hist[n_sync:] if h[2] == i]
        dA, db = stats(new_i) if new_i else (np.zeros_like(Ag), np.zeros_like(bg))
        mean, var = mean_var(Ag + dA, bg + db, C)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        x = C[a].copy()
        hist.append((x, rewards[t, i, a], i))
        elapsed += 1
        var_sum[i] += mean_var(Ag, bg, x[None])[1][0]
        count = len(new_i) + 1 if trigger_count == "client" else elapsed
        out["var_sum"][t] = var_sum[i]
        if count * var_sum[i] > threshold:
            X = np.array([h[0] for h in hist])
            _, var_g = mean_var(Ag, bg, X)
            uploaded, S_new = [], []
            for s, (xs, _, owner) in enumerate(hist):
                if rls_uniform[t, s] < min(1.0, q * var_g[s]):
                    if not any(o == owner and np.array_equal(xs, p) for o, p in uploaded):
                        uploaded.append((owner, xs))
                    if not any(np.array_equal(xs, p) for p in S_new) and new_direction(k, S_new, xs, tol):
                        S_new.append(xs)
            S = np.array(S_new).reshape(-1, d)
            W = sym_root_pinv(k(S, S), tol) if len(S) else np.zeros((0, 0))
            Ag, bg = stats(hist)
            m = len(S)
            out["up"][t] = d * len(uploaded) + N * (m * m + m)
            out["down"][t] = N * d * m + N * (m * m + m)
            out["rounds"][t] = 1
            n_sync, elapsed = len(hist), 0
            var_sum[:] = 0.0
        out["dict_size"][t] = len(S)
    return out


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _mean_loss_gap_bound(grad_mean, strong_convexity):
    """f(y) - min f <= |grad f(y)|^2 / (2 mu) for a mu-strongly convex f: the synchronisation's
    accelerated gradient stops once this bound on the mean loss's gap is at most 1 / n^2."""
    return grad_mean @ grad_mean / (2.0 * strong_convexity)


def fed_glb_ucb_np(arrivals, contexts, rewards, tie_noise, *, lam, alpha, c_mu, threshold, max_iters=10000):
    T, N, K, d = contexts.shape
    reg = lam / c_mu
    I = np.eye(d)
    Ag, theta_g = np.zeros((d, d)), np.zeros(d)
    dA, db = np.zeros((N, d, d)), np.zeros((N, d))
    theta = np.zeros((N, d))
    n_loc = np.zeros(N, dtype=np.int64)
    X_all, Y_all = [], []
    out = step_outputs(T, K, "logdet_ratio", "agd_iters")
    for t in range(T):
        i = int(arrivals[t])
        C = contexts[t, i]
        Vinv = np.linalg.inv(Ag + dA[i] + reg * I)
        centre = Vinv @ (Ag @ theta_g + db[i])
        mean, var = C @ centre, np.einsum("kd,de,ke->k", C, Vinv, C)
        a = argmax_ties(mean + alpha * np.sqrt(var), tie_noise[t, i])
        out["actions"][t], out["mean"][t], out["var"][t] = a, mean, var
        x, y = C[a], rewards[t, i, a]
        X_all.append(x)
        Y_all.append(y)
        z = x @ theta[i]
        dA[i] += np.outer(x, x)
        db[i] += z * x
        n_loc[i] += 1
        V = Ag + dA[i] + reg * I
        theta[i] = theta[i] - np.linalg.solve(V, (_sigmoid(z) - y) * x) / c_mu
        ratio = np.linalg.slogdet(V)[1] - np.linalg.slogdet(Ag + reg * I)[1]
        out["logdet_ratio"][t] = ratio
        if n_loc[i] * ratio >= threshold:
            Ag = Ag + dA.sum(0)
            X, Y = np.array(X_all), np.array(Y_all)
            n = len(Y)
            L = 0.25 * np.linalg.eigvalsh(Ag)[-1] + lam
            kappa = L / lam
            beta = (np.sqrt(kappa) - 1) / (np.sqrt(kappa) + 1)
            th, th_prev, k = theta_g.copy(), theta_g.copy(), 0
            while k < max_iters:
                yk = th + beta * (th - th_prev)
                g = X.T @ (_sigmoid(X @ yk) - Y) + lam * yk
                k += 1
                if _mean_loss_gap_bound(g / n, lam / n) <= 1.0 / n**2:
                    th = yk
                    break
                th_prev, th = th, yk - g / L
            theta_g = th
            theta[:] = th
            dA[:], db[:], n_loc[:] = 0.0, 0.0, 0
            out["up"][t] = N * (d * d + 1) + k * N * d
            out["down"][t] = k * N * d + N * (d * d + d + 1)
            out["rounds"][t], out["agd_iters"][t] = 1, k
    return out
