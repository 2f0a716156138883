"""Async-KernelUCB (JAX, Cholesky embedding, no basis change) against the paper's eigenbasis form
(reference/async_kernel_eigenbasis_np.py: eigendecomposed dictionaries, eq. (5) basis changes
of every client's stored statistics), on the same contexts, rewards, arrivals and random draws."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.distributed.async_kernel import async_kernel_ucb
from bandits_jax.core import EnvSpec
from bandits_jax.runner import replay
from reference.async_kernel_eigenbasis_np import (Eigenbasis, async_kernel_ucb_eigenbasis_np, basis_change,
                                                        gaussian_kernel)
from helpers import async_arrays, tie_and_rls_draws

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)

SEED = 7
KEY = jax.random.PRNGKey(SEED)
N, K, D, T = 4, 5, 3, 80  # one shape for every case: one compilation


@functools.lru_cache(maxsize=None)
def _jax_run():
    algo = async_kernel_ucb(dict_capacity=T, buffer_capacity=T)

    @jax.jit
    def run(params, contexts, rewards, active):
        state, actions, aux, _, reps = replay(algo, EnvSpec(N, K, D, T), params, contexts, rewards, active, KEY)
        return state, actions, aux, reps

    return run


def _fixed_arms(seed):
    """The same K contexts at every step for every client (as in the UCI environments), so sampled
    points repeat dictionary points and the duplicate rule is exercised."""
    contexts, _, arrivals, active = async_arrays(N, K, D, T, seed)
    contexts = np.broadcast_to(contexts[0, 0], contexts.shape).copy()
    rewards = np.sin(2 * contexts.sum(-1)) + 0.1 * np.random.default_rng(seed).normal(size=(T, N, K))
    return contexts, rewards, arrivals, active


CASES = {
    "ball": (dict(lam=1.0, alpha=1.0, q=1.0, threshold=1.0, lengthscale=0.7), lambda: async_arrays(N, K, D, T, 1)),
    "lam-q": (dict(lam=0.5, alpha=0.8, q=2.0, threshold=2.0, lengthscale=0.6), lambda: async_arrays(N, K, D, T, 5)),
    "fixed-arms": (dict(lam=1.0, alpha=1.0, q=3.0, threshold=0.5, lengthscale=0.5), lambda: _fixed_arms(9)),
    # a wide kernel and a small ridge: K_SS's smallest eigenvalue about 5e-6 of its largest
    "ill-conditioned": (dict(lam=0.1, alpha=0.5, q=1.0, threshold=1.0, lengthscale=2.5),
                        lambda: async_arrays(N, K, D, T, 4)),
}


def _stale_basis_changes(arrivals, trigger, dict_size):
    """How many times a client's stored statistics crossed more than one dictionary growth in one
    eq. (5) step (its last communication was before the previous one and the dictionary grew since)."""
    last, prev, count = np.zeros(N, int), 0, 0
    for t in np.nonzero(trigger)[0]:
        i = arrivals[t]
        count += sum(1 for j in range(N) if j != i and last[j] < prev)
        last[i] = prev = dict_size[t]
    return count


def _rotation(state, dictionary, n, gamma):
    """Q[n, n] with z_chol(x) = Q z_eig(x) for the dictionary prefix of n points:
    z_chol = L^{-1} K_S(x) and K_S(x) = U ev^{1/2} z_eig(x), so Q = L^{-1} U ev^{1/2} (orthogonal)."""
    basis = Eigenbasis(dictionary[:n], gamma, 1e-10)
    assert basis.rank == n
    return state.Linv[:n, :n] @ basis.U * np.sqrt(basis.ev)


@pytest.mark.parametrize("case", list(CASES))
def test_jax_matches_the_paper_eigenbasis_form(case):
    hp, env = CASES[case]
    contexts, rewards, arrivals, active = env()
    gamma = 1.0 / (2.0 * hp["lengthscale"] ** 2)  # rbf(lengthscale) = exp(-gamma |x - y|^2)
    with jax.enable_x64(True):
        params = {k: jnp.asarray(v, jnp.float64) for k, v in hp.items()}
        state, actions, aux, reps = jax.device_get(_jax_run()(params, jnp.asarray(contexts), jnp.asarray(rewards),
                                                              jnp.asarray(active)))
        tie_noise, rls_uniform = tie_and_rls_draws(SEED, N, K, T, T)
    ref = async_kernel_ucb_eigenbasis_np(arrivals, contexts, rewards, tie_noise, rls_uniform, lam=hp["lam"],
                                         alpha=hp["alpha"], q=hp["q"], threshold=hp["threshold"], gamma=gamma)
    diag = reps.diagnostics
    assert not reps.errors.any()

    # the run is informative: several communications, several points sent at some, clients whose
    # statistics cross more than one dictionary growth, a dictionary that grows across them
    events = ref["trigger"].astype(bool)
    assert 10 <= events.sum() < T
    assert len(np.unique(ref["dict_size"][events])) >= 3
    assert _stale_basis_changes(arrivals, ref["trigger"], ref["dict_size"]) > 0
    np.testing.assert_array_equal(ref["rank"], ref["dict_size"])  # no eigenvalue dropped: sizes comparable
    if case == "fixed-arms":
        assert ref["dropped"].sum() > 0 and ref["dict_size"][-1] <= K

    # same arms, same scores, same messages, same dictionary
    np.testing.assert_array_equal(aux["client"], arrivals)
    np.testing.assert_array_equal(actions[np.arange(T), arrivals], ref["actions"])
    score = aux["mean"] + hp["alpha"] * np.sqrt(aux["var"])
    for name, got in (("mean", aux["mean"]), ("var", aux["var"]), ("score", score), ("acc", diag["acc"])):
        np.testing.assert_allclose(got, ref[name], rtol=0, atol=1e-10, err_msg=name)
    np.testing.assert_array_equal(reps.rounds, ref["trigger"])
    np.testing.assert_array_equal(diag["trigger"], ref["trigger"])
    np.testing.assert_array_equal(reps.comm_up, ref["up"])
    np.testing.assert_array_equal(reps.comm_down, ref["down"])
    np.testing.assert_array_equal(diag["dict_size"], ref["dict_size"])
    m = int(state.dict_n)
    np.testing.assert_array_equal(state.dict_X[:m], ref["dictionary"])

    # eq. (5) per client == the chained aggregate (inside the reference)
    scale = 1.0 + np.abs(ref["A"]).max()
    np.testing.assert_allclose(ref["A_chain"], ref["A"], rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(ref["b_chain"], ref["b"], rtol=0, atol=1e-10 * scale)

    # the statistics themselves: the JAX aggregate and every client's snapshot are the eigenbasis
    # ones rotated by Q (the server's [I 0] padding is eq. (5) in the Cholesky basis)
    Q = _rotation(state, ref["dictionary"], m, gamma)
    np.testing.assert_allclose(Q @ Q.T, np.eye(m), rtol=0, atol=1e-8)
    np.testing.assert_allclose(state.A[:m, :m], Q @ ref["A"] @ Q.T, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(state.b[:m], Q @ ref["b"], rtol=0, atol=1e-9 * scale)
    np.testing.assert_array_equal(state.snap_n, ref["snap_m"])
    for i in range(N):
        n = int(ref["snap_m"][i])
        Qn = _rotation(state, ref["dictionary"], n, gamma)
        G = np.linalg.inv(ref["snap_A"][i] + hp["lam"] * np.eye(n))
        np.testing.assert_allclose(state.snap_Pinv[i][:n, :n], Qn @ G @ Qn.T, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.snap_coef[i][:n], Qn @ G @ ref["snap_b"][i], rtol=0, atol=1e-9)


def test_eq5_basis_change_moves_embeddings_and_composes():
    """For x in S_old, z(x; S_new) = T^T z(x; S_old); T_ab T_bc = T_ac. The first factor printed in
    eq. (5), ev_old^{+1/2}, fails the first identity by O(1)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3)) / np.sqrt(3)
    a, b, c = (Eigenbasis(X[:n], 1.0, 1e-10) for n in (4, 8, 12))
    T_ac = basis_change(a, c)
    np.testing.assert_allclose(a.embed(a.S) @ T_ac, c.embed(a.S), rtol=0, atol=1e-10)
    np.testing.assert_allclose(basis_change(a, b) @ basis_change(b, c), T_ac, rtol=0, atol=1e-10)
    np.testing.assert_allclose(T_ac @ T_ac.T, np.eye(4), rtol=0, atol=1e-10)  # orthonormal rows
    printed = (a.U * np.sqrt(a.ev)).T @ gaussian_kernel(a.S, c.S, 1.0) @ (c.U / np.sqrt(c.ev))
    assert np.abs(a.embed(a.S) @ printed - c.embed(a.S)).max() > 0.1
