"""Cooperative kernel UCB on a network (Dubey & Pentland 2020): Coop, Eager, Dist, Naive, baselines.

Every method is kernel UCB on a data set (spec coop-kernelucb 3.1), built from three pieces:
  sources: agent v uses observation (u, s) at round t iff admit[v, u] and s <= t - delay[v, u]
      (the TTL-gamma message protocol, deduplicated, two-phase rounds [P]/[D]); admit = clique
      (Coop), within = N_gamma (Eager, Naive), identity (independent), or Dist [P]: a central c
      uses N_gamma(c); a peripheral p uses its own data while t < lag_p = delay[p, cent(p)], then
      cent(p)'s data set of round t - lag_p (`centre_model` [D]), queried at p's contexts.
  similarity W: 1, or K_hat_z(a, b) = exp(-MMD(a, b) / (2 sigma_z^2)) [P*, spec 3.5]: unsquared MMD
      (option "squared"), 1/n^2 normalised, over CHOSEN contexts; embedding "current": source u
      as the model's owner sees it (samples s <= t - delay), or "frozen_at_send" (dual storage):
      observation (u, s) carries u's samples s' <= s; the query agent's embedding is all its own
      past samples; equal embeddings get K_hat_z = 1 exactly; "common_lag" (feature storage, spec
      8.3): one K_hat_z a round over every source as of the round's largest lag, v's query row v.
  width w: eta / sqrt(lam); IGP-UCB B + R sqrt(2 (gain + 1 + ln(1/delta))); OFUL
      (R sqrt(2 gain + 2 ln(1/delta)) + sqrt(lam) S) / sqrt(lam), gain = 0.5 logdet(I + K / lam).
score = mean + w sqrt(var), or 0 for an agent with no data; action = argmax(score + 1e-9 U),
U = jax.random.uniform(fold_in(select key, 7), (V, K)) (ties, and the uniform first pull).
Storages (`coop_storage`, option `storage`): "dual" (exact, small sizes) and "feature" (Nystrom /
identity features, K_hat_z from its top r_max eigenpairs, prefix sums in a ring of `ring_rounds`).
Both rebuild the model from the history every round, so a re-estimated K_hat_z is never patched.
The graph is `public(instance)`: the contract's arrays dist, delay, within, clique, central, cent.
Report per round, in scalars per receiver (`core.COMM_UNIT`), all in comm_up (peer to peer: there is
no server to send down): (d + 2) deliveries (pairs 1 <= dist <= gamma whose message exists, each
(receiver, message) once), plus Dist's model transfers, (d + 2) n_c for a mimicking agent (cent(p)'s
data set of n_c observations) or d ("arm_projection"), plus the exchange that embedding "common_lag"
needs beyond the messages. Diagnostics: originated, deliveries, hops (sum of dist over them), accepted
(admitted deliveries), model_transfers, model_scalars, embedding_scalars.

Arrivals (`Step.active`): an idle agent makes no observation at that round. The storages keep which
(u, s) exist (`coop_storage`: a validity mask, zeroed features), so no data set, embedding or count
holds an idle agent's pull; its action is never used. A message exists only for an observation that
does (a pair's delivery of round t carries u's round t + 1 - delay[v, u], counted only where u acted:
`heard`), originated counts the active agents, and an idle agent needs no model transfer. An agent
without samples of its own has no embedding: K_hat_z to every source is 0, so it borrows no data
before its first pull (its scores are the prior's; every embedding agrees on this). A Dist
agent mimicking by "arm_projection" projects on its centre's latest arm up to round t - lag, and
plays as an agent without data (score 0) while its centre has none. With every agent active at every
step (coop-linear, coop-rbf) every number is the one without arrivals.

common_lag and the paper: Sec. 3.3 estimates K_hat_z "from the available context", and Remark 6 has
each agent's estimate over its own clique, i.e. over what it has received (embeddings "current" and
"frozen_at_send" do so). "common_lag" instead factors ONE K_hat_z over every agent's contexts, pairs
that never exchange a message included, so each agent's factor rests on contexts it never received.
It is kept as the paper-size shortcut (one eigendecomposition a round, spec 8.3) and its exchange is
counted: every agent receives, each round, the mean-embedding summary (prefix sum f_u and its count,
m + 1 scalars) of every source whose messages do not bring it u's samples up to the common lag
(`common_lag_exchange`).

Walk-through: docs/algorithms/coop_kernel.md.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ...core import Algorithm, ConfigError, flat_uniform, float_dtype, report
from ...keys import algorithm_step_keys
from . import coop_storage as store_ops
from ..base import check_capacity, check_static, kernel_args, resolve_kernel, signed_params

TIE = 1e-9
TIE_FOLD = 7
ERR_RING = 1 << 1
RING_MESSAGE = "a delay exceeded the ring of prefix sums; raise ring_rounds (or leave it None)"
GRAPH_KEYS = ("dist", "delay", "within", "clique", "central", "cent")
SIGNS = {"lam": "positive", "eta": "nonnegative", "lengthscale": "positive", "sigma_z": "positive",
         "B": "nonnegative", "R": "nonnegative", "S": "nonnegative", "delta": "probability"}


class Pieces(NamedTuple):
    """The three pieces of a method, chosen once when its name is assembled: sources (`clique`,
    `within`, `own_data` or `dist_sources`: (graph arrays, eye) -> (admit, host, lag, accepts)), similarity
    (MMD or UNIT) and width (`eta_width`, `igp_width` or `oful_width`). alone: only the agent's own
    data (it sends nothing, and the feature storage reads only its own prefix sums)."""

    sources: Callable
    similarity: "Similarity"
    width: Callable
    alone: bool = False


class Options(NamedTuple):
    """Static options, resolved once: the kernel, the storage model (`MODELS[(storage, embedding)]`),
    mmd (`unsquared` or `squared`), r_max, landmarks, ring_rounds, the Dist mimic (`MIMICS`) and
    whether K_x is linear."""

    kernel: object
    model: "Model"
    mmd: Callable
    r_max: int = 16
    landmarks: int = 64
    ring_rounds: Optional[int] = None
    mimic: "Mimic" = None
    linear: bool = True


class Network(NamedTuple):
    """What a method keeps of the graph: admit[V, V], host[V] (whose data set v uses), lag[V],
    delay[V, V], dist[V, V], talks[V, V] (pairs 1 <= dist <= gamma), accepts[V, V]."""

    admit: jax.Array
    host: jax.Array
    lag: jax.Array
    delay: jax.Array
    dist: jax.Array
    talks: jax.Array
    accepts: jax.Array


class CoopState(NamedTuple):
    net: Network
    store: object


# ------------------------------------------------------------------------------ init
def init(pieces: Pieces, opts: Options, key, spec, params, sizes, public=None) -> CoopState:
    """The network arrays of the method and an empty store."""
    del key, params, sizes
    return CoopState(network(pieces, public, spec.num_agents), opts.model.init(opts, spec))


def network(pieces: Pieces, public, V: int) -> Network:
    if not isinstance(public, dict) or any(k not in public for k in GRAPH_KEYS):
        raise ConfigError(f"cooperative methods need a problem whose public(instance) holds the graph arrays "
                          f"{', '.join(GRAPH_KEYS)} (e.g. coop-linear, coop-rbf)")
    g = {k: jnp.asarray(public[k]) for k in GRAPH_KEYS}
    if g["dist"].shape != (V, V):
        raise ConfigError(f"graph arrays are for {g['dist'].shape[0]} agents, the problem has {V}")
    eye = jnp.eye(V, dtype=bool)
    admit, host, lag, accepts = pieces.sources(g, eye)
    talks = g["within"] & ~eye & (not pieces.alone)
    return Network(admit, host, lag, g["delay"].astype(jnp.int32), g["dist"].astype(jnp.int32), talks,
                   accepts & talks)


def clique(g, eye):
    """Coop: the sources of v's clique in the greedy cover of G_gamma."""
    return _everyone_hosts_self(g["clique"] | eye)


