"""Does a decision made on the demo model transfer? The demo model's policy ranking (as
`tuner realism` shows it: measured from the demo model this version makes, shipped in
tuner/traces/data/demo_routing.json; test_realism checks it is this version's) against a
small table of real figures kept here, from public route logs.

Kendall's tau-b is taken size by size over the policies both have (the logs' figures have
no lru+prev, so six of the seven). What the demo reaches is asserted as it stands, so a new
demo model that ranks worse fails here; the docs' results page of the demo model says what
it does not reach and why.
"""

from __future__ import annotations

import pytest
from scipy.stats import kendalltau

from tuner.traces import realism

# Hit % at 15 / 25 / 50 % of each log's layer-expert pairs (realism-reference figures):
# Mixtral-8x7B-Instruct decode (Mario928/speculative-moe), DeepSeek-V2-Lite-Chat prefill
# (ngavhane/moe-beyond), Qwen1.5-MoE-A2.7B decode and prefill (weiran0129/vLLM-MoE-Logger).
REAL = {
    "Mixtral-8x7B decode": {
        "lru": (0.0, 37.4, 55.6), "2q": (0.0, 6.0, 42.2), "opt": (44.2, 60.3, 81.8),
        "static": (20.0, 32.2, 59.0), "static_half": (15.4, 25.3, 51.0),
        "lru+oracle": (96.9, 97.4, 98.4)},
    "DeepSeek-V2-Lite prefill": {
        "lru": (28.1, 45.6, 69.5), "2q": (12.8, 26.3, 51.9), "opt": (58.7, 71.3, 89.0),
        "static": (23.9, 36.2, 62.6), "static_half": (19.2, 30.3, 54.9),
        "lru+oracle": (59.1, 74.3, 91.0)},
    "Qwen1.5-MoE decode": {
        "lru": (17.3, 29.3, 55.4), "2q": (13.4, 25.8, 52.7), "opt": (47.6, 61.1, 82.1),
        "static": (21.4, 33.3, 59.9), "static_half": (19.6, 30.9, 57.3),
        "lru+oracle": (56.3, 66.1, 83.6)},
    "Qwen1.5-MoE prefill": {
        "lru": (22.3, 32.8, 60.0), "2q": (16.1, 30.2, 59.8), "opt": (50.1, 63.8, 84.2),
        "static": (26.0, 39.9, 68.0), "static_half": (25.5, 38.6, 66.9),
        "lru+oracle": (60.2, 68.3, 85.8)},
}
SIZES = (15, 25, 50)  # % of the pairs


def tau(demo: dict[str, list[float]], real: dict[str, tuple], i: int) -> float:
    policies = [p for p in real if p in demo]
    return float(kendalltau([demo[p][i] for p in policies],
                            [real[p][i] for p in policies]).statistic)


@pytest.fixture(scope="module")
def demo() -> dict[str, list[float]]:
    return realism.demo_routing()[0].hit_rate


def test_the_table_here_is_the_shipped_public_figures():
    shipped = {p.name: p.hit_rate for p in realism.public_logs()}
    assert {name: {k: tuple(v) for k, v in rates.items()}
            for name, rates in shipped.items()} == REAL


# tau the demo's ranking reaches against each log at 15 / 25 / 50 % of the pairs. The
# target, 0.8 against every log at every size, is reached on Mixtral everywhere and on
# DeepSeek at 25 and 50 %: only lru+oracle > opt > static > lru > static_half > 2q is within
# 0.8 of all four logs, and the demo has opt above lru+oracle at 15 % and 25 % (its temporal
# reuse, in the decode logs' range, leaves Belady more than the two experts read ahead can
# win back with top-6) and lru above static at 25 and 50 % (the demo model's results page,
# "Routing shape and policy ranking").
REACHED = {"Mixtral-8x7B decode": (0.8, 0.8, 0.8),
           "DeepSeek-V2-Lite prefill": (0.6, 0.8, 0.8),
           "Qwen1.5-MoE decode": (0.8, 0.6, 0.7),
           "Qwen1.5-MoE prefill": (0.8, 0.6, 0.7)}


@pytest.mark.parametrize("log", list(REAL))
def test_the_demos_ranking_agrees_with_real_logs(demo, log):
    got = [round(tau(demo, REAL[log], i), 2) for i in range(len(SIZES))]
    assert all(t >= floor for t, floor in zip(got, REACHED[log])), (log, got)


def test_pinning_against_lru_as_most_real_logs_say(demo):
    """At 15 % of the pairs, where three logs of four pin ahead of LRU, so does the demo; at
    25 % the logs split two and two; at 50 %, where three of four pin ahead, the demo has
    LRU ahead, by less than 2 pp (the target is not reached there)."""
    lead = [demo["static"][i] - demo["lru"][i] for i in range(len(SIZES))]
    votes = [sum(r["static"][i] > r["lru"][i] for r in REAL.values()) for i in range(3)]
    assert votes == [3, 2, 3]
    assert lead[0] > 0 and -2 < lead[2] < 0
