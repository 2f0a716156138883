"""DUETS against the NumPy reference loop written from the spec, and the spec's checks (spec §9)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import identity, runner
from bandits_jax.algorithms import make_algorithm
from bandits_jax.algorithms.duets import duets as dm
from bandits_jax.core import ConfigError
from bandits_jax.algorithms.base import capacity_ladder, on_candidates
from bandits_jax.algorithms.distributed.approx_dis_kernel import approx_dis_kernel_ucb_duets
from bandits_jax.algorithms.distributed.dis_kernel import dis_kernel_ucb_duets
from bandits_jax.algorithms.single.kernel import kernel_ucb
from bandits_jax.problems.candidates import FUNCTIONS, candidate_problem, candidate_set

from reference import duets_np as ref

pytestmark = pytest.mark.numerics  # checked against an independent computation (pyproject.toml)


@pytest.fixture
def fresh_traces():
    """Clears JAX's trace caches before and after a test that monkeypatches a module constant read
    at trace time, so neither it nor a later test reuses a trace made with the other value."""
    jax.clear_caches()
    yield
    jax.clear_caches()


def manual_run(name, N, T, M, seed=0, beta=1.0, T1=2, noise_std=0.2, p0=10.0, lam=0.2):
    """DUETS driven step by step with rewards f + noise_std eps (eps drawn here); returns the
    actions [T, N], reports, final state and the draws the reference needs."""
    ls = FUNCTIONS[name][3]
    prob = candidate_problem(name, N, T, noise_std=noise_std, num_candidates=M)
    alg = dm.duets(T, T1, beta=beta, p0=p0, lam=lam, lengthscale=ls)
    instance = prob.init(jax.random.PRNGKey(0))
    params = {k: jnp.asarray(v) for k, v in alg.defaults.items()}
    state = alg.init(jax.random.PRNGKey(seed), prob.spec, params, None, prob.public(instance))
    eps = np.asarray(jax.random.normal(jax.random.PRNGKey(1000 + seed), (T, N, M)))
    f = np.asarray(instance["f"])
    select, update = jax.jit(alg.select, static_argnums=()), jax.jit(alg.update)
    actions, reports, states = [], [], [state]
    for t in range(T):
        step = _step(t, N, M)
        a, aux = select(params, state, step, jax.random.PRNGKey(0))
        a = np.asarray(a)
        r = f[a] + noise_std * eps[t, np.arange(N), a]
        state, rep = update(params, state, step, jnp.asarray(a), jnp.asarray(r), aux, jax.random.PRNGKey(0))
        actions.append(a)
        reports.append(jax.tree_util.tree_map(np.asarray, rep))
        states.append(state)
    return np.array(actions), reports, states, eps, f, alg, params


def _step(t, N, M):
    from bandits_jax.core import Step
    return Step(jnp.asarray(t, jnp.int32), jnp.zeros((N, M, 0)), jnp.ones((N,), bool))


def draws_of(states, alg_schedule, N):
    """The reference's uniforms, taken from the run's keys (state at the start of each epoch)."""
    sched = alg_schedule
    coin, server = states[0].coin, states[0].server
    width = max(sched.lengths[:-1], default=1)
    u_query, u_keep, u_empty = [], [], []
    for j, length in enumerate(sched.lengths):
        u_query.append(np.array([[float(jax.random.uniform(
            jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(coin, n), j), i), (), jnp.float64))
            for i in range(length)] for n in range(N)]))
        if j < len(sched.lengths) - 1:
            k_keep, k_empty = jax.random.split(jax.random.fold_in(server, j))
            u_keep.append(np.asarray(jax.random.uniform(k_keep, (N, width), jnp.float64))[:, :length].reshape(-1))
            u_empty.append(float(jax.random.uniform(k_empty, (), jnp.float64)))
    return u_query, u_keep, u_empty


def test_schedule_and_rounds():
    sched = dm.epoch_schedule(50, 2)
    assert sched.lengths == (2, 10, 22, 33) and sched.steps == (2, 10, 22, 16) and sched.starts == (0, 2, 12, 34)
    _, _, ends = dm.step_tables(sched)
    assert np.flatnonzero(np.asarray(ends)).tolist() == [1, 11, 33]
    assert dm.epoch_schedule(10, 20).steps == (10,)          # one epoch: never communicates
    with pytest.raises(ConfigError, match="first_epoch"):
        dm.duets(50, 0)


@pytest.mark.parametrize("name,beta,T1,N,T,M", [("branin", 0.5, 2, 3, 20, 150), ("hartmann4", 2.0, 2, 3, 20, 150),
                                                 ("h2", 0.2, 3, 3, 20, 150),
                                                 pytest.param("branin", 0.2, 2, 10, 50, 300, marks=pytest.mark.slow)])
def test_matches_numpy_reference(name, beta, T1, N, T, M):
    """Same coins, keep draws and noise: the same queries, trims, inducing sets and communication.
    The last case trims to fewer than 64 candidates, so a later epoch's dense work runs in a buffer
    of 64 of its 101 or 221 slots (`base.capacity_ladder`)."""
    with jax.enable_x64(True):
        actions, reports, states, eps, f, alg, params = manual_run(name, N, T, M, seed=7, beta=beta, T1=T1)
        u_query, u_keep, u_empty = draws_of(states, dm.epoch_schedule(T, T1), N)
    X = np.asarray(states[0].candidates)
    out = ref.duets_np(X, f, eps, u_query, u_keep, u_empty, T1=T1, p0=10.0, beta=beta, lam=0.2,
                       lengthscale=FUNCTIONS[name][3], noise_std=0.2)
    np.testing.assert_array_equal(actions, out["actions"])
    up = np.array([r.comm_up for r in reports])
    down = np.array([r.comm_down for r in reports])
    np.testing.assert_array_equal(up, out["comm_up"])
    np.testing.assert_array_equal(down, out["comm_down"])
    ends = np.flatnonzero([r.rounds for r in reports])
    diag = {k: np.array([float(r.diagnostics[k]) for r in reports])[ends] for k in dm.DIAGNOSTICS}
    np.testing.assert_allclose(diag["sigma2_max"], out["sigma2_max"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(diag["p"], out["p"], rtol=1e-9)
    np.testing.assert_array_equal(diag["inducing"], out["S_size"])
    np.testing.assert_array_equal(diag["comm_paper"], out["comm_paper"][ends])
    np.testing.assert_array_equal(diag["comm_code"], out["comm_code"][ends])
    np.testing.assert_array_equal(diag["active_after"], out["active_after"])
    np.testing.assert_array_equal(diag["best_survived"], np.asarray(out["best_survived"], float))
    assert np.all(diag["regen_mismatch"] == 0)
    # the runs must have trimmed something, or this comparison tests little
    assert diag["active_after"][-1] < M
    sched = dm.epoch_schedule(T, T1)
    smaller = [len(np.unique(actions[a:a + n])) <= 64 < capacity_ladder(N * n + 1)[-1]
               for a, n in zip(sched.starts[:-1], sched.steps[:-1])]
    assert any(smaller) == (N == 10)


def test_shared_randomness_and_trimming():
    """The server's regeneration equals the queries; the active sets are nested and keep argmax mu;
    an enormous beta trims nothing; communication is (d + 2)|S_j| + 1 per round and agent (d = 2): the
    paper's count (comm_paper) once, scalars per receiver (comm_up + comm_down) N times."""
    N, T, M = 3, 20, 120
    sched = dm.epoch_schedule(T, 2)
    with jax.enable_x64(True):
        actions, reports, states, *_ = manual_run("branin", N, T, M, seed=3, beta=0.5)
        for j, (start, run) in enumerate(zip(sched.starts, sched.steps)):
            s = states[start]
            regen = dm.query_ids(s, jnp.asarray(j), jnp.arange(N)[:, None], jnp.arange(run)[None, :])
            np.testing.assert_array_equal(np.asarray(regen).T, actions[start:start + run])
        wide = manual_run("branin", N, T, M, seed=3, beta=1e9)[1]
    masks = [np.asarray(states[start].active) for start in sched.starts]
    for a, b in zip(masks, masks[1:]):
        assert np.all(b <= a)
    assert masks[-1].sum() < M
    ends = [r for r in reports if r.rounds]
    assert len(ends) == 3 and all(r.diagnostics["comm_paper"] == 4 * r.diagnostics["inducing"] + 1 for r in ends)
    assert all(r.comm_up + r.comm_down == N * r.diagnostics["comm_paper"] for r in ends)
    assert [float(r.diagnostics["active_after"]) for r in wide if r.rounds] == [M] * 3


