"""Plain NumPy Coop-KernelUCB, Eager, Dist, Naive Cooperation and the independent baselines (Fig. 1).

Exact dual mode, a fresh linear solve per agent and round ([P] eqs. 7-9, spec 2, 8.2). Rounds
have two phases: all agents act on the data of rounds < t, then all observations are sent. Agent v
deciding at round t uses observation (u, s) iff admit[v, u] and s <= t - delay[v, u] (spec 1.3).
Observation i of source a_i: Gram W(a_i, a_j) K_x(x_i, x_j), query W(q, a_i) K_x(x, x_i), prior
W(q, q) K_x(x, x); mean = kappa^T (G + lam I)^{-1} y, var = max(prior - kappa^T (G + lam I)^{-1} kappa, 0).
    score = mean + w sqrt(var); w = eta / sqrt(lam) (Coop, Eager, Dist, KernelUCB) or the IGP-UCB
    beta = B + R sqrt(2 (0.5 logdet(I + G / lam) + 1 + ln(1 / delta))) (IGP-UCB, Naive RBF row).
LinUCB / OFUL / Naive linear row (primal, spec 4): A = lam I + sum x x^T, theta = A^{-1} b, score
theta.x + w ||x||_{A^{-1}}, w = eta (LinUCB) or R sqrt(logdet A - d ln lam + 2 ln(1/delta)) + sqrt(lam) S.
admit: Coop = clique, Eager / Naive = within (N_gamma), independent = identity; Dist (spec 3.4):
central agents use within, a peripheral p plays own-data KernelUCB while t <= delay[p, c], then
`centre_model` (c's model of round t - delay[p, c], queried with p's similarities on p's contexts)
or `arm_projection` (argmax_x K_x(x, x_c) of c's arm of that round).
W: 1, a known K_z [V, V], or "mmd": K_hat_z = exp(-MMD / (2 sigma_z^2)) (MMD^2 with [D] 1/n^2
normalisation, unsquared, over chosen contexts, spec 3.5); embedding "current" (source u as seen
by the model's owner: u's samples s <= t - delay[owner, u]) or "frozen_at_send" (samples s' <= s of
the message (u, s)); the query agent's embedding is always its own samples of rounds < t.
Ties: argmax(score + 1e-9 U[t, v]); an agent whose model has no data scores 0, i.e. a uniformly
random arm. Regret r[t, v] = max_k fbar[t, v, k] - fbar[t, v, a]. Counting per round t (spec 1.3):
originated = V, deliveries = pairs (v, u), 1 <= dist <= gamma, whose message (round t + 1 - delay)
exists, scalars = (d + 2) deliveries (scalars per receiver; Dist adds its model transfers), accepted =
those with admit[v, u] (independent methods: 0).
Inputs X [T, V, K, d], Y [T, V, K] (noisy reward of every arm), fbar [T, V, K], U [T, V, K], the
graph dict of graph_arrays_np; outputs actions [T, V], regret [T, V], scores [T, V, K], counts [T].
Arrivals: active [T, V] bool (keyword, default all True); an idle agent (active[t, v] False) makes no
observation at round t and decides nothing (score 0, regret 0, no model transfer): no data set,
embedding or message holds (v, t). An embedding is the mean over its source's existing samples,
identified by (source, sample count) for K_hat_z = 1 exactly; a query agent without samples has none
(K_hat_z = 0 to every source: it borrows no data before its first pull); originated counts the active
agents, a delivery counts only where the message's observation exists. Dist's arm_projection mimics its
centre's latest arm up to round t - lag (score 0, no transfer while there is none).
"""
from functools import partial

import numpy as np

from .kernel_np import kernel_matrix

TIE = 1e-9
UNREACHABLE = 2**30
GRAPH_KEYS = ("dist", "delay", "within", "clique", "central", "cent", "cent_delay")


# ----------------------------------------------------------------------------------- graph arrays

