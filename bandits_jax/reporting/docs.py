"""The README's table of registered algorithms, generated from the registry so that it cannot drift.

    python -m bandits_jax.reporting.docs            print the table
    python -m bandits_jax.reporting.docs --write    replace the README's block between its two marker lines

One row per name of `algorithms.ALGORITHMS` whose target is a "lineage.module:factory" string (names a
user or a test adds with `register_algorithm` are left out): the name, its file, the paper it belongs to
(from its lineage folder's NAMES table) and the first sentence of its factory's description.
`tests/test_readme.py` checks that the README holds this table.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

BEGIN = "<!-- names:begin -->"
END = "<!-- names:end -->"
README = Path(__file__).resolve().parents[2] / "README.md"

def _short(description: str) -> str:
    """The first sentence; where that is long, its head up to the first colon."""
    text = re.split(r"(?<!\bal)\.\s+(?=\w)", description)[0].rstrip(".")
    if len(text) > 100 and ": " in text:
        text = text.split(": ")[0]
    return text.replace("|", "\\|") + "."


def registry_table() -> str:
    """The Markdown table `| name | file | paper | what it is |` of the registered algorithms."""
    from ..algorithms import ALGORITHMS, algorithm_descriptions, paper_of

    descriptions = algorithm_descriptions()
    rows = ["| name | file | paper | what it is |", "|---|---|---|---|"]
    for name, target in ALGORITHMS.items():
        if not isinstance(target, str):
            continue
        path = target.split(":")[0].replace(".", "/")
        rows.append(f"| `{name}` | `{path}.py` | {paper_of(name)} | {_short(descriptions[name])} |")
    return "\n".join(rows) + "\n"


def readme_block(text: str) -> str:
    """What `text` holds between the marker lines (ValueError where a marker is missing)."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"the README has no {BEGIN} ... {END} block")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].lstrip("\n")


def write_readme(path: Path = README) -> None:
    """Replace the block between the markers of `path` with the generated table."""
    text = path.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{BEGIN}\n{registry_table()}{END}{tail}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_readme()
    elif sys.argv[1:]:
        sys.exit("usage: python -m bandits_jax.reporting.docs [--write]")
    else:
        sys.stdout.write(registry_table())
