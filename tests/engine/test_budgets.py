"""Per-layer quotas in the slot map and the budgets computed from hit curves: a layer's hits
depend on its own routings only, the curves replay exactly what the slot map does, and the
computed quotas never hit less than an even split."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.engine.session.session import Session
from tuner.knobs import even_budgets
from tuner.traces.record import record
from tuner.traces.replay import replay_rows
from tuner.vocabulary.budgets import allocate, by_layer, hit_curves, layer_hits, stall_weights
from tuner.vocabulary.slots import SPEC, SlotMap, check_quotas


def claim(slots: SlotMap, layer: int, ids: list[int]) -> list[str]:
    kinds = [kind for kind, _ in slots.claim_layer(layer, ids)]
    slots.pinned.clear()
    return kinds


def test_a_layer_at_its_quota_evicts_its_own_slots():
    slots = SlotMap(4, "lru", quotas=[1, 3])
    assert claim(slots, 0, [7]) == ["miss"]
    claim(slots, 1, [1, 2, 3])
    assert claim(slots, 0, [8]) == ["miss"]  # layer 0 replaces its one slot
    assert slots.resident((0, 8)) and not slots.resident((0, 7))
    assert all(slots.resident((1, e)) for e in (1, 2, 3))  # untouched by layer 0
    assert claim(slots, 0, [8, 9]) == ["hit", "bypass"]  # its only slot is claimed


def test_a_layer_over_a_new_quota_gives_slots_back_as_others_miss():
    slots = SlotMap(4, "lru")
    claim(slots, 0, [0, 1, 2, 3])  # one shared arena: layer 0 took everything
    slots.quotas = [1, 3]
    assert claim(slots, 1, [5]) == ["miss"]  # layer 1 is under its quota: takes layer 0's
    assert slots.held_per_layer[0] == 3 and slots.held_per_layer[1] == 1
    assert claim(slots, 0, [9]) == ["miss"]  # layer 0 is over its quota: evicts its own
    assert slots.held_per_layer[0] == 3


def test_speculation_takes_a_slot_of_the_layer_it_is_for():
    slots = SlotMap(3, "lru", quotas=[1, 2])
    claim(slots, 0, [0])
    claim(slots, 1, [0, 1])
    spec = slots.victim(avoid_layer=1, layer=1)  # the oldest of layer 1, not layer 0's slot
    assert spec == slots.find((1, 0))
    slots.place(spec, (1, 5), SPEC)
    assert slots.held_per_layer[1] == 2


@pytest.mark.parametrize("quotas, fragment", [
    ([1, 2, 3], "3 quotas for a model of 2 layers"),
    ([3, 2], "sum to 5 slots but the arena has 4"),
    ([5, -1], "negative"),
])
def test_bad_quotas_are_named(quotas, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_quotas(quotas, 2, 4, "budgets")


@st.composite
def routings(draw):
    experts = draw(st.integers(2, 10))
    k = draw(st.integers(1, min(4, experts)))
    layers = draw(st.integers(1, 4))
    tokens = draw(st.integers(1, 30))
    routing = st.lists(st.integers(0, experts - 1), min_size=k, max_size=k, unique=True)
    rows = draw(st.lists(st.lists(routing, min_size=layers, max_size=layers),
                         min_size=tokens, max_size=tokens))
    return rows, layers, experts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=routings(), data=st.data())
def test_hit_curves_are_exactly_the_slot_maps_hits_at_any_quotas(case, data):
    rows, layers, experts = case
    quotas = data.draw(st.lists(st.integers(0, experts + 1), min_size=layers,
                                max_size=layers).filter(lambda q: sum(q) > 0))
    curves = hit_curves(by_layer(rows, layers), experts + 1)
    for policy in ("lru", "opt"):  # opt: with quotas, Belady's bound within each layer
        r = replay_rows(rows, layers, policy, sum(quotas), quotas)
        if policy == "lru":
            assert r.hits.tolist() == [curves[l, q] for l, q in enumerate(quotas)]
        else:
            assert all(r.hits[l] >= curves[l, q] for l, q in enumerate(quotas))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=routings(), data=st.data())
def test_computed_budgets_never_hit_less_than_an_even_split(case, data):
    rows, layers, experts = case
    slots = data.draw(st.integers(1, layers * experts))
    curves = hit_curves(by_layer(rows, layers), min(experts, slots))
    quotas = allocate(curves.astype(float), slots)
    assert sum(quotas) == slots and len(quotas) == layers
    computed = replay_rows(rows, layers, "lru", slots, quotas).hits.sum()
    even = replay_rows(rows, layers, "lru", slots, even_budgets(slots, layers)).hits.sum()
    assert computed >= even


def test_allocate_finds_the_best_sharing_where_greedy_does_not():
    # layer 0 gains nothing from its first slot and 10 from its second; greedy by marginal
    # gain would hand both slots to layer 1 (1 hit each)
    values = np.array([[0, 0, 10], [0, 1, 2]], dtype=float)
    assert allocate(values, 2) == [2, 0]
    for slots in range(5):
        best = max(values[0, a] + values[1, slots - a] for a in range(3) if 0 <= slots - a <= 2)
        got = allocate(values, slots)
        assert values[0, got[0]] + values[1, got[1]] == best
    with pytest.raises(ValueError, match="allowed 0..4"):
        allocate(values, 5)


def test_a_layer_curve_counts_bypasses_like_the_slot_map():
    # quota 1, routings of two experts: the second always finds the one slot claimed
    assert layer_hits([[0, 1], [0, 1], [0, 1]], 1) == 2
    assert replay_rows([[[0, 1], [5]]] * 3, 2, "lru", 2, [1, 1]).hits.tolist() == [2, 2]
    assert layer_hits([[0, 1], [0, 1]], 0) == 0


def test_stall_weights_fill_silent_layers_with_the_mean():
    assert stall_weights([10.0, 0.0, 30.0], [5, 0, 10]).tolist() == [2.0, 2.5, 3.0]
    with pytest.raises(ValueError, match="use --weights hits"):
        stall_weights([0.0, 0.0], [0, 0])


def test_live_engine_with_quotas_hits_exactly_what_replay_does(tiny_config):
    cfg = replace(tiny_config, arena_split="layers", arena_budgets=(7, 3, 4, 2))
    trace, snap = record(cfg, 80)
    r = replay_rows(trace.rows(), trace.layers, "lru", 16, [7, 3, 4, 2])
    assert [row["hits"] for row in snap["layers"]] == r.hits.tolist()
    assert [row["quota"] for row in snap["layers"]] == [7, 3, 4, 2]
    assert snap["arena"]["split"] == "layers"


@pytest.mark.parametrize("changes", [
    {"arena_split": "layers"}, {"arena_split": "layers", "arena_budgets": (1, 1, 1, 13)},
    {"arena_split": "layers", "prefetch": "stale", "prefetch_max": 0},
])
def test_quotas_leave_output_bit_identical_at_bonus_zero(tiny_config, run, changes):
    assert run(replace(tiny_config, **changes))["output_hash"] == run(tiny_config)["output_hash"]


def test_slot_gain_is_the_windows_replay_at_one_more_slot(tiny_config):
    s = Session(replace(tiny_config, arena_split="layers", window=32))
    try:
        s.run(40)
        snap = s.snapshot()
        tokens = snap["window"]["tokens"]  # 32, or more while a prompt straddles its start
        per_layer = by_layer(s.engine.counters.routings()[-tokens:].tolist(), 4)
        assert len(per_layer[0]) == tokens >= 32
        for row, routings in zip(snap["layers"], per_layer):
            q = row["quota"]
            gain = layer_hits(routings, q + 1) - layer_hits(routings, q)
            assert row["slot_gain"] == round(100 * gain / (tokens * 4), 2)
        assert [r["slot_gain"] for r in snap["window"]["layers"]] == \
            [r["slot_gain"] for r in snap["layers"]]
    finally:
        s.engine.close()


def test_budgets_that_do_not_fit_are_rejected_and_the_engine_keeps_running(tiny_config):
    s = Session(tiny_config)
    s.start()
    try:
        v = s.submit(replace(tiny_config, arena_split="layers", arena_budgets=(4, 4, 4)))
        assert s.wait_applied(v, 30)
        assert "arena_budgets (STRATA_ARENA_BUDGETS): 3 quotas for a model of 4 layers" \
            in s.rejection(v)
        v = s.submit(replace(tiny_config, arena_split="layers", arena_budgets=(4, 4, 4, 5)))
        assert s.wait_applied(v, 30)
        assert "sum to 17 slots but the arena has 16" in s.rejection(v)
        snap = s.snapshot()
        assert snap["arena"]["split"] == "global" and snap["settings"]["arena_budgets"] == ""
        v = s.submit(replace(tiny_config, arena_split="layers", arena_budgets=(4, 4, 4, 4)))
        assert s.wait_applied(v, 30) and s.rejection(v) is None
        assert s.snapshot()["arena"]["split"] == "layers"
    finally:
        s.stop()
    with pytest.raises(ValueError, match="3 quotas for a model of 4 layers"):
        Session(replace(tiny_config, arena_split="layers", arena_budgets=(8, 4, 4)))


def test_the_adaptive_tier_fills_each_layer_up_to_its_quota(tiny_config, run):
    quotas = [7, 3, 4, 2]
    snap = run(replace(tiny_config, cpu_pool=True, adapt_every=4, arena_split="layers",
                       arena_budgets=tuple(quotas)), 60)
    assert [row["resident"] for row in snap["layers"]] == quotas
