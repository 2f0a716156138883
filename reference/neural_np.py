"""Plain NumPy Neural UCB / Neural TS for one agent, one step at a time.

Written straight from the formulas, in the manner of the papers' reference code: a hand-written
two-layer ReLU network with its backprop, full-batch gradient descent, and a fresh inverse of Z
at every step.

Network (m hidden units, theta = (W1 [m, d], b1 [m], w2 [m], b2)):
    authors: f(x) = w2 . relu(W1 x + b1) + b2
    paper:   f(x) = sqrt(m) * w2 . relu(W1 x)            (no biases)
Features g = c * grad_theta f with c = 1 (raw) or 1/sqrt(m) (sqrt_m).
Step t, contexts X [K, d]:
    width_k = sqrt(g_k^T Z^{-1} g_k)  (diag: sqrt(sum_j g_kj^2 / Z_j)),  Z = lam I + sum g g^T
    UCB: score = f + coef * width;    TS: score = f + coef * width * z_t   (z_t [K] given)
    a = argmax(score);  Z += g_a g_a^T (diag: += g_a^2)
    if t < train_until: append (x_a, r_a); train_steps steps theta -= lr * grad of
        authors: mean_i (f_i - y_i)^2 + (lam / n) / 2 |theta|^2
        paper:   1/2 sum_i (f_i - y_i)^2 + m lam / 2 |theta - theta0|^2
"""
import numpy as np


def from_flax(params):
    """NumPy (W1 [m, d], b1 [m] | None, w2 [m], b2 float | None) from a 2-layer flax param dict."""
    first, last = params["layer_0"], params["layer_1"]
    W1 = np.asarray(first["kernel"]).T.copy()
    w2 = np.asarray(last["kernel"])[:, 0].copy()
    if "bias" in first:
        return W1, np.asarray(first["bias"]).copy(), w2, float(np.asarray(last["bias"])[0])
    return W1, None, w2, None


class TwoLayerNet:
    """A 2-layer ReLU net on a flat parameter vector theta."""

    def __init__(self, d, m, biases):
        self.d, self.m, self.biases = d, m, biases
        self.out_scale = 1.0 if biases else np.sqrt(m)

    def flatten(self, W1, b1, w2, b2):
        parts = [W1.ravel()] + ([b1] if self.biases else []) + [w2] + ([np.array([b2])] if self.biases else [])
        return np.concatenate(parts)

    def unflatten(self, theta):
        d, m = self.d, self.m
        W1 = theta[: m * d].reshape(m, d)
        i = m * d
        b1 = theta[i : i + m] if self.biases else np.zeros(m)
        i += m if self.biases else 0
        w2 = theta[i : i + m]
        b2 = theta[i + m] if self.biases else 0.0
        return W1, b1, w2, b2

    def forward(self, theta, X):
        """f [n] and the gradients [n, p] at the rows of X [n, d]."""
        W1, b1, w2, b2 = self.unflatten(theta)
        z = X @ W1.T + b1  # [n, m]
        h = np.maximum(z, 0.0)
        f = self.out_scale * (h @ w2 + b2)
        dz = self.out_scale * (z > 0) * w2  # d f / d z  [n, m]
        grads = [(dz[:, :, None] * X[:, None, :]).reshape(len(X), -1)]
        if self.biases:
            grads.append(dz)
        grads.append(self.out_scale * h)
        if self.biases:
            grads.append(self.out_scale * np.ones((len(X), 1)))
        return f, np.concatenate(grads, axis=1)


def run(contexts, rewards, init_params, kind, lam, coef, lr, train_steps, train_until, covariance="full",
        loss="authors", feature_scale="raw", z=None):
    """One agent over T steps.

    contexts [T, K, d], rewards [T, K] (the chosen arm's is used), init_params from `from_flax`,
    kind "ucb" | "ts", coef = beta (UCB) or nu (TS), z [T, K] standard-normal draws (TS).
    Returns dict: actions [T], mean [T, K], width [T, K], theta (final, flat), Z (final), n.
    """
    T, K, d = contexts.shape
    W1, b1, w2, b2 = init_params
    m = W1.shape[0]
    net = TwoLayerNet(d, m, biases=b1 is not None)
    theta = net.flatten(W1, b1, w2, b2)
    theta0 = theta.copy()
    p = theta.size
    c = 1.0 / np.sqrt(m) if feature_scale == "sqrt_m" else 1.0
    Z = lam * np.eye(p) if covariance == "full" else lam * np.ones(p)
    hist_x, hist_y = [], []
    actions = np.zeros(T, dtype=np.int64)
    means = np.zeros((T, K))
    widths = np.zeros((T, K))
    for t in range(T):
        f, G = net.forward(theta, contexts[t])
        G = c * G
        if covariance == "full":
            Zinv = np.linalg.inv(Z)
            width = np.sqrt(np.einsum("kp,pq,kq->k", G, Zinv, G))
        else:
            width = np.sqrt(np.sum(G * G / Z, axis=1))
        score = f + coef * width if kind == "ucb" else f + coef * width * z[t]
        a = int(np.argmax(score))
        actions[t], means[t], widths[t] = a, f, width
        g = G[a]
        Z = Z + np.outer(g, g) if covariance == "full" else Z + g * g
        if t < train_until:
            hist_x.append(contexts[t, a])
            hist_y.append(rewards[t, a])
            X, y = np.array(hist_x), np.array(hist_y)
            n = len(y)
            for _ in range(train_steps):
                fx, J = net.forward(theta, X)
                if loss == "authors":
                    grad = 2.0 / n * J.T @ (fx - y) + lam / n * theta
                else:
                    grad = J.T @ (fx - y) + m * lam * (theta - theta0)
                theta = theta - lr * grad
    return {"actions": actions, "mean": means, "width": widths, "theta": theta, "Z": Z, "n": len(hist_y)}
