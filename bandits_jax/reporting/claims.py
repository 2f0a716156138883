"""Paper claims as checks of records: each claim is declared once, beside its paper's experiments,
and its verdict is computed from the committed records (`records`), never written by hand.

A claim says where it comes from (`origin`: the paper's words, the spec's reading of them, or a
check of the library's own), where the paper states it (section or figure, a short quote), and what
its verdict needs: `min_seeds` seeds at least in every record it reads, and for a claim that two
things are level, the `margin` within which they count as level (relative to the second one).

The rule for one comparison of x with y, each a sample over seeds (or over trials for a rate):
- The 95% interval of the difference x - y (x * `by` - y for a claim "smaller by a factor"):
  paired seed by seed when both come from one record (its curves run on the same seeds: common
  random numbers), a t interval with n - 1 degrees of freedom; Welch's t interval when they come
  from two records; for rates (0/1 outcomes) Newcombe's hybrid score interval built from the two
  Wilson intervals. Two exact counts (no spread over seeds) are compared as numbers: equal within a
  relative EXACT_RTOL.
- x is "below" y when the interval lies below 0, "above" when it lies above 0, "level" when it lies
  within +- margin * |mean y| (or two exact counts are equal), and "undecided" otherwise.
- Fewer seeds than the claim's `min_seeds` make the comparison "undecided: too few seeds", whatever
  the numbers say.
A claim that x is below (above) y is then reproduced when it is, not reproduced when it is the other
way, level when the two are level, undecided otherwise; a claim that they are level is reproduced
when level, not reproduced when the interval lies wholly outside the margin, undecided otherwise.
A claim of several comparisons takes the first of: not reproduced, level, too few seeds, undecided,
reproduced, that any of them has. A claim whose record is not committed is "not recorded".

Refused when declared (ValueError): an empty list of records, curves or pairs, a level claim
without a margin, min_seeds below 2, an unknown origin; names the experiments do not make are
refused when the pages are made (`check_names`, against each record's curves). Every standard error on the pages is the std
over seeds with ddof = 1, divided by sqrt(n).
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np
from scipy import stats

from ..core import ConfigError
from .results import grid_choices, interval95, step_axis, total_communication

REPRODUCED, LEVEL, NOT_REPRODUCED = "reproduced", "level", "not reproduced"
UNDECIDED, TOO_FEW, NOT_RECORDED = "undecided", "undecided: too few seeds", "not recorded"
STATUSES = (REPRODUCED, LEVEL, NOT_REPRODUCED, UNDECIDED, TOO_FEW, NOT_RECORDED)
_PRECEDENCE = (NOT_RECORDED, NOT_REPRODUCED, LEVEL, TOO_FEW, UNDECIDED, REPRODUCED)  # combine: the first present

PAPER, SPEC, LIBRARY = "paper", "spec", "library"
ORIGINS = {PAPER: "the paper's words", SPEC: "the spec's reading of the paper", LIBRARY: "a check of the library"}

CONFIDENCE = 0.95  # two-sided, of every interval of a difference
MIN_SEEDS = 5  # a claim's default: fewer seeds in a record decide nothing
EXACT_RTOL = 1e-9  # two exact counts (no spread over seeds) are equal within this relative difference


class ClaimError(ConfigError):
    """A claim that cannot be checked as declared: a name its records do not hold, no comparison made."""


class Sample(NamedTuple):
    """The values of one quantity over seeds (or trials), [n] float64, and the record they come from:
    two samples of one record pair up seed by seed. rate: 0/1 outcomes (a Wilson interval)."""

    values: np.ndarray
    source: str = ""
    rate: bool = False

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def se(self) -> float:
        """The standard error (std with ddof = 1 over sqrt(n); NaN from one value)."""
        n = self.values.shape[0]
        return float(np.std(self.values, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")

    def __str__(self) -> str:
        if self.rate:
            _, lo, hi = wilson(self.values)
            return f"{self.mean:.4g} [{lo:.3g}, {hi:.3g}]"
        return f"{self.mean:.4g} +- {self.se:.2g}"


class Verdict(NamedTuple):
    status: str
    numbers: str


class Claim(NamedTuple):
    """One claim: `page` (the reproduction page it belongs to), `text` (the claim as the paper makes
    it), `records` (the record names it reads), `check` ({name: Results} -> Verdict), and what the
    module docstring describes: `origin`, `where` (section or figure), `quote` (the paper's words),
    `names` (every curve or method it reads), `min_seeds`, `margin` (None: no level is declared),
    `retests` (the text of a claim whose curves it reads again: shown, not counted in the totals) and
    `paper_size` (the paper's runs and horizon, where its records' registered size is smaller)."""

    page: str
    text: str
    records: tuple
    check: Callable
    origin: str = PAPER
    where: str = ""
    quote: str = ""
    names: tuple = ()
    min_seeds: int = MIN_SEEDS
    margin: Optional[float] = None
    retests: str = ""
    paper_size: str = ""


def verdict(claim: Claim, records: dict) -> Verdict:
    """The claim's verdict from the loaded records {name: Results}. With some of its records missing,
    the present ones are checked: a comparison that fails there already makes it "not reproduced";
    otherwise it stays "not recorded", with what the present records show so far."""
    present = {name: records[name] for name in claim.records if name in records}
    missing = [name for name in claim.records if name not in records]
    if not present:
        return Verdict(NOT_RECORDED, "no record " + ", ".join(missing))
    found = claim.check(present)
    if not missing:
        return found
    if found.status == NOT_REPRODUCED:
        return Verdict(NOT_REPRODUCED, f"{found.numbers} (no record {', '.join(missing)} yet)")
    return Verdict(NOT_RECORDED, f"no record {', '.join(missing)}; the others so far {found.status}: {found.numbers}")


def combine(parts: Sequence[Verdict], shown: int = 3) -> Verdict:
    """One verdict of several comparisons (the rule in the module docstring). Its numbers are those of
    the comparisons that decided it (all of them when it is reproduced), at most `shown` of them, with
    how many there were. No comparison at all is a ClaimError, never a verdict."""
    if not parts:
        raise ClaimError("the claim made no comparison: its records hold none of the curves or x values it names")
    statuses = {p.status for p in parts}
    status = next(s for s in _PRECEDENCE if s in statuses)
    deciding = [p.numbers for p in parts if p.status == status]
    if len(parts) == 1:
        return Verdict(status, deciding[0])
    more = f"; and {len(deciding) - shown} more" if len(deciding) > shown else ""
    head = f"{len(deciding)} of {len(parts)} comparisons {status}: "
    return Verdict(status, head + "; ".join(deciding[:shown]) + more)


# --- one comparison ---------------------------------------------------------------------------------
class Difference(NamedTuple):
    """The estimate of x * by - y and its 95% interval [low, high]; `how` names the interval."""

    estimate: float
    low: float
    high: float
    how: str

    def __str__(self) -> str:
        if self.how == "exact":
            return f"difference {self.estimate:.4g} (exact counts)"
        return f"difference {self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}] ({self.how})"


def difference(x: Sample, y: Sample, by: float = 1.0) -> Difference:
    """The 95% interval of x * by - y (module docstring): exact, paired t, Welch t or Newcombe. A
    non-finite value (a failed run) is a ClaimError, never a verdict."""
    if not (np.isfinite(x.values).all() and np.isfinite(y.values).all()):
        raise ClaimError("a non-finite value among the seeds (a failed run): no verdict is drawn from it")
    if x.rate or y.rate:
        if not (x.rate and y.rate) or by != 1.0:
            raise ClaimError("a rate is compared only with a rate, and by no factor")
        return _newcombe(x.values, y.values)
    a, b = by * x.values, y.values
    if _exact(a) and _exact(b):
        return _exact_difference(float(a.mean()), float(b.mean()))
    if x.source == y.source and a.shape == b.shape:
        d = a - b
        n = d.shape[0]
        half = _t(n - 1) * float(np.std(d, ddof=1)) / math.sqrt(n)
        return Difference(float(d.mean()), float(d.mean()) - half, float(d.mean()) + half, f"paired, n = {n}")
    va, vb = np.var(a, ddof=1) / a.shape[0], np.var(b, ddof=1) / b.shape[0]
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.shape[0] - 1) + vb**2 / (b.shape[0] - 1)) if se > 0 else 1.0
    gap = float(a.mean() - b.mean())
    return Difference(gap, gap - _t(df) * se, gap + _t(df) * se, f"Welch, n = {a.shape[0]} and {b.shape[0]}")


def relation(diff: Difference, y: Sample, margin: Optional[float]) -> str:
    """"below", "above", "level" or "undecided" (x against y, the rule in the module docstring)."""
    if diff.how == "exact" and diff.estimate == 0.0:
        return "level"
    if margin is not None:
        bound = margin * abs(y.mean)
        if -bound < diff.low and diff.high < bound:
            return "level"
    if diff.high < 0:
        return "below"
    if diff.low > 0:
        return "above"
    return "undecided"


def judge(x: Sample, y: Sample, claimed: str, *, min_seeds: int = MIN_SEEDS, margin: Optional[float] = None,
          by: float = 1.0) -> tuple:
    """(status, the difference's text) of one comparison of x with y for a claim that x is `claimed`
    ("below", "above", "level", or "at most": below or level, the paper's "comparable or even better")
    against y."""
    diff = difference(x, y, by)
    if min(x.values.shape[0], y.values.shape[0]) < min_seeds:
        return TOO_FEW, str(diff)
    found = relation(diff, y, margin)
    if claimed == "level":
        return _equivalence(diff, y, margin), str(diff)
    if found == claimed or (claimed == "at most" and found in ("below", "level")):
        return REPRODUCED, str(diff)
    if found == "level":
        return LEVEL, str(diff)
    return (UNDECIDED if found == "undecided" else NOT_REPRODUCED), str(diff)


def _equivalence(diff: Difference, y: Sample, margin: Optional[float]) -> str:
    """A level claim's status: reproduced when the interval lies within +- margin * |mean y| (or two exact
    counts are equal), not reproduced when it lies wholly outside, undecided otherwise."""
    if relation(diff, y, margin) == "level":
        return REPRODUCED
    bound = margin * abs(y.mean) if margin is not None else 0.0
    return NOT_REPRODUCED if diff.low >= bound or diff.high <= -bound else UNDECIDED


def wilson(values) -> tuple:
    """(p, low, high): the proportion of 0/1 `values` and its 95% Wilson score interval
    (`results.interval95`), exactly 0 or 1 at its ends where p is."""
    p, lo, hi = interval95(values, "rate")
    return p, max(lo, 0.0) if p > 0 else 0.0, min(hi, 1.0) if p < 1 else 1.0


def _newcombe(x, y) -> Difference:
    """Newcombe's hybrid score interval of p_x - p_y (his method 10) from the two Wilson intervals."""
    (p1, l1, u1), (p2, l2, u2) = wilson(x), wilson(y)
    gap = p1 - p2
    return Difference(gap, gap - math.hypot(p1 - l1, u2 - p2), gap + math.hypot(u1 - p1, p2 - l2),
                      f"Newcombe, n = {len(x)} and {len(y)}")


def _t(df: float) -> float:
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, df))


