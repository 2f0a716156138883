"""`async/*`: the experiments of Asynchronous Distributed Kernel Bandits (Li et al., ICLR 2023, Fig. 2).

One experiment per environment (synthetic f1 and f2, MagicTelescope, Mushroom, and synthetic
stand-ins for MovieLens and Yelp), each with the seven algorithms of the paper: Async-KernelUCB,
Approx-DisKernelUCB, OneKernelUCB, NKernelUCB, FedGLB-UCB, DisLinUCB and FedLinUCB, and a uniformly
random policy ("Random") as the floor every learner must beat. One client is active per step
(uniform arrivals); all algorithms of a run see the same contexts, arrivals and noise. Regret is
the cumulative pseudo-regret summed over clients (the paper's R_t), communication the cumulative
number of scalars sent.

Hyper-parameters (`--set KEY=VALUE`): gamma (Gaussian kernel exp(-gamma |x - y|^2), default 0.1),
alpha, lam, q; the thresholds async_D, approx_D, dislin_D, glb_D, fedlin_alpha_c ("" takes the
default rule: 1/N^2 for Async-KernelUCB's D and FedLinUCB's alpha_c, T / (N d ln(N T)) for the
three synchronous methods, with T counted by sync_convention="steps" or "rounds"); the capacities
async_dict_capacity, async_buffer_capacity, approx_dict_capacity, nkernel_capacity; one_storage,
OneKernelUCB's storage ("panels", "dense" or "distinct"; the same numbers to rounding).
`--set grid=true` runs the paper's grid of gamma and alpha over {0.1, 1, 4} as one compiled call
per algorithm; `async_D_values` and `approx_D_values` add threshold sweeps. An overflow is never
silent: the sweep ends with a ConfigError naming the capacity to raise.

Walk-through: docs/experiments/async.md.
"""
from __future__ import annotations

import math
from typing import Optional

import jax.numpy as jnp

from ..reporting import claims
from ..core import ConfigError, EnvSpec
from ..curves import Curve, Spec, problem_of
from ..problems.async_env import MAX_RESTARTS
from .registry import (COUNT, NOISE_STD, NONNEGATIVE, POSITIVE, Bound, Experiment, Figure, Page, parse_list,
                       register, register_page)

ALGORITHMS = ("Async-KernelUCB", "Approx-DisKernelUCB", "OneKernelUCB", "NKernelUCB", "FedGLB-UCB", "DisLinUCB",
              "FedLinUCB", "Random")
SYNC_CONVENTIONS = ("steps", "rounds")

COMMON = {
    "num_agents": 100,
    "num_arms": 20,
    "arrivals": "uniform",
    "gamma": 0.1,
    "alpha": 1.0,
    "lam": 1.0,
    "q": 1.0,
    "async_D": "",
    "approx_D": "",
    "dislin_D": "",
    "glb_D": "",
    "fedlin_alpha_c": "",
    "sync_convention": "steps",
    "glb_c_mu": 0.2,
    "async_dict_capacity": 512,
    "async_buffer_capacity": 256,
    "approx_dict_capacity": 512,
    "nkernel_capacity": 256,
    "one_storage": "panels",
    "grid": False,
    "grid_values": "0.1,1,4",
    "async_D_values": "",
    "approx_D_values": "",
}
SYNTH = {**COMMON, "dim": 20, "noise_std": 0.1}
UCI = {**COMMON, "data_dir": "", "kmeans_n_init": 10, "one_storage": "distinct"}
STANDIN = {**COMMON, "standin_total_users": 2500, "standin_total_items": 12000, "standin_num_ratings": 600000,
           "standin_num_users": 2000, "standin_num_items": 10000}
# what every numeric key allows (registry.Bound): gamma is the RBF kernel's exp(-gamma ||x - x'||^2) (its largest
# value is checked where it becomes a lengthscale, `lengthscale`); sizes are int32, the worlds' ends their own
BOUNDS = {"num_agents": COUNT, "num_arms": COUNT, "gamma": POSITIVE, "alpha": NONNEGATIVE,
          "lam": POSITIVE, "q": NONNEGATIVE, "glb_c_mu": POSITIVE, "async_dict_capacity": COUNT,
          "async_buffer_capacity": COUNT, "approx_dict_capacity": COUNT, "nkernel_capacity": COUNT, "dim": COUNT,
          "noise_std": NOISE_STD, "kmeans_n_init": Bound(1, MAX_RESTARTS),
          "standin_total_users": COUNT, "standin_total_items": COUNT, "standin_num_ratings": COUNT,
          "standin_num_users": COUNT, "standin_num_items": COUNT}
