"""Where stale prefetch's extra time goes on the GPU machine with the RAM store (or the
store `STORE` names: disk reads through KvikIO, the host issuing the reads ahead): for
prefetch off and stale, in turn, on one model at the default arena, after a warm-up, the
wall ms per token, torch.profiler's device busy time and device ops per token with its
kernel table, and cProfile's host functions by own time and the engine's by cumulative
time; with a folder, also each setting's timeline of its first profiled tokens (Chrome
trace, prefetch-SETTING-N.json).

    [STORE=disk] python3 lab/profile_prefetch.py MODEL_FOLDER [TRACE_FOLDER]
"""

import cProfile
import os
import pstats
import sys
import time
from dataclasses import replace

import torch
from torch.profiler import ProfilerActivity, profile

from tuner.engine.step.decode import Engine
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

TOKENS = 16
TRACED = 3  # tokens in a timeline
traces = sys.argv[2] if len(sys.argv) > 2 else None
ckpt = Checkpoint(sys.argv[1])
device = torch.device("cuda")
base = replace(Config(), expert_store=os.environ.get("STORE", "ram"))


def tokens(engine: Engine, start: int, count: int) -> int:
    """`count` tokens from position `start`, the device done with them; the next position."""
    for pos in range(start, start + count):
        engine.step(1 + pos % 97, pos)
    torch.cuda.synchronize()
    return start + count


for n, prefetch in enumerate(("off", "stale", "off", "stale")):
    engine = Engine(ckpt, replace(base, prefetch=prefetch), device)
    pos = tokens(engine, 0, 48)
    t0 = time.perf_counter()
    pos = tokens(engine, pos, 32)
    wall = 1000 * (time.perf_counter() - t0) / 32
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        pos = tokens(engine, pos, TOKENS)
    device_ops = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    busy = sum(e.self_device_time_total for e in device_ops) / TOKENS / 1000
    ops = sum(e.count for e in device_ops) / TOKENS
    print(f"\n== prefetch {prefetch}: wall {wall:.3f} ms/token, device busy {busy:.3f} "
          f"ms/token, {ops:.1f} device ops/token")
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=14,
                                    max_name_column_width=50))
    host = cProfile.Profile()
    host.enable()
    pos = tokens(engine, pos, TOKENS)
    host.disable()
    pstats.Stats(host).sort_stats("tottime").print_stats(16)
    pstats.Stats(host).sort_stats("cumulative").print_stats(r"tuner/", 24)
    if traces:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            tokens(engine, pos, TRACED)
        prof.export_chrome_trace(f"{traces}/prefetch-{prefetch}-{n}.json")
    engine.close()