def graph_arrays_np(graph, gamma, delay_mode="hop"):
    """The contract's graph arrays from an adjacency matrix [V, V] or a graph with edges() on nodes
    0..V-1: BFS distances (UNREACHABLE between components), delays, N_gamma, the greedy clique cover
    of G_gamma and the greedy maximal weighted independent set with cent(v) (spec 3.0)."""
    if delay_mode not in ("hop", "hop_plus_one"):
        raise ValueError(f"delay_mode must be 'hop' or 'hop_plus_one', got {delay_mode!r}")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    dist = bfs_distances(adjacency(graph))
    V = len(dist)
    off = ~np.eye(V, dtype=bool)
    delay = np.maximum(1, dist) + (off if delay_mode == "hop_plus_one" else 0)
    within = dist <= gamma
    power = within & off  # G_gamma
    clique = np.zeros((V, V), bool)
    for block in greedy_clique_cover(power):
        clique[np.ix_(block, block)] = True
    central, cent = greedy_central(power, dist)
    cent_delay = np.where(central, 0, delay[np.arange(V), cent])  # Dist's mimic lag: the messages' delay
    return {"dist": dist.astype(np.int32), "delay": delay.astype(np.int32), "within": within,
            "clique": clique, "central": central, "cent": cent.astype(np.int32),
            "cent_delay": cent_delay.astype(np.int32)}


def adjacency(graph):
    if hasattr(graph, "edges") and hasattr(graph, "nodes"):
        nodes = sorted(graph.nodes)
        if nodes != list(range(len(nodes))):
            raise ValueError("graph nodes must be labelled 0..V-1; relabel them first")
        adj = np.zeros((len(nodes), len(nodes)), bool)
        for a, b in graph.edges():
            adj[a, b] = adj[b, a] = a != b
        return adj
    adj = np.asarray(graph).astype(bool)
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1] or (adj != adj.T).any():
        raise ValueError("adjacency must be a symmetric square matrix [V, V]")
    return adj & ~np.eye(len(adj), dtype=bool)


def bfs_distances(adj):
    V = len(adj)
    dist = np.full((V, V), UNREACHABLE, dtype=np.int64)
    for root in range(V):
        dist[root, root] = 0
        frontier, hops = [root], 0
        while frontier:
            hops += 1
            nxt = [u for v in frontier for u in np.flatnonzero(adj[v]) if dist[root, u] == UNREACHABLE]
            for u in nxt:
                dist[root, u] = hops
            frontier = sorted(set(nxt))
    return dist


def greedy_clique_cover(power):
    """Blocks (sorted lists) partitioning the nodes into cliques of the graph `power` (spec 3.0)."""
    uncovered, cover = set(range(len(power))), []
    while uncovered:
        left = sorted(uncovered)
        v = max(left, key=lambda u: (power[u, left].sum(), -u))
        block, cand = [v], {u for u in left if power[v, u]}
        while cand:
            c = sorted(cand)
            u = max(c, key=lambda w: (power[w, c].sum(), -w))
            block.append(u)
            cand = {w for w in cand if power[u, w]}
        cover.append(sorted(block))
        uncovered -= set(block)
    return cover


def greedy_central(power, dist):
    """Greedy maximal independent set of `power` by decreasing |N_gamma(v)| (ties: lowest id), and
    cent(p): the set neighbour of largest degree (ties: nearer, then lowest id); cent(c) = c."""
    V = len(power)
    deg = power.sum(1)
    central = np.zeros(V, bool)
    for v in sorted(range(V), key=lambda u: (-(deg[u] + 1), u)):
        central[v] = not (power[v] & central).any()
    cent = np.arange(V)
    for p in np.flatnonzero(~central):
        cs = np.flatnonzero(power[p] & central)
        cent[p] = min(cs, key=lambda c: (-deg[c], dist[p, c], c))
    return central, cent


# ----------------------------------------------------------------------------------- methods

def coop_kernel_ucb_np(X, Y, fbar, U, graph, **kw):
    """Coop-KernelUCB (Alg. 1): own data plus the clique of the greedy cover of G_gamma."""
    return _dual_method(X, Y, fbar, U, graph, graph["clique"], **kw)


