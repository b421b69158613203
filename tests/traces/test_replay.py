"""Replay through the engine's slot map: exact against the live engine, the seed 000 cache
example, and Belady's bound never beaten."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.engine.session.session import Session
from tuner.traces.curve import LiveCurve
from tuner.traces.record import record
from tuner.traces.replay import replay, report, sweep, sweep_report, sweep_sizes
from tuner.vocabulary.trace_format import Trace


def one_layer(sequence: str) -> Trace:
    """A one-layer, top-1 trace: each letter is one token's routing."""
    ids = [[[ord(ch) - ord("A")]] for ch in sequence]
    return Trace(np.array(ids, dtype=np.int32), {"num_experts": 26})


@pytest.mark.parametrize("changes", [{}, {"expert_cache": 6}, {"expert_cache": 40},
                                     {"cache_policy": "2q"}])
def test_replay_gives_exactly_the_live_engines_hits_and_misses(tiny_config, changes):
    cfg = replace(tiny_config, **changes)  # prefetch off and bonus 0: the defaults
    trace, snap = record(cfg, 100)
    got = report(replay(trace, trace.meta["policy"], trace.meta["arena_slots"]), trace)
    live = [(r["lookups"], r["hits"], r["sync_misses"]) for r in snap["layers"]]
    assert [(r["lookups"], r["hits"], r["misses"]) for r in got["layers"]] == live
    t = snap["totals"]
    assert (got["totals"]["hits"], got["totals"]["misses"]) == (t["hits"], t["sync_misses"])
    assert got["totals"]["bytes_per_token"] == t["bytes_per_token"]


def test_seed000_cache_example_through_replay():
    """Capacity 3, warm ABABAB then CD ten times: LRU 4 misses, two-hit LRU 22."""
    trace = one_layer("ABABAB" + "CD" * 10)
    misses = {p: int(replay(trace, p, 3).misses.sum()) for p in ("lru", "2q", "opt")}
    assert misses == {"lru": 4, "2q": 22, "opt": 4}


def test_opt_evicts_the_farthest_next_use():
    # Capacity 2: at C, A is used again next and B much later, so opt evicts B.
    trace = one_layer("ABCACACB")
    assert int(replay(trace, "opt", 2).misses.sum()) == 4  # A B C, then B once more
    assert int(replay(trace, "lru", 2).misses.sum()) == 5


def test_empty_slots_are_no_lookups():
    ids = np.array([[[0, -1], [-1, -1]], [[0, 1], [2, -1]]], dtype=np.int32)
    r = replay(Trace(ids, {"num_experts": 3}), "lru", 4)
    assert r.lookups.tolist() == [3, 1] and r.hits.tolist() == [1, 0]


def test_sweep_reports_marginal_hits_per_added_slot():
    trace = one_layer("ABCABCABCD" * 3)
    sizes = [1, 2, 3, 5]
    out = sweep_report(sweep(trace, "lru", sizes), trace)
    hits = out["layers"][0]["hits"]
    assert out["sizes"] == sizes and hits == out["totals"]["hits"]
    assert hits == sorted(hits)  # LRU is a stack policy: more slots never hit less
    assert out["layers"][0]["marginal_hits_per_slot"] == [
        hits[1] - hits[0], hits[2] - hits[1], (hits[3] - hits[2]) / 2]


def test_sweep_sizes_stay_within_the_trace():
    trace = one_layer("AB")  # 26 layer-expert pairs
    assert sweep_sizes(20, trace) == [5, 10, 15, 20, 26]


def test_unknown_policy_and_empty_arena_are_named():
    with pytest.raises(ValueError, match="expected one of lru, 2q, opt"):
        replay(one_layer("AB"), "fifo", 2)
    with pytest.raises(ValueError, match="at least 1 slot"):
        replay(one_layer("AB"), "lru", 0)


@st.composite
def traces(draw):
    experts = draw(st.integers(2, 9))
    k = draw(st.integers(1, min(3, experts)))
    layers = draw(st.integers(1, 3))
    tokens = draw(st.integers(1, 25))
    routing = st.lists(st.integers(0, experts - 1), min_size=k, max_size=k, unique=True)
    ids = draw(st.lists(st.lists(routing, min_size=layers, max_size=layers),
                        min_size=tokens, max_size=tokens))
    return Trace(np.array(ids, dtype=np.int32), {"num_experts": experts})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), slots=st.integers(1, 20))
def test_opt_never_misses_more_than_lru_or_2q(trace, slots):
    opt = int(replay(trace, "opt", slots).misses.sum())
    assert opt <= int(replay(trace, "lru", slots).misses.sum())
    assert opt <= int(replay(trace, "2q", slots).misses.sum())


def test_the_live_curve_replays_the_window_as_the_engine_ran_it(tiny_config):
    """With prefetch off and bonus 0, LRU at the current arena is the live window's hit
    rate, and no size or policy beats Belady's bound."""
    session = Session(tiny_config)
    curve_of = LiveCurve(session)
    try:
        session.run(150)
        curve = curve_of.fresh(timeout=120)
    finally:
        curve_of.close()
        session.engine.close()
    assert curve["arena"] == 16 and curve["policy"] == "lru" and curve["notes"] == []
    assert (curve["tokens"], curve["warmup_tokens"]) == (64, 64)
    assert curve["at_arena"]["lru"] == curve["live_hit_rate"]
    for policy in ("lru", "2q"):
        assert all(o >= p for o, p in zip(curve["hit_rate"]["opt"], curve["hit_rate"][policy]))
    lru = curve["hit_rate"]["lru"]
    i = curve["sizes"].index(16)
    assert curve["next"] == {"slots": curve["sizes"][i + 1],
                             "added": curve["sizes"][i + 1] - 16,
                             "gain_pp": round(lru[i + 1] - lru[i], 2)}
    assert curve["gap_pp"] == round(curve["hit_rate"]["opt"][i] - lru[i], 2)
