"""IndALBA and IndPolyALBA: V independent ALBA-type copies on the `cope-kb` world (spec cope-kb §5.3-5.4).

RECONSTRUCTIONS: the CoPE-KB paper names these baselines but gives no details. IndALBA follows the
structure of ALBA (Tao, Blanco and Zhou 2018) with the constants of the public ALBA code that Fiez et
al. used as a baseline [R]; IndPolyALBA is that loop with PolyALBA's fixed design (Du, Kuroki and
Chen 2021): uniform on the lowest-index basis of the agent's arms, computed once [D].
Each agent v (confidence delta' = delta / V, its arms in coordinates of their own span, d = rank,
L = the norm of its parameter in that span, an oracle bound the code is told):

    outer round r = 0, 1, ...: delta_r = 6 delta' / (pi^2 (r+1)^2), p = floor(d / 2^r), K_r = |S|
    inner step s = 1, 2, ... while |S| > p: delta_s = 6 delta_r / (pi^2 s^2), eps_s = 2^-s,
      c0 = max(4 L^2, 3), l_s = 4 c0 (2 + (6 + 4 / 1.1^s) d) (1.1^s / 4)^2,
      n_s = ceil(l_s log(5 K_r^2 / (2 delta_s))) arms drawn i.i.d. from the design lam,
      theta = (n_s M)^+ sum_t x_t y_t with M = sum_x lam_x x x^T, xhat = argmax_S x^T theta,
      drop x when min(err, ERR)(xhat - x) < (xhat - x)^T theta (the code's two radii, spec §5.3).
IndALBA's lam is the G-optimal design on the arms lying in span(S) (`design.g_design`, Frank-Wolfe).
Agents run in lockstep: global step s (over the whole trial) draws every busy agent's arm counts with
`alba_draw(key, s, totals, probs)` (one `jax.random.multinomial`, key fold_in(fold_in(key, s), 1))
and pulls with `pull(counts, fold_in(key, s))`. They never communicate.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ...core import Trial
from ...kernels import design
from ..base import check_capacity, signed_params
from .cope_kb import FC_OUTCOMES, outputs, world

SIGNS = {"delta": "probability", "xi": "positive"}
MAX_STEPS = 1  # error bit: some agent still held two arms after max_steps steps
RANK_TOL = 1e-10


def alba_trial(name: str, description: str, fixed_basis: bool, delta: float, xi: float, iters: int,
               max_steps: int) -> Trial:
    """The lockstep ALBA loop (module docstring), with IndALBA's or IndPolyALBA's design."""
    check_capacity(name, "iters", iters)
    check_capacity(name, "max_steps", max_steps)
    declared = signed_params(name, SIGNS, {"delta": delta, "xi": xi})

    def run(key, params, arms, public, pull):
        w = world(name, arms, public)
        psi = jax.vmap(own_coordinates)(w.blocks)  # [V, n, n]
        dim = jnp.sum(jnp.linalg.norm(psi, axis=1) > 0, axis=1)  # [V] rank of each agent's arms
        norm = public["theta_norm"]
        basis = jax.vmap(basis_design)(psi)

        def design_of(K_v, psi_v, S):
            if fixed_basis:
                return basis_design(psi_v)
            span = in_span(psi_v, S)
            return design.g_design(K_v, params["xi"], span, span, iters=iters)[0]

        def going(st):
            return (st["g"] < max_steps) & jnp.any(st["S"].sum(1) > 1)

        def step(st):
            g = st["g"] + 1
            agents = jax.vmap(advance)(st["agents"], dim)
            busy = st["S"].sum(1) > 1
            lam = basis if fixed_basis else jax.vmap(design_of)(w.blocks, psi, st["S"])
            n_s, l_s = jax.vmap(sample_size, in_axes=(0, 0, 0, None))(agents, dim, norm, params["delta"] / w.V)
            totals = jnp.where(busy, n_s, 0)
            counts = alba_draw(key, g, totals, jnp.where(busy[:, None], lam, 1.0 / w.n))
            sums = pull(counts, jax.random.fold_in(key, g))
            theta, keep = jax.vmap(eliminate)(psi, st["S"], lam, sums, n_s, l_s, agents["s"], dim, norm)
            return {"g": g, "S": jnp.where(busy[:, None], keep, st["S"]),
                    "theta": jnp.where(busy[:, None], theta, st["theta"]),
                    "agents": {**agents, "s": agents["s"] + busy}, "total": st["total"] + counts.sum()}

        V, n = w.V, w.n
        agents = {"r": jnp.zeros(V, jnp.int64), "s": jnp.ones(V, jnp.int64), "K_r": jnp.full(V, n, jnp.int64),
                  "size": jnp.full(V, n, jnp.int64)}
        start = {"g": jnp.asarray(0), "S": jnp.ones((V, n), bool), "theta": jnp.zeros((V, n)), "agents": agents,
                 "total": jnp.asarray(0, jnp.int64)}
        end = lax.while_loop(going, lambda st: step(refresh(st)), refresh(start))
        scores = jnp.einsum("vab,vb->va", psi, end["theta"])
        errors = jnp.where(jnp.any(end["S"].sum(1) > 1), MAX_STEPS, 0).astype(jnp.int32)
        return outputs(w, {"r": end["g"], "alive": end["S"], "fhat": scores, "total": end["total"]}, False, errors)

    return Trial(name, declared, run, FC_OUTCOMES, description=description,
                 errors={MAX_STEPS: f"some agent kept two or more arms after max_steps = {max_steps} steps; "
                                    f"raise max_steps"})


def refresh(st):
    """Copy each agent's current set size into its per-agent state (read by `advance`)."""
    return {**st, "agents": {**st["agents"], "size": st["S"].sum(1).astype(jnp.int64)}}


