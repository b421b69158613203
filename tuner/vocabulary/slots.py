"""Slot bookkeeping of the arena: which (layer, expert) sits in which slot, and its state.

Pure bookkeeping, no memory and no I/O, so trace replay runs the very same code as the
live engine. States:

* RESIDENT: published; the router sees the expert as resident.
* SPEC: a speculative read targets this slot; invisible to the router, never a victim.
* LIMBO: retired unused speculation waiting for its deterministic release; never a victim.

With per-layer quotas (`arena_split = layers`) a layer under its quota takes a free slot
(or, after the quotas changed, a slot of a layer over its own), and a layer at its quota
evicts one of its own slots, speculation included: each layer is then a cache of its own,
so a replay of one layer's routings alone gives the hits it gets in the shared map.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from typing import NamedTuple, cast

from tuner.errors import TunerError
from tuner.knobs import BY_NAME, even_budgets
from tuner.vocabulary.policies import POLICIES

FREE, RESIDENT, SPEC, LIMBO = "free", "resident", "spec", "limbo"
HIT, CLAIMED_SPEC, MISS, BYPASS = "hit", "spec", "miss", "bypass"
Key = tuple[int, int]  # (layer, expert)
DEFAULT_ARENA_SHARE = 0.20  # of the layer-expert pairs, for an expert_cache of 0 (auto)


def arena_slots(requested: int, layers: int, experts: int) -> int:
    """The arena's slots for an `expert_cache` of `requested` (0: the default share)."""
    total = layers * experts
    if requested <= 0:
        return max(1, round(total * DEFAULT_ARENA_SHARE))
    return min(requested, total)


class QuotaError(TunerError, ValueError):
    """Per-layer quotas that do not fit the model or the arena; the message says how."""


class Claim(NamedTuple):
    """How one routed expert is served: `kind` hit, spec (speculation the router claimed),
    miss (the slot it is read into; None when another site serves it) or bypass (no slot
    was eligible)."""

    kind: str
    slot: int | None


def check_quotas(quotas: list[int], layers: int, slots: int, where: str) -> None:
    """Raises QuotaError naming what is wrong with per-layer quotas for this arena."""
    if len(quotas) != layers:
        raise QuotaError(f"{where}: {len(quotas)} quotas for a model of {layers} layers; "
                         f"give one slot count per layer, layers 0..{layers - 1}")
    if any(q < 0 for q in quotas):
        raise QuotaError(f"{where}: a quota is negative; quotas are slot counts >= 0")
    if sum(quotas) != slots:
        raise QuotaError(f"{where}: the quotas sum to {sum(quotas)} slots but the arena has "
                         f"{slots}; they share the arena, so they must sum to it")


def quotas_for(split: str, budgets: tuple[int, ...], layers: int,
               slots: int) -> list[int] | None:
    """The quotas the `arena_split` and `arena_budgets` knobs give an arena, or None
    (`budgets` empty: an even split)."""
    if split != "layers":
        return None
    quotas = list(budgets) or even_budgets(slots, layers)
    check_quotas(quotas, layers, slots, BY_NAME["arena_budgets"].label)
    return quotas


