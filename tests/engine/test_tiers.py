"""Three execution sites, the adaptive tier and adapt-fetch on the tiny model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tuner.engine.memory.tiers import Tier
from tuner.knobs import Config
from tuner.vocabulary.counters import COUNTERS, C
from tuner.vocabulary.slots import RESIDENT, SlotMap

SITES = {"cpu_pool": True, "adapt_every": 8}


@pytest.mark.parametrize("changes", [
    {"pcie_frac": 0.0}, {"pcie_frac": 0.5}, {"pcie_frac": 1.0},
    {"pcie_frac": 0.25, "adapt_fetch": 1}, {"pcie_frac": 0.25, "adapt_fetch": 2},
    {"pcie_frac": 0.5, "link_gbps": 2.0, "cpu_gbps": 8.0},
    {"pcie_frac": 0.3, "adapt_every": 1, "adapt_decay": 0.5},
])
def test_bonus_zero_output_is_identical_at_every_site_split(tiny_config, run, changes):
    """On the CPU every site computes with the same kernels; on a GPU the CPU site's
    numerics differ from the device's by design, so this is a CPU property. With cpu_pool
    prompts run token by token, so the base does too (batched prefill sums in another
    order)."""
    tiny_config = replace(tiny_config, device="cpu", prefill=False)
    base = run(tiny_config)
    other = run(replace(tiny_config, **{**SITES, **changes}))
    assert other["output_hash"] == base["output_hash"]


@pytest.mark.parametrize("changes", [
    {"pcie_frac": 0.0}, {"pcie_frac": 0.4}, {"pcie_frac": 0.25, "adapt_fetch": 2},
])
def test_sites_are_bit_identical_at_real_layer_shapes(small_model, run, changes):
    """An expert computed on the CPU site from the host copy, over the link or in the arena
    gives the same bits: the host copy shares the arena's layout and alignment."""
    cfg = Config(model=str(small_model), expert_cache=6, device="cpu", io_workers=2,
                 io_urgent=1, prefill=False)  # cpu_pool's prompts run token by token
    base = run(cfg, 40)
    other = run(replace(cfg, **SITES, **changes), 40)
    assert other["output_hash"] == base["output_hash"]


def test_every_site_computes_from_aligned_batches(small_model):
    """SIMD kernels round differently on data aligned to less than 16 bytes (a mapped shard
    is only 8-byte aligned): every site computes from a gathered batch whose matrices start
    on 64-byte boundaries, and the host copy holds the checkpoint's bytes."""
    from tuner.engine.memory.host_copy import HostCopy
    from tuner.engine.weights.checkpoint import Checkpoint

    ckpt = Checkpoint(small_model)
    host = HostCopy(ckpt)
    keys = [(2, 7), (0, 1)]
    w = host.gather(keys)
    assert all(t.data_ptr() % 64 == 0 for t in (w.gate_up, w.down))
    assert all(t[i].data_ptr() % 64 == 0 for t in (w.gate_up, w.down) for i in range(2))
    assert all(torch.equal(host.row(k), ckpt.expert_tensor(*k)) for k in keys)


def test_sites_account_for_every_miss(tiny_config, run):
    snap = run(replace(tiny_config, **SITES, pcie_frac=0.25))
    for row in snap["layers"]:
        assert row["hits"] + row["sync_misses"] == row["lookups"]
        assert row["link_experts"] + row["cpu_experts"] == row["sync_misses"]
    t = snap["totals"]
    assert 74 <= t["cpu_fraction"] <= 76  # a quarter of the misses go to the link
    assert t["tier_swaps"] > 0 and t["resident"] == 16


def test_verify_mode_admits_and_matches(tiny_config, run):
    snap = run(replace(tiny_config, **SITES, pcie_frac=0.25, adapt_fetch=2,
                       adapt_fetch_verify=True), tokens=500)
    t = snap["totals"]
    assert t["admissions"] > 0
    assert t["verified"] == t["admissions"] and t["mismatches"] == 0


