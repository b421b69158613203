"""A stand-in for the parts of NVIDIA KvikIO that the KvikIO reader uses (`CuFile.pread`'s
futures, `defaults`, `CompatMode`), reading with `os.preadv` on a pool of Python threads
and failing as KvikIO does (RuntimeError, "KvikIO failure at FILE:LINE: why"). CI has no
GPU and KvikIO reads nothing without a CUDA driver: with this, the reader's own logic
(runs, polling, pacing, errors) and the engine with it run in CI. The library itself is
tested where it reads (the tests marked `needs_kvikio`)."""

from __future__ import annotations

import enum
import os
import sys
import types
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from tuner.engine.memory.kvikio_reads import problem


def _failure(why: str) -> RuntimeError:
    return RuntimeError(f"KvikIO failure at: /standin/posix_io.hpp:1: {why}")


class IOFuture:
    def __init__(self, future: Future):
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def get(self) -> int:
        return self._future.result()


class CuFile:
    # KvikIO's pool has `num_threads` threads (set through `defaults`), so one thread runs
    # its tasks in the order given: the stand-in's too
    pool = ThreadPoolExecutor(1)

    def __init__(self, path, flags: str = "r"):
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as err:
            raise RuntimeError("Unable to open file. Linux system/library function call error "
                               f"at: /standin/file_utils.cpp:1: {err.strerror}") from None

    def pread(self, buf, size: int, file_offset: int = 0, task_size: int | None = None):
        view = memoryview(buf).cast("B")[:size]

        def read() -> int:
            got = 0
            while got < size:
                n = os.preadv(self._fd, [view[got:]], file_offset + got)
                if n == 0:
                    raise _failure("POSIX error on pread: EOF")
                got += n
            return got

        return IOFuture(self.pool.submit(read))

    def close(self) -> None:
        os.close(self._fd)


@contextmanager
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stand-in where `import kvikio` finds it, while the block runs."""
    settings: dict = {"compat_mode": None, "auto_direct_io_read": False}

    def set_default(name: str, value) -> None:
        settings[name] = value
        if name == "num_threads":  # as KvikIO: waits for the tasks the old pool holds
            old, CuFile.pool = CuFile.pool, ThreadPoolExecutor(value)
            old.shutdown(wait=True)

    set_default("num_threads", 1)  # KvikIO's default where KVIKIO_NTHREADS is not set
    defaults = types.ModuleType("kvikio.defaults")
    defaults.set = set_default  # type: ignore[attr-defined]
    defaults.get = settings.__getitem__  # type: ignore[attr-defined]
    kvikio = types.ModuleType("kvikio")
    kvikio.CuFile = CuFile  # type: ignore[attr-defined]
    kvikio.CompatMode = enum.Enum("CompatMode", "OFF ON AUTO")  # type: ignore[attr-defined]
    kvikio.defaults = defaults  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kvikio", kvikio)
    monkeypatch.setitem(sys.modules, "kvikio.defaults", defaults)
    problem.cache_clear()  # its answer is the stand-in's until the block ends
    try:
        yield
    finally:
        problem.cache_clear()


REAL = problem()  # why the library itself cannot read here, or None
needs_kvikio = pytest.mark.skipif(REAL is not None, reason=REAL or "")
