"""What a trace's traffic looks like, per layer and overall, in the figures that decide
whether a cache decision transfers to a real model:

* popularity: the top 10 % of experts' share of routings, Gini, normalised entropy, and
  the layer-expert pairs never routed;
* temporal locality: the prev-token predictor's slot overlap next to its token-shuffled
  baseline (the overlap popularity alone gives), and the stale-gate's when the trace has
  its scores;
* cache headroom: LRU, two-hit LRU and Belady's bound replayed, and the most-routed pairs
  pinned (`static`, an oracle that knows the whole trace's counts), at 12.5, 25, 50 and
  75 % of the layer-expert pairs (modes.py).

The same figures for the embedded model's traffic and for an imported one, so an operator
can compare the two. Overlaps are scored as the engine's probe scores them: a sequence's
first token (and layer 0 for the stale gate) unscored, never wrong. Per-layer popularity
figures are averaged over the layers; overlaps and hit rates are pooled.
"""

from __future__ import annotations

import numpy as np

from tuner.traces.replay import pct, replay_rows
from tuner.vocabulary.stats import entropy, gini, skew
from tuner.vocabulary.trace_format import Trace

ARENA_SHARES = (0.125, 0.25, 0.5, 0.75)  # of the trace's layer-expert pairs
CACHES = ("lru", "2q", "opt", "static")


def arena_sizes(trace: Trace) -> list[int]:
    pairs = trace.layers * trace.num_experts
    return [max(1, round(pairs * s)) for s in ARENA_SHARES]


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


def shuffled_named(counts: np.ndarray, routings: int, routed: int) -> float:
    """Experts the previous token would name, on average, if the layer's tokens were in a
    random order: for a routing, a random other routing of the layer shares
    sum(c (c - 1)) / (n (n - 1)) experts; times the `routed` experts scored."""
    n, lookups = routings, counts.sum()
    if n < 2 or not lookups:
        return 0.0
    return float((counts * (counts - 1)).sum()) / ((n - 1) * lookups) * routed


def stale_overlap(trace: Trace, layer: int) -> tuple[int, int, int, int]:
    """As prev_overlap, for the stale gate's top-k of the trace's `stale` scores."""
    scored = routed = named = whole = 0
    if layer == 0:
        return 0, 0, 0, 0
    for ids, scores in zip(trace.experts[:, layer], trace.stale[:, layer]):
        now = ids[ids >= 0]
        if not len(now) or np.isnan(scores).any():
            continue
        guess = np.argsort(-scores, kind="stable")[: len(now)]
        hit = len(np.intersect1d(now, guess))
        scored, routed, named = scored + 1, routed + len(now), named + hit
        whole += hit == len(now)
    return scored, routed, named, whole


def trace_stats(trace: Trace, sizes: list[int] | None = None,
                caches: tuple[str, ...] = CACHES) -> dict:
    """The figures above; `caches`: the replay modes of the cache figures (none: the shape
    figures alone, which cost no replay)."""
    rows = trace.rows()
    L, E = trace.layers, trace.num_experts
    sizes = sorted(set(sizes)) if sizes else arena_sizes(trace)
    ex = trace.experts
    counts = np.stack([np.bincount(ex[:, l][ex[:, l] >= 0], minlength=E) for l in range(L)])
    lookups = counts.sum(axis=1)  # [L]
    starts = trace.sequence_starts
    hits = {p: np.stack([replay_rows(rows, L, p, n, starts=starts).hits for n in sizes])
            for p in caches}
    starts = set(starts)
    prev_sums, stale_sums, shuffled = np.zeros(4, dtype=np.int64), np.zeros(4, np.int64), 0.0
    layers = []
    for l in range(L):
        routings = int((ex[:, l] >= 0).any(axis=1).sum())
        share, ratio = skew(counts[l])
        prev = prev_overlap(rows, l, starts)
        base = shuffled_named(counts[l], routings, prev[1])
        prev_sums += prev
        shuffled += base
        row = {
            "layer": l, "routings": routings, "lookups": int(lookups[l]),
            "top10_share": share, "max_over_mean": ratio, "gini": gini(counts[l]),
            "entropy": entropy(counts[l]), "unrouted": int((counts[l] == 0).sum()),
            "prev_pct": pct(prev[2], prev[1]), "prev_whole_pct": pct(prev[3], prev[0]),
            "prev_shuffled_pct": pct(base, prev[1]),
        }
        if trace.stale is not None:
            stale = stale_overlap(trace, l)
            stale_sums += stale
            row.update(stale_pct=pct(stale[2], stale[1]), stale_whole_pct=pct(stale[3], stale[0]))
        row["hit_rate"] = {p: [pct(h[l], lookups[l]) for h in hits[p]] for p in caches}
        layers.append(row)

    def mean(key: str) -> float:
        return round(float(np.mean([r[key] for r in layers])), 3)

    totals = {
        "lookups": int(lookups.sum()),
        "top10_share": mean("top10_share"), "gini": mean("gini"), "entropy": mean("entropy"),
        "unrouted": int((counts == 0).sum()), "unrouted_pct": pct((counts == 0).sum(), L * E),
        "prev_pct": pct(prev_sums[2], prev_sums[1]),
        "prev_whole_pct": pct(prev_sums[3], prev_sums[0]),
        "prev_shuffled_pct": pct(shuffled, prev_sums[1]),
        "prev_temporal_pp": (round(100 * (prev_sums[2] - shuffled) / prev_sums[1], 2)
                             if prev_sums[1] else None),
        "stale_pct": pct(stale_sums[2], stale_sums[1]) if trace.stale is not None else None,
        "stale_whole_pct": (pct(stale_sums[3], stale_sums[0]) if trace.stale is not None
                            else None),
        "hit_rate": {p: [pct(h.sum(), lookups.sum()) for h in hits[p]] for p in caches},
    }
    return {"model": trace.meta.get("model"), "source": trace.meta.get("source"),
            "tokens": trace.tokens, "layers_count": L, "num_experts": E,
            "top_k": trace.top_k, "sequences": len(starts), "arena_slots": sizes,
            "arena_pct": [pct(n, L * E) for n in sizes], "layers": layers, "totals": totals}
