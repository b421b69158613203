"""The predictor probe (seed 001): how well the prev-token predictor, the stale gate and
the fresh-gate control name each layer's routing.

Each layer notes what it routed, what it computed and the scores it has beside them (its
own router on its input: the control; the layer before's router on the input it had: the
stale gate). They are scored several layers at once, while the host waits for the device
or at the token's end, so a layer's own host work holds no scoring. Layer 0 and a
sequence's first token are unscored, never wrong. Scores count the experts computed (the
routing less what drop_cold dropped) against each guess of the routing's size;
`rerouted` counts routed experts outside the control's top-k.
"""

from __future__ import annotations

import numpy as np

from tuner.engine.counters import Counters

GUESSES = ("prev", "stale", "ctrl")


class Probe:
    def __init__(self, layers: int, counters: Counters):
        self.counters = counters
        self.prev: list[list[int] | None] = [None] * layers  # computed last token, by layer
        self._noted: list[tuple[int, list[int], list[int], np.ndarray | None,
                                np.ndarray | None]] = []

    def new_sequence(self) -> None:
        self.prev = [None] * len(self.prev)

    def note(self, layer: int, sel: list[int], served: list[int], ctrl: np.ndarray | None,
             stale: np.ndarray | None) -> None:
        """Layer `layer` routed `sel` and computed `served`; `ctrl` [E] its router's scores
        on its input, `stale` [E] the layer before's router's on the input that one had
        (None where there are none)."""
        self._noted.append((layer, sel, served, ctrl, stale))

    @property
    def pending(self) -> int:
        """Layers noted and not scored yet."""
        return len(self._noted)

    def score(self) -> None:
        """Scores the layers noted since the last call and makes their routings the prev
        guesses of the next token."""
        noted, self._noted = self._noted, []
        for k in {len(sel) for _, sel, *_ in noted if sel}:  # one batch per routing size
            self._score([n for n in noted if len(n[1]) == k], k)
        for layer, _, served, _, _ in noted:
            self.prev[layer] = served

    def _score(self, rows: list, k: int) -> None:
        add = self.counters.add_rows
        layers = np.array([r[0] for r in rows])
        sel = np.array([r[1] for r in rows])  # [n, k]
        served = np.full((len(rows), k), -1)
        for i, r in enumerate(rows):
            served[i, :len(r[2])] = r[2]
        guesses = {"prev": self._prev(rows, k), "stale": _top(rows, 4, k),
                   "ctrl": _top(rows, 3, k)}
        ctrl, has_ctrl = guesses["ctrl"]
        add("rerouted", layers[has_ctrl], k - _overlap(sel[has_ctrl], ctrl[has_ctrl]))
        for name, (guess, has) in guesses.items():
            named = _overlap(served[has], guess[has])
            add(f"{name}_scored", layers[has], 1)
            add(f"{name}_slots", layers[has], named)
            add(f"{name}_whole", layers[has], (named == k).astype(float))

    def _prev(self, rows: list, k: int) -> tuple[np.ndarray, np.ndarray]:
        guess = np.full((len(rows), k), -2)
        has = np.zeros(len(rows), dtype=bool)
        for i, r in enumerate(rows):
            prev = self.prev[r[0]]
            if prev is not None:
                guess[i, :len(prev)], has[i] = prev[:k], True
        return guess, has


def _top(rows: list, at: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top k ids of each row's scores at tuple position `at` (in no order), and which
    rows have scores."""
    has = np.array([r[at] is not None for r in rows])
    guess = np.full((len(rows), k), -2)
    if has.any():
        scores = np.stack([r[at] for r in rows if r[at] is not None])
        guess[has] = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return guess, has


def _overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, how many ids of `a` (-1 pads) are in `b` (-2 pads): [n]."""
    return ((a[:, :, None] == b[:, None, :]) & (a >= 0)[:, :, None]).any(2).sum(1)
