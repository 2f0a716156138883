"""The experiments of Coop-KernelUCB (Dubey and Pentland, ICML 2020, Sec. 5, Figure 1).

`coop/<kernel>-<network>`, kernel linear (setup 1, problems.coop `coop-linear`) or rbf (setup 2,
`coop-rbf`), network er (Erdos-Renyi G(V, 0.7)), facebook, twitch or skitter (SNAP edge lists from
the data directory, random-walk subsample of V nodes). The twitch and skitter panels ask by name for
the files that stand in for the spec's graphs (PANEL_GRAPHS: graph twitch-engb, the England Twitch
graph in place of DE; skitter-oregon, the Oregon-1 AS graph in place of as-Skitter), so the world's
description and every summary say so; `--set graph=twitch` or `graph=skitter` reads the spec's own
file and refuses to run without it. `--set data_dir=DIR` or $BANDITS_JAX_DATA_DIR says where the
files are; `--set graph=facebook-standin` or a path runs on another graph.
Six methods per panel, every one a registered name, common random numbers across methods:
    linear  Ind-LinUCB, OFUL, Naive-LinUCB, Coop-KernelUCB, Dist-KernelUCB, Eager-KernelUCB
    rbf     Ind-KernelUCB, IGP-UCB, Naive-IGP-UCB, Coop-KernelUCB, Dist-KernelUCB, Eager-KernelUCB
Sizes: smoke (V = 8, T = 12, dual storage), small (V = 50, T = 200, 20 trials), paper (V = 200,
T = 500, 100 trials). Both kernels use the feature storage beyond smoke (spec §8.3: identity
features for linear K_x, `landmarks` Nystrom points for RBF, K_hat_z from its top `r_max`
eigenpairs). `coop/v-sweep`: setup 1 on Erdos-Renyi at V in `agent_counts` (tag V, the x-axis),
for the claim that cooperative per-agent regret falls with V while independent regret does not; it
has no `num_agents` key (one it would ignore), so `--set num_agents=...` is refused.
Regret: per-agent cumulative pseudo-regret (the mean over agents), +- standard error over trials.
Walk-through: docs/experiments/coop.md.
"""
from __future__ import annotations

from ..reporting import claims
from ..core import ConfigError
from ..curves import Curve, Spec
from ..problems.coop import MAX_BANDWIDTH
from .registry import (CONFIDENCE, COUNT, NOISE_STD, NONNEGATIVE, POSITIVE, Bound, Experiment, Figure, Page,
                       parse_list, register, register_page)

NETWORKS = {"er": "Erdos-Renyi G(V, 0.7)", "facebook": "SNAP ego-Facebook",
            "twitch": "SNAP musae-Twitch (the ENGB graph standing in for DE; graph=twitch reads musae_DE_edges.csv)",
            "skitter": "SNAP as-Skitter (the Oregon-1 AS graph standing in; graph=skitter reads as-skitter.txt)"}
# the graph option of each panel (problems.graphs.SNAP_GRAPHS): stand-in files are asked for by name
PANEL_GRAPHS = {"er": "er", "facebook": "facebook", "twitch": "twitch-engb", "skitter": "skitter-oregon"}
LINEAR = ("Ind-LinUCB", "OFUL", "Naive-LinUCB", "Coop-KernelUCB", "Dist-KernelUCB", "Eager-KernelUCB")
RBF = ("Ind-KernelUCB", "IGP-UCB", "Naive-IGP-UCB", "Coop-KernelUCB", "Dist-KernelUCB", "Eager-KernelUCB")
DEFAULTS = {"num_agents": 200, "num_arms": 8, "dim": 10, "noise_std": 0.1, "graph": "er", "p": 0.7, "gamma": 0,
            "graph_seed": 0, "delay_mode": "hop", "lam": 1.0, "eta": 1.0, "sigma_z": 1.0, "lengthscale": 1.0,
            "B": 1.0, "S": 1.0, "delta": 0.05, "storage": "feature", "r_max": 16, "landmarks": 64,
            "ring_rounds": 16, "data_dir": ""}
