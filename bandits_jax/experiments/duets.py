"""The experiments of DUETS (Pavlovic, Salgia and Zhao 2024, Sec. 5, Figure 1).

Four functions on fixed candidate sets of 2000 points (problems.candidates): h1, h2 (unit sphere of
R^10), Branin ([0, 1]^2) and Hartmann-4D ([0, 1]^4); noise N(0, 0.2^2); SE kernel with lengthscale
0.2 for Branin and 1 otherwise; lam = 0.2 in every algorithm (the authors' code). Paper size: N = 10
agents, T = 50 steps, 5 runs; `large`: N = 100, T = 2000, 100 runs (beyond the paper).

Algorithms, all on the public candidate set:
    DUETS                T_1 = 2, p0 = 10 (algorithms.duets.duets)
    DUETS-authors        DUETS as the authors' early code runs it (algorithms.duets.duets_authors, spec 3.8)
    DisKernelUCB         D = 10 (algorithms.distributed.dis_kernel.dis_kernel_ucb_duets)
    Approx-DisKernelUCB  D = 20, q-bar = 4, first sync forced at step 10 (approx_dis_kernel_ucb_duets)
    N-KernelUCB          DisKernelUCB with threshold = inf (GP-UCB per agent, uniform first point)
    Random               uniform over the candidates (no learning; the floor every method must beat)
Each method with a beta has it searched over `beta_grid` ({0.2, 0.5, 1, 2, 5}, the paper's), all
points and seeds in one compiled call per algorithm; the summary names the point of lowest mean final
regret. For the kernel UCB baselines beta multiplies their sigma (alpha in those modules).

Storage: the kernel baselines keep their models over the candidates (algorithms.distributed.candidate_kernel,
slots capped by dis_slots), Approx-DisKernelUCB the pooled history at paper size and the candidate
storage at `large` (approx_storage, approx_dict_capacity), DUETS only the epoch's per-candidate
counts and reward sums.

Walk-through: docs/experiments/duets.md.
"""
from __future__ import annotations

from ..reporting import claims
from ..core import ConfigError
from ..curves import Curve, Spec
from ..problems.candidates import FUNCTIONS
from .registry import (COUNT, INT32_MAX, NOISE_STD, NONNEGATIVE, POSITIVE, Bound, Experiment, Figure, Page,
                       parse_list, register, register_page)

DEFAULTS = {
    "num_agents": 10, "noise_std": 0.2, "num_candidates": 2000, "candidate_seed": 0, "lam": 0.2,
    "first_epoch": 2, "p0": 10.0, "p_log": 4.0, "dis_D": 10.0, "approx_D": 20.0, "q_bar": 4.0, "forced_sync": 10,
    "approx_dict_capacity": 1024, "approx_storage": "rows", "dis_slots": 64, "beta": 1.0, "grid": True,
    "beta_grid": "0.2,0.5,1,2,5",
}
# what every numeric key allows (registry.Bound); forced_sync: the 0-based step of Approx-DisKernelUCB's forced
# first synchronisation (0: the very first step; -1: none); sizes and steps are int32
BOUNDS = {"num_agents": COUNT, "noise_std": NOISE_STD, "num_candidates": COUNT,
          "candidate_seed": NONNEGATIVE, "lam": POSITIVE, "first_epoch": COUNT, "p0": POSITIVE,
          "p_log": NONNEGATIVE, "dis_D": NONNEGATIVE, "approx_D": NONNEGATIVE, "q_bar": NONNEGATIVE,
          "forced_sync": Bound(-1, INT32_MAX), "approx_dict_capacity": COUNT, "dis_slots": COUNT,
          "beta": NONNEGATIVE}
PAPER = {"horizon": 50, "seeds": 5, "first_segment": 64}
LARGE = {"horizon": 2000, "seeds": 100, "num_agents": 100, "first_segment": 128, "approx_storage": "candidates"}
SMOKE = {"horizon": 14, "seeds": 2, "num_agents": 3, "num_candidates": 100, "first_segment": 16,
         "beta_grid": "0.5,2"}

NOTES = (
    "Regret: cumulative pseudo-regret summed over agents against the best candidate. Communication: "
    "scalars per receiver, the library's one unit (docs/design.md: every upload once, a broadcast once per "
    "agent; a point counts d); the paper's definition (Eq. 2: the uplink averaged over agents plus the "
    "broadcast once) is each algorithm's diagnostic comm_paper, the authors'-code count comm_code. "
    "lam = 0.2 everywhere; "
    "beta from beta_grid, the point of lowest mean final regret chosen per algorithm (the paper does not "
    "say how it chose). Candidates: 2000 points fixed per function (seed candidate_seed), h1/h2 on the unit "
    "sphere as the authors' code draws them. Claims (no numbers given): DUETS has the lowest regret on all "
    "four functions and less communication than DisKernelUCB and Approx-DisKernelUCB."
)


def _betas(config) -> list:
    values = parse_list(config, "beta_grid", float, allow_empty=True)
    if not values or min(values) < 0:
        raise ConfigError(f"beta_grid must be numbers >= 0, got {config['beta_grid']!r}")
    return values


ON_CANDIDATES = (("on_candidates", {}),)


