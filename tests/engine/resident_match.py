"""The streaming engine against the fully resident model, step by step: the bit-identity
several tests of the decode paths check."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config


def streaming_matches_resident(cfg: Config, model: Path, steps: int = 40):
    """Greedy decode through a small arena with stale-gate speculation and through the
    fully resident model: bit-identical logits at every step. Returns the resident model."""
    cfg = replace(cfg, expert_cache=8, prefetch="stale", prefetch_max=0)
    ckpt = Checkpoint(model)
    engine = Engine(ckpt, cfg, torch.device("cpu"))
    resident = Resident(ckpt, cfg.context, torch.device("cpu"))
    token = 7
    try:
        for pos in range(steps):
            a, b = engine.step(token, pos), resident.step(token, pos)
            assert torch.equal(a, b), f"logits differ at step {pos}"
            token = int(torch.argmax(a))
    finally:
        engine.close()
    return resident

