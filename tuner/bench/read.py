"""(a) The engine's reads while it serves misses against the store's raw read."""

from __future__ import annotations

from dataclasses import replace

from tuner.bench.limits import ratio, store_read
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.opening import model_folder
from tuner.engine.session import Session


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """The store's raw bandwidth against the engine's achieved bandwidth while it serves
    misses (bytes read per second of time with reads in flight), both with O_DIRECT."""
    cfg = replace(cfg, io_direct=True, prefetch="off", cpu_pool=False, ssd_gbps=0.0)
    ckpt = Checkpoint(model_folder(cfg))
    raw = store_read(ckpt, cfg.io_workers, True, cfg.io_piece_kib)
    session = Session(cfg)
    try:
        session.run(tokens)
        achieved = session.engine.pool.achieved_gbps()
        t = session.snapshot()["totals"]
    finally:
        session.engine.close()
    return {"raw_gbps": raw["gbps"], "engine_gbps": round(achieved or 0, 4),
            "ratio": ratio(achieved, raw["gbps"]), "raw": raw,
            "engine": {"tokens": tokens, "ms_per_token": t["ms_per_token"],
                       "bytes_per_token": t["bytes_per_token"], "hit_rate": t["hit_rate"]}}


def text(r: dict) -> str:
    return (f"(a) read: engine {r['engine_gbps']} GB/s while serving misses / store "
            f"{r['raw_gbps']} GB/s raw (O_DIRECT) = {r['ratio']}")
