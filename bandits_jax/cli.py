"""The `bandits-jax` command: list, show, run, arena, plot, report, bench.

    bandits-jax run NAME | FILE.toml | --problem SPEC --algorithm SPEC [--algorithm SPEC ...]
    bandits-jax arena --size small [--problem SPEC ...] [--algorithm SPEC ...] [--plugin MODULE ...]
    bandits-jax run NAME --coordinator HOST:PORT --num-processes P --process-id I   (each of P processes)

Bad input (an unknown experiment, algorithm or key, a malformed spec, a wrong type, a negative
lambda, K < 1, a missing data file, an algorithm that does not fit its problem) prints one line
naming the problem and exits with status 2 before anything is compiled.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import multihost
from ._cpu import cpu_guard
from .core import ConfigError


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: what is wrong, and where the usage is."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bandits-jax", description="Multi-agent kernel and neural bandits in JAX.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    lister = sub.add_parser("list", help="list the experiments (or the algorithms, or the problems), one per line")
    lister.add_argument("--algorithms", action="store_true", help="list the registered algorithms instead")
    lister.add_argument("--problems", action="store_true", help="list the registered problems instead")
    _plugin_flag(lister)
    run = sub.add_parser("run", help="run (or resume) an experiment, an experiment file, or algorithms on a problem")
    run.add_argument("name", nargs="?", help="a registered experiment, or an experiment file (.toml)")
    run.add_argument("--problem", metavar="NAME[:KEY=VALUE,...]",
                     help="run the --algorithm specs on this registered problem, without an experiment")
    run.add_argument("--algorithm", action="append", default=[], metavar="NAME[:KEY=VALUE,...]",
                     help="a registered algorithm with options (repeatable; with --problem)")
    run.add_argument("--size", help="smoke, paper or large where the experiment has it (default: paper; an "
                                    "experiment file's own size)")
    run.add_argument("--seeds", type=int, help="number of seeds S (runs seeds F..F+S-1)")
    run.add_argument("--first-seed", type=int, help="first seed F")
    run.add_argument("--horizon", type=int, help="number of steps T")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a configuration key")
    run.add_argument("--out", type=Path, help="output folder (default: results/<name>/<size>)")
    run.add_argument("--chunk", type=int, help="seeds per compiled call (default: estimated from memory)")
    run.add_argument("--quiet", action="store_true", help="no progress output")
    run.add_argument("--no-plot", action="store_true", help="skip the plot")
    run.add_argument("--check", action="store_true",
                     help="validate everything (configuration, curves, each curve's traced step, memory, folders), "
                          "print the plan and stop: no program of the run is compiled and nothing is written, the "
                          "compile cache included")
    run.add_argument("--curves", type=Path, metavar="DIR",
                     help="the curve cache: finished curves of any experiment, found again by what determines "
                          "them (default: $BANDITS_JAX_CURVES, else results/curves)")
    run.add_argument("--no-curve-cache", action="store_true", help="neither take curves from the cache nor add them")
    run.add_argument("--coordinator", metavar="HOST:PORT",
                     help="one sweep as several processes (JAX's multi-process runtime): process 0's address and "
                          "a free port, the same in every process; with --num-processes and --process-id")
    run.add_argument("--num-processes", type=int, metavar="P", help="the number of processes of the sweep")
    run.add_argument("--process-id", type=int, metavar="I", help="this process's index, 0..P-1")
    run.add_argument("--only", action="append", default=[], metavar="ALGORITHM",
                     help="run only this algorithm (repeatable); its seeds are stored as usual, so a later "
                          "run without --only reuses them")
    run.add_argument("--step-progress", action="store_true",
                     help="report the step each chunk has reached from inside the compiled run; such programs "
                          "hold a host callback and are not kept by the compile cache (without the cache, on)")
    _plugin_flag(run)
    _compile_cache_flag(run)
    _compile_report_flag(run)
    arena = sub.add_parser("arena", help="every registered regret algorithm (yours too) on the benchmark problems "
                                         "it fits, at defaults and tuned on other seeds (bandits_jax/arena.py)")
    arena.add_argument("--size", default="small", help="smoke, small (two CPU cores, about two hours) or large "
                                                       "(a GPU); default small")
    arena.add_argument("--problem", action="append", default=[], metavar="LABEL|SPEC",
                       help="a benchmark problem's label, any problem spec, or all (repeatable; default all)")
    arena.add_argument("--algorithm", action="append", default=[], metavar="NAME[:KEY=VALUE,...]",
                       help="a registered algorithm or spec, or all (repeatable; default all regret algorithms)")
    arena.add_argument("--seeds", type=int, help="reported seeds (0..S-1; default the size's)")
    arena.add_argument("--tuning-seeds", type=int, help="tuning seeds (from 1000000; default the size's)")
    arena.add_argument("--factors", metavar="F,F,...",
                       help="the grid: factors on each algorithm's declared exploration parameters, 1 among them "
                            "(default 0.03,0.1,0.3,1,3,10)")
    arena.add_argument("--out", type=Path, help="output folder (default: results/arena/<size>)")
    arena.add_argument("--curves", type=Path, metavar="DIR", help="the curve cache (as for run)")
    arena.add_argument("--no-curve-cache", action="store_true", help="neither take curves from the cache nor add them")
    arena.add_argument("--check", action="store_true",
                       help="print the fit matrix and the tuning plan, and stop: no program of a run is "
                            "compiled and nothing is written, the compile cache included")
    arena.add_argument("--quiet", action="store_true", help="no progress output")
    _plugin_flag(arena)
    _compile_cache_flag(arena)
    _compile_report_flag(arena)
    plot = sub.add_parser("plot", help="(re)draw plot.png of a results folder, or one figure of several")
    plot.add_argument("dir", type=Path, nargs="+")
    plot.add_argument("--figure", type=Path, metavar="PNG",
                      help="write one figure of all folders to PNG: a column each, regret above and "
                           "communication below (e.g. the DUETS paper's Figure 1 from results/duets/*/paper), or a "
                           "phase-level experiment's panels (CoPE-KB's Figure 2 from results/cope_fc-rank*/paper)")
    plot.add_argument("--rows", type=int, default=0, metavar="N",
                      help="with --figure: regret panels only, the folders filling N rows in order (Coop-KernelUCB's "
                           "Figure 1: --rows 2, the four linear folders then the four RBF ones)")
    rep = sub.add_parser("report", help="write records of results folders (--record), the reproduction pages from "
                                        "the records (--pages), or the arena's record and page (--arena)")
    rep.add_argument("dir", type=Path, nargs="*")
    rep.add_argument("--record", action="store_true",
                     help="write the compact record of each results folder DIR into --data (docs/reproduction/data)")
    rep.add_argument("--pages", action="store_true",
                     help="write every reproduction page, its figures and the claims index into --docs, from the "
                          "records in --data")
    rep.add_argument("--data", type=Path, default=Path("docs/reproduction/data"), metavar="DIR",
                     help="the records' folder (default docs/reproduction/data)")
    rep.add_argument("--docs", type=Path, default=Path("docs/reproduction"), metavar="DIR",
                     help="the pages' folder, with the notes files (default docs/reproduction)")
    rep.add_argument("--no-figures", action="store_true", help="with --pages: write the pages, not the PNG figures")
    rep.add_argument("--arena", type=Path, metavar="DIR",
                     help="record the arena folder DIR into docs/arena/data (a record is taken as it is) and write "
                          "docs/arena.md and its figure from the record")
    show = sub.add_parser("show", help="print the configuration keys of an experiment")
    show.add_argument("name")
    show.add_argument("--size", default="paper")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a configuration key")
    show.add_argument("--toml", action="store_true",
                      help="print the experiment as TOML (configuration and curves), for `bandits-jax run FILE.toml`")
    bench = sub.add_parser("bench", help="run the benchmarks (same as python -m bench)")
    bench.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _plugin_flag(parser) -> None:
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="import a module (or a .py file) that registers algorithms or problems first "
                             "(repeatable; entry points of bandits_jax.algorithms are always loaded)")


def _compile_report_flag(parser) -> None:
    parser.add_argument("--compile-report", action="store_true",
                        help="list every program the run asks for: compiled, loaded from the compile cache or "
                             "reused, its seconds and size and why it exists (OUT/compile_report.json; "
                             "bandits_jax/compile_report.py)")


def _compile_cache_flag(parser) -> None:
    parser.add_argument("--no-compile-cache", action="store_true",
                        help="do not keep compiled programs (default: in $BANDITS_JAX_COMPILE_CACHE, else "
                             "~/.cache/bandits_jax/jax; bandits_jax/compile_cache.py)")


def _overrides(args) -> dict:
    out = {}
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    for flag, key in (("seeds", "seeds"), ("first_seed", "first_seed"), ("horizon", "horizon")):
        value = getattr(args, flag, None)
        if value is not None:
            out[key] = value
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # everything after `bench` belongs to the benchmark's own parser
        cpu_guard()
        return _bench(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.command == "run" and multihost.requested(args.coordinator, args.num_processes, args.process_id):
            multihost.check_before_joining(lambda: _check_run(args))  # bad input stops this process alone
            multihost.initialize(args.coordinator, args.num_processes, args.process_id)  # before the guard
        cpu_guard()  # before anything computes (bandits_jax/_cpu.py)
        _prepare(args)
        COMMANDS[args.command](args)
        return 0
    except (ConfigError, FileNotFoundError) as err:
        print(f"bandits-jax: error: {err}", file=sys.stderr)
        return 2
    except multihost.Stopped as err:  # another process of the sweep stopped, or never joined
        print(f"bandits-jax: error: {err}", file=sys.stderr)
        return multihost.EXIT_STOPPED
    except KeyboardInterrupt:  # Ctrl-C: the sweep stores each chunk as it finishes
        kept = ("; every chunk finished so far is kept, and the same command resumes from them"
                if args.command in ("run", "arena") else "")
        print(f"bandits-jax: interrupted{kept}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _prepare(args) -> None:
    """What a command needs before it starts: the plugins (list, run, arena) and, for run and arena, the
    compile cache (`args.compile_cache`: its folder, or None where it is off; --check keeps nothing)."""
    if args.command in ("list", "run", "arena"):
        from .plugins import load_plugins

        load_plugins(args.plugin)
    if args.command in ("run", "arena"):
        from .compile_cache import chosen_dir, enable

        if args.curves is not None and args.no_curve_cache:
            raise ConfigError("--curves names the curve cache and --no-curve-cache turns it off; give one")
        folder = chosen_dir(not args.no_compile_cache)  # checked before anything else
        args.compile_cache = folder if args.check else enable(folder)


def _show(args) -> None:
    from .experiments.adhoc import experiment_toml
    from .experiments.registry import resolve_config
    from .experiments.catalog import get_experiment

    exp = get_experiment(args.name)
    if args.toml:
        print(experiment_toml(exp, args.size, _overrides(args)), end="")
        return
    for key, value in resolve_config(exp, args.size, _overrides(args)).items():
        print(f"{key} = {value!r}")


def _run(args) -> None:
    from .sweep import run_experiment

    exp, size = _run_target(args)
    with multihost.leave_together():  # several processes leave at once, naming any that stopped
        run_experiment(exp, size=size, overrides=_overrides(args), out=args.out, chunk=args.chunk,
                       quiet=args.quiet, plot=not args.no_plot,
                       curves=False if args.no_curve_cache else args.curves, only=tuple(args.only),
                       check=args.check, step_progress=args.step_progress or args.compile_cache is None,
                       report_compiles=args.compile_report)


def _arena(args) -> None:
    from .arena import TUNING_FACTORS, run_arena

    factors = TUNING_FACTORS if args.factors is None else _floats(args.factors, "--factors")
    run_arena(args.size, tuple(args.problem) or ("all",), tuple(args.algorithm) or ("all",), args.out,
              args.seeds, args.tuning_seeds, factors, quiet=args.quiet, check=args.check,
              curves=False if args.no_curve_cache else args.curves, report_compiles=args.compile_report)


def _report(args) -> None:
    """One of: the arena's record and page (--arena), records (--record), the pages (--pages)."""
    if args.arena is not None:
        from .arena_page import write_arena_page

        if args.dir or args.record or args.pages:
            raise ConfigError("report --arena DIR takes no other folders, --record or --pages")
        _print_lines(write_arena_page(args.arena))
        return
    from .reporting.report import write_pages
    from .reporting.records import write_records

    if args.record == args.pages:
        raise ConfigError("report: give one of --record DIR... (write the records of results folders), --pages "
                          "(every page from the records) or --arena DIR (the arena's record and page)")
    if args.record:  # every folder is checked before any record is written
        if not args.dir:
            raise ConfigError("report --record: give the results folders to record (each written by `run`)")
        _print_lines(write_records(args.dir, args.data))
    else:
        if args.dir:
            raise ConfigError("report --pages reads the records in --data; it takes no folders")
        _print_lines(write_pages(args.data, args.docs, figures=not args.no_figures))


