"""Distributed asynchronous kernel bandits: Async-KernelUCB and the distributed baselines of its paper."""

from ..record import BenchCase, Record
from ..tuning import Knob, Tuning

PAPER = "Asynchronous kernel bandits (Li et al. 2023)"

_LI = "baseline in Li et al. 2023"
_PAVLOVIC = "baseline in Pavlovic et al. 2024"
# the synchronisation thresholds: a larger one, fewer rounds (a determinant-ratio or variance trigger)
_THRESHOLD = Knob("threshold", (0.1, 1.0, 10.0, 100.0, 1e3, 1e4))


def _f1(curve: str) -> BenchCase:
    """The curve of async/synthetic-f1 at T = 300 (dis_kernel_ucb, which no experiment runs, is built on
    that problem with Approx-DisKernelUCB's kernel options: bench/step_cost.dis_kernel_curve)."""
    return BenchCase("async/synthetic-f1", "paper", curve, {"horizon": "300"})


def _h1(curve: str) -> BenchCase:
    return BenchCase("duets/h1", "paper", curve, point="beta=1")


NAMES = {
    "async_kernel_ucb": Record("async_kernel:async_kernel_ucb", PAPER,
                               Tuning(("alpha",), Knob("threshold", (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0))),
                               _f1("Async-KernelUCB")),
    "dis_kernel_ucb": Record("dis_kernel:dis_kernel_ucb", _LI, Tuning(("alpha",), _THRESHOLD), _f1("DisKernelUCB")),
    "dis_kernel_ucb_duets": Record("dis_kernel:dis_kernel_ucb_duets", _PAVLOVIC, Tuning(("alpha",), _THRESHOLD),
                                   _h1("DisKernelUCB")),
    "one_kernel_ucb": Record("dis_kernel:one_kernel_ucb", _LI,
                             Tuning(("alpha",), note="no knob: it sends every point as it arrives, which is "
                                                     "dis_kernel_ucb at threshold 0 (the same actions and counts, "
                                                     "tests/test_dis_kernel.py), the limit of that curve as its "
                                                     "threshold falls"),
                             _f1("OneKernelUCB")),
    "n_kernel_ucb": Record("dis_kernel:n_kernel_ucb", _LI, Tuning(("alpha",)), _f1("NKernelUCB"), silent=True),
    "dis_lin_ucb": Record("dis_linear:dis_lin_ucb", _LI, Tuning(("alpha",), _THRESHOLD), _f1("DisLinUCB")),
    "fed_lin_ucb": Record("dis_linear:fed_lin_ucb", _LI,
                          Tuning(("alpha",), Knob("alpha_c", (1e-2, 0.1, 1.0, 10.0, 100.0, 1e3))), _f1("FedLinUCB")),
    "fed_glb_ucb": Record("fed_glb:fed_glb_ucb", _LI, Tuning(("alpha",), _THRESHOLD), _f1("FedGLB-UCB")),
    "approx_dis_kernel_ucb": Record("approx_dis_kernel:approx_dis_kernel_ucb", _LI, Tuning(("alpha",), _THRESHOLD),
                                    _f1("Approx-DisKernelUCB")),
    "approx_dis_kernel_ucb_duets": Record("approx_dis_kernel:approx_dis_kernel_ucb_duets", _PAVLOVIC,
                                          Tuning(("alpha",), _THRESHOLD), _h1("Approx-DisKernelUCB")),
}
