"""How a measurement is judged, by name: what an A/B or a tune request may ask for, checked
before anything runs. The rooms that judge read the same names: the rule sets are
tuner.measure.rules', the objectives tuner.tune's."""

from __future__ import annotations

RULESETS = ("seed000",)  # the rule sets an A/B may name (tuner.measure.rules holds the rules)

# The time objectives of a tune: the figure scored and how the study names it. Each is
# scored in % of the paired baseline's ms/token; bytes per token is always the second
# objective.
OBJECTIVES = {
    "ms": ("ms_per_token", "ms/token vs baseline (%)"),
    "stall": ("stall_ms_per_token", "exposed stall vs baseline (% of its ms/token)"),
}
DEFAULT_OBJECTIVE = "ms"


def limit_problems(max_kl: float | None = None, min_agreement: float | None = None
                   ) -> dict[str, str]:
    """Each quality limit out of its range -> why; a limit that is None is off."""
    problems = {}
    if max_kl is not None and not max_kl >= 0:
        problems["max_kl"] = f"max_kl = {max_kl}: must be >= 0 (nats per token)"
    if min_agreement is not None and not 0 <= min_agreement <= 100:
        problems["min_agreement"] = (f"min_agreement = {min_agreement}: must be from 0 to 100 "
                                     "(%)")
    return problems
