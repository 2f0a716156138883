"""Bounds that hold at their ends: every numeric key of every registered experiment either has a finite upper
bound or, at its end (1e308 for a float key, the largest int64 for an integer key), `run --check` passes or
refuses it in one line naming that key; and a data file holding inf is refused where it is read.

The end probes drive the command line in-process (`cli.main`, as tests/test_refusals.py does), one
experiment per test so that the suite spreads them over its workers (about 110 s in all on one core; the
first CoPE-KB world solves its design tables, about 20 s of it).
"""
from __future__ import annotations

import io

import numpy as np
import pytest

from bandits_jax.core import ConfigError
from bandits_jax.experiments.async_exps import MAX_GAMMA
from bandits_jax.experiments.catalog import experiments
from bandits_jax.experiments.registry import ANY, COMMON_BOUNDS, resolve_config
from bandits_jax.problems import make_problem, ratings
from bandits_jax.problems.datasets import load_magic, load_shuttle

from helpers import REAL_DIR, data_dir_default, needs_data, run_cli, skip_without_data

FLOAT_END = 1e308
INT_END = 2 ** 63 - 1  # the largest int64
CHECK = ["--check", "--quiet", "--no-plot"]


def probe_size(exp) -> str:
    return "smoke" if "smoke" in exp.sizes else next(iter(exp.sizes))


def end_probes(name: str) -> list:
    """(key, end as a --set string) of every numeric key of experiment `name` without a finite upper bound."""
    exp = experiments()[name]
    bounds = {**COMMON_BOUNDS, **exp.bounds}
    probes = []
    for key, value in resolve_config(exp, probe_size(exp), {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or bounds.get(key, ANY).high is not None:
            continue
        probes.append((key, repr(FLOAT_END) if isinstance(value, float) else str(INT_END)))
    return probes


def check(capsys, tmp_path, name: str, *settings: str) -> tuple:
    """(exit status, stderr lines, whether --out was written) of `run NAME --check` with `settings`."""
    out = tmp_path / "out"
    argv = ["run", name, "--size", probe_size(experiments()[name]), "--out", str(out), *CHECK]
    for setting in settings:
        argv += ["--set", setting]
    with data_dir_default():
        status, err = run_cli(capsys, argv)
    return status, err, out.exists()


def assert_refused(capsys, tmp_path, name: str, setting: str, *says: str) -> None:
    """`run NAME --set SETTING --check` is refused in one line (exit 2) saying every one of `says`."""
    status, err, written = check(capsys, tmp_path, name, setting)
    assert (status, len(err)) == (2, 1), (setting, err)
    assert all(word in err[0] for word in says) and not written, (setting, err)


@pytest.mark.parametrize("name", sorted(experiments()))
def test_every_numeric_key_holds_at_its_end(capsys, tmp_path, name):
    wrong = []
    for key, end in end_probes(name):
        status, err, written = check(capsys, tmp_path, name, f"{key}={end}")
        refused = status == 2 and len(err) == 1 and key in err[0]
        if status != 0 and not refused or written:
            wrong.append(f"{key}={end}: status {status}, {err[-3:]}, written: {written}")
    if wrong and not REAL_DIR.is_dir() and check(capsys, tmp_path, name)[0] != 0:
        skip_without_data(f"the data of {name}")  # its defaults are refused too, for want of the data
    assert not wrong, f"{name}: {len(wrong)} ends neither pass nor are refused naming their key: {wrong}"


def test_the_ends_are_probed_where_there_is_no_finite_bound():
    probes = {name: end_probes(name) for name in experiments()}
    assert sum(len(p) for p in probes.values()) > 100
    assert ("xi", repr(FLOAT_END)) not in probes["cope/fb-rank1"]  # a finite bound: not probed
    assert ("eps", repr(FLOAT_END)) in probes["cope/fc-rank1"]
    assert ("candidate_seed", str(INT_END)) in probes["duets/h1"]


# ------------------------------------------------------------------------------------ the crashes found
@pytest.mark.parametrize("name, key", [("cope/fb-rank1", "xi"), ("cope/fb-rank2", "gap"), ("cope/fc-rank5", "xi")])
def test_cope_world_ends_are_refused_naming_the_key(capsys, tmp_path, name, key):
    assert_refused(capsys, tmp_path, name, f"{key}=1e308", key)


def test_cope_deltas_past_the_largest_gap_are_refused(capsys, tmp_path):
    assert_refused(capsys, tmp_path, "cope/fc-rank1", "deltas=0.4,1e308", "deltas", "1e+06")


@pytest.mark.parametrize("option, value, says", [("xi", 1e308, "give xi <= 1"), ("gap", 1e308, "give gap <= 1e+06"),
                                                 ("gap", 1e-300, "give gap >= 1e-06"),
                                                 ("noise_std", 1e308, "give noise_std <= 1e+06")])
def test_cope_kb_options_refuse_their_ends_before_the_tables(option, value, says):
    with pytest.raises(ConfigError) as err:
        make_problem("cope-kb", **{option: value})
    assert says in str(err.value) and "\n" not in str(err.value)


def test_gamma_is_named_where_it_becomes_a_lengthscale(capsys, tmp_path):
    assert_refused(capsys, tmp_path, "async/synthetic-f1", "gamma=1e308", "gamma=1e+308", "give gamma <=")
    status, err, _ = check(capsys, tmp_path, "async/synthetic-f1", "grid=true", "grid_values=0.1,1e308")
    assert (status, len(err)) == (2, 1) and "grid_values" in err[0], err
    assert check(capsys, tmp_path, "async/synthetic-f1", f"gamma={MAX_GAMMA!r}")[0] == 0


@pytest.mark.parametrize("key", ["sigma_z", "lengthscale"])
def test_coop_rbf_bandwidths_are_refused_naming_the_key(capsys, tmp_path, key):
    assert_refused(capsys, tmp_path, "coop/rbf-er", f"{key}=1e308", key)


@pytest.mark.parametrize("option", ["sigma_x", "sigma_z"])
def test_coop_rbf_bandwidth_options_are_refused_naming_the_option(option):
    with pytest.raises(ConfigError) as err:
        make_problem("coop-rbf", num_agents=4, **{option: 1e308})
    assert f"give {option} <= 1e+08" in str(err.value)


@pytest.mark.parametrize("name", ["async/synthetic-f1", "bai/elimination", "coop/linear-er", "duets/h1",
                                  "fnucb/fig1a", "quickstart"])
def test_noise_std_has_a_finite_bound(capsys, tmp_path, name):
    assert_refused(capsys, tmp_path, name, "noise_std=1e308", "noise_std", "1e+06")
    assert check(capsys, tmp_path, name, "noise_std=1e6")[0] == 0


@pytest.mark.parametrize("problem", ["cosine", "async-f1", "duets-h1", "coop-linear"])
def test_problem_noise_std_options_have_the_same_bound(problem):
    with pytest.raises(ConfigError) as err:
        make_problem(problem, num_agents=4, noise_std=1e308)
    assert "give noise_std <= 1e+06" in str(err.value)


def test_bonus_multiplier_overflow_names_nu_code(capsys, tmp_path):
    assert_refused(capsys, tmp_path, "fnucb/fig2a", "nu_code=1e308", "nu_code=1e+308", "lam=10")


# ------------------------------------------------------------------------------------ data files
@needs_data("shuttle.tst")
def test_shuttle_file_with_inf_is_refused_naming_file_line_and_column(tmp_path):
    lines = (REAL_DIR / "shuttle.tst").read_text().splitlines()[:5]
    fields = lines[2].split()
    fields[4] = "inf"
    lines[2] = " ".join(fields)
    path = tmp_path / "shuttle.tst"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_shuttle(path=path)
    assert f"{path}: line 3, column 5" in str(err.value) and "\n" not in str(err.value)


def magic_text(value: str) -> str:
    """A tiny magic.dat: a comment, then three rows whose second holds `value` in its seventh field."""
    rows = [",".join(["1.5"] * 10 + ["g"]), ",".join(["2"] * 6 + [value] + ["2"] * 3 + ["h"]),
            ",".join(["3"] * 10 + ["g"])]
    return "% MAGIC gamma telescope\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity"])
