"""Cooperative multi-agent kernel bandits on a graph: Coop-KernelUCB and its baselines."""

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
