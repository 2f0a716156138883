"""The README stays a short front page whose table of registered algorithms is the registry's own
(`python -m bandits_jax.reporting.docs --write` regenerates it), and its links and the docs' links resolve."""
import re
from pathlib import Path

from bandits_jax.reporting.docs import readme_block, registry_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_readme_names_table_is_generated():
    assert readme_block(README.read_text()) == registry_table(), \
        "the README's table of names is out of date: run `python -m bandits_jax.reporting.docs --write`"


def test_readme_is_short():
    """At most 170 lines besides its generated table of names, which grows by a row with each name (the
    cap was 210 with the table's 46 lines inside it)."""
    text = README.read_text()
    assert len(text.splitlines()) - len(readme_block(text).splitlines()) <= 170


def test_relative_links_resolve():
    pages = [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def test_every_reference_comparison_is_a_numerics_test():
    """A test file that compares against the NumPy reference loops is marked numerics, so that CI runs
    it with XLA's default settings (.ci/run) rather than the fast suite's."""
    tests = Path(__file__).parent
    comparing = [p for p in sorted(tests.glob("test_*.py"))
                 if re.search(r"^(from|import) reference\b", p.read_text(), re.M)]
    unmarked = [p.name for p in comparing if "pytestmark = pytest.mark.numerics" not in p.read_text()]
    assert len(comparing) >= 10 and not unmarked
