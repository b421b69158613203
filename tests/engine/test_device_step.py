"""The device-first decode step (device_step.py) with the shapes it has on CUDA, run eagerly
on the CPU: one token's attention over a fixed span with the position as a tensor, bodies
that compute whatever the table found, the next layer run ahead of the host, layers
computed again where an expert was missing, and with the RAM store misses read in place
with two layers queued ahead. CUDA adds only the graphs around the same code."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tests.engine.resident_match import streaming_matches_resident
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.step import device_first
from tuner.engine.step.decode import Engine
from tuner.engine.step.device_first import DeviceFirst
from tuner.engine.step.device_step import DeviceStep
from tuner.engine.step.reference import Resident
from tuner.engine.weights import model
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config


@pytest.fixture
def fixed(monkeypatch):
    monkeypatch.setattr(model, "FIXED_SHAPES", {"cpu", "cuda"})


def test_attention_over_a_fixed_span_equals_the_sliced_one(small_model):
    ckpt = Checkpoint(small_model)
    mc = ckpt.config
    sliced = model.Decoder(mc, ckpt.dense(), 300, torch.device("cpu"))
    spanned = model.Decoder(mc, ckpt.dense(), 300, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    for pos in (0, 1, 5, 255, 256, 299):
        h = torch.randn(mc.hidden_size, generator=g)
        want = sliced.attention(1, h, pos)
        span = spanned.span(pos)
        assert pos < span <= 300 and span in (256, 300)
        got = spanned.attend_one(1, h, torch.tensor([pos]), span)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        assert torch.equal(spanned.k_cache[1, :, pos], sliced.k_cache[1, :, pos])


def test_the_fixed_path_runs_every_layer_on_the_device_first(fixed, tiny_config):
    engine = Engine(Checkpoint(tiny_config.model), tiny_config, torch.device("cpu"))
    try:
        assert engine.dec.fixed
        engine.step(3, 0)
        assert engine.device_step is not None and engine.device_step.branchless
    finally:
        engine.close()


@pytest.mark.parametrize("changes", [
    {"expert_cache": 6}, {"expert_cache": 64}, {"cache_policy": "2q"},
    {"prefetch": "stale", "prefetch_max": 0}, {"prefetch": "prev"},
    {"arena_split": "layers", "prefetch": "stale", "prefetch_max": 0},
    {"expert_store": "ram"}, {"expert_store": "ram", "expert_cache": 6},
    {"expert_store": "ram", "prefetch": "stale", "prefetch_max": 0},
])
def test_bonus_zero_output_is_bit_identical_on_the_fixed_path(fixed, tiny_config, run,
                                                                 changes):
    """Layers computed by the device alone, computed again after misses landed, and run
    again because speculation changed their table (per-layer quotas) all give the same
    bits as the whole arena's hits."""
    base = run(tiny_config)
    other = run(replace(tiny_config, **changes))
    assert other["output_hash"] == base["output_hash"]


def test_fixed_path_counts_are_deterministic_and_add_up(fixed, tiny_config, run):
    cfg = replace(tiny_config, prefetch="stale", prefetch_max=0, moce_bonus=0.85)
    a, b = run(cfg), run(cfg)
    assert a["output_hash"] == b["output_hash"]
    for ra, rb in zip(a["layers"], b["layers"]):
        assert (ra["hits"], ra["sync_misses"], ra["pf_issued"]) == \
            (rb["hits"], rb["sync_misses"], rb["pf_issued"])
        assert ra["hits"] + ra["sync_misses"] + ra["pf_late"] + ra["pf_timely"] \
            == ra["lookups"]
    # each layer's time is counted, fixes within it, and the layers' fit in the run's
    for snap in (a, b):
        layer_ms = [r["layer_ms"] for r in snap["layers"]]
        assert min(layer_ms) > 0
        assert sum(layer_ms) <= 1000 * snap["totals"]["seconds"]


def test_read_ahead_in_place_is_the_same_every_run(fixed, small_model, run):
    """With misses read in place (the RAM store) the bodies read the next layer's predicted
    misses ahead (on CUDA, a copy on a stream of its own that only the reading body waits
    for): two runs count the same speculation and compute the same bits as the arena
    without it. The demo's layer shapes, so that on a GPU a copy out of order would read
    rows before they are written."""
    cfg = Config(model=str(small_model), expert_cache=6, expert_store="ram", io_workers=3,
                 io_urgent=1)
    plain = run(cfg)
    a, b = (run(replace(cfg, prefetch="stale", prefetch_max=0)) for _ in range(2))
    assert a["output_hash"] == b["output_hash"] == plain["output_hash"]
    counted = ("pf_issued", "pf_timely", "pf_unused", "sync_misses", "hits")
    for ra, rb in zip(a["layers"], b["layers"]):
        assert [ra[c] for c in counted] == [rb[c] for c in counted]
    assert sum(r["pf_timely"] for r in a["layers"]) > 0  # read ahead and used


