"""The arena's page, figures and per-seed table, computed from an arena folder or its record.

    rows = problem_rows(res, arena, "cosine")      one row per pair of the problem, ranked
    write_pages(folder, to, suffix)                 arena.md, its figures and arena.csv into `to`
    write_arena_page(folder, docs)                  the committed record and docs/arena.md from it

An operating point is one run setting of a pair on the reported seeds: "default" (registered defaults,
the x1 point of its exploration grid), "tuned" (the point its tuning chose) and, for an algorithm that
declares a communication knob, one point per knob value at the tuned exploration. A run with error bits
on any seed "failed": it never ranks and is never on a front. Every statistic is paired over the seeds
the arena runs every algorithm of a problem on (`arena_stats`).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from .arena import ARENA_FILE, KNOB_TAG, factor_label, read_arena
from .arena_stats import iqm, mean_interval, paired_interval, pareto_front, ranks, win_rate
from .core import ConfigError
from .reporting.results import (REPAIR, atomic_write_text, check_folder, load_checked, load_results, step_axis,
                                total_communication)


# ------------------------------------------------------------------------------ per-seed numbers
def per_seed(res, curve: str) -> dict:
    """{"final" [S], "comm" [S], "failed" [S] bool} of a stored curve: final cumulative regret (the mean
    over agents), total communication and whether the run carries error bits."""
    if curve not in res.arrays:
        raise ConfigError(f"the arena's results hold no curve {curve!r}; {REPAIR}")
    return {"final": res.cumulative(curve)[:, -1], "comm": total_communication(res, curve),
            "failed": np.asarray(res.arrays[curve]["errors"]) != 0}


def point_curves(pair: dict) -> dict:
    """{"default", "tuned": stored curve, "knob": [(label, stored curve)]} of a pair record."""
    name = f"{pair['problem']}: {pair['algorithm']}"
    explore = (lambda f: f"{name} [{factor_label(f)}]") if pair["exploration"] else (lambda f: name)
    knob = []
    if pair["knob"]:
        knob = [(label, f"{name}{KNOB_TAG} [{label}]") for label in pair["knob_labels"]]
    return {"default": explore(1.0), "tuned": explore(pair["factor"]), "knob": knob}


def problem_rows(res, arena: dict, problem: str) -> list:
    """One row per pair of `problem`: default and tuned regret (mean with its 95% interval, median, IQM),
    the tuning score, failures, communication, rank among the sound rows (1 = lowest mean tuned regret;
    ties share), the paired difference to the best sound row with its interval, and whether one of its
    operating points is on the problem's Pareto front (tuned regret against communication)."""
    rows = []
    for pair in (p for p in arena["pairs"] if p["problem"] == problem):
        curves = point_curves(pair)
        default, tuned = per_seed(res, curves["default"]), per_seed(res, curves["tuned"])
        points = [("tuned", tuned)] if not pair["knob"] else [(lab, per_seed(res, c)) for lab, c in curves["knob"]]
        rows.append({"algorithm": pair["algorithm"], "adapter": pair["adapter"], "status": pair["status"],
                     "factor": pair["factor"], "tuning": pair["scores"].get(f"{pair['factor']:g}", [np.nan])[0],
                     "default": mean_interval(default["final"]), "tuned": mean_interval(tuned["final"]),
                     "median": float(np.median(tuned["final"])), "iqm": iqm(tuned["final"]),
                     "final": tuned["final"], "comm": float(tuned["comm"].mean()),
                     "failed": int(tuned["failed"].sum()), "default_failed": int(default["failed"].sum()),
                     "seeds": len(tuned["final"]), "points": points})
    sound = [r for r in rows if not r["failed"]]
    for r, rank in zip(sound, ranks([r["tuned"][0] for r in sound])):
        r["rank"] = rank
    best = min(sound, key=lambda r: r["tuned"][0]) if sound else None
    for r in sound:
        r["versus_best"] = paired_interval(r["final"], best["final"])
        r["best"] = r is best
    _mark_front(rows)
    return sorted(rows, key=lambda r: (r.get("rank", np.inf), r["algorithm"]))


def _mark_front(rows: list) -> None:
    """Each row's "front": the labels of its operating points on the front over every sound operating
    point of the problem; a failed point takes no part."""
    points = [(r, label, p) for r in rows for label, p in r["points"] if not p["failed"].any()]
    on = pareto_front([(p["comm"].mean(), p["final"].mean()) for _, _, p in points]) if points else []
    for r in rows:
        r["front"] = [label for (owner, label, _), flag in zip(points, on) if owner is r and flag]


