"""Expert reads: the queue policy every reader shares, and the reader threads.

An expert read is split into pieces of `io_piece_kib`; under O_DIRECT they are cut on page
boundaries of the file (an extent's first piece is shorter when the extent starts inside a
page, so that the others need no unaligned head). Through the page cache an extent's pieces
start at the extent: a short head would cost KvikIO a request of its own for each expert.
Pieces start urgent ones first; at most `io_workers - io_urgent` speculative pieces run at
once, and a speculative one starts only while fewer than `io_workers` pieces run, so
`io_urgent` readers are always free for a demand read. A queued speculative read can be
promoted to urgent (the router wants it) or cancelled (it did not); a piece already started
always finishes.

Two ways to read the bytes, chosen by `io_reader` (`open_reads`): `ReadPool` here, reader
threads in Python that read pieces with `os.preadv`, optionally with O_DIRECT through a
page-aligned bounce buffer so the page cache is bypassed; and `KvikioReads`
(kvikio_reads.py), NVIDIA KvikIO's C++ thread pool driven from the caller's thread.

Bandwidth emulation: with `ssd_gbps` > 0 every piece is paced on one shared `Timeline`, so
the store behaves like one device of that bandwidth whatever the host disk does. Pacing and
read jitter wait on the pool's `hurry` event: the session sets it when a settings change,
a pause or a stop is waiting for the token boundary, and the token then finishes at the
host's speed, so no emulated bandwidth can hold a change back for longer than a token.

A complete read can be checked before anyone uses it (`check`: the engine's verifier); a
read that fails names its file and bytes.
"""

from __future__ import annotations

import mmap
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from tuner.config import Config
from tuner.engine.weights.checkpoint import Extent
from tuner.errors import TunerError
from tuner.knobs import BY_NAME

QUEUED, RUNNING, DONE, CANCELLED = range(4)
_ALIGN = 4096


class Done(Protocol):
    """A read's end as its waiters see it: a threading.Event, or KvikIO's polled one."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class ReadError(TunerError, OSError):
    """An expert could not be read, or its bytes failed the check; names file and bytes."""


class ReaderError(TunerError, ValueError):
    """A reader `io_reader` asks for that cannot read on this machine."""


class Timeline:
    """An emulated device of `gbps` bandwidth shared by several threads: each transfer
    reserves bytes / bandwidth on one timeline and ends no earlier than its reservation.
    With gbps 0 it does nothing (real speed); while `hurry` is set it does not wait, and
    the reservations made before are dropped."""

    def __init__(self, hurry: threading.Event | None = None) -> None:
        self.gbps = 0.0
        self.hurry = hurry or threading.Event()
        self._lock = threading.Lock()
        self._busy_until = 0.0

    def reserve(self, nbytes: int, started: float) -> float:
        """When a transfer of `nbytes` that started at `started` ends on the emulated
        device (0: no pacing now)."""
        if self.gbps <= 0 or self.hurry.is_set():
            return 0.0
        with self._lock:
            start = max(started, self._busy_until)
            self._busy_until = start + nbytes / (self.gbps * 1e9)
            return self._busy_until

    def pace(self, nbytes: int, started: float) -> None:
        """Waits until the transfer's reservation ends (or the hurry)."""
        delay = self.reserve(nbytes, started) - time.perf_counter()
        if delay > 0 and self.hurry.wait(delay):
            self.drop()

    def drop(self) -> None:
        """Forgets the reservations still ahead (the hurry came)."""
        with self._lock:
            self._busy_until = min(self._busy_until, time.perf_counter())


@dataclass(eq=False)
class Piece:
    read: Read | None  # dropped once the piece ended: no cycle keeps a read's buffer alive
    path: str
    offset: int
    length: int
    dst: int  # offset into the read's destination buffer
    state: int = QUEUED
    spec: bool = False  # started from the speculative queue