# what every numeric key allows (registry.Bound): p is the Erdos-Renyi edge probability; sizes are int32; the RBF
# bandwidths (lengthscale is sigma_x) end where the kernel is 1 between any two unit vectors
BANDWIDTH = Bound(0, MAX_BANDWIDTH, open_low=True)
BOUNDS = {"num_agents": COUNT, "num_arms": COUNT, "dim": COUNT, "noise_std": NOISE_STD,
          "p": Bound(0, 1, open_low=True), "gamma": NONNEGATIVE, "graph_seed": NONNEGATIVE, "lam": POSITIVE,
          "eta": POSITIVE, "sigma_z": BANDWIDTH, "lengthscale": BANDWIDTH, "B": NONNEGATIVE, "S": NONNEGATIVE,
          "delta": CONFIDENCE, "r_max": COUNT, "landmarks": COUNT, "ring_rounds": COUNT}
SIZES = {"smoke": {"num_agents": 8, "horizon": 12, "seeds": 2, "storage": "dual", "landmarks": 8, "r_max": 9},
         "small": {"num_agents": 50, "horizon": 200, "seeds": 20, "landmarks": 32, "r_max": 8},
         "paper": {"num_agents": 200, "horizon": 500, "seeds": 100}}
NOTES = ("Spec coop-kernelucb defaults [D]: T = 500, eta = 1, noise N(0, 0.1^2), gamma = max(1, floor(diam / 2)), "
         "clusters = Voronoi cells of a random maximal independent set of G_gamma, the graph fixed per panel "
         "(graph_seed), contexts, tasks and noise redrawn per trial. Feature storage beyond smoke: one K_hat_z a "
         "round at the common lag, from its top r_max eigenpairs, RBF K_x through `landmarks` Nystrom points drawn "
         "from the first round's contexts. Paper claims (orderings only): Eager best in all panels; Coop about Dist "
         "on Erdos-Renyi; both beat Naive; the independent baselines worst; cooperative per-agent regret falls "
         "with V.")


def methods(config, kernel: str) -> list:
    """(label, algorithm Spec) of the six methods of a row (`--only LABEL` runs a subset)."""
    storage = {"storage": config["storage"]}
    ring = {"ring_rounds": config["ring_rounds"]} if config["storage"] == "feature" else {}
    embedding = "common_lag" if config["storage"] == "feature" else "current"
    coop = dict(kernel=kernel, lam=config["lam"], eta=config["eta"], sigma_z=config["sigma_z"],
                lengthscale=config["lengthscale"], r_max=config["r_max"], landmarks=config["landmarks"],
                embedding=embedding, **storage, **ring)
    igp = dict(lam=config["lam"], lengthscale=config["lengthscale"], B=config["B"], R=config["noise_std"],
               delta=config["delta"], landmarks=config["landmarks"], **storage, **ring)
    if kernel == "linear":
        independent = [("Ind-LinUCB", Spec("ind_kernel_ucb", dict(kernel="linear", lam=config["lam"],
                                                                  eta=config["eta"], **storage, **ring))),
                       ("OFUL", Spec("oful", dict(lam=config["lam"], R=config["noise_std"], S=config["S"],
                                                  delta=config["delta"], **storage, **ring))),
                       ("Naive-LinUCB", Spec("naive_linucb", dict(lam=config["lam"], eta=config["eta"], **storage,
                                                                  **ring)))]
    else:
        independent = [("Ind-KernelUCB", Spec("ind_kernel_ucb", dict(kernel="rbf", lam=config["lam"],
                                                                     eta=config["eta"],
                                                                     lengthscale=config["lengthscale"],
                                                                     landmarks=config["landmarks"], **storage,
                                                                     **ring))),
                       ("IGP-UCB", Spec("igp_ucb", dict(kernel="rbf", **igp))),
                       ("Naive-IGP-UCB", Spec("naive_igp_ucb", dict(kernel="rbf", **igp)))]
    cooperative = [("Coop-KernelUCB", Spec("coop_kernel_ucb", coop)), ("Dist-KernelUCB", Spec("dist_kernel_ucb_coop",
                                                                                               coop)),
                   ("Eager-KernelUCB", Spec("eager_kernel_ucb", coop))]
    return independent + cooperative


