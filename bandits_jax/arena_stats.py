"""The arena's statistics: what a reader can cite of runs on common seeds.

Every function takes per-seed numbers (final cumulative regret, communication) of runs on the SAME seeds
(the arena runs every algorithm of a problem on seeds 0..S-1 with the same random numbers), so a
comparison is paired: seed s of one algorithm against seed s of the other.

    mean_interval(x)              mean and a 95% bootstrap interval of the mean        x [S]
    paired_interval(x, y)         mean of x - y seed by seed, and its 95% interval     x, y [S]
    iqm(x)                        the interquartile mean (the middle half's mean)      x [S]
    win_rate(xs, ys)              P(x < y) over shared problems and seeds, ties 1/2    [[S_p], ...]
    ranks(values), pareto_front(points)

The intervals are percentile bootstraps over seeds (`RESAMPLES` resamples, a fixed generator seed, so a
page regenerates byte for byte); a win rate resamples seeds within each problem.
"""
from __future__ import annotations

import numpy as np

RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def mean_interval(x) -> tuple:
    """(mean, low, high): the mean of x [S] and the 2.5 and 97.5 percentiles of its bootstrap means."""
    x = np.asarray(x, np.float64)
    means = x[_resample(len(x))].mean(axis=1)
    return float(x.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired_interval(x, y) -> tuple:
    """(mean, low, high) of the seed-by-seed difference x - y (x, y [S] on the same seeds): below 0 with
    high < 0, x is lower on these seeds beyond the bootstrap's doubt."""
    return mean_interval(np.asarray(x, np.float64) - np.asarray(y, np.float64))


def iqm(x) -> float:
    """The interquartile mean of x [S]: the mean of the values between its 25th and 75th percentiles
    (the middle half, sorted; both ends cut by floor(S / 4))."""
    x = np.sort(np.asarray(x, np.float64))
    cut = len(x) // 4
    return float(x[cut:len(x) - cut].mean())


def win_rate(xs, ys) -> tuple:
    """(rate, low, high): how often x beats y (lower regret; a tie counts 1/2) over every seed of every
    shared problem, xs[p], ys[p] [S_p] on the same seeds of problem p; the interval resamples the
    seeds of each problem (the problems are what the two share, fixed)."""
    wins = [_wins(np.asarray(x, np.float64), np.asarray(y, np.float64)) for x, y in zip(xs, ys)]
    rate = float(np.concatenate(wins).mean())
    boot = np.concatenate([w[_resample(len(w))] for w in wins], axis=1).mean(axis=1)
    return rate, float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def ranks(values) -> list:
    """1-based ranks of `values` (lowest first), ties sharing their mean rank; NaN ranks last."""
    v = np.asarray(values, float)
    v = np.where(np.isfinite(v), v, np.inf)
    out = np.empty(len(v))
    order = np.argsort(v, kind="stable")
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        out[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out.tolist()


def pareto_front(points) -> list:
    """[bool] per (cost, value) point: True where no other point is at most as high in both and lower
    in one (lower is better in both)."""
    pts = np.asarray(points, float).reshape(-1, 2)
    return [not any((q <= p).all() and (q < p).any() for q in pts) for p in pts]


# ------------------------------------------------------------------------------ helpers
def _wins(x, y):
    return np.where(x < y, 1.0, np.where(x == y, 0.5, 0.0))


def _resample(n: int):
    """[RESAMPLES, n] indices drawn with replacement, the same for every call with the same n."""
    return np.random.default_rng(BOOTSTRAP_SEED).integers(0, n, size=(RESAMPLES, n))
