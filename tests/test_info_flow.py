"""The audit of information flow (`bandits_jax.audit`): an algorithm that reports no communication keeps its
agents apart, so perturbing what agent j observes leaves every other agent's actions exactly as they were.

    every packaged regret algorithm   audited on the first small problem it fits (`audit.PROBLEMS`): each that
                                      reports no communication is isolated, and each that reports some is
                                      "not audited", never a leak (which is which, the audit's own runs say)
    toy plugins                       one pooling every agent's data with zero communication reported is
                                      caught, every pair named; one leaking a single way is caught on that
                                      pair alone; an honestly independent one passes
    bad input                         one ConfigError line, before anything compiles

The toys are one LinUCB plugin whose `share` option says whose observations each agent learns from; they
are registered for a test and removed after it (`own_registry`).
"""
from __future__ import annotations

import jax.numpy as jnp
import pytest

from bandits_jax import algorithms
from bandits_jax.algorithms import ALGORITHMS, algorithm_options, build_algorithm, register_algorithm
from bandits_jax.audit import VERDICTS, audit_algorithm, fitting_problem
from bandits_jax.core import Algorithm, ConfigError, Param, Trial, report
from bandits_jax.curves import Spec
from test_comm_unit import SILENT

SEEDS, T = 2, 20
COSINE = "cosine:num_agents=3,num_arms=5,dim=4"


def is_trial(name: str) -> bool:
    """Whether the packaged name builds a phase-level Trial (no steps to audit)."""
    options = {"horizon": 2} if "horizon" in algorithm_options(name) else {}
    return isinstance(build_algorithm(Spec(name, options)), Trial)


REGRET = [name for name, target in ALGORITHMS.items() if isinstance(target, str) and not is_trial(name)]
IGNORES_REWARDS = ("uniform_random",)  # its actions never read a reward: nothing can move them


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """ALGORITHMS as a copy, so no toy registered here is left in it."""
    monkeypatch.setattr(algorithms, "ALGORITHMS", dict(algorithms.ALGORITHMS))
    monkeypatch.setattr(algorithms, "TUNINGS", dict(algorithms.TUNINGS))


# ------------------------------------------------------------------------------------ the toy plugin
SHARES = {  # [N, N] weights: agent i learns from agent j's observation where share[i, j] = 1
    "own": lambda n: jnp.eye(n),
    "all": lambda n: jnp.ones((n, n)),
    "one_way": lambda n: jnp.eye(n).at[1, 0].set(1.0),
}


def toy_linucb(share: str = "own", beta: float = 1.0) -> Algorithm:
    """LinUCB per agent, agent i learning from the agents SHARES[share] names; it reports no communication.

    State {"gram": [N, d, d], "b": [N, d]}: each agent's ridge Gram matrix and response vector.
    """
    weights = SHARES[share]

    def init(key, spec, params, sizes, public):
        n, d = spec.num_agents, spec.dim
        return {"gram": jnp.broadcast_to(jnp.eye(d), (n, d, d)) + 0.0, "b": jnp.zeros((n, d))}

    def select(params, state, step, key):
        inverse = jnp.linalg.inv(state["gram"])  # [N, d, d]
        theta = jnp.einsum("nde,ne->nd", inverse, state["b"])
        width = jnp.sqrt(jnp.einsum("nkd,nde,nke->nk", step.contexts, inverse, step.contexts))
        scores = jnp.einsum("nkd,nd->nk", step.contexts, theta) + params["beta"] * width
        return jnp.argmax(scores, axis=1).astype(jnp.int32), ()

    def update(params, state, step, actions, rewards, aux, key):
        x = jnp.take_along_axis(step.contexts, actions[:, None, None], axis=1)[:, 0]  # [N, d]
        x = jnp.where(step.active[:, None], x, 0.0)
        w = weights(x.shape[0])
        gram = state["gram"] + jnp.einsum("ij,jd,je->ide", w, x, x)
        b = state["b"] + jnp.einsum("ij,j,jd->id", w, jnp.where(step.active, rewards, 0.0), x)
        return {"gram": gram, "b": b}, report(rewards.dtype)

    return Algorithm(f"ToyLinUCB ({share})", {"beta": Param(beta, "nonnegative")}, init, select, update)