def within(g, eye):
    """Eager and Naive: every source within gamma hops."""
    return _everyone_hosts_self(g["within"] | eye)


def own_data(g, eye):
    """The independent baselines: v's own data only."""
    del g
    return _everyone_hosts_self(eye)


def dist_sources(g, eye):
    """Dist [P]: a central c uses N_gamma(c); a peripheral p uses cent(p)'s data set once its wait
    delay[p, cent(p)] is over (own data before); only central agents accept messages."""
    admit = g["within"] | eye
    host = g["cent"].astype(jnp.int32)
    V = eye.shape[0]
    lag = jnp.where(g["central"], 0, g["delay"][jnp.arange(V), host]).astype(jnp.int32)
    return admit, host, lag, admit & g["central"][:, None]


def _everyone_hosts_self(admit):
    V = admit.shape[0]
    return admit, jnp.arange(V), jnp.zeros((V,), jnp.int32), admit


# ------------------------------------------------------------------------------ select
def select(pieces: Pieces, opts: Options, params, state: CoopState, step, key):
    """Tie-broken argmax of every agent's UCB scores (module docstring); aux {"scores": [V, K]}."""
    dtype = float_dtype()
    contexts = step.contexts.astype(dtype)
    V, K = contexts.shape[:2]
    kp = kernel_args(opts.kernel, params, dtype)
    mask, lags = sources_at(state.net, step.t)
    posterior = opts.model.prepare(pieces, opts, params, kp, state.store, step.t, mask, lags)

    def one(v, mask_v, lags_v, ctx):
        out = posterior(v, mask_v, lags_v, ctx)
        return scores(pieces.width, params, *out), out[3]

    s, count = jax.vmap(one)(jnp.arange(V), mask, lags, contexts)
    mimic = (step.t >= state.net.lag) & (state.net.lag > 0) & step.active
    s, mimic = opts.mimic.scores(opts, kp, state, step.t, contexts, s, mimic)
    noise = flat_uniform(jax.random.fold_in(key, TIE_FOLD), (V, K), dtype)
    return jnp.argmax(s + TIE * noise, axis=1).astype(jnp.int32), {"scores": s, "count": count, "mimic": mimic}


