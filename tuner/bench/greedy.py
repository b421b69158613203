"""The demo model decoded greedily on the CPU and on CUDA: the same tokens (a GPU only)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint

PROMPT = [101, 7, 2048, 33, 999, 12, 640, 5]
STEPS = 64
DEMO_DTYPES = ("fp32", "bf16")
GREEDY = Config(temperature=0.0)  # the default settings, whatever the run's: bonus 0


def greedy(engine_or_model: Engine | Resident, steps: int) -> tuple[list[int], torch.Tensor]:
    """The ids PROMPT and `steps` greedy tokens give, and the logits of every position."""
    ids, rows = list(PROMPT), []
    for pos in range(len(PROMPT) + steps - 1):
        logits = engine_or_model.step(ids[pos], pos).float().cpu()
        rows.append(logits)
        if pos >= len(PROMPT) - 1:
            ids.append(int(torch.argmax(logits)))
    return ids, torch.stack(rows)


def demo(dtype: str) -> Checkpoint:
    return Checkpoint(synth.ensure(replace(synth.DEFAULT, dtype=dtype)))


def compare_devices(cfg: Config, steps: int, ckpt: Checkpoint) -> dict:
    """CPU against CUDA through the streaming path; logits are compared while both sides
    have had the same inputs."""
    runs = {}
    for name in ("cpu", "cuda"):
        engine = Engine(ckpt, replace(cfg, device=name), torch.device(name))
        try:
            runs[name] = greedy(engine, steps)
        finally:
            engine.close()
    (cpu_ids, cpu_logits), (gpu_ids, gpu_logits) = runs["cpu"], runs["cuda"]
    agree = next((i for i, (a, b) in enumerate(zip(cpu_ids, gpu_ids)) if a != b), None)
    upto = len(cpu_logits) if agree is None else agree  # rows whose inputs still agree
    diff = (cpu_logits[:upto] - gpu_logits[:upto]).abs().max().item()
    return {"steps": steps, "same_tokens": cpu_ids == gpu_ids, "first_difference": agree,
            "max_logit_difference": diff, "positions_compared": upto}


def on_each_demo(check: Callable[[Config, int, Checkpoint], dict], needs: str) -> dict:
    """`check` on each dtype of the demo model, STEPS greedy tokens at the default
    settings; skipped without a GPU, for `needs`."""
    if not torch.cuda.is_available():
        return {"skipped": f"no CUDA device: {needs}"}
    return {d: check(GREEDY, STEPS, demo(d)) for d in DEMO_DTYPES}


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    return on_each_demo(compare_devices, "the CPU is compared with a GPU")


def text(r: dict) -> str:
    return "greedy: " + "; ".join(
        f"{d} same tokens {c['same_tokens']}, largest logit difference "
        f"{c['max_logit_difference']:.3g} over {c['positions_compared']} positions"
        for d, c in r.items())
