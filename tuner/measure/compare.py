"""Reading an interleaved A/B run (seed 001): per-arm mean and spread, matched pairs, the
drift between the first A and the sentinel A, and a verdict that will not call a
difference smaller than the drift, the spread, or the 95 % confidence interval of the
pair differences.

Runs go A B A B ... A: `pairs` matched pairs, then a sentinel run of A. A pair's
difference is B - A (positive: B is slower). A's figures include the sentinel.

The spread is the largest of each arm's run-to-run stdev and the stdev of the pair
differences. The last matters on a machine whose speed jumps about: two arms can each look
steady while their pairs disagree by more than their mean difference. Few pairs estimate
that spread poorly, so the mean difference must also clear Student's t interval over the
pairs: with 2 pairs it must be about 9 times their stdev, with 4 about 1.6 times (on the
H200 a 2-pair A/A run of identical settings had otherwise read "B faster by 6.1 %").
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuner.control.answers import ArmTimings, Compared, Sign

CONFIDENCE = 0.95  # of the interval the mean pair difference must clear


def schedule(pairs: int) -> list[str]:
    if pairs < 1:
        raise ValueError(f"pairs = {pairs}: an A/B comparison needs at least 1 pair")
    return ["A", "B"] * pairs + ["A"]


def _arm(ms: list[float]) -> ArmTimings:
    return {"runs": ms, "mean": round(statistics.fmean(ms), 4),
            "stdev": round(statistics.stdev(ms), 4) if len(ms) > 1 else None}


def _sign(diff: float) -> Sign:
    return "B slower" if diff > 0 else "B faster" if diff < 0 else "equal"


def preload() -> None:
    """Imports the statistics a verdict needs (2 s of SciPy): a runner calls it before its
    first run, so a verdict due after the last run is not that long in coming."""
    import scipy.stats  # noqa: F401


def compare(ms: list[float]) -> Compared:
    """The comparison of ms-per-token timings given in schedule order (A B ... A). Every
    figure is rounded once, here, and the verdict is written from the rounded figures, so
    it never disagrees with the report's lines in the last digit."""
    if len(ms) < 3 or len(ms) % 2 == 0:
        raise ValueError(f"{len(ms)} timings: expected A B A B ... A, an odd count >= 3")
    pairs = (len(ms) - 1) // 2
    a, b = ms[0::2], ms[1::2]
    diffs = [b[i] - a[i] for i in range(pairs)]
    diff = round(statistics.fmean(diffs), 4)
    arms = {"A": _arm(a), "B": _arm(b)}
    drift = round(a[-1] - a[0], 4)
    pair_stdev = round(statistics.stdev(diffs), 4) if pairs > 1 else None
    spread = max(s for s in (arms["A"]["stdev"], arms["B"]["stdev"], pair_stdev)
                 if s is not None)
    diff_pct = round(100 * diff / arms["A"]["mean"], 2) if arms["A"]["mean"] else None
    reasons = []
    if abs(drift) >= abs(diff):
        reasons.append(f"the drift between the first A and the sentinel A ({drift:+.3f} "
                       f"ms/token) is at least the A/B difference ({diff:+.3f} ms/token): the "
                       "machine changed speed during the comparison")
    if spread >= abs(diff):
        reasons.append(f"the A/B difference ({diff:+.3f} ms/token) is inside the spread of "
                       f"the runs and pairs (stdev up to {spread:.3f} ms/token)")
    if pairs < 2:
        reasons.append("one pair gives no spread of the pair differences: run 2 or more")
    else:
        from scipy.stats import t as student_t  # 2 s to import: see preload

        half = round(student_t.ppf((1 + CONFIDENCE) / 2, pairs - 1) * pair_stdev
                     / math.sqrt(pairs), 4)
        if half >= abs(diff):
            reasons.append(f"the A/B difference ({diff:+.3f} ms/token) is inside the "
                           f"{CONFIDENCE:.0%} interval of the mean pair difference "
                           f"(+/-{half:.3f} ms/token over {pairs} pairs)")
    agree = sum(1 for d in diffs if _sign(d) == _sign(diff))
    if reasons:
        verdict = "not readable: " + "; ".join(reasons)
    else:
        pct = "" if diff_pct is None else f" ({diff_pct:+.1f} %)"
        verdict = (f"{_sign(diff)} than A by {abs(diff):.3f} ms/token{pct}; {agree} of "
                   f"{pairs} pairs agree")
    return {
        "arms": arms,
        "pair_diffs": [{"pair": i + 1, "a": a[i], "b": b[i], "diff": round(d, 4),
                   "pct": round(100 * d / a[i], 2) if a[i] else None, "sign": _sign(d)}
                  for i, d in enumerate(diffs)],
        "diff": diff,
        "diff_pct": diff_pct,
        "drift": drift,
        "drift_pct": round(100 * drift / a[0], 2) if a[0] else None,
        "pair_stdev": pair_stdev,
        "spread": spread,
        "readable": not reasons,
        "verdict": verdict,
    }
