"""What a read costs the host to submit, by reader, readers and piece size: the store's
experts read a layer's top-k at a time (submitted together, then waited for, as a layer's
misses are) on one model, O_DIRECT. For each: the host's microseconds inside
`submit_all` a read, and the rate the batches reached; the store's raw read (every expert
queued at once, at the engine's 8 readers) last. The disk store pays the first once a
miss, which at the demo's 0.6 MB experts is most of what a read costs the host.

    PYTHONPATH=. python3 lab/read_submit.py MODEL_FOLDER
"""

import sys
import time

import torch

from tuner.bench.limits import spread, store_read
from tuner.engine.memory.store import make_reads, readers_here
from tuner.engine.weights.checkpoint import Checkpoint

SHAPES = ((8, 256), (16, 256), (32, 256), (8, 1024), (32, 64))  # (readers, piece KiB)

ckpt = Checkpoint(sys.argv[1])
k, keys = ckpt.config.top_k, spread(ckpt)
rows = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8,
                   pin_memory=torch.cuda.is_available())
batches = [[(key, ckpt.extents(*key), rows[i + j].numpy().data)
            for j, key in enumerate(keys[i:i + k])] for i in range(0, len(keys), k)]
print(f"{ckpt.folder.name}: {len(keys)} experts of {ckpt.expert_bytes} bytes, {k} a batch")
for reader in readers_here():
    for workers, piece_kib in SHAPES:
        pool = make_reads(reader, workers, 0, True, piece_kib * 1024)
        try:
            for _ in range(2):  # the second pass is timed: the first opens the files
                submit, t0 = 0.0, time.perf_counter()
                for batch in batches:
                    s = time.perf_counter()
                    reads = pool.submit_all(batch, False)
                    submit += time.perf_counter() - s
                    for r in reads:
                        pool.wait(r)
                secs = time.perf_counter() - t0
        finally:
            pool.close()
        print(f"{reader:8s} {workers:3d} readers {piece_kib:5d} KiB: "
              f"{1e6 * submit / len(keys):7.1f} us to submit a read, "
              f"{len(keys) * ckpt.expert_bytes / secs / 1e9:6.3f} GB/s")
raw = store_read(ckpt, 8, True, 256, rows=rows)
print(f"raw ({raw['reader']}, 8 readers, 256 KiB, all queued): {raw['gbps']} GB/s")
