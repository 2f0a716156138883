"""No silent behaviour: a summary counts the runs that failed, beside the messages the sweep recorded."""
import numpy as np

from bandits_jax.reporting.results import Results, summary_markdown


def _arrays(errors):
    S = len(errors)
    return {"regret": np.ones((S, 5, 1)), "comm_up": np.zeros((S, 5)), "comm_down": np.zeros((S, 5)),
            "rounds": np.zeros((S, 5)), "errors": np.asarray(errors, np.int64)}


def test_summary_counts_the_failed_runs_of_a_partly_failed_curve():
    """Some seeds of curve A failed, every seed of B: each line of the errors section says how many of
    the curve's runs carry error bits, then the sweep's message (seeds and the algorithm's words)."""
    arrays = {"A": _arrays([0, 2, 0, 2]), "B": _arrays([1, 1, 1, 1]), "C": _arrays([0, 0, 0, 0])}
    meta = {"experiment": "x", "size": "smoke", "algorithms": ["A", "B", "C"],
            "errors": {"A": "seeds 1, 3: A: the buffer is full", "B": "seeds 0, 1, 2, 3: B: diverged"}}
    lines = summary_markdown(Results(arrays, np.arange(4), meta)).splitlines()
    assert "- A: 2 of 4 runs failed; seeds 1, 3: A: the buffer is full" in lines
    assert "- B: 4 of 4 runs failed; seeds 0, 1, 2, 3: B: diverged" in lines
    assert not any(line.startswith("- C") for line in lines)


def test_a_stand_in_graph_is_named_in_the_info_and_the_plot_title():
    from bandits_jax.reporting.plotting import plot_title
    from bandits_jax.problems import make_problem

    real = make_problem("coop-linear", num_agents=6, graph="er")
    stand_in = make_problem("coop-linear", num_agents=6, graph="skitter-standin")
    assert "stand_in" not in real.info and "as-Skitter" in stand_in.info["stand_in"]
    metadata = {"experiment": "coop/linear-skitter",
                "problem_info": {"coop-linear": dict(stand_in.info), "other": dict(real.info)}}
    assert plot_title(metadata) == f"coop/linear-skitter\nstand-in: {stand_in.info['stand_in']}"
    assert plot_title({"experiment": "x", "problem_info": {"p": dict(real.info)}}) == "x"
