"""The arena's residency mask and the device's table of expert rows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tuner.engine.memory.experts import LANDING_SETS, SPEC_SETS
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.session.session import Session
from tuner.engine.weights import model
from tuner.vocabulary.slots import RESIDENT, SPEC


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


def test_the_device_table_names_only_landed_experts_in_their_rows(tiny_config):
    """The device computes whatever the table names without asking the host, so an entry
    must be an expert whose bytes are in that row: resident, or speculation that landed.
    After a run with speculation, limbo and evictions, every entry is such a slot and every
    resident expert is in the table (its read was waited for when it was claimed)."""
    s = Session(replace(tiny_config, prefetch="stale", prefetch_max=0, expert_cache=12))
    try:
        s.run(60)
        arena, slots = s.engine.arena, s.engine.arena.slots
        table = arena.table.np
        for (layer, e), row in np.ndenumerate(table):
            if row >= 0:
                assert slots.key[row] == (layer, e)
                assert slots.state[row] in (RESIDENT, SPEC)
        for slot, key in enumerate(slots.key):
            if key is not None and slots.state[slot] == RESIDENT:
                assert table[key] == slot
    finally:
        s.engine.close()


def test_the_ram_store_copies_misses_without_reading(tiny_config, run):
    """expert_store = ram: every expert in host memory from the start; a miss is a copy
    into its row, counted as the same bytes, with the same hits and misses as reads from
    disk give, and the readers read nothing."""
    disk = run(tiny_config)
    s = Session(replace(tiny_config, expert_store="ram"))
    try:
        s.run(120)
        ram = s.snapshot()
        assert s.engine.pool.bytes_read == 0
    finally:
        s.engine.close()
    keys = ("hits", "sync_misses", "evictions", "bytes_demand")
    assert [tuple(r[k] for k in keys) for r in ram["layers"]] == \
        [tuple(r[k] for k in keys) for r in disk["layers"]]
    assert ram["totals"]["stall_ms"] == 0


@pytest.mark.parametrize("shapes", [{"cuda"}, {"cpu", "cuda"}])
@pytest.mark.parametrize("changes", [{}, {"drop_cold": 0.3}])
def test_misses_read_in_place_change_nothing_but_the_way_in(tiny_config, run, changes,
                                                            shapes, monkeypatch):
    """miss_direct with the RAM store: a layer reads a miss from host memory (on CUDA its
    kernels) and the host keeps it from the bytes it landed; the tokens, hits, misses,
    evictions and bytes are those of copying it in first, every kept row holds its
    expert, and the decode's demand misses are counted as read in place (a prompt's are
    copied in). With CUDA's fixed shapes on the CPU, two layers run ahead of the host."""
    monkeypatch.setattr(model, "FIXED_SHAPES", shapes)
    cfg = replace(tiny_config, expert_store="ram", **changes)
    s = Session(cfg)
    try:
        s.run(120)
        direct, arena = s.snapshot(), s.engine.arena
        assert arena.host is not None  # the RAM store
        for slot, key in enumerate(arena.slots.key):  # every kept row holds its expert
            if key is not None and arena.slots.state[slot] == RESIDENT:
                assert torch.equal(arena.mem[slot].cpu(), arena.host.row(key)), (slot, key)
    finally:
        s.engine.close()
    copied = run(replace(cfg, miss_direct=False))
    assert direct["output_hash"] == copied["output_hash"]
    keys = ("hits", "sync_misses", "evictions", "bytes_demand", "bytes_spec", "pf_timely")
    assert [tuple(r[k] for k in keys) for r in direct["layers"]] == \
        [tuple(r[k] for k in keys) for r in copied["layers"]]
    assert copied["totals"]["bytes_direct"] == 0
    assert direct["totals"]["sync_misses"] > 0
    t = direct["totals"]
    assert 0 < t["bytes_direct"] <= t["bytes_demand"]


