"""The two storages of the cooperative kernel UCB model (`coop_kernel`): exact dual and features.

Both answer one question for one agent at decision round t (0-based): the kernel ridge posterior
of the data set {(u, s): mask[u], s <= t - D[u]} with Gram entries W(a_i, a_j) K_x(x_i, x_j),
query entries W(q, a_i) K_x(x, x_i) and prior W(q, q) K_x(x, x) = K_x(x, x), where W = K_hat_z
over V + 1 embeddings (V sources, each as the owner sees it, and the query agent's own current
one; `similarity`). Both rebuild from the stored history at every round, so a K_hat_z that changes
between rounds (embedding "current") is always used whole, never patched.

dual [spec 8.2]: buffers X[T, V, d], y[T, V] over all (s, u) slots; K_pad = M * (W o K) +
    diag(where(M, lam, 1)), kappa and y zeroed off M, float64 Cholesky. O((T V)^3) per agent.
feature [spec 8.3]: phi_x identity (linear) or Nystrom on m landmarks drawn from the round-0
    contexts (RBF); prefix sums G_u(j) = sum phi phi^T, h_u(j) = sum y phi, f_u(j) = sum phi of the
    first j observations of u, in a ring of R rounds (j -> slot j mod R). K_hat_z = L L^T from its
    top r eigenpairs (negative ones clipped); A = lam I + sum_u mask_u (l_u l_u^T) (x) G_u(j_u),
    b = sum_u mask_u l_u (x) h_u(j_u), psi = l_q (x) phi(x); mean = psi^T A^{-1} b,
    var = lam psi^T A^{-1} psi + max(K_x(x, x) - |l_q|^2 |phi(x)|^2, 0) (the Nystrom and truncation
    residual in one term). Exact (to rounding) for a linear K_x with r = V + 1.
Both return gain = 0.5 logdet(I + K/lam) (0.5 (logdet A - r m ln lam) in features) and n, the
number of observations used.

Absent observations (`Step.active`: an idle agent makes none): both keep valid[T, V], whether (s, u)
exists. dual: the slot is left out of every data set (its live mask) and of every mean embedding (zero
weight, n counts existing samples only); feature: its phi, y are zeroed before they enter the prefix
sums, and count[R, V] (prefix counts of existing observations) replaces j as n. An embedding is the
mean over its existing samples (zero where there are none; `coop_kernel` then uses it nowhere), and
two embeddings of one source with as many samples are the same set, so K_hat_z = 1 exactly there.
X carries an idle agent's latest chosen context forward (masked everywhere but Dist's arm_projection,
which mimics the centre's latest arm). With every agent active nothing changes: the masks select
everything.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from bandits_jax.kernels.nystrom import inv_sqrt_root


class DualStore(NamedTuple):
    """X[T, V, d] chosen contexts (an idle agent's latest one carried forward), y[T, V] rewards (0 where
    absent) and valid[T, V] (the observation exists); row s holds round s."""

    X: jax.Array
    y: jax.Array
    valid: jax.Array


class FeatureStore(NamedTuple):
    """Prefix sums in a ring of R rounds: G[R, V, m, m], h[R, V, m], f[R, V, m]; landmarks[m, d]
    and root[m, m] of the Nystrom map (unused for a linear K_x); X[R, V, d] the chosen contexts
    (round s in row s mod R, an idle agent's latest one carried forward); count[R, V] the prefix counts
    of existing observations (in the ring); valid[T, V] whether (s, u) exists, over the horizon (the
    message counts look back by any delay)."""

    G: jax.Array
    h: jax.Array
    f: jax.Array
    landmarks: jax.Array
    root: jax.Array
    X: jax.Array
    count: jax.Array
    valid: jax.Array


# ------------------------------------------------------------------------------ dual
def dual_init(T: int, V: int, d: int, dtype) -> DualStore:
    return DualStore(jnp.zeros((T, V, d), dtype), jnp.zeros((T, V), dtype), jnp.zeros((T, V), bool))


def dual_update(store: DualStore, t, x, y, active) -> DualStore:
    """Round t's chosen contexts x[V, d] and rewards y[V] of the active agents (active[V])."""
    x = jnp.where(active[:, None], x, latest(store.X, t))
    return DualStore(store.X.at[t].set(x), store.y.at[t].set(jnp.where(active, y, 0.0)), store.valid.at[t].set(active))


def latest(X, t):
    """Row t - 1 of X[R, V, d] (ring index), or zeros at t = 0: an idle agent's latest chosen context."""
    return jnp.where(t > 0, X[(t - 1) % X.shape[0]], 0.0)


def dual_embedding_inner(store: DualStore, gram4, t, src, lags):
    """<Psi_a, Psi_b> [A, A] of the mean embeddings of items a = (source src[a], its existing samples
    s <= t - lags[a]); gram4[T, V, T, V] = K_x over all slots. Also counts n[A]."""
    T = store.y.shape[0]
    last = t - lags
    used = (jnp.arange(T)[None, :] <= last[:, None]) & store.valid[:, src].T  # [A, T]
    n = jnp.sum(used, axis=1).astype(store.y.dtype)
    w = used / jnp.maximum(n, 1.0)[:, None]
    sub = gram4[:, src][:, :, :, src]  # [T, A, T, A]
    return jnp.einsum("as,satb,bt->ab", w, sub, w), n


def dual_posterior(kern, kp, lam, store: DualStore, gram4, t, mask, lags, W4, wq2, contexts):
    """(mean[K], var[K], gain, n) of one agent (module docstring); mask[V], lags[V] per source,
    W4 the slot similarities (broadcastable to [T, V, T, V]), wq2 the query's ([T, V]-broadcastable)."""
    T, V = store.y.shape
    live = (jnp.arange(T)[:, None] <= t - lags[None, :]) & mask[None, :] & store.valid  # [T, V]
    m = live.reshape(-1)
    n = T * V
    G = (gram4 * W4).reshape(n, n)
    G = jnp.where(m[:, None] & m[None, :], G, 0.0) + jnp.diag(jnp.where(m, lam, 1.0))
    flat = store.X.reshape(n, -1)
    kappa = jnp.where(m[:, None], kern.fn(flat, contexts, kp) * jnp.broadcast_to(wq2, (T, V)).reshape(n, 1),
                      0.0)
    L = jnp.linalg.cholesky(G)
    a = solve_triangular(L, kappa, lower=True)
    c = solve_triangular(L, jnp.where(m, store.y.reshape(-1), 0.0), lower=True)
    var = jnp.maximum(kern.diag(contexts, kp) - jnp.sum(a * a, axis=0), 0.0)
    count = jnp.sum(m)
    gain = jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * count * jnp.log(lam)
    return a.T @ c, var, gain, count


def frozen_embedding_inner(gram4, valid, t):
    """Embeddings frozen at send: slot (s, u) carries u's existing samples s' <= s (valid[T, V]), the
    query v its samples before t. Returns (E[T, V, T, V] slot inner products, n[T, V] their sample
    counts, Eq[V, T, V] query-slot ones, nq[V]) from the prefix sums P[s, u, s', u'] = sum_{tau <= s,
    tau' <= s'} K_x(x_{u, tau}, x_{u', tau'}) over existing samples; an empty embedding is zero."""
    both = valid[:, :, None, None] & valid[None, None]
    P = jnp.cumsum(jnp.cumsum(jnp.where(both, gram4, 0.0), axis=0), axis=2)
    n = jnp.cumsum(valid, axis=0).astype(gram4.dtype)
    n1 = jnp.maximum(n, 1.0)
    E = P / (n1[:, :, None, None] * n1[None, None, :, :])
    last = jnp.maximum(t - 1, 0)
    nq = jnp.where(t > 0, n[last], 0.0)
    return E, n, P[last] / (jnp.maximum(nq, 1.0)[:, None, None] * n1[None]), nq


# ------------------------------------------------------------------------------ features
def feature_init(R: int, T: int, V: int, m: int, d: int, dtype) -> FeatureStore:
    return FeatureStore(jnp.zeros((R, V, m, m), dtype), jnp.zeros((R, V, m), dtype), jnp.zeros((R, V, m), dtype),
                        jnp.zeros((m, d), dtype), jnp.zeros((m, m), dtype), jnp.zeros((R, V, d), dtype),
                        jnp.zeros((R, V), dtype), jnp.zeros((T, V), bool))


def features(kern, kp, store: FeatureStore, x, linear: bool):
    """phi_x(x[..., d]) -> [..., m]: x itself, or root k(landmarks, x)."""
    if linear:
        return x
    flat = x.reshape(-1, x.shape[-1])
    return (kern.fn(flat, store.landmarks, kp) @ store.root).reshape(*x.shape[:-1], -1)


def choose_landmarks(kern, kp, store: FeatureStore, key, contexts, linear: bool) -> FeatureStore:
    """m landmarks drawn without replacement from the round's contexts[V, K, d], and their root."""
    if linear:
        return store
    flat = contexts.reshape(-1, contexts.shape[-1])
    m = store.landmarks.shape[0]
    pts = flat[jax.random.choice(key, flat.shape[0], (m,), replace=False)]
    return store._replace(landmarks=pts, root=inv_sqrt_root(kern.fn(pts, pts, kp), m))


def feature_update(store: FeatureStore, t, phi, y, x, active) -> FeatureStore:
    """Prefix t + 1 = prefix t plus round t's features phi[V, m] and rewards y[V] of the active agents
    (active[V]: an idle one adds zeros); x[V, d] kept."""
    R = store.G.shape[0]
    old, new = t % R, (t + 1) % R
    phi = jnp.where(active[:, None], phi, 0.0)
    G = store.G[old] + phi[:, :, None] * phi[:, None, :]
    return store._replace(G=store.G.at[new].set(G), h=store.h.at[new].set(store.h[old] + y[:, None] * phi),
                          f=store.f.at[new].set(store.f[old] + phi),
                          X=store.X.at[old].set(jnp.where(active[:, None], x, latest(store.X, t))),
                          count=store.count.at[new].set(store.count[old] + active), valid=store.valid.at[t].set(active))


def prefix(store: FeatureStore, field: str, j, src):
    """Prefix sums of `field` for sources src[A] after j[A] observations (zero where j <= 0)."""
    R = store.G.shape[0]
    arr = getattr(store, field)[jnp.maximum(j, 0) % R, src]
    return jnp.where((j > 0).reshape((-1,) + (1,) * (arr.ndim - 1)), arr, 0.0)


def feature_embedding_inner(store: FeatureStore, t, src, lags):
    """<Psi_a, Psi_b> [A, A] of mean feature embeddings of items (src, existing s <= t - lags); counts n[A]."""
    j = t + 1 - lags
    n = prefix(store, "count", j, src)
    mean = prefix(store, "f", j, src) / jnp.maximum(n, 1.0)[:, None]
    return mean @ mean.T, n


def factor(khat, r: int):
    """L[A, r] with L L^T ~ khat from its top r eigenpairs, negative eigenvalues clipped."""
    ev, U = jnp.linalg.eigh(0.5 * (khat + khat.T))
    return U[:, -r:] * jnp.sqrt(jnp.maximum(ev[-r:], 0.0))[None, :]


def feature_posterior(kern, kp, lam, store: FeatureStore, t, src, mask, lags, L, lq, contexts, linear: bool):
    """(mean[K], var[K], gain, n) of one agent from the sources src[A] (agent indices; all V, or only
    the agent itself for an independent learner, which then reads only its own prefix sums); mask[A],
    lags[A] and L[A, r] the sources' use, lags and factors, lq[r] the query's."""
    j = t + 1 - lags
    Ls = jnp.where(mask[:, None], L, 0.0)
    G = prefix(store, "G", j, src)
    h = prefix(store, "h", j, src)
    r, m = L.shape[1], G.shape[-1]
    A = kron_sum(Ls, G) + lam * jnp.eye(r * m, dtype=G.dtype)
    b = jnp.einsum("ua,ui->ai", Ls, h).reshape(r * m)
    phi = features(kern, kp, store, contexts, linear)  # [K, m]
    psi = (lq[None, :, None] * phi[:, None, :]).reshape(phi.shape[0], r * m)
    C = jnp.linalg.cholesky(A)
    a = solve_triangular(C, psi.T, lower=True)
    c = solve_triangular(C, b, lower=True)
    residual = jnp.maximum(kern.diag(contexts, kp) - jnp.sum(lq * lq) * jnp.sum(phi * phi, axis=1), 0.0)
    var = jnp.maximum(lam * jnp.sum(a * a, axis=0) + residual, 0.0)
    gain = jnp.sum(jnp.log(jnp.diag(C))) - 0.5 * r * m * jnp.log(lam)
    count = jnp.sum(jnp.where(mask, prefix(store, "count", j, src), 0.0)).astype(jnp.int32)
    return a.T @ c, var, gain, count


def kron_sum(Ls, G):
    """sum_u (l_u l_u^T) (x) G_u [r m, r m] for Ls[V, r] and symmetric G[V, m, m]. Both factors are
    symmetric, so one product over the upper triangles, [r(r+1)/2, V] @ [V, m(m+1)/2], holds every
    entry (3.4x fewer flops than the full [r^2, V] @ [V, m^2] at r = 16, m = 10), and a gather
    lays it out."""
    r, m = Ls.shape[1], G.shape[-1]
    (ra, rb), (mi, mj) = np.triu_indices(r), np.triu_indices(m)
    table = (Ls[:, ra] * Ls[:, rb]).T @ G[:, mi, mj]  # [r(r+1)/2, m(m+1)/2]
    pr, pm = _pair_index(r), _pair_index(m)
    return table[pr[:, None, :, None], pm[None, :, None, :]].reshape(r * m, r * m)


def _pair_index(n: int) -> np.ndarray:
    """[n, n] (static): the position of (min(a, b), max(a, b)) in triu_indices(n)."""
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo * n - lo * (lo - 1) // 2 + (hi - lo)
