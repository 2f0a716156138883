"""Cooperative multi-agent kernel bandits on a graph: Coop-KernelUCB and its baselines."""

from ..record import BenchCase, Record
from ..tuning import Knob, Tuning

PAPER = "Coop-KernelUCB (Dubey and Pentland 2020)"

_BASELINE = "baseline in Dubey and Pentland 2020"
# the message TTL of the network's protocol, a problem option (coop-*: ttl; 0: no messages)
_TTL = Knob("ttl", (0, 1, 2, 3), on="problem")
_ALONE = "none: each agent uses its own data only"

# the options the coop/* experiments give these names at their small size (experiments/coop.py): RBF
# contexts, feature storage with one shared similarity factor a round at the common lag, 32 Nystrom
# landmarks; a name takes those its factory accepts (the arena's setting on the network problems)
SETTING = {"kernel": "rbf", "storage": "feature", "ring_rounds": 16, "embedding": "common_lag", "r_max": 8,
           "landmarks": 32}


def _small(experiment: str, method: str) -> BenchCase:
    """The curve of a coop/* experiment at its small size, T = 100."""
    return BenchCase(experiment, "small", method, {"horizon": "100"})


NAMES = {
    "coop_kernel_ucb": Record("coop_kernel:coop_kernel_ucb", PAPER, Tuning(("eta",), _TTL),
                              _small("coop/linear-er", "Coop-KernelUCB")),
    "eager_kernel_ucb": Record("coop_kernel:eager_kernel_ucb", PAPER, Tuning(("eta",), _TTL),
                               _small("coop/linear-er", "Eager-KernelUCB")),
    "dist_kernel_ucb_coop": Record("coop_kernel:dist_kernel_ucb_coop", PAPER, Tuning(("eta",), _TTL),
                                   _small("coop/linear-er", "Dist-KernelUCB")),
    "naive_linucb": Record("coop_kernel:naive_linucb", _BASELINE, Tuning(("eta",), _TTL),
                           _small("coop/linear-er", "Naive-LinUCB")),
    "naive_igp_ucb": Record("coop_kernel:naive_igp_ucb", _BASELINE, Tuning(("B", "R"), _TTL),
                            _small("coop/rbf-er", "Naive-IGP-UCB")),
    "ind_kernel_ucb": Record("coop_kernel:ind_kernel_ucb", _BASELINE, Tuning(("eta",), note=_ALONE),
                             _small("coop/linear-er", "Ind-LinUCB"), silent=True),
    "oful": Record("coop_kernel:oful", _BASELINE, Tuning(("R", "S"), note=_ALONE), _small("coop/linear-er", "OFUL"),
                   silent=True),
    "igp_ucb": Record("coop_kernel:igp_ucb", _BASELINE, Tuning(("B", "R"), note=_ALONE),
                      _small("coop/rbf-er", "IGP-UCB"), silent=True),
}