def algorithms(config, function: str) -> list:
    """(name, algorithm Spec) of the five methods of the module docstring for one function."""
    ls, lam, T = FUNCTIONS[function][3], config["lam"], config["horizon"]
    kern = dict(kernel="rbf", lam=lam, alpha=config["beta"], lengthscale=ls)
    return [
        ("DUETS", Spec("duets", dict(horizon=T, first_epoch=config["first_epoch"], beta=config["beta"],
                                     p0=config["p0"], lam=lam, lengthscale=ls))),
        ("DUETS-authors", Spec("duets_authors", dict(horizon=T, first_epoch=config["first_epoch"],
                                                     beta=config["beta"], p_log=config["p_log"], lam=lam,
                                                     lengthscale=ls))),
        ("DisKernelUCB", Spec("dis_kernel_ucb_duets", dict(kern, threshold=config["dis_D"], storage="candidates",
                                                     buffer_capacity=min(T, config["dis_slots"])), ON_CANDIDATES)),
        ("Approx-DisKernelUCB", Spec("approx_dis_kernel_ucb_duets", dict(
            kern, q=config["q_bar"], threshold=config["approx_D"], forced_sync=config["forced_sync"],
            dict_capacity=config["approx_dict_capacity"], storage=config["approx_storage"], buffer_capacity=T),
            ON_CANDIDATES)),
        # N-KernelUCB: DisKernelUCB that never synchronises (spec test 7)
        ("N-KernelUCB", Spec("dis_kernel_ucb_duets", dict(kern, threshold=float("inf"), storage="candidates",
                                                    buffer_capacity=T), ON_CANDIDATES)),
        ("Random", Spec("uniform_random")),
    ]


def beta_grid(config, algorithm: Spec):
    """((label, hparams), ...) over beta_grid for an algorithm with a beta (alpha for the UCB
    baselines); None without grid or for Random."""
    name = "beta" if "beta" in algorithm.options else "alpha" if "alpha" in algorithm.options else None
    if not config["grid"] or name is None:
        return None
    return tuple((f"beta={b:g}", {name: b}) for b in _betas(config))


def _build(function: str):
    def build(config):
        problem = Spec(f"duets-{function}", dict(num_agents=config["num_agents"], horizon=config["horizon"],
                                                 noise_std=config["noise_std"],
                                                 num_candidates=config["num_candidates"],
                                                 seed=config["candidate_seed"]))
        return [Curve(name, problem, alg, beta_grid(config, alg), tags={"method": name})
                for name, alg in algorithms(config, function)]

    return build


_DESCRIPTIONS = {
    "h1": "h1(x) = cos(3 <x, theta*>) on 2000 points of the unit sphere of R^10",
    "h2": "h2(x) = (<x, theta*> - 1)^3 + 4 on 2000 points of the unit sphere of R^10",
    "branin": "Branin rescaled to [0, 1]^2 (maximised), 2000 uniform points",
    "hartmann4": "Hartmann-4D on [0, 1]^4 (maximised), 2000 uniform points",
}

for _function, _description in _DESCRIPTIONS.items():
    register(Experiment(
        name=f"duets/{_function}",
        description=f"{_description}: DUETS against DisKernelUCB, Approx-DisKernelUCB, N-KernelUCB and random "
                    "(Pavlovic et al. 2024, Fig. 1)",
        defaults=dict(DEFAULTS),
        sizes={"smoke": dict(SMOKE), "paper": dict(PAPER), "large": dict(LARGE)},
        build=_build(_function),
        agents="sum",
        se_ddof=0,
        band="std",
        notes=NOTES,
        bounds=BOUNDS,
    ))


PAPER_RECORDS = tuple(f"duets-{f}-paper" for f in _DESCRIPTIONS)
LARGE_RECORDS = tuple(f"duets-{f}-large" for f in _DESCRIPTIONS)


def _paper_claims(records: tuple) -> tuple:
    """The paper's two claims of Figure 1 (Sec. 5), each method at its best beta as the paper tunes it."""
    return (
        claims.all_below("duets", "DUETS has significantly lower regret than the other algorithms on every function, "
                         "each at its best beta", records, ["DUETS"],
                         ["DisKernelUCB", "Approx-DisKernelUCB", "N-KernelUCB"], where="Sec. 5, Fig. 1",
                         quote="DUETS achieves a significantly lower regret as compared to all other algorithms "
                               "consistently across benchmark functions"),
        claims.all_below("duets", "DUETS communicates less than DisKernelUCB and Approx-DisKernelUCB on every function",
                         records, ["DUETS"], ["DisKernelUCB", "Approx-DisKernelUCB"], value=claims.communication,
                         where="Sec. 5, Fig. 1", quote="DUETS also incurs a smaller communication overhead as compared "
                                                       "to other algorithms"),
    )


def _library_checks(records: tuple, size: str) -> tuple:
    """The library's own checks at one size: DUETS above uniform random play, and the paper's rule against
    the authors' early code."""
    return (
        claims.all_below("duets", f"DUETS below uniformly random play ({size})", records, ["DUETS"], ["Random"],
                         origin="library"),
        claims.all_below("duets", f"The paper's rule beats the authors' early code, DUETS below DUETS-authors ({size})",
                         records, ["DUETS"], ["DUETS-authors"], origin="library"),
    )


register_page(Page(
    name="duets",
    title="DUETS (Pavlovic, Salgia and Zhao, 2024): reproduction",
    records=PAPER_RECORDS + LARGE_RECORDS,
    figures=(Figure("duets-figure1.png", "Figure 1: cumulative regret above, communication below, one column per "
                    "function, each method at its chosen beta", PAPER_RECORDS),),
    claims=(*_paper_claims(PAPER_RECORDS), *_library_checks(PAPER_RECORDS, "the paper's size"),
            *(claim._replace(origin="library", text=claim.text + " (the large size)")
              for claim in _paper_claims(LARGE_RECORDS)),
            *_library_checks(LARGE_RECORDS, "the large size"))))