@dataclass(eq=False)
class Read:
    """One expert read into `dst` (a writable buffer of the expert's packed size)."""

    key: tuple[int, int]
    dst: memoryview
    speculative: bool
    pieces: list[Piece] = field(default_factory=list)
    done: Done = field(default_factory=threading.Event)
    bytes_read: int = 0
    error: str | None = None
    open: int = 0  # pieces queued or running: a read of many pieces ends in O(1) a piece

    @classmethod
    def landed(cls, key: tuple[int, int], nbytes: int, speculative: bool) -> Read:
        """An expert already in memory (the RAM store): complete, nothing to wait for, its
        bytes counted as read."""
        return cls(key, _NOTHING, speculative, [Piece(None, "", 0, nbytes, 0, DONE)], _SET,
                   bytes_read=nbytes)

    def counts(self) -> tuple[int, int, int]:
        """(pieces done, pieces cancelled, pieces still queued or running)."""
        d = sum(p.state == DONE for p in self.pieces)
        c = sum(p.state == CANCELLED for p in self.pieces)
        return d, c, len(self.pieces) - d - c

    @property
    def complete(self) -> bool:
        return all(p.state == DONE for p in self.pieces)

    def where(self) -> str:
        """The file and byte ranges the read covers."""
        spans: dict[str, list[int]] = {}
        for p in self.pieces:
            lo_hi = spans.setdefault(p.path, [p.offset, p.offset + p.length])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], p.offset), max(lo_hi[1], p.offset + p.length)
        return "; ".join(f"in {os.path.basename(path)} at bytes {lo}-{hi}"
                         for path, (lo, hi) in spans.items())


# what every landed read shares: no buffer, and a done event never cleared (making one per
# miss cost the RAM store's host more than the rest of a miss's bookkeeping)
_NOTHING = memoryview(b"")
_SET = threading.Event()
_SET.set()


def short_read(piece: Piece, got: int) -> str:
    """What a read that got `got` of a piece's bytes says."""
    return (f"the file ended {got} bytes into the {piece.length} bytes at {piece.offset}: "
            "it was truncated or replaced")


