"""The arena: expert rows in fast memory, the slot map that says what sits where, and the
way bytes get in.

Rows 0..n-1 are the slots; rows n..n+K-1 serve misses for which no slot was eligible
(bypass). Every row and staging buffer is allocated once, before decoding.

On the CPU the store reads straight into a row. On CUDA reads land in a pinned staging ring
in host memory, and a batch of completed reads (a layer's misses, or the speculation that
has arrived) is uploaded together: each run of consecutive ring entries is one
host-to-device copy into the ring's device mirror, on a copy stream, and one device-side
scatter per run moves the experts into their rows, after the compute that last read those
rows. Compute waits for an upload through an event; the host never does.

A layer's experts are computed from one gather of their rows into a batch buffer
(`gather`), so the hot path issues the same few kernels whatever k is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from tuner.engine.checkpoint import Checkpoint
from tuner.engine.model import Weights
from tuner.engine.slots import Key, SlotMap
from tuner.engine.store import Read, ReadPool

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
    """Pinned host buffers the store reads into, with a device mirror of the same size.

    Entries are taken in ring order, skipping those still held (a read in flight or not yet
    uploaded); an entry whose last upload may still be copying from it is waited for."""

    def __init__(self, entries: int, row_bytes: int, device: torch.device):
        self.host = torch.zeros(entries, row_bytes, dtype=torch.uint8, pin_memory=True)
        self.dev = torch.zeros(entries, row_bytes, dtype=torch.uint8, device=device)
        self.bufs = [memoryview(self.host[i].numpy()) for i in range(entries)]
        self.held = [False] * entries
        self.copied: list[torch.cuda.Event | None] = [None] * entries
        self.head = 0

    def take(self) -> int:
        n = len(self.held)
        for step in range(n):
            i = (self.head + step) % n
            if not self.held[i]:
                if self.copied[i] is not None:
                    self.copied[i].synchronize()
                    self.copied[i] = None
                self.held[i] = True
                self.head = (i + 1) % n
                return i
        raise RuntimeError(f"all {n} staging entries are held: more reads in flight than "
                           "the arena was sized for")

    def give(self, entry: int, copied: torch.cuda.Event | None = None) -> None:
        self.held[entry] = False
        self.copied[entry] = copied


def runs(entries: list[int]) -> list[tuple[int, int, int]]:
    """(first index into `entries`, first entry, count) of each run of consecutive entries,
    in the order given."""
    out: list[tuple[int, int, int]] = []
    for i, e in enumerate(entries):
        if out and out[-1][1] + out[-1][2] == e:
            first, start, count = out[-1]
            out[-1] = (first, start, count + 1)
        else:
            out.append((i, e, 1))
    return out


def _marker(mask: np.ndarray, stale_rows: set[int]) -> Callable[[Key, bool], None]:
    """The slot map's residency hook. It holds the mask, not the arena: a slot map that
    pointed back at its arena would keep a replaced engine's rows alive until the cycle
    collector ran."""

    def mark(key: Key, resident: bool) -> None:
        mask[key] = resident
        stale_rows.add(key[0])

    return mark


class Arena:
    def __init__(self, ckpt: Checkpoint, slots: int, policy: str, device: torch.device, cfg,
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
        # padding bytes stay zero, so a row compares equal to the checkpoint's bytes
        self.mem = torch.zeros(slots + K, ckpt.row_bytes, dtype=torch.uint8, device=device)
        self.batch = torch.empty(K, ckpt.row_bytes, dtype=torch.uint8, device=device)
        self._batch_rows = torch.zeros(K, dtype=torch.int64, pin_memory=self.cuda)
        self.extents = {(l, e): ckpt.extents(l, e) for l in range(L) for e in range(E)}
        self.pool = ReadPool(cfg.io_workers, cfg.io_urgent, cfg.io_direct,
                             cfg.io_piece_kib * 1024, check=check, hurry=hurry)
        # the router's view of residency: a host mask, mirrored per layer on the device
        self.mask_host = torch.zeros(L, E, dtype=torch.bool, pin_memory=self.cuda)
        self._mask_np = self.mask_host.numpy()
        self.mask_dev = self.mask_host.to(device) if self.cuda else self.mask_host
        self._stale_rows: set[int] = set()
        self.slots.on_resident = _marker(self._mask_np, self._stale_rows)
        if self.cuda:
            self.rows = None
            self.ring = StagingRing(RING_LAYERS * K, ckpt.row_bytes, device)
            self.copy_stream = torch.cuda.Stream(device)
            self.used = None  # event: the compute stream's last read of any row
        else:
            self.rows = [memoryview(self.mem[i].numpy()) for i in range(slots + K)]

    # -- residency -----------------------------------------------------------------------
    def mask(self, layer: int) -> torch.Tensor:
        """Layer `layer`'s residency [E] on the compute device (uploaded when it changed)."""
        if self.cuda and layer in self._stale_rows:
            self._stale_rows.discard(layer)
            self.mask_dev[layer].copy_(self.mask_host[layer], non_blocking=True)
        return self.mask_dev[layer]

    # -- bytes in ------------------------------------------------------------------------
    def fetch(self, key: Key, row: int, speculative: bool) -> Fetch:
        """Issues the read of `key` for row `row`."""
        if not self.cuda:
            read = self.pool.submit(key, self.extents[key], self.rows[row], speculative)
            return Fetch(key, row, read)
        entry = self.ring.take()
        read = self.pool.submit(key, self.extents[key], self.ring.bufs[entry], speculative)
        return Fetch(key, row, read, entry)

    def land(self, fetches: list[Fetch]) -> float:
        """Waits for the reads of `fetches`, uploads what is not on the device yet and makes
        the compute stream wait for their bytes; returns the seconds waited for reads (the
        stall)."""
        waited = sum(self.pool.wait(f.read) for f in fetches)
        self.upload([f for f in fetches if not f.uploaded])
        if self.cuda:
            for event in {f.ready for f in fetches}:
                torch.cuda.current_stream().wait_event(event)
        return waited

    def upload_arrived(self, fetches: list[Fetch]) -> None:
        """Uploads those of `fetches` whose reads have completed (speculation that arrived
        ahead of its layer), so their copy overlaps the current layer's compute."""
        self.upload([f for f in fetches if not f.uploaded and f.read.done.is_set()
                     and f.read.complete and not f.read.error])

    def upload(self, fetches: list[Fetch]) -> None:
        """One host-to-device copy per run of consecutive staging entries, then one scatter
        per run into the rows (after the compute that last read them), on the copy stream.
        Each fetch's `ready` event says when its bytes are in place."""
        if not fetches or not self.cuda:
            for f in fetches:
                f.uploaded = True
            return
        fetches = sorted(fetches, key=lambda f: f.entry)
        entries = [f.entry for f in fetches]
        ring, stream = self.ring, self.copy_stream
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        done = torch.cuda.Event()
        with torch.cuda.stream(stream):
            rows = torch.tensor([f.row for f in fetches], dtype=torch.int64).to(
                self.device, non_blocking=True)
            start.record()
            for _, e, count in runs(entries):
                ring.dev[e:e + count].copy_(ring.host[e:e + count], non_blocking=True)
            end.record()
            if self.used is not None:
                stream.wait_event(self.used)
            for first, e, count in runs(entries):
                self.mem.index_copy_(0, rows[first:first + count], ring.dev[e:e + count])
            done.record()
        nbytes = sum(f.read.bytes_read for f in fetches)
        for f in fetches:
            f.uploaded, f.ready = True, done
            ring.give(f.entry, end)
        layer = fetches[0].key[0]
        self.clock.later(layer, "h2d_ms", start, end)
        self.clock.later(layer, "bytes_h2d", None, None, nbytes)

    def drop(self, fetch: Fetch) -> None:
        """A fetch that will never be uploaded (unused speculation): its entry is free once
        its read is over."""
        if fetch.entry >= 0 and not fetch.uploaded:
            self.ring.give(fetch.entry)

    # -- bytes out -----------------------------------------------------------------------
    def gather(self, rows: list[int]) -> Weights:
        """The experts in `rows`, in that order, as one batch on the compute device."""
        idx = self._batch_rows[:len(rows)]
        # the last copy out of this pinned buffer ran before the router sync that led here
        idx.numpy()[:] = rows
        return self.gather_index(idx.to(self.device, non_blocking=True))

    def gather_index(self, idx: torch.Tensor) -> Weights:
        """`gather` with the rows already an index tensor on the compute device."""
        batch = self.batch[:len(idx)]
        torch.index_select(self.mem, 0, idx, out=batch)
        if self.cuda:  # uploads into these rows from now on wait for this read of them
            self.used = torch.cuda.Event()
            self.used.record()
        return self.layout.weights(batch)

    def close(self) -> None:
        self.pool.close()
