"""(g) A prompt prefilled in one batch against token by token through the decode path."""

from __future__ import annotations

import statistics
from dataclasses import replace

import torch

from tuner.bench.limits import ratio
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder
from tuner.engine.session.session import Session
from tuner.engine.weights.checkpoint import Checkpoint

PROMPT = 256  # tokens
ROUNDS = 2


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """Each way on a fresh session (cold arena), interleaved; ms per prompt token and time
    to first token. The prompt is PROMPT tokens whatever `tokens` says."""
    cfg = replace(cfg, context=max(cfg.context, PROMPT + 1), temperature=0.0)
    g = torch.Generator().manual_seed(cfg.seed)
    vocab = Checkpoint(model_folder(cfg)).config.vocab_size
    ids = torch.randint(0, vocab, (PROMPT,), generator=g).tolist()
    runs: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(ROUNDS):
        for batched in (True, False):
            session = Session(replace(cfg, prefill=batched), prompt_ids=ids)
            try:
                session.run(PROMPT)
                runs[batched].append(session.snapshot()["phases"]["prefill"]["ms_per_token"])
            finally:
                session.engine.close()
    b, t = (round(statistics.median(runs[x]), 3) for x in (True, False))
    return {"prompt_tokens": PROMPT, "batched_ms_per_token": b, "per_token_ms_per_token": t,
            "batched_ttft_ms": round(b * PROMPT, 1), "per_token_ttft_ms": round(t * PROMPT, 1),
            "speedup": ratio(t, b), "rounds": ROUNDS, "batched_runs": runs[True],
            "per_token_runs": runs[False]}


def text(r: dict) -> str:
    return (f"(g) prefill: a {r['prompt_tokens']}-token prompt token by token "
            f"{r['per_token_ms_per_token']} ms/token / batched {r['batched_ms_per_token']} "
            f"ms/token = {r['speedup']} (time to first token {r['per_token_ttft_ms']} -> "
            f"{r['batched_ttft_ms']} ms; cold arena, median of {r['rounds']})")
