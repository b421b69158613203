"""Rules that reject a candidate B against a baseline A on a workload (seed 000 section 8).

A rule is a small named object: the figures of both arms on one workload and phase in,
an `Outcome` out (pass, reject or n/a, with the reason in numbers). A rule set is a list
of them; `tuner ab --rules NAME` evaluates every rule on every workload and phase, and the
verdict names the first rule that rejects. The quality gate (`--max-kl`, `--min-agreement`)
is one more entry: a lossy knob (moce's resident bonus, drop_cold) may buy speed only within
the KL and top-1 agreement the user allows, and an arm over a limit is rejected whatever its
speed, A included.

An arm's figures (`ArmFigures`) are what its runs on the workload measured, per phase
(prefill and decode are separate profiles): the counters are deterministic and repeat in
every run of the arm (the A/B report checks that), the timings are one value per run, in
schedule order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tuner.format import figure
from tuner.measure.compare import compare
from tuner.settings import SettingsError
from tuner.vocabulary.counters import PHASES
from tuner.vocabulary.judging import RULESETS as RULE_SET_NAMES
from tuner.vocabulary.judging import limit_problems

if TYPE_CHECKING:
    from tuner.control.answers import ABRun, RuleOutcome

PASS, REJECT, NOT_APPLICABLE = "pass", "reject", "n/a"
QUALITY_EVERY = 4  # tokens between the quality probe's samples where a gate needs them


@dataclass(frozen=True)
class Outcome:
    rule: str
    status: Literal["pass", "reject", "n/a"]
    reason: str
    arm: str = "B"  # the arm a rejection rejects


@dataclass(frozen=True)
class ArmFigures:
    """One arm on one workload and phase."""

    sync_misses_per_token: float | None
    hits_per_token: float | None  # served from the arena: hits plus claimed speculation
    stall_ms_per_token: list[float]  # one per run
    output_hash: str
    lossy: float  # the arm's lossy knobs summed (moce's bonuses, drop_cold): 0 = exact
    quality_kl: float | None = None  # the quality probe's, the worst of the runs
    top1_agreement: float | None = None


def _interleave(a: list[float], b: list[float]) -> list[float]:
    """A B A B ... A from the arms' runs."""
    out = []
    for i, x in enumerate(a):
        out.append(x)
        if i < len(b):
            out.append(b[i])
    return out


class Rule(ABC):
    name: str
    help: str
    phases: tuple[str, ...] = PHASES  # the phases it judges

    @abstractmethod
    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        """The outcome of B against A on one workload and phase."""


class SyncMisses(Rule):
    name = "sync-misses"
    help = "sync misses per token not higher than A's"

    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        if a.sync_misses_per_token is None or b.sync_misses_per_token is None:
            return Outcome(self.name, NOT_APPLICABLE, "no tokens")
        diff = b.sync_misses_per_token - a.sync_misses_per_token
        status = REJECT if diff > 0 else PASS
        return Outcome(self.name, status, f"{a.sync_misses_per_token:.3f} -> "
                       f"{b.sync_misses_per_token:.3f} per token ({diff:+.3f})")


class Bonus0Output(Rule):
    name = "bonus0-output"
    help = "output identical to A's where every lossy knob is 0 in both arms"

    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        if a.lossy or b.lossy:
            return Outcome(self.name, NOT_APPLICABLE, "a lossy knob is on: output may "
                           "change on purpose")
        same = a.output_hash == b.output_hash
        return Outcome(self.name, PASS if same else REJECT,
                       f"output {a.output_hash} {'==' if same else '!='} {b.output_hash}")


class ExposedWaits(Rule):
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


def quality_gate(kl: float | None, agreement: float | None, max_kl: float | None,
                 min_agreement: float | None) -> str | None:
    """Why figures fail the quality limits, or None; a limit that is None is not checked,
    a figure that was not measured fails the limit on it."""
    reasons = []
    if max_kl is not None:
        if kl is None:
            reasons.append("no KL measured (no decoded token compared)")
        elif kl > max_kl:
            reasons.append(f"KL {kl:.4g} nats/token > max_kl {max_kl:g}")
    if min_agreement is not None:
        if agreement is None:
            reasons.append("no top-1 agreement measured (no decoded token compared)")
        elif agreement < min_agreement:
            reasons.append(f"top-1 agreement {agreement} % < min_agreement {min_agreement:g} %")
    return "; ".join(reasons) or None


def check_limits(max_kl: float | None, min_agreement: float | None) -> None:
    """Raises SettingsError naming each quality limit out of its range."""
    problems = limit_problems(max_kl, min_agreement)
    if problems:
        raise SettingsError(problems)


