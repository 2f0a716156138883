"""The experiments of CoPE-KB (Du, Kuroki and Huang, ICLR 2023, Sec. 6, Figures 2 and 3).

The `cope-kb` world (problems.cope): V = 5 agents, 6 two-hot arms each, task similarity rank K_Z =
1, 2, 5 (cases rank1, rank2, rank5), N(0, 1) noise.
`cope/fc-<case>` (Figure 2): fixed confidence delta = 0.005 at Delta_min in {0.1, ..., 0.8}, 50 runs;
    CoKernelFC, CoKernel-IndAlloc, IndRAGE, IndRAGE-code (the RAGE code as its authors run it, var=True),
    IndRAGE-code-threshold (its var=False rule), IndALBA, IndPolyALBA (the last two are reconstructions);
    IndRAGE/V is IndRAGE's per-agent samples divided by V, drawn and tabulated beside the others but never run. Curves carry the tag Delta (the x-axis).
`cope/fb-<case>` (Figure 3): fixed budget at Delta_min = 0.02 over T in {7e3, 1e4, 2e4, 5e4, 1e5,
    2e5, 3e5} per agent, one traced grid (tag budget) per method, 100 runs; CoKernelFB,
    CoKernelFB-IndAlloc, IndPeaceFB (Gaussian width, the headline) and IndPeaceFB-omega,
    IndUniformFB (ridge) and IndUniformFB-means.
Defaults of spec cope-kb §9: xi = 1e-10, eps = 0.1, FW designs of 2000 iterations. One `xi` drives
both the algorithms' regulariser and the world's omega/gamma halving tables (problem option xi), so
`--set xi=...` changes both. All methods of a run share its seed's noise (common random numbers).
Walk-through: docs/experiments/cope.md.
"""
from __future__ import annotations

from ..reporting import claims
from ..core import ConfigError
from ..curves import Curve, Spec
from ..problems.cope import MAX_GAP, MAX_XI, MIN_GAP
from .registry import CONFIDENCE, POSITIVE, Bound, Experiment, Figure, Page, parse_list, register, register_page

FC_METHODS = (("CoKernelFC", "cokernel_fc"), ("CoKernel-IndAlloc", "cokernel_ind_alloc"), ("IndRAGE", "ind_rage"),
              ("IndRAGE-code", "ind_rage_code"), ("IndRAGE-code-threshold", "ind_rage_code_threshold"),
              ("IndALBA", "ind_alba"), ("IndPolyALBA", "ind_poly_alba"))
FB_METHODS = (("CoKernelFB", "cokernel_fb"), ("CoKernelFB-IndAlloc", "cokernel_fb_ind_alloc"),
              ("IndPeaceFB", "ind_peace_fb"), ("IndPeaceFB-omega", "ind_peace_fb_omega"),
              ("IndUniformFB", "ind_uniform_fb"), ("IndUniformFB-means", "ind_uniform_fb_means"))
FC_DEFAULTS = {"deltas": "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", "delta": 0.005, "xi": 1e-10, "eps": 0.1,
               "methods": ",".join(m for m, _ in FC_METHODS)}
FB_DEFAULTS = {"gap": 0.02, "budgets": "7000,10000,20000,50000,100000,200000,300000", "xi": 1e-10,
               "methods": ",".join(m for m, _ in FB_METHODS)}
# registry.Bound; the world's ends (problems.cope): a gap from too small to see to what one pull tells apart, a
# ridge up to the arms' kernel values
BOUNDS = {"delta": CONFIDENCE, "xi": Bound(0, MAX_XI, open_low=True), "eps": POSITIVE,
          "gap": Bound(MIN_GAP, MAX_GAP)}
NOTES = ("Spec cope-kb defaults: xi = 1e-10, eps = 0.1, Frank-Wolfe designs (2000 iterations), Pukelsheim "
         "rounding, the omega/gamma halving tables of the world (spec §6.5 cache). IndALBA and IndPolyALBA are "
         "reconstructions (ALBA's loop with the public ALBA code's constants; PolyALBA's fixed basis design).")


def fc_build(case):
    def build(config):
        methods = chosen(config, FC_METHODS)
        curves = []
        for gap in gaps(config):
            arms = Spec("cope-kb", {"case": case, "gap": gap, "xi": config["xi"]})
            for label, name in methods:
                options = {"delta": config["delta"], "xi": config["xi"]}
                if name not in ("ind_alba", "ind_poly_alba"):
                    options["eps"] = config["eps"]
                curves.append(Curve(f"{label}, Delta={gap:g}", arms, Spec(name, options),
                                    tags={"method": label, "Delta": gap}))
        return curves

    return build