def _z() -> float:
    return float(stats.norm.ppf(0.5 + CONFIDENCE / 2))


def _exact_difference(a: float, b: float) -> Difference:
    """a - b of two exact numbers, 0 within a relative EXACT_RTOL."""
    gap = 0.0 if abs(a - b) <= EXACT_RTOL * max(abs(a), abs(b)) else a - b
    return Difference(gap, gap, gap, "exact")


def _exact(values: np.ndarray) -> bool:
    """Whether values are one count repeated: no spread beyond EXACT_RTOL of their size."""
    return float(np.ptp(values)) <= EXACT_RTOL * float(np.max(np.abs(values)))


# --- what a claim reads -----------------------------------------------------------------------------
def final_regret(res, curve: str) -> Sample:
    """Final cumulative regret of a curve over seeds (reduced over agents as the experiment plots it);
    a curve run over a hyper-parameter grid is read at its chosen point (`results.grid_choices`)."""
    return Sample(np.asarray(res.cumulative(chosen(res, curve))[:, -1], dtype=np.float64))


def communication(res, curve: str) -> Sample:
    """Scalars sent up and down in a run, all steps together (at a grid's chosen point)."""
    return Sample(np.asarray(total_communication(res, chosen(res, curve)), dtype=np.float64))


def rounds(res, curve: str) -> Sample:
    """Communication rounds in a run, all steps together (at a grid's chosen point)."""
    return Sample(np.asarray(res.arrays[chosen(res, curve)]["rounds"].sum(axis=1), dtype=np.float64))


