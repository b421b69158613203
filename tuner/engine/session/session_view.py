"""What a session shows, as plain data: its snapshot (the same dict goes to the websocket,
the TUI, --json and /metrics) and the per-expert view, built from what the session read
together under its lock (`Moment`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tuner import __version__
from tuner.config import Config
from tuner.engine.session.conversation import Conversation
from tuner.engine.session.opening import unknown_words_note
from tuner.engine.step.decode import Engine
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import config_dict
from tuner.vocabulary.budgets import by_layer, slot_gains
from tuner.vocabulary.counters import Counters
from tuner.vocabulary.snapshot import Change, Experts, Snapshot, State
from tuner.vocabulary.trace_format import Trace

SCHEMA = 1


@dataclass(frozen=True)
class Moment:
    """A session's state as one snapshot reads it."""

    seq: int
    state: State
    error: str | None
    settings_version: int
    pending_version: int | None
    cfg: Config
    changes: list[Change]
    engine: Engine
    ckpt: Checkpoint
    device: torch.device
    conversation: Conversation
    tokenizer: object | None
    unknown_words: list[str]  # words of a prompt the tokenizer does not know


def expert_view(engine: Engine, ckpt: Checkpoint, window: bool) -> Experts:
    """Per (layer, expert), plain data: routings and sync misses over the window or the
    whole run, and the residency map (None until the decode thread has taken one)."""
    c = engine.counters
    routed, missed, tokens = c.expert_counts(window)
    taken = c.per_expert.residency()
    mc = ckpt.config
    return {
        "view": "window" if window else "cumulative",
        "tokens": tokens,
        "layers": mc.num_layers, "experts": mc.num_experts,
        "routings": routed.tolist(),
        "misses": missed.tolist(),
        "resident": None if taken is None else taken[0].astype(np.uint8).tolist(),
        "resident_at_token": None if taken is None else taken[1],
    }


class SlotGains:
    """Per layer, the hit rate one slot more than its quota (or than its resident experts)
    would add over the window, in percentage points. The replay costs about 0.2 ms per
    layer and window of 64 tokens, so it is redone only once a quarter of the window is new
    or the quotas changed, not for every snapshot of every token."""

    def __init__(self) -> None:
        self._gains: tuple[tuple, list[float | None]] = ((), [])

    def __call__(self, counters: Counters, window: int, quotas: list[int] | None,
                 resident: list[int]) -> list[float | None]:
        step = max(1, window // 4)
        key = (id(counters), counters.tokens // step, quotas and tuple(quotas))
        if self._gains[0] != key:  # the key is read before the routings: never newer
            sizes = quotas or resident
            per_layer = by_layer(Trace(counters.window_routings()).rows(), len(sizes))
            lookups = [sum(len(ids) for ids in r) for r in per_layer]
            gains = slot_gains(per_layer, sizes)
            self._gains = (key, [round(100.0 * g / n, 2) if n else None
                                 for g, n in zip(gains, lookups)])
        return self._gains[1]


def build_snapshot(m: Moment, gains: SlotGains) -> Snapshot:
    eng, ckpt, conv = m.engine, m.ckpt, m.conversation
    mc, c = ckpt.config, eng.counters
    resident = list(conv.resident)
    quota = eng.slots.quotas
    gain = gains(c, m.cfg.window, quota, resident)
    whole = c.view(False, resident, quota, gain)
    return {
        "schema": SCHEMA,
        "seq": m.seq,
        "engine_version": __version__,
        "state": m.state,
        "error": m.error,
        "settings_version": m.settings_version,
        "pending_version": m.pending_version,
        "settings": config_dict(m.cfg),
        "model": {
            "name": ckpt.name, "path": str(ckpt.folder), "arch": mc.arch,
            "layers": mc.num_layers, "experts": mc.num_experts, "top_k": mc.top_k,
            "expert_bytes": ckpt.expert_bytes,
        },
        "device": str(m.device),
        "arena": {"slots": eng.slots.n, "policy": eng.slots.policy.name,
                  "bytes": eng.slots.n * ckpt.expert_bytes,
                  "split": "global" if quota is None else "layers"},
        **whole,
        "conversations": conv.conversations,
        "workload": {"name": conv.workload.name,
                     "conversations": len(conv.workload.conversations),
                     "turn": conv.turn_index + 1},
        "output_hash": conv.output_hash,
        "window": c.view(True, resident, quota, gain),
        "text": conv.text(m.tokenizer),
        "notes": eng.notes() + ([unknown_words_note(m.tokenizer, m.unknown_words)]
                                if m.unknown_words else []),
        "changes": m.changes,
    }
