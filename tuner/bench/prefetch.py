"""(h) Prefetch: ms per token with stale-gate speculation against none, per expert store."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from tuner.bench.limits import paired, paired_text, ratio
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.session.session import Session
from tuner.engine.step.decode import Engine
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.vocabulary.counters import C

ROUNDS = 5  # stretches of the text the turns measure, after the one that warms
# tokens a turn: short turns, each pair's order the other way round from the last's, so a
# busy spell of a shared host (runs minutes apart on an H200 host swung by 40 %) lands on
# both sides of a pair, and the median of many pairs shrugs it off
TURN = 16
STORES = ("ram", "disk")
FIGURES = (C.stall_ms, C.bytes_demand, C.bytes_spec, C.bytes_direct, C.pf_issued, C.pf_timely,
           C.pf_late, C.sync_misses)


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """For each expert store: two engines at the current settings, one with prefetch off
    and one with the stale gate, decode the same text after a stretch of `tokens` tokens
    that warms both, in short turns that alternate (off then stale, stale then off, ...);
    the text is the session's workload as the model samples it, so the arena meets the
    misses a session meets. The ratio is the median of each turn's stale / off; stall and
    bytes per token say where the difference goes, and `bytes_ratio` (expert bytes moved
    per token, stale / off) is what it costs where the misses' bytes set the pace: a ratio
    above it is time the bytes do not explain. `same_output` says whether each turn's last
    logits were the same bits with and without speculation, as they must be (it changes
    what is where, never what is computed)."""
    ckpt = Checkpoint(model_folder(cfg))
    device = pick_device(cfg.device)
    cfg = replace(cfg, cpu_pool=False)
    text = _text(replace(cfg, prefetch="off", expert_store="disk"), (ROUNDS + 1) * tokens)
    turn = min(TURN, tokens)
    return {"stores": {store: _pair(ckpt, replace(cfg, expert_store=store), device, text,
                                    tokens, turn) for store in STORES},
            "tokens": tokens, "turn_tokens": turn, "turns": -(-ROUNDS * tokens // turn)}


def _text(cfg: Config, n: int) -> list[int]:
    """`n` token ids the model writes on the session's workload (sampled as a session
    samples them)."""
    session = Session(cfg)
    try:
        while len(session.output_ids) < n:
            session.run(n)
    finally:
        session.engine.close()
    return list(session.output_ids)[:n]


def _pair(ckpt: Checkpoint, cfg: Config, device: torch.device, text: list[int], warm: int,
          turn: int) -> dict:
    engines = {pf: Engine(ckpt, replace(cfg, prefetch=pf), device) for pf in ("off", "stale")}
    context = cfg.context
    runs: dict[str, list[float]] = {pf: [] for pf in engines}
    try:
        same = True
        for engine in engines.values():  # the warm stretch, counted apart
            _decode(engine, text[:warm], 0, context)
        before = {pf: e.counters.cur.copy() for pf, e in engines.items()}
        for i, start in enumerate(range(warm, len(text), turn)):
            ids, last = text[start:start + turn], {}
            for pf in ("off", "stale") if i % 2 == 0 else ("stale", "off"):
                ms, last[pf] = _decode(engines[pf], ids, start, context)
                runs[pf].append(ms)
            same = same and torch.equal(last["off"], last["stale"])
        # the turns' counts (a token's step leaves them in `cur`; closing folds them)
        counts = {pf: (e.counters.cur - before[pf]).sum(axis=0) for pf, e in engines.items()}
    finally:
        for engine in engines.values():
            engine.close()
    off, stale = (statistics.median(runs[pf]) for pf in ("off", "stale"))
    per_token = {pf: _per_token(c, len(text) - warm) for pf, c in counts.items()}
    moved = {pf: f[C.bytes_demand.name] + f[C.bytes_spec.name] for pf, f in per_token.items()}
    return {"none_ms_per_token": round(off, 3), "stale_ms_per_token": round(stale, 3),
            **paired(runs["stale"], runs["off"]), "ratio_of_medians": ratio(stale, off),
            "bytes_ratio": ratio(moved["stale"], moved["off"]), "same_output": same,
            "per_token": per_token,
            "none_runs": [round(x, 3) for x in runs["off"]],
            "stale_runs": [round(x, 3) for x in runs["stale"]]}


def _decode(engine: Engine, ids: list[int], start: int, context: int
            ) -> tuple[float, torch.Tensor]:
    """ms per token of `ids` from position `start` of the text (a new sequence wherever
    the context is full), and the last token's logits."""
    t0 = time.perf_counter()
    for i, tok in enumerate(ids):
        pos = (start + i) % context
        if pos == 0:
            engine.reset_sequence()
        logits = engine.step(tok, pos)
    last = logits.cpu()  # the device has finished every token
    return 1000 * (time.perf_counter() - t0) / len(ids), last


def _per_token(counts: np.ndarray, tokens: int) -> dict:
    return {c.name: round(float(counts[c.index]) / tokens, 3) for c in FIGURES}


def text(r: dict) -> str:
    parts = []
    for store, s in r["stores"].items():
        off, stale = s["per_token"]["off"], s["per_token"]["stale"]
        parts.append(f"{store} store {s['stale_ms_per_token']} / {s['none_ms_per_token']} "
                     f"ms/token = {paired_text(s)}, bytes moved {s['bytes_ratio']} "
                     f"(stall {stale['stall_ms']} / {off['stall_ms']} "
                     f"ms/token, {stale['pf_timely']} of {stale['pf_issued']} read ahead "
                     "per token used" + ("" if s["same_output"] else
                                         "; THE OUTPUT DIFFERED: a defect") + ")")
    return "(h) prefetch: stale gate / none, " + "; ".join(parts)
