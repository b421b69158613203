"""What the disk store's readers cost in Python on this machine, through the page cache
(no GPU here, so KvikIO itself does not read: its reader's own logic is timed with reads
done at once by a stand-in, which is what it adds to each read beyond KvikIO's calls).

A layer's misses (6 reads) are read at a time, as the engine serving misses reads them:
submitted, then waited for in order; each read 4 KiB (what a read costs beyond its bytes)
and the demo model's 589,824 bytes. Against: the same bytes read by plain os.preadv calls
one after the other on this thread. Then with 1 ms of host Python work between submitting
and waiting, as the decode thread does (a reader thread needs the GIL between its reads).
Each figure: wall time per read, and the CPU time of the whole process per read (what
stays readable on a loaded machine).

    PYTHONPATH=. python lab/read_cost.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import types
from dataclasses import replace

import torch

from tuner.engine.memory import kvikio_reads
from tuner.engine.memory.store import make_reads
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint

LAYERS, K, ROUNDS = 16, 6, 7
HOST_S = 0.001  # host work between submitting a layer's reads and waiting for them


class Done:  # a KvikIO future whose read was done when it was made
    def done(self) -> bool:
        return True

    def get(self) -> int:
        return 0


class InstantFile:  # the two calls the reader makes of kvikio.CuFile, reading at once
    def __init__(self, path: str, flags: str = "r"):
        self.fd = os.open(path, os.O_RDONLY)

    def pread(self, buf, size, offset=0, task_size=None):
        os.preadv(self.fd, [buf], offset)
        return Done()

    def close(self) -> None:
        os.close(self.fd)


def install_instant_kvikio() -> None:
    defaults = types.ModuleType("kvikio.defaults")
    settings: dict = {"num_threads": 1}
    defaults.set, defaults.get = settings.__setitem__, settings.__getitem__
    kvikio = types.ModuleType("kvikio")
    kvikio.CuFile, kvikio.defaults = InstantFile, defaults
    kvikio.CompatMode = types.SimpleNamespace(ON=1)
    sys.modules["kvikio"], sys.modules["kvikio.defaults"] = kvikio, defaults
    kvikio_reads.problem.cache_clear()


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def per_layer_us(fn, layers) -> tuple[float, float]:
    """(wall, CPU time of the whole process) per layer, medians over ROUNDS passes."""
    wall, cpu = [], []
    for _ in range(ROUNDS):
        t0, c0 = time.perf_counter(), time.process_time()
        for layer in layers:
            fn(layer)
        wall.append((time.perf_counter() - t0) / len(layers) * 1e6)
        cpu.append((time.process_time() - c0) / len(layers) * 1e6)
    return statistics.median(wall), statistics.median(cpu)


def costs(ckpt: Checkpoint, pools: dict, nbytes: int) -> dict[str, tuple[float, float]]:
    """us per layer (wall, CPU) of each way to read `nbytes` of each of a layer's K
    experts."""
    layers = [[(l, (7 * l + 11 * j) % ckpt.config.num_experts) for j in range(K)]
              for l in range(LAYERS)]
    extents = {k: [replace(ckpt.extents(*k)[0], length=nbytes)] for layer in layers
               for k in layer}
    rows = [r.numpy().data for r in torch.zeros(K, ckpt.row_bytes, dtype=torch.uint8)]
    fds: dict[str, int] = {}

    def plain(layer):
        for j, k in enumerate(layer):
            ext = extents[k][0]
            fd = fds.get(ext.path) or fds.setdefault(ext.path, os.open(ext.path, os.O_RDONLY))
            os.preadv(fd, [rows[j][:nbytes]], ext.offset)

    def pooled(pool, host_s=0.0):
        def layer_reads(layer):
            reads = [pool.submit(k, extents[k], rows[j], False) for j, k in enumerate(layer)]
            if host_s:
                spin(host_s)
            for r in reads:
                pool.wait(r)
        return layer_reads

    per_layer_us(plain, layers)  # into the page cache
    out = {"plain os.preadv, one after the other": per_layer_us(plain, layers)}
    for name, pool in pools.items():
        out[name] = per_layer_us(pooled(pool), layers)
    spun = per_layer_us(lambda layer: spin(HOST_S), layers)
    for name, pool in pools.items():
        wall, cpu = per_layer_us(pooled(pool, HOST_S), layers)
        out[f"{name}, {HOST_S * 1000:.0f} ms of host work before the wait, less it"] = \
            (wall - spun[0], cpu - spun[1])
    return out


def main() -> None:
    ckpt = Checkpoint(synth.ensure())
    install_instant_kvikio()
    pools = {"reader threads (8, 2 urgent, 256 KiB pieces)": make_reads("threads", 8, 2, False,
                                                                        256 << 10),
             "KvikIO reader's logic, reads done at once": make_reads("kvikio", 8, 2, False,
                                                                     256 << 10)}
    print(f"{LAYERS} layers x {K} reads, page cache, median of {ROUNDS} passes; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; switch interval "
          f"{sys.getswitchinterval() * 1000:.1f} ms")
    for nbytes in (4096, ckpt.expert_bytes):  # a read that costs nothing, and an expert
        print(f"-- reads of {nbytes} bytes")
        for name, (wall, cpu) in costs(ckpt, pools, nbytes).items():
            print(f"{name}: {wall / K:.0f} us per read ({K * nbytes / wall / 1e3:.2f} GB/s), "
                  f"CPU {cpu / K:.0f} us per read")
    for pool in pools.values():
        pool.close()


if __name__ == "__main__":
    main()
