"""The verdict rule of `bandits_jax.reporting.claims` on hand-made results: each edge case of the rule, with the
numbers worked out beside it."""
import numpy as np
import pytest
from scipy import stats

from bandits_jax.reporting import claims
from bandits_jax.reporting.results import Results


def _res(finals: dict, outcomes=None, tags=None, x=""):
    """Results whose curves end at the given per-seed final regrets (one step)."""
    arrays = {c: {"regret": np.asarray(v, float)[:, None, None], "comm_up": np.ones((len(v), 1)),
                  "comm_down": np.zeros((len(v), 1)), "rounds": np.zeros((len(v), 1)),
                  "errors": np.zeros(len(v), np.int32), **(outcomes or {}).get(c, {})} for c, v in finals.items()}
    md = {"algorithms": list(finals), "agents": "mean", "tags": tags or {}, "x": x}
    if outcomes:
        md["outcomes"] = {"samples": {"kind": "mean"}, "correct": {"kind": "rate"}}
    return Results(arrays, np.arange(len(next(iter(finals.values())))), md)


def _below(finals, lows, highs, **about):
    return claims.all_below("p", "x", ["r"], lows, highs, **about).check({"r": _res(finals)})


def test_paired_differences_use_t_with_n_minus_1_degrees_of_freedom():
    # differences a - b = [-1, -2, -3] (mean -2, sd 1, se 1/sqrt 3): the interval is -2 +- t(2) / sqrt(3),
    # t(2) = 4.303 -> [-4.48, 0.48], undecided; z = 2 would have made it decisive (-2 +- 1.15)
    finals = {"a": [10.0, 20.0, 30.0], "b": [11.0, 22.0, 33.0]}
    got = _below(finals, ["a"], ["b"], min_seeds=3)
    assert got.status == claims.UNDECIDED
    half = stats.t.ppf(0.975, 2) / np.sqrt(3)
    assert f"difference -2 [{-2 - half:.4g}, {-2 + half:.4g}] (paired, n = 3)" in got.numbers


def test_pairing_finds_a_steady_difference_that_the_spread_over_seeds_hides():
    # b = a + 1 in every seed; the seeds' spread (sd 10) would hide the gap from an unpaired test
    a = [0.0, 10.0, 20.0, 30.0, 40.0, 5.0]
    b = [v + 1.0 + 0.01 * i for i, v in enumerate(a)]
    assert _below({"a": a, "b": b}, ["a"], ["b"]).status == claims.REPRODUCED
    x, y = claims.Sample(np.array(a), "r1"), claims.Sample(np.array(b), "r2")  # two records: Welch, no pairing
    diff = claims.difference(x, y)
    assert diff.how.startswith("Welch") and diff.low < 0 < diff.high


def test_welch_interval_matches_its_formula():
    x, y = claims.Sample(np.array([1.0, 2.0, 4.0]), "r1"), claims.Sample(np.array([5.0, 9.0, 6.0, 8.0]), "r2")
    va, vb = np.var(x.values, ddof=1) / 3, np.var(y.values, ddof=1) / 4
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    half = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
    diff = claims.difference(x, y)
    assert diff.estimate == pytest.approx(7 / 3 - 7.0)
    assert (diff.low, diff.high) == pytest.approx((7 / 3 - 7.0 - half, 7 / 3 - 7.0 + half))


def test_too_few_seeds_decide_nothing():
    # one seed: the old rule had a NaN standard error and called any gap decisive
    assert _below({"a": [1.0], "b": [100.0]}, ["a"], ["b"]).status == claims.TOO_FEW
    # four seeds of a clear gap, below the default minimum of 5
    assert _below({"a": [1.0, 1.1, 0.9, 1.0], "b": [9.0, 9.1, 8.9, 9.0]}, ["a"], ["b"]).status == claims.TOO_FEW
    assert _below({"a": [1.0, 1.1, 0.9, 1.0], "b": [9.0, 9.1, 8.9, 9.0]}, ["a"], ["b"],
                  min_seeds=4).status == claims.REPRODUCED


def test_exact_counts_compare_with_a_relative_tolerance():
    # both spreads 0: a 1e-12 gap is no difference (the old rule called it decisive)
    five = [196100.0] * 5
    assert _below({"a": five, "b": [196100.0 + 1e-12] * 5}, ["a"], ["b"]).status == claims.LEVEL
    assert _below({"a": five, "b": [196101.0] * 5}, ["a"], ["b"]).status == claims.REPRODUCED
    assert "(exact counts)" in _below({"a": five, "b": [196101.0] * 5}, ["a"], ["b"]).numbers


