"""(d) The engine's host-to-device uploads against a plain pinned copy (a GPU only)."""

from __future__ import annotations

from dataclasses import replace

import torch

from tuner.bench.limits import pinned_copy_gbps, ratio
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.memory.store import ReadPool
from tuner.engine.session.opening import pick_device
from tuner.engine.session.session import Session
from tuner.engine.weights.checkpoint import Checkpoint


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """Achieved bandwidth of the engine's uploads (CUDA events) against a plain pinned copy
    of 256 MiB measured in the same run; beside it, plain pinned copies of one expert (a
    layer's upload when it has a single miss), of a buffer the host left alone and of one
    it has just written, as the store's reads write the staging ring."""
    device = pick_device(cfg.device)
    if device.type != "cuda":
        return {"skipped": "no CUDA device: the link is measured on a GPU only"}
    limit = pinned_copy_gbps(device)
    session = Session(replace(cfg, cpu_pool=False))
    try:
        session.run(tokens)
        t = session.snapshot()["totals"]
        one = pinned_copy_gbps(device, session.ckpt.expert_bytes, reps=20)
        fresh = pinned_copy_gbps(device, session.ckpt.expert_bytes, reps=20, fresh=True)
        reading = copy_while_reading_gbps(device, session.ckpt, cfg)
    finally:
        session.engine.close()
    return {"pinned_copy_gbps": limit, "engine_h2d_gbps": t["h2d_gbps"],
            "ratio": ratio(t["h2d_gbps"], limit), "one_expert_copy_gbps": one,
            "one_fresh_expert_copy_gbps": fresh, "one_expert_copy_while_reading_gbps": reading,
            "expert_store": cfg.expert_store,
            "bytes_h2d": t["bytes_h2d"], "bytes_direct": t["bytes_direct"],
            "ms_per_token": t["ms_per_token"], "prefetch": cfg.prefetch,
            "device": torch.cuda.get_device_name(device)}


def copy_while_reading_gbps(device: torch.device, ckpt: Checkpoint, cfg: Config
                            ) -> float | None:
    """Plain copies of one expert while the store's readers read experts into host memory
    (as the engine's uploads run beside its reads): what the host's memory traffic leaves
    of the link. None when the reads were done before the copies."""
    mc = ckpt.config
    keys = [divmod(i, mc.num_experts) for i in range(min(64, mc.num_layers * mc.num_experts))]
    buf = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8)
    pool = ReadPool(cfg.io_workers, 0, cfg.io_direct, cfg.io_piece_kib * 1024)
    try:
        reads = [pool.submit(k, ckpt.extents(*k), buf[i].numpy().data, False)
                 for i, k in enumerate(keys)]
        gbps = pinned_copy_gbps(device, ckpt.expert_bytes, reps=20)
        busy = not all(r.done.is_set() for r in reads)  # the copies ran beside the reads
        for r in reads:
            pool.wait(r)
    finally:
        pool.close()
    return gbps if busy else None


def text(r: dict) -> str:
    if r["engine_h2d_gbps"] is None and r["bytes_direct"]:
        return (f"(d) link: misses read in place by the kernels (miss_direct), no uploads "
                f"to time; pinned copy {r['pinned_copy_gbps']} GB/s on {r['device']}")
    return (f"(d) link: engine uploads {r['engine_h2d_gbps']} GB/s / pinned copy "
            f"{r['pinned_copy_gbps']} GB/s = {r['ratio']} on {r['device']}")
