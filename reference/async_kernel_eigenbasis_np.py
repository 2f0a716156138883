"""Async-KernelUCB in the paper's eigenbasis form: a second plain NumPy reference.

Why a second one. The JAX module embeds with a Cholesky factor, so that a grown dictionary needs
no basis change at all; the first reference (async_kernel_np.py) uses the symmetric root. This
loop follows Sec. 3 and Sec. 4.1 of Li et al. (ICLR 2023) as printed: one eigendecomposition per
dictionary, each client's statistics stored by the server in the basis of that client's last
communication, and every one of them moved into the newest basis with the eq. (5) matrix at every
communication. A misreading shared by the other two implementations would show up here.

The equations (the paper's numbering; gamma is the Gaussian kernel's bandwidth):
    kernel      k(x, y) = exp(-gamma |x - y|^2)                                   (Sec. 5)
    Nystrom     K_SS = U diag(ev) U^T,  z(x; S) = ev^{-1/2} U^T K_S(x)             (Sec. 3)
    statistics  A(D; S) = Z_{D;S}^T Z_{D;S},  b(D; S) = Z_{D;S}^T y_D             (Sec. 4.1)
    eq. (2)     mean(x) = z^T (A + lam I)^{-1} b
                var(x)  = (k(x,x) - z^T A (A + lam I)^{-1} z) / lam  (clipped at 0);  sd = sqrt(var)
    eq. (3)     x_t = argmax over A_t of mean + alpha sd, with the client's snapshot (S_k(i), A, b)
    eq. (4)     communicate when the snapshot variances of the client's unsent points sum to > D
    line 8      download S_{k-1}, A(D_{k-1}; S_{k-1}), b(D_{k-1}; S_{k-1})
    line 9      keep unsent point s when u_s < min(1, q var_{k-1}(x_s)) (var from line 8's statistics);
                S_k = S_{k-1} followed by the kept points
    line 10-11  upload the kept points and A(dD_k; S_k), b(dD_k; S_k) (embedded with the NEW S_k)
    eq. (5)     T_{k(j),k} = ev_{k(j)}^{-1/2} U_{k(j)}^T K_{S_k(j), S_k} U_k ev_k^{-1/2}
                A(N(j); S_k) = T^T A(N(j); S_k(j)) T,  b(N(j); S_k) = T^T b(N(j); S_k(j)), every j;
                A(D_k; S_k) = sum_j A(N(j); S_k),  b(D_k; S_k) = sum_j b(N(j); S_k)
    line 13-14  the client's snapshot becomes (S_k, A(D_k; S_k), b(D_k; S_k))

Eq. (5) as printed starts with ev_{k(j)}^{+1/2}. Its own definition T = P_old^{-1/2} P_new^{1/2}
(P^{1/2} = Phi_S^T U ev^{-1/2} has orthonormal columns, so its pseudo-inverse is its transpose)
gives ev_{k(j)}^{-1/2}, and only that makes z(x; S_k) = T^T z(x; S_k(j)) for x in S_k(j); this
loop uses ev^{-1/2}. Like the paper, the server re-expresses stored statistics and never re-embeds
raw data: what it moves into S_k is the data already projected onto the span of S_k(j).

The server keeps each client's statistics in the basis they were last sent in (the paper's
"last received embedded statistics ... and their corresponding dictionary"); only the active
client's entry is replaced at its communication. As a side check the loop also keeps the chained
aggregate T_{k-1,k}^T A(D_{k-1}) T_{k-1,k} + A(dD_k; S_k), which must equal the per-client sum.

Where the paper is silent: eigenvalues <= eig_tol * max are dropped (a pseudo-inverse root; the
embedding then has fewer coordinates than S has points, and `rank` says so); a kept point equal
to a dictionary point, or to one kept before it at the same communication, is not appended; ties
of the score within 1e-10 (1 + |max|) go to the largest tie noise; messages count d scalars per
point and the statistics' full matrix and vector (the download of line 8, the upload, the
download of line 13).

Inputs: arrivals[T] (the active client), contexts[T, N, K, d] (client arrivals[t] sees
contexts[t, arrivals[t]]), rewards[T, N, K], tie_noise[T, N, K], rls_uniform[T, B] (the draw of
the j-th unsent point at a communication at step t is rls_uniform[t, j]).
Returns per-step arrays: actions, mean, var, score [T, K] of the active client, acc, trigger,
dict_size, rank, dropped (kept points not appended: duplicates), up, down; and at the end the
dictionary, the final eigenbasis (U, ev), the aggregate (A, b) in both forms, each client's
snapshot (its dictionary size, A, b) and stored statistics.
"""
import numpy as np

