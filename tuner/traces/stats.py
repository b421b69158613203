"""What a trace's traffic looks like, per layer: expert popularity skew, token-to-token
overlap (the prev-token predictor's score) and the LRU hit curve over a few arena sizes.

The same figures for the embedded model's traffic and for an imported one, so an operator
can compare the two. The overlap is scored as the engine's probe scores it: the first
token of a sequence is unscored, never wrong.
"""

from __future__ import annotations

import numpy as np

from tuner.engine.stats import skew
from tuner.engine.trace_format import Trace
from tuner.traces.replay import pct, replay_rows

ARENA_SHARES = (0.05, 0.1, 0.2, 0.4)  # of the trace's layer-expert pairs


def default_sizes(trace: Trace) -> list[int]:
    pairs = trace.layers * trace.num_experts
    return sorted({max(trace.top_k, round(pairs * s)) for s in ARENA_SHARES})


def prev_overlap(rows: list[list[list[int]]], layer: int, starts: set[int]
                 ) -> tuple[int, int, int, int]:
    """(routings scored, routed experts scored, experts the previous token's routing named,
    routings it named whole) at one layer."""
    scored = routed = named = whole = 0
    for t in range(1, len(rows)):
        now, prev = rows[t][layer], rows[t - 1][layer]
        if t in starts or not now or not prev:
            continue
        hit = len(set(now).intersection(prev))
        scored, routed, named = scored + 1, routed + len(now), named + hit
        whole += hit == len(now)
    return scored, routed, named, whole


def trace_stats(trace: Trace, sizes: list[int] | None = None) -> dict:
    rows = trace.rows()
    sizes = sorted(set(sizes)) if sizes else default_sizes(trace)
    curves = [replay_rows(rows, trace.layers, "lru", n) for n in sizes]
    starts = set(trace.sequence_starts)
    ex = trace.experts
    layers, sums = [], np.zeros(4, dtype=np.int64)
    for l in range(trace.layers):
        ids = ex[:, l][ex[:, l] >= 0]
        share, ratio = skew(np.bincount(ids, minlength=trace.num_experts))
        scored, routed, named, whole = counts = prev_overlap(rows, l, starts)
        sums += counts
        layers.append({
            "layer": l, "routings": int((ex[:, l] >= 0).any(axis=1).sum()),
            "lookups": int(ids.size), "top10_share": share, "max_over_mean": ratio,
            "prev_pct": pct(named, routed), "prev_whole_pct": pct(whole, scored),
            "lru_hit_rate": [pct(c.hits[l], c.lookups[l]) for c in curves],
        })
    scored, routed, named, whole = sums
    totals = {
        "lookups": int((ex >= 0).sum()),
        "top10_share": round(float(np.mean([r["top10_share"] for r in layers])), 2),
        "prev_pct": pct(named, routed), "prev_whole_pct": pct(whole, scored),
        "lru_hit_rate": [pct(c.hits.sum(), c.lookups.sum()) for c in curves],
    }
    return {"model": trace.meta.get("model"), "source": trace.meta.get("source"),
            "tokens": trace.tokens, "layers_count": trace.layers,
            "num_experts": trace.num_experts, "top_k": trace.top_k, "lru_sizes": sizes,
            "layers": layers, "totals": totals}