def rows_by_problem(res, arena: dict) -> dict:
    """{problem label: `problem_rows`}, each problem's rows computed once for a page and its figures."""
    return {p["label"]: problem_rows(res, arena, p["label"]) for p in arena["problems"]}


def win_matrix(rows: dict, arena: dict) -> tuple:
    """(labels, rates [A, A, 3]) from `rows_by_problem`: the win rate of row over column (rate, low, high)
    over the problems both run soundly and their seeds (NaN where they share none), from the tuned runs."""
    finals = {}
    for problem, rows_ in rows.items():
        for r in rows_:
            if not r["failed"]:
                finals.setdefault(r["algorithm"], {})[problem] = r["final"]
    labels = [a["label"] for a in arena["algorithms"] if a["label"] in finals]
    rates = np.full((len(labels), len(labels), 3), np.nan)
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            shared = [p for p in finals[a] if p in finals[b]]
            if i != j and shared:
                rates[i, j] = win_rate([finals[a][p] for p in shared], [finals[b][p] for p in shared])
    return labels, rates


def overall_rows(rows_by: dict, arena: dict) -> list:
    """One row per algorithm (from `rows_by_problem`): problems it runs soundly of those it fits, and how
    many of the others it beats, loses to, or ties with (the 95% interval of the pairwise win rate above
    1/2, below it, or holding it), over what each pair shares; sorted by beats minus losses."""
    labels, rates = win_matrix(rows_by, arena)
    rows = []
    for i, a in enumerate(labels):
        pairs = [p for p in arena["pairs"] if p["algorithm"] == a]
        sound = sum(1 for rows_ in rows_by.values() for r in rows_ if r["algorithm"] == a and not r["failed"])
        low, high = rates[i, :, 1], rates[i, :, 2]
        compared = np.isfinite(low)
        rows.append({"algorithm": a, "fits": len(pairs), "sound": sound, "compared": int(compared.sum()),
                     "beats": int((low[compared] > 0.5).sum()), "loses": int((high[compared] < 0.5).sum())})
    return sorted(rows, key=lambda r: (r["loses"] - r["beats"], r["algorithm"]))


# ------------------------------------------------------------------------------ the page
DEFINITIONS = [
    "**final regret**: the cumulative pseudo-regret after the last step, the mean over agents, per seed.",
    "**mean [low, high]**: the mean over the reported seeds and its 95% percentile-bootstrap interval "
    "(2,000 resamples of the seeds).",
    "**median**, **IQM**: the median and the interquartile mean (the mean of the middle half) over seeds.",
    "**default**: the registered defaults; **tuned**: the exploration factor its tuning chose (x1 = the "
    "defaults); **tuning score**: the mean final regret of that point on the tuning seeds.",
    "**failed k/S**: k of the S reported seeds ended with error bits; a failed row is not ranked and none of "
    "its points is on a front.",
    "**rank**: by mean tuned final regret among the sound rows of the problem (1 = lowest, ties share).",
    "**vs best [low, high]**: the mean seed-by-seed difference to the best sound row (paired: the same seeds "
    "and random numbers) and its 95% bootstrap interval; an interval that holds 0 is a tie with the best.",
    "**communication**: the total over agents and steps, in the unit stated above, the mean over seeds, at the "
    "tuned point (at the knob's default).",
    "**operating point**: one run setting of a pair; an algorithm with a communication knob has one per knob "
    "value, at its tuned exploration.",
    "**front**: the operating points no other sound point of the problem beats in both mean communication and "
    "mean final regret.",
    "**win rate of A over B**: the share of (problem, seed) pairs, over the problems both run soundly, where "
    "A's tuned final regret is lower (ties count 1/2), with a 95% bootstrap interval (seeds resampled within "
    "each problem); **beats / loses / ties**: how many others it beats (interval above 1/2), loses to (below) "
    "or neither, each comparison over what the two share; no mean is taken over different problem sets.",
]


def arena_page(folder, suffix: str = "") -> str:
    """docs/arena.md of an arena folder or its record (figures named with `suffix`, e.g. "-small")."""
    folder = Path(folder)
    return page_text(load_results(folder), read_arena(folder), suffix)