def regret_at(t: int) -> Callable:
    """A value (`final_regret`'s signature) that reads the cumulative regret at step t, which must be one
    of the record's checkpoints (`results.step_axis`)."""
    def value(res, curve: str) -> Sample:
        steps = step_axis(res)
        if t not in steps:
            raise ClaimError(f"step {t} is not a checkpoint of the record (it keeps {steps[:8].tolist()} ...)")
        return Sample(np.asarray(res.cumulative(chosen(res, curve))[:, int(np.flatnonzero(steps == t)[0])],
                                 dtype=np.float64))

    value.__name__ = f"regret at t = {t}"
    return value


def run_seconds(res, curve: str) -> Sample:
    """The seconds a curve's runs took (`metadata.timing`, compiling left out), one number for all its
    seeds, compared as an exact count; a curve taken from the curve cache has no time of its own and is
    refused (run such a record with --no-curve-cache)."""
    timing = res.metadata.get("timing", {}).get(chosen(res, curve), {})
    if not timing.get("seeds_computed") or not timing.get("run_seconds"):
        raise ClaimError(f"curve {curve!r} was not computed by its record's run (taken from the cache), so it has "
                         f"no time of its own; record it with --no-curve-cache")
    return Sample(np.full(len(res.metadata["seeds"]), float(timing["run_seconds"])))


