"""Routing read from a trace instead of computed by the model's routers (`routing` knob).

Every layer routes as the trace says, token by token and sequence by sequence, looping to
its first token after the last, while the engine reads and computes those experts for
real: an operator tunes the cache, prefetch, I/O and tier knobs against their own traffic
with real I/O timing. The session starts a new conversation where the trace starts a
sequence, so the prev-token predictor sees the trace's sequences.

What needs router scores uses the trace's: the stale-gate predictor its `stale` array,
moce (a resident bonus) and the fresh-gate control its `logits`. A trace without them
turns those off, and `notes` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from tuner.config import Config
from tuner.engine.weights import router
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace, TraceError


class TraceRouting:
    def __init__(self, trace: Trace, layers: int, experts: int, top_k: int, where: str):
        shape = (trace.layers, trace.num_experts, trace.top_k)
        if shape != (layers, experts, top_k):
            raise TraceError(
                f"{where}: {trace.layers} layers x {trace.num_experts} experts, top-"
                f"{trace.top_k}; the model has {layers} x {experts}, top-{top_k}. Make a "
                f"model of the trace's shape with `tuner model make --like {where}`")
        self.trace = trace  # read a routing at a time: no copy of the trace as lists
        self.starts = set(trace.sequence_starts)
        self.position = 0  # the trace token the next step routes

    @property
    def sequence_start(self) -> bool:
        return self.position in self.starts

    def advance(self) -> None:
        self.position = (self.position + 1) % self.trace.tokens

    def scores(self, name: str, layer: int) -> np.ndarray | None:
        """The trace's `name` scores ("logits" or "stale") for `layer` at this token, on the
        host, or None when it has none."""
        scores = getattr(self.trace, name)
        return None if scores is None else scores[self.position, layer]

    def select(self, layer: int, resident: Callable[[], torch.Tensor] | None, cfg: Config,
               device: torch.device) -> tuple[list[int], torch.Tensor]:
        """The experts this layer routes now, in rank order; with a resident bonus and the
        trace's logits, the moce router's pick from those logits instead."""
        ids = [e for e in self.trace.experts[self.position, layer].tolist() if e >= 0]
        scores = self.scores("logits", layer) if resident and ids else None
        if scores is not None and resident is not None:
            logits = torch.from_numpy(np.ascontiguousarray(scores)).to(device)
            sel = router.select(logits, resident(), len(ids), cfg.moce_protect,
                                cfg.moce_bonus, cfg.moce_bonus_r1)
            return sel.tolist(), sel
        return ids, torch.tensor(ids, dtype=torch.long, device=device)

    def stale(self, layer: int) -> np.ndarray | None:
        """The stale gate's scores for `layer` at this token (layer l's router on layer
        l-1's input), on the host, or None."""
        return self.scores("stale", layer) if layer > 0 else None

    def notes(self, cfg: Config) -> list[str]:
        t = self.trace
        out = [f"routing from {t.meta.get('source') or 'a trace'} ({t.tokens} tokens, "
               f"{len(self.starts)} sequences), looping; now at token {self.position}"]
        if t.stale is None:
            out.append("the trace has no stale-gate scores: stale-gate prediction and its "
                       "probe are off (record with --logits to keep them)")
        if t.logits is None:
            out.append("the trace has no router logits: moce (a resident bonus) and the "
                       "fresh-gate control are off")
        return out


def open_routing(path: str, layers: int, experts: int, top_k: int) -> TraceRouting | None:
    """The routing source the `routing` knob names, or None for the model's own routers."""
    if not path:
        return None
    return TraceRouting(trace_format.load(Path(path)), layers, experts, top_k, path)
