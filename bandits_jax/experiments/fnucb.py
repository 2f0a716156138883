"""`fnucb/*`: the figures of Federated Neural Bandits (Dai et al., ICLR 2023).

One experiment per figure. Curves with different numbers of agents N run on different problems,
so these experiments build a list of (problem, algorithm) pairs; the single-agent baselines run
on the N = 1 problem. Regret is the mean over agents, mean +- standard error (ddof 0) over the
runs, as the paper plots it. The paper has 3 runs; the paper size here has 10 for the synthetic
figures (1a-1d, 3, 6) and 3 for the real-data figures (2a-2d) and fig4.

Every curve of a seed sees the same problem draws (common random numbers) but draws its initial
network from its own key stream (`curve_stream`, fixed by its method family and N); curves that
differ in a knob only share a stream, so that comparison is paired.

Every experiment has a `mode` key:
    mode="authors" (default): the option set of the authors' released code [C], from which the
        published curves came (one shared network, raw gradient features, weight decay lam / n,
        the diagonal log-det trigger); the baselines are the code's.
    mode="paper": the paper's text [P]: App. B network, features g / sqrt(m), the loss of eq. (1),
        exact log det, separate networks trained on all local data, footnote 4's min-max rescaling
        under a diagonal covariance; the standard baselines.

Lists of values (N, D, nu, problems) are comma-separated strings, e.g. `--set n_values=1,2`.
`data_dir=""` lets the data loaders use their own look-up order (environment, cache, download).

Walk-through: docs/experiments/fnucb.md.
"""
from __future__ import annotations

import math

from ..reporting import claims
from ..core import ConfigError
from ..curves import Curve, Spec
from .registry import (COUNT, COUNT_OR_ZERO, NOISE_STD, NONNEGATIVE, POSITIVE, Bound, Experiment, Figure, Page,
                       parse_list, register, register_page)

MODES = ("authors", "paper")
SYNTHETIC = ("cosine", "square")
REAL = ("shuttle", "magic")

# FN-UCB of each mode: the registered name and its options. `_fn(..., separate=True)` runs the paper's
# protocol (separate networks on all local data) with the mode's network, features, loss and trigger:
# in mode=authors that is fn_ucb with the code's choices (fig1c's ablations).
FN_OPTIONS = {
    "authors": ("fn_ucb_authors", {}),
    "paper": ("fn_ucb", dict(parameterization="paper", feature_scale="sqrt_m", loss="paper", trigger="exact")),
}
FN_SEPARATE = {
    "authors": ("fn_ucb", dict(parameterization="authors", feature_scale="raw", loss="authors", trigger="diag")),
    "paper": FN_OPTIONS["paper"],
}
NEURAL_OPTIONS = {
    "authors": dict(parameterization="authors", feature_scale="raw", loss="authors"),
    "paper": dict(parameterization="paper", feature_scale="sqrt_m", loss="paper"),
}

# settings shared by every experiment (spec Sec. 6.1): network, training, alpha schedule
COMMON = {
    "mode": "authors",
    "width": 20,
    "covariance": "full",
    "train_steps": 30,
    "train_until": 2000,
    "lr": 0.01,
    "alpha_warmup": 3,
    "alpha_ramp": 700,
    "nu_code": 0.01,  # the baselines' code nu: bonus multiplier sqrt(lam * nu_code)
}
SYNTH_DEFAULTS = {**COMMON, "num_arms": 4, "dim": 10, "noise_std": 0.01, "lam": 0.1, "nu_tkn": 0.1, "nu_tk": 0.1}
REAL_DEFAULTS = {**COMMON, "data_dir": "", "shuffle": "", "lam": 10.0, "nu_tkn": 0.1, "nu_tk": 0.01}

PAPER = {"horizon": 5000, "seeds": 3, "first_segment": 256}
PAPER_SYNTHETIC = {"seeds": 10}  # module docstring: the spread over initial networks is large
SMOKE = {"horizon": 30, "seeds": 2, "width": 8, "train_steps": 2}

NOTE_AUTHORS = ("mode=authors (default): the official code's option set (network, raw features, loss, "
                "diagonal trigger, shared network and training data only in rounds), because the published "
                "curves came from that code (spec Sec. 9); mode=paper runs the paper's algorithm as written.")
NOTE_DIAG_MODES = ("Which mode reproduces what: mode=authors is the authors' released code, which itself gives "
                   "fig2c regret that does not fall with N (one run each at T = 5000: 294, 750, 255 for N = 1, 2, "
                   "5), so the paper's stored curves came from another revision of it; mode=paper is the paper's "
                   "text, including footnote 4's min-max rescaling of FN-UCB's UCB_a mean to [0, 1] across the K "
                   "arms under the diagonal covariance (minmax_mean, absent from the released code).")