class QualityGate(Rule):
    """Both arms against the limits: the probe compares decoded tokens only."""

    name = "quality"
    phases = ("decode",)

    def __init__(self, max_kl: float | None, min_agreement: float | None):
        check_limits(max_kl, min_agreement)
        self.max_kl, self.min_agreement = max_kl, min_agreement
        limits = []
        if max_kl is not None:
            limits.append(f"KL <= {max_kl:g} nats/token")
        if min_agreement is not None:
            limits.append(f"top-1 agreement >= {min_agreement:g} %")
        self.help = f"each arm within {' and '.join(limits)}, whatever its speed"

    def check(self, a: ArmFigures, b: ArmFigures) -> Outcome:
        why = {arm: quality_gate(f.quality_kl, f.top1_agreement, self.max_kl,
                                 self.min_agreement) for arm, f in (("A", a), ("B", b))}
        failed = [arm for arm, reason in why.items() if reason]
        if not failed:
            return Outcome(self.name, PASS, "; ".join(
                f"{arm}: KL {figure(f.quality_kl)} nats/token, top-1 "
                f"{figure(f.top1_agreement, '%')} %" for arm, f in (("A", a), ("B", b))))
        return Outcome(self.name, REJECT, "; ".join(f"{arm}: {why[arm]}" for arm in failed),
                       " and ".join(failed))


# The rules of each set the vocabulary names (a name without its rules fails the import).
RULESETS: dict[str, tuple[Rule, ...]] = dict(zip(
    RULE_SET_NAMES, [(SyncMisses(), Bonus0Output(), ExposedWaits())], strict=True))


def ruleset(name: str, max_kl: float | None = None, min_agreement: float | None = None
            ) -> tuple[Rule, ...]:
    """The rules of set `name` ("" = none), and the quality gate where a limit is set."""
    if name and name not in RULESETS:
        raise SettingsError({"rules": f"rules {name!r}: allowed {', '.join(RULESETS)}"})
    gate = () if max_kl is None and min_agreement is None else (
        QualityGate(max_kl, min_agreement),)
    return RULESETS.get(name, ()) + gate


def ruleset_label(name: str, rules: tuple[Rule, ...]) -> str:
    """What the verdict calls the rules: the set's name, "+ quality" with the gate."""
    gated = any(isinstance(r, QualityGate) for r in rules)
    return " + ".join(x for x in (name, "quality" if gated else "") if x)


def figures(runs: list[ABRun], phase: str, lossy: float) -> ArmFigures:
    """An arm's figures on one workload and phase from its runs (`run_once` results)."""
    phases = [r["phases"][phase] for r in runs]
    first = phases[0]
    kls, agree = [p["quality_kl"] for p in phases], [p["top1_agreement"] for p in phases]
    return ArmFigures(first["sync_misses_per_token"], first["hits_per_token"],
                      [p["stall_ms_per_token"] or 0.0 for p in phases],
                      runs[0]["output_hash"], lossy,
                      None if None in kls else max(kls), None if None in agree else min(agree))


def evaluate(rules: tuple[Rule, ...], workload: str, runs: list[ABRun],
             lossy: dict[str, float]) -> list[RuleOutcome]:
    """Every rule on each phase it judges of one workload's runs: plain outcome dicts."""
    out: list[RuleOutcome] = []
    for phase in PHASES:
        arms = {arm: [r for r in runs if r["arm"] == arm] for arm in ("A", "B")}
        if not all(r["phases"][phase]["tokens"] for r in runs):
            continue  # the workload ran no token of this phase
        a, b = (figures(arms[x], phase, lossy[x]) for x in ("A", "B"))
        out += [_outcome(workload, phase, rule.check(a, b)) for rule in rules
                if phase in rule.phases]
    return out


def _outcome(workload: str, phase: str, o: Outcome) -> RuleOutcome:
    return {"workload": workload, "phase": phase, "rule": o.rule, "status": o.status,
            "reason": o.reason, "arm": o.arm}


def verdict(name: str, outcomes: list[RuleOutcome], workloads: list[str]) -> str:
    """Names the first rule that rejects an arm, else says every rule held."""
    rejected = [o for o in outcomes if o["status"] == REJECT]
    if rejected:
        o = rejected[0]
        more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
        return (f"reject {o['arm']}: rule {o['rule']} fails on {o['workload']} "
                f"({o['phase']}): {o['reason']}{more}")
    return f"no rule of {name} rejects B on {', '.join(workloads)}"