def sources_at(net: Network, t):
    """(mask[V, V], lags[V, V]) at round t: v uses (u, s) iff mask[v, u] and s <= t - lags[v, u]."""
    V = net.host.shape[0]
    warm = t < net.lag
    eye = jnp.eye(V, dtype=bool)
    mask = jnp.where(warm[:, None], eye, net.admit[net.host])
    lags = jnp.where(warm[:, None], 1, net.delay[net.host] + net.lag[:, None])
    return mask, lags


# ---- storage x embedding: prepare(...) -> posterior(v, mask_v, lags_v, ctx) = (mean, var, gain, count)
def dual_current(pieces, opts, params, kp, store, t, mask, lags):
    """Dual storage, embedding "current": each agent's K_hat_z over its sources as it sees them."""
    gram4 = _gram4(opts, kp, store)
    inner = partial(store_ops.dual_embedding_inner, store, gram4, t)
    V = mask.shape[0]

    def posterior(v, mask_v, lags_v, ctx):
        khat = pieces.similarity.khat(opts, params, inner, v, mask_v, lags_v, QUERY_LAG)
        return store_ops.dual_posterior(opts.kernel, kp, params["lam"], store, gram4, t, mask_v, lags_v,
                                        khat[None, :V, None, :V], khat[V, :V][None, :], ctx)
    return posterior


def dual_frozen(pieces, opts, params, kp, store, t, mask, lags):
    """Dual storage, embedding "frozen_at_send": one [T, V, T, V] slot similarity for all agents."""
    del pieces, mask, lags
    gram4 = _gram4(opts, kp, store)
    W4, Wq = frozen_similarity(opts, params, gram4, store.valid, t)

    def posterior(v, mask_v, lags_v, ctx):
        return store_ops.dual_posterior(opts.kernel, kp, params["lam"], store, gram4, t, mask_v, lags_v,
                                        W4, Wq[v], ctx)
    return posterior


def feature_current(pieces, opts, params, kp, store, t, mask, lags):
    """Feature storage, embedding "current": each agent factors its own K_hat_z."""
    inner = partial(store_ops.feature_embedding_inner, store, t)

    def posterior(v, mask_v, lags_v, ctx):
        khat = pieces.similarity.khat(opts, params, inner, v, mask_v, lags_v, QUERY_LAG)
        return _feature_posterior(pieces, opts, params, kp, store, t, v, mask_v, lags_v,
                                  pieces.similarity.factor(opts, khat), ctx)
    return posterior


def feature_common(pieces, opts, params, kp, store, t, mask, lags):
    """Feature storage, embedding "common_lag": one factor a round, agent v's query row is row v."""
    inner = partial(store_ops.feature_embedding_inner, store, t)
    L_all = common_factor(pieces, opts, params, inner, mask, lags)

    def posterior(v, mask_v, lags_v, ctx):
        L = jnp.concatenate([L_all, L_all[v][None]])
        return _feature_posterior(pieces, opts, params, kp, store, t, v, mask_v, lags_v, L, ctx)
    return posterior


def _feature_posterior(pieces, opts, params, kp, store, t, v, mask_v, lags_v, L, ctx):
    V = mask_v.shape[0]
    src, L_src = jnp.arange(V), L[:V]
    if pieces.alone:  # only the agent's own prefix sums, not all V agents'
        src, mask_v, lags_v, L_src = v[None], mask_v[v][None], lags_v[v][None], L[v][None]
    return store_ops.feature_posterior(opts.kernel, kp, params["lam"], store, t, src, mask_v, lags_v, L_src, L[V],
                                       ctx, opts.linear)


def _gram4(opts, kp, store):
    flat = store.X.reshape(-1, store.X.shape[-1])
    return opts.kernel.fn(flat, flat, kp).reshape(store.y.shape * 2)