TIE_RTOL = 1e-10


def gaussian_kernel(X, Y, gamma):
    """k(X[n, d], Y[m, d]) = exp(-gamma |x - y|^2) -> [n, m]."""
    sq = np.sum((X[:, None, :] - Y[None, :, :]) ** 2, axis=-1)
    return np.exp(-gamma * sq)


class Eigenbasis:
    """The Nystrom basis of a dictionary S[m, d]: K_SS = U diag(ev) U^T, eigenvalues above
    eig_tol * max kept (U [m, r], ev [r]); z(x; S) = ev^{-1/2} U^T K_S(x) has r coordinates."""

    def __init__(self, S, gamma, eig_tol):
        self.S, self.gamma = S, gamma
        if len(S) == 0:
            self.U, self.ev = np.zeros((0, 0)), np.zeros(0)
            return
        ev, U = np.linalg.eigh(gaussian_kernel(S, S, gamma))
        kept = ev > eig_tol * ev.max()
        self.U, self.ev = U[:, kept], ev[kept]

    @property
    def rank(self):
        return self.ev.shape[0]

    def embed(self, X):
        """Z[n, r]: row s is z(x_s; S)^T."""
        if len(self.S) == 0:
            return np.zeros((X.shape[0], 0))
        return gaussian_kernel(X, self.S, self.gamma) @ self.U / np.sqrt(self.ev)


def basis_change(old, new):
    """Eq. (5): T[r_old, r_new] = ev_old^{-1/2} U_old^T K_{S_old, S_new} U_new ev_new^{-1/2}."""
    if old.rank == 0 or new.rank == 0:
        return np.zeros((old.rank, new.rank))
    K_on = gaussian_kernel(old.S, new.S, old.gamma)
    return (old.U / np.sqrt(old.ev)).T @ K_on @ (new.U / np.sqrt(new.ev))


def mean_var(basis, A, b, X, lam):
    """Eq. (2) at X[n, d] with statistics A[r, r], b[r] in `basis`: (mean[n], var[n])."""
    Z = basis.embed(X)
    kxx = np.ones(X.shape[0])  # k(x, x) = 1 for the Gaussian kernel
    if basis.rank == 0:
        return np.zeros(X.shape[0]), kxx / lam
    G = np.linalg.inv(A + lam * np.eye(basis.rank))
    mean = Z @ (G @ b)
    var = (kxx - np.einsum("ni,ij,nj->n", Z, A @ G, Z)) / lam
    return mean, np.maximum(var, 0.0)


def argmax_ties(scores, noise):
    """Largest score; among scores within TIE_RTOL (1 + |max|) of it, the largest noise."""
    best = scores.max()
    tied = scores >= best - TIE_RTOL * (1.0 + abs(best))
    return int(np.argmax(np.where(tied, noise, -1.0)))


