"""Live settings: what a change of the live knobs does to a running engine, between tokens.

Restart-class knobs rebuild the engine (versions.py); the rest reach the parts that read
them here: the store's emulated bandwidth and jitter, the sites' link and CPU bandwidths,
the cache policy and per-layer quotas, the three sites and the quality probe (made the
first time they are asked for), and the device-first path's bodies, whose graphs bake in
how they route and read ahead (a change recaptures them before the next token).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.config import Config
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.memory.tiers import Sites
from tuner.engine.step.quality import QualityProbe
from tuner.vocabulary.slots import quotas_for

if TYPE_CHECKING:
    from tuner.engine.step.decode import Engine


class LiveSettings:
    def __init__(self, engine: Engine):
        self.engine = engine

    def apply(self, cfg: Config) -> None:
        """Takes the live knobs of `cfg`; raises ValueError (QuotaError), having changed
        nothing, when they do not fit this model and arena."""
        eng = self.engine
        quotas = quotas_for(cfg.arena_split, cfg.arena_budgets, eng.mc.num_layers,
                            eng.slots.n)
        if cfg.cpu_pool and eng.sites is None:
            eng.drain()  # no speculation in flight once misses stop streaming
            host = eng.arena.host or HostCopy(eng.ckpt, pin=eng.cuda, check=eng.check)
            eng.sites = Sites(eng.arena, host, eng.tier, eng.counters, eng.clock, eng.hurry)
        eng.cfg = cfg
        eng.pool.ssd.gbps = cfg.ssd_gbps
        eng.pool.jitter_ms = cfg.io_jitter_ms
        if eng.sites:
            eng.sites.link_line.gbps = cfg.link_gbps
            eng.sites.cpu_line.gbps = cfg.cpu_gbps
        eng.slots.set_policy(cfg.cache_policy)
        eng.slots.quotas = quotas
        if cfg.quality_every and eng.quality is None:
            eng.quality = QualityProbe(eng.ckpt, eng.dec, eng.counters, cfg)
        if eng.device_step is not None:
            eng.device_step.set_route(eng.device_first.route())
        eng.warm_up()
