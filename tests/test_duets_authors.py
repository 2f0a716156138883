"""DUETS as the authors' code runs it (algorithms.duets.duets_authors) against the plain NumPy loop written
from the spec's description of that code (reference/duets_authors_np.py), fed the same draws."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.algorithms.duets import duets as dm
from bandits_jax.algorithms.duets import duets_authors as da
from bandits_jax.algorithms import make_algorithm
from bandits_jax.core import ConfigError, Step
from bandits_jax.problems.candidates import FUNCTIONS, candidate_problem

from reference import duets_authors_np as ref

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)


_JITTED = {}


def drive(alg, name, N, T, M, seed, **values):
    """`alg` step by step on function `name` (M candidates) with rewards f + 0.2 eps, eps drawn here;
    hyper-parameters its defaults but `values`. Returns (actions [T, N], reports, first state,
    eps [T, N, M], f [M], X [M, d])."""
    prob = candidate_problem(name, N, T, num_candidates=M)
    instance = prob.init(jax.random.PRNGKey(0))
    params = {k: jnp.asarray(v) for k, v in {**alg.defaults, **values}.items()}
    state = first = alg.init(jax.random.PRNGKey(seed), prob.spec, params, None, prob.public(instance))
    eps = np.asarray(jax.random.normal(jax.random.PRNGKey(1000 + seed), (T, N, M)))
    f = np.asarray(instance["f"])
    if id(alg.update) not in _JITTED:      # one compilation per algorithm object, whatever its values
        _JITTED[id(alg.update)] = (alg, jax.jit(alg.select), jax.jit(alg.update))
    select, update = _JITTED[id(alg.update)][1:]
    actions, reports = [], []
    for t in range(T):
        step = Step(jnp.asarray(t, jnp.int32), jnp.zeros((N, M, 0)), jnp.ones((N,), bool))
        a, aux = select(params, state, step, jax.random.PRNGKey(0))
        a = np.asarray(a)
        r = f[a] + 0.2 * eps[t, np.arange(N), a]
        state, rep = update(params, state, step, jnp.asarray(a), jnp.asarray(r), aux, jax.random.PRNGKey(0))
        actions.append(a)
        reports.append(jax.tree_util.tree_map(np.asarray, rep))
    return np.array(actions), reports, first, eps, f, np.asarray(instance["X"])


def coin_and_keep_draws(state, schedule, N):
    """The uniforms the run drew, from its keys: u_query (per epoch [N, T_j]) and u_keep (per completed
    epoch [N T_j], agent-major), in the reference's layout."""
    def u(n, j, i):
        key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(state.coin, n), j), i)
        return jax.random.uniform(key, (), jnp.float64)

    u_query = [np.asarray(jax.vmap(jax.vmap(lambda n, i, j=j: u(n, j, i), (None, 0)), (0, None))(
        jnp.arange(N), jnp.arange(length))) for j, length in enumerate(schedule.lengths)]
    u_keep = [np.asarray(dm.keep_uniforms(schedule, state, j, N)[0])[:, :schedule.lengths[j]].reshape(-1)
              for j in range(len(schedule.lengths) - 1)]
    return u_query, u_keep


def per_epoch(reports, name):
    """The diagnostic `name` at the communication steps."""
    return np.array([float(r.diagnostics[name]) for r in reports if float(r.rounds)])


def test_ceil_schedule():
    """T_{j+1} = ceil(sqrt(T T_j)): T = 50, T_1 = 2 gives 2, 10, 23, 34 (cut to 15), rounds after the
    steps 2, 12, 35 (counted from 1); the integer ceil equals the float one the code takes."""
    sched = dm.epoch_schedule(50, 2, da.ceil_next)
    assert sched.lengths == (2, 10, 23, 34) and sched.steps == (2, 10, 23, 15) and sched.starts == (0, 2, 12, 35)
    assert np.flatnonzero(np.asarray(dm.step_tables(sched)[2])).tolist() == [1, 11, 34]
    assert ref.epoch_lengths_ceil(50, 2) == ([2, 10, 23, 34], [2, 10, 23, 15])
    assert [da.ceil_next(T, Tj) for T in range(1, 300) for Tj in range(1, 60)] == \
        [math.ceil(math.sqrt(T * Tj)) for T in range(1, 300) for Tj in range(1, 60)]
    assert da.duets_authors(50).description.count("[2, 10, 23, 15]") == 1


