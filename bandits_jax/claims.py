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
    """The claim's verdict from the loaded records {name: Results}; "not recorded" when one is missing."""
    missing = [name for name in claim.records if name not in records]
    if missing:
        return Verdict(NOT_RECORDED, "no record " + ", ".join(missing))
    return claim.check({name: records[name] for name in claim.records})


def combine(parts: Sequence[Verdict]) -> Verdict:
    """One verdict of several comparisons (the rule in the module docstring), their numbers joined."""
    statuses = {p.status for p in parts}
    status = next((s for s in (NOT_RECORDED, NOT_REPRODUCED, LEVEL) if s in statuses), REPRODUCED)
    return Verdict(status, "; ".join(p.numbers for p in parts))


def compare(a: Number, b: Number) -> str:
    """"below", "above" or "level" (a against b, the rule in the module docstring)."""
    gap = a.mean - b.mean
    if abs(gap) <= Z_LEVEL * np.hypot(a.se, b.se):
        return "level"
    return "below" if gap < 0 else "above"


def final_regret(res, curve: str) -> Number:
    """Final cumulative regret of a curve (reduced over agents as the experiment plots it)."""
    return _number(res.cumulative(curve)[:, -1])


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

def below(page: str, text: str, record: str, a: str, b: str, value=final_regret) -> Claim:
    """`a` is below `b` (final regret by default; `value(res, curve) -> Number`)."""
    return Claim(page, text, (record,), lambda recs: _below(recs[record], a, b, value))


def lowest(page: str, text: str, records: Sequence[str], curve: str, others: Sequence[str]) -> Claim:
    """`curve` has the lowest final regret of `others` in every record."""
    return Claim(page, text, tuple(records),
                 lambda recs: combine([_below(recs[r], curve, o, final_regret, where=r) for r in records
                                       for o in others]))


def all_below(page: str, text: str, records: Sequence[str], lows: Sequence[str], highs: Sequence[str]) -> Claim:
    """Every curve of `lows` is below every curve of `highs`, in every record."""
    return Claim(page, text, tuple(records),
                 lambda recs: combine([_below(recs[r], lo, hi, final_regret, where=r) for r in records
                                       for lo in lows for hi in highs]))


def decreasing(page: str, text: str, record: str, curves: Sequence[str]) -> Claim:
    """The final regret falls along `curves` (each one below the one before)."""
    return Claim(page, text, (record,), lambda recs: combine([_below(recs[record], b, a, final_regret)
                                                              for a, b in zip(curves, curves[1:])]))


def level(page: str, text: str, record: str, pairs: Sequence[tuple]) -> Claim:
    """Each pair (a, b) ends level: reproduced when level, not reproduced when one is below."""
    def check(recs):
        parts = []
        for a, b in pairs:
            x, y = final_regret(recs[record], a), final_regret(recs[record], b)
            same = compare(x, y) == "level"
            parts.append(Verdict(REPRODUCED if same else NOT_REPRODUCED, f"{a} {x} against {b} {y}"))
        return combine(parts)
    return Claim(page, text, (record,), check)


def per_x(page: str, text: str, records: Sequence[str], method: str, others: Sequence[str], key: str,
          relation: str = "below", target: float = 1.0, tolerance: float = 0.0) -> Claim:
    """A phase-level claim at every value of the experiment's x tag (Delta, budget), curves found by
    their tag "method": `relation` "below" (method's outcome `key` below each of `others`), "above",
    "level" (level with each), or "ratio" (other / method within `tolerance`, relative, of `target`).
    An outcome "error" is 1 - correct."""
    def check(recs):
        parts = []
        for r in records:
            res = recs[r]
            mine = _by_x(res, method)
            for other in others:
                theirs = _by_x(res, other)
                for x in [x for x in mine if x in theirs]:
                    where = f"{r}, {res.metadata['x']}={x:g}"
                    parts.append(_relate(res, mine[x], theirs[x], key, relation, target, tolerance, where))
        return combine(parts)
    return Claim(page, text, tuple(records), check)


def _relate(res, a: str, b: str, key: str, relation: str, target: float, tolerance: float, where: str) -> Verdict:
    x, y = _outcome_or_error(res, a, key), _outcome_or_error(res, b, key)
    if relation == "ratio":
        r = y.mean / x.mean if x.mean else float("inf")
        ok = abs(r / target - 1.0) <= tolerance
        return Verdict(REPRODUCED if ok else NOT_REPRODUCED, f"{where}: {b} / {a} = {r:.4g}")
    found = compare(x, y)
    if relation == "level":
        status = REPRODUCED if found == "level" else NOT_REPRODUCED
    else:
        status = REPRODUCED if found == relation else LEVEL if found == "level" else NOT_REPRODUCED
    return Verdict(status, f"{where}: {a} {x} against {b} {y}")


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
    status = {"below": REPRODUCED, "level": LEVEL, "above": NOT_REPRODUCED}[compare(x, y)]
    return Verdict(status, f"{where + ': ' if where else ''}{a} {x} against {b} {y}")
