"""Plots of stored results: cumulative regret with standard-error bands, and communication."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .results import (curve_family, derived_rows, load_results, outcome_rows, shown_curves, step_axis,
                      summary_rows, with_ddof)


def plot_results(out_dir, filename: str = "plot.png") -> Path:
    """Write `plot.png` in `out_dir`: cumulative regret (mean +- SE over seeds, or +- std where the
    experiment's band is "std") against t, and,
    when any algorithm communicates, cumulative scalars communicated against t on a log axis and
    final regret against total communication. Where the experiment names a tag x (`Experiment.x`,
    e.g. N), a last panel draws final regret against x (mean +- SE), one series per set of other tags,
    as FN-UCB's Fig. 6.
    An algorithm run over a hyper-parameter grid is drawn at its chosen point only (the summary
    lists every point). Phase-level results get one panel per outcome instead (`draw_outcomes`)."""
    return save_figure(lambda: draw_results(load_results(out_dir)), Path(out_dir) / filename)


def draw_results(res):
    """The matplotlib figure of `plot_results` for loaded results (each curve one color in every panel)."""
    import matplotlib
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401  (the N panel's tick formatter)

    if "outcomes" in res.metadata:
        return draw_outcomes(res)
    algorithms = shown_curves(res)
    comm = communication(res, algorithms)
    any_comm = any(float(c.sum()) > 0 for c in comm.values())
    final = {row["algorithm"]: row for row in summary_rows(res)}  # final regret mean and SE per curve
    x = res.metadata.get("x", "")
    against = final_against_tag(res, x, final) if x else {}
    panels = (3 if any_comm else 1) + (1 if against else 0)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if len(algorithms) > len(cycle):  # more curves than the cycle (a D sweep): distinct colours, not repeats
        cycle = [plt.get_cmap("tab20")(k) for k in range(20)]
    color = {alg: cycle[k % len(cycle)] for k, alg in enumerate(algorithms)}  # the same in every panel
    fig, axes = plt.subplots(1, panels, figsize=(5.4 * panels + 1.1, 4.2), squeeze=False)
    draw_regret(axes[0, 0], res, algorithms, color)
    if any_comm:
        draw_communication(axes[0, 1], comm, color, step_axis(res))
        ax = axes[0, 2]  # the trade-off: one point per curve that communicates
        points = [(float(np.sum(comm[alg].astype(np.float64), axis=1).mean()), final[alg]["final_regret_mean"], alg)
                  for alg in algorithms]
        points = sorted(p for p in points if p[0] > 0)
        for k, (total, regret, alg) in enumerate(points):
            ax.scatter([total], [regret], label=alg, color=color[alg])
            # neighbours along x take turns above and below their point, so close labels do not overprint
            ax.annotate(alg, (total, regret), xytext=(4, (4, -9, 13)[k % 3]), textcoords="offset points",
                        fontsize=6, alpha=0.8)
        ax.set_xscale("log")
        if points:  # room on the right for the last label
            ax.set_xlim(points[0][0] / 1.6, points[-1][0] * 6.0)
        ax.set_xlabel("total scalars communicated")
        ax.set_ylabel("final cumulative regret")
        ax.set_title("regret against communication")
        ax.grid(alpha=0.3)
    if against:
        ax = axes[0, panels - 1]
        for label, (values, means, ses) in against.items():
            ax.errorbar(values, means, yerr=np.nan_to_num(ses), marker="o", capsize=3, label=label)  # no bar from one seed
        values = sorted({v for vs, _, _ in against.values() for v in vs})
        if min(values) > 0 and max(values) / min(values) > 20:
            ax.set_xscale("log")
        ax.set_xticks(values)
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel(x)
        ax.set_ylabel("final cumulative regret")
        ax.set_title(f"final regret against {x}")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_figure(out_dirs, path, rows: int = 0, se_ddof: int | None = None) -> Path:
    """Write one figure of several results folders to `path`: a column per folder, cumulative regret
    against t above and cumulative communication against t below (the layout of the DUETS paper's
    Figure 1, four functions in eight panels). An algorithm has the same colour in every panel.
    rows > 0: regret panels only, the folders in order filling `rows` rows (Coop-KernelUCB's Figure 1:
    rows = 2, the four linear panels then the four RBF ones). se_ddof: the ddof of every band's std in
    place of each experiment's own (the reproduction pages use 1 throughout)."""
    results = lambda: [with_ddof(load_results(d), se_ddof) for d in out_dirs]  # noqa: E731
    if rows:
        return save_figure(lambda: draw_regret_grid(results(), rows), Path(path))
    return save_figure(lambda: draw_figure(results()), Path(path))


def save_figure(draw, path: Path) -> Path:
    """Write the figure that draw() returns to path (PNG, off-screen backend) and free it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def draw_figure(results):
    """The matplotlib figure of `plot_figure` for loaded results (axes [2, len(results)]); phase-level
    results with declared panels get a column each and a row per panel (e.g. CoPE-KB's Figure 2 from
    results/cope_fc-rank{1,2,5}/paper)."""
    import matplotlib.pyplot as plt

    if all(res.metadata.get("panels") for res in results):
        rows = max(len(res.metadata["panels"]) for res in results)
        fig, axes = plt.subplots(rows, len(results), figsize=(5.0 * len(results), 4.0 * rows), squeeze=False)
        for col, res in enumerate(results):
            for row, panel in enumerate(res.metadata["panels"]):
                draw_outcome_panel(axes[row, col], res, *panel)
        fig.tight_layout()
        return fig

    color = family_colors(results)
    fig, axes = plt.subplots(2, len(results), figsize=(4.6 * len(results), 7.4), squeeze=False)
    for col, res in enumerate(results):
        algorithms = shown_curves(res)
        draw_regret(axes[0, col], res, algorithms, color)
        draw_communication(axes[1, col], communication(res, algorithms), color, step_axis(res))
    fig.tight_layout()
    return fig


def draw_regret_grid(results, rows: int):
    """Regret panels of `results` in `rows` rows, filled row by row, one colour per curve family."""
    color = family_colors(results)
    fig, axes = panel_grid(len(results), rows, -(-len(results) // rows), (4.6, 3.9))
    for ax, res in zip(axes, results):
        draw_regret(ax, res, shown_curves(res), color)
    fig.tight_layout()
    return fig


def panel_grid(count: int, rows: int, cols: int, size: tuple):
    """A figure of `rows` x `cols` panels of `size` = (width, height) inches each, filled row by row
    with `count` panels; the ones left over are hidden. Returns (fig, [count] axes)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def family_colors(results) -> dict:
    """{curve: colour}, the same colour for a curve family in every folder."""
    import matplotlib.pyplot as plt

    shown = [(a, curve_family(res, a)) for res in results for a in shown_curves(res)]
    families = list(dict.fromkeys(f for _, f in shown))  # a grid's chosen point may differ per folder
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {alg: cycle[families.index(f) % len(cycle)] for alg, f in shown}


def communication(res, algorithms) -> dict:
    """{algorithm: scalars up + down per run and step [S, T]}."""
    return {a: res.arrays[a]["comm_up"] + res.arrays[a]["comm_down"] for a in algorithms}


def draw_regret(ax, res, algorithms, color):
    """Cumulative regret against t on ax: mean and a band of +- SE over runs (+- std where the
    experiment's band is "std")."""
    ddof = int(res.metadata.get("se_ddof", 0))
    for alg in algorithms:
        cum = res.cumulative(alg)
        mean = cum.mean(axis=0)
        n = cum.shape[0]
        if res.metadata.get("band") == "std":
            spread = cum.std(axis=0, ddof=ddof)
        else:
            spread = cum.std(axis=0, ddof=ddof) / np.sqrt(n) if n > ddof else np.zeros_like(mean)
        t = step_axis(res)
        ax.plot(t, mean, label=alg, color=color[alg])
        ax.fill_between(t, mean - spread, mean + spread, alpha=0.2, color=color[alg])
    agents = res.metadata.get("agents", "mean")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("cumulative regret" + (" (mean over agents)" if agents == "mean" else " (sum over agents)"))
    ax.set_title(plot_title(res.metadata), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def draw_communication(ax, comm, color, t):
    """Mean cumulative scalars communicated against the steps t (`step_axis`) on a log axis, for the
    curves that communicate."""
    for alg, c in comm.items():
        total = np.cumsum(c.astype(np.float64), axis=1).mean(axis=0)
        if total[-1] > 0:
            ax.plot(t, total, label=alg, color=color[alg])
    ax.set_yscale("log")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("cumulative scalars communicated")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def draw_outcomes(res):
    """Phase-level results: one panel per declared outcome (error probability, sample complexity,
    ...), each curve a point with its 95% interval (`results.interval95`); where the experiment
    declares `panels` and an x tag, its panels against x instead (`draw_outcome_panel`)."""
    import matplotlib.pyplot as plt

    if res.metadata.get("panels") and res.metadata.get("x"):
        panels = res.metadata["panels"]
        fig, axes = plt.subplots(1, len(panels), figsize=(5.0 * len(panels) + 1.0, 4.4), squeeze=False)
        for ax, panel in zip(axes[0], panels):
            draw_outcome_panel(ax, res, *panel)
        fig.suptitle(plot_title(res.metadata))
        fig.tight_layout()
        return fig
    outcomes = res.metadata["outcomes"]
    rows = outcome_rows(res)
    fig, axes = plt.subplots(1, len(outcomes), figsize=(4.2 * len(outcomes) + 1.0, 4.4), squeeze=False)
    for ax, (name, declared) in zip(axes[0], outcomes.items()):
        shown = [(k, row) for k, row in enumerate(rows) if name in row]
        est = np.array([row[name][0] for _, row in shown])
        low = np.array([row[name][1] for _, row in shown])
        high = np.array([row[name][2] for _, row in shown])
        yerr = np.nan_to_num(np.stack([est - low, high - est]))  # no bar from a single trial
        ax.errorbar([k for k, _ in shown], est, yerr=yerr, fmt="o", capsize=3)
        ax.set_xticks([k for k, _ in shown])
        ax.set_xticklabels([row["algorithm"] for _, row in shown], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(f"{name} ({'proportion' if declared['kind'] == 'rate' else 'mean'}, 95% interval)")
        ax.set_title(declared["description"], fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(plot_title(res.metadata))
    fig.tight_layout()
    return fig


def tag_series(res, algorithms, x: str) -> dict:
    """{series label: [(x value, curve), ...] sorted by x} for the curves whose tags hold `x`: curves with
    the same other tags form one series (its label those tags' values), and a series needs at least
    two x values. A grid point's hyper-parameters are tags too, so a grid is swept like any other."""
    tags = res.metadata.get("tags", {})
    series: dict = {}
    for curve in algorithms:
        own = tags.get(curve, {})
        if x not in own:
            continue
        rest = {k: v for k, v in own.items() if k != x}
        label = ", ".join(f"{v}" if k == "method" else f"{k}={v}" for k, v in sorted(rest.items())) or x
        series.setdefault(label, []).append((own[x], curve))
    return {label: sorted(m) for label, m in series.items() if len({v for v, _ in m}) > 1}


def final_against_tag(res, x: str, final: dict) -> dict:
    """{series label: (x values, final regret means, standard errors)} of the panel "final regret
    against x" (`tag_series` over the shown curves), read from the summary rows `final` {curve: row}."""
    out = {}
    for label, members in tag_series(res, shown_curves(res), x).items():
        out[label] = ([v for v, _ in members], [final[c]["final_regret_mean"] for _, c in members],
                      [final[c]["final_regret_se"] for _, c in members])
    return out


def outcome_series(res, outcome: str, how: str) -> dict:
    """{series label: (x values, estimates, lows, highs)} of one outcome against the experiment's x tag,
    derived curves included; how "error" turns a rate into 1 - rate (its interval flipped)."""
    x = res.metadata["x"]
    rows = {row["algorithm"]: row for row in outcome_rows(res)}
    tags = dict(res.metadata.get("tags", {}))
    for row, own in derived_rows(res):
        rows[row["algorithm"]] = row
        tags[row["algorithm"]] = own
    series = tag_series(res._replace(metadata={**res.metadata, "tags": tags}), list(rows), x)
    out = {}
    for label, members in series.items():
        points = [(v, rows[c][outcome]) for v, c in members if outcome in rows[c]]
        if not points:
            continue
        if how == "error":
            points = [(v, (1.0 - e, 1.0 - h, 1.0 - lo)) for v, (e, lo, h) in points]
        out[label] = tuple(np.array(col) for col in zip(*[(v, *est) for v, est in points]))
    return out


def draw_outcome_panel(ax, res, outcome: str, how: str, yscale: str):
    """One outcome against the x tag on ax: a line per method with its 95% interval as a band (log y
    clipped at a floor for zero error rates)."""
    import matplotlib.ticker

    declared = res.metadata["outcomes"][outcome]
    derived = {d[0] for d in res.metadata.get("derived", [])}
    for label, (xs, est, low, high) in outcome_series(res, outcome, how).items():
        line = ax.plot(xs, est, marker="o", label=label, linestyle="--" if label in derived else "-")[0]
        ax.fill_between(xs, np.nan_to_num(low, nan=est), np.nan_to_num(high, nan=est), alpha=0.15,
                        color=line.get_color())
    values = sorted({v for s in outcome_series(res, outcome, how).values() for v in s[0]})
    if values and min(values) > 0 and max(values) / min(values) > 20:
        ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-2) if (yscale == "log" and how == "error") else ax.set_yscale(yscale)
    if values:
        ax.set_xticks(values)
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.tick_params(axis="x", labelsize=7)
    name = "error probability (1 - correct)" if how == "error" else outcome
    ax.set_xlabel(res.metadata["x"])
    ax.set_ylabel(f"{name}, 95% interval")
    ax.set_title(f"{res.metadata.get('experiment', '')}: {declared['description'] if how != 'error' else name}",
                 fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def plot_title(metadata: dict) -> str:
    """The experiment's name, and on a second line each stand-in data set its problems use
    (`Problem.info["stand_in"]`), so that a figure never passes a stand-in off as the real data."""
    stand_ins = sorted({info["stand_in"] for info in metadata.get("problem_info", {}).values() if "stand_in" in info})
    return "\n".join([metadata.get("experiment", "")] + [f"stand-in: {s}" for s in stand_ins])