# ---- similarity pieces: khat(...) -> K_hat_z [V + 1, V + 1]; factor(opts, khat) -> L
def mmd_similarity(opts: Options, params, inner, v, mask, lags, qlag):
    """K_hat_z [V + 1, V + 1] over the V sources (as seen with `lags`) and the query agent v (last
    row); zero for sources not used and for any item without samples (a query agent that has none
    borrows no data)."""
    V = mask.shape[0]
    src = jnp.concatenate([jnp.arange(V), v[None]])
    lg = jnp.concatenate([lags, qlag[None]])
    E, n = inner(src, lg)
    d = jnp.diag(E)
    same = (src[:, None] == src[None, :]) & (n[:, None] == n[None, :])  # one source, as many samples: one set
    khat = khat_of(opts, params, d[:, None] + d[None, :] - 2.0 * E, same)
    valid = jnp.concatenate([mask, jnp.ones((1,), bool)]) & (n > 0)
    return jnp.where(valid[:, None] & valid[None, :], khat, 0.0)


def mmd_factor(opts: Options, khat):
    """L with K_hat_z ~ L L^T from its top r_max eigenpairs."""
    return store_ops.factor(khat, min(opts.r_max, khat.shape[0]))


def unit_similarity(opts: Options, params, inner, v, mask, lags, qlag):
    """W = 1: all ones [V + 1, V + 1]."""
    del opts, params, inner, v, lags, qlag
    V = mask.shape[0]
    return jnp.ones((V + 1, V + 1), float_dtype())


def unit_factor(opts: Options, khat):
    """L = a column of ones (rank one)."""
    del opts
    return jnp.ones((khat.shape[0], 1), khat.dtype)


def common_factor(pieces: Pieces, opts: Options, params, inner, mask, lags):
    """Embedding "common_lag" (feature storage, spec 8.3 and §7 #10's alternative): L[V, r] of ONE
    K_hat_z per round over every source as of the largest lag any agent uses this round (`common_lag`,
    so no agent sees a fresher embedding of its own sources than its messages allow); agent v's query
    row is row v. One eigendecomposition a round instead of one per agent; the embeddings of sources an
    agent gets no message from are sent to it (`common_lag_exchange`)."""
    V = mask.shape[0]
    lag = common_lag(mask, lags)
    khat = pieces.similarity.khat(opts, params, inner, jnp.zeros((), jnp.int32), jnp.ones((V,), bool),
                                  jnp.full((V,), lag), lag)
    return pieces.similarity.factor(opts, khat[:V, :V])


def common_lag(mask, lags):
    """The lag of embedding "common_lag" at a round: the largest of lags [V, V] over the sources in use
    (mask [V, V]), int32."""
    return jnp.max(jnp.where(mask, lags, 1)).astype(jnp.int32)


def frozen_similarity(opts: Options, params, gram4, valid, t):
    """Embedding "frozen_at_send" (dual storage): (W4[T, V, T, V] between slots, Wq[V, T, V] between
    each agent's current embedding and the slots, zero for an agent without samples), over the existing
    samples (valid[T, V]); equal embeddings (one source, as many samples) get exactly 1."""
    T, V = gram4.shape[:2]
    E, n, Eq, nq = store_ops.frozen_embedding_inner(gram4, valid, t)
    d = jnp.diagonal(E.reshape(T * V, T * V)).reshape(T, V)
    agent = jnp.arange(V)
    one = agent[:, None] == agent[None, :]
    same = one[None, :, None, :] & (n[:, :, None, None] == n[None, None])
    W4 = khat_of(opts, params, d[:, :, None, None] + d[None, None] - 2.0 * E, same)
    dq = E[jnp.maximum(t - 1, 0), agent, jnp.maximum(t - 1, 0), agent]  # = P[last, v, last, v] / nq^2
    sameq = one[:, None, :] & (n[None] == nq[:, None, None])
    Wq = khat_of(opts, params, dq[:, None, None] + d[None] - 2.0 * Eq, sameq)
    return W4, jnp.where((nq > 0)[:, None, None], Wq, 0.0)


def khat_of(opts: Options, params, mmd2, same):
    """exp(-opts.mmd(MMD^2) / (2 sigma_z^2)), exactly 1 where `same`."""
    mmd2 = jnp.where(same, 0.0, jnp.maximum(mmd2, 0.0))
    return jnp.exp(-opts.mmd(mmd2, same) / (2.0 * params["sigma_z"] ** 2))


def unsquared(mmd2, same):
    """MMD in the exponent (the paper's K_hat_z)."""
    return jnp.sqrt(jnp.where(same, 1.0, mmd2)) * ~same


def squared(mmd2, same):
    """MMD^2 in the exponent."""
    del same
    return mmd2


# ---- width pieces: (params, gain) -> w
def eta_width(params, gain):
    """eta / sqrt(lam)."""
    del gain
    return params["eta"] / jnp.sqrt(params["lam"])


