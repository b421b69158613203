"""The checks a trial must pass before its figures count, as `tuner ab` holds its arms.

A guard takes the trial's settings, its measured figures and the figures of the baseline
it was paired with, and returns None when the trial passes or the reason it is rejected.
A rejected trial stays in the study, failed, with that reason; it never reaches the
Pareto front.

Today every arm must give the baseline's output exactly (the output hash over the
measured span): with `moce_bonus = 0` the engine is bit-identical whatever the cache,
prefetch and I/O knobs do, so any difference is a bug or a lossy knob. A quality gate
(KL divergence and top-1 agreement against the exact output) slots in as
`guards_for(quality=...)`: exact arms then keep the identity check, lossy arms take the
gate instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Guard = Callable[[Any, dict, dict], str | None]  # (settings, figures, baseline) -> reason


def exact(settings: Any) -> bool:
    """Whether the engine must give bit-identical output with these settings."""
    return settings.moce_bonus == 0 and settings.moce_bonus_r1 == 0


def output_identity(settings: Any, figures: dict, baseline: dict) -> str | None:
    if figures["output_hash"] == baseline["output_hash"]:
        return None
    how = ("an exact arm (moce_bonus = 0) must give the baseline's output bit for bit"
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


def guards_for(quality: Guard | None = None) -> list[Guard]:
    """Output identity for every arm; with a quality gate, identity for exact arms and the
    gate for lossy ones."""
    if quality is None:
        return [output_identity]
    return [only(exact, output_identity), only(lambda s: not exact(s), quality)]


def rejection(guards: list[Guard], settings: Any, figures: dict, baseline: dict
              ) -> str | None:
    """The first failed guard's reason, or None."""
    for guard in guards:
        reason = guard(settings, figures, baseline)
        if reason:
            return reason
    return None
