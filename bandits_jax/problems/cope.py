"""`cope-kb`: the collaborative pure-exploration world of CoPE-KB's experiments (spec cope-kb §6.1).

V = 5 agents with n = 6 arms each; agent v's arms are the six two-hot vectors of R^4 (B4, in
lexicographic order) placed in the coordinates of its task group g(v): groups {0..4} (case rank1),
{0,1},{2,3,4} (rank2), singletons (rank5), so d = 4, 8, 20 and rank K_Z = 1, 2, 5 [P]. The linear
kernel k = phi^T phi gives the Gram matrix K [nV, nV] (pairs agent-major, i = v n + a) and
theta* = 0.1 + Delta (0, 1, ..., d-1), so F = 0.2 + (8g + a + b) Delta for the arm with ones at
a < b: the best arm is the last, gaps Delta, 2 Delta (twice), 3 Delta, 4 Delta [I]. Noise N(0, 1).

instance = {"means": [V, n]} and the public structure below; `pull` returns the sums
counts * means + noise_std sqrt(counts) z, z = normal(key, (V, n)), exact in law [D].
public = {"gram": K, "features": [V, n, d], "agent_of": [nV], "theta_norm": [V] (the norm of an
agent's parameter in its arms' span, the bound ALBA's reference code is told), "omega_all": omega(xi,
Xt) over all pairs, and per agent v and subset mask m of its own arms (bit a = arm a; [V, 2^n]):
"omega_table" (omega with lambda over all of Xt, the CoKernelFB halving), "omega_local" (lambda on
its own arms, the omega-Peace baseline), "gamma_table" and "gamma_design" [V, 2^n, n] (Peace's
Gaussian width and its design)}. These depend on the features only; they are the spec's §6.5 cache,
computed once per world: omega is unchanged by merging identical feature vectors and by dropping
points whose kernel block is disconnected from the set, so each agent's tables are solved on its
few distinct connected points (6 here), accurately (`design.xy_design_accurate`), and shared by
agents and cases whose pools agree. `info` carries the theory numbers of spec §7.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Arms, ConfigError, flat_normal
from ..kernels import design
from .synthetic import check_noise_std

CASES = {"rank1": (0, 0, 0, 0, 0), "rank2": (0, 0, 1, 1, 1), "rank5": (0, 1, 2, 3, 4)}
B4 = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1]], np.float64)
GAMMA_DRAWS = 10_000  # Monte Carlo draws of the Gaussian width (fixed, so the table is deterministic)
GAMMA_STEPS = 80     # entropic mirror-descent steps of the Gaussian-width design
# The ends of the options. gap: Delta_min in units of the N(0, 1) noise; at 1e6 a single pull tells the arms
# apart, so a larger gap changes no outcome (and the theory's 1 / gap^2 and the means 0.2 + 37 gap overflow
# at the largest values); below 1e-6 telling them apart takes over 1e12 pulls (and 1 / gap^2 overflows at the
# smallest values). xi: the ridge of every design; the arms' kernel values are 0, 1 and 2, and
# omega(xi, X) falls with xi (rank 1: 12 at 1e-10, 3 at 1, 1.7 at 2, 0.92 at 4), so the fixed-budget round
# count R = ceil(log2 omega) is 2 at xi = 1 (every case), 1 at xi = 2 and 0 (no round) from about 3.4 on.
MIN_GAP, MAX_GAP = 1e-6, 1e6
MAX_XI = 1.0


def cope_kb(case: str = "rank1", gap: float = 0.1, noise_std: float = 1.0, xi: float = 1e-10) -> Arms:
    """CoPE-KB's world: 5 agents x 6 two-hot arms, task similarity rank K_Z = 1, 2 or 5, gap Delta_min."""
    if case not in CASES:
        raise ConfigError(f"cope-kb: case must be one of {', '.join(CASES)}, got {case!r}")
    if not gap > 0 or not noise_std > 0 or not xi > 0:
        raise ConfigError(f"cope-kb: gap, noise_std and xi must be > 0, got gap={gap}, noise_std={noise_std}, xi={xi}")
    check_ends(gap, noise_std, xi)
    features, theta = world_features(case, gap)
    V, n, _ = features.shape
    means = features @ theta
    public = dict(structure(case, xi), theta_norm=agent_theta_norms(features, theta))

    def init(key):
        del key  # the world is fixed; only the noise is random
        return {"means": jnp.asarray(means), **{k: jnp.asarray(v) for k, v in public.items()}}

    def pull(instance, counts, key):
        """Sums of counts[v, a] rewards: counts * mean + noise_std * sqrt(counts) * z (module docstring)."""
        mu = instance["means"]
        counts = counts.astype(mu.dtype)
        return counts * mu + noise_std * jnp.sqrt(counts) * flat_normal(key, mu.shape, mu.dtype)

    def answer(instance):
        return jnp.argmax(instance["means"], axis=1).astype(jnp.int32)

    return Arms(f"cope-kb ({case}, Delta={gap:g})", V, n, init, pull, answer,
                description=f"CoPE-KB world: {V} agents x {n} two-hot arms, {case} task similarity, "
                            f"Delta_min {gap:g}, noise N(0, {noise_std:g}^2)",
                public=lambda inst: {k: inst[k] for k in public}, info=theory(case, gap, xi))


