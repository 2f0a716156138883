"""The documentation indexes cannot lose a page: docs/README.md links every page under docs/ (the
reproduction pages' hand-written notes and the committed records aside), and docs/experiments.md
links every reproduction page."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def linked(page: Path) -> set:
    """The files that `page` links to, resolved from its folder."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
    return {(page.parent / target).resolve() for target in targets if "://" not in target}


def pages(folder: Path) -> list:
    return sorted(p.resolve() for p in folder.rglob("*.md")
                  if not p.name.endswith(".notes.md") and "data" not in p.relative_to(DOCS).parts)


def test_docs_readme_links_every_page():
    index = DOCS / "README.md"
    every = [p for p in pages(DOCS) if p != index.resolve()]
    missing = [str(p.relative_to(DOCS)) for p in every if p not in linked(index)]
    assert len(every) >= 25 and not missing, f"docs/README.md does not link {missing}"


def test_experiments_page_links_every_reproduction_page():
    from bandits_jax.experiments.catalog import pages as registered

    reproduction = [p for p in pages(DOCS / "reproduction")]
    missing = [p.name for p in reproduction if p not in linked(DOCS / "experiments.md")]
    # the index and one page per registered paper page
    assert {p.name for p in reproduction} == {"README.md", *(f"{name}.md" for name in registered())}
    assert not missing, f"docs/experiments.md does not link {missing}"
