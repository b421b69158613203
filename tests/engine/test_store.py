"""The read pool: a read ends once, by whoever ended its last piece."""

from __future__ import annotations

import threading

import pytest

from tuner.engine.checkpoint import Extent
from tuner.engine.store import ReadPool

SIZE = 16 * 1024


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "experts"
    path.write_bytes(bytes(range(256)) * (SIZE // 256))
    return str(path)


def test_a_cancel_after_the_last_piece_waits_for_the_completion_hook(data):
    """The hook is the CUDA upload from the read's buffer: `done` before it ran would free
    the buffer for the next read while the upload still copies from it."""
    entered, release = threading.Event(), threading.Event()

    def hook(read):
        entered.set()
        release.wait(10)

    pool = ReadPool(1, 0, False, 4096, on_complete=hook)
    try:
        buf = bytearray(SIZE)
        read = pool.submit((0, 0), [Extent(data, 0, SIZE, 0)], memoryview(buf), True)
        assert entered.wait(10)
        pool.cancel(read)  # nothing is left to cancel: the read is the worker's to end
        assert not read.done.is_set()
        release.set()
        assert read.done.wait(10) and read.complete and not read.error
        assert bytes(buf) == bytes(range(256)) * (SIZE // 256)
    finally:
        release.set()
        pool.close()


def test_a_failing_completion_hook_is_reported_to_the_waiter(data):
    def hook(read):
        raise RuntimeError("device gone")

    pool = ReadPool(1, 0, False, 4096, on_complete=hook)
    try:
        read = pool.submit((0, 1), [Extent(data, 0, SIZE, 0)], memoryview(bytearray(SIZE)),
                           False)
        with pytest.raises(OSError, match="device gone"):
            pool.wait(read)
    finally:
        pool.close()
