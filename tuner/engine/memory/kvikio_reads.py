"""The disk store's reads through NVIDIA KvikIO (`io_reader = kvikio`): its C++ thread pool
reads with POSIX preads, and no Python thread takes part.

The pool has no thread of its own: whoever calls into it (the decode thread: submit, wait,
promote, cancel, `poll`, or asking whether a read is `done`) first ends the reads KvikIO
has finished and then starts queued pieces by the policy every reader shares (store.py).
So a read that ends costs no thread switch and no wait for the GIL, and its bytes are
checked on the caller's thread before `done` says so. The queued pieces of one read that
start together go to KvikIO as one pread in tasks of `io_piece_kib`: Python's cost is per
read, not per piece. A waiter blocks inside KvikIO's future, without the GIL.

Reads land in host memory (the pinned staging ring on CUDA, an arena row on the CPU), so
KvikIO's compatibility mode is on and no file is registered with cuFile: GPUDirect Storage
reads into device memory only, and a read straight into a row would overtake the compute
queued on it. O_DIRECT (`io_direct`) and the pool's thread count (`io_workers`) are
KvikIO's process-wide settings: the last pool built sets them.

Bandwidth emulation: a run of pieces reserves its bytes on the shared Timeline when it
starts and ends no earlier than its reservation, nor before its jitter (`io_jitter_ms`,
drawn per run) has passed.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.engine.memory.store import Piece, Read, ReadQueue, not_here, short_read

POLL_S = 0.0002  # `done.wait(timeout)`'s poll period (tests; the engine waits in `wait`)


_WHERE = re.compile(r"(KvikIO failure|Linux system/library function call error) at:? "
                    r"\S+:\d+:\s*")  # KvikIO's source file and line in its messages


def _reason(err: Exception) -> str:
    """KvikIO's message without the source files and lines in it."""
    return _WHERE.sub("", str(err)).strip() or type(err).__name__


def _kvikio() -> Any:
    import kvikio
    import kvikio.defaults
    import torch

    if torch.cuda.is_available():
        torch.empty(1, device="cuda")  # torch's CUDA context before KvikIO's first call

    # host memory only: no file registered with cuFile, no cuFile library loaded
    kvikio.defaults.set("compat_mode", kvikio.CompatMode.ON)
    return kvikio


def _page() -> Any:
    import torch

    return torch.zeros(mmap.PAGESIZE, dtype=torch.uint8,
                       pin_memory=torch.cuda.is_available()).numpy()


@functools.cache
def problem() -> str | None:
    """Why KvikIO cannot read on this machine, or None: it imports and a one-byte read
    through it works (it needs the CUDA driver even to read into host memory)."""
    try:
        kvikio = _kvikio()
    except ImportError as err:
        return f"KvikIO is not installed ({err}; pip install 'tuner[gpu]')"
    except Exception as err:  # its libraries (libkvikio, cuFile) did not load
        return f"KvikIO does not load ({type(err).__name__}: {err})"
    try:
        f = kvikio.CuFile(__file__, "r")
        try:  # a page into page-locked memory, as the engine's reads land: a one-byte
            # bytearray was written past (the heap it corrupted crashed the process later,
            # anywhere), an mmap'd page was refused (EFAULT)
            f.pread(_page(), mmap.PAGESIZE, 0).get()
        finally:
            f.close()
    except Exception as err:  # KvikIO raises RuntimeError for what its C++ throws
        return f"KvikIO cannot read ({_reason(err)})"
    return None


class Polled:
    """A read's `done` when no thread of the reader would set it: asking first lets the
    reader end what KvikIO has finished."""

    __slots__ = ("_pool", "_flag")

    def __init__(self, pool: KvikioReads):
        self._pool, self._flag = pool, False

    def set(self) -> None:
        self._flag = True

    def is_set(self) -> bool:
        if not self._flag:
            self._pool.poll()
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        until = None if timeout is None else time.perf_counter() + timeout
        while not self.is_set():
            if until is not None and time.perf_counter() >= until:
                return False
            time.sleep(POLL_S)
        return True


