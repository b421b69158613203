"""The read pool's policy, on every reader: bytes land where asked, urgent reads go before
queued speculation, a promoted read before older speculation, a cancel drops only queued
pieces, pacing holds a read to its emulated time, checks run before `done`, failures name
the file and bytes. Readers: the threads; the KvikIO reader on a stand-in for the library
(CI has no GPU); the KvikIO reader on the library, where it reads."""

from __future__ import annotations

import re
import threading
import time

import pytest
import torch

from tests.engine.kvikio_standin import installed, needs_kvikio
from tuner.engine.memory import kvikio_reads
from tuner.engine.memory.store import (
    DONE,
    RUNNING,
    ReaderError,
    ReadError,
    ReadPool,
    make_reads,
    reader_for,
)
from tuner.engine.weights.checkpoint import Extent

SIZE = 16 * 1024
PATTERN = bytes(range(256)) * (SIZE // 256)
HOLD_GBPS = 1e-9  # a piece takes hours on the emulated device: held until the hurry


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "experts"
    path.write_bytes(PATTERN)
    return str(path)


@pytest.fixture(params=["threads", "standin", pytest.param("kvikio", marks=needs_kvikio)])
def reader(request, monkeypatch):
    if request.param == "standin":
        with installed(monkeypatch):
            yield "kvikio"
    else:
        yield request.param


@pytest.fixture
def pools(reader):
    """Makes pools of the reader under test (one urgent-free reader by default) and closes
    them; `finished` lists the reads in the order they ended."""
    made = []
    finished: list = []

    def make(workers=1, urgent=0, piece=4096, check=None, direct=False):
        def record(read):
            finished.append(read.key)
            return check(read) if check else None

        pool = make_reads(reader, workers, urgent, direct, piece, record)
        made.append(pool)
        return pool

    make.finished = finished
    yield make
    for pool in made:
        pool.hurry.set()
        pool.close()


def until(cond, seconds=30.0):
    """Waits for observable state (a reader thread picking a piece up)."""
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


@pytest.mark.parametrize("direct, pieces", [
    (True, [3996, 4096, 100, 2288, 1808]),  # O_DIRECT: cut on the file's pages
    (False, [4096, 4096, 4096]),  # the page cache: each extent from its start, no short head
])
def test_a_read_lands_its_bytes_and_counts_its_pieces(pools, data, direct, pieces):
    pool = pools(workers=2, urgent=1, direct=direct)
    buf = bytearray(12288)
    read = pool.submit((0, 0), [Extent(data, 100, 8192, 0), Extent(data, 10000, 4096, 8192)],
                       memoryview(buf), False)
    assert pool.wait(read) >= 0 and read.done.is_set()
    assert bytes(buf) == PATTERN[100:8292] + PATTERN[10000:14096]
    assert [p.length for p in read.pieces] == pieces
    assert read.counts() == (len(pieces), 0, 0) and read.complete and read.bytes_read == 12288
    assert pool.bytes_read == 12288 and pool.achieved_gbps() > 0


def test_reads_submitted_together_queue_in_their_order(pools, data):
    """A layer's misses are issued at once: each lands its bytes, in the order given."""
    pool = pools()
    bufs = [bytearray(4096) for _ in range(3)]
    reads = pool.submit_all([((0, e), [Extent(data, 4096 * e, 4096, 0)], memoryview(buf))
                             for e, buf in enumerate(bufs)], False)
    for read in reads:
        pool.wait(read)
    assert [r.key for r in reads] == pools.finished == [(0, 0), (0, 1), (0, 2)]
    assert [bytes(b) for b in bufs] == [PATTERN[4096 * e:4096 * (e + 1)] for e in range(3)]


def test_urgent_reads_go_before_queued_speculation(pools, data):
    pool = pools()
    pool.ssd.gbps = HOLD_GBPS
    spec = pool.submit((0, 0), [Extent(data, 0, SIZE, 0)], memoryview(bytearray(SIZE)), True)
    until(lambda: spec.pieces[0].state == RUNNING)
    urgent = pool.submit((0, 1), [Extent(data, 0, 4096, 0)], memoryview(bytearray(4096)),
                         False)
    pool.hurry.set()
    pool.wait(spec)
    pool.wait(urgent)
    assert pools.finished == [(0, 1), (0, 0)]


def test_a_promoted_read_goes_before_older_speculation(pools, data):
    pool = pools()
    pool.ssd.gbps = HOLD_GBPS
    reads = [pool.submit((0, e), [Extent(data, 4096 * e, 4096, 0)],
                         memoryview(bytearray(4096)), True) for e in range(3)]
    until(lambda: reads[0].pieces[0].state == RUNNING)
    pool.promote(reads[2])
    pool.hurry.set()
    for read in reversed(reads):
        pool.wait(read)
    # the running one may end before or after it (KvikIO's pool has room for both)
    assert pools.finished.index((0, 2)) < pools.finished.index((0, 1))


def test_a_cancel_while_a_piece_runs_ends_the_read_when_that_piece_ends(pools, data):
    """The running piece's bytes land and only then is the read done, so its buffer is
    never handed to another read while a reader still writes into it; a read with nothing
    running ends at once."""
    pool = pools()
    pool.ssd.gbps = HOLD_GBPS
    buf = bytearray(SIZE)
    read = pool.submit((0, 0), [Extent(data, 0, SIZE, 0)], memoryview(buf), True)
    until(lambda: read.pieces[0].state == RUNNING)
    queued = pool.submit((0, 1), [Extent(data, 0, 4096, 0)], memoryview(bytearray(4096)), True)
    pool.cancel(queued)
    assert queued.done.is_set() and queued.counts() == (0, 1, 0) and queued.bytes_read == 0
    pool.cancel(read)
    assert not read.done.is_set() and read.counts() == (0, 3, 1)
    pool.hurry.set()
    assert read.done.wait(30) and read.counts() == (1, 3, 0) and not read.complete
    assert read.pieces[0].state == DONE and bytes(buf[:4096]) == PATTERN[:4096]
    assert read.bytes_read == 4096 and pools.finished == []  # no check of a partial read


def test_a_paced_read_is_not_done_before_its_emulated_time(pools, data):
    pool = pools(workers=2)
    pool.ssd.gbps = SIZE / 0.25 / 1e9  # the read takes 0.25 s on the emulated device
    t0 = time.perf_counter()
    read = pool.submit((0, 0), [Extent(data, 0, SIZE, 0)], memoryview(bytearray(SIZE)), False)
    pool.wait(read)
    assert time.perf_counter() - t0 >= 0.24


def test_the_check_runs_before_done_and_its_failure_reaches_the_waiter(pools, data):
    seen = []

    def check(read):
        seen.append(read.done.is_set())
        return "bad bytes" if read.key == (0, 2) else None

    pool = pools(check=check)
    good = pool.submit((0, 1), [Extent(data, 0, 4096, 0)], memoryview(bytearray(4096)), False)
    bad = pool.submit((0, 2), [Extent(data, 0, 4096, 0)], memoryview(bytearray(4096)), False)
    pool.wait(good)
    with pytest.raises(ReadError, match=r"expert \(layer 0, expert 2\) in experts at bytes "
                                        r"0-4096: bad bytes"):
        pool.wait(bad)
    assert seen == [False, False]


def test_a_check_that_raises_fails_the_read_not_the_reader(pools, data):
    def check(read):
        raise ValueError("boom")

    pool = pools(check=check)
    read = pool.submit((0, 1), [Extent(data, 0, 4096, 0)], memoryview(bytearray(4096)), False)
    with pytest.raises(ReadError, match="after the read: ValueError: boom"):
        pool.wait(read)
    again = pool.submit((0, 2), [Extent(data, 0, 4096, 0)], memoryview(bytearray(4096)), False)
    with pytest.raises(ReadError, match="boom"):
        pool.wait(again)


@pytest.mark.parametrize("direct", [False, True])
def test_a_truncated_file_is_reported_to_the_waiter(pools, tmp_path, direct):
    path = tmp_path / "cut"
    path.write_bytes(PATTERN[:SIZE - 100])  # the checkpoint says SIZE
    pool = pools(direct=direct)
    read = pool.submit((0, 1), [Extent(str(path), 8192, 8192, 0)],
                       memoryview(bytearray(8192)), False)
    with pytest.raises(ReadError, match=r"expert \(layer 0, expert 1\) in cut at bytes "
                                        r"8192-16384: the file ended 3996 bytes into the 4096 "
                                        r"bytes at 12288: it was truncated or replaced"):
        pool.wait(read)


def test_a_failed_read_is_reported_to_the_waiter(pools, data):
    """An extent past the file's end: its one piece reads the file's last 100 bytes."""
    pool = pools()
    read = pool.submit((0, 1), [Extent(data, SIZE - 100, 4096, 0)],
                       memoryview(bytearray(4096)), False)
    with pytest.raises(OSError, match=r"expert \(layer 0, expert 1\) in experts at bytes "
                                      f"{SIZE - 100}-{SIZE + 3996}: the file ended 100 bytes "
                                      f"into the 4096 bytes at {SIZE - 100}"):
        pool.wait(read)
    assert read.counts() == (1, 0, 0)


def test_a_missing_file_is_named(pools, tmp_path):
    pool = pools()
    read = pool.submit((0, 3), [Extent(str(tmp_path / "gone"), 0, 4096, 0)],
                       memoryview(bytearray(4096)), False)
    with pytest.raises(ReadError, match=r"expert \(layer 0, expert 3\) in gone at bytes "
                                        r"0-4096: .*No such file") as err:
        pool.wait(read)
    assert not re.search(r"\.[ch]pp:\d", str(err.value))  # no source file and line of KvikIO's


def test_a_cancel_while_a_piece_runs_on_the_reader_threads(data):
    """The threads reader holding a piece inside its pacing, as the engine's hurry sees it."""
    pool = ReadPool(1, 0, False, 4096)
    running, release = threading.Event(), threading.Event()

    def held(nbytes: int, started: float) -> None:  # the first piece's bytes are in
        running.set()
        release.wait(30)

    pool.ssd.pace = held
    try:
        buf = bytearray(SIZE)
        read = pool.submit((0, 0), [Extent(data, 0, SIZE, 0)], memoryview(buf), True)
        assert running.wait(30) and read.pieces[0].state == RUNNING
        pool.cancel(read)
        assert not read.done.is_set()
        release.set()
        assert read.done.wait(10) and read.counts() == (1, 3, 0)
        assert read.pieces[0].state == DONE and bytes(buf[:4096]) == PATTERN[:4096]
    finally:
        pool.close()


def test_urgent_readers_must_leave_one_for_speculation():
    with pytest.raises(ValueError, match="2 urgent readers of 2"):
        ReadPool(2, 2, False, 4096)


CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # a device named, none used


def test_auto_takes_kvikio_on_a_gpu_where_it_reads(monkeypatch):
    monkeypatch.setattr(kvikio_reads, "problem", lambda: None)
    assert [reader_for("auto", d) for d in (CPU, CUDA)] == ["threads", "kvikio"]
    assert reader_for("kvikio", CPU) == "kvikio" and reader_for("threads", CUDA) == "threads"
    why = "KvikIO cannot read (libcuda.so.1: cannot open shared object file)"
    monkeypatch.setattr(kvikio_reads, "problem", lambda: why)
    assert reader_for("auto", CUDA) == "threads"
    with pytest.raises(ReaderError) as err:
        reader_for("kvikio", CUDA)
    assert str(err.value) == (f"io_reader (STRATA_IO_READER) = 'kvikio' is not allowed here: "
                              f"{why}; allowed here: auto, threads")


def test_kvikio_asked_for_where_it_cannot_read_fails_in_one_line(monkeypatch):
    monkeypatch.setattr(kvikio_reads, "problem", lambda: "KvikIO is not installed")
    with pytest.raises(ReaderError, match="^io_reader .* is not allowed here: KvikIO is not "
                                          "installed; allowed here: auto, threads$"):
        make_reads("kvikio", 2, 1, False, 4096)
