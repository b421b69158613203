"""The demo generator's routing fails the way real MoE routing fails (DESIGN section 6):
the ranges every recipe is made to land in, checked on the tiny one (the README has the
demo and deep models' figures and the commands that measure them)."""

from __future__ import annotations

from tuner.knobs import Config
from tuner.traces.record import record
from tuner.traces.stats import trace_stats


def test_tiny_models_routing_lands_in_the_ranges_of_real_logs(tiny_model):
    trace, _ = record(Config(model=str(tiny_model), io_workers=2, io_urgent=1), 512,
                      logits=True)
    t = trace_stats(trace)["totals"]  # arena sizes: 12.5, 25, 50, 75 % of the pairs
    lru, opt, pinned = (t["hit_rate"][c] for c in ("lru", "opt", "pin"))
    assert t["top10_share"] <= 25 and t["gini"] <= 0.30 and t["unrouted_pct"] <= 2
    assert 25 <= t["prev_pct"] <= 45 and t["prev_temporal_pp"] >= 8
    assert 80 <= t["stale_pct"] <= 89
    assert 25 <= lru[1] <= 50 and opt[1] - lru[1] >= 15 and opt[2] - lru[2] >= 15
    assert pinned[1] <= 45