def advance(agent, dim):
    """Close every outer round whose target p = floor(d / 2^r) the set already meets: r += 1, s = 1,
    K_r = |S| (several at once when |S| jumped; a finished agent stays put)."""
    size = agent["size"]

    def close(_, a):
        move = (size > 1) & (size <= jnp.right_shift(dim, a["r"]))
        return {**a, "r": a["r"] + move, "s": jnp.where(move, 1, a["s"]), "K_r": jnp.where(move, size, a["K_r"])}

    return lax.fori_loop(0, 64, close, agent)


def sample_size(agent, dim, norm, delta_agent):
    """(n_s, l_s) of inner step s of outer round r (module docstring)."""
    r, s = agent["r"].astype(jnp.float64), agent["s"].astype(jnp.float64)
    delta_r = 6.0 * delta_agent / (math.pi ** 2 * (r + 1.0) ** 2)
    delta_s = 6.0 * delta_r / (math.pi ** 2 * s ** 2)
    c0 = jnp.maximum(4.0 * norm ** 2, 3.0)
    l_s = 4.0 * c0 * (2.0 + (6.0 + 4.0 / 1.1 ** s) * dim) * (1.1 ** s / 4.0) ** 2
    K_r = agent["K_r"].astype(jnp.float64)
    return jnp.ceil(l_s * jnp.log(5.0 * K_r ** 2 / (2.0 * delta_s))).astype(jnp.int64), l_s


def alba_draw(key, step, totals, probs):
    """counts [V, n] int64: agent v's totals[v] arms drawn i.i.d. from probs[v] at global step `step`."""
    k = jax.random.fold_in(jax.random.fold_in(key, step), 1)
    return jax.random.multinomial(k, totals.astype(probs.dtype), probs).astype(jnp.int64)


