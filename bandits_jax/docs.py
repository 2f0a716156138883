"""The README's table of registered algorithms, generated from the registry so that it cannot drift.

    python -m bandits_jax.docs            print the table
    python -m bandits_jax.docs --write    replace the README's block between its two marker lines

One row per name of `algorithms.ALGORITHMS` whose target is a "module:factory" string (names a user or a
test adds with `register_algorithm` are left out): the name, its module, the paper it belongs to and the
first sentence of its factory's description. `tests/test_readme.py` checks that the README holds this table.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

BEGIN = "<!-- names:begin -->"
END = "<!-- names:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"

_FNB = "Federated Neural Bandits (Dai et al. 2023)"
_ASYNC = "Asynchronous kernel bandits (Li et al. 2023)"
_DUETS = "DUETS (Pavlovic, Salgia and Zhao 2024)"
_COPE = "CoPE-KB (Du, Kuroki and Huang 2023)"
_COOP = "Coop-KernelUCB (Dubey and Pentland 2020)"

# the paper an algorithm is reproduced for: by module, a name's own entry first where a module serves two
PAPERS = {
    "uniform": "baseline of every experiment",
    "linear": "baseline in Dai et al. 2023",
    "kernel": "baseline in Dai et al. 2023",
    "neural": "baseline in Dai et al. 2023",
    "fn_ucb": _FNB,
    "async_kernel": _ASYNC,
    "dis_kernel": "baseline in Li et al. 2023",
    "approx_dis_kernel": "baseline in Li et al. 2023",
    "dis_linear": "baseline in Li et al. 2023",
    "fed_glb": "baseline in Li et al. 2023",
    "dis_kernel_ucb_duets": "baseline in Pavlovic et al. 2024",
    "approx_dis_kernel_ucb_duets": "baseline in Pavlovic et al. 2024",
    "duets": _DUETS,
    "duets_authors": _DUETS,
    "elimination": "best-arm identification (Even-Dar et al. 2006)",
    "uniform_allocation": "baseline of best-arm identification",
    "cope_kb": _COPE,
    "cope_kb_alba": "baseline in Du et al. 2023",
    "cokernel_ind_alloc": "ablation in Du et al. 2023",
    "cokernel_fb_ind_alloc": "ablation in Du et al. 2023",
    **{name: "baseline in Du et al. 2023" for name in ("ind_rage", "ind_rage_code", "ind_rage_code_threshold",
                                                       "ind_peace_fb", "ind_peace_fb_omega", "ind_uniform_fb",
                                                       "ind_uniform_fb_means")},
    "coop_kernel": _COOP,
    **{name: "baseline in Dubey and Pentland 2020" for name in ("naive_linucb", "naive_igp_ucb", "ind_kernel_ucb",
                                                                "oful", "igp_ucb")},
}


def _short(description: str) -> str:
    """The first sentence; where that is long, its head up to the first colon."""
    text = re.split(r"(?<!\bal)\.\s+(?=\w)", description)[0].rstrip(".")
    if len(text) > 100 and ": " in text:
        text = text.split(": ")[0]
    return text.replace("|", "\\|") + "."


def registry_table() -> str:
    """The Markdown table `| name | module | paper | what it is |` of the registered algorithms."""
    from .algorithms import ALGORITHMS, algorithm_descriptions

    descriptions = algorithm_descriptions()
    rows = ["| name | module | paper | what it is |", "|---|---|---|---|"]
    for name, target in ALGORITHMS.items():
        if not isinstance(target, str):
            continue
        module = target.split(":")[0]
        paper = PAPERS.get(name) or PAPERS.get(module, "")
        rows.append(f"| `{name}` | `{module}.py` | {paper} | {_short(descriptions[name])} |")
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
        sys.exit("usage: python -m bandits_jax.docs [--write]")
    else:
        sys.stdout.write(registry_table())
