"""Paper claims as checks of records: each claim is declared once, beside its paper's experiments,
and its verdict is computed from the committed records (`records`), never written by hand.

The rule for noise: two numbers differ when their difference is more than two standard errors of
the difference, sqrt(se_a^2 + se_b^2), with each standard error from the spread over seeds
(ddof = 1; a rate's from p(1 - p) / n); otherwise they are "level". A claim that one curve is below
another is then "reproduced" (below), "level" or "not reproduced" (above). A claim made of several
comparisons is not reproduced when any of them is, level when any is level, reproduced otherwise.
A claim whose record is not committed is "not recorded".

A claim's `check` takes {record name: loaded record} and returns its `Verdict`: the status and the
numbers it rests on, as text.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

from .results import grid_choices, total_communication

REPRODUCED, LEVEL, NOT_REPRODUCED, NOT_RECORDED = "reproduced", "level", "not reproduced", "not recorded"
STATUSES = (REPRODUCED, LEVEL, NOT_REPRODUCED, NOT_RECORDED)
Z_LEVEL = 2.0  # a difference within this many standard errors is "level"


class Number(NamedTuple):
    """A mean over seeds and its standard error (ddof = 1)."""

    mean: float
    se: float

    def __str__(self) -> str:
        return f"{self.mean:.4g} +- {self.se:.2g}"


class Verdict(NamedTuple):
    status: str
    numbers: str


class Claim(NamedTuple):
    """One claim of a paper: `page` (the reproduction page it belongs to), `text` (the claim as the
    paper makes it), `records` (the record names it reads) and `check` ({name: Results} -> Verdict)."""

    page: str
    text: str
    records: tuple
    check: Callable


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
    how many there were."""
    statuses = {p.status for p in parts}
    status = next((s for s in (NOT_RECORDED, NOT_REPRODUCED, LEVEL) if s in statuses), REPRODUCED)
    deciding = [p.numbers for p in parts if p.status == status]
    if len(parts) == 1:
        return Verdict(status, deciding[0])
    more = f"; and {len(deciding) - shown} more" if len(deciding) > shown else ""
    head = f"{len(deciding)} of {len(parts)} comparisons {status}: "
    return Verdict(status, head + "; ".join(deciding[:shown]) + more)


def compare(a: Number, b: Number) -> str:
    """"below", "above" or "level" (a against b, the rule in the module docstring)."""
    gap = a.mean - b.mean
    if abs(gap) <= Z_LEVEL * np.hypot(a.se, b.se):
        return "level"
    return "below" if gap < 0 else "above"


def final_regret(res, curve: str) -> Number:
    """Final cumulative regret of a curve (reduced over agents as the experiment plots it); a curve
    run over a hyper-parameter grid is read at its chosen point (`results.grid_choices`)."""
    return _number(res.cumulative(chosen(res, curve))[:, -1])


def communication(res, curve: str) -> Number:
    """Scalars sent up and down in a run, all steps together (at a grid's chosen point)."""
    return _number(total_communication(res, chosen(res, curve)))


def chosen(res, curve: str) -> str:
    """The stored curve a claim reads: `curve` itself, or its chosen point when it names a grid."""
    return grid_choices(res).get(curve, curve)


def outcome(res, curve: str, key: str) -> Number:
    """A phase-level outcome of a curve (e.g. samples, correct), mean over trials; a 0/1 rate's
    standard error is sqrt(p (1 - p) / n)."""
    values = np.asarray(res.arrays[curve][key], dtype=np.float64)
    if res.metadata["outcomes"][key]["kind"] == "rate":
        p, n = float(values.mean()), values.shape[0]
        return Number(p, float(np.sqrt(p * (1 - p) / n)))
    return _number(values)


