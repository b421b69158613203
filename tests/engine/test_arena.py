"""The arena's residency mask and its upload batching."""

from __future__ import annotations

from dataclasses import replace

from tuner.engine.arena import runs
from tuner.engine.session import Session


def test_the_routers_mask_follows_every_placement(tiny_config):
    """moce reads residency from a mask kept up to date on placement changes, not rebuilt
    per layer: after a run with speculation, evictions and limbo it equals the slot map."""
    s = Session(replace(tiny_config, moce_bonus=0.85, prefetch="stale", prefetch_max=0,
                        expert_cache=12))
    try:
        s.run(60)
        arena = s.engine.arena
        layers, experts = arena.mask_host.shape
        for layer in range(layers):
            for e in range(experts):
                assert bool(arena.mask_host[layer, e]) == arena.slots.resident((layer, e))
            assert int(arena.mask(layer).sum()) == arena.slots.resident_per_layer[layer]
    finally:
        s.engine.close()


def test_a_batch_is_one_copy_per_run_of_consecutive_staging_entries():
    assert runs([3, 4, 5]) == [(0, 3, 3)]
    assert runs([0, 1, 6, 7]) == [(0, 0, 2), (2, 6, 2)]  # wrapped around the ring
    assert runs([2, 4]) == [(0, 2, 1), (1, 4, 1)]
    assert runs([]) == []