@pytest.mark.parametrize("changes", [
    {"expert_cache": 8}, {"expert_cache": 24, "cache_policy": "2q", "prefetch": "prev"},
    {"expert_cache": 24, "prefetch": "stale", "moce_bonus": 0.85},
    {"expert_cache": 24, "expert_store": "ram", "prefetch": "stale", "moce_bonus": 0.85},
    {"expert_cache": 24, "expert_store": "ram", "arena_split": "layers", "prefetch": "stale"},
    {"expert_cache": 24, "expert_store": "ram", "drop_cold": 0.2, "prefetch": "stale"},
])
def test_every_row_a_layer_computes_from_holds_its_expert(fixed, tiny_config, tiny_model, run,
                                                          monkeypatch, changes):
    """Each arena row a body or a fix computes an expert from holds that expert's bytes:
    slots found in the table, speculation rows read ahead (with a resident bonus a queued
    layer runs again once the host changed the residency it routed on, and by then the
    layer after it has read ahead into the set it reads: sets alternate by layer), and the
    rows the host names to a fix. On the CPU, where the rows can be looked at between the
    layers; CUDA runs the same code in graphs."""
    ref, seen, wrong = HostCopy(Checkpoint(tiny_model)), [0], []
    plain_body, plain_fix = DeviceStep._body, DeviceStep.fix

    def check(step, layer, experts, rows):
        for e, r in zip(experts, rows):
            if r >= 0:
                seen[0] += 1
                if not torch.equal(step.experts.mem[r], ref.row((layer, e))):
                    wrong.append((layer, e, r))

    def body(self, l, span):
        plain_body(self, l, span)
        check(self, l, self.pack[l, :self.K].long().tolist(),
              self.pack[l, self.K:2 * self.K].long().tolist())

    def fix(self, layer, rows, ranks=None, staged=None):
        sel = self.pack[layer, :self.K].long().tolist()
        plain_fix(self, layer, rows, ranks, staged)
        check(self, layer, sel if ranks is None else [sel[r] for r in ranks], rows)

    monkeypatch.setattr(DeviceStep, "_body", body)
    monkeypatch.setattr(DeviceStep, "fix", fix)
    snap = run(replace(tiny_config, device="cpu", **changes))
    assert seen[0] and not wrong
    for r in snap["layers"]:  # a dropped expert counts as a lookup too
        assert r["hits"] + r["sync_misses"] + r["pf_late"] + r["pf_timely"] + r["dropped"] \
            == r["lookups"]


def test_fixed_path_logits_equal_the_fully_resident_model(fixed, tiny_config, tiny_model):
    resident = streaming_matches_resident(tiny_config, tiny_model)
    assert resident.run is not None  # the resident model ran the same bodies


def test_a_layer_run_ahead_on_a_table_that_then_changed_runs_again(fixed, tiny_config, run,
                                                                 monkeypatch):
    """Layer l+1 runs before the host settled layer l; when the host's misses or
    speculation (with per-layer quotas, within layer l+1's own quota) then change layer
    l+1's table or residency, it runs again, and the output is still the plain arena's."""
    stale_runs = []
    plain = DeviceFirst._launch

    def launch(self, run, l):
        if self._launched[l] is not None:  # it had run, on a table that changed since
            stale_runs.append(l)
        plain(self, run, l)

    monkeypatch.setattr(DeviceFirst, "_launch", launch)
    base = run(tiny_config)
    quotas = run(replace(tiny_config, arena_split="layers", prefetch="stale", prefetch_max=0,
                         expert_cache=40))
    assert quotas["output_hash"] == base["output_hash"]
    assert stale_runs