def test_magic_file_with_inf_is_refused_naming_file_line_and_column(tmp_path, value):
    path = tmp_path / "magic.dat"
    path.write_text(magic_text(value))
    with pytest.raises(ConfigError) as err:
        load_magic(path=path)
    assert f"{path}: line 3, column 7" in str(err.value)


def test_magic_missing_value_nan_stays_accepted(tmp_path):
    """NaN is a missing value that the FN-UCB preprocessing maps to -1 on purpose: not refused."""
    path = tmp_path / "magic.dat"
    path.write_text(magic_text("nan"))
    features, labels = load_magic(path=path)
    assert np.isnan(features[1, 6]) and labels.tolist() == [0, 1, 0]


def test_shuttle_npz_with_inf_is_refused_naming_row_and_column(tmp_path):
    x = np.ones((4, 9))
    x[3, 8] = -np.inf
    buffer = io.BytesIO()
    np.savez(buffer, x=x, label=np.zeros(4, np.int64))
    path = tmp_path / "shuttle_statlog_5000.npz"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(ConfigError) as err:
        load_shuttle(path=path)
    assert f"{path}: row 4, column 9" in str(err.value)


@pytest.mark.parametrize("name, text, says", [
    ("ratings.csv", "userId,movieId,rating\n1,2,4\n1,3,inf\n", "line 3, column 3"),
    ("ratings.csv", "1,2,4\n1,3,nan\n", "line 2, column 3"),
    ("review.json", '{"user_id": "u", "business_id": "b", "stars": Infinity}\n', "line 1, column stars"),
])
def test_ratings_file_with_a_non_finite_rating_is_refused(tmp_path, name, text, says):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        ratings.load_ratings("yelp" if name.endswith("json") else "movielens", path=path)
    assert f"{path}: {says}" in str(err.value)


def test_seeds_beyond_the_last_32_bit_seed_number_are_refused(capsys, tmp_path):
    out = tmp_path / "out"
    status, err = run_cli(capsys, ["run", "quickstart", "--size", "smoke", "--first-seed", str(2 ** 32 - 2),
                                   "--seeds", "3", "--check", "--quiet", "--out", str(out)])
    assert (status, len(err)) == (2, 1) and "seeds = 3 from first_seed = 4294967294" in err[0] and not out.exists()
