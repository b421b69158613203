"""(a) The engine's reads while it serves misses against the store's raw read."""

from __future__ import annotations

from dataclasses import replace

from tuner.bench.limits import best_store_read, ratio
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.memory.store import reader_for, readers_here
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.session.session import Session
from tuner.engine.weights.checkpoint import Checkpoint


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """The store's best raw read (every reader here, a deep queue, large requests) against
    the engine's achieved bandwidth while it serves misses (bytes read per second of time
    with reads in flight) with each reader here, all with O_DIRECT. The headline is the
    reader `io_reader` picks."""
    cfg = replace(cfg, expert_store="disk", io_direct=True, prefetch="off", cpu_pool=False,
                  ssd_gbps=0.0, io_jitter_ms=0.0)
    chosen = reader_for(cfg.io_reader, pick_device(cfg.device))
    here = readers_here()
    raw = best_store_read(Checkpoint(model_folder(cfg)), cfg.io_workers, cfg.io_piece_kib,
                          True, here)
    readers = {r: _engine(replace(cfg, io_reader=r), tokens, raw["gbps"]) for r in here}
    engine = readers[chosen]
    return {"reader": chosen, "raw_gbps": raw["gbps"], "engine_gbps": engine["engine_gbps"],
            "ratio": engine["ratio"], "raw": raw, "engine": engine, "readers": readers}


def _engine(cfg: Config, tokens: int, raw_gbps: float) -> dict:
    session = Session(cfg)
    try:
        session.run(tokens)
        pool = session.engine.pool
        achieved = pool.achieved_gbps()
        t = session.snapshot()["totals"]
    finally:
        session.engine.close()
    return {"reader": pool.name, "engine_gbps": round(achieved or 0, 4),
            "ratio": ratio(achieved, raw_gbps), "read_busy_s": round(pool.busy_s, 4),
            "bytes_read": pool.bytes_read, "tokens": tokens, "ms_per_token": t["ms_per_token"],
            "bytes_per_token": t["bytes_per_token"], "hit_rate": t["hit_rate"]}


def text(r: dict) -> str:
    raw = r["raw"]
    others = "".join(f"; {name} {e['engine_gbps']} GB/s = {e['ratio']}"
                     for name, e in r["readers"].items() if name != r["reader"])
    return (f"(a) read: engine {r['engine_gbps']} GB/s while serving misses ({r['reader']}) / "
            f"store {r['raw_gbps']} GB/s raw (O_DIRECT, best: {raw['reader']}, "
            f"{raw['workers']} readers, {raw['piece_kib']} KiB pieces) = {r['ratio']}{others}")