def igp_width(params, gain):
    """IGP-UCB: B + R sqrt(2 (gain + 1 + ln(1/delta)))."""
    return params["B"] + params["R"] * jnp.sqrt(2.0 * (gain + 1.0 + jnp.log(1.0 / params["delta"])))


def oful_width(params, gain):
    """OFUL: (R sqrt(2 gain + 2 ln(1/delta)) + sqrt(lam) S) / sqrt(lam)."""
    lam = params["lam"]
    return (params["R"] * jnp.sqrt(2.0 * gain + 2.0 * jnp.log(1.0 / params["delta"]))
            + jnp.sqrt(lam) * params["S"]) / jnp.sqrt(lam)


def scores(width, params, mean, var, gain, count):
    """mean + w sqrt(var) (module docstring), 0 where the agent has no data."""
    return jnp.where(count > 0, mean + width(params, gain) * jnp.sqrt(var), 0.0)


# ---- Dist's mimic pieces: scores(...) -> (scores [V, K], mimic [V]: who receives a model transfer);
# size(d, count) -> scalars of one model transfer
def centre_model_scores(opts, kp, state, t, contexts, s, mimic):
    """"centre_model": a mimicking agent scores its contexts with its centre's model (already in s)."""
    del opts, kp, state, t, contexts
    return s, mimic


def arm_projection_scores(opts: Options, kp, state: CoopState, t, contexts, s, mimic):
    """"arm_projection": a mimicking agent scores K_x(x, x_c) [V, K], c = cent(v)'s latest arm up to round
    t - lag_v (X carries it forward); while c has none, the agent has nothing to mimic: score 0, no transfer."""
    rows = jnp.maximum(t - state.net.lag, 0)
    X, valid = state.store.X, state.store.valid
    xc = X[rows % X.shape[0], state.net.host]  # [V, d]
    played = jnp.any(valid[:, state.net.host] & (jnp.arange(valid.shape[0])[:, None] <= rows[None, :]), axis=0)
    projected = jax.vmap(lambda ctx, x: opts.kernel.fn(ctx, x[None], kp)[:, 0])(contexts, xc)
    s = jnp.where((mimic & ~played)[:, None], 0.0, s)
    return jnp.where((mimic & played)[:, None], projected, s), mimic & played


# ------------------------------------------------------------------------------ update
def update(pieces: Pieces, opts: Options, params, state: CoopState, step, actions, rewards, aux, key):
    """Store round t's observations of the active agents; count the round's messages (those of existing
    observations, `counts`)."""
    del pieces
    dtype = float_dtype()
    chosen = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0, :].astype(dtype)
    store, errors = opts.model.update(opts, params, state, step, chosen, rewards.astype(dtype), key)
    exchange = opts.model.exchange(state.net, state.store, step.t)
    return CoopState(state.net, store), counts(opts, state.net, step, store.valid, dtype, errors, aux, exchange)


def dual_update(opts, params, state: CoopState, step, chosen, rewards, key):
    del opts, params, key
    return store_ops.dual_update(state.store, step.t, chosen, rewards, step.active), jnp.zeros((), jnp.int32)


def feature_update(opts, params, state: CoopState, step, chosen, rewards, key):
    """Round 0 draws the Nystrom landmarks (rbf); a delay beyond the ring sets ERR_RING."""
    dtype, t = float_dtype(), step.t
    kp = kernel_args(opts.kernel, params, dtype)
    store = state.store
    if not opts.linear:
        store = jax.lax.cond(t == 0, lambda s: store_ops.choose_landmarks(opts.kernel, kp, s, key, step.contexts.astype(
            dtype), False), lambda s: s, store)
    phi = store_ops.features(opts.kernel, kp, store, chosen, opts.linear)
    store = store_ops.feature_update(store, t, phi, rewards, chosen, step.active)
    mask, lags = sources_at(state.net, t + 1)
    late = mask & (lags > store.G.shape[0]) & (t + 2 - lags > 0)
    return store, jnp.where(jnp.any(late), ERR_RING, 0).astype(jnp.int32)


