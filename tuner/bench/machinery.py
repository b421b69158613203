"""(b) The engine's own machinery: ms per token through the arena with every lookup a hit
against the fully resident model."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

import torch

from tuner.bench.limits import paired, paired_text, ratio, time_steps
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.vocabulary.counters import C

ROUNDS = 7  # short interleaved rounds: the paired ratios' median shrugs off a busy moment


@dataclass(frozen=True)
class EveryHit:
    """The machinery's two sides on one checkpoint: the engine's settings with an arena
    that holds every expert and nothing speculative (`cfg`), the fully resident model,
    and its greedy tokens (`seq`), so that both sides see the same routings."""

    ckpt: Checkpoint
    device: torch.device
    cfg: Config
    resident: Resident
    seq: list[int]

    def engine(self) -> Engine:
        return Engine(self.ckpt, self.cfg, self.device)


def every_hit(cfg: Config, tokens: int) -> EveryHit:
    """The set-up of `measure`, which the lab's hit-path scripts share."""
    ckpt = Checkpoint(model_folder(cfg))
    mc = ckpt.config
    device = pick_device(cfg.device)
    cfg = replace(cfg, expert_cache=mc.num_layers * mc.num_experts, prefetch="off",
                  moce_bonus=0.0, moce_bonus_r1=0.0, cpu_pool=False)
    resident = Resident(ckpt, cfg.context, device)
    seq, tok = [], 1
    for pos in range(tokens):
        seq.append(tok)
        tok = int(torch.argmax(resident.step(tok, pos)))
    return EveryHit(ckpt, device, cfg, resident, seq)


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """Interleaved A B A B on the same greedy tokens, so the ratio prices the host's part of
    each layer (slot map, counters, probe) and, on a GPU, the pack it reads. The ratio is
    the median of each round's arena time over the resident time measured right after it:
    a shared machine's slow spell lands on both sides of a pair."""
    bench = every_hit(cfg, tokens)
    resident, seq = bench.resident, bench.seq
    engine = bench.engine()
    try:
        time_steps(engine.step, seq)  # warm: loads every expert the sequence routes to
        before = engine.counters.cur.copy()
        arena_ms, resident_ms = [], []
        for _ in range(ROUNDS):
            arena_ms.append(time_steps(engine.step, seq))
            resident_ms.append(time_steps(resident.step, seq))
        delta = engine.counters.cur - before
        lookups, hits = delta[:, C.lookups.index].sum(), delta[:, C.hits.index].sum()
    finally:
        engine.close()
    a, r = statistics.median(arena_ms), statistics.median(resident_ms)
    return {"arena_ms_per_token": round(a, 3), "resident_ms_per_token": round(r, 3),
            **paired(arena_ms, resident_ms), "ratio_of_medians": ratio(a, r),
            "hit_rate": round(100 * hits / lookups, 2),
            "tokens": tokens, "rounds": ROUNDS,
            "arena_runs": [round(x, 3) for x in arena_ms],
            "resident_runs": [round(x, 3) for x in resident_ms]}


def text(r: dict) -> str:
    return (f"(b) machinery: arena, every lookup a hit ({r['hit_rate']} %), "
            f"{r['arena_ms_per_token']} ms/token / fully resident "
            f"{r['resident_ms_per_token']} ms/token = {paired_text(r)}")