# the largest gamma: its lengthscale 1 / sqrt(2 gamma) must square to a normal float32 number, since the RBF
# kernel divides by lengthscale^2 (below, a run in float32 would divide 0 by 0 on the Gram diagonal)
MAX_GAMMA = 0.5 / float(jnp.finfo(jnp.float32).tiny)

PAPER = {"horizon": 10000, "seeds": 10, "first_segment": 256}
SMOKE = {"horizon": 40, "seeds": 2, "first_segment": 64, "num_agents": 4, "async_dict_capacity": 48,
         "async_buffer_capacity": 16, "approx_dict_capacity": 48, "nkernel_capacity": 32}
SMOKE_UCI = {"kmeans_n_init": 1}
SMOKE_STANDIN = {"standin_total_users": 300, "standin_total_items": 1200, "standin_num_ratings": 30000,
                 "standin_num_users": 200, "standin_num_items": 1000}

NOTES = (
    "Regret: cumulative pseudo-regret summed over clients (one client acts per step: the paper's R_t), "
    "mean over seeds; the paper's error bands are not stated (our plan: +- 1 std; the summary shows the "
    "standard error). Communication: cumulative scalars up + down, every synchronisation counting all N "
    "clients. Hyper-parameters: lam = 1 and q = 1 everywhere; without grid=true one (gamma, alpha) point "
    "per run, default gamma = 0.1, alpha = 1 (the paper grid-searches both over {0.1, 1, 4}; gamma = 0.1 "
    "keeps the Nystrom dictionaries small enough for paper size); thresholds: Async-KernelUCB D = 1/N^2 "
    "(theory), FedLinUCB alpha_c = 1/N^2, Approx-DisKernelUCB / DisLinUCB / FedGLB-UCB T / (N d ln(N T)) "
    "with T the steps (sync_convention=rounds: T / N rounds, as the authors' code counts them; the paper "
    "states none of the baselines' values). A capacity overflow is an error: the run's error "
    "bits are stored and the sweep names the capacity to raise. "
    "Claims (no numbers given): OneKernelUCB lowest regret with cost linear in T; NKernelUCB high regret "
    "and zero cost; the kernel methods beat the linear/GLB ones; Async-KernelUCB communicates much less "
    "than Approx-DisKernelUCB with comparable or better regret."
)


# ------------------------------------------------------------------------------------ parsing
def _threshold(config, key, default):
    raw = str(config[key]).strip()
    if raw == "":
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key} must be a number or empty (the default rule), got {raw!r}") from None
    if not value >= 0:
        raise ConfigError(f"{key} must be >= 0, got {value}")
    return value


def thresholds(config, spec) -> dict:
    """The communication thresholds of a configuration on a problem of spec (N, d, T)."""
    N, d, T = spec.num_agents, spec.dim, spec.horizon
    if config["sync_convention"] not in SYNC_CONVENTIONS:
        raise ConfigError(f"sync_convention must be one of {', '.join(SYNC_CONVENTIONS)}, "
                          f"got {config['sync_convention']!r}")
    if config["sync_convention"] == "rounds":
        T = T / N
    sync = T / (N * d * math.log(N * T)) if N * T > 1 else 1.0
    return {
        "async_D": _threshold(config, "async_D", 1.0 / N ** 2),
        "approx_D": _threshold(config, "approx_D", sync),
        "dislin_D": _threshold(config, "dislin_D", sync),
        "glb_D": _threshold(config, "glb_D", sync),
        "fedlin_alpha_c": _threshold(config, "fedlin_alpha_c", 1.0 / N ** 2),
    }


# ------------------------------------------------------------------------------------ algorithms
def algorithms(config, spec) -> list:
    """(name, algorithm Spec) of the seven algorithms of the paper and the uniformly random policy (the
    floor every learner must beat) for a problem of spec, in the order of ALGORITHMS.

    One client is active per step: the problems declare it (`EnvSpec.one_active`), so every
    baseline scores the active client only (the same action as scoring all N clients, at a
    fraction of the cost). Every numeric key was checked against BOUNDS (`registry.resolve_config`).
    """
    th = thresholds(config, spec)
    lam, alpha = config["lam"], config["alpha"]
    kern = dict(kernel="rbf", lam=lam, alpha=alpha, lengthscale=lengthscale("gamma", config["gamma"]))
    nk = config["nkernel_capacity"]
    specs = [
        Spec("async_kernel_ucb", dict(kern, q=config["q"], threshold=th["async_D"],
                                      dict_capacity=config["async_dict_capacity"],
                                      buffer_capacity=config["async_buffer_capacity"])),
        Spec("approx_dis_kernel_ucb", dict(kern, q=config["q"], threshold=th["approx_D"],
                                           dict_capacity=config["approx_dict_capacity"])),
        Spec("one_kernel_ucb", dict(kern, storage=config["one_storage"])),
        Spec("n_kernel_ucb", kern, (("capped_history", {"rows": nk}),)),
        Spec("fed_glb_ucb", dict(lam=lam, alpha=alpha, c_mu=config["glb_c_mu"], threshold=th["glb_D"])),
        Spec("dis_lin_ucb", dict(lam=lam, alpha=alpha, threshold=th["dislin_D"])),
        Spec("fed_lin_ucb", dict(lam=lam, alpha=alpha, alpha_c=th["fedlin_alpha_c"])),
        Spec("uniform_random"),
    ]
    return list(zip(ALGORITHMS, specs))


# ------------------------------------------------------------------------------------ problems
def _common(config):
    return dict(num_agents=config["num_agents"], horizon=config["horizon"], num_arms=config["num_arms"],
                arrivals=config["arrivals"])


def _synthetic(name):
    def problem(config):
        return Spec(name, dict(_common(config), dim=config["dim"], noise_std=config["noise_std"]))

    return problem


def _uci(name):
    def problem(config):
        return Spec(name, dict(_common(config), data_dir=config["data_dir"] or None, n_init=config["kmeans_n_init"]))

    return problem


def _standin(name):
    def problem(config):
        sizes = {k: config["standin_" + k] for k in ("total_users", "total_items", "num_ratings", "num_users",
                                                       "num_items")}
        return Spec(name, dict(_common(config), **sizes))

    return problem


def grid_points(config, algorithm: Spec) -> Optional[tuple]:
    """The (gamma, alpha) grid of the paper as ((label, params), ...) for one algorithm (None: grid off).

    grid_values "0.1,1,4" (the paper's) gives 9 points for a kernel method (gamma -> its
    lengthscale 1 / sqrt(2 gamma)) and 3 (alpha only) for the linear and GLB methods; the random
    policy has no hyper-parameter and runs once.
    """
    values = parse_list(config, "grid_values", float, allow_empty=True)  # checked whether the grid is on or off
    if not values or min(values) <= 0:
        raise ConfigError(f"grid_values must be positive numbers, got {config['grid_values']!r}")
    if not config["grid"] or "alpha" not in algorithm.options:
        return None
    if "lengthscale" not in algorithm.options:
        return tuple((f"alpha={a:g}", {"alpha": a}) for a in values)
    return tuple((f"gamma={g:g}, alpha={a:g}", {"lengthscale": lengthscale("grid_values", g), "alpha": a})
                 for g in values for a in values)


def lengthscale(key: str, gamma: float) -> float:
    """The lengthscale 1 / sqrt(2 gamma) of the RBF kernel exp(-gamma ||x - x'||^2), gamma the value of `key`
    (a ConfigError naming the key where gamma > MAX_GAMMA)."""
    if gamma > MAX_GAMMA:
        given = f"gamma={gamma:g}" if key == "gamma" else f"{key}: gamma {gamma:g}"
        raise ConfigError(f"{given} makes the kernel's lengthscale 1/sqrt(2 gamma) so small that its square "
                          f"underflows (the kernel divides by it); give gamma <= {MAX_GAMMA:.3g}")
    return 1.0 / math.sqrt(2.0 * gamma)


def d_sweep(config, algs) -> list:
    """(method, curve name, Spec) of extra copies of Async-KernelUCB and Approx-DisKernelUCB at the thresholds of
    `async_D_values` and `approx_D_values` (comma-separated; empty: none), named "<algorithm> (D=<value>)"."""
    out = []
    for name, key in (("Async-KernelUCB", "async_D_values"), ("Approx-DisKernelUCB", "approx_D_values")):
        base = dict(algs)[name]
        for D in parse_list(config, key, float, 0.0, allow_empty=True):
            out.append((name, f"{name} (D={D:g})", base.with_options(threshold=D)))
    return out


def _tags(method: str, alg: Spec) -> dict:
    """A curve's tags: its method, and for the two swept methods their threshold D (the x of a D sweep)."""
    swept = method in ("Async-KernelUCB", "Approx-DisKernelUCB")
    return {"method": method, **({"D": alg.options["threshold"]} if swept else {})}


def _build(make):
    def build(config):
        problem = make(config)
        check_keys(config)  # before the problem is built: a refused key reads no data
        algs = algorithms(config, problem_of(problem).spec)  # the thresholds' default rule reads N, d, T
        curves = [Curve(name, problem, alg, grid_points(config, alg), tags=_tags(name, alg)) for name, alg in algs]
        curves += [Curve(name, problem, alg, grid_points(config, alg), tags=_tags(base, alg))
                   for base, name, alg in d_sweep(config, algs)]
        return curves

    return build


def check_keys(config) -> None:
    """Parse every key and build every algorithm of the configuration on a stand-in of the problem's
    sizes (d = 1: the thresholds' default rule needs the problem's d, which a data set gives), so that
    a bad key is refused before a data-backed problem reads or downloads its data."""
    from ..algorithms import build_algorithm

    algs = algorithms(config, EnvSpec(config["num_agents"], config["num_arms"], 1, config["horizon"]))
    for _, alg in algs + [(name, alg) for _, name, alg in d_sweep(config, algs)]:
        grid_points(config, alg)
        build_algorithm(alg)


# ------------------------------------------------------------------------------------ registry
ENVIRONMENTS = (
    ("synthetic-f1", "async-f1", SYNTH, _synthetic, {},
     "f1(x) = cos(3 <x, theta*>), 20 fresh arms uniform in the d = 20 unit ball, noise N(0, 0.1^2)", ""),
    ("synthetic-f2", "async-f2", SYNTH, _synthetic, {},
     "f2(x) = u^3 - 3u^2 - u + 3, u = <x, theta*>, 20 fresh arms in the d = 20 unit ball, noise N(0, 0.1^2)", ""),
    ("magic", "async-magic", UCI, _uci, SMOKE_UCI,
     "MagicTelescope: 20 k-means centroid arms (z-scored features), Bernoulli(P(gamma | cluster)) rewards",
     "data_dir='' lets the loader use its own look-up order. "),
    ("mushroom", "async-mushroom", UCI, _uci, SMOKE_UCI,
     "Mushroom: 20 k-means centroid arms (one-hot features), Bernoulli(P(edible | cluster)) rewards",
     "data_dir='' lets the loader use its own look-up order. "),
    ("movielens-standin", "movielens-standin", STANDIN, _standin, SMOKE_STANDIN,
     "synthetic stand-in for MovieLens: low-rank generated ratings, SVD user+item contexts d = 20, "
     "1 positive + 19 negative arms",
     "SYNTHETIC STAND-IN, NOT MovieLens: generated low-rank ratings put through the paper's construction "
     "(top users/items, rank-10 SVD, 1 positive + 19 negatives); its curves say nothing about MovieLens. "),
    ("yelp-standin", "yelp-standin", STANDIN, _standin, SMOKE_STANDIN,
     "synthetic stand-in for Yelp: low-rank generated ratings, SVD user+item contexts d = 20, "
     "1 positive + 19 negative arms",
     "SYNTHETIC STAND-IN, NOT Yelp: generated low-rank ratings put through the paper's construction "
     "(top users/items, rank-10 SVD, 1 positive + 19 negatives); its curves say nothing about Yelp. "),
)

for _name, _problem, _defaults, _maker, _smoke, _description, _note in ENVIRONMENTS:
    register(Experiment(
        name=f"async/{_name}",
        description=f"{_description}: the seven algorithms of Li et al. (2023), Fig. 2, and uniform random",
        defaults=dict(_defaults),
        sizes={"smoke": {**SMOKE, **_smoke}, "paper": dict(PAPER)},
        build=_build(_maker(_problem)),
        agents="sum",
        se_ddof=0,
        notes=_note + NOTES,
        x="D",
        bounds=BOUNDS,
    ))