def async_kernel_ucb_eigenbasis_np(arrivals, contexts, rewards, tie_noise, rls_uniform, *, lam, alpha, q, threshold,
                                   gamma, eig_tol=1e-10):
    """Algorithm 1 of Li et al. (ICLR 2023), one step at a time (see the module docstring)."""
    T, N, K, d = contexts.shape
    bases = {}  # dictionary size -> Eigenbasis of that prefix (the dictionary only grows)

    def basis_of(m):
        if m not in bases:
            bases[m] = Eigenbasis(dictionary[:m], gamma, eig_tol)
        return bases[m]

    dictionary = np.zeros((0, d))
    # server: per-client stored statistics and the dictionary size they are expressed in
    stored_m = [0] * N
    stored_A = [np.zeros((0, 0)) for _ in range(N)]
    stored_b = [np.zeros(0) for _ in range(N)]
    agg_A, agg_b = np.zeros((0, 0)), np.zeros(0)  # A(D_k; S_k), b(D_k; S_k) of the last communication
    chain_A, chain_b = np.zeros((0, 0)), np.zeros(0)
    # clients: snapshot (dictionary size, A, b), unsent points, stale-variance sums
    snap_m = [0] * N
    snap_A = [np.zeros((0, 0)) for _ in range(N)]
    snap_b = [np.zeros(0) for _ in range(N)]
    unsent_X = [[] for _ in range(N)]
    unsent_y = [[] for _ in range(N)]
    acc = np.zeros(N)

    out = {name: np.zeros(T, np.int64) for name in ("actions", "trigger", "dict_size", "rank", "dropped", "up",
                                                            "down")}
    out.update(mean=np.zeros((T, K)), var=np.zeros((T, K)), score=np.zeros((T, K)), acc=np.zeros(T))
    for t in range(T):
        i = int(arrivals[t])
        # eq. (3) with the snapshot of client i's last communication
        mean, var = mean_var(basis_of(snap_m[i]), snap_A[i], snap_b[i], contexts[t, i], lam)
        score = mean + alpha * np.sqrt(var)
        a = argmax_ties(score, tie_noise[t, i])
        unsent_X[i].append(contexts[t, i, a])
        unsent_y[i].append(rewards[t, i, a])
        acc[i] += var[a]
        out["actions"][t], out["mean"][t], out["var"][t], out["score"][t] = a, mean, var, score

        if acc[i] > threshold:  # eq. (4)
            X, y = np.array(unsent_X[i]), np.array(unsent_y[i])
            # line 8: the server's S_{k-1}, A(D_{k-1}; S_{k-1}), b(D_{k-1}; S_{k-1})
            m_old = dictionary.shape[0]
            old = basis_of(m_old)
            # line 9: ridge-leverage sampling with the fresh variance var_{k-1}
            _, var_fresh = mean_var(old, agg_A, agg_b, X, lam)
            keep = rls_uniform[t, :len(y)] < np.minimum(1.0, q * var_fresh)
            for s in np.nonzero(keep)[0]:
                if np.any(np.all(dictionary == X[s], axis=1)):
                    out["dropped"][t] += 1
                else:
                    dictionary = np.vstack([dictionary, X[s]])
            new = basis_of(dictionary.shape[0])
            # line 10: the client's new data embedded with S_k
            Z = new.embed(X)
            dA, db = Z.T @ Z, Z.T @ y
            # line 12, eq. (5): every client's stored statistics moved from S_k(j) to S_k, then summed
            moved_A, moved_b = [], []
            for j in range(N):
                Tj = basis_change(basis_of(stored_m[j]), new)
                moved_A.append(Tj.T @ stored_A[j] @ Tj)
                moved_b.append(Tj.T @ stored_b[j])
            stored_m[i], stored_A[i], stored_b[i] = new.S.shape[0], moved_A[i] + dA, moved_b[i] + db
            moved_A[i], moved_b[i] = stored_A[i], stored_b[i]
            T_step = basis_change(old, new)
            chain_A, chain_b = T_step.T @ agg_A @ T_step + dA, T_step.T @ agg_b + db
            agg_A, agg_b = sum(moved_A), sum(moved_b)
            # line 13-14: client i's snapshot; its buffer and running sum start again
            snap_m[i], snap_A[i], snap_b[i] = new.S.shape[0], agg_A, agg_b
            unsent_X[i], unsent_y[i], acc[i] = [], [], 0.0
            r_old, r_new = old.rank, new.rank
            out["up"][t] = d * (new.S.shape[0] - m_old) + r_new * r_new + r_new
            out["down"][t] = d * m_old + r_old * r_old + r_old + r_new * r_new + r_new
            out["trigger"][t] = 1
        out["acc"][t] = acc[i]
        out["dict_size"][t] = dictionary.shape[0]
        out["rank"][t] = basis_of(dictionary.shape[0]).rank

    final = basis_of(dictionary.shape[0])
    out.update(dictionary=dictionary, U=final.U, ev=final.ev, A=agg_A, b=agg_b, A_chain=chain_A, b_chain=chain_b,
               snap_m=np.array(snap_m), snap_A=snap_A, snap_b=snap_b,
               stored_m=np.array(stored_m), stored_A=stored_A, stored_b=stored_b)
    return out