def eager_kernel_ucb_np(X, Y, fbar, U, graph, **kw):
    """Eager-KernelUCB (Alg. 2): every delivered message, S_v = N_gamma(v)."""
    return _dual_method(X, Y, fbar, U, graph, graph["within"], **kw)


def kernel_ucb_np(X, Y, fbar, U, graph, *, kernel="rbf", sigma_x=1.0, lam=1.0, eta=1.0, active=None):
    """Independent KernelUCB: own data, W = 1, width eta / sqrt(lam)."""
    return _dual_method(X, Y, fbar, U, graph, _identity(X), kernel=kernel, sigma_x=sigma_x, lam=lam,
                        eta=eta, kz="one", talk=False, active=active)


def igp_ucb_np(X, Y, fbar, U, graph, *, kernel="rbf", sigma_x=1.0, lam=1.0, B=1.0, R=0.1, delta=0.05,
               active=None):
    """Independent IGP-UCB: own data, W = 1, the plug-in beta_t width."""
    return _dual_method(X, Y, fbar, U, graph, _identity(X), kernel=kernel, sigma_x=sigma_x, lam=lam,
                        kz="one", width=("igp", B, R, delta), talk=False, active=active)


def naive_igp_ucb_np(X, Y, fbar, U, graph, *, kernel="rbf", sigma_x=1.0, lam=1.0, B=1.0, R=0.1, delta=0.05,
                     active=None):
    """Naive Cooperation, RBF row: IGP-UCB on N_gamma(v)'s data as its own (W = 1)."""
    return _dual_method(X, Y, fbar, U, graph, graph["within"], kernel=kernel, sigma_x=sigma_x, lam=lam,
                        kz="one", width=("igp", B, R, delta), active=active)


def linucb_np(X, Y, fbar, U, graph, *, lam=1.0, eta=1.0, active=None):
    """Independent pooled LinUCB, alpha = eta."""
    return _primal_method(X, Y, fbar, U, graph, _identity(X), lam, ("eta", eta), talk=False, active=active)


def oful_np(X, Y, fbar, U, graph, *, lam=1.0, R=0.1, S=1.0, delta=0.05, active=None):
    """Independent OFUL with the self-normalised width."""
    return _primal_method(X, Y, fbar, U, graph, _identity(X), lam, ("oful", R, S, delta), talk=False,
                          active=active)


def naive_linucb_np(X, Y, fbar, U, graph, *, lam=1.0, eta=1.0, active=None):
    """Naive Cooperation, linear row: pooled LinUCB on N_gamma(v)'s data."""
    return _primal_method(X, Y, fbar, U, graph, graph["within"], lam, ("eta", eta), active=active)


def dist_kernel_ucb_np(X, Y, fbar, U, graph, *, kernel="linear", sigma_x=1.0, lam=1.0, eta=1.0, kz="mmd",
                       sigma_z=1.0, mmd_squared=False, embedding="current", dist_mimic="centre_model", active=None):
    """Dist-KernelUCB (Alg. 3). Also counts model_transfers [T] and model_scalars [T]: one transfer
    per mimicking peripheral agent and round, (d + 2) n_c scalars (c's data) or d (one arm), which its
    scalars include beside the messages."""
    if dist_mimic not in ("centre_model", "arm_projection"):
        raise ValueError(f"dist_mimic must be 'centre_model' or 'arm_projection', got {dist_mimic!r}")
    active = _check(X, Y, fbar, U, graph, active)
    T, V, K, d = X.shape
    model = _Model(X, graph, graph["within"], kernel, sigma_x, lam, kz, sigma_z, mmd_squared, embedding)
    own = _Model(X, graph, _identity(X), kernel, sigma_x, lam, "one", sigma_z, mmd_squared, embedding)
    width = ("eta", eta)
    lag = graph["delay"][np.arange(V), graph["cent"]]
    transfers, sizes = np.zeros(T), np.zeros(T)

    def decide(t, v, hist):
        c = graph["cent"][v]
        if graph["central"][v]:
            return model.scores(hist, v, t, v, X[t, v], width)
        if t < lag[v]:  # 1-based t <= delay[v, c]: own data only
            return own.scores(hist, v, t, v, X[t, v], width)
        if dist_mimic == "arm_projection":
            played = np.flatnonzero(hist.valid[:t - lag[v] + 1, c])  # c's latest arm up to round t - lag
            if len(played) == 0:
                return None
            transfers[t] += 1
            sizes[t] += d
            return kernel_matrix(kernel, X[t, v], hist.x[played[-1], c][None], sigma_x)[:, 0]
        transfers[t] += 1
        sizes[t] += (d + 2) * len(model.slots(c, t - lag[v], hist.valid)[0])
        return model.scores(hist, c, t - lag[v], v, X[t, v], width)

    admit = graph["within"] & graph["central"][:, None]
    out = _loop(X, Y, fbar, U, decide, model.prefix_needed, active)
    out.update(_counts(graph, admit, T, d, active), model_transfers=transfers, model_scalars=sizes)
    out["scalars"] = out["scalars"] + sizes
    return out