class ReadQueue:
    """The policy every reader shares: the urgent and the speculative queue, which piece
    starts next (`_take`), promotion and cancellation, a read's end (its check, then
    `done`), the bytes and the time with reads in flight. A reader adds how bytes are
    read: it starts what `_take` gives and calls `_end` for each piece it ended."""

    name = ""  # the reader, as `io_reader` names it

    def __init__(self, workers: int, urgent: int, direct: bool, piece_bytes: int,
                 check: Callable[[Read], str | None] | None = None,
                 hurry: threading.Event | None = None):
        if not 0 <= urgent < workers:  # the settings hold io_urgent below io_workers
            raise ValueError(f"{urgent} urgent readers of {workers}: at least one must serve "
                             "speculative reads")
        self.workers, self.urgent, self.direct = workers, urgent, direct
        self.check = check  # what is wrong with a complete read's bytes, or None
        self.piece_bytes = max(_ALIGN, piece_bytes // _ALIGN * _ALIGN)
        self.hurry = hurry or threading.Event()  # set: no pacing, no jitter (see above)
        self.ssd = Timeline(self.hurry)  # live knobs, set by the engine
        self.jitter_ms = 0.0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # reader threads wait on it
        self._urgent: deque[Piece] = deque()
        self._spec: deque[Piece] = deque()
        self._running = 0  # pieces started and not ended
        self._spec_running = 0
        self._busy_since = 0.0
        self.busy_s = 0.0  # time with at least one piece running
        self.bytes_read = 0
        self._rng = random.Random()  # jitter only; never touches model state

    # -- what the engine calls ----------------------------------------------------------
    def submit(self, key: tuple[int, int], extents: list[Extent], dst: memoryview,
               speculative: bool) -> Read:
        """Queues one expert read (`submit_all`)."""
        return self.submit_all([(key, extents, dst)], speculative)[0]

    def submit_all(self, wanted: Sequence[tuple[tuple[int, int], list[Extent], memoryview]],
                   speculative: bool) -> list[Read]:
        """Queues expert reads (key, file extents, destination) in this order, urgent or
        speculative; the readers are told once, so a layer's misses cost one start."""
        reads = []
        for key, extents, dst in wanted:
            read = Read(key, dst, speculative, done=self._done_event())
            for ext in extents:
                start = 0
                while start < ext.length:  # under O_DIRECT pieces after the first start on
                    at = ext.offset + start  # a page
                    head = at % _ALIGN if self.direct else 0
                    n = min(self.piece_bytes - head, ext.length - start)
                    read.pieces.append(Piece(read, ext.path, at, n, ext.dst + start))
                    start += n
            read.open = len(read.pieces)
            reads.append(read)
        with self._lock:
            queue = self._spec if speculative else self._urgent
            for read in reads:
                queue.extend(read.pieces)
        self._queued()
        return reads

    def promote(self, read: Read) -> None:
        """Moves the read's queued pieces to the urgent queue."""
        with self._lock:
            queued = [p for p in read.pieces if p.state == QUEUED]
            for p in queued:
                self._spec.remove(p)
            self._urgent.extend(queued)
        self._queued()

    def cancel(self, read: Read) -> None:
        """Drops the read's queued pieces; running pieces finish."""
        with self._lock:
            cancelled = False
            for p in read.pieces:
                if p.state == QUEUED:
                    (self._spec if p in self._spec else self._urgent).remove(p)
                    p.state, p.read = CANCELLED, None
                    read.open -= 1
                    cancelled = True
            last = cancelled and not read.open
        if last:  # otherwise its reader finishes it, or already has
            self._finish(read)

    def poll(self) -> None:
        """Lets a reader with no threads of its own end and start reads (see KvikioReads);
        reader threads need no help."""

    def achieved_gbps(self) -> float | None:
        """Bytes read per second of time with reads in flight."""
        with self._lock:
            return self.bytes_read / self.busy_s / 1e9 if self.busy_s else None

    def wait(self, read: Read) -> float:
        """Blocks until no piece of the read is queued or running; returns seconds waited.
        Raises ReadError when the read failed or its bytes failed the check."""
        if read.done.is_set() and not read.error:
            return 0.0
        t0 = time.perf_counter()
        self._wait(read)
        if read.error:
            raise ReadError(f"expert (layer {read.key[0]}, expert {read.key[1]}) "
                            f"{read.where()}: {read.error}")
        return time.perf_counter() - t0

    def close(self) -> None:
        raise NotImplementedError

    # -- what a reader calls ------------------------------------------------------------
    def _done_event(self) -> Done:
        return threading.Event()

    def _queued(self) -> None:
        """Pieces were queued or promoted."""

    def _wait(self, read: Read) -> None:
        read.done.wait()

    def _take(self) -> Piece | None:
        """The next piece to start, marked running, or None (call under the lock)."""
        if self._urgent:
            piece = self._urgent.popleft()
        elif self._spec and self._running < self.workers \
                and self._spec_running < self.workers - self.urgent:
            piece = self._spec.popleft()
            piece.spec = True
            self._spec_running += 1
        else:
            return None
        piece.state = RUNNING
        if not self._running:
            self._busy_since = time.perf_counter()
        self._running += 1
        return piece

    def _end(self, piece: Piece, error: str | None = None) -> None:
        """Ends a running piece: its bytes counted, `error` kept for the waiter; the read
        ends with its last piece."""
        with self._lock:
            read = piece.read
            assert read is not None  # only a queued piece is dropped from its read
            if error and not read.error:
                read.error = error
            piece.state, piece.read = DONE, None
            read.open -= 1
            read.bytes_read += piece.length
            self.bytes_read += piece.length
            self._running -= 1
            if piece.spec:
                self._spec_running -= 1
            if not self._running:
                self.busy_s += time.perf_counter() - self._busy_since
            if self._spec:  # a speculative piece may start now
                self._cond.notify()
            last = not read.open
        if last:
            self._finish(read)

    def _finish(self, read: Read) -> None:
        """Ends a read once, by whoever ended its last piece: the check of a complete read,
        then `done`, so no one uses bytes that failed it."""
        try:
            if self.check and read.complete and not read.error:
                read.error = self.check(read)
        except Exception as err:  # the waiter raises it; the reader lives on
            read.error = f"after the read: {type(err).__name__}: {err}"
        finally:
            read.done.set()

    def _jitter_s(self) -> float:
        return self._rng.random() * self.jitter_ms / 1000 if self.jitter_ms > 0 else 0.0


class ReadPool(ReadQueue):
    """Reader threads in Python: each takes a piece, reads it with `os.preadv` and paces
    it, then takes the next."""

    name = "threads"

    def __init__(self, workers: int, urgent: int, direct: bool, piece_bytes: int,
                 check: Callable[[Read], str | None] | None = None,
                 hurry: threading.Event | None = None):
        super().__init__(workers, urgent, direct, piece_bytes, check, hurry)
        self._fds: dict[str, int] = {}
        self._stop = False
        self._threads = [threading.Thread(target=self._work, daemon=True, name=f"tuner-io-{i}")
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        with self._lock:  # taken once: a second close must not close numbers reused since
            fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            os.close(fd)

    def _queued(self) -> None:
        with self._lock:
            self._cond.notify_all()

    def _fd(self, path: str) -> int:
        with self._lock:
            fd = self._fds.get(path)
            if fd is None:
                flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if self.direct else 0)
                fd = self._fds[path] = os.open(path, flags)
            return fd

    def _work(self) -> None:
        bounce = mmap.mmap(-1, self.piece_bytes + 2 * _ALIGN) if self.direct else None
        while True:
            with self._lock:
                piece = None
                while not self._stop and (piece := self._take()) is None:
                    self._cond.wait()
                if piece is None:  # stopped
                    return
                read = piece.read
                assert read is not None  # a running piece keeps its read
            t0 = time.perf_counter()
            error = None
            try:
                self._read(piece, read.dst, bounce)
                jitter = self._jitter_s()
                if jitter:
                    self.hurry.wait(jitter)
                self.ssd.pace(piece.length, t0)
            except OSError as err:  # reported to whoever waits on the read
                error = f"{err.strerror or err}" if err.filename else str(err)
            self._end(piece, error)

    def _read(self, piece: Piece, into: memoryview, bounce: mmap.mmap | None) -> None:
        """Reads `piece` into its place in `into`, its read's destination."""
        fd = self._fd(piece.path)
        dst = into[piece.dst:piece.dst + piece.length]
        if bounce is None:
            got = os.preadv(fd, [dst], piece.offset)
        else:
            start = piece.offset // _ALIGN * _ALIGN
            span = (piece.offset + piece.length - start + _ALIGN - 1) // _ALIGN * _ALIGN
            view = memoryview(bounce)[:span]
            skip = piece.offset - start
            got = max(0, min(os.preadv(fd, [view], start) - skip, piece.length))
            dst[:got] = view[skip:skip + got]
        if got != piece.length:  # the file is shorter than the checkpoint's header says
            raise OSError(short_read(piece, got))


def not_here(why: str) -> ReaderError:
    return ReaderError(f"{BY_NAME['io_reader'].label} = 'kvikio' is not allowed here: {why}; "
                       "allowed here: auto, threads")


def reader_for(choice: str, device: torch.device) -> str:
    """The reader `io_reader` = `choice` picks on `device`: auto takes KvikIO where it
    reads on this machine and the engine computes on a CUDA device, else the reader
    threads. ReaderError when kvikio is asked for and cannot read here."""
    if choice == "threads" or (choice == "auto" and device.type != "cuda"):
        return "threads"  # without importing KvikIO
    from tuner.engine.memory.kvikio_reads import problem

    why = problem()
    if why and choice == "kvikio":
        raise not_here(why)
    return "threads" if why else "kvikio"


def readers_here() -> list[str]:
    """The readers that read on this machine, the fastest last."""
    from tuner.engine.memory.kvikio_reads import problem

    return ["threads"] if problem() else ["threads", "kvikio"]


def make_reads(reader: str, workers: int, urgent: int, direct: bool, piece_bytes: int,
               check: Callable[[Read], str | None] | None = None,
               hurry: threading.Event | None = None) -> ReadQueue:
    """A pool of `reader` ("threads" or "kvikio")."""
    if reader == "kvikio":
        from tuner.engine.memory.kvikio_reads import KvikioReads

        return KvikioReads(workers, urgent, direct, piece_bytes, check, hurry)
    return ReadPool(workers, urgent, direct, piece_bytes, check, hurry)


def open_reads(cfg: Config, device: torch.device,
               check: Callable[[Read], str | None] | None = None,
               hurry: threading.Event | None = None) -> ReadQueue:
    """The disk store's reads as the settings ask for them on `device`."""
    return make_reads(reader_for(cfg.io_reader, device), cfg.io_workers, cfg.io_urgent,
                      cfg.io_direct, cfg.io_piece_kib * 1024, check, hurry)