def gaps(config) -> list:
    """The Delta_min values of `deltas`, each in [MIN_GAP, MAX_GAP] (a ConfigError naming deltas)."""
    values = parse_list(config, "deltas", float, minimum=MIN_GAP)
    if max(values) > MAX_GAP:
        raise ConfigError(f"deltas: {max(values):g} is past the largest gap of the world; give values <= {MAX_GAP:g}")
    return values


def fb_build(case):
    def build(config):
        arms = Spec("cope-kb", {"case": case, "gap": config["gap"], "xi": config["xi"]})
        grid = tuple((f"T={b:g}", {"budget": b}) for b in parse_list(config, "budgets", float, minimum=1.0))
        return [Curve(label, arms, Spec(name, {"xi": config["xi"]}), grid, tags={"method": label})
                for label, name in chosen(config, FB_METHODS)]

    return build


def chosen(config, methods):
    """The (label, algorithm) pairs named in config["methods"], in the figure's order."""
    wanted = [m.strip() for m in str(config["methods"]).split(",") if m.strip()]
    known = dict(methods)
    unknown = [m for m in wanted if m not in known]
    if unknown or not wanted:
        raise ConfigError(f"methods: unknown {', '.join(unknown) or 'none given'}; choose from {', '.join(known)}")
    return [(m, known[m]) for m in known if m in wanted]


FIGURE = {"rank1": "(a) identical tasks, rank K_Z = 1", "rank2": "(b) similar tasks, rank K_Z = 2",
          "rank5": "(c) different tasks, rank K_Z = V = 5"}
for _case, _what in FIGURE.items():
    register(Experiment(
        name=f"cope/fc-{_case}",
        description=f"CoPE-KB Figure 2{_what[:3]}: fixed-confidence sample complexity per agent against Delta_min, "
                    f"{_what[4:]}",
        defaults=dict(FC_DEFAULTS), sizes={"paper": {"seeds": 50}, "smoke": {"seeds": 2, "deltas": "0.4,0.8"}},
        build=fc_build(_case), notes=NOTES + " At Delta = 0.5 the gap 0.5 equals the first threshold and ridge "
        "shrinkage keeps it: rank-1 CoKernelFC then takes 1 or 2 rounds (spec pitfall 13).",
        x="Delta", panels=(("samples", "mean", "log"), ("correct", "rate", "linear")),
        derived=(("IndRAGE/V", "IndRAGE", "samples", 0.2),), bounds=BOUNDS))
    register(Experiment(
        name=f"cope/fb-{_case}",
        description=f"CoPE-KB Figure 3{_what[:3]}: fixed-budget error probability against the per-agent budget T, "
                    f"{_what[4:]}",
        defaults=dict(FB_DEFAULTS), sizes={"paper": {"seeds": 100}, "smoke": {"seeds": 4, "budgets": "7000,30000"}},
        build=fb_build(_case), notes=NOTES + " Delta_min = 0.02 (the paper does not state it). Budget not spent "
        "by the halving is not redistributed (budget_used).",
        x="budget", panels=(("correct", "error", "log"), ("budget_used", "mean", "linear")), bounds=BOUNDS))