# ------------------------------------------------------------------------------------ packaged algorithms
# the default suite audits the names whose records declare them silent (test_comm_unit checks each other
# packaged regret name has a hand-computed count);
# the rest, which the audit first runs to find that they communicate, run with -m slow
@pytest.mark.parametrize("name", [n if n in SILENT else pytest.param(n, marks=pytest.mark.slow) for n in REGRET])
def test_every_packaged_algorithm_that_reports_no_communication_is_isolated(name):
    audit = audit_algorithm(name, seeds=SEEDS, horizon=T)
    assert audit.verdict in VERDICTS and audit.errors == 0, audit.text
    if name in SILENT:  # its record declares it silent: not a scalar, not a round
        assert (audit.comm_scalars, audit.comm_rounds, audit.communicates) == (0, 0, False), audit.text
    if audit.communicates:
        assert audit.verdict == "not audited" and audit.perturbed == () and audit.leaks == (), audit.text
        return
    assert audit.verdict == "isolated" and audit.leaks == (), audit.text
    n = audit.actions.shape[-1]
    assert audit.perturbed == tuple(range(n)) and audit.actions.shape == (n + 1, SEEDS, T, n)
    if name not in IGNORES_REWARDS:  # the perturbation reached the perturbed agent's own actions: not vacuous
        assert audit.moved == audit.perturbed, audit.text
    assert "isolated: perturbing agent j's rewards leaves the others' actions unchanged" in audit.text


def test_a_communicating_algorithm_is_not_audited_nor_called_a_leak():
    audit = audit_algorithm("dis_lin_ucb", COSINE, seeds=SEEDS, horizon=T)
    assert audit.verdict == "not audited" and audit.comm_scalars > 0 and audit.leaks == ()
    assert audit.text.startswith(f"dis_lin_ucb on {COSINE},horizon={T}: not audited: it reports communication (")
    assert audit.actions.shape[0] == 1  # the unperturbed runs alone: nothing else is run


# ------------------------------------------------------------------------------------ toy plugins
def test_a_plugin_that_pools_every_agents_data_and_reports_none_is_caught():
    register_algorithm("toy_linucb", toy_linucb)
    audit = audit_algorithm("toy_linucb:share=all", COSINE, seeds=SEEDS, horizon=T)
    assert audit.verdict == "leaks" and audit.comm_scalars == 0 and audit.comm_rounds == 0
    assert audit.leaks == tuple((j, i) for j in range(3) for i in range(3) if i != j)
    assert ("leaks: agent 1's actions change when agent 0's rewards change, yet it reports no communication "
            "(first at step ") in audit.text
    assert "pairs j->i: 0->1, 0->2, 1->0, 1->2, 2->0, 2->1)" in audit.text


def test_a_plugin_that_leaks_one_way_is_caught_on_that_pair_alone():
    register_algorithm("toy_linucb", toy_linucb)
    audit = audit_algorithm("toy_linucb:share=one_way", COSINE, seeds=SEEDS, horizon=T)
    assert audit.verdict == "leaks" and audit.leaks == ((0, 1),)
    seed, step = audit.first[(0, 1)]
    unperturbed, perturbed = audit.actions[0, seed, :, 1], audit.actions[1, seed, :, 1]
    assert (unperturbed[:step] == perturbed[:step]).all() and unperturbed[step] != perturbed[step]


def test_an_honestly_independent_plugin_passes():
    register_algorithm("toy_linucb", toy_linucb)
    audit = audit_algorithm("toy_linucb", COSINE, seeds=SEEDS, horizon=T)
    assert audit.verdict == "isolated" and audit.leaks == () and audit.moved == (0, 1, 2), audit.text
    assert audit.text.startswith(f"toy_linucb on {COSINE},horizon={T}: isolated: ")


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, message", [
    (lambda: audit_algorithm("no_such_ucb"), "unknown algorithm 'no_such_ucb'"),
    (lambda: audit_algorithm("ind_rage"), "audit: ind_rage is a phase-level trial"),
    (lambda: audit_algorithm("linucb:lam=-1"), "hyper-parameter lam must be a finite number > 0"),
    (lambda: audit_algorithm("oful", COSINE), "oful does not fit cosine"),
    (lambda: audit_algorithm("async_kernel_ucb", COSINE), "async_kernel_ucb does not fit cosine: it needs exactly one"),
    (lambda: audit_algorithm("linucb", "no_such_problem"), "unknown problem 'no_such_problem'"),
    (lambda: audit_algorithm("linucb", seeds=0), "audit: seeds must be a positive integer, got 0"),
    (lambda: audit_algorithm("linucb", horizon=0), "audit: horizon must be a positive integer, got 0"),
    (lambda: audit_algorithm("linucb", agents=(3,)), "audit: agents must be agent indices in [0, 3)"),
    (lambda: fitting_problem("dis_kernel_ucb", problems=(COSINE,)), "audit: dis_kernel_ucb fits none of the audit's"),
])
def test_bad_input_is_one_line(call, message):
    with pytest.raises(ConfigError) as caught:
        call()
    assert message in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
