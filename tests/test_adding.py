"""The README's "Adding an algorithm" list, made with toys: each addition touches exactly the files the
list names, and nothing else is needed for the name to build, run and appear in the generated table."""
from __future__ import annotations

import ast
import sys
import tomllib
import types
from pathlib import Path

import numpy as np

from bandits_jax import algorithms, docs
from bandits_jax.algorithms import make_algorithm, paper_of
from bandits_jax.curves import Curve, Spec
from bandits_jax.experiments import registry
from bandits_jax.problems import BUILDERS, make_problem, synthetic

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "bandits_jax" / "algorithms"


def relisted(monkeypatch):
    """The registry as it would be built on import, after the toy's edits."""
    monkeypatch.setattr(algorithms, "ALGORITHMS", algorithms._lineage_names())


def test_a_baseline_is_one_line_in_its_family_names(monkeypatch):
    """1. A baseline: a factory in the family's folder and one NAMES line (here the existing
    uniform module stands in for the new one)."""
    from bandits_jax.algorithms import single

    monkeypatch.setitem(single.NAMES, "toy_random", ("uniform:uniform_random", "toy baseline"))
    relisted(monkeypatch)
    assert algorithms.ALGORITHMS["toy_random"] == "single.uniform:uniform_random"
    assert make_algorithm("toy_random").name == "Random"
    assert "| `toy_random` | `single/uniform.py` | toy baseline |" in docs.registry_table()


def test_a_new_family_is_a_folder_and_its_lineage(monkeypatch):
    """2. A new family: a package with PAPER and NAMES, and its name in LINEAGES."""
    from bandits_jax.algorithms.single.uniform import uniform_random

    family = types.ModuleType("bandits_jax.algorithms.toyfam")
    family.PAPER = "Toy paper (2026)"
    family.NAMES = {"toy_walk": ("walk:toy_walk", family.PAPER)}
    module = types.ModuleType("bandits_jax.algorithms.toyfam.walk")
    module.toy_walk = lambda: uniform_random()._replace(name="ToyWalk")
    monkeypatch.setitem(sys.modules, family.__name__, family)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(algorithms, "LINEAGES", algorithms.LINEAGES + ("toyfam",))
    relisted(monkeypatch)
    assert make_algorithm("toy_walk").name == "ToyWalk"
    assert paper_of("toy_walk") == "Toy paper (2026)"
    assert "| `toy_walk` | `toyfam/walk.py` | Toy paper (2026) |" in docs.registry_table()


def test_every_family_folder_is_a_lineage_and_a_package():
    """2. The folder, LINEAGES and pyproject's packages name the same families (a folder left out of
    packages would be missing from the wheel)."""
    folders = {p.parent.name for p in FAMILIES.glob("*/__init__.py")}
    packages = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert folders == set(algorithms.LINEAGES)
    assert {f"bandits_jax.algorithms.{f}" for f in folders} <= packages
    assert {name.split(".")[0] for name in algorithms.ALGORITHMS.values() if isinstance(name, str)} == folders


def test_a_problem_is_one_line_in_builders(monkeypatch):
    """3. A problem: a builder and one BUILDERS line."""
    def toy_cosine(num_agents: int = 2, horizon: int = 10):
        """A toy world: the cosine reward, renamed."""
        return synthetic.cosine(num_agents=num_agents, horizon=horizon)

    monkeypatch.setitem(BUILDERS, "toy-cosine", toy_cosine)
    assert make_problem("toy-cosine", num_agents=3).spec.num_agents == 3


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
