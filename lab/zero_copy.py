"""What a miss would cost if the experts' kernel read it straight from pinned host memory
(mapped into the device's address space) instead of waiting for the host to copy it into
the arena: the production kernels (`tuner.engine.weights.fused.mix`) on rows held in device memory,
in pinned host memory, and a pinned copy of the same bytes followed by the kernel.

OLMoE's expert shape (D 2048, I 1024, bf16: 12.6 MB), 1 and 8 experts a call, 64 rows.

    python3 lab/zero_copy.py
"""

import json
import sys

import torch

from tuner.engine.weights import fused
from tuner.engine.weights.checkpoint import Layout, Part

D, I, ROWS, DT = 2048, 1024, 64, torch.bfloat16
size = DT.itemsize
gate = Part("gate", 0, (I, D), DT)
up = Part("up", gate.nbytes, (I, D), DT)
down = Part("down", 2 * gate.nbytes, (D, I), DT)
row_bytes = 3 * gate.nbytes
layout = Layout((gate, up, down), row_bytes)

dev = torch.device("cuda")
gen = torch.Generator().manual_seed(0)
host = torch.empty(ROWS, row_bytes, dtype=torch.uint8, pin_memory=True)
host.view(DT).copy_((torch.randn(ROWS, row_bytes // size, generator=gen) * 0.02).to(DT))
mem = host.to(dev)
stage = torch.empty(8, row_bytes, dtype=torch.uint8, device=dev)
x = torch.randn(D, generator=gen).to(DT).to(dev)


def timed(fn, reps=20) -> float:
    """Milliseconds a call, on device events, after two warm calls."""
    for _ in range(2):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def measure(k: int) -> dict:
    """The figures for k experts a call."""
    rows = torch.arange(k, dtype=torch.int64, device=dev) * 7 % ROWS
    w = torch.softmax(torch.randn(k, generator=gen), 0).to(dev)
    mb = k * row_bytes / 1e6
    ref = fused.mix(mem, rows, layout, x, w)
    ms_dev = timed(lambda: fused.mix(mem, rows, layout, x, w))
    ms_copy = timed(lambda: stage[:k].copy_(host[:k], non_blocking=True))
    picked, staged = rows.tolist(), torch.arange(k, device=dev)

    def copy_then_mix():  # what the engine does today: a copy per expert, then the kernel
        for j, r in enumerate(picked):
            stage[j].copy_(host[r], non_blocking=True)
        return fused.mix(stage, staged, layout, x, w)

    ms_copy_mix = timed(copy_then_mix)
    res = {"device_ms": round(ms_dev, 4), "device_GBps": round(mb / ms_dev, 1),
           "pinned_copy_ms": round(ms_copy, 4), "pinned_copy_GBps": round(mb / ms_copy, 1),
           "copy_then_mix_ms": round(ms_copy_mix, 4)}
    try:
        got = fused.mix(host, rows, layout, x, w)  # the kernel reads pinned host memory
        torch.cuda.synchronize()
        ms_zc = timed(lambda: fused.mix(host, rows, layout, x, w))
        res.update(zero_copy_ms=round(ms_zc, 4), zero_copy_GBps=round(mb / ms_zc, 1),
                   zero_copy_equal=bool(torch.equal(got, ref)),
                   zero_copy_vs_copy_then_mix=round(ms_zc / ms_copy_mix, 3))
    except Exception as exc:  # the launcher may refuse a host pointer
        res["zero_copy_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return res


out = {"expert_mb": round(row_bytes / 1e6, 2)}
for k in (1, 8):
    out[f"k{k}"] = measure(k)
json.dump(out, sys.stdout, indent=1)
print()
