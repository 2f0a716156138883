"""Full-information ceiling of the rating stand-ins: how well can ANY fitted model pick the positive arm?

Every arm's label (not only the chosen one's) of `train` steps is given to a regression model; the
model then picks the highest-scoring arm at `test` fresh steps, and the table gives that greedy
choice's regret per step (1 - reward; a random choice costs (K - 1) / K = 0.95). A bandit method
cannot beat this ceiling by much, so its regret minus T x ceiling is what it can still gain.

Models, each a ridge regression of the 0/1 label on the unit-norm context x (d = 20):
    linear:    [x, 1];
    quadratic: [x, 1, the upper triangle of x x^T] (represents <user, item> products exactly);
    rbf gamma: Gaussian kernel exp(-gamma |x - y|^2) ridge on `inducing` random training points
               (Nystrom, m inducing points), gamma in the paper's grid {0.1, 1, 4}.

    python -m bench.standin_ceiling [--train 20000] [--test 5000] [--inducing 2000]
writes bench/measured/standin_ceiling.json and prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import bandits_jax  # noqa: F401  (the CPU guard first)
import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.problems import make_problem

ROOT = Path(__file__).resolve().parent


def draws(name: str, steps: int, first: int, seed: int = 0):
    """(contexts [steps, K, d], labels [steps, K]) of steps first..first+steps-1 of seed `seed`."""
    problem = make_problem(name, num_agents=1, horizon=first + steps)
    instance = problem.init(jax.random.PRNGKey(seed))
    ts = jnp.arange(first, first + steps)
    ctx = jax.vmap(lambda t: problem.contexts(instance, t, None))(ts)[:, 0]
    means = jax.vmap(lambda t, c: problem.mean_reward(instance, t, c))(ts, ctx[:, None])[:, 0]
    return np.asarray(ctx), np.asarray(means)


def quadratic(x):
    iu = np.triu_indices(x.shape[-1])
    outer = x[..., :, None] * x[..., None, :]
    return np.concatenate([x, np.ones(x.shape[:-1] + (1,)), outer[..., iu[0], iu[1]]], axis=-1)


def linear(x):
    return np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)


def rbf_features(gamma: float, centres):
    """Nystrom features phi(x) = K(x, C) K_CC^{-1/2} of the Gaussian kernel on the centres C."""
    def k(a, b):
        sq = (a * a).sum(-1)[:, None] + (b * b).sum(-1)[None, :] - 2 * a @ b.T
        return np.exp(-gamma * np.maximum(sq, 0.0))

    w, v = np.linalg.eigh(k(centres, centres))
    keep = w > 1e-10 * w.max()
    root = v[:, keep] / np.sqrt(w[keep])

    def phi(x):
        flat = x.reshape(-1, x.shape[-1])
        return (k(flat, centres) @ root).reshape(x.shape[:-1] + (-1,))

    return phi


def greedy_regret(features, x_train, y_train, x_test, y_test, lam=1e-3, block=1000):
    """Ridge fit on every arm of the training steps (normal equations summed over blocks of steps);
    regret per step of the argmax on the test steps."""
    gram, moment = 0.0, 0.0
    for start in range(0, len(x_train), block):
        f = features(x_train[start:start + block])
        f = f.reshape(-1, f.shape[-1])
        gram = gram + f.T @ f
        moment = moment + f.T @ y_train[start:start + block].reshape(-1)
    theta = np.linalg.solve(gram + lam * np.eye(gram.shape[0]), moment)
    scores = np.concatenate([features(x_test[s:s + block]) @ theta for s in range(0, len(x_test), block)])
    chosen = y_test[np.arange(len(y_test)), scores.argmax(-1)]
    return float(1.0 - chosen.mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--test", type=int, default=5000)
    ap.add_argument("--inducing", type=int, default=2000)
    ap.add_argument("--out", default=str(ROOT / "measured" / "standin_ceiling.json"))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = {}
    for name in ("movielens-standin", "yelp-standin"):
        xtr, ytr = draws(name, args.train, 0)
        xte, yte = draws(name, args.test, args.train)
        centres = xtr.reshape(-1, xtr.shape[-1])[rng.choice(xtr.shape[0] * xtr.shape[1], args.inducing, False)]
        models = {"linear": linear, "quadratic": quadratic}
        models.update({f"rbf gamma={g:g}": rbf_features(g, centres) for g in (0.1, 1.0, 4.0)})
        rows[name] = {m: greedy_regret(f, xtr, ytr, xte, yte) for m, f in models.items()}
        rows[name]["random"] = 1.0 - 1.0 / xtr.shape[1]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sizes = {k: v for k, v in vars(args).items() if k != "out"}
    out.write_text(json.dumps({"sizes": sizes, "regret_per_step": rows}, indent=2))
    names = list(next(iter(rows.values())))
    print("| stand-in | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{r[m]:.3f}" for m in names) + " |")


if __name__ == "__main__":
    main()
