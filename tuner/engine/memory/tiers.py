"""Three execution sites (seed 002) and the adaptive tier with adapt-fetch (seed 003).

With `cpu_pool` on, a layer's misses are not streamed into the arena. `pcie_frac` of them
go over the link: copied from host RAM into device staging and computed on the device;
the rest are computed on the CPU straight from host RAM. The sites run concurrently, so a
layer costs max(T_vram, T_link, T_cpu), not the sum.

Residency then moves only two ways, both decided from decayed routing counts at fixed
points, so timing never leaks into it:

* the adaptive tier: every `adapt_every` tokens, per layer, the most-routed non-residents
  replace the least-routed residents (free slots of the layer's share are filled first);
* adapt-fetch admission: a link-fetched expert is copied straight into the slot of the
  layer's least-routed resident that this routing does not use, when it is routed at least
  `adapt_fetch_min` and `adapt_fetch_margin` more than that resident. Mode 2 leaves the
  tier's swaps out of layers where an admission ran since the tier's last round.

The host copy (host_copy.py) holds every expert in host RAM, as an engine whose model fits
in RAM does.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext as _no_stream
from dataclasses import dataclass

import numpy as np
import torch

from tuner.config import Config
from tuner.engine.memory.cpu_experts import CpuExperts
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.memory.store import Timeline
from tuner.engine.weights.model import Wide, experts_out, widens
from tuner.knobs import even_budgets
from tuner.vocabulary.counters import C
from tuner.vocabulary.slots import MISS, RESIDENT, SlotMap


@dataclass
class Outputs:
    """A layer's routed experts as the sites left them: the device's (residents, the link
    share) [n, D] in `ranks` order, and the CPU site's [m, D] for `cpu_ranks` (rank order)
    in host memory, the kernel's page-locked buffer beside a GPU, which the next layer's
    compute overwrites once the caller's stream has copied it."""

    device: list[torch.Tensor]
    ranks: list[int]
    cpu: torch.Tensor | None
    cpu_ranks: list[int]

    @property
    def cpu_only(self) -> bool:
        """The CPU site computed every routed expert."""
        return not self.device

    def sum(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Weighted by `w` [k] and summed in rank order, in x's dtype on x's device [D]."""
        parts, ranks = list(self.device), list(self.ranks)
        if self.cpu is not None:  # up as it is (no staging copy where it is page-locked),
            # and widened or narrowed there
            parts.append(self.cpu.to(x.device, non_blocking=True).to(x.dtype))
            ranks += self.cpu_ranks
        outs = parts[0] if len(parts) == 1 else torch.cat(parts)
        if ranks != sorted(ranks):  # back to rank order
            order = sorted(range(len(ranks)), key=ranks.__getitem__)
            outs = outs[torch.tensor(order, device=x.device)]
        return w.to(outs.dtype) @ outs


class Sites:
    """The link and CPU sites beside the arena, paced by emulated bandwidths, and the
    per-layer step that splits a routing between the three sites. The link has a worker
    thread; the CPU site one where torch computes it (numba's kernel, which releases the
    GIL, runs on the caller's thread).

    On CUDA the link uploads each of its experts from the page-locked host copy on a stream
    of its own and computes them there; the CPU site computes on the host (cpu_experts.py)
    and hands its outputs to the device. On the CPU both are plain copies and computes."""

    def __init__(self, arena, host: HostCopy, tier: Tier, counters, clock,
                 hurry: threading.Event | None = None):
        self.arena, self.host, self.tier = arena, host, tier
        self.counters, self.clock = counters, clock
        self.mem, self.nbytes = arena.mem, arena.layout.expert_bytes
        self.cuda = self.mem.is_cuda
        self.link_line, self.cpu_line = Timeline(hurry), Timeline(hurry)
        self._link = ThreadPoolExecutor(1, thread_name_prefix="tuner-link")
        self._cpu = ThreadPoolExecutor(1, thread_name_prefix="tuner-cpu")
        self.stream = torch.cuda.Stream(self.mem.device) if self.cuda else None
        self.link_batch = torch.empty_like(arena.experts.batch)
        self.link_wide = Wide()
        self.cpu_experts = CpuExperts(host, beside_gpu=self.cuda)

    def compute(self, layer: int, x: torch.Tensor, sel: list[int], cfg: Config,
                adapt_fetch: bool, x_host: torch.Tensor | None = None) -> Outputs:
        """The layer's routed experts `sel` on x: residents on the device, the link share
        over the link (admitted into the arena when adapt-fetch allows), the rest on the
        CPU; the three run concurrently. `x_host`: x already in host memory (float32), so
        the CPU site need not wait for a copy of its own."""
        slots, add, tier = self.arena.slots, self.counters.add, self.tier
        add(layer, C.lookups, len(sel))
        plan = slots.claim_layer(layer, sel, stream=False)
        resident = [(r, c.slot) for r, c in enumerate(plan) if c.kind != MISS]
        misses = [(r, e) for r, (c, e) in enumerate(zip(plan, sel)) if c.kind == MISS]
        add(layer, C.hits, len(resident))
        add(layer, C.sync_misses, len(misses))
        self.counters.per_expert.miss[layer, [r for r, _ in misses]] = True
        link = tier.link_share(layer, misses, cfg.pcie_frac, by_count=adapt_fetch)
        on_link = {r for r, _ in link}
        cpu = [(r, (layer, e)) for r, e in misses if r not in on_link]
        jobs, staging = [], iter(self.arena.bypass)
        for r, e in link:
            slot = None
            if adapt_fetch:
                slot = tier.admission_slot(layer, e, set(sel), cfg.adapt_fetch_min,
                                           cfg.adapt_fetch_margin)
            if slot is None:
                jobs.append((r, (layer, e), next(staging), False))
                continue
            evicted = slots.place(slot, (layer, e), RESIDENT)
            slots.pinned.add(slot)
            if evicted is not None:
                add(evicted[0], C.evictions)
            add(layer, C.admissions)
            tier.admitted.add(layer)
            jobs.append((r, (layer, e), slot, cfg.adapt_fetch_verify))
        link_job = self.link(x, jobs) if jobs else None
        x_cpu = (x if x_host is None else x_host).to("cpu", self.cpu_experts.dtype) \
            if cpu else None
        # with every miss on the CPU numba's kernel runs on this thread, without the GIL,
        # once the device's work is queued: a worker's round trip made a layer 0.18 ms
        # slower on the H200 host (lab/cpu_site_gaps.py). Beside the link it runs on the
        # worker: on this thread it made pcie_frac 0.5 a third slower there.
        on_worker = self.cpu_experts.kernel is None or cfg.pcie_frac > 0
        cpu_job = self._cpu.submit(self._run_cpu, x_cpu, cpu) if cpu and on_worker else None
        outs = Outputs([], [], None, [r for r, _ in cpu])
        if resident:
            with self.clock.span(layer, C.vram_ms):
                outs.device.append(experts_out(x, self.arena.gather([s for _, s in resident],
                                                                    x.dtype)))
            outs.ranks += [r for r, _ in resident]
        if cpu:
            outs.cpu, secs = self._run_cpu(x_cpu, cpu) if cpu_job is None else cpu_job.result()
            add(layer, C.cpu_ms, 1000 * secs)
            add(layer, C.cpu_experts, len(cpu))
        if link_job is not None:
            out, secs, verified, mismatches = link_job.result()
            for _, key, dst, _ in jobs:  # admitted experts, now in their rows
                self.arena.publish_row(key, dst)
            outs.device.append(out)
            outs.ranks += [r for r, *_ in jobs]
            add(layer, C.link_ms, 1000 * secs)
            add(layer, C.link_experts, len(jobs))
            add(layer, C.bytes_link, len(jobs) * self.nbytes)
            add(layer, C.verified, verified)
            add(layer, C.mismatches, mismatches)
        return outs

    def tier_round(self, cfg: Config, adapt_fetch: bool) -> None:
        """One round of the adaptive tier: its swaps copied over the link and counted."""
        moves = self.tier.round(skip_admitted=cfg.adapt_fetch == 2 and adapt_fetch)
        add = self.counters.add
        for slot, key, evicted in moves:
            self.copy_in(key, slot)
            self.arena.publish_row(key, slot)  # the copy is queued before any compute
            if evicted is not None:
                add(evicted[0], C.evictions)
            add(key[0], C.tier_swaps)
            add(key[0], C.bytes_link, self.nbytes)

    def link(self, x: torch.Tensor, jobs: list[tuple[int, tuple[int, int], int, bool]]
             ) -> Future:
        """jobs: (rank, key, destination row, verify). Copies each expert from host RAM
        into its destination (a bypass row or an admitted arena slot), then computes them
        there as one batch. Result: (outputs [m, D], seconds, verified, mismatches); the
        seconds are the site's own, the worker having waited for its device work."""
        x_ready = None
        if self.cuda:  # the copies wait for every compute queued so far (rows in use)
            x_ready = torch.cuda.Event()
            x_ready.record()
        return self._link.submit(self._run_link, x, x_ready, jobs)

    def copy_in(self, key: tuple[int, int], dst: int) -> None:
        """The expert's bytes over the link into arena row `dst` (a tier swap or the link
        share; on CUDA an upload on the current stream)."""
        t0 = time.perf_counter()
        self.mem[dst].copy_(self.host.row(key), non_blocking=self.cuda)
        self.link_line.pace(self.nbytes, t0)

    def _run_link(self, x, x_ready, jobs):
        t0 = time.perf_counter()
        verified, mismatches = 0, 0
        stream = self.stream  # None on the CPU
        with torch.cuda.stream(stream) if stream is not None else _no_stream():
            if x_ready is not None:
                assert stream is not None  # the event is recorded on CUDA only
                stream.wait_event(x_ready)
            for _, key, dst, verify in jobs:
                self.copy_in(key, dst)
                if verify:
                    verified += 1
                    mismatches += not torch.equal(self.mem[dst].cpu(), self.host.row(key))
            dsts, experts = [dst for _, _, dst, _ in jobs], self.arena.experts
            if widens(experts.typed, x.dtype):  # the CPU: each row widened into the batch
                out = experts_out(x, self.link_wide.gather([experts.by_row[d] for d in dsts],
                                                           x.dtype))
            else:
                batch = self.link_batch[:len(jobs)]
                torch.index_select(self.mem, 0, torch.tensor(dsts, device=self.mem.device),
                                   out=batch)
                out = experts_out(x, self.arena.layout.weights(batch))
        if stream is not None:
            stream.synchronize()  # the outputs are ready for the compute stream
        return out, time.perf_counter() - t0, verified, mismatches

    def _run_cpu(self, x, jobs):
        t0 = time.perf_counter()
        out = self.cpu_experts(x, [key for _, key in jobs])
        self.cpu_line.pace(self.nbytes * len(jobs), t0)
        return out, time.perf_counter() - t0

    def close(self) -> None:
        self._link.shutdown(wait=True)
        self._cpu.shutdown(wait=True)


class Tier:
    """Decayed per-layer routing counts and the decisions made from them."""

    def __init__(self, layers: int, experts: int, slots: SlotMap):
        self.counts = np.zeros((layers, experts))
        self.slots = slots
        self.admitted: set[int] = set()  # layers with an admission since the last round
        self._link_carry = 0.0  # the link share's rounding remainder, carried layer to layer

    @property
    def share(self) -> list[int]:
        """Slots each layer may fill: its quota, or an even share of the arena."""
        return self.slots.quotas or even_budgets(self.slots.n, len(self.counts))

    def observe(self, layer: int, sel: list[int], decay: float) -> None:
        row = self.counts[layer]
        row *= decay
        row[sel] += 1

    def link_share(self, layer: int, misses: list[tuple[int, int]], frac: float,
                   by_count: bool) -> list[tuple[int, int]]:
        """The (rank, expert) misses sent over the link: the last ones in rank order, or
        with adapt-fetch the most-routed ones (ties by rank). A layer has only a few misses
        at decode, so the fractional remainder is carried to the next layer: over a token
        the link gets `frac` of the misses, not frac rounded per layer."""
        want = frac * len(misses) + self._link_carry
        n = min(len(misses), int(want + 1e-9))
        self._link_carry = want - n
        if n == 0:
            return []
        if not by_count:
            return misses[-n:]
        row = self.counts[layer]
        return sorted(misses, key=lambda m: (-row[m[1]], m[0]))[:n]

    def admission_slot(self, layer: int, expert: int, routed: set[int], min_count: float,
                       margin: float) -> int | None:
        """The slot a fetched expert may take, or None: a free slot while the layer is under
        its share, else the least-routed resident of the layer that this routing does not
        use (pinned slots, which include earlier admissions, are never taken)."""
        row, slots = self.counts[layer], self.slots
        if row[expert] < min_count:
            return None
        if slots.free and slots.resident_per_layer[layer] < self.share[layer]:
            return slots.free[0]
        candidates = [(row[e], e, s) for e, s in self._residents(layer)
                      if e not in routed and s not in slots.pinned]
        if not candidates:
            return None
        count, _, slot = min(candidates)
        return slot if row[expert] >= count + margin else None

    def _residents(self, layer: int) -> list[tuple[int, int]]:
        slots = self.slots
        return sorted((k[1], s) for s, k in enumerate(slots.key)
                      if k is not None and k[0] == layer and slots.state[s] == RESIDENT)

    def round(self, skip_admitted: bool) -> list[tuple[int, tuple[int, int], tuple | None]]:
        """One tier round: (slot, new key, evicted key) moves, already applied to the slot
        map; the caller copies the bytes. Layers in order, most-routed first."""
        moves: list[tuple[int, tuple[int, int], tuple | None]] = []
        slots, share = self.slots, self.share
        for layer in range(len(share)):
            if skip_admitted and layer in self.admitted:
                continue
            row = self.counts[layer]
            resident = {e for e, _ in self._residents(layer)}
            wanted = [e for e in np.argsort(-row, kind="stable").tolist()
                      if e not in resident and slots.find((layer, e)) is None and row[e] > 0]
            # fill the layer's free share first
            while wanted and slots.free and slots.resident_per_layer[layer] < share[layer]:
                slot, e = slots.free[0], wanted.pop(0)
                moves.append((slot, (layer, e), slots.place(slot, (layer, e), RESIDENT)))
            by_count = sorted((row[e], e, s) for e, s in self._residents(layer))
            for (count, _, slot), e in zip(by_count, wanted):
                if row[e] <= count:
                    break
                moves.append((slot, (layer, e), slots.place(slot, (layer, e), RESIDENT)))
        self.admitted.clear()
        return moves