def test_runner_batch_grid_and_determinism():
    """Seeds and a beta grid in one vmapped call equal the runs one by one, bit for bit."""
    prob = candidate_problem("hartmann4", 4, 20, num_candidates=200)
    alg = dm.duets(20, lengthscale=1.0)
    beta = np.array([0.5, 2.0, 0.5])
    both = runner.run_batch(prob, alg, [0, 1, 1], params={"beta": beta}, precision="float64")
    cache = {}
    for k, (seed, b) in enumerate(zip([0, 1, 1], beta)):
        alone = runner.run_batch(prob, alg, [seed], params={"beta": np.array([b])}, precision="float64",
                                 compiled_cache=cache)
        np.testing.assert_array_equal(np.asarray(both.regret[k]), np.asarray(alone.regret[0]))
    after = np.asarray(both.diagnostics["active_after"])[:, 11]
    assert after[1] >= after[2]                 # the wider beta keeps at least as many (same seed)
    assert np.asarray(both.regret).sum() > 0


@pytest.mark.slow
@pytest.mark.headline
def test_best_candidate_survives():
    """Spec §9 test 5 (a statistical regression): at paper size the best candidate survives every
    trimming in all 10 runs for Branin at beta 0.5 and Hartmann-4D at beta 2."""
    for name, beta in (("branin", 0.5), ("hartmann4", 2.0)):
        prob = candidate_problem(name, 10, 50)
        alg = dm.duets(50, lengthscale=FUNCTIONS[name][3], beta=beta)
        out = runner.run_batch(prob, alg, list(range(10)), precision="float64")
        survived = np.asarray(out.diagnostics["best_survived"])[:, [1, 11, 33]]
        assert survived.all(), name


