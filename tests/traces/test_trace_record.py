"""Recording from the engine, and trace statistics checked against the engine's probe."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from tuner.engine.weights import synth
from tuner.traces.record import record
from tuner.traces.replay import replay
from tuner.traces.stats import trace_stats
from tuner.vocabulary.trace_format import Trace


def test_record_writes_the_engines_routings_and_logits(tiny_config):
    trace, snap = record(tiny_config, 40, logits=True)
    assert trace.experts.shape == (40, 4, 4) and trace.logits.shape == (40, 4, 16)
    assert trace.stale.shape == (40, 4, 16)
    trace.check()
    # At bonus 0 the router picks the raw top-k of the logits it saw, in rank order.
    top = torch.topk(torch.from_numpy(trace.logits), 4).indices.numpy()
    assert np.array_equal(top, trace.experts)
    # The stale gate's scores: none at layer 0; elsewhere they score as the engine's probe.
    assert np.isnan(trace.stale[:, 0]).all() and not np.isnan(trace.stale[:, 1:]).any()
    assert trace_stats(trace)["totals"]["stale_pct"] == snap["totals"]["stale_pct"]
    m = trace.meta
    assert (m["model"], m["num_experts"], m["arena_slots"], m["policy"]) == (
        synth.TINY.name, 16, 16, "lru")
    assert m["expert_bytes"] == snap["model"]["expert_bytes"] > 0
    assert m["settings"]["expert_cache"] == 16 and "moce_bonus" not in m["settings"]
    assert snap["tokens"] == 40


def test_prev_token_overlap_matches_the_engines_probe(tiny_config):
    """Sequence starts are recorded, so the trace scores prev-token exactly as the engine's
    probe did (a sequence's first token unscored)."""
    trace, snap = record(replace(tiny_config, context=24), 100)
    assert len(trace.sequence_starts) > 2 and trace.sequence_starts[0] == 0
    stats = trace_stats(trace)
    for ours, live in zip(stats["layers"], snap["layers"]):
        assert (ours["prev_pct"], ours["prev_whole_pct"]) == (live["prev_pct"],
                                                              live["prev_whole_pct"])
    assert stats["totals"]["prev_pct"] == snap["totals"]["prev_pct"]


def test_stats_by_hand():
    # Layer 0 routes {0, 1} four times then {2, 3}; layer 1 alternates; a new sequence at 3.
    ids = [[[0, 1], [0, 1]], [[0, 1], [2, 3]], [[0, 1], [0, 1]], [[0, 1], [2, 3]],
           [[2, 3], [0, 1]]]
    trace = Trace(np.array(ids, dtype=np.int32),
                  {"num_experts": 10, "sequence_starts": [0, 3], "model": "hand"})
    stats = trace_stats(trace, sizes=[2, 4])
    l0, l1 = stats["layers"]
    assert l0["prev_pct"] == 66.67 and l0["prev_whole_pct"] == 66.67  # t=1, 2 whole; t=4 none
    assert l1["prev_pct"] == 0.0 and l1["prev_whole_pct"] == 0.0
    # counts 4, 4, 1, 1 and six zeros; a random other routing shares 24 / (4 * 10) of them
    assert l0["top10_share"] == 40.0 and l0["max_over_mean"] == 4.0  # expert 0: 4 of 10
    assert (l0["gini"], l0["entropy"], l0["unrouted"]) == (0.72, 0.518, 6)
    assert l0["prev_shuffled_pct"] == 60.0
    assert l0["routings"] == 5 and l0["lookups"] == 10
    assert stats["arena_slots"] == [2, 4] and stats["totals"]["unrouted_pct"] == 60.0
    # the two most-routed pairs are layer 0's; the next two, layer 1's
    assert (l0["hit_rate"]["static"], l1["hit_rate"]["static"]) == ([80.0, 80.0], [0.0, 60.0])
    for policy in ("lru", "2q", "opt"):
        run = replay(trace, policy, 4)
        assert [l0["hit_rate"][policy][1], l1["hit_rate"][policy][1]] == [
            round(100 * h / n, 2) for h, n in zip(run.hits, run.lookups)]
    assert "stale_pct" not in l0 and stats["totals"]["stale_pct"] is None
