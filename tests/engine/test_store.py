"""The read pool: a read ends once, by whoever ended its last piece; errors reach the waiter."""

from __future__ import annotations

import threading

import pytest

from tuner.engine.checkpoint import Extent
from tuner.engine.store import DONE, RUNNING, ReadPool

SIZE = 16 * 1024


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "experts"
    path.write_bytes(bytes(range(256)) * (SIZE // 256))
    return str(path)


def test_a_cancel_while_a_piece_runs_ends_the_read_when_that_piece_ends(data):
    """The running piece's bytes land and only then is the read done, so its buffer is
    never handed to another read while a worker still writes into it."""
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
        assert read.pieces[0].state == DONE and bytes(buf[:4096]) == bytes(range(256)) * 16
    finally:
        pool.close()


def test_a_failed_read_is_reported_to_the_waiter(data):
    pool = ReadPool(1, 0, False, 4096)
    try:
        read = pool.submit((0, 1), [Extent(data, SIZE - 100, 4096, 0)],
                           memoryview(bytearray(4096)), False)
        with pytest.raises(OSError, match="expert \\(layer 0, expert 1\\).*ended 100 bytes"):
            pool.wait(read)
    finally:
        pool.close()