def duets_exp_config():
    """The DUETS experiments' default configuration (experiments.duets.DEFAULTS with the paper size)."""
    from bandits_jax.experiments import duets as exp
    return {**exp.DEFAULTS, **exp.PAPER}


def drive(alg, name, N, T, M, seed=0):
    """Run `alg` step by step on function `name` with rewards f + 0.2 eps; select/update keys
    keys[t]. Returns (actions [T, N], reports, eps, f, X, keys)."""
    prob = candidate_problem(name, N, T, num_candidates=M)
    instance = prob.init(jax.random.PRNGKey(0))
    params = {k: jnp.asarray(v) for k, v in alg.defaults.items()}
    state = alg.init(jax.random.PRNGKey(seed), prob.spec, params, runner.horizon_sizes(alg, prob.spec),
                     prob.public(instance))
    eps = np.asarray(jax.random.normal(jax.random.PRNGKey(100 + seed), (T, N, M)))
    f = np.asarray(instance["f"])
    keys = jax.random.split(jax.random.PRNGKey(200 + seed), T)
    select, update = jax.jit(alg.select), jax.jit(alg.update)
    actions, reports = [], []
    for t in range(T):
        a, aux = select(params, state, _step(t, N, M), keys[t])
        a = np.asarray(a)
        r = f[a] + 0.2 * eps[t, np.arange(N), a]
        state, rep = update(params, state, _step(t, N, M), jnp.asarray(a), jnp.asarray(r), aux, keys[t])
        actions.append(a)
        reports.append(jax.tree_util.tree_map(np.asarray, rep))
    return np.array(actions), reports, eps, f, np.asarray(instance["X"]), keys


def agent_uniforms(key, N):
    """[N] the u of `base.uniform_arms(key, N, ...)`: uniform(split(key, N)[i])."""
    return np.array([float(jax.random.uniform(k, (), jnp.float64)) for k in jax.random.split(key, N)])


