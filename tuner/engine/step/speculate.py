"""Speculation and limbo (seed 000, `at_layer` and `after_layer`).

While layer l runs, the predicted misses of layer l+1 are read ahead into victim slots
(state SPEC: invisible to the router, never a victim). Layer l+1's router claims some of
them (timely when the read had completed, late when it was still in flight); the rest are
retired after layer l+1 into limbo, with their queued pieces cancelled, and released one
layer later, after their running reads ended. Release points are fixed, so read timing
never leaks into residency; each speculation is counted once, in exactly one class.
"""

from __future__ import annotations

from tuner.config import Config
from tuner.engine.memory.arena import Arena, Fetch
from tuner.vocabulary.counters import C, Counters


class Speculator:
    def __init__(self, arena: Arena, counters: Counters, layers: int):
        self.arena, self.counters = arena, counters
        self.pending: list[list[Fetch]] = [[] for _ in range(layers)]  # by target layer
        self._by_slot: dict[int, Fetch] = {}
        self.limbo_new: list[Fetch] = []
        self.limbo_old: list[Fetch] = []

    def issue(self, cfg: Config, target: int, guess: list[int]) -> None:
        """Reads ahead the guessed experts of layer `target` that are not in the arena,
        up to `prefetch_max`, each into the policy's first eligible slot of another layer
        (the slot map chooses them, as for a replay)."""
        slots, add = self.arena.slots, self.counters.add
        wanted = []
        for slot, evicted in slots.read_ahead(target, guess, cfg.prefetch_max,
                                              cfg.prefetch_touch):
            if evicted is not None:
                add(evicted[0], C.evictions)
            key = slots.key[slot]
            assert key is not None  # read_ahead has just placed the guess there
            wanted.append((key, slot))
        for fetch in self.arena.fetch_all(wanted, speculative=True) if wanted else ():
            self.pending[target].append(fetch)
            self._by_slot[fetch.row] = fetch
            add(target, C.pf_issued)

    def claim(self, layer: int, slot: int) -> Fetch:
        """The speculation in `slot`, claimed by layer `layer`'s router."""
        fetch = self._by_slot.pop(slot)
        self.pending[layer].remove(fetch)
        return fetch

    def arrived(self, layer: int) -> None:
        """Uploads layer `layer`'s speculation whose reads are complete (a reader with no
        threads of its own first ends and starts reads: once a layer is enough)."""
        self.arena.pool.poll()
        if self.pending[layer]:
            self.arena.upload_arrived(self.pending[layer])

    def retire(self, layer: int) -> None:
        """Unclaimed speculation for this layer: queued pieces cancelled, slot to limbo."""
        for fetch in self.pending[layer]:
            self.arena.pool.cancel(fetch.read)
            self.arena.slots.retire(fetch.row)
            del self._by_slot[fetch.row]
            self.limbo_new.append(fetch)
        self.pending[layer] = []

    def release_limbo(self, layer: int) -> None:
        """Releases the previous generation of limbo, then rotates (after_layer)."""
        if not (self.limbo_old or self.limbo_new):  # nothing to release or rotate
            return
        add, pool = self.counters.add, self.arena.pool
        for fetch in self.limbo_old:
            add(layer, C.stall_ms, 1000 * pool.wait(fetch.read))
            target = fetch.key[0]
            done, cancelled, _ = fetch.read.counts()
            cls = C.pf_cancelled if done == 0 else C.pf_partial if cancelled else C.pf_unused
            add(target, cls)
            add(target, C.bytes_spec, fetch.read.bytes_read)
            self.arena.drop(fetch)
        self.arena.slots.release([f.row for f in self.limbo_old])
        self.limbo_old, self.limbo_new = self.limbo_new, []

    def drain(self) -> None:
        """Settles all speculation (before a rebuild or at the end of a run)."""
        last = len(self.pending) - 1
        for layer in range(len(self.pending)):
            self.retire(layer)
        self.release_limbo(last)
        self.release_limbo(last)
