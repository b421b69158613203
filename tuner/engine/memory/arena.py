"""The arena: expert rows in fast memory, the slot map that says what sits where, and the
way bytes get in.

Rows 0..n-1 are the slots; rows n..n+K-1 serve misses for which no slot was eligible
(bypass). Every row and staging buffer is allocated once, before decoding.

On the CPU the store reads straight into a row. On CUDA reads land in a pinned staging ring
in host memory. With `miss_direct` (`stages`) a layer's fix reads its misses and the
speculation it claimed in place from their ring entries, as the RAM store's misses are read
from its host copy, and the host keeps each from the bytes the fix landed with a device
copy: no upload, no event of its own. Otherwise each expert is uploaded from its ring
entry straight into its row (speculation as soon as it arrives, before its layer runs), one
host-to-device copy on a copy stream as soon as its read is in, after the compute that
last read that row. Compute waits for an upload through an event; the host never does.

The device finds experts through a table [L, E] (arena row, or -1): an expert enters it
once its bytes are in its row (or, on CUDA, once the compute stream waits for them) and
leaves it when its slot is evicted, released or retired, so a layer's body on the device
can compute its resident experts without asking the host (device_step.py). The table and
the router's residency mask are host arrays mirrored to the device before device work.

A layer's experts are computed from one gather of their rows into a batch buffer
(`gather`), so the hot path issues the same few kernels whatever k is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from tuner.config import Config
from tuner.engine.memory.experts import SPEC_SETS, Experts, reads_far
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.memory.store import Read, open_reads
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Weights
from tuner.vocabulary.counters import C
from tuner.vocabulary.slots import Key, SlotMap

RING_LAYERS = 6  # staging entries per routed expert: a layer's demand plus three layers of
# speculation (issued, claimed or in limbo) stay below it, so a batch is one or two runs


@dataclass(eq=False)
class Fetch:
    """An expert on its way into arena row `row`."""

    key: Key
    row: int
    read: Read
    entry: int = -1  # its staging-ring entry (CUDA)
    uploaded: bool = False
    ready: torch.cuda.Event | None = None  # CUDA: the bytes are in the row


class StagingRing:
    """Pinned host buffers the store reads into.

    Entries are taken in ring order, skipping those still held (a read in flight or not yet
    uploaded); an entry whose last upload may still be copying from it is waited for."""

    def __init__(self, entries: int, row_bytes: int):
        self.host = torch.zeros(entries, row_bytes, dtype=torch.uint8, pin_memory=True)
        self.bufs = [self.host[i].numpy().data for i in range(entries)]
        self.held = [False] * entries
        self.copied: list[torch.cuda.Event | None] = [None] * entries
        self.head = 0

    def take(self) -> int:
        n = len(self.held)
        for step in range(n):
            i = (self.head + step) % n
            if not self.held[i]:
                copied = self.copied[i]
                if copied is not None:
                    copied.synchronize()
                    self.copied[i] = None
                self.held[i] = True
                self.head = (i + 1) % n
                return i
        raise RuntimeError(f"all {n} staging entries are held: more reads in flight than "
                           "the arena was sized for")

    def give(self, entry: int, copied: torch.cuda.Event | None = None) -> None:
        self.held[entry] = False
        self.copied[entry] = copied


class Mirror:
    """A host array [L, E] the host changes at will, its copy on the compute device brought
    up to date by `sync` before device work reads it, and a version per layer that moves
    with every change of that layer's row. The copy goes through a pinned shadow, so the
    host may change the array again while the copy is still queued."""

    def __init__(self, host: torch.Tensor, device: torch.device):
        self.host, self.np = host, host.numpy()
        self.version = [0] * host.shape[0]
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.current_stream(device) if self.cuda else None  # compute
        self.dev = host.to(device) if self.cuda else host
        self.shadow = torch.empty_like(host, pin_memory=True) if self.cuda else None
        # the last copy's event, recorded again by each (making one costs the host more)
        self._copied = torch.cuda.Event() if self.cuda else None
        self._dirty = False

    def set(self, key: Key, value) -> None:
        if self.np[key] != value:
            self.np[key] = value
            self.version[key[0]] += 1
            self._dirty = True

    def sync(self) -> None:
        if not (self.cuda and self._dirty):
            return
        assert self.shadow is not None and self._copied is not None  # made on CUDA
        self._copied.synchronize()  # long done: the host has waited on later work since
        self.shadow.copy_(self.host)
        self.dev.copy_(self.shadow, non_blocking=True)
        self._copied.record(self.stream)
        self._dirty = False


def _hooks(mask: Mirror, table: Mirror) -> tuple[Callable[[Key, bool], None],
                                                 Callable[[Key], None]]:
    """The slot map's hooks: residency into the router's mask, a slot leaving into the
    table. They hold the mirrors, not the arena: a slot map that pointed back at its arena
    would keep a replaced engine's rows alive until the cycle collector ran."""

    def resident(key: Key, on: bool) -> None:
        mask.set(key, on)

    def leave(key: Key) -> None:
        table.set(key, -1)

    return resident, leave