def check_ends(gap: float, noise_std: float, xi: float) -> None:
    """Refuse (ConfigError naming the option) a gap outside [MIN_GAP, MAX_GAP], a noise level above MAX_NOISE_STD
    or a regulariser xi above MAX_XI, before the (slow) tables are solved."""
    if gap > MAX_GAP:
        raise ConfigError(f"cope-kb: gap={gap!r} is far past the gap one pull tells apart under N(0, 1) noise (the "
                          f"arms' means overflow at the largest values); give gap <= {MAX_GAP:g}")
    if gap < MIN_GAP:
        raise ConfigError(f"cope-kb: gap={gap!r} would take over 1e12 pulls to see under N(0, 1) noise (and 1 / gap^2 "
                          f"overflows at the smallest values); give gap >= {MIN_GAP:g}")
    check_noise_std("cope-kb", noise_std)
    if xi > MAX_XI:
        raise ConfigError(f"cope-kb: xi={xi!r} regularises beyond the arms' own kernel values (0, 1, 2): omega(xi, X) "
                          f"shrinks until the fixed-budget halving plans no round (from about xi = 3.4), and the "
                          f"tables underflow at the largest values; give xi <= {MAX_XI:g}")


def world_features(case: str, gap: float):
    """(features [V, n, d], theta* [d]) of a case (module docstring)."""
    groups = CASES[case]
    d = 4 * (max(groups) + 1)
    features = np.zeros((len(groups), len(B4), d))
    for v, g in enumerate(groups):
        features[v, :, 4 * g:4 * g + 4] = B4
    return features, 0.1 + gap * np.arange(d)


def agent_theta_norms(features, theta):
    """[V]: the norm of theta* projected on the span of each agent's arms."""
    out = []
    for X in features:
        basis = np.linalg.svd(X, full_matrices=False)[2][: np.linalg.matrix_rank(X)]
        out.append(float(np.linalg.norm(basis @ theta)))
    return np.asarray(out)


@functools.lru_cache(maxsize=None)
def structure(case: str, xi: float) -> dict:
    """The feature-only public part of a case (gram, features, agent_of and the subset tables)."""
    features, _ = world_features(case, 1.0)
    V, n, d = features.shape
    phi = features.reshape(V * n, d)
    K = phi @ phi.T
    agent_of = np.repeat(np.arange(V), n)
    with jax.enable_x64(True):
        tables = [agent_tables(K, agent_of, v, n, xi) for v in range(V)]
        omega_all = float(design.omega(jnp.asarray(K), xi, jnp.ones(V * n, bool)))
    out = {"gram": K, "features": features, "agent_of": agent_of.astype(np.int32), "omega_all": np.float64(omega_all)}
    for key in ("omega_table", "omega_local", "gamma_table", "gamma_design"):
        out[key] = np.stack([t[key] for t in tables])
    return out


