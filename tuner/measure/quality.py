"""What a lossy change to a model costs in output quality, measured against the source.

Both models run fully resident (the engine's own kernels, no arena), greedily, on the same
prompt: the source picks the tokens and the other model is fed the same ones (teacher
forcing), so every position compares two next-token distributions over the same context.
Reported: the mean and largest KL(source || other) per position, top-1 agreement over
positions, and how many tokens the other model's own greedy decoding shares with the
source's before they first differ.
"""

from __future__ import annotations

import torch

from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint

PROMPT = [5, 17, 3, 60, 41, 8, 22, 90]


def _greedy(model: Resident, steps: int, forced: list[int] | None = None
            ) -> tuple[list[int], torch.Tensor]:
    """Greedy ids after the prompt and the log-probabilities [positions, V] at every
    position; with `forced`, those ids are fed instead of the model's own picks."""
    ids, rows = list(PROMPT), []
    for pos in range(len(PROMPT) + steps - 1):
        logits = model.step(ids[pos], pos).cpu()
        rows.append(torch.log_softmax(logits.double(), -1))
        if pos >= len(PROMPT) - 1:
            ids.append(forced[pos + 1] if forced else int(torch.argmax(logits)))
    return ids, torch.stack(rows)


def compare(source: Checkpoint, other: Checkpoint, device: torch.device, steps: int = 64,
            context: int = 256) -> dict:
    vocab = source.config.vocab_size
    if max(PROMPT) >= vocab:
        raise ValueError(f"the prompt's ids need a vocabulary above {max(PROMPT)}, not {vocab}")
    src = Resident(source, context, device)
    ids, p = _greedy(src, steps)
    del src
    oth = Resident(other, context, device)
    _, q = _greedy(oth, steps, forced=ids)
    own, _ = _greedy(oth, steps)
    kl = (p.exp() * (p - q)).sum(-1)  # per position
    top1 = (p.argmax(-1) == q.argmax(-1)).double().mean().item()
    same = next((i for i, (a, b) in enumerate(zip(ids[len(PROMPT):], own[len(PROMPT):]))
                 if a != b), steps)
    return {"positions": len(kl), "mean_kl": float(f"{kl.mean().item():.3g}"),
            "max_kl": float(f"{kl.max().item():.3g}"), "top1_agreement_pct": round(100 * top1, 2),
            "greedy_tokens": steps, "greedy_same_prefix": same, "device": str(device)}
