"""Rules that reject a candidate B against a baseline A on a workload (seed 000 section 8).

A rule is a small named object: the figures of both arms on one workload and phase in,
an `Outcome` out (pass, reject or n/a, with the reason in numbers). A rule set is a list
of them; `tuner ab --rules NAME` evaluates every rule on every workload and phase, and the
verdict names the first rule that rejects. More gates (quality, say) are more entries.

An arm's figures (`ArmFigures`) are what its runs on the workload measured, per phase
(prefill and decode are separate profiles): the counters are deterministic and repeat in
every run of the arm (the A/B report checks that), the timings are one value per run, in
schedule order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from tuner.engine.counters import PHASES
from tuner.measure.compare import compare

PASS, REJECT, NOT_APPLICABLE = "pass", "reject", "n/a"


@dataclass(frozen=True)
class Outcome:
    rule: str
    status: Literal["pass", "reject", "n/a"]
    reason: str


@dataclass(frozen=True)
class ArmFigures:
    """One arm on one workload and phase."""

    sync_misses_per_token: float | None
    hits_per_token: float | None  # served from the arena: hits plus claimed speculation
    stall_ms_per_token: list[float]  # one per run
    output_hash: str
    bonus: float  # moce_bonus + moce_bonus_r1 of the arm's settings


def _interleave(a: list[float], b: list[float]) -> list[float]:
    """A B A B ... A from the arms' runs."""
    out = []
    for i, x in enumerate(a):
        out.append(x)
        if i < len(b):
            out.append(b[i])
    return out


class SyncMisses:
    name = "sync-misses"
    help = "sync misses per token not higher than A's"

    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        if a.sync_misses_per_token is None or b.sync_misses_per_token is None:
            return Outcome(self.name, NOT_APPLICABLE, "no tokens")
        diff = b.sync_misses_per_token - a.sync_misses_per_token
        status = REJECT if diff > 0 else PASS
        return Outcome(self.name, status, f"{a.sync_misses_per_token:.3f} -> "
                       f"{b.sync_misses_per_token:.3f} per token ({diff:+.3f})")


class Bonus0Output:
    name = "bonus0-output"
    help = "output identical to A's where the resident bonus is 0 in both arms"

    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        if a.bonus or b.bonus:
            return Outcome(self.name, NOT_APPLICABLE, "a resident bonus is on: output may "
                           "change on purpose")
        same = a.output_hash == b.output_hash
        return Outcome(self.name, PASS if same else REJECT,
                       f"output {a.output_hash} {'==' if same else '!='} {b.output_hash}")


class ExposedWaits:
    name = "exposed-waits"
    help = "stall per token not up (beyond the runs' spread) while hits per token go up"

    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        if a.hits_per_token is None or b.hits_per_token is None:
            return Outcome(self.name, NOT_APPLICABLE, "no tokens")
        stall = compare(_interleave(a.stall_ms_per_token, b.stall_ms_per_token))
        hits_up = b.hits_per_token > a.hits_per_token
        stall_up = stall["readable"] and stall["diff"] > 0
        what = (f"hits {a.hits_per_token:.3f} -> {b.hits_per_token:.3f} per token, stall "
                f"{stall['diff']:+.3f} ms/token (spread {stall['spread']:.3f})")
        return Outcome(self.name, REJECT if hits_up and stall_up else PASS, what)


RULESETS: dict[str, tuple] = {"seed000": (SyncMisses(), Bonus0Output(), ExposedWaits())}


def ruleset(name: str) -> tuple:
    """The rules of set `name` ("" = none)."""
    if not name:
        return ()
    if name not in RULESETS:
        raise ValueError(f"rules {name!r}: allowed {', '.join(RULESETS)}")
    return RULESETS[name]


def figures(runs: list[dict], phase: str, bonus: float) -> ArmFigures:
    """An arm's figures on one workload and phase from its runs (`run_once` results)."""
    first = runs[0]["phases"][phase]
    return ArmFigures(first["sync_misses_per_token"], first["hits_per_token"],
                      [r["phases"][phase]["stall_ms_per_token"] or 0.0 for r in runs],
                      runs[0]["output_hash"], bonus)


def evaluate(rules: tuple, workload: str, runs: list[dict], bonus: dict[str, float]
             ) -> list[dict]:
    """Every rule on each phase of one workload's runs: plain outcome dicts."""
    out = []
    for phase in PHASES:
        arms = {arm: [r for r in runs if r["arm"] == arm] for arm in ("A", "B")}
        if not all(r["phases"][phase]["tokens"] for r in runs):
            continue  # the workload ran no token of this phase
        a, b = (figures(arms[x], phase, bonus[x]) for x in ("A", "B"))
        out += [{"workload": workload, "phase": phase, **asdict(rule.check(a, b))}
                for rule in rules]
    return out


def verdict(name: str, outcomes: list[dict], workloads: list[str]) -> str:
    """Names the first rule that rejects B, else says every rule held."""
    rejected = [o for o in outcomes if o["status"] == REJECT]
    if rejected:
        o = rejected[0]
        more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
        return (f"reject B: rule {o['rule']} fails on {o['workload']} ({o['phase']}): "
                f"{o['reason']}{more}")
    return f"no rule of {name} rejects B on {', '.join(workloads)}"
