"""The README's "Adding an algorithm" list, made with toys as real modules in a copy of the checkout: each
addition touches exactly the files the list names, and with them the suite's checks that grow with the
registries pass and the toys' experiment runs. Two of those checks live here: the family folders are
the lineages and the packages, and the experiment modules are the catalog's imports."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

from bandits_jax import algorithms
from bandits_jax.curves import Curve, Spec
from bandits_jax.experiments import registry

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "bandits_jax" / "algorithms"


def test_every_family_folder_is_a_lineage_and_a_package():
    """2. The folder, LINEAGES and pyproject's packages name the same families (a folder left out of
    packages would be missing from the wheel)."""
    folders = {p.parent.name for p in FAMILIES.glob("*/__init__.py")}
    packages = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert folders == set(algorithms.LINEAGES)
    assert {f"bandits_jax.algorithms.{f}" for f in folders} <= packages
    assert {name.split(".")[0] for name in algorithms.ALGORITHMS.values() if isinstance(name, str)} == folders


def test_every_package_folder_is_in_the_wheel():
    """Every folder of the library that holds Python modules is one of pyproject's packages (a folder
    left out imports from a checkout and is missing from an installed wheel)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "bandits_jax").rglob("*.py")}
    folders |= {"bandits_jax.kernels"} if (ROOT / setuptools["package-dir"]["bandits_jax.kernels"]).is_dir() else set()
    assert folders == set(setuptools["packages"])


def test_an_experiment_is_a_module_in_the_catalog(tmp_path):
    """4. An experiment: `register(Experiment(...))` in a module that catalog.py imports; it then runs."""
    catalog = ast.parse((ROOT / "bandits_jax" / "experiments" / "catalog.py").read_text())
    imported = {alias.name for node in ast.walk(catalog) if isinstance(node, ast.ImportFrom) and node.level == 1
                and node.module is None for alias in node.names}
    modules = {p.stem for p in (ROOT / "bandits_jax" / "experiments").glob("*.py")} - {"registry", "catalog", "adhoc"}
    assert modules == imported

    from bandits_jax.sweep import run_experiment

    exp = registry.Experiment(
        name="toy/adding", description="uniform random on the cosine reward", defaults={},
        sizes={"paper": {"horizon": 6, "seeds": 2}},
        build=lambda config: [Curve("Random", Spec("cosine", {"num_agents": 2, "horizon": config["horizon"]}),
                                    Spec("uniform_random"))])
    registry.register(exp)
    try:
        out = run_experiment("toy/adding", out=tmp_path / "toy", quiet=True, plot=False, curves=False)
    finally:
        registry._REGISTRY.pop("toy/adding")
    with np.load(out / "results.npz") as results:
        assert any(key.startswith("Random") for key in results.files)


# ------------------------------------------------------------------------------------ as real modules
TOYS = Path(__file__).parent / "adding"  # the toy modules, copied into a copy of the checkout
# the checks of the default suite that grow with the registries: each must pass with the toys added
DERIVED = ("tests/test_adding.py::test_every_family_folder_is_a_lineage_and_a_package",
           "tests/test_adding.py::test_an_experiment_is_a_module_in_the_catalog",
           "tests/test_readme.py",
           "tests/test_bench.py::test_scale_cases_cover_every_registered_algorithm",
           "tests/test_bench.py::test_family_scale_references_time_one_seed",
           "tests/test_misfit_matrix.py::test_matrix_covers_every_packaged_problem",
           "tests/test_arena.py::test_every_name_declares_what_may_be_tuned",
           "tests/test_comm_unit.py::test_every_registered_regret_algorithm_is_counted_or_silent",
           "tests/test_refusals.py::test_every_numeric_key_of_the_package_declares_its_range",
           "tests/test_experiments_as_data.py::test_every_registered_experiment_writes_to_toml")
