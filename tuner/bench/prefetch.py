"""(h) Prefetch: ms per token with stale-gate speculation against none, per expert store."""

from __future__ import annotations

import statistics
from dataclasses import replace

import numpy as np
import torch

from tuner.bench.limits import ratio, time_steps
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.counters import IDX
from tuner.engine.decode import Engine
from tuner.engine.opening import model_folder, pick_device

ROUNDS = 5  # interleaved rounds; the paired ratios' median shrugs off a busy moment
STORES = ("ram", "disk")
FIGURES = ("stall_ms", "bytes_demand", "bytes_spec", "bytes_direct", "pf_issued", "pf_timely",
           "pf_late", "sync_misses")


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """For each expert store: two engines at the current settings, one with prefetch off
    and one with the stale gate, decode the same greedy tokens in interleaved rounds
    (off, stale, off, stale, ...) after a round that warms both. The ratio is the median
    of each round's stale / off; stall and bytes per token say where the difference goes."""
    ckpt = Checkpoint(model_folder(cfg))
    device = pick_device(cfg.device)
    cfg = replace(cfg, cpu_pool=False, temperature=0.0)
    seq = _greedy(ckpt, replace(cfg, prefetch="off"), device, tokens)
    return {"stores": {store: _pair(ckpt, replace(cfg, expert_store=store), device, seq)
                       for store in STORES},
            "tokens": tokens, "rounds": ROUNDS}


def _greedy(ckpt: Checkpoint, cfg: Config, device: torch.device, tokens: int) -> list[int]:
    """A greedy sequence of the model at these settings: both sides route alike on it."""
    engine = Engine(ckpt, cfg, device)
    try:
        seq, tok = [], 1
        for pos in range(tokens):
            seq.append(tok)
            tok = int(torch.argmax(engine.step(tok, pos)))
    finally:
        engine.close()
    return seq


def _pair(ckpt: Checkpoint, cfg: Config, device: torch.device, seq: list[int]) -> dict:
    engines = {pf: Engine(ckpt, replace(cfg, prefetch=pf), device) for pf in ("off", "stale")}
    try:
        for engine in engines.values():
            time_steps(engine.step, seq)  # warm: the arena holds what the sequence leaves
        before = {pf: e.counters.cur.copy() for pf, e in engines.items()}
        runs: dict[str, list[float]] = {pf: [] for pf in engines}
        for _ in range(ROUNDS):
            for pf, engine in engines.items():
                runs[pf].append(time_steps(engine.step, seq))
        # the rounds' counts (a token's step leaves them in `cur`; closing folds them)
        counts = {pf: (e.counters.cur - before[pf]).sum(axis=0) for pf, e in engines.items()}
    finally:
        for engine in engines.values():
            engine.close()
    n = ROUNDS * len(seq)
    off, stale = (statistics.median(runs[pf]) for pf in ("off", "stale"))
    return {"none_ms_per_token": round(off, 3), "stale_ms_per_token": round(stale, 3),
            "ratio": round(statistics.median(s / o for s, o in zip(runs["stale"], runs["off"])),
                           4),
            "ratio_of_medians": ratio(stale, off),
            "per_token": {pf: _per_token(c, n) for pf, c in counts.items()},
            "none_runs": [round(x, 3) for x in runs["off"]],
            "stale_runs": [round(x, 3) for x in runs["stale"]]}


def _per_token(counts: np.ndarray, tokens: int) -> dict:
    return {name: round(float(counts[IDX[name]]) / tokens, 3) for name in FIGURES}


def text(r: dict) -> str:
    parts = []
    for store, s in r["stores"].items():
        off, stale = s["per_token"]["off"], s["per_token"]["stale"]
        parts.append(f"{store} store {s['stale_ms_per_token']} / {s['none_ms_per_token']} "
                     f"ms/token = {s['ratio']} (stall {stale['stall_ms']} / {off['stall_ms']} "
                     f"ms/token, {stale['pf_timely']} of {stale['pf_issued']} read ahead "
                     "per token used)")
    return "(h) prefetch: stale gate / none, " + "; ".join(parts)
