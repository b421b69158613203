"""`tuner bench`: the engine measured against the limits of the machine it runs on.

Each section measures two things in the same run and prints their ratio, so that the noise
of a shared machine falls on both sides alike. Ratios, not absolute figures, are the
result; the raw figures are printed beside them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import torch

from tuner.engine.checkpoint import Checkpoint
from tuner.engine.counters import IDX
from tuner.engine.decode import Engine, arena_slots
from tuner.engine.host_copy import HostCopy
from tuner.engine.model import compute_dtype, experts_out
from tuner.engine.reference import Resident
from tuner.engine.opening import model_folder, pick_device
from tuner.engine.session import Session
from tuner.engine.store import ReadPool
from tuner.knobs import Config


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def store_read(ckpt: Checkpoint, workers: int, direct: bool, piece_kib: int = 256,
               experts: int = 256) -> dict:
    """Raw read bandwidth of the expert store with the engine's own reader: `experts`
    experts spread over the model, all queued at once, into memory already faulted in (as
    the engine's rows are). Through the page cache the timed pass is the second one, as
    the engine's reads are once the model has been read."""
    mc = ckpt.config
    total = mc.num_layers * mc.num_experts
    step = max(1, total // experts)
    keys = [divmod(i, mc.num_experts) for i in range(0, total, step)][:experts]
    buf = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8)
    pool = ReadPool(workers, 0, direct, piece_kib * 1024)
    try:
        for _ in range(1 if direct else 2):
            t0 = time.perf_counter()
            reads = [pool.submit(k, ckpt.extents(*k), memoryview(buf[i].numpy()), False)
                     for i, k in enumerate(keys)]
            for r in reads:
                pool.wait(r)
            secs = time.perf_counter() - t0
    finally:
        pool.close()
    nbytes = len(keys) * ckpt.expert_bytes
    return {"experts": len(keys), "bytes": nbytes, "seconds": round(secs, 4),
            "gbps": round(nbytes / secs / 1e9, 4), "direct": direct, "workers": workers}


def read_bandwidth(cfg: Config, tokens: int) -> dict:
    """(a) the store's raw bandwidth against the engine's achieved bandwidth while it serves
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
            "ratio": _ratio(achieved, raw["gbps"]), "raw": raw,
            "engine": {"tokens": tokens, "ms_per_token": t["ms_per_token"],
                       "bytes_per_token": t["bytes_per_token"], "hit_rate": t["hit_rate"]}}


def _time_steps(step, tokens: list[int]) -> float:
    t0 = time.perf_counter()
    for pos, tok in enumerate(tokens):
        logits = step(tok, pos)
    logits.cpu()  # the device has finished every token
    return 1000 * (time.perf_counter() - t0) / len(tokens)


def machinery(cfg: Config, tokens: int, rounds: int = 3) -> dict:
    """(b) ms per token through the arena with every lookup a hit against the fully
    resident model, interleaved A B A B on the same tokens."""
    ckpt = Checkpoint(model_folder(cfg))
    mc = ckpt.config
    device = pick_device(cfg.device)
    cfg = replace(cfg, expert_cache=mc.num_layers * mc.num_experts, prefetch="off",
                  moce_bonus=0.0, moce_bonus_r1=0.0, cpu_pool=False)
    resident = Resident(ckpt, cfg.context, device)
    seq, tok = [], 1
    for pos in range(tokens):  # a greedy sequence, so both sides see the same routings
        seq.append(tok)
        tok = int(torch.argmax(resident.step(tok, pos)))
    engine = Engine(ckpt, cfg, device)
    try:
        _time_steps(engine.step, seq)  # warm: loads every expert the sequence routes to
        before = engine.counters.cur.copy()
        arena_ms, resident_ms = [], []
        for _ in range(rounds):
            arena_ms.append(_time_steps(engine.step, seq))
            resident_ms.append(_time_steps(resident.step, seq))
        delta = engine.counters.cur - before
        lookups, hits = delta[:, IDX["lookups"]].sum(), delta[:, IDX["hits"]].sum()
    finally:
        engine.close()
    a, r = statistics.median(arena_ms), statistics.median(resident_ms)
    return {"arena_ms_per_token": round(a, 3), "resident_ms_per_token": round(r, 3),
            "ratio": _ratio(a, r), "hit_rate": round(100 * hits / lookups, 2),
            "tokens": tokens, "rounds": rounds,
            "arena_runs": [round(x, 3) for x in arena_ms],
            "resident_runs": [round(x, 3) for x in resident_ms]}


def prefill(cfg: Config, prompt: int = 256, rounds: int = 2) -> dict:
    """(g) A `prompt`-token prompt prefilled in one batch against token by token through the
    decode path, each on a fresh session (cold arena), interleaved; ms per prompt token
    and time to first token."""
    cfg = replace(cfg, context=max(cfg.context, prompt + 1), temperature=0.0)
    g = torch.Generator().manual_seed(cfg.seed)
    vocab = Checkpoint(model_folder(cfg)).config.vocab_size
    ids = torch.randint(0, vocab, (prompt,), generator=g).tolist()
    runs: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for batched in (True, False):
            session = Session(replace(cfg, prefill=batched), prompt_ids=ids)
            try:
                session.run(prompt)
                runs[batched].append(session.snapshot()["phases"]["prefill"]["ms_per_token"])
            finally:
                session.engine.close()
    b, t = (round(statistics.median(runs[x]), 3) for x in (True, False))
    return {"prompt_tokens": prompt, "batched_ms_per_token": b, "per_token_ms_per_token": t,
            "batched_ttft_ms": round(b * prompt, 1), "per_token_ttft_ms": round(t * prompt, 1),
            "speedup": _ratio(t, b), "rounds": rounds, "batched_runs": runs[True],
            "per_token_runs": runs[False]}


def _sites_run(cfg: Config, tokens: int) -> dict:
    """Warm-up with the adaptive tier filling the arena, then the measured tokens with the
    tier frozen, so the link carries only the share (seed 002's static tiers)."""
    session = Session(replace(cfg, adapt_every=cfg.adapt_every or 16))
    try:
        session.run(tokens // 2)
        session.submit(replace(cfg, adapt_every=0))
        session.reset_counters()
        session.run(tokens)
        return session.snapshot()
    finally:
        session.engine.close()


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


def cpu_expert_gbps(ckpt: Checkpoint, experts: int = 64) -> float:
    """The CPU site's limit: expert bytes computed per second on the host, a layer's top-k
    at a time, as the CPU site computes them."""
    mc = ckpt.config
    host = HostCopy(ckpt)
    keys = [divmod(i, mc.num_experts) for i in range(min(experts, mc.num_layers * mc.num_experts))]
    x = torch.randn(mc.hidden_size, dtype=host.dtype)
    t0 = time.perf_counter()
    for i in range(0, len(keys), mc.top_k):
        experts_out(x, host.gather(keys[i:i + mc.top_k]))
    return round(len(keys) * ckpt.expert_bytes / (time.perf_counter() - t0) / 1e9, 3)


def link_bandwidth(cfg: Config, tokens: int) -> dict:
    """(d) achieved host-to-device bandwidth of the engine's uploads (CUDA events) against a
    plain pinned copy of 256 MiB measured in the same run; beside it, plain pinned copies of
    one expert (a layer's upload when it has a single miss), of a buffer the host left
    alone and of one it has just written, as the store's reads write the staging ring."""
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
        reading = _copy_while_reading_gbps(device, session.ckpt, cfg)
    finally:
        session.engine.close()
    return {"pinned_copy_gbps": limit, "engine_h2d_gbps": t["h2d_gbps"],
            "ratio": _ratio(t["h2d_gbps"], limit), "one_expert_copy_gbps": one,
            "one_fresh_expert_copy_gbps": fresh, "one_expert_copy_while_reading_gbps": reading,
            "expert_store": cfg.expert_store,
            "bytes_h2d": t["bytes_h2d"],
            "ms_per_token": t["ms_per_token"], "prefetch": cfg.prefetch,
            "device": torch.cuda.get_device_name(device)}


def _copy_while_reading_gbps(device: torch.device, ckpt: Checkpoint, cfg: Config) -> float:
    """Plain copies of one expert while the store's readers read experts into host memory
    (as the engine's uploads run beside its reads): what the host's memory traffic leaves
    of the link."""
    mc = ckpt.config
    keys = [divmod(i, mc.num_experts) for i in range(min(64, mc.num_layers * mc.num_experts))]
    buf = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8)
    pool = ReadPool(cfg.io_workers, 0, cfg.io_direct, cfg.io_piece_kib * 1024)
    try:
        reads = [pool.submit(k, ckpt.extents(*k), memoryview(buf[i].numpy()), False)
                 for i, k in enumerate(keys)]
        gbps = pinned_copy_gbps(device, ckpt.expert_bytes, reps=20)
        busy = not all(r.done.is_set() for r in reads)  # the copies ran beside the reads
        for r in reads:
            pool.wait(r)
    finally:
        pool.close()
    return gbps if busy else None


def sites_sweep(cfg: Config, fracs: list[float], tokens: int, scale: float) -> dict:
    """ms per token over pcie_frac beside the site-bound prediction: per layer
    max(T_link, T_cpu) from the experts each site served over the whole run. That lets the
    sites overlap across tokens, so it is a lower bound: at decode a layer has only a few
    misses, and a token-layer that sends one expert over a slow link waits for all of it.
    With emulated link and CPU bandwidths they
    are scaled by `scale`, so that the emulated sites, not this machine's own compute, set
    the pace; without, the sites run at real speed and the prediction uses the limits
    measured here (pinned copy, CPU expert rate). The sweep runs forwards, then backwards,
    so drift falls on every point alike."""
    ckpt = Checkpoint(model_folder(cfg))
    emulated = bool(cfg.link_gbps and cfg.cpu_gbps)
    if emulated:
        link, cpu = cfg.link_gbps * scale, cfg.cpu_gbps * scale
    else:
        link, cpu = pinned_copy_gbps(pick_device(cfg.device)), cpu_expert_gbps(ckpt)
        scale = None
    runs: dict[float, list[dict]] = {f: [] for f in fracs}
    for frac in fracs + fracs[::-1]:
        runs[frac].append(_sites_run(replace(cfg, cpu_pool=True, pcie_frac=frac,
                                             link_gbps=link if emulated else 0.0,
                                             cpu_gbps=cpu if emulated else 0.0), tokens))
    rows = []
    for frac, snaps in runs.items():
        snap = snaps[0]  # counts are deterministic: the same in both runs
        nbytes = snap["model"]["expert_bytes"]
        # the link also carries the adaptive tier's swaps, if it was left running
        bound = sum(max((r["link_experts"] + r["tier_swaps"]) * nbytes / (link * 1e9),
                        r["cpu_experts"] * nbytes / (cpu * 1e9)) for r in snap["layers"])
        t = snap["totals"]
        ms = [s["totals"]["ms_per_token"] for s in snaps]
        rows.append({"pcie_frac": frac, "ms_per_token": round(statistics.mean(ms), 3),
                     "runs": ms, "predicted_ms_per_token": round(1000 * bound / t["tokens"], 3),
                     "cpu_fraction": t["cpu_fraction"], "hit_rate": t["hit_rate"]})
    best = min(rows, key=lambda r: r["ms_per_token"])
    return {"link_gbps": link, "cpu_gbps": cpu, "emulated": emulated, "scale": scale,
            "tier": "fills the arena during the warm-up, then frozen",
            "balance_point": round(link / (link + cpu), 4),
            "measured_best_frac": best["pcie_frac"],
            "predicted_best_frac": min(rows, key=lambda r: r["predicted_ms_per_token"])[
                "pcie_frac"], "tokens": tokens, "rows": rows}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_copy_gbps(device: torch.device, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """The compute device's memory bandwidth: a plain copy within it, counting the bytes
    read and the bytes written (on a machine without a GPU, within host memory)."""
    nbytes = nbytes if device.type == "cuda" else nbytes // 4
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    _sync(device)
    return round(2 * nbytes * reps / (time.perf_counter() - t0) / 1e9, 3)


def active_bytes(dec, expert_bytes: int, span: int) -> int:
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

    dense = sum(size(v) for layer in dec.layers for k, v in layer.items()
                if k not in ("q_norm", "k_norm"))  # both live on in qk_norm, or are read once
    dense += size(dec.routers) + size(dec.lm_head) + size(dec.final_norm)
    dense += mc.hidden_size * dec.embed.element_size()
    kv = 2 * mc.num_layers * mc.num_kv_heads * span * mc.head_dim * dec.k_cache.element_size()
    return dense + kv + mc.num_layers * mc.top_k * expert_bytes


@torch.inference_mode()
def token_compute_ms(resident: Resident, tokens: int) -> float:
    """ms a token takes through the fully resident model at its fastest: on CUDA every layer
    and the logits as one graph, with no launch in between; on the CPU its steps."""
    if resident.run is None:
        _time_steps(resident.step, [1] * 2)
        return _time_steps(resident.step, [1] * tokens)
    resident.step(1, 0)
    graph = resident.run.whole_token()
    return _time_steps(lambda _tok, _pos: graph.replay() or resident.run.out, [0] * tokens)


def limit(cfg: Config, tokens: int) -> dict:
    """(e) The engine's ms per token at the current settings against its floors, every piece
    measured in the same run.

    Physical floor: the bytes a token must read where it computes (dense weights, the KV
    cache, k experts a layer) over the device's own copy bandwidth, plus the bytes of the
    routed experts that were not resident (misses, however fetched) over the slower of the
    store's raw read and, on a GPU, a plain pinned host-to-device copy (with expert_store =
    ram, the copy alone): a layer cannot compute before its misses arrive. Beside it, the
    compute of the same products at full speed (the fully resident token as one CUDA graph),
    and the floor before this one: the engine's own dense part and expert compute plus the
    same transfer."""
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
        expert_ms = _expert_compute_ms(session.engine, tokens)
        active = active_bytes(session.engine.dec, ckpt.expert_bytes,
                              session.engine.dec.span(0))
        slots = session.engine.slots.n
    finally:
        session.engine.close()
    fetched = t["sync_misses"] + t["pf_late"] + t["pf_timely"]
    miss_bytes = fetched * ckpt.expert_bytes / tokens
    dense = Resident(ckpt, cfg.context, device, experts=False)
    _time_steps(dense.step, [1] * min(8, tokens))  # warm
    dense_ms = _time_steps(dense.step, [1] * tokens)
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
            "ratio": _ratio(engine, floor),
            "compute_floor_ms_per_token": round(max(hbm_ms, compute_ms) + transfer_ms, 3),
            "compute_ratio": _ratio(engine, max(hbm_ms, compute_ms) + transfer_ms),
            "current_floor_ms_per_token": round(current, 3),
            "current_ratio": _ratio(engine, current),
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


def _expert_compute_ms(engine: Engine, tokens: int) -> float:
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
    def token(_tok, _pos):
        for idx in rows:
            out = arena.experts.mix(x, w, idx)
        return out

    _time_steps(token, [0] * 2)
    return _time_steps(token, [0] * tokens) * mc.top_k / k


def quantized(cfg: Config, tokens: int, bits: int = 4) -> dict:
    """(f) What quantized experts save: the current model against its int`bits` copy (made
    once into the model cache; groups of 64, or 32 where a matrix's input dimension needs
    it) at the same arena share, bytes and ms per token from a run of each with the same
    settings, and the copy's quality cost against the source."""
    from tuner.engine import quant, synth
    from tuner.measure.quality import compare

    ckpt = Checkpoint(model_folder(cfg))
    if ckpt.quant is not None:
        return {"skipped": f"{ckpt.name} is already quantized; give a float model"}
    mc = ckpt.config
    group = 64 if mc.hidden_size % 64 == mc.expert_width % 64 == 0 else 32
    q = quant.Quant(bits, group)
    out = synth.cache_dir() / f"{ckpt.name}-int{bits}g{group}"
    if not (out / "config.json").is_file():
        routed = f".{ckpt.config.spec.moe}.experts."
        quant.write_quantized(ckpt.folder, out, q, lambda name: routed in name)
    runs = {}
    for name, folder in (("source", ckpt.folder), ("quantized", out)):
        session = Session(replace(cfg, model=str(folder)))
        try:
            session.run(tokens)
            runs[name] = session.snapshot()["totals"]
        finally:
            session.engine.close()
    a, b = runs["source"], runs["quantized"]
    return {"bits": bits, "group": group, "model": str(out),
            "source_expert_bytes": ckpt.expert_bytes,
            "expert_bytes": Checkpoint(out).expert_bytes,
            "source_bytes_per_token": a["bytes_per_token"], "bytes_per_token": b["bytes_per_token"],
            "ratio": _ratio(a["bytes_per_token"], b["bytes_per_token"]),
            "source_ms_per_token": a["ms_per_token"], "ms_per_token": b["ms_per_token"],
            "source_hit_rate": a["hit_rate"], "hit_rate": b["hit_rate"], "tokens": tokens,
            "quality": compare(ckpt, Checkpoint(out), pick_device(cfg.device), tokens,
                               cfg.context)}


PEER_PROMPT = [5, 17, 3, 60, 41, 8, 22, 90]


def _greedy_ms(step, tokens: int, device: torch.device) -> tuple[list[int], float]:
    """Greedy ids from PEER_PROMPT (prompt fed one token at a time) and ms per new token."""
    ids = list(PEER_PROMPT)
    _sync(device)
    t0 = time.perf_counter()
    for pos in range(len(PEER_PROMPT) + tokens - 1):
        logits = step(ids[pos], pos)
        if pos >= len(PEER_PROMPT) - 1:
            ids.append(int(torch.argmax(logits)))
    return ids, 1000 * (time.perf_counter() - t0) / tokens


def _hf_generate_ms(model, tokens: int, device: torch.device) -> tuple[list[int], float]:
    prompt = torch.tensor([PEER_PROMPT], device=device)
    with torch.no_grad():
        _sync(device)
        t0 = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens,
                             do_sample=False, attention_mask=torch.ones_like(prompt))
        _sync(device)
    return out[0].tolist(), 1000 * (time.perf_counter() - t0) / tokens


def _first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i - len(PEER_PROMPT) for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def peer(cfg: Config, tokens: int, offload_tokens: int = 8) -> dict:
    """This engine against transformers on the same checkpoint and prompt, greedy: the
    engine streaming through its arena (current settings), the engine's fully resident
    path, transformers with every weight in fast memory (eager attention), and
    transformers with accelerate's offload at the engine's fast-memory budget (dense weights
    plus the arena's expert bytes; the rest in host RAM on a GPU, on disk on a machine
    without one) over `offload_tokens` tokens. ms per generated token from one run each,
    after a warm-up; the tokens each side generated are compared."""
    try:
        import accelerate  # noqa: F401  (needed by transformers' device_map offload)
        import transformers
    except ImportError as err:
        return {"skipped": f"needs transformers and accelerate: {err}"}
    import tempfile

    device = pick_device(cfg.device)
    cfg = replace(cfg, temperature=0.0, cpu_pool=False)
    ckpt = Checkpoint(model_folder(cfg))
    if ckpt.quant is not None:
        return {"skipped": "transformers cannot read this engine's quantized experts"}
    mc = ckpt.config
    slots = arena_slots(cfg.expert_cache, mc.num_layers, mc.num_experts)
    dense = sum(t.numel() * t.element_size() for t in ckpt.dense().values())
    budget = dense + slots * ckpt.expert_bytes
    resident = Resident(ckpt, cfg.context, device)
    _greedy_ms(resident.step, 2, device)  # warm: kernels, handles
    res_ids, res_ms = _greedy_ms(resident.step, tokens, device)
    del resident
    engine = Engine(ckpt, cfg, device)
    try:
        ids, ms = _greedy_ms(engine.step, tokens, device)
    finally:
        engine.close()
    dtype = compute_dtype(ckpt.dtype, device)
    load = dict(dtype=dtype, attn_implementation="eager")
    full = transformers.AutoModelForCausalLM.from_pretrained(
        str(ckpt.folder), device_map={"": device}, **load)
    _hf_generate_ms(full, 2, device)
    full_ids, full_ms = _hf_generate_ms(full, tokens, device)
    del full
    if device.type == "cuda":
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as folder:
        offload = dict(max_memory={device.index or 0: budget, "cpu": 1 << 40}) \
            if device.type == "cuda" else dict(max_memory={"cpu": budget}, offload_folder=folder)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(ckpt.folder), device_map="auto", **offload, **load)
        placed = sorted({str(v) for v in getattr(model, "hf_device_map", {}).values()})
        _hf_generate_ms(model, 1, device)
        off_ids, off_ms = _hf_generate_ms(model, offload_tokens, device)
        del model
    n = len(PEER_PROMPT)
    return {"tokens": tokens, "offload_tokens": offload_tokens, "budget_bytes": budget,
            "arena_slots": slots, "dtype": str(dtype), "device": str(device),
            "engine_ms_per_token": round(ms, 3), "resident_ms_per_token": round(res_ms, 3),
            "hf_ms_per_token": round(full_ms, 3), "offload_ms_per_token": round(off_ms, 3),
            "offload_placement": placed,
            "resident_vs_hf": _ratio(full_ms, res_ms), "engine_vs_offload": _ratio(off_ms, ms),
            "engine_vs_hf": _ratio(full_ms, ms),
            "first_difference": {"resident": _first_difference(ids, res_ids),
                                 "hf": _first_difference(ids, full_ids),
                                 "offload": _first_difference(ids[:n + offload_tokens],
                                                              off_ids)},
            "peer": f"transformers {transformers.__version__}, accelerate "
                    f"{accelerate.__version__}"}


def describe(cfg: Config) -> dict:
    ckpt = Checkpoint(model_folder(cfg))
    mc = ckpt.config
    return {"model": ckpt.name, "layers": mc.num_layers, "experts": mc.num_experts,
            "top_k": mc.top_k, "expert_bytes": ckpt.expert_bytes,
            "arena_slots": arena_slots(cfg.expert_cache, mc.num_layers, mc.num_experts),
            "torch_threads": torch.get_num_threads(), "device": str(pick_device(cfg.device)),
            "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
