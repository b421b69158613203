"""Streaming logits on CUDA against the fully resident model's: bit-identical is the claim
(a GPU only)."""

from __future__ import annotations

from dataclasses import replace

import torch

from tuner.bench.greedy import greedy, on_each_demo
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint


def streaming_vs_resident(cfg: Config, steps: int, ckpt: Checkpoint) -> dict:
    """The same greedy tokens through the arena with stale-gate prefetch and through the
    fully resident model, on CUDA."""
    device = torch.device("cuda")
    engine = Engine(ckpt, replace(cfg, device="cuda", prefetch="stale"), device)
    try:
        ids, streamed = greedy(engine, steps)
    finally:
        engine.close()
    resident = Resident(ckpt, cfg.context, device)
    rids, full = greedy(resident, steps)
    return {"same_tokens": ids == rids,
            "bit_identical_logits": bool(torch.equal(streamed, full)),
            "max_logit_difference": (streamed - full).abs().max().item()}


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    return on_each_demo(streaming_vs_resident, "the fully resident model is compared on a GPU")


def text(r: dict) -> str:
    return "resident: " + "; ".join(
        f"{d} bit-identical logits {c['bit_identical_logits']}, same tokens "
        f"{c['same_tokens']}" for d, c in r.items())
