"""The Coop-KernelUCB experiments (bandits_jax.experiments.coop): the eight Figure 1 panels and the V
sweep as data, one panel end to end, and bad graph input refused before anything is written."""
import json

import numpy as np
import pytest
from helpers import REAL_DIR, needs_data

from bandits_jax.cli import main
from bandits_jax.core import ConfigError
from bandits_jax.problems.datasets import DataNotFoundError
from bandits_jax.experiments import coop as coop_exps
from bandits_jax.experiments.catalog import get_experiment
from bandits_jax.experiments.registry import build_curves, build_runs, resolve_config
from bandits_jax.sweep import run_experiment

PANELS = [f"coop/{k}-{n}" for k in ("linear", "rbf") for n in ("er", "facebook", "twitch", "skitter")]
# the graph option each panel's world gets by default: the stand-in files are asked for by name
PANEL_GRAPHS = {"er": "er", "facebook": "facebook", "twitch": "twitch-engb", "skitter": "skitter-oregon"}


@pytest.mark.parametrize("name", PANELS)
@pytest.mark.parametrize("size", ["small", "paper"])
def test_panels_are_six_methods_on_one_world(name, size):
    exp = get_experiment(name)
    config = resolve_config(exp, size, {})
    curves = build_curves(exp, config)
    kernel, network = name[5:].split("-")
    want = coop_exps.LINEAR if kernel == "linear" else coop_exps.RBF
    assert [c.name for c in curves] == list(want) == [c.tags["method"] for c in curves]
    assert all(c.problem == curves[0].problem for c in curves)  # common random numbers: one world
    world = curves[0].problem
    assert world.name == f"coop-{kernel}" and world.options["graph"] == PANEL_GRAPHS[network]
    assert world.options["num_agents"] == {"small": 50, "paper": 200}[size]
    assert config["horizon"] == {"small": 200, "paper": 500}[size]
    assert config["seeds"] == {"small": 20, "paper": 100}[size]
    for curve in curves:
        options = curve.algorithm.options
        assert options["storage"] == "feature" and options["ring_rounds"] == 16
        if curve.name in ("Coop-KernelUCB", "Dist-KernelUCB", "Eager-KernelUCB"):
            assert options["embedding"] == "common_lag" and options["kernel"] == kernel
            assert (options["r_max"], options["landmarks"]) == ((8, 32) if size == "small" else (16, 64))


def test_v_sweep_tags_and_worlds():
    exp = get_experiment("coop/v-sweep")
    config = resolve_config(exp, "small", {})
    curves = build_curves(exp, config)
    assert exp.x == "V" and len(curves) == 4 * 6
    assert sorted({c.tags["V"] for c in curves}) == [25, 50, 100, 200]
    assert all(c.problem.options["num_agents"] == c.tags["V"] for c in curves)
    runs = build_runs(exp, resolve_config(exp, "smoke", {}))
    assert sorted({p.spec.num_agents for p, _, _ in runs}) == [4, 8]
    assert {p.info["gamma"] for p, _, _ in runs} == {1}


def test_v_sweep_refuses_num_agents_it_would_ignore():
    """The sweep's V comes from agent_counts alone: num_agents is no key of it, so an override is refused
    (one line listing the keys, agent_counts among them) instead of being ignored."""
    exp = get_experiment("coop/v-sweep")
    assert "num_agents" not in resolve_config(exp, "small", {})
    with pytest.raises(ConfigError, match=r"^coop/v-sweep: unknown key 'num_agents'; settable keys: .*agent_counts"):
        resolve_config(exp, "smoke", {"num_agents": "50"})


def test_bad_gamma_is_refused():
    exp = get_experiment("coop/linear-er")
    with pytest.raises(ConfigError, match="gamma must be an integer >= 0"):  # 0: the spec's default gamma
        build_runs(exp, resolve_config(exp, "smoke", {"gamma": "-1"}))


