"""The reproduction pages are what the committed records give: every page, and the index of every
claim, regenerated from docs/reproduction/data must equal the committed file byte for byte."""
import re
import subprocess
from pathlib import Path

import pytest

from bandits_jax.experiments.catalog import pages
from bandits_jax.reporting.report import DATA, DOCS, index_text, page_text

ROOT = Path(__file__).resolve().parent.parent
HINT = "run `bandits-jax report --pages` from the repository root and commit the pages"


@pytest.mark.parametrize("name", list(pages()))
def test_each_page_is_generated_from_the_records(name):
    page = pages()[name]
    committed = (ROOT / DOCS / f"{name}.md").read_text()
    assert page_text(page, ROOT / DATA, ROOT / DOCS) == committed, f"docs/reproduction/{name}.md differs: {HINT}"


def test_the_claims_index_is_generated_from_the_records():
    committed = (ROOT / DOCS / "README.md").read_text()
    assert index_text(pages().values(), ROOT / DATA, ROOT / DOCS) == committed, f"docs/reproduction/README.md: {HINT}"


def test_every_record_of_a_page_is_tracked_by_git():
    listed = subprocess.run(["git", "ls-files", str(DATA)], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = set(listed.stdout.split())
    on_disk = sorted(p.parent.name for p in (ROOT / DATA).glob("*/results.npz"))
    assert on_disk, "no record is committed"
    for name in on_disk:
        for file in ("results.npz", "metadata.json"):
            assert f"{DATA.as_posix()}/{name}/{file}" in tracked, f"{name}/{file} is not committed"
    known = {r for p in pages().values() for r in p.records}
    assert set(on_disk) <= known, f"records no page reads: {sorted(set(on_disk) - known)}"


def test_the_notes_type_no_results():
    """Hand-written notes explain; a decimal number, a thousands-separated one or a ratio ("3x") is a
    typed result (a spec section such as §5.2 is not)."""
    typed = re.compile(r"(?<![§.\d])\d+\.\d|\d,\d{3}|\b\d+(\.\d+)?x\b")
    for notes in sorted((ROOT / DOCS).glob("*.notes.md")):
        hits = [line for line in notes.read_text().splitlines() if typed.search(line)]
        assert not hits, f"{notes.name} types numbers: {hits}"


def test_a_record_off_its_registered_size_says_how():
    from bandits_jax.experiments.catalog import get_experiment
    from bandits_jax.experiments.registry import resolve_config
    from bandits_jax.reporting.report import _departures

    config = resolve_config(get_experiment("coop/linear-er"), "paper", {})
    md = {"experiment": "coop/linear-er", "size": "paper",
          "config": dict(config, data_dir="/elsewhere", first_segment=8, vmap_size=4)}
    assert _departures(md) == ""  # where the data came from and how the runs were cut change no number
    md["config"].update(seeds=20, horizon=300)
    assert _departures(md) == (" Run at a stated size, not the registered paper one: "
                               "seeds = 20 (registered 100), horizon = 300 (registered 500).")
    md["timing"] = {"a": {"compile_seconds": 9.0, "run_seconds": 360.0}, "b": {"run_seconds": 180.0}}
    assert _departures(md).endswith(" The registered size would take at least 1.2 hours of computing on this "
                                    "device (this run's 540 s scaled by seeds and horizon).")


def test_a_record_computed_from_uncommitted_code_is_never_shown_clean():
    """Every record whose commit carries the "+changes" mark shows it in the records table and on its
    page's provenance line."""
    from bandits_jax.reporting.report import _short_commit, load_records

    assert _short_commit({"commit": "0123456789abcdef+changes"}) == "0123456789ab+changes"
    assert _short_commit({"commit": "0123456789abcdef"}) == "0123456789ab"
    index = (ROOT / DOCS / "README.md").read_text()
    for name, res in load_records(ROOT / DATA, [r for p in pages().values() for r in p.records]).items():
        commit = res.metadata.get("commit", "")
        row = next(line for line in index.splitlines() if line.startswith(f"| [{name}]"))
        assert (commit[:12] + "+changes" in row) == commit.endswith("+changes"), row


def test_a_change_to_the_kernels_marks_the_commit(monkeypatch):
    """The "+changes" mark looks at both source folders of the package: bandits_jax/ and kernels/
    (installed as bandits_jax.kernels); a change to either marks a record's commit."""
    from bandits_jax import sweep

    def fake_git(args, **kwargs):
        dirty = "kernels" in args and args[1] == "status"  # only a pathspec with kernels/ sees the change
        out = " M kernels/ntk.py\n" if dirty else ("0123abcd\n" if args[1] == "rev-parse" else "")
        return subprocess.CompletedProcess(args, 0, stdout=out, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_git)
    sweep.code_commit.cache_clear()
    try:
        assert sweep.code_commit() == "0123abcd+changes"
    finally:
        sweep.code_commit.cache_clear()
