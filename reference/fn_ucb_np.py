"""Plain NumPy FN-UCB, written straight from the spec: Python loops over iterations and agents,
a fresh inverse / log-determinant of every matrix whenever it is used, a hand-written two-layer
ReLU network with its backprop (`neural_np.TwoLayerNet`) and full-batch gradient descent.

Iteration s = 0, 1, ... (0-based), agent i, contexts X [K, d], features G = c * grad f(X; theta_f)
(theta_f = theta0, or the shared network under the authors' quirk Q1):

    V = lam I + W_sync + W_new[i];  theta = V^{-1} (B_sync + B_new[i])
    ucb_a = G theta + nu_tkn sqrt(lam) sqrt(diag(G V^{-1} G^T))
    ucb_b = f(X; theta_b) + nu_tk sqrt(lam) * (||g||_{Vinv_sync}  or  mean_j ||g||_{Vinv_j})
    score = (1 - alpha) ucb_a + alpha ucb_b  if alpha > 0  else ucb_a;  a = argmax
    W_new[i] += g g^T;  B_new[i] += y g;  V_local[i] += g g^T
    flag[i] = (s - t_last) * (log det V' - log det V_last) > D   (V' = lam I + W_sync + W_new[i])
    any flag -> round: train, FedAvg, Vinv_sync = mean inv(V_local), W_sync += sum W_new, ...

Diagonal covariance keeps vectors and works elementwise. Options follow `fn_ucb` (same names);
authors_code=True runs the quirks Q1 and Q2 of `fn_ucb_authors` (pass the code's feature_scale,
loss and trigger with it).
"""
import numpy as np

from .neural_np import TwoLayerNet


