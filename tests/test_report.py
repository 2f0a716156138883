"""`bandits-jax report`: a reproduction page from results folders, with hand-written verdicts."""
import json

import pytest

from bandits_jax.cli import main
from bandits_jax.core import ConfigError
from bandits_jax.report import NO_VERDICT, report

SUMMARY = """# fam/one (smoke)

What the experiment is.

| algorithm | final | seeds |
|---|---|---|
| A | 1.5 +- 0.1 | 4 |

## Per epoch

| t | x |
|---|---|
| 2 | 3 |
"""


def _folder(root, name, size="smoke", seeds=4):
    path = root / name.replace("/", "_") / size
    path.mkdir(parents=True)
    (path / "summary.md").write_text(SUMMARY.replace("fam/one", name))
    (path / "metadata.json").write_text(json.dumps({"experiment": name, "size": size, "seeds": list(range(seeds)),
                                                    "versions": {"bandits_jax": "0.1.0", "jax": "0.10.2"}}))
    return path


def test_page_holds_the_tables_under_each_verdict(tmp_path):
    one, two = _folder(tmp_path, "fam/one"), _folder(tmp_path, "fam/two", seeds=7)
    verdicts = tmp_path / "v.md"
    verdicts.write_text("Opening words.\n\n## fam/two\nTwo reproduces: 1.5 against the paper's 1.4.\n")
    page = report([one, two], verdicts)
    lines = page.splitlines()
    assert lines[0] == "# fam: reproduction"
    assert "Opening words." in page
    first, second = lines.index("## fam/one (smoke)"), lines.index("## fam/two (smoke)")
    assert first < second
    assert lines[first + 2] == NO_VERDICT  # no verdict for fam/one, and the page says so
    assert lines[second + 2] == "Two reproduces: 1.5 against the paper's 1.4."
    assert page.count("| A | 1.5 +- 0.1 | 4 |") == 2  # the summary's table, verbatim
    assert page.count("### Per epoch") == 2 and "\n## Per epoch" not in page  # headings demoted
    assert "# fam/one (smoke)" not in lines  # the summary's own title is dropped
    assert f"_Source: `{two.as_posix()}`, 7 seeds, bandits_jax 0.1.0, jax 0.10.2._" in page


def test_a_verdict_may_name_the_size(tmp_path):
    one = _folder(tmp_path, "fam/one", size="paper")
    verdicts = tmp_path / "v.md"
    verdicts.write_text("## fam/one (paper)\nHolds.\n")
    assert "## fam/one (paper)\n\nHolds.\n" in report([one], verdicts, title="Family")
    assert report([one], verdicts, title="Family").startswith("# Family\n")


def test_bad_input_is_one_clear_error(tmp_path):
    one = _folder(tmp_path, "fam/one")
    stray = tmp_path / "v.md"
    stray.write_text("## fam/three\nNo such folder.\n")
    with pytest.raises(ConfigError, match="fam/three, which none of the folders hold"):
        report([one], stray)
    twice = tmp_path / "w.md"
    twice.write_text("## fam/one\na\n## fam/one\nb\n")
    with pytest.raises(ConfigError, match="two verdicts for fam/one"):
        report([one], twice)
    with pytest.raises(ConfigError, match="summary.md is missing"):
        report([tmp_path])
    with pytest.raises(ConfigError, match="does not exist"):
        report([one], tmp_path / "absent.md")


def test_command_prints_the_page_and_exits_2_on_bad_input(tmp_path, capsys):
    one = _folder(tmp_path, "fam/one")
    assert main(["report", str(one)]) == 0
    assert capsys.readouterr().out == report([one])
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "summary.md is missing" in capsys.readouterr().err
