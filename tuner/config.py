"""The engine's settings: one typed field per knob, with its default.

Generated from the knob table by `python -m tuner.knobs --write-config`: edit tuner/knobs.py,
not this file (a test fails when the two differ). Standard library only, so the engine and a
type checker read it without the settings library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """Validated knob values as the engine reads them (tuner.settings validates them)."""

    # -- routing -------------------------------------------------------------------------------
    moce_bonus: float = 0.0
    moce_protect: int = 3
    moce_bonus_r1: float = 0.0
    drop_cold: float = 0.0

    # -- prefetch ------------------------------------------------------------------------------
    prefetch: str = "off"
    prefetch_max: int = 2
    prefetch_unpert: bool = True
    prefetch_route: bool = False
    prefetch_touch: bool = False

    # -- cache ---------------------------------------------------------------------------------
    cache_policy: str = "lru"
    expert_cache: int = 0
    arena_split: str = "global"
    arena_budgets: tuple[int, ...] = ()

    # -- prefill -------------------------------------------------------------------------------
    prefill: bool = True
    prompt_max_pre: int = 0
    prompt_hot: bool = True

    # -- io ------------------------------------------------------------------------------------
    expert_store: str = "disk"
    miss_direct: bool = True
    io_reader: str = "auto"
    io_workers: int = 8
    io_urgent: int = 2
    io_direct: bool = False
    io_piece_kib: int = 256
    verify_reads: int = 0
    io_jitter_ms: float = 0.0

    # -- tiers ---------------------------------------------------------------------------------
    cpu_pool: bool = False
    pcie_frac: float = 0.0
    adapt_fetch: int = 0
    adapt_fetch_min: float = 1.0
    adapt_fetch_margin: float = 0.5
    adapt_fetch_verify: bool = False
    adapt_every: int = 0
    adapt_decay: float = 0.95
    adapt_overlap: bool = False
    adapt_checkres: bool = False

    # -- hardware ------------------------------------------------------------------------------
    ssd_gbps: float = 0.0
    link_gbps: float = 0.0
    cpu_gbps: float = 0.0
    threads: int = 1

    # -- session -------------------------------------------------------------------------------
    model: str = ""
    routing: str = ""
    workload: str = "corpus"
    device: str = "auto"
    seed: int = 0
    temperature: float = 0.8
    context: int = 256
    quality_every: int = 0
    window: int = 64
