"""Per (layer, expert): routings and sync misses, cumulative and over the sliding window, the
routings of the last tokens in order, and the arena's residency map.

The decode thread writes one token's routing into `sel` [L, K] and its misses into `miss`
[L, K] (a batched prefill hands over all its tokens' at once); `Counters.end_token` folds
them in under its lock. The window's counts are kept up to date by adding the step that
enters and subtracting the one that leaves, so a reader copies [L, E] arrays and computes
nothing. Its window is the counters' (`Counters._slide` says when a step leaves it): whole
steps, a prefilled prompt being one.

The routing log keeps `keep` tokens (more than the window): the live hit curves replay
the older ones to warm the arena and count only the window's.

The residency map costs a walk over the arena's slots, so the decode thread takes it only
at a token boundary after a reader asked for it (`residency`): a map is at most one token
older than the request that follows it.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class ExpertLog:
    def __init__(self, layers: int, experts: int, top_k: int, window: int, keep: int):
        """`window`: tokens of the counters' window (it holds at most that many steps);
        `keep`: steps of routing logged, at least the window's."""
        self.sel = np.full((layers, top_k), -1, dtype=np.int32)  # this token, decode thread
        self.miss = np.zeros((layers, top_k), dtype=bool)
        self._rows = np.repeat(np.arange(layers), top_k).reshape(layers, top_k)
        self._cum = np.zeros((2, layers, experts), dtype=np.int64)  # routings, misses
        self._win = np.zeros_like(self._cum)
        self._log: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=max(keep, window + 1))
        self._tokens = 0
        self._pending: tuple[np.ndarray, np.ndarray] | None = None
        self._win_tokens = self._win_steps = 0
        self._resident: tuple[np.ndarray, int] | None = None
        self.wants_residency = False

    def clear(self) -> None:
        """Back to no tokens (a counter reset; the caller holds the counters' lock)."""
        self._cum[:] = 0
        self._win[:] = 0
        self._log.clear()
        self._tokens = self._win_tokens = self._win_steps = 0
        self._pending = None

    def add_tokens(self, sel: np.ndarray, miss: np.ndarray) -> None:
        """A prompt's routings at once (batched prefill, decode thread): sel and miss
        [T, L, K]; they are the next fold's step."""
        self._pending = (sel, miss)

    def fold(self) -> None:
        """Adds this step's routing, to the run and the window: one token, or a prefilled
        prompt's tokens (the caller holds the counters' lock)."""
        sel, miss = self._pending or (self.sel[None].copy(), self.miss[None].copy())
        self._pending = None
        self._add(self._cum, sel, miss, 1)
        self._add(self._win, sel, miss, 1)
        self._log.append((sel, miss))
        self._tokens += len(sel)
        self._win_tokens += len(sel)
        self._win_steps += 1
        self.sel[:] = -1
        self.miss[:] = False

    def leave(self) -> None:
        """The window's oldest step leaves it (the caller holds the counters' lock)."""
        left = self._log[-self._win_steps]
        self._add(self._win, *left, -1)
        self._win_tokens -= len(left[0])
        self._win_steps -= 1

    @property
    def window_tokens(self) -> int:
        return self._win_tokens

    def _add(self, counts: np.ndarray, sel: np.ndarray, miss: np.ndarray, sign: int) -> None:
        rows = np.broadcast_to(self._rows, sel.shape)  # sel, miss [T, L, K]
        routed = sel >= 0
        np.add.at(counts[0], (rows[routed], sel[routed]), sign)
        np.add.at(counts[1], (rows[miss], sel[miss]), sign)

    def counts(self, window: bool) -> tuple[np.ndarray, np.ndarray, int]:
        """(routings [L, E], sync misses [L, E], tokens), whole run or window (the caller
        holds the counters' lock)."""
        c = self._win if window else self._cum
        return c[0].copy(), c[1].copy(), self._win_tokens if window else self._tokens

    def routings(self) -> np.ndarray:
        """The logged tokens' routings, oldest first: [T, L, K], -1 for an empty slot."""
        log = list(self._log)
        if not log:
            return np.zeros((0, *self.sel.shape), dtype=np.int32)
        return np.concatenate([sel for sel, _ in log])

    def set_residency(self, resident: np.ndarray, token: int) -> None:
        self._resident = (resident, token)
        self.wants_residency = False

    def residency(self) -> tuple[np.ndarray, int] | None:
        """The newest residency map [L, E] and the token count it was taken at; asks the
        decode thread for a fresh one at its next token boundary."""
        self.wants_residency = True
        return self._resident