@pytest.mark.parametrize("form", ["kernel_ucb", "experiment"])
def test_n_kernel_ucb_on_candidates_matches_reference(form):
    """N-KernelUCB of the DUETS paper = KernelUCB (unscaled variance, first index on ties) with a
    uniform first arm, on the public candidates: the same arms as the spec's loop, both as
    kernel_ucb and in the experiments' form (DisKernelUCB that never synchronises, candidate storage)."""
    N, T, M = 3, 12, 120
    with jax.enable_x64(True):
        if form == "kernel_ucb":
            alg = on_candidates(kernel_ucb("rbf", lam=0.2, beta=0.5, lengthscale=0.2, first="uniform"))
        else:
            from bandits_jax.algorithms import build_algorithm
            from bandits_jax.experiments.duets import algorithms as duets_algorithms
            config = dict(duets_exp_config(), horizon=T, beta=0.5)
            alg = build_algorithm(dict(duets_algorithms(config, "branin"))["N-KernelUCB"])
        actions, _, eps, f, X, keys = drive(alg, "branin", N, T, M)
        u_first = agent_uniforms(keys[0], N)
    out = ref.n_kernel_ucb_np(X, f, eps, u_first, beta=0.5, lam=0.2, lengthscale=0.2, noise_std=0.2)
    np.testing.assert_array_equal(actions, out["actions"])
    assert len(np.unique(actions[0])) > 1          # the first arms differ across agents


@pytest.mark.parametrize("storage", ["rows", "candidates"])
@pytest.mark.parametrize("name,D", [("branin", 10.0), ("h1", 10.0), ("hartmann4", 3.0)])
def test_dis_kernel_ucb_duets_matches_reference(name, D, storage):
    """DisKernelUCB (dis_kernel_ucb_duets), in both storages: the same arms, synchronisations and
    communication as the spec's loop (every client acts, any client triggers, unscaled variance,
    first-index ties)."""
    N, T, M = 3, 15, 120
    ls = FUNCTIONS[name][3]
    with jax.enable_x64(True):
        alg = on_candidates(dis_kernel_ucb_duets("rbf", lam=0.2, alpha=1.0, threshold=D, lengthscale=ls,
                                                 storage=storage))
        actions, reports, eps, f, X, keys = drive(alg, name, N, T, M, seed=1)
        u_first = agent_uniforms(keys[0], N)
    out = ref.dis_kernel_ucb_np(X, f, eps, u_first, beta=1.0, lam=0.2, lengthscale=ls, noise_std=0.2, D=D)
    np.testing.assert_array_equal(actions, out["actions"])
    syncs = np.array([float(r.rounds) for r in reports])
    np.testing.assert_array_equal(syncs, out["syncs"])
    np.testing.assert_allclose([float(r.comm_up) for r in reports], out["comm_up"], rtol=1e-12)
    np.testing.assert_allclose([float(r.comm_down) for r in reports], out["comm_down"], rtol=1e-12)
    for key in ("comm_paper", "comm_code"):
        np.testing.assert_allclose([float(r.diagnostics[key]) for r in reports], out[key], rtol=1e-12)
    assert 1 <= syncs.sum() < T                   # it synchronised, and not at every step


@pytest.mark.parametrize("storage", ["rows", "candidates"])
@pytest.mark.parametrize("name,D,forced,q,N", [("branin", 20.0, 10, 4.0, 3), ("h2", 3.0, -1, 4.0, 3),
                                               ("h1", 2.0, 3, 1.0, 3), ("branin", 20.0, 10, 4.0, 10)])
def test_approx_dis_kernel_ucb_duets_matches_reference(name, D, forced, q, N, storage):
    """Approx-DisKernelUCB (approx_dis_kernel_ucb_duets), in both storages: the same arms, synchronisations and
    communication as the spec's loop (own-model trigger, forced first sync, q-bar re-sampling, first-index
    ties); storage 'candidates' with the loop's re-sampling drawn per (agent, candidate). With 10 agents the
    forced synchronisation keeps more than 64 candidates, the candidate storage's second dictionary
    buffer (`base.capacity_ladder(120)` = (64, 120)); with 3 never more than 48."""
    _approx_against_reference(name, D, forced, q, N, storage)