def fig1_row(row, sigma_x=1.0):
    """The six methods of one row of Fig. 1 by name, each a function (X, Y, fbar, U, graph, **options)."""
    if row == "linear":
        return {"LinUCB": linucb_np, "OFUL": oful_np, "Naive": naive_linucb_np,
                "Coop": partial(coop_kernel_ucb_np, kernel="linear"),
                "Dist": partial(dist_kernel_ucb_np, kernel="linear"),
                "Eager": partial(eager_kernel_ucb_np, kernel="linear")}
    if row == "rbf":
        rbf = {"kernel": "rbf", "sigma_x": sigma_x}
        return {"KernelUCB": partial(kernel_ucb_np, **rbf), "IGP-UCB": partial(igp_ucb_np, **rbf),
                "Naive": partial(naive_igp_ucb_np, **rbf), "Coop": partial(coop_kernel_ucb_np, **rbf),
                "Dist": partial(dist_kernel_ucb_np, **rbf), "Eager": partial(eager_kernel_ucb_np, **rbf)}
    raise ValueError(f"row must be 'linear' or 'rbf', got {row!r}")


# ----------------------------------------------------------------------------------- engines

def _dual_method(X, Y, fbar, U, graph, admit, *, kernel="linear", sigma_x=1.0, lam=1.0, eta=1.0, kz="mmd",
                 sigma_z=1.0, mmd_squared=False, embedding="current", width=None, talk=True, active=None):
    active = _check(X, Y, fbar, U, graph, active)
    model = _Model(X, graph, admit, kernel, sigma_x, lam, kz, sigma_z, mmd_squared, embedding)
    width = width or ("eta", eta)
    out = _loop(X, Y, fbar, U, lambda t, v, hist: model.scores(hist, v, t, v, X[t, v], width),
                model.prefix_needed, active)
    out.update(_counts(graph, admit if talk else None, X.shape[0], X.shape[3], active))
    return out


def _primal_method(X, Y, fbar, U, graph, admit, lam, width, talk=True, active=None):
    active = _check(X, Y, fbar, U, graph, active)
    T, V, K, d = X.shape
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam}")

    def decide(t, v, hist):
        s, u = active_slots(admit[v], graph["delay"][v], t, hist.valid)
        if len(s) == 0:
            return None
        Z = hist.x[s, u]
        A = lam * np.eye(d) + Z.T @ Z
        Ainv = np.linalg.inv(A)
        theta = Ainv @ (Z.T @ hist.y[s, u])
        C = X[t, v]
        norm = np.sqrt(np.maximum(np.einsum("kd,de,ke->k", C, Ainv, C), 0.0))
        if width[0] == "eta":
            w = width[1]
        else:
            _, R, S, delta = width
            w = R * np.sqrt(np.linalg.slogdet(A)[1] - d * np.log(lam) + 2 * np.log(1 / delta)) + np.sqrt(lam) * S
        return C @ theta + w * norm

    out = _loop(X, Y, fbar, U, decide, False, active)
    out.update(_counts(graph, admit if talk else None, T, d, active))
    return out


