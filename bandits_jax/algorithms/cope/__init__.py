"""Collaborative pure exploration in kernel bandits: CoKernelFC and CoKernelFB with their baselines."""

from ..tuning import Tuning

PAPER = "CoPE-KB (Du, Kuroki and Huang 2023)"

NAMES = {
    "cokernel_fc": ("cope_kb:cokernel_fc", PAPER),
    "cokernel_ind_alloc": ("cope_kb:cokernel_ind_alloc", "ablation in Du et al. 2023"),
    "ind_rage": ("cope_kb:ind_rage", "baseline in Du et al. 2023"),
    "ind_rage_code": ("cope_kb:ind_rage_code", "baseline in Du et al. 2023"),
    "ind_rage_code_threshold": ("cope_kb:ind_rage_code_threshold", "baseline in Du et al. 2023"),
    "cokernel_fb": ("cope_kb:cokernel_fb", PAPER),
    "cokernel_fb_ind_alloc": ("cope_kb:cokernel_fb_ind_alloc", "ablation in Du et al. 2023"),
    "ind_peace_fb": ("cope_kb:ind_peace_fb", "baseline in Du et al. 2023"),
    "ind_peace_fb_omega": ("cope_kb:ind_peace_fb_omega", "baseline in Du et al. 2023"),
    "ind_uniform_fb": ("cope_kb:ind_uniform_fb", "baseline in Du et al. 2023"),
    "ind_uniform_fb_means": ("cope_kb:ind_uniform_fb_means", "baseline in Du et al. 2023"),
    "ind_alba": ("cope_kb_alba:ind_alba", "baseline in Du et al. 2023"),
    "ind_poly_alba": ("cope_kb_alba:ind_poly_alba", "baseline in Du et al. 2023"),
}

TUNING = {name: Tuning(note="a phase-level trial: no regret to tune") for name in NAMES}
