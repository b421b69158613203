"""Cache policies: the order in which arena slots become eviction victims.

A policy only orders slots; the slot map decides which slots are eligible (never pinned,
never with I/O in flight, never in limbo). A new policy is one class registered in
`POLICIES`: the `cache_policy` knob takes its choices, and its help the classes' `summary`,
from there.

`victims()` walks the live order without copying it: the caller stops at the first eligible
slot and changes the order only after it stopped walking.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator


class LRU:
    """Least recently claimed first. Speculative inserts count as recent too."""

    name = "lru"
    summary = "least recently claimed first"

    def __init__(self) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()  # oldest first

    def insert(self, slot: int, speculative: bool) -> None:
        self._order[slot] = None
        self._order.move_to_end(slot)

    def claim(self, slot: int) -> None:
        self._order.move_to_end(slot)

    def touch(self, slot: int) -> None:
        """A speculative hit (only called with prefetch_touch on)."""
        self._order.move_to_end(slot)

    def remove(self, slot: int) -> None:
        self._order.pop(slot, None)

    def victims(self) -> Iterator[int]:
        return iter(self._order)


class TwoHit(LRU):
    """Bounded two-hit protected LRU (seed 000 section 6; not full 2Q, LIRS or S3-FIFO).

    Fresh slots start cold (reuse 0); the first real claim sets reuse 1 and leaves the slot
    where it is; the second sets reuse 2 and promotes it. Victims are cold slots first, in
    LRU order, then any slot. Speculation never counts as a claim and is inserted at the
    victim end.
    """

    name = "2q"
    summary = "two-hit protected LRU: fresh slots start cold, the second claim promotes"

    def __init__(self) -> None:
        super().__init__()
        self._reuse: dict[int, int] = {}
        # the promoted slots (reuse 2), oldest first; `_order` holds the cold ones, so a
        # victim is found without walking past every promoted slot
        self._hot: OrderedDict[int, None] = OrderedDict()

    def insert(self, slot: int, speculative: bool) -> None:
        self._reuse[slot] = 0
        self._hot.pop(slot, None)
        self._order[slot] = None
        self._order.move_to_end(slot, last=not speculative)

    def claim(self, slot: int) -> None:
        reuse = min(self._reuse.get(slot, 0) + 1, 2)
        self._reuse[slot] = reuse
        if reuse == 2:
            self._order.pop(slot, None)
            self._hot[slot] = None
            self._hot.move_to_end(slot)

    def touch(self, slot: int) -> None:
        if slot in self._hot:
            self._hot.move_to_end(slot)
        else:
            super().touch(slot)

    def remove(self, slot: int) -> None:
        super().remove(slot)
        self._hot.pop(slot, None)
        self._reuse.pop(slot, None)

    def victims(self) -> Iterator[int]:
        yield from self._order
        yield from self._hot


POLICIES = {cls.name: cls for cls in (LRU, TwoHit)}
