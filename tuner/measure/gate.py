"""Rules an arm of a comparison must pass whatever its speed.

A rule takes an arm's figures (the deterministic counters of its runs: `quality_kl`,
`top1_agreement`, `hit_rate`, ...) and returns why the arm fails, or None. A comparison
applies a list of rules to both arms; an arm that fails any is rejected in the verdict,
however much faster it is. The quality gate is the first: a lossy knob (moce's resident
bonus, drop_cold) may buy speed only within the KL and top-1 agreement the user allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rule = Callable[[dict[str, Any]], str | None]


def quality_gate(figures: dict[str, Any], max_kl: float | None = None,
                 min_agreement: float | None = None) -> tuple[bool, str]:
    """(passed, the reason) for an arm's figures against the quality limits; a limit that
    is None is not checked, a figure that was not measured fails the limit on it."""
    kl, agreement = figures.get("quality_kl"), figures.get("top1_agreement")
    if isinstance(kl, list):  # runs that did not repeat: judged by the worst
        kl = None if None in kl else max(kl)
    if isinstance(agreement, list):
        agreement = None if None in agreement else min(agreement)
    reasons = []
    if max_kl is not None:
        if kl is None:
            reasons.append("no KL measured (quality_every = 0)")
        elif kl > max_kl:
            reasons.append(f"KL {kl:.4g} nats/token > max_kl {max_kl:g}")
    if min_agreement is not None:
        if agreement is None:
            reasons.append("no top-1 agreement measured (quality_every = 0)")
        elif agreement < min_agreement:
            reasons.append(f"top-1 agreement {agreement} % < min_agreement {min_agreement:g} %")
    if reasons:
        return False, "; ".join(reasons)
    return True, "within the quality gate"


def quality_rules(max_kl: float | None, min_agreement: float | None) -> list[Rule]:
    """The quality gate as a rule for a comparison; no rule when neither limit is set."""
    if max_kl is None and min_agreement is None:
        return []

    def rule(figures: dict[str, Any]) -> str | None:
        passed, why = quality_gate(figures, max_kl, min_agreement)
        return None if passed else why

    return [rule]


def check_limits(max_kl: float | None, min_agreement: float | None) -> None:
    """Raises ValueError naming a limit out of its range."""
    if max_kl is not None and not max_kl >= 0:
        raise ValueError(f"max_kl = {max_kl}: must be >= 0 (nats per token)")
    if min_agreement is not None and not 0 <= min_agreement <= 100:
        raise ValueError(f"min_agreement = {min_agreement}: must be from 0 to 100 (%)")


def apply_rules(result: dict[str, Any], rules: list[Rule]) -> None:
    """Marks each arm's failures (`rejected`: the reasons) and puts them first in the
    verdict."""
    rejected = []
    for arm in ("A", "B"):
        figures = result["arms"][arm]
        figures["rejected"] = [why for rule in rules if (why := rule(figures)) is not None]
        if figures["rejected"]:
            rejected.append(f"{arm} rejected, whatever its speed: "
                            + "; ".join(figures["rejected"]))
    result["passed"] = not rejected
    if rejected:
        result["verdict"] = "; ".join(rejected) + f". Timing: {result['verdict']}"