class _History:
    """x [T, V, d], y [T, V] of the observations made so far, valid [T, V] where they exist."""

    def __init__(self, T, V, d):
        self.x, self.y, self.prefix = np.zeros((T, V, d)), np.zeros((T, V)), None
        self.valid = np.zeros((T, V), bool)


def _loop(X, Y, fbar, U, decide, prefix_needed, active):
    """Two-phase rounds: every active agent decides on rounds < t, then the round's observations land
    (an idle agent's decision is skipped: score 0, regret 0, no observation)."""
    T, V, K, d = X.shape
    hist = _History(T, V, d)
    actions = np.zeros((T, V), dtype=np.int64)
    scores = np.zeros((T, V, K))
    for t in range(T):
        if prefix_needed:
            hist.prefix = prefix_needed(hist.x[:t], hist.valid[:t])
        for v in range(V):
            s = decide(t, v, hist) if active[t, v] else None
            scores[t, v] = 0.0 if s is None else s
            actions[t, v] = int(np.argmax(scores[t, v] + TIE * U[t, v]))
        on = np.flatnonzero(active[t])
        hist.x[t, on] = X[t, on, actions[t, on]]
        hist.y[t, on] = Y[t, on, actions[t, on]]
        hist.valid[t] = active[t]
    return {"actions": actions, "regret": regret(fbar, actions) * active, "scores": scores}


class _Model:
    """Kernel ridge UCB of any owner's data set at any round, queried for any agent."""

    def __init__(self, X, graph, admit, kernel, sigma_x, lam, kz, sigma_z, mmd_squared, embedding):
        V = X.shape[1]
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam}")
        if kernel not in ("linear", "rbf"):
            raise ValueError(f"kernel must be 'linear' or 'rbf', got {kernel!r}")
        if embedding not in ("current", "frozen_at_send"):
            raise ValueError(f"embedding must be 'current' or 'frozen_at_send', got {embedding!r}")
        if not (isinstance(kz, str) and kz in ("mmd", "one")) and np.shape(kz) != (V, V):
            raise ValueError(f"kz must be 'mmd', 'one' or a known K_z matrix [{V}, {V}], got {kz!r:.40}")
        self.admit, self.delay = admit, graph["delay"]
        self.kernel, self.sigma_x, self.lam = kernel, sigma_x, lam
        self.kz, self.sigma_z, self.squared, self.embedding = kz, sigma_z, mmd_squared, embedding
        mmd = isinstance(kz, str) and kz == "mmd"
        self.prefix_needed = (lambda hx, valid: mmd_prefix_sums(hx, kernel, sigma_x, valid)) if mmd else False

    def slots(self, owner, t, valid):
        return active_slots(self.admit[owner], self.delay[owner], t, valid)

    def scores(self, hist, owner, t, q, C, width):
        """UCB of owner's data set at decision round t, queried at (z_q, C[K, d]) with q's own
        embedding of rounds < t_now (hist.prefix holds every prefix up to now)."""
        s, u = self.slots(owner, t, hist.valid)
        if len(s) == 0:
            return None
        Wg, wq, wqq = self._similarity(hist, owner, t, q, s, u)
        k = lambda A, B: kernel_matrix(self.kernel, A, B, self.sigma_x)
        Z = hist.x[s, u]
        G = Wg * k(Z, Z)
        kap = wq[:, None] * k(Z, C)
        A = G + self.lam * np.eye(len(s))
        sol = np.linalg.solve(A, np.concatenate([hist.y[s, u][:, None], kap], axis=1))
        mean = kap.T @ sol[:, 0]
        var = np.maximum(wqq * np.diag(k(C, C)) - np.sum(kap * sol[:, 1:], axis=0), 0.0)
        if width[0] == "eta":
            w = width[1] / np.sqrt(self.lam)
        else:
            _, B, R, delta = width
            gain = 0.5 * (np.linalg.slogdet(A)[1] - len(s) * np.log(self.lam))  # 0.5 logdet(I + G/lam)
            w = B + R * np.sqrt(2 * (gain + 1 + np.log(1 / delta)))
        return mean + w * np.sqrt(var)

    def _similarity(self, hist, owner, t, q, s, u):
        if isinstance(self.kz, str) and self.kz == "one":
            return 1.0, np.ones(len(s)), 1.0
        if not isinstance(self.kz, str):
            return self.kz[np.ix_(u, u)], self.kz[q, u], self.kz[q, q]
        n_now = hist.prefix[0].shape[0]  # q's own samples: every round so far
        if self.embedding == "current":
            last = t - self.delay[owner, u]  # source u as seen by the owner at round t
        else:
            last = s  # frozen in the message
        emb = (u, last)
        Wg = khat_prefix(hist.prefix, emb, emb, self.sigma_z, self.squared)
        wq = khat_prefix(hist.prefix, (np.array([q]), np.array([n_now - 1])), emb, self.sigma_z, self.squared)[0]
        if hist.prefix[1][n_now - 1, q] == 0:  # q has no samples: no embedding to compare
            wq = np.zeros_like(wq)
        return Wg, wq, 1.0  # K_hat_z(q, q) = 1