def test_level_needs_a_declared_margin_and_power():
    with pytest.raises(ValueError, match="declares its margin"):
        claims.level("p", "x", ["r"], [("a", "b")])
    check = claims.level("p", "x", ["r"], [("a", "b")], margin=0.1).check
    rng = np.random.default_rng(0)
    noisy = {"a": 100 + 50 * rng.standard_normal(6), "b": 100 + 50 * rng.standard_normal(6)}
    assert check({"r": _res(noisy)}).status == claims.UNDECIDED  # the old rule: "level" from no power
    tight = {"a": [100.0, 101.0, 99.0, 100.5, 99.5], "b": [100.2, 100.9, 99.1, 100.4, 99.7]}
    assert check({"r": _res(tight)}).status == claims.REPRODUCED
    apart = {"a": [150.0, 151.0, 149.0, 150.5, 149.5], "b": [100.2, 100.9, 99.1, 100.4, 99.7]}
    assert check({"r": _res(apart)}).status == claims.NOT_REPRODUCED


def test_a_below_claim_without_a_margin_is_undecided_not_level_when_the_interval_straddles_zero():
    finals = {"a": [1.0, 5.0, 3.0, 2.0, 4.0], "b": [2.0, 4.0, 3.0, 3.0, 3.0]}
    assert _below(finals, ["a"], ["b"]).status == claims.UNDECIDED
    assert _below(finals, ["a"], ["b"], margin=1.0).status == claims.LEVEL  # within +- 100% of b


def test_rates_use_wilson_and_newcombe_intervals():
    # 20 of 20 against 16 of 20: the old standard error of the first was 0 and the gap 0.2 was "decisive"
    # (0.2 > 2 x 0.089); Newcombe's interval [-0.0007, 0.43] contains 0
    p, lo, hi = claims.wilson(np.ones(20))
    assert (p, hi) == (1.0, pytest.approx(1.0)) and lo == pytest.approx(0.8389, abs=1e-4)
    x, y = claims.Sample(np.ones(20), "r", rate=True), claims.Sample(np.r_[np.ones(16), np.zeros(4)], "r", rate=True)
    diff = claims.difference(x, y)
    assert diff.low < 0 < diff.high and diff.estimate == pytest.approx(0.2)
    assert claims.judge(x, y, "above")[0] == claims.UNDECIDED
    many = claims.Sample(np.ones(200), "r", rate=True), claims.Sample(np.r_[np.ones(160), np.zeros(40)], "r", rate=True)
    assert claims.judge(*many, "above")[0] == claims.REPRODUCED
    with pytest.raises(claims.ClaimError, match="rate"):
        claims.difference(x, claims.Sample(np.ones(20), "r"))


def test_a_failed_run_is_refused_not_judged():
    with pytest.raises(claims.ClaimError, match="non-finite"):
        _below({"a": [1.0, np.nan, 1.0, 1.0, 1.0], "b": [2.0] * 5}, ["a"], ["b"])


def test_smaller_by_a_factor():
    finals = {"a": [10.0, 11.0, 9.0, 10.5, 9.5], "b": [40.0, 41.0, 39.0, 40.5, 39.5]}
    assert _below(finals, ["a"], ["b"], by=2.0).status == claims.REPRODUCED
    assert _below(finals, ["a"], ["b"], by=5.0).status == claims.NOT_REPRODUCED
    assert "a x 5 10 +- 0.35" in _below(finals, ["a"], ["b"], by=5.0).numbers


def test_declarations_refuse_empty_lists_bad_settings_and_unknown_fields():
    for bad in (dict(records=[]), dict(lows=[]), dict(highs=[""])):
        args = {**dict(records=["r"], lows=["a"], highs=["b"]), **bad}
        with pytest.raises(ValueError, match="non-empty list"):
            claims.all_below("p", "x", args["records"], args["lows"], args["highs"])
    with pytest.raises(ValueError, match="two curves"):
        claims.decreasing("p", "x", ["r"], ["only"])
    with pytest.raises(ValueError, match="min_seeds"):
        claims.all_below("p", "x", ["r"], ["a"], ["b"], min_seeds=1)
    with pytest.raises(ValueError, match="origin"):
        claims.all_below("p", "x", ["r"], ["a"], ["b"], origin="folklore")
    with pytest.raises(ValueError, match="unknown fields"):
        claims.all_below("p", "x", ["r"], ["a"], ["b"], margn=0.1)
    with pytest.raises(claims.ClaimError, match="no comparison"):
        claims.combine([])