def test_approx_candidate_rows_by_product_match_reference(monkeypatch, fresh_traces):
    """The candidate storage with every client's rows from one product as soon as a client holds a
    candidate (`candidate_kernel.client_rows`, forced here at every step): the same arms,
    synchronisations and communication as the spec's loop (fails when the product is 1% off; the
    h2 and h1 cases of the test above, whose arms are uniform until a late synchronisation, do not)."""
    from bandits_jax.algorithms.distributed import candidate_kernel

    monkeypatch.setattr(candidate_kernel, "dense_from", lambda M, N: 0)
    _approx_against_reference("branin", 20.0, 10, 4.0, 3, "candidates")


def _approx_against_reference(name, D, forced, q, N, storage):
    """The body of the two tests above."""
    T, M = 16, 120
    ls = FUNCTIONS[name][3]
    with jax.enable_x64(True):
        alg = on_candidates(approx_dis_kernel_ucb_duets("rbf", lam=0.2, alpha=1.0, q=q, threshold=D, lengthscale=ls,
                                                        forced_sync=forced, dict_capacity=256,
                                                        storage=storage, buffer_capacity=T))
        actions, reports, eps, f, X, keys = drive(alg, name, N, T, M, seed=2)
        u_uniform = np.stack([agent_uniforms(k, N) for k in keys])
        if storage == "candidates":
            u_incl = np.stack([np.asarray(jax.random.uniform(k, (N, M), jnp.float64)) for k in keys])
        else:
            u_incl = np.array([[[float(jax.random.uniform(jax.random.fold_in(keys[t], s * N + n), (), jnp.float64))
                                 for s in range(T)] for n in range(N)] for t in range(T)])
    out = ref.approx_dis_kernel_ucb_np(X, f, eps, u_uniform, u_incl, beta=1.0, lam=0.2, lengthscale=ls,
                                       noise_std=0.2, D=D, q_bar=q, forced_first_sync=None if forced < 0 else forced,
                                       per_candidate=storage == "candidates")
    syncs = np.array([float(r.rounds) for r in reports])
    np.testing.assert_array_equal(syncs, out["syncs"])
    np.testing.assert_array_equal(actions, out["actions"])
    np.testing.assert_allclose([float(r.comm_up) for r in reports], out["comm_up"], rtol=1e-12)
    np.testing.assert_allclose([float(r.comm_down) for r in reports], out["comm_down"], rtol=1e-12)
    for key in ("comm_paper", "comm_code"):
        np.testing.assert_allclose([float(r.diagnostics[key]) for r in reports], out[key], rtol=1e-12)
    assert syncs.sum() >= 1 and len(np.unique(actions[-1])) >= 1
    assert (max(float(r.diagnostics["dict_size"]) for r in reports) > 64) == (N == 10)


@pytest.mark.parametrize("storage", ["rows", "candidates"])
def test_dis_kernel_ucb_limits(storage):
    """Spec §9 test 7: DisKernelUCB with D = inf is N-KernelUCB (the same arms, no communication), and
    with D = 0 it synchronises at every step."""
    N, T, M = 3, 10, 100
    with jax.enable_x64(True):
        common = dict(lam=0.2, lengthscale=0.2)
        dis = dict(storage=storage, buffer_capacity=T)
        never = on_candidates(dis_kernel_ucb_duets("rbf", alpha=0.5, threshold=1e300, **dis, **common))
        alone = on_candidates(kernel_ucb("rbf", beta=0.5, first="uniform", **common))
        always = on_candidates(dis_kernel_ucb_duets("rbf", alpha=0.5, threshold=0.0, **dis, **common))
        a_never, r_never, *_ = drive(never, "branin", N, T, M, seed=4)
        a_alone = drive(alone, "branin", N, T, M, seed=4)[0]
        r_always = drive(always, "branin", N, T, M, seed=4)[1]
    np.testing.assert_array_equal(a_never, a_alone)
    assert sum(float(r.rounds) for r in r_never) == 0
    assert [float(r.rounds) for r in r_always] == [1.0] * T
    assert len(np.unique(a_never)) > N            # the agents learned and moved


