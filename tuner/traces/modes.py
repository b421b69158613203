"""Replay modes: what keeps experts in the arena while a trace replays, registered by name.

* `lru`, `2q`: the engine's cache policies, one mode each from their registry
  (tuner.vocabulary.policies), every routing claimed through the slot map exactly as the
  live engine claims it.
* `opt`: Belady's MIN (belady.py), the bound no policy without read-ahead beats.
* `static`: the most-routed pairs of the whole trace pinned for all of it (an oracle of
  the counts); a routed expert outside them is read and not kept.
* `static_half`: the most-routed pairs of the trace's first half pinned, replayed on the
  whole trace: pinning decided from history, as a deployment would.
* `lru+prev`, `lru+oracle`: LRU with the engine's read-ahead: while layer l runs, up to
  `prefetch_max` (the knob's default) of layer l+1's predicted misses are placed into
  victim slots as speculation, retired when unclaimed and released one layer later, as the
  engine's speculator does. `prev` predicts the previous token's routing of that layer
  (nothing at a sequence's first token), `oracle` the routing itself: the most read-ahead
  can do. Layer 0 is never read ahead (no layer runs before it).

A lookup is a hit when the arena serves it: resident, or read ahead and claimed (the live
engine counts the latter as useful prefetch, not as hits). Read-ahead costs reads: each
replay counts the experts it read ahead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tuner.knobs import BY_NAME
from tuner.traces.belady import Belady, future_uses
from tuner.vocabulary.policies import POLICIES
from tuner.vocabulary.slots import CLAIMED_SPEC, HIT, SlotMap

Rows = list[list[list[int]]]  # [token][layer] -> expert ids in rank order (Trace.rows)
READ_AHEAD_LIMIT = BY_NAME["prefetch_max"].default  # predicted misses read ahead per layer


class Served(NamedTuple):
    lookups: np.ndarray  # [L]
    hits: np.ndarray  # [L] lookups the arena served (resident, or read ahead and claimed)
    read_ahead: np.ndarray | None  # [L] experts read ahead, None for a mode that reads none


Run = Callable[[Rows, int, int, "list[int] | None", int, list[int]], Served]


@dataclass(frozen=True)
class Mode:
    name: str
    help: str
    # (rows, layers, slots, per-layer quotas or None, first counted token, sequence starts)
    run: Run
    reads_ahead: bool = False  # reads layer l+1's experts while layer l runs


def _counts(rows: Rows, layers: int, first: int = 0, last: int | None = None
            ) -> list[dict[int, int]]:
    """Per layer, expert -> routings among tokens first..last-1."""
    counts: list[dict[int, int]] = [{} for _ in range(layers)]
    for token in rows[first:last]:
        for layer, ids in enumerate(token):
            for e in ids:
                counts[layer][e] = counts[layer].get(e, 0) + 1
    return counts


def _pinned(counts: list[dict[int, int]], slots: int, quotas: list[int] | None
            ) -> set[tuple[int, int]]:
    """The most-routed pairs: `slots` of them over all layers, or each layer's quota of
    its own. Ties by layer, then expert, so the set is repeatable."""
    ranked = [(-n, layer, e) for layer, c in enumerate(counts) for e, n in c.items()]
    ranked.sort()
    if quotas is None:
        return {(layer, e) for _, layer, e in ranked[:slots]}
    taken = [0] * len(counts)
    pinned = set()
    for _, layer, e in ranked:
        if taken[layer] < quotas[layer]:
            taken[layer] += 1
            pinned.add((layer, e))
    return pinned


def _static(history: Callable[[Rows], int]):
    """A pinning mode whose pinned pairs are counted over the first `history(rows)` tokens."""

    def run(rows: Rows, layers: int, slots: int, quotas: list[int] | None,
            counted_from: int, starts: list[int]) -> Served:
        pinned = _pinned(_counts(rows, layers, 0, history(rows)), slots, quotas)
        lookups, hits = np.zeros(layers, np.int64), np.zeros(layers, np.int64)
        for token in rows[counted_from:]:
            for layer, ids in enumerate(token):
                lookups[layer] += len(ids)
                hits[layer] += sum((layer, e) in pinned for e in ids)
        return Served(lookups, hits, None)

    return run


Predictor = Callable[[int, int], list[int]]  # (token, layer) -> the guessed experts


def _claimed(rows: Rows, layers: int, arena: SlotMap, counted_from: int,
             oracle: Belady | None = None, predict: Predictor | None = None) -> Served:
    """Every routing claimed through `arena`, tokens then layers in order; with `predict`,
    the next layer's guess read ahead after each claim, as the engine's speculator does."""
    lookups, hits = np.zeros(layers, np.int64), np.zeros(layers, np.int64)
    ahead = np.zeros(layers, np.int64)
    pending: list[list[int]] = [[] for _ in range(layers)]  # speculation by target layer
    limbo: list[int] = []  # retired at the layer before: released after this one
    step = 0
    for t, token in enumerate(rows):
        counted = t >= counted_from
        for layer, ids in enumerate(token):
            if oracle is not None:
                oracle.now = step
            plan = arena.claim_layer(layer, ids)
            arena.evicted.clear()
            if counted:
                lookups[layer] += len(ids)
                hits[layer] += sum(kind in (HIT, CLAIMED_SPEC) for kind, _ in plan)
            if predict is not None and layer + 1 < layers:
                placed = arena.read_ahead(layer + 1, predict(t, layer + 1), READ_AHEAD_LIMIT)
                pending[layer + 1] += [slot for slot, _ in placed]
                ahead[layer + 1] += len(placed) if counted else 0
            claimed = {slot for kind, slot in plan if kind == CLAIMED_SPEC}
            retired = [slot for slot in pending[layer] if slot not in claimed]
            for slot in retired:
                arena.retire(slot)
            pending[layer] = []
            arena.pinned.clear()
            arena.release(limbo)
            limbo = retired
            step += 1
    return Served(lookups, hits, ahead if predict is not None else None)


def _policy(name: str):
    def run(rows: Rows, layers: int, slots: int, quotas: list[int] | None,
            counted_from: int, starts: list[int]) -> Served:
        return _claimed(rows, layers, SlotMap(slots, name, quotas), counted_from)

    return run


def _opt(rows: Rows, layers: int, slots: int, quotas: list[int] | None, counted_from: int,
         starts: list[int]) -> Served:
    arena = SlotMap(slots, quotas=quotas)
    # The slot map builds online policies by name; the offline one needs the trace, so it
    # is handed in here, before any slot is used.
    arena.policy = oracle = Belady(arena.key, future_uses(rows))
    return _claimed(rows, layers, arena, counted_from, oracle=oracle)


def _prev(rows: Rows, starts: list[int]) -> Predictor:
    first = set(starts)
    return lambda t, layer: [] if t == 0 or t in first else rows[t - 1][layer]


def _exact(rows: Rows, starts: list[int]) -> Predictor:
    return lambda t, layer: rows[t][layer]


def _read_ahead(predictor: Callable[[Rows, list[int]], Predictor]):
    def run(rows: Rows, layers: int, slots: int, quotas: list[int] | None,
            counted_from: int, starts: list[int]) -> Served:
        return _claimed(rows, layers, SlotMap(slots, "lru", quotas), counted_from,
                        predict=predictor(rows, starts))

    return run


MODES = {m.name: m for m in (
    *(Mode(name, f"the engine's cache policy: {policy.summary}", _policy(name))
      for name, policy in POLICIES.items()),
    Mode("opt", "Belady's MIN: evicts the resident used farthest in the future; no policy "
         "without read-ahead beats it", _opt),
    Mode("static", "the most-routed pairs of the whole trace pinned (an oracle of the "
         "counts)", _static(len)),
    Mode("static_half", "the most-routed pairs of the first half pinned, on the whole trace",
         _static(lambda rows: len(rows) // 2)),
    Mode("lru+prev", "LRU reading ahead the previous token's routing of the next layer",
         _read_ahead(_prev), reads_ahead=True),
    Mode("lru+oracle", "LRU reading ahead the next layer's exact routing (the most "
         "read-ahead can do)", _read_ahead(_exact), reads_ahead=True),
)}
