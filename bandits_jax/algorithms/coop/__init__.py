"""Cooperative multi-agent kernel bandits on a graph: Coop-KernelUCB and its baselines."""

from ..tuning import Knob, Tuning

PAPER = "Coop-KernelUCB (Dubey and Pentland 2020)"

NAMES = {
    "coop_kernel_ucb": ("coop_kernel:coop_kernel_ucb", PAPER),
    "eager_kernel_ucb": ("coop_kernel:eager_kernel_ucb", PAPER),
    "dist_kernel_ucb_coop": ("coop_kernel:dist_kernel_ucb_coop", PAPER),
    "naive_linucb": ("coop_kernel:naive_linucb", "baseline in Dubey and Pentland 2020"),
    "naive_igp_ucb": ("coop_kernel:naive_igp_ucb", "baseline in Dubey and Pentland 2020"),
    "ind_kernel_ucb": ("coop_kernel:ind_kernel_ucb", "baseline in Dubey and Pentland 2020"),
    "oful": ("coop_kernel:oful", "baseline in Dubey and Pentland 2020"),
    "igp_ucb": ("coop_kernel:igp_ucb", "baseline in Dubey and Pentland 2020"),
}

# the message TTL of the network's protocol, a problem option (coop-*: ttl; 0: no messages)
_TTL = Knob("ttl", (0, 1, 2, 3), on="problem")
TUNING = {
    "coop_kernel_ucb": Tuning(("eta",), _TTL),
    "eager_kernel_ucb": Tuning(("eta",), _TTL),
    "dist_kernel_ucb_coop": Tuning(("eta",), _TTL),
    "naive_linucb": Tuning(("eta",), _TTL),
    "naive_igp_ucb": Tuning(("B", "R"), _TTL),
    "ind_kernel_ucb": Tuning(("eta",), note="none: each agent uses its own data only"),
    "oful": Tuning(("R", "S"), note="none: each agent uses its own data only"),
    "igp_ucb": Tuning(("B", "R"), note="none: each agent uses its own data only"),
}
