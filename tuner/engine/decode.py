"""The streaming decode step: one token through every layer, experts served by the arena.

Per layer (seed 000 section 3, `at_layer` and `after_layer`):

1. route (exact or moce against the published residency);
2. claim: pin the wanted residents, claim wanted speculation (timely when its read is
   complete, late when still in flight: promoted to urgent and waited for), then take a
   victim slot for each miss in rank order and issue its demand read;
3. speculate: read ahead the predicted misses of the next layer (prefetch off/prev/stale);
4. compute the experts as their bytes arrive and sum them in rank order, so the output
   never depends on which read finished first;
5. retire the layer's unclaimed speculation into limbo; release the previous limbo
   generation (after waiting for its running reads). Release points are fixed, so read
   timing never leaks into residency.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from tuner.engine import router
from tuner.engine.checkpoint import Checkpoint, part_views
from tuner.engine.clock import clock_for
from tuner.engine.counters import Counters
from tuner.engine.model import Decoder, expert_out
from tuner.engine.policies import policy_name
from tuner.engine.predict import predict
from tuner.engine.slots import RESIDENT, SPEC, SlotMap, quotas_for
from tuner.engine.store import Read, ReadPool
from tuner.engine.tiers import HostCopy, Sites, Tier

DEFAULT_ARENA_SHARE = 0.20


def arena_slots(requested: int, layers: int, experts: int) -> int:
    total = layers * experts
    if requested <= 0:
        return max(1, round(total * DEFAULT_ARENA_SHARE))
    return min(requested, total)


@dataclass
class RouteLog:
    """Every routing the engine made, for trace recording: expert ids per layer and token
    in rank order, optionally the router logits, and the tokens where conversations start."""

    layers: int
    keep_logits: bool = False
    experts: list[list[int]] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)

    def add(self, sel: list[int], logits: torch.Tensor) -> None:
        self.experts.append(sel)
        if self.keep_logits:
            self.logits.append(logits.detach().float().cpu().numpy())

    def start(self) -> None:
        self.starts.append(len(self.experts) // self.layers)


class Engine:
    def __init__(self, ckpt: Checkpoint, cfg, device: torch.device):
        mc = ckpt.config
        self.ckpt, self.mc, self.cfg, self.device = ckpt, mc, cfg, device
        self.dec = Decoder(mc, ckpt.dense(), cfg.context, device)
        L, E, K = mc.num_layers, mc.num_experts, mc.top_k
        n = arena_slots(cfg.expert_cache, L, E)
        quotas = quotas_for(cfg.arena_split, cfg.arena_budgets, L, n)  # before any thread
        self.slots = SlotMap(n, policy_name(cfg.decode_2q), quotas)
        # Every slot and staging buffer is allocated once, before decoding. On CUDA the
        # arena is in device memory and reads land in a pinned host mirror of it, from which
        # each completed read is uploaded on a copy stream that overlaps compute.
        self.cuda = device.type == "cuda"
        self.mem = torch.empty(n + K, ckpt.expert_bytes, dtype=torch.uint8, device=device)
        self.host_mem = torch.empty(n + K, ckpt.expert_bytes, dtype=torch.uint8,
                                    pin_memory=True) if self.cuda else self.mem
        self.bufs = [memoryview(self.host_mem[i].numpy()) for i in range(n + K)]
        self.views = [part_views(self.mem[i], ckpt.parts) for i in range(n + K)]
        self.staging = list(range(n, n + K))  # bypass buffers for misses with no eligible slot
        self.extents = {(l, e): ckpt.extents(l, e) for l in range(L) for e in range(E)}
        self.copy_stream = torch.cuda.Stream(device) if self.cuda else None
        self.layer_done = None  # CUDA event: the compute of the last finished layer
        self.uploads: dict[int, torch.cuda.Event] = {}  # slot -> its last upload's end
        self._upload_lock = threading.Lock()
        self.pool = ReadPool(cfg.io_workers, cfg.io_urgent, cfg.io_direct,
                             cfg.io_piece_kib * 1024,
                             on_complete=self._upload if self.cuda else None)
        self.counters = Counters(L, E, K, cfg.window)
        self.clock = clock_for(device, self.counters)
        self.reads: dict[int, Read] = {}  # slot -> its read, until the read is accounted
        self.spec_for: dict[int, list[int]] = {l: [] for l in range(L)}
        self.limbo_new: list[int] = []
        self.limbo_old: list[int] = []
        self.prev_sel: list[list[int] | None] = [None] * L
        self.routed = np.zeros((L, E))  # routings per (layer, expert), for popularity
        self.route_log: RouteLog | None = None  # set one to record routings
        self.tier = Tier(L, E, self.slots)
        self.sites: Sites | None = None  # made when cpu_pool is first switched on
        self.steps = 0
        self.apply_live(cfg)

    # -- settings ----------------------------------------------------------------------
    def apply_live(self, cfg) -> None:
        """Takes the live knobs of `cfg` (called between tokens only); raises ValueError,
        having changed nothing, when they do not fit this model and arena."""
        quotas = quotas_for(cfg.arena_split, cfg.arena_budgets, self.mc.num_layers,
                            self.slots.n)
        if cfg.cpu_pool and self.sites is None:
            self.drain()  # no speculation in flight once misses stop streaming
            self.sites = Sites(HostCopy(self.ckpt, pin=self.cuda), self.mem, self.views,
                               self.ckpt.expert_bytes)
        self.cfg = cfg
        self.pool.ssd.gbps = cfg.ssd_gbps
        self.pool.jitter_ms = cfg.io_jitter_ms
        if self.sites:
            self.sites.link_line.gbps = cfg.link_gbps
            self.sites.cpu_line.gbps = cfg.cpu_gbps
        self.slots.set_policy(policy_name(cfg.decode_2q))
        self.slots.quotas = quotas
        self.use_residency = cfg.moce_bonus > 0 or cfg.moce_bonus_r1 > 0
        self.adapt_fetch = cfg.cpu_pool and cfg.adapt_fetch > 0 and cfg.pcie_frac > 0

    def notes(self) -> list[str]:
        cfg, out = self.cfg, []
        if cfg.prefetch_route and cfg.moce_bonus <= 0:
            out.append("prefetch_route is off: it needs moce_bonus > 0")
        if cfg.expert_cache > self.slots.n:
            out.append(f"expert_cache {cfg.expert_cache} capped at {self.slots.n}: "
                       "the model has no more layer-expert pairs")
        if not cfg.cpu_pool and (cfg.pcie_frac or cfg.adapt_fetch or cfg.adapt_every):
            out.append("pcie_frac, adapt_fetch and adapt_every act only with cpu_pool = 1")
        if cfg.cpu_pool and cfg.prefetch != "off":
            out.append("prefetch is off with cpu_pool: misses are not streamed into the arena")
        if cfg.cpu_pool and cfg.adapt_fetch and not cfg.pcie_frac:
            out.append("adapt_fetch is off: there is no link share (pcie_frac = 0)")
        if cfg.cpu_pool and not cfg.adapt_every and not self.adapt_fetch:
            out.append("with cpu_pool the arena changes only by the adaptive tier "
                       "(adapt_every) and adapt-fetch; both are off")
        if cfg.arena_budgets and cfg.arena_split != "layers":
            out.append("arena_budgets act only with arena_split = layers")
        if cfg.moce_protect > self.mc.top_k:
            out.append(f"moce_protect {cfg.moce_protect} acts as {self.mc.top_k} (top-k)")
        return out

    def reset_counters(self) -> None:
        mc = self.mc
        self.counters = Counters(mc.num_layers, mc.num_experts, mc.top_k, self.cfg.window)
        self.clock.counters = self.counters

    def resident_counts(self) -> list[int]:
        return [self.slots.resident_per_layer[l] for l in range(self.mc.num_layers)]

    # -- one token ---------------------------------------------------------------------
    def reset_sequence(self) -> None:
        """A new conversation: the prev-token predictor has nothing to go on."""
        self.prev_sel = [None] * self.mc.num_layers
        if self.route_log is not None:
            self.route_log.start()

    @torch.inference_mode()
    def step(self, token: int, pos: int) -> torch.Tensor:
        """Runs one token at position `pos`; returns its logits [V]."""
        dec, L, cfg = self.dec, self.mc.num_layers, self.cfg
        if cfg.cpu_pool and cfg.adapt_every and self.steps and self.steps % cfg.adapt_every == 0:
            self._tier_round()
        self.steps += 1
        h = dec.embed_token(token)
        stale: torch.Tensor | None = None  # layer l's router on layer l-1's input
        for l in range(L):
            h = dec.attention(l, h, pos)
            x = dec.moe_input(l, h)
            with self.clock.span(l, "layer_ms"):
                h, stale = self._moe(l, x, h, stale)
        logits = dec.logits(h)  # queued before the flush waits on the layers' timings
        self.clock.flush()
        return logits

    def _moe(self, l: int, x: torch.Tensor, h: torch.Tensor, stale: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One layer's MoE block: (new residual, layer l+1's router on this input)."""
        dec, cfg = self.dec, self.cfg
        logits = dec.router_logits(l, x)
        sel, selected = self._route(l, logits)
        self.routed[l, sel] += 1
        self.counters.route(sel)
        self.tier.observe(l, sel, cfg.adapt_decay)
        if self.route_log is not None:
            self.route_log.add(sel, logits)
        self._probe(l, sel, x, stale)
        stale_next = dec.router_logits(l + 1, x) if l + 1 < self.mc.num_layers else None
        if cfg.cpu_pool:
            outs = self._sites(l, x, sel)
        else:
            sources = self._claim(l, sel)
            if stale_next is not None and cfg.prefetch != "off":
                self._speculate(l + 1, stale_next)
            outs = self._compute(l, x, sources)
        w = router.weights(logits, selected, self.mc.norm_topk_prob)
        h = h + dec.moe_output(l, x, w, outs)
        if self.cuda:  # uploads into slots this layer used must wait for its compute
            self.layer_done = torch.cuda.Event()
            self.layer_done.record()
        self._retire(l)
        self._release_limbo(l)
        return h, stale_next

    def _resident_mask(self, layer: int) -> torch.Tensor:
        res = self.slots.resident
        mask = torch.tensor([res((layer, e)) for e in range(self.mc.num_experts)])
        return mask.to(self.device, non_blocking=True)

    def _route(self, layer: int, logits: torch.Tensor) -> tuple[list[int], torch.Tensor]:
        """The selected experts in rank order, as ids and as the tensor they came in."""
        cfg = self.cfg
        mask = self._resident_mask(layer) if self.use_residency else None
        sel = router.select(logits, mask, self.mc.top_k, cfg.moce_protect, cfg.moce_bonus,
                            cfg.moce_bonus_r1)
        return sel.tolist(), sel

    def _probe(self, layer: int, sel: list[int], x: torch.Tensor,
               stale: torch.Tensor | None) -> None:
        """Scores prev, stale and ctrl on this routing; layer 0 and a sequence's first token
        are unscored, never wrong."""
        K, add, actual = self.mc.top_k, self.counters.add, set(sel)
        ctrl = self.dec.routers[layer] @ x  # a GEMV of its own, so the probe is checked
        guesses = {
            "prev": self.prev_sel[layer],
            "stale": None if stale is None else torch.topk(stale, K).indices.tolist(),
            "ctrl": torch.topk(ctrl, K).indices.tolist(),
        }
        for name, guess in guesses.items():
            if guess is None:
                continue
            named = len(actual.intersection(guess))
            add(layer, f"{name}_scored")
            add(layer, f"{name}_slots", named)
            add(layer, f"{name}_whole", float(named == K))
        self.prev_sel[layer] = sel

    def _read(self, key: tuple[int, int], slot: int, speculative: bool) -> Read:
        if self.cuda:  # the pinned mirror of the slot is reused: its last upload must be over
            prior = self.uploads.pop(slot, None)
            if prior is not None:
                prior.synchronize()
        return self.pool.submit(key, self.extents[key], self.bufs[slot], speculative,
                                slot=slot, after=self.layer_done)

    def _upload(self, read: Read) -> None:
        """On a reader thread, once a read is complete: host mirror -> device slot on the copy
        stream, after the compute that last used the slot."""
        start, done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # one upload at a time into the stream, so no span holds another's wait or copy
        with self._upload_lock, torch.cuda.stream(self.copy_stream):
            if read.after is not None:
                self.copy_stream.wait_event(read.after)
            start.record()
            self.mem[read.slot].copy_(self.host_mem[read.slot], non_blocking=True)
            done.record()
        read.ready = done
        self.uploads[read.slot] = done
        self.clock.later(read.key[0], "h2d_ms", start, done)
        self.clock.later(read.key[0], "bytes_h2d", None, None, read.bytes_read)

    def _claim(self, layer: int, sel: list[int]) -> list[tuple[int, Read | None, object]]:
        """(buffer index, read to wait for or None, CUDA event to wait for or None) per rank.
        A late speculative read keeps its speculative flag: its bytes count as speculative."""
        slots, add = self.slots, self.counters.add
        add(layer, "lookups", len(sel))
        plan = slots.claim_layer(layer, sel)
        for key in slots.evicted:
            add(key[0], "evictions")
        slots.evicted.clear()
        staging = iter(self.staging)
        sources: list[tuple[int, Read | None, object]] = []
        for (kind, slot), e in zip(plan, sel):
            read, ready = None, None
            if kind == "hit":
                add(layer, "hits")
            elif kind == "spec":  # speculation claimed by the router
                read = self.reads.pop(slot)
                self.spec_for[layer].remove(slot)
                # done is set only after the upload was queued (CUDA): pieces alone are not
                # enough to know the device copy is ordered before this layer's compute
                if read.complete and read.done.is_set():
                    add(layer, "pf_timely")
                    add(layer, "bytes_spec", read.bytes_read)
                    read, ready = None, read.ready
                else:
                    add(layer, "pf_late")
                    self.pool.promote(read)
            else:  # miss or bypass: a demand read, in rank order
                if kind == "bypass":
                    slot = next(staging)
                    add(layer, "bypass")
                add(layer, "sync_misses")
                read = self._read((layer, e), slot, speculative=False)
            sources.append((slot, read, ready))
        return sources

    def _speculate(self, target: int, stale: torch.Tensor) -> None:
        cfg, slots, add = self.cfg, self.slots, self.counters.add
        issued = 0
        guess = predict(cfg, self.mc.top_k, self.prev_sel[target], stale,
                        lambda: self._resident_mask(target))
        for e in guess:
            key = (target, e)
            slot = slots.find(key)
            if slot is not None:  # resident or already in flight: costs nothing
                if cfg.prefetch_touch and slots.state[slot] == RESIDENT:
                    slots.policy.touch(slot)
                continue
            if cfg.prefetch_max and issued >= cfg.prefetch_max:
                break
            slot = slots.victim(avoid_layer=target, layer=target)
            if slot is None:
                break
            evicted = slots.place(slot, key, SPEC)
            if evicted is not None:
                add(evicted[0], "evictions")
            self.reads[slot] = self._read(key, slot, speculative=True)
            self.spec_for[target].append(slot)
            add(target, "pf_issued")
            issued += 1

    def _compute(self, layer: int, x: torch.Tensor,
                 sources: list[tuple[int, Read | None, object]]) -> list[torch.Tensor]:
        """Expert outputs in rank order, computing the ready ones first."""
        add = self.counters.add
        outs: list[torch.Tensor | None] = [None] * len(sources)
        ready_first = sorted(range(len(sources)), key=lambda r: sources[r][1] is not None)
        for r in ready_first:
            buf, read, ready = sources[r]
            if read is not None:
                add(layer, "stall_ms", 1000 * self.pool.wait(read))
                add(layer, "bytes_spec" if read.speculative else "bytes_demand",
                    read.bytes_read)
                ready = read.ready
            if ready is not None:  # CUDA: compute waits for the upload, the host does not
                torch.cuda.current_stream().wait_event(ready)
            outs[r] = expert_out(x, *self.views[buf])
        return outs

    # -- three execution sites (cpu_pool) ------------------------------------------------
    def _sites(self, layer: int, x: torch.Tensor, sel: list[int]) -> list[torch.Tensor]:
        """Residents on the device, the link share over the link (admitted into the arena
        when adapt-fetch allows), the rest on the CPU; the three run concurrently."""
        cfg, slots, add, tier = self.cfg, self.slots, self.counters.add, self.tier
        add(layer, "lookups", len(sel))
        plan = slots.claim_layer(layer, sel, stream=False)
        resident = [(r, slot) for r, (kind, slot) in enumerate(plan) if kind != "miss"]
        misses = [(r, e) for r, ((kind, _), e) in enumerate(zip(plan, sel)) if kind == "miss"]
        add(layer, "hits", len(resident))
        add(layer, "sync_misses", len(misses))
        link = tier.link_share(layer, misses, cfg.pcie_frac, by_count=self.adapt_fetch)
        on_link = {r for r, _ in link}
        cpu = [(r, (layer, e)) for r, e in misses if r not in on_link]
        jobs, staging = [], iter(self.staging)
        for r, e in link:
            slot = None
            if self.adapt_fetch:
                slot = tier.admission_slot(layer, e, set(sel), cfg.adapt_fetch_min,
                                           cfg.adapt_fetch_margin)
            if slot is None:
                jobs.append((r, (layer, e), next(staging), False))
                continue
            evicted = slots.place(slot, (layer, e), RESIDENT)
            slots.pinned.add(slot)
            if evicted is not None:
                add(evicted[0], "evictions")
            add(layer, "admissions")
            tier.admitted.add(layer)
            jobs.append((r, (layer, e), slot, cfg.adapt_fetch_verify))
        link_job = self.sites.link(x, jobs) if jobs else None
        cpu_job = self.sites.cpu(x, cpu) if cpu else None
        with self.clock.span(layer, "vram_ms"):
            outs = {r: expert_out(x, *self.views[slot]) for r, slot in resident}
        if link_job is not None:
            done, secs, verified, mismatches = link_job.result()
            outs.update(done)
            add(layer, "link_ms", 1000 * secs)
            add(layer, "link_experts", len(jobs))
            add(layer, "bytes_link", len(jobs) * self.ckpt.expert_bytes)
            add(layer, "verified", verified)
            add(layer, "mismatches", mismatches)
        if cpu_job is not None:
            done, secs = cpu_job.result()
            outs.update({r: y.to(self.device) for r, y in done.items()})
            add(layer, "cpu_ms", 1000 * secs)
            add(layer, "cpu_experts", len(cpu))
        return [outs[r] for r in range(len(sel))]

    def _tier_round(self) -> None:
        moves = self.tier.round(skip_admitted=self.cfg.adapt_fetch == 2 and self.adapt_fetch)
        for slot, key, evicted in moves:
            self.sites.copy_in(key, slot)
            if evicted is not None:
                self.counters.add(evicted[0], "evictions")
            self.counters.add(key[0], "tier_swaps")
            self.counters.add(key[0], "bytes_link", self.ckpt.expert_bytes)

    def _retire(self, layer: int) -> None:
        """Unclaimed speculation for this layer: queued pieces cancelled, slot to limbo."""
        for slot in self.spec_for[layer]:
            self.pool.cancel(self.reads[slot])
            self.slots.retire(slot)
            self.limbo_new.append(slot)
        self.spec_for[layer] = []
        self.slots.pinned.clear()

    def _release_limbo(self, layer: int) -> None:
        """Releases the previous generation of limbo, then rotates (after_layer)."""
        add = self.counters.add
        for slot in self.limbo_old:
            read = self.reads.pop(slot)
            add(layer, "stall_ms", 1000 * self.pool.wait(read))
            target = read.key[0]
            done, cancelled, _ = read.counts()
            cls = "pf_cancelled" if done == 0 else "pf_partial" if cancelled else "pf_unused"
            add(target, cls)
            add(target, "bytes_spec", read.bytes_read)
        self.slots.release(self.limbo_old)
        self.limbo_old, self.limbo_new = self.limbo_new, []

    def drain(self) -> None:
        """Settles all speculation (before a rebuild or at the end of a run)."""
        last = self.mc.num_layers - 1
        for layer in range(self.mc.num_layers):
            self._retire(layer)
        self._release_limbo(last)
        self._release_limbo(last)
        self.counters.end_token(0.0, tokens=0)

    def close(self) -> None:
        self.drain()
        self.pool.close()
        if self.sites:
            self.sites.close()
