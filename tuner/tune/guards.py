"""The checks a trial must pass before its figures count, as `tuner ab` holds its arms.

A guard takes the trial's settings, its measured figures and the figures of the baseline
it was paired with, and returns None when the trial passes or the reason it is rejected.
A rejected trial stays in the study, failed, with that reason; it never reaches the
Pareto front.

An exact arm (every lossy knob of the knob table at 0: moce_bonus, moce_bonus_r1,
drop_cold) must give the baseline's output exactly (the output hash over the measured
span): the engine is then bit-identical whatever the cache, prefetch and I/O knobs do, so
any difference is a bug. A lossy arm is judged by the quality gate where one is given (KL
divergence and top-1 agreement against the exact output, measured by the quality probe,
`tuner.measure.rules.quality_gate`), and must give the baseline's output too where none is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.knobs import LOSSY, lossy_total
from tuner.measure.rules import quality_gate

Guard = Callable[[Any, dict, dict], str | None]  # (settings, figures, baseline) -> reason


def exact(settings: Any) -> bool:
    """Whether the engine must give bit-identical output with these settings."""
    return not lossy_total(settings)


def output_identity(settings: Any, figures: dict, baseline: dict) -> str | None:
    if figures["output_hash"] == baseline["output_hash"]:
        return None
    how = (f"an exact arm ({', '.join(LOSSY)} all 0) must give the baseline's output bit "
           "for bit"
           if exact(settings) else
           "a lossy arm needs a quality gate, and none is given, so it must give the "
           "baseline's output bit for bit")
    return (f"output differs from the baseline's (hash {figures['output_hash']} against "
            f"{baseline['output_hash']}): {how}")


def only(applies: Callable[[Any], bool], guard: Guard) -> Guard:
    """`guard` for the settings `applies` accepts; the others pass it."""
    def check(settings: Any, figures: dict, baseline: dict) -> str | None:
        return guard(settings, figures, baseline) if applies(settings) else None

    return check


def quality(max_kl: float | None, min_agreement: float | None) -> Guard:
    """The quality gate on a trial's figures (the probe's KL and top-1 agreement)."""
    def check(settings: Any, figures: dict, baseline: dict) -> str | None:
        why = quality_gate(figures.get("quality_kl"), figures.get("top1_agreement"), max_kl,
                           min_agreement)
        return None if why is None else f"quality gate: {why}"

    return check


def guards_for(max_kl: float | None = None, min_agreement: float | None = None
               ) -> list[Guard]:
    """Output identity for every arm; with a quality limit, identity for exact arms and the
    gate for lossy ones."""
    if max_kl is None and min_agreement is None:
        return [output_identity]
    return [only(exact, output_identity),
            only(lambda s: not exact(s), quality(max_kl, min_agreement))]


def rejection(guards: list[Guard], settings: Any, figures: dict, baseline: dict
              ) -> str | None:
    """The first failed guard's reason, or None."""
    for guard in guards:
        reason = guard(settings, figures, baseline)
        if reason:
            return reason
    return None