def counts(opts: Options, net: Network, step, valid, dtype, errors, aux, exchange):
    """The Report of round t (spec 1.3 'Counting'), all in comm_up: the messages, (d + 2) scalars per
    delivery: v's message from u at round t is u's observation of round t + 1 - delay[v, u], which exists
    from t + 1 >= delay on and where u acted then (valid [T, V], the store's, round t included); Dist's
    model transfers, one per mimicking agent, (d + 2) n_c scalars or d (arm_projection); `exchange`, the
    scalars the embedding needs beyond the messages (`Model.exchange`). originated: the agents that
    acted (an idle one sends nothing), where the method talks at all."""
    t, d = step.t, step.contexts.shape[-1]
    sent = t + 1 - net.delay
    acted = valid[jnp.clip(sent, 0, valid.shape[0] - 1), jnp.arange(net.delay.shape[0])[None, :]]
    live = net.talks & (sent >= 0) & acted
    deliveries = jnp.sum(live)
    size = opts.mimic.size(d, aux["count"])
    model_scalars = jnp.sum(jnp.where(aux["mimic"], size, 0))
    return report(dtype, comm_up=(d + 2) * deliveries + model_scalars + exchange, rounds=jnp.any(net.talks),
                  errors=errors, originated=jnp.where(jnp.any(net.talks), jnp.sum(step.active), 0),
                  deliveries=deliveries, hops=jnp.sum(jnp.where(live, net.dist, 0)),
                  accepted=jnp.sum(live & net.accepts), model_transfers=jnp.sum(aux["mimic"]),
                  model_scalars=model_scalars, embedding_scalars=exchange)


def no_exchange(net: Network, store, t):
    """An embedding each agent forms from what its messages bring: nothing else is sent."""
    del net, store, t
    return jnp.zeros((), jnp.int32)


def common_lag_exchange(net: Network, store, t):
    """Scalars that embedding "common_lag" sends at round t beyond the messages (module docstring): each
    agent v factors K_hat_z over EVERY source as of the common lag (`common_lag`), so it receives the
    mean-embedding summary of each other source u (prefix sum f_u [m] and its count: m + 1 scalars)
    whose messages do not bring it u's samples up to t - lag (no route within gamma, or delay[v, u] >
    lag); nothing while no source has a sample that old."""
    mask, lags = sources_at(net, t)
    lag = common_lag(mask, lags)
    V = net.delay.shape[0]
    informed = (net.talks & (net.delay <= lag)) | jnp.eye(V, dtype=bool)
    m = store.f.shape[-1]
    return jnp.where(t + 1 - lag > 0, (m + 1) * jnp.sum(~informed), 0).astype(jnp.int32)


# ------------------------------------------------------------------------------ helpers
def tie_uniforms(key, V: int, K: int, T: int):
    """U [T, V, K] (float64): the tie-breaking uniforms `select` draws at rounds 0..T-1 from the
    runner's algorithm key `key` (for the NumPy reference, which takes U as an input)."""

    with jax.enable_x64(True):
        def one(t):
            return flat_uniform(jax.random.fold_in(algorithm_step_keys(key, t)[0], TIE_FOLD), (V, K), jnp.float64)

        return jax.device_get(jax.vmap(one)(jnp.arange(T, dtype=jnp.int32)))


def dual_init(opts: Options, spec):
    return store_ops.dual_init(spec.horizon, spec.num_agents, spec.dim, float_dtype())


def feature_init(opts: Options, spec):
    V, d = spec.num_agents, spec.dim
    if not opts.linear and opts.landmarks > V * spec.num_arms:
        raise ConfigError(f"landmarks = {opts.landmarks} exceeds the {V * spec.num_arms} contexts of a round; "
                          f"lower landmarks")
    m = d if opts.linear else opts.landmarks
    R = spec.horizon + 1 if opts.ring_rounds is None else opts.ring_rounds
    return store_ops.feature_init(R, spec.horizon, V, m, d, float_dtype())


class Similarity(NamedTuple):
    khat: Callable
    factor: Callable


class Model(NamedTuple):
    """A storage with one embedding of the sources: init(opts, spec) -> store, prepare (above),
    update(opts, params, state, step, chosen, rewards, key) -> (store, errors), exchange(net, store, t)
    -> the scalars its embedding needs at round t beyond the messages (int32; `no_exchange`,
    `common_lag_exchange`)."""

    init: Callable
    prepare: Callable
    update: Callable
    exchange: Callable = no_exchange


class Mimic(NamedTuple):
    scores: Callable
    size: Callable


MMD = Similarity(mmd_similarity, mmd_factor)
UNIT = Similarity(unit_similarity, unit_factor)
MODELS = {("dual", "current"): Model(dual_init, dual_current, dual_update),
          ("dual", "frozen_at_send"): Model(dual_init, dual_frozen, dual_update),
          ("feature", "current"): Model(feature_init, feature_current, feature_update),
          ("feature", "common_lag"): Model(feature_init, feature_common, feature_update, common_lag_exchange)}
MIMICS = {"centre_model": Mimic(centre_model_scores, lambda d, count: (d + 2) * count),
          "arm_projection": Mimic(arm_projection_scores, lambda d, count: d)}
MMDS = {"unsquared": unsquared, "squared": squared}
QUERY_LAG = np.ones((), np.int32)  # the query agent's own embedding: all its samples before t