# Key streams (module docstring): stream = FAMILY_IDS[family] * STREAM_AGENTS + N. The ids are
# fixed numbers, not hashes of names, so a curve keeps its stream across processes and versions.
FAMILY_IDS = {"FN-UCB": 1, "NeuralUCB": 2, "NeuralTS": 3, "LinUCB": 4, "LinTS": 5, "KernelUCB": 6, "KernelTS": 7}
STREAM_AGENTS = 100_000

# what every numeric key allows (registry.Bound), checked before anything is built
# (sizes and steps are int32; num_agents ends below the key streams' agent field, `curve_stream`; noise_std where
# every world's does, problems.synthetic; nu_code and lin_nus are checked where they become a bonus multiplier)
BOUNDS = {"width": COUNT, "wide_width": COUNT, "train_steps": COUNT_OR_ZERO, "train_until": COUNT_OR_ZERO, "lr": NONNEGATIVE,
          "alpha_warmup": COUNT_OR_ZERO, "alpha_ramp": COUNT_OR_ZERO, "nu_code": NONNEGATIVE, "num_arms": COUNT,
          "dim": COUNT, "noise_std": NOISE_STD, "lam": POSITIVE, "nu_tkn": NONNEGATIVE,
          "nu_tk": NONNEGATIVE, "num_agents": Bound(1, STREAM_AGENTS - 1), "lam_synthetic": POSITIVE,
          "nu_tk_synthetic": NONNEGATIVE, "lam_real": POSITIVE, "nu_tk_real": NONNEGATIVE, "lin_lam": POSITIVE,
          "lin_max_history": COUNT, "lengthscale": POSITIVE, "kernel_max_history": COUNT, "kernel_lam": POSITIVE,
          "kernel_beta": NONNEGATIVE}


# ------------------------------------------------------------------------------------ parsing
def _mode(config):
    if config["mode"] not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {config['mode']!r}")
    return config["mode"]


def _fmt(x: float) -> str:
    return f"{x:g}"


def curve_stream(family: str, n: int) -> int:
    """The key stream of a curve of method `family` (a FAMILY_IDS name) with n agents:
    FAMILY_IDS[family] * STREAM_AGENTS + n, e.g. 100005 for FN-UCB with N = 5."""
    if not 1 <= n < STREAM_AGENTS:
        raise ConfigError(f"the number of agents must be between 1 and {STREAM_AGENTS - 1}, got {n}")
    return FAMILY_IDS[family] * STREAM_AGENTS + n


# ------------------------------------------------------------------------------------ problems
def problem_spec(config, name, n) -> Spec:
    """The spec of problem `name` with n agents in the experiment's mode (the paper's network needs an
    even d: `pad_to_even` in mode=paper)."""
    c = config
    if name in SYNTHETIC:
        spec = Spec(name, dict(num_agents=n, num_arms=c.get("num_arms", 4), dim=c.get("dim", 10),
                               horizon=c["horizon"], noise_std=c.get("noise_std", 0.01)))
    elif name in REAL:
        shuffle = c["shuffle"] or ("authors" if _mode(c) == "authors" else "per_seed")
        spec = Spec(name, dict(num_agents=n, horizon=c["horizon"], data_dir=c["data_dir"] or None, shuffle=shuffle))
    else:
        raise ConfigError(f"unknown problem {name!r}; choose from {', '.join(SYNTHETIC + REAL)}")
    return spec._replace(wrappers=(("pad_to_even", {}),)) if _mode(c) == "paper" else spec


# ------------------------------------------------------------------------------------ curves
def _fn(config, name, problem, n, *, lam=None, nu_tk=None, tags=None, separate=False, **options) -> Curve:
    """The curve of FN-UCB named `name` on `problem` with n agents, in the experiment's mode, on the
    stream of (FN-UCB, n); separate=True: with separate networks trained on all local data in either mode."""
    mode = _mode(config)
    algorithm, kw = (FN_SEPARATE if separate else FN_OPTIONS)[mode]
    kw = dict(kw)
    if mode == "paper" and config["covariance"] == "diag":
        kw["minmax_mean"] = True  # footnote 4: the mean term rescaled across the arms under diag
    kw.update(options)
    kw.setdefault("D", 0.0)
    opts = dict(lam=config["lam"] if lam is None else lam, nu_tkn=config["nu_tkn"],
                nu_tk=config["nu_tk"] if nu_tk is None else nu_tk, lr=config["lr"], width=config["width"],
                covariance=config["covariance"], train_steps=config["train_steps"],
                train_until=config["train_until"], alpha_warmup=config["alpha_warmup"],
                alpha_ramp=config["alpha_ramp"], **kw)
    return Curve(name, problem_spec(config, problem, n), Spec(algorithm, opts), stream=curve_stream("FN-UCB", n),
                 tags={"method": "FN-UCB", "N": n, **(tags or {})})