def chosen(res, curve: str) -> str:
    """The stored curve a claim reads: `curve` itself, or its chosen point when it names a grid."""
    name = grid_choices(res).get(curve, curve)
    if name not in res.arrays:
        raise ClaimError(f"no curve {curve!r} in the record (it holds {', '.join(res.arrays)})")
    return name


def outcome(res, curve: str, key: str) -> Sample:
    """A phase-level outcome of a curve over trials (e.g. samples, correct); "error" is 1 - correct."""
    if key == "error":
        correct = outcome(res, curve, "correct")
        return correct._replace(values=1.0 - correct.values)
    values = np.asarray(res.arrays[curve][key], dtype=np.float64)
    return Sample(values, rate=res.metadata["outcomes"][key]["kind"] == "rate")


# --- claim builders: each returns a Claim whose check is made of the comparisons above ---------------
def all_below(page: str, text: str, records: Sequence[str], lows: Sequence[str], highs: Sequence[str],
              value: Callable = final_regret, *, by: float = 1.0, **about) -> Claim:
    """Every curve of `lows` is below every curve of `highs` in every record, by `value(res, curve) ->
    Sample` (final regret; `communication` for scalars sent); `by` > 1: below by that factor (lows *
    by below highs). One curve below all others: lows = [it]. `about`: the Claim's other fields."""
    return pairs_below(page, text, records, [(lo, hi) for lo in _names(lows) for hi in _names(highs)], value,
                       by=by, **about)


def pairs_below(page: str, text: str, records: Sequence[str], pairs: Sequence[tuple],
                value: Callable = final_regret, *, by: float = 1.0, **about) -> Claim:
    """In every record, a is below b for each pair (a, b) (`all_below`)."""
    return _pairs(page, text, records, pairs, value, "below", by, about)


