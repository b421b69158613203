"""Slot bookkeeping of the arena: which (layer, expert) sits in which slot, and its state.

Pure bookkeeping, no memory and no I/O, so trace replay runs the very same code as the
live engine. States:

* RESIDENT: published; the router sees the expert as resident.
* SPEC: a speculative read targets this slot; invisible to the router, never a victim.
* LIMBO: retired unused speculation waiting for its deterministic release; never a victim.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from typing import NamedTuple

from tuner.engine.policies import POLICIES

FREE, RESIDENT, SPEC, LIMBO = "free", "resident", "spec", "limbo"
HIT, CLAIMED_SPEC, MISS, BYPASS = "hit", "spec", "miss", "bypass"
Key = tuple[int, int]  # (layer, expert)


class Claim(NamedTuple):
    """How one routed expert is served: `kind` hit, spec (speculation the router claimed),
    miss (the slot it is read into; None when another site serves it) or bypass (no slot
    was eligible)."""

    kind: str
    slot: int | None


class SlotMap:
    def __init__(self, n: int, policy: str = "lru"):
        self.n = n
        self.key: list[Key | None] = [None] * n
        self.state: list[str] = [FREE] * n
        self.slot_of: dict[Key, int] = {}
        self.free: deque[int] = deque(range(n))
        self.pinned: set[int] = set()
        self.resident_per_layer: Counter[int] = Counter()
        self.evicted: list[Key] = []  # keys evicted by claim_layer, for the caller to count
        # prefill's prompt-hot set: victims come from outside it first (seed 000 section 3)
        self.protected: set[Key] = set()
        self.hot_fallbacks = 0  # victims taken from the protected set, none being left
        self.policy = POLICIES[policy]()
        # told (key, resident) whenever a key becomes or stops being resident
        self.on_resident: Callable[[Key, bool], None] | None = None

    def set_policy(self, name: str) -> None:
        """Switches policy live; the new one starts from the old victim order, all cold."""
        if name == self.policy.name:
            return
        order = list(self.policy.victims())
        self.policy = POLICIES[name]()
        for slot in dict.fromkeys(order):
            self.policy.insert(slot, speculative=False)

    def find(self, key: Key) -> int | None:
        return self.slot_of.get(key)

    def resident(self, key: Key) -> bool:
        slot = self.slot_of.get(key)
        return slot is not None and self.state[slot] == RESIDENT

    def victim(self, avoid_layer: int | None = None) -> int | None:
        """A free slot, else the policy's first eligible slot, else None. With a protected
        set the search makes two passes: first outside the set, then falling back to it."""
        if self.free:
            return self.free[0]
        for guard in ((self.protected, set()) if self.protected else (set(),)):
            for slot in self.policy.victims():
                if (self.state[slot] == RESIDENT and slot not in self.pinned
                        and (avoid_layer is None or self.key[slot][0] != avoid_layer)
                        and self.key[slot] not in guard):
                    if self.key[slot] in self.protected:
                        self.hot_fallbacks += 1
                    return slot
        return None

    def claim_layer(self, layer: int, experts: list[int], stream: bool = True) -> list[Claim]:
        """Claims one routing: a Claim per rank, kind hit / spec / miss / bypass.

        Wanted residents and speculation are claimed and pinned first; then, when `stream`,
        each miss takes a victim in rank order and becomes resident (bypass: no slot was
        eligible). Without `stream` misses stay misses (slot None): another site serves
        them. The caller reads the misses and settles the speculation.
        """
        out: list[Claim | None] = [None] * len(experts)
        for r, e in enumerate(experts):
            slot = self.slot_of.get((layer, e))
            if slot is None:
                continue
            state = self.state[slot]
            assert state != LIMBO, "a layer's limbo is released before that layer runs again"
            if state == SPEC:
                self.publish(slot)
            self.policy.claim(slot)
            self.pinned.add(slot)
            out[r] = Claim(HIT if state == RESIDENT else CLAIMED_SPEC, slot)
        for r, e in enumerate(experts):
            if out[r] is not None:
                continue
            if not stream:
                out[r] = Claim(MISS, None)
                continue
            slot = self.victim()
            if slot is None:
                out[r] = Claim(BYPASS, None)
                continue
            evicted = self.place(slot, (layer, e), RESIDENT)
            if evicted is not None:
                self.evicted.append(evicted)
            self.policy.claim(slot)
            self.pinned.add(slot)
            out[r] = Claim(MISS, slot)
        return out

    def place(self, slot: int, key: Key, state: str) -> Key | None:
        """Puts `key` into `slot` (a victim), returning the key it evicted."""
        evicted = None
        if self.key[slot] is None:
            self.free.remove(slot)
        else:
            evicted = self._unmap(slot)
        self.key[slot] = key
        self.state[slot] = state
        self.slot_of[key] = slot
        if state == RESIDENT:
            self._resident(key, True)
        self.policy.insert(slot, speculative=state == SPEC)
        return evicted

    def publish(self, slot: int) -> None:
        """A speculative slot the router claimed becomes resident."""
        assert self.state[slot] == SPEC
        self.state[slot] = RESIDENT
        self._resident(self.key[slot], True)

    def _resident(self, key: Key, resident: bool) -> None:
        self.resident_per_layer[key[0]] += 1 if resident else -1
        if self.on_resident is not None:
            self.on_resident(key, resident)

    def retire(self, slot: int) -> None:
        assert self.state[slot] == SPEC
        self.state[slot] = LIMBO

    def release(self, slots: list[int]) -> None:
        """Frees retired slots in sorted slot order (the order is part of determinism)."""
        for slot in sorted(slots):
            self._unmap(slot)
            self.free.append(slot)

    def _unmap(self, slot: int) -> Key | None:
        key = self.key[slot]
        if key is None:
            return None
        if self.state[slot] == RESIDENT:
            self._resident(key, False)
        del self.slot_of[key]
        self.key[slot] = None
        self.state[slot] = FREE
        self.policy.remove(slot)
        return key