def test_nystrom_mean_exact_limit():
    """Spec §9 test 1: with every distinct point of the epoch inducing (S = D), DUETS's Nyström mean is
    the exact posterior mean (here with repeated points), to 1e-8."""
    from bandits_jax.kernels import krr
    from bandits_jax.kernels.functions import get_kernel
    with jax.enable_x64(True):
        X, _ = candidate_set("hartmann4", 60)
        X = jnp.asarray(X)
        rng = np.random.default_rng(0)
        ids = np.unique(rng.integers(0, 60, 25))
        c = jnp.asarray(rng.integers(1, 4, len(ids)), jnp.float64)
        s = jnp.asarray(rng.normal(size=len(ids))) * c
        kern, kp = get_kernel("rbf"), {"lengthscale": jnp.asarray(1.0)}
        config = dm.DuetsConfig(kern, dm.epoch_schedule(10, 2), 1e-10)
        U = X[ids]
        mu, _ = dm.nystrom_posterior(config, kp, 0.2, X, U, jnp.ones(len(ids), bool), c, s)
        exact, _ = krr.repeated_points_posterior(kern, kp, 0.2, U, c, s, X)
        half, _ = dm.nystrom_posterior(config, kp, 0.2, X, U, jnp.arange(len(ids)) < len(ids) // 2, c, s)
    np.testing.assert_allclose(np.asarray(mu), np.asarray(exact), atol=1e-8)
    assert np.max(np.abs(np.asarray(half) - np.asarray(exact))) > 1e-4   # half the points: an approximation


def test_nystrom_posterior_on_the_smallest_rung_is_the_full_one():
    """The model is computed on the 64-coordinate rung when |S| fits it; the coordinates past |S| are
    zero, so all R = 150 coordinates give the same mean and variance (to rounding), under vmap too."""
    from bandits_jax.kernels.functions import get_kernel
    with jax.enable_x64(True):
        X, _ = candidate_set("hartmann4", 400)
        X = jnp.asarray(X)
        rng = np.random.default_rng(1)
        U = X[:150]
        c = jnp.asarray(rng.integers(1, 4, 150), jnp.float64)
        s = jnp.asarray(rng.normal(size=150)) * c
        in_S = jnp.asarray(rng.permutation(150) < 12)
        kern, kp = get_kernel("rbf"), {"lengthscale": jnp.asarray(1.0)}
        config = dm.DuetsConfig(kern, dm.epoch_schedule(10, 2), 1e-10)
        order = jnp.argsort(~in_S, stable=True)
        full = dm._posterior_on(config, 150, (kp, 0.2, X, U, U[order], jnp.sum(in_S), c, s))
        posterior = lambda m: dm.nystrom_posterior(config, kp, 0.2, X, U, m, c, s)  # noqa: E731
        both = jax.jit(jax.vmap(posterior))(jnp.stack([in_S, in_S]))
        jaxpr = str(jax.make_jaxpr(posterior)(in_S))
    for got, want in zip(both, full):
        np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(want)] * 2), rtol=1e-9, atol=1e-12)
    assert "f64[400,64]" in jaxpr and "f64[400,150]" in jaxpr  # both rungs are compiled, one runs