def neural_curves(config, problem, prefix="", lam=None, tags=None, lam_key="lam") -> list:
    """Neural UCB and Neural TS for one agent, each on its own stream (lam_key: the key lam came from)."""
    mode = _mode(config)
    lam = config["lam"] if lam is None else lam
    if config["nu_code"] < 0:
        raise ConfigError(f"nu_code must be >= 0, got {config['nu_code']}")
    scale = bonus_scale(lam, config["nu_code"], lam_key, "nu_code")
    kw = dict(lam=lam, lr=config["lr"], width=config["width"], train_steps=config["train_steps"],
              train_until=config["train_until"], covariance=config["covariance"], **NEURAL_OPTIONS[mode])
    p = problem_spec(config, problem, 1)
    return [Curve(prefix + "NeuralUCB", p, Spec("neural_ucb", dict(kw, beta=scale)),
                  stream=curve_stream("NeuralUCB", 1), tags={"method": "NeuralUCB", "N": 1, **(tags or {})}),
            Curve(prefix + "NeuralTS", p, Spec("neural_ts", dict(kw, nu=scale)),
                  stream=curve_stream("NeuralTS", 1), tags={"method": "NeuralTS", "N": 1, **(tags or {})})]


def bonus_scale(lam: float, nu: float, lam_key: str, nu_key: str) -> float:
    """The baselines' code bonus multiplier sqrt(lam * nu), refused (a ConfigError naming both keys) where
    lam * nu overflows."""
    if not math.isfinite(lam * nu):
        raise ConfigError(f"{nu_key}={nu:g} with {lam_key}={lam:g} makes the bonus multiplier sqrt({lam_key} * "
                          f"{nu_key}) overflow; give a smaller {nu_key} or {lam_key}")
    return math.sqrt(lam * nu)


def fn_family(config, problem, n_values, prefix="", tags=None) -> list:
    return [_fn(config, f"{prefix}FN-UCB (N={n})", problem, n, tags=tags) for n in n_values]


# ------------------------------------------------------------------------------------ builds
def _build_vs_n(problem):
    def build(config):
        curves = fn_family(config, problem, parse_list(config, "n_values", int, 1))
        if config["baselines"]:
            curves += neural_curves(config, problem)
        return curves

    return build


def build_fig1c(config):
    n = config["num_agents"]
    if n < 1:
        raise ConfigError(f"num_agents must be >= 1, got {n}")
    authors = _mode(config) == "authors"
    curves = [
        _fn(config, "FN-UCB", "cosine", n),
        _fn(config, "FN-UCB (UCB_a only)", "cosine", n, alpha_mode="zero", tags={"ablation": "UCB_a only"}),
        _fn(config, "FN-UCB (UCB_b only)", "cosine", n, alpha_mode="one", tags={"ablation": "UCB_b only"}),
        # with the code's shared network (Q1) every agent's "own" network is the aggregate, so the
        # ablation is run with separate networks (fn_ucb with the mode's network) in both modes
        _fn(config, "FN-UCB (no NN aggregation)", "cosine", n, aggregate_params=False, separate=True,
            tags={"ablation": "no NN aggregation"}),
    ]
    if authors and config["separate_reference"]:
        curves.append(_fn(config, "FN-UCB (separate networks)", "cosine", n, separate=True,
                          tags={"ablation": "separate networks"}))
    if config["n1_reference"] and n != 1:
        curves.append(_fn(config, "FN-UCB (N=1)", "cosine", 1))
    return curves


def _build_vs_D(problem):
    def build(config):
        n = config["num_agents"]
        if n < 1:
            raise ConfigError(f"num_agents must be >= 1, got {n}")
        curves = []
        for D in parse_list(config, "D_values", float, 0.0):
            name = "FN-UCB (every round)" if D == 0 else f"FN-UCB (D={_fmt(D)})"
            curves.append(_fn(config, name, problem, n, D=D, tags={"D": D}))
        return curves

    return build


def build_fig3(config):
    curves = []
    for prob in parse_list(config, "problems", str):
        for n in parse_list(config, "n_values", int, 1):
            curves.append(_fn(config, f"{prob}: FN-UCB (N={n})", prob, n, variant="full",
                              tags={"problem": prob, "variant": "full"}))
            curves.append(_fn(config, f"{prob}: FN-UCB Less Comm. (N={n})", prob, n, variant="less",
                              tags={"problem": prob, "variant": "less"}))
    return curves