# ------------------------------------------------------------------------------ factories
def assemble(name: str, pieces: Pieces, given: dict, *, kernel="linear", storage="dual", mmd="unsquared",
             r_max=16, landmarks=64, ring_rounds=None, embedding="current", dist_mimic="centre_model",
             description="") -> Algorithm:
    """A `core.Algorithm` from the pieces, the float hyper-parameters `given` and the static options,
    every string option turned into its piece here (select and update compare no strings).

    A method that pools several sources through K_hat_z or a kernel's features runs one run a vmap on
    a CPU (`Algorithm.cpu_vmap`): each agent factors its own [r m, r m] system (or gathers every
    source's prefix sums), which a vmap of runs does not batch and whose chunk leaves the caches
    (bench/README). The independent methods and pooled LinUCB (r = 1, m = d) keep the default."""
    check_static(name, "storage", storage, ("dual", "feature"))
    check_static(name, "mmd", mmd, tuple(MMDS))
    check_static(name, "embedding", embedding, ("current", "frozen_at_send", "common_lag"))
    if storage == "feature" and embedding == "frozen_at_send":
        raise ConfigError(f"{name}: the feature storage keeps one embedding per source; use embedding='current' "
                          f"or storage='dual'")
    if storage == "dual" and embedding == "common_lag":
        raise ConfigError(f"{name}: embedding='common_lag' is the feature storage's estimate; use "
                          f"storage='feature' or embedding='current'")
    kern = resolve_kernel(name, kernel)
    if storage == "feature" and kern.name not in ("linear", "rbf"):
        raise ConfigError(f"{name}: the feature storage supports the linear and rbf kernels, got {kern.name}")
    if pieces.similarity is UNIT:
        embedding = "current"  # W = 1 has no embedding to estimate
    ring = None if ring_rounds is None else check_capacity(name, "ring_rounds", ring_rounds)
    opts = Options(kern, MODELS[(storage, embedding)], MMDS[mmd], check_capacity(name, "r_max", r_max),
                   check_capacity(name, "landmarks", landmarks), ring,
                   MIMICS[check_static(name, "dist_mimic", dist_mimic, tuple(MIMICS))], kern.name == "linear")
    params = signed_params(name, {k: SIGNS[k] for k in given}, given)
    return Algorithm(name, params, partial(init, pieces, opts), partial(select, pieces, opts),
                     partial(update, pieces, opts), None, {ERR_RING: RING_MESSAGE}, description,
                     cpu_vmap=None if pieces.alone or (pieces.similarity is UNIT and opts.linear) else 1)


def coop_kernel_ucb(kernel="linear", lam=1.0, eta=1.0, lengthscale=1.0, sigma_z=1.0, *, storage="dual",
                    mmd="unsquared", r_max=16, landmarks=64, ring_rounds=None, embedding="current") -> Algorithm:
    """Coop-KernelUCB: own data plus the clique of G_gamma, W = K_hat_z, width eta / sqrt(lam).

    kernel: K_x ("linear" or "rbf"; lengthscale = sigma_x). storage: "dual" (exact) or "feature"
    (r_max eigenpairs of K_hat_z, `landmarks` Nystrom points for rbf, ring_rounds of prefix sums,
    None: the horizon). mmd: "unsquared" or "squared". embedding: "current", "frozen_at_send" (dual) or
    "common_lag" (feature, one K_hat_z a round: the paper-size choice).
    """
    return assemble("Coop-KernelUCB", Pieces(clique, MMD, eta_width),
                    dict(lam=lam, eta=eta, lengthscale=lengthscale, sigma_z=sigma_z), kernel=kernel, storage=storage,
                    mmd=mmd, r_max=r_max, landmarks=landmarks, ring_rounds=ring_rounds, embedding=embedding,
                    description="Coop-KernelUCB, clique-filtered messages of the gamma-power graph, MMD similarity")


def eager_kernel_ucb(kernel="linear", lam=1.0, eta=1.0, lengthscale=1.0, sigma_z=1.0, *, storage="dual",
                     mmd="unsquared", r_max=16, landmarks=64, ring_rounds=None, embedding="current") -> Algorithm:
    """Eager-KernelUCB: every message within gamma hops, W = K_hat_z, width eta / sqrt(lam).

    Options as coop_kernel_ucb.
    """
    return assemble("Eager-KernelUCB", Pieces(within, MMD, eta_width),
                    dict(lam=lam, eta=eta, lengthscale=lengthscale, sigma_z=sigma_z), kernel=kernel, storage=storage,
                    mmd=mmd, r_max=r_max, landmarks=landmarks, ring_rounds=ring_rounds, embedding=embedding,
                    description="Eager-KernelUCB, every message within gamma hops, MMD similarity")


