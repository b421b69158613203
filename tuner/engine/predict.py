"""What the prefetcher bets on: the ranked experts it expects a layer to route next.

`prev` is what the layer routed for the previous token; `stale` ranks layer l+1's router
applied to layer l's input. The stale ranking can be made router-consistent (seed 000):
with `prefetch_route` it predicts the set the moce router will pick against the current
residency (protect and bonus_r1 honoured); with `prefetch_unpert` off, ranks >= 3 are
predicted with the resident bonus (the older fixed-protect branch, which ignores r1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tuner.config import Config
from tuner.engine import router


def predict(cfg: Config, k: int, prev: list[int] | None, stale: torch.Tensor | None,
            resident: Callable[[], torch.Tensor]) -> list[int]:
    """Ranked expert ids; `resident()` gives the target layer's residency mask [E]. No
    stale scores (a routing trace without them): the stale predictor names nothing."""
    if cfg.prefetch == "prev":
        return list(prev or [])
    if stale is None:
        return []
    if cfg.prefetch_route and cfg.moce_bonus > 0:
        return router.select(stale, resident(), k, cfg.moce_protect, cfg.moce_bonus,
                             cfg.moce_bonus_r1).tolist()
    if not cfg.prefetch_unpert and cfg.moce_bonus > 0:
        return router.select(stale, resident(), k, 3, cfg.moce_bonus, 0.0).tolist()
    return torch.topk(stale, k).indices.tolist()