@pytest.mark.parametrize("changes", [{}, {"drop_cold": 0.3}, {"prefetch": "stale"}])
def test_disk_misses_read_from_staging_change_nothing_but_the_way_in(tiny_config, run,
                                                                     changes):
    """miss_direct with the disk store: on CUDA a layer's fix reads its misses in place from
    the pinned entries the store read them into, and the host keeps them from the bytes the
    fix landed; the tokens, hits, misses, evictions and demand bytes are those of uploading
    each first, and every kept row holds its expert. Without CUDA the store reads into the
    rows, and nothing is read in place."""
    cfg = replace(tiny_config, **changes)
    s = Session(cfg)
    try:
        s.run(120)
        staged, arena = s.snapshot(), s.engine.arena
        stages = arena.stages
        assert stages == (arena.cuda and arena.experts.fused)
        host = HostCopy(s.ckpt)
        for slot, key in enumerate(arena.slots.key):
            if key is not None and arena.slots.state[slot] == RESIDENT:
                assert torch.equal(arena.mem[slot].cpu(), host.row(key)), (slot, key)
    finally:
        s.engine.close()
    uploaded = run(replace(cfg, miss_direct=False))
    assert staged["output_hash"] == uploaded["output_hash"]
    keys = ("hits", "sync_misses", "evictions", "bytes_demand")
    assert [tuple(r[k] for k in keys) for r in staged["layers"]] == \
        [tuple(r[k] for k in keys) for r in uploaded["layers"]]
    t = staged["totals"]
    assert uploaded["totals"]["bytes_direct"] == 0 and t["sync_misses"] > 0
    if stages:
        assert 0 < t["bytes_direct"] <= t["bytes_demand"] + t["bytes_spec"]
    else:
        assert t["bytes_direct"] == 0


@pytest.mark.parametrize("shapes", [{"cuda"}, {"cpu", "cuda"}])
@pytest.mark.parametrize("predictor", ["stale", "prev"])
def test_reading_ahead_on_the_device_moves_no_residency(tiny_config, run, predictor, shapes,
                                                        monkeypatch):
    """With misses read in place a layer's body reads the next layer's predicted misses
    ahead into rows of their own, so speculation takes no slot: the tokens, hits and
    evictions are those of no prefetch, a read-ahead expert the router picks is a miss
    served early (pf_timely), the rest are unused, each read-ahead expert's bytes are
    counted once, and every kept row holds its expert."""
    monkeypatch.setattr(model, "FIXED_SHAPES", shapes)
    cfg = replace(tiny_config, expert_store="ram", prefetch=predictor, prefetch_max=0,
                  temperature=0.0)
    s = Session(cfg)
    try:
        s.run(120)
        ahead, arena = s.snapshot(), s.engine.arena
        assert s.engine.device_step is not None and s.engine.device_step.route.ahead
        for slot, key in enumerate(arena.slots.key):
            if key is not None and arena.slots.state[slot] == RESIDENT:
                assert torch.equal(arena.mem[slot].cpu(), arena.host.row(key)), (slot, key)
    finally:
        s.engine.close()
    off = run(replace(cfg, prefetch="off"))
    assert ahead["output_hash"] == off["output_hash"]
    for a, o in zip(ahead["layers"], off["layers"]):
        assert (a["hits"], a["evictions"]) == (o["hits"], o["evictions"])
        assert a["sync_misses"] + a["pf_timely"] == o["sync_misses"]
        assert a["pf_timely"] + a["pf_unused"] == a["pf_issued"]
        assert a["pf_late"] == a["pf_cancelled"] == a["pf_partial"] == 0
    t, expert = ahead["totals"], s.ckpt.expert_bytes
    assert t["bytes_spec"] == t["pf_issued"] * expert
    if predictor == "stale":  # prev names what the arena already holds after a token
        assert t["pf_timely"] > 0 and t["pf_issued"] > t["pf_timely"]


def test_the_arena_counts_every_expert_byte_it_holds(tiny_config):
    """What a peer at the same budget is given: the slots, the bypass rows and, with
    misses read in place on a GPU (the RAM store), the landing sets."""
    s = Session(replace(tiny_config, expert_store="ram"))
    try:
        arena, k = s.engine.arena, s.ckpt.config.top_k
        landing = arena.direct and torch.cuda.is_available()  # the CPU lands nothing
        rows = arena.n + k + SPEC_SETS * k + (LANDING_SETS * k if landing else 0)
        assert arena.device_bytes == rows * arena.mem.shape[1]
        assert arena.direct  # on by default
    finally:
        s.engine.close()
