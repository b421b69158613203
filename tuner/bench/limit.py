"""(e) The engine's ms per token at the current settings against its floors, every piece
measured in the same run.

Physical floor: the bytes a token must read where it computes (dense weights, the KV cache,
k experts a layer) over the device's own copy bandwidth, plus the bytes of the routed
experts that were not resident (misses, however fetched) over the slower of the store's raw
read and, on a GPU, a plain pinned host-to-device copy (with expert_store = ram, the copy
alone): a layer cannot compute before its misses arrive. Beside it, the compute of the same
products at full speed (the fully resident token as one CUDA graph), and the floor before
this one: the engine's own dense part and expert compute plus the same transfer.
"""

from __future__ import annotations

from dataclasses import fields

import torch

from tuner.bench.limits import (
    device_copy_gbps,
    pinned_copy_gbps,
    ratio,
    store_read,
    time_steps,
)
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.session.session import Session
from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Decoder


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    if cfg.cpu_pool:
        return {"skipped": "cpu_pool serves misses at the link and CPU sites; the sites "
                           "section measures those"}
    device = pick_device(cfg.device)
    ckpt = Checkpoint(model_folder(cfg))
    session = Session(cfg)
    try:
        session.run(max(1, tokens // 2))  # the arena fills
        session.reset_counters()
        session.run(tokens)
        t = session.snapshot()["totals"]
        expert_ms = expert_compute_ms(session.engine, tokens)
        active = active_bytes(session.engine.dec, ckpt.expert_bytes,
                              session.engine.dec.span(0))
        slots = session.engine.slots.n
    finally:
        session.engine.close()
    fetched = t["sync_misses"] + t["pf_late"] + t["pf_timely"]
    miss_bytes = fetched * ckpt.expert_bytes / tokens
    dense = Resident(ckpt, cfg.context, device, experts=False)
    time_steps(dense.step, [1] * min(8, tokens))  # warm
    dense_ms = time_steps(dense.step, [1] * tokens)
    del dense
    compute_ms = token_compute_ms(Resident(ckpt, cfg.context, device), tokens)
    hbm = device_copy_gbps(device)
    store = store_read(ckpt, cfg.io_workers, cfg.io_direct, cfg.io_piece_kib)["gbps"]
    link = pinned_copy_gbps(device) if device.type == "cuda" else None
    # misses cross the store and the link; from the RAM store only the link
    pipe = link if link and cfg.expert_store == "ram" else min(store, link) if link else store
    transfer_ms = 1000 * miss_bytes / (pipe * 1e9)
    hbm_ms = 1000 * active / (hbm * 1e9)
    floor = hbm_ms + transfer_ms
    current = dense_ms + expert_ms + transfer_ms
    engine = t["ms_per_token"]
    return {"engine_ms_per_token": engine, "floor_ms_per_token": round(floor, 3),
            "ratio": ratio(engine, floor),
            "compute_floor_ms_per_token": round(max(hbm_ms, compute_ms) + transfer_ms, 3),
            "compute_ratio": ratio(engine, max(hbm_ms, compute_ms) + transfer_ms),
            "current_floor_ms_per_token": round(current, 3),
            "current_ratio": ratio(engine, current),
            "active_bytes_per_token": active, "hbm_gbps": hbm, "hbm_ms": round(hbm_ms, 3),
            "compute_ms": round(compute_ms, 3), "dense_ms": round(dense_ms, 3),
            "expert_ms": round(expert_ms, 3), "transfer_ms": round(transfer_ms, 3),
            "link_only_transfer_ms": round(1000 * miss_bytes / (link * 1e9), 3) if link else None,
            "miss_bytes_per_token": round(miss_bytes),
            "misses_per_token": round(fetched / tokens, 3), "store_gbps": store,
            "transfer_gbps": pipe,
            "link_gbps": link, "hit_rate": t["hit_rate"],
            "bytes_read_per_token": t["bytes_per_token"], "arena_slots": slots,
            "tokens": tokens}


def active_bytes(dec: Decoder, expert_bytes: int, span: int) -> int:
    """Bytes one decoded token must read where it computes: every dense weight (the
    embedding's one row), the keys and values of `span` cache positions, and the top-k
    experts of every layer."""
    mc = dec.cfg

    def size(t) -> int:
        if t is None:
            return 0
        if isinstance(t, torch.Tensor):
            return t.numel() * t.element_size()
        return sum(size(getattr(t, f)) for f in ("gate_up", "down"))  # a shared expert

    dense = sum(size(getattr(layer, f.name)) for layer in dec.layers for f in fields(layer)
                if f.name not in ("q_norm", "k_norm"))  # both live on in qk_norm, or are read once
    dense += size(dec.routers) + size(dec.lm_head) + size(dec.final_norm)
    dense += mc.hidden_size * dec.embed.element_size()
    kv = 2 * mc.num_layers * mc.num_kv_heads * span * mc.head_dim * dec.k_cache.element_size()
    return dense + kv + mc.num_layers * mc.top_k * expert_bytes


@torch.inference_mode()
def token_compute_ms(resident: Resident, tokens: int) -> float:
    """ms a token takes through the fully resident model at its fastest: on CUDA every layer
    and the logits as one graph, with no launch in between; on the CPU its steps."""
    if resident.run is None:
        time_steps(resident.step, [1] * 2)
        return time_steps(resident.step, [1] * tokens)
    resident.step(1, 0)
    graph = resident.run.whole_token()
    run = resident.run
    return time_steps(lambda _tok, _pos: graph.replay() or run.out, [0] * tokens)


def expert_compute_ms(engine: Engine, tokens: int) -> float:
    """ms a token spends computing routed experts: per layer, top-k arena rows computed and
    summed as the engine does (Experts.mix), over `tokens` tokens' worth of layers."""
    mc, arena = engine.mc, engine.arena
    g = torch.Generator().manual_seed(0)
    x = torch.randn(mc.hidden_size, generator=g).to(engine.device, engine.dtype)
    k = min(mc.top_k, arena.n)
    rows = [torch.randperm(arena.n, generator=g)[:k].to(engine.device)
            for _ in range(mc.num_layers)]
    w = torch.full((k,), 1 / k, device=engine.device)

    @torch.inference_mode()
    def token(_tok: int, _pos: int) -> torch.Tensor:
        for idx in rows:
            out = arena.experts.mix(x, w, idx)
        return out

    time_steps(token, [0] * 2)
    return time_steps(token, [0] * tokens) * mc.top_k / k


def text(r: dict) -> str:
    return (f"(e) limit: engine {r['engine_ms_per_token']} ms/token / physical floor "
            f"{r['floor_ms_per_token']} ms/token = {r['ratio']} ({r['active_bytes_per_token']}"
            f" active bytes over {r['hbm_gbps']} GB/s {r['hbm_ms']} + "
            f"{r['miss_bytes_per_token']} miss bytes over "
            f"{r['transfer_gbps']} GB/s "
            f"{r['transfer_ms']}; hit rate {r['hit_rate']} %); against the same products "
            f"at full speed ({r['compute_ms']} ms) {r['compute_ratio']}; against the "
            f"engine's own dense part and expert compute {r['current_ratio']}")
