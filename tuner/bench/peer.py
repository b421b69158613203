"""This engine against transformers on the same checkpoint and prompt, greedy."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace

import torch

from tuner.bench.limits import ratio, sync
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.step.decode import Engine, arena_slots
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import compute_dtype

PROMPT = [5, 17, 3, 60, 41, 8, 22, 90]


def greedy_ms(step, tokens: int, device: torch.device) -> tuple[list[int], float]:
    """Greedy ids from PROMPT (prompt fed one token at a time) and ms per new token."""
    ids = list(PROMPT)
    sync(device)
    t0 = time.perf_counter()
    for pos in range(len(PROMPT) + tokens - 1):
        logits = step(ids[pos], pos)
        if pos >= len(PROMPT) - 1:
            ids.append(int(torch.argmax(logits)))
    return ids, 1000 * (time.perf_counter() - t0) / tokens


def hf_generate_ms(model, tokens: int, device: torch.device) -> tuple[list[int], float]:
    prompt = torch.tensor([PROMPT], device=device)
    with torch.no_grad():
        sync(device)
        t0 = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens,
                             do_sample=False, attention_mask=torch.ones_like(prompt))
        sync(device)
    return out[0].tolist(), 1000 * (time.perf_counter() - t0) / tokens


def first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i - len(PROMPT) for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """The engine streaming through its arena (current settings), the engine's fully
    resident path, transformers with every weight in fast memory (eager attention), and
    transformers with accelerate's offload at the engine's fast-memory budget (dense weights
    plus every expert byte the arena holds there: slots, bypass rows, landing sets; the
    rest in host RAM on a GPU, on disk on a machine without one) over
    `opts.offload_tokens` tokens. ms per generated token from one run each, after a
    warm-up; the tokens each side generated are compared."""
    try:
        import accelerate  # noqa: F401  (needed by transformers' device_map offload)
        import transformers
    except ImportError as err:
        return {"skipped": f"needs transformers and accelerate: {err}"}

    offload_tokens = opts.offload_tokens
    device = pick_device(cfg.device)
    cfg = replace(cfg, temperature=0.0, cpu_pool=False)
    ckpt = Checkpoint(model_folder(cfg))
    if ckpt.quant is not None:
        return {"skipped": "transformers cannot read this engine's quantized experts"}
    mc = ckpt.config
    slots = arena_slots(cfg.expert_cache, mc.num_layers, mc.num_experts)
    dense = sum(t.numel() * t.element_size() for t in ckpt.dense().values())
    resident = Resident(ckpt, cfg.context, device)
    greedy_ms(resident.step, 2, device)  # warm: kernels, handles
    res_ids, res_ms = greedy_ms(resident.step, tokens, device)
    del resident
    engine = Engine(ckpt, cfg, device)
    budget = dense + engine.arena.device_bytes  # what the engine holds there, all of it
    try:
        ids, ms = greedy_ms(engine.step, tokens, device)
    finally:
        engine.close()
    dtype = compute_dtype(ckpt.dtype, device)
    load = dict(dtype=dtype, attn_implementation="eager")
    full = transformers.AutoModelForCausalLM.from_pretrained(
        str(ckpt.folder), device_map={"": device}, **load)
    hf_generate_ms(full, 2, device)
    full_ids, full_ms = hf_generate_ms(full, tokens, device)
    del full
    if device.type == "cuda":
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as folder:
        offload = dict(max_memory={device.index or 0: budget, "cpu": 1 << 40}) \
            if device.type == "cuda" else dict(max_memory={"cpu": budget}, offload_folder=folder)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(ckpt.folder), device_map="auto", **offload, **load)
        placed = sorted({str(v) for v in getattr(model, "hf_device_map", {}).values()})
        hf_generate_ms(model, 1, device)
        off_ids, off_ms = hf_generate_ms(model, offload_tokens, device)
        del model
    n = len(PROMPT)
    return {"tokens": tokens, "offload_tokens": offload_tokens, "budget_bytes": budget,
            "arena_slots": slots, "dtype": str(dtype), "device": str(device),
            "engine_ms_per_token": round(ms, 3), "resident_ms_per_token": round(res_ms, 3),
            "hf_ms_per_token": round(full_ms, 3), "offload_ms_per_token": round(off_ms, 3),
            "offload_placement": placed,
            "resident_vs_hf": ratio(full_ms, res_ms), "engine_vs_offload": ratio(off_ms, ms),
            "engine_vs_hf": ratio(full_ms, ms),
            "first_difference": {"resident": first_difference(ids, res_ids),
                                 "hf": first_difference(ids, full_ids),
                                 "offload": first_difference(ids[:n + offload_tokens],
                                                             off_ids)},
            "peer": f"transformers {transformers.__version__}, accelerate "
                    f"{accelerate.__version__}"}


def text(r: dict) -> str:
    return (f"peer ({r['device']}, {r['dtype']}): engine {r['engine_ms_per_token']} "
            f"ms/token; fully resident {r['resident_ms_per_token']} vs transformers "
            f"{r['hf_ms_per_token']} = {r['resident_vs_hf']}; transformers + accelerate "
            f"offload at {r['budget_bytes']} bytes {r['offload_ms_per_token']} ms/token "
            f"= {r['engine_vs_offload']}x the engine's time; first different token "
            f"{r['first_difference']} ({r['peer']})")