def test_one_panel_end_to_end(tmp_path):
    """coop/linear-er at smoke size, two methods: per-agent regret, messages counted, the world's
    structural numbers in the summary and metadata."""
    out = tmp_path / "er"
    run_experiment("coop/linear-er", "smoke", out=out, quiet=True, only=("Ind-LinUCB", "Eager-KernelUCB"))
    meta = json.loads((out / "metadata.json").read_text())
    info = meta["problem_info"]["coop-linear"]
    assert info["graph_source"] == "erdos-renyi(8, 0.7)" and info["network_source"] == "synthetic"
    assert (info["nodes"], info["gamma"], info["upsilon_z"]) == (8, 1, info["clusters"])
    arrays = np.load(out / "results.npz")
    keys = sorted(k for k in arrays.files if k.endswith("regret"))
    assert len(keys) == 2
    summary = (out / "summary.md").read_text()
    assert "Eager-KernelUCB" in summary and "graph_source = erdos-renyi(8, 0.7)" in summary
    assert (out / "plot.png").stat().st_size > 0
    figure = tmp_path / "figure1.png"
    assert main(["plot", str(out), str(out), str(out), "--figure", str(figure), "--rows", "2"]) == 0
    assert figure.stat().st_size > 0
    assert main(["plot", str(out), "--rows", "2"]) == 2  # --rows needs --figure


@pytest.fixture
def graph_files(tmp_path):
    (tmp_path / "bad.txt").write_text("1 2\n2 3\nx y z\n")
    (tmp_path / "split.txt").write_text("1 2\n2 3\n3 1\n4 5\n5 6\n6 4\n7 8\n8 9\n")
    (tmp_path / "small.txt").write_text("# a connected graph of 5 nodes\n1 2\n2 3\n3 4\n4 5\n")
    return tmp_path


@pytest.mark.parametrize("graph, message", [
    ("missing.txt", "neither a known name"),
    ("bad.txt", "line 3: malformed edge 'x y z'"),
    ("split.txt", "disconnected (9 nodes); its largest connected component has 3 nodes, fewer than V = 8"),
    ("small.txt", "its largest connected component has 5 nodes, fewer than V = 8"),
    ("facebook", "facebook_combined.txt not found"),
])
def test_bad_graph_input_exits_2_with_one_line_and_writes_nothing(graph_files, monkeypatch, capsys, graph,
                                                                   message):
    monkeypatch.delenv("BANDITS_JAX_DATA_DIR", raising=False)
    target = graph if graph == "facebook" else str(graph_files / graph)
    out = graph_files / "out"
    assert main(["run", "coop/linear-er", "--size", "smoke", "--set", f"graph={target}", "--out", str(out),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("bandits-jax: error: ") and message in err
    assert not out.exists()


@needs_data("graphs/oregon1_010331.txt", "graphs/musae_ENGB_edges.csv")
@pytest.mark.parametrize("panel, text", [
    ("coop/linear-skitter", "SNAP Oregon-1 AS graph (oregon1_010331.txt), a real graph standing in for "
                            "SNAP as-Skitter"),
    ("coop/rbf-twitch", "SNAP musae-Twitch ENGB (musae_ENGB_edges.csv), a real graph standing in for "
                        "SNAP musae-Twitch DE"),
])
def test_real_graph_panels_name_their_file(panel, text):
    """The default skitter and twitch panels run on the stand-in files they ask for by name, and say so in
    the world's description and graph_source; the spec's own file, where it is absent, is refused."""
    exp = get_experiment(panel)
    runs = build_runs(exp, resolve_config(exp, "small", {"data_dir": str(REAL_DIR)}))
    problem = runs[0][0]
    assert text in problem.info["graph_source"] and text in problem.description
    assert problem.info["network_source"] == "real" and problem.info["nodes"] == 50
    real = {"coop/linear-skitter": ("skitter", "as-skitter.txt"), "coop/rbf-twitch": ("twitch", "musae_DE_edges.csv")}
    name, file = real[panel]
    if not (REAL_DIR / "graphs" / file).is_file():
        with pytest.raises(DataNotFoundError, match=f"{file} not found"):
            build_runs(exp, resolve_config(exp, "small", {"data_dir": str(REAL_DIR), "graph": name}))
