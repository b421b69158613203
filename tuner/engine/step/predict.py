"""What the prefetcher bets on: the ranked experts it expects a layer to route next.

A predictor is a small object registered by name in `PREDICTORS`; the `prefetch` knob names
one, or off (a test keeps the knob's choices and this registry the same). `prev` is what the
layer routed for the previous token; `stale` ranks layer l+1's router applied to layer l's
input, and can be made router-consistent (seed 000): with `prefetch_route` it predicts the
set the moce router will pick against the current residency (protect and bonus_r1
honoured); with `prefetch_unpert` off, ranks >= 3 are predicted with the resident bonus (the
older fixed-protect branch, which ignores r1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from tuner.config import Config
from tuner.engine.weights import router

Resident = Callable[[], torch.Tensor]  # the target layer's residency mask [E], when asked


class Predictor(Protocol):
    name: str

    def rank(self, cfg: Config, k: int, prev: list[int] | None, stale: torch.Tensor | None,
             resident: Resident) -> list[int]:
        """Ranked expert ids for the next layer, at most k."""
        ...

    def pick(self, cfg: Config) -> tuple[int, float, float] | None:
        """The moce pick (protect, bonus, bonus_r1) it predicts against the next layer's
        residency, or None: what a layer's body on the device needs to predict alike
        (device_step.Ahead)."""
        ...


class Prev:
    """What the layer routed for the previous token (nothing on a sequence's first)."""

    name = "prev"

    def rank(self, cfg: Config, k: int, prev: list[int] | None, stale: torch.Tensor | None,
             resident: Resident) -> list[int]:
        return list(prev or [])

    def pick(self, cfg: Config) -> tuple[int, float, float] | None:
        return None


class Stale:
    """Layer l+1's router on layer l's input [E]; a routing trace without stale scores
    names nothing."""

    name = "stale"

    def rank(self, cfg: Config, k: int, prev: list[int] | None, stale: torch.Tensor | None,
             resident: Resident) -> list[int]:
        if stale is None:
            return []
        pick = self.pick(cfg)
        if pick is not None:
            return router.select(stale, resident(), k, *pick).tolist()
        return torch.topk(stale, k).indices.tolist()

    def pick(self, cfg: Config) -> tuple[int, float, float] | None:
        if cfg.moce_bonus > 0 and cfg.prefetch_route:  # the set the moce router will pick
            return cfg.moce_protect, cfg.moce_bonus, cfg.moce_bonus_r1
        if cfg.moce_bonus > 0 and not cfg.prefetch_unpert:  # ranks >= 3 with the bonus
            return 3, cfg.moce_bonus, 0.0
        return None


PREDICTORS: dict[str, Predictor] = {p.name: p for p in (Prev(), Stale())}


def predict(cfg: Config, k: int, prev: list[int] | None, stale: torch.Tensor | None,
            resident: Resident) -> list[int]:
    """The ranked guess of the predictor `cfg.prefetch` names (not off)."""
    return PREDICTORS[cfg.prefetch].rank(cfg, k, prev, stale, resident)