def test_a_token_queued_deep_runs_again_from_its_first_miss(fixed, tiny_config, run,
                                                            monkeypatch):
    """After a token that ran each layer once the next is queued deeper; where it misses
    after all, the layers queued after the miss run again (and the queue is shallow from
    there), and the output is the plain arena's."""
    monkeypatch.setattr(device_first, "QUEUE_AFTER_QUIET", 3)  # the tiny model's 4 layers
    deep, again = [], []
    plain = DeviceFirst.step

    def step(self, token, pos):
        queued_deep = self._quiet
        logits = plain(self, token, pos)
        layers = self.engine.mc.num_layers
        deep.append(queued_deep)
        if queued_deep and self._runs > layers:
            again.append(self._runs - layers)
        return logits

    monkeypatch.setattr(DeviceFirst, "step", step)
    base = run(tiny_config)
    deep.clear()
    mixed = run(replace(tiny_config, expert_cache=52))  # most tokens hit, some miss
    assert mixed["output_hash"] == base["output_hash"]
    assert sum(deep) > 10 and again


@pytest.mark.parametrize("shapes", [{"cuda"}, {"cpu", "cuda"}])
@pytest.mark.parametrize("changes", [
    {}, {"drop_cold": 0.2}, {"moce_bonus": 0.85, "prefetch": "stale", "prefetch_max": 0},
    {"drop_cold": 0.1, "prefetch": "prev", "cache_policy": "2q"},
    {"expert_store": "ram"}, {"expert_store": "ram", "drop_cold": 0.2},
])
def test_the_device_first_path_decides_as_the_host_driven_one(tiny_config, monkeypatch,
                                                              shapes, changes):
    """Same routings, hits, misses, speculation, evictions and drops as the path where the
    host routes each layer before its experts run (a route recording takes that path, with
    prompts token by token); only whether a claimed speculation had landed (timely or
    late) depends on read timing."""
    from tuner.engine.session.session import Session
    from tuner.engine.step.route_log import RouteLog

    monkeypatch.setattr(model, "FIXED_SHAPES", shapes)
    cfg = replace(tiny_config, prefill=False, **changes)
    snaps = []
    for host_driven in (False, True):
        s = Session(cfg)
        if host_driven:
            s.engine.route_log = RouteLog(s.engine.mc.num_layers)
        try:
            s.run(120)
            snaps.append(s.snapshot())
        finally:
            s.engine.close()
    keys = ("routings", "lookups", "hits", "sync_misses", "pf_issued", "evictions",
            "dropped", "rerouted", "prev_slots", "stale_slots", "ctrl_slots")
    device, host = ([tuple(row[k] for k in keys) for row in snap["layers"]] for snap in snaps)
    assert device == host
    claimed = [[row["pf_timely"] + row["pf_late"] for row in snap["layers"]] for snap in snaps]
    assert claimed[0] == claimed[1]


def test_on_the_cpu_the_bodies_run_ahead_while_each_computed_its_experts(tiny_config,
                                                                          monkeypatch):
    """On the CPU a body runs as it is queued, so with no speculation from the host the
    next layers run before the host settles the first, for as long as each body computed
    its experts; one that left a miss to the host's fix stops the queue, and the layer
    after it runs once that fix is done. The output is the plain arena's."""
    events = []
    body, settle = DeviceStep.run, DeviceFirst._settle

    def run_body(self, l):
        body(self, l)
        events.append(("run", l, self.computes(l)))

    def settle_layer(self, run, l, pack, stale):
        events.append(("settle", l, None))
        return settle(self, run, l, pack, stale)

    monkeypatch.setattr(DeviceStep, "run", run_body)
    monkeypatch.setattr(DeviceFirst, "_settle", settle_layer)
    cfg = replace(tiny_config, device="cpu", prefill=False, prefetch="off")
    ckpt = Checkpoint(cfg.model)
    L, E = ckpt.config.num_layers, ckpt.config.num_experts
    engine = Engine(ckpt, replace(cfg, expert_cache=L * E), torch.device("cpu"))
    resident = Resident(ckpt, cfg.context, torch.device("cpu"))
    try:
        tokens = []
        for pos in range(40):
            events.clear()
            logits = engine.step(1 + pos % 7, pos)
            tokens.append(list(events))
            assert torch.equal(logits, resident.step(1 + pos % 7, pos))
    finally:
        engine.close()
    ahead = [("run", l, True) for l in range(L)] + [("settle", l, None) for l in range(L)]
    assert tokens[-1] == ahead  # every routed expert resident by then: all hits
    for token in tokens:
        settled: set[int] = set()
        for kind, l, computed in token:
            if kind == "settle":
                settled.add(l)
            elif l > 0 and l - 1 not in settled:  # run ahead of the host
                before = [c for k, m, c in token[:token.index((kind, l, computed))]
                          if k == "run" and m == l - 1]
                assert before[-1], "a layer ran ahead of a layer that left a miss"
    assert any(("run", l, False) in token for token in tokens for l in range(L))
