"""`bandits-jax report`: the notes file of a reproduction page, and what the command takes."""
from pathlib import Path

import pytest

from bandits_jax.cli import main
from bandits_jax.core import ConfigError
from bandits_jax.experiments.catalog import pages
from bandits_jax.reporting.report import DATA, _read_notes, page_text

ROOT = Path(__file__).resolve().parents[1]


def test_notes_open_the_page_and_go_above_their_record(tmp_path):
    notes = tmp_path / "n.md"
    notes.write_text("Opening words.\n\n## fam/one\nOne explains.\n\n## fam/two\n\n")
    assert _read_notes(notes) == ("Opening words.", {"fam/one": "One explains.", "fam/two": ""})
    page = pages()["duets"]
    (tmp_path / "duets.notes.md").write_text(f"Opening words.\n\n## {page.records[0]}\nIt explains.\n")
    text = page_text(page, ROOT / DATA, tmp_path)
    lines = text.splitlines()
    assert lines[2].startswith("<!-- generated") and lines[4] == "Opening words."
    at = lines.index(f"## {page.records[0]}")
    assert lines[at + 2] == "It explains."


def test_a_bad_notes_file_is_one_clear_error(tmp_path):
    page = pages()["duets"]
    (tmp_path / "duets.notes.md").write_text("## fam/three\nNo such record.\n")
    with pytest.raises(ConfigError, match="sections fam/three, which are not records of page duets"):
        page_text(page, ROOT / DATA, tmp_path)
    (tmp_path / "duets.notes.md").write_text(f"## {page.records[0]}\na\n## {page.records[0]}\nb\n")
    with pytest.raises(ConfigError, match=f"two sections for {page.records[0]}; merge them"):
        page_text(page, ROOT / DATA, tmp_path)


@pytest.mark.parametrize("argv,message", [
    (["report", "results/x"], "give one of --record DIR"),
    (["report"], "give one of --record DIR"),
    (["report", "--record"], "give the results folders to record"),
    (["report", "--pages", "results/x"], "it takes no folders"),
])
def test_the_command_says_what_it_takes(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err
