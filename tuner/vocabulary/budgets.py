"""Per-layer arena budgets from hit curves (seed 000 section 8.5).

With per-layer quotas each layer is a cache of its own (see `slots.py`), so the hits a
layer gets at quota q depend on its own routings only: `layer_hits` replays them at one
quota exactly as the slot map claims them, and `hit_curves` at every quota. `allocate`
then shares an arena of N slots so that the sum over layers of value(layer, quota) is
largest, value being hits or the stall those hits save. LRU hit curves are not concave,
so taking slots greedily by marginal gain can end below an even split; a dynamic
programme over layers finds the best sharing outright, and an even split is one of the
sharings it weighs, so on the curves it replays it never does worse.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from tuner.vocabulary.slots import QuotaError

# What a layer's hit is worth when the arena is shared: one hit, or the stall of a miss
# there (a request and `tuner budgets --weights` name one).
WEIGHTS = ("hits", "stall")


def layer_hits(routings: list[list[int]], quota: int) -> int:
    """Hits of one layer's routings (expert ids in rank order) in an LRU cache of `quota`
    slots, claimed as `SlotMap.claim_layer` claims them: the residents first, then each
    miss in rank order takes the least recently used slot this routing has not claimed,
    or none (a bypass) when it has claimed them all."""
    cache: OrderedDict[int, None] = OrderedDict()  # least recently used first
    hits = 0
    for ids in routings:
        misses = []
        for e in ids:
            if e in cache:
                cache.move_to_end(e)
                hits += 1
            else:
                misses.append(e)
        claimed = len(ids) - len(misses)
        for e in misses:
            if len(cache) >= quota:
                if claimed >= quota:
                    continue
                cache.popitem(last=False)
            cache[e] = None
            claimed += 1
    return hits


def hit_curves(per_layer: list[list[list[int]]], max_quota: int) -> np.ndarray:
    """[L, max_quota + 1]: each layer's hits at quotas 0..max_quota. Past the number of
    experts a layer routes, nothing is evicted, so the curve stays flat from there."""
    curves = np.zeros((len(per_layer), max_quota + 1), dtype=np.int64)
    for l, routings in enumerate(per_layer):
        distinct = len({e for ids in routings for e in ids})
        for q in range(min(distinct, max_quota) + 1):
            curves[l, q] = layer_hits(routings, q)
        curves[l, distinct + 1:] = curves[l, min(distinct, max_quota)]
    return curves


def by_layer(rows: list[list[list[int]]], layers: int) -> list[list[list[int]]]:
    """[token][layer] -> ids (a trace's rows) turned into [layer][token] -> ids."""
    return [[token[l] for token in rows] for l in range(layers)]


def allocate(values: np.ndarray, slots: int) -> list[int]:
    """Quotas, one per layer and summing to `slots`, that maximise the sum of
    values[layer, quota]; values is [L, Q + 1], so no layer takes more than Q slots.
    On ties the later layers take fewer slots."""
    layers, width = values.shape
    if not 0 <= slots <= layers * (width - 1):
        raise QuotaError(f"{slots} slots cannot be shared among {layers} layers of "
                         f"{width - 1} experts: allowed 0..{layers * (width - 1)}")
    best = np.full(slots + 1, -np.inf)  # best[n]: the most value n slots buy so far
    best[0] = 0.0
    choice = np.zeros((layers, slots + 1), dtype=np.int64)
    for l in range(layers):
        new = np.full(slots + 1, -np.inf)
        for q in range(min(width, slots + 1)):
            cand = best[:slots + 1 - q] + values[l, q]
            better = cand > new[q:]
            new[q:][better] = cand[better]
            choice[l, q:][better] = q
        best = new
    quotas, n = [], slots
    for l in reversed(range(layers)):
        quotas.append(int(choice[l, n]))
        n -= quotas[-1]
    return quotas[::-1]


def stall_weights(stall_ms: list[float], misses: list[float]) -> np.ndarray:
    """Stall saved by one more hit, per layer: the layer's measured stall per miss (the
    mean of the other layers' where a layer had no misses). Raises ValueError when no
    layer measured any."""
    per_miss = [s / m if m else None for s, m in zip(stall_ms, misses)]
    known = [w for w in per_miss if w is not None]
    if not known or not sum(known):
        raise ValueError("no layer measured any stall for its misses, so there is no saved "
                         "stall to weigh; use --weights hits")
    mean = sum(known) / len(known)
    return np.array([mean if w is None else w for w in per_miss])


def slot_gains(per_layer: list[list[list[int]]], quotas: list[int]) -> list[int]:
    """Hits each layer's routings would gain with one slot more than `quotas`."""
    return [layer_hits(r, q + 1) - layer_hits(r, q) for r, q in zip(per_layer, quotas)]