def _number(values) -> Number:
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    return Number(float(values.mean()), float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"))


# --- claim builders: each returns a Claim whose check is one of the comparisons below ---------------

def all_below(page: str, text: str, records: Sequence[str], lows: Sequence[str], highs: Sequence[str],
              value: Callable = final_regret) -> Claim:
    """Every curve of `lows` is below every curve of `highs` in every record, by `value(res, curve) ->
    Number` (final regret; `communication` for scalars sent). One curve below all others: lows = [it]."""
    return Claim(page, text, tuple(records),
                 lambda recs: combine([_below(recs[r], lo, hi, value, where=r) for r in records
                                       if r in recs for lo in lows for hi in highs]))


def pairs_below(page: str, text: str, records: Sequence[str], pairs: Sequence[tuple],
                value: Callable = final_regret) -> Claim:
    """In every record, a is below b for each pair (a, b)."""
    return Claim(page, text, tuple(records),
                 lambda recs: combine([_below(recs[r], a, b, value, where=r) for r in records if r in recs
                                       for a, b in pairs]))


def decreasing(page: str, text: str, records: Sequence[str], curves: Sequence[str]) -> Claim:
    """In every record the final regret falls along `curves` (each one below the one before)."""
    return Claim(page, text, tuple(records),
                 lambda recs: combine([_below(recs[r], b, a, final_regret, where=r) for r in records
                                       if r in recs for a, b in zip(curves, curves[1:])]))


def level(page: str, text: str, records: Sequence[str], pairs: Sequence[tuple]) -> Claim:
    """Each pair (a, b) ends level in every record: reproduced when level, not reproduced when one is
    below the other."""
    def check(recs):
        parts = []
        for r in [r for r in records if r in recs]:
            for a, b in pairs:
                x, y = final_regret(recs[r], a), final_regret(recs[r], b)
                parts.append(Verdict(_judge(x, y, "level"), f"{r}: {a} {x} against {b} {y}"))
        return combine(parts)
    return Claim(page, text, tuple(records), check)


def per_x(page: str, text: str, records: Sequence[str], method: str, others: Sequence[str], key: str,
          relation: str = "below", target: float = 1.0, tolerance: float = 0.0) -> Claim:
    """A phase-level claim at every value of the experiment's x tag (Delta, budget), curves found by
    their tag "method": `relation` "below" (method's outcome `key` below each of `others`), "above",
    "level" (level with each), or "ratio" (other / method within `tolerance`, relative, of `target`;
    its numbers give the range of the ratios). An outcome "error" is 1 - correct."""
    def check(recs):
        parts, ratios = [], []
        for r in [r for r in records if r in recs]:
            res = recs[r]
            mine = _by_x(res, method)
            for other in others:
                theirs = _by_x(res, other)
                for x in [x for x in mine if x in theirs]:
                    where = f"{r + ', ' if len(records) > 1 else ''}{res.metadata['x']}={x:g}"
                    mean, against = _outcome_or_error(res, mine[x], key), _outcome_or_error(res, theirs[x], key)
                    if relation != "ratio":
                        parts.append(Verdict(_judge(mean, against, relation),
                                             f"{where}: {key} {method} {mean} against {other} {against}"))
                        continue
                    ratio = against.mean / mean.mean if mean.mean else float("inf")
                    ratios.append((ratio, where))
                    parts.append(Verdict(REPRODUCED if abs(ratio / target - 1.0) <= tolerance else NOT_REPRODUCED,
                                         f"{where}: {key} {other} / {method} = {ratio:.4g}"))
        verdict = combine(parts)
        if ratios:
            (lo, at_lo), (hi, at_hi) = min(ratios), max(ratios)
            span = f"{key} {', '.join(others)} / {method} from {lo:.4g} ({at_lo}) to {hi:.4g} ({at_hi})"
            failed = [p.numbers for p in parts if p.status != REPRODUCED]
            verdict = Verdict(verdict.status, span + (f"; outside {tolerance:.0%} of {target:g}: "
                                                       + "; ".join(failed) if failed else ""))
        return verdict
    return Claim(page, text, tuple(records), check)


def _judge(x: Number, y: Number, relation: str) -> str:
    """The status of one comparison of x with y: for relation "below" or "above", reproduced when x is
    so, level when the two are level, not reproduced otherwise; for "level", reproduced only when level."""
    found = compare(x, y)
    if relation == "level":
        return REPRODUCED if found == "level" else NOT_REPRODUCED
    return REPRODUCED if found == relation else LEVEL if found == "level" else NOT_REPRODUCED


def _outcome_or_error(res, curve: str, key: str) -> Number:
    if key == "error":
        correct = outcome(res, curve, "correct")
        return Number(1.0 - correct.mean, correct.se)
    return outcome(res, curve, key)


def _by_x(res, method: str) -> dict:
    """{x value: curve} of the curves tagged with `method`, x the experiment's x tag."""
    x = res.metadata["x"]
    return {float(tags[x]): curve for curve, tags in res.metadata.get("tags", {}).items()
            if tags.get("method") == method and x in tags and curve in res.arrays}


def _below(res, a: str, b: str, value: Callable, where: str = "") -> Verdict:
    x, y = value(res, a), value(res, b)
    label = f"{where}: " if where else ""
    return Verdict(_judge(x, y, "below"), f"{label}{chosen(res, a)} {x} against {chosen(res, b)} {y}")
