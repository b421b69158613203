"""Recording a trace from the embedded engine: the routings it saw, token by token."""

from __future__ import annotations

import numpy as np

from tuner import __version__
from tuner.engine.session import Session
from tuner.knobs import BY_NAME, Config, config_dict
from tuner.traces.format import Trace


def record(cfg: Config, tokens: int, logits: bool = False) -> tuple[Trace, dict]:
    """Decodes `tokens` tokens in a fresh session; returns the trace and the session's
    final snapshot (what the live engine counted while the trace was written)."""
    session = Session(cfg)
    eng, mc = session.engine, session.ckpt.config
    L = mc.num_layers
    eng.route_log = []
    starts: list[int] = []
    seen: list[np.ndarray] = []

    # The engine logs routed ids but not the logits it routed on nor where a conversation
    # starts; both are taken at the engine's own seams, on this session's instance only.
    reset = eng.reset_sequence

    def reset_and_mark() -> None:
        starts.append(len(eng.route_log) // L)
        reset()

    eng.reset_sequence = reset_and_mark
    if logits:
        route = eng._route

        def route_and_keep(layer, raw):
            seen.append(raw.detach().float().cpu().numpy())
            return route(layer, raw)

        eng._route = route_and_keep
    try:
        session.run(tokens)
        snap = session.snapshot()
    finally:
        eng.close()
    experts = np.asarray(eng.route_log, dtype=np.int32).reshape(tokens, L, mc.top_k)
    meta = {
        "model": session.ckpt.name,
        "num_experts": mc.num_experts,
        "expert_bytes": session.ckpt.expert_bytes,
        "source": f"tuner {__version__} trace record",
        "settings": {k: v for k, v in config_dict(cfg).items() if v != BY_NAME[k].default},
        "arena_slots": eng.slots.n,
        "policy": eng.slots.policy.name,
        "sequence_starts": starts,
    }
    stacked = np.stack(seen).reshape(tokens, L, mc.num_experts) if logits else None
    return Trace(experts, meta, stacked), snap