def page_text(res, arena: dict, suffix: str = "", rows_by=None) -> str:
    """The page of loaded results and arena.json: terms, definitions, problems, fit matrix, declarations,
    the overall table, a table per problem, the audits and the timing, every number computed here
    (`rows_by`: `rows_by_problem`, where the caller has it)."""
    md, dims = res.metadata, arena["dims"]
    rows_by = rows_by_problem(res, arena) if rows_by is None else rows_by
    fig = "arena/" if suffix else ""
    lines = [f"# The arena ({arena['size']})", "",
             f"Every registered regret algorithm on every benchmark problem it fits, on equal terms: the same "
             f"reported seeds (0 to {dims['seeds'] - 1}) and random numbers, the problem's instance included, for "
             f"every algorithm of a problem; exploration tuned on {dims['tuning_seeds']} tuning seeds from "
             f"{arena['tuning_first_seed']} over the factors {', '.join(f'{f:g}' for f in arena['factors'])} of "
             f"each declared exploration parameter (one step further where an edge wins); T = {dims['horizon']} "
             f"steps. Communication is counted in **{arena['comm_unit']}**: every copy of a scalar that reaches an "
             f"agent or the server counts once (docs/design.md). Generated by `bandits-jax report --arena` from "
             f"the record in `docs/arena/data`; every seed's numbers are in `{fig}arena{suffix}.csv`.", "",
             _provenance(md), "", "## Definitions", "", *[f"- {d}" for d in DEFINITIONS], "",
             f"![Regret against communication]({fig}pareto{suffix}.png)", "", "## Problems", "",
             "| problem | family | spec | its family's algorithms there |", "|---|---|---|---|"]
    lines += [f"| {p['label']} | {p['family']} | `{p['spec']}` | {_setting_text(p.get('setting'))} |"
              for p in arena["problems"]]
    lines += [f"- {s}" for s in arena["skipped"]]
    lines += ["", *_fit_lines(arena), "", *_declaration_lines(arena), "", "## Overall", "",
              f"![Pairwise win rates]({fig}winrate{suffix}.png)", "",
              "| algorithm | problems fit | run soundly | compared with | beats | loses to | ties |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['algorithm']} | {r['fits']} | {r['sound']} | {r['compared']} | {r['beats']} | {r['loses']} | "
              f"{r['compared'] - r['beats'] - r['loses']} |" for r in overall_rows(rows_by, arena)]
    for p in arena["problems"]:
        lines += ["", *_problem_lines(p["label"], rows_by[p["label"]])]
    lines += ["", f"![Learning curves]({fig}learning{suffix}.png)", ""]
    lines += _audit_lines(arena) + _timing_lines(arena["timing"], len(md.get("cached", {})), len(md["algorithms"]))
    return "\n".join(lines) + "\n"