class SlotMap:
    def __init__(self, n: int, policy: str = "lru", quotas: list[int] | None = None):
        self.n = n
        self.key: list[Key | None] = [None] * n
        self.state: list[str] = [FREE] * n
        self.slot_of: dict[Key, int] = {}
        self.free: deque[int] = deque(range(n))
        self.pinned: set[int] = set()
        self.resident_per_layer: Counter[int] = Counter()
        self.held_per_layer: Counter[int] = Counter()  # slots of each layer, in any state
        self.quotas = quotas  # slots per layer, or None: one arena for all layers
        self.evicted: list[Key] = []  # keys evicted by claim_layer, for the caller to count
        # prefill's prompt-hot set: victims come from outside it first (seed 000 section 3)
        self.protected: set[Key] = set()
        self.hot_fallbacks = 0  # victims taken from the protected set, none being left
        self.policy = POLICIES[policy]()
        # told (key, resident) whenever a key becomes or stops being resident
        self.on_resident: Callable[[Key, bool], None] | None = None
        # told whenever a key's slot stops serving it (evicted, released or retired)
        self.on_leave: Callable[[Key], None] | None = None

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

    def victim(self, avoid_layer: int | None = None, layer: int | None = None) -> int | None:
        """A free slot, else the policy's first eligible slot, else None. With quotas the
        slot is for `layer` and comes from its quota (`avoid_layer` does not apply)."""
        if self.quotas is not None and layer is not None:
            return self._victim_within(layer, self.quotas)
        if self.free:
            return self.free[0]
        return self._eligible(lambda l: avoid_layer is None or l != avoid_layer)

    def _victim_within(self, layer: int, quotas: list[int]) -> int | None:
        if self.held_per_layer[layer] >= quotas[layer]:
            return self._eligible(lambda l: l == layer)
        if self.free:
            return self.free[0]
        over = {l for l, held in self.held_per_layer.items() if held > quotas[l]}
        return self._eligible(over.__contains__)

    def _eligible(self, layer_ok) -> int | None:
        """The policy's first resident, unpinned slot whose layer passes `layer_ok`. With a
        protected set the search makes two passes: first outside the set, then falling back
        to it."""
        for guard in ((self.protected, set()) if self.protected else (set(),)):
            for slot in self.policy.victims():
                key = self.key[slot]
                if (key is not None and self.state[slot] == RESIDENT and slot not in self.pinned
                        and layer_ok(key[0]) and key not in guard):
                    if key in self.protected:
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
            slot = self.victim(layer=layer)
            if slot is None:
                out[r] = Claim(BYPASS, None)
                continue
            evicted = self.place(slot, (layer, e), RESIDENT)
            if evicted is not None:
                self.evicted.append(evicted)
            self.policy.claim(slot)
            self.pinned.add(slot)
            out[r] = Claim(MISS, slot)
        return cast("list[Claim]", out)  # the two passes filled every entry

    def read_ahead(self, target: int, guess: list[int], limit: int, touch: bool = False
                   ) -> list[tuple[int, Key | None]]:
        """Places the guessed experts of layer `target` that are not in the arena into
        victim slots of other layers' (or with quotas, of its own), as speculation (state
        SPEC), up to `limit` of them (0 = all): (slot, the key it evicted) each, for the
        caller to read into. A guess already resident or in flight costs nothing; with
        `touch` a resident one is promoted as a speculative hit."""
        placed: list[tuple[int, Key | None]] = []
        for e in guess:
            slot = self.find((target, e))
            if slot is not None:
                if touch and self.state[slot] == RESIDENT:
                    self.policy.touch(slot)
                continue
            if limit and len(placed) >= limit:
                break
            slot = self.victim(avoid_layer=target, layer=target)
            if slot is None:
                break
            placed.append((slot, self.place(slot, (target, e), SPEC)))
        return placed

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
        self.held_per_layer[key[0]] += 1
        if state == RESIDENT:
            self._resident(key, True)
        self.policy.insert(slot, speculative=state == SPEC)
        return evicted

    def publish(self, slot: int) -> None:
        """A speculative slot the router claimed becomes resident."""
        key = self.key[slot]
        assert self.state[slot] == SPEC and key is not None
        self.state[slot] = RESIDENT
        self._resident(key, True)

    def _resident(self, key: Key, resident: bool) -> None:
        self.resident_per_layer[key[0]] += 1 if resident else -1
        if self.on_resident is not None:
            self.on_resident(key, resident)

    def retire(self, slot: int) -> None:
        key = self.key[slot]
        assert self.state[slot] == SPEC and key is not None
        self.state[slot] = LIMBO
        if self.on_leave is not None:
            self.on_leave(key)

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
        if self.on_leave is not None:
            self.on_leave(key)
        self.held_per_layer[key[0]] -= 1
        del self.slot_of[key]
        self.key[slot] = None
        self.state[slot] = FREE
        self.policy.remove(slot)
        return key
