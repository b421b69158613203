"""Every routing the engine made, for trace recording (`tuner trace record`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class RouteLog:
    """Expert ids per layer and token in rank order, optionally the router logits and the
    stale gate's scores, and the tokens where conversations start. An engine with one
    takes the host-driven path, where the host routes each layer."""

    layers: int
    keep_logits: bool = False
    experts: list[list[int]] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    stale: list[np.ndarray] = field(default_factory=list)  # NaN where there is none
    starts: list[int] = field(default_factory=list)

    def add(self, sel: list[int], logits: torch.Tensor, stale: np.ndarray | None) -> None:
        self.experts.append(sel)
        if self.keep_logits:
            self.logits.append(logits.detach().float().cpu().numpy())
            self.stale.append(np.full(len(logits), np.nan, dtype=np.float32) if stale is None
                              else stale.astype(np.float32))

    def start(self) -> None:
        self.starts.append(len(self.experts) // self.layers)