@pytest.mark.parametrize("block, dense", [(32, None), (2, 2)])
def test_candidate_storage_errors_and_client_model(block, dense, monkeypatch, fresh_traces):
    """storage='candidates': not an option of the asynchronous variant; a client past buffer_capacity reports
    ERR_BUFFER; a client's mean and variance over the candidates equal the exact posterior of the
    pooled data followed by its own points (kernels.krr on the counts), and the pooled posterior
    (mean and covariance) that of the pooled data, whether a synchronisation folds its new points in
    one block or in several, and whether the clients' rows are gathered or (past `dense` slots, here
    reached) come from one product (`client_rows`)."""
    from bandits_jax.algorithms.distributed import candidate_kernel
    from bandits_jax.algorithms.distributed.dis_kernel import ERR_BUFFER

    monkeypatch.setattr(candidate_kernel, "POOL_BLOCK", block)
    if dense is not None:
        monkeypatch.setattr(candidate_kernel, "dense_from", lambda M, N: dense)
    from bandits_jax.algorithms.single.kernel import kernel_args
    from bandits_jax.kernels import krr

    with pytest.raises(ConfigError, match="unknown option.*storage"):
        make_algorithm("dis_kernel_ucb", storage="candidates")
    N, T, M = 3, 8, 60
    with jax.enable_x64(True):
        alg = on_candidates(dis_kernel_ucb_duets("rbf", lam=0.2, alpha=1.0, threshold=1e300, lengthscale=0.2,
                                                 storage="candidates", buffer_capacity=5))
        actions, reports, *_ = drive(alg, "branin", N, T, M, seed=3)
        assert [int(r.errors) & ERR_BUFFER for r in reports] == [0] * 5 + [ERR_BUFFER] * 3

        T = 12
        alg = on_candidates(dis_kernel_ucb_duets("rbf", lam=0.2, alpha=1.0, threshold=12.0, lengthscale=0.2,
                                                 storage="candidates", buffer_capacity=T))
        prob = candidate_problem("branin", N, T, num_candidates=M)
        instance = prob.init(jax.random.PRNGKey(0))
        params = {k: jnp.asarray(v) for k, v in alg.defaults.items()}
        state = alg.init(jax.random.PRNGKey(1), prob.spec, params, runner.horizon_sizes(alg, prob.spec),
                         prob.public(instance))
        rng = np.random.default_rng(5)
        X = np.asarray(instance["X"])
        counts = np.zeros((N + 1, M))    # row 0: pooled data; row 1 + i: client i's own points
        sums = np.zeros((N + 1, M))
        kern = dm.resolve_kernel("t", "rbf")
        kp = kernel_args(kern, {"lengthscale": jnp.asarray(0.2)}, jnp.float64)
        Xj = jnp.asarray(X)
        syncs = most_new = local_repeat = most_slots = 0
        for t in range(T):
            a = rng.integers(0, 5, N)      # few candidates: clients see theirs again between syncs
            r = rng.normal(size=N)
            state, rep = alg.update(params, state, _step(t, N, M), jnp.asarray(a, jnp.int32), jnp.asarray(r),
                                    {}, jax.random.PRNGKey(t))
            np.add.at(counts[1:], (np.arange(N), a), 1.0)
            np.add.at(sums[1:], (np.arange(N), a), r)
            local_repeat = max(local_repeat, counts[1:].max())
            most_slots = max(most_slots, int(np.max(np.sum(counts[1:] > 0, axis=1))))
            if float(rep.rounds):
                most_new = max(most_new, int(np.sum(counts[1:].sum(0) > 0)))
                counts[0] += counts[1:].sum(0)
                sums[0] += sums[1:].sum(0)
                counts[1:], sums[1:] = 0.0, 0.0
                syncs += 1
            inner = state["inner"]
            for i in range(N):          # every step: each client's model, repeats of its own points included
                mean, var = krr.repeated_points_posterior(kern, kp, 0.2, Xj, jnp.asarray(counts[0] + counts[1 + i]),
                                                          jnp.asarray(sums[0] + sums[1 + i]), Xj)
                np.testing.assert_allclose(inner.loc_mean[i], mean, atol=1e-9)
                np.testing.assert_allclose(inner.loc_var[i], var, atol=1e-9)
        assert 1 <= syncs < T and most_new > 2   # with block = 2 a synchronisation takes several blocks
        assert local_repeat > 1                  # a client met one of its candidates again before a sync
        assert dense is None or most_slots > dense   # the product was taken at some step
        mean, _, V = krr.repeated_points_factor(kern, kp, 0.2, Xj, jnp.asarray(counts[0]), jnp.asarray(sums[0]), Xj)
        np.testing.assert_allclose(inner.mean_g, mean, atol=1e-9)
        np.testing.assert_allclose(inner.cov_g, kern.fn(Xj, Xj, kp) - V.T @ V, atol=1e-9)
        assert int(inner.n) == counts[0].sum() and counts[0].max() > 1   # repeated candidates were pooled