# (function, beta, p_log, N, T, T1, M, what the run must show): "repeats", an inducing set with a
# candidate drawn twice (kept draws > distinct ones); "empty", an epoch with no inducing point
CASES = [("branin", 0.5, 4.0, 3, 20, 2, 150, ""), ("hartmann4", 1.0, 4.0, 3, 20, 2, 150, "repeats"),
         ("h1", 0.2, 4.0, 4, 16, 2, 120, "repeats"), ("h2", 0.5, 0.2, 3, 50, 2, 150, "empty"),
         pytest.param("branin", 0.2, 4.0, 10, 50, 2, 300, "repeats", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name,beta,p_log,N,T,T1,M,shows", CASES)
def test_matches_numpy_reference(name, beta, p_log, N, T, T1, M, shows):
    """Same coins, keep draws and noise: the same queries, regret, inducing draws, trims and
    communication as the loop (pseudo-inverses, no de-duplication). sigma~ is compared to 1e-6 only:
    K_SS reaches condition numbers of about 1e9 here (Branin, N = 10), and the loop's pinv and the
    eigenvalue-floored root, equal in exact arithmetic, then differ by about 3e-8 relative."""
    ls = FUNCTIONS[name][3]
    with jax.enable_x64(True):
        alg = da.duets_authors(T, T1, beta=beta, p_log=p_log, lengthscale=ls)
        actions, reports, first, eps, f, X = drive(alg, name, N, T, M, seed=7)
        u_query, u_keep = coin_and_keep_draws(first, dm.epoch_schedule(T, T1, da.ceil_next), N)
    out = ref.duets_authors_np(X, f, eps, u_query, u_keep, T1=T1, p_log=p_log, beta=beta, lam=0.2,
                               lengthscale=ls, noise_std=0.2)
    np.testing.assert_array_equal(actions, out["actions"])
    np.testing.assert_allclose(f.max() - f[actions], out["regret"], rtol=0, atol=1e-12)
    for key in ("comm_up", "comm_down"):
        np.testing.assert_array_equal([float(getattr(r, key)) for r in reports], out[key])
    np.testing.assert_array_equal([float(r.rounds) for r in reports], out["syncs"])
    for key in ("comm_paper", "comm_code"):
        np.testing.assert_array_equal([float(r.diagnostics[key]) for r in reports], out[key])
    np.testing.assert_array_equal(per_epoch(reports, "inducing"), [len(s) for s in out["S_ids"]])
    np.testing.assert_array_equal(per_epoch(reports, "inducing_distinct"), [len(set(s)) for s in out["S_ids"]])
    np.testing.assert_allclose(per_epoch(reports, "p"), out["p"], rtol=1e-12)
    np.testing.assert_array_equal(per_epoch(reports, "active_after"), out["active_after"])
    np.testing.assert_array_equal(per_epoch(reports, "best_survived"), np.asarray(out["best_survived"], float))
    np.testing.assert_allclose(per_epoch(reports, "sigma_tilde_max"), [s.max() for s in out["sigma_tilde"]],
                               rtol=1e-6)
    assert np.all(per_epoch(reports, "regen_mismatch") == 0)
    # the rule: nested sets; the maximisers of mu~ and of the LCB survive
    masks = out["active_masks"]
    for j, (mu, sig) in enumerate(zip(out["mu_tilde"], out["sigma_tilde"])):
        ids = np.flatnonzero(masks[j])
        assert not np.any(masks[j + 1] & ~masks[j])
        assert masks[j + 1][ids[np.argmax(mu)]] and masks[j + 1][ids[np.argmax(mu - beta * sig)]]
    # the runs must exercise what they test: trimming, p < 1, and the case's own feature
    assert out["active_after"][-1] < M and min(out["p"]) < 1
    sizes = [(len(s), len(set(s))) for s in out["S_ids"]]
    if shows == "repeats":
        assert any(n > u for n, u in sizes)
    if shows == "empty":        # an empty inducing set trims nothing (mu~ = 0, sigma~ constant)
        empty = [j for j, (n, _) in enumerate(sizes) if n == 0]
        assert empty and all(out["active_before"][j] == out["active_after"][j] for j in empty)


def test_coincides_with_paper_rule_in_its_limit():
    """Where both schedules agree (T = 20, T_1 = 5: 5, 10, 5 under floor and ceil) and every draw is
    inducing (p = 1 for both): lam sigma~^2_max of the authors' variant equals the paper's exact
    sigma^2_max (Eq. 6 scaling, S = D); at beta = 0 both rules keep exactly the argmax of the same mu~,
    so queries, regret and trims are equal; at a huge beta neither trims, the queries are equal."""
    N, T, M = 3, 20, 150
    with jax.enable_x64(True):
        paper = dm.duets(T, 5, p0=1e9, lengthscale=0.2)
        authors = da.duets_authors(T, 5, p_log=1e9, lengthscale=0.2)
        for beta in (0.0, 1e9):
            a_p, r_p, *_ = drive(paper, "branin", N, T, M, seed=2, beta=beta)
            a_a, r_a, *_ = drive(authors, "branin", N, T, M, seed=2, beta=beta)
            np.testing.assert_array_equal(a_p, a_a)
            np.testing.assert_array_equal(per_epoch(r_p, "active_after"), per_epoch(r_a, "active_after"))
            np.testing.assert_allclose(0.2 * per_epoch(r_a, "sigma_tilde_max") ** 2, per_epoch(r_p, "sigma2_max"),
                                       rtol=1e-8)
            np.testing.assert_array_equal(per_epoch(r_a, "inducing"), [N * 5, N * 10])
            np.testing.assert_array_equal(per_epoch(r_a, "inducing_distinct"), per_epoch(r_p, "inducing"))
            trimmed = per_epoch(r_a, "active_after")
            assert (trimmed[-1] <= 2) if beta == 0 else np.all(trimmed == M)


def test_config_errors():
    """Bad options are one-line ConfigErrors before anything compiles; the registry builds it."""
    alg = make_algorithm("duets_authors", horizon=50, beta=2.0)
    assert alg.name == "DUETS-authors" and alg.defaults == {"beta": 2.0, "p_log": 4.0, "lam": 0.2, "lengthscale": 1.0}
    bad = [(dict(horizon=0), "horizon"), (dict(horizon=50, first_epoch=1.5), "first_epoch"),
           (dict(horizon=50, beta=-1.0), "beta"), (dict(horizon=50, p_log="x"), "p_log"),
           (dict(horizon=50, lam=0.0), "lam"), (dict(horizon=50, kernel="nope"), "DUETS-authors"),
           (dict(horizon=50, eig_tol=2.0), "eig_tol"), (dict(horizon=50, p0=10.0), "p0")]
    for options, word in bad:
        with pytest.raises(ConfigError, match=word) as err:
            make_algorithm("duets_authors", **options)
        assert "\n" not in str(err.value)
    prob = candidate_problem("branin", 2, 20, num_candidates=30)
    with pytest.raises(ConfigError, match=r"duets_authors\(horizon=20"):
        alg.init(jax.random.PRNGKey(0), prob.spec, alg.defaults, None, prob.public(prob.init(None)))
