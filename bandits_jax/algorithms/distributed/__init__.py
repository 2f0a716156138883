"""Distributed asynchronous kernel bandits: Async-KernelUCB and the distributed baselines of its paper."""

PAPER = "Asynchronous kernel bandits (Li et al. 2023)"

NAMES = {
    "async_kernel_ucb": ("async_kernel:async_kernel_ucb", PAPER),
    "dis_kernel_ucb": ("dis_kernel:dis_kernel_ucb", "baseline in Li et al. 2023"),
    "dis_kernel_ucb_duets": ("dis_kernel:dis_kernel_ucb_duets", "baseline in Pavlovic et al. 2024"),
    "one_kernel_ucb": ("dis_kernel:one_kernel_ucb", "baseline in Li et al. 2023"),
    "n_kernel_ucb": ("dis_kernel:n_kernel_ucb", "baseline in Li et al. 2023"),
    "dis_lin_ucb": ("dis_linear:dis_lin_ucb", "baseline in Li et al. 2023"),
    "fed_lin_ucb": ("dis_linear:fed_lin_ucb", "baseline in Li et al. 2023"),
    "fed_glb_ucb": ("fed_glb:fed_glb_ucb", "baseline in Li et al. 2023"),
    "approx_dis_kernel_ucb": ("approx_dis_kernel:approx_dis_kernel_ucb", "baseline in Li et al. 2023"),
    "approx_dis_kernel_ucb_duets": ("approx_dis_kernel:approx_dis_kernel_ucb_duets",
                                    "baseline in Pavlovic et al. 2024"),
}
