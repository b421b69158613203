"""Expert reads: a pool of reader threads with an urgent and a speculative queue.

An expert read is split into pieces of `io_piece_kib`; workers take pieces, urgent ones
first, and `io_urgent` workers take only urgent pieces. A queued speculative read can be
promoted to urgent (the router wants it) or cancelled (it did not); a piece already being
read always finishes. Reads are real file reads (`os.preadv`), optionally with O_DIRECT
through a page-aligned bounce buffer so the page cache is bypassed.

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
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.engine.checkpoint import Extent
from tuner.errors import TunerError

QUEUED, RUNNING, DONE, CANCELLED = range(4)
_ALIGN = 4096


class ReadError(TunerError, OSError):
    """An expert could not be read, or its bytes failed the check; names file and bytes."""


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

    def pace(self, nbytes: int, started: float) -> None:
        if self.gbps <= 0 or self.hurry.is_set():
            return
        with self._lock:
            start = max(started, self._busy_until)
            self._busy_until = start + nbytes / (self.gbps * 1e9)
            until = self._busy_until
        delay = until - time.perf_counter()
        if delay > 0 and self.hurry.wait(delay):
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


class ReadPool:
    def __init__(self, workers: int, urgent: int, direct: bool, piece_bytes: int,
                 check: Callable[[Read], str | None] | None = None,
                 hurry: threading.Event | None = None):
        self.direct = direct
        self.check = check  # what is wrong with a complete read's bytes, or None
        self.piece_bytes = max(_ALIGN, piece_bytes // _ALIGN * _ALIGN)
        self.hurry = hurry or threading.Event()  # set: no pacing, no jitter (see above)
        self.ssd = Timeline(self.hurry)  # live knobs, set by the engine
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
                    p.state, p.read = CANCELLED, None
                    cancelled = True
            last = cancelled and self._finished(read)
        if last:  # otherwise a worker finishes it, or already has
            self._finish(read)

    def achieved_gbps(self) -> float | None:
        """Bytes read per second of time with reads in flight."""
        with self._cond:
            return self.bytes_read / self.busy_s / 1e9 if self.busy_s else None

    def wait(self, read: Read) -> float:
        """Blocks until no piece of the read is queued or running; returns seconds waited.
        Raises ReadError when the read failed or its bytes failed the check."""
        if read.done.is_set() and not read.error:
            return 0.0
        t0 = time.perf_counter()
        read.done.wait()
        if read.error:
            raise ReadError(f"expert (layer {read.key[0]}, expert {read.key[1]}) "
                            f"{read.where()}: {read.error}")
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

    def _finish(self, read: Read) -> None:
        """Ends a read once, by whoever ended its last piece: the check of a complete read,
        then `done`, so no one uses bytes that failed it."""
        try:
            if self.check and read.complete and not read.error:
                read.error = self.check(read)
        except Exception as err:  # the waiter raises it; the worker lives on
            read.error = f"after the read: {type(err).__name__}: {err}"
        finally:
            read.done.set()

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
                read = piece.read
                assert read is not None  # only a queued piece is dropped from its read
                if not self._active:
                    self._busy_since = time.perf_counter()
                self._active += 1
            t0 = time.perf_counter()
            try:
                self._read(piece, read.dst, bounce)
                self._throttle(piece.length, t0)
            except OSError as err:  # reported to whoever waits on the read
                read.error = f"{err.strerror or err}" if err.filename else str(err)
            with self._cond:
                piece.state, piece.read = DONE, None
                read.bytes_read += piece.length
                self.bytes_read += piece.length
                self._active -= 1
                if not self._active:
                    self.busy_s += time.perf_counter() - self._busy_since
                last = self._finished(read)
            if last:
                self._finish(read)

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
            raise OSError(f"the file ended {got} bytes into the {piece.length} bytes at "
                          f"{piece.offset}: it was truncated or replaced")

    def _throttle(self, nbytes: int, t0: float) -> None:
        if self.jitter_ms > 0:
            self.hurry.wait(self._rng.random() * self.jitter_ms / 1000)
        self.ssd.pace(nbytes, t0)
