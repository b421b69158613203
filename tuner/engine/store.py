"""Expert reads: a pool of reader threads with an urgent and a speculative queue.

An expert read is split into pieces of `io_piece_kib`; workers take pieces, urgent ones
first, and `io_urgent` workers take only urgent pieces. A queued speculative read can be
promoted to urgent (the router wants it) or cancelled (it did not); a piece already being
read always finishes. Reads are real file reads (`os.preadv`), optionally with O_DIRECT
through a page-aligned bounce buffer so the page cache is bypassed.

Bandwidth emulation: with `ssd_gbps` > 0 every piece is paced on one shared `Timeline`, so
the store behaves like one device of that bandwidth whatever the host disk does.
"""

from __future__ import annotations

import mmap
import os
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from tuner.engine.checkpoint import Extent

QUEUED, RUNNING, DONE, CANCELLED = range(4)
_ALIGN = 4096


class Timeline:
    """An emulated device of `gbps` bandwidth shared by several threads: each transfer
    reserves bytes / bandwidth on one timeline and ends no earlier than its reservation.
    With gbps 0 it does nothing (real speed)."""

    def __init__(self) -> None:
        self.gbps = 0.0
        self._lock = threading.Lock()
        self._busy_until = 0.0

    def pace(self, nbytes: int, started: float) -> None:
        if self.gbps <= 0:
            return
        with self._lock:
            start = max(started, self._busy_until)
            self._busy_until = start + nbytes / (self.gbps * 1e9)
            until = self._busy_until
        delay = until - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


@dataclass(eq=False)
class Piece:
    read: Read
    path: str
    offset: int
    length: int
    dst: int  # offset into the read's destination buffer
    state: int = QUEUED


@dataclass(eq=False)
class Read:
    """One expert read into `dst` (a writable buffer of the expert's packed size)."""

    key: tuple[int, int]
    dst: memoryview
    speculative: bool
    pieces: list[Piece] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    bytes_read: int = 0
    error: str | None = None

    def counts(self) -> tuple[int, int, int]:
        """(pieces done, pieces cancelled, pieces still queued or running)."""
        d = sum(p.state == DONE for p in self.pieces)
        c = sum(p.state == CANCELLED for p in self.pieces)
        return d, c, len(self.pieces) - d - c

    @property
    def complete(self) -> bool:
        return all(p.state == DONE for p in self.pieces)


class ReadPool:
    def __init__(self, workers: int, urgent: int, direct: bool, piece_bytes: int):
        self.direct = direct
        self.piece_bytes = max(_ALIGN, piece_bytes // _ALIGN * _ALIGN)
        self.ssd = Timeline()  # live knobs, set by the engine
        self.jitter_ms = 0.0
        self._cond = threading.Condition()
        self._urgent: deque[Piece] = deque()
        self._spec: deque[Piece] = deque()
        self._fds: dict[str, int] = {}
        self._stop = False
        self._active = 0  # pieces being read now
        self._busy_since = 0.0
        self.busy_s = 0.0  # time with at least one piece being read
        self.bytes_read = 0
        self._rng = random.Random()  # jitter only; never touches model state
        self._threads = [
            threading.Thread(target=self._work, args=(i < urgent,), daemon=True,
                             name=f"tuner-io-{i}")
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    # -- submitting -------------------------------------------------------------------
    def submit(self, key: tuple[int, int], extents: list[Extent], dst: memoryview,
               speculative: bool) -> Read:
        read = Read(key, dst, speculative)
        for ext in extents:
            for start in range(0, ext.length, self.piece_bytes):
                n = min(self.piece_bytes, ext.length - start)
                read.pieces.append(Piece(read, ext.path, ext.offset + start, n, ext.dst + start))
        with self._cond:
            (self._spec if speculative else self._urgent).extend(read.pieces)
            self._cond.notify_all()
        return read

    def promote(self, read: Read) -> None:
        """Moves the read's queued pieces to the urgent queue."""
        with self._cond:
            queued = [p for p in read.pieces if p.state == QUEUED]
            for p in queued:
                self._spec.remove(p)
            self._urgent.extend(queued)
            self._cond.notify_all()

    def cancel(self, read: Read) -> None:
        """Drops the read's queued pieces; running pieces finish."""
        with self._cond:
            cancelled = False
            for p in read.pieces:
                if p.state == QUEUED:
                    (self._spec if p in self._spec else self._urgent).remove(p)
                    p.state = CANCELLED
                    cancelled = True
            last = cancelled and self._finished(read)
        if last:  # otherwise a worker finishes it, or already has
            read.done.set()

    def achieved_gbps(self) -> float | None:
        """Bytes read per second of time with reads in flight."""
        with self._cond:
            return self.bytes_read / self.busy_s / 1e9 if self.busy_s else None

    def wait(self, read: Read) -> float:
        """Blocks until no piece of the read is queued or running; returns seconds waited."""
        if read.done.is_set() and not read.error:
            return 0.0
        t0 = time.perf_counter()
        read.done.wait()
        if read.error:
            raise OSError(f"expert {read.key} could not be read: {read.error}")
        return time.perf_counter() - t0

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    # -- workers -----------------------------------------------------------------------
    @staticmethod
    def _finished(read: Read) -> bool:
        return all(p.state in (DONE, CANCELLED) for p in read.pieces)

    def _fd(self, path: str) -> int:
        with self._cond:
            fd = self._fds.get(path)
            if fd is None:
                flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if self.direct else 0)
                fd = self._fds[path] = os.open(path, flags)
            return fd

    def _work(self, urgent_only: bool) -> None:
        bounce = mmap.mmap(-1, self.piece_bytes + 2 * _ALIGN) if self.direct else None
        while True:
            with self._cond:
                while not self._stop and not (self._urgent or (self._spec and not urgent_only)):
                    self._cond.wait()
                if self._stop:
                    return
                piece = (self._urgent or self._spec).popleft()
                piece.state = RUNNING
                if not self._active:
                    self._busy_since = time.perf_counter()
                self._active += 1
            t0 = time.perf_counter()
            try:
                self._read(piece, bounce)
                self._throttle(piece.length, t0)
            except OSError as err:  # reported to whoever waits on the read
                piece.read.error = f"{piece.path}: {err}"
            read = piece.read
            with self._cond:
                piece.state = DONE
                read.bytes_read += piece.length
                self.bytes_read += piece.length
                self._active -= 1
                if not self._active:
                    self.busy_s += time.perf_counter() - self._busy_since
                last = self._finished(read)
            if last:
                read.done.set()

    def _read(self, piece: Piece, bounce: mmap.mmap | None) -> None:
        fd = self._fd(piece.path)
        dst = piece.read.dst[piece.dst:piece.dst + piece.length]
        if bounce is None:
            got = os.preadv(fd, [dst], piece.offset)
            if got != piece.length:
                raise OSError(f"short read of {piece.path} at {piece.offset}: {got} bytes")
            return
        start = piece.offset // _ALIGN * _ALIGN
        span = (piece.offset + piece.length - start + _ALIGN - 1) // _ALIGN * _ALIGN
        view = memoryview(bounce)[:span]
        os.preadv(fd, [view], start)
        skip = piece.offset - start
        dst[:] = view[skip:skip + piece.length]

    def _throttle(self, nbytes: int, t0: float) -> None:
        if self.jitter_ms > 0:
            time.sleep(self._rng.random() * self.jitter_ms / 1000)
        self.ssd.pace(nbytes, t0)