FC = {case: f"cope-fc-{case}-paper" for case in FIGURE}
FB = {case: f"cope-fb-{case}-paper" for case in FIGURE}
_INDEPENDENT_FC = ["CoKernel-IndAlloc", "IndRAGE", "IndALBA", "IndPolyALBA"]
_OTHERS_FB = ["CoKernelFB-IndAlloc", "IndPeaceFB", "IndUniformFB"]
register_page(Page(
    name="cope-kb",
    title="CoPE-KB (Du, Kuroki and Huang, ICLR 2023): reproduction",
    records=(*FC.values(), *FB.values()),
    figures=(Figure("cope-kb-figure2.png", "Figure 2: per-agent sample complexity and success rate against "
                    "Delta_min, cases (a) to (c)", tuple(FC.values())),
             Figure("cope-kb-figure3.png", "Figure 3: error probability and budget spent against the per-agent "
                    "budget T, cases (a) to (c)", tuple(FB.values()))),
    claims=(
        claims.per_x("cope-kb", "Identical tasks (a): CoKernelFC matches the V-speedup baseline IndRAGE/V (IndRAGE / "
                     "CoKernelFC within 5% of V = 5 at every Delta_min)", [FC["rank1"]], "CoKernelFC", ["IndRAGE"],
                     "samples", relation="ratio", target=5.0, tolerance=0.05, where="Sec. 6, Fig. 2a",
                     quote="CoKernelFC matches the V -speedup baseline IndRAGE-V"),
        claims.per_x("cope-kb", "Similar tasks (b): CoKernelFC's sample complexity lies between IndRAGE/V and IndRAGE "
                     "(1 < IndRAGE / CoKernelFC < V = 5 at every Delta_min)", [FC["rank2"]], "CoKernelFC", ["IndRAGE"],
                     "samples", relation="ratio", bounds=(1.0, 5.0), where="Sec. 6, Fig. 2b",
                     quote="the sample complexity of CoKernelFC lies between IndRAGE/V and IndRAGE"),
        claims.per_x("cope-kb", "Similar tasks (b): the speed-up over IndRAGE is V / rank K_Z = 2.5 (within 5%)",
                     [FC["rank2"]], "CoKernelFC", ["IndRAGE"], "samples", relation="ratio", target=2.5,
                     tolerance=0.05, origin="spec", where="spec §7, from the paper's bounds"),
        claims.per_x("cope-kb", "Different tasks (c): CoKernelFC performs like IndRAGE (IndRAGE / CoKernelFC within 5% "
                     "of 1)", [FC["rank5"]], "CoKernelFC", ["IndRAGE"], "samples", relation="ratio", target=1.0,
                     tolerance=0.05, where="Sec. 6, Fig. 2c", quote="CoKernelFC performs similar to IndRAGE"),
        claims.trend_x("cope-kb", "The more similar the tasks, the higher the speed-up: IndRAGE / CoKernelFC falls from "
                       "(a) to (b) to (c) at every Delta_min", list(FC.values()), "CoKernelFC", "IndRAGE", "samples",
                       where="Sec. 6", quote="the more tasks are similar, the higher learning speedup agents attain"),
        claims.per_x("cope-kb", "In cases (a) and (b) CoKernelFC has the best sample complexity: fewer samples than the "
                     "independent baselines and the local-allocation ablation, at every Delta_min",
                     [FC["rank1"], FC["rank2"]], "CoKernelFC", _INDEPENDENT_FC, "samples", where="Sec. 6, Figs. 2a, 2b",
                     quote="CoKernelFC achieves the best sample complexity"),
        claims.per_x("cope-kb", "Identical tasks (a): CoKernelFB has a lower error probability than the independent "
                     "baselines at every budget (CoKernelFB-IndAlloc is CoKernelFB itself when the tasks are one, and "
                     "is left out)", [FB["rank1"]], "CoKernelFB", _OTHERS_FB[1:], "error", where="App. A, Fig. 3a",
                     quote="our CoKernelFB enjoys a lower error probability than the baselines"),
        claims.per_x("cope-kb", "Similar tasks (b): CoKernelFB has a lower error probability than the baselines and "
                     "the local-allocation ablation at every budget", [FB["rank2"]], "CoKernelFB", _OTHERS_FB, "error",
                     where="App. A, Fig. 3b", quote="our CoKernelFB enjoys a lower error probability than the "
                                                    "baselines"),
        claims.trend_x("cope-kb", "From (a) to (c) CoKernelFB's error gets closer and closer to IndPeaceFB's: the gap "
                       "shrinks at every budget", list(FB.values()), "CoKernelFB", "IndPeaceFB", "error",
                       where="App. A, Figs. 3a-3c", quote="the error probability of CoKernelFB gets closer and closer "
                                                          "to that of the single-agent adaption IndPeaceFB"),
        claims.per_x("cope-kb", "Different tasks (c): CoKernelFB's error is level with IndPeaceFB's at every budget",
                     [FB["rank5"]], "CoKernelFB", ["IndPeaceFB"], "error", relation="level", margin=0.1,
                     origin="spec", where="App. A, Fig. 3c, the end point of the trend"),
        claims.per_x("cope-kb", "CoKernelFC names the best arms as reliably as IndRAGE (fixed confidence, delta = "
                     "0.005): their success rates level at every Delta_min", list(FC.values()), "CoKernelFC",
                     ["IndRAGE"], "correct", relation="level", margin=0.05, origin="library"),
    )))