def pairs_at_most(page: str, text: str, records: Sequence[str], pairs: Sequence[tuple],
                  value: Callable = final_regret, **about) -> Claim:
    """In every record, a is below b or level with it (within the claim's margin) for each pair (a, b): a
    paper's "comparable or even better"."""
    if about.get("margin") is None:
        raise ValueError(f"claim {text!r}: an at-most claim declares its margin (what counts as comparable)")
    return _pairs(page, text, records, pairs, value, "at most", 1.0, about)


def _pairs(page, text, records, pairs, value, claimed, by, about) -> Claim:
    return _claim(page, text, records, pairs, about,
                  lambda recs, settings: combine([_compare(recs, r, a, b, value, claimed, settings, by)
                                                  for r in records if r in recs for a, b in pairs]))


def decreasing(page: str, text: str, records: Sequence[str], curves: Sequence[str], **about) -> Claim:
    """In every record the final regret falls along `curves` (each one below the one before)."""
    curves = _names(curves)
    if len(curves) < 2:
        raise ValueError(f"claim {text!r}: a decrease needs two curves at least, got {curves}")
    return pairs_below(page, text, records, list(zip(curves[1:], curves)), **about)


def level(page: str, text: str, records: Sequence[str], pairs: Sequence[tuple], value: Callable = final_regret,
          **about) -> Claim:
    """Each pair (a, b) ends level in every record, within the claim's declared `margin` of b."""
    if about.get("margin") is None:
        raise ValueError(f"claim {text!r}: a level claim declares its margin (margin=0.1: within 10% of the second)")
    return _pairs(page, text, records, pairs, value, "level", 1.0, about)


def near(page: str, text: str, records: Sequence[str], targets: Sequence[tuple], value: Callable = rounds,
         **about) -> Claim:
    """Each curve's mean is level with the number the paper states, within the claim's `margin` of it:
    targets [(curve, number)]. Reproduced when the 95% interval of the mean lies within the margin, not
    reproduced when it lies wholly outside, undecided otherwise."""
    if about.get("margin") is None:
        raise ValueError(f"claim {text!r}: a claim of a stated number declares its margin")

    def check(recs, settings):
        parts = []
        for r in [r for r in records if r in recs]:
            for curve, number in targets:
                x = value(recs[r], curve)
                n = x.values.shape[0]
                half = _t(n - 1) * x.se if n > 1 else math.inf
                y = Sample(np.full(n, float(number)), r)
                diff = Difference(x.mean - number, x.mean - number - half, x.mean - number + half,
                                  f"the mean's interval, n = {n}")
                status = (TOO_FEW if n < settings["min_seeds"] else
                          _equivalence(diff, y, settings["margin"]))
                parts.append(Verdict(status, f"{r}: {chosen(recs[r], curve)} {x} against the paper's {number:g}, "
                                             f"{diff}"))
        return combine(parts)

    return _claim(page, text, records, [(curve,) for curve, _ in targets], about, check)


def across(page: str, text: str, pairs: Sequence[tuple], claimed: str = "below", **about) -> Claim:
    """Across two records: for each pair ((record a, curve a), (record b, curve b)), curve a of record a is
    `claimed` ("below", "at most", "level") against curve b of record b in cumulative regret at the
    last step the two records share (Welch's interval: two records do not pair seed by seed)."""
    records = tuple(dict.fromkeys(r for pair in pairs for r, _ in pair))

    def check(recs, settings):
        parts = []
        for (ra, a), (rb, b) in pairs:
            if ra in recs and rb in recs:
                t = int(min(step_axis(recs[ra])[-1], step_axis(recs[rb])[-1]))
                x, y = regret_at(t)(recs[ra], a)._replace(source=ra), regret_at(t)(recs[rb], b)._replace(source=rb)
                status, diff = judge(x, y, claimed, **settings)
                parts.append(Verdict(status, f"t = {t}: {ra} {a} {x} against {rb} {b} {y}, {diff}"))
        return combine(parts) if parts else Verdict(NOT_RECORDED, "no pair of its records is committed")

    return _claim(page, text, records, [(a, b) for (_, a), (_, b) in pairs], about, check)


