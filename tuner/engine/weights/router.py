"""Expert selection: exact top-k and the cache-aware moce router (seed 000 section 2).

Ranks are picked in three segments, each by its own score over the not yet selected:

    rank 0                   z_e                 (raw, when protect >= 1)
    ranks 1 .. protect-1     z_e + bonus_r1 R_e
    ranks protect .. k-1     z_e + bonus R_e

where R_e = 1 when the expert is resident (published) for the router. Routing weights are
the unboosted softmax of the selected logits, so the bonus changes which experts run,
never how they are weighted. With bonus = bonus_r1 = 0 this is exactly top-k.
"""

from __future__ import annotations

import torch

from tuner.engine.weights import router_kernels


def segments(k: int, protect: int, bonus: float, bonus_r1: float) -> list[tuple[int, float]]:
    """(picks, resident bonus) per segment, in rank order."""
    p = max(0, min(protect, k))
    raw = min(p, 1)
    return [(n, b) for n, b in ((raw, 0.0), (p - raw, bonus_r1), (k - p, bonus)) if n > 0]


def select(logits: torch.Tensor, resident: torch.Tensor | None, k: int, protect: int,
           bonus: float, bonus_r1: float) -> torch.Tensor:
    """Expert ids in rank order. logits [E] float, or [T, E] for T tokens (-> [T, k]);
    resident [E] bool or None."""
    if plain(resident, bonus, bonus_r1):
        if router_kernels.usable(logits):  # one token on CUDA: one kernel, not two
            return router_kernels.top_k(logits, k)
        return torch.topk(logits, k).indices
    assert resident is not None  # else plain
    boost = resident.to(logits.dtype)
    taken = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    picks = []
    for n, b in segments(k, protect, bonus, bonus_r1):
        score = logits + b * boost if b else logits
        score = score.masked_fill(taken, float("-inf"))  # no host sync: a CUDA graph runs it
        idx = torch.topk(score, n).indices
        taken.scatter_(-1, idx, True)
        picks.append(idx)
    return torch.cat(picks, dim=-1)


def plain(resident: torch.Tensor | None, bonus: float, bonus_r1: float) -> bool:
    """Whether `select` with these arguments is exact top-k."""
    return resident is None or (bonus == 0 and bonus_r1 == 0)


def weights(logits: torch.Tensor, sel: torch.Tensor, normalise: bool = True) -> torch.Tensor:
    """Routing weights [k] (or [T, k]) from the unboosted logits of the selected experts."""
    if router_kernels.usable(logits):
        return router_kernels.weights(logits, sel, normalise)
    if normalise:
        return logits.gather(-1, sel).float().softmax(-1)
    return logits.float().softmax(-1).gather(-1, sel)
