"""Optimal experimental design over m points given only their Gram matrix K[m, m].

A design lam[m] lies on the simplex; A(xi, lam) = xi I + sum_x lam_x phi_x phi_x^T. With the
push-through identity, G(lam) = Phi A^{-1} Phi^T = K (xi I + diag(lam) K)^{-1}   [I, stable form]
and the pair norm Q_ab = ||phi_a - phi_b||^2_{A^{-1}} = G_aa + G_bb - 2 G_ab; its gradient in
lam_x is -(G_ax - G_bx)^2 [P, Eq. 9].
  * XY design: min_{lam on support} max_{pairs} w_ab Q_ab(lam), by Frank-Wolfe with the min-max
    subgradient (step 2/(t+2), best iterate) [D, RAGE], or accurately (`xy_design_accurate`) by a
    barrier method on the epigraph form, whose Newton steps converge where mirror descent on a
    soft-max smoothed objective stalls near 1e-3 [D]; omega(S) = the XY value over the pairs of S
    with lam on all points [P]. Weights are taken per unordered pair (the larger of w_ab, w_ba).
  * G design: min max_{x in targets} G_xx(lam); information gain: max log det(I + K_lam / xi) [P].
  * Rounding: Pukelsheim's efficient apportionment of N samples to the support of lam [R].
  * Ridge estimate from counts and means: Fhat = K diag(s) (diag(s) K diag(s) + N xi I)^{-1} s*ybar,
    s = sqrt(counts) [P, Eq. 12].
Designs are returned with entries < 1e-5 zeroed and renormalised; the value is the objective at
the returned design. Masks replace subsets, so shapes are static; every function is jittable and
vmappable. float64 only: xi ~ 1e-10 puts condition numbers near 1e10. Spec: cope-kb §1.4, §2.
Walk-through: docs/kernels.md.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import cho_solve

SUPPORT_TOL = 1e-5  # design entries below this are zeroed (and never counted in the support)


def check_float64(*arrays):
    """Raise TypeError if any floating array is not float64 (checked while tracing)."""
    for a in arrays:
        dtype = jnp.asarray(a).dtype
        if jnp.issubdtype(dtype, jnp.floating) and dtype != jnp.float64:
            raise TypeError(f"the design needs float64 inputs, got {dtype}; run inside "
                            "jax.enable_x64(True) (precision \"float64\") and pass float64 arrays")


# ---------------------------------------------------------------------------------------------
# norms


def design_gram(K, lam, xi):
    """G[m, m] = K (xi I + diag(lam) K)^{-1}, as solve(xi I + K diag(lam), K)^T, symmetrised."""
    check_float64(K, lam)
    m = K.shape[-1]
    Gt = jnp.linalg.solve(xi * jnp.eye(m, dtype=K.dtype) + K * lam[None, :], K)
    return 0.5 * (Gt + Gt.T)


def pair_norms(G):
    """Q[m, m], Q_ab = G_aa + G_bb - 2 G_ab = ||phi_a - phi_b||^2 in the A(xi, lam)^{-1} norm."""
    check_float64(G)
    d = jnp.diagonal(G)
    return d[:, None] + d[None, :] - 2.0 * G


# ---------------------------------------------------------------------------------------------
# XY design


def xy_design(K, xi, pairs, support, weights=None, iters=2000):
    """(lam[m], value): Frank-Wolfe for min_{lam on support} max_{pairs} weights * Q(lam)."""
    weights = _weights(K, weights)

    def body(t, carry):
        lam, best_lam, best_h = carry
        G = design_gram(K, lam, xi)
        wq = _masked_objective(G, pairs, weights)
        h = jnp.max(wq)
        best_lam, best_h = _keep_best(lam, h, best_lam, best_h)
        a, b = jnp.unravel_index(jnp.argmax(wq), wq.shape)
        g = jnp.where(support, weights[a, b] * (G[a] - G[b]) ** 2, -jnp.inf)
        gamma = 2.0 / (t + 2.0)
        lam = (1.0 - gamma) * lam + gamma * jax.nn.one_hot(jnp.argmax(g), lam.shape[0], dtype=K.dtype)
        return lam, best_lam, best_h

    lam0 = _uniform(support, K.dtype)
    lam, best_lam, best_h = lax.fori_loop(1, iters + 1, body, (lam0, lam0, jnp.asarray(jnp.inf, K.dtype)))
    return _finish(K, xi, pairs, support, weights, lam, best_lam, best_h)


def xy_design_accurate(K, xi, pairs, support, weights=None, iters=150):
    """(lam[m], value) of `xy_design`, accurate to the float64 evaluation of Q (about 1e-6
    relative at xi = 1e-10): a primal barrier (interior-point) method on the epigraph form
    min s s.t. w_ab Q_ab(lam) <= s, lam on the simplex of `support`; damped Newton steps with
    the exact gradient and Hessian, at most `iters` of them."""
    weights = _weights(K, weights)
    m = K.shape[-1]
    upper = jnp.arange(m)[:, None] < jnp.arange(m)[None, :]
    weights = jnp.maximum(jnp.where(pairs, weights, 0.0), jnp.where(pairs.T, weights.T, 0.0))
    pairs = (pairs | pairs.T) & upper  # each unordered pair once
    live = pairs | (~jnp.any(pairs) & jnp.eye(m, dtype=bool))  # a zero pair keeps an empty set finite
    lam0 = _uniform(support, K.dtype)
    h0 = jnp.max(_masked_objective(design_gram(K, lam0, xi), live, weights))
    wscaled = weights / jnp.maximum(h0, jnp.finfo(K.dtype).tiny)  # the scaled objective starts at 1
    nu = (jnp.sum(live) + jnp.sum(support)).astype(K.dtype)  # barrier parameter: gap <= nu / t
    mask = jnp.append(support, True)
    a = jnp.append(support.astype(K.dtype), 0.0)
    bar = partial(_barrier, K, xi, live, support, wscaled)

    def newton(carry):
        z, t, k, _ = carry
        f, g, H = _barrier_newton_parts(K, xi, live, support, wscaled, z, t)
        kkt = jnp.block([[H, a[:, None]], [a[None, :], jnp.zeros((1, 1), K.dtype)]])
        dz = jnp.where(mask, jnp.linalg.solve(kkt, jnp.append(-g, 0.0))[: m + 1], 0.0)
        dec = -jnp.dot(g, dz)  # squared Newton decrement
        to_edge = jnp.where(mask[:m] & (dz[:m] < 0), -z[:m] / jnp.where(dz[:m] < 0, dz[:m], -1.0), jnp.inf)
        alpha0 = jnp.minimum(1.0, 0.99 * jnp.min(to_edge))

        def reject(alpha):
            return (bar(z + alpha * dz, t) > f - 0.25 * alpha * dec) & (alpha > 1e-12)

        alpha = lax.while_loop(reject, lambda al: 0.5 * al, alpha0)
        z = jnp.where(alpha > 1e-12, z + alpha * dz, z)
        centred = (dec < 1e-3) | (alpha < 1e-8)  # a stalled line search meets rounding, not distance
        return z, jnp.where(centred, 8.0 * t, t), k + 1, centred & (nu < 1e-9 * t)

    def running(carry):
        return (carry[2] < iters) & ~carry[3]

    z0 = jnp.append(lam0, 1.05 + 1e-3)
    z = lax.while_loop(running, newton, (z0, nu, 0, False))[0]
    last = jnp.where(support, z[:m], 0.0)
    return _finish(K, xi, pairs, support, weights, last / jnp.sum(last), lam0, h0)


def omega(K, xi, members):
    """omega(xi, S): min over lam on all m points of max_{a, b in members} Q_ab (0 below 2 members)."""
    m = K.shape[-1]
    upper = jnp.arange(m)[:, None] < jnp.arange(m)[None, :]
    pairs = members[:, None] & members[None, :] & upper
    return xy_design_accurate(K, xi, pairs, jnp.ones(m, bool))[1]


# ---------------------------------------------------------------------------------------------
# G design and information gain


def g_design(K, xi, targets, support, iters=2000):
    """(lam[m], value): Frank-Wolfe for min_{lam on support} max_{x in targets} G_xx(lam)."""
    check_float64(K)

    def objective(lam):
        return jnp.where(targets, jnp.diagonal(design_gram(K, lam, xi)), -jnp.inf)

    def body(t, carry):
        lam, best_lam, best_h = carry
        G = design_gram(K, lam, xi)
        gx = jnp.where(targets, jnp.diagonal(G), -jnp.inf)
        best_lam, best_h = _keep_best(lam, jnp.max(gx), best_lam, best_h)
        g = jnp.where(support, G[jnp.argmax(gx)] ** 2, -jnp.inf)
        gamma = 2.0 / (t + 2.0)
        lam = (1.0 - gamma) * lam + gamma * jax.nn.one_hot(jnp.argmax(g), lam.shape[0], dtype=K.dtype)
        return lam, best_lam, best_h

    lam0 = _uniform(support, K.dtype)
    lam, best_lam, best_h = lax.fori_loop(1, iters + 1, body, (lam0, lam0, jnp.asarray(jnp.inf, K.dtype)))
    lam, _ = _keep_best(lam, jnp.max(objective(lam)), best_lam, best_h)
    lam = _threshold(lam)
    return lam, jnp.max(objective(lam))


def information_gain(K, xi, iters=2000):
    """(upsilon, lam[m]): Frank-Wolfe for max_lam log det(I + K_lam / xi), whose gradient is G_xx."""
    check_float64(K)
    m = K.shape[-1]

    def body(t, lam):
        j = jnp.argmax(jnp.diagonal(design_gram(K, lam, xi)))
        gamma = 2.0 / (t + 2.0)
        return (1.0 - gamma) * lam + gamma * jax.nn.one_hot(j, m, dtype=K.dtype)

    lam = lax.fori_loop(1, iters + 1, body, jnp.full(m, 1.0 / m, K.dtype))
    return jnp.sum(jnp.log1p(_weighted_spectrum(K, lam) / xi)), lam


def effective_count(K, lam, xi):
    """d(xi, lam): the number of eigenvalues of diag(sqrt lam) K diag(sqrt lam) above xi."""
    check_float64(K, lam)
    return jnp.sum(_weighted_spectrum(K, lam) > xi).astype(jnp.int64)


def effective_dimension(K, lam, xi):
    """d_eff = min{j in [m] : j xi log m >= sum_{i > j} alpha_i}, alpha the decreasing spectrum of K_lam."""
    check_float64(K, lam)
    m = K.shape[-1]
    alpha = jnp.sort(jnp.clip(_weighted_spectrum(K, lam), 0.0))[::-1]
    tail = jnp.sum(alpha) - jnp.cumsum(alpha)  # tail[j-1] = sum_{i > j} alpha_i
    j = jnp.arange(1, m + 1)
    return jnp.min(jnp.where(j * xi * jnp.log(m) >= tail, j, m)).astype(jnp.int64)


# ---------------------------------------------------------------------------------------------
# rounding and estimation


def round_counts(lam, total):
    """counts[m] int64 summing to `total`: efficient apportionment on the support lam > 1e-5
    (ceil((N - p/2) w), then +1 at argmin n/w or -1 at argmax (n-1)/w; lowest index on ties)."""
    check_float64(lam)
    m = lam.shape[-1]
    on = lam > SUPPORT_TOL
    w = jnp.where(on, lam, 0.0) / jnp.sum(jnp.where(on, lam, 0.0))
    N = jnp.asarray(total, jnp.int64)
    p = jnp.sum(on)
    n0 = jnp.where(on, jnp.ceil((N.astype(lam.dtype) - 0.5 * p) * w), 0.0).astype(jnp.int64)
    safe_w = jnp.where(on, w, 1.0)

    def step(carry):
        n, k = carry
        add = jnp.where(on, n / safe_w, jnp.inf)
        drop = jnp.where(on & (n > 0), (n - 1) / safe_w, -jnp.inf)
        short = jnp.sum(n) < N
        j = jnp.where(short, jnp.argmin(add), jnp.argmax(drop))
        return n.at[j].add(jnp.where(short, 1, -1)), k + 1

    def unequal(carry):  # at most p/2 + 1 steps are ever needed; the cap keeps the loop bounded
        n, k = carry
        return (jnp.sum(n) != N) & (k < m + 2)

    return lax.while_loop(unequal, step, (n0, 0))[0]


def ridge_estimate(K, counts, means, xi):
    """Fhat[m] = K diag(s) alpha, alpha = (diag(s) K diag(s) + N xi I)^{-1} (s * means), s = sqrt(counts),
    N = sum(counts), by a Cholesky solve; points with no count carry mean 0."""
    check_float64(K, means)
    m = K.shape[-1]
    c = jnp.asarray(counts).astype(K.dtype)
    s = jnp.sqrt(c)
    M = s[:, None] * K * s[None, :] + jnp.sum(c) * xi * jnp.eye(m, dtype=K.dtype)
    L = jnp.linalg.cholesky(0.5 * (M + M.T))
    alpha = cho_solve((L, True), s * jnp.where(c > 0, means, 0.0))
    return K @ (s * alpha)


# ---------------------------------------------------------------------------------------------
# helpers


def _weights(K, weights):
    check_float64(K)
    if weights is None:
        return jnp.ones_like(K)
    check_float64(weights)
    return jnp.broadcast_to(weights, K.shape)


def _uniform(support, dtype):
    s = support.astype(dtype)
    return s / jnp.sum(s)


def _masked_objective(G, pairs, weights):
    """weights * Q on the pairs, -inf elsewhere."""
    return jnp.where(pairs, weights * pair_norms(G), -jnp.inf)


def _pair_sensitivity(G, W):
    """s_x = sum_ab W_ab (G_ax - G_bx)^2 for a nonnegative W[m, m], in O(m^3)."""
    G2 = G * G
    return W.sum(1) @ G2 + W.sum(0) @ G2 - 2.0 * jnp.sum(G * (W @ G), axis=0)


def _keep_best(lam, h, best_lam, best_h):
    better = h < best_h
    return jnp.where(better, lam, best_lam), jnp.where(better, h, best_h)


def _threshold(lam):
    lam = jnp.where(lam < SUPPORT_TOL, 0.0, lam)
    return lam / jnp.sum(lam)


def _finish(K, xi, pairs, support, weights, last, best_lam, best_h):
    """The better of the best iterate and the last one, thresholded, with the value at it; the
    uniform design and value 0 when there is no pair."""
    def value(lam):
        return jnp.max(_masked_objective(design_gram(K, lam, xi), pairs, weights))

    lam = _threshold(_keep_best(last, value(last), best_lam, best_h)[0])
    none = ~jnp.any(pairs)
    return jnp.where(none, _uniform(support, K.dtype), lam), jnp.where(none, 0.0, value(lam))


def _barrier(K, xi, live, support, wscaled, z, t):
    """t s - sum_pairs log(s - w Q_ab(lam)) - sum_support log lam; +inf outside the domain."""
    m = K.shape[-1]
    lam, s = z[:m], z[m]
    slack = jnp.where(live, s - wscaled * pair_norms(design_gram(K, lam, xi)), 1.0)
    inside = jnp.all(slack > 0) & jnp.all(jnp.where(support, lam > 0, True))
    f = t * s - jnp.sum(jnp.log(jnp.abs(slack))) - jnp.sum(jnp.where(support, jnp.log(jnp.abs(lam)), 0.0))
    return jnp.where(inside, f, jnp.inf)


def _barrier_newton_parts(K, xi, live, support, wscaled, z, t):
    """(value, gradient[m + 1], Hessian[m + 1, m + 1]) of `_barrier`; with u = G_a - G_b per pair,
    dQ/dlam_x = -u_x^2 and d2Q/dlam_x dlam_y = 2 u_x u_y G_xy. Off-support rows are identity."""
    m = K.shape[-1]
    lam, s = z[:m], z[m]
    G = design_gram(K, lam, xi)
    U = G[:, None, :] - G[None, :, :]  # [m, m, m]: u of pair (a, b)
    r = jnp.where(live, 1.0 / (s - wscaled * pair_norms(G)), 0.0)  # inverse slacks
    rw = r * wscaled
    v = jnp.concatenate([(wscaled[..., None] * U * U), jnp.ones((m, m, 1), K.dtype)], axis=-1)
    v = v.reshape(m * m, m + 1)
    H = (v * (r * r).reshape(-1, 1)).T @ v
    Ur = U.reshape(m * m, m)
    H = H.at[:m, :m].add(2.0 * G * ((Ur * rw.reshape(-1, 1)).T @ Ur) + jnp.diag(jnp.where(support, 1.0 / lam**2, 0.0)))
    g = jnp.append(-jnp.sum(rw[..., None] * U * U, axis=(0, 1)) - jnp.where(support, 1.0 / lam, 0.0), t - jnp.sum(r))
    keep = jnp.append(support, True)
    H = jnp.where(keep[:, None] & keep[None, :], H, jnp.eye(m + 1, dtype=K.dtype))
    return _barrier(K, xi, live, support, wscaled, z, t), jnp.where(keep, g, 0.0), H


def _weighted_spectrum(K, lam):
    """Eigenvalues of diag(sqrt lam) K diag(sqrt lam)."""
    r = jnp.sqrt(jnp.clip(lam, 0.0))
    M = r[:, None] * K * r[None, :]
    return jnp.linalg.eigvalsh(0.5 * (M + M.T))
