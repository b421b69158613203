"""Recent values of the overview's headline figures, for its sparklines.

One point per repaint that brought new tokens, taken from the snapshot's sliding-window
totals: the sparkline shows how the recent rate moved, point by point as measured.
A figure the engine did not measure (None) adds no point.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Series:
    key: str  # a key of the snapshot's totals
    label: str
    unit: str


HEADLINES: tuple[Series, ...] = (
    Series("ms_per_token", "ms / token", "ms"),
    Series("hit_rate", "hit rate %", "%"),
    Series("bytes_per_token", "bytes / token", "bytes"),
    Series("sync_misses_per_token", "sync misses / token", ""),
    Series("issue_usefulness", "prefetch useful %", "%"),
    Series("timely_usefulness", "prefetch timely %", "%"),
)


class History:
    def __init__(self, length: int = 120):
        self.points: dict[str, deque[float]] = {s.key: deque(maxlen=length) for s in HEADLINES}
        self._tokens: int | None = None

    def record(self, snapshot: dict[str, Any]) -> None:
        tokens = snapshot["tokens"]
        if tokens == self._tokens:
            return
        self._tokens = tokens
        totals = snapshot["window"]["totals"]
        for key, points in self.points.items():
            if totals.get(key) is not None:
                points.append(totals[key])