def build_fig6(config):
    curves = []
    for prob in parse_list(config, "problems", str):
        curves += fn_family(config, prob, parse_list(config, "n_values", int, 1), prefix=f"{prob}: ",
                             tags={"problem": prob})
    return curves


def build_fig5(config):
    """FN-UCB on shuttle at one width with the full covariance and with the diagonal one (same stream)."""
    n = config["num_agents"]
    return [_fn(dict(config, covariance=cov), f"FN-UCB ({label})", "shuttle", n, tags={"covariance": cov})
            for cov, label in (("full", "full covariance"), ("diag", "diagonal"))]


def build_timing(config):
    """FN-UCB on shuttle at `width` with the full covariance and at `wide_width` with the diagonal and the
    full one: the settings whose computing time App. E compares (Fig. 2a: m = 20 full; Fig. 2c: m = 50
    diagonal; m = 50 full)."""
    n, narrow, wide = config["num_agents"], config["width"], config["wide_width"]
    return [_fn(dict(config, covariance=cov, width=m), f"FN-UCB {label} (m={m})", "shuttle", n,
                tags={"covariance": cov, "width": m})
            for cov, label, m in (("full", "full", narrow), ("diag", "diagonal", wide), ("full", "full", wide))]


def _linear_kernel(config, problem, prefix) -> list:
    authors = _mode(config) == "authors"
    lam = config["lin_lam"]  # > 0: BOUNDS
    lin_cap = config["lin_max_history"] or None
    ker_cap = config["kernel_max_history"] or None
    p = problem_spec(config, problem, 1)
    out = []
    for nu in parse_list(config, "lin_nus", float, 0.0):
        s = bonus_scale(lam, nu, "lin_lam", "lin_nus")  # the code's variance scale lam * nu
        kern = dict(kernel=config["kernel"], lam=lam, lengthscale=config["lengthscale"], max_history=ker_cap)
        specs = {
            "LinUCB": Spec("linucb", dict(lam=lam, beta=s, bonus="quadratic" if authors else "norm",
                                          max_history=lin_cap)),
            "LinTS": Spec("lints", dict(lam=lam, nu=s, max_history=lin_cap)),
            "KernelUCB": Spec("kernel_ucb", dict(kern, beta=s)),
            "KernelTS": Spec("kernel_ts", dict(kern, nu=s, var_floor=1e-6 if authors else 0.0)),
        }
        # one stream per method: its nu values are a knob of one family (paired)
        out += [Curve(f"{prefix}{family} (nu={_fmt(nu)})", p, spec, stream=curve_stream(family, 1),
                      tags={"method": family, "problem": problem, "nu": nu}) for family, spec in specs.items()]
    return out


def build_fig4(config):
    curves = []
    for prob in parse_list(config, "problems", str):
        real = prob in REAL
        c = dict(config, lam=config["lam_real"] if real else config["lam_synthetic"],
                 nu_tk=config["nu_tk_real"] if real else config["nu_tk_synthetic"])
        prefix = f"{prob}: "
        curves += _linear_kernel(config, prob, prefix)
        curves += neural_curves(c, prob, prefix, tags={"problem": prob},
                                lam_key="lam_real" if real else "lam_synthetic")
        curves += fn_family(c, prob, parse_list(config, "fn_n_values", int, 1, allow_empty=True), prefix,
                             tags={"problem": prob})
    return curves


# ------------------------------------------------------------------------------------ registry
def _notes(extra):
    return f"{NOTE_AUTHORS} {extra}".strip()


def _register(name, description, defaults, build, notes, smoke, paper=None, x=""):
    register(Experiment(
        name=name, description=description, defaults=defaults,
        sizes={"smoke": {**SMOKE, **smoke}, "paper": {**PAPER, **(paper or {})}},
        build=build, agents="mean", se_ddof=0, notes=_notes(notes), x=x, bounds=BOUNDS,
    ))


for _fig, _prob in (("fig1a", "cosine"), ("fig1b", "square")):
    _register(
        f"fnucb/{_fig}",
        f"{_prob} reward, d=10, K=4: FN-UCB with N in {{1, 2, 5, 10}} against Neural UCB and Neural TS",
        {**SYNTH_DEFAULTS, "n_values": "1,2,5,10", "baselines": True},
        _build_vs_n(_prob),
        "lam = nu_TKN = nu_TK = 0.1, baselines' code nu = 0.01 (multiplier sqrt(lam nu)); width 20, full "
        "covariance, communication every iteration (D = 0). Claims: FN-UCB(N=1) ~ Neural UCB ~ Neural TS; "
        "larger N helps, N = 2 already by much.",
        smoke={"n_values": "1,2"}, paper=PAPER_SYNTHETIC, x="N",
    )

