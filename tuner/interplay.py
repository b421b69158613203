"""How knobs interact, declared once beside the knob table.

A knob can make another one moot, cap it or be refused with it. Each `Rule` reads the
settings (and, for a warning, what the running engine knows: `Facts`) and returns what is
wrong, or None. A refusing rule rejects the settings wherever they come from (settings.py);
a warning is one of the engine's notes, shown with every snapshot, saying what is off and
how to read a figure. The effective switches the engine acts on (`moce_on`,
`drop_cold_on`, `adapt_fetch_on`) are derived here too, so a note and the behaviour it
describes cannot disagree.

Standard library only: settings and the engine both read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Settings = Any  # a Config or a Settings object: the same field names


@dataclass(frozen=True)
class Facts:
    """What the running engine knows that the settings do not."""

    slots: int  # the arena's slots (expert_cache capped at the model's pairs)
    top_k: int
    cuda: bool
    direct: bool  # a layer reads its misses in place from host memory
    host_driven: bool  # the host routes each layer first (cpu_pool, a trace, a recording)
    batched_prefill: bool  # prompts go through every layer together
    routed_by_trace: bool  # a routing trace, not the model's routers, routes


@dataclass(frozen=True)
class Rule:
    knobs: tuple[str, ...]  # the knobs it reads, for the reference page
    severity: Literal["refuse", "warn"]
    check: Callable[[Settings, Facts | None], str | None]  # facts: None for "refuse"


def moce_on(cfg: Settings) -> bool:
    """The router reads residency (moce's bonus at some rank)."""
    return cfg.moce_bonus > 0 or cfg.moce_bonus_r1 > 0


def drop_cold_on(cfg: Settings) -> bool:
    """drop_cold acts: it drops streamed misses, and with cpu_pool none are streamed."""
    return cfg.drop_cold > 0 and not cfg.cpu_pool


def adapt_fetch_on(cfg: Settings) -> bool:
    """adapt-fetch admits experts: it needs the link share of cpu_pool and no overlap."""
    return bool(cfg.cpu_pool and cfg.adapt_fetch > 0 and cfg.pcie_frac > 0
                and not cfg.adapt_overlap)


def _warn(*knobs: str):
    def wrap(check: Callable[[Settings, Facts], str | None]) -> Rule:
        return Rule(knobs, "warn", lambda cfg, facts: check(cfg, facts) if facts else None)
    return wrap


def _refuse(*knobs: str):
    def wrap(check: Callable[[Settings], str | None]) -> Rule:
        return Rule(knobs, "refuse", lambda cfg, facts: check(cfg))
    return wrap


@_refuse("io_urgent", "io_workers")
def _urgent_readers(cfg):
    if cfg.io_urgent >= cfg.io_workers:
        return (f"io_urgent ({cfg.io_urgent}) must be less than io_workers "
                f"({cfg.io_workers}): at least one reader must serve speculative reads")
    return None


@_refuse("arena_budgets", "expert_cache")
def _budgets_sum(cfg):
    budgets = cfg.arena_budgets
    if budgets and cfg.expert_cache and sum(budgets) != cfg.expert_cache:
        return (f"arena_budgets sum to {sum(budgets)} slots but expert_cache is "
                f"{cfg.expert_cache}: the quotas share the arena, so they must sum to it")
    return None


@_warn("prefetch_route", "moce_bonus")
def _route_needs_bonus(cfg, f):
    return "prefetch_route is off: it needs moce_bonus > 0" \
        if cfg.prefetch_route and cfg.moce_bonus <= 0 else None


@_warn("expert_cache")
def _cache_capped(cfg, f):
    if cfg.expert_cache > f.slots:
        return (f"expert_cache {cfg.expert_cache} capped at {f.slots}: the model has no "
                "more layer-expert pairs")
    return None


@_warn("cpu_pool", "pcie_frac", "adapt_fetch", "adapt_every")
def _sites_need_pool(cfg, f):
    if not cfg.cpu_pool and (cfg.pcie_frac or cfg.adapt_fetch or cfg.adapt_every):
        return "pcie_frac, adapt_fetch and adapt_every act only with cpu_pool = 1"
    return None


@_warn("cpu_pool", "prefetch")
def _pool_stops_prefetch(cfg, f):
    if cfg.cpu_pool and cfg.prefetch != "off":
        return "prefetch is off with cpu_pool: misses are not streamed into the arena"
    return None


@_warn("adapt_fetch", "adapt_overlap")
def _overlap_stops_admissions(cfg, f):
    if cfg.adapt_fetch and cfg.adapt_overlap:
        return ("adapt_fetch is off: adapt_overlap = 1 (seed 003: admissions write the "
                "residency the overlapped tier is swapping)")
    return None


@_warn("prefill", "cpu_pool", "routing")
def _prompts_one_by_one(cfg, f):
    if cfg.prefill and not f.batched_prefill:
        return ("prompts run token by token: batched prefill does not serve cpu_pool, a "
                "routing trace or a route recording")
    return None


@_warn("adapt_fetch", "pcie_frac", "cpu_pool")
def _admissions_need_link(cfg, f):
    if cfg.cpu_pool and cfg.adapt_fetch and not cfg.pcie_frac:
        return "adapt_fetch is off: there is no link share (pcie_frac = 0)"
    return None


@_warn("cpu_pool", "adapt_every", "adapt_fetch")
def _frozen_arena(cfg, f):
    if cfg.cpu_pool and not cfg.adapt_every and not adapt_fetch_on(cfg):
        return ("with cpu_pool the arena changes only by the adaptive tier (adapt_every) "
                "and adapt-fetch; both are off")
    return None


@_warn("arena_budgets", "arena_split")
def _budgets_need_split(cfg, f):
    if cfg.arena_budgets and cfg.arena_split != "layers":
        return "arena_budgets act only with arena_split = layers"
    return None


@_warn("moce_protect")
def _protect_capped(cfg, f):
    if cfg.moce_protect > f.top_k:
        return f"moce_protect {cfg.moce_protect} acts as {f.top_k} (top-k)"
    return None


@_warn("expert_store", "ssd_gbps", "io_direct", "io_jitter_ms")
def _ram_store_reads_nothing(cfg, f):
    if cfg.expert_store == "ram" and (cfg.ssd_gbps or cfg.io_direct or cfg.io_jitter_ms):
        return ("ssd_gbps, io_direct and io_jitter_ms act on reads; with expert_store = ram "
                "a miss is a copy from host memory, not a read")
    return None


@_warn("miss_direct", "expert_store")
def _quantized_not_in_place(cfg, f):
    if cfg.miss_direct and cfg.expert_store == "ram" and f.cuda and not f.direct:
        return ("miss_direct is off: quantized experts are computed by the batched "
                "products, which read the arena only")
    return None


@_warn("drop_cold", "cpu_pool")
def _pool_stops_drops(cfg, f):
    if cfg.drop_cold and cfg.cpu_pool:
        return "drop_cold is off with cpu_pool: it drops streamed misses only"
    return None


@_warn("prefetch", "miss_direct", "expert_store")
def _read_ahead_on_device(cfg, f):
    if cfg.prefetch != "off" and f.direct and not f.host_driven:
        return ("prefetch with misses read in place: each layer reads the next one's "
                "predicted misses ahead on the device, into its own rows; one the router "
                "picks is kept as a miss is (pf_timely), the rest are unused; none takes a "
                "slot ahead, so none is late, cancelled or partial")
    return None


@_warn("drop_cold")
def _drops_lower_ctrl(cfg, f):
    if drop_cold_on(cfg):
        return ("drop_cold is on: the predictors are scored against the experts computed, "
                "so ctrl reads below 100 % by the dropped share; read prev and stale "
                "against ctrl, not against 100 %")
    return None


@_warn("moce_bonus", "moce_bonus_r1", "drop_cold", "routing", "quality_every")
def _lossy_unmeasured(cfg, f):
    if (moce_on(cfg) or drop_cold_on(cfg) or f.routed_by_trace) and not cfg.quality_every:
        return ("the output differs from exact routing; quality_every > 0 measures what "
                "that costs (KL, top-1 agreement)")
    return None


RULES: tuple[Rule, ...] = (
    _urgent_readers, _budgets_sum,
    _route_needs_bonus, _cache_capped, _sites_need_pool, _pool_stops_prefetch,
    _overlap_stops_admissions, _prompts_one_by_one, _admissions_need_link, _frozen_arena,
    _budgets_need_split, _protect_capped, _ram_store_reads_nothing, _quantized_not_in_place,
    _pool_stops_drops, _read_ahead_on_device, _drops_lower_ctrl, _lossy_unmeasured,
)


def refused(cfg: Settings) -> list[str]:
    """Why these settings cannot run together (empty: they can)."""
    return [m for r in RULES if r.severity == "refuse" and (m := r.check(cfg, None))]


def warnings(cfg: Settings, facts: Facts) -> list[str]:
    """What is off or capped at these settings on this engine, and how to read it."""
    return [m for r in RULES if r.severity == "warn" and (m := r.check(cfg, facts))]
