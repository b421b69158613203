"""Recent values of the overview's headline figures, for its sparklines.

One point per repaint that brought new tokens, taken from the snapshot's sliding-window
totals: the sparkline shows how the recent rate moved, point by point as measured.
A figure the engine did not measure (None) adds no point.
"""

from __future__ import annotations

from collections import deque

from tuner.vocabulary.counters import HEADLINES
from tuner.vocabulary.snapshot import Snapshot


class History:
    def __init__(self, length: int = 120):
        self.points: dict[str, deque[float]] = {h.key: deque(maxlen=length) for h in HEADLINES}
        self._tokens: int | None = None

    def record(self, snapshot: Snapshot) -> None:
        tokens = snapshot["tokens"]
        if tokens == self._tokens:
            return
        self._tokens = tokens
        totals = snapshot["window"]["totals"]
        for key, points in self.points.items():
            if (value := totals.get(key)) is not None:
                points.append(value)
