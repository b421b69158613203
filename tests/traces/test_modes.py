"""Replay modes by name: pinning from the whole trace or its first half, and read-ahead
replayed exactly as the live engine's speculator places it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tuner.commands.replay import register
from tuner.traces.modes import MODES
from tuner.traces.record import record
from tuner.traces.replay import replay, replay_rows
from tuner.vocabulary.policies import POLICIES
from tuner.vocabulary.trace_format import Trace


def trace_of(rows: list[list[list[int]]], experts: int = 8, starts=(0,)) -> Trace:
    return Trace(np.array(rows, dtype=np.int32),
                 {"num_experts": experts, "sequence_starts": list(starts)})


def test_every_engine_policy_and_the_offline_modes_replay_by_name():
    # a policy registered in the engine's table is a mode with no other edit (the live hit
    # curves replay every one of them)
    assert list(MODES) == [*POLICIES, "opt", "static", "static_half", "lru+prev",
                           "lru+oracle"]
    import argparse

    parser = argparse.ArgumentParser()
    register(parser)
    policy = next(a for a in parser._actions if a.dest == "policy")
    assert list(policy.choices) == list(MODES)


def test_static_pins_the_most_routed_pairs_of_the_whole_trace_or_its_first_half():
    # one layer, top-1: A A B B | C C C B; the whole trace's two most routed: C (3), B (3);
    # the first half's: A (2), B (2)
    rows = [[[e]] for e in (0, 0, 1, 1, 2, 2, 2, 1)]
    trace = trace_of(rows)
    assert replay(trace, "static", 2).hits.tolist() == [6]
    assert replay(trace, "static_half", 2).hits.tolist() == [5]
    # per-layer quotas pin each layer's own most routed pairs
    two = trace_of([[[0], [5]], [[0], [6]], [[1], [6]]])
    assert replay(two, "static", 2, quotas=[1, 1]).hits.tolist() == [2, 2]
    assert replay(two, "static", 2).hits.tolist() == [2, 2]  # 0 and 6 tie above 1 and 5


def test_oracle_read_ahead_serves_every_layer_but_the_first():
    # two layers, top-2 of 8, cycling through all 16 pairs every 4 tokens: LRU with 6
    # slots never hits; reading the next layer's routing ahead serves layer 1 every time,
    # never layer 0
    rows = [[[2 * t % 8, (2 * t + 1) % 8], [(2 * t + 4) % 8, (2 * t + 5) % 8]]
            for t in range(6)]
    trace = trace_of(rows)
    r = replay(trace, "lru+oracle", 6)
    assert r.lookups.tolist() == [12, 12] and r.hits.tolist() == [0, 12]
    assert r.read_ahead.tolist() == [0, 12]
    assert replay(trace, "lru", 6).hits.tolist() == [0, 0]
    assert replay(trace, "lru", 6).read_ahead is None
    # with 4 slots the two slots layer 0 pins leave only layer 1's own, which read-ahead
    # never takes (as in the engine): it reads ahead once, at the start
    assert replay(trace, "lru+oracle", 4).read_ahead.tolist() == [0, 2]


def test_prev_read_ahead_has_nothing_to_go_on_at_a_sequence_start():
    # below one token's working set (6), where the previous token's routing is gone by the
    # time a layer runs again, so reading it ahead does something
    g = np.random.default_rng(0)
    rows = [[g.choice(8, 2, replace=False).tolist() for _ in range(3)] for _ in range(60)]
    one = replay_rows(rows, 3, "lru+prev", 4, starts=[0])
    every = replay_rows(rows, 3, "lru+prev", 4, starts=list(range(60)))
    assert one.read_ahead.sum() > 0 and one.read_ahead[0] == 0
    assert every.read_ahead.sum() == 0
    assert every.hits.tolist() == replay_rows(rows, 3, "lru", 4).hits.tolist()


@pytest.mark.parametrize("cache", [6, 16, 40])
def test_prev_read_ahead_replays_exactly_the_live_engines_prefetch(tiny_config, cache):
    """Recorded with prefetch prev: the live engine's hits plus its claimed speculation are
    the replay's hits, its sync misses the replay's misses and its issued prefetches the
    experts the replay read ahead, layer by layer."""
    cfg = replace(tiny_config, expert_cache=cache, prefetch="prev", context=40)
    trace, snap = record(cfg, 120)
    assert len(trace.sequence_starts) > 2  # new conversations: prev starts over
    r = replay(trace, "lru+prev", trace.meta["arena_slots"])
    live = [(row["hits"] + row["pf_timely"] + row["pf_late"], row["sync_misses"],
             row["pf_issued"]) for row in snap["layers"]]
    assert list(zip(r.hits.tolist(), r.misses.tolist(), r.read_ahead.tolist())) == live