def _problem_lines(problem: str, rows: list) -> list:
    lines = [f"## {problem}", "", "| rank | algorithm | default | tuned | median | IQM | vs best | factor "
             "(tuning score) | communication | failed | front |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        vs = "best" if r.get("best") else _interval(r["versus_best"]) if "versus_best" in r else "-"
        factor = (f"{r['factor']:g} ({r['tuning']:.3f})" if r["status"] == "tuned" else r["status"])
        name = r["algorithm"] + (f" (via {r['adapter']})" if r["adapter"] else "")
        failed = f"{r['failed']}/{r['seeds']}" if r["failed"] else "-"
        lines.append(f"| {r.get('rank', 'not ranked'):g} | {name} | {_interval(r['default'])} | {_interval(r['tuned'])} | "
                     f"{r['median']:.3f} | {r['iqm']:.3f} | {vs} | {factor} | {r['comm']:.4g} | {failed} | "
                     f"{', '.join(r['front']) or ''} |" if "rank" in r else
                     f"| not ranked | {name} | {_interval(r['default'])} | {_interval(r['tuned'])} | {r['median']:.3f} "
                     f"| {r['iqm']:.3f} | - | {factor} | {r['comm']:.4g} | failed {failed} | |")
    return lines


def _interval(stat) -> str:
    return f"{stat[0]:.3f} [{stat[1]:.3f}, {stat[2]:.3f}]"


def _provenance(md: dict) -> str:
    versions = md.get("versions", {})
    return (f"_Computed at commit {str(md.get('commit', ''))[:12] or 'not recorded'} with bandits_jax "
            f"{versions.get('bandits_jax', '?')} and jax {versions.get('jax', '?')} on "
            f"{', '.join(md.get('devices', [])) or '?'}._")


def _setting_text(setting) -> str:
    """'a, b: `kernel=rbf`, ...; c: ...' for a problem's family setting (names that share their options
    together), '-' for none."""
    groups = {}
    for name, options in setting or ():
        groups.setdefault(tuple(sorted(options.items())), []).append(name)
    return "; ".join(", ".join(names) + ": " + ", ".join(f"`{k}={v:g}`" if isinstance(v, float) else f"`{k}={v}`"
                                                          for k, v in options)
                     for options, names in groups.items()) or "-"


def _fit_lines(arena: dict) -> list:
    """The fit matrix as markdown: "fits", the adapter a pair fits through, or a misfit whose reason is
    given once and cited by number."""
    problems = [p["label"] for p in arena["problems"]]
    adapted = {(p["problem"], p["algorithm"]): p["adapter"] for p in arena["pairs"]}
    reasons: list = []
    lines = ["## Fit matrix", "", "A cell names the adapter a pair fits through, where it needs one.", "",
             "| algorithm | " + " | ".join(problems) + " |", "|---|" + "---|" * len(problems)]
    for a in arena["algorithms"]:
        cells = []
        for p in problems:
            why = arena["fits"][p][a["label"]]
            if not why:
                cells.append(f"via {adapted[(p, a['label'])]}" if adapted.get((p, a["label"])) else "fits")
                continue
            why = why.split(": ", 1)[-1].replace(f" {p} has ", " the problem has ")
            if why not in reasons:
                reasons.append(why)
            cells.append(f"- ({reasons.index(why) + 1})")
        lines.append(f"| {a['label']} | " + " | ".join(cells) + " |")
    total = len(problems) * len(arena["algorithms"])
    fit = sum(not w for row in arena["fits"].values() for w in row.values())
    return lines + ["", f"{fit} of {total} pairs fit ({100 * fit / total:.0f}%)."] + \
        [f"{i}. {why}" for i, why in enumerate(reasons, 1)]


def _declaration_lines(arena: dict) -> list:
    lines = ["## Declarations", "", "What each algorithm's registry entry lets the arena tune.", "",
             "| algorithm | exploration (defaults) | communication knob: values |", "|---|---|---|"]
    for a in arena["algorithms"]:
        explore = ", ".join(f"{k} = {a['defaults'][k]:g}" for k in a["exploration"]) or "none declared"
        knob = a["knob"]
        knob_text = (f"{knob['param']}{' (a problem option)' if knob['on'] == 'problem' else ''}: "
                     f"{', '.join(f'{v:g}' for v in knob['values'])}" if knob else a.get("note") or "none")
        lines.append(f"| {a['label']} | {explore} | {knob_text} |")
    return lines


def _audit_lines(arena: dict) -> list:
    if not arena["audits"]:
        return []
    return ["## Information-flow audit", ""] + [f"- {a}: {text}" for a, text in arena["audits"].items()] + [""]


def _timing_lines(t: dict, cached: int, curves: int) -> list:
    """The Time section; `cached` of the reported phase's `curves` came from the curve cache, whose chunks
    keep the seconds of the call that computed them (`sweep._seconds_of`) in a record whose timing says
    `cached_seconds`, and count 0 s in an older one."""
    kept = ("their chunks keep the seconds of the call that computed them" if t.get("cached_seconds") else
            "a chunk taken from it counts 0 s here: its seconds belong to the call that computed it")
    from_cache = (f" {cached} of the {curves} reported curves were taken from the curve cache; {kept}."
                  if cached else "")
    return ["## Time", "",
            f"The stored results took {t['compile_seconds']:.0f} s compiling and {t['run_seconds']:.0f} s running "
            f"(every chunk of every phase, whichever call computed it).{from_cache} The last call took "
            f"{t['wall_seconds']:.0f} "
            f"s of wall-clock time, the fit checks, tracing, building problems and writing included; it compiled "
            f"{t['compiled']} programs and loaded {t['loaded']} from the persistent compilation cache "
            f"({'on' if t['compile_cache'] else 'off'})."]


# ------------------------------------------------------------------------------ the per-seed table
def seed_table(res, arena: dict) -> str:
    """CSV, one line per (pair, operating point, seed): problem, algorithm, adapter, point, factor, knob,
    knob_value, seed, final_regret, communication, failed."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["problem", "algorithm", "adapter", "point", "factor", "knob", "knob_value", "seed",
                  "final_regret", "communication", "failed"])
    knobs = {a["label"]: a["knob"] for a in arena["algorithms"]}
    for pair in arena["pairs"]:
        curves = point_curves(pair)
        knob = knobs[pair["algorithm"]]
        settings = [("default", 1.0, curves["default"], ""), ("tuned", pair["factor"], curves["tuned"], "")]
        settings += [(label, pair["factor"], curve, label.split("=", 1)[1]) for label, curve in curves["knob"]]
        for point, factor, curve, value in settings:
            numbers = per_seed(res, curve)
            for s, seed in enumerate(res.seeds):
                out.writerow([pair["problem"], pair["algorithm"], pair["adapter"], point, f"{factor:g}",
                              knob["param"] if value else "", value, int(seed), f"{numbers['final'][s]:.6g}",
                              f"{numbers['comm'][s]:.6g}", int(numbers["failed"][s])])
    return buf.getvalue()


# ------------------------------------------------------------------------------ figures
def _colours(arena: dict) -> dict:
    """{algorithm label: colour}, the same in every panel and figure (tab20, in the arena's order)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    return {a["label"]: cmap(i % 20) for i, a in enumerate(arena["algorithms"])}


def plot_pareto(rows_by: dict, arena: dict, path) -> Path:
    """One panel per problem: each sound pair's operating points (a line through a knob's points), mean
    final regret against mean communication with 95% bootstrap intervals in both directions, and the
    front drawn as the staircase it bounds, its points named."""
    from .reporting.plotting import panel_grid, save_figure

    def draw():
        problems = arena["problems"]
        cols = min(2, len(problems))
        fig, axes = panel_grid(len(problems), -(-len(problems) // cols), cols, (6.5, 4.6))
        colour = _colours(arena)
        for ax, p in zip(axes, problems):
            front = []
            for r in rows_by[p["label"]]:
                pts = [(lab, q) for lab, q in r["points"] if not q["failed"].any()]
                if not pts:
                    continue
                x = np.array([mean_interval(q["comm"] + 1.0) for _, q in pts])
                y = np.array([mean_interval(q["final"]) for _, q in pts])
                ax.errorbar(x[:, 0], y[:, 0], xerr=np.abs(x[:, 1:].T - x[:, 0]), yerr=np.abs(y[:, 1:].T - y[:, 0]),
                            fmt="o-" if len(pts) > 1 else "o", ms=3, lw=0.8, elinewidth=0.5,
                            color=colour[r["algorithm"]], alpha=0.8, label=r["algorithm"])
                front += [(x[i, 0], y[i, 0], f"{r['algorithm']} {lab}" if r["points"][0][0] != "tuned" else
                           r["algorithm"]) for i, (lab, _) in enumerate(pts) if lab in r["front"]]
            front.sort()
            if front:
                fx, fy, names = zip(*front)
                ax.plot(fx, fy, "-", color="k", lw=1.2, drawstyle="steps-post", label="Pareto front")
                for k, (xx, yy, name) in enumerate(front):
                    ax.annotate(name, (xx, yy), fontsize=6, textcoords="offset points",
                                xytext=(4, 4 if k % 2 == 0 else -10))
            ax.set_xscale("log")
            ax.set_xlabel(f"communication + 1 ({arena['comm_unit']})")
            ax.set_ylabel("final cumulative regret")
            ax.set_title(p["label"])
            ax.legend(fontsize=5, ncol=2)
        fig.tight_layout()
        return fig

    return save_figure(draw, Path(path))


def plot_win_rates(rows_by: dict, arena: dict, path) -> Path:
    """The pairwise win-rate matrix as a heat map (row over column; blank where two share no problem),
    a cell marked where its interval excludes 1/2."""
    from .reporting.plotting import save_figure

    labels, rates = win_matrix(rows_by, arena)

    def draw():
        import matplotlib.pyplot as plt

        n = len(labels)
        fig, ax = plt.subplots(figsize=(2 + 0.32 * n, 1.5 + 0.3 * n))
        image = ax.imshow(rates[:, :, 0], vmin=0, vmax=1, cmap="RdBu")
        for i in range(n):
            for j in range(n):
                if np.isfinite(rates[i, j, 1]) and (rates[i, j, 1] > 0.5 or rates[i, j, 2] < 0.5):
                    ax.text(j, i, "*", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.set_title("win rate of row over column (*: 95% interval excludes 1/2)", fontsize=8)
        fig.colorbar(image, ax=ax, shrink=0.6)
        fig.tight_layout()
        return fig

    return save_figure(draw, Path(path))


def plot_learning(res, rows_by: dict, arena: dict, path) -> Path:
    """Regret (top row) and communication (bottom row) against t, one column per problem: every sound
    pair's tuned run, the mean over seeds with a band of +-1.96 standard errors."""
    from .reporting.plotting import panel_grid, save_figure

    steps = step_axis(res)

    def draw():
        problems = arena["problems"]
        n = len(problems)
        fig, axes = panel_grid(2 * n, 2, n, (5.0, 3.6))
        colour = _colours(arena)
        for col, p in enumerate(problems):
            for r in rows_by[p["label"]]:
                if r["failed"]:
                    continue
                pair = next(q for q in arena["pairs"] if q["problem"] == p["label"] and q["algorithm"] == r["algorithm"])
                curve = point_curves(pair)["tuned"]
                per = res.arrays[curve]
                comm = np.cumsum(per["comm_up"] + per["comm_down"], axis=1)
                for ax, y in ((axes[col], res.cumulative(curve)), (axes[n + col], comm)):
                    mean, se = y.mean(0), y.std(0, ddof=1) / np.sqrt(y.shape[0])
                    ax.plot(steps, mean, lw=0.8, color=colour[r["algorithm"]], label=r["algorithm"])
                    ax.fill_between(steps, mean - 1.96 * se, mean + 1.96 * se, color=colour[r["algorithm"]], alpha=0.15)
            axes[col].set_title(p["label"])
            axes[col].set_ylabel("cumulative regret")
            axes[n + col].set_ylabel(f"communication ({arena['comm_unit']})")
            axes[n + col].set_yscale("symlog")
            axes[n + col].set_xlabel("t")
        axes[0].legend(fontsize=5, ncol=2)
        fig.tight_layout()
        return fig

    return save_figure(draw, Path(path))


# ------------------------------------------------------------------------------ writing
def write_pages(folder, to, suffix: str) -> list:
    """Write arena.md, pareto/winrate/learning<suffix>.png and arena<suffix>.csv of an arena folder or
    record into `to`; returns the paths (the page named arena.md)."""
    folder, to = Path(folder), Path(to)
    res, arena = load_results(folder), read_arena(folder)
    page, rows_by = to / "arena.md", rows_by_problem(res, arena)
    atomic_write_text(page, page_text(res, arena, suffix, rows_by))
    figures = to / "arena" if suffix else to
    figures.mkdir(parents=True, exist_ok=True)
    atomic_write_text(figures / f"arena{suffix}.csv", seed_table(res, arena))
    return [page, figures / f"arena{suffix}.csv", plot_pareto(rows_by, arena, figures / f"pareto{suffix}.png"),
            plot_win_rates(rows_by, arena, figures / f"winrate{suffix}.png"),
            plot_learning(res, rows_by, arena, figures / f"learning{suffix}.png")]


def write_arena_page(folder, docs=Path("docs")) -> list:
    """Record an arena folder into docs/arena/data/arena-<size>/ (a record folder is taken as it is), and
    write docs/arena.md, its figures and its per-seed table from the record; returns the paths written.
    All of them change, or none: the folder is checked first (`read_arena`, `results.load_checked`,
    `arena._check_agreement`), and everything is made in a staging folder under docs/arena before one
    rename each puts it in place."""
    from .arena import _check_agreement
    from .reporting.records import record_name
    from .reporting.report import put, staging

    folder, docs = Path(folder), Path(docs)
    arena, res = read_arena(folder), load_checked(folder)
    _check_agreement(arena, res, folder / ARENA_FILE)
    is_record = "record" in res.metadata
    target = docs / "arena" / "data" / record_name(res.metadata["experiment"], res.metadata.get("size", ""))
    check_folder(target, "report --arena: the arena's record")
    (docs / "arena").mkdir(parents=True, exist_ok=True)
    suffix = f"-{arena['size']}"
    with staging(docs / "arena") as stage:
        record = folder if is_record else _stage_record(folder, stage)
        written = write_pages(record, stage, suffix)
        placed = [folder if is_record else target]
        if not is_record:
            for name in ("results.npz", "metadata.json", ARENA_FILE):
                put(record / name, target / name)
        placed.append(put(written[0], docs / "arena.md"))
        return placed + [put(p, docs / "arena" / p.name) for p in written[1:]]


def _stage_record(folder: Path, stage: Path) -> Path:
    """Write the record of an arena folder (20 checkpoints) with its arena.json into `stage`."""
    import shutil

    from .reporting.records import write_record

    record = write_record(folder, stage, checkpoints=20)
    shutil.copyfile(folder / ARENA_FILE, record / ARENA_FILE)
    return record