def test_misspelt_names_are_refused():
    claim = claims.all_below("p", "x", ["r"], ["FN-UCB (N=2)"], ["NeuralUCB"])
    claims.check_names(claim, {"r": {"FN-UCB (N=2)", "NeuralUCB"}})
    with pytest.raises(ValueError, match="NeuralUCB"):
        claims.check_names(claims.all_below("p", "x", ["r"], ["FN-UCB (N=2)"], ["Neural UCB"]),
                           {"r": {"FN-UCB (N=2)", "NeuralUCB"}})
    with pytest.raises(claims.ClaimError, match="no curve 'c'"):
        _below({"a": [1.0] * 5, "b": [2.0] * 5}, ["a"], ["c"])


def test_claims_combine_to_the_worst_part():
    res = {"r": _res({"N=1": [9, 10, 11, 10, 10], "N=2": [5, 6, 7, 6, 6], "N=5": [5, 6, 6, 6.5, 5.5]})}
    got = claims.decreasing("p", "more, lower", ["r"], ["N=1", "N=2", "N=5"]).check(res)
    assert got.status == claims.UNDECIDED  # N=1 -> N=2 falls, N=2 -> N=5 is undecided
    assert got.numbers.startswith("1 of 2 comparisons undecided: r: N=5 5.8 +- 0.2")
    wrong = claims.all_below("p", "N=5 lowest", ["r"], ["N=1"], ["N=2", "N=5"]).check(res)
    assert wrong.status == claims.NOT_REPRODUCED and wrong.numbers.startswith("2 of 2 comparisons not reproduced")
    pending = claims.all_below("p", "x", ["r", "gone"], ["N=5"], ["N=1"])
    got = claims.verdict(pending, res)
    assert got.status == claims.NOT_RECORDED
    assert got.numbers.startswith("no record gone; the others so far reproduced: r: N=5 5.8 +- 0.25 against N=1")
    failed = claims.all_below("p", "x", ["r", "gone"], ["N=1"], ["N=5"])
    assert claims.verdict(failed, res).status == claims.NOT_REPRODUCED  # a present record already refutes it
    assert claims.verdict(failed, {}) == claims.Verdict(claims.NOT_RECORDED, "no record r, gone")


def test_ratio_claims_read_curves_by_their_x_tag():
    tags = {f"{m}, Delta={d}": {"method": m, "Delta": d} for m in ("Co", "Ind") for d in (0.1, 0.5)}
    samples = {"Co, Delta=0.1": 10.0, "Ind, Delta=0.1": 50.0, "Co, Delta=0.5": 10.0, "Ind, Delta=0.5": 48.0}
    outcomes = {curve: {"samples": np.array([value, value])} for curve, value in samples.items()}
    res = {"r": _res({c: [0.0, 0.0] for c in tags}, outcomes, tags, x="Delta")}
    strict = claims.per_x("p", "ratio 5", ["r"], "Co", ["Ind"], "samples", relation="ratio", target=5.0, tolerance=0.01)
    loose = claims.per_x("p", "ratio 5", ["r"], "Co", ["Ind"], "samples", relation="ratio", target=5.0, tolerance=0.05)
    assert strict.check(res) == claims.Verdict(
        claims.NOT_REPRODUCED, "samples Ind / Co from 4.8 (Delta=0.5) to 5 (Delta=0.1); not within 1% of 5: "
                               "Delta=0.5: samples Ind / Co = 4.8")
    assert loose.check(res) == claims.Verdict(claims.REPRODUCED,
                                              "samples Ind / Co from 4.8 (Delta=0.5) to 5 (Delta=0.1)")


def test_at_most_reads_comparable_or_better():
    check = claims.pairs_at_most("p", "x", ["r"], [("a", "b")], margin=0.1).check
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    assert check({"r": _res({"a": [v + 0.2 for v in base], "b": base})}).status == claims.REPRODUCED  # level
    assert check({"r": _res({"a": [v - 30 for v in base], "b": base})}).status == claims.REPRODUCED  # below
    assert check({"r": _res({"a": [v + 30 for v in base], "b": base})}).status == claims.NOT_REPRODUCED
    with pytest.raises(ValueError, match="margin"):
        claims.pairs_at_most("p", "x", ["r"], [("a", "b")])


