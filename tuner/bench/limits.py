"""What this machine allows, measured with plain copies and reads, and the timing helpers
the sections share.

Each section measures two things in the same run and reports their ratio, so that the
noise of a shared machine falls on both sides alike. Ratios, not absolute figures, are the
result; the raw figures are reported beside them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from tuner.config import Config
from tuner.engine.memory.cpu_experts import CpuExperts
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.memory.store import make_reads, readers_here
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.vocabulary.slots import arena_slots

Step = Callable[[int, int], torch.Tensor]  # (token, position) -> logits


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def paired(a: list[float], b: list[float]) -> dict:
    """Interleaved runs of two sides: the median of the pairs' ratios a / b (`ratio`) and
    their quartiles (`ratio_quartiles`), how far a busy spell moved single pairs."""
    pairs = [x / y for x, y in zip(a, b)]
    q1, _, q3 = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else pairs * 3
    return {"ratio": round(statistics.median(pairs), 4),
            "ratio_quartiles": [round(q1, 4), round(q3, 4)]}


def paired_text(r: dict) -> str:
    """`paired`'s figures as a section's line gives them."""
    return f"{r['ratio']} (pairs' quartiles {'-'.join(map(str, r['ratio_quartiles']))})"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Step, tokens: list[int]) -> float:
    """ms per token of `step` over `tokens`, at positions 0, 1, ..."""
    t0 = time.perf_counter()
    for pos, tok in enumerate(tokens):
        logits = step(tok, pos)
    logits.cpu()  # the device has finished every token
    return 1000 * (time.perf_counter() - t0) / len(tokens)


def spread(ckpt: Checkpoint, experts: int | None = None) -> list[tuple[int, int]]:
    """`experts` experts spread over the model; by default at least 1 GiB of them, or all."""
    mc = ckpt.config
    total = mc.num_layers * mc.num_experts
    experts = experts or min(total, max(256, (1 << 30) // ckpt.expert_bytes))
    step = max(1, total // experts)
    return [divmod(i, mc.num_experts) for i in range(0, total, step)][:experts]


def store_read(ckpt: Checkpoint, workers: int, direct: bool, piece_kib: int = 256,
               experts: int | None = None, reader: str | None = None,
               rows: torch.Tensor | None = None) -> dict:
    """Raw read bandwidth of the expert store: experts spread over the model (`spread`),
    all queued at once (a deep queue), read by `reader` (by default the fastest here:
    KvikIO where it reads) into memory already faulted in, as the engine's rows are
    (`rows`, one per expert, or made here). The timed pass is the second: the first opens
    the files and starts the readers, and through the page cache it reads the experts in,
    as the engine's reads are once the model has been read."""
    keys = spread(ckpt, experts)
    if rows is None:
        rows = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8)
    reader = reader or readers_here()[-1]
    pool = make_reads(reader, workers, 0, direct, piece_kib * 1024)
    try:
        for _ in range(2):
            t0 = time.perf_counter()
            reads = [pool.submit(k, ckpt.extents(*k), rows[i].numpy().data, False)
                     for i, k in enumerate(keys)]
            for r in reads:
                pool.wait(r)
            secs = time.perf_counter() - t0
    finally:
        pool.close()
    nbytes = len(keys) * ckpt.expert_bytes
    return {"reader": reader, "workers": workers, "piece_kib": piece_kib, "direct": direct,
            "experts": len(keys), "bytes": nbytes, "seconds": round(secs, 4),
            "gbps": round(nbytes / secs / 1e9, 4)}


RAW_SHAPES = ((None, None), (None, 4096), (32, 4096))  # (readers, piece KiB); None: the engine's