def eliminate(psi, S, lam, sums, n_s, l_s, s, dim, L):
    """(theta [n], the kept set [n]) of one agent after a step (spec §5.3 radii)."""
    M = psi.T @ (lam[:, None] * psi)
    Minv = jnp.linalg.pinv(M, rtol=RANK_TOL)
    theta = Minv @ (psi.T @ sums) / n_s
    scores = psi @ theta
    top = jnp.argmax(jnp.where(S, scores, -jnp.inf))
    Y = psi[top][None, :] - psi  # [n, n], row a = x_top - x_a
    gain = Y @ theta
    sig2 = jnp.maximum(jnp.einsum("ab,bc,ac->a", Y, Minv, Y), 0.0)
    d, eps_s = dim.astype(jnp.float64), 2.0 ** -s.astype(jnp.float64)
    tail = jnp.sqrt(2.0 * ((sig2 / l_s) * jnp.sqrt(3.0 * d / l_s) + sig2 / l_s))
    err = (jnp.sqrt(2.0) * L * jnp.sqrt(sig2) / jnp.sqrt(l_s)
           + 2.0 * L * (jnp.linalg.norm(Y, axis=1) + jnp.sqrt(sig2 * d)) / (3.0 * l_s) + tail)
    E = jnp.sum(lam[None, :] * ((Y @ Minv @ psi.T) * (jnp.abs(scores) + eps_s / 2.0)[None, :]) ** 2, axis=1)
    ERR = jnp.sqrt(2.0 * E / l_s) + (2.0 * (jnp.abs(gain) + eps_s / 2.0) + L * jnp.sqrt(sig2 * d)) / (3.0 * l_s) + tail
    drop = S & (jnp.arange(S.shape[0]) != top) & (jnp.minimum(err, ERR) < gain)
    return theta, S & ~drop


def own_coordinates(K_v):
    """Psi [n, n] with Psi Psi^T = K_v: the arms in coordinates of their span (zero columns beyond its rank)."""
    e, U = jnp.linalg.eigh(K_v)
    e = jnp.where(e > RANK_TOL * jnp.max(e), e, 0.0)
    return U * jnp.sqrt(e)


def in_span(psi, S):
    """[n] bool: the arms lying in the span of the arms in S."""
    e, U = jnp.linalg.eigh(psi.T @ (S[:, None] * psi))
    U = jnp.where(e > RANK_TOL * jnp.maximum(jnp.max(e), 1e-300), 1.0, 0.0)[None, :] * U
    residual = psi - (psi @ U) @ U.T
    return S | (jnp.sum(residual ** 2, axis=1) <= RANK_TOL * jnp.maximum(jnp.sum(psi ** 2, axis=1), 1.0))


def basis_design(psi):
    """Uniform design on the lowest-index linearly independent arms (PolyALBA's fixed design)."""
    n = psi.shape[0]
    basis = jnp.zeros(n, bool)
    for a in range(n):
        grown = basis.at[a].set(True)
        rank = lambda mask: jnp.linalg.matrix_rank(psi * mask[:, None], rtol=RANK_TOL)  # noqa: E731
        basis = jnp.where(rank(grown) > rank(basis), grown, basis)
    return basis / basis.sum()


def ind_alba(delta: float = 0.005, xi: float = 1e-10, iters: int = 2000, max_steps: int = 400) -> Trial:
    """IndALBA (reconstruction): V independent ALBA copies, G-optimal designs on span(S), ALBA code radii."""
    return alba_trial("IndALBA", "V independent ALBA copies (a reconstruction: ALBA's structure, the public "
                                 "ALBA code's constants, spec §5.3); no communication", False, delta, xi, iters,
                      max_steps)


def ind_poly_alba(delta: float = 0.005, xi: float = 1e-10, iters: int = 2000, max_steps: int = 400) -> Trial:
    """IndPolyALBA (reconstruction): IndALBA with PolyALBA's fixed uniform design on a basis of the arms."""
    return alba_trial("IndPolyALBA", "V independent PolyALBA-style copies (a reconstruction: ALBA's loop with a "
                                     "fixed uniform design on a basis of the arms, spec §5.4); no communication",
                      True, delta, xi, iters, max_steps)
