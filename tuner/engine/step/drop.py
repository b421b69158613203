"""drop-cold-experts and drop-aware prefetch (seed 001).

A routed expert that misses, and whose routing weight (the softmax over the routing's
selected top-k) is below `drop_cold`, is neither read nor computed: its share of the
layer's output is left out, the other experts keep their weights. The top-weighted expert
of a routing is always kept. An expert that is resident or already being read ahead is not
a miss, so a correct speculation un-drops an expert: prediction spent under drop buys back
quality at the same threshold.

Drop-aware prefetch: a predicted expert whose predicted weight (the softmax over the
predicted top-k) is below the threshold is not speculated, because if it missed the policy
would drop it unread; the top prediction is always kept, as the policy keeps its top
expert.
"""

from __future__ import annotations

import numpy as np


def share(scores: np.ndarray) -> np.ndarray:
    """Softmax of a routing's selected scores [k], in float64."""
    z = np.exp(scores.astype(np.float64) - scores.max())
    return z / z.sum()


def kept(weights: np.ndarray, present: list[bool], threshold: float) -> list[int]:
    """The ranks a routing computes: every present expert, the top-weighted one, and every
    miss whose weight reaches `threshold`. weights [k] in rank order."""
    top = int(np.argmax(weights))
    return [r for r, w in enumerate(weights.tolist())
            if present[r] or r == top or w >= threshold]


def speculable(guess: list[int], weights: np.ndarray, threshold: float) -> list[int]:
    """The predicted experts worth reading ahead, in the guess's order: the top prediction
    and every one whose predicted weight reaches `threshold`. weights [len(guess)]."""
    if not guess:
        return guess
    top = int(np.argmax(weights))
    return [e for r, (e, w) in enumerate(zip(guess, weights.tolist()))
            if r == top or w >= threshold]