# ----------------------------------------------------------------------------------- helpers

def active_slots(admit_row, delay_row, t, valid=None):
    """(s, u) index arrays of the observations an agent uses at 0-based decision round t: admitted, old
    enough, and existing (valid [>= t, V], default: all)."""
    exists = True if valid is None else valid[:t]
    s, u = np.nonzero((np.arange(t)[:, None] <= t - delay_row[None, :]) & admit_row[None, :] & exists)
    return s, u


def regret(fbar, actions):
    chosen = np.take_along_axis(fbar, actions[:, :, None], axis=2)[:, :, 0]
    return fbar.max(axis=2) - chosen


def mmd_prefix_sums(hist_x, kernel, sigma_x, valid=None):
    """(P, n): P[s, u, s', u'] = sum_{tau <= s, tau' <= s'} K_x(x_{u, tau}, x_{u', tau'}) over the existing
    chosen contexts of hist_x [t, V, d] (valid [t, V], default all), n[s, u] their counts: every prefix
    embedding's inner products in O(1)."""
    t, V, d = hist_x.shape
    valid = np.ones((t, V), bool) if valid is None else valid
    flat = hist_x.reshape(t * V, d)
    M = kernel_matrix(kernel, flat, flat, sigma_x).reshape(t, V, t, V)
    M = np.where(valid[:, :, None, None] & valid[None, None], M, 0.0)
    return M.cumsum(axis=0).cumsum(axis=2), valid.cumsum(axis=0)


def khat_prefix(prefix, emb_a, emb_b, sigma_z=1.0, squared=False):
    """K_hat_z between prefix embeddings (source, last round) a [n] and b [m] -> [n, m], from
    prefix = (P, counts) of `mmd_prefix_sums`; an embedding without samples is zero, and two of one
    source with as many samples are one set (K_hat_z = 1)."""
    P, count = prefix
    ua, la = np.asarray(emb_a[0]), np.asarray(emb_a[1])
    ub, lb = np.asarray(emb_b[0]), np.asarray(emb_b[1])
    na, nb = count[la, ua], count[lb, ub]
    ma, mb = np.maximum(na, 1.0), np.maximum(nb, 1.0)
    self_a = P[la, ua, la, ua] / ma**2
    self_b = P[lb, ub, lb, ub] / mb**2
    cross = P[la[:, None], ua[:, None], lb[None, :], ub[None, :]] / (ma[:, None] * mb[None, :])
    return _similarity_from_mmd2(self_a[:, None] + self_b[None, :] - 2 * cross,
                                 (ua[:, None] == ub[None, :]) & (na[:, None] == nb[None, :]), sigma_z, squared)


def khat_z(samples, kernel, sigma_x=1.0, sigma_z=1.0, squared=False):
    """K_hat_z [n, n] of n sample sets (arrays [n_i, d]) straight from the MMD formula (spec 3.5)."""
    k = lambda A, B: kernel_matrix(kernel, A, B, sigma_x).mean()
    n = len(samples)
    mmd2 = np.array([[k(a, a) + k(b, b) - 2 * k(a, b) for b in samples] for a in samples])
    mmd2 = 0.5 * (mmd2 + mmd2.T)
    return _similarity_from_mmd2(mmd2, np.eye(n, dtype=bool), sigma_z, squared)