def test_approx_candidate_storage_keeps_and_errors():
    """storage='candidates' of Approx-DisKernelUCB: an owner keeps a candidate with the probability that
    at least one of its points there survives a draw per point, 1 - (1 - p)^count (frequencies of 4e5
    draws against per-point draws, within 5 standard errors); not an option of the asynchronous variant; a client
    past buffer_capacity distinct candidates reports ERR_SLOTS."""
    from bandits_jax.algorithms.distributed.approx_dis_kernel import ERR_SLOTS
    from bandits_jax.algorithms.distributed.candidate_approx import owner_keeps

    prob = jnp.array([0.0, 0.1, 0.1, 0.3, 0.3, 1.0])
    counts = jnp.array([[3.0, 1.0, 4.0, 0.0, 2.0, 1.0]])
    S = 400_000
    u = jax.random.uniform(jax.random.PRNGKey(0), (S, 1, 6))
    freq = np.asarray(jnp.mean(jax.vmap(lambda v: owner_keeps(prob, counts, v))(u), axis=0))[0]
    per_point = np.random.default_rng(0).random((S, 6, 4)) < np.asarray(prob)[None, :, None]
    law = np.mean(np.any(per_point & (np.arange(4) < np.asarray(counts[0])[:, None]), axis=-1), axis=0)
    np.testing.assert_allclose(freq, law, atol=5 * np.sqrt(0.25 / S) * 2)
    np.testing.assert_allclose(freq, [0.0, 0.1, 1 - 0.9 ** 4, 0.0, 1 - 0.7 ** 2, 1.0], atol=5e-3)

    with pytest.raises(ConfigError, match="unknown option.*storage"):
        make_algorithm("approx_dis_kernel_ucb", storage="candidates")
    N, T, M = 3, 8, 60
    with jax.enable_x64(True):
        alg = on_candidates(approx_dis_kernel_ucb_duets("rbf", lam=0.2, threshold=1e300, lengthscale=0.2,
                                                        storage="candidates", buffer_capacity=5))
        reports = drive(alg, "branin", N, T, M, seed=3)[1]
    assert [int(r.errors) & ERR_SLOTS for r in reports] == [0] * 5 + [ERR_SLOTS] * 3


@pytest.mark.parametrize("which", ["N-KernelUCB", pytest.param("Approx-DisKernelUCB", marks=pytest.mark.slow)])
def test_candidate_slots_grow_by_demand(which):
    """Candidate storage sizes its client slots by demand: a run started with room for 2 slots, which
    its agents outgrow (with buffer_capacity = 4 the same run reports the overflow error), grows them
    segment by segment and gives the same regret and communication as a run with every slot from the
    start. Approx-DisKernelUCB runs 16 steps: in 8 its threshold is never crossed, and the run must
    synchronise."""
    N, T, M = 3, (8 if which == "N-KernelUCB" else 16), 100
    prob = candidate_problem("branin", N, T, num_candidates=M)
    common = dict(lam=0.2, alpha=5.0, lengthscale=0.2, storage="candidates")

    def make(capacity):
        if which == "Approx-DisKernelUCB":
            return approx_dis_kernel_ucb_duets("rbf", threshold=12.0, forced_sync=-1, buffer_capacity=capacity,
                                               **common)
        return dis_kernel_ucb_duets("rbf", threshold=1e300, buffer_capacity=capacity, **common)

    def run(capacity, first):
        return runner.run_batch(prob, on_candidates(make(capacity)), [0, 1], first_segment=first,
                                stop_on_error=False)

    with jax.enable_x64(True):
        grown, whole, small = run(T, 2), run(T, T), run(4, 2)
    assert grown.errors.tolist() == [0, 0] and np.all(small.errors != 0)
    np.testing.assert_array_equal(grown.regret, whole.regret)
    np.testing.assert_array_equal(grown.comm_up, whole.comm_up)
    np.testing.assert_array_equal(grown.rounds, whole.rounds)
    assert grown.rounds.sum() >= (which != "N-KernelUCB")
    # the slot cap changes the numbers (the error above) without changing a shape at the first
    # segment: the curve cache must still tell the two apart
    ids = {identity.run_identity(prob, alg, alg.defaults) for alg in (on_candidates(make(c)) for c in (4, T))}
    assert len(ids) == 2