def test_opt_in_that_cannot_run_says_why(tiny_config, run):
    snap = run(replace(tiny_config, cpu_pool=True, adapt_fetch=2), tokens=4)
    assert any("adapt_fetch is off" in n for n in snap["notes"])
    assert snap["totals"]["admissions"] == 0
    snap = run(replace(tiny_config, pcie_frac=0.5), tokens=4)
    assert any("only with cpu_pool" in n for n in snap["notes"])


def _tier(counts: list[list[float]], n_slots: int) -> Tier:
    slots = SlotMap(n_slots)
    tier = Tier(len(counts), len(counts[0]), slots)
    tier.counts = np.array(counts, dtype=float)
    return tier


def test_link_share_takes_last_in_rank_or_most_routed():
    tier = _tier([[0, 5, 1, 3]], 2)
    misses = [(0, 0), (1, 2), (2, 1), (3, 3)]  # (rank, expert)
    assert tier.link_share(0, misses, 0.5, by_count=False) == [(2, 1), (3, 3)]
    assert tier.link_share(0, misses, 0.5, by_count=True) == [(2, 1), (3, 3)]
    assert tier.link_share(0, misses, 0.25, by_count=True) == [(2, 1)]


def test_link_share_carries_its_remainder_across_layers():
    tier = _tier([[0, 0]] * 8, 2)
    two = [(0, 0), (1, 1)]
    shares = [len(tier.link_share(0, two, 0.25, by_count=False)) for _ in range(8)]
    assert shares == [0, 1, 0, 1, 0, 1, 0, 1]  # a quarter of 16 misses, not round(0.5) = 0


def test_admission_needs_min_and_margin():
    tier = _tier([[4.0, 1.0, 3.0, 0.0, 2.0]], 2)
    slots = tier.slots
    for e in (1, 2):
        slots.place(slots.victim(), (0, e), RESIDENT)
    # expert 4 (count 2.0): least-routed resident not routed now is expert 1 (count 1.0)
    assert tier.admission_slot(0, 4, {4}, 1.0, 0.5) == slots.find((0, 1))
    assert tier.admission_slot(0, 4, {4}, 1.0, 1.5) is None  # margin not met
    assert tier.admission_slot(0, 4, {4}, 2.5, 0.0) is None  # below min
    assert tier.admission_slot(0, 4, {4, 1}, 1.0, 0.5) is None  # expert 2: 3.0 > 2.0


def test_tier_round_swaps_and_mode_2_skips_admitted_layers():
    tier = _tier([[5, 0, 0, 4], [0, 3, 3, 0]], 4)
    slots = tier.slots
    moves = tier.round(skip_admitted=False)  # fills each layer's share of 2
    assert sorted(k for _, k, _ in moves) == [(0, 0), (0, 3), (1, 1), (1, 2)]
    tier.counts[0] = [0, 9, 9, 0]
    tier.counts[1] = [9, 0, 0, 0]
    tier.admitted.add(1)
    moves = tier.round(skip_admitted=True)
    assert {k for _, k, _ in moves} == {(0, 1), (0, 2)}
    assert slots.resident((1, 1)) and not slots.resident((1, 0))
    assert not tier.admitted


def test_the_sites_bodies_route_and_pack_the_input_the_cpu_site_reads(tiny_config, monkeypatch):
    """With cpu_pool the layers' bodies attend and route with the shapes they have on CUDA
    and stop there (Route.sites): each pack carries the layer's MoE input exactly, and the
    output is the device-first path's bit for bit."""
    from tuner.engine.step.decode import Engine
    from tuner.engine.weights import model
    from tuner.engine.weights.checkpoint import Checkpoint

    monkeypatch.setattr(model, "FIXED_SHAPES", {"cpu", "cuda"})
    cfg = replace(tiny_config, device="cpu", prefill=False)
    logits = {}
    for name, changes in (("base", {}), ("sites", {**SITES, "pcie_frac": 0.5})):
        engine = Engine(Checkpoint(cfg.model), replace(cfg, **changes), torch.device("cpu"))
        try:
            logits[name] = [engine.step(tok, pos) for pos, tok in enumerate((3, 5, 7, 11))]
            run = engine.device_step
            assert run is not None and run.branchless and run.route.sites == bool(changes)
            if changes:
                assert engine.sites_now()
                for l, v in enumerate(run.views):
                    pack = run.read(l)
                    assert pack.x is not None
                    assert torch.equal(torch.from_numpy(pack.x), v.x.float())
        finally:
            engine.close()
    assert all(torch.equal(a, b) for a, b in zip(logits["base"], logits["sites"]))


