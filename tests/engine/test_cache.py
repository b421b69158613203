"""Cache bookkeeping through the real slot map and policies."""

from __future__ import annotations

import pytest

from tuner.vocabulary.policies import TwoHit
from tuner.vocabulary.slots import LIMBO, RESIDENT, SPEC, SlotMap


def misses(policy: str, capacity: int, sequence: str) -> int:
    slots = SlotMap(capacity, policy)
    n = 0
    for ch in sequence:
        kind, _ = slots.claim_layer(0, [ord(ch)])[0]
        n += kind != "hit"
        slots.pinned.clear()
    return n


def test_seed000_cache_example():
    """Capacity 3, warm ABABAB, then CD ten times: LRU 4 misses, two-hit 22."""
    seq = "ABABAB" + "CD" * 10
    assert misses("lru", 3, seq) == 4
    assert misses("2q", 3, seq) == 22


def test_two_hit_victims_cold_first_then_promoted_each_in_lru_order():
    q = TwoHit()
    for slot in range(4):
        q.insert(slot, speculative=False)
    q.insert(9, speculative=True)  # speculation goes to the victim end
    for slot in (2, 0, 2, 0, 3):  # 2 then 0 promoted; 3 claimed once stays cold, in place
        q.claim(slot)
    q.touch(2)
    assert list(q.victims()) == [9, 1, 3, 0, 2]
    q.remove(0)
    q.insert(2, speculative=False)  # a slot refilled starts cold again
    assert list(q.victims()) == [9, 1, 3, 2]


def test_victims_skip_pinned_speculative_and_limbo():
    slots = SlotMap(4, "lru")
    slots.claim_layer(0, [0, 1])  # two residents, pinned
    spec = slots.victim()
    slots.place(spec, (1, 5), SPEC)
    limbo = slots.victim()
    slots.place(limbo, (1, 6), SPEC)
    slots.retire(limbo)
    assert slots.state[limbo] == LIMBO
    assert slots.victim() is None  # pinned, speculative and limbo slots are never victims
    slots.pinned.clear()
    assert slots.victim() == slots.find((0, 0))  # oldest resident
    assert slots.victim(avoid_layer=0) is None


def test_speculation_is_invisible_until_claimed():
    slots = SlotMap(4, "lru")
    slot = slots.victim()
    slots.place(slot, (2, 3), SPEC)
    assert not slots.resident((2, 3))
    assert slots.resident_per_layer[2] == 0
    kind, got = slots.claim_layer(2, [3])[0]
    assert (kind, got) == ("spec", slot)
    assert slots.state[slot] == RESIDENT and slots.resident((2, 3))


def test_release_frees_in_slot_order():
    slots = SlotMap(3, "lru")
    for e in range(3):
        s = slots.victim()
        slots.place(s, (1, e), SPEC)
        slots.retire(s)
    slots.release([2, 0, 1])
    assert list(slots.free) == [0, 1, 2]


@pytest.mark.parametrize("policy", ["lru", "2q"])
def test_switching_policy_keeps_every_slot(policy):
    slots = SlotMap(5, policy)
    for e in range(5):
        slots.claim_layer(0, [e])
        slots.pinned.clear()
    slots.set_policy("2q" if policy == "lru" else "lru")
    assert sorted(slots.policy.victims()) == list(range(5))