def per_x(page: str, text: str, records: Sequence[str], method: str, others: Sequence[str], key: str,
          relation: str = "below", target: float = 1.0, tolerance: float = 0.0, bounds: tuple = (), **about) -> Claim:
    """A phase-level claim at every value of the experiment's x tag (Delta, budget), curves found by
    their tag "method": `relation` "below" (method's outcome `key` below each of `others`), "above",
    "level" (level with each, within the claim's margin), or "ratio" (other / method within
    `tolerance`, relative, of `target`, or with `bounds` (low, high) strictly between them, on the
    means, which are exact counts; its numbers give the range of the ratios). An outcome "error" is
    1 - correct."""
    if relation not in ("below", "above", "level", "ratio"):
        raise ValueError(f"claim {text!r}: relation is below, above, level or ratio, got {relation!r}")
    if bounds and not (len(bounds) == 2 and bounds[0] < bounds[1]):
        raise ValueError(f"claim {text!r}: bounds are (low, high) with low < high, got {bounds}")
    if relation == "level" and about.get("margin") is None:
        raise ValueError(f"claim {text!r}: a level claim declares its margin")
    pairs = [(method, other) for other in _names(others)]

    def check(recs, settings):
        parts, ratios = [], []
        for r in [r for r in records if r in recs]:
            res = recs[r]
            mine = _by_x(res, method)
            for other in others:
                theirs = _by_x(res, other)
                for x in [x for x in mine if x in theirs]:
                    where = f"{r + ', ' if len(records) > 1 else ''}{res.metadata['x']}={x:g}"
                    a, b = outcome(res, mine[x], key)._replace(source=r), outcome(res, theirs[x], key)._replace(source=r)
                    if relation != "ratio":
                        status, diff = judge(a, b, relation, **settings)
                        parts.append(Verdict(status, f"{where}: {key} {method} {a} against {other} {b}, {diff}"))
                        continue
                    ratio = b.mean / a.mean if a.mean else float("inf")
                    ratios.append((ratio, where))
                    ok = bounds[0] < ratio < bounds[1] if bounds else abs(ratio / target - 1.0) <= tolerance
                    parts.append(Verdict(REPRODUCED if ok else NOT_REPRODUCED, f"{where}: {key} {other} / {method} = "
                                                                               f"{ratio:.4g}"))
        found = combine(parts)
        if ratios:
            (lo, at_lo), (hi, at_hi) = min(ratios), max(ratios)
            span = f"{key} {', '.join(others)} / {method} from {lo:.4g} ({at_lo}) to {hi:.4g} ({at_hi})"
            failed = [p.numbers for p in parts if p.status != REPRODUCED]
            wanted = f"between {bounds[0]:g} and {bounds[1]:g}" if bounds else f"within {tolerance:.0%} of {target:g}"
            found = Verdict(found.status, span + (f"; not {wanted}: " + "; ".join(failed) if failed else ""))
        return found

    return _claim(page, text, records, pairs, about, check)