def test_a_routing_wholly_on_the_cpu_site_ends_as_its_general_sum(tiny_config, monkeypatch):
    """Where the CPU site computed every routed expert the layer ends through finish_cpu
    (on CUDA one copy up and one graph replay): the same residual, bit for bit, as the
    general sum of the sites' outputs (Outputs.sum) then `finish`, and the step takes it."""
    from tuner.engine.memory.tiers import Outputs
    from tuner.engine.step.decode import Engine
    from tuner.engine.step.device_step import DeviceStep
    from tuner.engine.weights import model
    from tuner.engine.weights.checkpoint import Checkpoint

    monkeypatch.setattr(model, "FIXED_SHAPES", {"cpu", "cuda"})
    ended = []
    finish_cpu = DeviceStep.finish_cpu
    monkeypatch.setattr(DeviceStep, "finish_cpu",
                        lambda self, l, outs: (ended.append(l), finish_cpu(self, l, outs)))
    cfg = replace(tiny_config, device="cpu", prefill=False, cpu_pool=True, pcie_frac=0.0,
                  adapt_every=0)
    engine = Engine(Checkpoint(cfg.model), cfg, torch.device("cpu"))
    try:
        for pos, tok in enumerate((3, 5, 7)):
            engine.step(tok, pos)
        run = engine.device_step
        assert run is not None and ended  # the arena starts empty: every expert a miss
        K, D = run.K, run.x.shape[1]
        outs = torch.randn(K, D, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():  # as the engine steps
            for l, v in enumerate(run.views):
                run.finish_cpu(l, outs)
                captured = v.out.clone()
                run.finish(l, Outputs([], [], outs, list(range(K))).sum(v.w, v.x))
                assert torch.equal(captured, v.out)
    finally:
        engine.close()


def test_the_sites_step_counts_and_splits_as_the_host_driven_layers_do(tiny_config):
    """The sites step settles a layer's counts, probe notes and pins under the next layer's
    body, after the split: the admissions, the link share, the tier's swaps and every count
    are still those of the host-driven path, which settles each layer before the next."""
    from tuner.engine.step.decode import Engine
    from tuner.engine.step.route_log import RouteLog
    from tuner.engine.weights.checkpoint import Checkpoint

    cfg = replace(tiny_config, device="cpu", prefill=False, **{**SITES, "adapt_every": 3},
                  pcie_frac=0.25, adapt_fetch=1, adapt_fetch_min=0.5, adapt_fetch_margin=0.1)
    counts, logits = {}, {}
    for name in ("sites", "host-driven"):
        engine = Engine(Checkpoint(cfg.model), cfg, torch.device("cpu"))
        try:
            if name == "host-driven":  # a recording takes the host-driven path
                engine.route_log = RouteLog(engine.mc.num_layers)
            assert engine.sites_now() == (name == "sites")
            logits[name] = [engine.step(1 + pos % 13, pos) for pos in range(24)]
            engine.drain()
            counts[name] = engine.counters.read(window=False)[0]
        finally:
            engine.close()
    assert all(torch.equal(a, b) for a, b in zip(logits["sites"], logits["host-driven"]))
    untimed = [c.index for c in COUNTERS if c.unit != "ms"]
    assert counts["sites"][:, untimed].tolist() == counts["host-driven"][:, untimed].tolist()
    done = counts["sites"][:, [C.admissions.index, C.tier_swaps.index, C.link_experts.index]]
    assert (done.sum(axis=0) > 0).all()  # the test reaches each decision it guards