def world(config, kernel: str, num_agents: int) -> Spec:
    """The problem Spec of a panel (gamma 0: max(1, floor(diam / 2)))."""
    options = dict(num_agents=num_agents, num_arms=config["num_arms"], dim=config["dim"],
                   horizon=config["horizon"], graph=config["graph"], p=config["p"],
                   gamma=config["gamma"] or None, delay_mode=config["delay_mode"], noise_std=config["noise_std"],
                   graph_seed=config["graph_seed"], data_dir=config["data_dir"] or None)
    if config["gamma"] < 0:
        raise ConfigError(f"gamma must be >= 1 (0: max(1, floor(diameter / 2))), got {config['gamma']}")
    if kernel == "rbf":
        options.update(sigma_x=config["lengthscale"], sigma_z=config["sigma_z"])
    return Spec(f"coop-{kernel}", options)


def panel_build(kernel: str):
    def build(config):
        problem = world(config, kernel, config["num_agents"])
        return [Curve(label, problem, spec, tags={"method": label}) for label, spec in methods(config, kernel)]

    return build


def sweep_build(config):
    curves = []
    for V in parse_list(config, "agent_counts", int, minimum=2):
        problem = world(config, "linear", V)
        curves += [Curve(f"{label}, V={V}", problem, spec, tags={"method": label, "V": V})
                   for label, spec in methods(config, "linear")]
    return curves


def _without_num_agents(config: dict) -> dict:
    """`config` less num_agents: the V sweep takes its V from agent_counts only."""
    return {k: v for k, v in config.items() if k != "num_agents"}


for _kernel, _setup in (("linear", "setup 1: linear K_x, K_z a clustering of the agents"),
                        ("rbf", "setup 2: RBF K_x and RBF K_z")):
    for _net, _what in NETWORKS.items():
        register(Experiment(
            name=f"coop/{_kernel}-{_net}",
            description=f"Coop-KernelUCB Figure 1, {_setup}, on {_what}: per-agent regret of the cooperative "
                        "variants against Naive Cooperation and independent baselines",
            defaults={**DEFAULTS, "graph": PANEL_GRAPHS[_net]}, sizes={k: dict(v) for k, v in SIZES.items()},
            build=panel_build(_kernel), notes=NOTES, bounds=BOUNDS))
register(Experiment(
    name="coop/v-sweep",
    description="Coop-KernelUCB setup 1 on Erdos-Renyi G(V, 0.7) for V in 25, 50, 100, 200: per-agent final "
                "regret against V (not in the paper; its claim 4)",
    defaults={**_without_num_agents(DEFAULTS), "agent_counts": "25,50,100,200"},
    sizes={"smoke": {**_without_num_agents(SIZES["smoke"]), "agent_counts": "4,8"},
           "small": {"horizon": 200, "seeds": 20, "r_max": 8},
           "paper": {"horizon": 500, "seeds": 100}},
    build=sweep_build, notes=NOTES, x="V", bounds=BOUNDS))


LINEAR_PAPER = tuple(f"coop-linear-{g}-paper" for g in NETWORKS)
LINEAR_SMALL = tuple(f"coop-linear-{g}-small" for g in NETWORKS)
RBF_SMALL = tuple(f"coop-rbf-{g}-small" for g in NETWORKS)
RBF_PAPER = tuple(f"coop-rbf-{g}-paper" for g in NETWORKS)
_COOPERATIVE = ["Coop-KernelUCB", "Dist-KernelUCB", "Eager-KernelUCB"]
_V = ("25", "50", "100", "200")