# what the README's list says each addition touches: (path, what is done to it)
README_LIST = {
    # 1. a baseline: its module and its record in NAMES (silent, so no count in the communication test)
    "bandits_jax/algorithms/single/toy_greedy.py": "added", "bandits_jax/algorithms/single/__init__.py": "edited",
    # 2. a family: its folder, LINEAGES and the packages of pyproject.toml
    "bandits_jax/algorithms/toyfam/__init__.py": "added", "bandits_jax/algorithms/toyfam/walk.py": "added",
    "bandits_jax/algorithms/__init__.py": "edited", "pyproject.toml": "edited",
    # 3. a problem: its builder, one BUILDERS line and its smallest size in the misfit matrix
    "bandits_jax/problems/toy_world.py": "added", "bandits_jax/problems/__init__.py": "edited",
    "tests/test_misfit_matrix.py": "edited",
    # 4. an experiment: its module and its name in the catalog
    "bandits_jax/experiments/toy_exp.py": "added", "bandits_jax/experiments/catalog.py": "edited",
    # the generated table (python -m bandits_jax.reporting.docs --write)
    "README.md": "edited",
}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} is not there once"
    path.write_text(text.replace(old, new))


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _add_the_toys(root: Path) -> None:
    """The README's four additions, made as files in the checkout at `root`."""
    pkg = root / "bandits_jax"
    shutil.copy(TOYS / "toy_greedy.py", pkg / "algorithms" / "single" / "toy_greedy.py")
    _edit(pkg / "algorithms" / "single" / "__init__.py", "\nNAMES = {\n",
          '\nNAMES = {\n    "toy_greedy": Record("toy_greedy:toy_greedy", "toy baseline", Tuning(("bonus",)),\n'
          '                         BenchCase("toy/added", "smoke", "ToyGreedy"), silent=True),\n')
    (pkg / "algorithms" / "toyfam").mkdir()
    shutil.copy(TOYS / "toyfam_init.py", pkg / "algorithms" / "toyfam" / "__init__.py")
    shutil.copy(TOYS / "toyfam_walk.py", pkg / "algorithms" / "toyfam" / "walk.py")
    _edit(pkg / "algorithms" / "__init__.py", '"cope", "coop")', '"cope", "coop", "toyfam")')
    _edit(root / "pyproject.toml", '"bandits_jax.algorithms.coop", ', '"bandits_jax.algorithms.coop", '
                                                                      '"bandits_jax.algorithms.toyfam", ')
    shutil.copy(TOYS / "toy_world.py", pkg / "problems" / "toy_world.py")
    _edit(pkg / "problems" / "__init__.py", "\nBUILDERS = {\n", '\nfrom .toy_world import toy_cosine  # noqa: E402\n'
                                                               '\nBUILDERS = {\n    "toy-cosine": toy_cosine,\n')
    _edit(root / "tests" / "test_misfit_matrix.py", "SMALL = {  #", 'SMALL = {"toy-cosine": dict(num_agents=2, horizon=T),  #')
    shutil.copy(TOYS / "toy_exp.py", pkg / "experiments" / "toy_exp.py")
    _edit(pkg / "experiments" / "catalog.py", "quickstart  # noqa", "quickstart, toy_exp  # noqa")


def test_a_baseline_family_problem_and_experiment_as_real_modules_pass_the_derived_checks(tmp_path):
    """The README's list is the whole truth: in a copy of the checkout, the toys added as files where the
    list says (and nothing else) pass the default suite's checks that grow with the registries, and
    their experiment runs."""
    root = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "results")
    for part in ("bandits_jax", "tests", "bench", "reference", "docs"):
        shutil.copytree(ROOT / part, root / part, ignore=ignore)
    shutil.copytree(ROOT / "kernels", root / "bandits_jax" / "kernels", ignore=ignore)  # its installed place
    for part in ("README.md", "pyproject.toml"):
        shutil.copy(ROOT / part, root / part)
    before = _snapshot(root)
    _add_the_toys(root)
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("PYTEST_XDIST_WORKER", None)
    write = subprocess.run([sys.executable, "-m", "bandits_jax.reporting.docs", "--write"], cwd=root, env=env,
                           capture_output=True, text=True)
    assert write.returncode == 0, write.stderr
    after = _snapshot(root)
    touched = {p: "added" if p not in before else "edited" for p in after if before.get(p) != after[p]}
    assert touched == README_LIST
    assert "| `toy_walk` | `toyfam/walk.py` | Toy paper (2026) |" in (root / "README.md").read_text()
    checks = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *DERIVED],
                            cwd=root, env=env, capture_output=True, text=True)
    assert checks.returncode == 0, checks.stdout[-3000:] + checks.stderr[-2000:]
    run = subprocess.run([sys.executable, "-m", "bandits_jax.cli", "run", "toy/added", "--size", "smoke",
                          "--out", str(tmp_path / "out"), "--no-plot", "--quiet"], cwd=root, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    with np.load(tmp_path / "out" / "results.npz") as results:
        assert {key.split("/")[0] for key in results.files} >= {"ToyGreedy", "ToyWalk"}