ASYNC_RECORDS = tuple(f"async-{e[0]}-paper" for e in ENVIRONMENTS)
# the paper's data sets (the two stand-ins are generated data in the paper's construction: library checks)
PAPER_RECORDS = tuple(r for r in ASYNC_RECORDS if "standin" not in r)
STANDIN_RECORDS = tuple(r for r in ASYNC_RECORDS if "standin" in r)
_KERNEL = ["Async-KernelUCB", "Approx-DisKernelUCB", "OneKernelUCB"]
_LINEAR = ["FedGLB-UCB", "DisLinUCB", "FedLinUCB"]
_AT = "at the default thresholds (Async-KernelUCB's D = 1/N^2 synchronises at almost every arrival)"
# the paper's linear counterparts of the two Nystrom methods (Sec. 5.2): asynchronous with asynchronous,
# synchronous with synchronous
_COUNTERPARTS = [("Async-KernelUCB", "FedLinUCB"), ("Approx-DisKernelUCB", "DisLinUCB"),
                 ("Approx-DisKernelUCB", "FedGLB-UCB")]


def _claims(records: tuple, origin: str, which: str) -> tuple:
    """The claims of Li et al. (2023), Sec. 5.2, on `records` (the paper's data sets, or the stand-ins)."""
    kw = dict(origin=origin, paper_size="10 runs, T = 10^4")
    return (
        claims.pairs_below("async", f"The kernel methods have lower regret than their linear counterparts (the "
                           f"sentence's subject is lost; read as Async- and Approx-DisKernelUCB) ({which})",
                           records, _COUNTERPARTS, where="Sec. 5.2", quote="regret than their linear counterparts",
                           **kw),
        claims.all_below("async", f"Async-KernelUCB communicates much less than Approx-DisKernelUCB, read as less than "
                         f"half ({which}, {_AT})", records, ["Async-KernelUCB"], ["Approx-DisKernelUCB"],
                         claims.communication, by=2.0, where="Sec. 5.2",
                         quote="Async-KernelUCB incurs much smaller communication cost empirically", **kw),
        claims.pairs_at_most("async", f"Async-KernelUCB's regret is comparable to or better than "
                             f"Approx-DisKernelUCB's ({which})", records, [("Async-KernelUCB", "Approx-DisKernelUCB")],
                             margin=0.1, where="Sec. 5.2",
                             quote="while having comparable or even better regret than Approx-DisKernelUCB", **kw),
        claims.all_below("async", f"OneKernelUCB, which shares every raw point, has the lowest regret ({which})",
                         records, ["OneKernelUCB"], ["Async-KernelUCB", "Approx-DisKernelUCB", "NKernelUCB", *_LINEAR],
                         where="spec §5.6", **{**kw, "origin": "spec" if origin == "paper" else origin}),
        claims.all_below("async", f"NKernelUCB, which never communicates, has higher regret than the communicating "
                         f"kernel methods ({which})", records, _KERNEL, ["NKernelUCB"], where="spec §5.6",
                         **{**kw, "origin": "spec" if origin == "paper" else origin}),
        claims.all_below("async", f"The Nystrom methods communicate less than sharing raw points, OneKernelUCB (a "
                         f"reading of a cut sentence whose comparison is lost) ({which}, {_AT})", records,
                         ["Async-KernelUCB", "Approx-DisKernelUCB"], ["OneKernelUCB"], claims.communication,
                         where="Sec. 5.2", quote="relatively lower communication cost for joint kernel estimation",
                         **{**kw, "origin": "spec" if origin == "paper" else origin}),
    )


register_page(Page(
    name="async",
    title="Asynchronous kernel bandits (Li et al., ICLR 2023): reproduction",
    records=ASYNC_RECORDS,
    figures=(Figure("async-figure2.png", "Figure 2: cumulative regret above, communication below, one column per "
                    "environment", ASYNC_RECORDS),),
    claims=(*_claims(PAPER_RECORDS, "paper", "the paper's data sets"),
            *_claims(STANDIN_RECORDS, "library", "the generated stand-ins")),
))

__all__ = ["ALGORITHMS", "algorithms", "thresholds"]