def dist_kernel_ucb_coop(kernel="linear", lam=1.0, eta=1.0, lengthscale=1.0, sigma_z=1.0, *, storage="dual",
                         mmd="unsquared", r_max=16, landmarks=64, ring_rounds=None, embedding="current",
                         dist_mimic="centre_model") -> Algorithm:
    """Dist-KernelUCB of Dubey & Pentland: central agents learn on N_gamma, peripheral ones mimic.

    A peripheral p uses its own data while t < delay[p, cent(p)], then cent(p)'s data set of round
    t - delay[p, cent(p)] on its own contexts (dist_mimic "centre_model"), or plays the context
    nearest by K_x to cent(p)'s arm of that round ("arm_projection"). Options as coop_kernel_ucb.
    """
    return assemble("Dist-KernelUCB", Pieces(dist_sources, MMD, eta_width),
                    dict(lam=lam, eta=eta, lengthscale=lengthscale, sigma_z=sigma_z), kernel=kernel, storage=storage,
                    mmd=mmd, r_max=r_max, landmarks=landmarks, ring_rounds=ring_rounds, embedding=embedding,
                    dist_mimic=dist_mimic,
                    description="Dist-KernelUCB, central agents on N_gamma, peripheral agents on their centre's model")


def naive_linucb(lam=1.0, eta=1.0, *, storage="dual", ring_rounds=None) -> Algorithm:
    """Naive Cooperation, linear row: pooled LinUCB (alpha = eta) on N_gamma's messages as own data.

    storage: "dual" or "feature" (exact for the linear kernel).
    """
    return assemble("Naive-LinUCB", Pieces(within, UNIT, eta_width), dict(lam=lam, eta=eta, lengthscale=1.0),
                    storage=storage, ring_rounds=ring_rounds,
                    description="Naive Cooperation, pooled LinUCB on the messages within gamma hops")


def naive_igp_ucb(kernel="rbf", lam=1.0, lengthscale=1.0, B=1.0, R=0.1, delta=0.05, *, storage="dual",
                  landmarks=64, ring_rounds=None) -> Algorithm:
    """Naive Cooperation, kernel row: IGP-UCB on N_gamma's messages as own data (W = 1).

    Width B + R sqrt(2 (gain + 1 + ln(1/delta))), gain = 0.5 logdet(I + K / lam).
    """
    return assemble("Naive-IGP-UCB", Pieces(within, UNIT, igp_width),
                    dict(lam=lam, lengthscale=lengthscale, B=B, R=R, delta=delta), kernel=kernel, storage=storage,
                    landmarks=landmarks, ring_rounds=ring_rounds,
                    description="Naive Cooperation, pooled IGP-UCB on the messages within gamma hops")


def ind_kernel_ucb(kernel="rbf", lam=1.0, eta=1.0, lengthscale=1.0, *, storage="dual", landmarks=64,
                   ring_rounds=None) -> Algorithm:
    """Independent KernelUCB (LinUCB with kernel "linear"), width eta / sqrt(lam), random ties.

    The registered kernel_ucb / linucb take the first arm on ties; this one breaks them with the
    cooperative methods' U, so it shares their first pulls.
    """
    return assemble("Ind-KernelUCB", Pieces(own_data, UNIT, eta_width, alone=True),
                    dict(lam=lam, eta=eta, lengthscale=lengthscale), kernel=kernel, storage=storage,
                    landmarks=landmarks, ring_rounds=ring_rounds,
                    description="independent KernelUCB per agent, no communication")


def oful(lam=1.0, R=0.1, S=1.0, delta=0.05, *, storage="dual", ring_rounds=None) -> Algorithm:
    """Independent OFUL: theta.x + (R sqrt(logdet(A / lam) + 2 ln(1/delta)) + sqrt(lam) S) |x|_{A^-1}."""
    return assemble("OFUL", Pieces(own_data, UNIT, oful_width, alone=True),
                    dict(lam=lam, R=R, S=S, delta=delta, lengthscale=1.0),
                    storage=storage, ring_rounds=ring_rounds,
                    description="independent OFUL per agent, no communication")


def igp_ucb(kernel="rbf", lam=1.0, lengthscale=1.0, B=1.0, R=0.1, delta=0.05, *, storage="dual",
            landmarks=64, ring_rounds=None) -> Algorithm:
    """Independent IGP-UCB: mean + (B + R sqrt(2 (gain + 1 + ln(1/delta)))) sigma, own data."""
    return assemble("IGP-UCB", Pieces(own_data, UNIT, igp_width, alone=True),
                    dict(lam=lam, lengthscale=lengthscale, B=B, R=R, delta=delta), kernel=kernel, storage=storage,
                    landmarks=landmarks, ring_rounds=ring_rounds,
                    description="independent IGP-UCB per agent, no communication")