def _plot(args) -> None:
    from .reporting.plotting import plot_figure, plot_results

    if args.rows < 0 or (args.rows and args.figure is None):
        raise ConfigError("plot: --rows takes a positive number of rows, with --figure PNG")
    if args.figure is not None:
        print(plot_figure(args.dir, args.figure, args.rows))
    elif len(args.dir) > 1:
        raise ConfigError("plot: several folders make one figure; name it with --figure PNG")
    else:
        print(plot_results(args.dir[0]))


def _print_lines(paths) -> None:
    for path in paths:
        print(path)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C


def _floats(text: str, flag: str) -> tuple:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{flag} takes numbers separated by commas, got {text!r}") from None


def _check_run(args) -> None:
    """What `run` refuses before it computes, short of tracing the curves (`sweep.validated_runs`),
    the target included. Each process of a multi-process run checks it before joining the others."""
    from .experiments.catalog import get_experiment
    from .experiments.registry import Experiment
    from .sweep import validated_runs

    exp, size = _run_target(args)
    exp = exp if isinstance(exp, Experiment) else get_experiment(exp)
    validated_runs(exp, size, _overrides(args), args.chunk, tuple(args.only))


def _list(args) -> None:
    """Print the experiments, or the registered algorithms or problems, one per line with its description.
    An algorithm without a usable factory (a broken plugin) is left out of the listing and named, with
    why, in the ConfigError raised after it."""
    if args.algorithms or args.problems:
        from .algorithms import algorithm_descriptions
        from .problems import problem_descriptions

        broken = {}
        for name, text in (algorithm_descriptions(broken) if args.algorithms else problem_descriptions()).items():
            print(f"{name:28s} {text}")
        if broken:
            raise ConfigError(f"{len(broken)} registered algorithm(s) left out of the list above: "
                              f"{'; '.join(broken.values())}")
        return
    from .experiments.catalog import experiments

    for name, exp in experiments().items():
        print(f"{name:28s} {exp.description}")


