"""`bandits-jax report` checks before it writes: a damaged record, results folder or arena.json, or a
wrong --data, is one line on stderr naming the file, exit status 2, and no page, figure or record
changed (`--record`, `--pages`, `--arena`).

Every test works on copies of committed records (a regret record, a phase-level one, the arena's) and
of the pages, in tmp_path, beside a hand-made results folder; nothing committed is touched."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bandits_jax.reporting.results import save_results

from helpers import arena_record, run_cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "reproduction"
RECORD, PHASED = "fnucb-fig2a-paper", "cope-fc-rank1-paper"  # small records of two kinds
ARENA = arena_record().relative_to(ROOT)


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """tmp_path as the current folder, holding docs/reproduction (the pages and notes, with two records
    in its data/), the arena's record, docs/arena.md and its figure, and run/, a results folder."""
    data = tmp_path / "docs" / "reproduction" / "data"
    data.mkdir(parents=True)
    for name in (RECORD, PHASED):
        shutil.copytree(PAGES / "data" / name, data / name)
    for page in PAGES.glob("*.md"):
        shutil.copy(page, data.parent / page.name)
    shutil.copytree(ROOT / ARENA, tmp_path / ARENA)
    shutil.copy(ROOT / "docs" / "arena.md", tmp_path / "docs" / "arena.md")
    for figure in (ROOT / "docs" / "arena").glob("*.png"):
        shutil.copy(figure, tmp_path / "docs" / "arena" / figure.name)
    _results_folder(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _results_folder(path: Path) -> None:
    """A finished results folder of 4 seeds, 60 steps and 2 agents, as `bandits-jax run` writes one."""
    rng = np.random.default_rng(0)
    S, T, N = 4, 60, 2
    rounds = np.zeros((S, T))
    rounds[:, [5, 30]] = 1
    arrays = {c: {"regret": rng.uniform(0, 1, (S, T, N)), "comm_up": 3 * rounds, "comm_down": rounds.copy(),
                  "rounds": rounds, "errors": np.zeros(S, np.int32)} for c in ("A", "B")}
    md = {"experiment": "fam/toy", "size": "smoke", "algorithms": ["A", "B"], "agents": "mean", "se_ddof": 0,
          "config": {"seeds": S, "horizon": T}, "seeds": list(range(S)), "commit": "abc"}
    save_results(path, arrays, list(range(S)), md)


def snapshot(root: Path) -> dict:
    """{path: bytes} of every file under root."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_refused(capsys, argv, root: Path, *named: str) -> None:
    """`bandits-jax ARGV` exits 2 with one stderr line holding each of `named`, and changes no file."""
    before = snapshot(root)
    status, err = run_cli(capsys, argv)
    assert status == 2, err
    assert len(err) == 1, err
    for text in named:
        assert text in err[0], err[0]
    assert snapshot(root) == before, "a refused report changed files"


# ------------------------------------------------------------------------------ damages
def _rewrite_npz(folder: Path, change) -> None:
    with np.load(folder / "results.npz") as data:
        flat = {k: data[k] for k in data.files}
    np.savez(folder / "results.npz", **change(flat))


def _edit_md(folder: Path, change) -> None:
    md = json.loads((folder / "metadata.json").read_text())
    change(md)
    (folder / "metadata.json").write_text(json.dumps(md))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _first_regret(arrays: dict) -> str:
    return next(k for k in arrays if k.endswith("/regret"))


def _first_timing(md: dict, seconds) -> None:
    md["timing"][next(iter(md["timing"]))]["run_seconds"] = seconds


# (damage(folder), the file the refusal names); each leaves the folder's other file whole
DAMAGES = {
    "npz cut": (lambda f: _cut(f / "results.npz"), "results.npz"),
    "npz emptied": (lambda f: (f / "results.npz").write_bytes(b""), "results.npz"),
    "npz random bytes": (lambda f: (f / "results.npz").write_bytes(np.random.default_rng(1).bytes(2048)),
                         "results.npz"),
    "npz pickled data": (lambda f: _rewrite_npz(f, lambda a: {**a, "extra/x": np.array([{}, {}], dtype=object)}),
                         "results.npz"),
    "npz arrays of a seed fewer": (lambda f: _rewrite_npz(f, lambda a: {k: v if k == "seeds" else v[:-1]
                                                                        for k, v in a.items()}), "results.npz"),
    "npz regret of the wrong rank": (lambda f: _rewrite_npz(f, lambda a: {k: v[..., 0] if k.endswith("/regret") else v
                                                                          for k, v in a.items()}), "results.npz"),
    "npz a curve without regret": (lambda f: _rewrite_npz(f, lambda a: {k: v for k, v in a.items()
                                                                        if k != _first_regret(a)}), "results.npz"),
    "npz NaN in a run without error bits": (lambda f: _rewrite_npz(f, lambda a: {
        k: np.full(v.shape, np.nan) if k.endswith("/comm_up") else v for k, v in a.items()}), "results.npz"),
    "md not JSON": (lambda f: (f / "metadata.json").write_text("{not json"), "metadata.json"),
    "md a JSON list": (lambda f: (f / "metadata.json").write_text("[1, 2]"), "metadata.json"),
    "md without experiment": (lambda f: _edit_md(f, lambda m: m.pop("experiment")), "metadata.json"),
    "md horizon -1": (lambda f: _edit_md(f, lambda m: m.update(horizon=-1)), "metadata.json"),
    "md seeds a string": (lambda f: _edit_md(f, lambda m: m.update(seeds="0,1,2")), "metadata.json"),
    "md seeds repeated": (lambda f: _edit_md(f, lambda m: m.update(seeds=[0] * len(m["seeds"]))), "metadata.json"),
    "md size a number": (lambda f: _edit_md(f, lambda m: m.update(size=3)), "metadata.json"),
    "md se_ddof past the seeds (nan +- nan)": (lambda f: _edit_md(f, lambda m: m.update(se_ddof=99)), "metadata.json"),
    "md agents unknown": (lambda f: _edit_md(f, lambda m: m.update(agents="avg")), "metadata.json"),
    "md algorithms naming no curve": (lambda f: _edit_md(f, lambda m: m.update(algorithms=["Nope"])), "metadata.json"),
}
RECORD_DAMAGES = {  # what only a record (with steps, timing) can have wrong
    "md steps past the horizon": (lambda f: _edit_md(f, lambda m: m["steps"].append(m["horizon"] + 5)),
                                  "metadata.json"),
    "md steps decreasing": (lambda f: _edit_md(f, lambda m: m["steps"].reverse()), "metadata.json"),
    "md timing negative": (lambda f: _edit_md(f, lambda m: _first_timing(m, -1.0)), "metadata.json"),
    "md timing NaN": (lambda f: _edit_md(f, lambda m: _first_timing(m, float("nan"))), "metadata.json"),
}
ALL_RECORD_DAMAGES = {**DAMAGES, **RECORD_DAMAGES}
PHASED_DAMAGES = {  # a phase-level record's outcomes, x tag and panels
    "md outcome of an unknown kind": (lambda f: _edit_md(f, lambda m: m["outcomes"]["correct"].update(kind="median")),
                                      "metadata.json"),
    "md x tag a string": (lambda f: _edit_md(f, lambda m: next(iter(m["tags"].values())).update({m["x"]: "big"})),
                          "metadata.json"),
    "md panel of no outcome": (lambda f: _edit_md(f, lambda m: m.update(panels=[["nope", "mean", "log"]])),
                               "metadata.json"),
}


def _pages(data) -> list:
    return ["report", "--pages", "--data", data, "--docs", "docs/reproduction", "--no-figures"]


# ------------------------------------------------------------------------------ damaged records
@pytest.mark.parametrize("record, damage", [(RECORD, d) for d in ALL_RECORD_DAMAGES] +
                         [(PHASED, d) for d in PHASED_DAMAGES])
def test_pages_refuse_a_damaged_record(work, capsys, record, damage):
    """A regret record and a phase-level one, each damaged one way."""
    hurt, file = (ALL_RECORD_DAMAGES if record == RECORD else PHASED_DAMAGES)[damage]
    hurt(work / "docs" / "reproduction" / "data" / record)
    assert_refused(capsys, _pages("docs/reproduction/data"), work, f"{record}/{file}")


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_record_refuses_a_damaged_results_folder(work, capsys, damage):
    hurt, file = DAMAGES[damage]
    hurt(work / "run")
    assert_refused(capsys, ["report", "--record", "run", "--data", "docs/reproduction/data"], work, f"run/{file}")


@pytest.mark.parametrize("damage", list(ALL_RECORD_DAMAGES))
def test_arena_refuses_a_damaged_record(work, capsys, damage):
    hurt, file = ALL_RECORD_DAMAGES[damage]
    hurt(work / ARENA)
    assert_refused(capsys, ["report", "--arena", ARENA], work, f"{ARENA.name}/{file}")


# ------------------------------------------------------------------------------ damaged arena.json
def _edit_arena(change):
    def hurt(folder: Path) -> None:
        arena = json.loads((folder / "arena.json").read_text())
        change(arena)
        (folder / "arena.json").write_text(json.dumps(arena))
    return hurt


ARENA_DAMAGES = {
    "missing": lambda f: (f / "arena.json").unlink(),
    "not JSON": lambda f: (f / "arena.json").write_text('{"size": '),
    "a JSON list": lambda f: (f / "arena.json").write_text("[]"),
    "without dims": _edit_arena(lambda a: a.pop("dims")),
    "size with a slash": _edit_arena(lambda a: a.update(size="../x")),
    "problems a string": _edit_arena(lambda a: a.update(problems="cosine")),
    "an algorithm without a label": _edit_arena(lambda a: a["algorithms"].append({"family": "x"})),
    "a pair missing from the fits": _edit_arena(lambda a: a["fits"]["cosine"].pop(a["algorithms"][0]["label"])),
    "a pair's factor a string": _edit_arena(lambda a: a["pairs"][0].update(factor="x")),
    "a pair of an unknown algorithm": _edit_arena(lambda a: a["pairs"][0].update(algorithm="nobody")),
    "timing negative": _edit_arena(lambda a: a["timing"].update(run_seconds=-1)),
    "seeds other than the results'": _edit_arena(lambda a: a["dims"].update(seeds=3)),
}


@pytest.mark.parametrize("damage", list(ARENA_DAMAGES))
def test_arena_refuses_a_damaged_arena_json(work, capsys, damage):
    ARENA_DAMAGES[damage](work / ARENA)
    assert_refused(capsys, ["report", "--arena", ARENA], work, str(ARENA), "arena.json")


# ------------------------------------------------------------------------------ wrong folders
def test_pages_with_the_records_folder_nowhere_refuse_and_leave_every_page(work, capsys):
    """The issue's acceptance test, as typed: --data naming no folder."""
    assert_refused(capsys, ["report", "--pages", "--data", "NOWHERE"], work, "NOWHERE")


@pytest.mark.parametrize("case", ["a file", "an empty folder", "a folder of other things"])
def test_pages_refuse_a_records_folder_without_records(work, capsys, case):
    data = work / "elsewhere"
    if case == "a file":
        data.write_text("not a folder")
    else:
        (data / ("other" if case == "a folder of other things" else "")).mkdir(parents=True)
    assert_refused(capsys, _pages(data), work, str(data), "--data")


def test_pages_run_from_another_folder_refuse(work, capsys, monkeypatch):
    monkeypatch.chdir(work / "run")
    assert_refused(capsys, ["report", "--pages"], work, "docs/reproduction/data")


def test_pages_refuse_a_record_folder_without_its_files(work, capsys):
    folder = work / "docs" / "reproduction" / "data" / RECORD
    shutil.rmtree(folder)
    folder.mkdir()
    assert_refused(capsys, _pages("docs/reproduction/data"), work, RECORD)


def test_pages_refuse_a_record_in_another_records_folder(work, capsys):
    data = work / "docs" / "reproduction" / "data"
    (data / RECORD).rename(data / "fnucb-fig2b-paper")  # the record of fig2a where fig2b's goes
    assert_refused(capsys, _pages("docs/reproduction/data"), work, "fnucb-fig2b-paper/metadata.json")


def test_record_refuses_data_naming_a_file(work, capsys):
    (work / "records.txt").write_text("")
    assert_refused(capsys, ["report", "--record", "run", "--data", "records.txt"], work, "records.txt")


def test_record_writes_nothing_when_one_of_its_folders_is_damaged(work, capsys):
    shutil.copytree(work / "run", work / "other")
    _edit_md(work / "other", lambda m: m.update(size="paper"))
    _cut(work / "run" / "results.npz")
    assert_refused(capsys, ["report", "--record", "other", "run", "--data", "docs/reproduction/data"], work,
                   "run/results.npz")


# ------------------------------------------------------------------------------ and whole input is written
def test_whole_input_is_still_written_and_no_staging_is_left(work, capsys):
    pages = work / "docs" / "reproduction"
    (pages / "fnucb.md").write_text("stale\n")
    assert run_cli(capsys, _pages("docs/reproduction/data")) == (0, [])
    assert f"## {RECORD}" in (pages / "fnucb.md").read_text()
    assert run_cli(capsys, ["report", "--record", "run", "--data", "docs/reproduction/data"]) == (0, [])
    assert (pages / "data" / "fam-toy-smoke" / "results.npz").is_file()
    assert run_cli(capsys, ["report", "--arena", ARENA]) == (0, [])
    assert (work / "docs" / "arena.md").read_bytes() == (ROOT / "docs" / "arena.md").read_bytes()
    assert not list(work.rglob(".report-staging-*"))
