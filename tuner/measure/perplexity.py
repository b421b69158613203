"""Teacher-forced perplexity of a text through the streaming engine, beside exact routing's.

The text is fed token by token in windows of the context (each window a new sequence, as
perplexity tools of other engines do), with the quality probe on every token: at each
position the served next-token distribution (the settings' routing, drop and residency)
and the exact one (exact top-k, every expert computed) over the same served context. From
them: both perplexities, the mean KL(exact || served), top-1 agreement; and from the
engine's counters the timed decode's tokens/s, bytes/token and hit rate. The exact pass is
timed apart and is not in tokens/s.

The demo model's text is its own sample (`demo_text`): exact routing, temperature 1, a fixed
seed, so it is the same for every run and made of the demo tokenizer's words.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch

from tuner.engine.session.opening import load_tokenizer
from tuner.engine.session.session import Session
from tuner.engine.session.workloads import corpus
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

Progress = Callable[[int, int], None]  # (positions done, of how many)

DEMO_SEED = 0
DEMO_TEMPERATURE = 1.0


def demo_text(ckpt: Checkpoint, tokens: int, seed: int = DEMO_SEED,
              progress: Progress | None = None) -> str:
    """`tokens` words sampled from the exact model, after the built-in corpus's first
    prompt; `progress(done, total)` after each."""
    tokenizer = load_tokenizer(ckpt.folder)
    if tokenizer is None:
        raise ValueError(f"{ckpt.folder} has no tokenizer.json: give --text FILE")
    mc = ckpt.config
    model = Resident(ckpt, tokens + 1, torch.device("cpu"))
    topics = ckpt.topics
    ids = list(corpus(seed, mc.vocab_size, topics).conversations[0][0].prompt)[:tokens]
    g = torch.Generator().manual_seed(seed)
    for pos in range(tokens - 1):
        logits = model.step(ids[pos], pos)
        if pos + 1 >= len(ids):
            probs = torch.softmax(logits / DEMO_TEMPERATURE, -1)
            ids.append(int(torch.multinomial(probs, 1, generator=g)))
        if progress:
            progress(pos + 1, tokens - 1)
    return tokenizer.decode(ids)


def evaluate(cfg: Config, text: str, progress: Progress | None = None) -> dict:
    """Perplexity, exact perplexity, KL, top-1 agreement and the engine's figures of
    `text` at settings `cfg` (the quality probe is switched on for every token);
    `progress(done, total)` after each position."""
    session = Session(replace(cfg, quality_every=1), prompt=text)
    try:
        ids = session.token_ids(text)
        if len(ids) < 2:
            raise ValueError(f"the text is {len(ids)} token(s) long; perplexity needs at "
                             "least 2")
        served_nll = exact_nll = 0.0
        for done, (nxt, served, exact) in enumerate(session.forced(ids), 1):
            served_nll -= float(served.double().log_softmax(-1)[nxt])
            exact_nll -= float(exact.double().log_softmax(-1)[nxt])
            if progress:
                progress(done, len(ids) - 1)
        snap = session.snapshot()
    finally:
        session.engine.close()
    t, n = snap["totals"], len(ids) - 1
    return {
        "model": snap["model"]["name"], "positions": n,
        "unknown_words": len(session.unknown_words),
        "perplexity": round(math.exp(served_nll / n), 4),
        "exact_perplexity": round(math.exp(exact_nll / n), 4),
        "quality_kl": t["quality_kl"], "top1_agreement": t["top1_agreement"],
        "tok_s": t["tok_s"], "ms_per_token": t["ms_per_token"],
        "bytes_per_token": t["bytes_per_token"], "hit_rate": t["hit_rate"],
        "dropped_mass_pct": t["dropped_mass_pct"], "rerouted_pct": t["rerouted_pct"],
        "quality_ms": t["quality_ms"], "output_hash": snap["output_hash"],
    }
