"""Recording a trace from the embedded engine: the routings it saw, token by token."""

from __future__ import annotations

import numpy as np

from tuner import __version__
from tuner.engine.session.session import Session
from tuner.engine.step.route_log import RouteLog
from tuner.knobs import BY_NAME, Config, config_dict, written
from tuner.vocabulary.trace_format import Trace


def record(cfg: Config, tokens: int, logits: bool = False) -> tuple[Trace, dict]:
    """Decodes `tokens` tokens in a fresh session; returns the trace and the session's
    final snapshot (what the live engine counted while the trace was written)."""
    session = Session(cfg)
    eng, mc = session.engine, session.ckpt.config
    L = mc.num_layers
    eng.route_log = log = RouteLog(L, keep_logits=logits)
    try:
        session.run(tokens)
        snap = session.snapshot()
    finally:
        eng.close()
    experts = np.full((tokens * L, mc.top_k), -1, dtype=np.int32)  # a trace may route fewer
    for row, sel in zip(experts, log.experts):
        row[: len(sel)] = sel
    experts = experts.reshape(tokens, L, mc.top_k)
    meta = {
        "model": session.ckpt.name,
        "num_experts": mc.num_experts,
        "expert_bytes": session.ckpt.expert_bytes,
        "source": f"tuner {__version__} trace record",
        "settings": {k: v for k, v in config_dict(cfg).items()
                     if v != written(BY_NAME[k].default)},
        "arena_slots": eng.slots.n,
        "policy": eng.slots.policy.name,
        "sequence_starts": log.starts,
        # what one miss cost at each layer while recording, for `tuner budgets --weights stall`
        "layer_stall_ms": [row["stall_ms"] for row in snap["layers"]],
        "layer_sync_misses": [row["sync_misses"] for row in snap["layers"]],
    }
    shape = (tokens, L, mc.num_experts)
    scores = [np.stack(log.logits).reshape(shape), np.stack(log.stale).reshape(shape)] \
        if logits else [None, None]
    return Trace(experts, meta, scores[0], stale=scores[1]), snap