def trend_x(page: str, text: str, records: Sequence[str], method: str, other: str, key: str, **about) -> Claim:
    """Across phase-level records in the order given, at every x value they share: the advantage of
    `method` over `other` shrinks, record after record. For the exact counts of key "samples" the
    advantage is the ratio other / method of the means, compared as numbers; for a rate ("error") it is
    the gap other - method, and two records' gaps are compared by a normal interval whose variance is
    read off each Wilson interval (never 0 at a rate of 0 or 1)."""
    records = _names(records, "records")
    if len(records) < 2:
        raise ValueError(f"claim {text!r}: a trend needs two records at least, got {list(records)}")

    def advantage(res, x, mine, theirs) -> tuple:
        """(the advantage at x, its variance: None for a ratio of exact counts)."""
        a, b = outcome(res, mine[x], key), outcome(res, theirs[x], key)
        if not a.rate:
            return b.mean / a.mean, None
        return b.mean - a.mean, sum(((hi - lo) / (2 * _z())) ** 2 for _, lo, hi in (wilson(a.values), wilson(b.values)))

    def check(recs, settings):
        present = [r for r in records if r in recs]
        if len(present) < 2:
            return Verdict(NOT_RECORDED, "fewer than two of its records are committed")
        found = {r: (_by_x(recs[r], method), _by_x(recs[r], other)) for r in present}
        shared = sorted(set.intersection(*[set(m) & set(o) for m, o in found.values()]))
        parts = []
        for x in shared:
            for r0, r1 in zip(present, present[1:]):
                (q0, v0), (q1, v1) = (advantage(recs[r], x, *found[r]) for r in (r0, r1))
                if v0 is None:
                    d = _exact_difference(q1, q0)
                else:
                    half = _z() * math.sqrt(v0 + v1)
                    d = Difference(q1 - q0, q1 - q0 - half, q1 - q0 + half, "normal, from the Wilson intervals")
                status = {"below": REPRODUCED, "above": NOT_REPRODUCED, "level": LEVEL}.get(
                    relation(d, Sample(np.zeros(1)), None), UNDECIDED)
                parts.append(Verdict(status, f"{recs[r0].metadata['x']}={x:g}: {key} advantage {q0:.4g} in {r0}, "
                                             f"{q1:.4g} in {r1}, {d}"))
        return combine(parts)

    return _claim(page, text, records, [(method, other)], about, check)


def check_names(claim: Claim, known: dict) -> None:
    """Refuse (ValueError) a claim that names a curve or method that the experiment of one of its records
    does not make; `known` is {record: set of names that record's experiment makes (curve names, grid
    names, method tags)}. Records absent from `known` are not checked."""
    for record, names in known.items():
        if record in claim.records:
            unknown = sorted(set(claim.names) - set(names))
            if unknown:
                raise ValueError(f"claim {claim.text!r} names {unknown}, which the experiment of record {record} does "
                                 f"not make; it makes {sorted(names)}")


def _claim(page, text, records, pairs, about, check) -> Claim:
    """The Claim of `check(recs, settings)` with its declaration checked (module docstring)."""
    records = _names(records, "records")
    if not pairs:
        raise ValueError(f"claim {text!r}: no comparison declared")
    about = dict(about)
    unknown = sorted(set(about) - set(Claim._fields) - {"page", "text", "records", "check", "names"})
    if unknown:
        raise ValueError(f"claim {text!r}: unknown fields {unknown}")
    if about.get("origin", PAPER) not in ORIGINS:
        raise ValueError(f"claim {text!r}: origin is one of {', '.join(ORIGINS)}, got {about['origin']!r}")
    min_seeds, margin = about.get("min_seeds", MIN_SEEDS), about.get("margin")
    if not (isinstance(min_seeds, int) and min_seeds >= 2):
        raise ValueError(f"claim {text!r}: min_seeds must be an integer >= 2, got {min_seeds!r}")
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"claim {text!r}: margin must be a positive number or None, got {margin!r}")
    settings = {"min_seeds": min_seeds, "margin": margin}
    names = tuple(dict.fromkeys(n for pair in pairs for n in pair))
    return Claim(page, text, records, lambda recs: check(recs, settings), names=names, **about)


def _compare(recs, r, a, b, value, claimed, settings, by=1.0) -> Verdict:
    res = recs[r]
    x, y = value(res, a)._replace(source=r), value(res, b)._replace(source=r)
    status, diff = judge(x, y, claimed, by=by, **settings)
    factor = f" x {by:g}" if by != 1.0 else ""
    return Verdict(status, f"{r}: {chosen(res, a)}{factor} {x} against {chosen(res, b)} {y}, {diff}")


def _names(names, what: str = "curves") -> tuple:
    names = (names,) if isinstance(names, str) else tuple(names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"a claim's {what} must be a non-empty list of names, got {list(names)}")
    return names


def _by_x(res, method: str) -> dict:
    """{x value: curve} of the curves tagged with `method`, x the experiment's x tag."""
    x = res.metadata["x"]
    return {float(tags[x]): curve for curve, tags in res.metadata.get("tags", {}).items()
            if tags.get("method") == method and x in tags and curve in res.arrays}