def test_near_compares_a_mean_with_the_papers_number():
    res = {"r": _res({"a": [1.0] * 5})}
    res["r"].arrays["a"]["rounds"] = np.array([[348.0], [350.0], [352.0], [349.0], [351.0]])
    ok = claims.near("p", "x", ["r"], [("a", 345.0)], margin=0.05).check(res)
    assert ok.status == claims.REPRODUCED and "against the paper's 345" in ok.numbers
    assert claims.near("p", "x", ["r"], [("a", 400.0)], margin=0.05).check(res).status == claims.NOT_REPRODUCED


def test_regret_at_reads_a_checkpoint_and_refuses_another_step():
    res = _res({"a": [1.0] * 5})
    assert claims.regret_at(1)(res, "a").mean == 1.0
    with pytest.raises(claims.ClaimError, match="not a checkpoint"):
        claims.regret_at(7)(res, "a")


def test_across_records_uses_welch_at_the_shared_horizon():
    one, two = _res({"a": [1.0, 1.2, 0.8, 1.1, 0.9]}), _res({"a": [5.0, 5.2, 4.8, 5.1, 4.9]})
    claim = claims.across("p", "x", [(("r1", "a"), ("r2", "a"))])
    got = claim.check({"r1": one, "r2": two})
    assert got.status == claims.REPRODUCED and "Welch, n = 5 and 5" in got.numbers and got.numbers.startswith("t = 1")
    assert claims.verdict(claim, {"r1": one}).status == claims.NOT_RECORDED


def test_trend_across_records_of_exact_ratios_and_of_rates():
    tags = {f"{m}, Delta=0.1": {"method": m, "Delta": 0.1} for m in ("Co", "Ind")}

    def fc(ratio):
        outcomes = {"Co, Delta=0.1": {"samples": np.full(5, 10.0)}, "Ind, Delta=0.1": {"samples": np.full(5, 10 * ratio)}}
        return _res({c: [0.0] * 5 for c in tags}, outcomes, tags, x="Delta")

    claim = claims.trend_x("p", "x", ["a", "b", "c"], "Co", "Ind", "samples")
    assert claim.check({"a": fc(5.0), "b": fc(2.5), "c": fc(1.0)}).status == claims.REPRODUCED
    assert claim.check({"a": fc(5.0), "b": fc(2.5), "c": fc(3.0)}).status == claims.NOT_REPRODUCED
    assert claims.verdict(claim, {"a": fc(5.0)}).status == claims.NOT_RECORDED

    def fb(err_co, err_ind, n=100):
        correct = lambda e: np.r_[np.zeros(int(e * n)), np.ones(n - int(e * n))]  # noqa: E731
        outcomes = {"Co, Delta=0.1": {"correct": correct(err_co)}, "Ind, Delta=0.1": {"correct": correct(err_ind)}}
        return _res({c: [0.0] * n for c in tags}, outcomes, tags, x="Delta")

    gap = claims.trend_x("p", "x", ["a", "b"], "Co", "Ind", "error")
    assert gap.check({"a": fb(0.1, 0.9), "b": fb(0.5, 0.6)}).status == claims.REPRODUCED  # 0.8 -> 0.1
    assert gap.check({"a": fb(0.1, 0.5), "b": fb(0.1, 0.45)}).status == claims.UNDECIDED  # 0.4 -> 0.35


def test_ratio_bounds_and_run_seconds():
    tags = {f"{m}, Delta=0.1": {"method": m, "Delta": 0.1} for m in ("Co", "Ind")}
    outcomes = {"Co, Delta=0.1": {"samples": np.full(5, 10.0)}, "Ind, Delta=0.1": {"samples": np.full(5, 25.0)}}
    res = {"r": _res({c: [0.0] * 5 for c in tags}, outcomes, tags, x="Delta")}
    assert claims.per_x("p", "x", ["r"], "Co", ["Ind"], "samples", relation="ratio",
                        bounds=(1.0, 5.0)).check(res).status == claims.REPRODUCED
    assert claims.per_x("p", "x", ["r"], "Co", ["Ind"], "samples", relation="ratio",
                        bounds=(3.0, 5.0)).check(res).status == claims.NOT_REPRODUCED
    timed = _res({"a": [1.0] * 5, "b": [1.0] * 5})
    timed.metadata.update(seeds=list(range(5)), timing={"a": {"seeds_computed": 5, "run_seconds": 2.0},
                                                        "b": {"seeds_computed": 0, "run_seconds": 0.0}})
    assert claims.run_seconds(timed, "a").mean == 2.0
    with pytest.raises(claims.ClaimError, match="no-curve-cache"):
        claims.run_seconds(timed, "b")