@dataclass(eq=False)
class Run:
    """Consecutive pieces of one read in one file, read by one KvikIO pread."""

    pieces: list[Piece]
    future: Any  # kvikio.IOFuture; its get() may be called once only
    due: float  # not ended before this (pacing and jitter)
    error: str | None = None
    collected: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def settled(self) -> bool:
        """KvikIO has finished it (a future may not be asked while it is being waited on)."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            return self.collected or self.future.done()
        finally:
            self.lock.release()

    def collect(self) -> None:
        """Waits for KvikIO to finish it (without the GIL) and keeps what went wrong."""
        with self.lock:
            if self.collected:
                return
            self.collected = True
            try:
                self.future.get()
            except Exception as err:  # KvikIO raises RuntimeError for what its C++ throws
                self.error = _what_failed(self, err)
            self.future = None  # KvikIO's future is spent


def _what_failed(run: Run, err: Exception) -> str:
    why = _reason(err)
    if why.endswith("EOF"):  # a file shorter than the checkpoint says: as the threads say it
        first = run.pieces[0]
        try:
            size = os.path.getsize(first.path)
        except OSError:
            return why
        for p in run.pieces:
            if size < p.offset + p.length:
                return short_read(p, max(0, size - p.offset))
    return why


class KvikioReads(ReadQueue):
    """Reads through KvikIO's thread pool, ended and started by whoever calls in."""

    name = "kvikio"

    def __init__(self, workers: int, urgent: int, direct: bool, piece_bytes: int,
                 check: Callable[[Read], str | None] | None = None,
                 hurry: threading.Event | None = None):
        why = problem()
        if why:
            raise not_here(why)
        super().__init__(workers, urgent, direct, piece_bytes, check, hurry)
        self._kvikio = kvikio = _kvikio()
        kvikio.defaults.set("auto_direct_io_read", direct)
        if kvikio.defaults.get("num_threads") != workers:
            kvikio.defaults.set("num_threads", workers)  # waits for the tasks it holds
        self._files: dict[str, Any] = {}
        self._runs: list[Run] = []  # started and not ended, in the order started
        self._polling = False

    def poll(self) -> None:
        """Ends the runs KvikIO has finished whose time has come, then starts what the
        policy allows: every urgent piece, speculative ones up to their share."""
        if self._polling:  # asked again from inside a poll (a check asking `done`)
            return
        self._polling = True
        try:
            now, hurried = time.perf_counter(), self.hurry.is_set()
            if hurried:
                self.ssd.drop()
            with self._lock:
                ended = [r for r in self._runs if r.settled() and (hurried or r.due <= now)]
                for r in ended:
                    self._runs.remove(r)
            for r in ended:
                self._end_run(r)
            self._start()
        finally:
            self._polling = False

    def close(self) -> None:
        """Lets KvikIO finish the reads it holds (they write into buffers the caller is
        about to free), then closes the files."""
        with self._lock:
            runs, self._runs = self._runs, []
            self._urgent.clear()
            self._spec.clear()
        for r in runs:
            r.collect()
        for f in self._files.values():
            f.close()
        self._files.clear()

    def _done_event(self) -> Polled:
        return Polled(self)

    def _queued(self) -> None:
        self.poll()

    def _wait(self, read: Read) -> None:
        """Blocks inside KvikIO on the read's oldest run (else the oldest of all: a queued
        piece starts when one ends), sleeps off its pacing, and polls, until the read is
        done."""
        while not read.done.is_set():
            with self._lock:
                run = next((r for r in self._runs if r.pieces[0].read is read),
                           self._runs[0] if self._runs else None)
            if run is not None:
                run.collect()
                delay = run.due - time.perf_counter()
                if delay > 0 and self.hurry.wait(delay):
                    self.ssd.drop()

    def _start(self) -> None:
        with self._lock:
            taken = []
            while (piece := self._take()) is not None:
                taken.append(piece)
        runs = [self._read(pieces) for pieces in _runs_of(taken, self.piece_bytes)]
        with self._lock:
            self._runs += runs

    def _read(self, pieces: list[Piece]) -> Run:
        first = pieces[0]
        read = first.read
        assert read is not None  # a running piece keeps its read
        nbytes = sum(p.length for p in pieces)
        now = time.perf_counter()
        due = max(self.ssd.reserve(nbytes, now), now + self._jitter_s())
        try:
            f = self._files.get(first.path)
            if f is None:
                f = self._files[first.path] = self._kvikio.CuFile(first.path, "r")
            view = read.dst[first.dst:first.dst + nbytes]
            future = f.pread(view, nbytes, first.offset, self.piece_bytes)
        except Exception as err:  # a file that cannot be opened: the read fails, named
            return Run(pieces, None, due, error=_reason(err), collected=True)
        return Run(pieces, future, due)

    def _end_run(self, run: Run) -> None:
        run.collect()
        for p in run.pieces:
            self._end(p, run.error)


def _runs_of(pieces: list[Piece], piece_bytes: int) -> list[list[Piece]]:
    """`pieces` cut where the next one is not the same read's next bytes in the same file,
    and after a short piece, so that KvikIO's tasks of `piece_bytes` are the pieces (those
    after an extent's first start on a page: no buffered head under O_DIRECT)."""
    runs: list[list[Piece]] = []
    for p in pieces:
        last = runs[-1][-1] if runs else None
        if last is not None and last.length == piece_bytes and last.read is p.read \
                and last.path == p.path and last.offset + last.length == p.offset \
                and last.dst + last.length == p.dst:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs
