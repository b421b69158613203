"""Belady's MIN as a cache policy: evict the resident whose next use is farthest away.

It needs the future, so it exists only for replay: it reads every key's use times from
the trace and the replay sets `now` before each layer's claim. It orders victims like any
policy in `tuner.vocabulary.policies`, and the slot map picks among them exactly as for LRU
and 2Q (pinned slots are skipped), so the bound is measured on the same victim path.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterator

from tuner.vocabulary.slots import Key


class Belady:
    name = "opt"

    def __init__(self, keys: list[Key | None], uses: dict[Key, list[int]]):
        self._keys = keys  # the slot map's slot -> key list, read when a slot is claimed
        self._uses = {key: deque(times) for key, times in uses.items()}  # ascending steps
        self._next: dict[int, float] = {}  # slot -> step of its key's next use
        # (-next use, slot), farthest first and ties by slot, so replay is repeatable; kept
        # sorted as next uses change rather than sorted at every eviction
        self._order: list[tuple[float, int]] = []
        self.now = -1  # the step being claimed

    def _next_use(self, slot: int) -> float:
        times = self._uses[self._keys[slot]]
        while times and times[0] <= self.now:
            times.popleft()
        return times[0] if times else math.inf

    def _update(self, slot: int) -> None:
        self.remove(slot)
        self._next[slot] = nxt = self._next_use(slot)
        insort(self._order, (-nxt, slot))

    def insert(self, slot: int, speculative: bool) -> None:
        self._update(slot)

    def claim(self, slot: int) -> None:
        self._update(slot)

    def remove(self, slot: int) -> None:
        nxt = self._next.pop(slot, None)
        if nxt is not None:
            del self._order[bisect_left(self._order, (-nxt, slot))]

    def victims(self) -> Iterator[int]:
        return (slot for _, slot in self._order)


def future_uses(rows: list[list[list[int]]]) -> dict[Key, list[int]]:
    """(layer, expert) -> the steps that route it, a step being token * layers + layer."""
    uses: dict[Key, list[int]] = {}
    step = 0
    for token in rows:
        for layer, ids in enumerate(token):
            for e in ids:
                uses.setdefault((layer, e), []).append(step)
            step += 1
    return uses
