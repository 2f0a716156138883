"""Collaborative pure exploration in kernel bandits: CoKernelFC and CoKernelFB with their baselines."""

from ..record import BenchCase, Record
from ..tuning import Tuning

PAPER = "CoPE-KB (Du, Kuroki and Huang 2023)"

_ABLATION = "ablation in Du et al. 2023"
_BASELINE = "baseline in Du et al. 2023"
_TRIAL = Tuning(note="a phase-level trial: no regret to tune")


def _fc(target: str, role: str, method: str) -> Record:
    """A fixed-confidence name, timed on cope/fc-rank2's Delta = 0.2 curve."""
    return Record(target, role, _TRIAL, BenchCase("cope/fc-rank2", "paper", f"{method}, Delta=0.2"))


def _fb(target: str, role: str, method: str) -> Record:
    """A fixed-budget name, timed on cope/fb-rank2 at the budget T = 100000."""
    return Record(target, role, _TRIAL, BenchCase("cope/fb-rank2", "paper", method, point="T=100000"))


NAMES = {
    "cokernel_fc": _fc("cope_kb:cokernel_fc", PAPER, "CoKernelFC"),
    "cokernel_ind_alloc": _fc("cope_kb:cokernel_ind_alloc", _ABLATION, "CoKernel-IndAlloc"),
    "ind_rage": _fc("cope_kb:ind_rage", _BASELINE, "IndRAGE"),
    "ind_rage_code": _fc("cope_kb:ind_rage_code", _BASELINE, "IndRAGE-code"),
    "ind_rage_code_threshold": _fc("cope_kb:ind_rage_code_threshold", _BASELINE, "IndRAGE-code-threshold"),
    "cokernel_fb": _fb("cope_kb:cokernel_fb", PAPER, "CoKernelFB"),
    "cokernel_fb_ind_alloc": _fb("cope_kb:cokernel_fb_ind_alloc", _ABLATION, "CoKernelFB-IndAlloc"),
    "ind_peace_fb": _fb("cope_kb:ind_peace_fb", _BASELINE, "IndPeaceFB"),
    "ind_peace_fb_omega": _fb("cope_kb:ind_peace_fb_omega", _BASELINE, "IndPeaceFB-omega"),
    "ind_uniform_fb": _fb("cope_kb:ind_uniform_fb", _BASELINE, "IndUniformFB"),
    "ind_uniform_fb_means": _fb("cope_kb:ind_uniform_fb_means", _BASELINE, "IndUniformFB-means"),
    "ind_alba": _fc("cope_kb_alba:ind_alba", _BASELINE, "IndALBA"),
    "ind_poly_alba": _fc("cope_kb_alba:ind_poly_alba", _BASELINE, "IndPolyALBA"),
}