def best_store_read(ckpt: Checkpoint, workers: int, piece_kib: int, direct: bool,
                    readers: list[str] | None = None) -> dict:
    """The store's best raw read: every one of `readers` (default: those measured here),
    each at the engine's readers and piece size, with large pieces, and with large pieces
    and many readers; the fastest, with every one tried under `tried`."""
    shapes = dict.fromkeys((w or workers, p or piece_kib) for w, p in RAW_SHAPES)
    # every try's; pinned where KvikIO may read into them: page-aligned, as the engine's ring
    rows = torch.zeros(len(spread(ckpt)), ckpt.row_bytes, dtype=torch.uint8,
                       pin_memory=torch.cuda.is_available())
    tried = [store_read(ckpt, w, direct, p, reader=reader, rows=rows)
             for reader in readers or readers_here() for w, p in shapes]
    best = max(tried, key=lambda t: t["gbps"])
    return {**best, "tried": [{k: t[k] for k in ("reader", "workers", "piece_kib", "gbps")}
                              for t in tried]}


def pinned_copy_gbps(device: torch.device, nbytes: int = 256 << 20, reps: int = 5,
                     fresh: bool = False) -> float:
    """The link's limit: a plain copy of a page-locked host buffer to the device (CUDA
    events), or a plain memory copy on a machine without a GPU. `fresh`: the host writes
    the buffer before each copy, as a read into the staging ring does (only the copies are
    timed)."""
    if device.type != "cuda":
        src = torch.empty(nbytes, dtype=torch.uint8)
        dst = torch.empty_like(src)
        t0 = time.perf_counter()
        for _ in range(reps):
            dst.copy_(src)
        return round(nbytes * reps / (time.perf_counter() - t0) / 1e9, 3)
    src = torch.ones(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    page = torch.ones(nbytes, dtype=torch.uint8) if fresh else None
    dst.copy_(src, non_blocking=True)  # warm
    ms = 0.0
    for _ in range(reps):
        if page is not None:
            src.copy_(page)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        ms += start.elapsed_time(end)
    return round(nbytes * reps / (ms / 1000) / 1e9, 3)


def cpu_expert_gbps(ckpt: Checkpoint, beside_gpu: bool, experts: int = 64
                    ) -> tuple[float, str]:
    """The CPU site's limit: expert bytes computed per second on the host, a layer's top-k
    at a time, as the CPU site computes them beside a GPU or alone; and the way it computes
    them (CpuExperts.way)."""
    mc = ckpt.config
    site = CpuExperts(HostCopy(ckpt), beside_gpu)
    keys = [divmod(i, mc.num_experts) for i in range(min(experts, mc.num_layers * mc.num_experts))]
    x = torch.randn(mc.hidden_size, dtype=site.dtype)
    t0 = time.perf_counter()
    for i in range(0, len(keys), mc.top_k):
        site(x, keys[i:i + mc.top_k])
    secs = time.perf_counter() - t0
    return round(len(keys) * ckpt.expert_bytes / secs / 1e9, 3), site.way


def device_copy_gbps(device: torch.device, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """The compute device's memory bandwidth: a plain copy within it, counting the bytes
    read and the bytes written (on a machine without a GPU, within host memory)."""
    nbytes = nbytes if device.type == "cuda" else nbytes // 4
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    sync(device)
    return round(2 * nbytes * reps / (time.perf_counter() - t0) / 1e9, 3)


def describe(cfg: Config) -> dict:
    """The model, arena and machine the sections run on."""
    ckpt = Checkpoint(model_folder(cfg))
    mc = ckpt.config
    return {"model": ckpt.name, "layers": mc.num_layers, "experts": mc.num_experts,
            "top_k": mc.top_k, "expert_bytes": ckpt.expert_bytes,
            "arena_slots": arena_slots(cfg.expert_cache, mc.num_layers, mc.num_experts),
            "torch_threads": torch.get_num_threads(), "device": str(pick_device(cfg.device)),
            "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None}


def describe_text(m: dict) -> str:
    return (f"{m['model']}: {m['layers']} layers x {m['experts']} experts, top-{m['top_k']}, "
            f"{m['expert_bytes']} bytes per expert, arena {m['arena_slots']} slots")