def _run_target(args) -> tuple:
    """(experiment, size) that `run` runs: a registered name, an experiment file, or --problem with
    --algorithm specs (ad hoc)."""
    from .experiments.adhoc import ADHOC_SIZE, adhoc_experiment, toml_experiment

    if args.problem is not None:
        if args.name is not None:
            raise ConfigError(f"run takes an experiment ({args.name}) or --problem with --algorithm, not both")
        if args.size is not None:
            raise ConfigError(f"--size {args.size} names a size of a registered experiment; with --problem the run's "
                              f"size is its --seeds, --horizon and the specs' options")
        return adhoc_experiment(args.problem, args.algorithm), ADHOC_SIZE
    if args.algorithm:
        raise ConfigError("--algorithm runs on a --problem NAME[:KEY=VALUE,...]; give one")
    if args.name is None:
        raise ConfigError("run needs an experiment name, an experiment file (.toml), or --problem and --algorithm")
    if args.name.endswith(".toml"):
        exp, size = toml_experiment(args.name)
        return exp, args.size or size
    return args.name, args.size or "paper"


def _bench(argv) -> int:
    try:
        from bench.__main__ import main as bench_main
    except ImportError:
        print("bandits-jax: error: the benchmarks live in the source tree: run `python -m bench` from a clone",
              file=sys.stderr)
        return 2
    return bench_main(argv)


COMMANDS = {"list": _list, "show": _show, "run": _run, "arena": _arena, "report": _report, "plot": _plot}


if __name__ == "__main__":
    sys.exit(main())