def _similarity_from_mmd2(mmd2, same, sigma_z, squared):
    mmd2 = np.where(same, 0.0, np.maximum(mmd2, 0.0))
    return np.exp(-(mmd2 if squared else np.sqrt(mmd2)) / (2 * sigma_z**2))


def masked_krr(G, kappa, y, mask, lam):
    """KRR mean and variance reduction over the slots where mask is True, on padded arrays
    (spec 8.2): K_pad = M * G + diag(where(mask, lam, 1)), kappa [n, K] and y [n] zeroed off mask."""
    M = mask[:, None] & mask[None, :]
    Kpad = np.where(M, G, 0.0) + np.diag(np.where(mask, lam, 1.0))
    kap, yy = np.where(mask[:, None], kappa, 0.0), np.where(mask, y, 0.0)
    sol = np.linalg.solve(Kpad, np.concatenate([yy[:, None], kap], axis=1))
    return kap.T @ sol[:, 0], np.sum(kap * sol[:, 1:], axis=0)


def schur_append(Q, k, c, lam):
    """(K + lam I)^{-1} after appending a point, from Q = (K + lam I)^{-1} (Alg. 1, spec 2)."""
    if Q.size == 0:
        return np.array([[1.0 / (c + lam)]])
    q = Q @ k
    s = c + lam - k @ q
    return np.block([[Q + np.outer(q, q) / s, -q[:, None] / s], [-q[None, :] / s, np.array([[1.0 / s]])]])


def _identity(X):
    return np.eye(X.shape[1], dtype=bool)


def _counts(graph, admit, T, d, active):
    """Per-round originated, deliveries, scalars, accepted (spec 1.3 'Counting'); zeros if admit is None.
    Only existing observations (active [T, V]) are sent."""
    V = len(graph["dist"])
    zeros = np.zeros(T, dtype=np.int64)
    if admit is None:
        return {"originated": zeros, "deliveries": zeros, "scalars": zeros, "accepted": zeros.copy()}
    pairs = graph["within"] & ~np.eye(V, dtype=bool)
    # the message of round t + 1 - delay reaches v in round t's communication phase, if it exists
    sent = np.arange(T)[:, None, None] + 1 - graph["delay"][None]  # [T, V, V]
    arrived = (sent >= 0) & active[np.clip(sent, 0, T - 1), np.arange(V)[None, None, :]]
    deliveries = (arrived & pairs).sum(axis=(1, 2))
    accepted = (arrived & pairs & admit).sum(axis=(1, 2))
    return {"originated": active.sum(axis=1), "deliveries": deliveries, "scalars": (d + 2) * deliveries,
            "accepted": accepted}


def _check(X, Y, fbar, U, graph, active=None):
    """Refuse malformed inputs; returns active [T, V] bool (all True where None)."""
    if X.ndim != 4:
        raise ValueError(f"X must be [T, V, K, d], got shape {X.shape}")
    T, V, K, _ = X.shape
    for name, a in (("Y", Y), ("fbar", fbar), ("U", U)):
        if np.shape(a) != (T, V, K):
            raise ValueError(f"{name} must have shape {(T, V, K)} like X[..., 0], got {np.shape(a)}")
    missing = [k for k in GRAPH_KEYS if k not in graph]
    if missing:
        raise ValueError(f"graph arrays lack {missing}; build them with graph_arrays_np(adjacency, gamma)")
    if np.shape(graph["dist"]) != (V, V):
        raise ValueError(f"graph arrays are for {len(graph['dist'])} agents, X has V = {V}")
    if active is None:
        return np.ones((T, V), bool)
    if np.shape(active) != (T, V):
        raise ValueError(f"active must have shape {(T, V)}, got {np.shape(active)}")
    return np.asarray(active, bool)
