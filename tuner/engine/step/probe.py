"""The predictor probe (seed 001): how well the prev-token predictor, the stale gate and
the fresh-gate control name each layer's routing.

A layer is scored on what it routed and what it computed (the routing less what drop_cold
dropped) against each guess of the routing's size, the prev guess being what the layer
computed for the previous token, the stale gate the layer before's router on the input
that one had, the control this layer's own router on its input; `rerouted` counts routed
experts outside the control's top-k. Layer 0 and a sequence's first token are unscored,
never wrong.

The host notes each layer as it settles it (a few copies) and scores the token's layers
together once the token is done (`score`, a handful of array operations), under the next
token's first layers (Engine.count_last_token): per-layer scoring sat on the hit path's
critical host work, and so did scoring between tokens.
"""

from __future__ import annotations

import numpy as np

from tuner.vocabulary.counters import PROBE_COUNTS, C, Counters


def _members(lists: list[list[int]], experts: int) -> np.ndarray:
    """[len(lists), experts] bool: each row's listed ids."""
    out = np.zeros((len(lists), experts), dtype=bool)
    if len({len(ids) for ids in lists}) == 1:  # as routings are: one product
        out[np.arange(len(lists))[:, None], np.array(lists, dtype=np.int64)] = True
    else:
        for row, ids in enumerate(lists):
            out[row, ids] = True
    return out


def _tops(scores: np.ndarray, k: np.ndarray) -> np.ndarray:
    """[N, E] bool: each row's k[row] largest scores (the probe scores sets; a tie at the
    k-th score takes both)."""
    kth = np.sort(scores, axis=1)[np.arange(len(k)), scores.shape[1] - k]
    return scores >= kth[:, None]


class Probe:
    def __init__(self, layers: int, counters: Counters):
        self.counters = counters
        self.prev: list[list[int] | None] = [None] * layers  # computed last token, by layer
        experts = counters.experts
        # this token's notes, by layer, until `score`
        self._noted: list[int] = []
        self._sel: list[list[int]] = [[] for _ in range(layers)]
        self._served: list[list[int]] = [[] for _ in range(layers)]
        self._prev: list[list[int] | None] = [None] * layers  # the prev guess scored
        self._scores = {"ctrl": np.zeros((layers, experts)), "stale": np.zeros((layers, experts))}
        self._has = {"ctrl": np.zeros(layers, dtype=bool), "stale": np.zeros(layers, dtype=bool)}

    def new_sequence(self) -> None:
        self.prev = [None] * len(self.prev)

    def note(self, layer: int, sel: list[int], served: list[int], ctrl: np.ndarray | None,
             stale: np.ndarray | None) -> None:
        """Notes layer `layer`, which routed `sel` and computed `served`; `ctrl` [E] its
        router's scores on its input, `stale` [E] the layer before's router's on the input
        that one had (None where there are none). Scored at `score`."""
        self._noted.append(layer)
        self._sel[layer], self._served[layer] = sel, served
        self._prev[layer] = self.prev[layer]
        for name, scores in (("ctrl", ctrl), ("stale", stale)):
            self._has[name][layer] = scores is not None
            if scores is not None:
                self._scores[name][layer] = scores
        self.prev[layer] = served

    def score(self) -> None:
        """Counts the layers noted since the last call, together."""
        noted = [l for l in self._noted if self._sel[l]]
        self._noted = []
        if not noted:
            return
        rows = np.array(noted)
        sel = [self._sel[l] for l in noted]
        k = np.array([len(s) for s in sel])
        experts = self.counters.experts
        actual = _members([self._served[l] for l in noted], experts)
        control = _tops(self._scores["ctrl"][rows], k)
        guesses = {"stale": _tops(self._scores["stale"][rows], k), "ctrl": control,
                   "prev": _members([self._prev[l] or [] for l in noted], experts)}
        has = {"stale": self._has["stale"][rows], "ctrl": self._has["ctrl"][rows],
               "prev": np.array([self._prev[l] is not None for l in noted])}
        cur = self.counters.cur
        rerouted = k - (_members(sel, experts) & control).sum(axis=1)
        cur[rows, C.rerouted.index] += np.where(has["ctrl"], rerouted, 0)
        for name, guess in guesses.items():
            named = (actual & guess).sum(axis=1)
            scored, slots, whole = PROBE_COUNTS[name]
            on = has[name]
            cur[rows, scored.index] += on
            cur[rows, slots.index] += np.where(on, named, 0)
            cur[rows, whole.index] += on & (named == k)