def agent_tables(K, agent_of, v, n, xi) -> dict:
    """Agent v's subset tables, solved on its distinct connected points (module docstring)."""
    own = np.flatnonzero(agent_of == v)
    pool, own_in_pool = reduced_pool(K, own)
    local, own_in_local = reduced_pool(K[np.ix_(own, own)], np.arange(n))
    omega_global = omega_table(K[np.ix_(pool, pool)].tobytes(), len(pool), tuple(own_in_pool), xi)
    omega_local = omega_table(K[np.ix_(local, local)].tobytes(), len(local), tuple(own_in_local), xi)
    gamma, lam = gamma_table(K[np.ix_(own, own)].tobytes(), n, xi)
    return {"omega_table": omega_global, "omega_local": omega_local, "gamma_table": gamma, "gamma_design": lam}


def reduced_pool(K, own):
    """(pool indices, position of each own point in the pool): the points connected to `own` through
    nonzero kernel values, identical points (identical Gram rows) merged, in index order."""
    linked = np.abs(K) > 1e-12
    component = np.zeros(len(K), bool)
    component[own] = True
    while True:
        grown = component | linked[component].any(axis=0)
        if (grown == component).all():
            break
        component = grown
    pool, position = [], {}
    for i in np.flatnonzero(component):
        position.setdefault(np.round(K[i], 12).tobytes(), len(pool))
        if len(position) > len(pool):
            pool.append(i)
    return np.asarray(pool), [position[np.round(K[o], 12).tobytes()] for o in own]