_register(
    "fnucb/fig1c",
    "cosine reward, N=2: FN-UCB against its ablations (UCB_a only, UCB_b only, no NN aggregation)",
    {**SYNTH_DEFAULTS, "num_agents": 2, "separate_reference": True, "n1_reference": True},
    build_fig1c,
    "UCB_a only = alpha 0 throughout; UCB_b only = alpha 1 from the first iteration (the network trains in "
    "every round); no NN aggregation = UCB_b with the agent's own network. Under the code's shared network "
    "(mode=authors) the agents' own networks are the aggregate, so the no-aggregation ablation runs with "
    "separate networks (the paper's protocol, fn_ucb, with the code's network); 'FN-UCB (separate networks)' "
    "is its reference with aggregation (mode=authors only). 'FN-UCB (N=1)' is the reference curve whose "
    "panel the paper leaves unclear.",
    smoke={"n1_reference": False, "separate_reference": False}, paper=PAPER_SYNTHETIC,
)

_register(
    "fnucb/fig1d",
    "cosine reward, N=5: FN-UCB with communication thresholds D in {5, 4, 2.5} and every round",
    {**SYNTH_DEFAULTS, "num_agents": 5, "D_values": "5,4,2.5,0"},
    _build_vs_D("cosine"),
    "D = 0 communicates every iteration. Paper: 348.0 (D=5), 380.0 (D=4), 456.7 (D=2.5) rounds out of 5000 "
    "(see the summary's communication rounds); the D values are in the code's trigger units (diagonal "
    "log det of raw-gradient features) and mean something else under mode=paper.",
    smoke={"num_agents": 2, "D_values": "5,0"}, paper=PAPER_SYNTHETIC, x="D",
)

for _fig, _prob in (("fig2a", "shuttle"), ("fig2b", "magic")):
    _register(
        f"fnucb/{_fig}",
        f"{_prob} classification bandit: FN-UCB with N in {{1, 2, 5}} against Neural UCB and Neural TS (width 20)",
        {**REAL_DEFAULTS, "n_values": "1,2,5", "baselines": True},
        _build_vs_n(_prob),
        "lam = 10, nu_TKN = 0.1, nu_TK = 0.01, baselines' code nu = 0.01; width 20, full covariance. Data: the "
        "authors' preprocessing; shuffle='' means each agent's fixed order (mode=authors, as the code) or a "
        "new order per seed (mode=paper).",
        smoke={"n_values": "1,2"}, x="N",
    )

_register(
    "fnucb/fig2c",
    "shuttle classification bandit, diagonal approximation, width 50: FN-UCB with N in {1, 2, 5} against "
    "Neural UCB and Neural TS (also diagonal)",
    {**REAL_DEFAULTS, "n_values": "1,2,5", "baselines": True, "covariance": "diag", "width": 50},
    _build_vs_n("shuttle"),
    "lam = 10, nu_TKN = 0.1, nu_TK = 0.01; every covariance diagonal, width 50. Paper: regrets generally "
    f"below those of Fig. 2a. {NOTE_DIAG_MODES}",
    smoke={"n_values": "1,2"}, x="N",
)

_register(
    "fnucb/fig2d",
    "shuttle, diagonal, width 50, N=5: FN-UCB with D in {0.05, 0.03, 0.01} and every round",
    {**REAL_DEFAULTS, "num_agents": 5, "D_values": "0.05,0.03,0.01,0", "covariance": "diag", "width": 50},
    _build_vs_D("shuttle"),
    "Paper: 3850.7, 4442.7, 4906.3 communication rounds for D = 0.05, 0.03, 0.01; more communication, lower "
    f"regret. D in the code's trigger units. {NOTE_DIAG_MODES}",
    smoke={"num_agents": 2, "D_values": "0.05,0"}, x="D",
)

_register(
    "fnucb/fig5",
    "shuttle, width 20, N=2: FN-UCB with the full covariance against the diagonal approximation",
    {**{k: v for k, v in REAL_DEFAULTS.items() if k != "covariance"}, "num_agents": 2},  # both covariances
    build_fig5,
    "lam = 10, nu_TKN = 0.1, nu_TK = 0.01 as Fig. 2a; the paper does not state N for this figure (N = 2 is "
    f"our choice). Paper: the diagonal approximation does worse at the same width. {NOTE_DIAG_MODES}",
    smoke={},
)

_register(
    "fnucb/timing",
    "shuttle, N=2: FN-UCB's computing time at width 20 (full covariance) and width 50 (diagonal and full)",
    {**{k: v for k, v in REAL_DEFAULTS.items() if k != "covariance"}, "num_agents": 2, "wide_width": 50},
    build_timing,
    "The settings whose computing time App. E compares (seconds on the paper's machine: 361.8 for Fig. 2a, "
    "244.9 for Fig. 2c, 3134.3 for width 50 with the full covariance). Run it with --no-curve-cache: a curve "
    "taken from the cache has no time of its own.",
    smoke={"wide_width": 12},
)