class Arena:
    def __init__(self, ckpt: Checkpoint, slots: int, policy: str, device: torch.device, cfg: Config,
                 clock, quotas: list[int] | None = None,
                 check: Callable[[Read], str | None] | None = None,
                 hurry: threading.Event | None = None):
        mc = ckpt.config
        L, E, K = mc.num_layers, mc.num_experts, mc.top_k
        self.layout, self.device, self.clock = ckpt.layout, device, clock
        self.cuda = device.type == "cuda"
        self.slots = SlotMap(slots, policy, quotas)
        self.n = slots
        self.bypass = list(range(slots, slots + K))
        self._batch_rows = torch.zeros(K, dtype=torch.int64, pin_memory=self.cuda)
        self.extents = {(l, e): ckpt.extents(l, e) for l in range(L) for e in range(E)}
        self.pool = open_reads(cfg, device, check=check, hurry=hurry)  # io_reader's
        # the RAM store: misses are copied from here, never read
        self.host = HostCopy(ckpt, pin=self.cuda, check=check) \
            if cfg.expert_store == "ram" else None
        far = self.host.mem if self.host is not None and cfg.miss_direct \
            and reads_far(device, ckpt.layout) else None
        # misses read in place: layer bodies read the next layer's predictions ahead into
        # rows after the bypass rows (SPEC_SETS sets of k)
        spec = SPEC_SETS * K if far is not None else 0
        # padding bytes stay zero, so a row compares equal to the checkpoint's bytes
        self.mem = torch.zeros(slots + K + spec, ckpt.row_bytes, dtype=torch.uint8,
                               device=device)
        # where reads land: on CUDA the staging ring (not with the RAM store), else the rows
        self.ring: StagingRing | None = None
        if self.cuda and self.host is None:
            self.ring = StagingRing(RING_LAYERS * K, ckpt.row_bytes)
        # miss_direct with the disk store: a layer's fix reads its misses from the ring
        staging = self.ring.host if self.ring is not None and cfg.miss_direct else None
        self.experts = Experts(self.mem, ckpt.layout, K, far, spec=bool(spec), staging=staging)
        self.expert_bytes = ckpt.expert_bytes
        # the router's view of residency, and where the device finds each expert
        self.residency = Mirror(torch.zeros(L, E, dtype=torch.bool), device)
        self.mask_host = self.residency.host
        self.table = Mirror(torch.full((L, E), -1, dtype=torch.int64), device)
        self.slots.on_resident, self.slots.on_leave = _hooks(self.residency, self.table)
        # the compute stream's last read of any row, recorded again by each (waiting for it
        # before its first record waits for nothing)
        self.used = torch.cuda.Event() if self.cuda else None
        self.rows: list[memoryview] | None = None
        if self.cuda:
            self.copy_stream = torch.cuda.Stream(device)
            # the compute stream, held once: asking torch for it costs more than an event
            self.compute = torch.cuda.current_stream(device)
        else:
            self.rows = [self.mem[i].numpy().data for i in range(slots + K)]

    @property
    def direct(self) -> bool:
        """Misses are read in place by a layer's body (device_step.py)."""
        return self.experts.far is not None

    @property
    def stages(self) -> bool:
        """A layer's fix reads its misses in place from the staging ring, with no upload
        (`land(..., in_place=True)`, `keep_staged`)."""
        return self.experts.staging is not None

    @property
    def device_bytes(self) -> int:
        """Expert bytes held where the experts are computed: the rows (slots, bypass and,
        with misses read in place, speculation) and the landing sets."""
        landing = self.experts.landing
        return self.mem.nbytes + (0 if landing is None else landing.nbytes)

    # -- residency and the table ---------------------------------------------------------
    def mask(self, layer: int) -> torch.Tensor:
        """Layer `layer`'s residency [E] on the compute device."""
        self.residency.sync()
        return self.residency.dev[layer]

    def sync(self) -> None:
        """The mask and the table, current on the device for the work queued next."""
        self.residency.sync()
        self.table.sync()

    def version(self, layer: int) -> tuple[int, int]:
        """Moves whenever the layer's residency or table entries change."""
        return self.residency.version[layer], self.table.version[layer]

    def publish(self, fetches: list[Fetch]) -> None:
        """Enters landed experts into the device's table. On CUDA an upload must be complete
        or waited for by the compute stream (`land` does)."""
        for f in fetches:
            self.publish_row(f.key, f.row)

    def publish_row(self, key: Key, row: int) -> None:
        if row < self.n and self.slots.key[row] == key:  # a bypass row is never published
            self.table.set(key, row)

    def mark_used(self) -> None:
        """The compute stream has queued reads of rows: uploads into rows wait for them."""
        if self.used is not None:
            self.used.record(self.compute)

    # -- bytes in ------------------------------------------------------------------------
    def fetch(self, key: Key, row: int, speculative: bool) -> Fetch:
        """Issues the read of `key` for row `row` (`fetch_all`)."""
        return self.fetch_all([(key, row)], speculative)[0]

    def fetch_all(self, wanted: list[tuple[Key, int]], speculative: bool) -> list[Fetch]:
        """Issues the reads of (key, row) pairs together, in order (from the RAM store:
        nothing to read): on the CPU into the rows, on CUDA into staging entries."""
        if self.host is not None:
            return [Fetch(key, row, Read.landed(key, self.expert_bytes, speculative))
                    for key, row in wanted]
        if self.rows is not None:
            rows = self.rows
            reads = self.pool.submit_all([(key, self.extents[key], rows[row])
                                          for key, row in wanted], speculative)
            return [Fetch(key, row, read) for (key, row), read in zip(wanted, reads)]
        ring = self.ring
        assert ring is not None  # CUDA reading from disk
        entries = [ring.take() for _ in wanted]
        reads = self.pool.submit_all([(key, self.extents[key], ring.bufs[entry])
                                      for (key, _), entry in zip(wanted, entries)], speculative)
        return [Fetch(key, row, read, entry)
                for (key, row), read, entry in zip(wanted, reads, entries)]

    def land(self, fetches: list[Fetch], in_place: bool = False) -> float:
        """Waits for the reads of `fetches`, uploading those that are in together whenever
        it waits for one (their copies overlap the reads still running), makes the compute
        stream wait for their bytes and publishes them; returns the seconds waited for
        reads (the stall). `in_place` (`stages`): nothing is uploaded; what is not on the
        device yet stays in its staging entry for the layer's fix to read (`keep_staged`)."""
        waited = 0.0
        for f in fetches:  # uploaded ones (speculation that arrived) are complete
            if f.uploaded:
                continue
            waited += self.pool.wait(f.read)
            if in_place:
                continue
            arrived = [g for g in fetches if not g.uploaded and g.read.done.is_set()]
            for g in arrived:
                self.pool.wait(g.read)  # raises a failed read's error
            self.upload(arrived)
        self._published([f for f in fetches if f.uploaded])
        return waited

    def keep_staged(self, staged: list[tuple[Fetch, int]]) -> None:
        """After the fix that read them in place from the staging ring (`stages`): each
        (fetch, its place in the fix's batch) kept from the bytes the fix landed, on the
        compute stream, and entered into the table; their entries are free once the fix
        and these copies are done."""
        self.adopt(staged)
        assert self.ring is not None  # staged on CUDA from the disk store
        done = torch.cuda.Event()
        done.record(self.compute)
        for f, _ in staged:
            self.ring.give(f.entry, done)

    def _published(self, fetches: list[Fetch]) -> None:
        """Publishes uploaded `fetches`, the compute stream waiting for their bytes."""
        if self.cuda:
            for event in {f.ready for f in fetches}:
                assert event is not None  # every upload on CUDA records one
                self.compute.wait_event(event)
        self.publish(fetches)

    def adopt(self, kept: list[tuple[Fetch, int]]) -> None:
        """Keeps misses their layer read in place (`direct`, or its fix from the staging
        ring), each (fetch, its rank in the layer's batch): on CUDA the bytes the kernels
        landed for that rank, copied into its row on the compute stream (after the layer
        that landed them, before any later reader of the row), all in one call of torch's
        multi-tensor copy (one kernel for the demo's rows, a few for OLMoE's): a copy a
        miss cost the host more than the copies cost the device; on the CPU the host copy's
        row. Then entered into the table."""
        fetches = [f for f, _ in kept]
        if self.experts.landing is None:
            self.upload(fetches)
        elif fetches:
            landed = self.experts.landed
            torch._foreach_copy_([self.mem[f.row] for f in fetches],
                                 [landed(f.key[0], rank) for f, rank in kept])
            for f in fetches:
                f.uploaded = True
        for f in fetches:
            self.publish_row(f.key, f.row)

    def upload_arrived(self, fetches: list[Fetch]) -> None:
        """Uploads those of `fetches` whose reads have completed (speculation that arrived
        ahead of its layer) and publishes every uploaded one, the compute stream waiting
        for its copy (a few microseconds): the layer's body finds it, where otherwise the
        layer would be computed again once the host claimed it. Where the fix reads
        misses in place from staging (`stages`) nothing is uploaded: claimed speculation is
        read there with the layer's misses."""
        if self.stages:
            return
        self.upload([f for f in fetches if not f.uploaded and f.read.done.is_set()
                     and f.read.complete and not f.read.error])
        self._published([f for f in fetches if f.uploaded])

    def upload(self, fetches: list[Fetch]) -> None:
        """One host-to-device copy per expert, from its staging entry (or the RAM store)
        straight into its row, on the copy stream after the compute that last read the
        rows. Each fetch's `ready` event says when its bytes are in place. On the CPU a
        read lands in its row; the RAM store's expert is copied there now."""
        if not fetches or not self.cuda:
            for f in fetches:
                if self.host is not None:
                    self.mem[f.row].copy_(self.host.row(f.key))
                f.uploaded = True
            return
        stream = self.copy_stream
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            if self.used is not None:
                stream.wait_event(self.used)
            start.record(stream)
            for f in fetches:
                self.mem[f.row].copy_(self._source(f), non_blocking=True)
            end.record(stream)
        nbytes = sum(f.read.bytes_read for f in fetches)
        for f in fetches:
            f.uploaded, f.ready = True, end
            if self.ring is not None and f.entry >= 0:
                self.ring.give(f.entry, end)
        layer = fetches[0].key[0]
        self.clock.later(layer, C.h2d_ms, start, end)
        self.clock.later(layer, C.bytes_h2d, None, None, nbytes)

    def _source(self, fetch: Fetch) -> torch.Tensor:
        if self.ring is not None and fetch.entry >= 0:
            return self.ring.host[fetch.entry]
        assert self.host is not None  # no staging entry: the RAM store
        return self.host.row(fetch.key)

    def drop(self, fetch: Fetch) -> None:
        """A fetch that will never be uploaded (unused speculation): its entry is free once
        its read is over."""
        if self.ring is not None and fetch.entry >= 0 and not fetch.uploaded:
            self.ring.give(fetch.entry)

    # -- bytes out -----------------------------------------------------------------------
    def index(self, rows: list[int]) -> torch.Tensor:
        """Row indices as an index tensor on the compute device."""
        idx = self._batch_rows[:len(rows)]
        # the last copy out of this pinned buffer ran before the host sync that led here
        idx.numpy()[:] = rows
        return idx.to(self.device, non_blocking=True)

    def mix(self, x: torch.Tensor, w: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """The experts in `rows` on x, weighted by w and summed in rank order (Experts)."""
        y = self.experts.mix(x, w, self.index(rows))
        self.mark_used()  # uploads into these rows from now on wait for this read of them
        return y

    def gather(self, rows: list[int], dtype: torch.dtype | None = None) -> Weights:
        """The experts in `rows`, in that order, as one batch on the compute device (given
        the `dtype` they are computed in, widened where stored narrower: Experts.gather)."""
        return self.gather_index(self.index(rows), dtype)

    def gather_index(self, idx: torch.Tensor, dtype: torch.dtype | None = None) -> Weights:
        """`gather` with the rows already an index tensor on the compute device."""
        weights = self.experts.gather(idx, dtype=dtype)
        self.mark_used()
        return weights

    def close(self) -> None:
        self.pool.close()
