"""Distributed asynchronous kernel bandits: Async-KernelUCB and the distributed baselines of its paper."""

from ..tuning import Knob, Tuning

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

# the synchronisation thresholds: a larger one, fewer rounds (a determinant-ratio or variance trigger)
_THRESHOLD = Knob("threshold", (0.1, 1.0, 10.0, 100.0, 1e3, 1e4))
TUNING = {
    "async_kernel_ucb": Tuning(("alpha",), Knob("threshold", (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0))),
    "dis_kernel_ucb": Tuning(("alpha",), _THRESHOLD),
    "dis_kernel_ucb_duets": Tuning(("alpha",), _THRESHOLD),
    "one_kernel_ucb": Tuning(("alpha",), note="no knob: it sends every point as it arrives, which is "
                                               "dis_kernel_ucb at threshold 0 (the same actions and counts, "
                                               "tests/test_dis_kernel.py), the limit of that curve as its "
                                               "threshold falls"),
    "n_kernel_ucb": Tuning(("alpha",)),
    "dis_lin_ucb": Tuning(("alpha",), _THRESHOLD),
    "fed_lin_ucb": Tuning(("alpha",), Knob("alpha_c", (1e-2, 0.1, 1.0, 10.0, 100.0, 1e3))),
    "fed_glb_ucb": Tuning(("alpha",), _THRESHOLD),
    "approx_dis_kernel_ucb": Tuning(("alpha",), _THRESHOLD),
    "approx_dis_kernel_ucb_duets": Tuning(("alpha",), _THRESHOLD),
}