_register(
    "fnucb/fig3",
    "cosine and square: FN-UCB (full) against FN-UCB (Less Comm.), N in {2, 5}",
    {**SYNTH_DEFAULTS, "problems": "cosine,square", "n_values": "2,5"},
    build_fig3,
    "The paper does not state N for this figure; N = 2 and 5 are our choice. Full FN-UCB broadcasts every "
    "agent's inverse and averages the N norms in UCB_b; Less Comm. broadcasts their mean. Paper: the curves "
    "are very similar.",
    smoke={"problems": "cosine", "n_values": "2"}, paper=PAPER_SYNTHETIC, x="N",
)

_register(
    "fnucb/fig4",
    "cosine, square, shuttle, magic: linear and kernel UCB/TS (nu in {1, 0.1, 0.01}) against Neural UCB/TS "
    "and FN-UCB",
    {**COMMON, "num_arms": 4, "dim": 10, "noise_std": 0.01, "data_dir": "", "shuffle": "",
     "problems": "cosine,square,shuttle,magic", "fn_n_values": "1,2,5",
     "lam_synthetic": 0.1, "nu_tk_synthetic": 0.1, "lam_real": 10.0, "nu_tk_real": 0.01, "nu_tkn": 0.1,
     "lin_lam": 1.0, "lin_nus": "1,0.1,0.01", "lin_max_history": 2000, "kernel": "laplacian",
     "lengthscale": 1.0, "kernel_max_history": 1000},
    build_fig4,
    "Linear and kernel methods: lam = 1, nu in {1, 0.1, 0.01} (the paper reports the best; all are run), "
    "multiplier sqrt(lam nu), Laplacian kernel exp(-||x - x'||), history caps 2000 (linear) and 1000 "
    "(kernel) as in the code; mode=authors adds the code's unrooted LinUCB bonus and kernel TS variance "
    "floor 1e-6. Neural methods as in Figs. 1a/1b (synthetic) and 2a/2b (real): with the same seeds the "
    "FN-UCB and Neural UCB/TS curves equal those runs (set fn_n_values= to skip FN-UCB here; the curve "
    "cache takes them from finished fig1a/1b/2a/2b runs instead of computing them again). 3 seeds at paper "
    "size, as fig2a/2b (fig1a/1b have 10; --seeds 10 takes their synthetic curves from the cache and computes "
    "7 more real-data seeds).",
    smoke={"problems": "cosine,magic", "fn_n_values": "2", "lin_nus": "0.1"},
)

_register(
    "fnucb/fig6",
    "cosine and square: FN-UCB final cumulative regret against N in {1, 2, 5, 10}",
    {**SYNTH_DEFAULTS, "problems": "cosine,square", "n_values": "1,2,5,10"},
    build_fig6,
    "The configuration of Figs. 1a/1b: with the same seeds these runs equal those FN-UCB curves (the curve "
    "cache takes them from finished fig1a/1b runs); the summary's final regret per N is the figure. Paper: the final "
    "regret decreases with N.",
    smoke={"problems": "cosine", "n_values": "1,2"}, paper=PAPER_SYNTHETIC, x="N",
)


FIGS = {f: f"fnucb-{f}-paper" for f in ("fig1a", "fig1b", "fig1c", "fig1d", "fig2a", "fig2b", "fig2c", "fig2d",
                                       "fig3", "fig4", "fig5", "fig6", "timing")}
_NEURAL = ["NeuralUCB", "NeuralTS"]
_LINEAR_KERNEL = [f"{m} (nu={nu})" for nu in ("1", "0.1", "0.01") for m in ("LinUCB", "LinTS", "KernelUCB", "KernelTS")]


def _fn_names(*ns) -> list:
    return [f"FN-UCB (N={n})" for n in ns]


_SYNTHETIC_ORDER = "More agents, lower regret on the synthetic functions"