def run(contexts, rewards, init_params, lam, nu_tkn, nu_tk, D, lr, *, variant="less", covariance="full",
        feature_scale="sqrt_m", loss="paper", trigger="exact", alpha_mode="linear", alpha_warmup=3,
        alpha_ramp=700, alpha_contexts=None, aggregate_params=True, train_steps=30, train_until=2000,
        authors_code=False):
    """FN-UCB over contexts [T, N, K, d] and rewards [T, N, K] (the chosen arm's reward is used).

    init_params: (W1 [m, d], b1 [m] | None, w2 [m], b2 | None), as `neural_np.from_flax`.
    Returns dict: actions [T, N], rounds [T], comm_up [T], comm_down [T] (scalars per receiver: N uploads,
    the broadcast to N agents), comm_paper [T] (the paper's count, spec §4: N uploads, one broadcast), alpha [T],
    W_sync, B_sync, Vinv_sync, theta_sync (flat), theta (agents' flat [N, p]), V_local [N, ...].
    """
    T, N, K, d = contexts.shape
    W1, b1, w2, b2 = init_params
    m = W1.shape[0]
    net = TwoLayerNet(d, m, biases=b1 is not None)
    theta0 = net.flatten(W1, b1, w2, b2)
    p = theta0.size
    c = 1.0 / np.sqrt(m) if feature_scale == "sqrt_m" else 1.0
    full = covariance == "full"
    eye = np.eye(p)

    def mat(v):  # lam I (or its diagonal) times v
        return v * eye if full else v * np.ones(p)

    def inv(A):
        return np.linalg.inv(A) if full else 1.0 / A

    def quad(G, A):  # g_k^T A g_k for rows of G
        return np.einsum("kp,pq,kq->k", G, A, G) if full else np.sum(G * G * A, axis=1)

    def logdet(A):
        if full and trigger == "exact":
            return np.linalg.slogdet(A)[1]
        return np.sum(np.log(np.diag(A) if full else A))

    def outer(g):
        return np.outer(g, g) if full else g * g

    def alpha_of(s):
        if alpha_mode == "linear":
            return min(max((s - alpha_warmup) / alpha_ramp, 0.0), 1.0)
        return {"zero": 0.0, "one": 1.0}.get(alpha_mode, alpha_adaptive)

    W_sync, B_sync = mat(0.0), np.zeros(p)
    W_new = [mat(0.0) for _ in range(N)]
    B_new = [np.zeros(p) for _ in range(N)]
    V_local = [mat(lam) for _ in range(N)]
    Vinv_sync = inv(mat(lam)) if variant == "less" else [inv(mat(lam)) for _ in range(N)]
    ld_last, t_last = logdet(mat(lam)), 0
    thetas = [theta0.copy() for _ in range(N)]  # under Q1 all entries are the one shared network
    theta_sync = theta0.copy()
    hist = [([], []) for _ in range(N)]
    alpha_adaptive = 0.0
    out = {k: np.zeros(T) for k in ("rounds", "comm_up", "comm_down", "comm_paper", "alpha")}
    actions = np.zeros((T, N), dtype=np.int64)

    for s in range(T):
        alpha = alpha_of(s)
        out["alpha"][s] = alpha
        theta_feat = thetas[0] if authors_code else theta0
        flags, chosen = [], []
        for i in range(N):
            X = contexts[s, i]
            G = c * net.forward(theta_feat, X)[1]
            V = mat(lam) + W_sync + W_new[i]
            Vinv = inv(V)
            th = Vinv @ (B_sync + B_new[i]) if full else Vinv * (B_sync + B_new[i])
            ucb_a = G @ th + nu_tkn * np.sqrt(lam) * np.sqrt(quad(G, Vinv))
            if alpha > 0:
                own = authors_code or not aggregate_params
                f_b = net.forward(thetas[i] if own else theta_sync, X)[0]
                if variant == "less":
                    bonus = np.sqrt(quad(G, Vinv_sync))
                else:
                    bonus = np.mean([np.sqrt(quad(G, A)) for A in Vinv_sync], axis=0)
                ucb_b = f_b + nu_tk * np.sqrt(lam) * bonus
                score = (1.0 - alpha) * ucb_a + alpha * ucb_b
            else:
                score = ucb_a
            a = int(np.argmax(score))
            actions[s, i] = a
            g, y = G[a], rewards[s, i, a]
            W_new[i] = W_new[i] + outer(g)
            B_new[i] = B_new[i] + y * g
            V_local[i] = V_local[i] + outer(g)
            if not authors_code and s < train_until:
                hist[i][0].append(X[a])
                hist[i][1].append(y)
            crit = (s - t_last) * (logdet(mat(lam) + W_sync + W_new[i]) - ld_last)
            flags.append(crit > D)
            chosen.append((X[a], y))
        if not any(flags):
            continue

        # ---- communication round at the end of iteration s
        if authors_code:
            gate = (s + 1 > alpha_warmup) if alpha_mode == "linear" else alpha_mode != "zero"
            train_now = s < train_until and gate
        else:
            gate, train_now = True, s < train_until
        if train_now:
            if authors_code:  # Q2: only this iteration's observation joins; Q1: one network, in order
                for i in range(N):
                    hist[i][0].append(chosen[i][0])
                    hist[i][1].append(chosen[i][1])
                shared = thetas[0]
                for i in range(N):
                    shared = _train(net, shared, theta0, hist[i], lam, lr, train_steps, loss, m)
                thetas = [shared.copy() for _ in range(N)]
            else:
                thetas = [_train(net, thetas[i], theta0, hist[i], lam, lr, train_steps, loss, m) for i in range(N)]
        theta_sync = thetas[0].copy() if authors_code else np.mean(thetas, axis=0)
        inverses = [inv(A) for A in V_local]
        if gate:
            Vinv_sync = np.mean(inverses, axis=0) if variant == "less" else inverses
        W_sync = W_sync + sum(W_new)
        B_sync = B_sync + sum(B_new)
        W_new = [mat(0.0) for _ in range(N)]
        B_new = [np.zeros(p) for _ in range(N)]
        ld_last, t_last = logdet(mat(lam) + W_sync), s
        if alpha_mode == "adaptive":
            theta_f = thetas[0] if authors_code else theta0
            Gx = c * net.forward(theta_f, np.asarray(alpha_contexts))[1]
            ratios = []
            for A in inverses:
                sig = np.sqrt(lam * quad(Gx, A))
                ratios.append(sig.min() / sig.max())
            alpha_adaptive = min(ratios)
        out["rounds"][s] = 1.0
        if full:
            upload = 2 * p * p + 2 * p + 1
            down = upload if variant == "less" else (N + 1) * p * p + 2 * p + 1
        else:
            upload = 4 * p + 1
            down = upload if variant == "less" else 3 * p + 1 + N * p
        out["comm_up"][s] = N * upload
        out["comm_down"][s] = N * down
        out["comm_paper"][s] = N * upload + down

    out.update(actions=actions, W_sync=W_sync, B_sync=B_sync, Vinv_sync=Vinv_sync, theta_sync=theta_sync,
               theta=np.array(thetas), V_local=np.array(V_local), n=[len(h[1]) for h in hist])
    return out


def _train(net, theta, theta0, data, lam, lr, steps, loss, m):
    """`steps` full-batch gradient steps on the agent's history, warm-started at theta."""
    X, y = np.array(data[0]), np.array(data[1])
    n = len(y)
    if n == 0:
        return theta
    for _ in range(steps):
        f, J = net.forward(theta, X)
        if loss == "authors":  # mean squared error + weight decay lam / n toward 0
            grad = 2.0 / n * J.T @ (f - y) + lam / n * theta
        else:  # eq. (1): 1/2 sum of squares + m lam / 2 |theta - theta0|^2
            grad = J.T @ (f - y) + m * lam * (theta - theta0)
        theta = theta - lr * grad
    return theta