def subset_masks(n: int) -> np.ndarray:
    """[2^n, n] bool: row m holds the arms of bit mask m."""
    return (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1 == 1


@functools.lru_cache(maxsize=None)
def omega_table(pool_gram: bytes, m: int, own_in_pool: tuple, xi: float) -> np.ndarray:
    """[2^n] omega of every subset of the own arms, lambda over the pool (an accurate solver)."""
    K = jnp.asarray(np.frombuffer(pool_gram, np.float64).reshape(m, m))
    members = np.zeros((2 ** len(own_in_pool), m), bool)
    for a, p in enumerate(own_in_pool):
        members[:, p] |= subset_masks(len(own_in_pool))[:, a]
    values = jax.jit(jax.vmap(lambda mem: design.omega(K, xi, mem)))(jnp.asarray(members))
    return np.where(members.sum(1) > 1, np.asarray(values), 0.0)


@functools.lru_cache(maxsize=None)
def gamma_table(own_gram: bytes, n: int, xi: float):
    """([2^n] Gaussian width gamma(S) = min_lambda (E[max_S g - min_S g])^2, [2^n, n] its design):
    g ~ N(0, G(lambda)), lambda on the agent's own arms (spec §5.6), by entropic mirror descent on a
    fixed Monte Carlo sample."""
    K = jnp.asarray(np.frombuffer(own_gram, np.float64).reshape(n, n))
    masks = jnp.asarray(subset_masks(n))
    zeta = jax.random.normal(jax.random.PRNGKey(20230501), (GAMMA_DRAWS, n), jnp.float64)
    values, lams = jax.jit(jax.vmap(lambda s: gamma_design(K, xi, s, zeta)))(masks)
    small = np.asarray(masks).sum(1) < 2
    return np.where(small, 0.0, np.asarray(values)), np.where(small[:, None], 1.0 / n, np.asarray(lams))


def kernel_root(K):
    """Psi [m, m] with Psi Psi^T = K (eigenvalues clipped at 0): the points in coordinates of their own."""
    e, U = jnp.linalg.eigh(K)
    return U * jnp.sqrt(jnp.clip(e, 0.0))


def gaussian_width(psi, xi, lam, members, zeta):
    """(E[max_S g - min_S g])^2 for g = Psi C^{-T} zeta with K = Psi Psi^T, xi I + Psi^T diag(lam) Psi = C C^T,
    so g has covariance G(lambda) = K (xi I + diag(lam) K)^{-1}."""
    C = jnp.linalg.cholesky(xi * jnp.eye(psi.shape[0]) + psi.T @ (lam[:, None] * psi))
    g = zeta @ jax.scipy.linalg.solve_triangular(C, psi.T, lower=True)
    spread = jnp.max(jnp.where(members, g, -jnp.inf), 1) - jnp.min(jnp.where(members, g, jnp.inf), 1)
    return jnp.mean(spread) ** 2


def gamma_design(K, xi, members, zeta):
    """(min gamma, argmin lambda) by entropic mirror descent with steps 0.5 / sqrt(t) on the
    sup-normalised gradient, best iterate kept."""
    n, psi = K.shape[0], kernel_root(K)
    f = lambda lam: gaussian_width(psi, xi, lam, members, zeta)  # noqa: E731

    def step(carry, t):
        lam, best, best_value = carry
        value, grad = jax.value_and_grad(f)(lam)
        better = value < best_value
        best, best_value = jnp.where(better, lam, best), jnp.where(better, value, best_value)
        lam = lam * jnp.exp(-0.5 / jnp.sqrt(t) * grad / jnp.max(jnp.abs(grad)))
        return (lam / lam.sum(), best, best_value), None

    lam0 = jnp.full((n,), 1.0 / n)
    (lam, best, best_value), _ = jax.lax.scan(step, (lam0, lam0, jnp.inf), jnp.arange(1.0, GAMMA_STEPS + 1))
    last = f(lam)
    return jnp.minimum(last, best_value), jnp.where(last < best_value, lam, best)


def theory(case: str, gap: float, xi: float) -> dict:
    """Spec §7's numbers of a case at Delta_min = gap: rho*(xi) (1/gap^2 weights), rho_1, omega(xi, Xt), R,
    Upsilon, d_eff, rank K_Z, the predicted FC speed-up V / rank K_Z, and the single-agent omega_v,
    gamma_v and Peace's R_v. Every gap is a multiple of Delta_min, so rho*(xi) = rho*_unit / Delta_min^2."""
    unit = case_theory(case, xi)
    return {"rho_star": _round(unit["rho_star_unit"] / gap ** 2),
            **{k: v for k, v in unit.items() if k != "rho_star_unit"}}


@functools.lru_cache(maxsize=None)
def case_theory(case: str, xi: float) -> dict:
    """`theory` less the gap: rho* at Delta_min = 1 ("rho_star_unit") and the gap-free numbers."""
    public = structure(case, xi)
    features, theta = world_features(case, 1.0)
    V, n, _ = features.shape
    means = (features @ theta).ravel()
    same = public["agent_of"][:, None] == public["agent_of"][None, :]
    points = np.arange(V * n)
    best = np.repeat(np.argmax(means.reshape(V, n), 1) + n * np.arange(V), n)
    gaps = np.abs(means[:, None] - means[None, :])
    to_best = same & ((points[:, None] == best[:, None]) | (points[None, :] == best[None, :])) & (gaps > 0)
    with jax.enable_x64(True):
        K = jnp.asarray(public["gram"])
        weights = jnp.asarray(np.divide(1.0, gaps ** 2, out=np.zeros_like(gaps), where=to_best))
        everywhere = jnp.ones(V * n, bool)
        rho_star = float(design.xy_design_accurate(K, xi, jnp.asarray(to_best), everywhere, weights)[1])
        rho_1 = float(design.xy_design_accurate(K, xi, jnp.asarray(same & (points[:, None] < points)), everywhere)[1])
        upsilon, lam = design.information_gain(K, xi, 2000)
        d_eff = int(design.effective_dimension(K, lam, xi))
    omega_all = float(public["omega_all"])
    rank_z = len(set(CASES[case]))
    full = 2 ** n - 1
    gamma_v = float(public["gamma_table"][0, full])
    return {"rho_star_unit": rho_star, "rho_1": _round(rho_1), "omega_all": _round(omega_all),
            "R": int(math.ceil(math.log2(omega_all))), "Upsilon": _round(float(upsilon)), "d_eff": d_eff,
            "rank_K_Z": rank_z, "predicted_fc_speedup": _round(V / rank_z),
            "omega_agent": _round(float(public["omega_local"][0, full])), "gamma_agent": _round(gamma_v),
            "R_peace": int(math.ceil(math.log2(gamma_v)))}


def _round(x: float) -> float:
    return float(f"{x:.5g}")