def _claims() -> tuple:
    """The paper's claims (Dai et al. 2023, Secs. 5.1, 5.2 and App. E), each on the pair the paper compares."""
    synthetic, real = [FIGS["fig1a"], FIGS["fig1b"]], [FIGS["fig2a"], FIGS["fig2b"]]
    c, L = claims, "library"
    return (
        c.level("fnucb", "FN-UCB with N = 1 performs comparably with Neural UCB and Neural TS", synthetic,
                [("FN-UCB (N=1)", m) for m in _NEURAL], margin=0.25, where="Sec. 5.1, Figs. 1a, 1b",
                quote="our FN-UCB with N = 1 agent performs comparably with Neural UCB and Neural TS"),
        c.decreasing("fnucb", _SYNTHETIC_ORDER, synthetic, _fn_names(1, 2, 5, 10), where="Sec. 5.1, Figs. 1a, 1b",
                     quote="the federation of a larger number N of agents consistently improves the performance"),
        c.all_below("fnucb", "N = 2 agents already improve significantly on the non-federated algorithms", synthetic,
                    ["FN-UCB (N=2)"], ["FN-UCB (N=1)", *_NEURAL], where="Sec. 5.1, Figs. 1a, 1b",
                    quote="the federation of N = 2 agents can already provide significant improvements"),
        c.all_below("fnucb", "UCB_a alone gives larger regret in the long run than FN-UCB", [FIGS["fig1c"]],
                    ["FN-UCB"], ["FN-UCB (UCB_a only)"], where="Sec. 5.1, Fig. 1c",
                    quote="relying solely on UCB a leads to significantly larger regrets in the long run"),
        c.pairs_below("fnucb", "UCB_b alone: larger regret than UCB_a alone at first (read at t = 100)",
                      [FIGS["fig1c"]], [("FN-UCB (UCB_a only)", "FN-UCB (UCB_b only)")], c.regret_at(100),
                      origin="spec", where="Sec. 5.1, Fig. 1c",
                      quote="the green curve incurs larger regrets than the red curve initially"),
        c.pairs_below("fnucb", "UCB_b alone: much smaller regret than UCB_a alone in the end", [FIGS["fig1c"]],
                      [("FN-UCB (UCB_b only)", "FN-UCB (UCB_a only)")], where="Sec. 5.1, Fig. 1c",
                      quote="it quickly learns to achieve much smaller regrets"),
        c.pairs_below("fnucb", "The aggregation of the NN parameters improves FN-UCB (separate networks with "
                      "aggregation against the same without)", [FIGS["fig1c"]],
                      [("FN-UCB (separate networks)", "FN-UCB (no NN aggregation)")], where="Sec. 5.1, Fig. 1c",
                      quote="the aggregation of the NN parameters significantly improves the performance of FN-UCB"),
        c.pairs_below("fnucb", "The authors' FN-UCB (one shared network) below the no-aggregation ablation (separate "
                      "networks): the pair as the authors' code plots it", [FIGS["fig1c"]],
                      [("FN-UCB", "FN-UCB (no NN aggregation)")], origin="spec", where="Sec. 5.1, Fig. 1c"),
        c.decreasing("fnucb", "More frequent communication, lower regret (D = 5, 4, 2.5, every round)",
                     [FIGS["fig1d"]], ["FN-UCB (D=5)", "FN-UCB (D=4)", "FN-UCB (D=2.5)", "FN-UCB (every round)"],
                     where="Sec. 5.1, Fig. 1d", quote="more frequent communications (i.e., smaller values of D) lead "
                                                     "to smaller regrets"),
        c.near("fnucb", "Communication rounds 348.0, 380.0, 456.7 for D = 5, 4, 2.5", [FIGS["fig1d"]],
               [("FN-UCB (D=5)", 348.0), ("FN-UCB (D=4)", 380.0), ("FN-UCB (D=2.5)", 456.7)], margin=0.1,
               where="Fig. 1 caption"),
        c.all_below("fnucb", "FN-UCB with N = 2 consistently outperforms Neural UCB and Neural TS on the real data",
                    real, ["FN-UCB (N=2)"], _NEURAL, where="Sec. 5.2, Figs. 2a, 2b",
                    quote="our FN-UCB with N = 2 agents consistently outperforms standard Neural UCB and Neural TS"),
        c.decreasing("fnucb", "More agents, lower regret on the real data", real, _fn_names(1, 2, 5),
                     where="Sec. 5.2, Figs. 2a, 2b", quote="its performance also improves with the federation of "
                                                          "more agents"),
        c.all_below("fnucb", "Diagonal approximation, width 50: FN-UCB with N = 2 still outperforms Neural UCB and "
                    "Neural TS", [FIGS["fig2c"]], ["FN-UCB (N=2)"], _NEURAL, where="Sec. 5.2, Fig. 2c",
                    quote="the corresponding results are consistent with those in Fig. 2a"),
        c.decreasing("fnucb", "Diagonal approximation, width 50: more agents still lower the regret", [FIGS["fig2c"]],
                     _fn_names(1, 2, 5), where="Sec. 5.2, Fig. 2c",
                     quote="the corresponding results are consistent with those in Fig. 2a"),
        c.across("fnucb", "The regrets with the diagonal approximation at width 50 are below those at width 20 "
                 "(read as: every curve, at the horizon the two records share)",
                 [((FIGS["fig2c"], m), (FIGS["fig2a"], m)) for m in (*_fn_names(1, 2, 5), *_NEURAL)],
                 where="Sec. 5.2, App. E", quote="the regrets in Fig. 2c are in general smaller than those in Fig. 2a"),
        c.all_below("fnucb", "The diagonal approximation runs faster than the full covariance at width 20 (244.9 "
                    "against 361.8 seconds in the paper)", [FIGS["timing"]], ["FN-UCB diagonal (m=50)"],
                    ["FN-UCB full (m=20)"], value=c.run_seconds, min_seeds=2, where="App. E",
                    quote="the computational cost of Fig. 2c (244.9 seconds) is smaller than that of Fig. 2a"),
        c.all_below("fnucb", "Width 50 without the diagonal approximation costs significantly more (3134.3 seconds)",
                    [FIGS["timing"]], ["FN-UCB diagonal (m=50)", "FN-UCB full (m=20)"], ["FN-UCB full (m=50)"],
                    value=c.run_seconds, min_seeds=2, where="App. E",
                    quote="using m = 50 without diagonalization would incur a significantly larger computational cost"),
        c.decreasing("fnucb", "More frequent communication, lower regret (D = 0.05, 0.03, 0.01, every round)",
                     [FIGS["fig2d"]], ["FN-UCB (D=0.05)", "FN-UCB (D=0.03)", "FN-UCB (D=0.01)", "FN-UCB (every round)"],
                     where="Sec. 5.2, Fig. 2d", quote="more frequent communications lead to better performances"),
        c.near("fnucb", "Communication rounds 3850.7, 4442.7, 4906.3 for D = 0.05, 0.03, 0.01", [FIGS["fig2d"]],
               [("FN-UCB (D=0.05)", 3850.7), ("FN-UCB (D=0.03)", 4442.7), ("FN-UCB (D=0.01)", 4906.3)], margin=0.1,
               where="Fig. 2 caption"),
        c.level("fnucb", "FN-UCB (Less Comm.) performs like FN-UCB", [FIGS["fig3"]],
                [(f"{p}: FN-UCB (N={n})", f"{p}: FN-UCB Less Comm. (N={n})") for p in ("cosine", "square")
                 for n in (2, 5)], margin=0.1, where="Sec. 5.1, App. E, Fig. 3",
                quote="their empirical performances are very similar"),
        *(c.all_below("fnucb", f"The neural methods outperform the linear and kernel UCB/TS on {p}", [FIGS["fig4"]],
                      [f"{p}: {m}" for m in (*_NEURAL, *_fn_names(1, 2, 5))], [f"{p}: {m}" for m in _LINEAR_KERNEL],
                      where="App. E, Fig. 4", quote="both linear and kernelized contextual bandit algorithms are "
                                                    "outperformed by neural contextual bandit algorithms")
          for p in ("cosine", "square", "shuttle", "magic")),
        c.pairs_below("fnucb", "At the same width (m = 20) the diagonal approximation does worse than the full "
                      "covariance", [FIGS["fig5"]], [("FN-UCB (full covariance)", "FN-UCB (diagonal)")],
                      where="App. E, Fig. 5", quote="for the same width of the NN, the technique of diagonalization "
                                                    "indeed results in worse performances"),
        *(c.decreasing("fnucb", f"The final regret falls with N ({p})", [FIGS["fig6"]],
                       [f"{p}: FN-UCB (N={n})" for n in (1, 2, 5, 10)], where="App. E, Fig. 6",
                       quote="the average cumulative regret ... is indeed decreasing as the number N of agents "
                             "increases", retests=_SYNTHETIC_ORDER) for p in ("cosine", "square")),
        c.pairs_below("fnucb", "FN-UCB (Less Comm.) sends fewer scalars than FN-UCB", [FIGS["fig3"]],
                      [(f"{p}: FN-UCB Less Comm. (N={n})", f"{p}: FN-UCB (N={n})") for p in ("cosine", "square")
                       for n in (2, 5)], value=c.communication, origin=L, where="Sec. 3.4, its design"),
    )


register_page(Page(
    name="fnucb",
    title="Federated Neural Bandits (Dai et al., ICLR 2023): reproduction",
    records=tuple(FIGS.values()),
    figures=(Figure("fnucb-figure1.png", "Figures 1(a) to 1(d): cumulative regret above, communication below",
                    tuple(FIGS[f] for f in ("fig1a", "fig1b", "fig1c", "fig1d"))),
             Figure("fnucb-figure2.png", "Figures 2(a) to 2(d): cumulative regret above, communication below",
                    tuple(FIGS[f] for f in ("fig2a", "fig2b", "fig2c", "fig2d")))),
    claims=_claims(),
))
