"""The predictor probe (seed 001): how well the prev-token predictor, the stale gate and
the fresh-gate control name each layer's routing.

A layer is scored when the host settles it: what it routed and what it computed (the
routing less what drop_cold dropped) against each guess of the routing's size, the prev
guess being what the layer computed for the previous token, the stale gate the layer
before's router on the input that one had, the control this layer's own router on its
input; `rerouted` counts routed experts outside the control's top-k. Layer 0 and a
sequence's first token are unscored, never wrong.
"""

from __future__ import annotations

import numpy as np

from tuner.vocabulary.counters import PROBE_COUNTS, C, Counters


def _top(scores: np.ndarray, k: int) -> list[int]:
    """The k largest scores' ids, in no particular order (the probe scores sets)."""
    return np.argpartition(-scores, k - 1)[:k].tolist()


class Probe:
    def __init__(self, layers: int, counters: Counters):
        self.counters = counters
        self.prev: list[list[int] | None] = [None] * layers  # computed last token, by layer

    def new_sequence(self) -> None:
        self.prev = [None] * len(self.prev)

    def note(self, layer: int, sel: list[int], served: list[int], ctrl: np.ndarray | None,
             stale: np.ndarray | None) -> None:
        """Scores layer `layer`, which routed `sel` and computed `served`; `ctrl` [E] its
        router's scores on its input, `stale` [E] the layer before's router's on the input
        that one had (None where there are none)."""
        k, add, actual = len(sel), self.counters.add, set(served)
        if sel:
            control = None if ctrl is None else _top(ctrl, k)
            if control is not None:
                add(layer, C.rerouted, k - len(set(sel).intersection(control)))
            guesses = (("prev", self.prev[layer]),
                       ("stale", None if stale is None else _top(stale, k)), ("ctrl", control))
            for name, guess in guesses:
                if guess is not None:
                    named = len(actual.intersection(guess))
                    scored, slots, whole = PROBE_COUNTS[name]
                    add(layer, scored)
                    add(layer, slots, named)
                    add(layer, whole, float(named == k))
        self.prev[layer] = served