def _panel_claims(kind: str, records: tuple, independent: list, naive: str) -> tuple:
    """The claims of Dubey and Pentland (2020), Sec. 5, over one row of Figure 1 at one size (kind "linear
    panels, the paper's size", ...); the Results Summary is cut in the text, so two subjects are the spec's
    reading (§5.6)."""
    where = "Sec. 5, Fig. 1"
    return (
        claims.all_below("coop", f"Eager-KernelUCB consistently outperforms the other algorithms ({kind})",
                         records, ["Eager-KernelUCB"], ["Coop-KernelUCB", "Dist-KernelUCB", naive, *independent],
                         where=where, quote="Eager-KernelUCB consistently outperforms other algorithms, across all "
                                            "benchmark tasks"),
        claims.all_below("coop", f"Coop-KernelUCB significantly outperforms the existing benchmarks ({kind})",
                         records, ["Coop-KernelUCB"], [naive, *independent], where="Abstract",
                         quote="our algorithm significantly outperforms existing benchmarks"),
        claims.level("coop", f"Coop-KernelUCB and Dist-KernelUCB perform similarly on Erdos-Renyi ({kind.replace('panels', 'panel')})",
                     [r for r in records if "-er-" in r], [("Coop-KernelUCB", "Dist-KernelUCB")], margin=0.1,
                     where=where, quote="Coop-KernelUCB and Dist-KernelUCB perform similarly for the Erdos-Renyi"),
        claims.all_below("coop", f"Coop- and Dist-KernelUCB outperform Naive Cooperation ({kind}; the subject is the "
                         "spec's reading of a cut sentence)", records, ["Coop-KernelUCB", "Dist-KernelUCB"], [naive],
                         origin="spec", where=where, quote="outperforms Naive Cooperation in both the linear and kernel "
                                                           "settings"),
        claims.all_below("coop", f"The cooperative methods beat the non-cooperative baselines ({kind})", records,
                         _COOPERATIVE, independent, origin="spec", where="Sec. 5 and spec §1"),
    )


def _v_claims() -> tuple:
    """The spec's optional V sweep (not in the paper, whose panels all have V = 200), read against the
    Results Summary: per-agent regret falls with V for the cooperative methods, not for the independent."""
    record, where = ["coop-v-sweep-small"], "Sec. 5 Results Summary; spec's V sweep"
    quote = "instead of the O(1/sqrt V) dependence for our algorithms, which is obtained in our results as well"
    return (
        *(claims.decreasing("coop", f"More agents, lower per-agent regret for {m} (V = 25 to 200)", record,
                            [f"{m}, V={v}" for v in _V], origin="library", where=where, quote=quote)
          for m in _COOPERATIVE),
        claims.level("coop", "The independent baselines' per-agent regret does not change with V (V = 25 against 200)",
                     record, [(f"{m}, V=25", f"{m}, V=200") for m in ("Ind-LinUCB", "OFUL")], margin=0.05,
                     origin="library", where=where, quote="a per-agent regret that scales linearly"),
    )


register_page(Page(
    name="coop",
    title="Coop-KernelUCB (Dubey and Pentland, ICML 2020): reproduction",
    records=(*LINEAR_PAPER, *RBF_PAPER, *LINEAR_SMALL, *RBF_SMALL, "coop-v-sweep-small"),
    figures=(Figure("coop-figure1-paper-linear.png", "Figure 1, linear row at the paper's size", LINEAR_PAPER,
                    rows=1),
             Figure("coop-figure1.png", "Figure 1 at the small size: the linear row above, the RBF row below",
                    LINEAR_SMALL + RBF_SMALL, rows=2)),
    claims=(
        *_panel_claims("linear panels, the paper's size", LINEAR_PAPER, ["Ind-LinUCB", "OFUL"], "Naive-LinUCB"),
        *_panel_claims("RBF panels, the paper's size", RBF_PAPER, ["Ind-KernelUCB", "IGP-UCB"], "Naive-IGP-UCB"),
        *(c._replace(origin="library") for c in (
            *_panel_claims("linear panels, the small size", LINEAR_SMALL, ["Ind-LinUCB", "OFUL"], "Naive-LinUCB"),
            *_panel_claims("RBF panels, the small size", RBF_SMALL, ["Ind-KernelUCB", "IGP-UCB"], "Naive-IGP-UCB"))),
        *_v_claims(),
    )))
